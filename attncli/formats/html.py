"""HTML, for a blog post: a whole page (the default) or a fragment to paste (standalone False), of every kind of page.

A run is each shown stage as a semantic <table>, the weights shaded (every tokens × tokens stage
with `heatmap`); an explanation its intro, a table of the keys and the query's shaded weights,
then every step; a report its blocks with its figures after the introduction; the head map its
grid of thumbnails and its table; the shaded sentence its tokens on their weights' shades. The
drawing is in `htmltable` (tables, pages), `gridfigure`, `headgrid` and `shade`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attncli.document.summary import rounded_every_step
from attncli.errors import AttnError, option
from attncli.formats.htmltable import Code, Heading, Paragraph, document_html, html_document, steps_parts

if TYPE_CHECKING:
    from attncli.document.blocks import Matrix as MatrixView
    from attncli.document.pages import ExplainPage, HeadsPage, ReportPage, RunPage, ShadePage
    from attncli.formats import Options


def _top(text: str, level: int) -> list[Heading | Paragraph | Code | MatrixView | str]:
    """The top heading at `level`, or nothing when `level` is 0."""
    return [Heading(text, level)] if level > 0 else []


def run(page: RunPage, options: Options) -> str:
    """Every shown stage as a table: weights shaded, every tokens × tokens stage with `heatmap`."""
    document = page.document()
    s = document.summary
    parts = _top(s.title, options.heading_level) or [Paragraph(" ".join(s.tokens))]  # without a heading, the sentence
    if s.description:
        parts.append(Paragraph(s.description))
    parts += [Paragraph(line) for line in s.settings]
    if s.round_steps is not None:
        parts.append(Paragraph(rounded_every_step(s.round_steps)))
    parts += document.matrices
    return html_document(
        parts,
        fragment=options.standalone is False,
        precision=page.precision,
        title=f"attncli: {s.name}",
        shade=None if options.heatmap else {"weights"},
    )


def explain(page: ExplainPage, options: Options) -> str:
    """The walk-through of the query: the intro, a table of the keys and the weights shaded, then every step."""
    from attncli.document.notation import Writer

    article = page.article(Writer())
    level = options.heading_level
    sub = max(level, 1) + 1 if level else 2
    parts = _top(f"Attention for “{article.token}”", level)
    parts += [Paragraph(line) for line in article.intro]
    parts += [page.keys(), page.weights()]
    parts += steps_parts(article.steps, sub)
    return html_document(parts, fragment=options.standalone is False, precision=page.precision,
                         title=f"attncli: {article.token}", shade={"weights"})  # fmt: skip


def report(page: ReportPage, options: Options) -> str:
    return document_html(page.document(), fragment=options.standalone is False, level=options.heading_level, figures=page.figures(),
                         precision=page.precision)  # fmt: skip


def heads(page: HeadsPage, options: Options) -> str:
    """A page with the grid of thumbnails (each row's tooltip: its tokens and strongest keys), the readings and the table; with
    `interactive`, the page to explore (formats/explorer.py)."""
    if options.interactive:
        from attncli.formats import explorer

        if not page.explorable:
            raise _not_explorable("a link between two words or a comparison")
        return explorer.page(page.grid(), page.table(), precision=page.precision, level=options.heading_level)
    from attncli.formats.headgrid import grid_html

    return grid_html(page.grid(), page.table(), precision=page.precision, fragment=options.standalone is False, level=options.heading_level)


def shade(page: ShadePage, options: Options) -> str:
    from attncli.formats import shade as drawn

    if options.interactive:
        raise _not_explorable("a shaded sentence")
    return drawn.html(page.shaded(), precision=page.precision, fragment=options.standalone is False, level=options.heading_level)


def _not_explorable(what: str) -> AttnError:
    """--interactive on a page the explorer does not draw: it explores the map's weights, head by head."""
    return AttnError(f"found {what}: the page to explore is the map of every head's weights", key=option("interactive"),
                     expected=f"the map (heads without {option('word')}, {option('to')} or a comparison), or HTML without {option('interactive')}")
