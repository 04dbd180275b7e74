"""The stages of a run as labelled matrices, ready for any renderer.

A `MatrixView` is what a table, a Markdown table, a CSV file or a LaTeX bmatrix shows:
a title, its formula and shape, the numbers, and the labels of rows and columns. The
renderers only decide how to draw them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attncli.engine import HeadResult, RunResult
from attncli.errors import AttnError

STAGES = ("embeddings", "q", "k", "v", "scores", "scaled", "masked", "exp", "weights", "output")


@dataclass(frozen=True)
class MatrixView:
    key: str  # stable name: "embeddings", "W_Q", "Q", "scores", ... "concat", "final"
    stage: str  # the --stages name it belongs to
    head: int | None  # 1-based head, None for stages shared by all heads
    title: str  # "Scores"
    formula: str  # "S = Q·Kᵀ", in Unicode for people
    data: np.ndarray  # (rows, cols)
    rows: list[str]
    cols: list[str]
    hidden: np.ndarray | None = None  # (rows, cols) bool, True where the mask hides the cell
    extra: list[tuple[str, np.ndarray]] = field(default_factory=list)  # extra columns, e.g. ("Σ", exp_sum)

    @property
    def shape(self) -> str:
        return f"{self.data.shape[0]} × {self.data.shape[1]}"


def parse_stages(option: str | None) -> tuple[str, ...] | None:
    """The --stages option as a tuple in pipeline order; None when not given."""
    if option is None:
        return None
    wanted = [s.strip().lower() for s in option.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in STAGES]
    if unknown or not wanted:
        raise AttnError(
            f"unknown stage {', '.join(map(repr, unknown))}" if unknown else "no stage named",
            key="--stages",
            expected="a comma list of: " + ", ".join(STAGES),
        )
    return tuple(s for s in STAGES if s in wanted)


def default_table_stages(result: RunResult) -> tuple[str, ...]:
    """All stages, less those that would repeat the previous table unchanged."""
    scenario = result.scenario
    skip = set()
    if scenario.scale.divisor == 1.0:
        skip.add("scaled")
    if scenario.mask == "none":
        skip.add("masked")
    return tuple(s for s in STAGES if s not in skip)


def dims(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(1, n + 1)]


def views(result: RunResult, stages: tuple[str, ...], heads: list[int]) -> list[MatrixView]:
    """The matrices of `stages` for `heads` (1-based), in pipeline order."""
    scenario = result.scenario
    tokens = scenario.labels()
    out: list[MatrixView] = []
    if "embeddings" in stages:
        out.append(MatrixView("embeddings", "embeddings", None, "Embeddings", "X", result.X, tokens, dims("x", scenario.d_model)))
    for h in heads:
        out.extend(_head_views(result, result.head(h), stages, tokens))
    if "output" in stages and (scenario.heads > 1 or scenario.W_O is not None or scenario.b_O is not None):
        if scenario.heads > 1:
            out.append(
                MatrixView("concat", "output", None, "Heads side by side", "Concat(O₁ … O_H)", result.concat, tokens,
                           dims("c", result.concat.shape[1]))
            )
        if scenario.W_O is not None:
            out.append(
                MatrixView("W_O", "output", None, "Output projection", "W_O", scenario.W_O, dims("c", scenario.W_O.shape[0]),
                           dims("y", scenario.d_out))
            )
        formula = "Concat·W_O" if scenario.W_O is not None else "Concat"
        formula += " + b_O" if scenario.b_O is not None else ""
        out.append(MatrixView("final", "output", None, "Final output", f"Y = {formula}", result.output, tokens, dims("y", scenario.d_out)))
    return out


def _head_views(result: RunResult, head: HeadResult, stages: tuple[str, ...], tokens: list[str]) -> list[MatrixView]:
    scenario = result.scenario
    h = head.head if scenario.heads > 1 else None
    sub = _subscript(head.head) if scenario.heads > 1 else ""
    out: list[MatrixView] = []
    for stage, letter, W, b, M in (
        ("q", "Q", head.W_Q, head.b_Q, head.Q),
        ("k", "K", head.W_K, head.b_K, head.K),
        ("v", "V", head.W_V, head.b_V, head.V),
    ):
        if stage not in stages:
            continue
        lower = letter.lower()
        out.append(MatrixView(f"W_{letter}", stage, h, f"{_NAMES[letter]} weights", f"W_{letter}{sub}", W,
                              dims("x", scenario.d_model), dims(lower, W.shape[1])))
        if b is not None:
            out.append(MatrixView(f"b_{letter}", stage, h, f"{_NAMES[letter]} bias", f"b_{letter}{sub}", b[None, :],
                                  [f"b_{letter}"], dims(lower, b.shape[0])))
        bias = f" + b_{letter}{sub}" if b is not None else ""
        out.append(MatrixView(letter, stage, h, _PLURALS[letter], f"{letter}{sub} = X·W_{letter}{sub}{bias}", M, tokens,
                              dims(lower, M.shape[1])))
    divisor = scenario.scale.divisor
    scale_text = {"sqrt_dk": f"√d_k = √{scenario.d_k}", "none": "1 (no scaling)", "value": f"{divisor:g}"}[scenario.scale.mode]
    hide = ~head.visible if scenario.mask == "causal" else None
    square = (
        ("scores", "Scores", f"S{sub} = Q{sub}·K{sub}ᵀ", head.scores, None, []),
        ("scaled", "Scaled scores", f"S{sub} / {scale_text}", head.scaled, None, []),
        ("masked", "Masked scores", f"mask(S{sub} / {scale_text}), −∞ above the diagonal"
         if scenario.mask == "causal" else f"mask(S{sub} / {scale_text}), nothing hidden", head.masked, hide, []),
        ("exp", "Exponentials", f"E{sub} = exp(masked − shift)" if head.shift.any() else f"E{sub} = exp(masked)",
         head.exp, hide, ([("shift", head.shift)] if head.shift.any() else []) + [("Σ", head.exp_sum)]),
        ("weights", "Attention weights", f"A{sub} = E{sub} / Σ, softmax of each row", head.weights, hide, []),
    )
    for stage, title, formula, data, hidden, extra in square:
        if stage in stages:
            out.append(MatrixView(stage, stage, h, title, formula, data, tokens, tokens, hidden, extra))
    if "output" in stages:
        out.append(MatrixView("output", "output", h, "Output", f"O{sub} = A{sub}·V{sub}", head.output, tokens, dims("o", head.output.shape[1])))
    return out


_NAMES = {"Q": "Query", "K": "Key", "V": "Value"}
_PLURALS = {"Q": "Queries", "K": "Keys", "V": "Values"}


def _subscript(n: int) -> str:
    return str(n).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))
