"""Rounding to decimals that no CPU can change, and how far float64's own rounding reaches.

Two ideas, each with one home here:

* **Ties.** A hand calculation with 2-decimal inputs lands on decimal halves (0.25 · 1.95 = 0.4875),
  which float64 cannot hold: the computed number is 0.48749999999999993 on one CPU and
  0.48750000000000004 on another (BLAS sums in another order), and plain rounding then shows
  0.487 or 0.488. A number within `TIE` of a half, relative to its size, is treated as the half it
  almost surely is and rounded away from zero, as a hand calculation rounds (0.4875 → 0.488).
  Every shown number (`document.numbers.fixed`, `fixedtext`) and every hand-rounded step
  (`--round-steps`, `arithmetic`) rounds by this rule, so what people see is the same everywhere.
  A number truly that close to a half but not on it is off by at most TIE of its size: far below
  anything float64's own error leaves meaningful.
* **Round-off.** Two orders of the same arithmetic (tiled against ordinary softmax, the cache against
  the full run, the absorbed form of MLA) differ in the last bits, differently on each CPU.
  `agreement` says such a difference as a bound worked out from the inputs ("less than 1e-15,
  float64's rounding"), never as the bits themselves; a difference beyond the bound is a real one
  and is given as a number.
"""

from __future__ import annotations

import math

import numpy as np

TIE = 2.0**-30  # a number within this much of a half (relative to its size, in units of the last decimal) is that half
TIE_MOST = 2.0**-10  # … but never more than this much of a unit: a number with many digits is judged only this close
EPSILON = float(np.finfo(np.float64).eps)  # 2.2e-16, the spacing of float64 numbers at 1
ROUNDOFF_MARGIN = 16.0  # a bound on accumulated rounding: this many ulps per term summed, generous so no CPU crosses it


def tie_tolerance(size: float) -> float:
    """How close to a half |y| (a number in units of its last decimal) must be to count as the half."""
    return min(TIE_MOST, max(size, 1.0) * TIE)


def near_half(y: float) -> bool:
    """True when y (in units of the last decimal to keep) is a half by this module's rule."""
    size = abs(y)
    return math.isfinite(y) and abs(size - math.floor(size) - 0.5) <= tie_tolerance(size)


def round_half_away(y: float) -> float:
    """y (in units of the last decimal) rounded to a whole number: halves (by `near_half`) away from zero, else the nearest."""
    if near_half(y):
        return math.copysign(math.floor(abs(y)) + 1.0, y)
    return float(round(y))


def halves(y: np.ndarray) -> np.ndarray:
    """Which numbers of y (in units of the last decimal, finite) are halves by `near_half`'s rule, elementwise: the same test, vectorised."""
    size = np.abs(y)
    found: np.ndarray = np.abs(size - np.floor(size) - 0.5) <= np.minimum(TIE_MOST, np.maximum(size, 1.0) * TIE)
    return found


BLOCK = 1 << 16  # numbers rounded at once in place: the temporaries stay small when a stage of millions is rounded


def round_decimals(a: np.ndarray, decimals: int, out: np.ndarray | None = None) -> np.ndarray:
    """np.round(a, decimals), except that a number near a half (`near_half`) rounds away from zero on every CPU.

    Written into `out` when given (which may be `a` itself: then a block at a time, so that rounding a stage in place
    holds no array of its size beside it); ±∞ and NaN pass through as np.round passes them.
    """
    if np.ndim(a) == 0:  # a number: the same rule, through a one-element array
        return np.asarray(_rounded(np.reshape(np.asarray(a, dtype=np.float64), 1), decimals, None)[0])
    if out is a and a.flags.c_contiguous and a.size > BLOCK:
        flat = a.reshape(-1)  # a view of the same numbers
        for start in range(0, flat.size, BLOCK):
            block = flat[start : start + BLOCK]
            _rounded(block, decimals, block)
        return a
    return _rounded(a, decimals, out)


def _rounded(a: np.ndarray, decimals: int, out: np.ndarray | None) -> np.ndarray:
    scale, to_units, from_units = (10.0**decimals, np.multiply, np.divide) if decimals >= 0 else (10.0**-decimals, np.divide, np.multiply)
    with np.errstate(over="ignore", invalid="ignore"):
        y = to_units(a, scale, out=out)  # (…) in units of the last decimal kept, as np.round scales: 10^|d| is exact for |d| ≤ 22
        rounded = np.rint(y)  # (…) half to even, as np.round
        gap = np.abs(np.subtract(y, rounded))  # (…) how far y lies from the whole number it went to
        near = gap >= 0.5 - TIE_MOST  # (…) a quick filter: only these can be halves
        if near.any():
            candidates = y[near]  # (n,)
            rounded[near] = np.where(halves(candidates), np.copysign(np.floor(np.abs(candidates)) + 1.0, candidates), rounded[near])
        result: np.ndarray = from_units(rounded, scale, out=y)
    return result


def roundoff_bound(scale: float, terms: int) -> float:
    """The most float64's rounding can move a result of `terms` terms, each at most `scale` in size: generous, from the inputs alone."""
    return ROUNDOFF_MARGIN * (max(terms, 1) + 4) * EPSILON * max(abs(scale), float(np.finfo(np.float64).tiny))


def power_of_ten_above(x: float) -> int:
    """The exponent of the smallest power of ten ≥ x: -15 for 1e-15 (a bound people read at a glance)."""
    return math.ceil(math.log10(x))


def largest(difference: np.ndarray | float) -> float:
    """max |difference| (0 for none)."""
    return float(np.max(np.abs(difference), initial=0.0))


def agreement(difference: np.ndarray | float, *, scale: float, terms: int) -> str:
    """The largest |difference| between two orders of the same arithmetic, said so that no CPU changes it.

    "less than 1e-15 (float64's rounding)" when within `roundoff_bound(scale, terms)`, else the real difference, like 3.2e-04.
    """
    bound = roundoff_bound(scale, terms)
    biggest = largest(difference)
    if biggest <= bound:
        return f"less than 1e{power_of_ten_above(bound)} (float64's rounding)"
    return f"{biggest:.1e}"
