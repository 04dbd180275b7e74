"""A value norm (Gemma 3n's v_norm): each head's values divided by their root mean square, with no learned weight.

    v̂ = v / √(mean(v²) + ε)        (per key/value head, over its d_v numbers; RMSNorm without scale)

The registry's "value" stage: after V = X·W_V, before the weights meet the values. Every value row then has a root
mean square of about 1, so a head's output (a weighted mean of value rows) stays within ±√d_v whatever W_V learned.
The module also holds how the norm is shown (core.variants.shown): its stage-table row and its step of `explain`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import Read, Schema, Sizes
from attncli.core.variants.shown import Narrated, Say, StageRow
from attncli.errors import AttnError


@record
class ValueNorm:
    """RMSNorm of each head's value rows without a weight: v / √(mean(v²) + ε)."""

    key: ClassVar[str] = "v_norm"
    stage: ClassVar[str] = "value"
    json_key: ClassVar[str] = "v_norm"
    json_slot: ClassVar[int] = 18
    json_absent: ClassVar[None] = None
    rows: ClassVar[tuple[StageRow, ...]]  # its stage-table row, below the class

    eps: float = 1e-6

    def normalise(self, V: np.ndarray) -> np.ndarray:
        """(L_k, d_v) each row of one head's values divided by its root mean square (ε inside the root)."""
        mean_square = (V * V).mean(axis=-1, keepdims=True)  # (L_k, 1)
        normed: np.ndarray = V / np.sqrt(mean_square + self.eps)  # (L_k, d_v)
        return normed

    def refuse_zero_rms(self, V: np.ndarray, path: str | None, h: int, rows: Any) -> None:
        """An AttnError when ε = 0 meets a value row (L_k, d_v) whose numbers are all 0: its norm would be 0 / 0."""
        zero = ~V.any(axis=-1)  # (L_k,) rows of zeros only
        if self.eps == 0 and zero.any():
            i = int(np.flatnonzero(zero)[0])
            raise AttnError(
                f"head {h}, row {i + 1} ({rows[i]!r}): v is all zeros and ε = 0, so its RMSNorm would divide 0 by 0",
                file=path,
                key=self.key,
                expected="ε > 0 (such as 1e-6), as every model uses",
            )

    def describe(self) -> str:
        return f"value norm (Gemma 3n's v_norm): each head's v / √(mean(v²) + ε), no weight, ε = {self.eps:g}"

    def as_json(self) -> dict[str, object]:
        return {"eps": self.eps}

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """Each shown key's value row before and after the norm, and why a model does it."""
        w, p = say.w, say.p
        V, normed = expl.head.V, expl.head.value_normed
        hat = r"\hat{v}" if w.tex else "v\u0302"
        lines: list[tuple[str, ...]] = []
        for key in say.shown_keys():
            j = key.position - 1
            if key.position <= expl.scenario.cached:  # a given KV cache holds the values as the weights meet them
                lines.append((w.of(hat, w.label(key.label)), f"{say.vec(normed[j])}{w.text(' (cached: already normalised)')}"))
                continue
            rms = math.sqrt(float((V[j] * V[j]).mean()) + self.eps)
            reader = [say.shown(float(x)) / say.shown(rms) for x in V[j]]
            lines.append((w.of(hat, w.label(key.label)),
                          f"{w.frac(say.vec(V[j]), w.num(rms, p))} {say.relation(reader, normed[j], name=f'the normalised v({key.label})')} "
                          f"{say.vec(normed[j])}"))  # fmt: skip
        notes = [
            f"Each value row is divided by its root mean square over the head's {V.shape[1]} numbers (ε = {self.eps:g} inside the root), "
            "with no learned weight: every value the weights mix has a root mean square of about 1.",
            "Why a model does it (Gemma 3n): the head's output, a weighted mean of value rows, is bounded whatever W_V learned, "
            "as QK-norm bounds the scores.",
        ]
        formula = (rf"{hat} = v / \sqrt{{\operatorname{{mean}}(v^2) + \varepsilon}}" if w.tex else f"{hat} = v / √(mean(v²) + ε)")
        return Narrated("Normalising the values (v_norm)", formula, lines, notes)

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        "description": "A value norm (Gemma 3n's v_norm): each head's value rows divided by √(mean(v²) + ε), with no weight, "
        "before the weights meet them. true: ε = 1e-6; or a number, ε.",
        "anyOf": [{"type": "boolean"}, {"type": "number", "minimum": 0}],
    }
    schema_after: ClassVar[str] = "output_gate"  # nothing follows the gate: the chain after qk_norm (mla, cache, …) stays whole
    softmax_only: ClassVar[bool] = True  # attention without softmax (linear, retention) weighs V as projected

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> ValueNorm | None:
        """`v_norm: true` (ε = 1e-6), `false`, or ε itself."""
        expected = "true (ε = 1e-6), false, or ε, a number ≥ 0 such as 1e-6"
        if read.form != "plain":
            raise read.error(read.found(), expected)
        if read.kind == "bool":
            return cls() if read.boolean() else None
        try:
            eps = read.number()  # YAML 1.1 reads 1e-6 as a word: the number is read from its text
        except AttnError:
            raise read.error(read.found(), expected) from None
        if not (math.isfinite(eps) and eps >= 0):
            raise read.error(f"found {read.text}", expected)
        return cls(eps)


def _normed_formula(n: Any, s: Any, h: Any) -> str:
    hat = n(r"\hat{V}" if n.tex else "V\u0302")
    if n.tex:
        return rf"{hat} = {n('V')} / \operatorname{{rms}}({n('V')})"
    return f"{hat} = {n('V')} / rms({n('V')})"


ValueNorm.rows = (
    StageRow("v_norm", "V_norm", "Normalised values", _normed_formula, lambda h: h.value_normed, "keys", "v", after="V", kv=True),
)  # fmt: skip
