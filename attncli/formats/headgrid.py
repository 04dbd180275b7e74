"""The head map drawn: every layer × head as a small heatmap (SVG, an HTML page, the terminal), the statistics as a table and CSV.

Input is plain data (`HeadGrid`, `HeadTable` of attncli.document.maps), built by attncli.walkthroughs.heads. Thumbnails
are shaded on the weights' own scale 0 … 1 with the palette's ramps (light, and dark under
`prefers-color-scheme: dark`). The SVG draws each head's cells of one shade as one <path>, so
a 30 × 9 map stays small; the HTML page adds to each thumbnail row a tooltip: its query tokens and the keys
that take most of its weight.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from attncli.document import escape
from attncli.document.maps import SHORT, HeadGrid, HeadTable
from attncli.document.numbers import fixed, significant
from attncli.formats import palette
from attncli.formats.htmltable import headings, page

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.segment import Segment

FONTS = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
THUMB = 48  # px, one head's square
GAP = 6  # px between heads
LABEL_W = 44  # px, the layer labels' column
HEADER_H = 64  # px, the title and the heads' numbers
TERMINAL_RAMP = " ·:░▒▒▓█"  # one character per palette level, without colour
TERMINAL_COLS, TERMINAL_ROWS = 6, 3  # a head in the terminal: up to 6 characters × 3 lines (characters are about twice as tall as wide)
TERMINAL_MIN_COLS = 4  # narrower heads than this wrap into further bands instead


# -- SVG and HTML ---------------------------------------------------------------------------------


def grid_svg(grid: HeadGrid, *, tooltips: bool = False, standalone: bool = True) -> str:
    """All heads as one SVG; `tooltips` adds each thumbnail row's tokens as a hover text (larger: for the HTML page)."""
    from attncli.formats.fontmetrics import text_width

    layers, H = grid.thumbnails.shape[:2]
    width = round(max(LABEL_W + H * (THUMB + GAP) + 8, text_width(grid.title, 14, bold=True) + 16, text_width(grid.subtitle, 11) + 16))
    height = HEADER_H + layers * (THUMB + GAP) + 8
    head = '<?xml version="1.0" encoding="UTF-8"?>\n' if standalone else ""
    out = [
        f'{head}<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-labelledby="attncli-heads-title" font-family="{FONTS}" shape-rendering="crispEdges">',
        f'<title id="attncli-heads-title">{escape.xml(grid.title)}</title>',
        f"<style>{_svg_stylesheet()}</style>",
        f'<rect class="bg" width="100%" height="100%" fill="{palette.LIGHT.background}"/>',
        f'<text class="fg" x="8" y="20" font-size="14" font-weight="600" fill="{palette.LIGHT.text}">{escape.xml(grid.title)}</text>',
        f'<text class="fg" x="8" y="38" font-size="11" fill="{palette.LIGHT.text}">{escape.xml(grid.subtitle)}</text>',
    ]
    for h in range(H):
        x = LABEL_W + h * (THUMB + GAP) + THUMB / 2
        out.append(f'<text class="fg" x="{x:.0f}" y="{HEADER_H - 8}" text-anchor="middle" font-size="11" fill="{palette.LIGHT.text}">H{h + 1}</text>')
    for li in range(layers):
        y = HEADER_H + li * (THUMB + GAP)
        out.append(f'<text class="fg" x="{LABEL_W - 6}" y="{y + THUMB / 2 + 4:.0f}" text-anchor="end" font-size="11" '
                   f'fill="{palette.LIGHT.text}">L{grid.first_layer + li}</text>')  # fmt: skip
        for h in range(H):
            x = LABEL_W + h * (THUMB + GAP)
            out.append(_thumbnail(grid, li, h, x, y, tooltips))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _thumbnail(grid: HeadGrid, li: int, h: int, x: float, y: float, tooltips: bool) -> str:
    """One head: its cells of each shade as one path of horizontal runs, in cell units scaled to THUMB px; rows' tooltips if asked."""
    cells = grid.thumbnails[li, h]  # (s, s)
    s = cells.shape[0]
    tip = escape.xml(grid.tips[li][h])
    parts = [f'<g transform="translate({x:.0f} {y:.0f})"><title>{tip}</title>',
             f'<rect class="l0" width="{THUMB}" height="{THUMB}" fill="{palette.LIGHT.shades[0]}"/>',
             f'<g transform="scale({THUMB / s:.6g})">']  # fmt: skip
    levels = np.minimum(palette.LEVELS - 1, (np.clip(cells, 0.0, 1.0) * palette.LEVELS).astype(int))  # palette.level, vectorised
    for level in range(1, palette.LEVELS):
        runs = []
        for r in range(s):
            c = 0
            while c < s:
                if levels[r, c] != level:
                    c += 1
                    continue
                start = c
                while c < s and levels[r, c] == level:
                    c += 1
                runs.append(f"M{start} {r}h{c - start}v1h-{c - start}z")
        if runs:
            parts.append(f'<path class="l{level}" fill="{palette.LIGHT.shades[level]}" d="{"".join(runs)}"/>')
    if tooltips:  # one transparent band per query row: its tokens and where most of its weight goes
        L = len(grid.tokens)
        for r in range(s):
            top = np.argsort(-cells[r], kind="stable")[:3]
            keys = ", ".join(f"{_span(grid.tokens, int(c), s, L)} {fixed(cells[r, c], 2)}" for c in top if cells[r, c] > 0)
            parts.append(f'<rect y="{r}" width="{s}" height="1" fill="transparent"><title>{escape.xml(_span(grid.tokens, r, s, L))} → {escape.xml(keys)}</title></rect>')
    parts.append(f'</g><rect class="frame" width="{THUMB}" height="{THUMB}" fill="none" stroke="{palette.LIGHT.text}" stroke-width="0.5"/></g>')
    return "".join(parts)


def _span(tokens: Sequence[str], index: int, s: int, L: int) -> str:
    """The token (or tokens, when the thumbnail shrank them) that row or column `index` of an s-cell thumbnail stands for."""
    if s == L:
        return f"{index + 1} {escape.visible(tokens[index])}"
    edges = np.linspace(0, L, s + 1).round().astype(int)
    first, last = int(edges[index]), int(edges[index + 1]) - 1
    if first == last:
        return f"{first + 1} {escape.visible(tokens[first])}"
    return f"{first + 1}–{last + 1} {escape.visible(tokens[first])} … {escape.visible(tokens[last])}"


def _svg_stylesheet() -> str:
    dark = palette.DARK
    rules = [f".bg{{fill:{dark.background}}}", f".fg{{fill:{dark.text}}}", f".frame{{stroke:{dark.text}}}"]
    rules += [f".l{i}{{fill:{shade}}}" for i, shade in enumerate(dark.shades)]
    return "@media (prefers-color-scheme: dark){" + " ".join(rules) + "}"


CODE = ".attncli code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.9em; }\n"  # the commands beside the readings


def grid_html(grid: HeadGrid, table: HeadTable, *, precision: int = 3, fragment: bool = False, level: int = 1) -> str:
    """A self-contained page in run's stylesheet (`htmltable.page`, light and dark), or a fragment to paste into a post: the grid
    (tokens on hover), the notable heads with their commands, and the statistics table; its title a heading at `level` (0: none),
    its sections one below."""
    readings = "\n".join(f"<li>{escape.html(text)}" + (f"<br><code>{escape.html(command)}</code>" if command else "") + "</li>"
                         for text, command in table.readings)  # fmt: skip
    header = "".join(f'<th scope="col" title="{escape.html(c)}">{escape.html(SHORT.get(c, c))}</th>' for c in table.columns)
    body = "\n".join("<tr>" + "".join(f"<td>{escape.html(statistic(v, precision, table.general))}</td>" for v in row) + "</tr>" for row in table.rows)
    top, section = headings(level)
    return page(
        top(grid.title)
        + f'<div class="attn-scroll">\n{grid_svg(grid, tooltips=True, standalone=False)}</div>\n'
        f'<p class="attn-legend">{escape.html(grid.hover)}</p>\n'
        + section(table.heading)
        + f"<ul>\n{readings or '<li>' + escape.html(table.none) + '</li>'}\n</ul>\n"
        + section("Statistics")
        + f'<p class="attn-legend">{escape.html(table.legend)}</p>\n'
        f'<div class="attn-scroll"><table class="attn-matrix">\n<thead><tr>{header}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table></div>',
        fragment=fragment, title=grid.title, dark=True, css=CODE,
    )  # fmt: skip


# -- the terminal ---------------------------------------------------------------------------------


def grid_lines(grid: HeadGrid, *, width: int, colour: bool, ramp: palette.Ramp | None = None) -> list[RenderableType]:
    """Every head as 4 to 6 characters × 3 lines, as many heads side by side as fit `width` (more in further bands)."""
    from rich.text import Text

    layers, H = grid.thumbnails.shape[:2]
    label_w = len(f"L{grid.first_layer + layers - 1}") + 1
    cols = max(TERMINAL_MIN_COLS, min(TERMINAL_COLS, (width - label_w) // H - 1))
    per_band = max(1, (width - label_w) // (cols + 1))
    small = [[_shrink(grid.thumbnails[li, h], TERMINAL_ROWS, cols) for h in range(H)] for li in range(layers)]
    shades = (ramp or palette.DARK).shades
    out: list[RenderableType] = []
    for start in range(0, H, per_band):
        band = range(start, min(H, start + per_band))
        out.append(Text(" " * label_w + " ".join(f"H{h + 1}".ljust(cols) for h in band).rstrip()))
        for li in range(layers):
            for line in range(TERMINAL_ROWS):
                text = Text(f"L{grid.first_layer + li}".ljust(label_w) if line == 0 else " " * label_w)
                for n, h in enumerate(band):
                    if n:
                        text.append(" ")
                    for value in small[li][h][line]:
                        level = palette.level(float(value), 0.0, 1.0)
                        if colour:
                            text.append(" ", style=f"on {shades[level]}")
                        else:
                            text.append(TERMINAL_RAMP[level])
                out.append(text)
        out.append(Text(""))
    return out


def _shrink(cells: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """(rows, cols) the largest value of each block of `cells` (repeated when `cells` is smaller)."""
    s = cells.shape[0]
    r_edges = (np.arange(rows + 1) * s / rows).astype(int)
    c_edges = (np.arange(cols + 1) * s / cols).astype(int)
    out = np.zeros((rows, cols))
    for r in range(rows):
        for c in range(cols):
            block = cells[r_edges[r] : max(r_edges[r + 1], r_edges[r] + 1), c_edges[c] : max(c_edges[c + 1], c_edges[c] + 1)]
            out[r, c] = block.max()
    return out


def table_renderables(table: HeadTable, *, precision: int = 3) -> list[RenderableType]:
    """The statistics as a Rich table, then each notable head's reading and the command that explains it."""
    from rich.text import Text

    from attncli.formats.grid import Block

    headers = [SHORT.get(column, column) for column in table.columns]
    cells = [[statistic(v, precision, table.general) for v in row] for row in table.rows]
    out: list[RenderableType] = [_Bands(headers, cells, sum(c in KEY_COLUMNS for c in table.columns)), Text(table.legend), Text("")]
    if table.readings:
        out.append(Text(f"{table.heading}:"))
        for text, command in table.readings:
            out.append(_Hanging(escape.visible(text), 2))  # the reading wraps to the terminal
            if command:
                out.append(Block(["    " + escape.visible(command)]))  # never wrapped: a command is copied whole
    else:
        out.append(Text(table.none))
    return out


KEY_COLUMNS = ("layer", "head", "kv_head")  # repeated in every band of a table too wide for the terminal


class _Hanging:
    """A reading indented under its heading, its wrapped lines two further (not back at column 0)."""

    def __init__(self, text: str, indent: int) -> None:
        self.text, self.indent = text, indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        from rich.segment import Segment

        from attncli.formats.grid import Wrapped

        for number, line in enumerate(Wrapped(self.text).plain(max(20, options.max_width - self.indent - 2)).split("\n")):
            yield Segment(" " * (self.indent + 2 * (number > 0)) + line)
            yield Segment("\n")


class _Bands:
    """The statistics table at the width it is drawn: whole numbers always. When every column does not fit, the columns
    after the key ones (L, H, kv) go into further bands one under the other, each with the key columns again, rather than
    Rich's shrinking every cell to "0.…"."""

    def __init__(self, headers: list[str], cells: list[list[str]], keys: int) -> None:
        self.headers, self.cells, self.keys = headers, cells, keys

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        from rich.table import Table
        from rich.text import Text

        widths = [max(len(h), *(len(row[n]) for row in self.cells)) + 2 for n, h in enumerate(self.headers)]  # padding 1 a side
        room = options.max_width - sum(widths[: self.keys])
        bands: list[list[int]] = []
        for n in range(self.keys, len(self.headers)):
            if bands and sum(widths[m] for m in bands[-1]) + widths[n] <= room:
                bands[-1].append(n)
            else:
                bands.append([n])
        for number, band in enumerate(bands or [[]]):
            if number:
                yield Text("")
            shown = Table(box=None, padding=(0, 1), show_edge=False)
            for n in [*range(self.keys), *band]:
                shown.add_column(self.headers[n], justify="right", no_wrap=True, min_width=widths[n] - 2)
            for row in self.cells:
                shown.add_row(*(row[n] for n in [*range(self.keys), *band]))
            yield shown


def statistic(value: int | float | None, precision: int, general: bool = False) -> str:
    """A statistic as every format writes it: whole numbers as they are, others to `precision` decimals (`general`: significant
    digits), none (or NaN) as –."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, int):
        return str(value)
    return significant(value, precision) if general else fixed(value, precision)  # a decimal half rounds as in every table


# -- CSV ------------------------------------------------------------------------------------------


def table_csv(table: HeadTable) -> str:
    """One row per head: the columns' full names, numbers at full precision (repr), empty for none."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([escape.csv_cell(c) for c in table.columns])
    for row in table.rows:
        writer.writerow(["" if v is None or (isinstance(v, float) and math.isnan(v)) else repr(v) for v in row])
    return buffer.getvalue()
