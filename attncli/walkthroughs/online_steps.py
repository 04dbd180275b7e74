"""FlashAttention's online softmax told as steps of the hand calculation (`explain --block-size B`).

The same `Step`s as the rest of the walk-through (see narration.py), so the terminal, Markdown
and LaTeX show them as they show every other step. A line whose shown numbers do not give the
shown result at the shown precision says ≈ instead of =, by the rule every step uses (`numbers.relation`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import NamedTuple

import numpy as np

from attncli.core import rounding
from attncli.core.explain import Explanation
from attncli.core.online import OnlineBlock, OnlineRow
from attncli.document.blocks import Line, Step
from attncli.document.notation import Writer
from attncli.document.numbers import exact_decimals, relation, shown
from attncli.walkthroughs.lengths import LONG_SUM

WHY_RESCALE = (
    "Why rescale: each block's exponentials are taken against the largest score seen so far; when a later block "
    "brings a larger one, what was summed before was measured against the old maximum, and multiplying it by "
    "e^(m_old − m_new) puts it on the new one."
)
WHY_EXACT = (
    "Why the answer is exact: at the end every term of l and o carries the same factor e^(−m) for the row's true "
    "maximum m, which cancels in o / l; only the order of the additions differs from the ordinary softmax, "
    "so the two agree to the last digit or within a few units in the last place."
)


class _Start(NamedTuple):
    """The state before the first block when a learned sink starts it: m = sink, l = e^(sink − m) = 1, o = 0."""

    max: float
    sum: float
    output: np.ndarray  # (d_v,) zeros


def online_steps(expl: Explanation, p: int, w: Writer) -> list[Step]:
    """The steps of the online softmax of the explained row: a start, one per block, and the result."""
    row = expl.online
    assert row is not None, "online_steps needs an explanation made with block_size"
    count = len(row.blocks)
    notes = [
        f"FlashAttention never holds the whole row of scores: it reads the {expl.scenario.L_k} keys in {count} "
        f"block{'s' * (count > 1)} of {row.block_size}, keeping only a running maximum m, a running sum l of "
        "exponentials and a running output o (not yet divided by l).",
    ]
    if row.sink is None:
        formula = f"m = {w.minus_infinity}, \\; l = 0, \\; o = 0" if w.tex else "m = −∞, l = 0, o = 0"
    else:  # a learned sink: one more logit with no value starts the state
        formula = f"m = {w.num(row.sink, p)}, \\; l = 1, \\; o = 0" if w.tex else f"m = {w.num(row.sink, p)}, l = 1, o = 0"
        notes.append("The head's learned sink starts the state: its logit is the first maximum and its e^(sink − m) = 1 the first "
                     "sum; having no value, it adds nothing to o.")  # fmt: skip
    start = Step(f"Online softmax: the same row, {row.block_size} key{'s' * (row.block_size > 1)} at a time", formula, notes=notes)
    out = [start]
    d_v = expl.output.shape[0]
    before: OnlineBlock | _Start | None = None if row.sink is None else _Start(row.sink, 1.0, np.zeros(d_v))
    for number, block in enumerate(row.blocks, 1):
        out.append(_block(expl, block, before, number, count, p, w))
        if not block.skipped:
            before = block
    out.append(_result(expl, row, p, w))
    return out


def _block(expl: Explanation, block: OnlineBlock, before: OnlineBlock | _Start | None, number: int, count: int, p: int, w: Writer) -> Step:
    keys = [expl.keys[int(j) - 1] for j in block.keys]
    first, last = int(block.keys[0]), int(block.keys[-1])
    title = f"Block {number} of {count}: key{'s' * (last > first)} {first}" + (f"–{last}" if last > first else "")
    formula = f"m = max(m, {w.text('block max')})" if not w.tex else r"m = \max(m, \max_{\text{block}} s)"
    if block.skipped:
        return Step(title, formula, [Line(w.label(k.label), w.text("hidden"), ":") for k in keys],
                    ["Every key of this block is hidden by the mask: the block is skipped and m, l and o stay as they were."])  # fmt: skip
    lines = [Line(w.label(k.label), f"s = {w.num(k.logit, p)}" if not k.masked else w.text("hidden"), ":") for k in keys]
    m_old = None if before is None else before.max
    if m_old is None:
        lines.append(Line("m", f"{w.num(block.block_max, p)}"))
    else:
        biggest = r"\max" if w.tex else "max"
        lines.append(Line("m", f"{biggest}({w.num(m_old, p)}, {w.num(block.block_max, p)}) = {w.num(block.max, p)}"))
    exps = []
    for k, e, seen in zip(keys, block.exp, block.visible):
        if seen:
            exponent = f"{w.num(k.logit, p)} {w.minus} {w.num(block.max, p)}"
            reader = (shown(k.logit, p) - shown(block.max, p)).exp()
            exps.append(Line(w.label(k.label), f"{w.exp(exponent, grouped=True)} {relation(reader, float(e), p, approx=w.approx)} "
                                               f"{w.num(float(e), p)}", ":"))  # fmt: skip
    lines += exps
    shown_exp = [float(e) for e, seen in zip(block.exp, block.visible) if seen]
    notes: list[str] = []
    if before is None:
        terms = _terms([w.num(x, p) for x in shown_exp], w)
        lines.append(Line("l", f"{terms} {relation(_sum(shown_exp, p), block.sum, p, approx=w.approx)} {w.num(block.sum, p)}"))
        vectors = [w.vec(v, p) for v in block.block_output[None, :]]
        lines.append(Line("o", f"{w.sigma} e{w.dot}v = {vectors[0]}"))
        notes.append("The first block sets m: there is nothing before it to rescale.")
    else:
        assert m_old is not None
        rescale = block.rescale
        lines.append(Line(w.text("rescale"), f"{w.exp(f'{w.num(m_old, p)} {w.minus} {w.num(block.max, p)}', grouped=True)} "
                                             f"{relation((shown(m_old, p) - shown(block.max, p)).exp(), rescale, p, approx=w.approx)} "
                                             f"{w.num(rescale, p)}"))  # fmt: skip
        terms = _terms([w.num(x, p) for x in shown_exp], w)
        expected = shown(rescale, p) * shown(before.sum, p) + _sum(shown_exp, p)
        lines.append(Line("l", f"{w.num(rescale, p)} {w.times} {w.num(before.sum, p)} + {terms} "
                               f"{relation(expected, block.sum, p, approx=w.approx)} {w.num(block.sum, p)}"))  # fmt: skip
        expected_o = [shown(rescale, p) * shown(float(a), p) + shown(float(b), p) for a, b in zip(before.output, block.block_output)]
        lines.append(Line("o", f"{w.num(rescale, p)} {w.times} {w.vec(before.output, p)} + {w.vec(block.block_output, p)} "
                               f"{relation(expected_o, block.output, p, approx=w.approx)} {w.vec(block.output, p)}"))  # fmt: skip
        if block.max > m_old:
            notes.append(f"This block holds a larger score, so what came before is multiplied by {Writer().num(rescale, p)}.")
        else:
            notes.append("No larger score here: the maximum stays and the rescale factor is 1.")
    plain = Writer()  # notes are prose in Unicode, whatever the writer
    seen_keys = [(k, float(e)) for k, e, seen in zip(keys, block.exp, block.visible) if seen]
    contributions = " + ".join(f"{plain.num(e, p)} × {plain.vec(k.v, p)}" for k, e in seen_keys)
    products = [sum((shown(e, p) * shown(float(k.v[c]), p) for k, e in seen_keys), Decimal(0)) for c in range(len(block.block_output))]
    notes.insert(0, f"This block's weighted values: Σ e·v = {contributions} {relation(products, block.block_output, p, approx=plain.approx)} "
                    f"{plain.vec(block.block_output, p)}.")  # fmt: skip
    return Step(title, formula, lines, notes)


def _result(expl: Explanation, row: OnlineRow, p: int, w: Writer) -> Step:
    plain = Writer()
    ordinary = expl.output  # (d_v,)
    difference = row.output - ordinary  # (d_v,)
    total = shown(row.sum, p)
    divided = relation([shown(float(x), p) / total for x in _last_output(row)], row.output, p, approx=w.approx) if total else w.approx
    lines = [
        Line(w.text("output"), f"o / l = {w.frac(w.vec(_last_output(row), p), w.num(row.sum, p))} "
                               f"{divided} {w.vec(row.output, p, whole=False)}"),  # fmt: skip
        Line(w.text("ordinary"), w.vec(ordinary, p, whole=False)),
        Line(w.text("difference"), _differences(difference, expl, w)),
    ]
    notes = [WHY_RESCALE, WHY_EXACT]
    if expl.exact_online is not None and expl.exact_output is not None:
        exact_difference = expl.exact_online.output - expl.exact_output
        notes.append(
            f"Rounded by hand, the two orders of work round at different points, so they may differ: online "
            f"{plain.vec(row.output, p, whole=False)} against ordinary {plain.vec(ordinary, p, whole=False)}. "
            f"In exact arithmetic the online result is {plain.vec(expl.exact_online.output, exact_decimals(p), whole=False)}, "
            f"differing from the exact ordinary one by {_differences(exact_difference, expl, plain)}."
        )
    return Step("The online result", "output = o / l", lines, notes)


def _last_output(row: OnlineRow) -> np.ndarray:
    """The running output after the last block that was not skipped."""
    return next(block.output for block in reversed(row.blocks) if not block.skipped)


def _differences(values: np.ndarray, expl: Explanation, w: Writer) -> str:
    """Each difference of the online output from the ordinary one, or that they agree to float64's rounding (core.rounding).

    The last bits of such a difference change from one CPU to another; only a difference beyond what rounding can make
    (a hand-rounded chain's) is written, in scientific notation since fixed decimals would hide it.
    """
    V = expl.head.values  # (L_k, d_v): the output is a weighted average of these rows
    scale = float(np.max(np.abs(V), initial=0.0))
    bound = rounding.roundoff_bound(scale, len(V))
    if rounding.largest(values) <= bound:
        said = rounding.agreement(values, scale=scale, terms=len(V))
        return rf"\text{{{said}}}" if w.tex else said
    cells = ["0" if abs(x) <= bound else f"{x:.1e}" for x in values]
    if w.tex:
        cells = [c if c == "0" else rf"{float(c.split('e')[0])}\times 10^{{{int(c.split('e')[1])}}}" for c in cells]
        return r"\begin{bmatrix} " + " & ".join(cells) + r" \end{bmatrix}"
    return "[" + ", ".join(cells) + "]"


def _terms(terms: list[str], w: Writer) -> str:
    if len(terms) > LONG_SUM:
        terms = terms[:5] + [w.ellipsis] + terms[-2:]
    return " + ".join(terms) if len(terms) > 1 else terms[0]


def _sum(values: list[float], p: int) -> Decimal:
    """The sum of the values as shown at p decimals, exactly."""
    return sum((shown(x, p) for x in values), Decimal(0))
