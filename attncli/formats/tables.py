"""`attncli run` in the terminal: one Rich table per stage, fitted to the screen."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, RenderableType
from rich.text import Text

from attncli.document.blocks import Comparison, Hints, RunDocument, Summary
from attncli.document.blocks import Matrix as MatrixView
from attncli.document.escape import visible
from attncli.document.numbers import exact_decimals, fixed, fixed_many
from attncli.document.summary import hand_rounded_title, rounded_every_step
from attncli.formats import grid

if TYPE_CHECKING:
    from attncli.formats.heatmap import Heat  # imported where a table is shaded: a pipe or a file never is, unless --heatmap

ELLIPSIS_COLUMN = "…"
ELLIPSIS_ROW = "⋮"


def summary(s: Summary) -> Text:
    """The scenario in a few lines: its name and sentence, then its sizes and settings."""
    text = Text()
    text.append(visible(s.title), style="bold")
    if s.context is not None:
        text.append(" → " + visible(" ".join(s.context)))
    text.append("\n")
    if s.description and s.description != s.name:
        text.append(visible(s.description) + "\n")  # a checkpoint's layer and architecture (and where it was read from, when asked)
    for line in s.settings:
        text.append(visible(line) + "\n", style="dim")
    if s.more:
        text.append(visible(s.more) + "\n", style="dim italic")
    text.rstrip()
    if s.round_steps is not None:
        text.append("\n" + rounded_every_step(s.round_steps), style="yellow")
    return text


MIN_LABEL = 16  # labels are shortened only past max(MIN_LABEL, a third of the width), and never with --full


def run_tables(page: RunDocument, *, precision: int, console: Console, full: bool, shade_all: bool, shade_weights: bool) -> list[RenderableType]:
    """The renderables for `attncli run`: summary, a table per view (shading tokens × tokens views), then notes."""
    parts: list[RenderableType] = [summary(page.summary)]
    for view in page.matrices:
        parts.append(Text(""))
        parts.append(Text(view.heading(page.summary.heads), style="bold"))
        heat = None
        if view.square and (shade_all or (shade_weights and view.key == "weights")):
            from attncli.formats.heatmap import Heat

            colour = console.color_system in ("256", "truecolor")  # 16 colours cannot tell the blues apart: use the ramp
            heat = Heat(view.data, view.hidden, probabilities=view.key == "weights", colour=colour)
        parts += matrix_table(view, precision=precision, console=console, full=full, heat=heat, hints=page.hints)
    if page.comparison is not None:
        parts.append(Text(""))
        parts += rounding_table(page.comparison, precision=precision, console=console, full=full, hints=page.hints)
    return parts


def matrix_table(
    view: MatrixView, *, precision: int, console: Console, full: bool, hints: Hints, heat: Heat | None = None
) -> list[RenderableType]:
    """A labelled table of one matrix, shortened around ellipses to fit the screen, or (`full`) stacked in column blocks.

    A number is never cut: a table that fits is shown whole, and one too wide for even one
    column is printed wide. Labels longer than max(16, a third of the width) are shortened
    unless `full`, with a note.
    """
    width = console.width
    n_rows, n_cols = view.data.shape
    rows = list(range(n_rows))
    max_rows = max(10, console.height - 8)
    if not full and n_rows > max_rows:
        half = max_rows // 2
        rows = list(range(half)) + [-1] + list(range(n_rows - (max_rows - half - 1), n_rows))
    shown_rows = [r for r in rows if r >= 0]

    cap = None if full else max(MIN_LABEL, width // 3)
    row_labels = {r: _label(view.rows[r], cap) for r in shown_rows}
    label_width = grid.widths([ELLIPSIS_ROW if len(shown_rows) < n_rows else ""], [[label] for label in row_labels.values()])[0]
    extras = [(name, [fixed(float(vec[r]), precision) for r in shown_rows]) for name, vec in view.extra]
    extra_width = sum(max(grid.widths([name], [[c] for c in cells])[0], 1) + 3 for name, cells in extras)
    columns = _Columns(view, shown_rows, precision, heat, cap)

    if full:
        blocks = _blocks(columns, n_cols, width - 1 - (label_width + 3), extra_width)
    else:
        blocks = [_fit(columns, n_cols, width - 1 - (label_width + 3) - extra_width)]

    grids: list[grid.Grid | str] = []
    for number, cols in enumerate(blocks):
        last = number == len(blocks) - 1
        if len(blocks) > 1:
            shown = [c for c in cols if c >= 0]
            grids.append(f"Columns {shown[0] + 1}–{shown[-1] + 1} of {n_cols}" if len(shown) > 1 else f"Column {shown[0] + 1} of {n_cols}")
        header: list[grid.Cell] = ["", *(ELLIPSIS_COLUMN if c < 0 else columns.header(c) for c in cols)]
        block_extras = extras if last else []
        header += [name for name, _ in block_extras]
        body: list[list[grid.Cell]] = []
        k = 0
        for r in rows:
            if r < 0:
                body.append([ELLIPSIS_ROW] * (1 + len(cols) + len(block_extras)))
                continue
            cells: list[grid.Cell] = [row_labels[r]]
            cells += [ELLIPSIS_COLUMN if c < 0 else columns.cell(c, k) for c in cols]
            cells += [cells_[k] for _, cells_ in block_extras]
            body.append(cells)
            k += 1
        styles = ["bold", *[""] * len(cols), *["cyan"] * len(block_extras)]
        grids.append(grid.Grid(header, body, styles=styles))

    below: list[RenderableType] = [grid.Block(grids)]
    if heat is not None:
        below.append(heat.legend(precision))
    notes = []
    shown_cols = len({c for cols in blocks for c in cols if c >= 0})
    if shown_cols < n_cols:
        notes.append(f"{shown_cols} of {n_cols} columns")
    if len(shown_rows) < n_rows:
        notes.append(f"{len(shown_rows)} of {n_rows} rows")
    if notes:
        below.append(Text(f"Showing {' and '.join(notes)}: {hints.see_all}.", style="dim"))
    if columns.shortened or any(label != visible(view.rows[r]) for r, label in row_labels.items()):
        below.append(Text(f"Labels longer than {cap} characters are shortened with …: {hints.labels_whole}.", style="dim"))
    return below


class _Columns:
    """The cells of a view's columns for the shown rows, formatted once, on demand."""

    def __init__(self, view: MatrixView, rows: list[int], precision: int, heat: Heat | None, cap: int | None) -> None:
        self.view = view
        self.rows = rows
        self.precision = precision
        self.heat = heat
        self.cap = cap
        self.shortened = False
        self._cells: dict[int, list[grid.Cell]] = {}
        self._widths: dict[int, int] = {}

    def header(self, c: int) -> str:
        label = _label(self.view.cols[c], self.cap)
        if self.cap is not None and len(label) < len(visible(self.view.cols[c])):
            self.shortened = True
        return label

    def cells(self, c: int) -> list[grid.Cell]:
        if c not in self._cells:
            self._cells[c] = _column_cells(self.view, c, self.rows, self.precision, self.heat)
        return self._cells[c]

    def cell(self, c: int, k: int) -> grid.Cell:
        return self.cells(c)[k]

    def width(self, c: int) -> int:
        """Characters column c takes, border and padding included."""
        if c not in self._widths:
            self._widths[c] = max(grid.widths([self.header(c), *self.cells(c)], [])) + 3  # its widest cell, the header's included
        return self._widths[c]


def _label(text: str, cap: int | None) -> str:
    shown = visible(text)
    if cap is None or grid.widths([shown], [])[0] <= cap:
        return shown
    out = ""
    for ch in shown:  # by display cells, so wide characters count twice
        if grid.widths([out + ch], [])[0] > cap - 1:
            break
        out += ch
    return out + "…"


def _column_cells(view: MatrixView, c: int, rows: list[int], precision: int, heat: Heat | None) -> list[grid.Cell]:
    """Column c's cells for `rows`: numbers with `precision` decimals, −∞ or dim where masked, shaded by `heat`."""
    values = view.data[rows, c]  # (len(rows),)
    texts = formatted(values, precision)
    hidden = None if view.hidden is None else view.hidden[rows, c]
    cells: list[grid.Cell] = []
    for k, text in enumerate(texts):
        if hidden is not None and hidden[k]:
            cells.append((text, heat.masked_style if heat is not None and heat.colour else "dim"))
        elif heat is None:
            cells.append(text)
        else:
            shaded = heat.cell(text, float(values[k]))
            cells.append((shaded.plain, str(shaded.style)))
    return cells


formatted = fixed_many  # the name the tests know


def _fit(columns: _Columns, n: int, room: int) -> list[int]:
    """Column indexes that fit in `room`: all, or the first and last around -1 (an ellipsis column); at least the first.

    Only columns that could possibly be shown are measured: a 2048-column matrix is not formatted whole.
    """
    narrowest = columns.precision + 2 + 3  # "0.0…" with its point, padding and border
    k = min(n, max(room, 0) // narrowest + 1)
    if 2 * k >= n and sum(columns.width(c) for c in range(n)) <= room:
        return list(range(n))
    room -= 4  # the ellipsis column
    left: list[int] = []
    right: list[int] = []
    i, j = 0, n - 1
    while i <= j:
        if room - columns.width(i) < 0:
            break
        room -= columns.width(i)
        left.append(i)
        i += 1
        if i > j or room - columns.width(j) < 0:
            break
        room -= columns.width(j)
        right.append(j)
        j -= 1
    if not left:
        left = [0]
    if len(left) + len(right) >= n:
        return list(range(n))
    return left + [-1] + right[::-1]


def _blocks(columns: _Columns, n: int, room: int, extra_width: int) -> list[list[int]]:
    """Every column, in blocks that each fit `room` (at least one column a block); the extra columns end the last block."""
    blocks: list[list[int]] = [[]]
    used = 0
    for c in range(n):
        w = columns.width(c)
        if blocks[-1] and used + w > room:
            blocks.append([])
            used = 0
        blocks[-1].append(c)
        used += w
    if extra_width and used + extra_width > room and len(blocks[-1]) > 1 and extra_width <= room:
        blocks.append([blocks[-1].pop()])  # the extras need room: the last column moves on with them
    return blocks


def rounding_table(
    comparison: Comparison, *, precision: int, console: Console | None = None, hints: Hints, full: bool = True
) -> list[RenderableType]:
    """Hand-rounded output beside the exact one, with the difference; shortened like the other tables unless `full`."""
    rounded, exact = comparison.rounded, comparison.exact
    n_rows = rounded.shape[0]
    rows = list(range(n_rows))
    if console is not None and not full:
        max_rows = max(10, console.height - 8)
        if n_rows > max_rows:
            half = max_rows // 2
            rows = list(range(half)) + [-1] + list(range(n_rows - (max_rows - half - 1), n_rows))
    labels = comparison.labels
    shown = [r for r in rows if r >= 0]
    vectors = [
        (formatted(rounded[r], precision), formatted(exact[r], exact_decimals(precision)), formatted(rounded[r] - exact[r], exact_decimals(precision))) for r in shown
    ]
    d = rounded.shape[1]
    cap = None if full or console is None else max(MIN_LABEL, console.width // 3)
    row_labels = [_label(labels[r], cap) for r in shown]
    keep = d
    if console is not None and not full:
        label_width = max([grid.widths([label], [])[0] for label in row_labels], default=0)
        room = console.width - 1 - (label_width + 3)
        while keep > 1 and sum(_vector_width(vectors, i, keep) + 3 for i in range(3)) > room:
            keep -= 1
    header: list[grid.Cell] = ["", "hand-rounded", "exact", "difference"]
    body: list[list[grid.Cell]] = []
    k = 0
    for r in rows:
        if r < 0:
            body.append([ELLIPSIS_ROW] * 4)
            continue
        body.append([row_labels[k], *(_vector(vectors[k][i], keep) for i in range(3))])
        k += 1
    title = Text(hand_rounded_title(comparison.decimals), style="bold")
    parts: list[RenderableType] = [title, grid.Block([grid.Grid(header, body, styles=["bold"])])]
    notes = []
    if keep < d:
        notes.append(f"{keep} of {d} values of each vector")
    if len(shown) < n_rows:
        notes.append(f"{len(shown)} of {n_rows} rows")
    if notes:
        parts.append(Text(f"Showing {' and '.join(notes)}: {hints.see_all}.", style="dim"))
    return parts


def _vector(texts: list[str], keep: int) -> str:
    """[a, b, c], or with `keep` < len: the first keep - 1 values, …, the last."""
    if keep >= len(texts):
        return "[" + ", ".join(texts) + "]"
    return "[" + ", ".join([*texts[: keep - 1], "…", texts[-1]]) + "]"


def _vector_width(vectors: list[tuple[list[str], list[str], list[str]]], i: int, keep: int) -> int:
    return max([len(_vector(v[i], keep)) for v in vectors], default=0)
