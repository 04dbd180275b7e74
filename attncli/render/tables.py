"""`attncli run` in the terminal: one Rich table per stage, fitted to the screen."""

from __future__ import annotations

import math

import numpy as np
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from attncli.engine import RunResult
from attncli.escape import visible
from attncli.numbers import MINUS_INFINITY, fixed
from attncli.render.heatmap import Heat
from attncli.summary import describe
from attncli.variance import VarianceRow
from attncli.views import MatrixView

ELLIPSIS_COLUMN = "…"
ELLIPSIS_ROW = "⋮"


def summary(result: RunResult) -> Text:
    """The scenario in a few lines: its name and sentence, then its sizes and settings."""
    s = result.scenario
    text = Text()
    text.append(visible(s.name), style="bold")
    text.append(" — " + visible(" ".join(s.tokens)))
    if s.context is not None:
        text.append(" → " + visible(" ".join(s.context)))
    text.append("\n")
    for line in describe(s):
        text.append(line + "\n", style="dim")
    text.rstrip()
    if result.round_steps is not None:
        text.append(f"\nEvery intermediate is rounded to {result.round_steps} decimals before the next step, as by hand.", style="yellow")
    return text


def run_tables(
    result: RunResult, views: list[MatrixView], *, precision: int, console: Console, full: bool, shade_all: bool, shade_weights: bool
) -> list[RenderableType]:
    """The renderables for `attncli run`: summary, a table per view (shading tokens × tokens views), then notes."""
    parts: list[RenderableType] = [summary(result)]
    for view in views:
        parts.append(Text(""))
        parts.append(Text(view.heading(result.scenario.heads), style="bold"))
        heat = None
        if view.square and (shade_all or (shade_weights and view.key == "weights")):
            colour = console.color_system in ("256", "truecolor")  # 16 colours cannot tell the blues apart: use the ramp
            heat = Heat(view.data, view.hidden, probabilities=view.key == "weights", colour=colour)
        parts.append(matrix_table(view, precision=precision, console=console, full=full, heat=heat))
    if result.exact is not None and any(v.key in ("output", "final") for v in views):
        parts.append(Text(""))
        parts.append(rounding_table(result, precision=precision))
    return parts


def matrix_table(view: MatrixView, *, precision: int, console: Console, full: bool, heat: Heat | None = None) -> RenderableType:
    """A labelled table of one matrix, shortened with ellipses when it would not fit the screen."""
    n_rows, n_cols = view.data.shape
    row_label_width = max(len(r) for r in view.rows) + 3
    extra_width = sum(max(len(name), _number_width(vec, precision)) + 3 for name, vec in view.extra)
    cols = list(range(n_cols))
    if not full:
        cols = _fit(view, console.width - row_label_width - extra_width - 1, precision, ramp=heat is not None and not heat.colour)
    rows = list(range(n_rows))
    max_rows = max(10, console.height - 8)
    if not full and n_rows > max_rows:
        half = max_rows // 2
        rows = list(range(half)) + [-1] + list(range(n_rows - (max_rows - half - 1), n_rows))

    table = Table()
    table.add_column("", style="bold", no_wrap=True)
    for c in cols:
        table.add_column(ELLIPSIS_COLUMN if c < 0 else Text(visible(view.cols[c])), justify="right", no_wrap=True)
    for name, _ in view.extra:
        table.add_column(name, justify="right", style="cyan", no_wrap=True)
    for r in rows:
        if r < 0:
            table.add_row(ELLIPSIS_ROW, *[ELLIPSIS_ROW] * (len(cols) + len(view.extra)))
            continue
        cells = [_cell(view, r, c, precision, heat) for c in cols]
        extras = [fixed(float(vec[r]), precision) for _, vec in view.extra]
        table.add_row(Text(visible(view.rows[r])), *cells, *extras)

    below: list[RenderableType] = [heat.legend(precision)] if heat is not None else []
    notes = []
    shown_cols = sum(1 for c in cols if c >= 0)
    if shown_cols < n_cols:
        notes.append(f"{shown_cols} of {n_cols} columns")
    shown_rows = sum(1 for r in rows if r >= 0)
    if shown_rows < n_rows:
        notes.append(f"{shown_rows} of {n_rows} rows")
    if notes:
        below.append(Text(f"Showing {' and '.join(notes)}: see all with --full, a wider terminal, or --format csv / json.", style="dim"))
    return Group(table, *below) if below else table


def rounding_table(result: RunResult, *, precision: int) -> Table:
    """Hand-rounded output beside the exact one, with the difference."""
    assert result.exact is not None
    rounded, exact = result.output, result.exact.output
    table = Table(title=f"Hand-rounded ({result.round_steps} decimals) vs exact output", title_justify="left", title_style="bold")
    table.add_column("", style="bold")
    for name in ("hand-rounded", "exact", "difference"):
        table.add_column(name, justify="right")
    for label, r_row, e_row in zip(result.scenario.query_labels, rounded, exact):
        table.add_row(Text(visible(label)), _vec(r_row, precision), _vec(e_row, precision + 1), _vec(r_row - e_row, precision + 1))
    return table


def _vec(values: np.ndarray, precision: int) -> str:
    return "[" + ", ".join(fixed(float(v), precision) for v in values) + "]"


def _cell(view: MatrixView, r: int, c: int, precision: int, heat: Heat | None) -> str | Text:
    if c < 0:
        return ELLIPSIS_COLUMN
    value = float(view.data[r, c])
    if view.hidden is not None and view.hidden[r, c]:
        return Text(MINUS_INFINITY if value == -math.inf else fixed(value, precision), style="dim")
    return fixed(value, precision) if heat is None else heat.cell(fixed(value, precision), value)


def _number_width(values: np.ndarray, precision: int) -> int:
    """Characters the widest of `values` needs at `precision` decimals, sign included."""
    finite = values[np.isfinite(values)]
    return _width_of(float(np.abs(finite).max()) if finite.size else 0.0, precision)


def _width_of(biggest: float, precision: int) -> int:
    int_digits = len(str(int(biggest))) if biggest < 1e15 else 16
    return int_digits + 1 + precision + 1  # digits, point, decimals, sign


def _column_widths(view: MatrixView, columns: list[int], precision: int, *, ramp: bool) -> list[int]:
    """Estimated width of each of `columns`, from its largest magnitude (one NumPy pass over those columns)."""
    data = view.data[:, columns]  # (rows, len(columns))
    magnitudes = np.abs(np.where(np.isfinite(data), data, 0.0)).max(axis=0)
    extra = 2 if ramp else 0  # " ▅"
    return [max(len(view.cols[c]), _width_of(float(m), precision) + extra) + 3 for c, m in zip(columns, magnitudes)]  # + padding, border


def _fit(view: MatrixView, room: int, precision: int, *, ramp: bool) -> list[int]:
    """Column indexes that fit in `room`: all, or the first and last around -1 (an ellipsis column).

    Only columns that could possibly be shown are measured: a 2048-column matrix is not scanned whole.
    """
    n = view.data.shape[1]
    narrowest = precision + 3 + 3  # "0.0…" with its sign, padding and border
    k = min(n, room // narrowest + 1)
    candidates = sorted(set(range(k)) | set(range(n - k, n)))
    width = dict(zip(candidates, _column_widths(view, candidates, precision, ramp=ramp)))
    if len(candidates) == n and sum(width.values()) <= room:
        return list(range(n))
    room -= 4  # the ellipsis column
    left, right = [], []
    i, j = 0, n - 1
    while i <= j:
        if room - width[i] < 0:
            break
        room -= width[i]
        left.append(i)
        i += 1
        if i > j or room - width[j] < 0:
            break
        room -= width[j]
        right.append(j)
        j -= 1
    if not left:
        left = [0]
    return left + [-1] + right[::-1]


def variance_table(rows: list[VarianceRow], *, keys: int) -> list[RenderableType]:
    """The √d experiment: each measurement beside its theory, and how the softmax saturates without scaling."""
    samples = f"{rows[0].samples:,} samples per d; " if rows else ""
    table = Table(title=f"q·k for q, k ~ N(0, I_d): {samples}scaled = q·k/√d; theory in brackets", title_justify="left", title_style="bold")
    for name in ("d", "mean q·k", "var q·k", "var scaled", "max α", "max α scaled"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(
            str(r.d), f"{r.mean_raw:.3f} (0)", f"{r.var_raw:.2f} ({r.d})", f"{r.var_scaled:.3f} (1)",
            f"{r.max_weight_raw:.3f}", f"{r.max_weight_scaled:.3f}",
        )  # fmt: skip
    note = Text(
        f"max α: the mean largest softmax weight of a query over {keys} random keys (1/{keys} = {1 / keys:.3f} would be "
        "uniform). Without scaling the variance of q·k grows like d and the softmax heads for one-hot; dividing by √d "
        "keeps the variance at 1 and the weights spread.",
        style="italic",
    )
    return [table, note]
