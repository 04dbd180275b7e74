"""Every attention variant against the naive reference on random scenarios, and the variants' own rules."""

import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings

from attncli.core import engine
from attncli.core.variants import Mask, Rope, alibi_slopes
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text
from tests import reference
from tests.reference import document_attention
from tests.strategies import variant_scenarios


@settings(max_examples=300, deadline=None)
@given(variant_scenarios())
def test_every_variant_agrees_with_the_naive_reference(case):
    """Weights and head outputs of the engine match the loop reference with every variant mixed in."""
    doc, mask = case
    try:
        scenario = from_text(json.dumps(doc))
    except AttnError as error:
        assume("would see no key" not in str(error))
        raise
    result = engine.run(scenario)
    expected = document_attention(doc, mask)
    for h, head in enumerate(result.heads):
        np.testing.assert_allclose(head.weights, expected["weights"][h], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(head.output, expected["head_outputs"][h], rtol=1e-9, atol=1e-9)


def test_window_sinks_and_padding_follow_the_documented_rules():
    """window W: |i − j| ≤ W; with causal, keys i−W … i; sinks always seen (causal still applies); padding never."""
    visible = Mask(causal=True, window=1, sinks=1, padding=(3,)).visible(5, 5)
    expected = np.array([
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 0, 0, 1, 0],
        [1, 0, 0, 1, 1],
    ], dtype=bool)  # fmt: skip
    np.testing.assert_array_equal(visible, expected)
    assert Mask(window=1).visible(3, 3).tolist() == [[True, True, False], [True, True, True], [False, True, True]]


def test_rope_styles_pair_the_documented_coordinates():
    """half pairs (i, i + d/2); interleaved pairs (2i, 2i + 1); position 0 leaves a vector as it is."""
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    np.testing.assert_array_equal(Rope().rotate(x, np.array([0])), x)
    half = Rope(theta=10000).rotate(x, np.array([1]))[0]
    assert half[0] == pytest.approx(1 * math.cos(1) - 3 * math.sin(1)) and half[2] == pytest.approx(3 * math.cos(1) + 1 * math.sin(1))
    inter = Rope(theta=10000, style="interleaved").rotate(x, np.array([1]))[0]
    assert inter[0] == pytest.approx(1 * math.cos(1) - 2 * math.sin(1)) and inter[1] == pytest.approx(2 * math.cos(1) + 1 * math.sin(1))


def test_rope_scores_depend_only_on_the_distance():
    """The same q and k placed at (i, j) and at (i + t, j + t) give the same rotated dot product."""
    rope = Rope()
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((1, 8)), rng.standard_normal((1, 8))
    near = rope.rotate(q, np.array([5])) @ rope.rotate(k, np.array([2])).T
    far = rope.rotate(q, np.array([105])) @ rope.rotate(k, np.array([102])).T
    assert near[0, 0] == pytest.approx(far[0, 0], rel=1e-12)


def test_alibi_slopes_are_the_papers():
    """8 heads: 1/2 … 1/256; 4 heads: 1/4 … 1/256 (powers of 2^-8/n); 6 heads: those of 4, then every other of 8."""
    assert alibi_slopes(8) == tuple(2.0 ** -k for k in range(1, 9))
    assert alibi_slopes(4) == (2**-2, 2**-4, 2**-6, 2**-8)
    assert alibi_slopes(6) == (2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3)
    assert [reference.alibi_slopes(n) for n in (8, 4, 6)] == [list(alibi_slopes(n)) for n in (8, 4, 6)]  # the reference's own


def test_grouped_heads_share_their_key_value_head():
    """With 4 query heads and 2 key/value heads, heads 1–2 read kv head 1 and heads 3–4 kv head 2 (the same K)."""
    doc = {
        "tokens": ["a", "b"], "embeddings": [[1, 0], [0, 1]], "heads": 4, "kv_heads": 2,
        "W_Q": [[1, 0, 0, 1, 1, 1, 0, 0], [0, 1, 1, 0, 0, 0, 1, 1]], "W_K": [[1, 0, 0, 1], [0, 1, 1, 0]], "W_V": "identity",
    }  # fmt: skip
    doc["W_V"] = [[1, 0], [0, 1]]
    result = engine.run(from_text(json.dumps(doc)))
    assert [h.kv_head for h in result.heads] == [1, 1, 2, 2]
    assert result.head(1).K is result.head(2).K and result.head(3).K is result.head(4).K
