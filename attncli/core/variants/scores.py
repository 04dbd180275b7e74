"""A score matrix given directly: S = Q·Kᵀ is not computed, the scenario gives it (L_q × L_k per head).

Everything from there on is the textbook's and the other variants' (scaling, soft-capping, a bias or ALiBi, the mask,
a learned sink, the softmax, the weighted sum of the values given as V): a worked example that starts at the scores,
as articles on the softmax do. Its registry stage, "scores", stands in for the dot products: the engine takes each
head's matrix (`matrix`) instead of q·kᵀ, the stage table writes the scores row as given and shows no Q or K
(`replaces`), and explain's step of the dot products is this variant's (`narrate`). d_k, for `scale: sqrt_dk`, is
given beside the scores or not at all (then the scale is `none` or a number). Dimension names: H heads, L_q queries,
L_k keys.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import MATRICES, MATRIX, Read, Schema, Sizes, frozen
from attncli.core.variants.shown import Narrated, Say


@record
class GivenScores:
    """Each head's scores as given: the softmax's input before any scaling."""

    key: ClassVar[str] = "scores"
    stage: ClassVar[str] = "scores"  # stands in for q·kᵀ: the engine asks `matrix(h)`
    json_key: ClassVar[str] = "given_scores"
    json_slot: ClassVar[int] = 14
    json_absent: ClassVar[bool] = False
    replaces: ClassVar[tuple[str, ...]] = ("W_Q", "b_Q", "Q", "W_K", "b_K", "K")  # no queries or keys to show: the scores are given

    S: np.ndarray  # (H, L_q, L_k) each head's scores
    d_k: int | None = None  # the width √d_k divides by, when given

    def matrix(self, h: int) -> np.ndarray:
        """(L_q, L_k) head h's (from 1) scores, a new array the engine may round in place."""
        return np.array(self.S[h - 1], dtype=np.float64)

    def describe(self) -> str:
        width = f", d_k = {self.d_k}" if self.d_k is not None else ""
        return f"scores given directly (S per head, {self.S.shape[1]} × {self.S.shape[2]}{width}): no Q or K, no dot products"

    def as_json(self) -> bool:
        return True

    def formula(self, n: Any) -> str:
        """The scores row's formula: S (given)."""
        return f"{n('S')} {n.text('(given)')}"

    def introduce(self, expl: Any) -> list[str]:
        """explain's sentence before the steps: where this head's scores and values come from."""
        s, h = expl.scenario, expl.head
        which = f" of head {h.head} (of {s.heads})" if s.heads > 1 else ""
        values = f"; its values are columns {(h.kv_head - 1) * s.d_v + 1}–{h.kv_head * s.d_v} of V" if s.G > 1 else ""
        return [f"The scores are given directly: the query's row is row {expl.position} of the given S{which}{values}. "
                "There is no Q and no K, so there are no dot products to work out."]  # fmt: skip

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """The query's row of the given scores, in place of the dot products."""
        w, n = say.w, say.n
        lines: list[tuple[str, ...]] = [(w.label(key.label), w.num(key.score, say.p), ":") for key in say.shown_keys()]
        notes = [f"These are row {expl.position} of the given S: the scenario starts at the scores, so everything from here on "
                 "(scaling, the mask, the softmax, the weighted values) is worked out from them."]  # fmt: skip
        formula = f"{w.text('score')} = {n('S')}_{{{expl.position}j}}" if w.tex else f"score = {n('S')}[{expl.position}, j] (given)"
        return Narrated("The given scores", formula, lines, notes)

    # -- its scenario key (core.variants.keys; read by sources.yaml_scenario instead of Q and K) --

    schema: ClassVar[Schema] = {
        "anyOf": [
            {**MATRIX, "description": "L_q x L_k: one head's scores."},
            {**MATRICES, "description": "One L_q x L_k matrix per head."},
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["S"],
                "properties": {
                    "S": {"anyOf": [MATRIX, MATRICES], "description": "The scores: one L_q x L_k matrix, or one per head."},
                    "d_k": {"type": "integer", "minimum": 1, "description": "The width of a query/key, for scale: sqrt_dk."},
                },
            },
        ],
        "description": "The scores given directly instead of Q and K (S = Q·Kᵀ is not computed): everything from the scaling on "
        "(scale, soft-capping, a bias, the mask, the softmax, the weighted sum of V) is worked out from them. Give V beside them; "
        "not with Q, K, embeddings, weights, rope, qk_norm, mla, cache or attention without softmax. `scale: sqrt_dk` (the "
        "default) needs d_k: write {S: ..., d_k: 64}, or scale: none or a number.",
    }
    schema_after: ClassVar[str] = "V"  # beside V, in place of Q and K
    excludes: ClassVar[dict[str, tuple[str, str]]] = {  # keys it cannot stand beside: why, and what to write instead
        key: (f"`{key}` beside `scores`: the scores are given, so there are no queries and keys to {what}", f"no `{key}` beside `scores`")
        for key, what in (
            ("Q", "give"), ("K", "give"), ("embeddings", "project"), ("W_Q", "project"), ("W_K", "project"), ("W_V", "project (give V)"),
            ("b_Q", "project"), ("b_K", "project"), ("b_V", "project (give V)"), ("rope", "rotate"), ("qk_norm", "normalise"),
            ("mla", "make"), ("cache", "cache (give the cached keys' scores as columns of S)"),
            ("linear_attention", "map (attention without softmax needs q and k)"), ("retention", "decay (retention needs q and k)"),
        )
    }  # fmt: skip

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> GivenScores:
        """`scores: [[…]]`, a list of per-head matrices, or {S: …, d_k: N}; each L_q × L_k."""
        d_k = None
        matrices = read
        if read.form == "mapping":
            items = read.mapping(("S", "d_k"))
            if "S" not in items:
                raise read.error("`scores` has no `S`", "{S: the scores, d_k: the width √d_k divides by}")
            matrices = items["S"]
            d_k = items["d_k"].whole(1, what="a width") if "d_k" in items else None
        if matrices.form != "list":
            raise matrices.error(matrices.found(), "an L_q × L_k matrix of scores, one per head, or {S: …, d_k: N}")
        blocks = matrices.matrices()
        if blocks is None:
            blocks = [matrices.matrix()]
        H, L_q, L_k = sizes.heads, sizes.L_q, sizes.L_k
        if len(blocks) != H:
            raise matrices.error(f"{len(blocks)} score matrices for heads = {H}", f"{H} matrices of {L_q} × {L_k}, one per head")
        for h, block in enumerate(blocks, 1):
            if block.shape != (L_q, L_k):
                which = f"head {h}'s scores are" if H > 1 else "the scores are"
                raise matrices.error(f"{which} {block.shape[0]} × {block.shape[1]}", f"{L_q} × {L_k}: one row per query, one column per key")
        scale = read.beside("scale")
        if d_k is None and (scale is None or scale.text == "sqrt_dk"):
            raise read.error("the scores are given without d_k, so they cannot be divided by √d_k (scale: sqrt_dk, the default)",
                             "`scale: none`, a number (`scale: 8`), or `scores: {S: …, d_k: 64}`")  # fmt: skip
        return cls(frozen(np.stack(blocks)), d_k)

    def sized(self, sizes: Sizes) -> Sizes:
        """The scenario's sizes with it: d_k as given (0 when not: no √d_k to divide by)."""
        return sizes._replace(d_k=self.d_k or 0, d_rope=0)
