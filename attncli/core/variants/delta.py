"""The delta rule (DeltaNet; the core of Gated DeltaNet in Qwen3-Next): attention without softmax, a state written by correction.

Yang et al., "Parallelizing Linear Transformers with the Delta Rule over Sequence Length" (NeurIPS 2024), eq. 2 and the
UT form of §3: with q̂ and k̂ L2-normalised, a state S (d_k × d_v) from 0, token by token
    S_t = S_{t−1} + k̂_t ⊗ β(v_t − S_{t−1}ᵀ k̂_t),    out_t = S_tᵀ q̂_t / s
Linear attention adds k ⊗ v to its state whatever the state already holds for k; the delta rule first reads what S
recalls for k̂_t and writes only β times the error v_t − recalled: a memory that corrects itself. Unrolled, the output is
still weights·V: out = (Q̂·K̂ᵀ / s ⊙ M)·T·V with M the causal mask and T = (I + β·tril₋₁(K̂·K̂ᵀ))⁻¹·β (tril₋₁: below the
diagonal), so the stage table shows T and the weights A = similarities·T, and explain tells the step of the state for one
token. Gated DeltaNet multiplies S by a decay e^g before each step. Kimi Delta Attention (KDA, Kimi Linear 2025) decays
each key channel of S at its own rate first, `decay` α_t in (0, 1]^{d_k}:
    S_t = (I − β k̂_t k̂_tᵀ)·Diag(α_t)·S_{t−1} + β k̂_t v_tᵀ,    i.e. S′ = Diag(α_t)·S_{t−1}, S_t = S′ + k̂_t ⊗ β(v_t − S′ᵀk̂_t)
Unrolled, with γ_{t←j} = α_{j+1} ⊙ … ⊙ α_t the decay from token j to token t (1 when j = t), the similarities become
q̂_tᵀ·Diag(γ_{t←j})·k̂_j / s and T = (I + β·tril₋₁(M))⁻¹·β with M_tj = k̂_tᵀ·Diag(γ_{t←j})·k̂_j: with α = 1 the plain rule.
The module also holds how it is shown (core.variants.shown): its rows and its step.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import MATRICES, MATRIX, VECTOR, Read, Schema, Sizes, frozen, mapping_keys
from attncli.core.variants.linear import KernelHead, per_head_fraction, softmax_contrast, softmax_rows
from attncli.core.variants.shown import Narrated, Say, StageRow
from attncli.errors import AttnError


def unit_rows(x: np.ndarray) -> np.ndarray:
    """(L, d) each row divided by its length (L2); a row of zeros is refused by the caller."""
    out: np.ndarray = x / np.sqrt((x * x).sum(axis=1, keepdims=True))
    return out


@record
class DeltaRule:
    """out_t = S_tᵀ q̂_t / s with S_t = S_{t−1} + k̂_t ⊗ β(v_t − S_{t−1}ᵀ k̂_t): no softmax; a state corrected by each token."""

    key: ClassVar[str] = "delta_rule"
    stage: ClassVar[str] = "kernel"
    json_key: ClassVar[str] = "delta_rule"
    json_slot: ClassVar[int] = 16
    json_absent: ClassVar[None] = None
    replaces: ClassVar[tuple[str, ...]] = ("scores", "scaled", "masked", "exp", "weights")  # the softmax's rows, shown as this variant's
    rows: ClassVar[tuple[StageRow, ...]]

    betas: tuple[float, ...]  # the writing strength β in (0, 1], one per query head, head 1 first
    decays: tuple[np.ndarray, ...] | None = None  # KDA: per query head, (L, d_k) α_t in (0, 1] per token and key channel; None: no decay

    def beta(self, h: int) -> float:
        return self.betas[h - 1]

    def decay(self, h: int) -> np.ndarray | None:
        """(L, d_k) head h's (from 1) decay α of each token and key channel, or None (the ungated rule)."""
        return None if self.decays is None else self.decays[h - 1]

    def head(self, h: int, q: np.ndarray, k: np.ndarray, V: np.ndarray, visible: np.ndarray, divisor: float, r: Any) -> KernelHead:
        """Every stage of head h (from 1), the unrolled form; r rounds each. The keys must be the queries' own, in order, causal."""
        L = k.shape[0]
        if q.shape[0] != L or not np.array_equal(visible, np.tril(np.ones((L, L), dtype=bool))):
            raise AttnError("the delta rule reads the keys in order, each query after its own key: a plain causal mask over the "
                            "sentence's own keys", key=self.key, expected="mask: causal, no window, sinks, padding, cache or context")  # fmt: skip
        for name, x in (("q", q), ("k", k)):
            if not np.all((x * x).sum(axis=1) > 0):
                raise AttnError(f"head {h}: a {name} of zeros has no direction to normalise", key=self.key, expected="q and k rows that are not all 0")
        q_hat, k_hat = r(unit_rows(q)), r(unit_rows(k))  # (L, d_k) each
        alpha = self.decay(h)
        if alpha is None:
            scores = q_hat @ k_hat.T / divisor  # (L, d_k) @ (d_k, L) -> (L, L)
            below = np.tril(k_hat @ k_hat.T, -1)  # (L, L) k̂_t·k̂_j for j < t
        else:  # KDA: each pair through the decay between them, channel by channel
            gamma = decay_between(alpha)  # (L, L, d_k) γ_{t←j}
            scores = np.einsum("tc,tjc,jc->tj", q_hat, gamma, k_hat) / divisor  # (L, L) q̂_tᵀ·Diag(γ_{t←j})·k̂_j / s
            below = np.tril(np.einsum("tc,tjc,jc->tj", k_hat, gamma, k_hat), -1)  # (L, L) k̂_tᵀ·Diag(γ_{t←j})·k̂_j for j < t
        similarities = r(np.where(visible, scores, 0.0))  # (L, L)
        beta = self.beta(h)
        transform = r(np.linalg.solve(np.eye(L) + beta * below, beta * np.eye(L)))  # (L, L) T = (I + β·tril₋₁(M))⁻¹·β
        weights = r(similarities @ transform)  # (L, L) out = weights·V
        return KernelHead(q_hat, k_hat, similarities, None, None, weights, softmax_rows(q @ k.T / divisor, visible), transform, alpha)

    def state_before(self, h: int, k_hat: np.ndarray, V: np.ndarray, t: int) -> np.ndarray:
        """(d_k, d_v) S_{t−1}, the state before token t (from 0), by the recurrence."""
        S = np.zeros((k_hat.shape[1], V.shape[1]))  # (d_k, d_v)
        for j in range(t):
            S = self.step(h, S, k_hat[j], V[j], j)
        return S

    def recurrent(self, h: int, q_hat: np.ndarray, k_hat: np.ndarray, V: np.ndarray, divisor: float) -> tuple[list[np.ndarray], np.ndarray]:
        """The recurrent form of head h, token by token (decode's): the states S_t (d_k, d_v) and the outputs S_tᵀq̂_t / s (L, d_v)."""
        S = np.zeros((k_hat.shape[1], V.shape[1]))  # (d_k, d_v)
        states, outputs = [], []
        for t in range(k_hat.shape[0]):
            S = self.step(h, S, k_hat[t], V[t], t)
            states.append(S)
            outputs.append(S.T @ q_hat[t] / divisor)  # (d_v,)
        return states, np.array(outputs)

    def decayed(self, h: int, S: np.ndarray, t: int) -> np.ndarray:
        """(d_k, d_v) Diag(α_t)·S: each key channel's row of the state × token t's (from 0) decay (KDA); S itself without one."""
        alpha = self.decay(h)
        return S if alpha is None else S * alpha[t][:, None]

    def step(self, h: int, S: np.ndarray, k_hat: np.ndarray, v: np.ndarray, t: int) -> np.ndarray:
        """(d_k, d_v) S_t from S_{t−1} for token t (from 0): decayed (KDA), then k̂ ⊗ β(v − S′ᵀk̂) written: the decode form."""
        before = self.decayed(h, S, t)
        return before + np.outer(k_hat, self.beta(h) * (v - before.T @ k_hat))

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """The state's step for the explained token: what S recalls for k̂, the correction written, the output read by q̂."""
        w, p = say.w, say.p
        t, i, h = expl.head.kernel, expl.position - 1, expl.head.head
        V, beta, divisor = expl.head.V, self.beta(h), expl.scenario.scale.divisor
        before = self.decayed(h, self.state_before(h, t.phi_k, V, i), i)  # (d_k, d_v) S_{t−1}, decayed by α_t under KDA
        recalled = before.T @ t.phi_k[i]  # (d_v,) S_{t−1}ᵀ k̂_t
        delta = beta * (V[i] - recalled)  # (d_v,)
        after = before + np.outer(t.phi_k[i], delta)  # (d_k, d_v)
        out = after.T @ t.phi_q[i] / divisor  # (d_v,)

        def hat(x: str) -> str:
            return rf"\hat{{{x}}}" if w.tex else f"{x}̂"

        top = r"^{\top}" if w.tex else "ᵀ"
        alpha = self.decay(h)
        lines: list[tuple[str, ...]] = [
            (hat("q"), say.vec(t.phi_q[i])),
            (hat("k"), say.vec(t.phi_k[i])),
            *([] if alpha is None else [(w.text("decay α of S's rows"), say.vec(alpha[i]))]),  # KDA: S′ = Diag(α_t)·S_{t−1}
            (w.text("recalled"), f"S{top}{hat('k')} = {say.vec(recalled)}"),
            (w.text("written"), f"{w.num(beta, p)} {w.times} ({say.vec(V[i])} {w.minus} {w.text('recalled')}) = {say.vec(delta)}"),
            (w.text("output"), f"(S + {hat('k')} {w.times} {w.text('written')}){top}{hat('q')} / {divisor:g} = {say.vec(out)}"),
        ]
        for key in say.shown_keys():
            j = key.position - 1
            if key.masked:
                lines.append((w.label(key.label), w.text("later: weight 0"), ":"))
                continue
            lines.append((w.label(key.label), f"{w.text('similarity')} {w.num(float(t.similarities[i, j]), p)}, {w.alpha} = "
                          f"{w.num(key.weight, p, whole=False)} ({w.text('softmax')}: {w.num(float(t.softmax[i, j]), p, whole=False)})", ":"))
        notes = [
            f"Before token {i + 1} the state S holds what tokens 1 to {i} wrote; it recalls for k̂ what it has stored under that "
            f"direction, and writes only β = {beta:g} times the error v − recalled: a key seen before is corrected, not added twice. "
            "The output reads the new state with q̂; unrolled over the tokens it is the weights α times V (shown next), and α need "
            "not be positive nor sum to 1.",
            "Why models do it (DeltaNet; Gated DeltaNet in Qwen3-Next, Kimi Linear): a linear-attention state of d_k × d_v numbers "
            "instead of a growing KV cache, which overwrites what it holds for a key instead of piling every value onto it.",
        ]
        formula = (r"S_t = S_{t-1} + \hat{k}_t \otimes \beta(v_t - S_{t-1}^{\top}\hat{k}_t), \quad o_t = S_t^{\top}\hat{q}_t / s"
                   if w.tex else "S_t = S_{t−1} + k̂_t ⊗ β(v_t − S_{t−1}ᵀk̂_t), o_t = S_tᵀq̂_t / s")  # fmt: skip
        if alpha is not None:
            formula = (r"S' = \mathrm{Diag}(\alpha_t) S_{t-1}, \quad S_t = S' + \hat{k}_t \otimes \beta(v_t - S'^{\top}\hat{k}_t), \quad "
                       r"o_t = S_t^{\top}\hat{q}_t / s" if w.tex else
                       "S′ = Diag(α_t)·S_{t−1}, S_t = S′ + k̂_t ⊗ β(v_t − S′ᵀk̂_t), o_t = S_tᵀq̂_t / s")  # fmt: skip
            notes.insert(1, "Kimi Delta Attention decays the state first, each key channel c at its own rate α_c (per token): a "
                         "channel with α near 1 keeps what it holds for long, one near 0 forgets it at once; the weights then read "
                         "each earlier token through the decay between it and this one.")  # fmt: skip
            return Narrated("Kimi Delta Attention instead of the softmax", formula, lines, notes)
        return Narrated("The delta rule instead of the softmax", formula, lines, notes)

    def describe(self) -> str:
        values = ", ".join(f"{b:g}" for b in self.betas)
        if self.decays is not None:
            return (f"Kimi Delta Attention (no softmax): S′ = Diag(α_t)·S_(t−1), S_t = S′ + k̂_t ⊗ β(v_t − S′ᵀk̂_t), out_t = S_tᵀq̂_t / s, "
                    f"β = [{values}], α per key channel")  # fmt: skip
        return f"the delta rule (no softmax): S_t = S_(t−1) + k̂_t ⊗ β(v_t − S_(t−1)ᵀk̂_t), out_t = S_tᵀq̂_t / s, β = [{values}]"

    def as_json(self) -> dict[str, object]:
        return {"beta": list(self.betas), "decay": None if self.decays is None else [alpha.tolist() for alpha in self.decays]}

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["beta"],
        "description": "The delta rule (DeltaNet, Yang et al. 2024): no softmax; q and k L2-normalised, a state S_t = S_{t−1} + "
        "k̂_t ⊗ β(v_t − S_{t−1}ᵀk̂_t), out_t = S_tᵀq̂_t / scale. Needs mask: causal. Not with linear_attention, retention, "
        "soft-capping, a bias, ALiBi, sinks or MLA.",
        "properties": {
            "beta": {"anyOf": [{"type": "number", "exclusiveMinimum": 0, "maximum": 1}, VECTOR],
                     "description": "The writing strength β in (0, 1]: one for every head, or one per head."},
            "decay": {"anyOf": [VECTOR, MATRIX, MATRICES],
                      "description": "Kimi Delta Attention's decay α in (0, 1] of each key channel of the state before each token: "
                      "d_k numbers (every token and head), an L × d_k matrix (one row per token), or one such matrix per head."},
        },
    }  # fmt: skip
    schema_after: ClassVar[str] = "retention"

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> DeltaRule:
        """`delta_rule: {beta: β, decay: α}`: one strength for every head or one per head, alone among the variants that change a
        softmax; KDA's decay per key channel optional."""
        betas = per_head_fraction(cls, read, sizes, key="beta", symbol="β", what="strengths")
        given = read.mapping(mapping_keys(cls.schema)).get("decay")
        return cls(betas, None if given is None else channel_decays(given, sizes))


def channel_decays(read: Read, sizes: Sizes) -> tuple[np.ndarray, ...]:
    """KDA's `decay`, one (L, d_k) array per head: d_k numbers for every token and head, L rows of them, or H such matrices."""
    H, L, d_k = sizes.heads, sizes.L_q, sizes.d_k
    expected = f"numbers in (0, 1]: {d_k} (one per key channel), a {L} × {d_k} matrix (a row per token) or {H} such matrices (one per head)"
    if read.form != "list" or not read.items():
        raise read.error(read.found(), expected)
    first = read.items()[0]
    if first.form == "plain":
        vector = read.vector()
        if vector.shape != (d_k,):
            raise read.error(f"{vector.shape[0]} decays for d_k = {d_k}", expected)
        per_head = [np.tile(vector, (L, 1))] * H
    elif first.form == "list" and first.items() and first.items()[0].form == "plain":
        matrix = read.matrix()
        if matrix.shape != (L, d_k):
            raise read.error(f"a {matrix.shape[0]} × {matrix.shape[1]} matrix", expected)
        per_head = [matrix] * H
    else:
        matrices = read.matrices()
        if matrices is None or len(matrices) != H or any(m.shape != (L, d_k) for m in matrices):
            raise read.error("matrices of other sizes" if matrices is not None else read.found(), expected)
        per_head = matrices
    if not all(np.all((m > 0) & (m <= 1)) for m in per_head):
        raise read.error("a decay outside (0, 1]", expected)
    return tuple(frozen(np.array(m, dtype=np.float64)) for m in per_head)


def decay_between(alpha: np.ndarray) -> np.ndarray:
    """(L, L, d_k) γ_{t←j} = α_{j+1} ⊙ … ⊙ α_t for j ≤ t (1 when j = t), each product taken in order; 0 for j > t."""
    L, d_k = alpha.shape
    gamma = np.zeros((L, L, d_k))
    for t in range(L):
        gamma[t, t] = 1.0
        for j in range(t - 1, -1, -1):
            gamma[t, j] = gamma[t, j + 1] * alpha[j + 1]
    return gamma


def _delta(attribute: str) -> Any:
    """A KernelHead's field, for the delta rule's heads only (they have a transform T)."""
    return lambda h: None if h.kernel is None or h.kernel.transform is None else getattr(h.kernel, attribute)


def _hat(letter: str) -> Any:
    return lambda n, s, h: (rf"\hat{{{n(letter)}}} = {n(letter)} / \lVert {n(letter)} \rVert" if n.tex else f"{n(letter)} / ‖{n(letter)}‖, each row")


def _decayed(s: Any) -> bool:
    """Whether the scenario's delta rule decays its state per key channel (KDA)."""
    rule = s.variant(DeltaRule)
    return rule is not None and rule.decays is not None


def _similarities(n: Any, s: Any, h: Any) -> str:
    divided = "" if s.scale.mode == "none" else f" / {s.scale.divisor:g}"
    if _decayed(s):
        return (rf"\hat{{q}}_i^{{\top}} \mathrm{{Diag}}(\gamma_{{i \leftarrow j}}) \hat{{k}}_j{divided}, \quad \gamma_{{i \leftarrow j}} = "
                rf"\alpha_{{j+1}} \odot \cdots \odot \alpha_i" if n.tex else f"q̂ᵢᵀ·Diag(γᵢ←ⱼ)·k̂ⱼ{divided}, γᵢ←ⱼ = α_(j+1) ⊙ … ⊙ αᵢ, 0 for later keys")
    return (rf"\hat{{Q}}\hat{{K}}^{{\top}}{divided} \quad (0 \text{{ for later keys}})" if n.tex else f"Q̂·K̂ᵀ{divided}, 0 for later keys")


def _transform(n: Any, s: Any, h: Any) -> str:
    beta = rule.beta(h.head if h is not None else 1) if (rule := s.variant(DeltaRule)) is not None else 0.0
    if _decayed(s):
        if n.tex:
            return rf"T = (I + \beta\,\mathrm{{tril}}_{{-1}}(M))^{{-1}} \beta, \quad M_{{ij}} = \hat{{k}}_i^{{\top}} \mathrm{{Diag}}(\gamma_{{i \leftarrow j}}) \hat{{k}}_j, \quad \beta = {beta:g}"
        return f"T = (I + β·tril₋₁(M))⁻¹·β, Mᵢⱼ = k̂ᵢᵀ·Diag(γᵢ←ⱼ)·k̂ⱼ, β = {beta:g}"
    if n.tex:
        return rf"T = (I + \beta\,\mathrm{{tril}}_{{-1}}(\hat{{K}}\hat{{K}}^{{\top}}))^{{-1}} \beta, \quad \beta = {beta:g}"
    return f"T = (I + β·tril₋₁(K̂·K̂ᵀ))⁻¹·β, β = {beta:g}"


def _alpha(n: Any, s: Any, h: Any) -> str:
    return r"\alpha_t \in (0, 1]^{d_k}" if n.tex else "αₜ in (0, 1] per key channel: S's row c × αₜ,c before token t writes"


def _weights(n: Any, s: Any, h: Any) -> str:
    return rf"{n('A')} = \text{{similarities}} \cdot T" if n.tex else f"{n('A')} = similarities · T (out = A·V: the delta rule unrolled)"


DeltaRule.rows = (
    StageRow("q", "Q_hat", "Unit queries q̂", _hat("Q"), _delta("phi_q"), "queries", "q", after="phi_K"),
    StageRow("k", "K_hat", "Unit keys k̂", _hat("K"), _delta("phi_k"), "keys", "k", after="Q_hat", kv=True),
    StageRow("delta", "delta_decay", "Decay of each key channel α (Kimi Delta Attention)", _alpha, _delta("channel_decay"), "keys", "k",
             after="K_hat"),
    StageRow("scores", "delta_similarities", "Similarities q̂·k̂ / s (0 for later keys)", _similarities, _delta("similarities"),
             "queries", "keys", after="retention_softmax", main=True),
    StageRow("delta", "delta_transform", "The delta rule's correction T", _transform, _delta("transform"), "keys", "keys",
             after="delta_similarities"),
    StageRow("weights", "delta_weights", "Weights: similarities · T", _weights, _delta("weights"), "queries", "keys",
             after="delta_transform", main=True),
    StageRow("weights", "delta_softmax", "Softmax weights of the same q, k (not used, for contrast)", softmax_contrast, _delta("softmax"),
             "queries", "keys", after="delta_weights"),
)  # fmt: skip
