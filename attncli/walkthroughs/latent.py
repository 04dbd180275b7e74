"""Explain's steps for multi-head latent attention (core/variants/mla.py), in every notation.

Under MLA the query, keys and values are not X·W_Q, X·W_K, X·W_V: these steps replace the query
step, the keys-and-values step and the rotation step of `narration.steps`, and one more step
after the output computes the same row the absorbed way (on the latent, W_UV after the
weighting), with the largest difference between the two forms' weights and what each form
caches per token.
"""

from __future__ import annotations

import numpy as np

from attncli.core.explain import Explanation
from attncli.core.variants import Mla, Rope
from attncli.document import numbers
from attncli.document.blocks import Line, Step
from attncli.document.notation import Notation, Writer
from attncli.document.numbers import shown
from attncli.walkthroughs.lengths import LONG_SUM


def _sub(w: Writer, base: str, index: str) -> str:
    """W_UK as `W_UK` or `W_{UK}`."""
    return f"{base}_{{{index}}}" if w.tex else f"{base}_{index}"


def _of(w: Writer, symbol: str, label: str) -> str:
    """c_KV(cat), or in TeX {c_{KV}}_{cat}: a subscripted symbol braced so that the token's subscript is not a second one."""
    return w.of("{" + symbol + "}" if w.tex and "_" in symbol else symbol, label)


def _row(expl: Explanation) -> int:
    """Where the query's row sits among the rows the result keeps."""
    rows = expl.result.rows
    return expl.position - 1 if rows is None else rows.index(expl.position - 1)


def _shown_keys(expl: Explanation) -> list[int]:
    """Key indexes (from 0) to write out: all, or the first five and the last two of a long row."""
    L_k = len(expl.keys)
    return list(range(L_k)) if L_k <= LONG_SUM else [*range(5), L_k - 2, L_k - 1]


def intro(expl: Explanation) -> list[str]:
    """The sentence explain's intro says instead of 'columns … of W_Q' under MLA."""
    s, mla = expl.scenario, expl.scenario.variant(Mla)
    assert mla is not None
    h = expl.head.head
    return [
        f"Multi-head latent attention, head {h} of {s.heads}: its query is [q_C | q_R] ({mla.d_n} + {mla.d_r} numbers, columns "
        f"{(h - 1) * mla.d_n + 1}–{h * mla.d_n} of W_UQ and {(h - 1) * mla.d_r + 1}–{h * mla.d_r} of W_QR); its keys and values "
        f"are expanded from each token's latent c_KV ({mla.d_c} numbers) by columns {(h - 1) * mla.d_n + 1}–{h * mla.d_n} of W_UK "
        f"and {(h - 1) * mla.d_v + 1}–{h * mla.d_v} of W_UV, and every head shares one rotary key part k_R ({mla.d_r} numbers)."
    ]


def before_scores(expl: Explanation, p: int, w: Writer) -> list[Step]:
    """The query from its embedding, the keys and values from the latent, and the rotation of the decoupled part."""
    steps = [_query(expl, p, w), _latent(expl, p, w)]
    if expl.scenario.variant(Rope) is not None:
        steps.append(_rotation(expl, p, w))
    return steps


def _query(expl: Explanation, p: int, w: Writer) -> Step:
    s, mla, lat = expl.scenario, expl.scenario.variant(Mla), expl.result.mla
    assert mla is not None and lat is not None and expl.e is not None
    n = Notation(expl.head.head if s.heads > 1 else None, w.tex)
    word, i, d_n = w.label(expl.token), expl.position - 1, mla.d_n
    lines = [Line(w.of("e", word), w.vec(expl.e, p))]
    source = "e"
    notes = []
    if lat.C_Q is not None:
        source = _sub(w, "c", "Q")
        norm = w.text("RMSNorm") if mla.q_norm is not None else ""
        lines.append(Line(_of(w, source, word), f"{norm}(e{w.dot}{_sub(w, 'W', 'DQ')}) = {w.vec(lat.C_Q[i], p)}" if norm else
                          f"e{w.dot}{_sub(w, 'W', 'DQ')} = {w.vec(lat.C_Q[i], p)}"))  # fmt: skip
        notes.append(f"The query first goes through its own latent of d_cq = {mla.d_cq} numbers (DeepSeek's q_a_proj"
                     + (" and q_a_layernorm" if mla.q_norm is not None else "") + "), which saves weights, not cache.")
    W_UQ, W_QR = n(_sub(w, "W", "UQ")), n(_sub(w, "W", "QR"))
    lines.append(Line(_sub(w, "q", "C"), f"{source}{w.dot}{W_UQ} = {w.vec(expl.q_raw[:d_n], p)}"))
    lines.append(Line(_sub(w, "q", "R"), f"{source}{w.dot}{W_QR} = {w.vec(expl.q_raw[d_n:], p)}"))
    lines.append(Line("q", f"[{_sub(w, 'q', 'C')} | {_sub(w, 'q', 'R')}] = {w.vec(expl.q_raw, p)}"))
    notes.append(f"q_C ({d_n} numbers) meets the keys' latent part, q_R ({mla.d_r}) the shared rotary key: position lives only in q_R.")
    return Step("The query", f"q = [{source}{w.dot}{W_UQ} | {source}{w.dot}{W_QR}]", lines, notes)


def _latent(expl: Explanation, p: int, w: Writer) -> Step:
    s, mla, lat = expl.scenario, expl.scenario.variant(Mla), expl.result.mla
    assert mla is not None and lat is not None
    n = Notation(expl.head.head if s.heads > 1 else None, w.tex)
    c_KV, k_R = _sub(w, "c", "KV"), _sub(w, "k", "R")
    lines = []
    for j in _shown_keys(expl):
        key = expl.keys[j]
        label = w.label(key.label)
        lines.append(Line(_of(w, c_KV, label), w.vec(lat.C_KV[j], p)))
        lines.append(Line(w.of("k", label), f"[{c_KV}{w.dot}{n(_sub(w, 'W', 'UK'))} | {k_R}] = {w.vec(key.k_raw, p)}"))
        lines.append(Line(w.of("v", label), f"{c_KV}{w.dot}{n(_sub(w, 'W', 'UV'))} = {w.vec(key.v, p)}"))
    norm = " and its RMSNorm (DeepSeek's kv_a_layernorm)" if mla.kv_norm is not None else ""
    notes = [
        f"Each token is compressed to a latent c_KV = x·W_DKV{norm} of d_c = {mla.d_c} numbers; this head expands it into its "
        f"key part (·W_UK, {mla.d_n} numbers) and its value (·W_UV, {mla.d_v}). The key's last {mla.d_r} numbers are "
        f"k_R = x·W_KR, one rotary key per token that every head shares.",
    ]
    if len(lines) < 3 * len(expl.keys):
        notes.append(f"{len(expl.keys) - len(lines) // 3} of the {len(expl.keys)} keys are left out here.")
    formula = f"{c_KV} = " + (f"{w.text('RMSNorm')}(x{w.dot}{_sub(w, 'W', 'DKV')})" if mla.kv_norm is not None else f"x{w.dot}{_sub(w, 'W', 'DKV')}")
    return Step("The latent, and the keys and values expanded from it", formula, lines, notes)


def _rotation(expl: Explanation, p: int, w: Writer) -> Step:
    s, mla = expl.scenario, expl.scenario.variant(Mla)
    rope = s.variant(Rope)
    assert mla is not None and rope is not None
    d_n, d_r = mla.d_n, mla.d_r
    position = expl.position - 1
    angles = rope.angles(np.array([position]), d_r)[0]  # (d_r/2,)
    first, second = rope.pairs(d_r)
    lines = []
    for i, (a, b, angle) in enumerate(zip(first, second, angles)):
        x, y = expl.q_raw[d_n + a], expl.q_raw[d_n + b]
        lines.append(Line(
            f"{w.text('pair')}\\ {i + 1}: {w.phi}" if w.tex else f"pair {i + 1}: φ",
            f"{position} {w.times} {w.num(float(rope.frequencies(d_r)[i]), p + 2)} = {w.num(float(angle), p)}, "
            f"({w.num(float(x), p)}, {w.num(float(y), p)}) {w.text('turns to')} "
            f"({w.num(float(expl.q[d_n + a]), p)}, {w.num(float(expl.q[d_n + b]), p)})",
        ))  # fmt: skip
    lines.append(Line(w.prime("q"), w.vec(expl.q, p)))
    k_R = _sub(w, "k", "R")
    for j in _shown_keys(expl):
        key = expl.keys[j]
        lines.append(Line(_of(w, w.prime(k_R), w.label(key.label)), f"{w.text('RoPE')}({w.vec(key.k_raw[d_n:], p)}, {key.position - 1}) = {w.vec(key.k[d_n:], p)}"))
    notes = [
        f"{rope.describe()}, on the decoupled part only: the last d_r = {d_r} numbers of the query and of the shared rotary key "
        f"turn by their positions (angles θ^(−2i/d_r)); the first d_n = {d_n} are left as they are.",
        "Why decoupled: a rotation between q and W_UK would change with the position, so W_UK could no longer be folded into the "
        "query and the cache would have to hold every head's rotated keys. Keeping position on k_R lets the latent stay as it is.",
    ]
    return Step("Rotating the decoupled part (RoPE)", f"{w.prime('q')} = [{_sub(w, 'q', 'C')} | {w.text('RoPE')}({_sub(w, 'q', 'R')}, i)]", lines, notes)


def absorbed(expl: Explanation, p: int, w: Writer) -> Step:
    """The same row on the latent: q̃ = q_C·W_UKᵀ meets c_KV, q_R′ meets k_R′; the weights mix the latents; then ·W_UV."""
    s, mla, lat, head = expl.scenario, expl.scenario.variant(Mla), expl.result.mla, expl.head.mla
    assert mla is not None and lat is not None and head is not None
    n = Notation(expl.head.head if s.heads > 1 else None, w.tex)
    i, row = expl.position - 1, _row(expl)
    c_KV, k_R, W_UV = _sub(w, "c", "KV"), w.prime(_sub(w, "k", "R")), n(_sub(w, "W", "UV"))
    q_tilde = r"\tilde{q}" if w.tex else "q̃"
    top = "^{\\top}" if w.tex else "ᵀ"
    W_UK_T = n(_sub(w, "W", "UK"), transpose=True)  # one superscript: W_{UK}^{(h)\top}
    lines = [Line(q_tilde, f"{_sub(w, 'q', 'C')}{w.dot}{W_UK_T} = {w.vec(head.Q_latent[i], p)}")]
    for j in _shown_keys(expl):
        key = expl.keys[j]
        if key.masked:
            continue
        by_latent = float(head.Q_latent[i] @ lat.C_KV[j])
        by_rope = float(expl.q[mla.d_n :] @ lat.K_R_rope[j])
        plus = f"+ {w.num(by_rope, p)}" if by_rope >= 0 else f"{w.minus} {w.num(-by_rope, p)}"
        said = numbers.relation(shown(by_latent, p) + shown(by_rope, p), key.score, p, approx=w.approx)
        lines.append(Line(
            w.of("score", w.label(key.label)),
            f"{q_tilde}{w.dot}{c_KV} + {w.prime(_sub(w, 'q', 'R'))}{w.dot}{k_R} = {w.num(by_latent, p)} {plus} "
            f"{said} {w.num(key.score, p)}, {w.alpha} = {w.num(float(head.weights[row, j]), p, whole=False)}",
        ))  # fmt: skip
    lines.append(Line(f"{w.sigma} {w.alpha}{w.dot}{c_KV}", w.vec(head.mixed[i], p)))
    lines.append(Line(w.text("output"), f"({w.sigma} {w.alpha}{w.dot}{c_KV}){w.dot}{W_UV} = {w.vec(head.output[i], p)}"))
    difference = float(np.max(np.abs(head.weights[row] - expl.head.weights[row]), initial=0.0))
    out_difference = float(np.max(np.abs(head.output[i] - expl.head.output[i]), initial=0.0))
    ratio = mla.expanded / mla.cached
    notes = [
        "The absorbed form (DeepSeek-V2, section 2.1.3) never expands the keys and values: W_UK moves to the query's side "
        "(q·k = q_C·(c_KV·W_UK)ᵀ = (q_C·W_UKᵀ)·c_KV) and W_UV to after the weighting (Σ α·(c·W_UV) = (Σ α·c)·W_UV).",
        f"Both forms give the same weights: the largest difference in this row is {_tiny(difference)}, and in the output "
        f"{_tiny(out_difference)} (float64 rounding of the same products taken in another order)." if expl.result.round_steps is None else
        f"Both forms give the same weights when computed exactly; rounded to {expl.result.round_steps} decimals at every step, their "
        f"weights here differ by at most {_tiny(difference)} and their outputs by {_tiny(out_difference)}, since each form rounds other "
        "intermediate numbers.",
        f"So a token's cache is c_KV and k_R′: d_c + d_r = {mla.d_c} + {mla.d_r} = {mla.cached} numbers per layer, against "
        f"H·(d_k + d_v) = {s.heads} × ({mla.d_k} + {mla.d_v}) = {mla.expanded} for the expanded keys and values "
        f"({ratio:.3g}× smaller).",
    ]
    return Step("The same row from the latent (absorbed form)", f"{w.alpha} = {w.text('softmax')}(([{q_tilde} | {w.prime(_sub(w, 'q', 'R'))}]{w.dot}[{c_KV} | {k_R}]{top}) / {w.sqrt('d_k')})", lines, notes)


def _tiny(difference: float) -> str:
    """A difference between the two forms: 0 when they agree bit for bit, else like 1.1e-16."""
    return "0 (bit for bit)" if difference == 0 else f"{difference:.1e}"
