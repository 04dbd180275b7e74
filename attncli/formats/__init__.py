"""Output formats: the names of the formats and the options of rendering; one module per format.

A finished document is text, or (JSON, which can run to hundreds of megabytes) an iterator of
UTF-8 byte chunks. Each format's module is imported only when that format is asked for;
`attncli.api` chooses the module for a result. A document of blocks (`attncli.document.blocks`:
the tiled head, decode, dequant) is drawn by `render_document`, which hands it to its format's module.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from attncli.errors import keyword

if TYPE_CHECKING:
    from attncli.document import blocks

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


def render_document(
    document: blocks.Document,
    fmt: str,
    *,
    to_file: bool,
    fragment: bool = False,
    standalone: bool | None = None,
    heading_level: int = 1,
    figures: Sequence[blocks.Grid] = (),
    precision: int = 3,
) -> str:
    """The document in format `fmt` (any but json, whose documents are built from the data itself), drawn by that format's module.

    HTML is a page, or a `fragment` (standalone False); LaTeX a fragment of paragraphs and `$$` blocks, or an
    article (standalone True). `heading_level` places the top heading in Markdown and HTML (0 leaves it out).
    `figures`, when given, are the SVG (and are drawn in the HTML page too); without them SVG is the plain text.
    """
    if fmt == "markdown":
        from attncli.formats.markdown import document_markdown

        return document_markdown(document, level=heading_level)
    if fmt == "latex":
        from attncli.formats.latex import document_latex

        return document_latex(document, standalone=bool(standalone))
    if fmt == "csv":
        from attncli.formats.csvout import document_csv

        return document_csv(document)
    if fmt == "html":
        from attncli.formats.htmltable import document_html

        return document_html(document, fragment=fragment or standalone is False, level=heading_level, figures=figures, precision=precision)
    if fmt == "svg":
        from attncli.formats.publish import document_svg

        return document_svg(document, figures=figures, precision=precision)
    from attncli.formats.terminal import document_terminal

    return document_terminal(document, to_file=to_file)
