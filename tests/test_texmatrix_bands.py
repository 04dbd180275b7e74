"""texmatrix.iter_blocks with `bands`: a band's blocks as one text, byte for byte the blocks one after another."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.formats import texmatrix
from tests.test_fixedtext import WORDS, math_read, reference_blocks


def _data(seed: int, n_rows: int, n_cols: int, scale: float, specials: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((n_rows, n_cols)) * scale
    data[rng.random((n_rows, n_cols)) < 0.3] = -np.inf
    if specials:  # +∞ and NaN beside the -∞ of a mask: a column's widest number is found the long way
        data[rng.random((n_rows, n_cols)) < 0.1] = np.inf
        data[rng.random((n_rows, n_cols)) < 0.1] = np.nan
    return data


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 9), st.integers(1, 9), st.integers(0, 2), st.sampled_from([None, 2, 4]), st.sampled_from([None, 1, 3, 16]),
       st.booleans(), st.booleans(), st.booleans(), st.integers(0, 2**32 - 1))  # fmt: skip
def test_bands_are_the_blocks_one_after_another(n_rows, n_cols, extras, max_rows, max_cols, labelled_rows, labelled_cols, specials, seed):
    data = _data(seed, n_rows, n_cols, 10.0, specials)
    extra = [(["Σ", "m"][i], np.arange(n_rows, dtype=np.float64)) for i in range(extras)]
    kwargs = dict(precision=3, rows=[WORDS[i % len(WORDS)] for i in range(n_rows)] if labelled_rows else None,
                  cols=[WORDS[i % len(WORDS)] for i in range(n_cols)] if labelled_cols else None, extra=extra,
                  max_rows=max_rows, max_cols=max_cols, before=b"<", after=b">\n")  # fmt: skip
    blocks = list(texmatrix.iter_blocks("S", data, **kwargs))
    bands = list(texmatrix.iter_blocks("S", data, bands=True, **kwargs))
    assert b"".join(bands) == b"".join(blocks)
    assert len(bands) == -(-max(n_rows, 1) // (max_rows or max(n_rows, 1)))  # one text a band of rows
    assert len(blocks) == len(bands) * -(-max(n_cols, 1) // (max_cols or max(n_cols, 1)))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.sampled_from([None, 3]), st.booleans(), st.integers(0, 2**32 - 1))
def test_widest_numbers_under_the_labels_with_every_kind_of_non_finite_number(n_rows, n_cols, max_cols, specials, seed):
    """The header's widest numbers, found the short way (a mask's -∞ only) or the long way (+∞ and NaN too), as written one at a time."""
    data = _data(seed, n_rows, n_cols, 1e3, specials)
    kwargs = dict(precision=2, rows=[f"t{i}" for i in range(n_rows)], cols=[f"t{i}" for i in range(n_cols)], max_cols=max_cols)
    assert list(map(math_read, texmatrix.matrix_blocks("S", data, **kwargs))) == list(map(math_read, reference_blocks("S", data, **kwargs)))
