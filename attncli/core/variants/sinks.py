"""Learned attention sinks (gpt-oss): one logit per head that joins the softmax's denominator and has no value.

Not the StreamingLLM sink tokens (`mask: {sinks: N}`, real keys kept visible): this sink is no key
at all. Row i's weights become e^(s_ij) / (e^(sink_h) + Σ_j e^(s_ij)), so they sum to less than 1
and the rest, e^(sink_h) / (…), is attention paid to nothing (the output is pulled toward 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True, eq=False)
class LearnedSink:
    """Head h adds e^(logits[h − 1]) to every row's sum of exponentials, and no value to its output."""

    key: ClassVar[str] = "sink_logits"
    stage: ClassVar[str] = "denominator"
    json_key: ClassVar[str] = "sink_logits"
    json_slot: ClassVar[int] = 5
    json_absent: ClassVar[None] = None

    logits: tuple[float, ...]  # one per query head, head 1 first

    def logit(self, h: int) -> float:
        """Head h's (from 1) sink logit."""
        return self.logits[h - 1]

    def describe(self) -> str:
        values = ", ".join(f"{value:g}" for value in self.logits)
        return f"learned attention sinks (gpt-oss): e^sink joins each row's softmax denominator, sink = [{values}]"

    def as_json(self) -> dict[str, object]:
        return {"logits": list(self.logits)}

