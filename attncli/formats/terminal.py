"""The terminal: a Rich console with the terminal's width and colours, renderables turned into text, and documents as lines.

Rich is imported only here and in the modules that build renderables for it (tables, grid,
narration); the text is handed to `attncli.io`, which writes it.

A document (`document.blocks.Document`: the tiled head, decode, dequant) is drawn here block by
block (`document_terminal`): prose wrapped to the width with a hanging indent, tables with spaces
and a rule under the header, their vectors shortened (then their columns split) to fit. The same
lines, unwrapped, are the text of its plain SVG (`svg.report`).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from attncli.document import escape
from attncli.formats.wrap import MIN_WIDTH, hanging

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.text import Text

    from attncli.document.blocks import Block, Document, Table
    from attncli.document.pages import ExplainPage, HeadsPage, ReportPage, RunPage, ShadePage
    from attncli.formats import Options


def console(*, to_file: bool = False) -> Console:
    """A Console that renders into memory with the terminal's width and colour settings.

    Writing to a file (`to_file`) gives plain text; NO_COLOR and a non-terminal stdout do too.
    """
    from rich.console import Console

    probe = Console(file=sys.stdout)
    terminal = not to_file and probe.is_terminal
    color = terminal and not probe.no_color
    return Console(
        file=io.StringIO(),
        force_terminal=terminal,  # without colour, Rich writes no escape codes at all
        color_system=probe.color_system if color else None,  # type: ignore[arg-type]  # Rich gives its own choice back as str
        no_color=not color,
        width=max(probe.width, MIN_WIDTH),  # COLUMNS=0 would print nothing at all; tables may still be wider
        height=probe.height,
        highlight=False,
        emoji=False,
        legacy_windows=False,
    )




def render(console: Console, renderables: list[RenderableType]) -> str:
    """The text of `renderables` as printed by `console` (made by `console()`).

    A table laid out by attncli (`grid.Block`) is printed as it is, never wrapped or cropped,
    and long arithmetic (`grid.Wrapped`) is wrapped line by line: as plain text straight into
    the buffer when there is no colour, else as Rich segments.
    """
    from rich.text import Text

    from attncli.formats.grid import Block, Wrapped

    plain = console.color_system is None and not console.record
    for renderable in renderables:
        if isinstance(renderable, Block | Wrapped):
            if plain:
                text = renderable.plain() if isinstance(renderable, Block) else renderable.plain(console.width)
                console.file.write(text + "\n")
            else:
                console.print(renderable, crop=False)
        elif plain and isinstance(renderable, Text) and _fits(renderable, console.width):
            console.file.write(renderable.plain + "\n")  # what Rich prints for a Text that needs no wrapping, without its machinery
        else:
            console.print(renderable)
    buffer = console.file
    assert isinstance(buffer, io.StringIO)
    text = buffer.getvalue()
    if console.color_system is None:  # plain text: drop the padding Rich leaves at line ends
        text = "\n".join(line.rstrip() for line in text.split("\n"))
    return text


def _fits(text: Text, width: int) -> bool:
    """Whether Rich would print `text` as it is: left-justified and no line wider than `width`."""
    from rich.cells import cell_len

    if text.justify not in (None, "default", "left") or text.end != "\n":
        return False
    return all((len(line) if line.isascii() else cell_len(line)) <= width for line in text.plain.split("\n"))


def text_of(build: Callable[[Console], list[RenderableType]], *, to_file: bool) -> str:
    """Render what `build` makes for the terminal's console (or plain text for a file)."""
    con = console(to_file=to_file)
    return render(con, build(con))


# -- documents (attncli.document.blocks) ------------------------------------------------------------

KEEP = (6, 5, 4, 3, 2)  # numbers a vector keeps, tried in turn until its table fits the width


def text_lines(document: Document, width: int | None = None) -> list[str]:
    """The document as plain lines (no colour): tables drawn with spaces and a rule under the header.

    With a `width`, prose is wrapped to it with a hanging indent and a table too wide for it has its
    vectors shortened (the first numbers, …, the last, as `run` does) until it fits, or as far as they go.
    """
    return [line for line, _ in _styled_lines(document, width)]


def _boxed(document: Document, width: int) -> list[RenderableType]:
    from rich.table import Table as RichTable
    from rich.text import Text

    from attncli.document.blocks import Heading, Note, Table

    out: list[RenderableType] = []
    for block in document.blocks:
        if isinstance(block, Heading) and block.level == 1:
            continue  # the framed table carries the title
        if isinstance(block, Table):
            table = RichTable(title=document.title, title_justify="left", title_style="bold")
            for name, numeric in zip(block.header, block.numeric):
                table.add_column(name, justify="right" if numeric else "left", no_wrap=True)
            for row in block.rows:
                table.add_row(*row)
            out.append(table)
        elif isinstance(block, Note):
            out.append(Text(block.text, style="italic"))
        else:
            out += [Text(line, style=style, no_wrap=True, overflow="ignore") for line, style in _text_block(block, width)]
    return out


def _styled_lines(document: Document, width: int | None) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for block in document.blocks:
        out += _text_block(block, width)
    return out


def _wrapped(text: str, width: int | None, indent: str = "", hang: str = "") -> list[str]:
    """`text` at `indent`, wrapped to `width` at spaces (never inside a word) with its next lines at `indent` + `hang`."""
    return hanging(text, width, indent, indent + hang)


def _text_block(block: Block, width: int | None) -> list[tuple[str, str]]:
    from attncli.document.blocks import Heading, Note, Paragraph, Steps, Table, Values, step_lines  # numpy: not at start-up

    if isinstance(block, Heading):
        return [(line, "bold") for line in ([] if block.level == 1 else [""]) + _wrapped(escape.visible(block.text), width)]
    if isinstance(block, Paragraph):
        return [(line, "") for line in _wrapped(escape.visible(block.text), width)]
    if isinstance(block, Values) and block.record:  # `name  value` lines aligned on the names, at the margin, each value wrapped under itself
        names = [escape.visible(name) for name, _ in block.pairs]
        width_of_names = max(map(len, names), default=0)
        under = " " * (width_of_names + 2)
        return [(line, "") for name, (_, value) in zip(names, block.pairs)
                for line in hanging(escape.visible(value), width, f"{name:<{width_of_names}}  ", under)]  # fmt: skip
    if isinstance(block, Values):
        out = []
        for name, value in block.pairs:
            shown = escape.visible(_fitted_value(name, value, width))
            out += [(line, "") for line in _wrapped(f"{escape.visible(name)} = {shown}", width, "  ", " " * (len(escape.visible(name)) + 3))]
        return out
    if isinstance(block, Table) and block.listing:  # aligned columns at the margin, no rule, never shortened; a last column of text wraps
        header = [escape.visible(cell) for cell in block.header]
        rows = [[escape.visible(cell) for cell in row] for row in block.rows]
        widths = [max(len(row[c]) for row in [header, *rows]) for c in range(len(header))]
        if block.numeric[-1] or width is None:
            top, _rule, *listed = _table_lines(header, rows, widths, block.numeric, range(len(header)))
            return [(line, "") for line in [top, *listed]]
        lead = list(range(len(header) - 1))  # the columns before the last, padded as usual; the last wraps under itself
        under = " " * (sum(widths[c] + 2 for c in lead))
        return [(line, "") for row in [header, *rows]
                for line in hanging(row[-1], width, "  ".join(_padded(row, widths, block.numeric, lead)) + "  " * bool(lead), under)]  # fmt: skip
    if isinstance(block, Table):
        return [(("  " + line).rstrip(), "") for line in _aligned(block, None if width is None else width - 2)]
    if isinstance(block, Steps):
        lines: list[tuple[str, str]] = []
        for number, step in enumerate(block.steps, 1):
            lines += [("", ""), (escape.visible(f"Step {number} · {step.title}   {step.formula}"), "bold")]
            lines += [("  " + escape.visible(line), "") for line in step_lines(step, block.precision)]
            lines += [(line, "italic") for note in step.notes for line in _wrapped(escape.visible(note), width, "  ", "  ")]
        return lines
    if isinstance(block, Note):
        return [(line, "italic") for line in _wrapped(escape.visible(block.text), width, "  ", "  ")]
    raise TypeError(f"the terminal has no drawing for {type(block).__name__}")


def _fitted_value(name: str, value: str, width: int | None) -> str:
    """A vector value shortened until `  name = value` fits the width (or as far as it goes)."""
    from attncli.document.blocks import Vector

    if width is None or not isinstance(value, Vector):
        return value
    for keep in KEEP:
        shown = value.shortened(keep)
        if len(name) + len(shown) + 5 <= width:
            return shown
    return value.shortened(KEEP[-1])


def _aligned(table: Table, width: int | None = None) -> list[str]:
    """The table's lines; one too wide for `width` has its vectors shortened, then its columns split into
    tables of their own, each led by the first column, as `run` splits a wide matrix."""
    from attncli.document.blocks import Vector

    header = [escape.visible(cell) for cell in table.header]
    plain = [[escape.visible(cell) for cell in row] for row in table.rows]
    shortenable = [(r, c) for r, row in enumerate(table.rows) for c, cell in enumerate(row) if isinstance(cell, Vector) and not cell.fixed]
    rows = plain
    for keep in (None, *KEEP):
        if keep is not None:
            rows = [list(row) for row in plain]
            for r, c in shortenable:
                cell = table.rows[r][c]
                assert isinstance(cell, Vector)
                rows[r][c] = escape.visible(cell.shortened(keep))
        widths = [max(len(row[c]) for row in [header, *rows]) for c in range(len(header))]
        if width is None or sum(widths) + 2 * (len(widths) - 1) <= width or not shortenable:
            break
    columns = list(range(len(header)))
    if width is None or sum(widths) + 2 * (len(widths) - 1) <= width:
        return _table_lines(header, rows, widths, table.numeric, columns)
    groups: list[list[int]] = [[0]]
    for c in columns[1:]:
        if len(groups[-1]) > 1 and sum(widths[i] + 2 for i in groups[-1]) + widths[c] > width:
            groups.append([0])
        groups[-1].append(c)
    out: list[str] = []
    for group in groups:
        out += [""] * bool(out) + _table_lines(header, rows, widths, table.numeric, group)
    return out


def _padded(cells: Sequence[str], widths: Sequence[int], numeric: Sequence[bool], columns: Sequence[int]) -> list[str]:
    """The chosen cells padded to `widths`: numbers to the right, text to the left."""
    return [cells[c].rjust(widths[c]) if numeric[c] else cells[c].ljust(widths[c]) for c in columns]


def _table_lines(header: Sequence[str], rows: Sequence[Sequence[str]], widths: Sequence[int], numeric: Sequence[bool],
                 columns: Sequence[int]) -> list[str]:  # fmt: skip
    """The header, a rule and the rows of the chosen columns, padded to `widths`: numbers to the right, text to the left."""

    def line(cells: Sequence[str]) -> str:
        return "  ".join(_padded(cells, widths, numeric, columns)).rstrip()

    return [line(header), "  ".join("─" * widths[c] for c in columns), *map(line, rows)]


def document_terminal(document: Document, *, to_file: bool, boxed: bool = False) -> str:
    """The document for the terminal, fitted to its width: bold titles, italic notes when colour is on, else the plain text.

    `boxed` (variance's table) draws each table as a framed Rich table titled with the document's title and
    each note as Rich text wrapped by Rich; the other blocks as lines all the same.
    """
    from rich.text import Text

    con = console(to_file=to_file)
    if boxed:
        return render(con, _boxed(document, con.width))
    width = con.width
    if con.color_system is None:
        return "\n".join(text_lines(document, width)) + "\n"
    parts: list[RenderableType] = []
    for line, style in _styled_lines(document, width):
        parts.append(Text(line, style=style, no_wrap=True, overflow="ignore"))
    return render(con, parts)


# -- the pages (attncli.document.pages): what each command shows, for the terminal ------------------


def run(page: RunPage, options: Options) -> str:
    """`run`'s tables: the header, then each shown stage, the weights shaded on a terminal (every square stage with `heatmap`)."""
    from attncli.formats.tables import run_tables

    def tables(con: Console) -> list[RenderableType]:
        return run_tables(page.document(), precision=page.precision, console=con, full=options.full, shade_all=options.heatmap,
                          shade_weights=con.is_terminal)  # fmt: skip

    return text_of(tables, to_file=options.to_file)


def explain(page: ExplainPage, options: Options) -> str:
    """`explain`'s walk-through: the intro, then every step with its arithmetic."""
    from attncli.document.notation import Writer
    from attncli.formats.narration import explain_renderables

    article = page.article(Writer())
    return text_of(lambda con: explain_renderables(list(article.intro), article.steps, full=options.full), to_file=options.to_file)


def report(page: ReportPage, options: Options) -> str:
    return document_terminal(page.document(), to_file=options.to_file, boxed=page.boxed)


def heads(page: HeadsPage, options: Options) -> str:
    """The grid of thumbnails (as wide as the terminal), then the table of statistics and the readings."""
    from attncli.formats.headgrid import grid_lines, table_renderables
    from attncli.formats.heatmap import terminal_ramp

    con = console(to_file=options.to_file)
    lines = grid_lines(page.grid(), width=con.width, colour=con.color_system is not None, ramp=terminal_ramp())
    return render(con, [*lines, *table_renderables(page.table(), precision=page.precision)])


def shade(page: ShadePage, options: Options) -> str:
    """The sentence, each token on the shade of its weight and the weight written under it."""
    from attncli.formats.heatmap import terminal_ramp
    from attncli.formats.shade import lines

    con = console(to_file=options.to_file)
    return render(con, lines(page.shaded(), width=con.width, colour=con.color_system is not None, ramp=terminal_ramp(), precision=page.precision))
