"""GitHub-flavoured Markdown: tables a blog post can paste as they are."""

from __future__ import annotations

from attncli import escape, narration
from attncli.engine import RunResult
from attncli.explain import Explanation
from attncli.numbers import fixed, smart, vector
from attncli.summary import describe
from attncli.views import MatrixView

md = escape.markdown  # every input text (token, name, sentence) goes through it


def table(header: list[str], rows: list[list[str]], *, align: list[str] | None = None) -> list[str]:
    """A GFM table; align holds "l" or "r" per column (default: first left, others right)."""
    align = align or ["l"] + ["r"] * (len(header) - 1)
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |"]
    lines.append("|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _cell(text: str) -> str:
    return text or " "  # input text arrives escaped by `attncli.escape.markdown`


def run_markdown(result: RunResult, views: list[MatrixView], *, precision: int) -> str:
    s = result.scenario
    lines = [f"# {md(s.name)}", "", md(" ".join(s.tokens)), ""]
    if s.description:
        lines += [md(s.description), ""]
    lines.append(md("; ".join(describe(s)) + "."))
    if result.round_steps is not None:
        lines += ["", f"Every intermediate is rounded to {result.round_steps} decimals before the next step, as by hand."]
    for view in views:
        prefix = f"Head {view.head} · " if s.heads > 1 and view.head is not None else ""
        lines += ["", f"## {prefix}{view.title}: `{view.formula}` ({view.shape})", ""]
        lines += matrix_table(view, precision)
    if result.exact is not None and any(v.key in ("output", "final") for v in views):
        lines += ["", f"## Hand-rounded ({result.round_steps} decimals) vs exact output", ""]
        rows = [
            [md(label), vector(r, precision, whole=False), vector(e, precision + 1, whole=False), vector(r - e, precision + 1, whole=False)]
            for label, r, e in zip(s.query_labels, result.output, result.exact.output)
        ]
        lines += table(["", "hand-rounded", "exact", "difference"], rows)
    return "\n".join(lines) + "\n"


def matrix_table(view: MatrixView, precision: int) -> list[str]:
    header = [""] + [md(col) for col in view.cols] + [name for name, _ in view.extra]
    rows = []
    for r, label in enumerate(view.rows):
        cells = [fixed(float(x), precision) for x in view.data[r]]
        cells += [fixed(float(vec[r]), precision) for _, vec in view.extra]
        rows.append([f"**{md(label)}**"] + cells)
    return table(header, rows)


def explain_markdown(expl: Explanation, *, precision: int) -> str:
    """Seed 001's tables (embeddings; pair, score, exponential; pair, weight; weighted values; output), then the steps."""
    p = precision
    s = expl.scenario
    word = md(expl.token)
    lines = [f"# Attention for “{word}”", ""]
    for sentence in narration.intro(expl):
        lines += [md(sentence), ""]

    if expl.result.X is not None:
        lines += ["## Embeddings", ""]
        lines += table(["Word", "Embedding (E)"], [[md(label), vector(expl.result.X[i], p)] for i, label in enumerate(s.query_labels)],
                       align=["l", "l"])  # fmt: skip
        lines.append("")

    scaled = s.scale.mode != "none"
    lines += ["## Scores and exponentials", ""]
    header = ["Pair", "Score"] + (["Scaled"] if scaled else []) + (["Biased"] if s.has_bias else []) + ["Exponential"]
    rows = []
    for key in expl.keys:
        row = [f"{word} &amp; {md(key.label)}", "−∞ (masked)" if key.masked else smart(key.score, p)]
        row += [("−∞" if key.masked else smart(key.scaled, p))] if scaled else []
        row += [("−∞" if key.masked else smart(key.logit, p))] if s.has_bias else []
        rows.append(row + [smart(key.exp, p)])
    lines += table(header, rows)
    lines += ["", f"Sum of the exponentials: {fixed(expl.exp_sum, p)}"]

    lines += ["", "## Attention weights", ""]
    lines += table(["Pair", "Weight (α)"], [[f"{word} &amp; {md(k.label)}", fixed(k.weight, p)] for k in expl.keys])

    lines += ["", "## Weighted values", ""]
    rows = [[f"{word} &amp; {md(k.label)}", fixed(k.weight, p), vector(k.v, p), vector(k.weighted_v, p, whole=False)] for k in expl.visible]
    lines += table(["Pair", "Weight (α)", "Value (V)", "Weighted value (α·V)"], rows, align=["l", "r", "l", "l"])

    lines += ["", "## Output", "", f"Output({word}) = {vector(expl.output, p, whole=False)}"]
    if expl.exact_output is not None:
        difference = expl.output - expl.exact_output
        lines += ["", f"Exact arithmetic gives {vector(expl.exact_output, p + 1, whole=False)} "
                      f"(difference {vector(difference, p + 1, whole=False)})."]

    lines += ["", "## Step by step"]
    for number, step in enumerate(narration.steps(expl, precision), 1):
        lines += ["", f"### Step {number}: {step.title} (`{step.formula}`)", ""]
        body = narration.step_lines(step, p)
        if body:
            lines += ["```", *map(escape.visible, body), "```"]
        for note in step.notes:
            lines += ["", md(note)]
    return "\n".join(lines) + "\n"
