"""Additive score biases: an explicit L_q × L_k matrix per head, and ALiBi's −m_h·(i − j)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from attncli.core.variants.keys import MATRICES, MATRIX, VECTOR, Read, Schema, Sizes, frozen, mapping_keys


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


@dataclass(frozen=True, eq=False)
class Alibi:
    """Attention with Linear Biases (Press et al., 2022): head h adds −m_h·(i − j) to its scaled scores."""

    key: ClassVar[str] = "alibi"
    stage: ClassVar[str] = "logits"
    json_key: ClassVar[str] = "alibi"
    json_slot: ClassVar[int] = 2
    json_absent: ClassVar[None] = None

    slopes: tuple[float, ...]  # m_1..m_H
    given: bool = False  # the scenario listed the slopes itself

    def matrix(self, head: int, L_q: int, L_k: int) -> np.ndarray:
        """(L_q, L_k) −m_h·(i − j) for head h (from 1)."""
        i = np.arange(1, L_q + 1, dtype=np.float64)[:, None]  # (L_q, 1)
        j = np.arange(1, L_k + 1, dtype=np.float64)[None, :]  # (1, L_k)
        return -self.slopes[head - 1] * (i - j)  # (L_q, L_k)

    def describe(self) -> str:
        source = "given slopes" if self.given else "the paper's slopes"
        return f"ALiBi, {source} m = " + ", ".join(f"{m:.6g}" for m in self.slopes)

    def as_json(self) -> dict[str, object]:
        return {"slopes": list(self.slopes)}

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
            return cls(alibi_slopes(heads)) if read.boolean() else None
        if read.form == "mapping":
            items = read.mapping(mapping_keys(cls.schema))
            if "slopes" not in items:
                raise read.error("`slopes` is missing", "{slopes: [m_1, …, m_H]}")
            slopes = items["slopes"].vector()
            if len(slopes) != heads:
                few = "too few" if len(slopes) < heads else "too many"
                raise items["slopes"].error(f"{len(slopes)} slopes for {heads} heads ({few})", f"{heads} slopes, one per head")
            return cls(tuple(float(m) for m in slopes), given=True)
        raise read.error(read.found(), "`true` for the paper's slopes, or {slopes: [m_1, …, m_H]}")


@dataclass(frozen=True, eq=False)
class ScoreBias:
    """An explicit additive bias: one (L_q, L_k) matrix for every head, or one per head."""

    key: ClassVar[str] = "bias"
    stage: ClassVar[str] = "logits"
    json_key: ClassVar[str] = "bias"
    json_slot: ClassVar[int] = 3
    json_absent: ClassVar[bool] = False

    matrices: np.ndarray  # (1 or H, L_q, L_k)

    def matrix(self, head: int, L_q: int, L_k: int) -> np.ndarray:
        """(L_q, L_k) the bias of head h (from 1)."""
        return np.asarray(self.matrices[0 if len(self.matrices) == 1 else head - 1])

    def describe(self) -> str:
        return "a given bias matrix" + (" per head" if len(self.matrices) > 1 else "")

    def as_json(self) -> bool:
        return True  # the matrices themselves are a head's `bias` stage

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
