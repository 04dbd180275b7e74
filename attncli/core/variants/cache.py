"""A KV cache given before the sentence: keys and values of c earlier tokens (prefix caching, paged attention).

The sentence's tokens come after the cache: query i (from 1) sits at position c + i and reads the c
cached keys, then the new ones up to itself; the causal rule, a window, sinks and padding count
absolute positions 1 … c + L (the mask's `first`). The cached keys are given as a real KV cache holds
them: already turned by RoPE at their own positions, so they are used and shown as given; the new
tokens' q and k are turned from position c on (the scenario's Rope carries that offset). Dimension
names: c cached tokens, G key/value heads, d_k, d_v the widths of one head.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import MATRICES, MATRIX, TOKENS, Read, Schema, Sizes, frozen, mapping_keys
from attncli.core.variants.shown import StageRow


@record
class KvCache:
    key: ClassVar[str] = "cache"
    stage: ClassVar[str] = "cache"  # prepended to each head's keys and values after RoPE: the engine reads it, no stage loop
    json_key: ClassVar[str] = "cache"
    json_slot: ClassVar[int] = 9
    json_absent: ClassVar[None] = None

    rows: ClassVar[tuple[StageRow, ...]]  # the cached keys and values as given, drawn once before the heads; below the class

    tokens: tuple[str, ...]  # (c,) the cached tokens, positions 1 … c
    K: np.ndarray  # (c, G·d_k) the cached keys, as stored: after RoPE
    V: np.ndarray  # (c, G·d_v) the cached values

    @property
    def length(self) -> int:
        """c, the number of cached tokens."""
        return len(self.tokens)

    def head_rows(self, g: int, d_k: int, d_v: int) -> tuple[np.ndarray, np.ndarray]:
        """(c, d_k) and (c, d_v): key/value head g's (from 1) cached keys and values."""
        return self.K[:, (g - 1) * d_k : g * d_k], self.V[:, (g - 1) * d_v : g * d_v]

    def stacked(self, n: Any, letter: str, made: str) -> str:
        """The formula of each head's K or V, whose first c rows are the cache's: `K = [K_cache; X·W_K]` (made: `K = X·W_K`)."""
        lhs, _, rhs = made.partition(" = ")
        if not rhs:  # given directly: `K (given)`
            lhs, rhs = n(letter), n.text("given")
        return f"{lhs} = [{n(cached(n, letter))}; {rhs}]"

    def describe(self) -> str:
        c = self.length
        return (f"a KV cache of {c} token{'s' if c > 1 else ''} given ({', '.join(self.tokens)}): their k and v as cached "
                f"(k already after RoPE), not projected; the sentence continues at position {c + 1}")  # fmt: skip

    def as_json(self) -> dict[str, object]:
        return {"tokens": list(self.tokens), "length": self.length, "keys_after_rope": True}

    # -- its scenario key (core.variants.keys; read by sources.yaml_scenario, whose tokens and sizes it changes) --

    schema: ClassVar[Schema] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["tokens", "K", "V"],
        "description": "Keys and values already cached before the sentence (prefix caching, paged attention): the sentence's "
        "tokens come after them, its queries at positions c+1 … c+L read the cached keys and then their own, the causal rule "
        "counts absolute positions (so does ALiBi) and RoPE turns the new tokens from position c on. Not with `context` or `mla`.",
        "properties": {
            "tokens": {**TOKENS, "description": "The c cached tokens, in order."},
            "K": {"anyOf": [MATRIX, MATRICES], "description": "c x (G*d_k), or G per-head c x d_k: the cached keys as a KV cache holds "
                  "them, i.e. already turned by RoPE at their positions (0 … c−1 plus any rope offset) and normalised by any "
                  "qk_norm; shown and used as given."},
            "V": {"anyOf": [MATRIX, MATRICES], "description": "c x (G*d_v), or G per-head c x d_v: the cached values."},
        },
    }  # fmt: skip
    schema_after: ClassVar[str] = "mla"
    excludes: ClassVar[dict[str, tuple[str, str]]] = {  # keys it cannot stand beside (yet): why, and what to write instead
        "context": ("a KV cache holds earlier tokens of the same sequence, so it has no use in cross-attention", "no `cache` beside `context`"),
        "mla": ("`cache` with `mla`: multi-head latent attention caches its latent, not k and v", "no `cache` beside `mla`"),
    }  # fmt: skip

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> KvCache:
        """The cached tokens, keys and values: c rows each, G·d_k and G·d_v columns like the sentence's own K and V.

        Read once the heads' widths are known (after the weights, or MLA); the scenario's sizes with it are `sized`.
        """
        if read.form != "mapping":
            raise read.error(read.found(), "a mapping {tokens, K, V}: the cached tokens, keys and values")
        items = read.mapping(mapping_keys(cls.schema))
        for key in ("tokens", "K", "V"):
            if key not in items:
                raise read.error(f"the cache has no `{key}`", "`tokens`, `K` and `V`: the cached tokens, their keys and values")
        tokens = _tokens(items["tokens"])
        c, G = len(tokens), sizes.kv_heads
        arrays = []
        for key, width, what in (("K", sizes.d_k, "d_k"), ("V", sizes.d_v, "d_v")):
            matrix = _heads_matrix(items[key], c, G)
            if matrix.shape[1] != G * width:
                raise items[key].error(f"cache.{key} has {matrix.shape[1]} columns, but the sentence's {key.lower()} rows have {G} × {what} = "
                                       f"{G * width}", f"{G * width} columns, as wide as the new tokens' {key}")  # fmt: skip
            arrays.append(frozen(matrix))
        return cls(tokens=tuple(tokens), K=arrays[0], V=arrays[1])

    def sized(self, sizes: Sizes) -> Sizes:
        """The scenario's sizes with it: c more keys and values before the sentence's own."""
        return sizes._replace(L_k=sizes.L_k + self.length, cached=self.length)


def cached(n: Any, letter: str) -> str:
    """K_cache, or in TeX K_{\text{cache}}: the cached keys (letter K) or values (V), n a Notation."""
    return f"{letter}_{{\\text{{cache}}}}" if n.tex else f"{letter}_cache"


def _given(letter: str) -> Any:
    def formula(n: Any, s: Any, h: Any) -> str:
        turned = letter == "K" and any(variant.stage == "qk" for variant in s.variants)  # a cache holds k after RoPE
        return f"{cached(n, letter)} {n.text('(given, after RoPE)' if turned else '(given)')}"

    return formula


def _part(letter: str) -> Any:
    """The cache's K or V (c, G·d), from a RunResult; None without a cache."""

    def get(result: Any) -> np.ndarray | None:
        cache = next((variant for variant in result.scenario.variants if variant.stage == "cache"), None)
        array: np.ndarray | None = None if cache is None else getattr(cache, letter)
        return array

    return get


KvCache.rows = (
    StageRow("cache", "K_cache", "Cached keys", _given("K"), _part("K"), "keys", "k", after="X_kv", main=True, shared=True),
    StageRow("cache", "V_cache", "Cached values", _given("V"), _part("V"), "keys", "v", after="K_cache", shared=True),
)


def _tokens(read: Read) -> list[str]:
    """`cache.tokens`: a non-empty list of words, each as written."""
    if read.form != "list":
        raise read.error(read.found(), "a list of words, e.g. [The, cat, sat]")
    items = read.items()
    if not items:
        raise read.error("the token list is empty", "at least one word")
    tokens = [item.word() for item in items]
    for token, item in zip(tokens, items):
        if not token.strip():
            raise item.error("an empty word", "a word")
    return tokens


def _heads_matrix(read: Read, c: int, G: int) -> np.ndarray:
    """(c, G·d) `cache.K` or `cache.V`: one matrix, or G per-head matrices side by side."""
    who = "heads" if G == 1 else "kv_heads"
    if read.form != "list":
        raise read.error(read.found(), "a matrix with one row per token")
    blocks = read.matrices()
    if blocks is None:
        matrix = read.matrix()
    else:
        if len(blocks) != G:
            raise read.error(f"{len(blocks)} per-head matrices for {who} = {G}", f"{G} matrices of L × d, one per head")
        for h, (part, item) in enumerate(zip(blocks, read.items()), 1):
            if part.shape != blocks[0].shape:
                raise item.error(f"head {h}'s matrix is {part.shape[0]} × {part.shape[1]} but head 1's is {blocks[0].shape[0]} × "
                                 f"{blocks[0].shape[1]}", "the same shape for every head")  # fmt: skip
        matrix = np.hstack(blocks)
    if matrix.shape[0] != c:
        raise read.error(f"{read.path} has {matrix.shape[0]} rows but there are {c} cached tokens", f"{c} rows, one per cached token")
    if matrix.shape[1] % G:
        raise read.error(f"{read.path} has {matrix.shape[1]} columns, which do not split evenly into {who} = {G}", f"a multiple of {G} columns")
    return matrix
