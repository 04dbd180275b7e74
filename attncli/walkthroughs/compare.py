"""Two runs' heads compared, turned into what people read: one row per head, the most changed heads in words, the JSON document.

Input: a `Comparison` (attncli.core.compare) and what the two runs were. Output: plain data
that attncli.formats.headgrid draws (the same table and grid as the map, shading |a − b|).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from attncli.core.compare import MEASURES, Comparison
from attncli.document.numbers import fixed, significant
from attncli.errors import AttnError, did_you_mean, option

SCHEMA = "attncli.heads-compare/1"
FORMULAS = {
    "max_abs_diff": "max over cells (i, j) of |a_ij − b_ij|",
    "mean_abs_diff": "mean over the cells either run lets query i see of |a_ij − b_ij|",
    "js_divergence": "mean over rows i of the Jensen–Shannon divergence of a_i· and b_i· (nats, 0 … ln 2)",
    "js_max": "largest Jensen–Shannon divergence of any row i (nats)",
}
MOST_CHANGED = 5  # heads named in words


class Run(NamedTuple):
    """One side of the comparison."""

    name: str  # the checkpoint folder or file
    sentence: str
    model_type: str
    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]


class DiffRow(NamedTuple):
    layer: int
    head: int
    kv_head: int | None
    values: dict[str, float]


def rows(comparison: Comparison) -> list[DiffRow]:
    """One row per layer and head (from 1), in order."""
    tables = {name: comparison.table(name) for name in MEASURES}
    shared = comparison.kv_heads != comparison.heads
    return [
        DiffRow(li + 1, hi + 1, hi * comparison.kv_heads // comparison.heads + 1 if shared else None,
                {name: float(tables[name][li, hi]) for name in MEASURES})  # fmt: skip
        for li in range(comparison.layers)
        for hi in range(comparison.heads)
    ]


def sorted_rows(all_rows: list[DiffRow], sort: str | None, top: int | None) -> list[DiffRow]:
    """Largest first by `sort` (default js_divergence), the first `top`."""
    sort = sort or "js_divergence"
    if sort not in MEASURES:
        raise AttnError(f"found {sort!r}{did_you_mean(sort, MEASURES)}", key=option("sort"), expected=f"with a comparison, one of {', '.join(MEASURES)}")
    ordered = sorted(all_rows, key=lambda r: -r.values[sort])
    return ordered[:top] if top is not None else ordered


def _share_of_ln2(js: float) -> str:
    """The divergence as a share of its largest value, ln 2: 37%, 0.42%, 0.019%, or "less than 0.01%" (a quantised model's heads), never "0%"."""
    percent = 100 * js / math.log(2)
    if percent >= 1 or percent == 0:
        return f"{fixed(percent, 0)}%"
    return f"{significant(percent, 2)}%" if percent >= 0.01 else "less than 0.01%"


def most_changed(all_rows: list[DiffRow]) -> list[str]:
    """The heads whose rows changed most (Jensen–Shannon), in words; none when nothing changed."""
    changed = [r for r in sorted(all_rows, key=lambda r: -r.values["js_divergence"]) if r.values["max_abs_diff"] > 0][:MOST_CHANGED]
    return [
        f"layer {r.layer} head {r.head}: Jensen–Shannon {significant(r.values['js_divergence'], 3)} nats ({_share_of_ln2(r.values['js_divergence'])} "
        f"of ln 2), largest change {significant(r.values['max_abs_diff'], 3)}"
        for r in changed
    ]


def document(comparison: Comparison, first: Run, second: Run, shown: list[DiffRow], all_rows: list[DiffRow]) -> dict[str, Any]:
    """The attncli.heads-compare/1 JSON document."""

    def run(r: Run) -> dict[str, Any]:
        return {"name": r.name, "sentence": r.sentence, "model_type": r.model_type,
                "tokens": [{"position": n, "label": label, "id": i} for n, (label, i) in enumerate(zip(r.tokens, r.token_ids), 1)]}  # fmt: skip

    def head(r: DiffRow) -> dict[str, Any]:
        return {"layer": r.layer, "head": r.head, **({"kv_head": r.kv_head} if r.kv_head is not None else {}), **r.values}

    return {
        "schema": SCHEMA,
        "first": run(first),
        "second": run(second),
        "same_tokens": first.token_ids == second.token_ids,
        "layers": comparison.layers,
        "heads_per_layer": comparison.heads,
        "kv_heads": comparison.kv_heads,
        "measures": FORMULAS,
        "heads": [head(r) for r in shown],
        "most_changed": most_changed(all_rows),
    }


def thumbnails(comparison: Comparison) -> np.ndarray:
    """(layers, H, s, s) |a − b| shrunk by the largest value of each block."""
    return np.stack(comparison.thumbnails)


def title(first: Run, second: Run) -> str:
    from pathlib import PurePath

    a, b = PurePath(first.name).name, PurePath(second.name).name
    what = f"{a} against {b}" if first.name != second.name else f"{a} on two sentences"
    return f"How every head changed: {what}"
