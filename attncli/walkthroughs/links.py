"""Which head links word A to word B: every layer × head ranked by the weight A's query gives B's key.

Input: a `HeadMap` that kept its focus row (A's weights over every key, in every head of every
layer: attncli.core.heads) and the key positions of B (every occurrence of the word, or the one
`--to-position` names). Output: `Link` rows, ranked, that the map's page draws as a grid shaded
by that weight and a table, and the attncli.heads-link/1 JSON document (one row per head).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from attncli.core.heads import HeadMap, fold
from attncli.errors import AttnError, option
from attncli.walkthroughs.heads import ExplainCall, Source, explain_call, named, source_json, tokens_json

SCHEMA = "attncli.heads-link/1"
TOP = 10  # the heads named with their explain commands, unless --top says otherwise


class Link(NamedTuple):
    """One head's weight from the query A to the key B (summed over B's positions), and its rank among every head."""

    layer: int  # from 1
    head: int  # from 1
    weight: float  # Σ over B's positions of a_(A, B): 0 … 1
    rank: int  # 1 = the head that links A to B most
    kv_head: int | None  # the key/value head, when heads share them
    explain: ExplainCall


def key_positions(tokens: Sequence[str], word: str | None, position: int | None) -> tuple[int, ...]:
    """The key rows (from 0) B names: `position` (from 1), or every occurrence of `word` (case and a leading space mark ignored)."""
    if position is not None:
        if not 1 <= position <= len(tokens):
            raise AttnError(f"position {position} is outside the sentence", key=option("to_position"), expected=f"a position from 1 to {len(tokens)}")
        if word is not None and fold(tokens[position - 1]) != fold(word):
            raise AttnError(f"position {position} holds {tokens[position - 1]!r}, not {word!r}", key=option("to_position"),
                            expected=f"a position of {word!r}, or {option('to')} alone")  # fmt: skip
        return (position - 1,)
    assert word is not None
    found = tuple(j for j, token in enumerate(tokens) if fold(token) == fold(word))
    if not found:
        shown = " ".join(tokens) if len(tokens) <= 40 else " ".join(tokens[:40]) + f" … ({len(tokens)} tokens)"
        raise AttnError(f"{word!r} is not a token of the sentence", key=option("to"), expected=f"one of its tokens (case is ignored): {shown}")
    return found


def links(heads: HeadMap, keys: Sequence[int], source: Source) -> list[Link]:
    """Every head of every layer, ranked by the weight the focus query gives `keys` (largest first; ties by layer, then head)."""
    if heads.focus is None or not heads.focus_rows:
        raise ValueError("the map was computed without a focus row")
    columns = np.asarray(keys, dtype=int)
    if heads.focus_visible and not any(seen[columns].any() for seen in heads.focus_visible):
        from attncli.walkthroughs.online_report import span

        query, key = describe(heads, keys)
        sees = np.flatnonzero(np.any(heads.focus_visible, axis=0)) + 1  # positions from 1
        raise AttnError(f"the mask hides {key} from {query} in every layer: no head can link them", key=option("to"),
                        expected=f"a key the query sees: position{'s' * (len(sees) > 1)} {span(sees)}")  # fmt: skip
    weights = np.stack([rows[:, columns].sum(axis=-1) for rows in heads.focus_rows])  # (layers, H)
    order = sorted(np.ndindex(weights.shape), key=lambda at: (-weights[at], at))
    shared = heads.kv_heads != heads.heads
    out = []
    for rank, (li, hi) in enumerate(order, 1):
        layer, head = heads.first_layer + li, hi + 1
        call = explain_call(source, heads, layer, head, heads.focus)
        out.append(Link(layer, head, float(weights[li, hi]), rank, heads.kv_head(head) if shared else None, call))
    return out


def grid(heads: HeadMap, ranked: Sequence[Link]) -> np.ndarray:
    """(layers, H, 1, 1) each head's link weight as a one-cell thumbnail: the map's grid shaded by it."""
    out = np.zeros((heads.layers, heads.heads, 1, 1))
    for link in ranked:
        out[link.layer - heads.first_layer, link.head - 1, 0, 0] = link.weight
    return out


def describe(heads: HeadMap, keys: Sequence[int]) -> tuple[str, str]:
    """('it' (position 8), 'animal' (position 2)): the query and the keys as a reader names them."""
    query = f"{_quoted(heads.tokens[heads.focus or 0])} (position {(heads.focus or 0) + 1})"
    positions = ", ".join(str(j + 1) for j in keys)
    key = f"{_quoted(heads.tokens[keys[0]])} (position{'s' * (len(keys) > 1)} {positions})"
    return query, key


def title(source: Source, heads: HeadMap, keys: Sequence[int]) -> str:
    query, key = describe(heads, keys)
    return f"Which heads link {query} to {key}: every head of {named(source)}, {heads.layers} layer{'s' * (heads.layers != 1)} × {heads.heads} head{'s' * (heads.heads != 1)}"


def document(heads: HeadMap, keys: Sequence[int], source: Source, ranked: Sequence[Link], spell: Callable[[ExplainCall], str]) -> dict[str, Any]:
    """The attncli.heads-link/1 JSON document: one row per head (layer, head, weight, rank), best first, with the explain call."""
    return {
        "schema": SCHEMA,
        "source": source_json(source),
        "tokens": tokens_json(heads.tokens, source),
        "from": {"label": heads.tokens[heads.focus or 0], "position": (heads.focus or 0) + 1},
        "to": {"label": heads.tokens[keys[0]], "positions": [j + 1 for j in keys]},
        "weight": "the weight the query gives the key (summed over its positions) in each head, after the softmax: 0 … 1",
        "layers": heads.layers,
        "heads_per_layer": heads.heads,
        "heads": [{"layer": r.layer, "head": r.head, **({"kv_head": r.kv_head} if r.kv_head is not None else {}),
                   "weight": r.weight, "rank": r.rank, "explain": spell(r.explain)} for r in ranked],  # fmt: skip
    }


def _quoted(label: str) -> str:
    return f"'{label}'"
