"""Markdown and LaTeX write every number of a matrix as `numbers.fixed` does, whole rows at a time."""

import numpy as np

from attncli.numbers import fixed
from attncli.render import texmatrix


def test_row_numbers_write_huge_numbers_and_negative_zero_as_fixed_does():
    """A row with 1e15, 1e20, -0.0 or a negative number that rounds to zero reads exactly as numbers.fixed writes each."""
    row = np.array([1e15, -1e20, -0.0, -0.00001, 0.5, 123456789.125])
    assert texmatrix.row_numbers(row, 4, fixed) == [fixed(float(x), 4) for x in row]
    assert texmatrix.row_numbers(row, 2) == [texmatrix.number(float(x), 2) for x in row]
