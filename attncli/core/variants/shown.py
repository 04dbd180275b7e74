"""How a variant is shown, in data the presentation rooms read: its stage-table rows and its narrated step.

A variant module holds what it does to the numbers and also how that is shown, so a new mechanism
is one module plus its line in REGISTRY. core may import nothing of text or presentation, so the
variant does not build the document's objects: it describes its rows as `StageRow`s
(`attncli.document.stages` turns them into its `Row`s, in place after the row named by `after`) and
writes its explain step as a `Narrated` through a `Say` that `attncli.walkthroughs.narration`
hands it (numbers as text, the =/≈ rule, the shortening of long vectors). A formula gets the
document's `Notation` and writes through it, so the same function draws Unicode and TeX.

Several variants of one stage may show one row or one step together (a given bias and ALiBi: one
matrix B, one "Adding the bias" step, whose terms come from each): each lists the same `StageRow`
(the table holds it once, shown when any of them is), and their classes share one `narrate`
function (the narration calls it once, for the first of them, and it narrates them all). A variant
says when it is worth showing with `shows()` (the mask: only when it hides anything); without it,
whenever the scenario has it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, NamedTuple, Protocol

import numpy as np

Formula = Callable[..., str]  # (document.notation.Notation, Scenario, HeadResult | None[, what the row's `of` names]) -> the formula


class StageRow(NamedTuple):
    """A matrix a variant adds to the stage table (see document.stages.Row for each field's meaning)."""

    stage: str  # its --stages name, shown by default whenever the variant is on
    key: str  # the view's stable name, and its JSON key in a head's object
    title: str
    formula: Formula
    get: Callable[[Any], np.ndarray | None]  # (HeadResult) -> the numbers; (RunResult) when `shared`
    rows: str  # "queries", "keys", a dimension letter or "one"
    cols: str
    after: str = ""  # the key of the row it follows in the table (or:)
    kv: bool = False
    after_mask: bool = False
    main: bool = False
    json: tuple[str, ...] = ()
    before: str = ""  # the key of the row it goes before (its stage before that row's stage), when `after` is not given
    of: str = ""  # what the stage table hands its formula as a fourth argument, written as far as the table goes:
    #   "Q", "K"     the queries or keys as the "qk" stage meets them (after the "norm" stage, with the key/value head's mark)
    #   "reshaped"   the scaled scores as the "scaled" variants leave them: 50·tanh(S / √d_k / 50)
    #   "logits"     what the mask and the softmax see: the reshaped scores, + B when a "logits" variant adds to them
    #   "divisor"    what the scores are divided by: √d_k, a given number, or 1
    shared: bool = False  # one matrix for every head (MLA's latents), drawn before the heads: `get` receives the RunResult


class Narrated(NamedTuple):
    """A variant's step of `explain`: title, formula, `lhs = rhs` lines and the sentences under them."""

    title: str
    formula: str
    lines: list[tuple[str, ...]]  # (lhs, rhs) or (lhs, rhs, sep): document.blocks.Line's fields
    notes: list[str]


class Say(Protocol):
    """What the narration hands a variant to write its step (walkthroughs.narration.Say)."""

    w: Any  # document.notation.Writer or TexWriter: num, vec, text, of, frac, sqrt, times, minus, label, tex …
    p: int  # decimals shown
    full: bool  # every term and key (--full)
    long: int  # a sum of more terms, or a list of more keys, is shortened (unless full)
    n: Any  # document.notation.Notation: the symbols of the head explained, with its mark when the scenario has several heads

    def shown(self, x: float, p: int | None = None) -> Decimal: ...  # x as the reader sees it, at p decimals (default: self.p)
    def number(self, x: float, p: int | None = None) -> str: ...  # x written as the reader sees it, at p decimals (default: self.p)
    def relation(self, reader: Decimal | Sequence[Decimal], result: float | np.ndarray, *, name: str) -> str: ...  # "=" or "≈"
    def vec(self, values: np.ndarray) -> str: ...  # a vector, its middle left out when long (unless full)
    def terms(self, texts: list[str]) -> str: ...  # terms joined by +, the middle left out when long (unless full)
    def shown_keys(self) -> list[Any]: ...  # the KeySteps shown (all, or the largest weights of a long sequence)
