"""SVG: a heatmap figure of one matrix (the attention weights, usually), with tokens on both axes and a colour bar.

Queries run down the rows, keys across the columns (labels rotated 45°). Each cell is a
<rect> with its number as <text> where the number fits; cells the mask hides are hatched
grey. The figure is self-contained: the system font stack, no web fonts, no scripts, no
links; light colours as attributes and the dark ramp under `prefers-color-scheme: dark`.
Whatever the tokens, the document is well-formed XML (text goes through `escape.xml`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from attncli.document import escape
from attncli.document.numbers import fixed
from attncli.formats import palette
from attncli.formats.fontmetrics import text_width

if TYPE_CHECKING:
    from attncli.document.blocks import Matrix as MatrixView

FONTS = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
LABEL_SIZE = 12  # px, token labels
NUMBER_SIZE = 11  # px, numbers in cells
CELL_HEIGHT = 20
MAX_GRID_WIDTH = 1400  # px: wider grids get narrower cells and lose their numbers
MAX_LABEL = 24  # characters of a label shown; the whole label is in its tooltip
GAP = 24  # between stacked figures


class Figure(NamedTuple):
    body: str  # SVG elements, drawn from (0, 0)
    width: float
    height: float


def heatmap_svg(view: MatrixView, *, precision: int = 2) -> str:
    """One view as a complete SVG document."""
    return heatmap_svgs([view], precision=precision)


def heatmap_svgs(views: Sequence[MatrixView], *, precision: int = 2) -> str:
    """Several views (one per head, say) as one SVG document: the figures stacked top to bottom, left-aligned, GAP px apart."""
    figures = [_figure(view, precision) for view in views]
    width = max((f.width for f in figures), default=0.0)
    height = sum(f.height for f in figures) + GAP * max(0, len(figures) - 1)
    title = "; ".join(_caption(view) for view in views) or "attncli heatmap"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'role="img" aria-labelledby="attncli-title" font-family="{FONTS}">',
        f'<title id="attncli-title">{escape.xml(title)}</title>',
        f"<style>{_stylesheet()}</style>",
        "<defs>" + _hatch() + "</defs>",
        f'<rect class="bg" width="100%" height="100%" fill="{palette.LIGHT.background}"/>',
    ]
    y = 0.0
    for figure in figures:
        out.append(f'<g transform="translate(0 {y:.1f})">{figure.body}</g>')
        y += figure.height + GAP
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _caption(view: MatrixView) -> str:
    head = f"Head {view.head} · " if view.head is not None else ""
    return f"{head}{view.title}  {view.formula}  ({view.shape})"


def _figure(view: MatrixView, precision: int) -> Figure:
    n_rows, n_cols = int(view.data.shape[0]), int(view.data.shape[1])
    low, high = palette.bounds(view.data, view.hidden, probabilities=view.key == "weights")
    numbers = [[fixed(float(x), precision) for x in row] for row in view.data]
    widest = max((text_width(n, NUMBER_SIZE) for row in numbers for n in row), default=0.0)
    cell_w = max(CELL_HEIGHT + 4, widest + 10)
    if cell_w * n_cols > MAX_GRID_WIDTH:
        cell_w = max(4.0, MAX_GRID_WIDTH / max(n_cols, 1))
    cell_h = CELL_HEIGHT if cell_w >= 8 else max(4.0, cell_w)
    show_numbers = widest + 4 <= cell_w and cell_h >= NUMBER_SIZE + 4

    row_labels = [short_label(label) for label in view.rows]
    col_labels = [short_label(label) for label in view.cols]
    row_w = max((text_width(label, LABEL_SIZE) for label in row_labels), default=0.0)
    col_w = max((text_width(label, LABEL_SIZE) for label in col_labels), default=0.0)
    square = view.square  # queries × keys: name the axes
    x0 = 12 + row_w + 8 + (LABEL_SIZE + 6 if square else 0)  # grid left: axis name, row labels
    title_h = 44
    y0 = title_h + 0.71 * (col_w + LABEL_SIZE) + 10 + (LABEL_SIZE + 4 if square else 0)  # grid top: title, rotated labels
    grid_w, grid_h = cell_w * n_cols, cell_h * n_rows
    bar_x = x0 + grid_w + 20
    bar_label_w = max(text_width(fixed(low, precision), LABEL_SIZE), text_width(fixed(high, precision), LABEL_SIZE), 60.0)
    width = max(bar_x + 16 + 6 + bar_label_w, x0 + cell_w * (n_cols - 0.5) + 0.71 * (col_w + LABEL_SIZE)) + 12
    height = y0 + max(grid_h, 8 * 14 + 40) + 12

    out = [
        f'<text class="fg" x="12" y="20" font-size="15" font-weight="600" fill="{palette.LIGHT.text}">'
        f"{escape.xml(_caption_title(view))}</text>",
        f'<text class="fg" x="12" y="38" font-size="13" fill="{palette.LIGHT.text}">{escape.xml(view.formula)}  ({view.shape})</text>',
    ]
    if square:
        out.append(f'<text class="fg" x="{x0:.1f}" y="{title_h + LABEL_SIZE:.1f}" font-size="{LABEL_SIZE}" font-style="italic" '
                   f'fill="{palette.LIGHT.text}">keys →</text>')  # fmt: skip
        mid = y0 + grid_h / 2
        out.append(f'<text class="fg" transform="translate(16 {mid:.1f}) rotate(-90)" text-anchor="middle" font-size="{LABEL_SIZE}" '
                   f'font-style="italic" fill="{palette.LIGHT.text}">← queries</text>')  # fmt: skip
    for c, label in enumerate(col_labels):
        x, y = x0 + cell_w * (c + 0.5) + LABEL_SIZE * 0.3, y0 - 6
        out.append(f'<text class="fg" transform="translate({x:.1f} {y:.1f}) rotate(-45)" font-size="{LABEL_SIZE}" '
                   f'fill="{palette.LIGHT.text}">{label_text(label, view.cols[c])}</text>')  # fmt: skip
    for r, label in enumerate(row_labels):
        y = y0 + cell_h * (r + 0.5) + LABEL_SIZE * 0.35
        out.append(f'<text class="fg" x="{x0 - 8:.1f}" y="{y:.1f}" text-anchor="end" font-size="{LABEL_SIZE}" '
                   f'fill="{palette.LIGHT.text}">{label_text(label, view.rows[r])}</text>')  # fmt: skip

    # numbers need no escaping (digits, sign, point, e, ∞), and escaping is character by character: each label once
    row_tips, col_tips = [escape.xml(label) for label in view.rows], [escape.xml(label) for label in view.cols]
    values, hidden = view.data.tolist(), [[False] * n_cols] * n_rows if view.hidden is None else view.hidden.tolist()
    for r in range(n_rows):
        for c in range(n_cols):
            x, y = x0 + cell_w * c, y0 + cell_h * r
            masked = hidden[r][c]
            if masked:
                cls, fill, ink, text_cls = "cell masked", "url(#attncli-hatch)", "", ""
            else:
                level = palette.level(values[r][c], low, high)
                cls, fill, ink = f"cell l{level}", palette.LIGHT.shades[level], palette.ink(palette.LIGHT.shades[level])
                text_cls = f"k{level}"
            tip = f"{row_tips[r]} → {col_tips[c]}: {numbers[r][c]}" + (" (masked)" if masked else "")
            out.append(f'<rect class="{cls}" x="{x:.1f}" y="{y:.1f}" width="{cell_w:.1f}" height="{cell_h:.1f}" fill="{fill}">'
                       f"<title>{tip}</title></rect>")  # fmt: skip
            if show_numbers and not masked:  # a hidden cell shows the hatching only (its −∞ or 0 is in the tooltip)
                out.append(f'<text class="{text_cls}" x="{x + cell_w / 2:.1f}" y="{y + cell_h / 2 + NUMBER_SIZE * 0.35:.1f}" '
                           f'text-anchor="middle" font-size="{NUMBER_SIZE}" fill="{ink}">{numbers[r][c]}</text>')  # fmt: skip
    out.append(f'<rect class="frame" x="{x0:.1f}" y="{y0:.1f}" width="{grid_w:.1f}" height="{grid_h:.1f}" fill="none" '
               f'stroke="{palette.LIGHT.text}" stroke-width="0.5"/>')  # fmt: skip
    out += _colour_bar(bar_x, y0, low, high, precision, masked=view.hidden is not None and bool(view.hidden.any()))
    return Figure("".join(out), width, height)


def _colour_bar(x: float, y: float, low: float, high: float, precision: int, *, masked: bool) -> list[str]:
    """The ramp from the highest value (top) to the lowest, labelled at both ends; a hatched swatch for masked cells."""
    step = 14
    out = []
    for i, level in enumerate(reversed(range(palette.LEVELS))):
        shade = palette.LIGHT.shades[level]
        out.append(f'<rect class="l{level}" x="{x:.1f}" y="{y + i * step:.1f}" width="16" height="{step}" fill="{shade}"/>')
    bottom = y + palette.LEVELS * step
    out.append(f'<rect class="frame" x="{x:.1f}" y="{y:.1f}" width="16" height="{bottom - y:.1f}" fill="none" '
               f'stroke="{palette.LIGHT.text}" stroke-width="0.5"/>')  # fmt: skip
    for value, ty in ((high, y + LABEL_SIZE * 0.8), (low, bottom)):
        out.append(f'<text class="fg" x="{x + 22:.1f}" y="{ty:.1f}" font-size="{LABEL_SIZE}" fill="{palette.LIGHT.text}">'
                   f"{escape.xml(fixed(value, precision))}</text>")  # fmt: skip
    if masked:
        out.append(f'<rect class="masked" x="{x:.1f}" y="{bottom + 12:.1f}" width="16" height="{step}" fill="url(#attncli-hatch)"/>')
        out.append(f'<text class="fg" x="{x + 22:.1f}" y="{bottom + 12 + step - 2:.1f}" font-size="{LABEL_SIZE}" '
                   f'fill="{palette.LIGHT.text}">masked</text>')  # fmt: skip
    return out


def _hatch() -> str:
    light = palette.LIGHT.masked
    return (
        '<pattern id="attncli-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        f'<rect class="hatch-bg" width="6" height="6" fill="{light}"/>'
        '<line class="hatch-line" x1="0" y1="0" x2="0" y2="6" stroke="#bdbdbd" stroke-width="2.5"/></pattern>'
    )


def _stylesheet() -> str:
    """Dark colours for `prefers-color-scheme: dark`; the light ones are the elements' own attributes."""
    dark = palette.DARK
    rules = [f".bg{{fill:{dark.background}}}", f".fg{{fill:{dark.text}}}", f".frame{{stroke:{dark.text}}}"]
    rules += [f".l{i}{{fill:{shade}}} .k{i}{{fill:{palette.ink(shade)}}}" for i, shade in enumerate(dark.shades)]
    rules += [f".hatch-bg{{fill:{dark.masked}}}", ".hatch-line{stroke:#5e5e5e}"]
    return "@media (prefers-color-scheme: dark){" + " ".join(rules) + "}"


def _caption_title(view: MatrixView) -> str:
    return (f"Head {view.head} · " if view.head is not None else "") + view.title


def short_label(label: str) -> str:
    """The label as shown: visible, and cut to MAX_LABEL characters with an ellipsis."""
    shown = escape.visible(label)
    return shown if len(shown) <= MAX_LABEL else shown[: MAX_LABEL - 1] + "…"


def label_text(shown: str, label: str) -> str:
    """A label as SVG text: escaped, with the whole label as its tooltip when it was shortened or made visible."""
    tip = f"<title>{escape.xml(label)}</title>" if shown != escape.visible(label) else ""
    return tip + escape.xml(shown)


LINE_HEIGHT = 18
CHAR_WIDTH = 7.8  # a 13 px monospace character


def text_svg(lines: Sequence[str], title: str) -> str:
    """Lines of plain text as a self-contained SVG figure: one monospace <text> per line (the first bold), nothing fetched."""
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
        f"<title>{escape.xml(title)}</title>\n"
        f'<rect width="100%" height="100%" fill="#ffffff"/>\n<g fill="#1a1a1a">\n{texts}\n</g>\n</svg>\n'
    )
