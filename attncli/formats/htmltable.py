"""HTML: each matrix a semantic <table> with token labels in <th>, shaded by value; a whole page, or a fragment for a post.

Self-contained: no scripts, no fetched fonts or styles. Cells are shaded with the palette's
light ramp; a page switches to its dark ramp (and dark background) under
`prefers-color-scheme: dark`. Every shade carries its own text colour (WCAG AA). A fragment
repeats the light colours in `style` attributes, so it stays readable where a site strips
<style> elements, and scopes its class names under `.attncli`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, NamedTuple

from attncli.document import escape
from attncli.document.numbers import fixed
from attncli.formats import palette

if TYPE_CHECKING:

    from attncli.document.blocks import Document, Grid, Steps, Table, Values
    from attncli.document.blocks import Matrix as MatrixView

FONTS = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'
HIDDEN_INK = ("#6b6b6b", "#9e9e9e")  # a masked cell of an unshaded table, light and dark: muted as the terminal's dim, WCAG AA on the page
HIDDEN_STYLE = f"text-align:right;font-style:italic;color:{HIDDEN_INK[0]}"


class Heading(NamedTuple):
    """A heading between the tables; level 1-6."""

    text: str
    level: int = 2


class Paragraph(NamedTuple):
    text: str


class Code(NamedTuple):
    """Lines of arithmetic, set as a <pre> block."""

    lines: tuple[str, ...]


def html_document(
    parts: Sequence[MatrixView | Heading | Paragraph | Code | str],
    *,
    fragment: bool,
    precision: int = 4,
    title: str = "attncli",
    shade: Collection[str] | None = None,
    dark_mode: bool | None = None,
) -> str:
    """The parts as HTML: a complete page, or (fragment=True) one <div class="attncli"> with its <style> to paste into a post.

    Tokens × tokens views (`view.square`) are shaded, or those whose key is in `shade` when
    given: weights on 0..1, other stages from their smallest to their largest shown value.
    Text goes through `escape.html`. `dark_mode` (default: a page yes, a fragment no) adds the
    dark shades for `prefers-color-scheme: dark`; a fragment cannot know whether the site
    around it turns dark too, and its light cells, each with its own text colour, read on both.
    """
    dark = not fragment if dark_mode is None else dark_mode
    body = []
    for part in parts:
        if isinstance(part, Heading):
            level = min(6, max(1, part.level))
            body.append(f"<h{level}>{escape.html(part.text)}</h{level}>")
        elif isinstance(part, Code):
            body.append(part_html(part))
        elif isinstance(part, Paragraph | str):
            body.append(f"<p>{escape.html(part if isinstance(part, str) else part.text)}</p>")
        else:
            shaded = part.square if shade is None else part.key in shade
            body.append(matrix_table(part, precision=precision, shaded=shaded, inline=fragment))
    return page("\n".join(body), fragment=fragment, title=title, dark=dark)


def page(content: str, *, fragment: bool, title: str, dark: bool, css: str = "") -> str:
    """The one HTML skeleton: a complete page around `content`, or (fragment) a <div class="attncli"> with its <style>; `css` added to the stylesheet."""
    if fragment:
        return f'<div class="attncli">\n<style>\n{stylesheet(dark=dark)}{css}</style>\n{content}\n</div>\n'
    return html_page(title, stylesheet(page=True, dark=dark) + css, f"{content}\n", schemes="light dark" if dark else "light", main='<main class="attncli">')


def html_page(title: str, css: str, body: str, *, schemes: str = "light dark", main: str = "<main>") -> str:
    """A complete page: `css` in its <style>, `body` (ending in a newline) inside `main`; `schemes` the colour schemes it supports."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<meta name="color-scheme" content="{schemes}">\n'
        f"<title>{escape.html(title)}</title>\n<style>\n{css}</style>\n</head>\n"
        f"<body>\n{main}\n{body}</main>\n</body>\n</html>\n"
    )


def matrix_table(view: MatrixView, *, precision: int, shaded: bool, inline: bool = False) -> str:
    """One view as a <table> (in a scrolling <div>), with a legend of the shades when shaded.

    The cells are written a block of rows at a time (`_body_rows`): each number by `fixedtext`, each cell's
    opening tag looked up by its kind for the whole block, as `typst.matrix_tables` writes its tables.
    """
    low, high = palette.bounds(view.data, view.hidden, probabilities=view.key == "weights") if shaded else (0.0, 1.0)
    head = f"Head {view.head} · " if view.head is not None else ""
    caption = (
        f'<caption><span class="attn-title">{escape.html(head + view.title)}</span> '
        f'<span class="attn-formula">{escape.html(view.formula)}</span> <span class="attn-shape">({view.shape})</span></caption>'
    )
    if view.data.shape[0] == 1 and view.data.shape[1] > STRIP_COLUMNS:  # a strip (a query's weights over 16 keys): wrapped, not cut off
        import dataclasses

        pieces = []
        for start in range(0, view.data.shape[1], STRIP_COLUMNS):
            cols = slice(start, start + STRIP_COLUMNS)
            last = start + STRIP_COLUMNS >= view.data.shape[1]
            piece = dataclasses.replace(view, data=view.data[:, cols], cols=view.cols[cols], extra=view.extra if last else [],
                                        hidden=None if view.hidden is None else view.hidden[:, cols])  # fmt: skip
            pieces.append(_table(piece, caption if start == 0 else "", precision, shaded=shaded, inline=inline, low=low, high=high))
        table = f'<div class="attn-strip" style="{STRIP_STYLE}">\n' + "\n".join(pieces) + "\n</div>"
    else:
        table = '<div class="attn-scroll">' + _table(view, caption, precision, shaded=shaded, inline=inline, low=low, high=high) + "</div>"
    if shaded:
        table += "\n" + _legend(low, high, precision, masked=view.hidden is not None and bool(view.hidden.any()), inline=inline)
    return table


STRIP_COLUMNS = 8  # a one-row matrix wider than this is a strip of tables this wide that wrap to the page, not one cut off at its edge
STRIP_STYLE = "display:flex;flex-wrap:wrap;align-items:flex-end;gap:0 1.5em;margin:0 0 0.5em"  # inline: a post's CSS may drop <style>


def _table(view: MatrixView, caption: str, precision: int, *, shaded: bool, inline: bool, low: float, high: float) -> str:
    """The <table> of `view` with its `caption` (none: ""), its columns' header and its rows."""
    header = ['<td class="attn-corner"></td>']
    header += [f'<th scope="col">{escape.html(label)}</th>' for label in view.cols]
    header += [f'<th scope="col" class="attn-extra">{escape.html(name)}</th>' for name, _ in view.extra]
    return (
        '<table class="attn-matrix">\n' + (caption + "\n" if caption else "") + "<thead><tr>" + "".join(header)
        + "</tr></thead>\n<tbody>\n" + _body_rows(view, precision, shaded=shaded, inline=inline, low=low, high=high) + "\n</tbody>\n</table>"
    )  # fmt: skip


BLOCK_CELLS = 1 << 14  # cells written at once: about 1.5 MB of inline-styled HTML


def _cell_tags(inline: bool) -> list[bytes]:
    """Each kind of cell's opening tag: 0 plain, 1 hidden (grey text), 2 + level a shade, 2 + LEVELS a hidden cell's grey fill, then an extra column's."""
    plain = "<td>" if not inline else '<td style="text-align:right">'
    hidden = '<td class="attn-hidden">' if not inline else f'<td style="{HIDDEN_STYLE}">'
    shades = [f'<td class="attn-l{level}"{_style(fill, inline)}>' for level, fill in enumerate(palette.LIGHT.shades)]
    masked = f'<td class="attn-masked"{_style(palette.LIGHT.masked, inline)}>'
    return [tag.encode() for tag in (plain, hidden, *shades, masked, '<td class="attn-extra">')]


def _body_rows(view: MatrixView, precision: int, *, shaded: bool, inline: bool, low: float, high: float) -> str:
    """The rows of the table's body, joined by line breaks: a block of rows at a time, each cell its kind's tag, its number, </td>.

    The numbers are `fixedtext.cells` (what `numbers.fixed` writes, zero bytes padding each to the block's widest), the
    tags a zero-padded table looked up by kind (`take`); a block is one record array whose bytes, the zeros dropped,
    are its rows' text.
    """
    import numpy as np

    from attncli.document import fixedtext

    n_rows, n_cols = view.data.shape
    heads = [f'<tr><th scope="row">{escape.html(label)}</th>'.encode() for label in view.rows]  # no zero byte: `escape.html` writes one as \x00
    tags = _cell_tags(inline)
    extra_kind = len(tags) - 1
    width = n_cols + len(view.extra)
    if not n_rows:
        return ""
    if not width:
        return "\n".join(text.decode() + "</tr>" for text in heads)
    tag_table = np.zeros((len(tags), max(map(len, tags))), dtype=np.uint8)
    for k, tag in enumerate(tags):
        tag_table[k, : len(tag)] = np.frombuffer(tag, dtype=np.uint8)
    extras = [np.asarray(values, dtype=np.float64) for _, values in view.extra]
    out = []
    step = max(1, BLOCK_CELLS // width)
    for start in range(0, n_rows, step):
        stop = min(n_rows, start + step)
        data = view.data[start:stop]
        kinds = palette.levels(data, low, high).astype(np.uint8) + np.uint8(2) if shaded else np.zeros(data.shape, dtype=np.uint8)
        if view.hidden is not None:
            kinds[view.hidden[start:stop]] = 2 + palette.LEVELS if shaded else 1
        if extras:
            data = np.column_stack([data, *(values[start:stop] for values in extras)])
            kinds = np.column_stack([kinds, np.full((stop - start, len(extras)), extra_kind, dtype=np.uint8)])
        numbers = fixedtext.cells(data, precision, fixed)  # (rows, width, bytes)
        present = np.bincount(kinds.ravel(), minlength=len(tags)) > 0
        tag_width = max(len(tag) for tag, here in zip(tags, present) if here)
        opening = np.ascontiguousarray(tag_table[:, :tag_width]).view(f"V{tag_width}")[:, 0]
        head_width = max(len(text) for text in heads[start:stop])
        row_heads = np.zeros((stop - start, head_width), dtype=np.uint8)
        for r, text in enumerate(heads[start:stop]):
            row_heads[r, : len(text)] = np.frombuffer(text, dtype=np.uint8)
        number_type = f"V{numbers.shape[2]}"
        cell_type = np.dtype([("open", opening.dtype), ("number", number_type), ("close", "V5")])
        rows = np.empty(stop - start, dtype=[("head", f"V{head_width}"), ("cells", cell_type, (width,)), ("end", "V6")])
        rows["head"] = row_heads.view(f"V{head_width}")[:, 0]
        cells = rows["cells"]
        cells["open"] = opening.take(kinds)
        cells["number"] = numbers.view(number_type)[..., 0]
        cells["close"] = np.void(b"</td>")
        rows["end"] = np.void(b"</tr>\n")
        out.append(rows.tobytes().translate(None, b"\0").decode())
    return "".join(out)[:-1]


def _style(fill: str, inline: bool) -> str:
    return f' style="background:{fill};color:{palette.ink(fill)};text-align:right"' if inline else ""


def _legend(low: float, high: float, precision: int, *, masked: bool, inline: bool) -> str:
    swatches = "".join(
        f'<span class="attn-swatch attn-l{level}"{_swatch_style(shade, inline)}></span>' for level, shade in enumerate(palette.LIGHT.shades)
    )
    text = f'<p class="attn-legend">Shade: {escape.html(fixed(low, precision))} {swatches} {escape.html(fixed(high, precision))}'
    if masked:
        text += f' · <span class="attn-swatch attn-masked"{_swatch_style(palette.LIGHT.masked, inline)}></span> hidden by the mask'
    return text + "</p>"


def _swatch_style(fill: str, inline: bool) -> str:
    return f' style="display:inline-block;width:1.2em;height:0.9em;background:{fill}"' if inline else ""


def stylesheet(*, page: bool = False, dark: bool = True) -> str:
    """The CSS, every rule under `.attncli` (a page adds its body's colours): layout, light shades, dark ones if `dark`."""

    def shades(ramp: palette.Ramp, important: str) -> list[str]:
        rules = [f".attncli .attn-l{i} {{ background: {fill}{important}; color: {palette.ink(fill)}{important}; }}"
                 for i, fill in enumerate(ramp.shades)]  # fmt: skip
        rules.append(f".attncli .attn-masked {{ background: {ramp.masked}{important}; color: {palette.ink(ramp.masked)}{important}; }}")
        return rules

    light, night = palette.LIGHT, palette.DARK
    rules = [
        f".attncli {{ font-family: {FONTS}; line-height: 1.4; }}",
        ".attncli .attn-scroll { overflow-x: auto; margin: 0 0 0.5em; }",
        ".attncli table.attn-matrix { border-collapse: collapse; font-variant-numeric: tabular-nums; }",
        ".attncli caption { caption-side: top; text-align: left; padding: 0 0 0.4em; font-weight: 600; white-space: nowrap; }",
        ".attncli caption .attn-formula, .attncli caption .attn-shape { font-weight: normal; margin-left: 0.4em; }",
        ".attncli th, .attncli td { padding: 0.2em 0.55em; white-space: pre; }",
        ".attncli td { text-align: right; }",
        ".attncli th[scope=col] { text-align: right; border-bottom: 1px solid; }",
        ".attncli th[scope=row] { text-align: left; border-right: 1px solid; }",
        ".attncli .attn-extra { border-left: 3px double; }",
        ".attncli .attn-masked { font-style: italic; }",
        f".attncli .attn-hidden {{ font-style: italic; color: {HIDDEN_INK[0]}; }}",
        ".attncli pre.attn-steps { font-family: ui-monospace, Menlo, Consolas, monospace; white-space: pre-wrap; overflow-wrap: anywhere; }",
        ".attncli .attn-legend { margin: 0 0 1.5em; font-size: 0.9em; }",
        ".attncli .attn-swatch { display: inline-block; width: 1.2em; height: 0.9em; vertical-align: -0.1em; }",
        *shades(light, ""),
    ]
    if dark:
        rules += ["@media (prefers-color-scheme: dark) {", *("  " + rule for rule in shades(night, " !important")),
                  f"  .attncli .attn-hidden {{ color: {HIDDEN_INK[1]} !important; }}", "}"]  # over style=""  # fmt: skip
    if page:
        rules[:0] = [f"body {{ margin: 2em; background: {light.background}; color: {light.text}; }}"]
        if dark:
            rules.insert(1, f"@media (prefers-color-scheme: dark) {{ body {{ background: {night.background}; color: {night.text}; }} }}")
    return "\n".join(rules) + "\n"


# -- documents (attncli.document.blocks): the tiled head, decode; explain's steps ----------------------


def steps_parts(steps: Steps, level: int) -> list[Heading | Paragraph | Code]:
    """Each step: a heading at `level` with its formula, its arithmetic as a <pre> block, its notes as paragraphs."""
    from attncli.document.blocks import step_lines

    parts: list[Heading | Paragraph | Code] = []
    for number, step in enumerate(steps.steps, 1):
        parts.append(Heading(f"Step {number}: {step.title}   {step.formula}", level))
        body = step_lines(step, steps.precision)
        if body:
            parts.append(Code(tuple(body)))
        parts += [Paragraph(note) for note in step.notes]
    return parts


def headings(level: int) -> tuple[Callable[[str], str], Callable[[str], str]]:
    """A page's top heading at `level` (nothing at 0) and its sections' one below (<h2> without a top), each a line of HTML."""

    def top(text: str) -> str:
        return part_html(Heading(text, level)) + "\n" if level > 0 else ""

    def section(text: str) -> str:
        return part_html(Heading(text, max(level, 1) + 1)) + "\n"

    return top, section


def part_html(part: Heading | Paragraph | Code | str) -> str:
    """A heading, a paragraph or lines of arithmetic as HTML (as `html_document` writes them)."""
    if isinstance(part, Heading):
        level = min(6, max(1, part.level))
        return f"<h{level}>{escape.html(part.text)}</h{level}>"
    if isinstance(part, Code):
        return f'<pre class="attn-steps" style="{STEPS_STYLE}">' + "\n".join(escape.html(line) for line in part.lines) + "</pre>"
    return f"<p>{escape.html(part if isinstance(part, str) else part.text)}</p>"


STEPS_STYLE = "white-space:pre-wrap;overflow-wrap:anywhere"  # a long line of arithmetic wraps, not cut off (inline: <style> may be dropped)
TEXT_CLASS = ' class="attn-text"'
TEXT_CELLS = (".attncli td.attn-text, .attncli th.attn-text { text-align: left; }\n"  # vectors and words in a table read from the left
              ".attncli figure.attn-figure { margin: 1em 0; overflow-x: auto; }\n")  # fmt: skip


def text_table(table: Table) -> str:
    """A table of text cells: <th> headers, the first cell of a row naming it, numbers right-aligned and text left."""
    head = "".join(f'<th scope="col"{"" if right or c == 0 else TEXT_CLASS}>{escape.html(cell)}</th>'
                   for c, (cell, right) in enumerate(zip(table.header, table.numeric)))  # fmt: skip
    rows = "\n".join(
        f'<tr><th scope="row">{escape.html(row[0])}</th>'
        + "".join(f"<td{'' if right else TEXT_CLASS}>{escape.html(cell)}</td>" for cell, right in zip(row[1:], table.numeric[1:]))
        + "</tr>"
        for row in table.rows
    )
    return f'<div class="attn-scroll"><table class="attn-matrix">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody></table></div>'


def values_list(values: Values) -> str:
    """`name = value` lines as a list (a record: `name: value`, a field of several lines a list of its own); nothing when there are none."""
    if values.record and values.pairs:
        from attncli.document.blocks import fields

        items = (f"{escape.html(name)}: {escape.html(lines[0])}" if len(lines) == 1
                 else f"{escape.html(name)}:<ul>{''.join(f'<li>{escape.html(line)}</li>' for line in lines)}</ul>" for name, lines in fields(values))  # fmt: skip
        return f"<ul>{''.join(f'<li>{item}</li>' for item in items)}</ul>"
    return f"<ul>{''.join(f'<li>{escape.html(name)} = {escape.html(value)}</li>' for name, value in values.pairs)}</ul>" if values.pairs else ""


def document_html(document: Document, *, fragment: bool = False, level: int = 1, figures: Sequence[Grid] = (), precision: int = 3) -> str:
    """Semantic HTML: a heading per section, a <table> with <th> headers, the figures after the introduction; a page, or a fragment to paste.

    The top heading is at `level` (0 leaves it out, the sections then at <h2>), the sections one below, the steps two below.
    """
    from attncli.document import blocks

    body: list[str] = []
    pending = list(figures)
    for block in document.blocks:
        if pending and isinstance(block, blocks.Heading | blocks.Values | blocks.Table) and not (isinstance(block, blocks.Heading) and block.level == 1):
            from attncli.formats.gridfigure import grids_svg

            body.append('<figure class="attn-figure">' + grids_svg(pending, precision=precision, dark=not fragment).rstrip("\n") + "</figure>")
            pending = []
        if isinstance(block, blocks.Heading):
            if block.level == 1 and level == 0:
                continue
            body.append(part_html(Heading(block.text, max(level, 1) + block.level - 1)))
        elif isinstance(block, blocks.Paragraph | blocks.Note):
            body.append(part_html(Paragraph(block.text)))
        elif isinstance(block, blocks.Values):
            if block.pairs:
                body.append(values_list(block))
        elif isinstance(block, blocks.Steps):
            body += map(part_html, steps_parts(block, min(6, max(level, 1) + 2)))
        elif isinstance(block, blocks.Table):
            body.append(text_table(block))
        else:
            raise TypeError(f"HTML has no drawing for {type(block).__name__}")
    return page("\n".join(body), fragment=fragment, title=document.title, dark=not fragment, css=TEXT_CELLS)
