"""THE stage table: every matrix attncli shows, in pipeline order, read by every renderer.

A row says which `--stages` name it belongs to, its title, its formula (written once, drawn
in Unicode or TeX through `attncli.document.notation`), where its numbers come from, how its rows and
columns are labelled, and when it exists. Adding a variant's stage means adding a row here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from attncli.document.notation import Notation
from attncli.errors import AttnError, option

if TYPE_CHECKING:
    import numpy as np

    from attncli.core.engine import HeadResult, RunResult
    from attncli.core.scenario import Scenario

Formula = Callable[[Notation, "Scenario", "HeadResult | None"], str]
Getter = Callable[["RunResult", "HeadResult | None"], "np.ndarray | None"]


class Stage(NamedTuple):
    """A name of `--stages`, with the rule for whether plain `run` shows it."""

    name: str
    shown_by_default: Callable[[Scenario], bool]


class Row(NamedTuple):
    """One matrix of the pipeline."""

    stage: str  # the --stages name it belongs to
    key: str  # stable name of the view
    title: str
    formula: Formula
    get: Getter  # the numbers, from the result and (for per-head rows) the head
    rows: str  # axis of its rows: "queries", "keys", a dimension letter ("x", "q", "k", "v", "c", "y") or "one"
    cols: str  # axis of its columns
    per_head: bool = True
    json: tuple[str, ...] = ()  # its JSON keys (default: key); in a head's row, other keys name arrays written beside it
    main: bool = False  # the matrix CSV writes when this stage is asked for
    kv: bool = False  # belongs to a key/value head (grouped-query attention: shared by several query heads)
    after_mask: bool = False  # hidden cells are drawn as hidden

    @property
    def square(self) -> bool:
        """tokens × tokens: can be shaded as a heatmap."""
        return self.rows == "queries" and self.cols == "keys"


STAGES = (
    Stage("embeddings", lambda s: True),
    Stage("q", lambda s: True),
    Stage("k", lambda s: True),
    Stage("v", lambda s: True),
    Stage("rope", lambda s: s.rope is not None),
    Stage("scores", lambda s: True),
    Stage("scaled", lambda s: s.scale.divisor != 1.0),
    Stage("bias", lambda s: s.has_bias),
    Stage("masked", lambda s: s.mask.hides_anything),
    Stage("exp", lambda s: True),
    Stage("weights", lambda s: True),
    Stage("output", lambda s: True),
)
STAGE_NAMES = tuple(stage.name for stage in STAGES)


# -- formulas ------------------------------------------------------------------------------


def _keys_from(s: Scenario) -> str:
    return "Z" if s.cross else "X"


def _projection(letter: str) -> Formula:
    def formula(n: Notation, s: Scenario, h: HeadResult | None) -> str:
        if s.direct:
            return f"{n(letter)} " + n.text("(given)")
        source = "X" if letter == "Q" else _keys_from(s)
        bias = f" + {n('b_' + letter)}" if getattr(s, "b_" + letter) is not None else ""
        return f"{n(letter)} = {source}{n.times()}{n('W_' + letter)}{bias}"

    return formula


def _rotated(letter: str) -> Formula:
    return lambda n, s, h: f"{n(letter, prime=True)} = " + n.text("RoPE") + f"({n(letter)})"


def kv_notation(n: Notation, s: Scenario, h: HeadResult | None) -> Notation:
    """How a head's keys and values are written: numbered by their key/value head under grouped-query attention."""
    if h is None or s.heads == s.G or n.head is None:
        return n
    return Notation(h.kv_head, n.tex)


def _scores(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    rope = s.rope is not None
    k = kv_notation(n, s, h)
    return f"{n('S')} = {n('Q', prime=rope)}{n.times()}{k('K', prime=rope, transpose=True)}"


def _output(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    return f"{n('O')} = {n('A')}{n.times()}{kv_notation(n, s, h)('V')}"


def _divisor(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    if s.scale.mode == "sqrt_dk":
        return n.sqrt("d_k")
    return "1" if s.scale.mode == "none" else f"{s.scale.divisor:g}"


def _scaled(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    note = ""
    if s.scale.mode == "sqrt_dk":
        note = f", {n.sqrt('d_k')} = {n.sqrt(str(s.d_k))}" if not n.tex else rf", \quad \sqrt{{d_k}} = \sqrt{{{s.d_k}}}"
    elif s.scale.mode == "none":
        note = " (no scaling)" if not n.tex else r" \quad \text{(no scaling)}"
    return f"{n('S')} / {_divisor(n, s, h)}{note}"


def _bias_terms(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    terms = []
    if s.bias is not None:
        terms.append(n.text("given bias"))
    if s.alibi is not None:
        slope = f"{s.alibi.slopes[n.head - 1]:.6g}" if n.head is not None else f"{s.alibi.slopes[0]:.6g}"
        terms.append(f"−{slope}{n.symbol('·')}(i − j)" if not n.tex else rf"-{slope}\,(i - j)")
    return " + ".join(terms).replace("+ −", "− ").replace("+ -", "- ")


def _bias(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    return f"{n('B')} = {_bias_terms(n, s, h)}"


def _biased(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    return f"{n('S')} / {_divisor(n, s, h)} + {n('B')}"


def _logits(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    scaled = n("S") if s.scale.mode == "none" else f"{n('S')} / {_divisor(n, s, h)}"
    return scaled + (f" + {n('B')}" if s.has_bias else "")


def _masked(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    inner = _logits(n, s, h)
    if n.tex:
        where = r"-\infty \text{ above the diagonal}" if s.mask.name == "causal" else r"-\infty \text{ where hidden}"
        if not s.mask.hides_anything:
            where = r"\text{nothing hidden}"
        return rf"\operatorname{{mask}}({inner}) \quad ({where})"
    if not s.mask.hides_anything:
        return f"mask({inner}), nothing hidden"
    if s.mask.name == "causal":
        return f"mask({inner}), −∞ above the diagonal"
    return f"mask({inner}), −∞ where hidden ({s.mask.describe()})"


def _exp(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    # what the exponential is taken of: the masked scores, or with no mask hiding anything, the scores as they are
    argument = (r"\text{masked}" if n.tex else "masked") if s.mask.hides_anything else _logits(n, s, h)
    if h is not None and h.shift.any():  # some row's scores were too large for plain e^x
        return f"{n('E')} = " + (rf"\exp({argument} - \text{{shift}})" if n.tex else f"exp({argument} − shift)")
    return f"{n('E')} = " + (rf"\exp({argument})" if n.tex else f"exp({argument})")


def _weights(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    if n.tex:
        return rf"{n('A')} = {n('E')} / \Sigma \quad \text{{(softmax of each row)}}"
    return f"{n('A')} = {n('E')} / Σ, softmax of each row"


def _concat(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    first, last = Notation(1, n.tex)("O"), Notation(s.heads, n.tex)("O")
    return "C = " + (rf"\operatorname{{Concat}}({first}, \dots, {last})" if n.tex else f"Concat({first}, …, {last})")


def _final(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    heads_out = "C" if s.heads > 1 else "O"
    formula = f"{heads_out}{n.times()}W_O" if s.W_O is not None else heads_out
    return "Y = " + formula + (" + b_O" if s.b_O is not None else "")


# -- the table -----------------------------------------------------------------------------


def _head(attribute: str) -> Getter:
    return lambda result, head: getattr(head, attribute)


ROWS = (
    Row("embeddings", "X", "Embeddings", lambda n, s, h: "X", lambda r, h: r.X, "queries", "x", per_head=False, json=("embeddings",), main=True),
    Row("embeddings", "X_kv", "Context embeddings", lambda n, s, h: "Z", lambda r, h: r.X_kv, "keys", "x", per_head=False,
        json=("context_embeddings",)),
    Row("q", "W_Q", "Query weights", lambda n, s, h: n("W_Q"), _head("W_Q"), "x", "q"),
    Row("q", "b_Q", "Query bias", lambda n, s, h: n("b_Q"), _head("b_Q"), "one", "q"),
    Row("q", "Q", "Queries", _projection("Q"), _head("Q"), "queries", "q", main=True),
    Row("k", "W_K", "Key weights", lambda n, s, h: n("W_K"), _head("W_K"), "x", "k", kv=True),
    Row("k", "b_K", "Key bias", lambda n, s, h: n("b_K"), _head("b_K"), "one", "k", kv=True),
    Row("k", "K", "Keys", _projection("K"), _head("K"), "keys", "k", main=True, kv=True),
    Row("v", "W_V", "Value weights", lambda n, s, h: n("W_V"), _head("W_V"), "x", "v", kv=True),
    Row("v", "b_V", "Value bias", lambda n, s, h: n("b_V"), _head("b_V"), "one", "v", kv=True),
    Row("v", "V", "Values", _projection("V"), _head("V"), "keys", "v", main=True, kv=True),
    Row("rope", "Q_rope", "Rotated queries", _rotated("Q"), _head("Q_rope"), "queries", "q", main=True),
    Row("rope", "K_rope", "Rotated keys", _rotated("K"), _head("K_rope"), "keys", "k", kv=True),
    Row("scores", "scores", "Scores", _scores, _head("scores"), "queries", "keys", main=True),
    Row("scaled", "scaled", "Scaled scores", _scaled, _head("scaled"), "queries", "keys", main=True),
    Row("bias", "bias", "Score bias", _bias, _head("bias"), "queries", "keys"),
    Row("bias", "biased", "Biased scores", _biased, _head("biased"), "queries", "keys", main=True),
    Row("masked", "masked", "Masked scores", _masked, _head("masked"), "queries", "keys", main=True, after_mask=True),
    Row("exp", "exp", "Exponentials", _exp, _head("exp"), "queries", "keys", json=("shift", "exp", "exp_sum"), main=True, after_mask=True),
    Row("weights", "weights", "Attention weights", _weights, _head("weights"), "queries", "keys", main=True, after_mask=True),
    Row("output", "output", "Output", _output, _head("output"), "queries", "o", main=True),
    Row("output", "concat", "Heads side by side", _concat, lambda r, h: r.concat if r.scenario.heads > 1 else None, "queries", "c",
        per_head=False),
    Row("output", "W_O", "Output projection", lambda n, s, h: "W_O", lambda r, h: r.scenario.W_O, "c", "y", per_head=False),
    Row("output", "b_O", "Output bias", lambda n, s, h: "b_O", lambda r, h: r.scenario.b_O, "one", "y", per_head=False),
    Row("output", "final", "Final output", _final, lambda r, h: r.output if r.scenario.has_output_stage else None, "queries", "y",
        per_head=False, json=("output",)),
)  # fmt: skip


def parse(listed: str | None) -> tuple[str, ...] | None:
    """A comma list of stage names, in pipeline order; None when not given."""
    if listed is None:
        return None
    wanted = [name.strip().lower() for name in listed.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in STAGE_NAMES]
    if unknown or not wanted:
        raise AttnError(
            f"unknown stage {', '.join(map(repr, unknown))}" if unknown else "no stage named",
            key=option("stages"),
            expected="a comma list of: " + ", ".join(STAGE_NAMES),
        )
    return tuple(name for name in STAGE_NAMES if name in wanted)


def default(scenario: Scenario) -> tuple[str, ...]:
    """The stages plain `run` shows: all, less those that would repeat the table before them unchanged."""
    return tuple(stage.name for stage in STAGES if stage.shown_by_default(scenario))


def main_row(stage: str) -> Row:
    """The one matrix that stands for `stage` where only one can be written (CSV)."""
    return next(row for row in ROWS if row.stage == stage and row.main)
