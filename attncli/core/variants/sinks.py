"""Learned attention sinks (gpt-oss): one logit per head that joins the softmax's denominator and has no value.

Not the StreamingLLM sink tokens (`mask: {sinks: N}`, real keys kept visible): this sink is no key
at all. Row i's weights become e^(s_ij) / (e^(sink_h) + Σ_j e^(s_ij)), so they sum to less than 1
and the rest, e^(sink_h) / (…), is attention paid to nothing (the output is pulled toward 0).
The module also holds how the sink is shown (core.variants.shown): its stage-table row and its step of `explain`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from attncli.core.records import record
from attncli.core.variants.keys import VECTOR, Read, Schema, Sizes
from attncli.core.variants.shown import Narrated, Say, StageRow


@record
class LearnedSink:
    """Head h adds e^(logits[h − 1]) to every row's sum of exponentials, and no value to its output."""

    key: ClassVar[str] = "sink_logits"
    stage: ClassVar[str] = "denominator"
    json_key: ClassVar[str] = "sink_logits"
    json_slot: ClassVar[int] = 5
    json_absent: ClassVar[None] = None
    rows: ClassVar[tuple[StageRow, ...]]  # its stage-table row, below the class

    logits: tuple[float, ...]  # one per query head, head 1 first

    def logit(self, h: int) -> float:
        """Head h's (from 1) sink logit."""
        return self.logits[h - 1]

    def describe(self) -> str:
        values = ", ".join(f"{value:g}" for value in self.logits)
        return f"learned attention sinks (gpt-oss): e^sink joins each row's softmax denominator, sink = [{values}]"

    def as_json(self) -> dict[str, object]:
        return {"logits": list(self.logits)}

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """The sink's share of the row, and how much each key's weight shrank because of it."""
        w, p = say.w, say.p
        taken = float(expl.sink_weight)
        sink_exp = float(expl.sink_exp)
        logit = self.logit(expl.head.head)
        lines: list[tuple[str, ...]] = [
            (w.text("sink"), w.num(logit, p)),
            (w.exp(w.text("sink")) if not expl.shift else w.exp(f"{w.text('sink')} {w.minus} m", grouped=True), w.num(sink_exp, p)),
            (w.text("taken"), f"{w.frac(w.num(sink_exp, p), w.num(expl.exp_sum, p, whole=False))} "
                              f"{say.relation(say.shown(sink_exp) / say.shown(expl.exp_sum), taken, name='the sink weight')} {w.num(taken, p, whole=False)}"),
        ]  # fmt: skip
        keys_sum = expl.exp_sum - sink_exp  # Σ over the keys alone
        for key in say.shown_keys():
            if key.masked:
                continue
            without = key.exp / keys_sum if keys_sum else 0.0
            reader = say.shown(without) * (1 - say.shown(taken))
            relation = say.relation(reader, key.weight, name=f"α({key.label})")
            lines.append((w.label(key.label), f"{w.num(without, p, whole=False)} {w.text('without the sink')} {w.times} "
                                              f"(1 {w.minus} {w.num(taken, p, whole=False)}) {relation} {w.num(key.weight, p, whole=False)}", ":"))  # fmt: skip
        notes = [
            f"The learned sink of head {expl.head.head} is a logit with no key and no value: e^sink joins the sum, so it takes "
            f"{say.number(taken)} of the attention, and every key keeps 1 − {say.number(taken)} = {say.number(1 - taken)} of the weight it would have had "
            "without the sink. The output is the weighted values alone, pulled toward 0 by the weight that went to nothing.",
            "Why models do it (gpt-oss): a head that has nothing useful to read in this context can send its attention to the sink "
            "instead of piling it onto the first token (the attention sink that StreamingLLM found and keeps as real tokens).",
        ]
        formula = f"{w.text('taken')} = {w.frac(w.exp(w.text('sink')), w.sigma)}"
        return Narrated("The learned sink's share", formula, lines, notes)

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        "description": "Learned attention sinks (gpt-oss): one logit per head (or one for all) whose e^sink joins each row's "
        "softmax denominator without a value, so the weights sum to less than 1. Not the sink tokens of mask.sinks.",
        "anyOf": [{"type": "number"}, VECTOR],
    }
    schema_after: ClassVar[str] = "softcap"
    softmax_only: ClassVar[bool] = True  # it joins a softmax's denominator

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> LearnedSink:
        """`sink_logits:` one number for every head, or one per head."""
        heads = sizes.heads
        expected = f"{heads} finite numbers, one logit per head (gpt-oss's learned sinks), or one number for every head"
        if read.form == "plain" and read.kind != "bool":
            logits = [read.number()] * heads
        elif read.form == "list" and all(item.form == "plain" and item.kind != "bool" for item in read.items()):
            logits = [item.number() for item in read.items()]
            if len(logits) != heads:
                raise read.error(f"{len(logits)} sink logits for heads = {heads}", expected)
        else:
            raise read.error(read.found(), expected)
        return cls(tuple(float(logit) for logit in logits))


def _sink_formula(n: Any, s: Any, h: Any) -> str:
    logit = s.variant(LearnedSink).logit(h.head if h is not None else 1)
    if n.tex:
        return rf"\text{{sink weight}} = e^{{\text{{sink}} - m}} / \Sigma, \quad \text{{sink}} = {logit:g}"
    return f"sink weight = e^(sink − m) / Σ, sink = {logit:g}"


LearnedSink.rows = (
    StageRow("sink", "sink", "Weight taken by the learned sink", _sink_formula,
             lambda h: None if h.sink_weight is None else h.sink_weight[:, None], "queries", "one", after="weights",
             json=("sink_exp", "sink_weight")),
)  # fmt: skip
