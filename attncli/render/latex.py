r"""LaTeX: a sequence of `$$ … $$` display blocks that KaTeX, MathJax and LaTeX all render.

Only comment lines (`%`) and blank lines stand between the blocks. Inside them: plain LaTeX
(`bmatrix`, `aligned`, `\frac`, `\sqrt`, `\infty`, `\text{…}`), no raw Unicode symbols.
"""

from __future__ import annotations

import math

import numpy as np

from attncli import narration
from attncli.engine import RunResult
from attncli.explain import Explanation, KeyStep
from attncli.numbers import fixed, smart
from attncli.views import MatrixView

_SPECIALS = {
    "\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
    "^": r"\^{}", "_": r"\_", "%": r"\%", "~": r"\~{}",
}  # fmt: skip


def text(words: str) -> str:
    r"""Words inside math: \text{…} with LaTeX's special characters escaped."""
    return r"\text{" + "".join(_SPECIALS.get(c, c) for c in words) + "}"


def comment(words: str) -> str:
    """A % comment line, in ASCII so that any LaTeX reads it."""
    ascii_words = words.replace("×", "x").replace("·", ".").replace("ᵀ", "^T").replace("√", "sqrt ").replace("−∞", "-inf").replace("Σ", "sum")
    ascii_words = ascii_words.encode("ascii", "replace").decode().replace("?", "_")
    return "% " + ascii_words


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
    out = [comment(f"attncli: {s.name}: {' '.join(s.tokens)}"), comment(f"scale: {s.scale.mode}, mask: {s.mask}")]
    if result.round_steps is not None:
        out.append(comment(f"every intermediate rounded to {result.round_steps} decimals, as by hand"))
    for view in views:
        out += ["", comment(view.heading(s.heads).replace("  ", " "))]
        if view.cols != view.rows:
            out.append(comment("columns: " + ", ".join(view.cols)))
        else:
            out.append(comment("rows and columns: " + ", ".join(view.rows)))
        labelled = view.rows != [f"b_{view.key[-1]}"] and not view.key.startswith("W_")
        matrix = bmatrix(view.data, precision)
        out.append(block(f"{view.tex} = " + (labels_column(view.rows) + matrix if labelled else matrix)))
        for name, vec in view.extra:
            symbol = r"\Sigma" if name == "Σ" else text(name)
            out.append(block(f"{symbol} = {bmatrix(vec[:, None], precision)}"))
    if result.exact is not None:
        exact_p = max(precision, result.round_steps or 0) + 1
        out += ["", comment("exact output, without rounding")]
        out.append(block(r"Y_{\text{exact}} = " + labels_column(s.labels()) + bmatrix(result.exact.output, exact_p)))
    return "\n".join(out) + "\n"


def explain_latex(expl: Explanation, *, precision: int) -> str:
    """The explain chain as aligned steps, as seed 000 writes its mathematics."""
    p = narration.display_precision(expl, precision)
    s = expl.scenario
    word = text(expl.token)
    labels = s.labels()

    def sub(key: KeyStep) -> str:
        return r"_{" + word + r",\," + text(labels[key.position - 1]) + "}"

    out = [comment(line) for line in narration.intro(expl)]
    steps = narration.steps(expl, precision)
    titles = iter(f"Step {n}: {step.title}" for n, step in enumerate(steps, 1))

    head = expl.head
    bias = f" + {bmatrix(head.b_Q, p, whole=True)}" if head.b_Q is not None else ""
    out += ["", comment(next(titles))]
    out.append(block(
        r"q_{" + word + r"} = e_{" + word + r"} W_Q" + (" + b_Q" if head.b_Q is not None else "") + " = "
        + bmatrix(expl.e, p, whole=True) + bmatrix(head.W_Q, p, whole=True) + bias + " = " + bmatrix(expl.q, p, whole=True)
    ))

    out += ["", comment(next(titles))]
    long = len(expl.q) > narration.LONG_VECTOR
    rows = []
    for key in expl.keys:
        terms = [rf"({num(a, p)} \times {num(b, p)})" for a, b in zip(expl.q, key.k)]
        if long:
            terms = terms[:3] + [r"\cdots"] + terms[-1:]
        rows.append(r"\text{score}" + sub(key) + r" &= q \cdot k_{" + text(labels[key.position - 1]) + "} = "
                    + " + ".join(terms) + f" = {num(key.score, p)}")
    out.append(_aligned(rows))

    if s.scale.mode != "none":
        out += ["", comment(next(titles))]
        divisor = rf"\sqrt{{{s.d_k}}}" if s.scale.mode == "sqrt_dk" else num(s.scale.divisor, p)
        rows = [r"\frac{\text{score}" + sub(k) + "}{" + divisor + "} &= " + rf"\frac{{{num(k.score, p)}}}{{{num(s.scale.divisor, p)}}} = {num(k.scaled, p)}"
                for k in expl.keys]
        out.append(_aligned(rows))

    if s.mask == "causal":
        out += ["", comment(next(titles))]
        hidden = [k for k in expl.keys if k.masked]
        out.append(comment(f"query position {expl.position} sees keys 1..{expl.position}"))
        if hidden:
            out.append(block(r"\text{score}_{" + word + r",\,j} = -\infty \quad \text{for } j > " + str(expl.position)
                             + r" \quad (" + ", ".join(text(labels[k.position - 1]) for k in hidden) + ")"))
        else:
            out.append(block(r"\text{nothing is hidden from } " + word))

    out += ["", comment(next(titles))]
    shift = expl.shift
    rows = []
    for key in expl.keys:
        exponent = r"-\infty" if key.masked else num(key.scaled, p) + (f" - {num(shift, p)}" if shift else "")
        note = text(labels[key.position - 1] + (", hidden" if key.masked else ""))
        rows.append(r"e^{" + exponent + "} &= " + num(key.exp, p) + r" \quad (" + note + ")")
    out.append(_aligned(rows))

    out += ["", comment(next(titles))]
    terms = [num(k.exp, p) for k in expl.visible]
    if len(terms) > narration.LONG_SUM:
        terms = terms[:5] + [r"\cdots"] + terms[-2:]
    out.append(block(r"\Sigma = " + " + ".join(terms) + f" = {fixed(expl.exp_sum, p)}"))

    out += ["", comment(next(titles))]
    rows = [
        r"\alpha" + sub(k) + " &= " + ("0" if k.masked else rf"\frac{{{num(k.exp, p)}}}{{{fixed(expl.exp_sum, p)}}} = {fixed(k.weight, p)}")
        for k in expl.keys
    ]
    out.append(_aligned(rows))

    out += ["", comment(next(titles))]
    rows = [
        r"\alpha" + sub(k) + r" \, v_{" + text(labels[k.position - 1]) + "} &= "
        + rf"{fixed(k.weight, p)} \times {bmatrix(k.v, p, whole=True)} = {bmatrix(k.weighted_v, p)}"
        for k in expl.visible
    ]
    out.append(_aligned(rows))

    out += ["", comment(next(titles))]
    parts = [bmatrix(k.weighted_v, p) for k in expl.visible]
    if len(parts) > narration.LONG_SUM:
        parts = parts[:3] + [r"\cdots"] + parts[-2:]
    rows = [r"\text{output}_{" + word + "} &= " + parts[0]] + [f"&\\quad + {part}" for part in parts[1:]]
    rows.append(f"&= {bmatrix(expl.output, p)}")
    out.append(_aligned(rows))
    if expl.exact_output is not None:
        exact_p = max(precision, expl.result.round_steps or 0) + 1
        out += [comment("exact arithmetic, without rounding each step")]
        out.append(block(r"\text{output}_{" + word + r"}^{\text{exact}} = " + bmatrix(expl.exact_output, exact_p)))
    return "\n".join(out) + "\n"


def _aligned(rows: list[str]) -> str:
    return block(r"\begin{aligned} " + r" \\ ".join(rows) + r" \end{aligned}")
