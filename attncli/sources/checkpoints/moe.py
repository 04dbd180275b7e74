"""Mixture-of-experts routing in float64: the router's top-k, the weights of the chosen experts, and the header's line about them.

Dimension names: L tokens, E experts, k experts per token. Experts are counted from 1 wherever people read them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from attncli.core.rounding import round_decimals


class Routing(NamedTuple):
    """Which experts each token of one layer used, and with what weight."""

    layer: int  # from 1
    experts: np.ndarray  # (L, k) the chosen experts, from 0, highest router logit first
    weights: np.ndarray  # (L, k) their weights in the token's output (each row sums to 1 after a softmax over the chosen)
    total: int  # E


def top_k_softmax(logits: np.ndarray, k: int, *, layer: int) -> Routing:
    """(L, E) router logits → each token's k largest, weighted by a softmax over those k only (gpt-oss, Mixtral).

    Ties go to the lower expert number, as a stable sort gives them.
    """
    chosen = np.argsort(-logits, axis=-1, kind="stable")[:, :k]  # (L, k)
    top = np.take_along_axis(logits, chosen, axis=-1)  # (L, k)
    e = np.exp(top - top.max(axis=-1, keepdims=True))  # (L, k)
    return Routing(layer, chosen, e / e.sum(axis=-1, keepdims=True), logits.shape[-1])


TOKENS_LISTED = 12  # a routing line lists this many tokens' experts, then counts per expert


def routing_note(routing: Routing) -> str:
    """'layer 1's MoE MLP (2 of 4 experts per token, router weights): token 1 → 3 (0.62), 1 (0.38); …; tokens per expert: 1 ×5, …'."""
    L, k = routing.experts.shape
    per_token = [
        f"token {i + 1} → " + ", ".join(f"{int(e) + 1} ({w:.2f})" for e, w in zip(routing.experts[i], round_decimals(routing.weights[i], 2)))  # halves away, as the tables
        for i in range(min(L, TOKENS_LISTED))
    ]
    if L > TOKENS_LISTED:
        per_token.append(f"… ({L - TOKENS_LISTED} more tokens)")
    counts = np.bincount(routing.experts.ravel(), minlength=routing.total)  # (E,)
    used = ", ".join(f"{e + 1} ×{n}" for e, n in enumerate(counts) if n)
    unused = routing.total - int((counts > 0).sum())
    return (
        f"layer {routing.layer}'s MoE MLP ({k} of {routing.total} experts per token, router weights): "
        + "; ".join(per_token)
        + f"; tokens per expert: {used}"
        + (f"; {unused} expert{'s' * (unused != 1)} unused" if unused else "")
    )


def softmax_top_k(logits: np.ndarray, k: int, *, normalise: bool, layer: int) -> Routing:
    """(L, E) router logits → a softmax over all E experts in float32, each token's k largest probabilities, renormalised
    over those k when `normalise` (Qwen3-MoE's norm_topk_prob), as transformers' TopKRouter computes them.

    Ties go to the lower expert number, as a stable sort gives them.
    """
    logits32 = logits.astype(np.float32)
    e = np.exp(logits32 - logits32.max(axis=-1, keepdims=True)).astype(np.float32)  # (L, E)
    probs = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)  # (L, E) softmax(…, dtype=float32)
    chosen = np.argsort(-probs, axis=-1, kind="stable")[:, :k]  # (L, k)
    top = np.take_along_axis(probs, chosen, axis=-1)  # (L, k)
    if normalise:
        top = (top / top.sum(axis=-1, keepdims=True)).astype(np.float32)
    return Routing(layer, chosen, top.astype(np.float64), logits.shape[-1])


def top_k_sigmoid(logits: np.ndarray, k: int, *, layer: int) -> Routing:
    """(L, E) router logits → each token's k largest, each weighted by its sigmoid, not renormalised (Llama 4's Llama4Router).

    Ties go to the lower expert number, as a stable sort gives them.
    """
    chosen = np.argsort(-logits, axis=-1, kind="stable")[:, :k]  # (L, k)
    top = np.take_along_axis(logits, chosen, axis=-1)  # (L, k)
    return Routing(layer, chosen, 1.0 / (1.0 + np.exp(-top)), logits.shape[-1])
