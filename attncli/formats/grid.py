"""Box-drawn tables laid out by attncli itself: plain text where no colour is needed, styled Rich segments where it is.

Rich's Table measures, wraps and crops every cell (some 150 µs a cell); a matrix of numbers
needs none of that: each column is as wide as its widest cell, and attncli decides beforehand
which rows and columns are shown. The look is Rich's `HEAVY_HEAD` box, character for character.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from rich.cells import cell_len

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions
    from rich.segment import Segment

Cell = str | tuple[str, str]  # text, or (text, Rich style)


def _text(cell: Cell) -> str:
    return cell if isinstance(cell, str) else cell[0]


def _width(cell: Cell) -> int:
    text = _text(cell)
    return len(text) if text.isascii() else cell_len(text)


def widths(header: Sequence[Cell], body: Sequence[Sequence[Cell]]) -> list[int]:
    """The width of each column: its widest cell, header included."""
    out = [_width(cell) for cell in header]
    for row in body:
        for i, cell in enumerate(row):
            w = _width(cell)
            if w > out[i]:
                out[i] = w
    return out


def table_width(column_widths: Sequence[int]) -> int:
    """Characters a table with these column widths takes: one space each side of a cell, and a border between."""
    return 1 + sum(w + 3 for w in column_widths)


class Grid:
    """A finished table: a header row and body rows of cells, the first column left-justified and the rest right-justified.

    `styles` are the body's column styles (in colour only): the row labels bold, an extra column cyan.
    """

    def __init__(self, header: Sequence[Cell], body: Sequence[Sequence[Cell]], *, styles: Sequence[str] = ()) -> None:
        self.header = header
        self.body = body
        self.widths = widths(header, body)
        self.styles = list(styles) + [""] * (len(header) - len(styles))

    @property
    def width(self) -> int:
        return table_width(self.widths)

    def _rules(self) -> tuple[str, str, str]:
        top = "┏" + "┳".join("━" * (w + 2) for w in self.widths) + "┓"
        below_header = "┡" + "╇".join("━" * (w + 2) for w in self.widths) + "┩"
        bottom = "└" + "┴".join("─" * (w + 2) for w in self.widths) + "┘"
        return top, below_header, bottom

    def _pad(self, i: int, cell: Cell) -> str:
        text = _text(cell)
        gap = self.widths[i] - _width(cell)
        return text + " " * gap if i == 0 else " " * gap + text

    def plain(self) -> str:
        """The table as lines of text, without a final newline."""
        top, below_header, bottom = self._rules()
        lines = [top, "┃ " + " ┃ ".join([self._pad(i, c) for i, c in enumerate(self.header)]) + " ┃", below_header]
        pad = self._pad
        lines += ["│ " + " │ ".join([pad(i, c) for i, c in enumerate(row)]) + " │" for row in self.body]
        lines.append(bottom)
        return "\n".join(lines)

    def segments(self) -> Iterator[Segment]:
        """The table as Rich segments: a bold header, each column in its style, each styled cell in its own on top."""
        from rich.segment import Segment
        from rich.style import Style

        parse = Style.parse
        top, below_header, bottom = self._rules()
        newline = Segment("\n")
        bold = parse("bold")
        column_styles = [parse(s) if s else None for s in self.styles]

        def row(cells: Sequence[Cell], bar: str, styles: Sequence[Style | None]) -> Iterator[Segment]:
            yield Segment(bar + " ")
            for i, cell in enumerate(cells):
                if i:
                    yield Segment(" " + bar + " ")
                style = styles[i]
                if isinstance(cell, tuple) and cell[1]:
                    style = parse(cell[1]) if style is None else style + parse(cell[1])
                text = _text(cell)
                gap = Segment(" " * (self.widths[i] - _width(cell)))
                if i == 0:
                    yield Segment(text, style)
                    yield gap
                else:
                    yield gap
                    yield Segment(text, style)
            yield Segment(" " + bar)
            yield newline

        yield Segment(top)
        yield newline
        yield from row(self.header, "┃", [bold] * len(self.header))
        yield Segment(below_header)
        yield newline
        for cells in self.body:
            yield from row(cells, "│", column_styles)
        yield Segment(bottom)
        yield newline


class Block:
    """Lines that Rich must print as they are (never wrapped or cropped): a table, or stacked tables.

    `terminal.render` writes `plain` straight into a console without colour; a colour console
    prints `__rich_console__`'s segments.
    """

    def __init__(self, grids: Sequence[Grid | str]) -> None:
        self.parts = grids  # tables, and lines of text between them (e.g. "columns 1–9 of 77")

    def plain(self) -> str:
        return "\n".join(part if isinstance(part, str) else part.plain() for part in self.parts)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        from rich.segment import Segment
        from rich.style import Style

        dim = Style(dim=True)
        for part in self.parts:
            if isinstance(part, str):
                yield Segment(part, dim)
                yield Segment("\n")
            else:
                yield from part.segments()


class Wrapped:
    """Plain lines wrapped at spaces to the console's width exactly as Rich wraps a Text (words never folded), but line by line.

    Rich divides one big Text by copying it for every line it cuts (quadratic in its length);
    the wrapping itself (`rich._wrap.divide_line`) is linear, so each line is cut with it alone.
    """

    def __init__(self, text: str) -> None:
        self.text = text

    def plain(self, width: int) -> str:
        try:
            from rich._wrap import divide_line
        except ImportError:  # pragma: no cover - Rich moved its private helper: wrap with Text, slower but the same
            return self._by_rich_text(width)
        import rich.cells

        single_cells = getattr(rich.cells, "_is_single_cell_widths", lambda text: False)
        out: list[str] = []
        for line in self.text.split("\n"):
            single = single_cells(line)
            if (len(line) if single else cell_len(line)) <= width:
                out.append(line.rstrip())
                continue
            breaks = _breaks(line, width) if single else divide_line(line, width, fold=False)
            offsets = [0, *breaks, len(line)]
            out += [line[a:b].rstrip() for a, b in zip(offsets, offsets[1:])]
        return "\n".join(out)

    def _by_rich_text(self, width: int) -> str:
        from rich.text import Text

        lines = Text(self.text).wrap(_console(width), width, overflow="ignore")
        return "\n".join(line.plain.rstrip() for line in lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        from rich.segment import Segment

        for line in self.plain(options.max_width).split("\n"):
            yield Segment(line)
            yield Segment("\n")


_WORD = re.compile(r"\s*\S+\s*")  # a word and the spaces around it, as Rich's wrapping reads words


def _breaks(text: str, width: int) -> list[int]:
    """rich._wrap.divide_line(text, width, fold=False) for text whose every character takes one cell: the same offsets."""
    out: list[int] = []
    offset = 0
    for match in _WORD.finditer(text):
        start, word = match.start(), match.group()
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width or (offset and start):
            if start:
                out.append(start)
            offset = len(word)
    return out


def _console(width: int) -> Console:
    import io

    from rich.console import Console

    return Console(file=io.StringIO(), width=width, color_system=None)
