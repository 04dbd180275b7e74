"""The pieces that change attention beyond the textbook, one module each, and the registry the engine iterates.

Each variant is a small frozen object that holds what it does to the numbers and says it in
words (`describe()`) and as JSON (`as_json()`); its class names its scenario key, the stage of
the formula it acts on and its place among the scenario JSON's keys. The engine, the JSON and
the header summary go through REGISTRY instead of naming variants. Stages, in the order the
engine meets them:
    "norm"        on each head's q and k: normalise(x, role, index, whole) -> x  (QK-norm, QK LayerNorm)
    "value"       on each head's values: normalise(V) -> V                       (a value norm: Gemma 3n's v_norm)
    "qk"          before the scores, on q and k: apply(x, positions) -> x       (RoPE)
    "rotated"     after RoPE, on q and k: turn(q, k, …) -> Turned              (QK-norm after RoPE)
    "scaled"      on the scaled scores, elementwise: apply(s, out=) -> s        (a query temperature by row, soft-capping)
    "logits"      added to the scaled scores: matrix(head, L_q, L_k)           (a given bias, ALiBi, T5's buckets)
    "visibility"  which keys each query sees: visible(L_q, L_k) -> bool          (the mask)
    "denominator" the softmax's sum: logit(h), whose e^ joins every row's sum    (learned sinks)
    "heads"       makes each head's q, k, v instead of W_Q, W_K, W_V              (multi-head latent attention)
    "cache"       keys and values given before the sentence's own, after RoPE     (a KV cache: prefix caching)
    "scores"      given instead of q·kᵀ: matrix(h) -> (L_q, L_k)                  (a score matrix given directly)
    "kernel"      replaces the softmax: head(h, q, k, V, visible, divisor, r)      (linear attention, retention)
    "output"      after a head's weights·V: gate(h, X, output, r) -> Gated        (a gated output: o ⊙ σ(X·W_gate))
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

import numpy as np

from attncli.core.variants.biases import Alibi, ScoreBias, alibi_slopes
from attncli.core.variants.cache import KvCache
from attncli.core.variants.delta import DeltaRule
from attncli.core.variants.gates import OutputGate
from attncli.core.variants.linear import LinearAttention, Retention
from attncli.core.variants.masks import Mask
from attncli.core.variants.mla import Mla
from attncli.core.variants.positions import Rope
from attncli.core.variants.qklayernorm import QkLayerNorm
from attncli.core.variants.qknorm import QkNorm, QkNormAfterRope
from attncli.core.variants.relative import RelativeBuckets
from attncli.core.variants.scores import GivenScores
from attncli.core.variants.shown import Narrated, Say, StageRow
from attncli.core.variants.sinks import LearnedSink
from attncli.core.variants.softcap import SoftCap
from attncli.core.variants.temperature import QueryTemperature
from attncli.core.variants.valuenorm import ValueNorm

__all__ = [
    "REGISTRY", "Alibi", "DeltaRule", "GivenScores", "KvCache", "LearnedSink", "LinearAttention", "Mask", "Mla", "Narrated", "OutputGate", "QkLayerNorm", "QkNorm", "QkNormAfterRope", "QueryTemperature", "RelativeBuckets", "Retention", "Rope", "Say", "ScoreBias", "SoftCap", "StageRow", "ValueNorm", "Variant", "active",
    "alibi_slopes", "in_json_order", "shown_rows", "visibility",
]  # fmt: skip


class Variant(Protocol):
    key: ClassVar[str]  # its scenario key (a Scenario holds it in `variants`: s.variant(Kind))
    stage: ClassVar[str]  # "qk", "scaled", "logits", "visibility" or "denominator"
    json_key: ClassVar[str]  # its key in the scenario's JSON
    json_slot: ClassVar[int]  # its place among the variants' JSON keys: keys are only ever added, a new one takes the next
    json_absent: ClassVar[Any]  # the JSON value when the scenario does not have it
    schema: ClassVar[Mapping[str, Any]]  # its key's JSON Schema, with a description (core.variants.keys)

    def describe(self) -> str: ...
    def as_json(self) -> Any: ...

    # How its scenario key is read (core.variants.keys), optional beside `schema`:
    #   schema_after: ClassVar[str]                                  the key it follows in the key table (none: after the variants)
    #   @classmethod def from_yaml(cls, read: Read, sizes: Sizes) -> Self | None    its value read and checked; None: absent
    #   softmax_only: ClassVar[bool]                                 attention without softmax refuses it
    #   excludes: ClassVar[dict[str, tuple[str, str]]]              keys it cannot stand beside: why, what to write instead
    #   def sized(self, sizes: Sizes) -> Sizes                       the sizes with it: MLA ("heads") and a KV cache ("cache"),
    #                                                                read first, change d_k, d_v, L_k, the positions

    # How it is shown (core.variants.shown), optional (tests/test_variants_shown.py: every variant has rows or a step):
    #   rows: ClassVar[tuple[StageRow, ...]]                     its stage-table rows (`shared` ones drawn once, before the heads)
    #   def narrate(self, expl: Explanation, say: Say) -> Narrated   its step of `explain`, after the steps of its stage (or a list)
    #   def shows(self) -> bool                                  whether its rows and step are worth showing (default: always)
    # and, for the stages that make or extend each head's q, k, v (MLA in mla_shown.py, a KV cache):
    #   def projection(self, n, s, letter) -> str                ("heads") how each head's Q, K or V row is written
    #   def introduce(self, expl) -> list[str]                   ("heads") explain's sentence on the columns a head uses
    #   tells: ClassVar[tuple[str, ...]]                         stages whose steps its own narration tells (MLA: "qk")
    #   def narrate_output(self, expl, say) -> Narrated | None   a step after the output (MLA's absorbed form)
    #   def stacked(self, n, letter, made) -> str                ("cache") each head's K or V with the cache first


REGISTRY: tuple[type[Variant], ...] = (QkNorm, QkLayerNorm, ValueNorm, Rope, QkNormAfterRope, QueryTemperature, SoftCap, ScoreBias, Alibi, RelativeBuckets, Mask, LearnedSink, Mla, KvCache, GivenScores, LinearAttention, Retention, OutputGate, DeltaRule)  # in the order the engine meets them


def shown_rows() -> list[StageRow]:
    """Every stage-table row the variants bring, in registry order."""
    return [row for kind in REGISTRY for row in getattr(kind, "rows", ())]


def active(s: Any, stage: str | None = None) -> list[Any]:
    """The variants a Scenario holds (at `stage`, or all), in registry order. (`s` is a Scenario: core.scenario imports this module.)"""
    return [variant for variant in s.in_registry_order if stage is None or variant.stage == stage]


def in_json_order() -> list[type[Variant]]:
    return sorted(REGISTRY, key=lambda kind: kind.json_slot)


def visibility(s: object, L_q: int, L_k: int) -> np.ndarray:
    """(L_q, L_k) bool: True where query i sees key j under every visibility variant."""
    seen = [variant.visible(L_q, L_k) for variant in active(s, "visibility")]
    return functools.reduce(np.logical_and, seen) if seen else np.ones((L_q, L_k), dtype=bool)
