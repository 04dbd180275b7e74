"""Decoding with a KV cache: every step is row t of the full causal run, and the cache holds what the steps read."""

import json

import numpy as np
import pytest
from hypothesis import assume, given, settings

from attncli.core import engine
from attncli.core.decode import decode
from attncli.errors import AttnError
from attncli.sources import builtin
from attncli.sources.yaml_scenario import from_text, load
from tests import reference
from tests.strategies import causal_documents


def scenario_of(document: str):
    try:
        return from_text(document)
    except AttnError as error:  # padding can leave a query with no key at all
        assume("would see no key" not in str(error))
        raise


def assert_steps_match_the_reference(scenario, document: dict) -> None:
    """Every step of every head against the loop reference, computed from the document alone.

    The step's q, k and v, its cached K and V rows, its weights over the cache and its output are
    the reference's row t (to 1e-9), and the cache holds every key query t sees; the keys it
    shows as visible are exactly those.
    """
    expected = reference.document_attention(document)
    mask = reference.mask_of(document)
    L = scenario.L

    def close(actual, wanted) -> None:
        np.testing.assert_allclose(actual, np.array(wanted, dtype=np.float64).reshape(np.shape(actual)), rtol=1e-9, atol=1e-9)

    for h in range(1, scenario.heads + 1):
        Q, K, V = expected["Q"][h - 1], expected["K"][h - 1], expected["V"][h - 1]
        weights, outputs = expected["weights"][h - 1], expected["head_outputs"][h - 1]
        for step in decode(scenario, h).steps:
            t, cache = step.position, step.cache.tolist()
            close(step.q, Q[t - 1])
            close(step.k, K[t - 1])
            close(step.v, V[t - 1])
            close(step.K, [K[j - 1] for j in cache])
            close(step.V, [V[j - 1] for j in cache])
            close(step.weights, [weights[t - 1][j - 1] for j in cache])
            close(step.output, outputs[t - 1])
            seen = [j for j in range(1, L + 1) if reference.sees(t, j, mask)]
            assert set(seen) <= set(cache), (t, seen, cache)
            assert [j for j, v in zip(cache, step.visible.tolist()) if v] == seen


@settings(max_examples=200, deadline=None)
@given(causal_documents())
def test_every_step_agrees_with_the_naive_reference(document):
    """Random causal scenarios with RoPE, GQA, windows, sinks, padding, bias and ALiBi: each step is the reference's row t."""
    assert_steps_match_the_reference(scenario_of(document), json.loads(document))


@settings(max_examples=200, deadline=None)
@given(causal_documents())
def test_every_step_recomputed_from_its_cache_alone(document):
    """q·Kᵀ/s + bias over the cache, softmax, ·V gives the step's output to 1e-12, and no key outside the cache has weight."""
    scenario = scenario_of(document)
    result = engine.run(scenario)
    L = scenario.L
    for h in range(1, scenario.heads + 1):
        bias = engine.score_bias(scenario, h, L, L)
        full = result.head(h)
        for step in decode(result, h).steps:
            t, columns = step.position, step.cache - 1
            logits = (step.K @ step.q) / scenario.scale.divisor  # (c,)
            if bias is not None:
                logits = logits + bias[t - 1, columns]
            np.testing.assert_allclose(logits, step.logits, rtol=1e-12, atol=1e-12)
            seen = np.where(step.visible, logits, -np.inf)
            exp = np.exp(seen - seen.max())
            weights = exp / exp.sum()
            scale = weights @ np.abs(step.V)
            assert np.all(np.abs(weights @ step.V - step.output) <= 1e-12 * scale + 1e-321)  # + subnormal steps
            outside = np.setdiff1d(np.arange(L), columns)
            assert not full.visible[t - 1, outside].any() and np.all(full.weights[t - 1, outside] == 0.0)


def test_sliding_window_drops_the_keys_outside_the_window():
    """sliding-window (window 2, 1 sink): step 5 caches 1, 3, 4, 5 and drops 2; the sink is never dropped."""
    steps = decode(load("sliding-window"), 1).steps
    assert [list(s.cache) for s in steps[:5]] == [[1], [1, 2], [1, 2, 3], [1, 2, 3, 4], [1, 3, 4, 5]]
    assert [list(s.dropped) for s in steps] == [[], [], [], [], [2], [3], [4], [5], [6]]
    assert all(len(s.cache) <= 4 and s.cache[0] == 1 and s.visible.all() for s in steps)


def test_padding_joins_and_leaves_at_once():
    """Causal with padding at 2: key 2 is dropped at its own step and never read."""
    document = {"tokens": ["a", "b", "c"], "embeddings": [[1, 0], [0, 1], [1, 1]], "mask": {"causal": True, "padding": [2]}}
    steps = decode(from_text(json.dumps(document)), 1).steps
    assert [list(s.cache) for s in steps] == [[1], [1], [1, 3]]
    assert [list(s.dropped) for s in steps] == [[], [2], []]


def test_explicit_mask_keeps_a_key_that_a_later_query_reads():
    """Query 3 skips key 1 but query 4 reads it: at step 3 key 1 stays cached, not visible, with weight 0."""
    mask = [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [1, 0, 0, 1]]
    document = {"tokens": list("abcd"), "embeddings": [[1, 0], [0, 1], [1, 1], [2, 0]], "mask": mask}
    steps = decode(from_text(json.dumps(document)), 1).steps
    assert list(steps[2].cache) == [1, 2, 3] and list(steps[2].visible) == [False, True, True]
    assert steps[2].weights[0] == 0.0
    assert list(steps[3].cache) == [1, 4] and list(steps[3].dropped) == [2, 3]


def test_grouped_heads_read_their_key_value_heads_cache():
    """llama-style: heads 1, 2 read key/value head 1's cache and heads 3, 4 head 2's, the same rows within a group."""
    result = engine.run(load("llama-style"))
    decoded = [decode(result, h) for h in range(1, 5)]
    assert [d.kv_head for d in decoded] == [1, 1, 2, 2]
    last = [d.steps[-1] for d in decoded]
    assert np.array_equal(last[0].K, last[1].K) and np.array_equal(last[2].V, last[3].V)
    assert not np.array_equal(last[0].K, last[2].K)


def test_every_builtin_causal_scenario_decodes():
    """Each built-in causal self-attention scenario decodes on every head, every step the reference's row t."""
    decoded = []
    for name in builtin.names():
        scenario = load(name)
        visible = scenario.mask.visible(scenario.L, scenario.L_k)
        if scenario.cross or np.triu(visible, 1).any():
            continue
        assert scenario.mask.causal and scenario.mask.matrix is None
        assert_steps_match_the_reference(scenario, reference.scenario_document(scenario, causal=True))
        decoded.append(name)
    assert {"journey-causal", "multihead", "llama-style", "sliding-window", "alibi"} <= set(decoded)


@pytest.mark.parametrize(
    ("name", "head", "message"),
    [
        ("cat", 1, "query 1 sees key 2"),
        ("translation", 1, "self-attention"),
        ("journey-causal", 9, "head 9 does not exist"),
    ],
)
def test_decode_refuses_what_is_not_causal_self_attention(name, head, message):
    """A mask that lets a query see later keys, cross-attention, or a missing head is an AttnError saying so."""
    with pytest.raises(AttnError, match=message):
        decode(load(name), head)


def test_steps_are_frozen():
    """Steps are immutable tuples with read-only arrays."""
    step = decode(load("journey-causal"), 1).steps[3]
    for array in (step.cache, step.K, step.V, step.weights, step.logits, step.output, step.q):
        with pytest.raises(ValueError):
            array[0] = 0
    with pytest.raises(AttributeError):
        step.position = 1  # type: ignore[misc]
