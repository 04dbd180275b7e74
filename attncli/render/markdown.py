"""GitHub-flavoured Markdown: tables a blog post can paste as they are."""

from __future__ import annotations

import numpy as np

from attncli import narration
from attncli.engine import RunResult
from attncli.explain import Explanation
from attncli.numbers import fixed, smart, vector
from attncli.views import MatrixView


def table(header: list[str], rows: list[list[str]], *, align: list[str] | None = None) -> list[str]:
    """A GFM table; align holds "l" or "r" per column (default: first left, others right)."""
    align = align or ["l"] + ["r"] * (len(header) - 1)
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |"]
    lines.append("|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ") or " "


def run_markdown(result: RunResult, views: list[MatrixView], *, precision: int) -> str:
    s = result.scenario
    lines = [f"# {s.name}", "", " ".join(s.tokens), ""]
    if s.description:
        lines += [s.description, ""]
    heads = f"{s.heads} head" + ("s" if s.heads > 1 else "")
    lines.append(
        f"L = {s.L} tokens, d_model = {s.d_model}, {heads}, d_k = {s.d_k}, d_v = {s.d_v}, d_out = {s.d_out}; "
        f"scale: {s.scale.mode} (divide by {s.scale.divisor:.6g}); mask: {s.mask}."
    )
    if result.round_steps is not None:
        lines += ["", f"Every intermediate is rounded to {result.round_steps} decimals before the next step, as by hand."]
    for view in views:
        prefix = f"Head {view.head} · " if s.heads > 1 and view.head is not None else ""
        lines += ["", f"## {prefix}{view.title}: `{view.formula}` ({view.shape})", ""]
        lines += matrix_table(view, precision)
    if result.exact is not None and any(v.key in ("output", "final") for v in views):
        lines += ["", f"## Hand-rounded ({result.round_steps} decimals) vs exact output", ""]
        exact_p = max(precision, result.round_steps or 0) + 1
        rows = [
            [label, vector(r, precision, whole=False), vector(e, exact_p, whole=False), vector(r - e, exact_p, whole=False)]
            for label, r, e in zip(s.labels(), result.output, result.exact.output)
        ]
        lines += table(["", "hand-rounded", "exact", "difference"], rows)
    return "\n".join(lines) + "\n"


def matrix_table(view: MatrixView, precision: int) -> list[str]:
    header = [""] + view.cols + [name for name, _ in view.extra]
    rows = []
    for r, label in enumerate(view.rows):
        cells = [fixed(float(x), precision) for x in view.data[r]]
        cells += [fixed(float(vec[r]), precision) for _, vec in view.extra]
        rows.append([f"**{label}**"] + cells)
    return table(header, rows)


def explain_markdown(expl: Explanation, *, precision: int) -> str:
    """Seed 001's tables (embeddings; pair, score, exponential; pair, weight; weighted values; output), then the steps."""
    p = narration.display_precision(expl, precision)
    s = expl.scenario
    word = expl.token
    labels = s.labels()
    lines = [f"# Attention for “{word}”", ""]
    for sentence in narration.intro(expl):
        lines += [sentence, ""]

    lines += ["## Embeddings", ""]
    lines += table(["Word", "Embedding (E)"], [[labels[i], vector(expl.result.X[i], p)] for i in range(s.L)], align=["l", "l"])

    scaled = s.scale.mode != "none"
    lines += ["", "## Scores and exponentials", ""]
    header = ["Pair", "Score"] + (["Scaled"] if scaled else []) + ["Exponential"]
    rows = []
    for key in expl.keys:
        pair = f"{word} & {labels[key.position - 1]}"
        score = "−∞ (masked)" if key.masked else smart(key.score, p)
        row = [pair, score] + ([("−∞" if key.masked else smart(key.scaled, p))] if scaled else []) + [smart(key.exp, p)]
        rows.append(row)
    lines += table(header, rows)
    lines += ["", f"Sum of the exponentials: {fixed(expl.exp_sum, p)}"]

    lines += ["", "## Attention weights", ""]
    lines += table(["Pair", "Weight (α)"], [[f"{word} & {labels[k.position - 1]}", fixed(k.weight, p)] for k in expl.keys])

    lines += ["", "## Weighted values", ""]
    rows = [
        [f"{word} & {labels[k.position - 1]}", fixed(k.weight, p), vector(k.v, p), vector(k.weighted_v, p, whole=False)]
        for k in expl.visible
    ]
    lines += table(["Pair", "Weight (α)", "Value (V)", "Weighted value (α·V)"], rows, align=["l", "r", "l", "l"])

    lines += ["", "## Output", "", f"Output({word}) = {vector(expl.output, p, whole=False)}"]
    if expl.exact_output is not None:
        exact_p = max(precision, expl.result.round_steps or 0) + 1
        difference = expl.output - expl.exact_output
        lines += ["", f"Exact arithmetic gives {vector(expl.exact_output, exact_p, whole=False)} "
                      f"(difference {vector(difference, exact_p, whole=False)})."]

    lines += ["", "## Step by step"]
    for number, step in enumerate(narration.steps(expl, precision), 1):
        lines += ["", f"### Step {number}: {step.title} (`{step.formula}`)", ""]
        body = [f"- `{line}`" for line in step.lines]
        if step.matrix is not None:
            name, matrix = step.matrix
            body.insert(1, f"- `{name} = {_inline_matrix(matrix, p)}`")
        lines += body
        for note in step.notes:
            lines += ["", note]
    return "\n".join(lines) + "\n"


def _inline_matrix(matrix: np.ndarray, precision: int) -> str:
    return "[" + ", ".join(vector(row, precision) for row in matrix) + "]"
