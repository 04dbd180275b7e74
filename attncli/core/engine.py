"""The attention engine: softmax(mask(RoPE(Q)·RoPE(K)ᵀ / s + bias))·V with every stage kept.

Pure NumPy in float64: no printing, no I/O. One head, in order: Q, K, V → QK-norm → RoPE on q and k →
what acts after RoPE (QK-norm there) → scores q·kᵀ → ÷ divisor → × a query temperature → soft-cap → + bias
+ ALiBi → mask → softmax → ·V; then the heads side by side → ·W_O + b_O. `attention_head` holds the formula; the variants come from the registry
(core.variants) by stage, and how each stage is rounded, checked and kept from core.arithmetic.
Dimension names used in the shape comments:
    L_q     query tokens             L_k   key/value tokens (L_q = L_k in self-attention)
    d_model width of an embedding     H     query heads        G   key/value heads
    d_k     width of a query/key in one head                   d_v width of a value in one head
    d_out   width of the final output (d_out = H·d_v without W_O)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import field
from typing import Any, NamedTuple

import numpy as np

from attncli.core import variants
from attncli.core.arithmetic import Arithmetic, Rounder, finite, rounder
from attncli.core.records import record
from attncli.core.scenario import Scenario
from attncli.core.variants import KvCache, Mla, Rope
from attncli.core.variants.gates import Gated
from attncli.core.variants.linear import KernelHead
from attncli.core.variants.mla import Latent, MlaHead
from attncli.core.variants.positions import Turned
from attncli.errors import AttnError


class Normed(NamedTuple):
    """q and k after a "norm" variant (QK-norm), with the mean square each row was divided by."""

    q: np.ndarray  # (L_q, d_k)
    k: np.ndarray  # (L_k, d_k)
    q_mean_square: np.ndarray  # (L_q,) mean(q²) of each query row (over the head, or the whole projection)
    k_mean_square: np.ndarray  # (L_k,)


@record
class HeadResult:
    """Every stage of one attention head."""

    head: int  # 1-based, as people count heads
    kv_head: int  # 1-based: the key/value head this query head reads (grouped-query attention)
    W_Q: np.ndarray | None  # (d_model, d_k) this head's block of columns; None when Q/K/V are given
    W_K: np.ndarray | None  # (d_model, d_k) of its key/value head
    W_V: np.ndarray | None  # (d_model, d_v)
    b_Q: np.ndarray | None  # (d_k,)
    b_K: np.ndarray | None  # (d_k,)
    b_V: np.ndarray | None  # (d_v,)
    Q: np.ndarray  # (L_q, d_k) X·W_Q + b_Q
    K: np.ndarray  # (L_k, d_k)
    V: np.ndarray  # (L_k, d_v)
    Q_rope: np.ndarray | None  # (L_q, d_k) Q rotated by position; None without RoPE
    K_rope: np.ndarray | None  # (L_k, d_k)
    scores: np.ndarray  # (L_q, L_k) row i = query i, column j = key j
    scaled: np.ndarray  # (L_q, L_k) scores / divisor
    bias: np.ndarray | None  # (L_q, L_k) what is added to the scaled scores (bias + ALiBi); None without
    biased: np.ndarray | None  # (L_q, L_k) scaled + bias
    visible: np.ndarray  # (L_q, L_k) bool, False where the mask hides a key
    masked: np.ndarray  # (L_q, L_k) the logits, with -inf where hidden
    shift: np.ndarray  # (L_q,) subtracted before exp; 0 unless a row's scores are extreme
    exp: np.ndarray  # (L_q, L_k) e^(masked - shift), 0 where hidden
    exp_sum: np.ndarray  # (L_q,) row sums of exp (+ sink_exp under a learned sink)
    weights: np.ndarray  # (L_q, L_k) exp / exp_sum; each row sums to 1 (to 1 - sink_weight under a learned sink)
    output: np.ndarray  # (L_q, d_v) weights·V
    reshaped: dict[str, np.ndarray] = field(default_factory=dict)  # variant key -> (L_q, L_k) the scaled scores after it (soft-capping)
    sink_exp: np.ndarray | None = None  # (L_q,) e^(sink - shift), a learned sink's term of exp_sum (gpt-oss); None without
    sink_weight: np.ndarray | None = None  # (L_q,) sink_exp / exp_sum: the weight the sink took; the row's weights sum to 1 minus it
    normed: dict[str, Normed] = field(default_factory=dict)  # "norm" variant key -> q and k after it (QK-norm), before RoPE
    mla: MlaHead | None = None  # multi-head latent attention: the head's up-projections and its absorbed form; None without
    kernel: KernelHead | None = None  # attention without softmax (linear attention, retention): its own stages; None with the softmax
    gated: dict[str, Gated] = field(default_factory=dict)  # "output" variant key -> its factor and the output after it (a gate)
    value_normed: np.ndarray | None = None  # (L_k, d_v) V after the "value" variant (Gemma 3n's v_norm), which the weights meet; None without
    turned: dict[str, Turned] = field(default_factory=dict)  # "rotated" variant key -> q and k after it (QK-norm after RoPE)

    @property
    def final(self) -> np.ndarray:
        """(L_q, d_v) what this head hands the concatenation: its output after every "output" variant (a gate), else the output."""
        return list(self.gated.values())[-1].output if self.gated else self.output

    def __repr__(self) -> str:
        """`<HeadResult 1 (key/value head 1): Q (6, 2), K (6, 2), V (6, 2), weights (6, 6), output (6, 2)>`: its stages' shapes."""
        shapes = ", ".join(f"{name} {tuple(getattr(self, name).shape)}" for name in ("Q", "K", "V", "weights", "output"))
        return f"<{type(self).__name__} {self.head} (key/value head {self.kv_head}): {shapes}>"

    @property
    def values(self) -> np.ndarray:
        """(L_k, d_v) the values the weights meet: after a "value" variant (v_norm), else V."""
        return self.V if self.value_normed is None else self.value_normed

    @property
    def logits(self) -> np.ndarray:
        """(L_q, L_k) what the mask and the softmax see: the scaled scores, reshaped by any variant, plus any bias."""
        if self.biased is not None:
            return self.biased
        return list(self.reshaped.values())[-1] if self.reshaped else self.scaled

    @property
    def q(self) -> np.ndarray:
        """(L_q, d_k) the queries that meet the keys: normalised under QK-norm, rotated when RoPE is on, then after any "rotated" variant."""
        return list(self.turned.values())[-1].q if self.turned else self.rotated_q

    @property
    def k(self) -> np.ndarray:
        """(L_k, d_k) the keys the queries meet."""
        return list(self.turned.values())[-1].k if self.turned else self.rotated_k

    @property
    def rotated_q(self) -> np.ndarray:
        """(L_q, d_k) the queries as RoPE leaves them (as QK-norm leaves them without RoPE): what a "rotated" variant meets."""
        return self.normed_q if self.Q_rope is None else self.Q_rope

    @property
    def rotated_k(self) -> np.ndarray:
        """(L_k, d_k) the keys as RoPE leaves them."""
        return self.normed_k if self.K_rope is None else self.K_rope

    @property
    def normed_q(self) -> np.ndarray:
        """(L_q, d_k) the queries RoPE turns: after QK-norm, else Q."""
        return list(self.normed.values())[-1].q if self.normed else self.Q

    @property
    def normed_k(self) -> np.ndarray:
        """(L_k, d_k) the keys RoPE turns: after QK-norm, else K."""
        return list(self.normed.values())[-1].k if self.normed else self.K


SOFTMAX_STAGES = ("scores", "scaled", "bias", "biased", "visible", "masked", "shift", "exp", "exp_sum", "weights", "output", "sink_exp", "sink_weight")
"""The stages `attention_head` keeps (Arithmetic.kept), each a HeadResult field of its name."""


@record
class RunResult:
    """The whole computation for a scenario."""

    scenario: Scenario
    X: np.ndarray | None  # (L_q, d_model); None when Q/K/V are given
    X_kv: np.ndarray | None  # (L_k, d_model) the context's embeddings in cross-attention, else None
    heads: tuple[HeadResult, ...]  # H of them
    concat: np.ndarray  # (L_q, H*d_v) the heads' outputs side by side
    output: np.ndarray  # (L_q, d_out) concat·W_O + b_O, or concat
    round_steps: int | None = None  # decimals every intermediate was rounded to, as by hand
    exact: RunResult | None = None  # the same run without rounding, when round_steps is set
    rows: tuple[int, ...] | None = None  # query rows (from 0) each head's tokens × tokens stages hold; None: all
    mla: Latent | None = None  # multi-head latent attention: the latents and the rotary key all heads share; None without
    kept: tuple[int, ...] | None = None  # the heads (from 1) whose tokens × tokens stages are held; the others' hold no row; None: all

    def head(self, number: int) -> HeadResult:
        """Head `number`, counted from 1."""
        return self.heads[number - 1]

    def holds(self, number: int) -> bool:
        """Whether head `number`'s tokens × tokens stages are held (run(…, heads=…) computed the others for their outputs only)."""
        return self.kept is None or number in self.kept

    def __repr__(self) -> str:
        """`<RunResult of 'cat': 6 tokens, 1 head>`, and the hand rounding if any: what it holds, not its numbers."""
        rounded = f", rounded to {self.round_steps} decimals" if self.round_steps is not None else ""
        return f"<RunResult of {self.scenario.name!r}: {self.scenario.L} tokens, {len(self.heads)} head{'s' * (len(self.heads) > 1)}{rounded}>"




def run(
    scenario: Scenario, *, round_steps: int | None = None, rows: Sequence[int] | None = None, heads: Sequence[int] | None = None
) -> RunResult:
    """Compute every stage; with round_steps, round each intermediate before the next step uses it.

    With `rows` (query rows, from 0), each head's tokens × tokens stages keep only those rows
    (the same numbers, computed in place in one buffer: explain's lean path); outputs stay whole.
    With `heads` (from 1), only those heads keep their tokens × tokens stages: every other head is
    computed in one buffer, in place, for its output (the concatenation needs it) and keeps no row
    of them, so a layer holds the cells of the heads shown, not of all H. Every number is the same.
    A stage whose numbers leave float64's range (±1.8e308) is an AttnError naming the stage,
    the head and the row, never an inf or NaN in the result (nor a numpy warning).
    """
    kept = None if rows is None else tuple(rows)
    held = None if heads is None else tuple(sorted(set(heads)))
    with np.errstate(all="ignore"):  # overflow is caught by `finite` after each stage, with a clear message
        exact = _run(scenario, None, kept, held)
        if round_steps is None:
            return exact
        rounded = _run(scenario, round_steps, kept, held)
    return dataclasses.replace(rounded, round_steps=round_steps, exact=exact)




def _run(scenario: Scenario, decimals: int | None, rows: tuple[int, ...] | None, held: tuple[int, ...] | None = None) -> RunResult:
    r = rounder(decimals)
    X = None if scenario.X is None else r(np.asarray(scenario.X, dtype=np.float64))  # (L_q, d_model)
    X_kv = None if scenario.X_kv is None else r(np.asarray(scenario.X_kv, dtype=np.float64))  # (L_k, d_model)
    kv_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # kv head -> (K, V), shared by its query heads
    wholes: dict[str, np.ndarray] = {}  # "q", "k" -> the whole projection, computed once when QK-norm spans all heads
    try:
        mla = scenario.variant(Mla)
        latent = None if mla is None or X is None else mla.latent(X, X if X_kv is None else X_kv, scenario.variant(Rope), r)
    except AttnError as error:  # a latent's RMSNorm that would divide 0 by 0 knows its key, not the file
        raise error.located(file=scenario.path) from None
    heads = tuple(
        _head(scenario, X, X_kv, h, Arithmetic(scenario, h, decimals, rows if held is None or h in held else ()), kv_cache, wholes, latent)
        for h in range(1, scenario.heads + 1)
    )  # a head not held: its stages in one buffer, in place, no row kept (its output whole)
    concat = np.hstack([head.final for head in heads])  # (L_q, H*d_v) each head's output, after its gate if any
    output = concat
    if scenario.W_O is not None:
        output = r(output @ scenario.W_O)  # (L_q, H*d_v) @ (H*d_v, d_out) -> (L_q, d_out)
        finite(output, "output", "concat·W_O", scenario, None, scenario.tokens)
    if scenario.b_O is not None:
        output = r(output + scenario.b_O)  # (L_q, d_out)
        finite(output, "output", "concat·W_O + b_O", scenario, None, scenario.tokens)
    return RunResult(scenario=scenario, X=X, X_kv=X_kv, heads=heads, concat=concat, output=output, rows=rows, mla=latent, kept=held)


def block(matrix: np.ndarray | None, h: int, width: int) -> np.ndarray | None:
    """Columns of head h (1-based) from a matrix or vector that holds all heads side by side."""
    if matrix is None:
        return None
    part = matrix[..., (h - 1) * width : h * width]
    if part.flags.f_contiguous:  # columns of a column-major matrix (a checkpoint's, stored transposed): already whole
        return part
    # a contiguous copy: BLAS multiplies a strided column slice of a wide matrix several times slower
    return np.ascontiguousarray(part)


def project(X: np.ndarray, W: np.ndarray, b: np.ndarray | None, r: Rounder) -> np.ndarray:
    """(L, d) X·W + b, each step rounded by r."""
    projected = r(X @ W)  # (L, d_model) @ (d_model, d) -> (L, d)
    return projected if b is None else r(projected + b)


class HeadInputs(NamedTuple):
    """What a head computes before its scores: HeadResult's fields of the same names (handed on by name, `_asdict()`)."""

    kv_head: int  # g, from 1
    W_Q: np.ndarray | None  # (d_model, d_k) this head's columns; None when Q, K, V are given
    W_K: np.ndarray | None  # (d_model, d_k) its key/value head's columns
    W_V: np.ndarray | None  # (d_model, d_v)
    b_Q: np.ndarray | None  # (d_k,)
    b_K: np.ndarray | None  # (d_k,)
    b_V: np.ndarray | None  # (d_v,)
    Q: np.ndarray  # (L_q, d_k)
    K: np.ndarray  # (L_k, d_k)
    V: np.ndarray  # (L_k, d_v)
    Q_rope: np.ndarray | None  # (L_q, d_k) rotated, under RoPE
    K_rope: np.ndarray | None  # (L_k, d_k)
    normed: dict[str, Normed]  # "norm" variant key -> q and k after it (QK-norm); HeadResult's field of that name
    turned: dict[str, Turned]  # "rotated" variant key -> q and k after it (QK-norm after RoPE)
    value_normed: np.ndarray | None = None  # (L_k, d_v) V after the "value" variant (v_norm); None without


def whole_projection(s: Scenario, role: str, X: np.ndarray | None, X_kv: np.ndarray | None, r: Rounder) -> np.ndarray:
    """(L_q, H·d_k) every head's queries side by side (role "q"), or (L_k, G·d_k) every key/value head's keys ("k")."""
    if X is None:
        return r(np.asarray(s.Q if role == "q" else s.K))
    source = X if role == "q" or X_kv is None else X_kv
    return project(source, s.W_Q if role == "q" else s.W_K, s.b_Q if role == "q" else s.b_K, r)  # type: ignore[arg-type]


def head_inputs(
    s: Scenario,
    h: int,
    X: np.ndarray | None,
    X_kv: np.ndarray | None,
    r: Rounder,
    kv_cache: dict[int, tuple[np.ndarray, np.ndarray]],
    wholes: dict[str, np.ndarray] | None = None,
    latent: Latent | None = None,
) -> HeadInputs:
    """Head h's weight blocks, Q, K, V and (under RoPE) rotated Q and K; a key/value head's K and V computed once, kept in kv_cache.

    Under multi-head latent attention (`latent`, its shared part), the scenario's Mla makes them from the latents instead.
    """
    if (mla := s.variant(Mla)) is not None and latent is not None and X is not None:
        return HeadInputs(h, None, None, None, None, None, None, *mla.head_inputs(h, X, latent, s.variant(Rope), r), {}, {})
    d_k, d_v, g = s.d_k, s.d_v, s.kv_head(h)
    W_Q, W_K, W_V = block(s.W_Q, h, d_k), block(s.W_K, g, d_k), block(s.W_V, g, d_v)
    b_Q, b_K, b_V = block(s.b_Q, h, d_k), block(s.b_K, g, d_k), block(s.b_V, g, d_v)
    queries, keys = s.tokens, s.key_tokens  # what labels the rows, for an overflow's message
    if X is None and s.Q is None:  # the scores given (a "scores" variant): no q or k, only V
        Q, K, V = np.zeros((s.L, 0)), np.zeros((s.L_k, 0)), kv_cache.setdefault(g, (np.zeros((s.L_k, 0)), r(block(s.V, g, d_v))))[1]  # type: ignore[arg-type]
    elif X is None:  # Q, K and V given directly
        Q = r(block(s.Q, h, d_k))  # type: ignore[arg-type]  # (L_q, d_k)
        K, V = kv_cache.setdefault(g, (r(block(s.K, g, d_k)), r(block(s.V, g, d_v))))  # type: ignore[arg-type]
    else:
        keys_from = X if X_kv is None else X_kv  # (L_k, d_model)
        Q = finite(project(X, W_Q, b_Q, r), "q", "X·W_Q", s, h, queries)  # type: ignore[arg-type]  # (L_q, d_k)
        if g not in kv_cache:
            K = finite(project(keys_from, W_K, b_K, r), "k", "X·W_K", s, h, keys)  # type: ignore[arg-type]  # (L_k, d_k)
            V = finite(project(keys_from, W_V, b_V, r), "v", "X·W_V", s, h, keys)  # type: ignore[arg-type]  # (L_k, d_v)
            kv_cache[g] = (K, V)
        K, V = kv_cache[g]  # (L_k, d_k), (L_k, d_v)
    normed: dict[str, Normed] = {}
    q, k = Q, K
    for variant in variants.active(s, "norm"):  # QK-norm: q and k divided by their rms, times a weight
        whole: dict[str, np.ndarray | None] = {"q": None, "k": None}
        if variant.whole:  # over the whole projection (OLMo 2): every head's numbers give the rms
            wholes = {} if wholes is None else wholes
            for role in whole:
                if role not in wholes:
                    wholes[role] = whole_projection(s, role, X, X_kv, r)  # (L, H·d_k or G·d_k)
                whole[role] = wholes[role]
        with np.errstate(invalid="ignore", divide="ignore"):  # 0/0 of an all-zero row under ε = 0: refused just below
            q_hat, q_ms = variant.normalise(q, "q", h, whole["q"])
            k_hat, k_ms = variant.normalise(k, "k", g, whole["k"])
        variant.refuse_zero_rms(q_ms, "q", s.path, h, queries)
        variant.refuse_zero_rms(k_ms, "k", s.path, h, keys)
        q = finite(r(q_hat), variant.key, f"{variant.symbol}(Q)", s, h, queries)  # (L_q, d_k)
        k = finite(r(k_hat), variant.key, f"{variant.symbol}(K)", s, h, keys)  # (L_k, d_k)
        normed[variant.key] = Normed(q, k, q_ms, k_ms)
    value_normed = None
    for variant in variants.active(s, "value"):  # v_norm: each value row divided by its rms (no weight)
        values = V if value_normed is None else value_normed  # (L_k, d_v)
        variant.refuse_zero_rms(values, s.path, h, keys)
        with np.errstate(invalid="ignore", divide="ignore", under="ignore"):  # a mean(v²) that underflows to 0: refused by `finite`
            value_normed = finite(r(variant.normalise(values)), variant.key, "V / rms(V)", s, h, keys)
    Q_rope = K_rope = None
    for variant in variants.active(s, "qk"):  # RoPE: q and k turned by position p = 0, 1, ...
        q, k = (q, k) if Q_rope is None or K_rope is None else (Q_rope, K_rope)
        Q_rope = finite(r(variant.apply(q, np.arange(q.shape[0]))), variant.key, f"{variant.symbol}(Q)", s, h, queries)  # (L_q, d_k)
        K_rope = finite(r(variant.apply(k, np.arange(k.shape[0]))), variant.key, f"{variant.symbol}(K)", s, h, keys)  # (L_k, d_k)
    turned: dict[str, Turned] = {}
    q, k = (q, k) if Q_rope is None or K_rope is None else (Q_rope, K_rope)
    for variant in variants.active(s, "rotated"):  # after RoPE: QK-norm there (Llama 4, Hunyuan), a query temperature (Llama 4's NoPE layers)
        with np.errstate(invalid="ignore", divide="ignore"):  # 0/0 of an all-zero row under ε = 0: refused by the variant
            made = variant.turn(q, k, h, g, np.arange(q.shape[0]), np.arange(k.shape[0]), s.path, queries, keys)
        q = finite(r(made.q), variant.key, f"{variant.symbol}(Q)", s, h, queries)  # (L_q, d_k)
        k = finite(r(made.k), variant.key, f"{variant.symbol}(K)", s, h, keys)  # (L_k, d_k)
        turned[variant.key] = Turned(q, k, made.q_measure, made.k_measure)
    if (cache := s.variant(KvCache)) is not None:  # a given KV cache: its rows (keys as the queries meet them: after QK-norm and RoPE) come first
        K_cached, V_cached = (r(part) for part in cache.head_rows(g, d_k, d_v))  # (c, d_k), (c, d_v)
        K, V = np.vstack([K_cached, K]), np.vstack([V_cached, V])  # (c + L, d_k), (c + L, d_v)
        value_normed = None if value_normed is None else np.vstack([V_cached, value_normed])  # (c + L, d_v) cached as the weights meet them
        K_rope = None if K_rope is None else np.vstack([K_cached, K_rope])  # (c + L, d_k)
        unknown = np.full(K_cached.shape[0], np.nan)  # (c,) a cached key's mean square before the norm: the cache holds k̂, not k
        normed = {key: Normed(n.q, np.vstack([K_cached, n.k]), n.q_mean_square, np.concatenate([unknown, n.k_mean_square]))
                  for key, n in normed.items()}  # fmt: skip
        turned = {key: Turned(t.q, np.vstack([K_cached, t.k]), t.q_measure, np.concatenate([unknown, t.k_measure])) for key, t in turned.items()}
    return HeadInputs(g, W_Q, W_K, W_V, b_Q, b_K, b_V, Q, K, V, Q_rope, K_rope, normed, turned, value_normed)


def attention_head(
    q: np.ndarray, k: np.ndarray, V: np.ndarray, reshapes: Sequence[Any], bias: np.ndarray | None, visible: np.ndarray, divisor: float,
    a: Arithmetic, sink: float | None = None, given: np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """(L_q, d_v) softmax(mask(reshape(q·kᵀ / divisor) + bias))·V for one head; `a` rounds, checks and keeps each stage.

    With `sink` (the registry's "denominator" variant, a learned sink logit), e^(sink - shift) joins each row's sum and
    takes its share of the weight without a value; the shift rule then counts the sink as one more logit of every row.
    With `given` (the registry's "scores" variant: a new (L_q, L_k) array), the scores are those instead of q·kᵀ.
    """
    scores = a.stage("scores", q @ k.T if given is None else given)  # (L_q, d_k) @ (d_k, L_k) -> (L_q, L_k), or as given
    logits = a.stage("scaled", np.divide(scores, divisor, out=a.reuse(scores)))  # (L_q, L_k)
    for variant in reshapes:  # (L_q, L_k) the registry's "scaled" variants, elementwise: soft-capping cap·tanh(s / cap)
        logits = a.stage(variant.key, variant.apply(logits, out=a.reuse(logits)))
    if bias is not None:  # (L_q, L_k) every additive term on the logits (a given bias, ALiBi), summed
        logits = a.stage("biased", np.add(logits, a.stage("bias", bias), out=a.reuse(logits)))  # (L_q, L_k)
    if sink is None:
        shift = a.shift(logits, visible)  # (L_q,) 0 unless a row's logits are extreme
    else:  # the sink is one more logit of every row, always seen: (L_q, L_k + 1)
        shift = a.shift(np.hstack([logits, np.full((logits.shape[0], 1), sink)]), np.hstack([visible, np.ones((visible.shape[0], 1), dtype=bool)]))
    masked = a.stage("masked", a.hide(logits, visible))  # (L_q, L_k) -inf where hidden
    exp = a.stage("exp", a.exp(masked, shift))  # (L_q, L_k) e^(masked - shift), 0 where hidden
    sink_exp = None if sink is None else a.stage("sink_exp", np.exp(sink - shift), whole=True)  # (L_q,) e^(sink - shift)
    exp_sum = a.sums(exp, sink_exp)  # (L_q,) Σ_j exp_ij (+ sink_exp_i)
    if sink_exp is not None:
        a.stage("sink_weight", sink_exp / exp_sum, whole=True)  # (L_q,) the weight the sink took
    weights = a.stage("weights", np.divide(exp, exp_sum[:, None], out=a.reuse(exp)))  # (L_q, L_k) each row sums to 1
    return a.stage("output", a.weighted_sum(weights, V), whole=True)  # (L_q, L_k) @ (L_k, d_v) -> (L_q, d_v)


def _head(
    s: Scenario,
    X: np.ndarray | None,
    X_kv: np.ndarray | None,
    h: int,
    a: Arithmetic,
    kv_cache: dict[int, tuple[np.ndarray, np.ndarray]],
    wholes: dict[str, np.ndarray],
    latent: Latent | None = None,
) -> HeadResult:
    n = head_inputs(s, h, X, X_kv, rounder(a.decimals), kv_cache, wholes, latent)
    L_q, L_k = n.Q.shape[0], n.K.shape[0]
    q, k = (n.Q, n.K) if n.Q_rope is None else (n.Q_rope, n.K_rope)
    if n.Q_rope is None and n.normed:
        q, k = list(n.normed.values())[-1][:2]
    if n.turned:  # after RoPE: QK-norm there
        q, k = list(n.turned.values())[-1][:2]
    visible = variants.visibility(s, L_q, L_k)  # (L_q, L_k) the mask
    kernel = next(iter(variants.active(s, "kernel")), None)
    if kernel is not None:  # attention without softmax: the variant's own stages replace the softmax's
        result = kernel_head(kernel, s, h, n, q, k, visible, a)  # type: ignore[arg-type]
        return dataclasses.replace(result, gated=gated) if (gated := after_output(s, h, X, result.output, a.decimals)) else result
    reshapes = variants.active(s, "scaled")
    sink = next((variant.logit(h) for variant in variants.active(s, "denominator")), None)  # a learned sink's logit
    bias = score_bias(s, h, L_q, L_k)
    given = next((variant.matrix(h) for variant in variants.active(s, "scores")), None)  # (L_q, L_k) the scores given directly
    values = n.V if n.value_normed is None else n.value_normed  # (L_k, d_v)
    attention_head(q, k, values, reshapes, bias, visible, s.scale.divisor, a, sink, given)  # type: ignore[arg-type]
    t = a.kept
    mla = None
    if (latent_attention := s.variant(Mla)) is not None and latent is not None and a.rows != []:  # the absorbed form (not for a layer that keeps no rows: a checkpoint's earlier ones)
        r = rounder(a.decimals)
        q_both, k_both, W_UK = latent_attention.absorbed_inputs(h, q, latent, r)  # (L_q, d_c + d_r), (L_k, d_c + d_r), (d_c, d_n)
        b = Arithmetic(s, h, a.decimals, a.rows)
        mixed = attention_head(q_both, k_both, latent.C_KV, reshapes, bias, visible, s.scale.divisor, b, sink)  # (L_q, d_c)
        mla = latent_attention.absorbed(h, W_UK, q_both, b.kept["weights"], mixed, t["weights"], r)
    t["visible"] = visible if a.rows is None else visible[a.rows]  # (L_q or rows, L_k)
    stages = {name: t.get(name) for name in SOFTMAX_STAGES}  # stage -> array; None for a stage the head does not have (bias, sinks)
    reshaped = {variant.key: t[variant.key] for variant in reshapes}
    for array in (n.Q, n.K, n.V, n.Q_rope, n.K_rope, n.value_normed, *stages.values(), *reshaped.values(), *(a for x in (*n.normed.values(), *n.turned.values()) for a in x)):
        if array is not None:
            array.setflags(write=False)
    gated = after_output(s, h, X, t["output"], a.decimals)
    return HeadResult(head=h, **n._asdict(), **stages, reshaped=reshaped, mla=mla, gated=gated)  # type: ignore[arg-type]


def after_output(s: Scenario, h: int, X: np.ndarray | None, output: np.ndarray, decimals: int | None) -> dict[str, Gated]:
    """Head h's output through the registry's "output" variants in order (a gate: o ⊙ σ(X·W_gate)); {} without any."""
    gated: dict[str, Gated] = {}
    for variant in variants.active(s, "output"):
        assert X is not None  # an "output" variant is read only beside embeddings (its from_yaml)
        made = variant.gate(h, X, output, rounder(decimals))
        finite(made.gate, variant.key, f"{variant.key}: σ(X·W)", s, h, s.tokens)
        output = finite(made.output, variant.key, f"{variant.key}: output ⊙ σ(X·W)", s, h, s.tokens)  # (L_q, d_v)
        for array in made:
            array.setflags(write=False)
        gated[variant.key] = made
    return gated


def kernel_head(kernel: Any, s: Scenario, h: int, n: HeadInputs, q: np.ndarray, k: np.ndarray, visible: np.ndarray, a: Arithmetic) -> HeadResult:
    """Head h under a "kernel" variant (linear attention, retention): its stages, and HeadResult's textbook fields filled from them.

    The softmax's fields hold what stands in its place: scores, scaled and masked the similarities (0 where hidden), exp the
    weights before any normaliser, exp_sum the normaliser (the row sums; 1 under retention), weights what multiplies V.
    """
    r = rounder(a.decimals)
    t = kernel.head(h, q, k, n.V, visible, s.scale.divisor, r)  # KernelHead
    where = s.tokens
    finite(t.similarities, "scores", "similarities", s, h, where)
    if t.row_sums is not None and not np.all(t.row_sums != 0):
        row = int(np.flatnonzero(t.row_sums == 0)[0])
        raise AttnError(f"head {h}, row {row + 1} ({where[row]}): the similarities sum to 0, so the weights are 0/0",
                        key="linear_attention", expected="a feature map that keeps some similarity positive (elu+1 always does)")  # fmt: skip
    weights = finite(t.weights, "weights", "weights", s, h, where)
    output = finite(r(weights @ n.V), "output", "weights·V", s, h, where)  # (L_q, L_k) @ (L_k, d_v) -> (L_q, d_v)
    exp_sum = t.row_sums if t.row_sums is not None else np.ones(weights.shape[0])  # (L_q,)
    numerators = t.similarities if t.decay is None else t.weights  # (L_q, L_k)
    kept = slice(None) if a.rows is None else list(a.rows)
    stages = {
        "scores": t.similarities[kept], "scaled": t.similarities[kept], "visible": visible[kept], "masked": t.similarities[kept],
        "shift": np.zeros(weights.shape[0])[kept], "exp": numerators[kept], "exp_sum": exp_sum[kept], "weights": weights[kept], "output": output,
    }  # fmt: skip
    for array in (n.Q, n.K, n.V, n.Q_rope, n.K_rope, *stages.values(), *t):
        if array is not None:
            array.setflags(write=False)
    return HeadResult(head=h, **n._asdict(), **stages, bias=None, biased=None, kernel=t)


def score_bias(s: Scenario, h: int, L_q: int, L_k: int) -> np.ndarray | None:
    """(L_q, L_k) everything added to head h's scaled scores (the registry's "logits" variants: a given bias, ALiBi); None without."""
    terms = [variant.matrix(h, L_q, L_k) for variant in variants.active(s, "logits")]
    if not terms:
        return None
    return np.array(functools.reduce(np.add, terms), dtype=np.float64)  # (L_q, L_k)





