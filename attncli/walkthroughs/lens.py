"""The lens in words and JSON: what a head's output promotes (direct logit attribution) and what the residual stream after a
layer reads as (the logit lens), as the map's readings and explain's output step say them (core/lens.py computes them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attncli.core.lens import HeadLens, Promoted
from attncli.document.numbers import significant

LENS_METHOD = ("direct logit attribution: the head's output through its rows of W_O, the final norm with its scale frozen at the "
               "real final residual's rms (so every part's attributions add up to the logits) and the unembedding")  # fmt: skip


def token_text(text: str) -> str:
    """A vocabulary token as a reading quotes it: its text in quotes, a backslash doubled, a line break or tab written as
    \\n or \\t and any other control character as \\xNN or \\uNNNN (a token may be one; XML, SVG and a terminal take none)."""
    import unicodedata

    named = {"\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    return "'" + "".join(named.get(c) or (repr(c)[1:-1] if unicodedata.category(c) in ("Cc", "Cs") else c) for c in text) + "'"


def _named(promoted: Promoted, signed: bool) -> list[str]:
    return [token_text(text) + (f" ({logit:+.2f})" if signed else "") for text, logit in zip(promoted.texts, promoted.logits)]


def _list_and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def promotes(lens: HeadLens, query: str) -> str:
    """"at '␣sat' (position 10) its output promotes ' on' (+0.86), 'is' (+0.67) and 'on' (+0.66) (direct logit attribution)"."""
    return f"at {query} (position {lens.position}) its output promotes {_list_and(_named(lens.promoted, True))} (direct logit attribution)"


def predicts(lens: HeadLens, query: str, stream: Sequence[Promoted]) -> list[str]:
    """explain's notes after a head's output: its direct logit attribution, ending "and so it predicts ' on'", and the logit lens
    of the residual stream after its layer and after the last one (`stream`: the embeddings, then after each layer)."""
    p = lens.promoted
    unembedding = "the embedding table, tied" if lens.tied else "lm_head"
    adds = _list_and([f"{logit:+.2f} to the logit of {token_text(text)}" for text, logit in zip(p.texts, p.logits)])
    notes = [
        f"Direct logit attribution: head {lens.head}'s output times its rows of W_O is what the residual stream receives from "
        f"this head at {query}. Through the final norm (its scale frozen at the real final residual's rms, {significant(lens.scale, 4)}, so "
        f"the parts of the residual add up to the model's logits) and the unembedding ({unembedding}), it adds {adds}, the most "
        f"of the {lens.vocabulary:,} tokens: and so it predicts {token_text(p.texts[0])}."
    ]
    if stream:
        after, last = stream[lens.layer], stream[-1]
        notes.append(
            f"Logit lens (the residual stream read through the final norm and the unembedding as if it were the last layer's): "
            f"after layer {lens.layer} it ranks {_list_and(_named(after, False))} highest; after the last layer, the model's own "
            f"logits, {_list_and(_named(last, False))}."
        )
    return notes


def lens_json(lens: HeadLens | None) -> dict[str, Any] | None:
    """A head's direct logit attribution in JSON: where it was read and the tokens its output promotes most."""
    if lens is None:
        return None
    return {"position": lens.position, "method": LENS_METHOD, "final_rms": lens.scale, "vocabulary": lens.vocabulary,
            "unembedding": "the embedding table (tied)" if lens.tied else "lm_head", "tokens": _tokens(lens.promoted)}  # fmt: skip


def logit_lens_json(stream: Sequence[Promoted]) -> list[dict[str, Any]]:
    """The logit lens in JSON: one entry per residual stream (layer 0: the embeddings), its highest-ranked tokens."""
    return [{"layer": layer, "tokens": _tokens(p)} for layer, p in enumerate(stream)]


def _tokens(p: Promoted) -> list[dict[str, Any]]:
    return [{"id": i, "text": text, "logit": logit} for i, text, logit in zip(p.ids, p.texts, p.logits)]
