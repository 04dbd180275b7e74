"""The stages of a run as labelled matrices, ready for any renderer.

A `MatrixView` is what a terminal table, a Markdown table, a CSV file or a LaTeX matrix
shows: a title, its formula (in Unicode and in LaTeX) and shape, the numbers, and the
labels of rows and columns. The renderers only decide how to draw them.
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
    head: int | None  # 1-based head, None for what all heads share
    title: str  # "Scores"
    formula: str  # "S = Q·Kᵀ", Unicode for people
    tex: str  # "S = QK^\top", LaTeX
    data: np.ndarray  # (rows, cols)
    rows: list[str]
    cols: list[str]
    hidden: np.ndarray | None = None  # (rows, cols) bool, True where the mask hides the cell
    extra: list[tuple[str, np.ndarray]] = field(default_factory=list)  # extra columns, e.g. ("Σ", exp_sum)

    @property
    def shape(self) -> str:
        return f"{self.data.shape[0]} × {self.data.shape[1]}"

    def heading(self, heads: int) -> str:
        """'Head 2 · Scores  S₂ = Q₂·K₂ᵀ  (4 × 4)', the head only when there are several."""
        prefix = f"Head {self.head} · " if heads > 1 and self.head is not None else ""
        return f"{prefix}{self.title}  {self.formula}  ({self.shape})"


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
    """All stages, less those that would repeat the table before them unchanged."""
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
        out.append(MatrixView("embeddings", "embeddings", None, "Embeddings", "X", "X", result.X, tokens, dims("x", scenario.d_model)))
    for h in heads:
        out.extend(_head_views(result, result.head(h), stages, tokens))
    if "output" in stages and (scenario.heads > 1 or scenario.W_O is not None or scenario.b_O is not None):
        concat_cols = dims("c", result.concat.shape[1])
        if scenario.heads > 1:
            out.append(MatrixView("concat", "output", None, "Heads side by side", "C = Concat(O₁, …, O_H)",
                                  r"C = \operatorname{Concat}(O_1, \dots, O_H)", result.concat, tokens, concat_cols))
        if scenario.W_O is not None:
            out.append(MatrixView("W_O", "output", None, "Output projection", "W_O", "W_O", scenario.W_O, concat_cols,
                                  dims("y", scenario.d_out)))
        formula, tex = ("C·W_O", "CW_O") if scenario.W_O is not None else ("C", "C")
        if scenario.b_O is not None:
            formula, tex = formula + " + b_O", tex + " + b_O"
        out.append(MatrixView("final", "output", None, "Final output", f"Y = {formula}", f"Y = {tex}", result.output, tokens,
                              dims("y", scenario.d_out)))
    return out


def _head_views(result: RunResult, head: HeadResult, stages: tuple[str, ...], tokens: list[str]) -> list[MatrixView]:
    scenario = result.scenario
    several = scenario.heads > 1
    h = head.head if several else None
    sub = _subscript(head.head) if several else ""  # Unicode: Q₂
    tsub = f"^{{({head.head})}}" if several else ""  # LaTeX: Q^{(2)}
    out: list[MatrixView] = []
    for stage, letter, W, b, M in (
        ("q", "Q", head.W_Q, head.b_Q, head.Q),
        ("k", "K", head.W_K, head.b_K, head.K),
        ("v", "V", head.W_V, head.b_V, head.V),
    ):
        if stage not in stages:
            continue
        lower = letter.lower()
        out.append(MatrixView(f"W_{letter}", stage, h, f"{_NAMES[letter]} weights", f"W_{letter}{sub}", f"W_{letter}{tsub}", W,
                              dims("x", scenario.d_model), dims(lower, W.shape[1])))
        if b is not None:
            out.append(MatrixView(f"b_{letter}", stage, h, f"{_NAMES[letter]} bias", f"b_{letter}{sub}", f"b_{letter}{tsub}",
                                  b[None, :], [f"b_{letter}"], dims(lower, b.shape[0])))
        bias, tbias = (f" + b_{letter}{sub}", f" + b_{letter}{tsub}") if b is not None else ("", "")
        out.append(MatrixView(letter, stage, h, _PLURALS[letter], f"{letter}{sub} = X·W_{letter}{sub}{bias}",
                              f"{letter}{tsub} = XW_{letter}{tsub}{tbias}", M, tokens, dims(lower, M.shape[1])))
    scale = scenario.scale
    by, tby = {"sqrt_dk": ("√d_k", r"\sqrt{d_k}"), "none": ("1", "1"), "value": (f"{scale.divisor:g}",) * 2}[scale.mode]
    note, tnote = {
        "sqrt_dk": (f", √d_k = √{scenario.d_k}", rf", \quad \sqrt{{d_k}} = \sqrt{{{scenario.d_k}}}"),
        "none": (" (no scaling)", r" \quad \text{(no scaling)}"),
        "value": ("", ""),
    }[scale.mode]
    causal = scenario.mask == "causal"
    hide = ~head.visible if causal else None
    mask_note, tmask_note = ("−∞ above the diagonal", r"\text{, } -\infty \text{ above the diagonal}") if causal else (
        "nothing hidden", r"\text{, nothing hidden}")
    shifted = bool(head.shift.any())
    ktop = rf"^{{({head.head})\top}}" if several else r"^\top"  # K^{(2)\top} or K^\top
    square = (
        ("scores", "Scores", f"S{sub} = Q{sub}·K{sub}ᵀ", rf"S{tsub} = Q{tsub}K{ktop}", head.scores, None, []),
        ("scaled", "Scaled scores", f"S{sub} / {by}{note}", rf"S{tsub} / {tby}{tnote}", head.scaled, None, []),
        ("masked", "Masked scores", f"mask(S{sub} / {by}), {mask_note}", rf"\operatorname{{mask}}(S{tsub} / {tby}){tmask_note}",
         head.masked, hide, []),
        ("exp", "Exponentials", f"E{sub} = exp(masked − shift)" if shifted else f"E{sub} = exp(masked)",
         rf"E{tsub} = \exp(\text{{masked}} - \text{{shift}})" if shifted else rf"E{tsub} = \exp(\text{{masked}})",
         head.exp, hide, ([("shift", head.shift)] if shifted else []) + [("Σ", head.exp_sum)]),
        ("weights", "Attention weights", f"A{sub} = E{sub} / Σ, softmax of each row",
         rf"A{tsub} = E{tsub} / \Sigma = \operatorname{{softmax}}(\cdot)", head.weights, hide, []),
    )
    for stage, title, formula, tex, data, hidden, extra in square:
        if stage in stages:
            out.append(MatrixView(stage, stage, h, title, formula, tex, data, tokens, tokens, hidden, extra))
    if "output" in stages:
        out.append(MatrixView("output", "output", h, "Output", f"O{sub} = A{sub}·V{sub}", f"O{tsub} = A{tsub}V{tsub}",
                              head.output, tokens, dims("o", head.output.shape[1])))
    return out


_NAMES = {"Q": "Query", "K": "Key", "V": "Value"}
_PLURALS = {"Q": "Queries", "K": "Keys", "V": "Values"}


def _subscript(n: int) -> str:
    return str(n).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))
