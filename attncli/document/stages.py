"""THE stage table: every matrix attncli shows, in pipeline order, read by every renderer.

A row says which `--stages` name it belongs to, its title, its formula (written once, drawn
in Unicode or TeX through `attncli.document.notation`), where its numbers come from, how its rows and
columns are labelled, and when it exists. The rows written here are the textbook's; every variant
brings its own (`core.variants.shown.StageRow`, held by the variant's module: RoPE's, the bias's, the
mask's, …): `_with_variants` places each after (or before) the row it names, and its stage beside that
row's stage, shown by default when the scenario has the variant and the variant says it is worth showing.
It asks the registry by stage ("norm", "qk", "logits", "visibility", "heads", "cache") instead of naming variants:
multi-head latent attention's latents, up-projections and absorbed form are its own rows too (core/variants/mla_shown.py),
and the textbook's Q, K and V rows let it write how each head's are made (`projection`); a KV cache's rows show it as
given, and its `stacked` puts it before each head's own keys and values (K = [K_cache; X·W_K]).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from attncli.core import variants
from attncli.document.notation import Notation
from attncli.errors import AttnError, did_you_mean, misspelt, option

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


_TEXTBOOK_STAGES: tuple[Stage, ...] = (
    Stage("embeddings", lambda s: True),
    Stage("q", lambda s: True),
    Stage("k", lambda s: True),
    Stage("v", lambda s: True),
    Stage("scores", lambda s: True),
    Stage("scaled", lambda s: s.scale.divisor != 1.0),
    Stage("exp", lambda s: True),
    Stage("weights", lambda s: True),
    Stage("output", lambda s: True),
)


# -- formulas ------------------------------------------------------------------------------


def _keys_from(s: Scenario) -> str:
    return "Z" if s.cross else "X"


def _projection(letter: str) -> Formula:
    def formula(n: Notation, s: Scenario, h: HeadResult | None) -> str:
        made = _made(letter, n, s)
        for variant in variants.active(s, "cache") if letter != "Q" else ():  # a KV cache's keys and values come first
            made = str(variant.stacked(n, letter, made))
        return made

    return formula


def _made(letter: str, n: Notation, s: Scenario) -> str:
    """How each head's Q, K or V is made: X·W_Q (+ b_Q), given, or by a variant of the "heads" stage."""
    for variant in variants.active(s, "heads"):  # a variant that makes each head's q, k and v writes them (MLA: from the latents)
        return str(variant.projection(n, s, letter))
    if s.X is None:  # Q, K and V given directly, or V beside given scores
        return f"{n(letter)} " + n.text("(given)")
    source = "X" if letter == "Q" else _keys_from(s)
    bias = f" + {n('b_' + letter)}" if getattr(s, "b_" + letter) is not None else ""
    return f"{n(letter)} = {source}{n.times()}{n('W_' + letter)}{bias}"


def _normed(n: Notation, s: Scenario, letter: str, *, transpose: bool = False) -> str:
    """Q or K as RoPE meets it: Q̂ after QK-norm, else Q."""
    from attncli.core.variants.qknorm import hatted

    return hatted(n, letter, transpose=transpose) if variants.active(s, "norm") else n(letter, transpose=transpose)


def kv_notation(n: Notation, s: Scenario, h: HeadResult | None) -> Notation:
    """How a head's keys and values are written: numbered by their key/value head under grouped-query attention."""
    if h is None or s.heads == s.G or n.head is None:
        return n
    return Notation(h.kv_head, n.tex)


def _scores(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    for variant in variants.active(s, "scores"):  # the scores given directly: the variant writes them
        return str(variant.formula(n))
    rope = bool(variants.active(s, "qk"))  # Q′, K′: turned by RoPE
    k = kv_notation(n, s, h)
    after = {variant.key for variant in variants.active(s, "rotated")}  # after RoPE: QK-norm there (Q̂, K̂), a temperature (Q̃)
    if after:
        from attncli.core.variants.qknorm import hatted

        normed = "qk_norm_after_rope" in after
        query = (hatted(n, "Q") if normed else n("Q", prime=rope)) if "query_temperature" not in after else n(r"\tilde{Q}" if n.tex else "Q\u0303")
        keys = hatted(k, "K", transpose=True) if normed else (k("K", prime=True, transpose=True) if rope else _normed(k, s, "K", transpose=True))
        return f"{n('S')} = {query}{n.times()}{keys}"
    if variants.active(s, "norm") and not rope:
        return f"{n('S')} = {_normed(n, s, 'Q')}{n.times()}{_normed(k, s, 'K', transpose=True)}"
    return f"{n('S')} = {n('Q', prime=rope)}{n.times()}{k('K', prime=rope, transpose=True)}"


def _output(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    k = kv_notation(n, s, h)
    values = k(r"\hat{V}" if n.tex else "V\u0302") if variants.active(s, "value") else k("V")  # V̂ after a value norm (v_norm)
    return f"{n('O')} = {n('A')}{n.times()}{values}"


def _divisor(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    if s.scale.mode == "sqrt_dk":
        return n.sqrt("d_k")
    return "1" if s.scale.mode == "none" else f"{s.scale.divisor:g}"


def _over_divisor(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    """S / √d_k, S / 2.5, or S itself without scaling: what a reshaping variant (soft-capping) wraps."""
    return n("S") if s.scale.mode == "none" else f"{n('S')} / {_divisor(n, s, h)}"


def _scaled(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    note = ""
    if s.scale.mode == "sqrt_dk":
        note = f", {n.sqrt('d_k')} = {n.sqrt(str(s.d_k))}" if not n.tex else rf", \quad \sqrt{{d_k}} = \sqrt{{{s.d_k}}}"
    elif s.scale.mode == "none":
        note = " (no scaling)" if not n.tex else r" \quad \text{(no scaling)}"
    return f"{n('S')} / {_divisor(n, s, h)}{note}"


def reshaped(n: Notation, s: Scenario, inner: str) -> str:
    """`inner` (the scaled scores) as the registry's "scaled" variants reshape it: 50·tanh(S / √d_k / 50) under soft-capping."""
    for variant in variants.active(s, "scaled"):
        inner = variant.wrap(n, inner)
    return inner


def _logits(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    return reshaped(n, s, _over_divisor(n, s, h)) + (f" + {n('B')}" if s.has_bias else "")


def _exp(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    # what the exponential is taken of: the masked scores, or with no mask hiding anything, the scores as they are
    argument = (r"\text{masked}" if n.tex else "masked") if _shows(s, "visibility") else _logits(n, s, h)
    if h is not None and h.shift.any():  # some row's scores were too large for plain e^x
        return f"{n('E')} = " + (rf"\exp({argument} - \text{{shift}})" if n.tex else f"exp({argument} − shift)")
    return f"{n('E')} = " + (rf"\exp({argument})" if n.tex else f"exp({argument})")


def _weights(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    if n.tex:
        return rf"{n('A')} = {n('E')} / \Sigma \quad \text{{(softmax of each row)}}"
    return f"{n('A')} = {n('E')} / Σ, softmax of each row"


def handed(n: Notation, s: Scenario, *, lower: bool = False) -> str:
    """What a head hands the concatenation, in n: its output, or what the registry's "output" variants make of it (O ⊙ G)."""
    after = variants.active(s, "output")
    return str(after[-1].handed(n, lower=lower)) if after else n("o" if lower else "O")


def _concat(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    first, last = handed(Notation(1, n.tex), s), handed(Notation(s.heads, n.tex), s)
    return "C = " + (rf"\operatorname{{Concat}}({first}, \dots, {last})" if n.tex else f"Concat({first}, …, {last})")


def _final(n: Notation, s: Scenario, h: HeadResult | None) -> str:
    heads_out = "C" if s.heads > 1 else handed(Notation(None, n.tex), s)
    heads_out = heads_out if heads_out in ("C", "O") or s.W_O is None else f"({heads_out})"
    formula = f"{heads_out}{n.times()}W_O" if s.W_O is not None else heads_out
    return "Y = " + formula + (" + b_O" if s.b_O is not None else "")


# -- the table -----------------------------------------------------------------------------


def _head(attribute: str) -> Getter:
    return lambda result, head: getattr(head, attribute)


_TEXTBOOK_ROWS: tuple[Row, ...] = (
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
    Row("scores", "scores", "Scores", _scores, _head("scores"), "queries", "keys", main=True),
    Row("scaled", "scaled", "Scaled scores", _scaled, _head("scaled"), "queries", "keys", main=True),
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


def _with_variants(stages: tuple[Stage, ...], rows: tuple[Row, ...]) -> tuple[tuple[Stage, ...], tuple[Row, ...]]:
    """The table with every variant's own rows (core.variants.shown.StageRow) in place, and their stages.

    A row goes after the row its `after` names, or before the one its `before` names; a new stage goes after (or before) that
    row's stage and is shown by default when a variant holding one of its rows is (`_holders`). A row several variants list
    (a given bias and ALiBi: one B) is placed once.
    """
    stage_list, row_list = list(stages), list(rows)
    for kind in variants.REGISTRY:
        for shown in getattr(kind, "rows", ()):
            if any(row.key == shown.key for row in row_list):
                continue  # listed by an earlier variant of the registry: it shows them together
            anchor = next(i for i, row in enumerate(row_list) if row.key == (shown.after or shown.before))
            get = _shared(shown.get) if shown.shared else _per_head(shown.get)
            row = Row(shown.stage, shown.key, shown.title, _formula(shown), get, shown.rows, shown.cols, per_head=not shown.shared,
                      json=shown.json, main=shown.main, kv=shown.kv, after_mask=shown.after_mask)  # fmt: skip
            row_list.insert(anchor + 1 if shown.after else anchor, row)
            if all(stage.name != shown.stage for stage in stage_list):
                neighbour = row_list[anchor].stage if shown.after else row_list[anchor + 1].stage
                place = next(i for i, stage in enumerate(stage_list) if stage.name == neighbour)
                stage_list.insert(place + 1 if shown.after else place, Stage(shown.stage, _held(shown.stage)))
    return tuple(stage_list), tuple(row_list)


def _per_head(get: Callable[[HeadResult], np.ndarray | None]) -> Getter:
    return lambda result, head: None if head is None else get(head)


def _shared(get: Callable[[RunResult], np.ndarray | None]) -> Getter:
    """A row every head shares (MLA's latents): its numbers from the result, drawn once before the heads."""
    return lambda result, head: get(result) if head is None else None


def _formula(shown: variants.StageRow) -> Formula:
    """The row's formula, handed what its `of` names (core.variants.shown.StageRow.of), written here."""
    if not shown.of:
        return shown.formula
    given: Formula = {
        "Q": lambda n, s, h: _normed(n, s, "Q"),
        "K": lambda n, s, h: _normed(kv_notation(n, s, h), s, "K"),
        "reshaped": lambda n, s, h: reshaped(n, s, _over_divisor(n, s, h)),
        "logits": _logits,
        "divisor": _divisor,
    }[shown.of]
    return lambda n, s, h: shown.formula(n, s, h, given(n, s, h))


def _worth(variant: object) -> bool:
    """Whether a variant the scenario has is worth showing: unless it says otherwise (`shows()`: the mask, when it hides nothing)."""
    return bool(variant.shows()) if hasattr(variant, "shows") else True


def _shows(s: Scenario, stage: str) -> bool:
    """Whether the scenario has a variant of the registry's `stage` worth showing."""
    return any(_worth(variant) for variant in variants.active(s, stage))


def _holders(name: str) -> tuple[type, ...]:
    """The variant classes that list a row of the --stages name `name`."""
    return tuple(kind for kind in variants.REGISTRY if any(shown.stage == name for shown in getattr(kind, "rows", ())))


def _held(name: str) -> Callable[[Scenario], bool]:
    """A variant stage's rule for plain `run`: shown when a variant holding one of its rows is worth showing."""
    holders = _holders(name)
    return lambda s: any(_worth(variant) for variant in variants.active(s) if type(variant) in holders)  # a subclass (QK-norm after RoPE) has its own rows


STAGES, ROWS = _with_variants(_TEXTBOOK_STAGES, _TEXTBOOK_ROWS)
_VARIANTS_OF = {  # a variant's row -> the variant classes that list it
    shown.key: tuple(kind for kind in variants.REGISTRY if shown in getattr(kind, "rows", ()))
    for holder in variants.REGISTRY for shown in getattr(holder, "rows", ())
}  # fmt: skip
STAGE_NAMES = tuple(stage.name for stage in STAGES)


def replaced(row: Row, scenario: Scenario) -> bool:
    """The row is one a variant of the scenario shows its own way instead (attention without softmax: the softmax's rows)."""
    return any(row.key in getattr(variant, "replaces", ()) for variant in variants.active(scenario))


def parse(listed: str | None) -> tuple[str, ...] | None:
    """A comma list of stage names, in pipeline order; None when not given."""
    if listed is None:
        return None
    wanted = [name.strip().lower() for name in listed.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in STAGE_NAMES]
    if unknown or not wanted:
        one = f"unknown stage {unknown[0]!r}{did_you_mean(unknown[0], STAGE_NAMES)}" if len(unknown) == 1 else ""
        raise AttnError(
            one or (f"unknown stages {', '.join(misspelt(name, STAGE_NAMES) for name in unknown)}" if unknown else "no stage named"),
            key=option("stages"),
            expected="a comma list of: " + ", ".join(STAGE_NAMES),
        )
    return tuple(name for name in STAGE_NAMES if name in wanted)


def default(scenario: Scenario) -> tuple[str, ...]:
    """The stages plain `run` shows: all, less those that would repeat the table before them unchanged, and those whose every
    row a variant of the scenario replaces (given scores: no q or k)."""
    return tuple(stage.name for stage in STAGES if stage.shown_by_default(scenario)
                 and not all(replaced(row, scenario) for row in ROWS if row.stage == stage.name and _applies(row, scenario)))  # fmt: skip


def _applies(row: Row, scenario: Scenario) -> bool:
    """The row is the textbook's, or a variant's that the scenario has (a variant's row of q, Q̂ or φ(Q), is no q of a scenario without it)."""
    return row.key not in _VARIANTS_OF or any(isinstance(variant, _VARIANTS_OF[row.key]) for variant in variants.active(scenario))


def main_row(stage: str, scenario: Scenario | None = None) -> Row:
    """The one matrix that stands for `stage` where only one can be written (CSV); for `scenario`, one of its own rows."""
    rows = [row for row in ROWS if row.stage == stage and row.main]
    if scenario is not None:
        own = [row for row in rows if not replaced(row, scenario) and _applies(row, scenario)]
        rows = own or rows
    return rows[0]
