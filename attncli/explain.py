"""One query word followed through the arithmetic: the data behind `attncli explain`.

Pure: takes the engine's RunResult and picks out (and, for the weighted values, computes)
what a hand calculation writes down for one row of one head.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from attncli.engine import HeadResult, RunResult, rounder
from attncli.errors import AttnError
from attncli.model import Scenario
from attncli.online import OnlineRow, online_row


class KeyStep(NamedTuple):
    """The query's dealings with one key: its score, exponential, weight and weighted value."""

    position: int  # 1-based, among the keys
    token: str
    label: str  # the column label: the token, with its position when it repeats
    e: np.ndarray | None  # (d_model,) the key's embedding; None when K and V are given
    k: np.ndarray  # (d_k,) as the query meets it (rotated under RoPE)
    k_raw: np.ndarray  # (d_k,) before rotation (= k without RoPE)
    v: np.ndarray  # (d_v,)
    score: float  # q·k
    scaled: float  # score / divisor
    bias: float | None  # added to the scaled score (given bias + ALiBi); None without
    logit: float  # scaled + bias: what the softmax sees
    masked: bool  # hidden from this query by the mask
    why: str | None  # why it is hidden, or why it is seen against the window (a sink)
    exp: float  # e^(logit - shift), 0 when masked
    weight: float  # exp / exp_sum
    weighted_v: np.ndarray  # (d_v,) weight · v


@dataclass(frozen=True)
class Explanation:
    result: RunResult
    head: HeadResult
    position: int  # 1-based position of the query word
    token: str
    other_positions: tuple[int, ...]  # where else the same word occurs
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

    @property
    def scenario(self) -> Scenario:
        return self.result.scenario

    @property
    def visible(self) -> list[KeyStep]:
        return [key for key in self.keys if not key.masked]

    @property
    def label(self) -> str:
        return self.scenario.query_labels[self.position - 1]


def find_word(scenario: Scenario, word: str | None, position: int | None) -> tuple[int, tuple[int, ...]]:
    """The 1-based position to explain, and the other positions of the same word."""
    tokens = scenario.tokens
    if position is not None and not 1 <= position <= len(tokens):
        raise AttnError(f"position {position} is outside the sentence", key="--position", expected=f"a position from 1 to {len(tokens)}")
    if word is None:
        if position is None:
            raise AttnError("no word to explain", key="--word", expected="--word WORD or --position N")
        word = tokens[position - 1]
    matches = [i for i, token in enumerate(tokens, 1) if scenario.fold(token) == scenario.fold(word)]
    if not matches:
        close = difflib.get_close_matches(word, list(dict.fromkeys(tokens)), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        case = "" if scenario.case_sensitive else " (case is ignored)"
        shown = " ".join(tokens) if len(tokens) <= 40 else " ".join(tokens[:40]) + f" … ({len(tokens)} tokens)"
        raise AttnError(
            f"{word!r} is not a token of the scenario {scenario.name!r}{hint}",
            key="--word",
            expected=f"one of its tokens{case}: {shown}",
        )
    if position is None:
        position = matches[0]
    elif position not in matches:
        raise AttnError(
            f"position {position} holds {tokens[position - 1]!r}, not {word!r}",
            key="--position",
            expected=f"{' or '.join(map(str, matches))} for {word!r}",
        )
    return position, tuple(p for p in matches if p != position)


def explain(
    result: RunResult, *, position: int, head: int = 1, others: tuple[int, ...] = (), block_size: int | None = None
) -> Explanation:
    """The worked example for the query at `position` (1-based) in head `head` (1-based); with block_size, also online."""
    s = result.scenario
    h = result.head(head)
    i = position - 1
    r = rounder(result.round_steps)
    keys_X = result.X if result.X_kv is None else result.X_kv  # (L_k, d_model) or None
    keys = tuple(
        KeyStep(
            position=j + 1,
            token=s.key_tokens[j],
            label=s.key_labels[j],
            e=None if keys_X is None else keys_X[j],
            k=h.k[j],
            k_raw=h.K[j],
            v=h.V[j],
            score=float(h.scores[i, j]),
            scaled=float(h.scaled[i, j]),
            bias=None if h.bias is None else float(h.bias[i, j]),
            logit=float(h.logits[i, j]),
            masked=not h.visible[i, j],
            why=s.mask.why_hidden(i + 1, j + 1) if not h.visible[i, j] else s.mask.why_seen(i + 1, j + 1),
            exp=float(h.exp[i, j]),
            weight=float(h.weights[i, j]),
            weighted_v=r(h.weights[i, j] * h.V[j]),  # (d_v,)
        )
        for j in range(s.L_k)
    )
    exact = result.exact.head(head).output[i] if result.exact is not None else None
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
        shift=float(h.shift[i]),
        exp_sum=float(h.exp_sum[i]),
        output=h.output[i],
        exact_output=exact,
        online=None if block_size is None else _online(h, i, block_size, result.round_steps),
        exact_online=None if block_size is None or result.exact is None else _online(result.exact.head(head), i, block_size, None),
    )


def _online(h: HeadResult, i: int, block_size: int, round_to: int | None) -> OnlineRow:
    """Row i of head h computed by the online softmax, keys in blocks of block_size."""
    return online_row(h.logits[i], h.visible[i], h.V, block_size=block_size, round_to=round_to)
