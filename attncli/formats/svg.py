"""SVG figures, for a blog post: a run's heatmaps, the query's weights, a report's figures, the head map, the shaded sentence.

A run draws the chosen stages (the weights by default) as heatmaps, one per head (`svgheatmap`);
an explanation the query's weights as one row; a report (decode, tiling) its `Grid` figures
(`gridfigure`), or, having none, its text as the terminal's lines; the head map its grid of
thumbnails (`headgrid`); the shaded sentence its tokens (`shade`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attncli.document.pages import ExplainPage, HeadsPage, ReportPage, RunPage, ShadePage
    from attncli.formats import Options


def run(page: RunPage, options: Options) -> str:
    """The heatmaps of the shown stages (default: the weights), one figure per head, stacked in one SVG."""
    from attncli.formats.svgheatmap import heatmap_svgs

    return heatmap_svgs(page.figures(), precision=page.precision)


def explain(page: ExplainPage, options: Options) -> str:
    """The query's weights as a one-row heatmap."""
    from attncli.formats.svgheatmap import heatmap_svgs

    return heatmap_svgs([page.weights()], precision=min(page.precision, 3))


def report(page: ReportPage, options: Options) -> str:
    """The report's figures (decode's steps × keys, each head's tiles) stacked in one SVG; without figures, its text as the terminal's lines."""
    figures = page.figures()
    if figures:
        from attncli.formats.gridfigure import grids_svg

        return grids_svg(figures, precision=page.precision)
    from attncli.formats.svgheatmap import text_svg
    from attncli.formats.terminal import text_lines

    document = page.document()
    return text_svg(text_lines(document), document.title)


def heads(page: HeadsPage, options: Options) -> str:
    from attncli.formats.headgrid import grid_svg

    return grid_svg(page.grid())


def shade(page: ShadePage, options: Options) -> str:
    from attncli.formats import shade as drawn

    return drawn.svg(page.shaded(), precision=page.precision)
