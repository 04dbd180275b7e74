"""Reading a scenario file safely: never more than the size limit, from any kind of source, and one clear line when it cannot be had.

A regular file, a pipe (`/dev/stdin`), a device (`/dev/zero`) or a FIFO are all read the
same way, a block at a time, stopping as soon as the limit is passed or a NUL byte shows
that the source is binary. Every regular file read is remembered (device and inode), so
that a command cannot write its output over its own input (see `output.write_file`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from attncli.errors import AttnError, option, shorten

if TYPE_CHECKING:
    from attncli.sources.limits import Limits
    from attncli.sources.yamltree import Value

_BLOCK = 1 << 20  # bytes per read() call
_files_read: set[tuple[int, int]] = set()  # (st_dev, st_ino) of every regular file read by this command

_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),  # before UTF-16 LE: it starts with the same two bytes
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def files_read() -> frozenset[tuple[int, int]]:
    """(device, inode) of each regular file read since the command began."""
    return frozenset(_files_read)


def note_read(path: Path) -> None:
    """Count a file read by other means (a checkpoint's weights, mapped) among the inputs no output may replace."""
    with contextlib.suppress(OSError):
        info = os.stat(path)
        if stat.S_ISREG(info.st_mode):
            _files_read.add((info.st_dev, info.st_ino))


def forget_files_read() -> None:
    """Start a new command with nothing read (the CLI's error guard calls this)."""
    _files_read.clear()


def read_text(path: Path, shown: str, *, max_bytes: int) -> str:
    """The text of the file at `path` (named `shown` in messages), or an AttnError that says why it cannot be had."""
    return decode(read_bytes(path, shown, max_bytes=max_bytes), shown)


def read_bytes(path: Path, shown: str, *, max_bytes: int) -> bytes:
    """At most `max_bytes` bytes from a file, pipe or device; refused as soon as there are more, or a NUL byte arrives."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as error:
        raise os_error(error, shown, path=path) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise AttnError("this is a folder", file=shown, expected="a scenario file (export takes folders)")
        if stat.S_ISREG(info.st_mode):
            if info.st_size > max_bytes:
                raise _too_large(shown, max_bytes, size=info.st_size)
            _files_read.add((info.st_dev, info.st_ino))
        data = bytearray()
        while chunk := os.read(fd, min(_BLOCK, max_bytes + 1 - len(data))):
            if not data:
                _refuse_other_encodings(chunk, shown)
            if b"\x00" in chunk:
                line = data.count(b"\n") + chunk[: chunk.index(b"\x00")].count(b"\n") + 1
                raise AttnError("this is a binary file, not YAML text", file=shown, line=line, expected="a UTF-8 text file")
            data += chunk
            if len(data) > max_bytes:
                raise _too_large(shown, max_bytes, size=None if not stat.S_ISREG(info.st_mode) else os.fstat(fd).st_size)
        return bytes(data)
    except OSError as error:
        raise os_error(error, shown, path=path) from None
    finally:
        os.close(fd)


def decode(data: bytes, shown: str) -> str:
    """UTF-8 text (a UTF-8 byte-order mark is dropped), or an AttnError naming the first byte that is not."""
    _refuse_other_encodings(data, shown)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise AttnError(
            f"not UTF-8 text: byte 0x{data[error.start]:02x} cannot be decoded",
            file=shown,
            line=line,
            expected="a UTF-8 text file; save it as UTF-8",
        ) from None


def _refuse_other_encodings(start: bytes, shown: str) -> None:
    """A UTF-16 or UTF-32 file (byte-order mark, or ASCII with every other byte NUL) is named for what it is."""
    encoding = next((name for bom, name in _BOMS if start.startswith(bom)), None)
    head = start[:16]  # ASCII written as UTF-16 without a mark: every other byte is NUL
    if encoding is None and len(head) >= 4:
        even, odd = head[0::2], head[1::2]
        if (all(even) and not any(odd)) or (all(odd) and not any(even)):
            encoding = "UTF-16"
    if encoding is not None:
        raise AttnError(f"{encoding} text: save it as UTF-8", file=shown, line=1)


def _too_large(shown: str, max_bytes: int, *, size: int | None) -> AttnError:
    if size is not None:
        what = f"the file is {size:,} bytes, larger than the {max_bytes:,} a scenario may be"
    else:  # a pipe or a device: its size is not known, only that more came than may
        what = f"more than the {max_bytes:,} bytes a scenario may be came from it"
    return AttnError(what, file=shown, expected="a teaching-sized scenario")


def os_error(error: OSError, shown: str | None = None, *, path: Path | None = None) -> AttnError:
    """One clear line for an operating-system error met while reading `path` (shown as `shown`; both default to the error's file name)."""
    code = error.errno
    if path is None and isinstance(error.filename, str):
        path = Path(error.filename)
    if shown is None and path is not None:
        shown = str(path)
    if code == errno.ENOENT and path is not None and shown is not None:
        return _missing(path, shown)
    if code == errno.ENAMETOOLONG:
        return AttnError(_too_long(path), file=shorten(shown, 60, keep_end=True) if shown else None, expected="a shorter name")
    if code == errno.ELOOP:
        return AttnError(
            "the symbolic links of this path go round in a loop", file=shown, expected="a link that leads to a file"
        )
    if code == errno.ENOTDIR:
        return AttnError("a part of the path before the name is a file, not a folder", file=shown, expected="a path through folders")
    if code == errno.EISDIR:
        return AttnError("this is a folder", file=shown, expected="a scenario file (export takes folders)")
    if code == errno.ENXIO:
        return AttnError("this is a socket (or a device with nothing behind it), not a file", file=shown, expected="a scenario file")
    if code in (errno.EACCES, errno.EPERM):
        return AttnError("cannot be read: permission denied" + _closed_folder(path), file=shown)
    reason = (error.strerror or str(error)).lower()
    return AttnError(f"cannot be read: {reason}", file=shown)


def _missing(path: Path, shown: str) -> AttnError:

    from attncli.sources import builtin

    names = builtin.names()
    close = builtin.closest(path.name)
    hint = f"; did you mean the built-in {close!r}?" if close else ""
    return AttnError(
        f"no such file or built-in scenario{hint}",
        file=shown,
        expected=f"a path to a .yaml file or one of: {', '.join(names)}",
    )


def _too_long(path: Path | None) -> str:
    """Which part of the path is too long, and what the system allows."""
    if path is not None:
        longest = max(path.parts, key=len, default="")
        try:
            most = os.pathconf(_existing_folder(path), "PC_NAME_MAX")
        except (OSError, ValueError):
            most = 255
        if len(longest.encode()) > most:
            return f"a name in the path is {len(longest):,} characters long, more than the {most} a file name may have"
        return f"the path is {len(str(path)):,} characters long, more than the system allows"
    return "the file name is too long"


def _existing_folder(path: Path) -> Path:
    for folder in path.absolute().parents:
        if folder.is_dir():
            return folder
    return Path("/")


def _closed_folder(path: Path | None) -> str:
    """`: the folder X cannot be entered` when a folder on the way, not the file, refuses us."""
    if path is None:
        return ""
    effective = os.access in os.supports_effective_ids
    for folder in reversed(path.absolute().parents):
        try:
            os.stat(folder)
        except OSError:
            return ""
        if not os.access(folder, os.X_OK, effective_ids=effective):
            return f": the folder {str(folder)!r} cannot be entered"
    return ""


# -- refusing an over-limit scenario before it is all parsed ---------------------------------

_CONTEXT_KEY = re.compile(r"""context['"]?\s*:""")  # liberal: a false match only makes the check wait
_HEADS_LINE = re.compile(r"""heads['"]?[ \t]*:[ \t]*(\d{1,9})[ \t]*(?:#.*)?$""", re.MULTILINE)  # `heads: 8` at the start of a line


def heads_hint(text: str) -> int:
    """The `heads:` of a block-style scenario, found by scanning the text for a line that starts with it (1 if none).

    A line that starts in column 0 is a top-level key in block YAML (a block scalar's or a
    plain scalar's lines are indented), so the size check may count heads before they are
    parsed, even when `heads:` comes after the matrices. Only used to refuse early.
    """
    for start in _line_starts(text, "heads"):
        match = _HEADS_LINE.match(text, start)
        if match:
            return max(int(match.group(1)), 1)
    return 1


def _line_starts(text: str, word: str) -> Iterator[int]:
    """Where `word` (or it quoted) begins a line of `text`: str.find, not a regex tried at every position."""
    for prefix in (word, "'" + word, '"' + word):
        if text.startswith(prefix):
            yield 0
        at = text.find("\n" + prefix)
        while at >= 0:
            yield at + 1 + (len(prefix) - len(word))
            at = text.find("\n" + prefix, at + 1)


def size_guard(text: str, limits: Limits) -> Callable[[str, Value], None]:
    """For `yamltree.parse(on_top_level=...)`: refuse a scenario whose attention cells (heads × L_q × L_k) pass
    `limits.max_cells` as soon as its tokens are read, before its matrices (most of the file) are parsed.

    It only refuses what is certainly too large: heads count as 1 until `heads:` is read, and
    with a `context:` (cross-attention) it waits for the context's tokens. The validator still
    checks exactly afterwards.
    """
    from attncli.sources.yamltree import Map, Scalar, Seq

    def count(key: str, value: Value) -> int:
        if key == "tokens" and isinstance(value, Seq):
            return len(value.items)
        if key == "sentence" and isinstance(value, Scalar):
            from attncli.sources.words import split_sentence

            return len(split_sentence(value.text))
        return 0

    may_have_context = "context" in text and _CONTEXT_KEY.search(text) is not None  # `in` first: a regex search of 6 MB takes 0.2 s
    seen: dict[str, int] = {"heads": heads_hint(text)}
    where: list[tuple[str, Value]] = []

    def on_top_level(key: str, value: Value) -> None:
        if key in ("tokens", "sentence"):
            seen["queries"] = count(key, value)
            where.append((key, value))
        elif key == "heads" and isinstance(value, Scalar) and value.text.isdigit():
            seen["heads"] = max(int(value.text), 1)
        elif key == "context" and isinstance(value, Map):
            seen["keys"] = max((count(name, item) for name, item in value.items.items()), default=0)
        else:
            return
        queries = seen.get("queries", 0)
        keys = seen.get("keys", 0) if may_have_context else queries
        cells = seen["heads"] * queries * keys
        if cells > limits.max_cells and where:
            token_key, token_value = where[0]
            raise AttnError(
                f"{queries:,} token{'s' * (queries != 1)} × {keys:,} × {seen['heads']} head{'s' * (seen['heads'] != 1)} = {cells:,} attention cells, "
                f"more than the limit of {limits.max_cells:,}",
                line=token_value.line,
                key=token_key,
                expected=f"a smaller scenario, or raise the limit with {option('max_cells')}",
            )

    return on_top_level
