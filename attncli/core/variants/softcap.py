"""Logit soft-capping (Gemma 2): the scaled scores squashed into (−cap, cap) by cap·tanh(s / cap), before the mask.

The module also holds how soft-capping is shown (core.variants.shown): its stage-table row and its step of `explain`.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, ClassVar

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import Read, Schema, Sizes
from attncli.core.variants.shown import Narrated, Say, StageRow


@record
class SoftCap:
    """Every scaled score s becomes cap·tanh(s / cap): about s while |s| ≪ cap, never beyond ±cap."""

    key: ClassVar[str] = "softcap"
    stage: ClassVar[str] = "scaled"
    json_key: ClassVar[str] = "softcap"
    json_slot: ClassVar[int] = 4
    json_absent: ClassVar[None] = None
    rows: ClassVar[tuple[StageRow, ...]]  # its stage-table row, below the class

    cap: float

    def apply(self, scaled: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """(L_q, L_k) cap·tanh(scaled / cap), written into `out` when given."""
        capped: np.ndarray = np.divide(scaled, self.cap, out=out)  # (L_q, L_k)
        np.tanh(capped, out=capped)
        np.multiply(capped, self.cap, out=capped)
        return capped

    def describe(self) -> str:
        return f"logit soft-capping: cap·tanh(s / cap), cap = {self.cap:g}"

    def as_json(self) -> dict[str, object]:
        return {"cap": self.cap}

    def wrap(self, n: Any, inner: str) -> str:
        """A formula's `inner` (the scaled scores) soft-capped: 50·tanh((S / √d_k) / 50), in the notation n."""
        if n.tex:
            return rf"{self.cap:g}\tanh\left(\frac{{{inner}}}{{{self.cap:g}}}\right)"
        return f"{self.cap:g}·tanh(" + (f"({inner})" if " " in inner else inner) + f" / {self.cap:g})"

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """Each key's scaled score through cap·tanh(s / cap), and what that did to the largest ones."""
        w, p = say.w, say.p
        capped = expl.head.reshaped[self.key][expl.row]  # (L_k,) this query's soft-capped scores
        cap = say.shown(self.cap) or Decimal(repr(self.cap))  # a cap below the precision shows as 0: divide by the cap itself
        lines: list[tuple[str, ...]] = []
        for key in say.shown_keys():
            value = float(capped[key.position - 1])
            reader = cap * Decimal(repr(math.tanh(float(say.shown(key.scaled) / cap))))
            relation = say.relation(reader, value, name=f"the soft-capped score of {key.label}")
            tanh = (r"\tanh\left(" + w.frac(w.num(key.scaled, p), w.num(self.cap, p)) + r"\right)") if w.tex else (
                f"tanh({w.num(key.scaled, p)} / {w.num(self.cap, p)})")
            lines.append((w.label(key.label), f"{w.num(self.cap, p)} {w.times} {tanh} {relation} {w.num(value, p)}", ":"))
        largest = max(say.shown_keys(), key=lambda key: abs(key.scaled))
        squeeze = abs(largest.scaled) - abs(float(capped[largest.position - 1]))
        notes = [
            f"Soft-capping squashes every scaled score into (−{self.cap:g}, {self.cap:g}): a score much smaller than the cap "
            f"passes almost unchanged (tanh x ≈ x near 0), a large one is pulled toward ±{self.cap:g}. Here the largest, "
            f"{largest.label}'s {say.number(largest.scaled)}, lost {say.number(squeeze)}.",
            "Why models do it (Gemma 2): no logit can run away during training, so no single key can take all the weight by "
            "an ever-growing score; unlike clipping, tanh keeps the order of the scores and a gradient everywhere.",
        ]
        formula = (r"\text{capped} = c \tanh(\text{scaled} / c)" if w.tex else "capped = c·tanh(scaled / c)") + (
            rf", \quad c = {self.cap:g}" if w.tex else f", c = {self.cap:g}")
        return Narrated("Soft-capping the scores", formula, lines, notes)

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        "type": "number",
        "exclusiveMinimum": 0,
        "description": "Logit soft-capping (Gemma 2): each scaled score s becomes softcap·tanh(s / softcap) before the mask.",
    }
    schema_after: ClassVar[str] = "precision"
    softmax_only: ClassVar[bool] = True  # it reshapes the logits a softmax weighs

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> SoftCap:
        """`softcap: 50.0`: a positive number."""
        expected = "a positive number, the cap of cap·tanh(s / cap) (Gemma 2 uses 50.0)"
        if read.form != "plain":
            raise read.error(read.found(), expected)
        cap = read.number()
        if not (math.isfinite(cap) and cap > 0):
            raise read.error(f"found {read.text}", expected)
        return cls(cap)


def _capped_formula(n: Any, s: Any, h: Any) -> str:
    divisor = {"sqrt_dk": n.sqrt("d_k"), "none": ""}.get(s.scale.mode, f"{s.scale.divisor:g}")
    inner = n("S") + (f" / {divisor}" if divisor else "")
    return str(cap.wrap(n, inner)) if (cap := s.variant(SoftCap)) is not None else inner


SoftCap.rows = (
    StageRow("softcap", "softcap", "Soft-capped scores", _capped_formula, lambda h: h.reshaped.get("softcap"), "queries", "keys",
             after="scaled", main=True),
)  # fmt: skip
