"""What a scenario is: the sequences, the weights and the variants of attention, checked and immutable.

No I/O here: `attncli.sources.yaml_scenario` reads YAML files into a `Scenario`, and other sources (a
real checkpoint) build one the same way. Matrices use the row-vector convention,
Q = X·W_Q + b_Q. Dimension names:
    L_q     query tokens            L_k     key/value tokens (= L_q without a context)
    d_model width of an embedding    H       query heads     G   key/value heads (G divides H)
    d_k     width of a query/key in one head                d_v width of a value in one head
"""

from __future__ import annotations

import collections
import functools
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from attncli.core import variants
from attncli.core.variants import (
    Alibi,
    KvCache,
    LearnedSink,
    LinearAttention,
    Mask,
    Mla,
    QkNorm,
    Retention,
    Rope,
    ScoreBias,
    SoftCap,
)
from attncli.errors import AttnError, option


def kv_head(head: int, heads: int, kv_heads: int) -> int:
    """The key/value head (from 1) that query head `head` (from 1) of `heads` reads when `kv_heads` are shared: ⌊(h−1)·G/H⌋ + 1.

    The one grouped-query map: H/G consecutive query heads share each key/value head.
    """
    return (head - 1) * kv_heads // heads + 1


class Scale(NamedTuple):
    mode: str  # "sqrt_dk", "none" or "value"
    divisor: float  # what the scores are divided by


@dataclass(frozen=True, eq=False)
class Scenario:
    """A validated scenario. Either X and the W matrices, or Q, K and V given directly (X is then None)."""

    name: str
    tokens: tuple[str, ...]  # the queries' tokens (L_q)
    heads: int  # H
    scale: Scale
    description: str = ""
    source: str = ""
    context: tuple[str, ...] | None = None  # cross-attention: the keys' and values' tokens (L_k)
    case_sensitive: bool = False
    X: np.ndarray | None = None  # (L_q, d_model) one embedding row per query token
    X_kv: np.ndarray | None = None  # (L_k, d_model) the context's embeddings; None: keys and values come from X
    kv_heads: int | None = None  # G; None means G = H
    W_Q: np.ndarray | None = None  # (d_model, H*d_k); head h uses columns (h-1)*d_k .. h*d_k
    W_K: np.ndarray | None = None  # (d_model, G*d_k)
    W_V: np.ndarray | None = None  # (d_model, G*d_v)
    b_Q: np.ndarray | None = None  # (H*d_k,)
    b_K: np.ndarray | None = None  # (G*d_k,)
    b_V: np.ndarray | None = None  # (G*d_v,)
    Q: np.ndarray | None = None  # (L_q, H*d_k) given directly instead of X·W_Q
    K: np.ndarray | None = None  # (L_k, G*d_k)
    V: np.ndarray | None = None  # (L_k, G*d_v)
    W_O: np.ndarray | None = None  # (H*d_v, d_out)
    b_O: np.ndarray | None = None  # (d_out,)
    mask: Mask = field(default_factory=Mask)
    rope: Rope | None = None
    bias: ScoreBias | None = None
    alibi: Alibi | None = None
    softcap: SoftCap | None = None
    sink_logits: LearnedSink | None = None  # gpt-oss: one logit per head in the softmax's denominator
    qk_norm: QkNorm | None = None  # Qwen3, OLMo 2, Gemma 3: RMSNorm of q and k before RoPE
    precision: int = 4  # decimals shown to people
    path: str | None = None  # the file it was read from; None when built in code
    notes: tuple[str, ...] = ()  # where the numbers come from, for the summary (e.g. a checkpoint's layer)
    word_marks: tuple[str, ...] = ()  # a real tokenizer's marks for a leading space ("␣", "Ġ", "▁"): words match without them
    encoder: str | None = None  # the architecture of an encoder checkpoint's layer ("bert"): it reads, it does not generate
    mla: Mla | None = None  # multi-head latent attention: q, k, v from latents (W_Q, W_K, W_V are then None)
    cache: KvCache | None = None  # keys and values given before the tokens (c of them): L_k = c + L_q, queries at c+1 … c+L_q
    linear_attention: LinearAttention | None = None  # attention without softmax: φ(q)·φ(k) / Σ (Katharopoulos et al. 2020)
    retention: Retention | None = None  # attention without softmax: (Q·Kᵀ ⊙ D)·V, D_ij = γ^(i−j) (RetNet)

    # -- sizes ---------------------------------------------------------------------------------

    @property
    def L(self) -> int:
        """L_q, the number of query tokens (and of all tokens without a context)."""
        return len(self.tokens)

    @property
    def L_k(self) -> int:
        return len(self.key_tokens)

    @property
    def key_tokens(self) -> tuple[str, ...]:
        if self.cache is not None:
            return self.cache.tokens + self.tokens
        return self.tokens if self.context is None else self.context

    @property
    def cached(self) -> int:
        """c, the keys given in a KV cache before the tokens (0 without): query row r (from 0) is at position c + r + 1."""
        return 0 if self.cache is None else self.cache.length

    @property
    def cross(self) -> bool:
        return self.context is not None

    @property
    def direct(self) -> bool:
        """Q, K and V were given directly (no embeddings, no weights)."""
        return self.Q is not None

    @property
    def G(self) -> int:
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def d_model(self) -> int | None:
        return None if self.X is None else int(self.X.shape[1])

    @property
    def d_k(self) -> int:
        if self.mla is not None:
            return self.mla.d_k
        queries = self.Q if self.Q is not None else self.W_Q
        assert queries is not None
        return int(queries.shape[1]) // self.heads

    @property
    def d_v(self) -> int:
        if self.mla is not None:
            return self.mla.d_v
        values = self.V if self.V is not None else self.W_V
        assert values is not None
        return int(values.shape[1]) // self.G

    @property
    def d_out(self) -> int:
        return int(self.W_O.shape[1]) if self.W_O is not None else self.heads * self.d_v

    def kv_head(self, head: int) -> int:
        """The key/value head (from 1) that query head `head` (from 1) reads (see kv_head)."""
        return kv_head(head, self.heads, self.G)

    @property
    def has_bias(self) -> bool:
        """Whether anything is added to the scaled scores (the registry's "logits" variants: a given bias, ALiBi)."""
        return bool(variants.active(self, "logits"))

    @property
    def has_output_stage(self) -> bool:
        """Whether anything happens after the heads: concatenation, W_O or b_O."""
        return self.heads > 1 or self.W_O is not None or self.b_O is not None

    # -- labels --------------------------------------------------------------------------------

    def head_numbers(self, head: int | None = None) -> list[int]:
        """The heads to show, counted from 1: all of them, or `head` after checking that it exists."""
        if head is None:
            return list(range(1, self.heads + 1))
        if not 1 <= head <= self.heads:
            raise AttnError(
                f"head {head} does not exist: the scenario has {self.heads} head{'s' if self.heads > 1 else ''}",
                key=option("head"),
                expected=f"a head from 1 to {self.heads}",
            )
        return [head]

    def fold(self, word: str) -> str:
        """The form under which words are compared ("The" == "the" unless case-sensitive; "␣Mary" == "Mary" for a checkpoint)."""
        for mark in self.word_marks:
            if word.startswith(mark) and len(word) > len(mark):
                word = word[len(mark) :]
                break
        return word if self.case_sensitive else word.casefold()

    @functools.cached_property
    def query_labels(self) -> tuple[str, ...]:
        """Row labels: the tokens, a token that repeats with its position ("the (4)"), counted after any cached tokens."""
        if self.cache is not None:
            return _unique_labels(self.key_tokens)[self.cached :]
        return _unique_labels(self.tokens)

    @functools.cached_property
    def key_labels(self) -> tuple[str, ...]:
        """Column labels: the context's tokens in cross-attention, cached keys marked as such, else the query labels."""
        if self.cache is not None:
            labels = _unique_labels(self.key_tokens)
            cached = tuple(f"{label[:-1]}, cached)" if label.endswith(")") else f"{label} (cached)" for label in labels[: self.cached])
            return cached + labels[self.cached :]
        return self.query_labels if self.context is None else _unique_labels(self.context)

    def labels(self) -> list[str]:
        """The query labels as a list (kept for callers of the first version)."""
        return list(self.query_labels)


def _unique_labels(tokens: tuple[str, ...]) -> tuple[str, ...]:
    counts = collections.Counter(tokens)
    return tuple(f"{t} ({i})" if counts[t] > 1 else t for i, t in enumerate(tokens, 1))
