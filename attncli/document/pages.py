"""What each command shows, as every format receives it: a page of one kind (run, explain, report, heads, shade).

A page holds the parts a format may draw, the costly ones as functions called only by the
format that draws them: the terminal, Markdown, LaTeX and HTML draw a run's `document()`, SVG its
`figures()`, CSV its one `matrix()`, JSON its `data()`. Each format module (attncli.formats)
has one function per kind it can draw, named as the kind (`markdown.run(page, options)`), and
`formats.render` hands it the page: a new format is its module, and a new kind of page is a
function in each format that can draw it.

Pages are plain classes with slots, not NamedTuples: a command builds one page, and `run cat`
would pay at start-up for creating classes it does not need. The map's and the shaded sentence's
plain data (`HeadGrid`, `HeadTable`, `Shaded`) are in `maps.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from attncli.document.blocks import Document, ExplainArticle, Grid, Matrix, RunDocument, Table
    from attncli.document.maps import HeadGrid, HeadTable, Shaded
    from attncli.document.notation import Writer

    Data = Callable[[], dict[str, Any]]  # the JSON document, built when asked for


class RunPage:
    """`attncli run`: every shown stage of every shown head."""

    kind = "run"
    __slots__ = ("document", "figures", "matrix", "data", "precision")

    def __init__(
        self,
        document: Callable[[], RunDocument],  # the header and the stages' matrices: the terminal, Markdown, LaTeX, HTML
        figures: Callable[[], Sequence[Matrix]],  # the heatmaps (the weights unless stages are asked for): SVG
        matrix: Callable[[], Matrix],  # the one stage a CSV file holds
        data: Data,
        precision: int,  # decimals shown
    ) -> None:
        self.document, self.figures, self.matrix, self.data, self.precision = document, figures, matrix, data, precision


class ExplainPage:
    """`attncli explain`: one query followed through the arithmetic."""

    kind = "explain"
    __slots__ = ("article", "keys", "weights", "tidy", "data", "precision")

    def __init__(
        self,
        article: Callable[[Writer], ExplainArticle],  # the intro, every key's numbers and the steps, written by a notation's writer
        keys: Callable[[], Matrix],  # a row per key: score, weight, value … (HTML)
        weights: Callable[[], Matrix],  # the query's weights as one row (HTML, SVG)
        tidy: Callable[[], Table],  # the one table a CSV file holds
        data: Data,
        precision: int,
    ) -> None:
        self.article, self.keys, self.weights, self.tidy, self.data, self.precision = article, keys, weights, tidy, data, precision


class ReportPage:
    """A document of blocks: tiling, decode, a quantised block taken apart, the variance experiment, model info and tokens."""

    kind = "report"
    __slots__ = ("document", "figures", "data", "precision", "boxed")

    def __init__(
        self,
        document: Callable[[], Document],
        figures: Callable[[], Sequence[Grid]],  # SVG draws these (the HTML page too); none: SVG writes the document's text
        data: Data,
        precision: int,
        boxed: bool = False,  # the terminal frames its tables
    ) -> None:
        self.document, self.figures, self.data, self.precision, self.boxed = document, figures, data, precision, boxed


class HeadsPage:
    """`attncli heads`: every layer × head of a map or of a comparison, as a grid of thumbnails and a table of statistics."""

    kind = "heads"
    __slots__ = ("table", "grid", "data", "precision", "explorable")

    def __init__(self, table: Callable[[], HeadTable], grid: Callable[[], HeadGrid], data: Data, precision: int, *, explorable: bool = False) -> None:
        self.table, self.grid, self.data, self.precision = table, grid, data, precision
        self.explorable = explorable  # the map of every head's weights, which the page to explore shows (not a link's or a comparison's)


class ShadePage:
    """`attncli heads --word`: the sentence shaded by the weights one query token gives, per head or per layer."""

    kind = "shade"
    __slots__ = ("shaded", "data", "precision")

    def __init__(self, shaded: Callable[[], Shaded], data: Data, precision: int) -> None:
        self.shaded, self.data, self.precision = shaded, data, precision


if TYPE_CHECKING:
    Page = RunPage | ExplainPage | ReportPage | HeadsPage | ShadePage
KINDS = ("run", "explain", "report", "heads", "shade")
COMMANDS = {"run": "run", "explain": "explain", "report": "this command", "heads": "heads", "shade": "heads"}  # errors name them so
