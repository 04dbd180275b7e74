"""Per-head statistics of attention weights: what each head of each layer does, in a few numbers.

Dimension names: H heads, L tokens (query rows i and key columns j, both 1 … L in the text,
0 … L−1 in the code). Every statistic is a mean over the query rows of one number per row:

    entropy         −Σ_j a_ij ln a_ij (nats; 0 ln 0 = 0)
    entropy_ratio   that entropy ÷ ln n_i, n_i the keys row i may see (1 = uniform); rows with n_i = 1 are left out
    max_weight      max_j a_ij
    first_token     a_i1: the weight on the first token (the "sink")
    previous_token  a_i,i−1, over rows i ≥ 2
    self            a_ii
    mean_distance   Σ_j a_ij·|i − j|: how far back (or ahead) the weight sits, in tokens

Masked keys carry weight 0. The pattern scores follow TransformerLens' head detector
(`detect_head` with error_measure="mul"), after Olsson et al. 2022, "In-context Learning and
Induction Heads": Σ a·P / Σ a over the whole matrix for a 0/1 pattern P.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from attncli.core.lens import HeadLens

if TYPE_CHECKING:
    from attncli.core.scenario import Scenario

STATISTICS = ("entropy", "entropy_ratio", "max_weight", "first_token", "previous_token", "self", "mean_distance")
PATTERNS = ("induction_score", "previous_token_score", "duplicate_token_score")
THUMBNAIL = 32  # the largest thumbnail side kept per head for the grid
REPEATS = 3  # the rows with an earlier copy of their token that induction on the sentence itself needs


def row_entropy(weights: np.ndarray) -> np.ndarray:
    """(…, L) −Σ_j a_ij ln a_ij per row, 0 ln 0 taken as 0."""
    positive = weights > 0
    logs = np.log(np.where(positive, weights, 1.0))  # (…, L, L)
    out: np.ndarray = -(np.where(positive, weights * logs, 0.0)).sum(axis=-1)
    return out


def statistics(weights: np.ndarray, visible: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Each statistic of STATISTICS as an (H,) array, for (H, L, L) weights; `visible` (L, L) bool, default every key.

    A statistic with no row to average (previous_token for L = 1) is NaN.
    """
    H, L, _ = weights.shape
    if weights.shape[-1] != L:
        raise ValueError("head statistics need self-attention: as many keys as queries")
    seen = np.ones((L, L), dtype=bool) if visible is None else np.broadcast_to(visible, (L, L))
    i = np.arange(L)
    entropy = row_entropy(weights)  # (H, L)
    n = seen.sum(axis=-1)  # (L,) keys each row may see
    spread = n >= 2
    ratio = (entropy[:, spread] / np.log(n[spread])).mean(axis=-1) if spread.any() else np.full(H, np.nan)
    distance = np.abs(i[:, None] - i[None, :])  # (L, L) |i − j|
    previous = weights[:, i[1:], i[:-1]].mean(axis=-1) if L > 1 else np.full(H, np.nan)  # (H,)
    return {
        "entropy": entropy.mean(axis=-1),
        "entropy_ratio": ratio,
        "max_weight": weights.max(axis=-1).mean(axis=-1),
        "first_token": weights[:, :, 0].mean(axis=-1),
        "previous_token": previous,
        "self": weights[:, i, i].mean(axis=-1),
        "mean_distance": (weights * distance).sum(axis=-1).mean(axis=-1),
    }


def uniform_baseline(visible: np.ndarray) -> dict[str, float]:
    """What first_token, previous_token and self would be if every row spread its weight evenly over its visible keys.

    A short causal sentence puts much weight on its first token by counting alone (row 1 sees
    only it, row 2 gives it half); a reading compares a head with this, not with 0.
    """
    L = visible.shape[-1]
    share = visible / visible.sum(axis=-1, keepdims=True)  # (L, L) uniform weights
    i = np.arange(L)
    return {
        "first_token": float(share[:, 0].mean()),
        "previous_token": float(share[i[1:], i[:-1]].mean()) if L > 1 else 0.0,
        "self": float(share[i, i].mean()),
    }


def strongest_rows(weights: np.ndarray) -> dict[str, np.ndarray]:
    """(H,) for first_token, previous_token and self: the query row (from 0, among rows 1 … L−1) where that weight is largest.

    Row 0 is left out: a causal row 0 sees only itself, so it is trivially all three.
    """
    H, L, _ = weights.shape
    if L < 2:
        zero = np.zeros(H, dtype=int)
        return {"first_token": zero, "previous_token": zero, "self": zero}
    i = np.arange(1, L)
    return {
        "first_token": 1 + weights[:, 1:, 0].argmax(axis=-1),
        "previous_token": 1 + weights[:, i, i - 1].argmax(axis=-1),
        "self": 1 + weights[:, i, i].argmax(axis=-1),
    }


def previous_token_pattern(L: int) -> np.ndarray:
    """(L, L) 1 where key j is the token just before query i."""
    return np.eye(L, k=-1)


def duplicate_token_pattern(tokens: Sequence[int]) -> np.ndarray:
    """(L, L) 1 where key j < i is the same token as query i."""
    ids = np.asarray(tokens)
    same: np.ndarray = ids[:, None] == ids[None, :]  # (L, L)
    return np.tril(same, k=-1).astype(np.float64)


def induction_pattern(tokens: Sequence[int]) -> np.ndarray:
    """(L, L) 1 where key j follows an earlier occurrence (j − 1) of query i's token: the token an induction head copies."""
    duplicate = duplicate_token_pattern(tokens)
    shifted = np.zeros_like(duplicate)
    shifted[:, 1:] = duplicate[:, :-1]  # column j holds the duplicate at j − 1
    return np.tril(shifted)


def sentence_induction(weights: np.ndarray, tokens: Sequence[int], visible: np.ndarray | None = None) -> tuple[np.ndarray, float, np.ndarray] | None:
    """Induction on the sentence itself, over the rows whose token occurred before: (H,) the mean share of such a row's weight
    on the tokens just after the earlier copies, what an even spread over the visible keys would give there, and (H,) the
    row (from 0) where the share is largest. None when fewer than REPEATS rows have an earlier copy (one repeated "the"
    says nothing of a head).
    """
    pattern = induction_pattern(tokens)  # (L, L)
    rows = np.flatnonzero(pattern.any(axis=-1))
    if rows.size < REPEATS:
        return None
    L = weights.shape[-1]
    seen = np.ones((L, L), dtype=bool) if visible is None else np.broadcast_to(visible, (L, L))
    share = (weights[:, rows] * pattern[rows]).sum(axis=-1)  # (H, R)
    even = float(((pattern[rows] * seen[rows]).sum(axis=-1) / seen[rows].sum(axis=-1)).mean())
    return share.mean(axis=-1), even, rows[share.argmax(axis=-1)]


def pattern_scores(weights: np.ndarray, tokens: Sequence[int]) -> dict[str, np.ndarray]:
    """Each score of PATTERNS as an (H,) array: the share of all the weight that falls where the pattern is 1."""
    L = weights.shape[-1]
    patterns = {
        "induction_score": induction_pattern(tokens),
        "previous_token_score": previous_token_pattern(L),
        "duplicate_token_score": duplicate_token_pattern(tokens),
    }
    total = weights.sum(axis=(-2, -1))  # (H,)
    return {name: np.asarray((weights * pattern).sum(axis=(-2, -1)) / total) for name, pattern in patterns.items()}


def thumbnail(weights: np.ndarray, size: int = THUMBNAIL) -> np.ndarray:
    """(H, s, s) the weights shrunk to at most size × size by the largest value of each block (a lone spike stays visible)."""
    L = weights.shape[-1]
    if size >= L:
        return weights.copy()
    edges = np.linspace(0, L, size + 1).round().astype(int)  # block b covers edges[b] … edges[b+1] − 1
    rows = np.maximum.reduceat(weights, edges[:-1], axis=1)  # (H, s, L)
    out: np.ndarray = np.maximum.reduceat(rows, edges[:-1], axis=2)  # (H, s, s)
    return out


@dataclass
class HeadMap:
    """Every layer's heads, summarised one layer at a time: statistics (layers, H) and thumbnails (layers, H, s, s)."""

    heads: int
    kv_heads: int
    tokens: tuple[str, ...]
    first_layer: int = 1  # the number of the first layer summarised (a scenario's one layer: 1)
    stats: dict[str, list[np.ndarray]] = field(default_factory=dict)  # name → one (H,) array per layer
    thumbnails: list[np.ndarray] = field(default_factory=list)  # one (H, s, s) per layer
    seen: list[np.ndarray] = field(default_factory=list)  # one (s, s) bool per layer: a thumbnail cell some query of it may see
    rows: dict[str, list[np.ndarray]] = field(default_factory=dict)  # name → one (H,) array per layer: strongest_rows
    uniform: dict[str, list[float]] = field(default_factory=dict)  # name → one value per layer: uniform_baseline
    patterns: dict[str, list[np.ndarray]] | None = None  # name → one (H,) array per layer, when asked for
    focus: int | None = None  # a query row (from 0) whose weights are kept whole, for the shaded sentence
    focus_rows: list[np.ndarray] = field(default_factory=list)  # one (H, L) per layer: row `focus` of each head
    focus_visible: list[np.ndarray] = field(default_factory=list)  # one (L,) bool per layer: the keys that row may see
    ids: tuple[int, ...] | None = None  # the sentence's token ids: with a repeated token, induction on the sentence itself
    induction: list[np.ndarray] = field(default_factory=list)  # one (H,) per layer: sentence_induction's share, when ids repeat
    lens: dict[tuple[int, int], HeadLens] = field(default_factory=dict)  # (layer, head) → what its output promotes, where read

    def add(self, weights: np.ndarray, visible: np.ndarray | None = None) -> None:
        """Summarise one layer's (H, L, L) weights; the weights themselves are not kept (only row `focus`, when set)."""
        if self.focus is not None:
            self.focus_rows.append(weights[:, self.focus, :].copy())  # (H, L)
            seen = np.ones(weights.shape[-1], dtype=bool) if visible is None else np.broadcast_to(visible, weights.shape[-2:])[self.focus]
            self.focus_visible.append(np.array(seen, dtype=bool))
        for name, values in statistics(weights, visible).items():
            self.stats.setdefault(name, []).append(values)
        for name, rows in strongest_rows(weights).items():
            self.rows.setdefault(name, []).append(rows)
        seen = np.ones(weights.shape[-2:], dtype=bool) if visible is None else np.broadcast_to(visible, weights.shape[-2:])
        for name, value in uniform_baseline(seen).items():
            self.uniform.setdefault(name, []).append(value)
        repeated = None if self.ids is None else sentence_induction(weights, self.ids, seen)
        if repeated is not None:
            share, even, strongest = repeated
            self.induction.append(share)
            self.uniform.setdefault("sentence_induction", []).append(even)
            self.rows.setdefault("sentence_induction", []).append(strongest)
        self.thumbnails.append(thumbnail(weights))
        self.seen.append(thumbnail(seen[None].astype(np.float64))[0] > 0)  # a block is seen when any of its cells is

    def add_patterns(self, weights: np.ndarray, tokens: Sequence[int]) -> None:
        """The next layer's pattern scores, on a token sequence of their own (the repeated random one)."""
        if self.patterns is None:
            self.patterns = {}
        for name, values in pattern_scores(weights, tokens).items():
            self.patterns.setdefault(name, []).append(values)

    @property
    def layers(self) -> int:
        return len(self.thumbnails)

    def table(self, name: str) -> np.ndarray:
        """(layers, H) one statistic or pattern score for every head."""
        source = self.stats if name in self.stats else (self.patterns or {})
        return np.stack(source[name])

    def strongest_row(self, name: str, layer: int, head: int) -> int:
        """The query row (from 0) where head `head` of layer `layer` (both from 1) puts most weight on `name`'s key."""
        return int(self.rows[name][layer - self.first_layer][head - 1])

    def kv_head(self, head: int) -> int:
        """The key/value head (from 1) query head `head` (from 1) reads."""
        return (head - 1) * self.kv_heads // self.heads + 1


WORD_MARKS = ("␣", "Ġ", "▁")  # a real tokenizer's marks for a leading space: words match without them


def fold(token: str) -> str:
    """The form under which a word and a token are compared: one leading space mark dropped, case ignored."""
    for mark in WORD_MARKS:
        if token.startswith(mark) and len(token) > len(mark):
            token = token[len(mark) :]
            break
    return token.casefold()


def find_token(tokens: Sequence[str], word: str | None, position: int | None) -> int:
    """The query row (from 0) that `word` and/or `position` (from 1) name among `tokens`; the first occurrence of a repeated word."""
    from attncli.errors import AttnError, did_you_mean, option

    if position is not None and not 1 <= position <= len(tokens):
        raise AttnError(f"position {position} is outside the sentence", key=option("position"), expected=f"a position from 1 to {len(tokens)}")
    if word is None:
        if position is None:
            raise AttnError("no query token", key=option("word"), expected=f"{option('word')} WORD or {option('position')} N")
        return position - 1
    matches = [i for i, token in enumerate(tokens) if fold(token) == fold(word)]
    shown = " ".join(tokens) if len(tokens) <= 40 else " ".join(tokens[:40]) + f" … ({len(tokens)} tokens)"
    if not matches:
        raise AttnError(f"{word!r} is not a token of the sentence{did_you_mean(word, tokens, fold=fold)}", key=option("word"), expected=f"one of its tokens (case is ignored): {shown}")
    if position is None:
        return matches[0]
    if position - 1 not in matches:
        raise AttnError(f"position {position} holds {tokens[position - 1]!r}, not {word!r}", key=option("position"),
                        expected=f"{' or '.join(str(m + 1) for m in matches)} for {word!r}")  # fmt: skip
    return position - 1


def repeated_random_tokens(vocabulary: int, length: int, *, seed: int, avoid: Sequence[int] = ()) -> tuple[int, ...]:
    """`length` random token ids (no id of `avoid`, no repeats), then the same ids again: the induction heads' test sequence."""
    rng = np.random.default_rng(seed)
    pool = np.setdiff1d(np.arange(vocabulary), np.asarray(avoid, dtype=int))
    chosen = rng.choice(pool, size=min(length, pool.size), replace=False)
    half = tuple(int(t) for t in chosen)
    return half + half


def scenario_map(scenario: Scenario, *, focus: Callable[[tuple[str, ...]], int] | None = None) -> HeadMap:
    """A scenario's one layer as a HeadMap: its heads' weights from the engine, summarised; `focus` picks a row to keep whole."""
    from attncli.core import engine
    from attncli.core.variants import LinearAttention, Retention
    from attncli.errors import AttnError

    if scenario.cross:
        raise AttnError(
            "the scenario is cross-attention (its queries and keys are different tokens)",
            key="context",
            expected="a self-attention scenario: the head statistics compare query i with key i",
        )
    if scenario.cached:  # the c cached keys have no query rows: weights are L × (c + L), and "first" or "previous" would mean another token
        raise AttnError(
            f"the scenario starts from a given KV cache of {scenario.cached} token(s), whose keys have no query rows",
            key="cache",
            expected="a scenario without `cache`: the head statistics compare query i with key i",
        )
    if scenario.variant(Retention) is not None:  # its rows are scores times a decay, not weights: negative, and summing to anything
        raise AttnError(
            "retention's rows are not weights (no softmax and no normaliser: they may be negative and need not sum to 1)",
            key="retention",
            expected="attention whose rows are weights (softmax, or linear attention with a non-negative feature map): entropy and shares need them",
        )
    result = engine.run(scenario)
    weights = np.stack([head.weights for head in result.heads])  # (H, L, L)
    if (linear := scenario.variant(LinearAttention)) is not None and (weights < 0).any():  # φ = identity can make a similarity, and so a weight, negative
        h, i, _ = (int(n) for n in np.argwhere(weights < 0)[0])
        raise AttnError(
            f"head {h + 1}, row {i + 1} ({scenario.tokens[i]!r}) has a negative weight (feature map {linear.feature_map}): "
            "entropy and shares of weight need weights of 0 or more",
            key="linear_attention.feature_map",
            expected="elu+1 or relu, whose weights are never negative",
        )
    visible = np.asarray(np.stack([head.visible for head in result.heads]).any(axis=0))  # (L, L)
    heads = HeadMap(heads=scenario.heads, kv_heads=scenario.G, tokens=tuple(scenario.tokens))
    heads.focus = None if focus is None else focus(heads.tokens)
    heads.add(weights, visible)
    return heads
