"""Text wrapped to the terminal's width, at spaces, with a hanging indent: light enough for `attncli scenarios` (no Rich)."""

from __future__ import annotations

import shutil
import textwrap

MIN_WIDTH = 20  # prose is wrapped to at least this many columns, however narrow the terminal


def columns() -> int:
    """The terminal's width where no console is needed: COLUMNS, else the terminal's own, else 80, as Rich's console reads it;
    at least MIN_WIDTH."""
    return max(shutil.get_terminal_size().columns, MIN_WIDTH)


def hanging(text: str, width: int | None, first: str, rest: str) -> list[str]:
    """`text` after `first` (a name, an indent), wrapped to `width` at spaces (never inside a word, so a long path stays whole)
    with its next lines after `rest`; at least 20 characters of text a line, however narrow the terminal."""
    if width is None or len(first) + len(text) <= width:
        return [first + text]
    return textwrap.wrap(text, width=max(width, len(rest) + 20), initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False) or [first.rstrip()]  # fmt: skip
