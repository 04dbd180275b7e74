"""The online softmax and the tiled computation against ordinary attention, a published example, and their invariants."""

import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from attncli.core import engine
from attncli.core.online import OnlineRow, online_row, peak_memory, tiled
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text
from tests.strategies import logits, scenario_documents, variant_scenarios

EXACT = 1e-12  # relative to Σ_j w_j·|v_j|, the size of the terms of each output component
SUBNORMAL = 1e-321  # below 2.2e-308 float64 steps are absolute (5e-324), so subnormal values get this much slack


def ordinary(masked: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """softmax(masked)·V the ordinary way (shift by the row maximum), and Σ_j w_j·|v_j| for the tolerance."""
    masked = np.atleast_2d(masked)
    exp = np.exp(masked - masked.max(axis=1, keepdims=True))
    weights = exp / exp.sum(axis=1, keepdims=True)
    return weights @ V, weights @ np.abs(V)


def assert_exact(actual: np.ndarray, expected: np.ndarray, scale: np.ndarray) -> None:
    error = np.abs(actual - expected)
    assert np.all(error <= EXACT * scale + SUBNORMAL), np.max(error)


@settings(max_examples=300, deadline=None)
@given(logits(rows=1), st.integers(1, 30))
def test_online_row_equals_ordinary_softmax(case, block_size):
    """For any keys, block size, mask, bias and score range, o / l equals softmax(scores)·V to 1e-12."""
    masked, V = case
    row = online_row(masked[0], masked[0] > -np.inf, V, block_size=block_size)
    expected, scale = ordinary(masked, V)
    assert_exact(row.output, expected[0], scale[0])
    assert len(row.blocks) == math.ceil(V.shape[0] / block_size)


@settings(max_examples=200, deadline=None)
@given(logits(), st.integers(1, 12), st.integers(1, 12))
def test_tiled_equals_ordinary_softmax(case, query_block_size, block_size):
    """The tiled output equals softmax(masked)·V row for row to 1e-12, for square and cross-attention shapes."""
    masked, V = case
    tiling = tiled(masked, V, block_size=block_size, query_block_size=query_block_size, d_k=4)
    expected, scale = ordinary(masked, V)
    assert_exact(tiling.output, expected, scale)


@settings(max_examples=150, deadline=None)
@given(logits(), st.integers(1, 12), st.integers(1, 12), st.sampled_from([None, 2, 3]))
def test_tiled_rows_are_the_online_rows_bit_for_bit(case, query_block_size, block_size, round_to):
    """Each tiled row, and its running maximum and sum after every tile, is exactly the one-query recurrence's."""
    masked, V = case
    tiling = tiled(masked, V, block_size=block_size, query_block_size=query_block_size, d_k=4, round_to=round_to)
    rows = [online_row(m, m > -np.inf, V, block_size=block_size, round_to=round_to) for m in masked]
    for i, row in enumerate(rows):
        assert np.array_equal(tiling.output[i], row.output)
    for tile in tiling.tiles:
        block = tile.key_block - 1
        for r, query in enumerate(tile.queries):
            assert tile.max[r] == rows[query - 1].blocks[block].max
            assert tile.sum[r] == rows[query - 1].blocks[block].sum
            assert tile.rescale[r] == rows[query - 1].blocks[block].rescale


@settings(max_examples=100, deadline=None)
@given(scenario_documents(), st.integers(1, 8))
def test_online_rows_reproduce_the_engine(document, block_size):
    """Every query of every head of a random scenario: the online output equals the engine's exact output to 1e-12."""
    result = engine.run(from_text(document))
    for head in result.heads:
        # the size of what is summed, with a floor at the largest value: values that underflow to
        # subnormals (a random input near 1e-300) carry no relative precision to compare
        scale = np.maximum(head.weights @ np.abs(head.V), EXACT * np.abs(head.V).max(initial=0.0))
        for i in range(head.masked.shape[0]):
            row = online_row(head.masked[i], head.visible[i], head.V, block_size=block_size)
            assert_exact(row.output, head.output[i], scale[i])


@settings(max_examples=150, deadline=None)
@given(variant_scenarios(), st.integers(1, 7), st.integers(1, 7))
def test_online_and_tiled_reproduce_the_engine_with_every_variant(case, query_block_size, block_size):
    """Cross-attention, GQA, windows, sinks, padding, biases, ALiBi, RoPE: online rows and tiles give the engine's output to 1e-12."""
    doc, _ = case
    try:
        scenario = from_text(json.dumps(doc))
    except AttnError as error:
        assume("would see no key" not in str(error))
        raise
    for head in engine.run(scenario).heads:
        scale = head.weights @ np.abs(head.V)  # (L_q, d_v)
        tiling = tiled(head.masked, head.V, block_size=block_size, query_block_size=query_block_size, d_k=scenario.d_k)
        assert_exact(tiling.output, head.output, scale)
        for i in range(head.masked.shape[0]):
            row = online_row(head.logits[i], head.visible[i], head.V, block_size=block_size)
            assert np.array_equal(row.output, tiling.output[i])


@settings(max_examples=100, deadline=None)
@given(logits(rows=1, spread=2000.0), st.integers(1, 8))
def test_no_overflow_where_plain_exponentials_overflow(case, block_size):
    """Scores of ±1000 and beyond: e^x overflows, the recurrence raises no floating-point error and stays exact."""
    masked, V = case
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        row = online_row(masked[0], masked[0] > -np.inf, V, block_size=block_size)
        tiling = tiled(masked, V, block_size=block_size, d_k=1)
    expected, scale = ordinary(masked, V)
    assert_exact(row.output, expected[0], scale[0])
    assert np.array_equal(tiling.output[0], row.output)


def test_naive_exponentials_overflow_on_the_large_scores():
    """The case the recurrence is built for: e^1000 is inf, so softmax without a shift gives nan; online gives the answer."""
    scores = np.array([1000.0, 999.0, 1001.0, 998.0])
    V = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]])
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.exp(scores) / np.exp(scores).sum()
    assert np.isnan(naive).all()
    row = online_row(scores, np.ones(4, dtype=bool), V, block_size=2)
    expected, scale = ordinary(scores, V)
    assert_exact(row.output, expected[0], scale[0])
    assert [b.max for b in row.blocks] == [1000.0, 1001.0]
    assert row.blocks[1].rescale == math.exp(-1.0)


def test_published_online_softmax_digit_for_digit():
    """egorneo/LLM-techniques, onlineSoftmax.ipynb: online softmax of [2,3,5,2,4,0,-1,2] one value at a time prints "5 1.6617926286873983".

    Source: https://github.com/egorneo/LLM-techniques/blob/6c5eeec9bbdfbd4443c0e57a29bbd22d4042d9a0/onlineSoftmax.ipynb
    (cell "Online Softmax": m and d after the last element, printed as Python floats).
    """
    x = np.array([2, 3, 5, 2, 4, 0, -1, 2], dtype=np.float64)
    row = online_row(x, np.ones(8, dtype=bool), np.eye(8), block_size=1)
    assert repr(row.max) == "5.0"
    assert repr(row.sum) == "1.6617926286873983"
    assert [b.max for b in row.blocks] == [2.0, 3.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0]
    expected, scale = ordinary(x, np.eye(8))  # with V = I the output is the softmax itself
    assert_exact(row.output, expected[0], scale[0])


def test_hand_rounded_chain():
    """Blocks [2,1,3], [5,4,4], [1,2,1] at 2 decimals: l = 1.51, then 0.21 + 1.74 = 1.95, then 2.04; exact gives 1.50, 1.94, 2.03."""
    scores = np.array([2.0, 1, 3, 5, 4, 4, 1, 2, 1])
    V = np.ones((9, 1))
    hand = online_row(scores, np.ones(9, dtype=bool), V, block_size=3, round_to=2)
    assert [list(b.exp) for b in hand.blocks] == [[0.37, 0.14, 1.0], [1.0, 0.37, 0.37], [0.02, 0.05, 0.02]]
    assert [b.rescale for b in hand.blocks] == [0.0, 0.14, 1.0]
    assert [b.sum for b in hand.blocks] == [1.51, 1.95, 2.04]
    assert list(hand.output) == [1.0]
    exact = online_row(scores, np.ones(9, dtype=bool), V, block_size=3)
    assert [round(b.sum, 2) for b in exact.blocks] == [1.5, 1.94, 2.03]


@settings(max_examples=100, deadline=None)
@given(logits(rows=1), st.integers(1, 6), st.integers(0, 4))
def test_every_hand_rounded_number_is_rounded(case, block_size, decimals):
    """With round_to=N every recorded intermediate already has at most N decimals."""
    masked, V = case
    row = online_row(masked[0], masked[0] > -np.inf, V, block_size=block_size, round_to=decimals)
    for block in row.blocks:
        for value in (block.rescale, block.sum, block.block_sum, *block.exp, *block.output, *block.block_output):
            assert value == np.round(value, decimals)
    assert np.array_equal(row.output, np.round(row.output, decimals))


def test_first_block_rescales_by_zero_and_hidden_blocks_are_skipped():
    """Padding hides block 1 (skipped, state empty), block 2 starts the sum (rescale 0), block 3 is hidden too (state kept)."""
    scores = np.array([9.0, 9.0, 1.0, 2.0, 9.0, 9.0, 0.5])
    visible = np.array([False, False, True, True, False, False, True])
    V = np.arange(14.0).reshape(7, 2)
    row = online_row(scores, visible, V, block_size=2)
    first, second, third, fourth = row.blocks
    assert first.skipped and first.max == -np.inf and first.sum == 0.0 and first.rescale == 1.0
    assert not second.skipped and second.rescale == 0.0 and second.max == 2.0 and second.block_max == 2.0
    assert list(second.exp) == [math.exp(-1.0), 1.0]
    assert third.skipped and (third.max, third.sum) == (second.max, second.sum)
    assert np.array_equal(third.output, second.output) and list(third.exp) == [0.0, 0.0]
    assert fourth.rescale == 1.0 and list(fourth.keys) == [7]
    assert list(third.keys) == [5, 6] and list(third.visible) == [False, False] and list(third.scores) == [9.0, 9.0]


def test_causal_tiles_above_the_diagonal_are_skipped():
    """Causal, L = 6, blocks of 2: the 3 tiles above the diagonal are skipped, the other 6 computed."""
    masked = np.where(np.tri(6, dtype=bool), np.arange(36.0).reshape(6, 6) / 10, -np.inf)
    tiling = tiled(masked, np.eye(6), block_size=2, d_k=3)
    skipped = {(t.query_block, t.key_block) for t in tiling.tiles if t.skipped}
    assert skipped == {(1, 2), (1, 3), (2, 3)}
    assert len(tiling.tiles) == 9
    assert [list(t.queries) for t in tiling.tiles[:3]] == [[1, 2]] * 3
    assert [list(t.keys) for t in tiling.tiles[:3]] == [[1, 2], [3, 4], [5, 6]]


def test_peak_memory():
    """L = 4096, d_k = d_v = 64, blocks of 64: 20,608 numbers (165 KB) tiled against 2·4096² (268 MB) ordinary."""
    memory = peak_memory(4096, 4096, 64, 64, query_block_size=64, block_size=64)
    assert memory.tiled == 64 * 64 + 64 * 64 + 64 * 64 + 64 * 64 + 2 * 64 + 64 * 64 == 20_608
    assert memory.ordinary == 2 * 4096 * 4096
    assert (memory.tiled_bytes, memory.ordinary_bytes) == (164_864, 268_435_456)
    assert peak_memory(10**6, 10**6, 64, 64, query_block_size=64, block_size=64).tiled == memory.tiled  # independent of L
    tiny = tiled(np.zeros((3, 5)), np.ones((5, 2)), block_size=8, d_k=4)
    assert tiny.memory == peak_memory(3, 5, 4, 2, query_block_size=3, block_size=5)  # blocks capped at the lengths


def test_records_are_frozen():
    """Records are immutable tuples and their arrays are read-only."""
    row = online_row(np.array([1.0, 2.0, 3.0]), np.ones(3, dtype=bool), np.ones((3, 2)), block_size=2)
    assert isinstance(row, OnlineRow)
    for array in (row.output, row.blocks[0].keys, row.blocks[0].exp, row.blocks[0].output, row.blocks[0].visible):
        with pytest.raises(ValueError):
            array[0] = 0
    with pytest.raises(AttributeError):
        row.sum = 0.0  # type: ignore[misc]
    tiling = tiled(np.zeros((2, 2)), np.ones((2, 1)), block_size=1, d_k=1)
    for array in (tiling.output, tiling.tiles[0].max, tiling.tiles[0].sum, tiling.tiles[0].queries):
        with pytest.raises(ValueError):
            array[0] = 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: online_row(np.ones(2), np.ones(2, dtype=bool), np.ones((2, 1)), block_size=0), "block_size"),
        (lambda: online_row(np.ones(2), np.zeros(2, dtype=bool), np.ones((2, 1)), block_size=1), "sees no key"),
        (lambda: online_row(np.ones(2), np.ones(2, dtype=bool), np.ones((3, 1)), block_size=1), "expected"),
        (lambda: online_row(np.array([1.0, np.nan]), np.ones(2, dtype=bool), np.ones((2, 1)), block_size=1), "finite"),
        (lambda: tiled(np.array([[0.0, -np.inf], [-np.inf, -np.inf]]), np.ones((2, 1)), block_size=1, d_k=1), "query 2"),
        (lambda: tiled(np.zeros((2, 2)), np.ones((2, 1)), block_size=1, query_block_size=0, d_k=1), "query_block_size"),
    ],
)
def test_bad_inputs_are_refused(call, message):
    """A zero block size, a query that sees nothing, mismatched shapes or a nan score raise ValueError saying which."""
    with pytest.raises(ValueError, match=message):
        call()
