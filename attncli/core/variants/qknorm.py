"""QK-norm (Qwen3, Gemma 3, OLMo 2): q and k each divided by their root mean square and scaled by a learned weight, before RoPE.

    q̂_j = q_j / √(mean(q²) + ε) · w_j        (Gemma's form: · (1 + w_j))

Per head (Qwen3, Gemma 3): the mean runs over the head's d_k numbers and one weight of length d_k
serves every head. Over the whole projection (OLMo 2): the mean runs over all H·d_k numbers of the
query row (G·d_k of the key row) and the weight has that length; a head then takes its slice.
After the norm q and k have a root mean square of about 1 whatever the projections learned, so a
score q̂·k̂ stays within d_k·max|w_q|·max|w_k|: the logits are bounded, which keeps training stable.

The module also holds how QK-norm is shown (core.variants.shown): its two stage-table rows and its
narrated step of `explain`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, ClassVar

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import VECTOR, Read, Schema, Sizes, frozen, mapping_keys
from attncli.core.variants.positions import Rope, Turned
from attncli.core.variants.shown import Narrated, Say, StageRow
from attncli.errors import AttnError, did_you_mean


@record
class QkNorm:
    """RMSNorm of q and k with weight and ε, per head or over the whole projection."""

    key: ClassVar[str] = "qk_norm"
    stage: ClassVar[str] = "norm"
    json_key: ClassVar[str] = "qk_norm"
    json_slot: ClassVar[int] = 6
    json_absent: ClassVar[None] = None
    symbol: ClassVar[str] = "RMSNorm"  # how an overflow message names it: RMSNorm(Q)
    rows: ClassVar[tuple[StageRow, ...]]  # its stage-table rows, below the class

    q_weight: np.ndarray  # (d_k,) per head, or (H·d_k,) over the whole projection
    k_weight: np.ndarray  # (d_k,) per head, or (G·d_k,)
    eps: float = 1e-6
    over: str = "head"  # "head" (Qwen3, Gemma 3) or "whole" (OLMo 2)
    offset: float = 0.0  # 1.0: Gemma's (1 + w)

    @property
    def whole(self) -> bool:
        return self.over == "whole"

    def weight(self, role: str, index: int, d_k: int) -> np.ndarray:
        """(d_k,) the factor of head `index` (from 1; a key/value head for "k"): offset + w, its slice when over the whole projection."""
        w = self.q_weight if role == "q" else self.k_weight
        if self.whole:
            w = w[(index - 1) * d_k : index * d_k]
        return np.asarray(self.offset + w)  # (d_k,)

    def normalise(self, x: np.ndarray, role: str, index: int, whole: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(L, d_k) head `index`'s rows of q or k (role "q" or "k") divided by their rms and times the weight; and (L,) mean(x²).

        `whole` is the whole projection (L, H·d_k or G·d_k), whose rows give the mean when over = "whole".
        """
        source = whole if self.whole and whole is not None else x  # (L, d_k) or (L, H·d_k)
        mean_square = np.asarray((source * source).mean(axis=-1))  # (L,)
        normed = x / np.sqrt(mean_square + self.eps)[:, None] * self.weight(role, index, x.shape[1])  # (L, d_k)
        return np.asarray(normed), mean_square

    def refuse_zero_rms(self, mean_square: np.ndarray, role: str, path: str | None, h: int, rows: Sequence[str]) -> None:
        """An AttnError when ε = 0 meets a row of q or k (role) whose numbers are all 0: its RMSNorm would be 0 / 0."""
        if self.eps == 0 and not mean_square.all():  # (L,) mean(x²)
            i = int(np.flatnonzero(mean_square == 0)[0])
            raise AttnError(
                f"head {h}, row {i + 1} ({rows[i]!r}): {role} is all zeros and ε = 0, so its RMSNorm would divide 0 by 0",
                file=path,
                key=f"{self.key}.eps",
                expected="ε > 0 (such as 1e-6), as every model uses",
            )

    def describe(self) -> str:
        over = "each head's q and k" if not self.whole else "the whole q and k projections (all heads)"
        form = "(1 + w)" if self.offset else "w"
        return f"QK-norm: RMSNorm of {over}, x / √(mean(x²) + ε) · {form}, ε = {self.eps:g}, before RoPE"

    def as_json(self) -> dict[str, object]:
        return {"over": self.over, "eps": self.eps, "form": "1+w" if self.offset else "w", "q_weight": self.q_weight, "k_weight": self.k_weight}

    # -- its step of `explain` ------------------------------------------------------------------

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """The query's mean square and rms, the division and the weight; each key's k̂; and why models do it."""
        w, p = say.w, say.p
        s, head = expl.scenario, expl.head
        normed_q, normed_k, q_squares, k_squares = self._stage(head)  # q̂, k̂ and each row's mean(x²)
        q_in = self._inputs(head, "q")[expl.position - 1]  # (d_k,) the query as the norm meets it
        k_in = self._inputs(head, "k")  # (L_k, d_k) the keys as it meets them
        i = expl.position - 1
        form = "w" if not self.offset else "(1 + w)"
        weight_q = self.weight("q", head.head, s.d_k)
        lines: list[tuple[str, ...]] = []
        mean_q, rms_q = float(q_squares[i]), _rms(float(q_squares[i]), self.eps)
        if self.whole:  # the mean runs over every head's numbers: said as one number
            mean_text = f"{w.num(mean_q, p)}" + (r" \quad \text{(all heads)}" if w.tex else " (over all heads)")
        else:
            q = q_in
            squares = [say.shown(float(x)) ** 2 for x in q]
            texts = [f"{w.num(float(x), p)}^2" if w.tex else f"{w.num(float(x), p)}²" for x in q]
            reader = sum(squares, Decimal(0)) / len(squares)
            mean_text = f"({say.terms(texts)}) / {len(q)} {say.relation(reader, mean_q, name='mean(q²)')} {w.num(mean_q, p)}"
        lines.append((_mean(w, "q"), mean_text))
        root = (say.shown(mean_q) + Decimal(repr(self.eps))).sqrt()
        lines.append((_rms_of(w, "q"), f"{w.sqrt(w.num(mean_q, p) + ' + ' + _eps(w)) if w.tex else '√(' + w.num(mean_q, p) + ' + ε)'} {say.relation(root, rms_q, name='rms(q)')} {w.num(rms_q, p)}"))
        form_k = form.replace("w", "w_k")
        lines.append((form, say.vec(weight_q)))
        q_hat = normed_q[i]
        reader_hat = [say.shown(float(x)) / say.shown(rms_q) * say.shown(float(g)) for x, g in zip(q_in, weight_q)]
        lines.append((_hat(w, "q"), f"{w.frac(say.vec(q_in), w.num(rms_q, p))} {w.times} {form} "
                                    f"{say.relation(reader_hat, q_hat, name='the normalised q')} {say.vec(q_hat)}"))  # fmt: skip
        weight_k = self.weight("k", head.kv_head, s.d_k)
        lines.append((form_k, say.vec(weight_k)))
        cached = s.cached  # keys 1 … c of a given KV cache hold k̂ already (after RoPE too): nothing to normalise
        for key in say.shown_keys():
            j = key.position - 1
            if key.position <= cached:
                lines.append((w.of(_hat(w, "k"), w.label(key.label)), f"{say.vec(normed_k[j])}{w.text(' (cached: already normalised)')}"))
                continue
            rms_k = _rms(float(k_squares[j]), self.eps)
            reader_k = [say.shown(float(x)) / say.shown(rms_k) * say.shown(float(g)) for x, g in zip(k_in[j], weight_k)]
            lines.append((w.of(_hat(w, "k"), w.label(key.label)),
                          f"{w.frac(say.vec(k_in[j]), w.num(rms_k, p))} {w.times} {form_k} "
                          f"{say.relation(reader_k, normed_k[j], name=f'the normalised k({key.label})')} {say.vec(normed_k[j])}"))  # fmt: skip
        over = (
            f"its own d_k = {s.d_k} numbers (per head: Qwen3, Gemma 3)"
            if not self.whole
            else f"all {s.heads}·{s.d_k} numbers of the query's projection, every head's (OLMo 2), so each head's slice is divided by the same rms"
        )
        bound = "d_k" if not self.whole else "√(H·G)·d_k"  # ‖q̂‖ ≤ √d_k·max|w| per head; a slice of the whole row, √(H·d_k)·max|w|
        notes = [
            f"QK-norm divides q by its root mean square over {over}, then multiplies coordinate j by the learned weight "
            + ("1 + w_j (Gemma's form: weights near 0 mean a factor near 1)" if self.offset else "w_j")
            + f"; ε = {self.eps:g} keeps the division safe. Each key is normalised the same way, with the keys' own weight w_k"
            + (", its rms over the whole key projection." if self.whole else "."),
            *([f"The {cached} key{'s' * (cached > 1)} of the given KV cache {'are' if cached > 1 else 'is'} cached as the queries meet "
               "them, after QK-norm" + (" and RoPE" if s.variant(Rope) is not None else "") + ", as a model's cache stores them (Qwen3 "
               "normalises k before caching it): their rms before the norm is not in the cache, and they are not normalised again."]
              if cached else []),
            "Why models do it: after the norm, q and k have a root mean square of about 1 whatever the projections learned, so "
            f"the logits stay bounded (|score| ≤ {bound}·max|w|·max|w_k|). Without it the logits can grow during training until "
            "the softmax saturates to one key and the loss diverges; Qwen3, OLMo 2 and Gemma 3 normalise q and k for that stability.",
        ]
        formula = f"{_hat(w, 'q')} = {w.frac('q', _rms_of(w, 'q'))} {w.times} {form}"
        return Narrated("Normalising the query and the keys (QK-norm)", formula, lines, notes)

    def _stage(self, head: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(q̂, k̂, mean(q²), mean(k²)) of the head, as the engine kept them at this variant's stage."""
        return tuple(head.normed[self.key])

    def _inputs(self, head: Any, role: str) -> np.ndarray:
        """(L, d_k) the rows of q or k the norm meets: as projected (before RoPE)."""
        return np.asarray(head.Q if role == "q" else head.K)

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        "description": "QK-norm (Qwen3, Gemma 3, OLMo 2): q and k divided by their root mean square and times a weight, "
        "before RoPE. true: per head, weights 1, eps 1e-6; or {over: head | whole, q_weight, k_weight, eps, form: w | 1+w}. "
        "over: head normalises each head's d_k numbers (one weight of d_k shared by the heads); whole, the whole projection "
        "(weights of H*d_k and G*d_k numbers, OLMo 2). form 1+w multiplies by (1 + w), Gemma's RMSNorm.",
        "anyOf": [
            {"type": "boolean"},
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "over": {"enum": ["head", "whole"]},
                    "q_weight": VECTOR,
                    "k_weight": VECTOR,
                    "eps": {"type": "number", "minimum": 0},
                    "form": {"enum": ["w", "1+w"]},
                },
            },
        ],
    }
    schema_after: ClassVar[str] = "sink_logits"

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> QkNorm | None:
        """`qk_norm: true` (per head, weights 1), or a mapping of over, form, eps and the weights."""
        d_k = sizes.d_k
        if read.form == "plain" and read.kind == "bool":
            return cls(frozen(np.ones(d_k)), frozen(np.ones(d_k))) if read.boolean() else None
        if read.form != "mapping":
            raise read.error(read.found(), "`true`, or {over: head | whole, q_weight, k_weight, eps, form: w | 1+w}")
        items = read.mapping(mapping_keys(cls.schema))
        over = "head"
        if "over" in items:
            over = items["over"].word()
            if over not in ("head", "whole"):
                raise items["over"].error(f"found {over!r}{did_you_mean(over, ('head', 'whole'))}", "`head` (each head's d_k numbers: Qwen3, Gemma 3) or `whole` (OLMo 2)")
        form = "w"
        if "form" in items:
            form = items["form"].word()
            if form not in ("w", "1+w"):
                raise items["form"].error(f"found {form!r}{did_you_mean(form, ('w', '1+w'))}", "`w` (x / rms · w) or `1+w` (Gemma's x / rms · (1 + w))")
        eps = 1e-6
        if "eps" in items:
            eps = items["eps"].number()
            if not (math.isfinite(eps) and eps >= 0):
                raise items["eps"].error(f"found {items['eps'].text}", "a number ≥ 0, such as 1e-6")
        weights = []
        for role, count in (("q", sizes.heads), ("k", sizes.kv_heads)):
            length = d_k * count if over == "whole" else d_k
            key = f"{role}_weight"
            if key not in items:
                weights.append(np.zeros(length) if form == "1+w" else np.ones(length))
                continue
            vector = items[key].vector()
            if len(vector) != length:
                what = f"{count}·d_k = {length}, the whole {role} projection" if over == "whole" else f"d_k = {d_k}, shared by every head"
                raise items[key].error(f"{len(vector)} numbers", f"{length} numbers ({what})")
            weights.append(vector)
        return cls(frozen(weights[0]), frozen(weights[1]), eps=eps, over=over, offset=1.0 if form == "1+w" else 0.0)


def _rms(mean_square: float, eps: float) -> float:
    return float(np.sqrt(mean_square + eps))


def _eps(w: Any) -> str:
    return r"\varepsilon" if w.tex else "ε"


def _hat(w: Any, letter: str) -> str:
    """q̂: a symbol after QK-norm."""
    return rf"\hat{{{letter}}}" if w.tex else letter + "\u0302"


def _mean(w: Any, letter: str) -> str:
    return rf"\operatorname{{mean}}({letter}^2)" if w.tex else f"mean({letter}²)"


def _rms_of(w: Any, letter: str) -> str:
    return rf"\operatorname{{rms}}({letter})" if w.tex else f"rms({letter})"


def hatted(n: Any, letter: str, *, transpose: bool = False) -> str:
    """Q̂ as a formula of the stage table writes it, with the head's mark: Q̂⁽²⁾, or \\hat{Q}^{(2)}."""
    return str(n(rf"\hat{{{letter}}}" if n.tex else letter + "\u0302", transpose=transpose))


def _normed_formula(letter: str) -> Any:
    def formula(n: Any, s: Any, h: Any) -> str:
        norm = s.variant(QkNorm)
        weight = "w" if letter == "Q" else "w_k"
        form = weight if not norm.offset else f"(1 + {weight})"
        if n.tex:
            over = r" \quad \text{(rms over all heads)}" if norm.whole else ""
            return rf"{hatted(n, letter)} = {n(letter)} / \operatorname{{rms}}({n(letter)}) \odot {form}{over}"
        return f"{hatted(n, letter)} = {n(letter)} / rms({n(letter)}) ⊙ {form}" + (" (rms over all heads)" if norm.whole else "")

    return formula


QkNorm.rows = (
    StageRow("qk_norm", "Q_norm", "Normalised queries", _normed_formula("Q"), lambda h: h.normed["qk_norm"].q if "qk_norm" in (h.normed or {}) else None,
             "queries", "q", after="V", main=True),
    StageRow("qk_norm", "K_norm", "Normalised keys", _normed_formula("K"), lambda h: h.normed["qk_norm"].k if "qk_norm" in (h.normed or {}) else None,
             "keys", "k", after="Q_norm", kv=True),
)  # fmt: skip


@record
class QkNormAfterRope(QkNorm):
    """QK-norm after RoPE (Llama 4, Hunyuan dense): each head's rotated q and k divided by their rms, times a weight or none.

        q̂′ = q′ / √(mean(q′²) + ε) · w        (Llama 4's L2Norm: no weight)

    The same RMSNorm as QkNorm's per head, met by the turned rows instead of the projected ones: the registry's
    "rotated" stage, after RoPE. Normalising after the turn keeps each rotated pair's length as RoPE left it relative to
    the others, so the scores still depend on the positions through their distance only.
    """

    key: ClassVar[str] = "qk_norm_after_rope"
    stage: ClassVar[str] = "rotated"
    json_key: ClassVar[str] = "qk_norm_after_rope"
    json_slot: ClassVar[int] = 17
    rows: ClassVar[tuple[StageRow, ...]]  # its stage-table rows, below the class

    weighted: bool = True  # False: no weight at all (Llama 4's L2Norm); q_weight and k_weight then hold ones

    def turn(self, q: np.ndarray, k: np.ndarray, h: int, g: int, q_rows: np.ndarray, k_rows: np.ndarray, path: str | None,
             queries: Sequence[str], keys: Sequence[str]) -> Turned:  # fmt: skip
        """Head h's rotated q (L_q, d_k) and its key/value head g's rotated k normalised, with each row's mean(x²)."""
        q_hat, q_ms = self.normalise(q, "q", h, None)
        k_hat, k_ms = self.normalise(k, "k", g, None)
        self.refuse_zero_rms(q_ms, "q", path, h, queries)
        self.refuse_zero_rms(k_ms, "k", path, h, keys)
        return Turned(q_hat, k_hat, q_ms, k_ms)

    def describe(self) -> str:
        form = "w" if self.weighted else "no weight"
        return f"QK-norm after RoPE: RMSNorm of each head's rotated q and k, x / √(mean(x²) + ε) · {form}, ε = {self.eps:g}"

    def as_json(self) -> dict[str, object]:
        return {**super().as_json(), "place": "after RoPE", "weighted": self.weighted}

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """QkNorm's step, on the rotated query and keys."""
        told = super().narrate(expl, say)
        w = say.w
        lines = told.lines
        if not self.weighted:  # no weight to show or multiply by
            unweighted = [line for line in told.lines if line[0] not in ("w", "w_k")]
            lines = [(line[0], line[1].replace(f" {w.times} w_k ", " ").replace(f" {w.times} w ", " "), *line[2:]) for line in unweighted]
        turned = w.prime("q")
        notes = [
            f"Here the norm comes after RoPE (Llama 4, Hunyuan dense): it meets the rotated query {turned} and the rotated keys"
            + (", with no weight (Llama 4's L2Norm: each row divided by its rms, nothing learned)." if not self.weighted else "."),
            *(told.notes if self.weighted else told.notes[1:]),  # QkNorm's first note speaks of the learned weight
        ]
        formula = f"{_hat(w, 'q')} = {w.frac(turned, _rms_of(w, turned))}" + (f" {w.times} w" if self.weighted else "")
        return Narrated("Normalising the rotated query and keys (QK-norm after RoPE)", formula, lines, notes)

    def _stage(self, head: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return tuple(head.turned[self.key])

    def _inputs(self, head: Any, role: str) -> np.ndarray:
        """(L, d_k) the rows as RoPE left them."""
        return np.asarray(head.rotated_q if role == "q" else head.rotated_k)

    schema: ClassVar[Schema] = {
        "description": "QK-norm after RoPE (Llama 4, Hunyuan dense): each head's rotated q and k divided by their root mean "
        "square and times a weight. true: weights 1, eps 1e-6; or {q_weight, k_weight (d_k numbers each, shared by the heads), "
        "eps, form: w | 1+w}.",
        "anyOf": [
            {"type": "boolean"},
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {"q_weight": VECTOR, "k_weight": VECTOR, "eps": {"type": "number", "minimum": 0}, "form": {"enum": ["w", "1+w"]}},
            },
        ],
    }


def _after_rope_formula(letter: str) -> Any:
    def formula(n: Any, s: Any, h: Any) -> str:
        norm = s.variant(QkNormAfterRope)
        weight = "w" if letter == "Q" else "w_k"
        form = (weight if not norm.offset else f"(1 + {weight})") if norm.weighted else ""
        if n.tex:
            turned = n(letter + "'")
            return rf"{hatted(n, letter)} = {turned} / \operatorname{{rms}}({turned})" + (rf" \odot {form}" if form else "")
        turned = n(letter + "′")
        return f"{hatted(n, letter)} = {turned} / rms({turned})" + (f" ⊙ {form}" if form else "")

    return formula


QkNormAfterRope.rows = (
    StageRow("qk_norm_after_rope", "Q_rope_norm", "Normalised rotated queries", _after_rope_formula("Q"),
             lambda h: h.turned["qk_norm_after_rope"].q if "qk_norm_after_rope" in (h.turned or {}) else None,
             "queries", "q", after="K_rope", main=True),
    StageRow("qk_norm_after_rope", "K_rope_norm", "Normalised rotated keys", _after_rope_formula("K"),
             lambda h: h.turned["qk_norm_after_rope"].k if "qk_norm_after_rope" in (h.turned or {}) else None,
             "keys", "k", after="Q_rope_norm", kv=True),
)  # fmt: skip
