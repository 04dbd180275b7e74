"""QK LayerNorm (StableLM 2, Persimmon): q and k each centred, divided by their standard deviation and scaled, before RoPE.

    q̂_j = (q_j − mean(q)) / √(var(q) + ε) · w_h,j        var(q) = mean((q − mean(q))²)

A LayerNorm, not an RMSNorm: the mean is subtracted first, so a q whose numbers are all alike becomes 0 (where
RMSNorm keeps its direction). StableLM 2 gives every head its own norm (StableLmLayerNormPerHead: one nn.LayerNorm of
head_dim per head, without a bias), so head h's weight w_h is a row of an (H, d_k) matrix (the keys': (G, d_k)); a
single row of d_k is shared by every head. The mean and variance run over the head's d_k numbers.

The module also holds how it is shown (core.variants.shown): its two stage-table rows and its step of `explain`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, ClassVar

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import MATRIX, VECTOR, Read, Schema, Sizes, frozen, mapping_keys
from attncli.core.variants.shown import Narrated, Say, StageRow
from attncli.errors import AttnError


@record
class QkLayerNorm:
    """LayerNorm of each head's q and k (no bias), with a weight per head or one shared, and ε."""

    key: ClassVar[str] = "qk_layernorm"
    stage: ClassVar[str] = "norm"
    json_key: ClassVar[str] = "qk_layernorm"
    json_slot: ClassVar[int] = 12
    json_absent: ClassVar[None] = None
    symbol: ClassVar[str] = "LayerNorm"  # how an overflow message names it: LayerNorm(Q)
    whole: ClassVar[bool] = False  # the engine's question: every head's numbers in one norm? Never: per head
    rows: ClassVar[tuple[StageRow, ...]]  # its stage-table rows, below the class

    q_weight: np.ndarray  # (H, d_k) each query head its own, or (d_k,) shared
    k_weight: np.ndarray  # (G, d_k) each key/value head its own, or (d_k,) shared
    eps: float = 1e-5

    def weight(self, role: str, index: int) -> np.ndarray:
        """(d_k,) the weight of head `index` (from 1; a key/value head for "k")."""
        w = self.q_weight if role == "q" else self.k_weight
        return np.asarray(w[index - 1] if w.ndim == 2 else w)  # (d_k,)

    def normalise(self, x: np.ndarray, role: str, index: int, whole: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(L, d_k) head `index`'s rows of q or k centred, divided by √(var + ε) and times the head's weight; and (L,) var."""
        centred = x - x.mean(axis=-1, keepdims=True)  # (L, d_k)
        variance = np.asarray((centred * centred).mean(axis=-1))  # (L,)
        normed = centred / np.sqrt(variance + self.eps)[:, None] * self.weight(role, index)  # (L, d_k)
        return np.asarray(normed), variance

    def refuse_zero_rms(self, variance: np.ndarray, role: str, path: str | None, h: int, rows: Sequence[str]) -> None:
        """An AttnError when ε = 0 meets a row of q or k whose numbers are all alike: its LayerNorm would divide 0 by 0."""
        if self.eps == 0 and not variance.all():  # (L,) var(x)
            i = int(np.flatnonzero(variance == 0)[0])
            raise AttnError(
                f"head {h}, row {i + 1} ({rows[i]!r}): {role}'s numbers are all alike and ε = 0, so its LayerNorm would divide 0 by 0",
                file=path,
                key=f"{self.key}.eps",
                expected="ε > 0 (such as 1e-5), as every model uses",
            )

    @property
    def per_head(self) -> bool:
        return bool(self.q_weight.ndim == 2)

    def describe(self) -> str:
        weights = "each head its own weight" if self.per_head else "one weight shared by the heads"
        return f"QK LayerNorm: each head's q and k, (x − mean(x)) / √(var(x) + ε) · w, {weights}, ε = {self.eps:g}, before RoPE"

    def as_json(self) -> dict[str, object]:
        return {"eps": self.eps, "per_head": self.per_head, "q_weight": self.q_weight, "k_weight": self.k_weight}

    # -- its step of `explain` ------------------------------------------------------------------

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """The query's mean, variance and standard deviation, the division and the head's weight; each key's k̂; why."""
        w, p = say.w, say.p
        s, head = expl.scenario, expl.head
        normed = head.normed[self.key]
        i = expl.position - 1
        q = expl.q_raw
        mean_q = float(np.mean(q))
        var_q = float(normed.q_mean_square[i])
        sd_q = math.sqrt(var_q + self.eps)
        reader_mean = sum((say.shown(float(x)) for x in q), Decimal(0)) / len(q)
        root = (say.shown(var_q) + Decimal(repr(self.eps))).sqrt()
        lines: list[tuple[str, ...]] = [
            (_of(w, "mean", "q"), f"({say.terms([w.num(float(x), p) for x in q])}) / {len(q)} {say.relation(reader_mean, mean_q, name='mean(q)')} {w.num(mean_q, p)}"),
            (_of(w, "var", "q"), f"{_of(w, 'mean', _centred_square(w))} = {w.num(var_q, p)}"),
            (_sd(w, "q"), f"{w.sqrt(w.num(var_q, p) + ' + ' + _eps(w)) if w.tex else '√(' + w.num(var_q, p) + ' + ε)'} "
                          f"{say.relation(root, sd_q, name='the standard deviation of q')} {w.num(sd_q, p)}"),
        ]
        weight_q, weight_k = self.weight("q", head.head), self.weight("k", head.kv_head)
        lines.append((_weight(w, "q", head.head), say.vec(weight_q)))
        centred_q = q - mean_q
        reader_q = [say.shown(float(c)) / say.shown(sd_q) * say.shown(float(g)) for c, g in zip(centred_q, weight_q)]
        lines.append((_hat(w, "q"), f"{w.frac(say.vec(centred_q), w.num(sd_q, p))} {w.times} {_weight(w, 'q', head.head)} "
                                    f"{say.relation(reader_q, normed.q[i], name='the normalised q')} {say.vec(normed.q[i])}"))  # fmt: skip
        lines.append((_weight(w, "k", head.kv_head), say.vec(weight_k)))
        cached = s.cached
        for key in say.shown_keys():
            j = key.position - 1
            if key.position <= cached:
                lines.append((w.of(_hat(w, "k"), w.label(key.label)), f"{say.vec(normed.k[j])}{w.text(' (cached: already normalised)')}"))
                continue
            sd_k = math.sqrt(float(normed.k_mean_square[j]) + self.eps)
            centred = key.k_raw - float(np.mean(key.k_raw))
            reader_k = [say.shown(float(c)) / say.shown(sd_k) * say.shown(float(g)) for c, g in zip(centred, weight_k)]
            lines.append((w.of(_hat(w, "k"), w.label(key.label)),
                          f"{w.frac(say.vec(centred), w.num(sd_k, p))} {w.times} {_weight(w, 'k', head.kv_head)} "
                          f"{say.relation(reader_k, normed.k[j], name=f'the normalised k({key.label})')} {say.vec(normed.k[j])}"))  # fmt: skip
        notes = [
            f"QK LayerNorm centres q on its mean over the head's d_k = {s.d_k} numbers, divides it by its standard deviation "
            f"√(var + ε) (ε = {self.eps:g}) and multiplies coordinate j by the learned weight w_j: a LayerNorm, not an RMSNorm, "
            "so the mean is taken out before the division. "
            + ("Every head has its own weight (StableLM 2: one LayerNorm per head); the keys use their key/value head's."
               if self.per_head else "One weight serves every head; the keys have their own."),
            "Why models do it: after the norm q and k have a standard deviation of about 1 whatever the projections learned, so "
            "the logits stay bounded and training stays stable.",
        ]
        centred = r"q - \operatorname{mean}(q)" if w.tex else "(q − mean(q))"
        formula = f"{_hat(w, 'q')} = {w.frac(centred, _sd(w, 'q'))} {w.times} {_weight(w, 'q', head.head)}"
        return Narrated("Normalising the query and the keys (QK LayerNorm)", formula, lines, notes)

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        "description": "QK LayerNorm (StableLM 2): each head's q and k centred, divided by their standard deviation and times a "
        "weight, before RoPE. true: weights 1, eps 1e-5; or {q_weight, k_weight, eps}: a weight is d_k numbers shared by the "
        "heads, or one row of d_k per head (H rows for q, kv_heads rows for k).",
        "anyOf": [
            {"type": "boolean"},
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {"q_weight": {"anyOf": [VECTOR, MATRIX]}, "k_weight": {"anyOf": [VECTOR, MATRIX]}, "eps": {"type": "number", "minimum": 0}},
            },
        ],
    }
    schema_after: ClassVar[str] = "sink_logits"  # beside qk_norm (which follows it too, so a chain after qk_norm stays whole)

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> QkLayerNorm | None:
        """`qk_layernorm: true` (weights 1), or a mapping of the weights (shared or per head) and eps."""
        d_k = sizes.d_k
        if read.form == "plain" and read.kind == "bool":
            return cls(frozen(np.ones(d_k)), frozen(np.ones(d_k))) if read.boolean() else None
        if read.form != "mapping":
            raise read.error(read.found(), "`true`, or {q_weight, k_weight, eps}")
        items = read.mapping(mapping_keys(cls.schema))
        eps = 1e-5
        if "eps" in items:
            eps = items["eps"].number()
            if not (math.isfinite(eps) and eps >= 0):
                raise items["eps"].error(f"found {items['eps'].text}", "a number ≥ 0, such as 1e-5")
        weights = []
        for role, count in (("q", sizes.heads), ("k", sizes.kv_heads)):
            name = f"{role}_weight"
            if name not in items:
                weights.append(np.ones(d_k))
                continue
            given = items[name]
            nested = given.form == "list" and any(item.form == "list" for item in given.items())
            weight = given.matrix() if nested else given.vector()
            wanted = (count, d_k) if weight.ndim == 2 else (d_k,)
            if weight.shape != wanted:
                raise items[name].error(f"{' × '.join(map(str, weight.shape))} numbers", f"d_k = {d_k} numbers, or {count} rows of {d_k} (one per head)")
            weights.append(weight)
        return cls(frozen(weights[0]), frozen(weights[1]), eps=eps)


def _eps(w: Any) -> str:
    return r"\varepsilon" if w.tex else "ε"


def _hat(w: Any, letter: str) -> str:
    """q̂: a symbol after the norm."""
    return rf"\hat{{{letter}}}" if w.tex else letter + "\u0302"


def _of(w: Any, name: str, x: str) -> str:
    return rf"\operatorname{{{name}}}({x})" if w.tex else f"{name}({x})"


def _weight(w: Any, role: str, index: int) -> str:
    """w_q,2 / w_k,1: the weight of query head 2, of key/value head 1."""
    return rf"w_{{{role},{index}}}" if w.tex else f"w_{role},{index}"


def _centred_square(w: Any) -> str:
    return r"(q - \operatorname{mean}(q))^2" if w.tex else "(q − mean(q))²"


def _sd(w: Any, letter: str) -> str:
    return rf"\sqrt{{\operatorname{{var}}({letter}) + \varepsilon}}" if w.tex else f"√(var({letter}) + ε)"


def _normed_formula(letter: str) -> Any:
    def formula(n: Any, s: Any, h: Any) -> str:
        weight = "w" if letter == "Q" else "w_k"
        hat = n(rf"\hat{{{letter}}}" if n.tex else letter + "\u0302")
        if n.tex:
            return rf"{hat} = ({n(letter)} - \operatorname{{mean}}({n(letter)})) / \sqrt{{\operatorname{{var}}({n(letter)}) + \varepsilon}} \odot {weight}"
        return f"{hat} = ({n(letter)} − mean({n(letter)})) / √(var({n(letter)}) + ε) ⊙ {weight}"

    return formula


QkLayerNorm.rows = (
    StageRow("qk_norm", "Q_layernorm", "Normalised queries", _normed_formula("Q"),
             lambda h: h.normed["qk_layernorm"].q if "qk_layernorm" in (h.normed or {}) else None, "queries", "q", after="V", main=True),
    StageRow("qk_norm", "K_layernorm", "Normalised keys", _normed_formula("K"),
             lambda h: h.normed["qk_layernorm"].k if "qk_layernorm" in (h.normed or {}) else None, "keys", "k", after="Q_layernorm", kv=True),
)  # fmt: skip
