"""Logit soft-capping (Gemma 2): the scaled scores squashed into (−cap, cap) by cap·tanh(s / cap), before the mask."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np


@dataclass(frozen=True, eq=False)
class SoftCap:
    """Every scaled score s becomes cap·tanh(s / cap): about s while |s| ≪ cap, never beyond ±cap."""

    key: ClassVar[str] = "softcap"
    stage: ClassVar[str] = "scaled"
    json_key: ClassVar[str] = "softcap"
    json_slot: ClassVar[int] = 4
    json_absent: ClassVar[None] = None

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
