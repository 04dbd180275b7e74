"""Hand rounding's weighted sums: the shortcut path (arithmetic.summed_small) gives the plain path's numbers bit for bit.

The reference below is the plain path as it stood before the shortcuts: every weight · value
product made, rounded with the -0.0 fix and the check for numbers beyond 2^52, then summed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import arithmetic, rounding

EXACT_FROM = 2.0**52


def round_reference(a: np.ndarray, decimals: int) -> np.ndarray:
    """Rounded to `decimals` by the one rule (halves away from zero), -0.0 made 0.0, numbers beyond 2^52 (and ±inf, NaN) kept."""
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = rounding.round_decimals(a, decimals) + 0.0
    return np.where(np.abs(a) < EXACT_FROM, rounded, a)


def summed_reference(weights: np.ndarray, V: np.ndarray, decimals: int) -> np.ndarray:
    """(R, d_v) each weight_ij · v_j rounded, then their sum rounded: every product made, whatever the weight."""
    with np.errstate(all="ignore"):
        weighted = round_reference(weights[:, :, None] * V[None, :, :], decimals)  # (R, b, d_v)
        return round_reference(weighted.sum(axis=1), decimals)


# Numbers a hand calculation meets: zeros (whole keys without weight), near a rounding half, negative, tiny and huge.
NUMBERS = st.one_of(
    st.just(0.0),
    st.just(-0.0),
    st.just(1.0),
    st.integers(-2000, 2000).map(lambda k: k / 1000 + 0.0005),
    st.floats(-10, 10, allow_nan=False),
    st.floats(-1e-9, 1e-9, allow_nan=False),
    st.sampled_from([2.0**51, -(2.0**51) + 1, 2.0**52 + 2, 1e300, -1e300]),
    st.integers(2**50, 2**54).map(float),  # np.round moves many of those beyond 2^52: hand rounding must keep them
)
SPECIAL = st.sampled_from([np.inf, -np.inf, np.nan])


@st.composite
def weighted_values(draw: st.DrawFn, *, special: bool = False) -> tuple[np.ndarray, np.ndarray, int]:
    """(weights (R, b), V (b, d_v), decimals); some keys weighed by no row, as under a mask."""
    R, b, d_v = draw(st.integers(1, 5)), draw(st.integers(1, 9)), draw(st.integers(1, 4))
    numbers = st.one_of(NUMBERS, SPECIAL) if special else NUMBERS
    weights = np.array(draw(st.lists(numbers, min_size=R * b, max_size=R * b))).reshape(R, b)
    unweighed = draw(st.lists(st.booleans(), min_size=b, max_size=b))
    weights[:, np.array(unweighed)] = draw(st.sampled_from([0.0, -0.0]))
    V = np.array(draw(st.lists(numbers, min_size=b * d_v, max_size=b * d_v))).reshape(b, d_v)
    return weights, V, draw(st.integers(-2, 17))


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(weighted_values())
def test_summed_by_hand_matches_the_plain_path_bit_for_bit(case):
    """Every shape (d_v = 1 too), decimals inside and outside 0-15, huge products: the same bits as every product rounded and summed."""
    weights, V, decimals = case
    with np.errstate(all="ignore"):
        got = arithmetic.summed_by_hand(weights, V, arithmetic.rounder(decimals))
    assert got.tobytes() == summed_reference(weights, V, decimals).tobytes()


@settings(max_examples=200, deadline=None)
@given(weighted_values(special=True))
def test_summed_by_hand_with_inf_and_nan_matches_the_plain_path(case):
    """±inf and NaN among the weights or values (0 · inf is NaN): the shortcut is not taken, the numbers are the plain path's."""
    weights, V, decimals = case
    with np.errstate(all="ignore"):
        got = arithmetic.summed_by_hand(weights, V, arithmetic.rounder(decimals))
    assert got.tobytes() == summed_reference(weights, V, decimals).tobytes()


def causal_weights(rng: np.random.Generator, L: int, decimals: int) -> np.ndarray:
    """(L, L) hand-rounded weights under a causal mask: each row sums to about 1, later keys exactly 0."""
    scores = np.where(np.tri(L, dtype=bool), rng.standard_normal((L, L)) * 3, -np.inf)
    exp = np.exp(scores - scores.max(axis=1, keepdims=True))
    return np.round(exp / exp.sum(axis=1, keepdims=True), decimals)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 6), st.integers(0, 6), st.integers(1, 10**6), st.booleans())
def test_weighted_sum_matches_the_plain_path_for_any_block_size(L, d_v, decimals, block, causal):
    """The engine's hand-rounded weights·V, a few rows at a time into one reused buffer: the plain path's bits, causal or not."""
    rng = np.random.default_rng(L * 1000 + d_v)
    weights = causal_weights(rng, L, decimals) if causal else np.round(rng.random((L, L)) / L, decimals)
    V = np.round(rng.standard_normal((L, d_v)) * 4, decimals)
    old_block = arithmetic.WEIGHTED_BLOCK
    arithmetic.WEIGHTED_BLOCK = block
    try:
        got = arithmetic.weighted_sum(weights, V, decimals)
    finally:
        arithmetic.WEIGHTED_BLOCK = old_block
    assert got.tobytes() == summed_reference(weights, V, decimals).tobytes()


def test_the_shortcut_is_taken_for_ordinary_weights():
    """Weights in [0, 1] and values of an ordinary scenario take the shortcut (so the tests above compare two paths)."""
    rng = np.random.default_rng(0)
    weights, V = causal_weights(rng, 8, 3), rng.standard_normal((8, 4))
    assert arithmetic.small_products(weights, V, arithmetic.rounder(3))
    assert not arithmetic.small_products(weights, V[:, :1], arithmetic.rounder(3))  # d_v = 1: NumPy sums pairwise
    assert not arithmetic.small_products(weights, V * 1e300, arithmetic.rounder(3))


def test_a_product_beyond_2_52_is_kept_whole():
    """5985349355355499 is whole, and np.round(x, 3) makes it ...498: hand rounding keeps it, whichever path sums it."""
    x = 5985349355355499.0
    assert np.round(x, 3) != x  # the trap this test is about
    weights, V = np.array([[1.0, 0.0]]), np.array([[x, 1.0], [1.0, 1.0]])
    got = arithmetic.summed_by_hand(weights, V, arithmetic.rounder(3))
    assert got.tolist() == [[x, 1.0]]
    assert got.tobytes() == summed_reference(weights, V, 3).tobytes()


def test_a_stage_is_rounded_in_place_only_when_it_is_a_new_array():
    """Arithmetic.stage rounds the engine's new array in place; an array it already keeps (a variant giving its input back) is copied."""
    from attncli.sources.yaml_scenario import from_text

    scenario = from_text("tokens: [a, b]\nQ: [[1], [1]]\nK: [[1], [0]]\nV: [[1], [2]]\n")
    a = arithmetic.Arithmetic(scenario, 1, 2, None)
    fresh = np.array([[0.123456, -0.004], [2.0**53 + 1, 7.5]])
    scaled = a.stage("scaled", fresh)
    assert scaled is fresh and scaled.tolist() == [[0.12, 0.0], [2.0**53 + 1, 7.5]]
    assert not np.signbit(scaled[0, 1])  # -0.004 rounds to 0.0, never -0.0
    again = a.stage("softcap", scaled * 1.0001)  # a new array: in place
    assert again is not scaled
    returned = a.stage("softcap", scaled)  # the array kept as "scaled", given back unchanged: a new one, "scaled" untouched
    assert returned is not scaled and a.kept["scaled"] is scaled and returned.tolist() == scaled.tolist()
