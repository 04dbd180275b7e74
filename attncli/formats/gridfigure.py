"""SVG figures of decode and tiling (`document.blocks.Grid`): a shaded matrix with states, tile lines and side columns.

decode draws each step's weights over its cache (steps down, cached keys across): keys that
left the cache are crossed out, keys not yet generated left empty. Tiling draws the scores the
softmax sees under the tiles' grid, skipped tiles marked, each row's maximum outlined, and the
running maximum m after each block of keys beside the rows. Self-contained like `svgheatmap`:
the system font stack, light colours as attributes, the dark ramp under `prefers-color-scheme: dark`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attncli.document import escape
from attncli.document.blocks import DROPPED, EMPTY, HIDDEN, Grid
from attncli.document.numbers import fixed
from attncli.formats import palette
from attncli.formats.fontmetrics import text_width
from attncli.formats.svgheatmap import (
    CELL_HEIGHT,
    FONTS,
    GAP,
    LABEL_SIZE,
    MAX_GRID_WIDTH,
    NUMBER_SIZE,
    label_text,
    short_label,
)

SIDE_SIZE = 11  # px, the side columns' numbers
DROPPED_FILL = "#f2f2f2"
MARK = "#d94801"  # the outline of a row's maximum and of the skipped tiles' cross: orange, apart from the blues
_DARK_DROPPED = "#262626"
TITLE_SIZE, CAPTION_SIZE = 15, 13  # px
LINE_STEP = 17  # px between the lines of a wrapped title or caption
MIN_TEXT_WIDTH = 320.0  # px: a small figure's caption wraps to this, not to the figure's few cells
MAX_FIGURE = 96  # rows and columns of cells drawn at most: a 1,024-token tiling would be a million cells (150 MB of SVG)


def wrap(text: str, size: float, measure: float, *, bold: bool = False) -> list[str]:
    """`text` broken at spaces into lines no wider than `measure` px at `size` px, as few lines as that takes, of even
    lengths (no last line of one word); a single longer word keeps its own line."""
    lines = _fill(text, size, measure, bold)
    narrow = text_width(text, size, bold=bold) / len(lines)
    while narrow < measure and len(lines) > 1:  # the narrowest measure that needs no more lines
        even = _fill(text, size, narrow, bold)
        if len(even) == len(lines):
            return even
        narrow += 8
    return lines


def _fill(text: str, size: float, measure: float, bold: bool) -> list[str]:
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        candidate = f"{line} {word}" if line else word
        if line and text_width(candidate, size, bold=bold) > measure:
            lines.append(line)
            line = word
        else:
            line = candidate
    return [*lines, line]


def grids_svg(grids: Sequence[Grid], *, precision: int, dark: bool = True) -> str:
    """The figures stacked top to bottom, GAP px apart, as one SVG document; `dark` adds the dark colours (not in a light-only fragment)."""
    figures = [_figure(_cropped(grid), precision) for grid in grids]
    width = max((w for _, w, _ in figures), default=0.0)
    height = sum(h for _, _, h in figures) + GAP * max(0, len(figures) - 1)
    title = "; ".join(f"{grid.title}: {grid.caption}" for grid in grids) or "attncli figure"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'role="img" aria-labelledby="attncli-grid-title" font-family="{FONTS}">',
        f'<title id="attncli-grid-title">{escape.xml(title)}</title>',
        *([f"<style>{_stylesheet()}</style>"] if dark else []),
        "<defs>" + _hatch() + "</defs>",
        f'<rect class="bg" width="100%" height="100%" fill="{palette.LIGHT.background}"/>',
    ]
    y = 0.0
    for body, _, h in figures:
        out.append(f'<g transform="translate(0 {y:.1f})">{body}</g>')
        y += h + GAP
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _cropped(grid: Grid, most: int = MAX_FIGURE) -> Grid:
    """The grid's top-left corner of at most `most` rows and columns (whole tiles when they fit), saying so in its caption."""
    n_rows, n_cols = grid.data.shape
    if n_rows <= most and n_cols <= most:
        return grid
    tile_rows, tile_cols = grid.tile
    r = min(n_rows, most // tile_rows * tile_rows or most) if tile_rows else min(n_rows, most)
    c = min(n_cols, most // tile_cols * tile_cols or most) if tile_cols else min(n_cols, most)
    blocks = -(-c // tile_cols) if tile_cols else len(grid.side)  # the side columns (one per key block) that stay
    caption = (f"{grid.caption}. Drawn: the first {r:,} {grid.axes[1]} × {c:,} {grid.axes[0]} of {n_rows:,} × {n_cols:,} "
               "(the JSON output has every number)")
    return grid._replace(
        caption=caption, rows=grid.rows[:r], cols=grid.cols[:c], data=grid.data[:r, :c], state=grid.state[:r, :c],
        skipped=[(br, bc) for br, bc in grid.skipped if br * tile_rows < r and bc * tile_cols < c],
        marked=[(i, j) for i, j in grid.marked if i < r and j < c],
        side=[(header, texts[:r]) for header, texts in grid.side[:blocks]],
        side_marked=[(n, i) for n, i in grid.side_marked if n < blocks and i < r],
    )  # fmt: skip


def _text(x: float, y: float, words: str, *, size: float = LABEL_SIZE, extra: str = "") -> str:
    return f'<text class="fg" x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{palette.LIGHT.text}"{extra}>{words}</text>'


def _figure(grid: Grid, precision: int) -> tuple[str, float, float]:
    n_rows, n_cols = int(grid.data.shape[0]), int(grid.data.shape[1])
    state = np.asarray(grid.state)
    shown = state == 0
    if grid.probabilities:
        low, high = 0.0, 1.0
    else:
        values = grid.data[shown]
        low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
    numbers = [[fixed(float(x), precision) for x in row] for row in grid.data]
    widest = max((text_width(numbers[r][c], NUMBER_SIZE) for r in range(n_rows) for c in range(n_cols) if shown[r, c]), default=0.0)
    cell_w = max(CELL_HEIGHT + 4, widest + 10)
    if cell_w * n_cols > MAX_GRID_WIDTH:
        cell_w = max(4.0, MAX_GRID_WIDTH / max(n_cols, 1))
    cell_h = CELL_HEIGHT if cell_w >= 8 else max(4.0, cell_w)
    show_numbers = widest + 4 <= cell_w and cell_h >= NUMBER_SIZE + 4

    row_labels, col_labels = [short_label(x) for x in grid.rows], [short_label(x) for x in grid.cols]
    row_w = max((text_width(x, LABEL_SIZE) for x in row_labels), default=0.0)
    col_w = max((text_width(x, LABEL_SIZE) for x in col_labels), default=0.0)
    x0 = 12 + LABEL_SIZE + 6 + row_w + 8
    side_w = max((text_width(header, LABEL_SIZE) for header, _ in grid.side), default=0.0)
    grid_w, grid_h = cell_w * n_cols, cell_h * n_rows
    side_x = x0 + grid_w + 16
    side_widths = [max(CELL_HEIGHT + 8, *(text_width("↑" + t, SIDE_SIZE) + 14 for t in texts)) for _, texts in grid.side]
    legend_x = side_x + sum(side_widths) + (8 if grid.side else 4)
    width = max(legend_x + 140, x0 + cell_w * (n_cols - 0.5) + 0.71 * (col_w + LABEL_SIZE) + 12,
                side_x + sum(side_widths) + 0.71 * (side_w + LABEL_SIZE) + 12)  # fmt: skip
    # the title and caption wrap to the figure's width (never narrower than MIN_TEXT_WIDTH), rather than widening it
    measure = max(width - 24, MIN_TEXT_WIDTH)
    title_lines, caption_lines = wrap(grid.title, TITLE_SIZE, measure, bold=True), wrap(grid.caption, CAPTION_SIZE, measure)
    width = max(width, 24 + max(text_width(line, size, bold=bold) for lines, size, bold in ((title_lines, TITLE_SIZE, True), (caption_lines, CAPTION_SIZE, False))
                                for line in lines))  # fmt: skip
    heading = [_text(12, 20 + LINE_STEP * i, escape.xml(line), size=TITLE_SIZE, extra=' font-weight="600"') for i, line in enumerate(title_lines)]
    caption_y = 38 + LINE_STEP * (len(title_lines) - 1)
    heading += [_text(12, caption_y + LINE_STEP * i, escape.xml(line), size=CAPTION_SIZE) for i, line in enumerate(caption_lines)]
    title_h = caption_y + LINE_STEP * (len(caption_lines) - 1) + 6
    y0 = title_h + LABEL_SIZE + 4 + 0.71 * (max(col_w, side_w) + LABEL_SIZE) + 10
    legend = _legend(legend_x, y0, low, high, precision, state)
    height = y0 + max(grid_h, 8 * 14 + 100) + 12

    out = [
        *heading,
        _text(x0, title_h + LABEL_SIZE, f"{escape.xml(grid.axes[0])} →", extra=' font-style="italic"'),
        f'<text class="fg" transform="translate({12 + LABEL_SIZE / 2 + 2} {y0 + grid_h / 2:.1f}) rotate(-90)" text-anchor="middle" '
        f'font-size="{LABEL_SIZE}" font-style="italic" fill="{palette.LIGHT.text}">← {escape.xml(grid.axes[1])}</text>',
    ]
    for c, label in enumerate(col_labels):
        x, y = x0 + cell_w * (c + 0.5) + LABEL_SIZE * 0.3, y0 - 6
        out.append(f'<text class="fg" transform="translate({x:.1f} {y:.1f}) rotate(-45)" font-size="{LABEL_SIZE}" '
                   f'fill="{palette.LIGHT.text}">{label_text(label, grid.cols[c])}</text>')  # fmt: skip
    for r, label in enumerate(row_labels):
        y = y0 + cell_h * (r + 0.5) + LABEL_SIZE * 0.35
        out.append(_text(x0 - 8, y, label_text(label, grid.rows[r]), extra=' text-anchor="end"'))
    row_tips, col_tips = [escape.xml(x) for x in grid.rows], [escape.xml(x) for x in grid.cols]
    for r in range(n_rows):
        for c in range(n_cols):
            out += _cell(x0 + cell_w * c, y0 + cell_h * r, cell_w, cell_h, int(state[r, c]), float(grid.data[r, c]), numbers[r][c],
                         f"{row_tips[r]} → {col_tips[c]}", low, high, show_numbers)  # fmt: skip
    out += _tiles(grid, x0, y0, cell_w, cell_h, n_rows, n_cols)
    for r, c in grid.marked:
        out.append(f'<rect class="mark" x="{x0 + cell_w * c + 1:.1f}" y="{y0 + cell_h * r + 1:.1f}" width="{cell_w - 2:.1f}" '
                   f'height="{cell_h - 2:.1f}" fill="none" stroke="{MARK}" stroke-width="2"><title>the row\'s maximum</title></rect>')  # fmt: skip
    out.append(f'<rect class="frame" x="{x0:.1f}" y="{y0:.1f}" width="{grid_w:.1f}" height="{grid_h:.1f}" fill="none" '
               f'stroke="{palette.LIGHT.text}" stroke-width="0.5"/>')  # fmt: skip
    x = side_x
    grown = set(grid.side_marked)
    for n, ((header, texts), w) in enumerate(zip(grid.side, side_widths)):
        hx, hy = x + w / 2 + LABEL_SIZE * 0.3, y0 - 6
        out.append(f'<text class="fg" transform="translate({hx:.1f} {hy:.1f}) rotate(-45)" font-size="{LABEL_SIZE}" '
                   f'fill="{palette.LIGHT.text}">{escape.xml(header)}</text>')  # fmt: skip
        for r, t in enumerate(texts):
            y = y0 + cell_h * (r + 0.5) + SIDE_SIZE * 0.35
            if (n, r) in grown:  # m grew here: what came before was rescaled
                out.append(f'<text class="grew" x="{x + w - 8:.1f}" y="{y:.1f}" font-size="{SIDE_SIZE}" font-weight="700" fill="{MARK}" '
                           f'text-anchor="end"><title>m grew: the sum and output before were rescaled</title>↑{escape.xml(t)}</text>')  # fmt: skip
            else:
                out.append(_text(x + w - 8, y, escape.xml(t), size=SIDE_SIZE, extra=' text-anchor="end"'))
        x += w
    out += legend
    return "".join(out), width, height


def _cell(x: float, y: float, w: float, h: float, state: int, value: float, number: str, tip: str, low: float, high: float,
          show: bool) -> list[str]:  # fmt: skip
    box = f'x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}"'
    if state == EMPTY:
        return [f'<rect class="empty" {box} fill="none"><title>{tip}: not generated yet</title></rect>']
    if state == DROPPED:
        cross = (f'<path class="cross" d="M{x + 4:.1f} {y + 4:.1f}L{x + w - 4:.1f} {y + h - 4:.1f}M{x + w - 4:.1f} {y + 4:.1f}'
                 f'L{x + 4:.1f} {y + h - 4:.1f}" stroke="#8c8c8c" stroke-width="1.2"/>')  # fmt: skip
        return [f'<rect class="dropped" {box} fill="{DROPPED_FILL}"><title>{tip}: left the cache</title></rect>', cross]
    if state == HIDDEN:
        return [f'<rect class="cell masked" {box} fill="url(#attncli-grid-hatch)"><title>{tip}: hidden by the mask</title></rect>']
    level = palette.level(value, low, high)
    shade = palette.LIGHT.shades[level]
    out = [f'<rect class="cell l{level}" {box} fill="{shade}"><title>{tip}: {number}</title></rect>']
    if show:
        out.append(f'<text class="k{level}" x="{x + w / 2:.1f}" y="{y + h / 2 + NUMBER_SIZE * 0.35:.1f}" text-anchor="middle" '
                   f'font-size="{NUMBER_SIZE}" fill="{palette.ink(shade)}">{number}</text>')  # fmt: skip
    return out


def _tiles(grid: Grid, x0: float, y0: float, cell_w: float, cell_h: float, n_rows: int, n_cols: int) -> list[str]:
    """Thick lines between the tiles, and a skipped tile's outline with "skipped" across it."""
    rows, cols = grid.tile
    if not rows or not cols:
        return []
    out = []
    for r in range(rows, n_rows, rows):
        y = y0 + cell_h * r
        out.append(f'<line class="tile" x1="{x0:.1f}" y1="{y:.1f}" x2="{x0 + cell_w * n_cols:.1f}" y2="{y:.1f}" stroke="{palette.LIGHT.text}" stroke-width="2"/>')
    for c in range(cols, n_cols, cols):
        x = x0 + cell_w * c
        out.append(f'<line class="tile" x1="{x:.1f}" y1="{y0:.1f}" x2="{x:.1f}" y2="{y0 + cell_h * n_rows:.1f}" stroke="{palette.LIGHT.text}" stroke-width="2"/>')
    for br, bc in grid.skipped:
        x, y = x0 + cell_w * bc * cols, y0 + cell_h * br * rows
        w, h = cell_w * min(cols, n_cols - bc * cols), cell_h * min(rows, n_rows - br * rows)
        out.append(f'<rect class="skipped" x="{x + 2:.1f}" y="{y + 2:.1f}" width="{w - 4:.1f}" height="{h - 4:.1f}" fill="none" '
                   f'stroke="{MARK}" stroke-width="1.5" stroke-dasharray="4 3"><title>tile skipped: the mask hides all of it</title></rect>')  # fmt: skip
        if w >= text_width("skipped", NUMBER_SIZE) + 8 and h >= NUMBER_SIZE + 6:
            out.append(f'<text class="skip-text" x="{x + w / 2:.1f}" y="{y + h / 2 + NUMBER_SIZE * 0.35:.1f}" text-anchor="middle" '
                       f'font-size="{NUMBER_SIZE}" font-style="italic" fill="{MARK}">skipped</text>')  # fmt: skip
    return out


def _legend(x: float, y: float, low: float, high: float, precision: int, state: np.ndarray) -> list[str]:
    """The ramp from the highest value (top) to the lowest, then a swatch for each state the figure has."""
    step = 14
    out = []
    for i, level in enumerate(reversed(range(palette.LEVELS))):
        out.append(f'<rect class="l{level}" x="{x:.1f}" y="{y + i * step:.1f}" width="16" height="{step}" fill="{palette.LIGHT.shades[level]}"/>')
    bottom = y + palette.LEVELS * step
    out.append(f'<rect class="frame" x="{x:.1f}" y="{y:.1f}" width="16" height="{bottom - y:.1f}" fill="none" '
               f'stroke="{palette.LIGHT.text}" stroke-width="0.5"/>')  # fmt: skip
    out.append(_text(x + 22, y + LABEL_SIZE * 0.8, escape.xml(fixed(high, precision))))
    out.append(_text(x + 22, bottom, escape.xml(fixed(low, precision))))
    swatch_y = bottom + 12
    present = set(np.unique(state).tolist())
    if HIDDEN in present:
        out.append(f'<rect class="masked" x="{x:.1f}" y="{swatch_y:.1f}" width="16" height="{step}" fill="url(#attncli-grid-hatch)"/>')
        out.append(_text(x + 22, swatch_y + step - 2, "masked"))
        swatch_y += step + 8
    if DROPPED in present:
        out.append(f'<rect class="dropped" x="{x:.1f}" y="{swatch_y:.1f}" width="16" height="{step}" fill="{DROPPED_FILL}"/>')
        out.append(f'<path class="cross" d="M{x + 3:.1f} {swatch_y + 3:.1f}L{x + 13:.1f} {swatch_y + 11:.1f}M{x + 13:.1f} {swatch_y + 3:.1f}'
                   f'L{x + 3:.1f} {swatch_y + 11:.1f}" stroke="#8c8c8c" stroke-width="1.2"/>')  # fmt: skip
        out.append(_text(x + 22, swatch_y + step - 2, "left the cache"))
    return out


def _hatch() -> str:
    return (
        '<pattern id="attncli-grid-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        f'<rect class="hatch-bg" width="6" height="6" fill="{palette.LIGHT.masked}"/>'
        '<line class="hatch-line" x1="0" y1="0" x2="0" y2="6" stroke="#bdbdbd" stroke-width="2.5"/></pattern>'
    )


def _stylesheet() -> str:
    """Dark colours for `prefers-color-scheme: dark`; the light ones are the elements' own attributes."""
    dark = palette.DARK
    rules = [f".bg{{fill:{dark.background}}}", f".fg{{fill:{dark.text}}}", f".frame{{stroke:{dark.text}}}", f".tile{{stroke:{dark.text}}}"]
    rules += [f".l{i}{{fill:{shade}}} .k{i}{{fill:{palette.ink(shade)}}}" for i, shade in enumerate(dark.shades)]
    rules += [f".hatch-bg{{fill:{dark.masked}}}", ".hatch-line{stroke:#5e5e5e}", f".dropped{{fill:{_DARK_DROPPED}}}", ".cross{stroke:#8c8c8c}",
              ".mark,.skipped{stroke:#fd8d3c}", ".skip-text,.grew{fill:#fd8d3c}"]  # fmt: skip
    return "@media (prefers-color-scheme: dark){" + " ".join(rules) + "}"
