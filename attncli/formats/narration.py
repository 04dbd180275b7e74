"""`attncli explain` in the terminal: the numbered steps of the hand calculation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
from rich.cells import cell_len
from rich.console import RenderableType
from rich.padding import Padding
from rich.text import Text

from attncli.document.blocks import Hints, Steps, step_lines
from attncli.document.escape import visible
from attncli.document.numbers import smart
from attncli.formats.grid import Wrapped

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions
    from rich.segment import Segment

MATRIX_ROWS = 16  # a weight matrix in the narration shows at most this many rows (half from the top, half from the bottom)


def explain_renderables(intro: list[str], steps: Steps, *, full: bool = False) -> list[RenderableType]:
    parts: list[RenderableType] = [Text(visible(intro[0]), style="bold")]
    parts += [Text(visible(line), style="yellow" if "rounded" in line else "") for line in intro[1:]]
    return parts + steps_renderables(steps, full=full)


def steps_renderables(steps: Steps, *, full: bool = False) -> list[RenderableType]:
    """Each step: a bold heading with its formula, its arithmetic wrapped at spaces only, its notes in italics."""
    precision = steps.precision
    parts: list[RenderableType] = []
    for number, step in enumerate(steps.steps, 1):
        heading = Text(f"\nStep {number} · {step.title}", style="bold")
        heading.append(f"   {step.formula}", style="cyan")
        parts.append(heading)
        lines = step_lines(step._replace(matrix=None), precision)
        shortened = None
        if step.matrix is not None:
            matrix_lines, shortened = matrix_lines_of(*step.matrix, precision, full=full, hints=steps.hints)
            lines[1:1] = matrix_lines
        lines = ["  " + line for line in lines]
        if lines:
            parts.append(Hanging([visible(line) for line in lines]))  # arithmetic: wrapped at spaces only, never cut
        if shortened:
            parts.append(Padding(Text(shortened, style="dim"), (0, 0, 0, 2), expand=False))
        parts += [Padding(Text(visible(note), style="italic"), (0, 0, 0, 2), expand=False) for note in step.notes]
    return parts


HANG = 4  # a wrapped line of arithmetic continues this much further in than it began


class Hanging:
    """Lines wrapped at spaces to the console's width (as `Wrapped` wraps them), each continuation indented HANG beyond its line's start."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def plain(self, width: int) -> str:
        out: list[str] = []
        for line in self.lines:
            body = line.lstrip(" ")
            lead = line[: len(line) - len(body)]
            hang = lead + " " * HANG
            if len(lead) + cell_len(body) <= width:
                out.append(line.rstrip())
                continue
            first, *rest = Wrapped(body).plain(max(width - len(hang), 20)).split("\n")
            out += [lead + first, *(hang + piece for piece in rest)]
        return "\n".join(out)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        from rich.segment import Segment

        for line in self.plain(options.max_width).split("\n"):
            yield Segment(line)
            yield Segment("\n")


def matrix_lines_of(name: str, matrix: np.ndarray, precision: int, *, hints: Hints, full: bool = False) -> tuple[list[str], str | None]:
    """`W_Q =` and the matrix's rows, right-aligned (unless `full`, at most MATRIX_ROWS of them around a ⋮), and a note when shortened."""
    n = matrix.shape[0]
    rows: list[int] = list(range(n))
    if n > MATRIX_ROWS and not full:
        half = MATRIX_ROWS // 2
        rows = [*range(half), -1, *range(n - half, n)]
    cells = [[smart(float(x), precision) for x in matrix[r]] if r >= 0 else [] for r in rows]
    width = max((len(cell) for row in cells for cell in row), default=0)
    columns = matrix.shape[1]
    lines = [f"{name} ="] + ["  " + "  ".join(cell.rjust(width) for cell in (row or ["⋮"] * columns)) for row in cells]
    note = None if len(rows) == n else f"Showing {MATRIX_ROWS} of the {n:,} rows of {name}: {hints.rows_elsewhere}."
    return lines, note
