"""Markdown and LaTeX write every number of a matrix as `numbers.fixed` does, whole rows at a time."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.numbers import fixed
from attncli.render import fixedtext, texmatrix


def test_row_numbers_write_huge_numbers_and_negative_zero_as_fixed_does():
    """A row with 1e15, 1e20, -0.0 or a negative number that rounds to zero reads exactly as numbers.fixed writes each."""
    row = np.array([1e15, -1e20, -0.0, -0.00001, 0.5, 123456789.125])
    assert texmatrix.row_numbers(row, 4, fixed) == [fixed(float(x), 4) for x in row]
    assert texmatrix.row_numbers(row, 2) == [texmatrix.number(float(x), 2) for x in row]


def written(data: np.ndarray, precision: int, write=fixed, lead: bytes = b"|") -> list[bytes]:
    """Each row of `data` as fixedtext writes it, every number after `lead`."""
    return fixedtext.rows(fixedtext.cells(data, precision, write, lead))


def one_by_one(data: np.ndarray, precision: int, write=fixed, lead: str = "|") -> list[bytes]:
    """Each row of `data` written a number at a time by `write`."""
    return ["".join(lead + write(float(x), precision) for x in row).encode() for row in data]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=24),
    st.integers(0, 15),
    st.sampled_from([fixed, texmatrix.number]),
)
def test_cells_write_every_float_as_write_does(values, precision, write):
    """Any float64 (±∞, NaN, -0.0, subnormal, 1e308) at any precision reads as numbers.fixed or texmatrix.number write it."""
    data = np.array(values, dtype=np.float64).reshape(1, -1)
    assert written(data, precision, write) == one_by_one(data, precision, write)


def test_cells_round_halves_and_near_halves_as_printf_does():
    """Numbers at, just above and just below a half of the last decimal round as Python's own formatting rounds them."""
    rng = np.random.default_rng(0)
    for precision in range(8):
        halves = (np.round(rng.standard_normal((20, 20)) * 10 ** (precision + 2)) + 0.5) / 10**precision
        for data in (halves, np.nextafter(halves, np.inf), np.nextafter(halves, -np.inf), np.array([[0.5, 1.5, 2.5, -0.5, 0.125, 1e-5]])):
            assert written(data, precision) == one_by_one(data, precision)


def test_cells_of_scaled_random_matrices_match_one_by_one():
    """Random matrices from 1e-6 to 1e17 in magnitude, with masked cells, read as numbers.fixed writes each number."""
    rng = np.random.default_rng(1)
    for scale in (1e-6, 1e-2, 1.0, 1e3, 1e9, 1e14, 1e17):
        data = rng.standard_normal((16, 16)) * scale
        data[np.triu_indices(16, 1)] = -np.inf
        for precision in (0, 3, 4, 9):
            assert written(data, precision, lead=b" | ") == one_by_one(data, precision, lead=" | ")


def test_cells_of_empty_matrices():
    """No rows, or rows without numbers, give empty texts."""
    assert written(np.zeros((0, 3)), 4) == []
    assert written(np.zeros((2, 0)), 4) == [b"", b""]


def test_markdown_blocks_join_to_the_same_bytes(monkeypatch):
    """A Markdown run cut into blocks of one row or a few numbers gives the same text as one block per table."""
    from attncli import engine, stages, views
    from attncli.render import markdown
    from attncli.scenario import load

    result = engine.run(load("llama-style"))
    shown = views.views(result, stages.STAGE_NAMES, [1, 2, 3, 4])
    whole = b"".join(markdown.run_markdown(result, shown, precision=4))
    for values in (1, 7):
        monkeypatch.setattr(markdown, "BLOCK_VALUES", values)
        assert b"".join(markdown.run_markdown(result, shown, precision=4)) == whole
