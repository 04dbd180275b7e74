"""Reading scenario files: words stay words, every form of the keys, defaults."""

import numpy as np
import pytest

from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text, load


def test_yaml_1_1_words_stay_the_words_written():
    """on, off, yes, no, null, true and 2024 are tokens and embedding keys, not booleans or numbers."""
    scenario = from_text(
        """
tokens: [on, off, yes, no, null, true, 2024, 1.5, ~x]
embeddings:
  on: [1]
  off: [2]
  yes: [3]
  no: [4]
  null: [5]
  true: [6]
  2024: [7]
  1.5: [8]
  ~x: [9]
"""
    )
    assert scenario.tokens == ("on", "off", "yes", "no", "null", "true", "2024", "1.5", "~x")
    assert scenario.X[:, 0].tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9]


def test_sentence_is_split_on_whitespace_and_punctuation_stripped():
    """'The cat sat on the mat.' gives six words, "mat" without its full stop."""
    scenario = from_text('sentence: "The cat, sat on (the) mat."\nembeddings: {the: [1], cat: [2], sat: [3], on: [4], mat: [5]}')
    assert scenario.tokens == ("The", "cat", "sat", "on", "the", "mat")
    assert scenario.X[:, 0].tolist() == [1, 2, 3, 4, 1, 5]


def test_case_sensitive_scenarios_keep_The_and_the_apart():
    """With case_sensitive: true, "The" and "the" look up different embeddings."""
    scenario = from_text("case_sensitive: true\ntokens: [The, the]\nembeddings: {The: [1], the: [2]}")
    assert scenario.X[:, 0].tolist() == [1, 2]
    with pytest.raises(AttnError, match="no embedding for 'the'"):
        from_text("case_sensitive: true\ntokens: [The, the]\nembeddings: {The: [1]}")


def test_embeddings_as_rows_in_token_order():
    """A list of rows is the input matrix X itself."""
    scenario = from_text("tokens: [a, b]\nembeddings: [[1, 2], [3, 4]]")
    assert scenario.X.tolist() == [[1, 2], [3, 4]]


def test_defaults_are_identity_weights_sqrt_dk_no_mask_precision_4():
    """Omitted keys take the documented defaults; name is the file stem."""
    scenario = from_text("tokens: [a, b]\nembeddings: [[1, 2], [3, 4]]", stem="mine")
    assert scenario.name == "mine"
    np.testing.assert_array_equal(scenario.W_Q, np.eye(2))
    assert (scenario.heads, scenario.mask.name, scenario.precision) == (1, "none", 4)
    assert scenario.scale.mode == "sqrt_dk" and scenario.scale.divisor == pytest.approx(2**0.5)


def test_per_head_matrices_are_placed_side_by_side():
    """A list of H matrices d_model × d_k equals one d_model × (H·d_k) matrix."""
    per_head = from_text(
        "tokens: [a]\nembeddings: [[1, 2]]\nheads: 2\nW_Q: [[[1], [2]], [[3], [4]]]\nW_K: [[1, 3], [2, 4]]\nW_V: identity"
    )
    np.testing.assert_array_equal(per_head.W_Q, [[1, 3], [2, 4]])
    np.testing.assert_array_equal(per_head.W_Q, per_head.W_K)
    assert (per_head.d_k, per_head.d_v) == (1, 1)


def test_scale_number_and_none():
    """scale: 2.5 divides by 2.5; scale: none divides by 1."""
    assert from_text("tokens: [a]\nembeddings: [[1]]\nscale: 2.5").scale.divisor == 2.5
    none = from_text("tokens: [a]\nembeddings: [[1]]\nscale: none").scale
    assert (none.mode, none.divisor) == ("none", 1.0)


def test_matrices_are_read_only():
    """The Scenario is immutable, its arrays included."""
    scenario = load("cat")
    with pytest.raises(ValueError):
        scenario.X[0, 0] = 5


def test_labels_number_repeated_tokens():
    """A token that repeats gets its 1-based position in labels; "The" and "the" are told apart by case."""
    assert load("cat").labels() == ["The", "cat", "sat", "on", "the", "mat"]
    assert load("train-station").labels()[:4] == ["the (1)", "train", "left", "the (4)"]
