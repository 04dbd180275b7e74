"""The numbers the seed articles print, reproduced by the built-in scenarios."""

import numpy as np
import pytest

from attncli.core import engine
from attncli.sources.yaml_scenario import load


def test_cat_scores_for_cat_match_seed_001():
    """Seed 001's 'Summary of Scores' for the query "cat": 1, 0, 1, 0, 1, 0."""
    result = engine.run(load("cat"))
    np.testing.assert_array_equal(result.head(1).scores[1], [1, 0, 1, 0, 1, 0])


def test_cat_weights_and_output_are_exact():
    """Exact arithmetic gives weights e/(3e+3) and 1/(3e+3), and output [1.0644, 0.3977] for "cat"."""
    result = engine.run(load("cat"))
    e = np.e
    big, small = e / (3 * e + 3), 1 / (3 * e + 3)
    np.testing.assert_allclose(result.head(1).weights[1], [big, small, big, small, big, small], rtol=1e-15)
    assert np.round(result.head(1).weights[1], 3).tolist() == [0.244, 0.090, 0.244, 0.090, 0.244, 0.090]
    # output = Σ α_j v_j with v = [1,1], [1,-1], [2,0], [-1,1], [1,1], [1,-1]
    np.testing.assert_allclose(result.output[1], [4 * big + small, 2 * big - small], rtol=1e-15)
    assert np.round(result.output[1], 4).tolist() == [1.0644, 0.3977]


def test_cat_hand_rounded_chain_matches_seed_001_digit_for_digit():
    """With every step rounded to 3 decimals, the article's own numbers come out, 1.066 included."""
    result = engine.run(load("cat"), round_steps=3)
    head = result.head(1)
    assert head.exp[1].tolist() == [2.718, 1.0, 2.718, 1.0, 2.718, 1.0]
    assert head.exp_sum[1] == 11.154
    assert head.weights[1].tolist() == [0.244, 0.090, 0.244, 0.090, 0.244, 0.090]
    assert result.output[1].tolist() == [1.066, 0.398]
    assert result.exact is not None
    assert np.round(result.exact.output[1], 3).tolist() == [1.064, 0.398]


# Seed 003 prints these tensors (PyTorch, 4 decimals).
JOURNEY_CONTEXT = [
    [0.2996, 0.8053], [0.3061, 0.8210], [0.3058, 0.8203],
    [0.2948, 0.7939], [0.2927, 0.7891], [0.2990, 0.8040],
]  # fmt: skip
JOURNEY_WEIGHTS = [
    [0.1551, 0.2104, 0.2059, 0.1413, 0.1074, 0.1799],
    [0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820],
    [0.1503, 0.2256, 0.2192, 0.1315, 0.0914, 0.1819],
    [0.1591, 0.1994, 0.1962, 0.1477, 0.1206, 0.1769],
    [0.1610, 0.1949, 0.1923, 0.1501, 0.1265, 0.1752],
    [0.1557, 0.2092, 0.2048, 0.1419, 0.1089, 0.1794],
]  # fmt: skip
JOURNEY_CAUSAL_WEIGHTS = [
    [1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.3986, 0.6014, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.2526, 0.3791, 0.3683, 0.0000, 0.0000, 0.0000],
    [0.2265, 0.2839, 0.2794, 0.2103, 0.0000, 0.0000],
    [0.1952, 0.2363, 0.2331, 0.1820, 0.1534, 0.0000],
    [0.1557, 0.2092, 0.2048, 0.1419, 0.1089, 0.1794],
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "attribute", "expected"),
    [
        ("journey", "output", JOURNEY_CONTEXT),
        ("journey", "weights", JOURNEY_WEIGHTS),
        ("journey-causal", "weights", JOURNEY_CAUSAL_WEIGHTS),
    ],
)
def test_journey_matches_seed_003_printed_tensors(name, attribute, expected):
    """Every tensor seed 003 prints, at its 4 decimals."""
    result = engine.run(load(name))
    actual = result.output if attribute == "output" else result.head(1).weights
    np.testing.assert_allclose(actual, expected, atol=0.00005 + 1e-12)


def test_journey_simple_matches_raschka_chapter_3():
    """Simplified attention: softmax(X·Xᵀ)·X, row 2 as printed in LLMs-from-scratch ch. 3.3."""
    result = engine.run(load("journey-simple"))
    np.testing.assert_allclose(
        result.head(1).weights[1], [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581], atol=0.00005
    )
    np.testing.assert_allclose(result.output[1], [0.4419, 0.6515, 0.5683], atol=0.00005)


def test_train_and_station_attend_to_each_other_most():
    """Seed 004: "train" pays most attention to "station", and "station" to "train"."""
    scenario = load("train-station")
    weights = engine.run(scenario).head(1).weights
    tokens = list(scenario.tokens)
    train, station = tokens.index("train"), tokens.index("station")
    assert weights[train].argmax() == station
    assert weights[station].argmax() == train


def test_multihead_has_two_heads_and_a_mixed_output():
    """The multihead scenario: 2 heads of d_k = 2 over d_model = 4, concat then W_O."""
    scenario = load("multihead")
    result = engine.run(scenario)
    assert (scenario.heads, scenario.d_model, scenario.d_k, scenario.d_out) == (2, 4, 2, 4)
    np.testing.assert_allclose(result.output, result.concat @ scenario.W_O)
    assert not np.allclose(result.head(1).weights, result.head(2).weights)
