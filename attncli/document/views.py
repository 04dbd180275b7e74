"""The stages of a run as labelled matrices, ready for any renderer.

A `MatrixView` is what a terminal table, a Markdown table, a CSV file or a LaTeX matrix
shows: a title, its formula (in Unicode and in TeX) and shape, the numbers, and the labels
of rows and columns. Which matrices exist and how they are written comes from the one stage
table, `attncli.document.stages`; the renderers only decide how to draw them.
"""

from __future__ import annotations

import numpy as np

from attncli.core.engine import HeadResult, RunResult
from attncli.core.scenario import Scenario
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
    return out


def view_of(result: RunResult, key: str, head: int | None) -> MatrixView | None:
    """One matrix by its key ("weights", "Q", "final" ...), for head `head` where it is per head."""
    row = next(row for row in stages.ROWS if row.key == key)
    return _view(result, row, result.head(head) if row.per_head and head is not None else None)


def _view(result: RunResult, row: Row, head: HeadResult | None) -> MatrixView | None:
    data = row.get(result, head)
    if data is None:
        return None
    s = result.scenario
    several = s.heads > 1 and head is not None
    number = None if not several else (head.kv_head if row.kv and s.heads != s.G else head.head)  # type: ignore[union-attr]
    unicode, tex = Notation(number), Notation(number, tex=True)
    title = row.title
    if row.kv and head is not None and s.heads != s.G:
        title += f" (key/value head {head.kv_head} of {s.G})"
    matrix = np.atleast_2d(data)
    hidden = None
    if row.after_mask and head is not None and s.mask.hides_anything:
        hidden = ~head.visible
    extra: list[tuple[str, np.ndarray]] = []
    if row.key == "exp" and head is not None:
        extra = ([("shift", head.shift)] if head.shift.any() else []) + [("Σ", head.exp_sum)]
    return MatrixView(
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


def _labels(axis: str, n: int, s: Scenario, key: str) -> list[str]:
    if axis == "queries":
        return list(s.query_labels)
    if axis == "keys":
        return list(s.key_labels)
    if axis == "one":
        return [key]
    return dims(axis, n)
