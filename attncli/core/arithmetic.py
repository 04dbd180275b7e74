"""The arithmetic around the attention formula: exact or hand-rounded, the overflow checks, and the shift rule.

Pure NumPy in float64. `engine.attention_head` writes the formula; what is rounded, checked
and kept of each stage, and when a row's exponentials need their maximum subtracted, is
decided here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from attncli.core.rounding import round_decimals
from attncli.core.scenario import Scenario
from attncli.errors import AttnError, option

SHIFT_FREE = 700.0  # e^±700 is still an ordinary float64, so such scores need no shift
SHIFT_LIMIT = 709.0  # a row's e^max · count must stay below float64's max, e^709.78
EXACT_FROM = 2.0**52  # a float64 this large is a whole number: rounding to decimals leaves it as it is
WEIGHTED_BLOCK = 1 << 18  # hand-rounded outputs: weighted value vectors held at once (2 MiB; at 32 MB each pass went to memory and back)

Rounder = Callable[[np.ndarray], np.ndarray]


def rounder(decimals: int | None) -> Rounder:
    """Round to `decimals` like a hand calculation, or leave exact when None."""
    if decimals is None:
        return lambda a: a
    return HandRounder(decimals)


class HandRounder:
    """Rounds to `decimals` like a hand calculation: halves away from zero on every CPU (core.rounding), never a -0.0, and numbers
    beyond 2^52 (whole already) kept."""

    def __init__(self, decimals: int) -> None:
        self.decimals = decimals

    def __call__(self, a: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):  # np.round multiplies by 10^decimals: 1e306 would overflow
            rounded = round_decimals(a, self.decimals)
        if type(a) is not np.ndarray or not a.ndim or a.dtype != np.float64:  # a number, say: as below, without the in-place steps
            return np.where(np.abs(a) < EXACT_FROM, rounded + 0.0, a)
        # In place: --round-steps rounds tens of millions of weighted values, and each new array of them costs more than the arithmetic.
        rounded += 0.0  # turns -0.0 into 0.0
        if rounded.size and not (a.min() > -EXACT_FROM and a.max() < EXACT_FROM):  # NaN fails both tests
            np.copyto(rounded, a, where=~(np.abs(a) < EXACT_FROM))  # huge values are whole already (and -inf stays -inf)
        return rounded


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


def weighted_sum(weights: np.ndarray, V: np.ndarray, decimals: int | None) -> np.ndarray:
    """(L_q, d_v) weights·V: one matrix product, or by hand (each weighted value rounded, then their sum)."""
    if decimals is None:  # exact: one matrix product
        return np.asarray(weights @ V)  # (L_q, L_k) @ (L_k, d_v) -> (L_q, d_v)
    r = rounder(decimals)
    if small_products(weights, V, r):
        return r(sums_of_rounded(weights, V, decimals))
    L_q, L_k = weights.shape
    output = np.empty((L_q, V.shape[1]))  # (L_q, d_v)
    rows_at_once = max(1, WEIGHTED_BLOCK // max(1, L_k * V.shape[1]))  # bounds the memory
    for start in range(0, L_q, rows_at_once):
        output[start : start + rows_at_once] = summed_by_hand(weights[start : start + rows_at_once], V, r)  # (b, d_v)
    return output


def summed_by_hand(weights: np.ndarray, V: np.ndarray, r: Rounder) -> np.ndarray:
    """(R, d_v) Σ_j weight_ij · v_j as a hand calculation writes it: each weighted value (rounded by r), then their sum.

    Elementwise, never a matrix product, so a row's result does not depend on how many rows are
    computed together (BLAS may differ in the last bit between one row and a block of rows).
    weights (R, b), V (b, d_v).
    """
    if isinstance(r, HandRounder) and small_products(weights, V, r):
        return r(sums_of_rounded(weights, V, r.decimals))
    weighted = r(weights[:, :, None] * V[None, :, :])  # (R, b, d_v) weight_ij · v_j, each rounded
    return r(weighted.sum(axis=1))  # (R, d_v)


def small_products(weights: np.ndarray, V: np.ndarray, r: Rounder) -> bool:
    """True when sums_of_rounded, rounded, gives summed_by_hand's numbers: every weight · value finite and below 2^51, 0-15 decimals.

    And d_v ≥ 2: a sum over the keys then adds each output number's terms one after the other
    (with d_v = 1 NumPy sums pairwise, and which terms it pairs depends on where the sum starts).
    """
    if not (isinstance(r, HandRounder) and 0 <= r.decimals <= 15 and weights.size and V.size and V.shape[1] >= 2):
        return False
    if weights.dtype != np.float64 or V.dtype != np.float64:
        return False
    largest = max(weights.max(), -weights.min()) * max(V.max(), -V.min())  # NaN or inf fails the test below
    return bool(largest < EXACT_FROM / 2)  # a product is at most this, rounded up by half an ulp


def sums_of_rounded(weights: np.ndarray, V: np.ndarray, decimals: int) -> np.ndarray:
    """(R, d_v) Σ_j round(weight_ij · v_j), a block of rows and keys at a time: summed_by_hand's numbers once rounded, when small_products holds.

    Three shortcuts, none of which changes a bit of the rounded result: (1) a block of rows multiplies
    only the keys from the first to the last that one of its rows weighs (a causal block skips the keys
    after its last query): a 0 weight times a finite value is ±0, and a ±0 term changes a sum at
    most in the sign of a zero, which the rounding of the sum makes 0.0; (2) no check for numbers
    beyond 2^52, which small_products rules out; (3) a product rounded to -0.0 stays so, as in (1).
    The products are laid out (keys, rows, d_v), so that their sum adds whole rows of rows × d_v
    numbers, each number's terms in the keys' order as before. weights (R, L_k), V (L_k, d_v).
    """
    R, d_v = weights.shape[0], V.shape[1]
    space = np.empty(max(min(WEIGHTED_BLOCK, weights.size * d_v), weights.shape[1] * d_v))  # the products of every block in turn (a row at least)
    sums = np.zeros((R, d_v))  # (R, d_v); rows that weigh no key keep 0
    for rows, keys in key_blocks(weights, len(space) // d_v):
        w, v = weights[rows, keys], V[keys]  # (b, n), (n, d_v)
        products = space[: w.size * d_v].reshape(w.shape[1], w.shape[0], d_v)  # (n, b, d_v)
        np.copyto(products, w.T[:, :, None])  # weight_ij
        np.multiply(products, v[:, None, :], out=products)  # weight_ij · v_j
        round_decimals(products, decimals, out=products)  # each rounded, in place
        products.sum(axis=0, out=sums[rows])  # (b, d_v)
    return sums


def key_blocks(weights: np.ndarray, cells: int) -> Iterator[tuple[slice, slice]]:
    """(rows, keys): consecutive rows, with the keys from the first to the last any of them weighs; at most `cells` weights a block (or one row).

    Rows that weigh no key are left out. weights (R, L_k).
    """
    weighed = weights != 0  # (R, L_k)
    some = weighed.any(axis=1)  # (R,)
    first = np.where(some, weighed.argmax(axis=1), weights.shape[1]).tolist()  # (R,) a row's first weighed key
    last = np.where(some, weights.shape[1] - weighed[:, ::-1].argmax(axis=1), 0).tolist()  # (R,) one past its last
    R, start = len(first), 0
    while start < R:
        if not some[start]:
            start += 1
            continue
        low, high, end = first[start], last[start], start + 1
        while end < R and some[end]:
            wider_low, wider_high = min(low, first[end]), max(high, last[end])
            if (end + 1 - start) * (wider_high - wider_low) > cells:
                break
            low, high, end = wider_low, wider_high, end + 1
        yield slice(start, end), slice(low, high)
        start = end


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


ROWS_AT_ONCE = 256  # row_shift works on this many rows at a time: its temporary stays small


def round_in_place(a: np.ndarray, decimals: int | None) -> np.ndarray:
    """`rounder(decimals)(a)`'s numbers, written into `a` itself (no second array of its size)."""
    if decimals is not None:
        huge = ~(np.abs(a) < EXACT_FROM)  # whole already (and ±inf, NaN): kept as they are
        kept = a[huge]
        with np.errstate(over="ignore", invalid="ignore"):
            round_decimals(a, decimals, out=a)
        a += 0.0  # -0.0 becomes 0.0
        a[huge] = kept
    return a


# stage -> (the key an overflow names, the formula it names); stages not listed are not checked
CHECKED = {
    "scores": ("scores", "Q·Kᵀ"),
    "scaled": ("scaled", "Q·Kᵀ / divisor"),
    "bias": ("bias", "the bias B"),
    "biased": ("bias", "the scaled scores + B"),
    "output": ("output", "weights·V"),
}
UNROUNDED = ("bias", "masked")  # given (a bias), or only hidden (the mask): nothing new to round


class Arithmetic:
    """How one head's stages are computed: rounded (or exact), checked for overflow, and kept.

    With `rows` None every stage is a new array, kept whole. With `rows` (query rows from 0),
    the tokens × tokens stages are computed in place in one buffer and only those rows of each
    are kept: the same numbers bit for bit, for a fraction of the memory. The score product is
    still computed whole, since a product of fewer rows can differ in the last bits.
    """

    def __init__(self, s: Scenario, h: int, decimals: int | None, rows: Sequence[int] | None) -> None:
        self.s, self.h, self.decimals, self.rows = s, h, decimals, None if rows is None else list(rows)
        self.kept: dict[str, np.ndarray] = {}

    def reuse(self, a: np.ndarray) -> np.ndarray | None:
        """Where the next stage is written: over `a` when only rows are kept, else a new array (None)."""
        return None if self.rows is None else a

    def round(self, a: np.ndarray) -> np.ndarray:
        """`a` rounded, in place: `a` is an array the engine has just made for this stage (see `stage`)."""
        if self.decimals is None:
            return a
        if self.rows is None and not (a.base is None and a.flags.writeable and all(a is not kept for kept in self.kept.values())):
            return rounder(self.decimals)(a)  # not the engine's own new array (a variant that gave its input back): a new one
        if a.dtype != np.float64 or (a.size and not (a.min() > -EXACT_FROM and a.max() < EXACT_FROM)):  # numbers beyond 2^52, ±inf or NaN
            return round_in_place(a, self.decimals)
        with np.errstate(over="ignore", invalid="ignore"):
            round_decimals(a, self.decimals, out=a)
        a += 0.0  # -0.0 becomes 0.0
        return a

    def stage(self, name: str, a: np.ndarray, *, whole: bool = False) -> np.ndarray:
        """Stage `name`, rounded and checked; its rows kept (all of it when `whole`).

        `a` is a new array the engine made for this stage and holds nowhere else: it is rounded in place.
        """
        if name not in UNROUNDED:
            a = self.round(a)
        if name in CHECKED:
            finite(a, *CHECKED[name], self.s, self.h, self.s.tokens)
        self.kept[name] = a if self.rows is None or whole else a[self.rows]  # fancy indexing copies
        return a

    def shift(self, logits: np.ndarray, visible: np.ndarray) -> np.ndarray:
        """(L_q,) what each row subtracts before exponentiating (row_shift), read before the mask overwrites the logits."""
        L_q, L_k = logits.shape
        if no_shift(logits.max(), logits.min(), L_k):  # every row is safe: row_shift would give only zeros
            shift = np.zeros(L_q)
        else:
            parts = []
            for a in range(0, L_q, ROWS_AT_ONCE):  # in pieces of rows: the masked copy stays small
                seen = visible[a : a + ROWS_AT_ONCE]  # (b, L_k)
                parts.append(row_shift(np.where(seen, logits[a : a + ROWS_AT_ONCE], -np.inf), seen))
            shift = rounder(self.decimals)(np.concatenate(parts))
        self.kept["shift"] = shift if self.rows is None else shift[self.rows]
        return shift

    def hide(self, logits: np.ndarray, visible: np.ndarray) -> np.ndarray:
        """(L_q, L_k) the logits with −∞ where the mask hides a key."""
        if self.rows is None:
            return np.where(visible, logits, -np.inf)
        np.copyto(logits, -np.inf, where=~visible)
        return logits

    def exp(self, masked: np.ndarray, shift: np.ndarray) -> np.ndarray:
        """(L_q, L_k) e^(masked − shift); e^−∞ = 0 where hidden. A shift of 0 is not subtracted (x − 0 is x)."""
        exponent: np.ndarray = masked if not shift.any() else np.subtract(masked, shift[:, None], out=self.reuse(masked))
        exp: np.ndarray = np.exp(exponent, out=exponent if exponent is not masked else self.reuse(masked))
        return exp

    def sums(self, exp: np.ndarray, extra: np.ndarray | None = None) -> np.ndarray:
        """(L_q,) each row's sum of exponentials (+ `extra`, a learned sink's term); refused when hand rounding made a whole row 0."""
        exp_sum = rounder(self.decimals)(exp.sum(axis=1))
        if extra is not None:
            exp_sum = rounder(self.decimals)(exp_sum + extra)
        if self.decimals is not None and not exp_sum.all():  # every exponential of a row rounded away to 0
            i = int(np.flatnonzero(exp_sum == 0)[0])
            raise AttnError(
                f"head {self.h}, query {i + 1} ({self.s.tokens[i]!r}): every exponential of its row rounds to 0 at {self.decimals} decimals, "
                "so the weights would divide by a sum of 0",
                key=option("round_steps"),
                expected=f"more decimals, e.g. {option('round_steps')} 4",
            )
        self.kept["exp_sum"] = exp_sum if self.rows is None else exp_sum[self.rows]
        return exp_sum

    def weighted_sum(self, weights: np.ndarray, V: np.ndarray) -> np.ndarray:
        return weighted_sum(weights, V, self.decimals)
