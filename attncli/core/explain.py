"""One query word followed through the arithmetic: the data behind `attncli explain`.

Pure: takes the engine's RunResult and picks out (and, for the weighted values, computes)
what a hand calculation writes down for one row of one head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attncli.core import engine
from attncli.core.arithmetic import rounder
from attncli.core.engine import HeadResult, RunResult
from attncli.core.lens import HeadLens, Promoted
from attncli.core.scenario import Scenario
from attncli.core.variants.sinks import LearnedSink
from attncli.errors import AttnError, did_you_mean, option

if TYPE_CHECKING:
    from attncli.core.online import OnlineRow


class KeyStep(NamedTuple):
    """The query's dealings with one key: its score, exponential, weight and weighted value."""

    position: int  # 1-based, among the keys
    token: str
    label: str  # the column label: the token, with its position when it repeats
    e: np.ndarray | None  # (d_model,) the key's embedding; None when K and V are given
    k: np.ndarray  # (d_k,) as the query meets it (rotated under RoPE)
    k_raw: np.ndarray  # (d_k,) before rotation (= k without RoPE)
    v: np.ndarray  # (d_v,) as the weight meets it (normalised under a value norm)
    score: float  # q·k
    scaled: float  # score / divisor
    bias: float | None  # added to the scaled score (given bias + ALiBi); None without
    logit: float  # scaled + bias: what the softmax sees
    masked: bool  # hidden from this query by the mask
    why: str | None  # why it is hidden, or why it is seen against the window (a sink)
    exp: float  # e^(logit - shift), 0 when masked
    weight: float  # exp / exp_sum
    weighted_v: np.ndarray  # (d_v,) weight · v
    v_raw: np.ndarray | None = None  # (d_v,) as projected, before a value norm (= v without one)


@dataclass(frozen=True)
class Explanation:
    result: RunResult
    head: HeadResult
    position: int  # 1-based row of the query word among the sentence's queries (its place in Q)
    token: str
    other_positions: tuple[int, ...]  # rows where else the same word occurs
    e: np.ndarray | None  # (d_model,) the query word's embedding; None when Q is given
    q: np.ndarray  # (d_k,) as it meets the keys (rotated under RoPE)
    q_raw: np.ndarray  # (d_k,) before rotation
    keys: tuple[KeyStep, ...]  # one per key token, in order
    shift: float
    exp_sum: float
    output: np.ndarray  # (d_v,) this head's output for the query word
    exact_output: np.ndarray | None  # (d_v,) without rounding, when --round-steps is used
    online: OnlineRow | None = None  # the same row as FlashAttention computes it, keys in blocks (--block-size)
    exact_online: OnlineRow | None = None  # ... without rounding, when --round-steps is used
    sink_exp: float | None = None  # e^(sink - shift), a learned sink's term of exp_sum (gpt-oss); None without
    sink_weight: float | None = None  # the weight the sink took: the keys' weights sum to 1 minus it
    lens: HeadLens | None = None  # a checkpoint's: what this head's output promotes (direct logit attribution, core/lens.py)
    logit_lens: tuple[Promoted, ...] = ()  # ... and the logit lens at this position: the embeddings, then after each layer

    @property
    def scenario(self) -> Scenario:
        return self.result.scenario

    @property
    def visible(self) -> list[KeyStep]:
        return [key for key in self.keys if not key.masked]

    @property
    def label(self) -> str:
        return self.scenario.query_labels[self.position - 1]

    @property
    def sequence_position(self) -> int:
        """The query's position as people read it, from 1, counted as the keys are: after a given KV cache's keys."""
        return self.scenario.cached + self.position

    @property
    def row(self) -> int:
        """The query's row (from 0) in the head's tokens × tokens stages, which may keep only some rows."""
        rows = self.result.rows
        return self.position - 1 if rows is None else rows.index(self.position - 1)


def find_word(scenario: Scenario, word: str | None, position: int | None) -> tuple[int, tuple[int, ...]]:
    """The query row to explain (from 1) and the other rows of the same word; `position` counts as the keys do (after a cache)."""
    tokens, c = scenario.tokens, scenario.cached
    span = f"a position from {c + 1} to {c + len(tokens)}"
    if position is not None and 1 <= position <= c:
        raise AttnError(f"position {position} is a key of the given cache, not a query of the sentence", key=option("position"),
                        expected=f"{span} (the cache holds positions 1 to {c})")  # fmt: skip
    if position is not None and not c + 1 <= position <= c + len(tokens):
        raise AttnError(f"position {position} is outside the sentence", key=option("position"), expected=span)
    row = None if position is None else position - c
    if word is None:
        if row is None:
            raise AttnError("no word to explain", key=option("word"), expected=f"{option('word')} WORD or {option('position')} N")
        word = tokens[row - 1]
    matches = [i for i, token in enumerate(tokens, 1) if scenario.fold(token) == scenario.fold(word)]
    cached = [i for i, token in enumerate(scenario.key_tokens[:c], 1) if scenario.fold(token) == scenario.fold(word)]
    if not matches and cached:  # shown as K_cache's row, so "not a token of the scenario" would be wrong
        raise AttnError(f"{word!r} is a key of the given cache (position {cached[0]}), not a query of the sentence",
                        key=option("word"), expected=f"a token of the sentence: {' '.join(tokens[:40])}{' …' if len(tokens) > 40 else ''}")  # fmt: skip
    if not matches:
        hint = did_you_mean(word, tokens, fold=scenario.fold)
        case = "" if scenario.case_sensitive else " (case is ignored)"
        shown = " ".join(tokens) if len(tokens) <= 40 else " ".join(tokens[:40]) + f" … ({len(tokens)} tokens)"
        raise AttnError(
            f"{word!r} is not a token of the scenario {scenario.name!r}{hint}",
            key=option("word"),
            expected=f"one of its tokens{case}: {shown}",
        )
    if row is None:
        row = matches[0]
    elif row not in matches:
        raise AttnError(
            f"position {position} holds {tokens[row - 1]!r}, not {word!r}",
            key=option("position"),
            expected=f"{' or '.join(str(c + m) for m in matches)} for {word!r}",
        )
    return row, tuple(m for m in matches if m != row)


def explain(
    result: RunResult, *, position: int, head: int = 1, others: tuple[int, ...] = (), block_size: int | None = None
) -> Explanation:
    """The worked example for the query at `position` (1-based) in head `head` (1-based); with block_size, also online.

    `result` holds every query row, or (run with `rows`) the query's row among the rows it keeps.
    """
    exact = result.exact.head(head) if result.exact is not None else None
    row = position - 1 if result.rows is None else result.rows.index(position - 1)
    return _explanation(result, result.head(head), exact, position=position, row=row, others=others, block_size=block_size)


def explain_scenario(
    scenario: Scenario, *, position: int, head: int = 1, round_steps: int | None = None, others: tuple[int, ...] = (),
    block_size: int | None = None,
) -> Explanation:
    """`explain(engine.run(scenario, round_steps=...), ...)`, the same numbers bit for bit, holding far less.

    The engine keeps only the query's row of each tokens × tokens stage (see engine.run's `rows`).
    """
    result = engine.run(scenario, round_steps=round_steps, rows=[position - 1])
    return explain(result, position=position, head=head, others=others, block_size=block_size)


def _explanation(
    result: RunResult, h: HeadResult, exact: HeadResult | None, *, position: int, row: int, others: tuple[int, ...], block_size: int | None
) -> Explanation:
    """The Explanation of query `position` from head h, whose tokens × tokens stages hold that query at `row`."""
    s = result.scenario
    i = position - 1
    r = rounder(result.round_steps)
    keys_X = result.X if result.X_kv is None else result.X_kv  # (L_k, d_model) or None
    scores, scaled, logits, visible = h.scores[row], h.scaled[row], h.logits[row], h.visible[row]  # (L_k,)
    exps, weights = h.exp[row], h.weights[row]  # (L_k,)
    bias = None if h.bias is None else h.bias[row]
    keys = tuple(
        KeyStep(
            position=j + 1,
            token=s.key_tokens[j],
            label=s.key_labels[j],
            e=None if keys_X is None or j < s.cached else keys_X[j - s.cached],  # a given KV cache's keys have no embedding
            k=h.k[j],
            k_raw=h.K[j],
            v=h.values[j],
            score=float(scores[j]),
            scaled=float(scaled[j]),
            bias=None if bias is None else float(bias[j]),
            logit=float(logits[j]),
            masked=not visible[j],
            why=s.mask.why_hidden(i + 1, j + 1) if not visible[j] else s.mask.why_seen(i + 1, j + 1),
            exp=float(exps[j]),
            weight=float(weights[j]),
            weighted_v=r(weights[j] * h.values[j]),  # (d_v,)
            v_raw=h.V[j],
        )
        for j in range(s.L_k)
    )
    return Explanation(
        result=result,
        head=h,
        position=position,
        token=s.tokens[i],
        other_positions=others,
        e=None if result.X is None else result.X[i],
        q=h.q[i],
        q_raw=h.Q[i],
        keys=keys,
        shift=float(h.shift[row]),
        exp_sum=float(h.exp_sum[row]),
        output=h.output[i],
        exact_output=None if exact is None else exact.output[i],
        online=None if block_size is None else _online(h, row, block_size, result.round_steps, s.variant(LearnedSink)),
        exact_online=None if block_size is None or exact is None else _online(exact, row, block_size, None, s.variant(LearnedSink)),
        sink_exp=None if h.sink_exp is None else float(h.sink_exp[i]),  # whole (L_q,): by position, not row
        sink_weight=None if h.sink_weight is None else float(h.sink_weight[i]),
    )


def _online(h: HeadResult, i: int, block_size: int, round_to: int | None, sink: LearnedSink | None) -> OnlineRow:
    """Row i of head h computed by the online softmax, keys in blocks of block_size."""
    from attncli.core.online import online_row  # only with --block-size

    return online_row(h.logits[i], h.visible[i], h.values, block_size=block_size, round_to=round_to, sink=None if sink is None else sink.logit(h.head))
