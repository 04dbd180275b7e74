"""The sentence shaded by attention: what one query token attends to, in one head, in each head of a layer, or in every layer.

Input: a `HeadMap` that kept its focus row (attncli.core.heads) and where it came from. Output:
`Shading`, plain rows of weights (one per head, or a layer's mean over its heads) that
attncli.formats.shade draws, and the attncli.heads-word/1 JSON document.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from attncli.core.heads import HeadMap
from attncli.errors import AttnError, option
from attncli.walkthroughs.heads import Source, row_readings, source_json, tokens_json
from attncli.walkthroughs.narration import quoted

SCHEMA = "attncli.heads-word/1"


class ShadedRow(NamedTuple):
    """The weights one query gives every token, in one head or averaged over a layer's heads."""

    layer: int  # from 1
    head: int | None  # from 1; None for the mean over the layer's heads
    weights: np.ndarray  # (L,) summing to 1 (less with a learned sink); hidden keys 0
    visible: np.ndarray  # (L,) bool: the keys the mask lets the query see
    readings: tuple[str, ...]  # what a single head's row shows, in words (none for a mean)
    kv_head: int | None = None  # the key/value head this query head shares, under grouped-query attention

    @property
    def name(self) -> str:
        return f"L{self.layer} " + (f"H{self.head}" if self.head is not None else "mean") + (f" kv{self.kv_head}" if self.kv_head else "")


class Shading(NamedTuple):
    """What the query at `position` attends to, row by row."""

    title: str
    tokens: tuple[str, ...]
    position: int  # the query, from 1
    rows: tuple[ShadedRow, ...]


def shading(heads: HeadMap, *, layer: int | None, head: int | None) -> Shading:
    """With `layer`: its heads one by one and their mean (or head `head` alone); without: every layer's mean (or head `head`)."""
    if heads.focus is None or not heads.focus_rows:
        raise ValueError("the map was computed without a focus row")
    last = heads.first_layer + heads.layers - 1
    if layer is not None and not heads.first_layer <= layer <= last:
        raise AttnError(f"found {layer}", key=option("layer"), expected=f"a layer from {heads.first_layer} to {last}")
    if head is not None and not 1 <= head <= heads.heads:
        raise AttnError(f"found {head}", key=option("head"), expected=f"a head from 1 to {heads.heads}")
    layers = range(heads.first_layer, last + 1) if layer is None else [layer]
    rows = []
    for n in layers:
        weights, visible = heads.focus_rows[n - heads.first_layer], heads.focus_visible[n - heads.first_layer]  # (H, L), (L,)
        chosen = [head] if head is not None else list(range(1, heads.heads + 1)) if layer is not None else []
        for h in chosen:
            row = weights[h - 1]
            readings = row_readings(row.tolist(), heads.tokens, heads.tokens, heads.focus + 1, visible.tolist())
            rows.append(ShadedRow(n, h, row, visible, tuple(readings), heads.kv_head(h) if heads.kv_heads != heads.heads else None))
        if (head is None and heads.heads > 1) or not chosen:
            rows.append(ShadedRow(n, None, weights.mean(axis=0), visible, ()))
    query = heads.tokens[heads.focus]
    if head is not None:
        whose = f"head {head}"
    elif heads.heads == 1:  # its rows are that head's own: no mean is drawn
        whose = "its one head"
    else:
        whose = "each head and their mean" if layer is not None else f"the mean of its {heads.heads} heads"
    what = (f"layer {layer}, " if layer is not None else "every layer, ") + whose
    title = f"What {quoted(query)} (position {heads.focus + 1}) attends to: {what}"  # a token in prose, quoted as the readings quote it
    return Shading(title, heads.tokens, heads.focus + 1, tuple(rows))


def document(shaded: Shading, source: Source) -> dict[str, Any]:
    """The attncli.heads-word/1 JSON document: the query, and per row its layer, head (null: the mean) and weights."""
    return {
        "schema": SCHEMA,
        "source": source_json(source),
        "tokens": tokens_json(shaded.tokens, source),
        "query": {"position": shaded.position, "label": shaded.tokens[shaded.position - 1]},
        "rows": [{"layer": r.layer, "head": r.head, **({"kv_head": r.kv_head} if r.kv_head is not None else {}), "weights": r.weights.tolist(),
                  "visible": r.visible.tolist(), "readings": list(r.readings)} for r in shaded.rows],  # fmt: skip
    }
