"""Why scores are divided by √d, as an experiment (the appendix of a causal self-attention walk-through, the Q, K, V guide's footnote).

For each width d: draw q, k ~ N(0, I_d) and measure the mean and variance of q·k (theory:
0 and d) and of q·k/√d (theory: variance 1); then draw a query and L keys many times and
measure the mean largest softmax weight with and without the scaling: without it, the
softmax saturates towards one-hot as d grows. Pure NumPy; the same seed gives the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

CHUNK = 1024  # trials drawn at once: bounds memory at CHUNK × L × d floats


class VarianceRow(NamedTuple):
    d: int
    samples: int
    mean_raw: float  # mean of q·k, theory 0
    var_raw: float  # variance of q·k, theory d
    var_scaled: float  # variance of q·k / √d, theory 1
    max_weight_raw: float  # mean largest softmax weight over L keys, unscaled
    max_weight_scaled: float  # ... with the scores divided by √d


def experiment(
    dims: list[int], *, samples: int, keys: int, seed: int, advance: Callable[[int], None] = lambda n: None
) -> list[VarianceRow]:
    """One row per d; `advance(n)` is told of every n trials done (for a progress bar)."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in dims:
        raw = np.empty(samples)  # (samples,) q·k
        max_raw = np.empty(samples)  # (samples,) largest weight, unscaled
        max_scaled = np.empty(samples)  # (samples,) largest weight, scaled
        for start in range(0, samples, CHUNK):
            n = min(CHUNK, samples - start)
            q = rng.standard_normal((n, d))  # (n, d)
            k = rng.standard_normal((n, keys, d))  # (n, L, d)
            scores = np.einsum("nd,nld->nl", q, k)  # (n, L)
            raw[start : start + n] = scores[:, 0]  # one q·k per trial: independent samples
            max_raw[start : start + n] = _max_softmax(scores)
            max_scaled[start : start + n] = _max_softmax(scores / math.sqrt(d))
            advance(n)
        rows.append(
            VarianceRow(
                d=d,
                samples=samples,
                mean_raw=float(raw.mean()),
                var_raw=float(raw.var()),
                var_scaled=float((raw / math.sqrt(d)).var()),
                max_weight_raw=float(max_raw.mean()),
                max_weight_scaled=float(max_scaled.mean()),
            )
        )
    return rows


def _max_softmax(scores: np.ndarray) -> np.ndarray:
    """(n,) the largest softmax weight of each row of (n, L) scores, computed stably."""
    shifted = np.exp(scores - scores.max(axis=1, keepdims=True))  # (n, L), the largest entry is 1
    return np.asarray(1.0 / shifted.sum(axis=1))
