"""Hypothesis strategies the tests share: random scenarios, matrices, logits and sentences.

One home, so that a test module does not import another test module for its strategies (and
run that module's tests twice under some collectors), and so that a new variant is added to
the random scenarios once.
"""

from __future__ import annotations

from hypothesis import strategies as st


def sentences(max_words: int = 12):
    """Lists of 1..max_words distinct plain words w0, w1, …: the tokens of a random scenario."""
    return st.integers(1, max_words).map(lambda n: [f"w{i}" for i in range(n)])
