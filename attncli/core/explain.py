"""One query word followed through the arithmetic: the data behind `attncli explain`.

Pure: takes the engine's RunResult and picks out (and, for the weighted values, computes)
what a hand calculation writes down for one row of one head.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attncli.core.arithmetic import EXACT_FROM, finite, no_shift, rounder, row_shift, weighted_sum
from attncli.core.engine import HeadResult, RunResult, head_inputs, score_bias
from attncli.core.scenario import Scenario
from attncli.errors import AttnError

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
    exact = result.exact.head(head) if result.exact is not None else None
    return _explanation(result, result.head(head), exact, position=position, row=position - 1, others=others, block_size=block_size)


def explain_scenario(
    scenario: Scenario, *, position: int, head: int = 1, round_steps: int | None = None, others: tuple[int, ...] = (),
    block_size: int | None = None,
) -> Explanation:
    """`explain(engine.run(scenario, round_steps=...), ...)`, the same numbers bit for bit, holding far less.

    Each head's tokens × tokens stages are computed in one buffer, in place, and only the
    query's row of each is kept (the full score product is still computed: a one-row product
    can differ in the last bits). The heads' outputs, small, are kept whole for W_O.
    """
    i = position - 1
    result, h = _row_run(scenario, head, i, round_steps)
    exact = None
    if round_steps is not None:
        exact_result, exact = _row_run(scenario, head, i, None)
        result = RunResult(scenario, result.X, result.X_kv, result.heads, result.concat, result.output, round_steps, exact_result)
    return _explanation(result, h, exact, position=position, row=0, others=others, block_size=block_size)


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
            e=None if keys_X is None else keys_X[j],
            k=h.k[j],
            k_raw=h.K[j],
            v=h.V[j],
            score=float(scores[j]),
            scaled=float(scaled[j]),
            bias=None if bias is None else float(bias[j]),
            logit=float(logits[j]),
            masked=not visible[j],
            why=s.mask.why_hidden(i + 1, j + 1) if not visible[j] else s.mask.why_seen(i + 1, j + 1),
            exp=float(exps[j]),
            weight=float(weights[j]),
            weighted_v=r(weights[j] * h.V[j]),  # (d_v,)
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
        online=None if block_size is None else _online(h, row, block_size, result.round_steps),
        exact_online=None if block_size is None or exact is None else _online(exact, row, block_size, None),
    )


ROWS_AT_ONCE = 256  # row_shift works on this many rows at a time: its temporary stays small


def _row_run(s: Scenario, head: int, i: int, decimals: int | None) -> tuple[RunResult, HeadResult]:
    """engine.run's result for what explain needs: every head's output and, of head `head`, row i of each stage.

    The same operations as engine._head, in the same order, with the same overflow checks;
    the RunResult's `heads` holds only that head, whose tokens × tokens stages have the one row.
    """
    with np.errstate(all="ignore"):  # overflow is caught by `finite` after each stage, as in engine.run
        return _row_run_quietly(s, head, i, decimals)


def _row_run_quietly(s: Scenario, head: int, i: int, decimals: int | None) -> tuple[RunResult, HeadResult]:
    r = rounder(decimals)

    def r_in_place(a: np.ndarray) -> np.ndarray:  # engine.rounder's numbers, without a second L × L array
        if decimals is not None:
            huge = ~(np.abs(a) < EXACT_FROM)  # whole already (and ±inf, NaN): kept as they are
            kept = a[huge]
            np.round(a, decimals, out=a)
            a += 0.0  # -0.0 becomes 0.0
            a[huge] = kept
        return a

    X = None if s.X is None else r(np.asarray(s.X, dtype=np.float64))  # (L_q, d_model)
    X_kv = None if s.X_kv is None else r(np.asarray(s.X_kv, dtype=np.float64))  # (L_k, d_model)
    queries = s.tokens
    kv_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    outputs: list[np.ndarray] = []
    kept: HeadResult | None = None
    for h in range(1, s.heads + 1):
        inputs = head_inputs(s, h, X, X_kv, r, kv_cache)  # the engine's own, bit for bit
        Q, K, V, Q_rope, K_rope = inputs.Q, inputs.K, inputs.V, inputs.Q_rope, inputs.K_rope
        L_q, L_k = Q.shape[0], K.shape[0]
        q, k = (Q, K) if Q_rope is None else (Q_rope, K_rope)
        stage = finite(r_in_place(q @ k.T), "scores", "Q·Kᵀ", s, h, queries)  # type: ignore[union-attr]  # (L_q, L_k); later stages overwrite it
        rows = {"scores": stage[i].copy()}
        np.divide(stage, s.scale.divisor, out=stage)
        rows["scaled"] = finite(r_in_place(stage), "scaled", "Q·Kᵀ / divisor", s, h, queries)[i].copy()
        bias = score_bias(s, h, L_q, L_k)  # (L_q, L_k) or None
        bias_row = None
        if bias is not None:
            finite(bias, "bias", "the bias B", s, h, queries)
            stage += bias
            bias_row = bias[i].copy()
            del bias
            rows["biased"] = finite(r_in_place(stage), "bias", "the scaled scores + B", s, h, queries)[i].copy()
        shift_free = no_shift(stage.max(), stage.min(), L_k)  # as engine._head: every row's shift is 0
        visible = s.mask.visible(L_q, L_k)  # (L_q, L_k)
        np.copyto(stage, -np.inf, where=~visible)  # the masked logits
        rows["masked"] = stage[i].copy()
        if shift_free:
            shift = np.zeros(L_q)  # (L_q,) and stage - 0.0 is stage itself
        else:
            shift = r(np.concatenate([row_shift(stage[a : a + ROWS_AT_ONCE], visible[a : a + ROWS_AT_ONCE]) for a in range(0, L_q, ROWS_AT_ONCE)]))
            stage -= shift[:, None]
        np.exp(stage, out=stage)
        rows["exp"] = r_in_place(stage)[i].copy()
        exp_sum = r(stage.sum(axis=1))  # (L_q,)
        if decimals is not None and not exp_sum.all():
            zero = int(np.flatnonzero(exp_sum == 0)[0])
            raise AttnError(
                f"head {h}, query {zero + 1} ({s.tokens[zero]!r}): every exponential of its row rounds to 0 at {decimals} decimals, "
                "so the weights would divide by a sum of 0",
                key="--round-steps",
                expected="more decimals, e.g. --round-steps 4",
            )
        stage /= exp_sum[:, None]
        rows["weights"] = r_in_place(stage)[i].copy()
        output = finite(weighted_sum(stage, V, decimals), "output", "weights·V", s, h, queries)  # (L_q, d_v)
        del stage
        outputs.append(output)
        if h == head:
            one = {key: value[None, :] for key, value in rows.items()}  # (1, L_k) each
            n = inputs
            kept = HeadResult(
                h, n.kv_head, n.W_Q, n.W_K, n.W_V, n.b_Q, n.b_K, n.b_V, Q, K, V, Q_rope, K_rope, one["scores"], one["scaled"],
                None if bias_row is None else bias_row[None, :], one.get("biased"), visible[i][None, :].copy(), one["masked"],
                shift[i : i + 1].copy(), one["exp"], exp_sum[i : i + 1].copy(), one["weights"], output,
            )  # fmt: skip
        del visible
    assert kept is not None
    concat = np.hstack(outputs)  # (L_q, H*d_v)
    final = concat
    if s.W_O is not None:
        final = finite(r(final @ s.W_O), "output", "concat·W_O", s, None, queries)  # (L_q, d_out)
    if s.b_O is not None:
        final = finite(r(final + s.b_O), "output", "concat·W_O + b_O", s, None, queries)
    return RunResult(s, X, X_kv, (kept,), concat, final), kept


def _online(h: HeadResult, i: int, block_size: int, round_to: int | None) -> OnlineRow:
    """Row i of head h computed by the online softmax, keys in blocks of block_size."""
    from attncli.core.online import online_row  # only with --block-size

    return online_row(h.logits[i], h.visible[i], h.V, block_size=block_size, round_to=round_to)
