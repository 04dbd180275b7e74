"""The map as a page to explore (`heads --format html --interactive`): one self-contained file, no network, nothing to install.

The grid of every layer × head; clicking a head (or choosing its layer and head) opens its weight
matrix labelled with the tokens; hovering a query token's row shades the sentence by what it
attends to, as CircuitsVis' token view does; light and dark (the reader's setting, or the button).
The style and the script are explorer.css and explorer.js beside this module.
The data travel as JSON inside the page (every `<` written as \\u003c, so no token can close the
script), and the script writes tokens with textContent only: a token is text, never markup; its control
and invisible characters come written as every format writes them (escape.visible: `\\x1b`, `\\u202e`).
For sentences of up to 32 tokens each head's matrix is its weights exactly; beyond, each cell is
the largest weight of its block of tokens (the thumbnails'), and the page says so.
Each weight travels whole, and the script rounds it by numbers.fixed's rule (explorer.js holds
it, its tolerances come in the data), so the page shows the digits the tables show.
"""

from __future__ import annotations

import json
from typing import Any

from attncli.document import escape
from attncli.document.maps import HeadGrid, HeadTable
from attncli.document.numbers import HALF_TOLERANCES


def page(grid: HeadGrid, table: HeadTable, *, precision: int, level: int = 1) -> str:
    """The whole page: the explorer's data, its style and its script; its title a heading at `level` (none at 0)."""
    from attncli.formats.htmltable import headings

    top, section = headings(level)
    layers, heads, side = grid.thumbnails.shape[0], grid.thumbnails.shape[1], grid.thumbnails.shape[2]
    exact = side == len(grid.tokens)
    data: dict[str, Any] = {
        "title": escape.visible(grid.title),  # a token's ESC or U+202E written as every format writes it: `\x1b`, `\u202e`
        "tokens": [escape.visible(token) for token in grid.tokens],
        "first_layer": grid.first_layer,
        "layers": layers,
        "heads": heads,
        "exact": exact,
        "precision": precision,
        **HALF_TOLERANCES,  # how near a decimal half a weight is that half: the script rounds as numbers.fixed does
        "weights": grid.thumbnails.tolist(),  # (layers, H, s, s) whole: the script rounds them once, as the tables do
        "seen": None if grid.seen is None else grid.seen.astype(int).tolist(),  # (layers, s, s) 1 where the mask lets the query see
        "tips": [[escape.visible(tip) for tip in row] for row in grid.tips],
        "readings": [{"text": escape.visible(text), "command": escape.visible(command)} for text, command in table.readings]
        or [{"text": escape.visible(table.none), "command": ""}],  # no head stands out: the rule it was judged by, as the static page says
    }
    blob = json.dumps(data, ensure_ascii=False).replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    note = ("" if exact else f"<p class=\"note\">The sentence has {len(grid.tokens)} tokens: each cell is the largest weight of its "
            f"block of tokens, as in the thumbnails.</p>")  # fmt: skip
    return TEMPLATE.format(title=escape.html(grid.title), top=top(grid.title), readings=section("Readings"), note=note, data=blob,
                           style=_resource("explorer.css"), script=_resource("explorer.js"))  # fmt: skip


def _resource(name: str) -> str:
    """The page's style or script, kept beside this module as files of their own language."""
    from importlib.resources import files

    return files("attncli.formats").joinpath(name).read_text(encoding="utf-8")


TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
{top}{note}<p class="hint">Click a head (or choose its layer and head) to see its weights; hover over a row of the matrix to shade the
sentence by what that query token attends to.</p>
<div id="controls"><label>layer <select id="layer"></select></label> <label>head <select id="head"></select></label>
<button id="theme" type="button">light / dark</button></div>
<div id="grid" role="grid"></div>
<div id="panel"><div id="matrix-box"></div><div><p id="tip"></p><p id="sentence"></p></div></div>
{readings}<ul id="readings"></ul>
<script type="application/json" id="attncli-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""
