"""A query temperature by position (Llama 4's attention temperature tuning, Ministral 3's llama_4_scaling): each query,
after RoPE, multiplied by τ_p = 1 + β·ln(1 + ⌊(p + shift) / n₀⌋), where p is its position from 0.

τ_p is exactly 1 for the first n₀ − shift positions and grows by β·ln 2, β·ln 3/2, … at each further multiple of n₀,
so that far past the length a model was trained on its queries stay sharp enough for the softmax to pick out a key
among many. Since q·k is linear in q, scaling the query at position p by τ_p is scaling its row of scores by τ_p:
the engine applies it to the scaled scores (the "scaled" stage), row by row. Ministral 3 has shift 0 and n₀ its
YaRN's original_max_position_embeddings; Llama 4 (its NoPE layers) shift 1 and n₀ its floor_scale.
The module also holds how it is shown (core.variants.shown): its stage-table row and its step of `explain`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import Read, Schema, Sizes
from attncli.core.variants.shown import Narrated, Say, StageRow


@record
class QueryTemperature:
    """The query at position p (offset + its row, from 0) scaled by τ_p = 1 + β·ln(1 + ⌊(p + shift) / n₀⌋)."""

    key: ClassVar[str] = "query_temperature"
    stage: ClassVar[str] = "scaled"
    json_key: ClassVar[str] = "query_temperature"
    json_slot: ClassVar[int] = 19
    json_absent: ClassVar[None] = None
    rows: ClassVar[tuple[StageRow, ...]]  # its stage-table row, below the class

    beta: float  # β
    original: int  # n₀: the length below which τ is 1
    shift: int = 0  # added to the position before the division (Llama 4: 1)
    offset: int = 0  # the position of the first query

    def factors(self, L_q: int) -> np.ndarray:
        """(L_q,) τ of each query row."""
        positions = self.offset + np.arange(L_q) + self.shift  # (L_q,)
        tau: np.ndarray = 1.0 + self.beta * np.log(1.0 + np.floor(positions / self.original))
        return tau

    def apply(self, scaled: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """(L_q, L_k) each row of the scaled scores × its query's τ, written into `out` when given."""
        tempered: np.ndarray = np.multiply(scaled, self.factors(scaled.shape[0])[:, None], out=out)  # (L_q, L_k)
        return tempered

    def describe(self) -> str:
        shifted = f"p + {self.shift}" if self.shift else "p"
        return f"query temperature: the query at position p × (1 + {self.beta:g}·ln(1 + ⌊{shifted} / {self.original}⌋)), after RoPE"

    def as_json(self) -> dict[str, object]:
        return {"beta": self.beta, "original": self.original, "shift": self.shift, "offset": self.offset}

    def wrap(self, n: Any, inner: str) -> str:
        """A formula's `inner` (the scaled scores) with each row × its query's τ: τ ⊙ (S / √d_k), in the notation n."""
        if n.tex:
            return rf"\tau_i \left({inner}\right)"
        return "τᵢ·" + (f"({inner})" if " " in inner else inner)

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """The query's τ from its position, and each key's scaled score × τ."""
        w, p = say.w, say.p
        row = expl.position - 1  # the query's row among the queries, from 0
        position = self.offset + row
        tau = float(self.factors(row + 1)[row])
        bucket = (position + self.shift) // self.original
        shifted = f"{position} + {self.shift}" if self.shift else f"{position}"
        relation = f"{say.relation(say.shown(tau), tau, name='τ')} {w.num(tau, p)}"
        if w.tex:
            rule = rf"1 + {self.beta:g} \cdot \ln\left(1 + \lfloor {shifted} / {self.original} \rfloor\right) = 1 + {self.beta:g} \cdot \ln {1 + bucket}"
        else:
            rule = f"1 + {self.beta:g}·ln(1 + ⌊{shifted} / {self.original}⌋) = 1 + {self.beta:g}·ln({1 + bucket})"
        lines: list[tuple[str, ...]] = [(r"\tau" if w.tex else "τ", f"{rule} {relation}")]
        scaled = expl.head.reshaped[self.key][expl.row]  # (L_k,) this query's scores × τ
        for key in say.shown_keys():
            value = float(scaled[key.position - 1])
            reader = say.shown(key.scaled) * say.shown(tau)
            relation = say.relation(reader, value, name=f"the tempered score of {key.label}")
            lines.append((w.label(key.label), f"{w.num(key.scaled, p)} {w.times} {w.num(tau, p)} {relation} {w.num(value, p)}", ":"))
        where = (f"at position {position} (from 0), below {self.original - self.shift}, τ is exactly 1: the scores pass unchanged"
                 if bucket == 0 else f"at position {position} (from 0), ⌊{shifted} / {self.original}⌋ = {bucket} lengths of "
                 f"{self.original} in, τ = {say.number(tau)} sharpens this query's scores")  # fmt: skip
        notes = [
            f"The query temperature multiplies the query, after RoPE, by τ; as q·k is linear in q that multiplies its row of "
            f"scores: {where}.",
            "Why models do it (Llama 4, Ministral 3): far beyond the length they were trained on, a query meets many more keys "
            "and its softmax flattens; a τ that grows with the log of the position keeps it able to single one out.",
        ]
        at = (f"(p + {self.shift})" if self.shift else "p")  # the position as the rule divides it
        formula = (rf"\tau = 1 + \beta \ln\left(1 + \lfloor {at} / n_0 \rfloor\right)" if w.tex
                   else f"τ = 1 + β·ln(1 + ⌊{at} / n₀⌋)") + (
            rf", \quad \beta = {self.beta:g},\ n_0 = {self.original}" if w.tex else f", β = {self.beta:g}, n₀ = {self.original}")  # fmt: skip
        return Narrated("The query temperature", formula, lines, notes)

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        "type": "object",
        "properties": {
            "beta": {"type": "number", "minimum": 0, "maximum": 1e6, "description": "β: how fast τ grows with the log of the position."},
            "original": {"type": "integer", "minimum": 1, "maximum": 2**31, "description": "n₀: τ is 1 below this position, then steps at each multiple."},
            "shift": {"type": "integer", "minimum": 0, "maximum": 2**31, "description": "Added to the position before the division (Llama 4: 1; default 0)."},
            "offset": {"type": "integer", "minimum": 0, "maximum": 2**31, "description": "The position of the first query (default 0)."},
        },
        "required": ["beta", "original"],
        "additionalProperties": False,
        "description": "A query temperature by position (Llama 4, Ministral 3): the query at position p is multiplied, after RoPE, "
        "by 1 + beta·ln(1 + ⌊(p + shift) / original⌋), so its row of scores is too.",
    }
    schema_after: ClassVar[str] = "rope"  # it scales the query RoPE has turned
    softmax_only: ClassVar[bool] = True  # it sharpens what a softmax weighs

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> QueryTemperature:
        """`query_temperature: {beta: 0.1, original: 16}`, with optional `shift` and `offset`."""
        expected = "a mapping {beta: a number ≥ 0, original: a whole number ≥ 1}, optionally shift and offset (whole numbers ≥ 0)"
        if read.form != "mapping":
            raise read.error(read.found(), expected)
        given = read.mapping(("beta", "original", "shift", "offset"))
        for needed in ("beta", "original"):
            if needed not in given:
                raise read.error(f"no {needed}", expected)
        beta = given["beta"].number()
        if not (math.isfinite(beta) and 0 <= beta <= 1e6):  # models use 0.1; far beyond, τ alone would overflow the scores
            raise given["beta"].error(f"found {given['beta'].text}", "a number from 0 to 1e6")
        original = given["original"].whole(1, 2**31, "a length")  # positions past 2³¹ would wrap NumPy's int64 sums
        shift, offset = (given[name].whole(0, 2**31, "a position") if name in given else 0 for name in ("shift", "offset"))
        return cls(float(beta), original, shift, offset)


def _tempered_formula(n: Any, s: Any, h: Any) -> str:
    divisor = {"sqrt_dk": n.sqrt("d_k"), "none": ""}.get(s.scale.mode, f"{s.scale.divisor:g}")
    inner = n("S") + (f" / {divisor}" if divisor else "")
    variant = s.variant(QueryTemperature)
    return str(variant.wrap(n, inner)) if variant is not None else inner


QueryTemperature.rows = (
    StageRow("query_temperature", "query_temperature", "Scores × each query's temperature τ", _tempered_formula,
             lambda h: h.reshaped.get("query_temperature"), "queries", "keys", after="scaled", main=True),
)  # fmt: skip
