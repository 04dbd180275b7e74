"""HTML pages (or fragments) and SVG heatmap figures of a run or an explanation, for a blog post.

`run_html` writes each stage as a semantic <table> (`htmltable`); `run_svg` draws the chosen
stages (the weights by default) as heatmap figures, one per head (`svgheatmap`). The
explanation gets the same: its steps as headings and <pre> blocks around two tables, and a
one-row heatmap of the query's weights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attncli.document.blocks import Matrix as MatrixView
from attncli.document.blocks import RunDocument, Steps, step_lines
from attncli.formats.htmltable import Code, Heading, Paragraph, html_document

if TYPE_CHECKING:
    from attncli.core.explain import Explanation
    from attncli.formats import Options


def _top(text: str, level: int) -> list[Heading | Paragraph | Code | MatrixView | str]:
    """The top heading at `level`, or nothing when `level` is 0."""
    return [Heading(text, level)] if level > 0 else []


def run_html(page: RunDocument, *, precision: int, options: Options) -> str:
    """Every shown stage as a table: weights shaded, every tokens × tokens stage with --heatmap."""
    s = page.summary
    parts = _top(s.name, options.heading_level)
    parts.append(Paragraph(" ".join(s.tokens)))
    if s.description:
        parts.append(Paragraph(s.description))
    parts += [Paragraph(line) for line in s.settings]
    if s.round_steps is not None:
        parts.append(Paragraph(f"Every intermediate is rounded to {s.round_steps} decimals before the next step, as by hand."))
    parts += page.matrices
    return html_document(
        parts,
        fragment=options.standalone is False,
        precision=precision,
        title=f"attncli: {s.name}",
        shade=None if options.heatmap else {"weights"},
    )


def run_svg(matrices: list[MatrixView], *, precision: int) -> str:
    """The heatmaps of the shown stages (default: the weights), one figure per head, stacked in one SVG."""
    from attncli.formats.svgheatmap import heatmap_svgs

    return heatmap_svgs(matrices, precision=precision)


def query_weights(expl: Explanation) -> MatrixView:
    """The query's row of the attention weights as a 1 × L_k view."""
    s = expl.scenario
    n = f"⁽{expl.head.head}⁾" if s.heads > 1 else ""
    hidden = np.array([[key.masked for key in expl.keys]]) if any(key.masked for key in expl.keys) else None
    return MatrixView(
        key="weights", stage="weights", head=expl.head.head if s.heads > 1 else None, title=f"Attention weights of “{expl.token}”",
        formula=f"α{n} = softmax(q·Kᵀ{'/√d_k' if s.scale.mode == 'sqrt_dk' else ''})", tex="", data=np.array([[k.weight for k in expl.keys]]),
        rows=[expl.label], cols=[key.label for key in expl.keys], hidden=hidden, square=True,
    )  # fmt: skip


def key_table(expl: Explanation) -> MatrixView:
    """One row per key: score, scaled score, exponential and weight."""
    s = expl.scenario
    columns = ["score"] + (["scaled"] if s.scale.mode != "none" else []) + (["biased"] if s.has_bias else []) + ["e^x", "weight"]
    rows = []
    for key in expl.keys:
        row = [key.score] + ([key.scaled] if s.scale.mode != "none" else []) + ([key.logit] if s.has_bias else [])
        rows.append(row + [key.exp, key.weight])
    return MatrixView(key="explain", stage="explain", head=None, title=f"“{expl.token}” and each key", formula="",
                      tex="", data=np.array(rows, dtype=np.float64), rows=[key.label for key in expl.keys], cols=columns)  # fmt: skip


def explain_html(expl: Explanation, intro: list[str], steps: Steps, *, precision: int, options: Options) -> str:
    """The walk-through: the intro, a table of the keys, the weights shaded, then every step."""
    level = options.heading_level
    sub = max(level, 1) + 1 if level else 2
    parts = _top(f"Attention for “{expl.token}”", level)
    parts += [Paragraph(line) for line in intro]
    parts += [key_table(expl), query_weights(expl)]
    parts += steps_parts(steps, sub)
    return html_document(parts, fragment=options.standalone is False, precision=precision,
                         title=f"attncli: {expl.token}", shade={"weights"})  # fmt: skip


def steps_parts(steps: Steps, level: int) -> list[Heading | Paragraph | Code]:
    """Each step: a heading at `level` with its formula, its arithmetic as a <pre> block, its notes as paragraphs."""
    parts: list[Heading | Paragraph | Code] = []
    for number, step in enumerate(steps.steps, 1):
        parts.append(Heading(f"Step {number}: {step.title}   {step.formula}", level))
        body = step_lines(step, steps.precision)
        if body:
            parts.append(Code(tuple(body)))
        parts += [Paragraph(note) for note in step.notes]
    return parts


def explain_svg(expl: Explanation, *, precision: int) -> str:
    """The query's weights as a one-row heatmap."""
    from attncli.formats.svgheatmap import heatmap_svgs

    return heatmap_svgs([query_weights(expl)], precision=min(precision, 3))
