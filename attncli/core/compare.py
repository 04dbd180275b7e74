"""The same heads under two inputs (two sentences, or two checkpoints of one architecture): how much each head's weights changed.

Dimension names: H heads, L tokens. For one head, a_ij and b_ij are the weights query i gives
key j in the two runs (positions from 1; keys the mask hides have weight 0 in both). Per head:

    max_abs_diff    max_ij |a_ij − b_ij|
    mean_abs_diff   the mean of |a_ij − b_ij| over the cells (i, j) either run lets query i see
    js_divergence   the mean over rows i of JS(a_i·, b_i·) = ½ Σ_j a_ij ln(a_ij / m_ij) + ½ Σ_j b_ij ln(b_ij / m_ij),
                    m = (a + b) / 2, in nats (0 ln 0 = 0): 0 for the same row, at most ln 2 ≈ 0.693 for rows with no key in common
    js_max          the largest JS(a_i·, b_i·) of any row

The comparison is summarised one layer at a time: the runs' weights are not kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attncli.core.heads import thumbnail

MEASURES = ("max_abs_diff", "mean_abs_diff", "js_divergence", "js_max")


def _plogp_over(p: np.ndarray, m: np.ndarray) -> np.ndarray:
    """p · ln(p / m) elementwise, 0 where p = 0 (m > 0 wherever p > 0)."""
    positive = p > 0
    out: np.ndarray = np.where(positive, p * np.log(np.where(positive, p, 1.0) / np.where(positive, m, 1.0)), 0.0)
    return out


def js_divergence(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(…,) the Jensen–Shannon divergence in nats of each row of (…, L) a and b (each row a distribution over the keys)."""
    m = (a + b) / 2
    out: np.ndarray = np.maximum(0.5 * _plogp_over(a, m).sum(axis=-1) + 0.5 * _plogp_over(b, m).sum(axis=-1), 0.0)
    return out  # rounding could leave −1e-17 where the rows are equal: clipped at 0


def measures(a: np.ndarray, b: np.ndarray, visible: np.ndarray) -> dict[str, np.ndarray]:
    """Each measure of MEASURES as an (H,) array, for (H, L, L) weights a and b and (L, L) the cells either run lets a query see."""
    difference = np.abs(a - b)  # (H, L, L)
    js = js_divergence(a, b)  # (H, L)
    cells = max(int(visible.sum()), 1)
    return {
        "max_abs_diff": difference.max(axis=(-2, -1)),
        "mean_abs_diff": np.where(visible, difference, 0.0).sum(axis=(-2, -1)) / cells,
        "js_divergence": js.mean(axis=-1),
        "js_max": js.max(axis=-1),
    }


@dataclass
class Comparison:
    """Every layer's heads compared, one layer at a time: measures (layers, H) and thumbnails of |a − b| (layers, H, s, s)."""

    heads: int
    kv_heads: int
    tokens: tuple[str, ...]  # the first run's tokens
    other_tokens: tuple[str, ...]  # the second run's
    values: dict[str, list[np.ndarray]] = field(default_factory=dict)  # name → one (H,) array per layer
    thumbnails: list[np.ndarray] = field(default_factory=list)  # one (H, s, s) per layer: the largest |a − b| of each block

    def add(self, a: np.ndarray, b: np.ndarray, visible: np.ndarray) -> None:
        """Compare one layer's (H, L, L) weights of the two runs; `visible` (L, L) the cells either run shows."""
        for name, values in measures(a, b, visible).items():
            self.values.setdefault(name, []).append(values)
        self.thumbnails.append(thumbnail(np.abs(a - b)))

    @property
    def layers(self) -> int:
        return len(self.thumbnails)

    def table(self, name: str) -> np.ndarray:
        """(layers, H) one measure for every head."""
        return np.stack(self.values[name])
