"""The vocabulary every output shares: a document is a title and a sequence of blocks.

The walk-throughs (attncli.walkthroughs) turn results into documents; each format
(attncli.formats) draws every block type its own way. Blocks hold plain text and NumPy
arrays, never the syntax of a format: each format escapes text with its own rule (escape.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 1  # 1: the document's title; 2: a section


@dataclass(frozen=True)
class Paragraph:
    """A paragraph of prose at the top of a document."""

    text: str


@dataclass(frozen=True)
class Values:
    """A few `name = value` lines: "q = [1, 0]"."""

    pairs: Sequence[tuple[str, str]]


@dataclass(frozen=True)
class Table:
    """A table of text cells; `numeric` says per column whether it holds right-aligned numbers."""

    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    numeric: Sequence[bool]


@dataclass(frozen=True)
class Note:
    """A remark inside a section: what was left out, what a check found."""

    text: str


Block = Heading | Paragraph | Values | Table | Note


@dataclass(frozen=True)
class Document:
    title: str
    blocks: Sequence[Block]
    tidy: Table | None = None  # the one table a CSV file holds: every row of every section, tidy
