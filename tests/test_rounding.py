"""What people read does not depend on the CPU: decimal halves round one way, round-off is said as a bound (core.rounding)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import arithmetic, rounding
from attncli.document import fixedtext, numbers


def _neighbours(x: float, ulps: int = 4) -> list[float]:
    """x and the floats up to `ulps` steps either side: what another CPU's order of additions may give for x."""
    below, above, out = x, x, [x]
    for _ in range(ulps):
        below, above = np.nextafter(below, -np.inf), np.nextafter(above, np.inf)
        out += [float(below), float(above)]
    return out


def _written(x: float, p: int) -> set[str]:
    """Every way attncli writes x at p decimals: one number, a row, a block of bytes, CSV with decimals."""
    block = fixedtext.rows(fixedtext.cells(np.array([[x]]), p, numbers.fixed))[0].decode()
    return {numbers.fixed(x, p), numbers.fixed_many([x], p)[0], block, numbers.plain(x, p)}


@pytest.mark.parametrize(("value", "p", "shown"), [(0.4875, 3, "0.488"), (0.6505, 3, "0.651"), (-0.4875, 3, "-0.488"),
                                                   (0.125, 2, "0.13"), (2.5, 0, "3"), (0.0005, 3, "0.001")])  # fmt: skip
def test_a_decimal_half_shows_the_same_whatever_its_last_bits(value, p, shown):
    """0.4875 computed as 0.48749999999999993 on one CPU and 0.48750000000000004 on another shows 0.488 on both, in every writer."""
    for x in _neighbours(value):
        assert _written(x, p) == {shown}, x


def test_a_number_near_but_not_on_a_half_rounds_to_the_nearest():
    """Only a number within float64's reach of a half is a half: 0.48749 is 0.487, 0.4875001 is 0.488."""
    assert _written(0.48749, 3) == {"0.487"} and _written(0.4875001, 3) == {"0.488"}
    assert _written(-0.0004, 3) == {"0.000"}  # no "-0.000"


@settings(max_examples=300, deadline=None)
@given(st.integers(-10**6, 10**6), st.integers(0, 6), st.integers(-6, 6))
def test_halves_round_away_from_zero_and_others_as_printf(n, p, ulps):
    """A decimal half a few ulps off rounds away from zero; any other number is written as printf writes it."""
    half = (n + 0.5) / 10**p
    x = half
    for _ in range(abs(ulps)):
        x = float(np.nextafter(x, np.inf if ulps > 0 else -np.inf))
    away = (abs(n) + 1 if n >= 0 else abs(n)) * (1 if n >= 0 else -1)  # (n + ½) away from zero, in units of 10^-p
    expected = f"{away / 10**p:.{p}f}" if away else f"{0:.{p}f}"
    assert _written(x, p) == {expected}
    other = (n + 0.3) / 10**p
    assert _written(other, p) == {numbers.fixed(other, p)} and numbers.fixed(other, p) in (f"{other:.{p}f}", f"{other:.{p}f}".lstrip("-"))


def test_hand_rounding_rounds_halves_the_same_way():
    """--round-steps rounds 0.4875's neighbours (and 0.125) by the same rule as the shown numbers."""
    values = np.array(_neighbours(0.4875) + _neighbours(-0.125))
    rounded = arithmetic.rounder(3)(values)
    assert set(rounded[:9].tolist()) == {0.488} and set(rounded[9:].tolist()) == {-0.125}
    assert arithmetic.rounder(2)(np.array([0.125, -0.125, 0.135])).tolist() == [0.13, -0.13, 0.14]
    in_place = values.copy()
    arithmetic.round_in_place(in_place, 3)
    assert in_place.tobytes() == rounded.tobytes()


def test_round_decimals_is_np_round_away_from_halves():
    """On numbers nowhere near a half, round_decimals gives np.round's bits, for positive and negative decimals."""
    x = np.random.default_rng(7).normal(scale=100, size=10_000)
    for d in (-2, 0, 3, 7):
        expected = np.round(x, d)
        got = rounding.round_decimals(x, d)
        y = np.abs(x * 10.0**d) if d >= 0 else np.abs(x / 10.0**-d)
        far = np.abs(y - np.floor(y) - 0.5) > rounding.TIE_MOST
        assert got[far].tobytes() == expected[far].tobytes()


def test_round_off_is_said_as_a_bound_from_the_inputs():
    """A difference of a few ulps reads the same whatever its bits; a real difference is given as a number."""
    said = {rounding.agreement(np.array(d), scale=1.0, terms=6) for d in ([0.0, 0.0], [2.2e-16, -1.1e-16], [0.0, 4.4e-16])}
    assert said == {"less than 1e-13 (float64's rounding)"}
    assert rounding.agreement(np.array([3.2e-4, 0.0]), scale=1.0, terms=6) == "3.2e-04"
    assert rounding.agreement(np.array([1e-10]), scale=1e6, terms=1000) == "less than 1e-5 (float64's rounding)"


def test_significant_digits_are_the_same_on_every_cpu():
    """The unrounded value quoted beside ≈ has ten significant digits, no noise: 3.0257791370494 and its neighbours read alike."""
    assert {numbers.significant(x, 10) for x in _neighbours(3.0257791370494)} == {"3.025779137"}
    assert {numbers.significant(x, 10) for x in _neighbours(0.14)} == {"0.14"}


def test_rounding_in_place_a_block_at_a_time_gives_the_same_numbers():
    """A stage rounded in place (in blocks, to hold no second array of its size) equals the same numbers rounded into a new array."""
    rng = np.random.default_rng(3)
    a = rng.normal(size=(3 * rounding.BLOCK + 7,))
    a[::97] = np.round(a[::97], 3) + 0.0005  # decimal halves at 3 decimals, a hair either side in float64
    a = a.reshape(-1, 7) if a.size % 7 == 0 else a
    expected = rounding.round_decimals(a, 3)
    in_place = a.copy()
    assert rounding.round_decimals(in_place, 3, out=in_place) is in_place
    assert in_place.tobytes() == expected.tobytes()
