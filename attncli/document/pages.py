"""What each command shows, as every format receives it: a page of one kind (run, explain, report, heads, shade).

A page holds the parts a format may draw, the costly ones as functions called only by the
format that draws them: the terminal, Markdown, LaTeX and HTML draw a run's `document()`, SVG its
`figures()`, CSV its one `matrix()`, JSON its `data()`. Each format module (attncli.formats)
has one function per kind it can draw, named as the kind (`markdown.run(page, options)`), and
`formats.render` hands it the page: a new format is its module, and a new kind of page is a
function in each format that can draw it.

The map's and the shaded sentence's plain data (`HeadGrid`, `HeadTable`, `Shaded`) are here too:
the walk-throughs build them, the formats draw them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy as np

    from attncli.document.blocks import Document, ExplainArticle, Grid, Matrix, RunDocument, Table
    from attncli.document.notation import Writer

Data = Callable[[], dict[str, Any]]  # the JSON document, built when asked for


class RunPage(NamedTuple):
    """`attncli run`: every shown stage of every shown head."""

    document: Callable[[], RunDocument]  # the header and the stages' matrices: the terminal, Markdown, LaTeX, HTML
    figures: Callable[[], Sequence[Matrix]]  # the heatmaps (the weights unless stages are asked for): SVG
    matrix: Callable[[], Matrix]  # the one stage a CSV file holds
    data: Data
    precision: int  # decimals shown
    kind: str = "run"


class ExplainPage(NamedTuple):
    """`attncli explain`: one query followed through the arithmetic."""

    article: Callable[[Writer], ExplainArticle]  # the intro, every key's numbers and the steps, written by a notation's writer
    keys: Callable[[], Matrix]  # a row per key: score, weight, value … (HTML)
    weights: Callable[[], Matrix]  # the query's weights as one row (HTML, SVG)
    tidy: Callable[[], Table]  # the one table a CSV file holds
    data: Data
    precision: int
    kind: str = "explain"


class ReportPage(NamedTuple):
    """A document of blocks: tiling, decode, a quantised block taken apart, the variance experiment."""

    document: Callable[[], Document]
    figures: Callable[[], Sequence[Grid]]  # SVG draws these (the HTML page too); none: SVG writes the document's text
    data: Data
    precision: int
    boxed: bool = False  # the terminal frames its tables
    kind: str = "report"


SUBTITLE = "rows: query tokens, columns: key tokens; shade: weight 0 to 1, the largest of each block"


class HeadGrid(NamedTuple):
    """Every head's thumbnail and what its tooltip says."""

    title: str
    thumbnails: np.ndarray  # (layers, H, s, s) weights 0 … 1, shrunk by the largest value per block
    first_layer: int  # the number of the first row of heads
    tokens: tuple[str, ...]  # the sentence's tokens, for the tooltips
    tips: Sequence[Sequence[str]]  # [layer][head] one line about the head (its statistics, its reading)
    subtitle: str = SUBTITLE  # what the shade means
    hover: str = "Hover over a thumbnail's row: its query tokens and the keys that take most of its weight."  # the HTML page's hint


class HeadTable(NamedTuple):
    """The statistics as rows: headers, then one row per head (ints, floats, None), the readings and their commands."""

    columns: tuple[str, ...]
    rows: Sequence[Sequence[int | float | None]]
    readings: Sequence[tuple[str, str]]  # (reading, explain command) of the notable heads; the command may be ""
    legend: str  # what the short column names mean
    heading: str = "Notable heads"  # above the readings
    general: bool = False  # numbers to `precision` significant digits (differences near 0), not decimals
    none: str = "No head stands out (none puts half its weight on the first token, 40% on the previous token or on itself)."


class HeadsPage(NamedTuple):
    """`attncli heads`: every layer × head of a map or of a comparison, as a grid of thumbnails and a table of statistics."""

    table: Callable[[], HeadTable]
    grid: Callable[[], HeadGrid]
    data: Data
    precision: int
    kind: str = "heads"


class ShadedRow(NamedTuple):
    name: str  # "L3 H2", "L3 mean"
    weights: Sequence[float]  # one per token, 0 … 1
    visible: Sequence[bool]  # hidden keys are drawn as such
    readings: Sequence[str]  # sentences under the row


class Shaded(NamedTuple):
    title: str
    tokens: Sequence[str]
    query: int  # from 0: the query token, underlined
    rows: Sequence[ShadedRow]


class ShadePage(NamedTuple):
    """`attncli heads --word`: the sentence shaded by the weights one query token gives, per head or per layer."""

    shaded: Callable[[], Shaded]
    data: Data
    precision: int
    kind: str = "shade"


Page = RunPage | ExplainPage | ReportPage | HeadsPage | ShadePage
KINDS = ("run", "explain", "report", "heads", "shade")
COMMANDS = {"run": "run", "explain": "explain", "report": "this command", "heads": "heads", "shade": "heads"}  # errors name them so
