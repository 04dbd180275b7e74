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

CHUNK = 1024  # trials drawn at once
BUDGET = 2**26  # keys' floats drawn at once (512 MB; the README's d = 4096 takes this much): beyond it, in pieces
PIECE = 2**22  # floats of keys per piece (32 MB); 65,536 × 4,096 keys was 2 GB per trial, up to 16 GB at once


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
            if n * keys * d <= BUDGET:
                k = rng.standard_normal((n, keys, d))  # (n, L, d)
                scores = np.einsum("nd,nld->nl", q, k)  # (n, L)
            else:
                scores = _scores_in_pieces(rng, q, keys)
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


def _scores_in_pieces(rng: np.random.Generator, q: np.ndarray, keys: int) -> np.ndarray:
    """(n, L) the scores of n queries with L fresh keys each, the keys drawn PIECE floats at a time: the same random
    numbers, in the same order, as one (n, L, d) draw (the generator fills rows in turn), without holding them all."""
    n, d = q.shape
    rows = n * keys
    flat = np.empty(rows)  # (n·L,) one score per key row
    step = max(1, PIECE // d)
    for start in range(0, rows, step):
        stop = min(start + step, rows)
        piece = rng.standard_normal((stop - start, d))  # (r, d) key rows start … stop − 1
        flat[start:stop] = np.einsum("rd,rd->r", piece, q[np.arange(start, stop) // keys])
    return flat.reshape(n, keys)


def _max_softmax(scores: np.ndarray) -> np.ndarray:
    """(n,) the largest softmax weight of each row of (n, L) scores, computed stably."""
    shifted = np.exp(scores - scores.max(axis=1, keepdims=True))  # (n, L), the largest entry is 1
    return np.asarray(1.0 / shifted.sum(axis=1))
