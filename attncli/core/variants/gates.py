"""A gated output (Qwen3-Next's gated attention): each head's output multiplied elementwise by σ(X·W_gate), before W_O.

The registry's "output" stage: after a head's weights·V, o ← o ⊙ σ(X·W_gate_h), where W_gate_h is head h's block of
d_v columns (Qwen3-Next makes it in q_proj beside the queries: twice as wide, [query | gate] per head). A gate near 0
silences a head for a token, near 1 lets it through; the heads' gated outputs then go side by side into W_O.
The module also holds how the gate is shown (core.variants.shown): its stage-table rows and its step of `explain`.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import MATRIX, Read, Schema, Sizes, frozen
from attncli.core.variants.shown import Narrated, Say, StageRow


class Gated(NamedTuple):
    """One head's output after an "output" variant (HeadResult.gated): the factor it multiplied by, and the product."""

    gate: np.ndarray  # (L_q, d_v) σ(X·W_gate_h)
    output: np.ndarray  # (L_q, d_v) output ⊙ gate


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^−x), without overflow for large negative x."""
    out: np.ndarray = np.exp(-np.logaddexp(0.0, -x))
    return out


@record
class OutputGate:
    """Head h's output times σ(X·W[:, (h−1)·d_v : h·d_v]), elementwise (Qwen3-Next's gated attention)."""

    key: ClassVar[str] = "output_gate"
    stage: ClassVar[str] = "output"
    json_key: ClassVar[str] = "output_gate"
    json_slot: ClassVar[int] = 15
    json_absent: ClassVar[None] = None
    rows: ClassVar[tuple[StageRow, ...]]  # its stage-table rows, below the class

    W: np.ndarray  # (d_model, H·d_v) every head's gate columns side by side

    def gate(self, h: int, X: np.ndarray, output: np.ndarray, r: Any) -> Gated:
        """Head h's (from 1) gate σ(X·W_gate_h) and its output times it, each step rounded by r."""
        d_v = output.shape[1]
        logits = r(X @ self.W[:, (h - 1) * d_v : h * d_v])  # (L_q, d_model) @ (d_model, d_v) -> (L_q, d_v)
        gate = r(sigmoid(logits))  # (L_q, d_v)
        return Gated(gate, r(output * gate))  # (L_q, d_v)

    def handed(self, n: Any, *, lower: bool = False) -> str:
        """What a head hands the concatenation in the notation n (which carries the head's mark): O ⊙ G (o ⊙ g in explain's steps)."""
        odot = r"\odot" if n.tex else "⊙"
        return f"{n('o' if lower else 'O')} {odot} {n('g' if lower else 'G')}"

    def describe(self) -> str:
        return f"gated output (Qwen3-Next): each head's output × σ(X·W_gate), W_gate {self.W.shape[0]} × {self.W.shape[1]}"

    def as_json(self) -> dict[str, object]:
        return {"W_gate": self.W}

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """The query's gate, component by component, and the head's output times it."""
        w = say.w
        gated = expl.head.gated[self.key]
        gate, after = gated.gate[expl.position - 1], gated.output[expl.position - 1]  # (d_v,) each: outputs are kept whole
        reader = [say.shown(float(o)) * say.shown(float(g)) for o, g in zip(expl.output, gate, strict=True)]
        odot = r"\odot" if w.tex else "⊙"
        sigma = r"\sigma" if w.tex else "σ"
        lines: list[tuple[str, ...]] = [
            (w.text("gate"), f"{sigma}(x{w.dot}W_gate) = {say.vec(gate)}"),
            (w.of(w.text("gated"), w.label(expl.token)),
             f"{say.vec(expl.output)} {odot} {say.vec(gate)} {say.relation(reader, after, name='the gated output')} {say.vec(after)}"),
        ]  # fmt: skip
        closed = int((gate < 0.5).sum())
        notes = [
            f"The gate is σ of the token's embedding times this head's {gate.shape[0]} gate columns: each number between 0 and 1 "
            f"scales one component of the head's output ({closed} of {gate.shape[0]} are below one half here). It depends on the "
            "token alone, not on the other tokens, so it can silence a head for a token whatever the head read.",
            "Why models do it (Qwen3-Next): the gate lets a head say nothing, so attention need not park its weight on the first "
            "token (an attention sink) to do so, and the output gets a non-linearity before W_O.",
        ]
        return Narrated("The output gate", f"{w.text('gated')} = {w.text('output')} {odot} {sigma}(x{w.dot}W_gate)", lines, notes)

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        **MATRIX,
        "description": "A gated output (Qwen3-Next): a d_model × (heads·d_v) matrix W_gate; head h's output is multiplied "
        "elementwise by σ(X·W_gate_h), its block of d_v columns, before W_O.",
    }
    schema_after: ClassVar[str] = "sink_logits"

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> OutputGate:
        """`output_gate:` a d_model × (heads·d_v) matrix."""
        width = sizes.heads * sizes.d_v
        expected = f"a {sizes.d_model} × {width} matrix (d_model × heads·d_v): each head's gate columns side by side"
        if not sizes.d_model:
            raise read.error("a gate without embeddings", "X and W_Q, W_K, W_V (the gate is σ(X·W_gate)), or no output_gate")
        W = read.matrix()
        if W.shape != (sizes.d_model, width):
            raise read.error(f"a {W.shape[0]} × {W.shape[1]} matrix", expected)
        return cls(frozen(W))


def _gate_formula(n: Any, s: Any, h: Any) -> str:
    if n.tex:
        mark = f"^{{({n.head})}}" if n.head is not None else ""
        return rf"{n('G')} = \sigma(X \cdot W_{{\text{{gate}}}}{mark})"
    return f"{n('G')} = σ(X·{n('W_gate')})"


def _gated_formula(n: Any, s: Any, h: Any) -> str:
    odot = r"\odot" if n.tex else "⊙"
    return f"{n('O')} {odot} {n('G')}"


OutputGate.rows = (
    StageRow("gate", "gate", "Output gate", _gate_formula, lambda h: h.gated["output_gate"].gate if "output_gate" in h.gated else None,
             "queries", "o", after="output"),
    StageRow("gate", "gated", "Gated output", _gated_formula,
             lambda h: h.gated["output_gate"].output if "output_gate" in h.gated else None, "queries", "o", after="gate", main=True),
)  # fmt: skip
