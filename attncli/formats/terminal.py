"""The terminal: a Rich console with the terminal's width and colours, and renderables turned into text.

Rich is imported only here and in the modules that build renderables for it (tables, grid,
narration); the text is handed to `attncli.io`, which writes it.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.text import Text


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


MIN_WIDTH = 20  # prose is wrapped to at least this many columns, however narrow the terminal


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
