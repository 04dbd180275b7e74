"""The vocabulary every output shares: a document is a title and a sequence of blocks.

Blocks are NamedTuples (immutable, and about a fifth of a frozen dataclass's creation cost at
start-up); Matrix, which carries arrays and defaults, is a frozen record (core.records: a dataclass
compared by identity, cheaper to create).

The walk-throughs (attncli.walkthroughs) turn results into documents; each format
(attncli.formats) draws every block type its own way. Blocks hold plain text and NumPy
arrays, never the syntax of a format: each format escapes text with its own rule (escape.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import field
from typing import Any, NamedTuple, TypeVar

import numpy as np

from attncli.core.records import record
from attncli.document.numbers import smart
from attncli.errors import named, option


class Heading(NamedTuple):
    text: str
    level: int = 1  # 1: the document's title; 2: a section


class Paragraph(NamedTuple):
    """A paragraph of prose at the top of a document."""

    text: str


class Values(NamedTuple):
    """A few `name = value` lines: "q = [1, 0]"; or, `record`, the fields of a record (`model info`): `name  value` lines
    aligned on the names in the terminal, a blank name continuing the field above (`fields` groups them)."""

    pairs: Sequence[tuple[str, str]]
    record: bool = False


def fields(values: Values) -> list[tuple[str, list[str]]]:
    """A record's fields: each name with its values, a pair whose name is blank continuing the field above."""
    out: list[tuple[str, list[str]]] = []
    for name, value in values.pairs:
        if name or not out:
            out.append((name, [value]))
        else:
            out[-1][1].append(value)
    return out


class Table(NamedTuple):
    """A table of text cells; `numeric` says per column whether it holds right-aligned numbers."""

    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    numeric: Sequence[bool]
    listing: bool = False  # a listing (`model tokens`): the terminal draws it at the margin, no rule under the header, never shortened or split


class Vector(str):
    """A vector cell as shown ("[0.1, 0.2, …, 0.9] (64 numbers)"), keeping enough of its numbers for a format to shorten it to fit a width.

    It is the text it shows; `shortened(keep)` writes it with at most `keep` (≤ MAX_KEEP) numbers (the
    first keep − 1, …, the last), as `run` shortens its vectors. `fixed` when --full asked for every number.
    It keeps only the numbers a shortening can show (a decode report makes hundreds of thousands of cells).
    """

    MAX_KEEP = 8
    size: int  # how many numbers the vector has
    kept: tuple[str, ...]  # its first MAX_KEEP - 1 numbers and its last (all of them when that is all); none when fixed
    fixed: bool

    def __new__(cls, shown: str, numbers: Sequence[str], *, fixed: bool = False) -> Vector:
        made = str.__new__(cls, shown)
        made.size, made.fixed = len(numbers), fixed
        made.kept = () if fixed else tuple(numbers) if len(numbers) <= cls.MAX_KEEP else (*numbers[: cls.MAX_KEEP - 1], numbers[-1])
        return made

    def shortened(self, keep: int) -> str:
        """At most `keep` (2 to MAX_KEEP) numbers, with how many there are; the text as it is when it is short already or fixed."""
        if self.fixed or self.size < keep + 2:  # hiding one number saves nothing
            return str(self)
        cut = "[" + ", ".join([*self.kept[: keep - 1], "…", self.kept[-1]]) + f"] ({self.size})"
        return cut if len(cut) < len(self) else str(self)


class Note(NamedTuple):
    """A remark inside a section: what was left out, what a check found."""

    text: str


class Line(NamedTuple):
    """One line of arithmetic: `lhs = rhs`, `token: rhs` (sep ":"), or (lhs empty) a continuation such as `+ [0.1, 0.2]`."""

    lhs: str
    rhs: str
    sep: str = "="


class Step(NamedTuple):
    title: str  # "The query"
    formula: str  # "q = e·W_Q", in the writer's notation
    lines: tuple[Line, ...] | list[Line] = ()  # the arithmetic
    notes: tuple[str, ...] | list[str] = ()  # sentences after the arithmetic (plain Unicode prose)
    matrix: tuple[str, np.ndarray] | None = None  # a matrix shown after the first line, e.g. ("W_Q", W_Q)


def step_lines(step: Step, precision: int) -> list[str]:
    """The arithmetic of a step as plain Unicode lines; a continuation lines up under the first `=`."""
    lines: list[str] = []
    pad = ""
    for line in step.lines:
        if line.sep == ":":
            lines.append(f"{line.lhs}: {line.rhs}")
        elif line.lhs:
            pad = " " * (len(line.lhs) + 1)
            lines.append(f"{line.lhs} = {line.rhs}")
        else:
            lines.append(f"{pad}{line.rhs}")
    if step.matrix is not None:
        name, matrix = step.matrix
        cells = [[smart(float(x), precision) for x in row] for row in matrix]
        width = max(len(cell) for row in cells for cell in row)
        lines[1:1] = [f"{name} ="] + ["  " + "  ".join(cell.rjust(width) for cell in row) for row in cells]
    return lines


class Hints(NamedTuple):
    """What a format says when it leaves something out, ending in how to see it: the options are `option()` mentions.

    A format shortens on its own (to the terminal's width, to MATRIX_ROWS), but only the command
    line knows flag names: `mentioned` writes these as `--full` there, as `full` in the Python API.
    """

    see_all: str = f"see all with {option('full')}, a wider terminal, or {option('format')} csv / json"
    labels_whole: str = f"{option('full')} shows them whole"
    rows_elsewhere: str = f"{option('format')} json or csv has them all"


class Steps(NamedTuple):
    """The numbered steps of a hand calculation, written in one notation (`notation`: "unicode" or "tex")."""

    steps: Sequence[Step]
    precision: int  # decimals of the numbers of a step's matrix
    notation: str = "unicode"
    hints: Hints = Hints()


Block = Heading | Paragraph | Values | Table | Note | Steps


class KeyRow(NamedTuple):
    """One key of explain's article: its label and the numbers of the query's row at its column."""

    label: str
    masked: bool  # hidden from the query by the mask
    score: float
    scaled: float
    logit: float  # what the softmax sees (biased)
    exp: float
    weight: float
    v: np.ndarray  # (d_v,)
    weighted_v: np.ndarray  # (d_v,) weight · v


class ExplainArticle(NamedTuple):
    """`attncli explain` as an article (Markdown): the seed article's tables for one query word, then the steps."""

    token: str  # the query word
    intro: Sequence[str]  # sentences before the tables
    inputs: tuple[str, str, Sequence[str], np.ndarray] | None  # section, column, row labels, (L, d_model) rows; None without X
    scaled: bool  # the scores are scaled: a "Scaled" column
    biased: bool  # a bias is added: a "Biased" column
    keys: Sequence[KeyRow]  # every key, in order
    exp_sum: float
    output: np.ndarray  # (d_v,)
    exact_output: np.ndarray | None  # (d_v,) without rounding, when rounded by hand
    steps: Steps

    @property
    def visible(self) -> list[KeyRow]:
        return [key for key in self.keys if not key.masked]


class Grid(NamedTuple):
    """A figure of one matrix for decode and tiling (SVG, HTML): shaded values, a state per cell, tile lines and side columns."""

    title: str
    caption: str  # what the figure shows, one line
    rows: Sequence[str]  # row labels
    cols: Sequence[str]  # column labels
    data: np.ndarray  # (R, C) the values shaded
    state: np.ndarray  # (R, C) int8: SHOWN, HIDDEN (by the mask), DROPPED (left the cache) or EMPTY (nothing there yet)
    probabilities: bool  # the values are weights: shaded on 0..1
    axes: tuple[str, str] = ("keys", "queries")  # what the columns and the rows are
    tile: tuple[int, int] = (0, 0)  # tile lines every (rows, columns); 0: none
    skipped: Sequence[tuple[int, int]] = ()  # tiles (row block, column block), from 0, that were skipped
    marked: Sequence[tuple[int, int]] = ()  # cells (row, column), from 0, outlined: each row's maximum
    side: Sequence[tuple[str, Sequence[str]]] = ()  # columns of text right of the grid: a header and one text per row
    side_marked: Sequence[tuple[int, int]] = ()  # (side column, row), from 0: texts drawn marked (tiling: where m grew)


SHOWN, HIDDEN, DROPPED, EMPTY = 0, 1, 2, 3  # Grid.state


@record
class Matrix:
    """A labelled matrix of a stage: title, formula in Unicode and TeX, the numbers, the labels of rows and columns."""

    key: str  # stable name: "X", "W_Q", "Q", "scores", ... "concat", "final"
    stage: str  # the --stages name it belongs to
    head: int | None  # 1-based head, None for what all heads share
    title: str  # "Scores"
    formula: str  # "S = Q·Kᵀ", Unicode for people
    tex: str  # "S = Q K^\top", TeX
    data: np.ndarray  # (rows, cols)
    rows: list[str]
    cols: list[str]
    hidden: np.ndarray | None = None  # (rows, cols) bool, True where the mask hides the cell
    extra: list[tuple[str, np.ndarray]] = field(default_factory=list)  # extra columns, e.g. ("Σ", exp_sum)
    square: bool = False  # tokens × tokens: may be shaded as a heatmap
    equation: str = ""  # TeX, symbol first: `S = QK^\top`, `M = \operatorname{mask}(…)` (LaTeX's display of the matrix)
    remarks: tuple[str, ...] = ()  # plain sentences beyond the formula: what the mask did, the divisor, the shift

    @property
    def shape(self) -> str:
        return f"{self.data.shape[0]} × {self.data.shape[1]}"

    def heading(self, heads: int) -> str:
        """'Head 2 · Scores  S⁽²⁾ = Q⁽²⁾·K⁽²⁾ᵀ  (4 × 4)', the head only when there are several."""
        prefix = f"Head {self.head} · " if heads > 1 and self.head is not None else ""
        return f"{prefix}{self.title}  {self.formula}  ({self.shape})"


class Summary(NamedTuple):
    """A run's header: the scenario's name and sentence (and context), its description, sizes and settings, any hand rounding."""

    name: str
    tokens: Sequence[str]
    context: Sequence[str] | None
    description: str
    settings: Sequence[str]  # 'L = 6 tokens · d_model = 2 · …', then scale, mask and variants
    round_steps: int | None
    heads: int
    more: str = ""  # what the notes leave out, ending in how to see it (a terminal says it; a post has no options to name)

    @property
    def title(self) -> str:
        """The one title line: 'cat — The cat sat on the mat' (the sentence alone when the name is the sentence)."""
        sentence = " ".join(self.tokens)
        return sentence if self.name.casefold() in ("", sentence.casefold()) else f"{self.name} — {sentence}"


class Comparison(NamedTuple):
    """A hand-rounded output beside the exact one (--round-steps)."""

    decimals: int
    labels: Sequence[str]
    rounded: np.ndarray  # (L, d)
    exact: np.ndarray  # (L, d)


class RunDocument(NamedTuple):
    """`attncli run`: the header, the matrices of the shown stages, and the comparison with exact arithmetic when rounded by hand."""

    summary: Summary
    matrices: Sequence[Matrix]
    comparison: Comparison | None
    hints: Hints = Hints()


class Document(NamedTuple):
    title: str
    blocks: Sequence[Block]
    tidy: Table | None = None  # the one table a CSV file holds: every row of every section, tidy


Shown = TypeVar("Shown")


def mentioned(shown: Shown, names: Callable[[str], str]) -> Shown:
    """`shown` (a document, its blocks, steps or sentences) with every `option()` mention in its prose written as `names` says.

    The one place mentions are resolved: the API hands each walk-through's document through it
    (the command line's `flag`, the API's `keyword`) before a format draws it, so no format sees
    a mention. Tables, matrices and arrays hold no prose and are passed on untouched.
    """
    return _mentioned(shown, names)  # type: ignore[no-any-return]


def _mentioned(value: Any, names: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return named(value, names) if type(value) is str else value  # a Vector is numbers
    if isinstance(value, Table | np.ndarray | Matrix | Comparison):
        return value
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)._make(_mentioned(item, names) for item in value)  # type: ignore[attr-defined]
    if isinstance(value, list | tuple):
        return type(value)(_mentioned(item, names) for item in value)
    return value
