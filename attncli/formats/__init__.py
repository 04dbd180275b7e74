"""Output formats: the names of the formats, the options of rendering, and `render`; one module per format.

What a command shows is a page (`attncli.document.pages`: run, explain, report, heads, shade);
`render(page, options)` hands it to the format's module, which has a function per kind of page it
draws (`markdown.run`, `svg.heads` …). A finished document is text, or (JSON, which can run to
hundreds of megabytes) an iterator of UTF-8 byte chunks, or (PNG) the bytes of a binary file. Each format's module is imported only
when that format is asked for. A new format is its module and its line in `Format`.
"""

from __future__ import annotations

import enum
import importlib
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

from attncli.errors import AttnError, did_you_mean, keyword, option

if TYPE_CHECKING:
    from attncli.document import blocks
    from attncli.document.pages import Page

Document = str | Iterator[bytes] | bytes  # text, or UTF-8 chunks, or a binary file (PNG)


class Format(str, enum.Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    latex = "latex"
    csv = "csv"
    html = "html"
    svg = "svg"
    typst = "typst"
    png = "png"

    @property
    def extension(self) -> str:
        """The file extension `export` gives this format."""
        return {"table": "txt", "markdown": "md", "latex": "tex", "typst": "typ"}.get(self.value, self.value)

    def module(self) -> ModuleType:
        """The module that draws this format: one function per kind of page it can draw (attncli.document.pages)."""
        return importlib.import_module(f"attncli.formats.{_MODULES.get(self.value, self.value)}")


_MODULES = {"table": "terminal", "json": "jsonout", "csv": "csvout", "png": "pngout"}  # where a format's module is not named as the format


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
    show_path: bool = False  # a checkpoint's header: also where it was read from (a post names the model, not a local path)
    long_notes: bool = False  # a checkpoint's header: every note on how its layer was read, not only the short ones
    names: Callable[[str], str] = keyword  # how shown text names an option: the API's keyword; the command line passes its flag()
    interactive: bool = False  # HTML's map: a page to explore (formats/explorer.py) instead of the static page


def render(page: Page, options: Options) -> Document:
    """The page in `options.format`, drawn by that format's module: its function named as the page's kind (`markdown.run`).

    A format that has no drawing for the page's kind (heads in LaTeX) is one clear error naming the formats that have one.
    """
    options = _checked(options)
    draw = getattr(options.format.module(), page.kind, None)
    if draw is None:
        from attncli.document.pages import COMMANDS

        able = [f.value for f in Format if hasattr(f.module(), page.kind)]
        listed = ", ".join(able[:-1]) + " or " + able[-1]
        raise AttnError(f"{COMMANDS[page.kind]} prints {listed}, not {options.format.value}", key=option("format"), expected=listed)
    document: Document = draw(page, options)
    return document


def format_named(name: object) -> Format:
    """The format of that name ("typst"), or one AttnError listing the formats."""
    if isinstance(name, Format):
        return name
    if not isinstance(name, str) or name not in {f.value for f in Format}:
        hint = did_you_mean(name, [f.value for f in Format]) if isinstance(name, str) else ""
        raise AttnError(f"found {name!r}{hint}", key=option("format"), expected="one of " + ", ".join(f.value for f in Format))
    return Format(name)


def _checked(options: Options) -> Options:
    """`options` as render can use them, however they were built (`api.render_options` checks the same; a script may not use it)."""
    if not isinstance(options.format, Format):
        options = options._replace(format=format_named(options.format))
    level = options.heading_level
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 6:
        raise AttnError(f"found {level!r}", key=option("heading_level"), expected="a heading level from 0 (none) to 6")
    if options.stages is not None:
        from attncli.document.stages import parse

        parse(",".join(options.stages))  # a stage that does not exist is one error, not a page without it
    if options.interactive and options.format is not Format.html:
        raise AttnError(f"found {options.format.value}: the page to explore is HTML", key=option("interactive"), expected=f"{option('format')} html")
    if options.interactive and options.standalone is False:  # its script and styles are the page's own: no fragment to paste
        raise AttnError("found a fragment: the page to explore is one whole page", key=option("interactive"), expected=f"a page (the default), or a fragment without {option('interactive')}")
    return options


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
    """A document of blocks in format `fmt` (any but json, whose documents are built from the data itself).

    HTML is a page, or a `fragment` (standalone False); LaTeX a fragment of paragraphs and `$$` blocks, or an
    article (standalone True). `heading_level` places the top heading in Markdown and HTML (0 leaves it out).
    `figures`, when given, are the SVG (and are drawn in the HTML page too); without them SVG is the plain text.
    """
    from attncli.document.pages import ReportPage

    def no_data() -> dict[str, Any]:
        raise ValueError("a document of blocks has no JSON: its data is built from the result")

    page = ReportPage(lambda: document, lambda: figures, no_data, precision)
    options = Options(Format(fmt), to_file=to_file, standalone=False if fragment else standalone, heading_level=heading_level)
    text = render(page, options)
    assert isinstance(text, str)
    return text
