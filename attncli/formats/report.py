"""Documents of headings, paragraphs, `name = value` lines, tables, notes and steps, in every output format.

The tiled head (`run --block-size`) and the KV-cache decode (`attncli decode`) are such
documents: their builders (attncli.walkthroughs.online_report) format the numbers once, and
this module only lays the blocks out. Every cell is text from the builder; each format
escapes it with its own rule (escape.py). The terminal fits the tables to its width
(shortening `Vector` cells, then splitting columns); LaTeX is paragraphs and `$$` blocks (or an
article); SVG, and the HTML page beside its tables, draw the builder's `Grid` figures (gridfigure.py).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

from attncli.document import escape
from attncli.document.blocks import Block, Document, Grid, Heading, Note, Paragraph, Steps, Table, Values, Vector, step_lines


def render(
    document: Document,
    fmt: str,
    *,
    to_file: bool,
    fragment: bool = False,
    standalone: bool | None = None,
    heading_level: int = 1,
    figures: Sequence[Grid] = (),
    precision: int = 3,
) -> str:
    """The document in format `fmt` (any but json, whose documents are built from the data itself).

    HTML is a page, or a `fragment` (standalone False); LaTeX a fragment of paragraphs and `$$` blocks, or an
    article (standalone True). `heading_level` places the top heading in Markdown and HTML (0 leaves it out).
    `figures`, when given, are the SVG (and are drawn in the HTML page too); without them SVG is the plain text.
    """
    if fmt == "markdown":
        return markdown(document, level=heading_level)
    if fmt == "latex":
        return latex(document, standalone=bool(standalone))
    if fmt == "csv":
        return csv(document)
    if fmt == "html":
        return html(document, fragment=fragment or standalone is False, level=heading_level, figures=figures, precision=precision)
    if fmt == "svg":
        if figures:
            from attncli.formats.gridfigure import grids_svg

            return grids_svg(figures, precision=precision)
        return svg(document)
    return terminal(document, to_file=to_file)


# -- plain text (terminal, -o file) ----------------------------------------------------------------

KEEP = (6, 5, 4, 3, 2)  # numbers a vector keeps, tried in turn until its table fits the width


def text_lines(document: Document, width: int | None = None) -> list[str]:
    """The document as plain lines (no colour): tables drawn with spaces and a rule under the header.

    With a `width`, prose is wrapped to it with a hanging indent and a table too wide for it has its
    vectors shortened (the first numbers, …, the last, as `run` does) until it fits, or as far as they go.
    """
    return [line for line, _ in _styled_lines(document, width)]


def _styled_lines(document: Document, width: int | None) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for block in document.blocks:
        out += _text_block(block, width)
    return out


def _wrapped(text: str, width: int | None, indent: str = "", hang: str = "") -> list[str]:
    """`text` at `indent`, wrapped to `width` at spaces (never inside a word) with its next lines at `indent` + `hang`."""
    if width is None or len(indent) + len(text) <= width:
        return [indent + text]
    return textwrap.wrap(text, width=max(width, len(indent + hang) + 20), initial_indent=indent, subsequent_indent=indent + hang,
                         break_long_words=False, break_on_hyphens=False)  # fmt: skip


def _text_block(block: Block, width: int | None) -> list[tuple[str, str]]:
    if isinstance(block, Heading):
        return [(line, "bold") for line in ([] if block.level == 1 else [""]) + _wrapped(escape.visible(block.text), width)]
    if isinstance(block, Paragraph):
        return [(line, "") for line in _wrapped(escape.visible(block.text), width)]
    if isinstance(block, Values):
        out = []
        for name, value in block.pairs:
            shown = escape.visible(_fitted_value(name, value, width))
            out += [(line, "") for line in _wrapped(f"{escape.visible(name)} = {shown}", width, "  ", " " * (len(escape.visible(name)) + 3))]
        return out
    if isinstance(block, Table):
        return [(("  " + line).rstrip(), "") for line in _aligned(block, None if width is None else width - 2)]
    if isinstance(block, Steps):
        lines: list[tuple[str, str]] = []
        for number, step in enumerate(block.steps, 1):
            lines += [("", ""), (escape.visible(f"Step {number} · {step.title}   {step.formula}"), "bold")]
            lines += [("  " + escape.visible(line), "") for line in step_lines(step, block.precision)]
            lines += [(line, "italic") for note in step.notes for line in _wrapped(escape.visible(note), width, "  ", "  ")]
        return lines
    return [(line, "italic") for line in _wrapped(escape.visible(block.text), width, "  ", "  ")]


def _fitted_value(name: str, value: str, width: int | None) -> str:
    """A vector value shortened until `  name = value` fits the width (or as far as it goes)."""
    if width is None or not isinstance(value, Vector):
        return value
    for keep in KEEP:
        shown = value.shortened(keep)
        if len(name) + len(shown) + 5 <= width:
            return shown
    return value.shortened(KEEP[-1])


def _aligned(table: Table, width: int | None = None) -> list[str]:
    """The table's lines; one too wide for `width` has its vectors shortened, then its columns split into
    tables of their own, each led by the first column, as `run` splits a wide matrix."""
    header = [escape.visible(cell) for cell in table.header]
    plain = [[escape.visible(cell) for cell in row] for row in table.rows]
    shortenable = [(r, c) for r, row in enumerate(table.rows) for c, cell in enumerate(row) if isinstance(cell, Vector) and not cell.fixed]
    rows = plain
    for keep in (None, *KEEP):
        if keep is not None:
            rows = [list(row) for row in plain]
            for r, c in shortenable:
                cell = table.rows[r][c]
                assert isinstance(cell, Vector)
                rows[r][c] = escape.visible(cell.shortened(keep))
        widths = [max(len(row[c]) for row in [header, *rows]) for c in range(len(header))]
        if width is None or sum(widths) + 2 * (len(widths) - 1) <= width or not shortenable:
            break
    columns = list(range(len(header)))
    if width is None or sum(widths) + 2 * (len(widths) - 1) <= width:
        return _table_lines(header, rows, widths, table.numeric, columns)
    groups: list[list[int]] = [[0]]
    for c in columns[1:]:
        if len(groups[-1]) > 1 and sum(widths[i] + 2 for i in groups[-1]) + widths[c] > width:
            groups.append([0])
        groups[-1].append(c)
    out: list[str] = []
    for group in groups:
        out += [""] * bool(out) + _table_lines(header, rows, widths, table.numeric, group)
    return out


def _table_lines(header: Sequence[str], rows: Sequence[Sequence[str]], widths: Sequence[int], numeric: Sequence[bool],
                 columns: Sequence[int]) -> list[str]:  # fmt: skip
    """The header, a rule and the rows of the chosen columns, padded to `widths`: numbers to the right, text to the left."""

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cells[c].rjust(widths[c]) if numeric[c] else cells[c].ljust(widths[c]) for c in columns).rstrip()

    return [line(header), "  ".join("─" * widths[c] for c in columns), *map(line, rows)]


def terminal(document: Document, *, to_file: bool) -> str:
    """The document for the terminal, fitted to its width: bold titles, italic notes when colour is on, else the plain text."""
    from rich.text import Text

    from attncli.formats import terminal as term

    console = term.console(to_file=to_file)
    width = console.width
    if console.color_system is None:
        return "\n".join(text_lines(document, width)) + "\n"
    parts: list[Text] = []
    for line, style in _styled_lines(document, width):
        parts.append(Text(line, style=style, no_wrap=True, overflow="ignore"))
    return term.render(console, list(parts))


# -- Markdown ---------------------------------------------------------------------------------------


def markdown(document: Document, *, level: int = 1) -> str:
    """GFM: the top heading at `level` (0 leaves it out, the sections then at 2), values as a list, a pipe table, paragraphs and notes as paragraphs."""
    out: list[str] = []
    for block in document.blocks:
        if isinstance(block, Heading):
            if block.level == 1 and level == 0:
                continue
            out += [f"{'#' * min(6, max(level, 1) + block.level - 1)} {escape.markdown(block.text)}", ""]
        elif isinstance(block, Paragraph | Note):
            out += [escape.markdown(block.text), ""]
        elif isinstance(block, Values):
            if block.pairs:
                out += [f"- {escape.markdown(name)} = {escape.markdown(value)}" for name, value in block.pairs] + [""]
        elif isinstance(block, Steps):
            from attncli.formats.markdown import steps_markdown

            out += steps_markdown(block, "#" * min(6, max(level, 1) + 1))[1:] + [""]
        else:
            out.append("| " + " | ".join(map(escape.markdown, block.header)) + " |")
            out.append("|" + "|".join("---:" if right else ":---" for right in block.numeric) + "|")
            out += ["| " + " | ".join(map(escape.markdown, row)) + " |" for row in block.rows]
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


# -- LaTeX ------------------------------------------------------------------------------------------


def latex(document: Document, *, standalone: bool = False) -> str:
    r"""Text paragraphs and `$$` display blocks, a blank line between them; an article when `standalone`.

    A fragment pastes into a LaTeX document and into a Markdown post alike (each `$$` block renders on
    its own in KaTeX and MathJax, each paragraph is text): headings are paragraphs of their own,
    `name = value` lines paragraphs, tables `array`s in `$$` blocks. The article has the title, a
    `\subsection*` per section, and each block fitted to the page width.
    """
    from attncli.formats import latex as tex
    from attncli.formats import texmatrix

    out: list[str] = []
    for block in document.blocks:
        if isinstance(block, Heading):
            if block.level == 1 and standalone:
                continue  # the article's \maketitle
            out += ["", r"\subsection*{" + tex.prose(block.text) + "}" if standalone and block.level > 1 else tex.prose(block.text)]
        elif isinstance(block, Paragraph | Note):
            out += ["", tex.prose(block.text)]
        elif isinstance(block, Values):
            vectors = [(name, value) for name, value in block.pairs if _math_vector(value)]
            if vectors:
                rows = [f"{_symbol(name)} &= {_cell(value, first=False)}" for name, value in vectors]
                out += ["", tex.block(r"\begin{aligned} " + r" \\ ".join(rows) + r" \end{aligned}")]
            out += [line for name, value in block.pairs if not _math_vector(value) for line in ("", tex.prose(f"{name} = {value}"))]
        elif isinstance(block, Steps):
            out += list(tex.explain_steps(block, standalone=standalone))
        else:
            columns = "".join("r" if right else "l" for right in block.numeric)
            header = " & ".join(map(_mixed, block.header))
            rows = [" & ".join(_cell(cell, first=c == 0) for c, cell in enumerate(row)) for row in block.rows]
            body = header + r" \\ \hline " + r" \\ ".join(rows)
            out += ["", tex.block(r"\begin{array}{" + columns + "} " + body + r" \end{array}")]
    while out and not out[0]:
        out.pop(0)
    if standalone:
        title = [r"\title{" + tex.prose(document.title) + "}", r"\date{}", r"\maketitle"]  # prose: breaks across lines, symbols as math
        lines = [texmatrix.document_start(), *title, *map(texmatrix.document_line, out), texmatrix.DOCUMENT_END]
        return "\n".join(lines) + "\n"
    return "\n".join(out) + "\n"


_MATH = {"−": "-", "×": r"\times", "·": r"\cdot", "Σ": r"\Sigma", "∞": r"\infty", "…": r"\ldots", "≈": r"\approx", "→": r"\to",
         "–": r"\text{--}"}  # fmt: skip
_NUMERIC = frozenset("0123456789.,[]()+- −…∞")


_COUNT = re.compile(r" \((\d+)( numbers)?\)$")  # "[0.1, …, 0.9] (64 numbers)": how many a shortened vector has


def _cell(cell: str, *, first: bool) -> str:
    """A table cell in math mode: the row's name (the first cell) as written, numbers and vectors as math, words as text."""
    if not cell:
        return ""
    count = _COUNT.search(cell)
    numbers = cell[: count.start()] if count else cell
    if first or not set(numbers) <= _NUMERIC:
        return _mixed(cell)
    math = "".join(_MATH.get(c, c) for c in numbers.replace(", ", ",\\,"))
    return math + (r"\;\text{(" + count.group(1) + (count.group(2) or "") + ")}" if count else "")


MAX_MATH_VECTOR = 8  # numbers of a vector set as math in an `aligned` row; a longer one (--full) is a paragraph, which breaks across lines


def _math_vector(value: str) -> bool:
    return isinstance(value, Vector) and (not value.fixed or value.size <= MAX_MATH_VECTOR)


def _symbol(name: str) -> str:
    """A value's name in math: a single letter as a variable (q, k, v), anything else as text."""
    return name if len(name) == 1 and name.isascii() and name.isalpha() else _mixed(name)


def _mixed(text: str) -> str:
    """Words as written (`escape.latex`) with the symbols of `_MATH` as math."""
    out: list[str] = []
    run: list[str] = []
    for c in text:
        if c in _MATH:
            if run:
                out.append(escape.latex("".join(run)))
                run.clear()
            out.append(_MATH[c])
        else:
            run.append(c)
    if run:
        out.append(escape.latex("".join(run)))
    return "".join(out)


# -- CSV, HTML, SVG ---------------------------------------------------------------------------------


def csv(document: Document) -> str:
    """The document's tidy table: text cells guarded against spreadsheet formulas, numbers as they are."""
    import csv as csv_module
    import io

    tidy = document.tidy
    assert tidy is not None, "a document written as CSV has a tidy table"
    buffer = io.StringIO()
    writer = csv_module.writer(buffer, lineterminator="\n")
    writer.writerow([escape.csv_cell(cell) for cell in tidy.header])
    for row in tidy.rows:
        writer.writerow([cell if numeric else escape.csv_cell(cell) for cell, numeric in zip(row, tidy.numeric)])
    return buffer.getvalue()


TEXT_CLASS = ' class="attn-text"'
TEXT_CELLS = (".attncli td.attn-text, .attncli th.attn-text { text-align: left; }\n"  # vectors and words in a table read from the left
              ".attncli figure.attn-figure { margin: 1em 0; overflow-x: auto; }\n")  # fmt: skip


def html(document: Document, *, fragment: bool = False, level: int = 1, figures: Sequence[Grid] = (), precision: int = 3) -> str:
    """Semantic HTML: a heading per section, a <table> with <th> headers, the figures after the introduction; a page, or a fragment to paste.

    The top heading is at `level` (0 leaves it out, the sections then at <h2>), the sections one below.
    """
    from attncli.formats.htmltable import page

    body: list[str] = []
    pending = list(figures)
    for block in document.blocks:
        if pending and isinstance(block, Heading | Values | Table) and not (isinstance(block, Heading) and block.level == 1):
            from attncli.formats.gridfigure import grids_svg

            body.append('<figure class="attn-figure">' + grids_svg(pending, precision=precision, dark=not fragment).rstrip("\n") + "</figure>")
            pending = []
        if isinstance(block, Heading):
            if block.level == 1 and level == 0:
                continue
            h = min(6, max(level, 1) + block.level - 1)
            body.append(f"<h{h}>{escape.html(block.text)}</h{h}>")
        elif isinstance(block, Paragraph | Note):
            body.append(f"<p>{escape.html(block.text)}</p>")
        elif isinstance(block, Values):
            if block.pairs:
                items = "".join(f"<li>{escape.html(name)} = {escape.html(value)}</li>" for name, value in block.pairs)
                body.append(f"<ul>{items}</ul>")
        elif isinstance(block, Steps):
            for number, step in enumerate(block.steps, 1):
                sub = min(6, max(level, 1) + 2)
                body.append(f"<h{sub}>{escape.html(f'Step {number}: {step.title}   {step.formula}')}</h{sub}>")
                if lines := step_lines(step, block.precision):
                    body.append('<pre class="attn-steps">' + "\n".join(escape.html(line) for line in lines) + "</pre>")
                body += [f"<p>{escape.html(note)}</p>" for note in step.notes]
        else:
            head = "".join(f'<th scope="col"{"" if right or c == 0 else TEXT_CLASS}>{escape.html(cell)}</th>'
                           for c, (cell, right) in enumerate(zip(block.header, block.numeric)))  # fmt: skip
            rows = "\n".join(
                f'<tr><th scope="row">{escape.html(row[0])}</th>'
                + "".join(f"<td{'' if right else TEXT_CLASS}>{escape.html(cell)}</td>" for cell, right in zip(row[1:], block.numeric[1:]))
                + "</tr>"
                for row in block.rows
            )  # the first cell names the row; numbers right-aligned, text left
            body.append(f'<div class="attn-scroll"><table class="attn-matrix">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody></table></div>')
    return page("\n".join(body), fragment=fragment, title=document.title, dark=not fragment, css=TEXT_CELLS)


LINE_HEIGHT = 18
CHAR_WIDTH = 7.8  # a 13 px monospace character


def svg(document: Document) -> str:
    """The plain text as a self-contained SVG figure: one monospace <text> per line, nothing fetched."""
    lines = text_lines(document)
    width = int(max(map(len, lines)) * CHAR_WIDTH) + 32
    height = len(lines) * LINE_HEIGHT + 32
    bold = ' font-weight="bold"'
    texts = "\n".join(
        f'<text x="16" y="{24 + i * LINE_HEIGHT}"{bold if i == 0 else ""} xml:space="preserve">{escape.xml(line)}</text>'
        for i, line in enumerate(lines)
        if line
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="ui-monospace, SFMono-Regular, Menlo, Consolas, monospace" font-size="13">\n'
        f"<title>{escape.xml(document.title)}</title>\n"
        f'<rect width="100%" height="100%" fill="#ffffff"/>\n<g fill="#1a1a1a">\n{texts}\n</g>\n</svg>\n'
    )
