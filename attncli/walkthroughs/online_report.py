"""The tiled head (`run --block-size`) and the KV-cache decode (`attncli decode`) as documents for every format.

The numbers come from online.py and decode.py; this module picks what a reader needs,
writes each number once at the decimals `numbers.decimals` chose, and shortens long
listings unless `full` (the JSON always carries everything). `decode_grid` and `tiling_grid`
are the figures of SVG and HTML: the weights of each step over its cache, the scores under the tiles.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attncli.core import online, rounding
from attncli.core.decode import Decode, DecodeStep
from attncli.core.engine import RunResult
from attncli.core.online import Tiling
from attncli.core.variants import Alibi, DeltaRule, LearnedSink, LinearAttention, Mla, QkNorm, Retention, Rope
from attncli.document.blocks import (
    DROPPED,
    EMPTY,
    HIDDEN,
    SHOWN,
    Block,
    Document,
    Grid,
    Heading,
    Note,
    Paragraph,
    Table,
    Values,
    Vector,
)
from attncli.document.numbers import fixed, smart
from attncli.errors import AttnError, option
from attncli.walkthroughs.narration import quoted

MAX_TILES = 24  # tile rows shown per head unless --full
MAX_STEPS = 12  # decode steps shown unless --full (the first ten and the last two)
MAX_CACHE_ROWS = 12  # cached keys listed per step unless --full
MAX_VECTOR = 8  # numbers shown of a long vector unless --full
MAX_TILES_KEPT = 100_000  # tiles computed and kept for one report (each holds its rows' running state)
NOTHING = "—"  # a value that does not exist: the rescale factor of a query's first block, with nothing before it to rescale
FIRST_BLOCK = "none: first block"  # the rescale cell of a tile that is every one of its queries' first


def vec(values: np.ndarray, p: int, *, full: bool, whole: bool = True, absent: np.ndarray | None = None) -> Vector:
    """[1, 0.5] or, shortened, [0.1, 0.2, 0.3, 0.4, …, 0.9, 1.0] (64 numbers); a terminal may shorten it further to fit.

    `absent` (bool, one per value) marks values that do not exist, shown as — (a rescale factor with nothing before it).
    """
    write = smart if whole else fixed
    cells = [NOTHING if absent is not None and absent[i] else write(float(x), p) for i, x in enumerate(values)]
    if full or len(cells) <= MAX_VECTOR:
        return Vector("[" + ", ".join(cells) + "]", cells, fixed=full)
    return Vector("[" + ", ".join(cells[:4] + ["…"] + cells[-2:]) + f"] ({len(cells)} numbers)", cells)


def agreement(difference: np.ndarray, values: np.ndarray, weights: np.ndarray | None = None) -> str:
    """How far two orders of one weighted sum of `values` (keys, d_v) lie apart, said without float64's last bits (core.rounding).

    The sum's terms are at most |weight|·|value| (|value| alone for a softmax's weights, which lie in [0, 1]).
    """
    size = np.abs(values) if weights is None else np.abs(weights)[:, None] * np.abs(values)  # (keys, d_v)
    scale = float(size.sum(axis=0).max(initial=0.0)) if weights is not None else float(size.max(initial=0.0))
    return rounding.agreement(difference, scale=scale, terms=len(values))


def span(positions: np.ndarray) -> str:
    """1–4, or 3, or 1, 2, 5 when not consecutive."""
    ps = [int(x) for x in positions]
    if not ps:
        return "none"
    if ps == list(range(ps[0], ps[-1] + 1)):
        return str(ps[0]) if len(ps) == 1 else f"{ps[0]}–{ps[-1]}"
    return ", ".join(map(str, ps))


def _section(title: str, lines: Sequence[tuple[str, str]] = (), table: Table | None = None, notes: Sequence[str] = ()) -> list[Block]:
    """A section's blocks: its heading, its `name = value` lines, its table, its notes."""
    return [Heading(title, level=2), Values(lines), *([table] if table is not None else []), *map(Note, notes)]


def _document(title: str, intro: Sequence[str], sections: list[Block], tidy: Table) -> Document:
    return Document(title, [Heading(title), *map(Paragraph, intro), *sections], tidy)


def _shortened(rows: list[list[str]], limit: int, what: str, *, full: bool, width: int) -> tuple[list[list[str]], list[str]]:
    """At most `limit` rows (the first ones and the last two) and a note saying what was left out."""
    if full or len(rows) <= limit:
        return rows, []
    kept = rows[: limit - 2] + [["…"] + [""] * (width - 1)] + rows[-2:]
    return kept, [f"{len(rows) - limit} {what} left out; {option('full')} shows every one."]


# -- run --block-size -------------------------------------------------------------------------------


def tiling_report(result: RunResult, tilings: dict[int, Tiling], *, precision: int, full: bool) -> Document:
    """FlashAttention's loops over each head: every tile's running maxima and sums, the output and the memory."""
    s, p = result.scenario, precision
    any_tiling = next(iter(tilings.values()))
    B_q, B_k = any_tiling.query_block_size, any_tiling.block_size
    intro = [
        f"Queries {B_q} at a time (outer loop), keys {B_k} at a time (inner loop). Each tile updates its queries' running "
        "maximum m and sum l, multiplying what came before by the rescale factor e^(m_old − m) when m grows; the output "
        "rows are divided by l once their last key block is done. A tile the mask hides entirely is skipped. "
        "Tile i, j is query block i with key block j; m, l and the rescale factor are given for each of its queries. "
        f"A query's first block has nothing before it to rescale: its factor shows as {NOTHING}, and a tile that is the first block "
        f"of all its queries says “{FIRST_BLOCK}”.",
    ]
    if s.variant(LearnedSink) is not None:
        intro.append("Each head's learned sink (sink_logits) starts every row at m = sink, l = e^0 = 1, o = 0: one more logit, "
                     "with no value, so it enters the sum l but not the output o.")  # fmt: skip
    if result.round_steps is not None:
        intro.append(f"Every intermediate is rounded to {result.round_steps} decimals, as by hand.")
    sections: list[Block] = []
    csv_rows: list[list[str]] = []
    for head, tiling in tilings.items():
        name = f"Head {head}: " if s.heads > 1 else ""
        rows = []
        before: dict[int, np.ndarray] = {}  # query block → its rows' running maxima before the tile (−∞: nothing seen yet)
        for tile in tiling.tiles:
            cells = [f"{tile.query_block}, {tile.key_block}", span(tile.queries), span(tile.keys)]
            first = before.get(tile.query_block, np.full(len(tile.queries), -np.inf)) == -np.inf  # (b_q,) nothing before to rescale
            before[tile.query_block] = tile.max
            if tile.skipped:
                rows.append(cells + ["skipped", "", ""])
            else:
                rescale: str = FIRST_BLOCK if first.all() else vec(tile.rescale, p, full=full, absent=first)
                rows.append(cells + [vec(tile.max, p, full=full), vec(tile.sum, p, full=full, whole=False), rescale])
            for i, query in enumerate(tile.queries):
                csv_rows.append([str(head), str(tile.query_block), str(tile.key_block), str(int(query)), span(tile.keys),
                                 "true" if tile.skipped else "false", repr(float(tile.rescale[i])), _number(tile.max[i]), repr(float(tile.sum[i]))])  # fmt: skip
        rows, notes = _shortened(rows, MAX_TILES, "tiles", full=full, width=6)
        table = Table(["tile", "queries", "keys", "m", "l", "rescale"], rows,
                      [False, False, False, False, False, False])  # fmt: skip
        sections += _section(f"{name}{len(tiling.tiles)} tile{'s' * (len(tiling.tiles) != 1)}", table=table, notes=notes)
        ordinary = result.head(head).output  # (L_q, d_v)
        memory = tiling.memory
        lines = [
            ("largest difference from the ordinary output", agreement(tiling.output - ordinary, result.head(head).values)),
            ("working memory, tiled", f"{memory.tiled:,} numbers ({memory.tiled_bytes:,} bytes): B_q·d_k + B_k·d_k + B_k·d_v + B_q·B_k + 2·B_q + B_q·d_v"),
            ("working memory, ordinary", f"{memory.ordinary:,} numbers ({memory.ordinary_bytes:,} bytes): the L_q × L_k scores and weights"),
        ]
        out_rows = [[label, vec(row, p, full=full, whole=False)] for label, row in zip(s.query_labels, tiling.output)]
        out_rows, out_notes = _shortened(out_rows, MAX_TILES, "rows", full=full, width=2)
        out_notes.append("The tiled output is the ordinary one: the rescaling leaves every term with the same factor e^(−m), which "
                         "cancels; only the order of the additions differs.")  # fmt: skip
        if result.exact is not None:
            exact = result.exact.head(head)
            sink = None if (learned := s.variant(LearnedSink)) is None else learned.logit(head)
            again = online.tiled(exact.masked, exact.values, block_size=B_k, query_block_size=B_q, d_k=s.d_k, sink=sink)
            out_notes.append(f"Rounded by hand, the tiles round at other points than the ordinary chain, hence the difference above; "
                             f"in exact arithmetic the two differ by {agreement(again.output - exact.output, exact.values)}.")  # fmt: skip
        sections += _section(f"{name}output = o / l", lines, Table(["query", "output"], out_rows, [False, False]), out_notes)
    csv_table = Table(["head", "query_block", "key_block", "query", "keys", "skipped", "rescale", "max", "sum"], csv_rows,
                      [True, True, True, True, False, False, True, True, True])  # fmt: skip
    return _document(f"FlashAttention tiling of {quoted(s.name)}: blocks of {B_q} quer{'ies' if B_q != 1 else 'y'} × {B_k} key{'s' * (B_k != 1)}", intro, sections, csv_table)


def _smallest_block(L_q: int, L_k: int, heads: int) -> int:
    """The smallest block size whose tiles stay within MAX_TILES_KEPT."""
    B = 1
    while heads * -(-L_q // B) * -(-L_k // B) > MAX_TILES_KEPT:
        B += 1
    return B


def _number(x: float) -> str:
    return "-inf" if x == -np.inf else repr(float(x))


# -- decode -----------------------------------------------------------------------------------------


def decode_report(dec: Decode, *, precision: int, full: bool, made_causal: bool = False) -> Document:
    """Generation step by step: each new token's q, k and v, the cache it reads, the weights and the output."""
    s, p = dec.scenario, precision
    intro = [
        "Generation is causal: at step t the new token's k and v join the cache, and its q meets every cached key. "
        "The cache holds only what some query from t on still reads."
    ]
    if dec.recurrent is not None:  # attention without softmax: a state of fixed size, not a cache
        intro = [_recurrent_intro(dec)]
    if (s.scale.mode != "none" or s.has_bias) and dec.recurrent is None:  # without softmax the table has no such score
        intro.append("Each step's table gives q·k and the score the softmax sees (q·k scaled" + (", plus the bias" if s.has_bias else "")
                     + "), then the weight.")  # fmt: skip
    if made_causal:
        intro.append(f"{quoted(s.name)} has no causal mask; decoding adds one, since a generated token cannot see the tokens after it.")
    c = dec.cached
    if c:
        intro.append(f"The cache starts with {c} given key{'s' * (c > 1)} and value{'s' * (c > 1)} ({span(np.arange(1, c + 1))}: "
                     f"{', '.join(quoted(t) for t in s.key_tokens[:c])}), as a KV cache holds them: given, not projected"
                     + (", the keys already normalised by QK-norm" + (" and" if s.variant(Rope) is not None else "") if s.variant(QkNorm) is not None else "")
                     + ((", the keys already" if s.variant(QkNorm) is None else "") + " turned by RoPE at their positions" if s.variant(Rope) is not None else "")
                     + f". The steps begin at position {c + 1}.")  # fmt: skip
        if s.variant(Alibi) is not None:
            intro.append(f"ALiBi counts positions from the cache's start: step t adds −m·(t − j) to the score of key j, as if the "
                         f"{c} cached token{'s' * (c > 1)} had been computed with the rest.")  # fmt: skip
    rope_start = 0 if (rope := s.variant(Rope)) is None else rope.offset - c  # the RoPE position of key 1
    if rope is not None:
        if rope_start:
            intro.append(f"Under RoPE, step t turns q and k by position {rope_start} + t − 1 (the first token sits at position "
                         f"{rope_start}, rope.offset): the cached keys keep their turn, and positions simply continue.")
        else:
            intro.append("Under RoPE, step t turns q and k by position t − 1: the cached keys keep their turn, and positions simply continue.")
    if dec.switched is not None and dec.before is not None:  # longrope: the factors change once the sequence outgrows them
        early = dec.before.scenario.variant(Rope)
        intro.append(f"RoPE's factors depend on the sequence's length here ({early.scaling if early is not None else 'longrope'}): "
                     f"steps 1–{dec.switched - 1} turn q and k by the short factors, as the model does while the sequence has at "
                     f"most {dec.switched - 1} tokens; step {dec.switched} switches to the long ones (see that step).")  # fmt: skip
    if (mla := s.variant(Mla)) is not None:  # multi-head latent attention: the cache is the latent, not the k and v shown
        intro.append(
            f"Multi-head latent attention: the cache really holds each token's latent c_KV and rotated shared key k_R′, "
            f"d_c + d_r = {mla.d_c} + {mla.d_r} = {mla.cached} numbers a token for all {s.heads} heads, against "
            f"{mla.expanded} for every head's k and v; the k and v below are this head's expansion of it (c_KV·W_UK and k_R′, c_KV·W_UV), "
            "which the absorbed form never writes out."
        )
    if s.heads != s.G:
        share = s.heads // s.G
        g = dec.kv_head
        intro.append(f"Head {dec.head} reads the cache of key/value head {g} of {s.G}, which heads {(g - 1) * share + 1}–{g * share} share.")
    if dec.result.round_steps is not None:
        intro.append(f"Every intermediate is rounded to {dec.result.round_steps} decimals, as by hand.")
    steps = list(dec.steps)
    head_count = MAX_STEPS - 2
    shown = steps if full or len(steps) <= MAX_STEPS else steps[:head_count] + steps[-2:]
    sections: list[Block] = []
    for index, step in enumerate(shown):
        if len(shown) < len(steps) and index == head_count:
            sections += _section(f"… steps {head_count + 1}–{len(steps) - 2} left out; {option('full')} shows every step")
        sections += _step_section(dec, step, p, full=full)
    csv_rows = [
        [str(step.position), step.token, str(int(key)), dec.scenario.key_tokens[int(key) - 1], "true" if seen else "false",
         repr(float(score)), _number(logit if seen else -np.inf), repr(float(weight))]
        for step in steps
        for key, seen, score, logit, weight in zip(step.cache, step.visible, step.scores, step.logits, step.weights)
    ]  # fmt: skip
    csv_table = Table(["step", "token", "key_position", "key_token", "visible", "q_dot_k", "score", "weight"], csv_rows,
                      [True, False, True, False, False, True, True, True])  # fmt: skip
    head = f", head {dec.head}" if s.heads > 1 else ""
    carried = "a recurrent state" if dec.recurrent is not None else "a KV cache"
    return _document(f"Decoding {quoted(s.name)} with {carried}{head}", intro, sections, csv_table)


def _recurrent_intro(dec: Decode) -> str:
    s = dec.scenario
    if s.variant(LinearAttention) is not None:
        rule = ("linear attention keeps S_t = S_{t−1} + φ(k_t)ᵀ v_t (d_k × d_v numbers) and z_t = z_{t−1} + φ(k_t) (d_k numbers), "
                "and the new token's output is φ(q_t)·S_t / φ(q_t)·z_t")  # fmt: skip
    elif (delta := s.variant(DeltaRule)) is not None:
        decay = "S′ = Diag(α_t)·S_{t−1}, each key channel decayed at its own rate (Kimi Delta Attention), then " if delta.decays is not None else ""
        before = "S′" if delta.decays is not None else "S_{t−1}"
        rule = (f"the delta rule keeps {decay}S_t = {before} + k̂_t ⊗ β(v_t − {before}ᵀk̂_t) (d_k × d_v numbers, β = {delta.beta(dec.head):g}, "
                "q and k L2-normalised), and the new token's output is S_tᵀq̂_t / s")  # fmt: skip
    else:
        gamma = retention.gamma(dec.head) if (retention := s.variant(Retention)) is not None else 1.0
        rule = f"retention keeps S_t = γ·S_{{t−1}} + k_tᵀ v_t (d_k × d_v numbers, γ = {gamma:g}), and the new token's output is q_t·S_t"
    return (f"Generation without softmax: no KV cache that grows by a key and a value per token; {rule}. Each step shows the state "
            "after the new token joined it, and checks that the recurrent output equals row t of the parallel run (the weights table "
            "below it is that row, over the tokens so far).")  # fmt: skip


def _state_lines(dec: Decode, step: DecodeStep, p: int, *, full: bool) -> tuple[list[tuple[str, str | Vector]], list[str]]:
    """The state S_t row by row (and z_t), and the check against the parallel run, for a step of a head without softmax."""
    rec = dec.recurrent
    assert rec is not None
    t = step.position - 1 - dec.cached  # the step's index: its query row (a given cache's c keys came before the first step)
    lines: list[tuple[str, str | Vector]] = [(f"S_{step.position} row {a + 1}", vec(row, p, full=full)) for a, row in enumerate(rec.states[t])]
    if rec.normalisers is not None:
        lines.append((f"z_{step.position}", vec(rec.normalisers[t], p, full=full)))
    out = rec.outputs[t]
    why = "" if dec.result.round_steps is None else " (the state is computed exactly, the parallel row hand-rounded: that is the rounding)"
    notes = [f"recurrent output = {vec(out, p, full=full, whole=False)}; the parallel run's row {step.position} differs by "
             f"{agreement(out - step.output, step.V, step.weights)}{why}."]  # fmt: skip
    return lines, notes


def _step_section(dec: Decode, step: DecodeStep, p: int, *, full: bool) -> list[Block]:
    s = dec.scenario
    lines = [("q", vec(step.q, p, full=full)), ("k", vec(step.k, p, full=full)), ("v", vec(step.v, p, full=full)),
             ("cache", f"key{'s' * (len(step.cache) > 1)} {span(step.cache)} ({len(step.cache)} of {step.position} token{'s' * (step.position != 1)} so far)")]  # fmt: skip
    notes = []
    if dec.switched == step.position:
        notes.append(f"The sequence now has {step.position} tokens, more than the {step.position - 1} the model was trained on "
                     "(original_max_position_embeddings): RoPE switches from the short factors to the long ones "
                     "(transformers' longrope_frequency_update), and Phi-3 drops the cache at this step and computes every key "
                     f"again with them (Phi3ForCausalLM.prepare_inputs_for_generation): the cached keys 1–{step.position - 1} "
                     "below differ from the ones the steps before used, and every later step keeps the long factors.")  # fmt: skip
    if step.dropped.size:
        notes.append(f"Key{'s' * (step.dropped.size > 1)} {span(step.dropped)} leave{'s' * (step.dropped.size == 1)} the cache: "
                     "no query from this step on reads " + ("them" if step.dropped.size > 1 else "it") + f" ({_why_dropped(dec, step)}).")  # fmt: skip
    mask = s.mask
    if mask.window is not None and mask.sinks:
        kept = [int(j) for j in step.cache if step.position - int(j) > mask.window]
        if kept:
            notes.append(f"Key{'s' * (len(kept) > 1)} {span(np.array(kept))} stay{'s' * (len(kept) == 1)} in the cache outside the window: "
                         f"attention sink{'s' * (len(kept) > 1)}, seen by every query.")  # fmt: skip
    show_logit = s.scale.mode != "none" or s.has_bias
    dot = "φ(q)·φ(k)" if s.variant(LinearAttention) is not None else ("q̂·k̂ / s" if delta.decays is None else "q̂·Diag(γ)·k̂ / s") if (delta := s.variant(DeltaRule)) is not None else "q·k / s" if s.variant(Retention) is not None and s.scale.mode != "none" else "q·k"
    show_logit = show_logit and dec.recurrent is None  # without softmax the similarity is what the weight is made of
    header = ["key", "position", dot] + (["score"] if show_logit else []) + ["weight", "k", "v"]  # score: what the softmax sees
    rows = []
    for key, seen, k, v, score, logit, weight in zip(step.cache, step.visible, step.K, step.V, step.scores, step.logits, step.weights):
        row = [s.key_labels[int(key) - 1], str(int(key)), fixed(float(score), p)]
        row += [fixed(float(logit), p) if seen else "hidden"] if show_logit else []
        rows.append(row + [fixed(float(weight), p), vec(k, p, full=full), vec(v, p, full=full)])
    rows, short = _shortened(rows, MAX_CACHE_ROWS, "cached keys", full=full, width=len(header))
    numeric = [False, True, True] + [True] * show_logit + [True, False, False]
    notes += short
    sink_weight = dec.result.head(dec.head).sink_weight  # (L,) whole; None without a learned sink
    if sink_weight is not None:
        notes.append(f"The learned sink (sink_logits) takes {fixed(float(sink_weight[step.position - 1 - dec.cached]), p)} of this step's attention: "
                     "it joins the softmax's sum with no value, so the weights above sum to 1 minus that.")  # fmt: skip
    notes.append(f"output = Σ weight·v = {vec(step.output, p, full=full, whole=False)}")
    if dec.recurrent is not None:  # no softmax: the state carried instead of the cache, and its output against the parallel row
        state, checked = _state_lines(dec, step, p, full=full)
        lines = lines[:3] + state
        notes += checked
    else:
        notes.append(_same_as_run(dec, step))
    rope_start = 0 if (rope := s.variant(Rope)) is None else rope.offset - dec.cached  # the RoPE position of key 1
    at = f"position {step.position}" + (f"; RoPE position {rope_start + step.position - 1}" if s.variant(Rope) is not None and rope_start else "")
    return _section(f"Step {step.position}: {quoted(step.label)} ({at})", lines, Table(header, rows, numeric), notes)


def _why_dropped(dec: Decode, step: DecodeStep) -> str:
    mask = dec.scenario.mask
    if mask.padding and all(int(j) in mask.padding for j in step.dropped):
        return "padding"
    return "outside the window" if mask.window is not None else "the mask hides it from every later query"


def _same_as_run(dec: Decode, step: DecodeStep) -> str:
    """The check a reader wants: the cache alone gives row t of the full causal run."""
    row = step.position - dec.cached  # the query's row of the run (its position, after a given cache of c keys)
    run = "full causal run" if dec.switched is None or step.position >= dec.switched else f"causal run of the first {dec.switched - 1} tokens (short factors)"
    if dec.result.round_steps is not None:
        chain = f"the {run}'s hand-rounded chain" if run == "full causal run" else f"the hand-rounded chain of the {run}"
        return f"These are row {row} of {chain}, restricted to the cached keys."
    seen = step.visible  # (c,)
    logits = step.logits[seen]  # (c',)
    sink = dec.scenario.variant(LearnedSink)  # a learned sink: e^sink joins the sum, with no value
    top = logits.max() if sink is None else max(logits.max(), sink.logit(dec.head))
    weights = np.exp(logits - top)  # (c',)
    total = weights.sum() + (0.0 if sink is None else np.exp(sink.logit(dec.head) - top))
    recomputed = (weights / total) @ step.V[seen]  # (d_v,)
    return (f"The output is row {row} of the {run}; computed again from the cache alone it differs by "
            f"{agreement(recomputed - step.output, step.V[seen])}.")  # fmt: skip


# -- figures (SVG, HTML) ----------------------------------------------------------------------------

MAX_SIDE = 8  # running-maximum columns beside a tiling figure (one per key block); more show the last only


def decode_grid(dec: Decode) -> Grid:
    """Step × cached key: each step's weights over the cache, keys that left it marked, keys not yet generated empty."""
    s = dec.scenario
    L = len(dec.steps)
    data = np.zeros((L, s.L_k))  # (steps, keys)
    state = np.full((L, s.L_k), EMPTY, dtype=np.int8)
    for t, step in enumerate(dec.steps):
        state[t, : step.position] = DROPPED  # every key generated so far, unless it is still cached
        for key, seen, weight in zip(step.cache, step.visible, step.weights):
            state[t, int(key) - 1] = SHOWN if seen else HIDDEN
            data[t, int(key) - 1] = weight
    head = f"head {dec.head}: " if s.heads > 1 else ""
    rows = [f"{step.position} {step.token}" for step in dec.steps]
    return Grid(f"Decoding {quoted(s.name)} with a KV cache", f"{head}each step's weights over its cache (steps down, cached keys across)",
                rows, list(s.key_labels), data, state, True, axes=("cached keys", "steps"))  # fmt: skip


def tiling_grid(result: RunResult, head: int, tiling: Tiling, *, precision: int) -> Grid:
    """The score matrix under its tiles: skipped tiles marked, each row's maximum outlined, the running maximum m after each key block."""
    s = result.scenario
    h = result.head(head)
    masked = np.asarray(h.masked)  # (L_q, L_k) -inf where hidden
    hidden = ~np.isfinite(masked)
    state = np.where(hidden, HIDDEN, SHOWN).astype(np.int8)
    data = np.where(hidden, 0.0, masked)
    B_q, B_k = tiling.query_block_size, tiling.block_size
    skipped = [(tile.query_block - 1, tile.key_block - 1) for tile in tiling.tiles if tile.skipped]
    marked = [(i, int(np.argmax(np.where(hidden[i], -np.inf, masked[i])))) for i in range(masked.shape[0]) if not hidden[i].all()]
    key_blocks = -(-s.L_k // B_k)
    running = np.full((masked.shape[0], key_blocks), np.nan)  # m after each key block
    grew = np.zeros((masked.shape[0], key_blocks), dtype=bool)  # a later block raised m: what came before was rescaled
    for tile in tiling.tiles:
        rows = np.asarray(tile.queries) - 1
        running[rows, tile.key_block - 1] = tile.max
        grew[rows, tile.key_block - 1] = (tile.rescale > 0) & (tile.rescale < 1)
    blocks = list(range(key_blocks)) if key_blocks <= MAX_SIDE else [key_blocks - 1]
    p = precision
    side = [(f"m after {span(np.arange(b * B_k + 1, min((b + 1) * B_k, s.L_k) + 1))}",
             ["−∞" if not np.isfinite(x) else fixed(float(x), p) for x in running[:, b]]) for b in blocks]  # fmt: skip
    head_name = f"head {head}: " if s.heads > 1 else ""
    caption = (f"{head_name}the scores the softmax sees, in tiles of {B_q} quer{'ies' if B_q != 1 else 'y'} × {B_k} key{'s' * (B_k != 1)}; each row's maximum outlined, "
               "and right of it the running maximum m after each block of keys (marked where it grew)")  # fmt: skip
    side_marked = [(n, int(r)) for n, b in enumerate(blocks) for r in np.flatnonzero(grew[:, b])]
    return Grid(f"FlashAttention tiling of {quoted(s.name)}", caption, list(s.query_labels), list(s.key_labels), data, state, False,
                tile=(B_q, B_k), skipped=skipped, marked=marked, side=side, side_marked=side_marked)  # fmt: skip


def tilings(result: RunResult, heads: list[int], block_size: int) -> dict[int, Tiling]:
    """Each head's tiled computation, refused up front when it would keep more than MAX_TILES_KEPT tiles."""
    s = result.scenario
    count = len(heads) * -(-s.L // block_size) * -(-s.L_k // block_size)  # ⌈L_q / B⌉·⌈L_k / B⌉ per head
    if count > MAX_TILES_KEPT:
        raise AttnError(
            f"{option('block_size')} {block_size} cuts {len(heads)} head{'s' * (len(heads) > 1)} of {s.L} × {s.L_k} into {count:,} tiles, "
            f"more than the {MAX_TILES_KEPT:,} shown at most",
            key=option("block_size"),
            expected=f"a larger block size (at least {_smallest_block(s.L, s.L_k, len(heads))}) or one head with {option('head')}",
        )
    out = {}
    for head in heads:
        h = result.head(head)
        sink = None if (learned := s.variant(LearnedSink)) is None else learned.logit(head)
        out[head] = online.tiled(h.masked, h.values, block_size=block_size, d_k=s.d_k, round_to=result.round_steps, sink=sink)
    return out
