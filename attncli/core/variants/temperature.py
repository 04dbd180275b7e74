"""Attention temperature tuning (Llama 4's NoPE layers): each query multiplied by a factor that grows with its position.

    q̃ at position p = q · (1 + s·ln(1 + ⌊(p + 1) / f⌋))        f = floor_scale, s = attn_scale

Ministral 3 scales its queries the same way after RoPE, counting p itself (shift 0): 1 + β·ln(1 + ⌊p / n₀⌋), β its
llama_4_scaling_beta, n₀ YaRN's original length.

Positions p count from 0, as RoPE's do. The factor is exactly 1 for the first f − 1 positions and then steps up by
s·ln(…) at every multiple of f: a query far into a long context scores its keys more sharply, which keeps the softmax of a
layer without RoPE from flattening as the number of keys grows (Nakanishi, "Scalable-Softmax Is Superior for Attention",
arXiv 2501.19399). Keys and values are left as they are. It acts after RoPE and after a QK-norm there (the registry's
"rotated" stage), as transformers' Llama4TextAttention multiplies the query last.

The module also holds how the temperature is shown (core.variants.shown): its stage-table row and its step of `explain`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import Read, Schema, Sizes, mapping_keys
from attncli.core.variants.positions import Turned
from attncli.core.variants.shown import Narrated, Say, StageRow


@record
class QueryTemperature:
    """Each query row × 1 + scale·ln(1 + ⌊(p + shift) / floor⌋), p its position from 0."""

    key: ClassVar[str] = "query_temperature"
    stage: ClassVar[str] = "rotated"
    json_key: ClassVar[str] = "query_temperature"
    json_slot: ClassVar[int] = 18
    json_absent: ClassVar[None] = None
    symbol: ClassVar[str] = "temperature"  # how an overflow message names it: temperature(Q)
    rows: ClassVar[tuple[StageRow, ...]]  # its stage-table row, below the class

    floor: int  # f: floor_scale, the positions per step
    scale: float  # s: attn_scale, the height of each step's logarithm
    offset: int = 0  # the position of the first query (as RoPE's offset)
    shift: int = 1  # added to p before the floor: 1 for Llama 4 (⌊(p + 1) / f⌋), 0 for Ministral 3 (⌊p / n₀⌋)

    def factors(self, rows: np.ndarray) -> np.ndarray:
        """(L,) the factor of each query row: 1 + s·ln(1 + ⌊(offset + row + shift) / f⌋)."""
        positions = np.asarray(rows, dtype=np.float64) + self.offset
        return np.asarray(np.log1p(np.floor((positions + self.shift) / self.floor)) * self.scale + 1.0)  # (L,)

    def turn(self, q: np.ndarray, k: np.ndarray, h: int, g: int, q_rows: np.ndarray, k_rows: np.ndarray, path: str | None,
             queries: Sequence[str], keys: Sequence[str]) -> Turned:  # fmt: skip
        """Head h's queries (L_q, d_k) times their factors; the keys unchanged (their factor 1)."""
        factors = self.factors(q_rows)  # (L_q,)
        return Turned(q * factors[:, None], k, factors, np.ones(k.shape[0]))

    def counted(self, p: str = "p") -> str:
        """'(p + 1)' or 'p': what the floor divides."""
        return f"({p} + {self.shift})" if self.shift else p

    def describe(self) -> str:
        return f"query temperature: the query at position p (from 0) × 1 + {self.scale:g}·ln(1 + ⌊{self.counted()} / {self.floor}⌋)"

    def as_json(self) -> dict[str, object]:
        return {"floor": self.floor, "scale": self.scale, "offset": self.offset, "shift": self.shift}

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """The query's factor from its position, and the query times it."""
        w, p = say.w, say.p
        row = expl.position - 1
        position = self.offset + row
        factor = float(self.factors(np.array([row]))[0])
        steps = math.floor((position + self.shift) / self.floor)
        before = expl.head.rotated_q[row]  # (d_k,) the query before the factor: as RoPE (or a QK-norm after it) left it
        turned = list(expl.head.turned)
        if turned.index(self.key):  # a "rotated" variant before it (QK-norm after RoPE): its output
            before = expl.head.turned[turned[turned.index(self.key) - 1]].q[row]
        ln, floor = (r"\ln", (r"\lfloor ", r" \rfloor")) if w.tex else ("ln", ("⌊", "⌋"))
        lines: list[tuple[str, ...]] = [
            (w.text("factor"), f"1 + {w.num(self.scale, p)} {w.times} {ln}(1 + {floor[0]}{self.counted(str(position))} / {self.floor}{floor[1]}) = "
                               f"1 + {w.num(self.scale, p)} {w.times} {ln}({1 + steps}) = {w.num(factor, p)}"),
            ("q̃" if not w.tex else r"\tilde{q}", f"{say.vec(before)} {w.times} {w.num(factor, p)} = {say.vec(expl.q)}"),
        ]  # fmt: skip
        notes = [
            f"The attention temperature (Llama 4's): the query at position {position} (counted from 0) is multiplied by "
            f"1 + {self.scale:g}·ln(1 + ⌊{self.counted()} / {self.floor}⌋), which is 1 up to position {self.floor - 1 - self.shift} "
            f"and steps up by the logarithm every {self.floor} positions. The keys are not scaled.",
            "Why: a layer without RoPE has only the content of q and k to tell keys apart, and over a long context its softmax "
            "spreads over ever more keys; a query that grows slowly with its position keeps its weights as sharp at 100,000 "
            "tokens as at 1,000 (Scalable-Softmax, arXiv 2501.19399).",
        ]
        return Narrated("Tempering the query (attention temperature)", f"q̃ = q {w.times} factor(p)" if not w.tex else r"\tilde{q} = q \cdot f(p)",
                        lines, notes)  # fmt: skip

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        "description": "Attention temperature tuning (Llama 4's NoPE layers): the query at position p (from 0) times "
        "1 + scale*ln(1 + floor((p + shift) / floor)). {floor: positions per step (floor_scale), scale: attn_scale, offset: the first "
        "query's position, shift: 1 (Llama 4, the default) or 0 (Ministral 3)}.",
        "type": "object",
        "additionalProperties": False,
        "required": ["floor", "scale"],
        "properties": {
            "floor": {"type": "integer", "minimum": 1},
            "scale": {"type": "number"},
            "offset": {"type": "integer", "minimum": 0},
            "shift": {"type": "integer", "minimum": 0, "maximum": 1},
        },
    }

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> QueryTemperature | None:
        """`query_temperature: {floor, scale, offset}`."""
        if read.form != "mapping":
            raise read.error(read.found(), "{floor: positions per step, scale: the logarithm's factor, offset: the first query's position}")
        items = read.mapping(mapping_keys(cls.schema))
        for needed in ("floor", "scale"):
            if needed not in items:
                raise read.error(f"no {needed}", "{floor: positions per step, scale: the logarithm's factor}")
        floor = items["floor"].whole(1, 2**31, "positions per step")
        scale = items["scale"].number()
        offset = items["offset"].whole(0, 2**31, "a position") if "offset" in items else sizes.cached
        shift = items["shift"].whole(0, 1, "1 (Llama 4: p + 1) or 0 (Ministral 3: p)") if "shift" in items else 1
        return cls(floor, scale, offset, shift)


def _tempered_formula(n: Any, s: Any, h: Any) -> str:
    """Q̃ₚ = Q̂ₚ · (1 + s·ln(1 + ⌊(p + 1) / f⌋)): the queries as the stages before it left them (normed after RoPE, turned, or Q)."""
    t = s.variant(QueryTemperature)
    keys = {variant.key: variant.stage for variant in s.variants}
    hat, prime = "qk_norm_after_rope" in keys or ("norm" in keys.values() and "qk" not in keys.values()), "qk" in keys.values()
    if n.tex:
        met = r"\hat{Q}" if hat else "Q'" if prime else "Q"
        return rf"\tilde{{Q}}_p = {met}_p \cdot (1 + {t.scale:g} \ln(1 + \lfloor {t.counted()} / {t.floor} \rfloor))"
    met = "Q\u0302" if hat else "Q′" if prime else "Q"
    return f"Q̃ₚ = {met}ₚ · (1 + {t.scale:g}·ln(1 + ⌊{t.counted()} / {t.floor}⌋))"


QueryTemperature.rows = (
    StageRow("query_temperature", "Q_tempered", "Tempered queries", _tempered_formula,
             lambda h: h.turned["query_temperature"].q if "query_temperature" in (h.turned or {}) else None,
             "queries", "q", after="K_rope_norm", main=True),
)  # fmt: skip
