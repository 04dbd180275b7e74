"""The engine against a naive loop-based reference, on many random scenarios, and its invariants."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import arithmetic, engine
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text
from tests.reference import attention
from tests.strategies import divisor_of, scenarios


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_engine_agrees_with_naive_reference(doc):
    """Weights, head outputs and the final output match the loop implementation to 1e-9."""
    result = engine.run(from_text(json.dumps(doc)))
    expected = attention(
        doc["embeddings"], doc["W_Q"], doc["W_K"], doc["W_V"],
        heads=doc["heads"], divisor=divisor_of(doc), causal=doc["mask"] == "causal",
        b_Q=doc.get("b_Q"), b_K=doc.get("b_K"), b_V=doc.get("b_V"), W_O=doc.get("W_O"), b_O=doc.get("b_O"),
    )  # fmt: skip
    for h, head in enumerate(result.heads):
        np.testing.assert_allclose(head.weights, expected["weights"][h], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(head.output, expected["head_outputs"][h], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(result.output, expected["output"], rtol=1e-9, atol=1e-9)


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_weights_rows_sum_to_one_and_causal_hides_the_future(doc):
    """Every row of weights sums to 1; with a causal mask everything above the diagonal is 0."""
    result = engine.run(from_text(json.dumps(doc)))
    for head in result.heads:
        np.testing.assert_allclose(head.weights.sum(axis=1), 1.0, rtol=1e-12)
        assert (head.weights >= 0).all()
        if doc["mask"] == "causal":
            assert (np.triu(head.weights, k=1) == 0).all()
            assert (head.masked[np.triu_indices(len(doc["tokens"]), k=1)] == -np.inf).all()


@settings(max_examples=100, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_without_mask_permuting_tokens_permutes_the_output(doc, random):
    """Self-attention without a mask is permutation-equivariant."""
    doc["mask"] = "none"
    order = list(range(len(doc["tokens"])))
    random.shuffle(order)
    shuffled = dict(doc, embeddings=[doc["embeddings"][i] for i in order])
    original = engine.run(from_text(json.dumps(doc))).output
    permuted = engine.run(from_text(json.dumps(shuffled))).output
    np.testing.assert_allclose(permuted, original[order], rtol=1e-9, atol=1e-12)


@given(st.floats(min_value=1e3, max_value=1e6), st.integers(2, 6))
def test_huge_scores_stay_finite_and_agree_with_the_shifted_formula(magnitude, L):
    """Scores of ±1e4 and beyond give finite weights, with the row maximum as the shift."""
    doc = {
        "tokens": [f"w{i}" for i in range(L)],
        "embeddings": [[magnitude * (i + 1) / L] for i in range(L)] ,
        "W_Q": [[1.0]], "W_K": [[1.0]], "W_V": [[1.0]],
        "scale": "none",
    }  # fmt: skip
    head = engine.run(from_text(json.dumps(doc))).head(1)
    assert np.isfinite(head.weights).all() and np.isfinite(head.exp).all()
    np.testing.assert_array_equal(head.shift, head.scores.max(axis=1))
    expected = np.exp(head.scores - head.scores.max(axis=1, keepdims=True))
    np.testing.assert_allclose(head.weights, expected / expected.sum(axis=1, keepdims=True), rtol=1e-12)


def test_ordinary_scores_need_no_shift_and_extreme_ones_do():
    """A row's shift is 0 while its scores lie within ±700, else its maximum."""
    doc = {
        "tokens": ["a", "b", "c"],
        "embeddings": [[1.0], [20.0], [30.0]],
        "W_Q": [[1.0]], "W_K": [[1.0]], "W_V": [[1.0]],
        "scale": "none",
    }  # fmt: skip
    head = engine.run(from_text(json.dumps(doc))).head(1)
    # rows "a" (1, 20, 30) and "b" (20, 400, 600) need no shift; row "c" (30, 600, 900) does
    assert head.shift.tolist() == [0.0, 0.0, 900.0]
    assert head.exp[0].tolist() == [math.exp(1), math.exp(20), math.exp(30)]


@given(st.floats(min_value=0.0, max_value=40.0), st.integers(2, 6), st.booleans(), st.sampled_from([1.0, -1.0]))
def test_the_shift_is_row_shifts_on_either_path(magnitude, L, causal, sign):
    """Scores around ±700, hidden or seen: the shift and exp are row_shift's and e^(masked - shift), bit for bit."""
    doc = {
        "tokens": [f"w{i}" for i in range(L)],
        "embeddings": [[magnitude * (i + 1) / L] for i in range(L)],
        "W_Q": [[sign]], "W_K": [[1.0]], "W_V": [[1.0]],
        "scale": "none", "mask": "causal" if causal else "none",
    }  # fmt: skip
    head = engine.run(from_text(json.dumps(doc))).head(1)
    shift = arithmetic.row_shift(head.masked, head.visible)
    assert head.shift.tobytes() == shift.tobytes()
    assert head.exp.tobytes() == np.exp(head.masked - shift[:, None]).tobytes()


def test_scores_of_plus_minus_1e4_give_correct_weights():
    """The issue's own example: ±1e4 scores, a one-hot row, finite and exact."""
    doc = {"tokens": ["a", "b"], "embeddings": [[100.0], [-100.0]], "W_Q": [[1]], "W_K": [[1]], "W_V": [[1]], "scale": "none"}
    head = engine.run(from_text(json.dumps(doc))).head(1)
    assert head.scores.tolist() == [[1e4, -1e4], [-1e4, 1e4]]
    assert head.weights.tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_hand_rounded_output_does_not_depend_on_the_block_size(monkeypatch):
    """Rounded outputs are computed a block of rows at a time (bounded memory); any block size gives the same numbers."""
    rng = np.random.default_rng(0)
    doc = {"tokens": [f"t{i}" for i in range(50)], "embeddings": rng.standard_normal((50, 3)).tolist(), "mask": "causal"}
    scenario = from_text(json.dumps(doc))
    monkeypatch.setattr(arithmetic, "WEIGHTED_BLOCK", 10**9)
    whole = engine.run(scenario, round_steps=4).output
    monkeypatch.setattr(arithmetic, "WEIGHTED_BLOCK", 1)
    np.testing.assert_array_equal(engine.run(scenario, round_steps=4).output, whole)
    assert np.array_equal(whole, np.round(whole, 4))


def test_hand_rounding_that_leaves_a_row_without_weight_is_a_clear_error():
    """--round-steps 2 rounds e^-6 to 0.00: the row's sum is 0, which is refused with a line naming head and query."""
    import pytest

    from attncli.errors import AttnError

    scenario = from_text("tokens: [a, b]\nQ: [[1], [1]]\nK: [[-6], [0]]\nV: [[1], [2]]\nscale: none\nmask: causal\n")
    engine.run(scenario)  # exact arithmetic is fine
    with pytest.raises(AttnError, match=r"head 1, query 1 \('a'\): every exponential of its row rounds to 0 at 2 decimals"):
        engine.run(scenario, round_steps=2)


def test_huge_finite_numbers_are_written_in_scientific_notation():
    """A finite number beyond 10¹⁵ is 1.0000e+100, not a hundred digits of float noise; smaller ones stay fixed."""
    from attncli.document.numbers import fixed, smart

    assert fixed(1e100, 4) == "1.0000e+100" and smart(-2e20, 2) == "-2.00e+20"
    assert fixed(123456789012.5, 1) == "123456789012.5" and smart(1e14, 3) == "100000000000000"


@settings(max_examples=60, deadline=None)
@given(scenarios(), st.data(), st.sampled_from([None, 2]))
def test_heads_kept_are_bit_for_bit_and_the_others_hold_no_row(doc, data, round_steps):
    """run(heads=[h]): head h's stages, the concatenation and the output are every bit of the full run's; the other heads keep no row."""
    s = from_text(json.dumps(doc))
    h = data.draw(st.integers(1, s.heads))
    try:
        full = engine.run(s, round_steps=round_steps)
    except AttnError as error:  # hand rounding that empties a row's sum: the same error, whichever heads are kept
        with pytest.raises(AttnError) as lean_error:
            engine.run(s, round_steps=round_steps, heads=[h])
        assert str(lean_error.value) == str(error)
        return
    lean = engine.run(s, round_steps=round_steps, heads=[h])
    for field in ("scores", "scaled", "masked", "exp", "weights", "shift", "exp_sum", "output", "Q", "K", "V"):
        np.testing.assert_array_equal(getattr(lean.head(h), field), getattr(full.head(h), field), err_msg=field)
    np.testing.assert_array_equal(lean.concat, full.concat)
    np.testing.assert_array_equal(lean.output, full.output)
    assert lean.kept == (h,) and lean.holds(h) and full.holds(h) and full.kept is None
    for other in set(range(1, s.heads + 1)) - {h}:
        assert not lean.holds(other) and lean.head(other).weights.shape == (0, s.L)
