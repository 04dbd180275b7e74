"""Decoding with a KV cache: every step is row t of the full causal run, and the cache holds what the steps read."""

import json

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from attncli.core import engine
from attncli.core.decode import decode
from attncli.errors import AttnError
from attncli.sources import builtin
from attncli.sources.yaml_scenario import from_text, load
from tests.test_variants import matrix


@st.composite
def causal_documents(draw):
    """A random causal self-attention scenario with any mix of RoPE, GQA, window, sinks, padding, bias and ALiBi."""
    L = draw(st.integers(1, 7))
    G = draw(st.integers(1, 2))
    heads = G * draw(st.integers(1, 2))
    d_k, d_v = 2 * draw(st.integers(1, 2)), draw(st.integers(1, 3))
    doc: dict = {"tokens": [f"w{i}" for i in range(L)], "heads": heads, "kv_heads": G}
    if draw(st.booleans()):
        doc["Q"], doc["K"], doc["V"] = draw(matrix(L, heads * d_k)), draw(matrix(L, G * d_k)), draw(matrix(L, G * d_v))
    else:
        d_model = draw(st.integers(1, 4))
        doc["embeddings"] = draw(matrix(L, d_model))
        doc["W_Q"], doc["W_K"], doc["W_V"] = (
            draw(matrix(d_model, heads * d_k)),
            draw(matrix(d_model, G * d_k)),
            draw(matrix(d_model, G * d_v)),
        )
    if draw(st.booleans()):
        mask: object = {"causal": True}
        if draw(st.booleans()):
            mask["window"], mask["sinks"] = draw(st.integers(0, 3)), draw(st.integers(0, L))  # type: ignore[index]
        if draw(st.booleans()):
            mask["padding"] = draw(st.lists(st.integers(1, L), max_size=2, unique=True))  # type: ignore[index]
    else:  # an explicit lower-triangular matrix, with the diagonal
        rows = draw(st.lists(st.lists(st.integers(0, 1), min_size=L, max_size=L), min_size=L, max_size=L))
        mask = [[1 if j == i else (row[j] if j < i else 0) for j in range(L)] for i, row in enumerate(rows)]
    doc["mask"] = mask
    if draw(st.booleans()):
        doc["bias"] = draw(matrix(L, L))
    if draw(st.booleans()):
        doc["alibi"] = True
    if draw(st.booleans()):
        doc["rope"] = True if draw(st.booleans()) else {"theta": 100, "style": draw(st.sampled_from(["half", "interleaved"]))}
    doc["scale"] = draw(st.sampled_from(["sqrt_dk", "none", 2.0]))
    return json.dumps(doc)


def scenario_of(document: str):
    try:
        return from_text(document)
    except AttnError as error:  # padding can leave a query with no key at all
        assume("would see no key" not in str(error))
        raise


@settings(max_examples=200, deadline=None)
@given(causal_documents(), st.sampled_from([None, 2]))
def test_every_step_is_row_t_of_the_full_run_bit_for_bit(document, round_steps):
    """For every head and step t, the step's output is row t of the full causal run's head output, bit for bit."""
    scenario = scenario_of(document)
    try:
        full = engine.run(scenario, round_steps=round_steps)
    except AttnError as error:  # by hand at 2 decimals a row's exponentials can all round to 0 (e^-6 = 0.00)
        assume("rounds to 0" not in str(error))
        raise
    for h in range(1, scenario.heads + 1):
        steps = decode(full if round_steps else scenario, h).steps
        assert len(steps) == scenario.L
        for step in steps:
            assert np.array_equal(step.output, full.head(h).output[step.position - 1])


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


@settings(max_examples=100, deadline=None)
@given(causal_documents())
def test_the_cache_keeps_each_key_as_its_step_made_it(document):
    """A cached row is the k and v its own step brought, unchanged; under RoPE that k is turned by p = t − 1 once."""
    scenario = scenario_of(document)
    result = engine.run(scenario)
    for h in range(1, scenario.heads + 1):
        steps = decode(result, h).steps
        for step in steps:
            for row, j in enumerate(step.cache):
                assert np.array_equal(step.K[row], steps[j - 1].k) and np.array_equal(step.V[row], steps[j - 1].v)
            if scenario.rope is not None:
                raw = result.head(h).K[step.position - 1 : step.position]  # (1, d_k)
                assert np.array_equal(step.k, scenario.rope.rotate(raw, np.array([step.position - 1]))[0])


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
    """Each built-in causal self-attention scenario decodes on every head, every step equal to its run row."""
    decoded = []
    for name in builtin.names():
        scenario = load(name)
        visible = scenario.mask.visible(scenario.L, scenario.L_k)
        if scenario.cross or np.triu(visible, 1).any():
            continue
        result = engine.run(scenario)
        for h in range(1, scenario.heads + 1):
            for step in decode(result, h).steps:
                assert np.array_equal(step.output, result.head(h).output[step.position - 1])
        decoded.append(name)
    assert {"journey-causal", "multihead", "llama-style", "sliding-window"} <= set(decoded)


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
