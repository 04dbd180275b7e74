"""Reading a file that someone else made (a checkpoint's config, index, tokenizer, weights headers): bounded, and one clear line when it fails.

Every read here:

- opens without blocking and refuses anything but a regular file (a FIFO named config.json,
  a symlink to /dev/zero, a device, a socket, a folder), before reading a byte;
- compares the file's size with the limit first, and never reads more than it;
- parses JSON with a nesting limit and a limit on the length of each number (Python turns a
  5,000-digit integer into a ValueError, and 1e999 into infinity), refusing NaN and Infinity,
  which are not JSON.

Each failure is an AttnError naming the file (as `shown`) and, where it can, the line or key.
Nothing here knows about checkpoints: GGUF files and any other untrusted file can use it too.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any, NamedTuple

from attncli.errors import AttnError


class JsonLimits(NamedTuple):
    """How large a JSON file may be, how deep it may nest, how long one number may be written."""

    max_bytes: int = 16 * 1024 * 1024
    max_depth: int = 64  # lists and objects inside each other; a tokenizer.json nests about 6 deep
    max_number_chars: int = 100  # digits, sign, point and exponent of one number


def open_regular(path: Path, shown: str, *, what: str = "a file") -> tuple[int, os.stat_result]:
    """An open descriptor of the regular file at `path` (symbolic links followed) and its stat, or an AttnError.

    O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as error:
        raise os_problem(error, shown, what=what) from None
    try:
        info = os.fstat(fd)
    except OSError as error:
        os.close(fd)
        raise os_problem(error, shown, what=what) from None
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise AttnError(f"this is {_kind(info.st_mode)}, not a regular file", file=shown, expected=what)
    return fd, info


def read_bytes(path: Path, shown: str, *, max_bytes: int, what: str = "a file", offset: int = 0, length: int | None = None) -> bytes:
    """The bytes of a regular file (or `length` bytes from `offset`), refused before reading when there would be more than `max_bytes`."""
    from attncli.sources import reading

    fd, info = open_regular(path, shown, what=what)
    try:
        wanted = max(info.st_size - offset, 0) if length is None else length
        if wanted > max_bytes:
            raise AttnError(
                f"{wanted:,} bytes to read, more than the {max_bytes:,} attncli reads of such a file", file=shown, expected=what
            )
        if offset + wanted > info.st_size:
            raise AttnError(f"the file ends after {info.st_size:,} bytes, before byte {offset + wanted:,}", file=shown, expected=what)
        data = bytearray()
        while len(data) < wanted:
            chunk = os.pread(fd, min(wanted - len(data), 1 << 20), offset + len(data))
            if not chunk:  # the file shrank while being read
                raise AttnError(f"the file ended after {offset + len(data):,} bytes while being read", file=shown, expected=what)
            data += chunk
        reading.note_read(path)
        return bytes(data)
    except OSError as error:
        raise os_problem(error, shown, what=what) from None
    finally:
        os.close(fd)


def read_json(path: Path, shown: str, *, what: str, limits: JsonLimits = JsonLimits()) -> Any:
    """The JSON value in a regular file, read through `read_bytes` and `parse_json`."""
    return parse_json(read_bytes(path, shown, max_bytes=limits.max_bytes, what=what), shown, what=what, limits=limits)


class _LongNumber(Exception):
    def __init__(self, text: str) -> None:
        self.text = text


def parse_json(data: bytes, shown: str, *, what: str, limits: JsonLimits = JsonLimits()) -> Any:
    """UTF-8 JSON bytes as Python values, or an AttnError naming the line (or key path) of the problem."""
    from attncli.sources import reading

    text = reading.decode(data, shown)

    def number(kind: type[int] | type[float]) -> Any:
        def parse(token: str) -> int | float:
            if len(token) > limits.max_number_chars:
                raise _LongNumber(token)
            value = kind(token)
            if value in (float("inf"), float("-inf")):
                raise _LongNumber(token)
            return value

        return parse

    def constant(token: str) -> Any:
        raise AttnError(f"{token} is not a JSON number", file=shown, line=_line_of(text, token), expected=what)

    try:
        value = json.loads(text, parse_int=number(int), parse_float=number(float), parse_constant=constant)
    except json.JSONDecodeError as error:
        raise AttnError(f"not JSON: {error.msg} (column {error.colno})", file=shown, line=error.lineno, expected=what) from None
    except _LongNumber as error:
        shown_number = error.text if len(error.text) <= 24 else error.text[:20] + "…"
        raise AttnError(
            f"the number {shown_number} ({len(error.text):,} characters) is beyond float64 or longer than "
            f"{limits.max_number_chars} characters",
            file=shown,
            line=_line_of(text, error.text[:40]),
            expected=what,
        ) from None
    except RecursionError:
        raise AttnError(f"the JSON nests deeper than the {limits.max_depth} levels attncli reads", file=shown, expected=what) from None
    too_deep = _deeper_than(value, limits.max_depth)
    if too_deep is not None:
        raise AttnError(
            f"the JSON nests deeper than the {limits.max_depth} levels attncli reads", file=shown, key=too_deep or None, expected=what
        )
    return value


def _deeper_than(value: Any, max_depth: int) -> str | None:
    """The key path of the first list or object nested more than `max_depth` deep ('' for the top), or None."""
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, dict | list):
            if depth > max_depth:
                return where
            pairs = item.items() if isinstance(item, dict) else enumerate(item, 1)
            for key, child in pairs:
                if isinstance(child, dict | list):
                    name = f"{where}[{key}]" if isinstance(key, int) else (f"{where}.{key}" if where else str(key))
                    stack.append((child, depth + 1, name))
    return None


def _line_of(text: str, fragment: str) -> int | None:
    at = text.find(fragment)
    return None if at < 0 else text.count("\n", 0, at) + 1


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def os_problem(error: OSError, shown: str, *, what: str) -> AttnError:
    """One line for an operating-system error met opening or reading an untrusted file."""
    from attncli.sources import reading

    if error.errno == errno.ENOENT:
        return AttnError("the file does not exist", file=shown, expected=what)
    if error.errno == errno.EISDIR:
        return AttnError("this is a folder, not a regular file", file=shown, expected=what)
    if error.errno == errno.ENXIO:
        return AttnError("this is a socket, not a regular file", file=shown, expected=what)
    return reading.os_error(error, shown)
