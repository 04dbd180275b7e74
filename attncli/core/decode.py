"""Causal generation step by step with a KV cache: the data behind `attncli decode`.

Pure: takes the engine's RunResult (or a Scenario, which it runs) and lays one head's causal
self-attention out as generation does it. At step t the new token brings its q, k and v (k
and q rotated by position p = t − 1 under RoPE, so positions simply continue); k and v join
the cache; the new query meets every cached key; the weights mix the cached values.

Why the steps are taken from the full run instead of being computed again: a step's numbers
are row t of the run restricted to the cached keys. Computing the step on its own (a (1, d_k)
query against a (c, d_k) cache) gives the same value mathematically, but not always the same
float64 bits: a single-row product may be evaluated by a different BLAS kernel than the full
(L, L) one, and NumPy sums a short row of exponentials in a different grouping than the full
row with its zeros. Either would show a last-digit difference that says nothing about caching.
Taking the run's own arrays makes every step's output row t of the full run bit for bit, and
under --round-steps it keeps the one hand-rounded chain that run and explain show. The tests
recompute every step from its cache alone and find the same numbers to 1e-12, which is what
proves that the cache holds every key the query reads.

The cache holds, after step t, the keys j ≤ t that query t or a later query still reads; a key
that no later query reads leaves it (outside a sliding window, say, unless it is a sink), and
a key no query reads (padding) never stays. A scenario with a given KV cache of c tokens starts with
those c rows in the cache (as given: their k already rotated) and takes its steps at positions
c + 1 … c + L. Dimension names:
    L    tokens (L_q = L_k − c: decoding is self-attention; c keys given in a cache, 0 without)
    c    keys in the cache at a step
    d_k  width of a query/key         d_v  width of a value
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from attncli.core import engine
from attncli.core.engine import RunResult
from attncli.core.scenario import Scenario
from attncli.core.variants import GivenScores, Retention
from attncli.errors import AttnError, option

Array = npt.NDArray[np.float64]
Positions = npt.NDArray[np.int64]
Flags = npt.NDArray[np.bool_]
AnyArray = TypeVar("AnyArray", bound=npt.NDArray[np.generic])

MAX_CACHED_NUMBERS = 32 * 2**20  # every step keeps its own copy of the cache: L²/2 rows of K and V in all


class DecodeStep(NamedTuple):
    """Generation step t: the new token, the cache it joins, and its attention over the cache."""

    position: int  # t, from 1; RoPE turns the new q and k by p = t − 1
    token: str
    label: str  # the token, with its position when the word repeats
    q: Array  # (d_k,) the new query as it meets the keys (rotated under RoPE)
    k: Array  # (d_k,) the new key as it is cached (rotated under RoPE)
    v: Array  # (d_v,) the new value
    cache: Positions  # (c,) positions of the cached keys after the new one joined, from 1, in order
    dropped: Positions  # (·,) positions that leave the cache at this step: no query from t on reads them
    K: Array  # (c, d_k) the cached keys
    V: Array  # (c, d_v) the cached values
    visible: Flags  # (c,) False for a cached key this query does not read (only an explicit mask matrix does that)
    scores: Array  # (c,) q·k for each cached key
    logits: Array  # (c,) scores / divisor + bias and ALiBi: what the softmax sees
    weights: Array  # (c,) the softmax over the visible cached keys; 0 where not visible
    output: Array  # (d_v,) weights·V: row t of the full run's head output, bit for bit


class Recurrent(NamedTuple):
    """Linear attention or retention step by step in its recurrent form: a state of fixed size instead of a growing cache."""

    states: tuple[Array, ...]  # L of (d_k, d_v): S_t = S_{t−1} + φ(k_t)ᵀ v_t, or γ·S_{t−1} + k_tᵀ v_t
    normalisers: tuple[Array, ...] | None  # L of (d_k,): z_t = z_{t−1} + φ(k_t) (linear attention); None under retention
    outputs: Array  # (L, d_v) out_t = φ(q_t)·S_t / φ(q_t)·z_t, or q_t·S_t: the recurrent form's own outputs


class Decode(NamedTuple):
    """One head's causal self-attention as L generation steps."""

    result: RunResult
    head: int  # the query head, from 1
    kv_head: int  # the key/value head whose cache it reads, from 1 (grouped-query attention)
    steps: tuple[DecodeStep, ...]  # L of them, at positions c + 1 … c + L

    @property
    def cached(self) -> int:
        """c, the keys in the cache before the first step (a given KV cache; 0 without)."""
        return self.result.scenario.cached
    recurrent: Recurrent | None = None  # attention without softmax: the fixed-size state that replaces the KV cache; None with a softmax
    before: RunResult | None = None  # the run of the first s − 1 tokens whose rows steps 1 … s − 1 are (longrope's short factors); None
    switched: int | None = None  # s: the step where RoPE changes its factors and every cached key is computed again; None

    @property
    def scenario(self) -> Scenario:
        return self.result.scenario


def causal_version(scenario: Scenario) -> tuple[Scenario, bool]:
    """The scenario with the causal rule added to its mask (generation cannot see ahead), and whether it had to be added.

    A window, sinks and padding stay as they are; an explicit mask matrix is left alone
    (decode then refuses it if it lets a query see a later key).
    """
    mask = scenario.mask
    if mask.causal or mask.matrix is not None or scenario.cross:
        return scenario, False
    causal = replace(mask, causal=True)
    blind = np.flatnonzero(~causal.visible(scenario.L, scenario.L_k).any(axis=1))  # queries (from 0) the causal rule leaves with no key
    if blind.size:
        i = int(blind[0]) + 1
        raise AttnError(
            f"query {i} ({scenario.tokens[i - 1]!r}) would see no key at all once decoding makes the mask causal: "
            "its softmax has nothing to weigh",
            file=scenario.path,
            key="mask",
            expected="a mask that leaves every query at least one of the keys before it (padding after the first key)",
        )
    return replace(scenario, mask=replace(mask, causal=True)), True


def decode(source: RunResult | Scenario, head: int, *, before: RunResult | None = None) -> Decode:
    """Head `head` (from 1) of a causal self-attention scenario, step by step with a KV cache.

    With `before`, the run of the first s − 1 tokens as the model computed them while the sequence was that short
    (Phi-3's longrope: the short factors up to original_max_position_embeddings = s − 1 tokens), steps 1 … s − 1 are
    its rows; at step s the model switches to the factors of the whole run and computes every cached key again with
    them (transformers drops the cache there), so steps s … L are the whole run's rows.
    """
    result = source if isinstance(source, RunResult) else engine.run(source)
    scenario = result.scenario
    scenario.head_numbers(head)  # refuses a head that does not exist
    if scenario.encoder is not None:
        raise AttnError(
            f"decode needs a model that generates, but {scenario.encoder} is an encoder: every token sees the whole text "
            "at once, so it has no KV cache to build",
            key="model",
            expected="a decoder checkpoint (gpt2, llama, qwen2, mistral) or an encoder–decoder's decoder, or run/explain for this one",
        )
    if scenario.cross and scenario.origin is not None and scenario.origin.attention is None:  # one stack: KV sharing (Gemma 3n)
        raise AttnError(
            "decode builds a layer's own KV cache step by step, but this layer makes no keys or values: it reuses an earlier "
            "layer's (KV sharing)",
            key="layer" if scenario.path is not None else option("layer"),
            expected="a layer that makes its own keys and values (model info names the layers that reuse another's)",
        )
    if scenario.cross:  # a checkpoint's cross-attention was asked for by `attention`, a scenario's by its `context`
        checkpoint = scenario.origin is not None
        raise AttnError(
            "decode needs self-attention: in cross-attention the keys come from the context, not from generated tokens",
            key=("attention" if scenario.path is not None else option("attention")) if checkpoint else "context",  # a file's key, or the flag
            expected="attention: decoder, the decoder's self-attention" if checkpoint else "a scenario without a context",
        )
    if scenario.variant(GivenScores) is not None:
        raise AttnError(
            "decode shows each new token's q meeting the cached k, but the scores are given directly: there is no q and no k to cache",
            key="scores",
            expected="run or explain for given scores, or Q, K and V (or embeddings and weights) to decode",
        )
    h = result.head(head)
    visible = h.visible  # (L, c + L): query row r is at position c + r + 1
    c = scenario.cached
    ahead = np.argwhere(np.triu(visible, 1 + c))  # (·, 2) pairs where a query sees a later key
    if ahead.size:
        i, j = int(ahead[0][0]) + 1 + c, int(ahead[0][1]) + 1
        raise AttnError(
            f"decode needs a causal mask: query {i} sees key {j}, which comes after it",
            key="mask",
            expected="mask: causal (with any window, sinks or padding)",
        )
    L_k = visible.shape[1]  # c + L
    read_until = np.where(visible.any(axis=0), L_k - np.argmax(visible[::-1], axis=0), 0)  # (c + L,) last query (position) reading key j
    positions = np.arange(1, L_k + 1)  # (c + L,)
    joined = np.maximum(positions, c + 1)  # (c + L,) the step each key is first held at: a given cache's keys at step c + 1
    cached = int(np.maximum(read_until - joined + 1, 0).sum())  # rows of K and V held over all steps
    if cached * (scenario.d_k + scenario.d_v) > MAX_CACHED_NUMBERS:
        raise AttnError(
            f"decoding {L_k - c} tokens holds {cached:,} cached rows of K and V across its steps, "
            f"more than the {MAX_CACHED_NUMBERS:,} numbers decode keeps",
            key="tokens",
            expected="a shorter sentence (a few hundred tokens), or `run` for the whole causal head at once",
        )
    switched = None if before is None else _switch(result, before, head)
    early = None if before is None else before.head(head)  # the head as the first s − 1 tokens computed it
    steps = []
    for t in range(c + 1, L_k + 1):
        row = t - c - 1  # the query's row
        cache = positions[(positions <= t) & (read_until >= t)]  # (c,)
        was = positions[:c] if t == c + 1 else positions[(positions < t) & (read_until >= t - 1)]  # (·,) the cache after step t − 1
        dropped = np.setdiff1d(np.append(was, t), cache)  # (·,)
        columns = cache - 1  # (c,)
        h = early if early is not None and switched is not None and t < switched else result.head(head)  # the numbers of this step
        steps.append(
            DecodeStep(
                position=t,
                token=scenario.tokens[row],
                label=scenario.query_labels[row],
                q=h.q[row],
                k=h.k[t - 1],
                v=h.values[t - 1],
                cache=_frozen(cache.astype(np.int64)),
                dropped=_frozen(dropped.astype(np.int64)),
                K=_frozen(h.k[columns]),  # (c, d_k)
                V=_frozen(h.values[columns]),  # (c, d_v)
                visible=_frozen(visible[row, columns]),  # (c,)
                scores=_frozen(h.scores[row, columns]),  # (c,)
                logits=_frozen(h.logits[row, columns]),  # (c,)
                weights=_frozen(h.weights[row, columns]),  # (c,)
                output=h.output[row],  # (d_v,) read-only in the result already
            )
        )
    h = result.head(head)
    return Decode(result, head, h.kv_head, tuple(steps), _recurrent(result, head), before, switched)


def _switch(result: RunResult, before: RunResult, head: int) -> int:
    """s, the first step of the whole run's numbers: `before` must be a causal run of the scenario's first s − 1 tokens."""
    scenario, early = result.scenario, before.scenario
    s = early.L + 1
    same = (early.tokens == scenario.tokens[: early.L] and early.L < scenario.L and not early.cached and not scenario.cached
            and (early.heads, early.G, early.d_k, early.d_v) == (scenario.heads, scenario.G, scenario.d_k, scenario.d_v)
            and early.mask.causal and before.round_steps == result.round_steps)  # fmt: skip
    if not same:
        raise AttnError(
            f"the run before the switch has {early.L} tokens that are not the first tokens of the {scenario.L} decoded",
            key="before",
            expected="a causal run of the decoded scenario's first tokens, with the same heads and rounding",
        )
    early.head_numbers(head)
    return s


def _recurrent(result: RunResult, head: int) -> Recurrent | None:
    """The recurrent form of a head without softmax (its plain causal mask checked); None for a softmax head."""
    from attncli.core.variants.delta import DeltaRule
    from attncli.core.variants.linear import LinearAttention, recurrent

    s = result.scenario
    other = next((v for v in s.variants if v.stage == "kernel" and not isinstance(v, LinearAttention | Retention | DeltaRule)), None)
    if other is not None:  # a kernel whose state decode does not know
        raise AttnError(f"decode of {other.key} is not built yet: explain shows its state's step for one token", key=other.key,
                        expected="attncli explain (or run) of this scenario")  # fmt: skip
    rule = s.variant(DeltaRule)
    if rule is not None:  # its own check of the mask ran in the run: a plain causal mask over the sentence's own keys
        t = result.head(head).kernel
        assert t is not None and t.phi_q is not None and t.phi_k is not None
        states, outputs = rule.recurrent(head, t.phi_q, t.phi_k, result.head(head).V, s.scale.divisor)
        return Recurrent(tuple(_frozen(S) for S in states), None, _frozen(outputs))
    kernel = s.variant(LinearAttention) or s.variant(Retention)
    if kernel is None:
        return None
    mask = s.mask
    if mask.window is not None or mask.sinks or mask.padding or mask.matrix is not None:
        raise AttnError(
            f"decode shows {kernel.key}'s recurrent state, which sums every earlier token: a window, sinks, padding or a mask matrix "
            "would need a state per query",
            key="mask",
            expected="mask: causal (or none: decoding makes it causal)",
        )
    h = result.head(head)
    q = h.q if isinstance(kernel, LinearAttention) else h.q / s.scale.divisor  # (L, d_k) retention scales q·k by the divisor
    c = s.cached  # a given cache: its c keys and values enter the state before the first step, which has no query of theirs
    q = np.concatenate([np.repeat(q[:1], c, axis=0), q]) if c else q  # (c + L, d_k) the cached rows' outputs are dropped below
    with np.errstate(all="ignore"):  # a dropped cached row may divide 0 by 0; the kept rows are the run's, checked there
        states, outputs = recurrent(kernel, head, q, h.k, h.values)
    normalisers = None
    if isinstance(kernel, LinearAttention) and h.kernel is not None and h.kernel.phi_k is not None:
        normalisers = tuple(_frozen(z) for z in np.cumsum(h.kernel.phi_k, axis=0)[c:])  # (d_k,) each
    return Recurrent(tuple(_frozen(S) for S in states[c:]), normalisers, _frozen(outputs[c:]))


def _frozen(array: AnyArray) -> AnyArray:
    """The array (a fresh copy from fancy indexing), read-only."""
    array.setflags(write=False)
    return array
