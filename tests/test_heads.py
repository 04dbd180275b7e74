"""`attncli heads`: per-head statistics against a loop computation, and against transformers' own attentions (golden)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core.heads import (
    STATISTICS,
    HeadMap,
    induction_pattern,
    pattern_scores,
    repeated_random_tokens,
    statistics,
    thumbnail,
)
from attncli.sources.checkpoints.headmap import model_map

CHECKPOINTS = Path(__file__).parent / "checkpoints"
GOLDEN_TOLERANCE = {"gpt2": 1e-12, "gpt2-bare": 1e-12, "bert": 1e-12, "llama": 1e-5, "qwen2": 1e-5, "mistral": 1e-5, "llama-old": 1e-5}


def loop_statistics(rows: list[list[float]], seen: list[list[bool]]) -> dict[str, float]:
    """One head's statistics written out plainly from the definitions: a mean over rows of one number per row."""
    entropy, ratio, largest, first, previous, itself, distance = [], [], [], [], [], [], []
    for i, row in enumerate(rows):
        h = -sum(a * math.log(a) for a in row if a > 0)
        entropy.append(h)
        n = sum(seen[i])
        if n >= 2:
            ratio.append(h / math.log(n))
        largest.append(max(row))
        first.append(row[0])
        if i >= 1:
            previous.append(row[i - 1])
        itself.append(row[i])
        distance.append(sum(a * abs(i - j) for j, a in enumerate(row)))

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs) if xs else math.nan

    return {
        "entropy": mean(entropy), "entropy_ratio": mean(ratio), "max_weight": mean(largest), "first_token": mean(first),
        "previous_token": mean(previous), "self": mean(itself), "mean_distance": mean(distance),
    }  # fmt: skip


def random_weights(rng: np.random.Generator, H: int, L: int, *, causal: bool, window: int | None) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    seen = np.ones((L, L), dtype=bool)
    if causal:
        seen &= j <= i
    if window is not None:
        seen &= np.abs(i - j) <= window
    logits = np.where(seen, rng.normal(scale=3.0, size=(H, L, L)), -np.inf)
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True), seen


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    H=st.integers(1, 4),
    L=st.integers(1, 12),
    causal=st.booleans(),
    window=st.none() | st.integers(0, 4),
)
def test_statistics_equal_a_loop_over_the_rows(seed, H, L, causal, window):
    """Every statistic of every head equals the plain loop's, masks and sliding windows included."""
    weights, seen = random_weights(np.random.default_rng(seed), H, L, causal=causal, window=window)
    got = statistics(weights, seen)
    for h in range(H):
        expected = loop_statistics(weights[h].tolist(), seen.tolist())
        for name in STATISTICS:
            if math.isnan(expected[name]):
                assert math.isnan(got[name][h]), name
            else:
                assert got[name][h] == pytest.approx(expected[name], rel=1e-12, abs=1e-14), name


def test_statistics_of_known_patterns():
    """A head that looks only at the previous token, one that looks at the first, and a uniform causal head."""
    L = 5
    previous = np.zeros((L, L))
    previous[0, 0] = 1.0
    previous[np.arange(1, L), np.arange(L - 1)] = 1.0
    sink = np.zeros((L, L))
    sink[:, 0] = 1.0
    uniform = np.tril(np.ones((L, L))) / np.arange(1, L + 1)[:, None]
    stats = statistics(np.stack([previous, sink, uniform]), np.tril(np.ones((L, L), dtype=bool)))
    assert stats["previous_token"].tolist() == [1.0, 0.25, pytest.approx((1 / 2 + 1 / 3 + 1 / 4 + 1 / 5) / 4)]
    assert stats["first_token"][1] == 1.0 and stats["max_weight"][0] == 1.0
    assert stats["entropy"][0] == 0.0 and stats["entropy"][1] == 0.0
    assert stats["entropy_ratio"][2] == pytest.approx(1.0)  # uniform over the visible keys of every row
    assert stats["self"][2] == pytest.approx(np.mean(1 / np.arange(1, L + 1)))
    assert stats["mean_distance"][0] == pytest.approx(4 / 5)  # rows 2 … 5 one token back, row 1 on itself
    assert stats["mean_distance"][1] == pytest.approx(np.mean(np.arange(L)))


def test_pattern_scores_follow_the_head_detector():
    """The induction pattern marks the token after an earlier occurrence; scores are Σ a·P / Σ a (TransformerLens' "mul")."""
    tokens = [7, 3, 9, 7, 3, 9]
    pattern = induction_pattern(tokens)
    assert [tuple(map(int, ij)) for ij in np.argwhere(pattern)] == [(3, 1), (4, 2), (5, 3)]
    L = len(tokens)
    perfect = np.zeros((L, L))
    perfect[np.arange(L), np.arange(L)] = 1.0
    perfect[3, :], perfect[4, :], perfect[5, :] = 0.0, 0.0, 0.0
    perfect[3, 1] = perfect[4, 2] = perfect[5, 3] = 1.0
    scores = pattern_scores(perfect[None], tokens)
    assert scores["induction_score"][0] == pytest.approx(0.5)  # 3 of the 6 rows' weight on the induction target
    rng = np.random.default_rng(1)
    weights, _ = random_weights(rng, 2, L, causal=True, window=None)
    scores = pattern_scores(weights, tokens)
    for h in range(2):
        dup = sum(weights[h, i, j] for i in range(L) for j in range(i) if tokens[i] == tokens[j])
        ind = sum(weights[h, i, j] for i in range(L) for j in range(1, i + 1) if tokens[j - 1] == tokens[i] and j - 1 < i)
        prev = sum(weights[h, i, i - 1] for i in range(1, L))
        assert scores["duplicate_token_score"][h] == pytest.approx(dup / L)
        assert scores["induction_score"][h] == pytest.approx(ind / L)
        assert scores["previous_token_score"][h] == pytest.approx(prev / L)


def test_repeated_random_tokens_repeat_without_special_ids():
    """n distinct ids, none of them special, then the same n again; the same seed gives the same sequence."""
    tokens = repeated_random_tokens(50, 10, seed=3, avoid=(0, 1, 2))
    assert len(tokens) == 20 and tokens[:10] == tokens[10:] and len(set(tokens)) == 10
    assert not {0, 1, 2} & set(tokens)
    assert repeated_random_tokens(50, 10, seed=3, avoid=(0, 1, 2)) == tokens


def test_thumbnail_keeps_each_blocks_largest_weight():
    """64 tokens shrink to 32 × 32 by 2 × 2 blocks; a lone spike survives; small matrices are kept whole."""
    weights = np.zeros((1, 64, 64))
    weights[0, 63, 0] = 0.9
    small = thumbnail(weights)
    assert small.shape == (1, 32, 32) and small[0, 31, 0] == 0.9 and small.sum() == pytest.approx(0.9)
    assert thumbnail(weights[:, :10, :10]).shape == (1, 10, 10)


@pytest.mark.parametrize("name", sorted(GOLDEN_TOLERANCE))
def test_every_statistic_equals_one_from_transformers_attentions(name):
    """attncli's one-pass map of every layer and head equals the loop statistics of transformers' golden attentions."""
    with np.load(CHECKPOINTS / name / "golden.npz", allow_pickle=False) as data:
        text, ids, attentions = str(data["text"]), tuple(data["ids"].tolist()), data["attentions"]
    result = model_map(CHECKPOINTS / name, sentence=text)
    assert result.token_ids == ids
    heads: HeadMap = result.map
    layers, H = attentions.shape[:2]
    assert (heads.layers, heads.heads) == (layers, H)
    tolerance = GOLDEN_TOLERANCE[name]
    for layer in range(layers):
        seen = (attentions[layer] > 0).any(axis=0).tolist()  # transformers' masked weights are exactly 0
        for h in range(H):
            expected = loop_statistics(attentions[layer, h].tolist(), seen)
            for stat in STATISTICS:
                got = heads.table(stat)[layer, h]
                assert got == pytest.approx(expected[stat], rel=0, abs=tolerance), (stat, layer + 1, h + 1)
