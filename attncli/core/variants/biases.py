"""Additive score biases: an explicit L_q × L_k matrix per head, and ALiBi's −m_h·(i − j)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np


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
