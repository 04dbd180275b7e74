"""A KV cache given before the sentence: keys and values of c earlier tokens (prefix caching, paged attention).

The sentence's tokens come after the cache: query i (from 1) sits at position c + i and reads the c
cached keys, then the new ones up to itself; the causal rule, a window, sinks and padding count
absolute positions 1 … c + L (the mask's `first`). The cached keys are given as a real KV cache holds
them: already turned by RoPE at their own positions, so they are used and shown as given; the new
tokens' q and k are turned from position c on (the scenario's Rope carries that offset). Dimension
names: c cached tokens, G key/value heads, d_k, d_v the widths of one head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from attncli.core.variants.keys import MATRICES, MATRIX, TOKENS, Schema


@dataclass(frozen=True, eq=False)
class KvCache:
    key: ClassVar[str] = "cache"
    stage: ClassVar[str] = "cache"  # prepended to each head's keys and values after RoPE: the engine reads it, no stage loop
    json_key: ClassVar[str] = "cache"
    json_slot: ClassVar[int] = 9
    json_absent: ClassVar[None] = None

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
    excludes: ClassVar[dict[str, str]] = {  # keys it cannot stand beside (yet), and why
        "mla": "multi-head latent attention caches its latent, not k and v",
    }
