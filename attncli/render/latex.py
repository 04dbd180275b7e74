r"""LaTeX: a sequence of `$$ … $$` display blocks that KaTeX, MathJax and LaTeX all render.

Only comment lines (`%`) and blank lines stand between the blocks. Inside them: plain LaTeX
(`bmatrix`, `aligned`, `\frac`, `\sqrt`, `\infty`, `\text{…}`), no raw Unicode symbols.
"""

from __future__ import annotations

import math

import numpy as np

from attncli import escape, narration
from attncli.engine import RunResult
from attncli.explain import Explanation
from attncli.notation import TexWriter
from attncli.numbers import fixed, smart
from attncli.summary import describe
from attncli.views import MatrixView


def text(words: str) -> str:
    r"""Words inside math, printed exactly as written in pdflatex, KaTeX and MathJax (see `attncli.escape.latex`)."""
    return escape.latex(words)


def comment(words: str) -> str:
    """A % comment line, in ASCII that nothing can end early (see `attncli.escape.latex_comment`)."""
    return "% " + escape.latex_comment(words)


def num(x: float, precision: int, *, whole: bool = True) -> str:
    if math.isinf(x):
        return r"-\infty" if x < 0 else r"\infty"
    return smart(x, precision) if whole else fixed(x, precision)


def bmatrix(matrix: np.ndarray, precision: int, *, whole: bool = False) -> str:
    """A matrix (or a vector, as one row) in a bmatrix."""
    rows = np.atleast_2d(matrix)
    body = r" \\ ".join(" & ".join(num(float(x), precision, whole=whole) for x in row) for row in rows)
    return r"\begin{bmatrix} " + body + r" \end{bmatrix}"


def labels_column(labels: list[str]) -> str:
    """Row labels set beside a bmatrix: a plain matrix of \text{…} has the same row spacing."""
    return r"\begin{matrix} " + r" \\ ".join(text(label) for label in labels) + r" \end{matrix}"


def block(body: str) -> str:
    return f"$$ {body} $$"


def run_latex(result: RunResult, views: list[MatrixView], *, precision: int) -> str:
    s = result.scenario
    out = [comment(f"attncli: {s.name}: {' '.join(s.tokens)}")] + [comment(line) for line in describe(s)]
    if result.round_steps is not None:
        out.append(comment(f"every intermediate rounded to {result.round_steps} decimals, as by hand"))
    for view in views:
        out += ["", comment(view.heading(s.heads).replace("  ", " "))]
        if view.cols != view.rows:
            out.append(comment("columns: " + ", ".join(view.cols)))
        else:
            out.append(comment("rows and columns: " + ", ".join(view.rows)))
        labelled = view.rows != [view.key] and view.rows[0] != "x1"
        matrix = bmatrix(view.data, precision)
        out.append(block(f"{view.tex} = " + (labels_column(view.rows) + matrix if labelled else matrix)))
        for name, vec in view.extra:
            symbol = r"\Sigma" if name == "Σ" else text(name)
            out.append(block(f"{symbol} = {bmatrix(vec[:, None], precision)}"))
    if result.exact is not None and any(v.key in ("output", "final") for v in views):
        out += ["", comment("exact output, without rounding")]
        out.append(block(r"Y_{\text{exact}} = " + labels_column(list(s.query_labels)) + bmatrix(result.exact.output, precision + 1)))
    return "\n".join(out) + "\n"


def explain_latex(expl: Explanation, *, precision: int) -> str:
    """The explain chain as aligned steps, as seed 000 writes its mathematics: the same steps as the terminal's."""
    out = [comment(line) for line in narration.intro(expl)]
    for number, step in enumerate(narration.steps(expl, precision, TexWriter()), 1):
        out += ["", comment(f"Step {number}: {step.title}")]
        rows = []
        for line in step.lines:
            if line.sep == ":":
                rows.append(f"{line.lhs}: \\; & {line.rhs}")
            elif line.lhs:
                rows.append(f"{line.lhs} &= {line.rhs}")
            elif line.rhs.startswith("= "):
                rows.append(f"&= {line.rhs[2:]}")
            else:
                rows.append(f"&\\quad {line.rhs}")
        if step.matrix is not None:
            name, matrix = step.matrix
            rows.insert(1, f"{name} &= {bmatrix(matrix, precision, whole=True)}")
        if rows:
            out.append(_aligned(rows))
        out += [comment(note) for note in step.notes]
    if expl.exact_output is not None:
        out += [comment("exact arithmetic, without rounding each step")]
        out.append(block(r"\text{output}_{" + text(expl.token) + r"}^{\text{exact}} = " + bmatrix(expl.exact_output, precision + 1)))
    return "\n".join(out) + "\n"


def _aligned(rows: list[str]) -> str:
    return block(r"\begin{aligned} " + r" \\ ".join(rows) + r" \end{aligned}")
