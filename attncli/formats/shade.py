"""The sentence shaded by attention, drawn: each token on the palette's shade of the weight it receives, its number beneath.

Input is plain data (`Shaded` of attncli.document.maps: rows of labels and weights 0 … 1), built by attncli.walkthroughs.shade.
Every format shows the numbers, not only the shades: the terminal writes each weight under its
token (so a terminal without colour loses nothing), the HTML page and the SVG put it under the
token and in its tooltip. Light and dark: the terminal's ramp (formats.heatmap.terminal_ramp),
and `prefers-color-scheme: dark` in HTML and SVG.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attncli.document import escape
from attncli.document.maps import Shaded
from attncli.document.numbers import fixed
from attncli.formats import palette
from attncli.formats.htmltable import headings, page

if TYPE_CHECKING:
    from rich.console import RenderableType

FONTS = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
TOKEN_SIZE, NUMBER_SIZE = 14, 10  # px
PAD = 6  # px each side of a token in the SVG
ROW_H, LABEL_W = 44, 72  # px: one shaded sentence, the row names' column


def _level(x: float) -> int:
    return palette.level(x, 0.0, 1.0)


# -- the terminal ---------------------------------------------------------------------------------


def lines(shaded: Shaded, *, width: int, colour: bool, ramp: palette.Ramp, precision: int = 2) -> list[RenderableType]:
    """Each row as the tokens on their shades and, under each, its weight; wrapped at `width` (the name column repeats)."""
    from rich.padding import Padding
    from rich.text import Text

    labels = [escape.visible(t) for t in shaded.tokens]
    name_w = max(len(r.name) for r in shaded.rows) + 2
    cells = [max(len(label), precision + 2) for label in labels]  # each token's column: the label or "0.00", whichever is wider
    chunks, start, used = [], 0, name_w
    for n, w in enumerate(cells):  # tokens per line: as many as fit the width after the names
        if n > start and used + w + 1 > width:
            chunks.append(range(start, n))
            start, used = n, name_w
        used += w + 1
    chunks.append(range(start, len(cells)))
    out: list[RenderableType] = [Text(escape.visible(shaded.title)), Text("")]
    for row in shaded.rows:
        for c, chunk in enumerate(chunks):
            tokens = Text(row.name.ljust(name_w) if c == 0 else " " * name_w)
            numbers = Text(" " * name_w)
            for n in chunk:
                if n > chunk.start:
                    tokens.append(" ")
                    numbers.append(" ")
                label = labels[n].ljust(cells[n])
                seen = row.visible[n]
                if colour and seen:
                    shade = ramp.shades[_level(row.weights[n])]
                    style = f"{palette.ink(shade)} on {shade}" + (" underline" if n == shaded.query else "")
                    tokens.append(label, style=style)
                else:
                    tokens.append(label, style="underline" if colour and n == shaded.query else "")
                numbers.append((fixed(row.weights[n], precision) if seen else "–").rjust(cells[n]), style="dim" if colour else "")
            out += [tokens, numbers]
        out += [Padding(Text(text), (0, 0, 0, 2)) for text in row.readings]  # wrapped lines keep the indent
    query = escape.visible(shaded.tokens[shaded.query])
    hidden = any(not seen for row in shaded.rows for seen in row.visible)
    out += [Text(""), Text(f"Under each token the weight '{query}' gives it" + ("; – marks a token the mask hides." if hidden else "."))]  # quoted as the readings quote a token: a Markdown code span's backticks would show
    return out


# -- SVG and HTML ---------------------------------------------------------------------------------


def svg(shaded: Shaded, *, precision: int = 2, standalone: bool = True) -> str:
    """The rows as one figure: each token a box on its shade with the token in it and its weight beneath."""
    from attncli.formats.fontmetrics import text_width

    labels = [escape.visible(t) for t in shaded.tokens]
    widths = [max(text_width(label, TOKEN_SIZE), text_width("0." + "0" * precision, NUMBER_SIZE)) + 2 * PAD for label in labels]
    width = round(max(LABEL_W + sum(widths) + 2 * len(widths) + 8, text_width(shaded.title, 14, bold=True) + 16))
    height = 40 + ROW_H * len(shaded.rows) + 8
    light = palette.LIGHT
    head = '<?xml version="1.0" encoding="UTF-8"?>\n' if standalone else ""
    out = [
        f'{head}<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-labelledby="attncli-shade-title" font-family="{FONTS}">',
        f'<title id="attncli-shade-title">{escape.xml(shaded.title)}</title>',
        f"<style>{_stylesheet()}</style>",
        f'<rect class="bg" width="100%" height="100%" fill="{light.background}"/>',
        f'<text class="fg" x="8" y="22" font-size="14" font-weight="600" fill="{light.text}">{escape.xml(shaded.title)}</text>',
    ]
    for r, row in enumerate(shaded.rows):
        y = 40 + r * ROW_H
        out.append(f'<text class="fg" x="8" y="{y + 18}" font-size="12" fill="{light.text}">{escape.xml(row.name)}</text>')
        x = float(LABEL_W)
        for n, label in enumerate(labels):
            w = widths[n]
            seen = row.visible[n]
            level = _level(row.weights[n])
            fill, ink = (light.shades[level], palette.ink(light.shades[level])) if seen else (light.masked, light.text)
            shade_class, ink_class = (f"l{level}", f"t{level}") if seen else ("m", "fg")
            value = fixed(row.weights[n], precision) if seen else "hidden"
            underline = ' text-decoration="underline"' if n == shaded.query else ""
            out.append(
                f'<g><title>{escape.xml(f"{n + 1} {label}: {value}")}</title>'
                f'<rect class="{shade_class}" x="{x:.1f}" y="{y}" width="{w:.1f}" height="24" rx="3" fill="{fill}"/>'
                f'<text class="{ink_class}" x="{x + w / 2:.1f}" y="{y + 17}" text-anchor="middle" font-size="{TOKEN_SIZE}" fill="{ink}"'
                f"{underline}>{escape.xml(label)}</text>"
                f'<text class="fg" x="{x + w / 2:.1f}" y="{y + 36}" text-anchor="middle" font-size="{NUMBER_SIZE}" fill="{light.text}">'
                f"{escape.xml(value if seen else '–')}</text></g>"
            )
            x += w + 2
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _stylesheet() -> str:
    dark = palette.DARK
    rules = [f".bg{{fill:{dark.background}}}", f".fg{{fill:{dark.text}}}", f".m{{fill:{dark.masked}}}"]
    rules += [f".l{i}{{fill:{shade}}} .t{i}{{fill:{palette.ink(shade)}}}" for i, shade in enumerate(dark.shades)]
    return "@media (prefers-color-scheme: dark){" + " ".join(rules) + "}"


def html(shaded: Shaded, *, precision: int = 2, fragment: bool = False, level: int = 1) -> str:
    """A self-contained page in run's stylesheet (`htmltable.page`: no scripts, light and dark), or a fragment to paste into a
    post: the figure, each row's readings, and the weights as a table; its title a heading at `level` (0: none), its sections
    one below."""
    readings = "\n".join(f"<li>{escape.html(row.name)}: {escape.html(text)}</li>" for row in shaded.rows for text in row.readings)
    header = "".join(f'<th scope="col">{escape.html(t)}</th>' for t in shaded.tokens)
    body = "\n".join(
        f'<tr><th scope="row">{escape.html(row.name)}</th>'
        + "".join(f"<td>{fixed(row.weights[n], precision)}</td>" if row.visible[n] else "<td>–</td>" for n in range(len(shaded.tokens)))
        + "</tr>"
        for row in shaded.rows
    )
    top, section = headings(level)
    return page(
        top(shaded.title)
        + f'<div class="attn-scroll">\n{svg(shaded, precision=precision, standalone=False)}</div>\n'
        + (section("What the rows show") + f"<ul>\n{readings}\n</ul>\n" if readings else "")
        + section("The weights")
        + f'<div class="attn-scroll"><table class="attn-matrix">\n<thead><tr><td class="attn-corner"></td>{header}</tr></thead>\n'
        f"<tbody>\n{body}\n</tbody>\n</table></div>",
        fragment=fragment, title=shaded.title, dark=True,
    )  # fmt: skip


def csv(shaded: Shaded) -> str:
    """One row per shaded row: its name, then the weight of each token at full precision (empty where hidden)."""
    import csv as csvlib
    import io

    buffer = io.StringIO()
    writer = csvlib.writer(buffer, lineterminator="\n")
    writer.writerow(["row", *(escape.csv_cell(f"{n} {t}") for n, t in enumerate(shaded.tokens, 1))])
    for row in shaded.rows:
        writer.writerow([row.name, *(repr(float(w)) if seen else "" for w, seen in zip(row.weights, row.visible))])
    return buffer.getvalue()
