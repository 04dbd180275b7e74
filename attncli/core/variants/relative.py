"""T5's relative-position buckets: head h adds b_h[bucket(j − i)] to its scores, one learned number per bucket and head.

    bucket(r), r = j − i the key's position less the query's, with n buckets and a maximum distance D:
      bidirectional (an encoder): keys after the query (r > 0) take the upper n/2 buckets, and |r| is bucketed in n/2
      causal (a decoder): only r ≤ 0 occurs; its distance i − j is bucketed in all n
      a distance d below e = (buckets left) / 2 is its own bucket d; beyond, the buckets grow logarithmically:
      e + ⌊ln(d / e) / ln(D / e) · (buckets left − e)⌋, at most the last bucket (every d ≥ D shares it)

Raffel et al. (2020), as transformers' T5Attention._relative_position_bucket computes it (the logarithm in float32,
as there, so that a distance on a bucket's edge falls on the same side). The bias is the same for every layer of a
stack (T5 keeps the table in the first layer) and T5 divides its scores by nothing (scale 1).

The module also holds how it is shown: the stage-table rows and step of the additive biases (core.variants.biases),
to which it brings its term.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, ClassVar

import numpy as np

from attncli.core.records import record
from attncli.core.variants.biases import ScoreBias, _AddedToScores
from attncli.core.variants.keys import MATRIX, Read, Schema, Sizes, frozen, mapping_keys
from attncli.core.variants.shown import Say, StageRow


def relative_bucket(relative: np.ndarray, *, buckets: int, max_distance: int, bidirectional: bool) -> np.ndarray:
    """(…) T5's bucket of each relative position r = j − i (module doc): whole numbers from 0 to buckets − 1."""
    relative = np.asarray(relative, dtype=np.int64)
    out = np.zeros(relative.shape, dtype=np.int64)
    if bidirectional:
        buckets //= 2
        out += (relative > 0) * buckets  # keys after the query: the upper half
        distance = np.abs(relative)
    else:
        distance = -np.minimum(relative, 0)  # i − j for keys at or before the query; 0 after (the mask hides them)
    exact = buckets // 2
    far = np.maximum(distance, exact).astype(np.float32)  # the distances below e are exact: no logarithm of them is used
    ratio = np.log(far / np.float32(exact)) / np.float32(math.log(max_distance / exact))  # float32, as transformers computes it
    large = exact + (ratio * np.float32(buckets - exact)).astype(np.int64)
    large = np.minimum(large, buckets - 1)
    out += np.where(distance < exact, distance, large)
    return out


@record
class RelativeBuckets(_AddedToScores):
    """T5's bucketed relative-position bias: a table of one number per bucket and head."""

    key: ClassVar[str] = "relative_buckets"
    stage: ClassVar[str] = "logits"
    json_key: ClassVar[str] = "relative_buckets"
    json_slot: ClassVar[int] = 13
    json_absent: ClassVar[None] = None
    rows: ClassVar[tuple[StageRow, ...]] = ScoreBias.rows  # the additive biases' rows: B, then the biased scores

    table: np.ndarray  # (H, n) head h's number for each of the n buckets (T5 stores its transpose, relative_attention_bias)
    max_distance: int = 128  # D: every distance from D on shares the last bucket
    bidirectional: bool = True  # an encoder's (keys after the query have buckets of their own); a decoder's: False
    first: int = 0  # c: keys given in a KV cache before the sentence; query row r is at position c + r

    @property
    def buckets(self) -> int:
        return int(self.table.shape[1])

    def bucket(self, relative: np.ndarray) -> np.ndarray:
        return relative_bucket(relative, buckets=self.buckets, max_distance=self.max_distance, bidirectional=self.bidirectional)

    def relative(self, L_q: int, L_k: int) -> np.ndarray:
        """(L_q, L_k) j − i, the key's position less the query's (after a cache of c keys, the queries start at c)."""
        i = np.arange(self.first, self.first + L_q)[:, None]  # (L_q, 1)
        j = np.arange(L_k)[None, :]  # (1, L_k)
        return np.asarray(j - i)

    def matrix(self, head: int, L_q: int, L_k: int) -> np.ndarray:
        """(L_q, L_k) b_h[bucket(j − i)] for head h (from 1)."""
        return np.asarray(self.table[head - 1][self.bucket(self.relative(L_q, L_k))], dtype=np.float64)

    def _exact(self) -> int:
        return (self.buckets // 2 if self.bidirectional else self.buckets) // 2

    def describe(self) -> str:
        each = f"{self.buckets // 2} for keys before the query, {self.buckets // 2} after" if self.bidirectional else "keys before the query only"
        return (
            f"T5 relative-position buckets: {self.buckets} buckets ({each}), distances below {self._exact()} exact, "
            f"then logarithmic up to {self.max_distance}; head h adds b_h[bucket(j − i)]"
        )

    def as_json(self) -> dict[str, object]:
        return {"buckets": self.buckets, "max_distance": self.max_distance, "bidirectional": self.bidirectional, "table": self.table}

    def term(self, n: Any) -> str:
        """Its part of B in a formula: b[bucket(j − i)]."""
        return r"b[\operatorname{bucket}(j - i)]" if n.tex else "b[bucket(j − i)]"

    def narrated(self, expl: Any, key: Any, say: Say) -> tuple[str, Decimal, bool]:
        """Its term in a key's line of the step: the text, what a reader adds up, and whether the shown number is the one used."""
        w, p, s = say.w, say.p, expl.scenario
        b = float(self.matrix(expl.head.head, s.L, s.L_k)[expl.position - 1, key.position - 1])
        return (f" {w.minus} {w.num(-b, p)}" if b < 0 else f" + {w.num(b, p)}"), say.shown(b), True

    def notes(self, expl: Any) -> list[str]:
        h = expl.head.head
        i = self.first + expl.position - 1  # the query's position, from 0 as T5 counts
        shown = [key for key in expl.keys if not key.masked][:8]
        relative = np.array([key.position - 1 - i for key in shown])
        buckets = self.bucket(relative)
        pairs = ", ".join(f"{key.label}: j − i = {int(r)} → bucket {int(k)}" for key, r, k in zip(shown, relative, buckets))
        return [
            f"T5's relative-position bias adds head {h}'s learned number for the bucket of j − i, the key's position less the "
            f"query's ({pairs}{', …' if len(shown) < sum(not key.masked for key in expl.keys) else ''}). Distances below "
            f"{self._exact()} have a bucket each; farther ones share logarithmically wider buckets up to {self.max_distance}"
            + (", and keys after the query have buckets of their own (bidirectional)." if self.bidirectional else "."),
            f"The table has {self.buckets} numbers per head and serves every layer of the stack; no position embedding is "
            "added to the tokens.",
        ]

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        "description": "T5's relative-position buckets: {table: H rows of n numbers (head h's number per bucket), max_distance: D "
        "(default 128), bidirectional: true (an encoder; false for a decoder)}. Head h adds table[h][bucket(j - i)] to its scores.",
        "type": "object",
        "additionalProperties": False,
        "required": ["table"],
        "properties": {"table": MATRIX, "max_distance": {"type": "integer", "minimum": 2}, "bidirectional": {"type": "boolean"}},
    }
    schema_after: ClassVar[str] = "alibi"
    softmax_only: ClassVar[bool] = True  # it biases the logits a softmax weighs

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> RelativeBuckets | None:
        """`relative_buckets: {table: [[…], …], max_distance: D, bidirectional: true | false}`."""
        if read.form != "mapping":
            raise read.error(read.found(), "{table: [[b_1 … b_n] per head], max_distance: D, bidirectional: true | false}")
        items = read.mapping(mapping_keys(cls.schema))
        if "table" not in items:
            raise read.error("`table` is missing", "{table: [[b_1 … b_n] per head]}")
        table = items["table"].matrix()
        bidirectional = items["bidirectional"].boolean() if "bidirectional" in items else True
        least = 4 if bidirectional else 2
        if table.shape[0] != sizes.heads or table.shape[1] < least:
            raise items["table"].error(
                f"{table.shape[0]} rows of {table.shape[1]} numbers", f"{sizes.heads} rows (one per head) of at least {least} numbers (buckets)"
            )
        exact = (table.shape[1] // 2 if bidirectional else table.shape[1]) // 2
        distance = items["max_distance"].whole(exact + 1) if "max_distance" in items else 128
        if distance <= exact:
            raise items["table"].error(f"max_distance {distance} is not beyond the {exact} exact buckets", f"a table or max_distance with max_distance > {exact}")
        return cls(frozen(table), max_distance=distance, bidirectional=bidirectional, first=sizes.cached)
