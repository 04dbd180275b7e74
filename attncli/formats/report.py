"""A report of titled sections (a few `name = value` lines, a table, notes) in every output format.

The tiled head (`run --block-size`) and the KV-cache decode (`attncli decode`) are such
reports: their builders format the numbers once, and this module only lays the text out.
Every cell is text from the builder; each format escapes it with its own rule (escape.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from attncli.document import escape


class Table(NamedTuple):
    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    numeric: Sequence[bool]  # per column: right-aligned numbers


class Section(NamedTuple):
    title: str
    lines: Sequence[tuple[str, str]] = ()  # (name, value): "q = [1, 0]"
    table: Table | None = None
    notes: Sequence[str] = ()


class Report(NamedTuple):
    title: str
    intro: Sequence[str]
    sections: Sequence[Section]
    csv: Table  # the one table a CSV file holds: every row of every section, tidy


def render(report: Report, fmt: str, *, to_file: bool) -> str:
    """The report in format `fmt` (any but json, whose documents are built from the data itself)."""
    if fmt == "markdown":
        return markdown(report)
    if fmt == "latex":
        return latex(report)
    if fmt == "csv":
        return csv(report)
    if fmt == "html":
        return html(report)
    if fmt == "svg":
        return svg(report)
    return terminal(report, to_file=to_file)


# -- plain text (terminal, -o file) ----------------------------------------------------------------


def text_lines(report: Report) -> list[str]:
    """The report as plain lines (no colour): tables drawn with spaces and a rule under the header."""
    out = [escape.visible(report.title), *map(escape.visible, report.intro)]
    for section in report.sections:
        out += ["", escape.visible(section.title)]
        out += [f"  {escape.visible(name)} = {escape.visible(value)}" for name, value in section.lines]
        if section.table is not None:
            out += ["  " + line for line in _aligned(section.table)]
        out += ["  " + escape.visible(note) for note in section.notes]
    return out


def _aligned(table: Table) -> list[str]:
    header = [escape.visible(cell) for cell in table.header]
    rows = [[escape.visible(cell) for cell in row] for row in table.rows]
    widths = [max(len(row[c]) for row in [header, *rows]) for c in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.rjust(w) if right else cell.ljust(w) for cell, w, right in zip(cells, widths, table.numeric)).rstrip()

    return [line(header), "  ".join("─" * w for w in widths), *map(line, rows)]


def terminal(report: Report, *, to_file: bool) -> str:
    """The report for the terminal: bold titles when colour is on, else the plain text."""
    from rich.text import Text

    from attncli.formats import terminal

    console = terminal.console(to_file=to_file)
    if console.color_system is None:
        return "\n".join(text_lines(report)) + "\n"
    parts: list[Text] = [Text(escape.visible(report.title), style="bold")]
    parts += [Text(escape.visible(line)) for line in report.intro]
    for section in report.sections:
        parts.append(Text("\n" + escape.visible(section.title), style="bold"))
        body = [f"  {escape.visible(name)} = {escape.visible(value)}" for name, value in section.lines]
        if section.table is not None:
            body += ["  " + line for line in _aligned(section.table)]
        if body:
            parts.append(Text("\n".join(body), no_wrap=True, overflow="ignore"))
        parts += [Text("  " + escape.visible(note), style="italic") for note in section.notes]
    return terminal.render(console, list(parts))


# -- Markdown ---------------------------------------------------------------------------------------


def markdown(report: Report, *, level: int = 1) -> str:
    """GFM: a heading per section (the report's title at `level`), values as a list, a pipe table, notes as paragraphs."""
    top, sub = "#" * level, "#" * min(6, level + 1)
    out = [f"{top} {escape.markdown(report.title)}", ""]
    for line in report.intro:
        out += [escape.markdown(line), ""]
    for section in report.sections:
        out += [f"{sub} {escape.markdown(section.title)}", ""]
        if section.lines:
            out += [f"- {escape.markdown(name)} = {escape.markdown(value)}" for name, value in section.lines] + [""]
        if section.table is not None:
            table = section.table
            out.append("| " + " | ".join(map(escape.markdown, table.header)) + " |")
            out.append("|" + "|".join("---:" if right else ":---" for right in table.numeric) + "|")
            out += ["| " + " | ".join(map(escape.markdown, row)) + " |" for row in table.rows]
            out.append("")
        for note in section.notes:
            out += [escape.markdown(note), ""]
    return "\n".join(out).rstrip("\n") + "\n"


# -- LaTeX ------------------------------------------------------------------------------------------


def latex(report: Report) -> str:
    """A LaTeX fragment for a plain `article`: a paragraph per section and a `tabular` for its table."""
    out = [r"\paragraph{" + _tex(report.title) + "}"]
    out += [_tex(line) + r"\par" for line in report.intro]
    for section in report.sections:
        out += ["", r"\paragraph{" + _tex(section.title) + "}"]
        out += [rf"{_tex(name)} $=$ {_tex(value)}\par" for name, value in section.lines]
        if section.table is not None:
            table = section.table
            columns = "".join("r" if right else "l" for right in table.numeric)
            out += [r"\par\noindent\begin{tabular}{" + columns + "}", " & ".join(map(_tex, table.header)) + r" \\ \hline"]
            out += [" & ".join(map(_tex, row)) + r" \\" for row in table.rows]
            out.append(r"\end{tabular}\par")
        out += [_tex(note) + r"\par" for note in section.notes]
    return "\n".join(out) + "\n"


def _tex(text: str) -> str:
    """Text-mode TeX showing `text` as written: escape.latex's math-mode runs inside $…$."""
    return "$" + escape.latex(text) + "$"


# -- CSV, HTML, SVG ---------------------------------------------------------------------------------


def csv(report: Report) -> str:
    """The report's tidy table: text cells guarded against spreadsheet formulas, numbers as they are."""
    import csv as csv_module
    import io

    buffer = io.StringIO()
    writer = csv_module.writer(buffer, lineterminator="\n")
    writer.writerow([escape.csv_cell(cell) for cell in report.csv.header])
    for row in report.csv.rows:
        writer.writerow([cell if numeric else escape.csv_cell(cell) for cell, numeric in zip(row, report.csv.numeric)])
    return buffer.getvalue()


TEXT_CLASS = ' class="attn-text"'
TEXT_CELLS = ".attncli td.attn-text { text-align: left; }\n"  # vectors and words in a report's table read from the left


def html(report: Report, *, fragment: bool = False) -> str:
    """Semantic HTML: a heading per section, a <table> with <th> headers; a page, or a fragment to paste."""
    from attncli.formats.htmltable import stylesheet

    body = [f"<h1>{escape.html(report.title)}</h1>", *(f"<p>{escape.html(line)}</p>" for line in report.intro)]
    for section in report.sections:
        body.append(f"<h2>{escape.html(section.title)}</h2>")
        if section.lines:
            items = "".join(f"<li>{escape.html(name)} = {escape.html(value)}</li>" for name, value in section.lines)
            body.append(f"<ul>{items}</ul>")
        if section.table is not None:
            table = section.table
            head = "".join(f'<th scope="col">{escape.html(cell)}</th>' for cell in table.header)
            rows = "\n".join(
                f'<tr><th scope="row">{escape.html(row[0])}</th>'
                + "".join(f"<td{'' if right else TEXT_CLASS}>{escape.html(cell)}</td>" for cell, right in zip(row[1:], table.numeric[1:]))
                + "</tr>"
                for row in table.rows
            )  # the first cell names the row; numbers right-aligned, text left
            body.append(f'<div class="attn-scroll"><table class="attn-matrix">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody></table></div>')
        body += [f"<p>{escape.html(note)}</p>" for note in section.notes]
    content = "\n".join(body)
    if fragment:
        return f'<div class="attncli">\n<style>\n{stylesheet(dark=False)}{TEXT_CELLS}</style>\n{content}\n</div>\n'
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n<meta name="color-scheme" content="light dark">\n'
        f"<title>{escape.html(report.title)}</title>\n<style>\n{stylesheet(page=True)}{TEXT_CELLS}</style>\n</head>\n"
        f'<body>\n<main class="attncli">\n{content}\n</main>\n</body>\n</html>\n'
    )


LINE_HEIGHT = 18
CHAR_WIDTH = 7.8  # a 13 px monospace character


def svg(report: Report) -> str:
    """The plain text as a self-contained SVG figure: one monospace <text> per line, nothing fetched."""
    lines = text_lines(report)
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
        f"<title>{escape.xml(report.title)}</title>\n"
        f'<rect width="100%" height="100%" fill="#ffffff"/>\n<g fill="#1a1a1a">\n{texts}\n</g>\n</svg>\n'
    )
