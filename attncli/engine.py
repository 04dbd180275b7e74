"""The attention engine: softmax(mask(RoPE(Q)·RoPE(K)ᵀ / s + bias))·V with every stage kept.

Pure NumPy in float64: no printing, no I/O. One head, in order: Q, K, V → RoPE on q and k →
scores q·kᵀ → ÷ divisor → + bias + ALiBi → mask → softmax → ·V; then the heads side by
side → ·W_O + b_O. Dimension names used in the shape comments:
    L_q     query tokens             L_k   key/value tokens (L_q = L_k in self-attention)
    d_model width of an embedding     H     query heads        G   key/value heads
    d_k     width of a query/key in one head                   d_v width of a value in one head
    d_out   width of the final output (d_out = H·d_v without W_O)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, NoReturn

import numpy as np

from attncli.errors import AttnError
from attncli.model import Scenario

SHIFT_FREE = 700.0  # e^±700 is still an ordinary float64, so such scores need no shift
SHIFT_LIMIT = 709.0  # a row's e^max · count must stay below float64's max, e^709.78
EXACT_FROM = 2.0**52  # a float64 this large is a whole number: rounding to decimals leaves it as it is
WEIGHTED_BLOCK = 4_000_000  # hand-rounded outputs: weighted value vectors held at once (32 MB)

Rounder = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True, eq=False)
class HeadResult:
    """Every stage of one attention head."""

    head: int  # 1-based, as people count heads
    kv_head: int  # 1-based: the key/value head this query head reads (grouped-query attention)
    W_Q: np.ndarray | None  # (d_model, d_k) this head's block of columns; None when Q/K/V are given
    W_K: np.ndarray | None  # (d_model, d_k) of its key/value head
    W_V: np.ndarray | None  # (d_model, d_v)
    b_Q: np.ndarray | None  # (d_k,)
    b_K: np.ndarray | None  # (d_k,)
    b_V: np.ndarray | None  # (d_v,)
    Q: np.ndarray  # (L_q, d_k) X·W_Q + b_Q
    K: np.ndarray  # (L_k, d_k)
    V: np.ndarray  # (L_k, d_v)
    Q_rope: np.ndarray | None  # (L_q, d_k) Q rotated by position; None without RoPE
    K_rope: np.ndarray | None  # (L_k, d_k)
    scores: np.ndarray  # (L_q, L_k) row i = query i, column j = key j
    scaled: np.ndarray  # (L_q, L_k) scores / divisor
    bias: np.ndarray | None  # (L_q, L_k) what is added to the scaled scores (bias + ALiBi); None without
    biased: np.ndarray | None  # (L_q, L_k) scaled + bias
    visible: np.ndarray  # (L_q, L_k) bool, False where the mask hides a key
    masked: np.ndarray  # (L_q, L_k) the logits, with -inf where hidden
    shift: np.ndarray  # (L_q,) subtracted before exp; 0 unless a row's scores are extreme
    exp: np.ndarray  # (L_q, L_k) e^(masked - shift), 0 where hidden
    exp_sum: np.ndarray  # (L_q,) row sums of exp
    weights: np.ndarray  # (L_q, L_k) exp / exp_sum; each row sums to 1
    output: np.ndarray  # (L_q, d_v) weights·V

    @property
    def logits(self) -> np.ndarray:
        """(L_q, L_k) what the mask and the softmax see: the scaled scores plus any bias."""
        return self.scaled if self.biased is None else self.biased

    @property
    def q(self) -> np.ndarray:
        """(L_q, d_k) the queries that meet the keys: rotated when RoPE is on."""
        return self.Q if self.Q_rope is None else self.Q_rope

    @property
    def k(self) -> np.ndarray:
        """(L_k, d_k) the keys the queries meet."""
        return self.K if self.K_rope is None else self.K_rope


@dataclass(frozen=True, eq=False)
class RunResult:
    """The whole computation for a scenario."""

    scenario: Scenario
    X: np.ndarray | None  # (L_q, d_model); None when Q/K/V are given
    X_kv: np.ndarray | None  # (L_k, d_model) the context's embeddings in cross-attention, else None
    heads: tuple[HeadResult, ...]  # H of them
    concat: np.ndarray  # (L_q, H*d_v) the heads' outputs side by side
    output: np.ndarray  # (L_q, d_out) concat·W_O + b_O, or concat
    round_steps: int | None = None  # decimals every intermediate was rounded to, as by hand
    exact: RunResult | None = None  # the same run without rounding, when round_steps is set

    def head(self, number: int) -> HeadResult:
        """Head `number`, counted from 1."""
        return self.heads[number - 1]


def rounder(decimals: int | None) -> Rounder:
    """Round to `decimals` like a hand calculation, or leave exact when None."""
    if decimals is None:
        return lambda a: a

    def round_by_hand(a: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):  # np.round multiplies by 10^decimals: 1e306 would overflow
            rounded = np.round(a, decimals) + 0.0  # + 0.0 turns -0.0 into 0.0
        return np.where(np.abs(a) < EXACT_FROM, rounded, a)  # huge values are whole already (and -inf stays -inf)

    return round_by_hand


def run(scenario: Scenario, *, round_steps: int | None = None) -> RunResult:
    """Compute every stage; with round_steps, round each intermediate before the next step uses it.

    A stage whose numbers leave float64's range (±1.8e308) is an AttnError naming the stage,
    the head and the row, never an inf or NaN in the result (nor a numpy warning).
    """
    with np.errstate(all="ignore"):  # overflow is caught by `finite` after each stage, with a clear message
        exact = _run(scenario, None)
        if round_steps is None:
            return exact
        rounded = _run(scenario, round_steps)
    return RunResult(scenario, rounded.X, rounded.X_kv, rounded.heads, rounded.concat, rounded.output, round_steps, exact)


def finite(array: np.ndarray, stage: str, what: str, s: Scenario, h: int | None, rows: Sequence[str]) -> np.ndarray:
    """`array` itself when every number is finite, else an AttnError naming the stage, head and row that overflowed.

    `what` is the formula of the stage ("Q·Kᵀ"), `rows` the tokens that label its rows.
    """
    if np.isfinite(np.sum(array)):  # one pass, no copy: any inf or NaN makes the sum non-finite
        return array
    bad_rows = np.flatnonzero(~np.isfinite(array).reshape(array.shape[0], -1).all(axis=1))
    if not bad_rows.size:  # only the sum overflowed, every number is finite
        return array
    i = int(bad_rows[0])
    head = "" if h is None else f"head {h}, "
    raise AttnError(
        f"{head}row {i + 1} ({rows[i]!r}): {what} overflows float64 (a number beyond ±1.8e308)",
        file=s.path,
        key=stage,
        expected="smaller numbers in the embeddings, weights, bias or scale",
    )


def _run(scenario: Scenario, decimals: int | None) -> RunResult:
    r = rounder(decimals)
    X = None if scenario.X is None else r(np.asarray(scenario.X, dtype=np.float64))  # (L_q, d_model)
    X_kv = None if scenario.X_kv is None else r(np.asarray(scenario.X_kv, dtype=np.float64))  # (L_k, d_model)
    kv_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # kv head -> (K, V), shared by its query heads
    heads = tuple(_head(scenario, X, X_kv, h, decimals, kv_cache) for h in range(1, scenario.heads + 1))
    concat = np.hstack([head.output for head in heads])  # (L_q, H*d_v)
    output = concat
    if scenario.W_O is not None:
        output = r(output @ scenario.W_O)  # (L_q, H*d_v) @ (H*d_v, d_out) -> (L_q, d_out)
        finite(output, "output", "concat·W_O", scenario, None, scenario.tokens)
    if scenario.b_O is not None:
        output = r(output + scenario.b_O)  # (L_q, d_out)
        finite(output, "output", "concat·W_O + b_O", scenario, None, scenario.tokens)
    return RunResult(scenario, X, X_kv, heads, concat, output)


def block(matrix: np.ndarray | None, h: int, width: int) -> np.ndarray | None:
    """Columns of head h (1-based) from a matrix or vector that holds all heads side by side."""
    if matrix is None:
        return None
    part = matrix[..., (h - 1) * width : h * width]
    if part.flags.f_contiguous:  # columns of a column-major matrix (a checkpoint's, stored transposed): already whole
        return part
    # a contiguous copy: BLAS multiplies a strided column slice of a wide matrix several times slower
    return np.ascontiguousarray(part)


def project(X: np.ndarray, W: np.ndarray, b: np.ndarray | None, r: Rounder) -> np.ndarray:
    """(L, d) X·W + b, each step rounded by r."""
    projected = r(X @ W)  # (L, d_model) @ (d_model, d) -> (L, d)
    return projected if b is None else r(projected + b)


class HeadInputs(NamedTuple):
    """What a head computes before its scores: the first fields of HeadResult, in its order."""

    kv_head: int  # g, from 1
    W_Q: np.ndarray | None  # (d_model, d_k) this head's columns; None when Q, K, V are given
    W_K: np.ndarray | None  # (d_model, d_k) its key/value head's columns
    W_V: np.ndarray | None  # (d_model, d_v)
    b_Q: np.ndarray | None  # (d_k,)
    b_K: np.ndarray | None  # (d_k,)
    b_V: np.ndarray | None  # (d_v,)
    Q: np.ndarray  # (L_q, d_k)
    K: np.ndarray  # (L_k, d_k)
    V: np.ndarray  # (L_k, d_v)
    Q_rope: np.ndarray | None  # (L_q, d_k) rotated, under RoPE
    K_rope: np.ndarray | None  # (L_k, d_k)


def head_inputs(
    s: Scenario,
    h: int,
    X: np.ndarray | None,
    X_kv: np.ndarray | None,
    r: Rounder,
    kv_cache: dict[int, tuple[np.ndarray, np.ndarray]],
) -> HeadInputs:
    """Head h's weight blocks, Q, K, V and (under RoPE) rotated Q and K; a key/value head's K and V computed once, kept in kv_cache."""
    d_k, d_v, g = s.d_k, s.d_v, s.kv_head(h)
    W_Q, W_K, W_V = block(s.W_Q, h, d_k), block(s.W_K, g, d_k), block(s.W_V, g, d_v)
    b_Q, b_K, b_V = block(s.b_Q, h, d_k), block(s.b_K, g, d_k), block(s.b_V, g, d_v)
    queries, keys = s.tokens, s.key_tokens  # what labels the rows, for an overflow's message
    if X is None:  # Q, K and V given directly
        Q = r(block(s.Q, h, d_k))  # type: ignore[arg-type]  # (L_q, d_k)
        K, V = kv_cache.setdefault(g, (r(block(s.K, g, d_k)), r(block(s.V, g, d_v))))  # type: ignore[arg-type]
    else:
        keys_from = X if X_kv is None else X_kv  # (L_k, d_model)
        Q = finite(project(X, W_Q, b_Q, r), "q", "X·W_Q", s, h, queries)  # type: ignore[arg-type]  # (L_q, d_k)
        if g not in kv_cache:
            K = finite(project(keys_from, W_K, b_K, r), "k", "X·W_K", s, h, keys)  # type: ignore[arg-type]  # (L_k, d_k)
            V = finite(project(keys_from, W_V, b_V, r), "v", "X·W_V", s, h, keys)  # type: ignore[arg-type]  # (L_k, d_v)
            kv_cache[g] = (K, V)
        K, V = kv_cache[g]  # (L_k, d_k), (L_k, d_v)
    Q_rope = K_rope = None
    if s.rope is not None:
        Q_rope = finite(r(s.rope.rotate(Q, np.arange(Q.shape[0]))), "rope", "RoPE(Q)", s, h, queries)  # (L_q, d_k) p = 0, 1, ...
        K_rope = finite(r(s.rope.rotate(K, np.arange(K.shape[0]))), "rope", "RoPE(K)", s, h, keys)  # (L_k, d_k)
    return HeadInputs(g, W_Q, W_K, W_V, b_Q, b_K, b_V, Q, K, V, Q_rope, K_rope)


def _head(
    s: Scenario,
    X: np.ndarray | None,
    X_kv: np.ndarray | None,
    h: int,
    decimals: int | None,
    kv_cache: dict[int, tuple[np.ndarray, np.ndarray]],
) -> HeadResult:
    r = rounder(decimals)
    queries = s.tokens  # what labels the rows, for an overflow's message
    inputs = head_inputs(s, h, X, X_kv, r, kv_cache)
    Q, K, V, Q_rope, K_rope = inputs.Q, inputs.K, inputs.V, inputs.Q_rope, inputs.K_rope
    L_q, L_k = Q.shape[0], K.shape[0]
    q, k = (Q, K) if Q_rope is None else (Q_rope, K_rope)
    scores = r(q @ k.T)  # type: ignore[union-attr]  # (L_q, d_k) @ (d_k, L_k) -> (L_q, L_k)
    scaled = r(scores / s.scale.divisor)  # (L_q, L_k)
    bias = score_bias(s, h, L_q, L_k)  # (L_q, L_k) or None
    biased = None if bias is None else r(scaled + bias)  # (L_q, L_k)
    logits = scaled if biased is None else biased  # (L_q, L_k)
    # an inf or NaN in any earlier stage stays one in the logits: two reductions check them all, no copy
    top, bottom = logits.max(), logits.min()  # NaN when any number is NaN
    if not (np.isfinite(top) and np.isfinite(bottom)):
        first_overflow(s, h, scores, scaled, bias, biased)
    visible = s.mask.visible(L_q, L_k)  # (L_q, L_k)
    masked = np.where(visible, logits, -np.inf)  # (L_q, L_k)
    if no_shift(top, bottom, L_k):
        shift = np.zeros(L_q)  # (L_q,) every row is safe, so row_shift would give only zeros
        exp = r(np.exp(masked))  # (L_q, L_k); masked - 0.0 is masked itself; e^-inf = 0 where hidden
    else:
        shift = r(row_shift(masked, visible))  # (L_q,)
        exp = np.subtract(masked, shift[:, None])  # (L_q, L_k)
        exp = r(np.exp(exp, out=exp))  # e^-inf = 0 where hidden
    exp_sum = r(exp.sum(axis=1))  # (L_q,)
    if decimals is not None and not exp_sum.all():  # every exponential of a row rounded away to 0
        i = int(np.flatnonzero(exp_sum == 0)[0])
        raise AttnError(
            f"head {h}, query {i + 1} ({s.tokens[i]!r}): every exponential of its row rounds to 0 at {decimals} decimals, "
            "so the weights would divide by a sum of 0",
            key="--round-steps",
            expected="more decimals, e.g. --round-steps 4",
        )
    weights = r(exp / exp_sum[:, None])  # (L_q, L_k)
    output = finite(weighted_sum(weights, V, decimals), "output", "weights·V", s, h, queries)  # (L_q, d_v)
    arrays = (Q, K, V, Q_rope, K_rope, scores, scaled, bias, biased, visible, masked, shift, exp, exp_sum, weights, output)
    for array in arrays:
        if array is not None:
            array.setflags(write=False)
    n = inputs
    return HeadResult(h, n.kv_head, n.W_Q, n.W_K, n.W_V, n.b_Q, n.b_K, n.b_V, *arrays)  # arrays start with Q, K, V, Q_rope, K_rope


def first_overflow(
    s: Scenario, h: int, scores: np.ndarray, scaled: np.ndarray, bias: np.ndarray | None, biased: np.ndarray | None
) -> NoReturn:
    """The AttnError of the first score stage (in the order they are computed) that holds an inf or NaN; the logits do."""
    queries = s.tokens
    finite(scores, "scores", "Q·Kᵀ", s, h, queries)
    finite(scaled, "scaled", "Q·Kᵀ / divisor", s, h, queries)
    if bias is not None:
        finite(bias, "bias", "the bias B", s, h, queries)
    if biased is not None:
        finite(biased, "bias", "the scaled scores + B", s, h, queries)
    raise AssertionError("first_overflow: the logits were finite")  # the logits are scaled or biased, checked above


def score_bias(s: Scenario, h: int, L_q: int, L_k: int) -> np.ndarray | None:
    """(L_q, L_k) everything added to head h's scaled scores: the given bias plus ALiBi; None without."""
    terms = [term.matrix(h, L_q, L_k) for term in (s.bias, s.alibi) if term is not None]
    if not terms:
        return None
    total = terms[0] if len(terms) == 1 else terms[0] + terms[1]  # (L_q, L_k)
    return np.array(total, dtype=np.float64)


def weighted_sum(weights: np.ndarray, V: np.ndarray, decimals: int | None) -> np.ndarray:
    """(L_q, d_v) weights·V: one matrix product, or by hand (each weighted value rounded, then their sum)."""
    if decimals is None:  # exact: one matrix product
        return np.asarray(weights @ V)  # (L_q, L_k) @ (L_k, d_v) -> (L_q, d_v)
    r = rounder(decimals)
    L_q, L_k = weights.shape
    output = np.empty((L_q, V.shape[1]))  # (L_q, d_v)
    rows_at_once = max(1, WEIGHTED_BLOCK // max(1, L_k * V.shape[1]))  # bounds the memory
    for start in range(0, L_q, rows_at_once):
        rows = weights[start : start + rows_at_once]  # (b, L_k)
        weighted = r(rows[:, :, None] * V[None, :, :])  # (b, L_k, d_v) weight_ij · v_j, each rounded
        output[start : start + rows_at_once] = r(weighted.sum(axis=1))  # (b, d_v)
    return output


def no_shift(top: float, bottom: float, L_k: int) -> bool:
    """True when logits between `bottom` and `top` (all of them, hidden ones too) make row_shift 0 in every row.

    Every visible score then lies in [-700, 700], and a row's max + ln(count) stays below 709
    with a margin of 1 (so no rounding of the logarithm can matter).
    """
    return bool(bottom >= -SHIFT_FREE and top <= SHIFT_FREE and top + np.log(L_k) < SHIFT_LIMIT - 1.0)


def row_shift(masked: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """(L_q,) what each row subtracts before exponentiating: 0 while plain e^x is safe, else the row's maximum.

    Plain e^x is safe when every visible score lies in [-700, 700] and the row's sum cannot
    overflow either (max + ln(count) stays below ln(float64 max) ≈ 709.78).
    """
    row_max = masked.max(axis=1)  # (L_q,) every row sees at least one key
    row_min = np.min(masked, axis=1, where=visible, initial=np.inf)  # (L_q,) no masked copy
    count = np.count_nonzero(visible, axis=1)  # (L_q,)
    safe = (row_max <= SHIFT_FREE) & (row_min >= -SHIFT_FREE) & (row_max + np.log(count) < SHIFT_LIMIT)
    return np.asarray(np.where(safe, 0.0, row_max))
