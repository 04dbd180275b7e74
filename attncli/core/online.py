"""FlashAttention's online softmax: the keys in blocks, with a running maximum, sum and output.

Pure NumPy in float64: no printing, no I/O. It works on the final logits of one head (after
scaling, biases, ALiBi and the mask), so every attention variant reaches it the same way.
For each block of keys the recurrence is

    m_new = max(m, max of the block's visible scores)
    l_new = e^(m − m_new)·l + Σ_block e^(s − m_new)
    o_new = e^(m − m_new)·o + Σ_block e^(s − m_new)·v

and at the end output = o / l, which equals softmax(scores)·V for exact arithmetic: every
term of l and o ends up multiplied by e^(−m_final), whatever the order of the blocks. Every
exponent is ≤ 0, so no exponential overflows, whatever the range of the scores.

Dimension names used in the shape comments:
    L_q   number of queries
    L_k   number of keys
    d_k   width of a query/key
    d_v   width of a value
    R     query rows updated together (1 for one query, up to B_q for a tile)
    b     keys in one block (B, or fewer in the last block)
    B_q   queries per query block (tiled)
    B_k   keys per key block (tiled)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from attncli.core.arithmetic import rounder, summed_by_hand

Array = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]
Positions = npt.NDArray[np.int64]
Rounder = Callable[[Array], Array]
AnyArray = TypeVar("AnyArray", bound=npt.NDArray[np.generic])

FLOAT64_BYTES = 8


class OnlineBlock(NamedTuple):
    """One block of keys of one query, and the running state after it."""

    keys: Positions  # (b,) key positions, from 1
    scores: Array  # (b,) the logits as given (hidden keys keep whatever value they had)
    visible: Mask  # (b,) False where the mask hides the key
    skipped: bool  # every key of the block is hidden: the state is left as it was
    block_max: float  # maximum of the block's visible scores; -inf when skipped
    max: float  # running maximum m after the block
    rescale: float  # e^(m_old − m) applied to the sum and output before; 0 for the first block seen, 1 when skipped
    exp: Array  # (b,) e^(score − m), 0 where hidden
    block_sum: float  # Σ of the block's exponentials
    block_output: Array  # (d_v,) Σ of the block's e^(score − m)·v
    sum: float  # running sum l after the block
    output: Array  # (d_v,) running unnormalised output o after the block


class OnlineRow(NamedTuple):
    """The online softmax of one query: its blocks in order and the final output."""

    block_size: int  # B, keys per block
    round_to: int | None  # decimals every intermediate was rounded to, or None when exact
    blocks: tuple[OnlineBlock, ...]  # ⌈L_k / B⌉ of them, in key order
    max: float  # final running maximum
    sum: float  # final running sum l
    output: Array  # (d_v,) running output / l
    sink: float | None = None  # a learned sink's logit (gpt-oss): the state started at m = sink, l = 1, o = 0


class Tile(NamedTuple):
    """One (query block, key block) tile of the tiled computation, and its rows' state after it."""

    query_block: int  # from 1
    key_block: int  # from 1
    queries: Positions  # (b_q,) query positions, from 1
    keys: Positions  # (b_k,) key positions, from 1
    skipped: bool  # every pair of the tile is hidden (above a causal diagonal, say): nothing is computed
    rescale: Array  # (b_q,) e^(m_old − m) per row; 0 for a row's first visible key, 1 for a row the tile hides
    max: Array  # (b_q,) running maxima after the tile
    sum: Array  # (b_q,) running sums after the tile


class Memory(NamedTuple):
    """Peak working memory in float64 numbers, besides the inputs Q, K, V and the output O.

    tiled: Q block + K block + V block + S tile + m + l + O block
         = B_q·d_k + B_k·d_k + B_k·d_v + B_q·B_k + 2·B_q + B_q·d_v   (block sizes capped at L_q, L_k)
    ordinary: the score and weight matrices = 2·L_q·L_k
    """

    tiled: int
    ordinary: int

    @property
    def tiled_bytes(self) -> int:
        return FLOAT64_BYTES * self.tiled

    @property
    def ordinary_bytes(self) -> int:
        return FLOAT64_BYTES * self.ordinary


class Tiling(NamedTuple):
    """FlashAttention's loops over a whole head: query blocks outside, key blocks inside."""

    query_block_size: int  # B_q
    block_size: int  # B_k
    round_to: int | None
    tiles: tuple[Tile, ...]  # ⌈L_q / B_q⌉·⌈L_k / B_k⌉ of them, query block by query block
    output: Array  # (L_q, d_v)
    memory: Memory


def _frozen(array: AnyArray) -> AnyArray:
    """The same array, read-only."""
    array.setflags(write=False)
    return array


def _check_block_size(name: str, size: int) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"{name} must be a positive whole number, not {size!r}")


class _State(NamedTuple):
    """The running state of R query rows, and what one key block did to it."""

    block_max: Array  # (R,)
    max: Array  # (R,)
    rescale: Array  # (R,)
    exp: Array  # (R, b)
    block_sum: Array  # (R,)
    block_output: Array  # (R, d_v)
    sum: Array  # (R,)
    output: Array  # (R, d_v)


def _step(m: Array, l: Array, o: Array, scores: Array, visible: Mask, V: Array, r: Rounder) -> _State:
    """One key block for R query rows; a row that sees none of the block's keys keeps its state exactly.

    m (R,), l (R,), o (R, d_v): the state before; scores (R, b), visible (R, b), V (b, d_v).
    The weighted values are summed as the engine sums them by hand (arithmetic.summed_by_hand),
    so a row's result does not depend on how many rows are updated together.
    """
    R, b = scores.shape
    seen = visible.any(axis=1)  # (R,)
    block_max = np.where(visible, scores, -np.inf).max(axis=1)  # (R,)
    m_new = np.maximum(m, block_max)  # (R,)
    # e^(m − m_new): 0 when m = −inf (nothing before), 1 for rows that see nothing here
    shift = np.subtract(m, m_new, out=np.zeros(R), where=seen)  # (R,)
    rescale = r(np.exp(shift))  # (R,)
    exponent = np.subtract(scores, m_new[:, None], out=np.full((R, b), -np.inf), where=visible)  # (R, b) ≤ 0
    exp = r(np.exp(exponent))  # (R, b); e^-inf = 0 where hidden
    block_sum = r(exp.sum(axis=1))  # (R,)
    block_output = summed_by_hand(exp, V, r)  # (R, d_v) Σ e^(s − m)·v, each term rounded by hand
    l_new = r(r(rescale * l) + block_sum)  # (R,)
    o_new = r(r(rescale[:, None] * o) + block_output)  # (R, d_v)
    return _State(block_max, m_new, rescale, exp, block_sum, block_output, l_new, o_new)


def online_row(scores: Array, visible: Mask, V: Array, *, block_size: int, round_to: int | None = None, sink: float | None = None) -> OnlineRow:
    """One query's keys in blocks of `block_size`, in order; with round_to, every intermediate rounded as by hand.

    With `sink` (a learned sink's logit) the state starts at m = sink, l = e^(sink − m) = 1, o = 0: one more logit with no value.
    """
    _check_block_size("block_size", block_size)
    scores = np.asarray(scores, dtype=np.float64)  # (L_k,)
    visible = np.asarray(visible, dtype=bool)  # (L_k,)
    V = np.asarray(V, dtype=np.float64)  # (L_k, d_v)
    if scores.ndim != 1 or visible.shape != scores.shape or V.ndim != 2 or V.shape[0] != scores.shape[0]:
        raise ValueError(f"expected scores (L_k,), visible (L_k,), V (L_k, d_v); got {scores.shape}, {visible.shape}, {V.shape}")
    if not visible.any():
        raise ValueError("the query sees no key")
    if not np.isfinite(scores[visible]).all():
        raise ValueError("a visible score is not a finite number")
    r = rounder(round_to)
    L_k, d_v = V.shape
    m = np.full(1, -np.inf if sink is None else sink)  # (1,)
    l = np.zeros(1) if sink is None else np.ones(1)  # (1,)
    o = np.zeros((1, d_v))  # (1, d_v)
    blocks = []
    for start in range(0, L_k, block_size):
        stop = min(start + block_size, L_k)
        keys = np.arange(start + 1, stop + 1, dtype=np.int64)  # (b,)
        block_scores = scores[start:stop].copy()  # (b,)
        block_visible = visible[start:stop].copy()  # (b,)
        state = _step(m, l, o, block_scores[None, :], block_visible[None, :], V[start:stop], r)
        m, l, o = state.max, state.sum, state.output
        blocks.append(
            OnlineBlock(
                keys=_frozen(keys),
                scores=_frozen(block_scores),
                visible=_frozen(block_visible),
                skipped=not block_visible.any(),
                block_max=float(state.block_max[0]),
                max=float(m[0]),
                rescale=float(state.rescale[0]),
                exp=_frozen(state.exp[0]),
                block_sum=float(state.block_sum[0]),
                block_output=_frozen(state.block_output[0]),
                sum=float(l[0]),
                output=_frozen(o[0]),
            )
        )
    output = r(o[0] / l[0])  # (d_v,)
    return OnlineRow(block_size, round_to, tuple(blocks), float(m[0]), float(l[0]), _frozen(output), sink)


def peak_memory(L_q: int, L_k: int, d_k: int, d_v: int, *, query_block_size: int, block_size: int) -> Memory:
    """Float64 numbers held at once by a tiled and by an ordinary implementation (see Memory)."""
    B_q, B_k = min(query_block_size, L_q), min(block_size, L_k)
    tiled = B_q * d_k + B_k * d_k + B_k * d_v + B_q * B_k + 2 * B_q + B_q * d_v
    return Memory(tiled=tiled, ordinary=2 * L_q * L_k)


def tiled(
    masked: Array,
    V: Array,
    *,
    block_size: int,
    d_k: int,
    query_block_size: int | None = None,
    round_to: int | None = None,
    sink: float | None = None,
) -> Tiling:
    """The tiled computation of a whole head from its final logits (−inf where hidden).

    Query blocks of `query_block_size` (default: `block_size`) in the outer loop, key blocks
    of `block_size` in the inner loop; a tile whose pairs are all hidden is skipped. Row i of
    the output equals online_row(masked[i], ..., block_size=block_size).output bit for bit.
    d_k only enters the memory estimate (the logits are given, not Q and K). With `sink` (a learned sink's
    logit) every row's state starts at m = sink, l = 1, o = 0.
    """
    _check_block_size("block_size", block_size)
    B_q = block_size if query_block_size is None else query_block_size
    _check_block_size("query_block_size", B_q)
    masked = np.asarray(masked, dtype=np.float64)  # (L_q, L_k)
    V = np.asarray(V, dtype=np.float64)  # (L_k, d_v)
    if masked.ndim != 2 or V.ndim != 2 or V.shape[0] != masked.shape[1]:
        raise ValueError(f"expected masked (L_q, L_k) and V (L_k, d_v); got {masked.shape}, {V.shape}")
    visible = masked != -np.inf  # (L_q, L_k)
    if not np.isfinite(masked[visible]).all():
        raise ValueError("a visible score is not a finite number")
    blind = np.flatnonzero(~visible.any(axis=1))  # (·,)
    if blind.size:
        raise ValueError(f"query {blind[0] + 1} sees no key")
    r = rounder(round_to)
    (L_q, L_k), d_v = masked.shape, V.shape[1]
    output = np.empty((L_q, d_v))  # (L_q, d_v)
    tiles = []
    for q_start in range(0, L_q, B_q):
        q_stop = min(q_start + B_q, L_q)
        R = q_stop - q_start
        queries = _frozen(np.arange(q_start + 1, q_stop + 1, dtype=np.int64))  # (b_q,)
        m = np.full(R, -np.inf if sink is None else sink)  # (b_q,)
        l = np.zeros(R) if sink is None else np.ones(R)  # (b_q,)
        o = np.zeros((R, d_v))  # (b_q, d_v)
        for k_start in range(0, L_k, block_size):
            k_stop = min(k_start + block_size, L_k)
            keys = _frozen(np.arange(k_start + 1, k_stop + 1, dtype=np.int64))  # (b_k,)
            tile_visible = visible[q_start:q_stop, k_start:k_stop]  # (b_q, b_k)
            skipped = not tile_visible.any()
            if skipped:
                rescale = np.ones(R)  # (b_q,)
            else:
                state = _step(m, l, o, masked[q_start:q_stop, k_start:k_stop], tile_visible, V[k_start:k_stop], r)
                m, l, o, rescale = state.max, state.sum, state.output, state.rescale
            tiles.append(
                Tile(
                    query_block=q_start // B_q + 1,
                    key_block=k_start // block_size + 1,
                    queries=queries,
                    keys=keys,
                    skipped=skipped,
                    rescale=_frozen(rescale.copy()),
                    max=_frozen(m.copy()),
                    sum=_frozen(l.copy()),
                )
            )
        output[q_start:q_stop] = r(o / l[:, None])  # (b_q, d_v)
    memory = peak_memory(L_q, L_k, d_k, d_v, query_block_size=B_q, block_size=block_size)
    return Tiling(B_q, block_size, round_to, tuple(tiles), _frozen(output), memory)
