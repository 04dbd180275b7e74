"""HTML pages (or fragments) and SVG figures of a run, an explanation or a document, for a blog post.

`run_html` writes each stage as a semantic <table> (`htmltable`); `run_svg` draws the chosen
stages (the weights by default) as heatmap figures, one per head (`svgheatmap`). The
explanation gets the same: its steps as headings and <pre> blocks around two tables, and a
one-row heatmap of the query's weights. A document's HTML is `htmltable.document_html`; its SVG
(`document_svg`) its `Grid` figures (`gridfigure`), or without them its text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from attncli.document.blocks import Document, Grid, RunDocument, Steps
from attncli.document.blocks import Matrix as MatrixView
from attncli.formats.htmltable import Code, Heading, Paragraph, html_document, steps_parts

if TYPE_CHECKING:
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


def explain_html(token: str, intro: list[str], matrices: list[MatrixView], steps: Steps, *, precision: int, options: Options) -> str:
    """The walk-through of `token`: the intro, its matrices (a table of the keys, the weights shaded), then every step."""
    level = options.heading_level
    sub = max(level, 1) + 1 if level else 2
    parts = _top(f"Attention for “{token}”", level)
    parts += [Paragraph(line) for line in intro]
    parts += matrices
    parts += steps_parts(steps, sub)
    return html_document(parts, fragment=options.standalone is False, precision=precision,
                         title=f"attncli: {token}", shade={"weights"})  # fmt: skip


def explain_svg(weights: MatrixView, *, precision: int) -> str:
    """The query's weights as a one-row heatmap."""
    from attncli.formats.svgheatmap import heatmap_svgs

    return heatmap_svgs([weights], precision=min(precision, 3))


def document_svg(document: Document, *, figures: Sequence[Grid] = (), precision: int = 3) -> str:
    """The document's figures (decode's steps × keys, each head's tiles) stacked in one SVG; without figures, its text as the terminal's lines."""
    if figures:
        from attncli.formats.gridfigure import grids_svg

        return grids_svg(figures, precision=precision)
    from attncli.formats.svgheatmap import text_svg
    from attncli.formats.terminal import text_lines

    return text_svg(text_lines(document), document.title)
