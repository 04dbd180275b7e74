"""How multi-head latent attention (core/variants/mla.py) is shown: its stage-table rows and its steps of `explain`.

The module `Mla` names for its `rows`, `projection`, `introduce`, `narrate` and `narrate_output` (core.variants.shown):
    the latents every head shares (stage `latent`, after the embeddings): X·W_DKV, C_KV, K_R and its rotation, C_Q;
    each head's up-projections (W_UK in stage `k`, W_UV in stage `v`) and how its Q, K and V are written from them;
    each head's absorbed form (stage `absorbed`, after its output): q_C·W_UKᵀ, the weights from it, Σ α·c_KV, ·W_UV;
    explain's steps that replace the textbook's query and keys (the query, the latent with the keys and values
    expanded from it, the decoupled rotation) and, after the output, the same row the absorbed way.
A formula gets the document's Notation (n) and a step the narration's Say (say.w writes, say.n is the head's notation),
duck-typed: core imports nothing of text. The variant is found by its stage ("heads"), so this module needs no import of
mla.py, which imports it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attncli.core import rounding
from attncli.core.variants.shown import Narrated, Say, StageRow

# -- formulas ------------------------------------------------------------------------------------------------


def _mla(s: Any) -> Any:
    """The scenario's Mla: the variant that makes each head's q, k and v."""
    return next(variant for variant in s.variants if variant.stage == "heads")


def _sub(n: Any, base: str, index: str, *, head: bool = False) -> str:
    """W_UK as `W_UK` or `W_{UK}` (n: a Notation or a Writer), with the head's mark when `head`."""
    symbol = f"{base}_{{{index}}}" if n.tex else f"{base}_{index}"
    return str(n(symbol)) if head else symbol


def projection(n: Any, s: Any, letter: str) -> str:
    """Q = [X·W_UQ | X·W_QR], K = [C_KV·W_UK | K_R], V = C_KV·W_UV: each head's part of the latents' expansion."""
    t, bar = n.times(), (r" \;|\; " if n.tex else " | ")
    latent = _sub(n, "C", "KV")
    if letter == "Q":
        source = "X" if _mla(s).W_DQ is None else _sub(n, "C", "Q")
        return f"{n('Q')} = [{source}{t}{_sub(n, 'W', 'UQ', head=True)}{bar}{source}{t}{_sub(n, 'W', 'QR', head=True)}]"
    if letter == "K":
        return f"{n('K')} = [{latent}{t}{_sub(n, 'W', 'UK', head=True)}{bar}{_sub(n, 'K', 'R')}]"
    return f"{n('V')} = {latent}{t}{_sub(n, 'W', 'UV', head=True)}"


def _norm(n: Any) -> str:
    return r"\operatorname{RMSNorm}" if n.tex else "RMSNorm"


def _down_q(n: Any, s: Any, h: Any) -> str:
    down = f"X{n.times()}{_sub(n, 'W', 'DQ')}"
    return f"{_sub(n, 'C', 'Q')} = " + (f"{_norm(n)}({down})" if _mla(s).q_norm is not None else down)


def _down_kv(n: Any, s: Any, h: Any) -> str:
    return f"X{n.times()}{_sub(n, 'W', 'DKV')}"


def _latent(n: Any, s: Any, h: Any) -> str:
    down = _down_kv(n, s, h)
    return f"{_sub(n, 'C', 'KV')} = " + (f"{_norm(n)}({down})" if _mla(s).kv_norm is not None else down)


def _k_r(n: Any, s: Any, h: Any) -> str:
    return f"{_sub(n, 'K', 'R')} = X{n.times()}{_sub(n, 'W', 'KR')}"


def _k_rope(n: Any) -> str:
    """K_R′: the shared rotary key after RoPE."""
    return _sub(n, "K", "R") + ("'" if n.tex else "′")


def _k_r_rotated(n: Any, s: Any, h: Any) -> str:
    return f"{_k_rope(n)} = {n.text('RoPE')}({_sub(n, 'K', 'R')})"


def _query_latent(n: Any) -> str:
    """q_C·W_UKᵀ, with one superscript: W_{UK}^{(h)\\top}."""
    return f"{_sub(n, 'Q', 'C', head=True)}{n.times()}{n(_sub(n, 'W', 'UK'), transpose=True)}"


def _absorbed_weights(n: Any, s: Any, h: Any, divisor: str) -> str:
    t, bar, top = n.times(), (r" \;|\; " if n.tex else " | "), (r"^{\top}" if n.tex else "ᵀ")
    query = f"[{_query_latent(n)}{bar}{n.text('RoPE')}({_sub(n, 'Q', 'R', head=True)})]"
    return f"{n('A')} = {n.text('softmax')}({query}{t}[{_sub(n, 'C', 'KV')}{bar}{_k_rope(n)}]{top} / {divisor})"


def _absorbed_output(n: Any, s: Any, h: Any) -> str:
    t = n.times()
    return f"{n('O')} = ({n('A')}{t}{_sub(n, 'C', 'KV')}){t}{_sub(n, 'W', 'UV', head=True)}"


# -- where the numbers are -------------------------------------------------------------------------------------


def _shared(attribute: str) -> Any:
    """A latent every head shares (RunResult.mla); X·W_DKV only when a norm follows it, K_R′ only under RoPE."""

    def get(result: Any) -> np.ndarray | None:
        if result.mla is None:
            return None
        if attribute == "D_KV" and _mla(result.scenario).kv_norm is None:
            return None
        if attribute == "K_R_rope" and not any(variant.stage == "qk" for variant in result.scenario.variants):
            return None
        array: np.ndarray | None = getattr(result.mla, attribute)
        return array

    return get


def _head(attribute: str) -> Any:
    """Per head, its up-projection or a part of its absorbed form (HeadResult.mla)."""
    return lambda head: None if head.mla is None else getattr(head.mla, attribute)


ROWS: tuple[StageRow, ...] = (
    StageRow("latent", "C_Q", "Query latent", _down_q, _shared("C_Q"), "queries", "cq", after="X_kv", shared=True),
    StageRow("latent", "D_KV", "Down-projection, before its norm", _down_kv, _shared("D_KV"), "keys", "c", after="C_Q", shared=True),
    StageRow("latent", "C_KV", "Key/value latent (cached)", _latent, _shared("C_KV"), "keys", "c", after="D_KV", main=True, shared=True),
    StageRow("latent", "K_R", "Shared rotary key part", _k_r, _shared("K_R"), "keys", "r", after="C_KV", shared=True),
    StageRow("latent", "K_R_rope", "Shared rotary key part, rotated (cached)", _k_r_rotated, _shared("K_R_rope"), "keys", "r",
             after="K_R", shared=True),
    StageRow("k", "W_UK", "Key up-projection", lambda n, s, h: _sub(n, "W", "UK", head=True), _head("W_UK"), "c", "k", after="b_K",
             kv=True),
    StageRow("v", "W_UV", "Value up-projection", lambda n, s, h: _sub(n, "W", "UV", head=True), _head("W_UV"), "c", "v", after="b_V",
             kv=True),
    StageRow("absorbed", "Q_latent", "Query absorbed into the latent", lambda n, s, h: _query_latent(n), _head("Q_latent"), "queries", "c",
             after="output"),
    StageRow("absorbed", "A_absorbed", "Attention weights, absorbed form", _absorbed_weights, _head("weights"), "queries", "keys",
             after="Q_latent", after_mask=True, main=True, json=("A_absorbed",), of="divisor"),
    StageRow("absorbed", "mixed", "Latents mixed by the weights", lambda n, s, h: f"{n('A')}{n.times()}{_sub(n, 'C', 'KV')}", _head("mixed"),
             "queries", "c", after="A_absorbed"),
    StageRow("absorbed", "O_absorbed", "Output, absorbed form", _absorbed_output, _head("output"), "queries", "o", after="mixed"),
)  # fmt: skip


# -- explain's steps -------------------------------------------------------------------------------------------


def _of(w: Any, symbol: str, label: str) -> str:
    """c_KV(cat), or in TeX {c_{KV}}_{cat}: a subscripted symbol braced so that the token's subscript is not a second one."""
    return str(w.of("{" + symbol + "}" if w.tex and "_" in symbol else symbol, label))


def _row(expl: Any) -> int:
    """Where the query's row sits among the rows the result keeps."""
    rows = expl.result.rows
    return int(expl.position - 1 if rows is None else rows.index(expl.position - 1))


def _shown_keys(expl: Any, say: Say) -> list[int]:
    """Key indexes (from 0) to write out: all, or the first five and the last two of a long row."""
    L_k = len(expl.keys)
    return list(range(L_k)) if L_k <= say.long else [*range(5), L_k - 2, L_k - 1]


def introduce(mla: Any, expl: Any) -> list[str]:
    """The sentence explain's intro says instead of 'columns … of W_Q'."""
    s, h = expl.scenario, expl.head.head
    return [
        f"Multi-head latent attention, head {h} of {s.heads}: its query is [q_C | q_R] ({mla.d_n} + {mla.d_r} numbers, columns "
        f"{(h - 1) * mla.d_n + 1}–{h * mla.d_n} of W_UQ and {(h - 1) * mla.d_r + 1}–{h * mla.d_r} of W_QR); its keys and values "
        f"are expanded from each token's latent c_KV ({mla.d_c} numbers) by columns {(h - 1) * mla.d_n + 1}–{h * mla.d_n} of W_UK "
        f"and {(h - 1) * mla.d_v + 1}–{h * mla.d_v} of W_UV, and every head shares one rotary key part k_R ({mla.d_r} numbers)."
    ]


def narrate(mla: Any, expl: Any, say: Say) -> list[Narrated]:
    """The query from its embedding, the keys and values from the latent, and the rotation of the decoupled part (RoPE's step)."""
    steps = [_query(mla, expl, say), _keys_values(mla, expl, say)]
    rope = next((variant for variant in expl.scenario.variants if variant.stage == "qk"), None)
    if rope is not None:
        steps.append(_rotation(mla, rope, expl, say))
    return steps


def _query(mla: Any, expl: Any, say: Say) -> Narrated:
    lat, w, p, n = expl.result.mla, say.w, say.p, say.n
    word, i, d_n = w.label(expl.token), expl.position - 1, mla.d_n
    lines: list[tuple[str, ...]] = [(w.of("e", word), w.vec(expl.e, p))]
    source = "e"
    notes = []
    if lat.C_Q is not None:
        source = _sub(w, "c", "Q")
        norm = w.text("RMSNorm") if mla.q_norm is not None else ""
        lines.append((_of(w, source, word), f"{norm}(e{w.dot}{_sub(w, 'W', 'DQ')}) = {w.vec(lat.C_Q[i], p)}" if norm else
                      f"e{w.dot}{_sub(w, 'W', 'DQ')} = {w.vec(lat.C_Q[i], p)}"))  # fmt: skip
        notes.append(f"The query first goes through its own latent of d_cq = {mla.d_cq} numbers (DeepSeek's q_a_proj"
                     + (" and q_a_layernorm" if mla.q_norm is not None else "") + "), which saves weights, not cache.")  # fmt: skip
    W_UQ, W_QR = n(_sub(w, "W", "UQ")), n(_sub(w, "W", "QR"))
    lines.append((_sub(w, "q", "C"), f"{source}{w.dot}{W_UQ} = {w.vec(expl.q_raw[:d_n], p)}"))
    lines.append((_sub(w, "q", "R"), f"{source}{w.dot}{W_QR} = {w.vec(expl.q_raw[d_n:], p)}"))
    lines.append(("q", f"[{_sub(w, 'q', 'C')} | {_sub(w, 'q', 'R')}] = {w.vec(expl.q_raw, p)}"))
    notes.append(f"q_C ({d_n} numbers) meets the keys' latent part, q_R ({mla.d_r}) the shared rotary key: position lives only in q_R.")
    return Narrated("The query", f"q = [{source}{w.dot}{W_UQ} | {source}{w.dot}{W_QR}]", lines, notes)


def _keys_values(mla: Any, expl: Any, say: Say) -> Narrated:
    lat, w, p, n = expl.result.mla, say.w, say.p, say.n
    c_KV, k_R = _sub(w, "c", "KV"), _sub(w, "k", "R")
    lines: list[tuple[str, ...]] = []
    for j in _shown_keys(expl, say):
        key = expl.keys[j]
        label = w.label(key.label)
        lines.append((_of(w, c_KV, label), w.vec(lat.C_KV[j], p)))
        lines.append((w.of("k", label), f"[{c_KV}{w.dot}{n(_sub(w, 'W', 'UK'))} | {k_R}] = {w.vec(key.k_raw, p)}"))
        lines.append((w.of("v", label), f"{c_KV}{w.dot}{n(_sub(w, 'W', 'UV'))} = {w.vec(key.v, p)}"))
    norm = " and its RMSNorm (DeepSeek's kv_a_layernorm)" if mla.kv_norm is not None else ""
    notes = [
        f"Each token is compressed to a latent c_KV = x·W_DKV{norm} of d_c = {mla.d_c} numbers; this head expands it into its "
        f"key part (·W_UK, {mla.d_n} numbers) and its value (·W_UV, {mla.d_v}). The key's last {mla.d_r} numbers are "
        f"k_R = x·W_KR, one rotary key per token that every head shares.",
    ]
    if len(lines) < 3 * len(expl.keys):
        notes.append(f"{len(expl.keys) - len(lines) // 3} of the {len(expl.keys)} keys are left out here.")
    down = f"x{w.dot}{_sub(w, 'W', 'DKV')}"
    formula = f"{c_KV} = " + (f"{w.text('RMSNorm')}({down})" if mla.kv_norm is not None else down)
    return Narrated("The latent, and the keys and values expanded from it", formula, lines, notes)


def _rotation(mla: Any, rope: Any, expl: Any, say: Say) -> Narrated:
    w, p = say.w, say.p
    d_n, d_r = mla.d_n, mla.d_r
    position = expl.position - 1
    angles = rope.angles(np.array([position]), d_r)[0]  # (d_r/2,)
    first, second = rope.pairs(d_r)
    lines: list[tuple[str, ...]] = []
    for i, (a, b, angle) in enumerate(zip(first, second, angles)):
        x, y = expl.q_raw[d_n + a], expl.q_raw[d_n + b]
        lines.append((
            f"{w.text('pair')}\\ {i + 1}: {w.phi}" if w.tex else f"pair {i + 1}: φ",
            f"{position} {w.times} {w.num(float(rope.frequencies(d_r)[i]), p + 2)} = {w.num(float(angle), p)}, "
            f"({w.num(float(x), p)}, {w.num(float(y), p)}) {w.text('turns to')} "
            f"({w.num(float(expl.q[d_n + a]), p)}, {w.num(float(expl.q[d_n + b]), p)})",
        ))  # fmt: skip
    lines.append((w.prime("q"), w.vec(expl.q, p)))
    k_R = _sub(w, "k", "R")
    for j in _shown_keys(expl, say):
        key = expl.keys[j]
        lines.append((_of(w, w.prime(k_R), w.label(key.label)),
                      f"{w.text('RoPE')}({w.vec(key.k_raw[d_n:], p)}, {key.position - 1}) = {w.vec(key.k[d_n:], p)}"))  # fmt: skip
    notes = [
        f"{rope.describe()}, on the decoupled part only: the last d_r = {d_r} numbers of the query and of the shared rotary key "
        f"turn by their positions (angles θ^(−2i/d_r)); the first d_n = {d_n} are left as they are.",
        "Why decoupled: a rotation between q and W_UK would change with the position, so W_UK could no longer be folded into the "
        "query and the cache would have to hold every head's rotated keys. Keeping position on k_R lets the latent stay as it is.",
    ]
    formula = f"{w.prime('q')} = [{_sub(w, 'q', 'C')} | {w.text('RoPE')}({_sub(w, 'q', 'R')}, i)]"
    return Narrated("Rotating the decoupled part (RoPE)", formula, lines, notes)


def narrate_output(mla: Any, expl: Any, say: Say) -> Narrated | None:
    """After the output, the same row on the latent: q̃ = q_C·W_UKᵀ meets c_KV, q_R′ meets k_R′; the weights mix the latents; then ·W_UV."""
    s, lat, head, w, p, n = expl.scenario, expl.result.mla, expl.head.mla, say.w, say.p, say.n
    if head is None:
        return None
    i, row = expl.position - 1, _row(expl)
    c_KV, k_R, W_UV = _sub(w, "c", "KV"), w.prime(_sub(w, "k", "R")), n(_sub(w, "W", "UV"))
    q_tilde = r"\tilde{q}" if w.tex else "q̃"
    top = "^{\\top}" if w.tex else "ᵀ"
    W_UK_T = n(_sub(w, "W", "UK"), transpose=True)  # one superscript: W_{UK}^{(h)\top}
    lines: list[tuple[str, ...]] = [(q_tilde, f"{_sub(w, 'q', 'C')}{w.dot}{W_UK_T} = {w.vec(head.Q_latent[i], p)}")]
    for j in _shown_keys(expl, say):
        key = expl.keys[j]
        if key.masked:
            continue
        by_latent = float(head.Q_latent[i] @ lat.C_KV[j])
        by_rope = float(expl.q[mla.d_n :] @ lat.K_R_rope[j])
        plus = f"+ {w.num(by_rope, p)}" if by_rope >= 0 else f"{w.minus} {w.num(-by_rope, p)}"
        said = say.relation(say.shown(by_latent) + say.shown(by_rope), key.score, name=f"the absorbed score of {key.label}")
        lines.append((
            w.of("score", w.label(key.label)),
            f"{q_tilde}{w.dot}{c_KV} + {w.prime(_sub(w, 'q', 'R'))}{w.dot}{k_R} = {w.num(by_latent, p)} {plus} "
            f"{said} {w.num(key.score, p)}, {w.alpha} = {w.num(float(head.weights[row, j]), p, whole=False)}",
        ))  # fmt: skip
    lines.append((f"{w.sigma} {w.alpha}{w.dot}{c_KV}", w.vec(head.mixed[i], p)))
    lines.append((w.text("output"), f"({w.sigma} {w.alpha}{w.dot}{c_KV}){w.dot}{W_UV} = {w.vec(head.output[i], p)}"))
    difference = head.weights[row] - expl.head.weights[row]  # (L_k,)
    out_difference = head.output[i] - expl.head.output[i]  # (d_v,)
    ratio = mla.expanded / mla.cached
    notes = [
        "The absorbed form (DeepSeek-V2, section 2.1.3) never expands the keys and values: W_UK moves to the query's side "
        "(q·k = q_C·(c_KV·W_UK)ᵀ = (q_C·W_UKᵀ)·c_KV) and W_UV to after the weighting (Σ α·(c·W_UV) = (Σ α·c)·W_UV).",
        f"Both forms give the same weights: the largest difference in this row is {_weights_apart(difference, expl)}, and in the "
        f"output {_outputs_apart(out_difference, head, expl)}: the same products taken in another order." if expl.result.round_steps is None else
        f"Both forms give the same weights when computed exactly; rounded to {expl.result.round_steps} decimals at every step, their "
        f"weights here differ by at most {_weights_apart(difference, expl)} and their outputs by {_outputs_apart(out_difference, head, expl)}, "
        "since each form rounds other intermediate numbers.",
        f"So a token's cache is c_KV and k_R′: d_c + d_r = {mla.d_c} + {mla.d_r} = {mla.cached} numbers per layer, against "
        f"H·(d_k + d_v) = {s.heads} × ({mla.d_k} + {mla.d_v}) = {mla.expanded} for the expanded keys and values "
        f"({ratio:.3g}× smaller).",
    ]  # fmt: skip
    formula = (f"{w.alpha} = {w.text('softmax')}(([{q_tilde} | {w.prime(_sub(w, 'q', 'R'))}]{w.dot}[{c_KV} | {k_R}]{top}) / "
               f"{w.sqrt('d_k')})")  # fmt: skip
    return Narrated("The same row from the latent (absorbed form)", formula, lines, notes)


def _weights_apart(difference: np.ndarray, expl: Any) -> str:
    """How far the two forms' weights of one row lie apart (core.rounding): a softmax of scores of |q|·|k| terms each."""
    scores = np.abs(expl.head.scores)  # (L_q, L_k) the scores' size bounds how far their rounding moves a weight
    return rounding.agreement(difference, scale=float(scores.max(initial=0.0)) + 1.0, terms=expl.scenario.d_k + len(difference))


def _outputs_apart(difference: np.ndarray, head: Any, expl: Any) -> str:
    """How far the two forms' outputs lie apart (core.rounding): weighted sums of values, through the up-projection."""
    scale = float(np.abs(expl.head.V).max(initial=0.0)) * (1.0 + float(np.abs(expl.head.scores).max(initial=0.0)))
    return rounding.agreement(difference, scale=scale, terms=expl.scenario.d_k + len(expl.head.V))
