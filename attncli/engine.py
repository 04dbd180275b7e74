"""The attention engine: softmax(mask(Q·Kᵀ / s))·V with every stage kept.

Pure NumPy in float64: no printing, no I/O. Dimension names used in the shape comments:
    L       number of tokens
    d_model width of an embedding
    H       number of heads
    d_k     width of a query/key in one head
    d_v     width of a value in one head
    d_out   width of the final output (d_out = H·d_v without W_O)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attncli.scenario import Scenario

SHIFT_FREE = 700.0  # e^±700 is still an ordinary float64, so such scores need no shift
WEIGHTED_BLOCK = 4_000_000  # hand-rounded outputs: weighted value vectors held at once (32 MB)


@dataclass(frozen=True, eq=False)
class HeadResult:
    """Every stage of one attention head."""

    head: int  # 1-based, as people count heads
    W_Q: np.ndarray  # (d_model, d_k) this head's block of columns
    W_K: np.ndarray  # (d_model, d_k)
    W_V: np.ndarray  # (d_model, d_v)
    b_Q: np.ndarray | None  # (d_k,)
    b_K: np.ndarray | None  # (d_k,)
    b_V: np.ndarray | None  # (d_v,)
    Q: np.ndarray  # (L, d_k)
    K: np.ndarray  # (L, d_k)
    V: np.ndarray  # (L, d_v)
    scores: np.ndarray  # (L, L) row i = query i, column j = key j
    scaled: np.ndarray  # (L, L) scores / divisor
    visible: np.ndarray  # (L, L) bool, False where the mask hides a key
    masked: np.ndarray  # (L, L) scaled, with -inf where hidden
    shift: np.ndarray  # (L,) subtracted before exp; 0 unless a row's scores are extreme
    exp: np.ndarray  # (L, L) e^(masked - shift), 0 where hidden
    exp_sum: np.ndarray  # (L,) row sums of exp
    weights: np.ndarray  # (L, L) exp / exp_sum; each row sums to 1
    output: np.ndarray  # (L, d_v) weights·V


@dataclass(frozen=True, eq=False)
class RunResult:
    """The whole computation for a scenario."""

    scenario: Scenario
    X: np.ndarray  # (L, d_model)
    heads: tuple[HeadResult, ...]  # H of them
    concat: np.ndarray  # (L, H*d_v) the heads' outputs side by side
    output: np.ndarray  # (L, d_out) concat·W_O + b_O, or concat
    round_steps: int | None = None  # decimals every intermediate was rounded to, as by hand
    exact: RunResult | None = None  # the same run without rounding, when round_steps is set

    def head(self, number: int) -> HeadResult:
        """Head `number`, counted from 1."""
        return self.heads[number - 1]


def rounder(decimals: int | None) -> Callable[[np.ndarray], np.ndarray]:
    """Round to `decimals` like a hand calculation, or leave exact when None."""
    if decimals is None:
        return lambda a: a
    return lambda a: np.round(a, decimals) + 0.0  # + 0.0 turns -0.0 into 0.0


def run(scenario: Scenario, *, round_steps: int | None = None) -> RunResult:
    """Compute every stage; with round_steps, round each intermediate before the next step uses it."""
    exact = _run(scenario, None)
    if round_steps is None:
        return exact
    rounded = _run(scenario, round_steps)
    return RunResult(scenario, rounded.X, rounded.heads, rounded.concat, rounded.output, round_steps, exact)


def _run(scenario: Scenario, decimals: int | None) -> RunResult:
    r = rounder(decimals)
    X = r(np.asarray(scenario.X, dtype=np.float64))  # (L, d_model)
    heads = tuple(_head(scenario, X, h, decimals) for h in range(1, scenario.heads + 1))
    concat = np.hstack([head.output for head in heads])  # (L, H*d_v)
    output = concat
    if scenario.W_O is not None:
        output = r(output @ scenario.W_O)  # (L, d_out)
    if scenario.b_O is not None:
        output = r(output + scenario.b_O)  # (L, d_out)
    return RunResult(scenario, X, heads, concat, output)


def _block(matrix: np.ndarray | None, h: int, width: int) -> np.ndarray | None:
    """Columns of head h (1-based) from a matrix or vector that holds all heads side by side."""
    if matrix is None:
        return None
    return matrix[..., (h - 1) * width : h * width]


def _project(X: np.ndarray, W: np.ndarray, b: np.ndarray | None, r: Callable) -> np.ndarray:
    projected = r(X @ W)  # (L, d_model) @ (d_model, d) -> (L, d)
    return projected if b is None else r(projected + b)


def _head(scenario: Scenario, X: np.ndarray, h: int, decimals: int | None) -> HeadResult:
    r = rounder(decimals)
    d_k, d_v, L = scenario.d_k, scenario.d_v, scenario.L
    W_Q, W_K, W_V = _block(scenario.W_Q, h, d_k), _block(scenario.W_K, h, d_k), _block(scenario.W_V, h, d_v)
    b_Q, b_K, b_V = _block(scenario.b_Q, h, d_k), _block(scenario.b_K, h, d_k), _block(scenario.b_V, h, d_v)
    Q = _project(X, W_Q, b_Q, r)  # (L, d_k)
    K = _project(X, W_K, b_K, r)  # (L, d_k)
    V = _project(X, W_V, b_V, r)  # (L, d_v)
    scores = r(Q @ K.T)  # (L, d_k) @ (d_k, L) -> (L, L)
    scaled = r(scores / scenario.scale.divisor)  # (L, L)
    visible = causal_mask(L) if scenario.mask == "causal" else np.ones((L, L), dtype=bool)  # (L, L)
    masked = np.where(visible, scaled, -np.inf)  # (L, L)
    shift = r(row_shift(masked, visible))  # (L,)
    exp = r(np.exp(masked - shift[:, None]))  # (L, L); e^-inf = 0 where hidden
    exp_sum = r(exp.sum(axis=1))  # (L,)
    weights = r(exp / exp_sum[:, None])  # (L, L)
    if decimals is None:  # exact: one matrix product
        output = weights @ V  # (L, L) @ (L, d_v) -> (L, d_v)
    else:  # by hand: round each weighted value vector, then their sum
        output = np.empty((L, V.shape[1]))  # (L, d_v)
        block = max(1, WEIGHTED_BLOCK // max(1, L * V.shape[1]))  # query rows at a time: bounds the memory
        for start in range(0, L, block):
            rows = weights[start : start + block]  # (b, L)
            weighted = r(rows[:, :, None] * V[None, :, :])  # (b, L, d_v) weight_ij · v_j, each rounded
            output[start : start + block] = r(weighted.sum(axis=1))  # (b, d_v)
    for array in (Q, K, V, scores, scaled, visible, masked, shift, exp, exp_sum, weights, output):
        array.setflags(write=False)
    return HeadResult(h, W_Q, W_K, W_V, b_Q, b_K, b_V, Q, K, V, scores, scaled, visible, masked, shift, exp, exp_sum, weights, output)


def causal_mask(L: int) -> np.ndarray:
    """(L, L) bool: query i sees keys 1..i (the lower triangle with its diagonal)."""
    return np.tri(L, dtype=bool)


def row_shift(masked: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """(L,) what each row subtracts before exponentiating: 0 while plain e^x is safe, else the row's maximum.

    Plain e^x is safe when every visible score lies in [-700, 700] and the row's sum cannot
    overflow either (max + ln(count) stays below ln(float64 max) ≈ 709.78).
    """
    row_max = masked.max(axis=1)  # (L,) every row sees at least one key
    row_min = np.where(visible, masked, np.inf).min(axis=1)  # (L,)
    count = visible.sum(axis=1)  # (L,)
    safe = (row_max <= SHIFT_FREE) & (row_min >= -SHIFT_FREE) & (row_max + np.log(count) < 709.0)
    return np.where(safe, 0.0, row_max)
