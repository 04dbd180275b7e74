"""Documents of headings, paragraphs, `name = value` lines, tables, notes and steps, in every output format.

The tiled head (`run --block-size`) and the KV-cache decode (`attncli decode`) are such
documents: their builders (attncli.walkthroughs.online_report) format the numbers once, and
this module only lays the blocks out. Every cell is text from the builder; each format
escapes it with its own rule (escape.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from attncli.document import escape
from attncli.document.blocks import Block, Document, Heading, Note, Paragraph, Steps, Table, Values, step_lines


def render(document: Document, fmt: str, *, to_file: bool, fragment: bool = False) -> str:
    """The document in format `fmt` (any but json, whose documents are built from the data itself); HTML as a page or a `fragment`."""
    if fmt == "markdown":
        return markdown(document)
    if fmt == "latex":
        return latex(document)
    if fmt == "csv":
        return csv(document)
    if fmt == "html":
        return html(document, fragment=fragment)
    if fmt == "svg":
        return svg(document)
    return terminal(document, to_file=to_file)


# -- plain text (terminal, -o file) ----------------------------------------------------------------


def text_lines(document: Document) -> list[str]:
    """The document as plain lines (no colour): tables drawn with spaces and a rule under the header."""
    out: list[str] = []
    for block in document.blocks:
        out += _text_block(block)
    return out


def _text_block(block: Block) -> list[str]:
    if isinstance(block, Heading):
        return [escape.visible(block.text)] if block.level == 1 else ["", escape.visible(block.text)]
    if isinstance(block, Paragraph):
        return [escape.visible(block.text)]
    if isinstance(block, Values):
        return [f"  {escape.visible(name)} = {escape.visible(value)}" for name, value in block.pairs]
    if isinstance(block, Table):
        return ["  " + line for line in _aligned(block)]
    if isinstance(block, Steps):
        out: list[str] = []
        for number, step in enumerate(block.steps, 1):
            out += ["", escape.visible(f"Step {number} · {step.title}   {step.formula}")]
            out += ["  " + escape.visible(line) for line in step_lines(step, block.precision)]
            out += ["  " + escape.visible(note) for note in step.notes]
        return out
    return ["  " + escape.visible(block.text)]


def _aligned(table: Table) -> list[str]:
    header = [escape.visible(cell) for cell in table.header]
    rows = [[escape.visible(cell) for cell in row] for row in table.rows]
    widths = [max(len(row[c]) for row in [header, *rows]) for c in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.rjust(w) if right else cell.ljust(w) for cell, w, right in zip(cells, widths, table.numeric)).rstrip()

    return [line(header), "  ".join("─" * w for w in widths), *map(line, rows)]


def terminal(document: Document, *, to_file: bool) -> str:
    """The document for the terminal: bold titles, italic notes when colour is on, else the plain text."""
    from rich.console import RenderableType
    from rich.text import Text

    from attncli.formats import terminal as term
    from attncli.formats.narration import steps_renderables

    console = term.console(to_file=to_file)
    if console.color_system is None:
        return "\n".join(text_lines(document)) + "\n"
    parts: list[RenderableType] = []
    for block in document.blocks:
        if isinstance(block, Heading):
            parts.append(Text(escape.visible(block.text) if block.level == 1 else "\n" + escape.visible(block.text), style="bold"))
        elif isinstance(block, Paragraph):
            parts.append(Text(escape.visible(block.text)))
        elif isinstance(block, Note):
            parts.append(Text("  " + escape.visible(block.text), style="italic"))
        elif isinstance(block, Values) and not block.pairs:
            continue
        elif isinstance(block, Steps):
            parts += steps_renderables(block)
        else:
            parts.append(Text("\n".join(_text_block(block)), no_wrap=True, overflow="ignore"))
    return term.render(console, list(parts))


# -- Markdown ---------------------------------------------------------------------------------------


def markdown(document: Document, *, level: int = 1) -> str:
    """GFM: the headings at `level` and below, values as a list, a pipe table, paragraphs and notes as paragraphs."""
    out: list[str] = []
    for block in document.blocks:
        if isinstance(block, Heading):
            out += [f"{'#' * min(6, level + block.level - 1)} {escape.markdown(block.text)}", ""]
        elif isinstance(block, Paragraph | Note):
            out += [escape.markdown(block.text), ""]
        elif isinstance(block, Values):
            if block.pairs:
                out += [f"- {escape.markdown(name)} = {escape.markdown(value)}" for name, value in block.pairs] + [""]
        elif isinstance(block, Steps):
            from attncli.formats.markdown import steps_markdown

            out += steps_markdown(block, "#" * min(6, level + 1))[1:] + [""]
        else:
            out.append("| " + " | ".join(map(escape.markdown, block.header)) + " |")
            out.append("|" + "|".join("---:" if right else ":---" for right in block.numeric) + "|")
            out += ["| " + " | ".join(map(escape.markdown, row)) + " |" for row in block.rows]
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


# -- LaTeX ------------------------------------------------------------------------------------------


def latex(document: Document) -> str:
    """A LaTeX fragment for a plain `article`: a paragraph per heading and a `tabular` for a table."""
    out: list[str] = []
    for block in document.blocks:
        if isinstance(block, Heading):
            out += ([] if block.level == 1 else [""]) + [r"\paragraph{" + _tex(block.text) + "}"]
        elif isinstance(block, Paragraph | Note):
            out.append(_tex(block.text) + r"\par")
        elif isinstance(block, Values):
            out += [rf"{_tex(name)} $=$ {_tex(value)}\par" for name, value in block.pairs]
        elif isinstance(block, Steps):
            from attncli.formats.latex import steps_latex

            out += steps_latex(block)
        else:
            columns = "".join("r" if right else "l" for right in block.numeric)
            out += [r"\par\noindent\begin{tabular}{" + columns + "}", " & ".join(map(_tex, block.header)) + r" \\ \hline"]
            out += [" & ".join(map(_tex, row)) + r" \\" for row in block.rows]
            out.append(r"\end{tabular}\par")
    return "\n".join(out) + "\n"


def _tex(text: str) -> str:
    """Text-mode TeX showing `text` as written: escape.latex's math-mode runs inside $…$."""
    return "$" + escape.latex(text) + "$"


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
TEXT_CELLS = ".attncli td.attn-text { text-align: left; }\n"  # vectors and words in a table read from the left


def html(document: Document, *, fragment: bool = False) -> str:
    """Semantic HTML: a heading per section, a <table> with <th> headers; a page, or a fragment to paste."""
    from attncli.formats.htmltable import page

    body: list[str] = []
    for block in document.blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{escape.html(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph | Note):
            body.append(f"<p>{escape.html(block.text)}</p>")
        elif isinstance(block, Values):
            if block.pairs:
                items = "".join(f"<li>{escape.html(name)} = {escape.html(value)}</li>" for name, value in block.pairs)
                body.append(f"<ul>{items}</ul>")
        elif isinstance(block, Steps):
            for number, step in enumerate(block.steps, 1):
                body.append(f"<h3>{escape.html(f'Step {number}: {step.title}   {step.formula}')}</h3>")
                if lines := step_lines(step, block.precision):
                    body.append('<pre class="attn-steps">' + "\n".join(escape.html(line) for line in lines) + "</pre>")
                body += [f"<p>{escape.html(note)}</p>" for note in step.notes]
        else:
            head = "".join(f'<th scope="col">{escape.html(cell)}</th>' for cell in block.header)
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
