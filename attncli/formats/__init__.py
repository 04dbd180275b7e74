"""Output formats: the names of the formats and the options of rendering; one module per format.

A finished document is text, or (JSON, which can run to hundreds of megabytes) an iterator of
UTF-8 byte chunks. Each format's module is imported only when that format is asked for;
`attncli.api` chooses the module for a result.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from typing import NamedTuple

from attncli.errors import keyword

Document = str | Iterator[bytes]  # text, or UTF-8 chunks


class Format(str, enum.Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    latex = "latex"
    csv = "csv"
    html = "html"
    svg = "svg"

    @property
    def extension(self) -> str:
        """The file extension `export` gives this format."""
        return {"table": "txt", "markdown": "md", "latex": "tex"}.get(self.value, self.value)


class Options(NamedTuple):
    """How to render: which format, stages and heads, how many decimals."""

    format: Format = Format.table
    stages: tuple[str, ...] | None = None  # None: the format's default
    heads: list[int] | None = None  # 1-based; None: every head
    precision: int | None = None  # None: the scenario's precision (full precision in JSON and CSV)
    full: bool = False  # tables: no shortening
    to_file: bool = False  # plain text, no terminal colours
    heatmap: bool = False  # tables: shade every L × L stage (the weights are shaded anyway in a terminal)
    standalone: bool | None = None  # a complete document (HTML page, LaTeX article); None: the format's default
    heading_level: int = 1  # Markdown and HTML: level of the top heading; 0 leaves it out (and the others start at 2)
    names: Callable[[str], str] = keyword  # how shown text names an option: the API's keyword; the command line passes its flag()
