"""Additive score biases: an explicit L_q × L_k matrix per head, and ALiBi's −m_h·(i − j).

The module also holds how they are shown (core.variants.shown). Both add to the scaled scores, so they
share one matrix B = given bias + ALiBi's −m·(i − j) and one step "Adding the bias": each lists the same
rows, both classes have the same `narrate`, and each brings its own term (`term`, `narrated`) and notes.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, ClassVar

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import MATRICES, MATRIX, VECTOR, Read, Schema, Sizes, frozen, mapping_keys
from attncli.core.variants.shown import Narrated, Say, StageRow


def alibi_slopes(heads: int) -> tuple[float, ...]:
    """The ALiBi paper's slopes m_1..m_H: a geometric sequence from 2^(−8/n) for n a power of two.

    For other head counts, the slopes of the nearest lower power of two, then every other slope
    of the next power of two (the paper's reference code; Hugging Face's BLOOM computes the same).
    """
    closest = 2 ** math.floor(math.log2(heads))
    base = 2.0 ** (-(2.0 ** -(math.log2(closest) - 3)))
    slopes = [base**p for p in range(1, closest + 1)]
    if closest != heads:
        extra_base = 2.0 ** (-(2.0 ** -(math.log2(2 * closest) - 3)))
        slopes += [extra_base**p for p in range(1, 2 * (heads - closest), 2)]
    return tuple(slopes)


class _AddedToScores:
    """What every additive bias shares: one step of `explain` for all of them (the narration calls a shared `narrate` once)."""

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """Each key's (soft-capped) scaled score plus each bias's term (`narrated`), and each bias's notes."""
        w, p = say.w, say.p
        present = _present(expl.scenario)
        reshaped = list(expl.head.reshaped.values())[-1][expl.row] if expl.head.reshaped else None  # (L_k,) soft-capped scores
        lines: list[tuple[str, ...]] = []
        for key in say.shown_keys():
            before = key.scaled if reshaped is None else float(reshaped[key.position - 1])  # what the bias is added to
            sum_, reader, exact = w.num(before, p), say.shown(before), True
            for variant in present:
                text, adds, shown_exactly = variant.narrated(expl, key, say)
                sum_, reader, exact = sum_ + text, reader + adds, exact and shown_exactly
            relation = say.relation(reader, key.logit, name=f"the biased score of {key.label}") if exact else w.approx
            lines.append((w.label(key.label), f"{sum_} {relation} {w.num(key.logit, p)}", ":"))
        notes = [note for variant in reversed(present) for note in variant.notes(expl)]  # ALiBi's, about positions, before the matrix's
        return Narrated("Adding the bias", f"{w.text('logit')} = {w.text('scaled' if reshaped is None else 'capped')} + b", lines, notes)


@record
class Alibi(_AddedToScores):
    """Attention with Linear Biases (Press et al., 2022): head h adds −m_h·(i − j) to its scaled scores."""

    key: ClassVar[str] = "alibi"
    stage: ClassVar[str] = "logits"
    json_key: ClassVar[str] = "alibi"
    json_slot: ClassVar[int] = 2
    json_absent: ClassVar[None] = None
    rows: ClassVar[tuple[StageRow, ...]]  # the bias's rows, shared with ScoreBias, below the classes

    slopes: tuple[float, ...]  # m_1..m_H
    given: bool = False  # the scenario listed the slopes itself
    first: int = 0  # c: keys given in a KV cache before the sentence; query row r is at position c + r + 1 (as the mask's `first`)

    def matrix(self, head: int, L_q: int, L_k: int) -> np.ndarray:
        """(L_q, L_k) −m_h·(i − j) for head h (from 1), i and j absolute positions: after a cache of c keys, i runs from c + 1."""
        i = np.arange(self.first + 1, self.first + L_q + 1, dtype=np.float64)[:, None]  # (L_q, 1)
        j = np.arange(1, L_k + 1, dtype=np.float64)[None, :]  # (1, L_k)
        return -self.slopes[head - 1] * (i - j)  # (L_q, L_k)

    def describe(self) -> str:
        source = "given slopes" if self.given else "the paper's slopes"
        return f"ALiBi, {source} m = " + ", ".join(f"{m:.6g}" for m in self.slopes)

    def as_json(self) -> dict[str, object]:
        return {"slopes": list(self.slopes)}

    def term(self, n: Any) -> str:
        """Its part of B in a formula: −0.5·(i − j), with the slope of the notation's head (the first without one)."""
        slope = f"{self.slopes[n.head - 1]:.6g}" if n.head is not None else f"{self.slopes[0]:.6g}"
        return f"−{slope}{n.symbol('·')}(i − j)" if not n.tex else rf"-{slope}\,(i - j)"

    def narrated(self, expl: Any, key: Any, say: Say) -> tuple[str, Decimal, bool]:
        """Its term in a key's line of the step: the text, what a reader adds up, and whether the shown slope is the one used."""
        w, j = say.w, key.position
        i = expl.scenario.cached + expl.position  # the query's position: after a given KV cache of c keys, c + its row
        slope = self.slopes[expl.head.head - 1]
        return f" {w.minus} {slope:.6g} {w.times} ({i} {w.minus} {j})", -Decimal(f"{slope:.6g}") * (i - j), float(f"{slope:.6g}") == slope

    def notes(self, expl: Any) -> list[str]:
        h, row, c = expl.head.head, expl.position, expl.scenario.cached
        i = c + row
        notes = [
            f"ALiBi adds −m·(i − j) with this head's slope m = {self.slopes[h - 1]:.6g}: the farther a key j before "
            "the query at position i lies, the more its score is lowered, so no position embedding is needed."
        ]
        if c:
            notes.append(f"After the given KV cache of {c} key{'s' * (c > 1)}, i and j count from the cache's start: this "
                         f"query sits at position i = {c} + {row} = {i}, as it would had the whole text been computed at once.")  # fmt: skip
        if any(key.position > i and not key.masked for key in expl.keys):  # the bias is signed: nothing hides the later keys
            notes.append(
                "No causal mask hides the keys after the query here (j > i): for them −m·(i − j) is positive, so their "
                "scores are raised, the more the farther they lie. ALiBi is meant for causal attention."
            )
        return notes

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        "description": "true for the ALiBi paper's slopes, or {slopes: [m_1 ... m_H]}: head h adds -m_h*(i - j).",
        "anyOf": [
            {"type": "boolean"},
            {"type": "object", "additionalProperties": False, "required": ["slopes"], "properties": {"slopes": VECTOR}},
        ],
    }
    schema_after: ClassVar[str] = "bias"
    softmax_only: ClassVar[bool] = True  # it biases the logits a softmax weighs

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> Alibi | None:
        """`alibi: true` (the paper's slopes), `false`, or {slopes: [m_1, …, m_H]}."""
        heads = sizes.heads
        if read.form == "plain" and read.kind == "bool":
            return cls(alibi_slopes(heads), first=sizes.cached) if read.boolean() else None
        if read.form == "mapping":
            items = read.mapping(mapping_keys(cls.schema))
            if "slopes" not in items:
                raise read.error("`slopes` is missing", "{slopes: [m_1, …, m_H]}")
            slopes = items["slopes"].vector()
            if len(slopes) != heads:
                few = "too few" if len(slopes) < heads else "too many"
                raise items["slopes"].error(f"{len(slopes)} slopes for {heads} heads ({few})", f"{heads} slopes, one per head")
            return cls(tuple(float(m) for m in slopes), given=True, first=sizes.cached)
        raise read.error(read.found(), "`true` for the paper's slopes, or {slopes: [m_1, …, m_H]}")


@record
class ScoreBias(_AddedToScores):
    """An explicit additive bias: one (L_q, L_k) matrix for every head, or one per head."""

    key: ClassVar[str] = "bias"
    stage: ClassVar[str] = "logits"
    json_key: ClassVar[str] = "bias"
    json_slot: ClassVar[int] = 3
    json_absent: ClassVar[bool] = False
    rows: ClassVar[tuple[StageRow, ...]]  # the bias's rows, shared with Alibi, below the classes

    matrices: np.ndarray  # (1 or H, L_q, L_k)

    def matrix(self, head: int, L_q: int, L_k: int) -> np.ndarray:
        """(L_q, L_k) the bias of head h (from 1)."""
        return np.asarray(self.matrices[0 if len(self.matrices) == 1 else head - 1])

    def describe(self) -> str:
        return "a given bias matrix" + (" per head" if len(self.matrices) > 1 else "")

    def as_json(self) -> bool:
        return True  # the matrices themselves are a head's `bias` stage

    def term(self, n: Any) -> str:
        """Its part of B in a formula."""
        return str(n.text("given bias"))

    def narrated(self, expl: Any, key: Any, say: Say) -> tuple[str, Decimal, bool]:
        """Its term in a key's line of the step: the text, what a reader adds up, and whether the shown number is the one used."""
        w, p, s = say.w, say.p, expl.scenario
        b = float(self.matrix(expl.head.head, s.L, s.L_k)[expl.position - 1, key.position - 1])
        return (f" {w.minus} {w.num(-b, p)}" if b < 0 else f" + {w.num(b, p)}"), say.shown(b), True

    def notes(self, expl: Any) -> list[str]:
        return ["The scenario's bias matrix adds its entry (query row, key column) to each scaled score."]

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {"description": "An additive L_q x L_k matrix added to the scaled scores, or a list of H of them.", "anyOf": [MATRIX, MATRICES]}
    schema_after: ClassVar[str] = "mask"
    softmax_only: ClassVar[bool] = True  # it biases the logits a softmax weighs

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> ScoreBias:
        """`bias:` one L_q × L_k matrix for every head, or a list of H of them."""
        heads, L_q, L_k = sizes.heads, sizes.L_q, sizes.L_k
        matrices = read.matrices()
        if matrices is not None:
            if len(matrices) != heads:
                raise read.error(f"{len(matrices)} bias matrices for heads = {heads}", f"one matrix for all heads, or {heads}")
        else:
            matrices = [read.matrix()]
        for h, matrix in enumerate(matrices, 1):
            if matrix.shape != (L_q, L_k):
                where = f"{read.path}[{h}]" if len(matrices) > 1 else read.path
                raise read.error(f"the bias is {matrix.shape[0]} × {matrix.shape[1]}", f"{L_q} × {L_k}: one row per query, one column per key", key=where)
        return cls(frozen(np.array(matrices, dtype=np.float64)))  # (1 or H, L_q, L_k)


def _present(s: Any) -> list[Any]:
    """The scenario's additive biases, in registry order (ScoreBias, Alibi, T5's buckets, any "logits" variant): the terms of B."""
    return [variant for variant in s.in_registry_order if variant.stage == "logits"]


def _bias_formula(n: Any, s: Any, h: Any) -> str:
    """B = given bias − 0.5·(i − j)."""
    terms = " + ".join(variant.term(n) for variant in _present(s))
    return f"{n('B')} = " + terms.replace("+ −", "− ").replace("+ -", "- ")


def _biased_formula(n: Any, s: Any, h: Any, reshaped: str) -> str:
    return f"{reshaped} + {n('B')}"


ScoreBias.rows = Alibi.rows = (
    StageRow("bias", "bias", "Score bias", _bias_formula, lambda h: h.bias, "queries", "keys", before="exp"),
    StageRow("bias", "biased", "Biased scores", _biased_formula, lambda h: h.biased, "queries", "keys", after="bias", main=True, of="reshaped"),
)  # fmt: skip
