"""What the residual stream, or one head's share of it, says about the next token: the logit lens and direct logit attribution.

Dimension names: L tokens, d = d_model, V the vocabulary, n vectors read at once, d_v a head's value size.

A decoder's logits at position p are W_U · norm(x_N[p]): the residual stream after the last layer, x_N, through the final
norm (RMSNorm: x / rms(x) ⊙ γ, rms(x) = √(mean(x²) + ε)) and the unembedding W_U (V, d) (lm_head, or the embedding table
when the two are tied).

- The **logit lens** (nostalgebraist, 2020) reads the stream after layer l as if it were the last: W_U · norm(x_l[p]), the
  norm computed on x_l itself. After the last layer it is the model's own logits.
- **Direct logit attribution** (Elhage et al., 2021, "A Mathematical Framework for Transformer Circuits") splits x_N into
  the parts the layers added: the embedding, each head's output through its rows of W_O (o_h · W_O[h], what the residual
  stream receives from head h), the output biases and each MLP. RMSNorm is linear once rms(x) is fixed; with its scale
  **frozen at the real final residual's value**, rms(x_N[p]), part c contributes W_U · (c / rms(x_N[p]) ⊙ γ), and the
  contributions of all the parts add up to the model's logits exactly. (A norm after attention, OLMo 2's, is frozen the
  same way at the whole attention output's rms, so the heads' parts add up to what it gives.) A head's attribution is what its output alone
  adds to each token's logit, not what the model would predict without it (the norm would change).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

TOP = 3  # the tokens a reading names


def rms(x: np.ndarray, eps: float) -> np.ndarray:
    """(…,) √(mean(x²) + ε) over the last axis: what RMSNorm divides by."""
    root: np.ndarray = np.sqrt((x * x).mean(axis=-1) + eps)
    return root


def normed(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """(n, d) RMSNorm of each row, scaled by γ = `weight` (d,): the final norm, as the logit lens applies it to each layer."""
    out: np.ndarray = x / rms(x, eps)[:, None] * weight
    return out


def frozen(parts: np.ndarray, final: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """(n, d) each part (n, d) through the final norm with its scale frozen at the final residual `final` (d,)'s: c / rms(x_N) ⊙ γ.

    Parts that sum to `final` give rows that sum to normed(final): the norm is linear once its scale is fixed.
    """
    out: np.ndarray = parts / rms(final, eps) * weight
    return out


def head_part(output: np.ndarray, W_O: np.ndarray, head: int, d_v: int) -> np.ndarray:
    """(d,) what head `head` (from 1) writes into the residual stream: its output (d_v,) times its rows of W_O (H·d_v, d).

    The attention block's output is concat(o_1 … o_H)·W_O + b_O = Σ_h o_h·W_O[(h−1)·d_v : h·d_v] + b_O.
    """
    rows = W_O[(head - 1) * d_v : head * d_v]  # (d_v, d)
    out: np.ndarray = output @ rows  # (d_v,) @ (d_v, d)
    return out


class Promoted(NamedTuple):
    """The tokens a vector of logits raises most, largest first (ids of the vocabulary, with their logits)."""

    ids: tuple[int, ...]
    logits: tuple[float, ...]
    texts: tuple[str, ...] = ()  # the tokens as text, when a tokenizer said them


def top(logits: np.ndarray, k: int = TOP) -> Promoted:
    """The `k` largest of (V,) `logits`, largest first; equal logits in id order."""
    k = min(k, logits.size)
    chosen = np.argpartition(-logits, k - 1)[:k] if k < logits.size else np.arange(logits.size)
    ordered = sorted(chosen.tolist(), key=lambda i: (-logits[i], i))
    return Promoted(tuple(int(i) for i in ordered), tuple(float(logits[i]) for i in ordered))


class HeadLens(NamedTuple):
    """Direct logit attribution of one head at one position: what its output adds to each token's logit, the largest first."""

    layer: int  # from 1
    head: int  # from 1
    position: int  # the query's position, from 1
    promoted: Promoted  # the tokens its output raises most, with what it adds to their logits
    scale: float  # rms(x_N) at that position: the final norm's frozen scale
    vocabulary: int  # V
    tied: bool  # the unembedding is the embedding table
