"""Where output goes: stdout or a file written atomically, and the one place errors are printed.

Everything is rendered to a string first and written at the end, so an error never leaves
half a result on stdout or in a file.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from attncli.errors import AttnError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType


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
        color_system=probe.color_system if color else None,
        no_color=not color,
        width=probe.width,
        height=probe.height,
        highlight=False,
        emoji=False,
        legacy_windows=False,
    )


EXPORT_WIDTH = 100  # HTML and SVG: a fixed width, so the same inputs give the same bytes anywhere


def recording_console() -> Console:
    """A colour Console of fixed width that records what it prints, for HTML and SVG export."""
    from rich.console import Console

    return Console(
        file=io.StringIO(),
        record=True,
        force_terminal=True,
        color_system="truecolor",
        width=EXPORT_WIDTH,
        height=50,
        highlight=False,
        emoji=False,
        legacy_windows=False,
    )


def render(console: Console, renderables: list[RenderableType]) -> str:
    """The text of `renderables` as printed by `console` (made by `console()`)."""
    for renderable in renderables:
        console.print(renderable)
    buffer = console.file
    assert isinstance(buffer, io.StringIO)
    text = buffer.getvalue()
    if console.color_system is None:  # plain text: drop the padding Rich leaves at line ends
        text = "\n".join(line.rstrip() for line in text.split("\n"))
    return text


def emit(document: str | Iterable[bytes], output: Path | None = None) -> None:
    """Write a finished document (text, or UTF-8 chunks) to stdout, or atomically to `output`."""
    if output is not None:
        write_atomic(output, document)
        return
    stream = getattr(sys.stdout, "buffer", None)
    for chunk in _chunks(document):
        if stream is not None:
            stream.write(chunk)
        else:  # a text-only stdout, e.g. one swapped in by a test
            sys.stdout.write(chunk.decode("utf-8"))
    sys.stdout.flush()


def _chunks(document: str | Iterable[bytes]) -> Iterator[bytes]:
    if isinstance(document, str):
        yield document.encode("utf-8")
    else:
        yield from document


def write_atomic(path: Path, document: str | Iterable[bytes]) -> None:
    """Write a temporary file beside `path`, then rename it over: never a half-written file."""
    folder = path.parent
    if not folder.is_dir():
        raise AttnError(
            f"cannot write {path}: the folder {str(folder) or '.'!r} does not exist",
            key="--output",
            expected="an existing folder; create it first",
        )
    if path.is_dir():
        raise AttnError(f"cannot write {path}: it is a folder", key="--output", expected="a file name")
    import tempfile

    try:
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise AttnError(f"cannot write into {folder}: {error.strerror}", key="--output") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in _chunks(document):
                handle.write(chunk)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def print_error(error: AttnError | str) -> None:
    """One line on stderr: `attncli: error: FILE:LINE: key: what is wrong (what was expected)`."""
    sys.stderr.write(f"attncli: error: {error}\n")
    sys.stderr.flush()
