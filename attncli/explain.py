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
from attncli.scenario import Scenario


class KeyStep(NamedTuple):
    """The query's dealings with one key: its score, exponential, weight and weighted value."""

    position: int  # 1-based
    token: str
    k: np.ndarray  # (d_k,)
    v: np.ndarray  # (d_v,)
    score: float  # q·k
    scaled: float  # score / divisor
    masked: bool  # hidden from this query by the causal mask
    exp: float  # e^(scaled - shift), 0 when masked
    weight: float  # exp / exp_sum
    weighted_v: np.ndarray  # (d_v,) weight · v


@dataclass(frozen=True)
class Explanation:
    result: RunResult
    head: HeadResult
    position: int  # 1-based position of the query word
    token: str
    other_positions: tuple[int, ...]  # where else the same word occurs
    e: np.ndarray  # (d_model,) the query word's embedding
    q: np.ndarray  # (d_k,)
    keys: tuple[KeyStep, ...]  # one per token, in order
    shift: float
    exp_sum: float
    output: np.ndarray  # (d_v,) this head's output for the query word
    exact_output: np.ndarray | None  # (d_v,) without rounding, when --round-steps is used

    @property
    def scenario(self) -> Scenario:
        return self.result.scenario

    @property
    def visible(self) -> list[KeyStep]:
        return [key for key in self.keys if not key.masked]


def find_word(scenario: Scenario, word: str | None, position: int | None) -> tuple[int, tuple[int, ...]]:
    """The 1-based position to explain, and the other positions of the same word."""
    tokens = scenario.tokens
    if position is not None and not 1 <= position <= len(tokens):
        raise AttnError(
            f"position {position} is outside the sentence",
            key="--position",
            expected=f"a position from 1 to {len(tokens)}",
        )
    if word is None:
        if position is None:
            raise AttnError("no word to explain", key="--word", expected="--word WORD or --position N")
        word = tokens[position - 1]
    matches = [i for i, token in enumerate(tokens, 1) if scenario.fold(token) == scenario.fold(word)]
    if not matches:
        close = difflib.get_close_matches(word, list(dict.fromkeys(tokens)), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        case = "" if scenario.case_sensitive else " (case is ignored)"
        raise AttnError(
            f"{word!r} is not a token of the scenario {scenario.name!r}{hint}",
            key="--word",
            expected=f"one of its tokens{case}: {' '.join(tokens)}",
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


def explain(result: RunResult, *, position: int, head: int = 1, others: tuple[int, ...] = ()) -> Explanation:
    """The worked example for the query at `position` (1-based) in head `head` (1-based)."""
    scenario = result.scenario
    h = result.head(head)
    i = position - 1
    r = rounder(result.round_steps)
    keys = tuple(
        KeyStep(
            position=j + 1,
            token=scenario.tokens[j],
            k=h.K[j],
            v=h.V[j],
            score=float(h.scores[i, j]),
            scaled=float(h.scaled[i, j]),
            masked=not h.visible[i, j],
            exp=float(h.exp[i, j]),
            weight=float(h.weights[i, j]),
            weighted_v=r(h.weights[i, j] * h.V[j]),  # (d_v,)
        )
        for j in range(scenario.L)
    )
    exact = result.exact.head(head).output[i] if result.exact is not None else None
    return Explanation(
        result=result,
        head=h,
        position=position,
        token=scenario.tokens[i],
        other_positions=others,
        e=result.X[i],
        q=h.Q[i],
        keys=keys,
        shift=float(h.shift[i]),
        exp_sum=float(h.exp_sum[i]),
        output=h.output[i],
        exact_output=exact,
    )
