"""Attention without softmax: linear attention with a feature map φ, and retention's decay mask.

Linear attention (Katharopoulos et al., "Transformers are RNNs", ICML 2020, eq. 4; causal, eq. 9):
    out_i = Σ_j (φ(q_i)·φ(k_j)) v_j / Σ_j φ(q_i)·φ(k_j),  j over the keys the mask lets query i see.
Retention (Sun et al., "Retentive Network", arXiv:2307.08621, eq. 5, parallel form, without xPos and GroupNorm):
    out = (Q·Kᵀ / s ⊙ D)·V,  D_ij = γ^(i−j) for j ≤ i, 0 above the diagonal.
Both replace softmax's exponentials and division by something a fixed-size state can carry: causal linear
attention is S_t = S_{t−1} + φ(k_t)ᵀ v_t, z_t = z_{t−1} + φ(k_t), out_t = φ(q_t)·S_t / φ(q_t)·z_t; retention is
S_t = γ S_{t−1} + k_tᵀ v_t, out_t = q_t·S_t (`recurrent`). A model keeps S (d_k × d_v numbers) instead of a
KV cache that grows by a key and a value per token: the contrast linear-attention hybrids (Qwen3-Next, DeltaNet)
build on. The registry's stage "kernel" replaces the softmax: `engine` hands such a variant the head's q, k, V and
mask (`head`), and the stage table shows its rows (`rows`) in place of the softmax's (`replaces`).
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import VECTOR, Read, Schema, Sizes, mapping_keys
from attncli.core.variants.shown import Narrated, Say, StageRow

FEATURE_MAPS = ("elu+1", "relu", "identity")


class KernelHead(NamedTuple):
    """One head's stages under a "kernel" variant (linear attention or retention)."""

    phi_q: np.ndarray | None  # (L_q, d_k) φ(Q); None under retention
    phi_k: np.ndarray | None  # (L_k, d_k) φ(K)
    similarities: np.ndarray  # (L_q, L_k) φ(Q)·φ(K)ᵀ (linear), Q·Kᵀ / s (retention); 0 where the mask hides a key
    decay: np.ndarray | None  # (L_q, L_k) retention's D, γ^(i−j) for j ≤ i; None under linear attention
    row_sums: np.ndarray | None  # (L_q,) Σ_j of the similarities (linear attention's normaliser); None under retention
    weights: np.ndarray  # (L_q, L_k) similarities / row sum (linear), similarities ⊙ D (retention): out = weights·V
    softmax: np.ndarray  # (L_q, L_k) softmax(mask(Q·Kᵀ / s)) of the same q and k: what the softmax would have weighted, for contrast
    transform: np.ndarray | None = None  # (L_k, L_k) the delta rule's T (core.variants.delta): weights = similarities·T; None otherwise
    channel_decay: np.ndarray | None = None  # (L_k, d_k) KDA's α: token t's decay of each key channel of the delta rule's state; None without


def feature(name: str, x: np.ndarray) -> np.ndarray:
    """φ(x) elementwise: elu(x) + 1 (Katharopoulos et al. eq. 7), max(x, 0), or x itself."""
    if name == "elu+1":
        elu: np.ndarray = np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))
        return elu
    if name == "relu":
        relu: np.ndarray = np.maximum(x, 0.0)
        return relu
    return np.array(x, dtype=np.float64)


def softmax_rows(logits: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """(L_q, L_k) the stable softmax of each row over its visible cells, 0 elsewhere (the contrast column)."""
    hidden = np.where(visible, logits, -np.inf)
    top = np.max(hidden, axis=1, keepdims=True)
    exp = np.where(visible, np.exp(hidden - top), 0.0)
    out: np.ndarray = exp / exp.sum(axis=1, keepdims=True)
    return out


@record
class LinearAttention:
    """out_i = Σ_j φ(q_i)·φ(k_j) v_j / Σ_j φ(q_i)·φ(k_j): softmax's e^(q·k) replaced by a product of features."""

    key: ClassVar[str] = "linear_attention"
    stage: ClassVar[str] = "kernel"
    json_key: ClassVar[str] = "linear_attention"
    json_slot: ClassVar[int] = 10
    json_absent: ClassVar[None] = None
    replaces: ClassVar[tuple[str, ...]] = ("scores", "scaled", "masked", "exp", "weights")  # the softmax's rows, shown as this variant's
    rows: ClassVar[tuple[StageRow, ...]]

    feature_map: str = "elu+1"

    def head(self, h: int, q: np.ndarray, k: np.ndarray, V: np.ndarray, visible: np.ndarray, divisor: float, r: Any) -> KernelHead:
        """Every stage of one head (the divisor cancels in the ratio, so it is not applied); r rounds each (as by hand, or not at all)."""
        phi_q = r(feature(self.feature_map, q))  # (L_q, d_k)
        phi_k = r(feature(self.feature_map, k))  # (L_k, d_k)
        similarities = r(np.where(visible, phi_q @ phi_k.T, 0.0))  # (L_q, d_k) @ (d_k, L_k) -> (L_q, L_k), 0 where hidden
        row_sums = r(similarities.sum(axis=1))  # (L_q,)
        with np.errstate(all="ignore"):
            weights = r(similarities / row_sums[:, None])  # (L_q, L_k) each row sums to 1 (nan where a row sums to 0)
        return KernelHead(phi_q, phi_k, similarities, None, row_sums, weights, softmax_rows(q @ k.T / divisor, visible))

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """The query's features, each key's similarity, the row sum and the weights, beside the softmax's weights of the same row."""
        w, p = say.w, say.p
        t, i = expl.head.kernel, expl.position - 1  # KernelHead (whole), the query's row
        phi = r"\varphi" if w.tex else "φ"
        lines: list[tuple[str, ...]] = [(f"{phi}({w.text('q')})", say.vec(t.phi_q[i]))]
        for key in say.shown_keys():
            j = key.position - 1
            if key.masked:
                lines.append((w.label(key.label), w.text("hidden: no similarity, weight 0"), ":"))
                continue
            similarity = float(t.similarities[i, j])
            lines.append((w.label(key.label), f"{phi}({w.text('k')}) = {say.vec(t.phi_k[j])}, {phi}({w.text('q')})·{phi}({w.text('k')}) = "
                          f"{w.num(similarity, p)}, {w.alpha} = {w.frac(w.num(similarity, p), w.num(float(t.row_sums[i]), p))} "
                          f"{say.relation(say.shown(similarity) / say.shown(float(t.row_sums[i])), key.weight, name=f'α({key.label})')} "
                          f"{w.num(key.weight, p, whole=False)} ({w.text('softmax')}: {w.num(float(t.softmax[i, j]), p, whole=False)})", ":"))
        lines.append((w.sigma, w.num(float(t.row_sums[i]), p)))
        notes = [
            f"No exponential and no maximum: each key's weight is its similarity φ(q)·φ(k) (φ = {self.feature_map}, never negative "
            "for elu+1 and relu) over the row's sum of them. The softmax of the same scores q·k / s, shown in brackets, would have "
            "sharpened the larger scores exponentially; these weights follow the similarities linearly and are flatter.",
            "Why models do it (linear attention, and the hybrids that build on it: Qwen3-Next, DeltaNet): without the softmax the sum "
            "can be regrouped, φ(q)·Σ_j φ(k_j)ᵀ v_j, so a causal model carries one state S = Σ_j φ(k_j)ᵀ v_j of d_k × d_v numbers "
            "(and z = Σ_j φ(k_j)) from token to token instead of a KV cache that grows by a key and a value per token: "
            "constant memory and time per generated token.",
        ]
        formula = (rf"\alpha_j = \frac{{{phi}(q)\cdot{phi}(k_j)}}{{\sum_l {phi}(q)\cdot{phi}(k_l)}}" if w.tex
                   else "α_j = φ(q)·φ(k_j) / Σ_l φ(q)·φ(k_l)")  # fmt: skip
        return Narrated("Linear attention instead of the softmax", formula, lines, notes)

    def describe(self) -> str:
        return f"linear attention (no softmax): φ(q)·φ(k) / Σ φ(q)·φ(k), φ = {self.feature_map}"

    def as_json(self) -> dict[str, object]:
        return {"feature_map": self.feature_map}

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        "type": "object",
        "additionalProperties": False,
        "description": "Attention without softmax (Katharopoulos et al. 2020): out_i = Σ_j φ(q_i)·φ(k_j) v_j / Σ_j φ(q_i)·φ(k_j) over "
        "the keys the mask lets query i see (causal with mask: causal). The scale cancels in the ratio. Not with retention, "
        "soft-capping, a bias, ALiBi, learned sinks or MLA.",
        "properties": {"feature_map": {"enum": ["elu+1", "relu", "identity"], "default": "elu+1", "description": "φ, elementwise."}},
    }
    schema_after: ClassVar[str] = "cache"

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> LinearAttention:
        """`linear_attention: {feature_map: elu+1 | relu | identity}`, alone among the variants that change a softmax."""
        refuse_beside_softmax(cls, read)
        if read.form != "mapping":
            raise read.error(read.found(), "{feature_map: elu+1 | relu | identity}")
        items = read.mapping(mapping_keys(cls.schema))
        name = "elu+1"
        if "feature_map" in items:
            item = items["feature_map"]
            name = item.text if item.form in ("plain", "quoted") else ""
            if name not in FEATURE_MAPS:
                raise item.error(item.found(), "elu+1, relu or identity")
        return cls(name)


@record
class Retention:
    """out = (Q·Kᵀ / s ⊙ D)·V with D_ij = γ_h^(i−j) for j ≤ i: no softmax, no normaliser, older keys decayed."""

    key: ClassVar[str] = "retention"
    stage: ClassVar[str] = "kernel"
    json_key: ClassVar[str] = "retention"
    json_slot: ClassVar[int] = 11
    json_absent: ClassVar[None] = None
    replaces: ClassVar[tuple[str, ...]] = ("scores", "scaled", "masked", "exp", "weights")
    rows: ClassVar[tuple[StageRow, ...]]

    gammas: tuple[float, ...]  # one decay per query head, head 1 first

    def gamma(self, h: int) -> float:
        return self.gammas[h - 1]

    def decay(self, h: int, L_q: int, L_k: int) -> np.ndarray:
        """(L_q, L_k) D_ij = γ^(i−j) for j ≤ i, else 0 (query i at position i + L_k − L_q, as the keys' last ones)."""
        i = np.arange(L_q)[:, None] + (L_k - L_q)
        distance = i - np.arange(L_k)[None, :]  # (L_q, L_k)
        return np.where(distance >= 0, self.gamma(h) ** np.maximum(distance, 0), 0.0)

    def head(self, h: int, q: np.ndarray, k: np.ndarray, V: np.ndarray, visible: np.ndarray, divisor: float, r: Any) -> KernelHead:
        """Every stage of head h (from 1); r rounds each."""
        scores = q @ k.T / divisor  # (L_q, d_k) @ (d_k, L_k) -> (L_q, L_k)
        similarities = r(np.where(visible, scores, 0.0))  # (L_q, L_k)
        decay = r(self.decay(h, *similarities.shape))  # (L_q, L_k)
        weights = r(similarities * decay)  # (L_q, L_k) the retention scores
        return KernelHead(None, None, similarities, decay, None, weights, softmax_rows(scores, visible))

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """Each key's score times its decay γ^(i−j), beside the softmax's weight of the same key."""
        w, p = say.w, say.p
        t, i, h = expl.head.kernel, expl.position - 1, expl.head.head
        gamma = self.gamma(h)
        lines: list[tuple[str, ...]] = []
        for key in say.shown_keys():
            j = key.position - 1
            if key.masked:
                lines.append((w.label(key.label), w.text("hidden: weight 0"), ":"))
                continue
            score, decay = float(t.similarities[i, j]), float(t.decay[i, j])
            reader = say.shown(score) * say.shown(decay)
            lines.append((w.label(key.label), f"{w.num(score, p)} {w.times} {w.num(decay, p, whole=False)} "
                          f"{say.relation(reader, key.weight, name=f'the retention score of {key.label}')} {w.num(key.weight, p)} "
                          f"({w.text('softmax')}: {w.num(float(t.softmax[i, j]), p, whole=False)})", ":"))
        total = float(np.sum(t.weights[i]))
        notes = [
            f"Head {h} decays each key by γ = {gamma:g} per position back (D = γ^(i−j), 0 for later keys): no exponential, "
            f"no division by a sum, so the row need not sum to 1 (here {say.number(total)}) and a negative score stays negative. "
            "The softmax of the same scores, in brackets, would have made every weight positive and the row sum to 1.",
            "Why models do it (RetNet, and the decaying states of the linear-attention hybrids such as Qwen3-Next and DeltaNet): the "
            "same numbers come from a recurrent state S_t = γ·S_{t−1} + k_tᵀ v_t, out_t = q_t·S_t, of d_k × d_v numbers, "
            "instead of a KV cache that grows by a key and a value per token; γ lets old tokens fade.",
        ]
        formula = (r"\text{retention}_j = \text{score}_j \cdot \gamma^{i-j}" if w.tex else "retention_j = score_j · γ^(i−j)") + (
            rf", \quad \gamma = {gamma:g}" if w.tex else f", γ = {gamma:g}")
        return Narrated("Retention instead of the softmax", formula, lines, notes)

    def describe(self) -> str:
        values = ", ".join(f"{g:g}" for g in self.gammas)
        return f"retention (no softmax): (Q·Kᵀ ⊙ D)·V, D_ij = γ^(i−j) for j ≤ i, γ = [{values}]"

    def as_json(self) -> dict[str, object]:
        return {"gamma": list(self.gammas)}

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["gamma"],
        "description": "Retention (RetNet, Sun et al. 2023), parallel form: out = (Q·Kᵀ / scale ⊙ D)·V, D_ij = γ^(i−j) for j ≤ i, "
        "0 above the diagonal; no softmax, no normaliser. Not with linear_attention, soft-capping, a bias, ALiBi, sinks or MLA.",
        "properties": {
            "gamma": {"anyOf": [{"type": "number", "exclusiveMinimum": 0, "maximum": 1}, VECTOR],
                      "description": "The decay γ in (0, 1]: one for every head, or one per head."},
        },
    }  # fmt: skip
    schema_after: ClassVar[str] = "linear_attention"

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> Retention:
        """`retention: {gamma: γ}`: one decay for every head or one per head, alone among the variants that change a softmax."""
        return cls(per_head_fraction(cls, read, sizes, key="gamma", symbol="γ", what="decays"))


def per_head_fraction(kind: Any, read: Read, sizes: Sizes, *, key: str, symbol: str, what: str) -> tuple[float, ...]:
    """`{key: x}` of a kernel variant (retention's γ, the delta rule's β): one number in (0, 1] for every head, or one per head."""
    refuse_beside_softmax(kind, read)
    heads = sizes.heads
    expected = f"{{{key}: {symbol}}}, {symbol} in (0, 1]: one number for every head, or {heads}, one per head"
    if read.form != "mapping" or key not in read.keys_given():
        raise read.error(read.found(), expected)
    item = read.mapping(mapping_keys(kind.schema))[key]
    if item.form == "plain" and item.kind != "bool":
        values = [item.number()] * heads
    elif item.form == "list" and all(x.form == "plain" and x.kind != "bool" for x in item.items()):
        values = [x.number() for x in item.items()]
        if len(values) != heads:
            raise item.error(f"{len(values)} {what} for heads = {heads}", expected)
    else:
        raise item.error(item.found(), expected)
    if not all(0 < value <= 1 for value in values):
        raise item.error(f"found {', '.join(f'{v:g}' for v in values)}", expected)
    return tuple(float(value) for value in values)


def refuse_beside_softmax(kind: type, read: Read) -> None:
    """The one rule of attention without softmax: no other such variant and no `softmax_only` one (a cap, a bias, ALiBi, sinks, MLA) beside it."""
    beside = [other.key for other in read.given_variants() if other is not kind and other.stage == "kernel"]
    beside += [other.key for other in read.given_variants() if getattr(other, "softmax_only", False)]
    if beside:
        key = read.path
        raise read.error(f"{key} beside {beside[0]}", f"{key} alone: {beside[0]} changes a softmax, and {key} has none")


def recurrent(variant: LinearAttention | Retention, h: int, q: np.ndarray, k: np.ndarray, V: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """The causal recurrent form, token by token: the states S_t (d_k, d_v) and the outputs (L, d_v).

    Linear attention: S_t = S_{t−1} + φ(k_t)ᵀ v_t, z_t = z_{t−1} + φ(k_t), out_t = φ(q_t)·S_t / φ(q_t)·z_t.
    Retention: S_t = γ S_{t−1} + k_tᵀ v_t, out_t = q_t·S_t (q already divided by the scale).
    """
    states, outputs = [], []
    S = np.zeros((k.shape[1], V.shape[1]))  # (d_k, d_v)
    z = np.zeros(k.shape[1])  # (d_k,)
    for t in range(k.shape[0]):
        if isinstance(variant, LinearAttention):
            phi_q, phi_k = feature(variant.feature_map, q[t]), feature(variant.feature_map, k[t])  # (d_k,) each
            S = S + np.outer(phi_k, V[t])  # (d_k, d_v)
            z = z + phi_k
            outputs.append(phi_q @ S / (phi_q @ z))  # (d_v,)
        else:
            S = variant.gamma(h) * S + np.outer(k[t], V[t])  # (d_k, d_v)
            outputs.append(q[t] @ S)
        states.append(S)
    return states, np.array(outputs)


def refuse_softmax_only(s: Any, name: str, what: str) -> None:
    """An AttnError when scenario s has no softmax (linear attention, retention) and option `name` needs one."""
    from attncli.errors import AttnError, option

    kernel = next((variant for variant in s.variants if variant.stage == "kernel"), None)  # linear attention, retention, the delta rule
    if kernel is not None:
        raise AttnError(f"{what} needs a softmax, and {kernel.key} has none", key=option(name),
                        expected=f"a scenario with a softmax, or no {option(name)}")  # fmt: skip


# -- how it is shown -----------------------------------------------------------------------------------------


def _kernel(attribute: str, *, retention: bool = False) -> Any:
    """A KernelHead's field, for the variant's own heads only (retention's have a decay mask, linear attention's row sums)."""
    return lambda h: None if h.kernel is None or (h.kernel.decay if retention else h.kernel.row_sums) is None else getattr(h.kernel, attribute)


def _phi(letter: str) -> Any:
    def formula(n: Any, s: Any, h: Any) -> str:
        name = linear.feature_map if (linear := s.variant(LinearAttention)) is not None else "elu+1"
        return (rf"\varphi({n(letter)})" if n.tex else f"φ({n(letter)})") + (rf" \quad \text{{({name})}}" if n.tex else f", φ = {name}")
    return formula


def _similarities(n: Any, s: Any, h: Any) -> str:
    if s.variant(Retention) is not None:
        scaled = f"{n('Q')}{n.times()}{n('K', transpose=True)}" + ("" if s.scale.mode == "none" else f" / {s.scale.divisor:g}")
        return scaled + (r" \quad (0 \text{ where hidden})" if n.tex else ", 0 where hidden")
    phi = r"\varphi" if n.tex else "φ"
    return f"{phi}({n('Q')}){n.times()}{phi}({n('K')})" + (r"^{\top}" if n.tex else "ᵀ") + (r" \quad (0 \text{ where hidden})" if n.tex else ", 0 where hidden")


def _row_sums(n: Any, s: Any, h: Any) -> str:
    return r"\Sigma_i = \textstyle\sum_j \varphi(q_i)\cdot\varphi(k_j)" if n.tex else "Σ_i = Σ_j φ(q_i)·φ(k_j), over the keys query i sees"


def _row_sums_column(h: Any) -> np.ndarray | None:
    sums = _kernel("row_sums")(h)
    return None if sums is None else sums[:, None]


def _linear_weights(n: Any, s: Any, h: Any) -> str:
    return (rf"{n('A')} = \text{{similarities}} / \Sigma" if n.tex else f"{n('A')} = similarities / Σ, each row over its sum (no exp)")


def _decay(n: Any, s: Any, h: Any) -> str:
    gamma = retention.gamma(h.head if h is not None else 1) if (retention := s.variant(Retention)) is not None else 0.0
    if n.tex:
        return rf"D_{{ij}} = \gamma^{{i-j}} \; (j \le i), \quad \gamma = {gamma:g}"
    return f"D_ij = γ^(i−j) for j ≤ i, 0 above, γ = {gamma:g}"


def _retention(n: Any, s: Any, h: Any) -> str:
    return rf"{n('A')} = \text{{similarities}} \odot D" if n.tex else f"{n('A')} = similarities ⊙ D (no softmax, no normaliser)"


def softmax_contrast(n: Any, s: Any, h: Any) -> str:
    """The formula of the softmax weights a kernel variant shows beside its own, for contrast."""
    if n.tex:
        return r"\operatorname{softmax}(\operatorname{mask}(Q K^\top / s)) \quad \text{(not used: for contrast)}"
    return "softmax(mask(Q·Kᵀ / s)), not used: what softmax would have weighted"


LinearAttention.rows = (
    StageRow("q", "phi_Q", "Query features φ(Q)", _phi("Q"), _kernel("phi_q"), "queries", "q", after="Q_rope"),
    StageRow("k", "phi_K", "Key features φ(K)", _phi("K"), _kernel("phi_k"), "keys", "k", after="phi_Q", kv=True),
    StageRow("scores", "similarities", "Similarities φ(q)·φ(k)", _similarities, _kernel("similarities"), "queries", "keys",
             after="phi_K", main=True),
    StageRow("weights", "row_sums", "Row sums Σ_j φ(q)·φ(k)", _row_sums, _row_sums_column, "queries", "one", after="similarities"),
    StageRow("weights", "linear_weights", "Weights: similarity / row sum", _linear_weights, _kernel("weights"), "queries", "keys",
             after="row_sums", main=True),
    StageRow("weights", "softmax_contrast", "Softmax weights of the same q, k (not used, for contrast)", softmax_contrast,
             _kernel("softmax"), "queries", "keys", after="linear_weights"),
)  # fmt: skip

Retention.rows = (
    StageRow("scores", "retention_scores", "Scores q·k / s (0 where hidden)", _similarities,
             _kernel("similarities", retention=True), "queries", "keys",
             after="softmax_contrast", main=True),
    StageRow("decay", "decay", "Decay mask D", _decay, _kernel("decay", retention=True), "queries", "keys", after="retention_scores"),
    StageRow("weights", "retention", "Retention scores: scores ⊙ D", _retention,
             _kernel("weights", retention=True), "queries", "keys",
             after="decay", main=True),
    StageRow("weights", "retention_softmax", "Softmax weights of the same q, k (not used, for contrast)", softmax_contrast,
             _kernel("softmax", retention=True), "queries", "keys",
             after="retention"),
)  # fmt: skip
