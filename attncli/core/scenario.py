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
from dataclasses import field, replace
from typing import NamedTuple, TypeVar, cast

import numpy as np

from attncli.core import variants as registry
from attncli.core.records import record
from attncli.core.variants import GivenScores, KvCache, Mask, Mla, Variant, active
from attncli.errors import AttnError, option


def kv_head(head: int, heads: int, kv_heads: int) -> int:
    """The key/value head (from 1) that query head `head` (from 1) of `heads` reads when `kv_heads` are shared: ⌊(h−1)·G/H⌋ + 1.

    The one grouped-query map: H/G consecutive query heads share each key/value head.
    """
    return (head - 1) * kv_heads // heads + 1


VariantT = TypeVar("VariantT")


class Origin(NamedTuple):
    """The checkpoint a scenario was computed from, as it was asked for: enough to compute it again (decode's run of a
    longrope checkpoint's first tokens, whose factors differ from the whole sentence's)."""

    folder: str
    layer: int  # from 1
    sentence: str
    special_tokens: str  # "auto" or "none"
    target: str | None = None  # an encoder–decoder's: the decoder's text
    attention: str | None = None  # ... and which of its attentions (encoder, decoder or cross)
    shown: str | None = None  # the folder or file as the person wrote it (`model: ~/models/gpt2`), which a header names only when asked


class Scale(NamedTuple):
    mode: str  # "sqrt_dk", "none" or "value"
    divisor: float  # what the scores are divided by


@record
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
    mask: Mask = field(default_factory=Mask)  # always there (Mask() sees every key), so a field of its own: see `variant`
    precision: int = 4  # decimals shown to people
    path: str | None = None  # the file it was read from; None when built in code
    notes: tuple[str, ...] = ()  # where the numbers come from, for the summary (e.g. a checkpoint's layer)
    details: tuple[str, ...] = ()  # more notes, shown when asked for (long notes): how a checkpoint's layer was read, step by step
    word_marks: tuple[str, ...] = ()  # a real tokenizer's marks for a leading space ("␣", "Ġ", "▁"): words match without them
    encoder: str | None = None  # the architecture of an encoder checkpoint's layer ("bert"): it reads, it does not generate
    origin: Origin | None = None  # the checkpoint it was computed from; None for a scenario of given numbers
    variants: tuple[Variant, ...] = ()  # the other variants of attention it holds, at most one of each class (core.variants.REGISTRY):
    # RoPE, QK-norm (RMSNorm of q and k before RoPE), soft-capping, a bias, ALiBi, learned sinks (one logit per head in the
    # softmax's denominator), MLA (q, k, v from latents: W_Q, W_K, W_V are then None), a KV cache (c keys and values given
    # before the tokens: L_k = c + L_q, queries at c+1 … c+L_q), linear attention or retention (no softmax). Read them with
    # `variant(Kind)`; change them with `with_variants` and `without`, which dataclasses.replace cannot do for one of them.

    def __repr__(self) -> str:
        """`<Scenario 'cat': 6 tokens, d_model 2, 1 head (d_k 2, d_v 2)>`: what it is, not its numbers (a model's layer holds millions)."""
        keys = f", {self.L_k} keys" if self.L_k != self.L else ""
        width = f", d_model {self.d_model}" if self.d_model is not None else ", Q, K and V given"
        heads = f"{self.heads} head{'s' * (self.heads > 1)}" + (f" sharing {self.G} key/value head{'s' * (self.G > 1)}" if self.heads != self.G else "")
        return f"<Scenario {self.name!r}: {self.L} tokens{keys}{width}, {heads} (d_k {self.d_k}, d_v {self.d_v})>"

    def __post_init__(self) -> None:
        kinds = [type(variant) for variant in self.variants]
        assert len(set(kinds)) == len(kinds) and Mask not in kinds, f"one variant of each class, the mask as `mask`: {kinds}"

    # -- variants ------------------------------------------------------------------------------

    def variant(self, kind: type[VariantT]) -> VariantT | None:
        """The variant whose class is `kind`, or None: s.variant(Rope) -> Rope | None; s.variant(Mask) is s.mask."""
        return cast("VariantT | None", self._by_class.get(kind))

    @functools.cached_property
    def _by_class(self) -> dict[type, object]:
        """Each variant by its class, the mask's too (worked out once: the engine asks several times per head)."""
        return {type(variant): variant for variant in (self.mask, *self.variants)}

    @functools.cached_property
    def in_registry_order(self) -> tuple[Variant | Mask, ...]:
        """The mask and the variants, in the order of core.variants.REGISTRY (the engine's order)."""
        return tuple(sorted((self.mask, *self.variants), key=_registry_place))

    def with_variants(self, *new: Variant | Mask) -> Scenario:
        """This scenario with each of `new` in place of the variant of its class (or added, in registry order); a Mask replaces `mask`."""
        kinds = {type(variant) for variant in new}
        masks = [variant for variant in new if isinstance(variant, Mask)]
        kept = [variant for variant in self.variants if type(variant) not in kinds]
        held = sorted([*kept, *(variant for variant in new if not isinstance(variant, Mask))], key=_registry_place)
        return replace(self, variants=tuple(held), mask=masks[-1] if masks else self.mask)

    def without(self, *kinds: type) -> Scenario:
        """This scenario without the variants of classes `kinds` (the mask cannot go: replace it by Mask())."""
        return replace(self, variants=tuple(variant for variant in self.variants if type(variant) not in kinds))

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
        cache = self.variant(KvCache)
        if cache is not None:
            return cache.tokens + self.tokens
        return self.tokens if self.context is None else self.context

    @property
    def cached(self) -> int:
        """c, the keys given in a KV cache before the tokens (0 without): query row r (from 0) is at position c + r + 1."""
        cache = self.variant(KvCache)
        return 0 if cache is None else cache.length

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
        mla = self.variant(Mla)
        if mla is not None:
            return mla.d_k
        if (given := self.variant(GivenScores)) is not None:  # the scores given: d_k only as given beside them (0: none)
            return given.d_k or 0
        queries = self.Q if self.Q is not None else self.W_Q
        assert queries is not None
        return int(queries.shape[1]) // self.heads

    @property
    def d_v(self) -> int:
        mla = self.variant(Mla)
        if mla is not None:
            return mla.d_v
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
        return bool(active(self, "logits"))

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
        if self.cached:
            return _unique_labels(self.key_tokens)[self.cached :]
        return _unique_labels(self.tokens)

    @functools.cached_property
    def key_labels(self) -> tuple[str, ...]:
        """Column labels: the context's tokens in cross-attention, cached keys marked as such, else the query labels."""
        if self.cached:
            labels = _unique_labels(self.key_tokens)
            cached = tuple(f"{label[:-1]}, cached)" if label.endswith(")") else f"{label} (cached)" for label in labels[: self.cached])
            return cached + labels[self.cached :]
        return self.query_labels if self.context is None else _unique_labels(self.context)

    def labels(self) -> list[str]:
        """The query labels as a list (kept for callers of the first version)."""
        return list(self.query_labels)


def held(*variants: Variant | None) -> tuple[Variant, ...]:
    """The variants given that are there (not None), in registry order: Scenario(variants=held(rope, softcap, …))."""
    return tuple(sorted((variant for variant in variants if variant is not None), key=_registry_place))


def _registry_place(variant: object) -> int:
    """Where a variant's class stands in REGISTRY (a class outside it goes last)."""
    kinds: tuple[type, ...] = registry.REGISTRY
    return kinds.index(type(variant)) if type(variant) in kinds else len(kinds)


def _unique_labels(tokens: tuple[str, ...]) -> tuple[str, ...]:
    counts = collections.Counter(tokens)
    return tuple(f"{t} ({i})" if counts[t] > 1 else t for i, t in enumerate(tokens, 1))
