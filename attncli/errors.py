"""The one error type of attncli and the exit statuses it maps to."""

from __future__ import annotations

import enum


class ExitStatus(enum.IntEnum):
    """Exit statuses, named (after httpie/status.py)."""

    OK = 0
    ERROR = 1  # bad input: scenario, option value, output path
    USAGE = 2  # Click's own status for a malformed command line
    PARTIAL = 3  # `export`: some scenarios failed, the others were written
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
    BROKEN_PIPE = 141  # the reader of stdout went away (128 + SIGPIPE), as `cat` reports it


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
