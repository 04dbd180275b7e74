"""The one error type of attncli, the exit statuses it maps to, and how a message is kept to one safe line."""

from __future__ import annotations

import enum

# One rule for what is written out as a code, for every text shown, errors included: escape.visible
# (controls, line and paragraph separators, bidi marks and overrides, surrogates, U+FFFE and U+FFFF).
from attncli.escape import visible as visible


class ExitStatus(enum.IntEnum):
    """Exit statuses, named (after httpie/status.py)."""

    OK = 0
    ERROR = 1  # bad input: scenario, option value, output path; a failed write
    USAGE = 2  # Click's own status for a malformed command line
    PARTIAL = 3  # `export`: some scenarios failed, the others were written
    INTERNAL = 70  # a bug in attncli (EX_SOFTWARE of sysexits.h)
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
    BROKEN_PIPE = 141  # the reader of stdout went away (128 + SIGPIPE), as `cat` reports it


MAX_LINE = 300  # characters of an error line after "attncli: error: "

def shorten(text: str, width: int, *, keep_end: bool = False) -> str:
    """`text` cut to `width` characters with "…" where it was cut (at the start if `keep_end`, as for file names)."""
    if len(text) <= width:
        return text
    if width < 2:
        return "…"[:width]
    return "…" + text[-(width - 1) :] if keep_end else text[: width - 1] + "…"


class AttnError(Exception):
    """A problem the person can fix: says where (file, line, key path) and what was expected."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
        expected: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line  # 1-based, as editors number lines
        self.key = key
        self.expected = expected

    def located(self, *, file: str | None = None) -> AttnError:
        """Return this error with `file` filled in where it was not known yet."""
        if self.file is None and file is not None:
            self.file = file
        return self

    def __str__(self) -> str:
        where = ""
        if self.file is not None:
            where = self.file + (f":{self.line}" if self.line is not None else "") + ": "
        key = f"{self.key}: " if self.key else ""
        expected = f" (expected {self.expected})" if self.expected else ""
        return f"{where}{key}{self.message}{expected}"

    def one_line(self, width: int = MAX_LINE) -> str:
        """`str(self)` made safe to print: control characters visible, at most about `width` characters.

        When it is too long, the longest parts are shortened first: a file name keeps its end,
        a message and an expectation keep their start.
        """
        file = visible(self.file) if self.file is not None else None
        parts = [file or "", visible(self.key or ""), visible(self.message), visible(self.expected or "")]
        lengths = _fit([len(part) for part in parts], width - 20)  # 20: room for ":LINE: ", ": " and " (expected )"
        file_part, key, message, expected = (
            shorten(part, length, keep_end=index == 0) for index, (part, length) in enumerate(zip(parts, lengths))
        )
        where = ""
        if file is not None:
            where = file_part + (f":{self.line}" if self.line is not None else "") + ": "
        return where + (f"{key}: " if key else "") + message + (f" (expected {expected})" if expected else "")


def _fit(lengths: list[int], budget: int, smallest: int = 24) -> list[int]:
    """Lengths that sum to at most `budget`: every part longer than a common level is cut to it (never below `smallest`)."""
    if sum(lengths) <= budget:
        return lengths
    level = budget
    while level > smallest and sum(min(length, level) for length in lengths) > budget:
        level -= 1
    return [min(length, level) for length in lengths]
