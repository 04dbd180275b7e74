"""The worked example as numbered steps, like a hand calculation, written once for every notation.

`steps(expl, precision, writer)` builds the steps with a `Writer` (Unicode for the terminal
and Markdown) or a `TexWriter` (LaTeX): the same function says the same thing in both, and
each variant (RoPE, grouped-query heads, a bias, a mask) adds its own step or sentence here.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from attncli.explain import Explanation, KeyStep
from attncli.notation import Notation, Writer
from attncli.numbers import smart

LONG_VECTOR = 6  # dot products of longer vectors are abbreviated
LONG_SUM = 12  # sums of more terms are abbreviated


class Line(NamedTuple):
    """One line of arithmetic: `lhs = rhs`, `token: rhs` (sep ":"), or (lhs empty) a continuation such as `+ [0.1, 0.2]`."""

    lhs: str
    rhs: str
    sep: str = "="


class Step(NamedTuple):
    title: str  # "The query"
    formula: str  # "q = e·W_Q", in the writer's notation
    lines: tuple[Line, ...] | list[Line] = ()  # the arithmetic
    notes: tuple[str, ...] | list[str] = ()  # sentences after the arithmetic (plain Unicode prose)
    matrix: tuple[str, np.ndarray] | None = None  # a matrix shown after the first line, e.g. ("W_Q", W_Q)


def step_lines(step: Step, precision: int) -> list[str]:
    """The arithmetic of a step as plain Unicode lines; a continuation lines up under the first `=`."""
    lines: list[str] = []
    pad = ""
    for line in step.lines:
        if line.sep == ":":
            lines.append(f"{line.lhs}: {line.rhs}")
        elif line.lhs:
            pad = " " * (len(line.lhs) + 1)
            lines.append(f"{line.lhs} = {line.rhs}")
        else:
            lines.append(f"{pad}{line.rhs}")
    if step.matrix is not None:
        name, matrix = step.matrix
        cells = [[smart(float(x), precision) for x in row] for row in matrix]
        width = max(len(cell) for row in cells for cell in row)
        lines[1:1] = [f"{name} ="] + ["  " + "  ".join(cell.rjust(width) for cell in row) for row in cells]
    return lines


def _keyed(w: Writer, key: KeyStep, rhs: str) -> Line:
    """A line about one key: `cat: e^1 = 2.718`."""
    return Line(w.label(key.label), rhs, ":")


def intro(expl: Explanation) -> list[str]:
    """Sentences before the steps: which word, where, which head, which rounding."""
    s = expl.scenario
    keys = "" if not s.cross else " → " + " ".join(s.key_tokens)
    lines = [f"Explaining {expl.token!r}, position {expl.position} of {s.L} in {s.name!r}: " + " ".join(s.tokens) + keys]
    if expl.other_positions:
        where = ", ".join(map(str, expl.other_positions))
        lines.append(f"{expl.token!r} also occurs at position {where}; pick one with --position N.")
    if s.cross:
        lines.append(f"Cross-attention: the query comes from this sentence, the {s.L_k} keys and values from the context.")
    if s.heads > 1:
        h, d_k, d_v = expl.head.head, s.d_k, s.d_v
        lines.append(f"Head {h} of {s.heads}: it uses columns {(h - 1) * d_k + 1}–{h * d_k} of W_Q" + (
            f" and W_K and {(h - 1) * d_v + 1}–{h * d_v} of W_V (d_k = {d_k}, d_v = {d_v})." if s.heads == s.G else f" (d_k = {d_k})."))
    if s.heads != s.G:
        g = expl.head.kv_head
        share = s.heads // s.G
        lines.append(
            f"Grouped-query attention: head {expl.head.head} reads key/value head {g} of {s.G}, which {share} query heads share "
            f"(heads {(g - 1) * share + 1}–{g * share}); its keys and values are columns {(g - 1) * s.d_k + 1}–{g * s.d_k} of "
            f"W_K and {(g - 1) * s.d_v + 1}–{g * s.d_v} of W_V."
        )
    if s.scale.mode == "none":
        lines.append("This scenario does not scale the scores (scale: none): they go into the softmax as they are.")
    if expl.result.round_steps is not None:
        lines.append(
            f"Every intermediate number is rounded to {expl.result.round_steps} decimals before the next step "
            "uses it, as in a hand calculation; the exact result is given at the end."
        )
    return lines


def steps(expl: Explanation, p: int, w: Writer = Writer()) -> list[Step]:
    """The steps at `p` decimals (decided once, by `numbers.decimals`), written by `w`."""
    s = expl.scenario
    out = [_query(expl, p, w)]
    if s.rope is not None:
        out.append(_rotation(expl, p, w))
    out.append(_dot_products(expl, p, w))
    if s.scale.mode != "none":
        out.append(_scaling(expl, p, w))
    if s.has_bias:
        out.append(_bias(expl, p, w))
    if s.mask.hides_anything:
        out.append(_mask(expl, w))
    out += [_exponentials(expl, p, w), _sum(expl, p, w), _weights(expl, p, w), _weighted(expl, p, w), _output(expl, p, w)]
    if expl.online is not None:
        from attncli.online_steps import online_steps

        out += online_steps(expl, p, w)
    return out


def _head(expl: Explanation, w: Writer) -> Notation:
    return Notation(expl.head.head if expl.scenario.heads > 1 else None, w.tex)


def _query(expl: Explanation, p: int, w: Writer) -> Step:
    n = _head(expl, w)
    word = w.label(expl.token)
    if expl.e is None:
        return Step("The query", f"q = {w.text('row')} {expl.position} {w.text('of')} {n('Q')}",
                    [Line(w.of("q", word), w.vec(expl.q_raw, p))], [f"Q is given directly: this is its row {expl.position}."])
    head = expl.head
    bias = head.b_Q
    formula = f"q = e{w.dot}{n('W_Q')}" + (f" + {n('b_Q')}" if bias is not None else "")
    product = f"{w.vec(expl.e, p)} {w.dot} {n('W_Q')}"
    if bias is not None:
        product += f" + {w.vec(bias, p)}"
    lines = [Line(w.of("e", word), w.vec(expl.e, p)), Line("q", f"{product} = {w.vec(expl.q_raw, p)}")]
    return Step("The query", formula, lines, matrix=(n("W_Q"), head.W_Q) if head.W_Q is not None else None)


def _rotation(expl: Explanation, p: int, w: Writer) -> Step:
    s = expl.scenario
    rope = s.rope
    assert rope is not None
    d_k = s.d_k
    position = expl.position - 1  # RoPE counts positions from 0
    angles = rope.angles(np.array([position]), d_k)[0]  # (d_k/2,)
    first, second = rope.pairs(d_k)
    lines = []
    for i, (a, b, angle) in enumerate(zip(first, second, angles)):
        x, y = expl.q_raw[a], expl.q_raw[b]
        lines.append(Line(
            f"{w.text('pair')}\\ {i + 1} \\ ({a + 1}, {b + 1}): {w.phi}" if w.tex else f"pair {i + 1} ({a + 1}, {b + 1}): φ",
            f"{position} {w.times} {w.num(float(rope.frequencies(d_k)[i]), p + 2)} = {w.num(float(angle), p)}, "
            f"({w.num(float(x), p)}, {w.num(float(y), p)}) {w.text('turns to')} ({w.num(float(expl.q[a]), p)}, {w.num(float(expl.q[b]), p)})",
        ))  # fmt: skip
    lines.append(Line(w.prime("q"), w.vec(expl.q, p)))
    shown = expl.keys if len(expl.keys) <= LONG_SUM else expl.keys[:5] + expl.keys[-2:]
    for key in shown:
        lines.append(Line(w.of(w.prime("k"), w.label(key.label)), f"{w.text('RoPE')}({w.vec(key.k_raw, p)}, {key.position - 1}) = {w.vec(key.k, p)}"))
    notes = [
        f"{rope.describe()}: the query at position {position} (counted from 0) turns its pair i by the angle "
        f"{position}·ω_i, with ω_i = θ^(−2i/d_k); each key turns by its own position the same way.",
        "Turning both by their positions makes q′·k′ depend on the positions only through their distance i − j: "
        "rotations compose, so rotating q by i and k by j is, for the dot product, rotating k by j − i.",
    ]
    if len(shown) < len(expl.keys):
        notes.append(f"{len(expl.keys) - len(shown)} of the {len(expl.keys)} rotated keys are left out here.")
    return Step("Rotating the query and the keys (RoPE)", f"{w.prime('q')} = {w.text('RoPE')}(q, i)", lines, notes)


def _dot_products(expl: Explanation, p: int, w: Writer) -> Step:
    long = len(expl.q) > LONG_VECTOR
    q = w.prime("q") if expl.scenario.rope is not None else "q"
    k = w.prime("k") if expl.scenario.rope is not None else "k"
    lines = []
    for key in expl.keys:
        terms = [f"({w.num(a, p)} {w.times} {w.num(b, p)})" for a, b in zip(expl.q, key.k)]
        if long:
            terms = terms[:3] + [w.ellipsis] + terms[-1:]
        lines.append(Line(f"{q}{w.dot}{w.of(k, w.label(key.label))}", f"{' + '.join(terms)} = {w.num(key.score, p)}"))
    notes = [f"The vectors have {len(expl.q)} numbers, so each sum shows its first three terms and its last."] if long else []
    return Step("One dot product per key", f"{w.text('score')} = {q}{w.dot}{k}", lines, notes)


def _scaling(expl: Explanation, p: int, w: Writer) -> Step:
    scale = expl.scenario.scale
    sqrt = scale.mode == "sqrt_dk"
    divisor = f"√d_k = √{expl.scenario.d_k} = {w.num(scale.divisor, p)}" if sqrt else Writer().num(scale.divisor, p)
    lines = [_keyed(w, key, f"{w.frac(w.num(key.score, p), w.num(scale.divisor, p))} = {w.num(key.scaled, p)}") for key in expl.keys]
    by = w.sqrt("d_k") if sqrt else w.num(scale.divisor, p)
    return Step("Scaling", f"{w.text('scaled')} = {w.frac(w.text('score'), by)}", lines,
                [f"Each score is divided by {divisor}, which keeps the softmax from saturating as d_k grows."])


def _bias(expl: Explanation, p: int, w: Writer) -> Step:
    s = expl.scenario
    h = expl.head.head
    lines = []
    i = expl.position
    for key in expl.keys:
        sum_ = w.num(key.scaled, p)
        if s.bias is not None:
            b = float(s.bias.matrix(h, s.L, s.L_k)[i - 1, key.position - 1])
            sum_ += f" {w.minus} {w.num(-b, p)}" if b < 0 else f" + {w.num(b, p)}"
        if s.alibi is not None:
            sum_ += f" {w.minus} {s.alibi.slopes[h - 1]:.6g} {w.times} ({i} {w.minus} {key.position})"
        lines.append(_keyed(w, key, f"{sum_} = {w.num(key.logit, p)}"))
    notes = []
    if s.alibi is not None:
        notes.append(
            f"ALiBi adds −m·(i − j) with this head's slope m = {s.alibi.slopes[h - 1]:.6g}: the farther key j lies from "
            "the query at position i, the more its score is lowered, so no position embedding is needed."
        )
    if s.bias is not None:
        notes.append("The scenario's bias matrix adds its entry (query row, key column) to each scaled score.")
    return Step("Adding the bias", f"{w.text('logit')} = {w.text('scaled')} + b", lines, notes)


def _mask(expl: Explanation, w: Writer) -> Step:
    s = expl.scenario
    hidden = [key for key in expl.keys if key.masked]
    sinks = [key for key in expl.keys if not key.masked and key.why]
    lines = [] if s.mask.name == "causal" else [
        _keyed(w, key, f"{w.minus_infinity} \\quad {w.text('(' + (key.why or '') + ')')}" if w.tex else f"−∞ ({key.why})") for key in hidden
    ]
    rule = s.mask.rule()
    if not hidden:
        note = f"{expl.token!r} at position {expl.position} sees every key ({rule}): nothing is hidden."
    elif s.mask.name == "causal":
        names = ", ".join(f"{key.token} ({key.position})" for key in hidden)
        note = (
            f"The mask is causal: {expl.token!r} at position {expl.position} may only look at positions "
            f"1–{expl.position}, the words before it and itself. Hidden: {names}. Their scores become −∞, "
            "so their exponentials are e^−∞ = 0 and their weights 0."
        )
    else:
        names = ", ".join(f"{key.token} ({key.position})" for key in hidden)
        note = (
            f"The mask is {s.mask.describe()}: {rule}. Hidden from {expl.token!r} at position {expl.position}: {names}. "
            "Their scores become −∞, so their exponentials are e^−∞ = 0 and their weights 0."
        )
    notes = [note] + [f"{key.token} ({key.position}) is {key.why}, although it lies outside the window." for key in sinks]
    title = "The causal mask" if s.mask.name == "causal" else "The mask"
    formula = w.text("query i sees keys 1..i") if s.mask.name == "causal" else w.text(rule.replace("query i sees key j when ", "seen when "))
    return Step(title, formula, lines, notes)


def _exponentials(expl: Explanation, p: int, w: Writer) -> Step:
    lines, notes = [], []
    shift = expl.shift
    for key in expl.keys:
        if key.masked:
            lines.append(_keyed(w, key, f"{w.exp(w.minus_infinity)} = 0" + (r" \quad \text{(hidden)}" if w.tex else " (hidden)")))
        elif shift:
            lines.append(_keyed(w, key, f"{w.exp(f'{w.num(key.logit, p)} {w.minus} {w.num(shift, p)}', grouped=True)} = {w.num(key.exp, p)}"))
        else:
            lines.append(_keyed(w, key, f"{w.exp(w.num(key.logit, p))} = {w.num(key.exp, p)}"))
    if shift:
        notes.append(
            f"Some scores lie beyond ±700, where e^x overflows float64, so each is first shifted by the row's "
            f"largest score m = {Writer().num(shift, p)}. The shift cancels in the next steps: e^(x − m) / Σ e^(x − m) = e^x / Σ e^x."
        )
    formula = w.exp(w.text("score")) if not shift else w.exp(f"{w.text('score')} {w.minus} m", grouped=True)
    return Step("Exponentials", formula, lines, notes)


def _sum(expl: Explanation, p: int, w: Writer) -> Step:
    terms = [w.num(key.exp, p) for key in expl.visible]
    notes = []
    if len(terms) > LONG_SUM:
        notes.append(f"{len(terms)} terms; the middle ones are left out here.")
        terms = terms[:5] + [w.ellipsis] + terms[-2:]
    return Step("The sum of the exponentials", f"{w.sigma} = {w.sigma}_j {w.exp(w.text('score') + '_j')}",
                [Line(w.sigma, f"{' + '.join(terms)} = {w.num(expl.exp_sum, p, whole=False)}")], notes)


def _weights(expl: Explanation, p: int, w: Writer) -> Step:
    lines = []
    for key in expl.keys:
        lhs = w.of(w.alpha, w.label(key.label))
        if key.masked:
            lines.append(Line(lhs, "0" + (r" \quad \text{(hidden)}" if w.tex else " (hidden)")))
        else:
            lines.append(Line(lhs, f"{w.frac(w.num(key.exp, p), w.num(expl.exp_sum, p, whole=False))} = {w.num(key.weight, p, whole=False)}"))
    total = sum(key.weight for key in expl.keys)
    if expl.result.round_steps is not None and round(total, 12) != 1:
        note = f"The rounded weights sum to {Writer().num(total, p, whole=False)}, not exactly 1: that is the rounding."
    else:
        note = f"The weights sum to {Writer().num(total, p, whole=False)}."
    return Step("The weights", f"{w.alpha} = {w.frac(w.exp(w.text('score')), w.sigma)}", lines, [note])


def _weighted(expl: Explanation, p: int, w: Writer) -> Step:
    lines = [
        _keyed(w, key, f"{w.num(key.weight, p, whole=False)} {w.times} {w.vec(key.v, p)} = {w.vec(key.weighted_v, p, whole=False)}")
        for key in expl.visible
    ]
    return Step("The weighted values", f"{w.alpha} {w.times} v", lines)


def _output(expl: Explanation, p: int, w: Writer) -> Step:
    parts = [w.vec(key.weighted_v, p, whole=False) for key in expl.visible]
    if len(parts) > LONG_SUM:
        parts = parts[:3] + [w.ellipsis] + parts[-2:]
    lhs = w.of(w.text("output"), w.label(expl.token))
    lines = [Line(lhs, parts[0])] + [Line("", f"+ {part}") for part in parts[1:]]
    lines.append(Line("", f"= {w.vec(expl.output, p, whole=False)}"))
    notes = [_reading(expl, p)]
    if expl.exact_output is not None:
        difference = expl.output - expl.exact_output
        plain = Writer()
        notes.append(
            f"Hand-rounded: {plain.vec(expl.output, p, whole=False)}; exact: {plain.vec(expl.exact_output, p + 1, whole=False)}; "
            f"difference: {plain.vec(difference, p + 1, whole=False)}."
        )
    s = expl.scenario
    if s.heads > 1 or s.W_O is not None:
        h, d_v = expl.head.head, s.d_v
        where = f"columns {(h - 1) * d_v + 1}–{h * d_v} of the heads' concatenation" if s.heads > 1 else "the concatenation"
        then = f", which W_O ({s.W_O.shape[0]} × {s.W_O.shape[1]}) mixes" if s.W_O is not None else ""
        final = expl.result.output[expl.position - 1]
        notes.append(f"This head's output fills {where}{then}; the final output for {expl.token!r} is {Writer().vec(final, p, whole=False)}.")
    return Step("The output", f"{w.text('output')} = {w.sigma} {w.alpha}{w.dot}v", lines, notes)


def _reading(expl: Explanation, p: int) -> str:
    """One sentence: which keys got the most attention, and which the least."""
    visible = expl.visible
    weights = np.array([key.weight for key in visible])
    plain = Writer()
    if len(visible) == 1:
        return f"{expl.token!r} sees only {visible[0].label if expl.scenario.cross else 'itself'}, so its output is that value vector."
    if np.ptp(weights) <= 1e-12:
        return f"{expl.token!r} attends equally to all {len(visible)} words it sees."
    most = [k.label for k, x in zip(visible, weights) if x >= weights.max() - 1e-12]
    least = [k.label for k, x in zip(visible, weights) if x <= weights.min() + 1e-12]
    return (
        f"{expl.token!r} attends most to {_and(most)} ({plain.num(float(weights.max()), p, whole=False)}{_each(most)}) "
        f"and least to {_and(least)} ({plain.num(float(weights.min()), p, whole=False)}{_each(least)})."
    )


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _each(names: list[str]) -> str:
    return " each" if len(names) > 1 else ""
