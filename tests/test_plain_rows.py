"""CSV's full-precision numbers: `numbers.plain_rows` (orjson's digits) writes exactly what repr writes."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attncli.document.numbers import plain, plain_rows

# every float64: subnormals, the largest, ±0, ±∞, NaN, and numbers on each side of the places where forms change
EDGES = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308, math.inf, -math.inf,
         math.nan, 1e-4, np.nextafter(1e-4, 0), 1e-7, np.nextafter(1e-7, 0), 1e15, np.nextafter(1e15, 0), 1e16, np.nextafter(1e16, 0),
         1e-5, 1.25e-05, 1e-9, 1e22, 1e21, 0.1, 1.0, 123456789012345678.0, 9.999999999999999e-05]  # fmt: skip


def reference(data: np.ndarray) -> list[bytes]:
    """Each row as repr writes each number, joined by commas."""
    return [",".join(plain(float(x), None) for x in row).encode() for row in data]


def anywhere() -> st.SearchStrategy[float]:
    """Any float64 by its bits (mostly huge and tiny ones), any ordinary float, or one of the edges."""
    bits = st.integers(0, 2**64 - 1).map(lambda b: float(np.array(b, dtype=np.uint64).view(np.float64)))
    scaled = st.tuples(st.floats(-10, 10), st.integers(-330, 310)).map(lambda p: p[0] * 10.0 ** p[1] if -308 < p[1] < 308 else p[0])
    return st.one_of(st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True), bits, scaled, st.sampled_from(EDGES))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=12), elements=anywhere()))
def test_plain_rows_is_repr(data):
    assert plain_rows(data) == reference(data)


@pytest.mark.slow
def test_plain_rows_million_random_numbers():
    """A million numbers from every binade, subnormals and the tiny weights softmax gives among them."""
    rng = np.random.default_rng(24)
    bits = rng.integers(0, 2**64, 400_000, dtype=np.uint64).view(np.float64)
    weights = rng.dirichlet(np.full(1000, 0.3), 300).ravel()  # many below 1e-4
    spread = rng.standard_normal(300_000) * 10.0 ** rng.integers(-20, 25, 300_000)
    data = np.concatenate([bits, weights, spread, np.array(EDGES, dtype=np.float64)])
    data = np.resize(data, (len(data) // 1000, 1000))
    assert plain_rows(data) == reference(data)


def test_plain_rows_of_empty_and_strided_blocks():
    assert plain_rows(np.zeros((0, 3))) == []
    assert plain_rows(np.zeros((2, 0))) == [b"", b""]
    data = np.arange(12.0).reshape(3, 4) / 7
    assert plain_rows(data.T) == reference(data.T)  # not C-contiguous
    assert plain_rows(data.astype(np.float32)) == reference(data.astype(np.float32).astype(np.float64))
