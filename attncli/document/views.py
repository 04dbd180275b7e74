"""The stages of a run as labelled matrices, ready for any renderer.

A `MatrixView` is what a terminal table, a Markdown table, a CSV file or a LaTeX matrix
shows: a title, its formula (in Unicode and in TeX) and shape, the numbers, and the labels
of rows and columns. Which matrices exist and how they are written comes from the one stage
table, `attncli.document.stages`; the renderers only decide how to draw them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from attncli.core.engine import HeadResult, RunResult
from attncli.core.scenario import Scenario
from attncli.core.variants import LearnedSink
from attncli.document import stages
from attncli.document.blocks import Matrix
from attncli.document.notation import Notation
from attncli.document.stages import Row

MatrixView = Matrix  # the name the renderers know


def dims(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(1, n + 1)]


def views(result: RunResult, wanted: tuple[str, ...], heads: list[int]) -> list[MatrixView]:
    """The matrices of the `wanted` stages for `heads` (1-based), in pipeline order."""
    shared = [row for row in stages.ROWS if not row.per_head and row.stage in wanted]
    first_per_head = next(i for i, row in enumerate(stages.ROWS) if row.per_head)
    leading = [row for row in shared if stages.ROWS.index(row) < first_per_head]
    trailing = [row for row in shared if stages.ROWS.index(row) > first_per_head]
    per_head = [row for row in stages.ROWS if row.per_head and row.stage in wanted]
    out = [v for row in leading if (v := _view(result, row, None)) is not None]
    for h in heads:
        out += [v for row in per_head if (v := _view(result, row, result.head(h))) is not None]
    out += [v for row in trailing if (v := _view(result, row, None)) is not None]
    if "masked" not in wanted:  # E and A name no M that is not shown: they say mask(…) themselves
        s = result.scenario
        out = [replace(v, equation=equation(v, s, shifted=any(name == "shift" for name, _ in v.extra), masked_shown=False))
               if v.key in ("exp", "weights") else v for v in out]  # fmt: skip
    return out


def view_of(result: RunResult, key: str, head: int | None) -> MatrixView | None:
    """One matrix by its key ("weights", "Q", "final" ...), for head `head` where it is per head."""
    row = next(row for row in stages.ROWS if row.key == key)
    return _view(result, row, result.head(head) if row.per_head and head is not None else None)


def _view(result: RunResult, row: Row, head: HeadResult | None) -> MatrixView | None:
    data = row.get(result, head)
    if data is None or stages.replaced(row, result.scenario):
        return None
    s = result.scenario
    several = s.heads > 1 and head is not None
    number = None if not several else (head.kv_head if row.kv and s.heads != s.G else head.head)  # type: ignore[union-attr]
    unicode, tex = Notation(number), Notation(number, tex=True)
    title = row.title
    if row.key in ("X", "X_kv") and s.word_marks:  # a checkpoint's layer: hidden states (its notes say which), not embeddings
        title = "Hidden states (what enters the attention)"
    if row.kv and head is not None and s.heads != s.G:
        title += f" (key/value head {head.kv_head} of {s.G})"
    matrix = np.atleast_2d(data)
    hidden = None
    if row.after_mask and head is not None and s.mask.hides_anything:
        hidden = ~head.visible
    extra: list[tuple[str, np.ndarray]] = []
    if row.key == "exp" and head is not None:
        extra = ([("shift", head.shift)] if head.shift.any() else []) + _sink(result, head.sink_exp, "e^sink") + [("Σ", head.exp_sum)]
    if row.key == "weights" and head is not None:
        extra = _sink(result, head.sink_weight, "sink")
    view = Matrix(
        key=row.key,
        stage=row.stage,
        head=head.head if several else None,  # type: ignore[union-attr]
        title=title,
        formula=row.formula(unicode, s, head),
        tex=row.formula(tex, s, head),
        data=matrix,
        rows=_labels(row.rows, matrix.shape[0], s, row.key),
        cols=_labels(row.cols, matrix.shape[1], s, row.key),
        hidden=hidden,
        extra=extra,
        square=row.square,
    )
    shifted = any(name == "shift" for name, _ in extra)
    return replace(view, equation=equation(view, s, shifted=shifted), remarks=remarks(view, s, shifted=shifted))


def _sink(result: RunResult, column: np.ndarray | None, name: str) -> list[tuple[str, np.ndarray]]:
    """A learned sink's column (L_q,) beside the exponentials or the weights, in the rows the result keeps; none without a sink."""
    if column is None:
        return []
    return [(name, column if result.rows is None else column[list(result.rows)])]


def _logits(n: Notation, s: Scenario) -> str:
    """What the softmax sees, before the mask: S / sqrt(d_k) (+ B)."""
    if s.scale.mode == "sqrt_dk":
        scaled = rf"\frac{{{n('S')}}}{{\sqrt{{d_k}}}}"
    elif s.scale.mode == "value":
        scaled = rf"\frac{{{n('S')}}}{{{s.scale.divisor:g}}}"
    else:
        scaled = n("S")
    return scaled + (f" + {n('B')}" if s.has_bias else "")


def equation(view: Matrix, s: Scenario, *, shifted: bool, masked_shown: bool = True) -> str:
    r"""The left-hand side of a view's equation, symbol first: `S = QK^\top`, `M = \operatorname{mask}(…)`, `Y = C W_O + b_O`."""
    n = Notation(view.head, tex=True)
    key = view.key
    logits = _logits(n, s)
    if key == "scaled":
        if s.scale.mode == "sqrt_dk":
            return rf"{logits.split(' + ')[0]} = \frac{{{n('S')}}}{{\sqrt{{{s.d_k}}}}}"
        return logits.split(" + ")[0]
    if key == "bias":
        return n("B")
    if key == "biased":
        return logits
    if key == "masked":
        return rf"{n('M')} = \operatorname{{mask}}\left({logits}\right)"
    masked = rf"\operatorname{{mask}}\left({logits}\right)"
    if key == "exp":
        argument = (n("M") if masked_shown else masked) if s.mask.hides_anything else logits
        return rf"{n('E')} = \exp\left({argument}" + (r" - m" if shifted else "") + r"\right)"
    if key == "weights":
        argument = (n("M") if masked_shown else masked) if s.mask.hides_anything else logits
        return rf"{n('A')} = \operatorname{{softmax}}\left({argument}\right)"
    if key == "concat":  # amsmath's bmatrix stops at 10 columns (GPT-2 has 12 heads): an array beyond
        heads = r" & ".join(Notation(h, True)("O") for h in range(1, s.heads + 1))
        if s.heads <= 10:
            return r"C = \begin{bmatrix} " + heads + r" \end{bmatrix}"
        return r"C = \left[\begin{array}{" + "c" * s.heads + "} " + heads + r" \end{array}\right]"
    if key == "final":
        source = "C" if s.heads > 1 else "O"
        return "Y = " + (rf"{source} W_O" if s.W_O is not None else source) + (" + b_O" if s.b_O is not None else "")
    return view.tex


def remarks(view: Matrix, s: Scenario, *, shifted: bool) -> tuple[str, ...]:
    """Sentences about a matrix beyond its formula (what the mask did, the divisor, how the weights are made, the shift), in Unicode prose."""
    out = []
    if view.key == "masked":
        out.append("the mask sets the hidden scores to −∞: " + s.mask.describe())
    if view.key == "scaled" and s.scale.mode == "sqrt_dk":
        out.append(f"√d_k = √{s.d_k} = {s.scale.divisor:.6g}")
    if view.key == "weights":
        out.append("each row of E divided by its sum: A_ij = E_ij / Σ_i")
        if s.variant(LearnedSink) is not None:
            out.append("Σ_i includes e^sink, a learned sink with no value: the row's weights sum to 1 − sink_i")
    if shifted:
        out.append("m: each row's shift (its largest score), which cancels in the softmax")
    return tuple(out)


def _labels(axis: str, n: int, s: Scenario, key: str) -> list[str]:
    if axis == "queries":
        return list(s.query_labels)
    if axis == "keys":
        return list(s.key_labels[:n])  # all, or a KV cache's first c
    if axis == "one":
        return [key]
    return dims(axis, n)
