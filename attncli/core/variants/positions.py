"""Rotary position embeddings (RoPE): each pair of a head's q and k coordinates turned by an angle p·ω_i.

Dimension names: L positions, d_k the head's width (even), d_k/2 pairs. Positions p start at 0,
as the RoFormer paper and every implementation count them. Two pairings exist:
"half" pairs coordinate i with i + d_k/2 (rotate-half: Llama, GPT-NeoX, Hugging Face);
"interleaved" pairs 2i with 2i + 1 (RoFormer, Meta's original Llama code).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np


@dataclass(frozen=True, eq=False)
class Rope:
    key: ClassVar[str] = "rope"
    stage: ClassVar[str] = "qk"
    json_key: ClassVar[str] = "rope"
    json_slot: ClassVar[int] = 1
    json_absent: ClassVar[None] = None
    symbol: ClassVar[str] = "RoPE"  # how a formula names it: RoPE(Q)

    theta: float = 10000.0
    style: str = "half"  # "half" or "interleaved"
    inv_freq: np.ndarray | None = None  # (d_k/2,) given frequencies (a checkpoint's, after its scaling)
    scaling: str | None = None  # how a checkpoint scaled its frequencies, in words

    def frequencies(self, d_k: int) -> np.ndarray:
        """(d_k/2,) ω_i = θ^(−2i/d_k)."""
        if self.inv_freq is not None:
            return self.inv_freq
        return np.asarray(self.theta ** (-np.arange(0, d_k, 2, dtype=np.float64) / d_k))  # (d_k/2,)

    def angles(self, positions: np.ndarray, d_k: int) -> np.ndarray:
        """(L, d_k/2) p·ω_i for each position p and pair i."""
        return np.asarray(positions.astype(np.float64)[:, None] * self.frequencies(d_k)[None, :])  # (L, d_k/2)

    def pairs(self, d_k: int) -> tuple[np.ndarray, np.ndarray]:
        """The coordinates paired for rotation: (first, second), each (d_k/2,) indexes from 0."""
        half = d_k // 2
        if self.style == "interleaved":
            return np.arange(0, d_k, 2), np.arange(1, d_k, 2)
        return np.arange(half), np.arange(half, d_k)

    def rotate(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """(L, d_k) each row turned by its position's angles: (a, b) → (a·cos − b·sin, b·cos + a·sin)."""
        d_k = x.shape[1]
        angles = self.angles(positions, d_k)  # (L, d_k/2)
        cos, sin = np.cos(angles), np.sin(angles)  # (L, d_k/2)
        first, second = self.pairs(d_k)
        a, b = x[:, first], x[:, second]  # (L, d_k/2) each
        out = np.empty_like(x)  # (L, d_k)
        out[:, first] = a * cos - b * sin
        out[:, second] = b * cos + a * sin
        return out

    def apply(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """(L, d_k) the rows of q or k as the scores meet them: rotated (the registry's "qk" stage)."""
        return self.rotate(x, positions)

    def describe(self) -> str:
        style = "rotate-half pairs (i, i + d_k/2)" if self.style == "half" else "interleaved pairs (2i, 2i+1)"
        base = "given frequencies" if self.inv_freq is not None else f"θ = {self.theta:g}"
        scaled = f", {self.scaling}" if self.scaling else ""
        return f"RoPE, {base}{scaled}, {style}"

    def as_json(self) -> dict[str, object]:
        return {"theta": self.theta, "style": self.style, "scaling": self.scaling}
