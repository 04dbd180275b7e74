"""The worked example as numbered steps of plain text, like a hand calculation.

Every renderer of `attncli explain` (terminal, Markdown) draws these same steps; only the
styling differs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from attncli.explain import Explanation, KeyStep
from attncli.numbers import fixed, smart, vector

LONG_VECTOR = 6  # dot products of longer vectors are abbreviated
LONG_SUM = 12  # sums of more terms are abbreviated


class Step(NamedTuple):
    title: str  # "The query"
    formula: str  # "q = e·W_Q"
    lines: tuple[str, ...] | list[str] = ()  # the arithmetic, one line each
    notes: tuple[str, ...] | list[str] = ()  # sentences after the arithmetic
    matrix: tuple[str, np.ndarray] | None = None  # a matrix drawn after the first line, e.g. ("W_Q", W_Q)


def display_precision(expl: Explanation, precision: int) -> int:
    rounding = expl.result.round_steps
    return precision if rounding is None else max(precision, rounding)


def label(key: KeyStep, expl: Explanation) -> str:
    return expl.scenario.labels()[key.position - 1]


def intro(expl: Explanation) -> list[str]:
    """Sentences before the steps: which word, where, which head, which rounding."""
    s = expl.scenario
    lines = [f"Explaining {expl.token!r}, position {expl.position} of {s.L} in {s.name!r}: " + " ".join(s.tokens)]
    if expl.other_positions:
        where = ", ".join(map(str, expl.other_positions))
        lines.append(f"{expl.token!r} also occurs at position {where}; pick one with --position N.")
    if s.heads > 1:
        h, d_k, d_v = expl.head.head, s.d_k, s.d_v
        lines.append(
            f"Head {h} of {s.heads}: it uses columns {(h - 1) * d_k + 1}–{h * d_k} of W_Q and W_K and "
            f"{(h - 1) * d_v + 1}–{h * d_v} of W_V (d_k = {d_k}, d_v = {d_v})."
        )
    if s.scale.mode == "none":
        lines.append("This scenario does not scale the scores (scale: none): they go into the softmax as they are.")
    if expl.result.round_steps is not None:
        lines.append(
            f"Every intermediate number is rounded to {expl.result.round_steps} decimals before the next step "
            "uses it, as in a hand calculation; the exact result is given at the end."
        )
    return lines


def steps(expl: Explanation, precision: int) -> list[Step]:
    p = display_precision(expl, precision)
    s = expl.scenario
    out = [_query(expl, p), _dot_products(expl, p)]
    if s.scale.mode != "none":
        out.append(_scaling(expl, p))
    if s.mask == "causal":
        out.append(_mask(expl))
    out += [_exponentials(expl, p), _sum(expl, p), _weights(expl, p), _weighted(expl, p), _output(expl, p, precision)]
    return out


def _query(expl: Explanation, p: int) -> Step:
    head, sub = expl.head, _head_sub(expl)
    bias = head.b_Q
    formula = f"q = e·W_Q{sub}" + (f" + b_Q{sub}" if bias is not None else "")
    lines = [f"e({expl.token}) = {vector(expl.e, p)}"]
    product = f"q = {vector(expl.e, p)} · W_Q{sub}"
    if bias is not None:
        product += f" + {vector(bias, p)}"
    lines.append(f"{product} = {vector(expl.q, p)}")
    return Step("The query", formula, lines, matrix=(f"W_Q{sub}", head.W_Q))


def _dot_products(expl: Explanation, p: int) -> Step:
    long = len(expl.q) > LONG_VECTOR
    lines = []
    for key in expl.keys:
        terms = [f"({smart(a, p)} × {smart(b, p)})" for a, b in zip(expl.q, key.k)]
        if long:
            terms = terms[:3] + ["…"] + terms[-1:]
        lines.append(f"q·k({label(key, expl)}) = {' + '.join(terms)} = {smart(key.score, p)}")
    notes = [f"The vectors have {len(expl.q)} numbers, so each sum shows its first three terms and its last."] if long else []
    return Step("One dot product per key", "score = q·k", lines, notes)


def _scaling(expl: Explanation, p: int) -> Step:
    scale = expl.scenario.scale
    divisor = f"√d_k = √{expl.scenario.d_k} = {smart(scale.divisor, p)}" if scale.mode == "sqrt_dk" else smart(scale.divisor, p)
    lines = [f"{label(key, expl)}: {smart(key.score, p)} / {smart(scale.divisor, p)} = {smart(key.scaled, p)}" for key in expl.keys]
    return Step("Scaling", "scaled = score / " + ("√d_k" if scale.mode == "sqrt_dk" else smart(scale.divisor, p)),
                lines, [f"Each score is divided by {divisor}, which keeps the softmax from saturating as d_k grows."])


def _mask(expl: Explanation) -> Step:
    hidden = [key for key in expl.keys if key.masked]
    if not hidden:
        note = f"{expl.token!r} is at position {expl.position}, the last: it sees every key, nothing is hidden."
    else:
        names = ", ".join(f"{key.token} ({key.position})" for key in hidden)
        note = (
            f"The mask is causal: {expl.token!r} at position {expl.position} may only look at positions "
            f"1–{expl.position}, the words before it and itself. Hidden: {names}. Their scores become −∞, "
            "so their exponentials are e^−∞ = 0 and their weights 0."
        )
    return Step("The causal mask", "query i sees keys 1..i", notes=[note])


def _exponentials(expl: Explanation, p: int) -> Step:
    lines, notes = [], []
    shift = expl.shift
    for key in expl.keys:
        if key.masked:
            lines.append(f"{label(key, expl)}: e^−∞ = 0 (hidden)")
        elif shift:
            lines.append(f"{label(key, expl)}: e^({smart(key.scaled, p)} − {smart(shift, p)}) = {smart(key.exp, p)}")
        else:
            lines.append(f"{label(key, expl)}: e^{smart(key.scaled, p)} = {smart(key.exp, p)}")
    if shift:
        notes.append(
            f"Some scores lie beyond ±700, where e^x overflows float64, so each is first shifted by the row's "
            f"largest score m = {smart(shift, p)}. The shift cancels in the next steps: e^(x − m) / Σ e^(x − m) = e^x / Σ e^x."
        )
    return Step("Exponentials", "e^score" if not shift else "e^(score − m)", lines, notes)


def _sum(expl: Explanation, p: int) -> Step:
    terms = [smart(key.exp, p) for key in expl.visible]
    notes = []
    if len(terms) > LONG_SUM:
        notes.append(f"{len(terms)} terms; the middle ones are left out here.")
        terms = terms[:5] + ["…"] + terms[-2:]
    return Step("The sum of the exponentials", "Σ = Σ_j e^score_j", [f"Σ = {' + '.join(terms)} = {fixed(expl.exp_sum, p)}"], notes)


def _weights(expl: Explanation, p: int) -> Step:
    lines = []
    for key in expl.keys:
        if key.masked:
            lines.append(f"α({label(key, expl)}) = 0 (hidden)")
        else:
            lines.append(f"α({label(key, expl)}) = {smart(key.exp, p)} / {fixed(expl.exp_sum, p)} = {fixed(key.weight, p)}")
    total = sum(key.weight for key in expl.keys)
    if expl.result.round_steps is not None and round(total, 12) != 1:
        note = f"The rounded weights sum to {fixed(total, p)}, not exactly 1: that is the rounding."
    else:
        note = f"The weights sum to {fixed(total, p)}."
    return Step("The weights", "α = e^score / Σ", lines, [note])


def _weighted(expl: Explanation, p: int) -> Step:
    lines = [
        f"{label(key, expl)}: {fixed(key.weight, p)} × {vector(key.v, p)} = {vector(key.weighted_v, p, whole=False)}"
        for key in expl.visible
    ]
    return Step("The weighted values", "α × v", lines)


def _output(expl: Explanation, p: int, precision: int) -> Step:
    parts = [vector(key.weighted_v, p, whole=False) for key in expl.visible]
    if len(parts) > LONG_SUM:
        parts = parts[:3] + ["…"] + parts[-2:]
    head = f"output({expl.token}) = "
    pad = " " * (len(head) - 2)
    lines = [head + parts[0]] + [f"{pad}+ {part}" for part in parts[1:]]
    lines.append(f"{pad}= {vector(expl.output, p, whole=False)}")
    notes = [_reading(expl, p)]
    if expl.exact_output is not None:
        exact_p = max(precision, expl.result.round_steps or 0) + 1
        difference = expl.output - expl.exact_output
        notes.append(
            f"Hand-rounded: {vector(expl.output, p, whole=False)}; exact: {vector(expl.exact_output, exact_p, whole=False)}; "
            f"difference: {vector(difference, exact_p, whole=False)}."
        )
    s = expl.scenario
    if s.heads > 1 or s.W_O is not None:
        h, d_v = expl.head.head, s.d_v
        where = f"columns {(h - 1) * d_v + 1}–{h * d_v} of the heads' concatenation" if s.heads > 1 else "the concatenation"
        then = f", which W_O ({s.W_O.shape[0]} × {s.W_O.shape[1]}) mixes" if s.W_O is not None else ""
        final = expl.result.output[expl.position - 1]
        notes.append(f"This head's output fills {where}{then}; the final output for {expl.token!r} is {vector(final, p, whole=False)}.")
    return Step("The output", "output = Σ α·v", lines, notes)


def _reading(expl: Explanation, p: int) -> str:
    """One sentence: which keys got the most attention, and which the least."""
    visible = expl.visible
    weights = np.array([key.weight for key in visible])
    if len(visible) == 1:
        return f"{expl.token!r} sees only itself, so its output is its own value vector."
    if np.ptp(weights) <= 1e-12:
        return f"{expl.token!r} attends equally to all {len(visible)} words it sees."
    most = [label(k, expl) for k, w in zip(visible, weights) if w >= weights.max() - 1e-12]
    least = [label(k, expl) for k, w in zip(visible, weights) if w <= weights.min() + 1e-12]
    return (
        f"{expl.token!r} attends most to {_and(most)} ({fixed(weights.max(), p)}{_each(most)}) "
        f"and least to {_and(least)} ({fixed(weights.min(), p)}{_each(least)})."
    )


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _each(names: list[str]) -> str:
    return " each" if len(names) > 1 else ""


def _head_sub(expl: Explanation) -> str:
    return f"^{expl.head.head}" if expl.scenario.heads > 1 else ""
