"""The plain data of the head map and of the shaded sentence: built by the walk-throughs, drawn by the formats.

`HeadGrid` (every head's thumbnail and tooltip) and `HeadTable` (a row of statistics per head)
make a map's or a comparison's page (`pages.HeadsPage`); `Shaded` the sentence shaded by one
query token's weights (`pages.ShadePage`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np

# the statistics' short names in a table, and the legends that say what they mean
SHORT = {
    "layer": "L", "head": "H", "kv_head": "kv", "entropy": "ent", "entropy_ratio": "ent/u", "max_weight": "max", "first_token": "first",
    "previous_token": "prev", "mean_distance": "dist", "induction_score": "ind", "previous_token_score": "prev*",
    "duplicate_token_score": "dup*", "max_abs_diff": "max Δ", "mean_abs_diff": "mean Δ", "js_divergence": "JS", "js_max": "JS max",
}  # fmt: skip
LEGEND = (
    "L layer, H head; ent: entropy in nats; ent/u: entropy ÷ that of uniform weights; max: largest weight; first, prev, self: "
    "weight on the first, the previous, the same token; dist: mean distance in tokens; each a mean over the query rows"
)
PATTERN_LEGEND = "; ind, prev*, dup*: induction, previous- and duplicate-token scores on repeated random tokens"
COMPARE_LEGEND = (
    "L layer, H head; max Δ, mean Δ: the largest and the mean absolute difference of the weights (over the cells a query sees); "
    "JS: the rows' mean Jensen–Shannon divergence in nats (0 … ln 2 = 0.693), JS max: the largest of any row"
)
COMPARE_SUBTITLE = "rows: query tokens, columns: key tokens; shade: |difference| of the weights 0 to 1, the largest of each block"

SUBTITLE = "rows: query tokens, columns: key tokens; shade: weight 0 to 1, the largest of each block"


class HeadGrid(NamedTuple):
    """Every head's thumbnail and what its tooltip says."""

    title: str
    thumbnails: np.ndarray  # (layers, H, s, s) weights 0 … 1, shrunk by the largest value per block
    first_layer: int  # the number of the first row of heads
    tokens: tuple[str, ...]  # the sentence's tokens, for the tooltips
    tips: Sequence[Sequence[str]]  # [layer][head] one line about the head (its statistics, its reading)
    subtitle: str = SUBTITLE  # what the shade means
    hover: str = "Hover over a thumbnail's row: its query tokens and the keys that take most of its weight."  # the HTML page's hint
    seen: np.ndarray | None = None  # (layers, s, s) bool: the cells the mask lets a query see (the page to explore writes – elsewhere)


class HeadTable(NamedTuple):
    """The statistics as rows: headers, then one row per head (ints, floats, None), the readings and their commands."""

    columns: tuple[str, ...]
    rows: Sequence[Sequence[int | float | None]]
    readings: Sequence[tuple[str, str]]  # (reading, explain command) of the notable heads; the command may be ""
    legend: str  # what the short column names mean
    heading: str = "Notable heads"  # above the readings
    general: bool = False  # numbers to `precision` significant digits (differences near 0), not decimals
    none: str = (  # the rule of walkthroughs.heads._reading, on the same means over the query rows as the table's columns
        "No head stands out (none puts half its weight on the first token, or 40% on the previous token or on itself, "
        "and 20 points more there than if each row spread its weight evenly over the keys it sees)."
    )


class ShadedRow(NamedTuple):
    name: str  # "L3 H2", "L3 mean"
    weights: Sequence[float]  # one per token, 0 … 1
    visible: Sequence[bool]  # hidden keys are drawn as such
    readings: Sequence[str]  # sentences under the row


class Shaded(NamedTuple):
    title: str
    tokens: Sequence[str]
    query: int  # from 0: the query token, underlined
    rows: Sequence[ShadedRow]
