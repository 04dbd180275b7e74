"""Multi-head latent attention (MLA, DeepSeek-V2 arXiv:2405.04434 §2.1; DeepSeek-V3): keys and values from a small latent.

Each token's keys and values are not projected per head but compressed into one latent
c_KV = RMSNorm(x·W_DKV) of d_c numbers, which every head expands with its own W_UK,h and
W_UV,h. RoPE cannot act on keys made from a cached latent (the rotation would sit between
W_UK and the query), so position lives on a separate, "decoupled" part of d_r dimensions:
one rotated key k_R = RoPE(x·W_KR) per token, shared by all heads, and a rotated query part
q_R,h per head. Per head, the query and the key the scores meet are
    q_h = [q_C,h | RoPE(q_R,h)]      k_h = [c_KV·W_UK,h | RoPE(k_R)]      v_h = c_KV·W_UV,h
so the engine's one attention formula does the rest (`Mla.head_inputs` gives it these). The
queries come from x, or through their own latent c_Q = RMSNorm(x·W_DQ) (V2 and V3 do).

The absorbed form (§2.1.3: "absorb W^UK into W^Q, and W^UV into W^O") computes the same weights
on the latent directly: q_h·k_j = (q_C,h·W_UK,hᵀ)·c_KV,j + RoPE(q_R,h)·RoPE(k_R,j), and
Σ_j w_j v_j = (Σ_j w_j c_KV,j)·W_UV,h. The engine runs that too (`Mla.absorbed_inputs`), so the
two can be compared: only c_KV and k_R need caching, d_c + d_r numbers a token instead of
H·(d_k + d_v). Dimension names:
    L       tokens        d_model  width of an embedding        H    heads
    d_c     latent (kv_lora_rank)   d_cq  query latent (q_lora_rank)
    d_n     per-head part without position (qk_nope_head_dim)   d_r  the decoupled RoPE part (qk_rope_head_dim)
    d_k     d_n + d_r, a query/key in one head                  d_v  a value in one head
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import numpy as np

from attncli.core.records import record
from attncli.core.variants import mla_shown
from attncli.core.variants.keys import MATRICES, MATRIX, Read, Schema, Sizes, frozen, mapping_keys
from attncli.core.variants.positions import Rope
from attncli.core.variants.shown import Narrated, Say, StageRow
from attncli.errors import AttnError

Rounder = Callable[[np.ndarray], np.ndarray]


class Norm(NamedTuple):
    """An RMSNorm: x / sqrt(mean(x²) + eps) · weight."""

    weight: np.ndarray  # (d,)
    eps: float

    def apply(self, x: np.ndarray, key: str = "mla.kv_norm") -> np.ndarray:
        """(L, d) each row divided by its root mean square, times the weight; `key` names the norm when ε = 0 meets a zero row."""
        mean_square = np.mean(x * x, axis=1, keepdims=True)  # (L, 1)
        if self.eps == 0 and not mean_square.all():
            i = int(np.flatnonzero(mean_square == 0)[0])
            raise AttnError(
                f"row {i + 1} of the latent is all zeros and eps = 0, so its RMSNorm would divide 0 by 0",
                key=f"{key}.eps",
                expected="eps > 0 (such as 1e-6), as DeepSeek's RMSNorms use",
            )
        return np.asarray(x / np.sqrt(mean_square + self.eps) * self.weight)  # (L, d)


class Latent(NamedTuple):
    """What every head shares: the latents and the one rotary key (RunResult.mla)."""

    C_Q: np.ndarray | None  # (L_q, d_cq) RMSNorm(X·W_DQ), the queries' latent; None when queries come from X
    D_KV: np.ndarray  # (L_k, d_c) X·W_DKV before its norm
    C_KV: np.ndarray  # (L_k, d_c) the cached latent (after kv_norm, when there is one)
    K_R: np.ndarray  # (L_k, d_r) X·W_KR, the decoupled key part, one per token for all heads
    K_R_rope: np.ndarray  # (L_k, d_r) RoPE(K_R): what the cache holds beside C_KV (= K_R without RoPE)


class MlaHead(NamedTuple):
    """One head's weights of the up-projections and its absorbed form (HeadResult.mla)."""

    W_UK: np.ndarray  # (d_c, d_n) this head's key up-projection
    W_UV: np.ndarray  # (d_c, d_v) this head's value up-projection
    Q_latent: np.ndarray  # (L_q, d_c) q_C·W_UKᵀ: the query carried into the latent's space
    weights: np.ndarray  # (L_q or rows, L_k) the absorbed form's weights
    mixed: np.ndarray  # (L_q, d_c) Σ_j w_ij c_KV,j: the latents mixed by the weights
    output: np.ndarray  # (L_q, d_v) mixed·W_UV
    difference: float  # max |absorbed weight − expanded weight| over the rows kept


@record
class Mla:
    """The latent projections of one MLA layer; the scenario's RoPE (if any) turns only the decoupled part."""

    key: ClassVar[str] = "mla"
    stage: ClassVar[str] = "heads"  # makes each head's q, k and v (the engine asks it instead of W_Q, W_K, W_V)
    json_key: ClassVar[str] = "mla"
    json_slot: ClassVar[int] = 8
    json_absent: ClassVar[None] = None

    heads: int  # H
    W_DKV: np.ndarray  # (d_model, d_c) down-projection to the latent
    W_KR: np.ndarray  # (d_model, d_r) the shared decoupled key
    W_UK: np.ndarray  # (d_c, H*d_n) up-projection to the keys, head h in columns (h-1)*d_n .. h*d_n
    W_UV: np.ndarray  # (d_c, H*d_v) up-projection to the values
    W_UQ: np.ndarray  # (d_cq or d_model, H*d_n) the queries' part without position
    W_QR: np.ndarray  # (d_cq or d_model, H*d_r) the queries' decoupled part
    W_DQ: np.ndarray | None = None  # (d_model, d_cq) the queries' down-projection; None: queries straight from X
    kv_norm: Norm | None = None  # RMSNorm of the latent (DeepSeek's kv_a_layernorm)
    q_norm: Norm | None = None  # RMSNorm of the query latent (q_a_layernorm)

    # -- sizes ---------------------------------------------------------------------------------

    @property
    def d_c(self) -> int:
        return int(self.W_DKV.shape[1])

    @property
    def d_r(self) -> int:
        return int(self.W_KR.shape[1])

    @property
    def d_n(self) -> int:
        return int(self.W_UK.shape[1]) // self.heads

    @property
    def d_k(self) -> int:
        return self.d_n + self.d_r

    @property
    def d_v(self) -> int:
        return int(self.W_UV.shape[1]) // self.heads

    @property
    def d_cq(self) -> int | None:
        return None if self.W_DQ is None else int(self.W_DQ.shape[1])

    @property
    def cached(self) -> int:
        """Numbers cached per token and layer: the latent and the rotary key (DeepSeek-V2 Table 1: d_c + d_r)."""
        return self.d_c + self.d_r

    @property
    def expanded(self) -> int:
        """Numbers per token and layer if every head's key and value were cached: H·(d_k + d_v)."""
        return self.heads * (self.d_k + self.d_v)

    # -- the computation -----------------------------------------------------------------------

    def latent(self, X: np.ndarray, X_kv: np.ndarray, rope: Rope | None, r: Rounder) -> Latent:
        """The shared part of the layer: the query latent, the key/value latent and the rotary key."""
        C_Q = None
        if self.W_DQ is not None:
            C_Q = r(X @ self.W_DQ)  # (L_q, d_model) @ (d_model, d_cq) -> (L_q, d_cq)
            if self.q_norm is not None:
                C_Q = r(self.q_norm.apply(C_Q, "mla.q_norm"))  # (L_q, d_cq)
        D_KV = r(X_kv @ self.W_DKV)  # (L_k, d_model) @ (d_model, d_c) -> (L_k, d_c)
        C_KV = D_KV if self.kv_norm is None else r(self.kv_norm.apply(D_KV))  # (L_k, d_c)
        K_R = r(X_kv @ self.W_KR)  # (L_k, d_model) @ (d_model, d_r) -> (L_k, d_r)
        K_R_rope = K_R if rope is None else r(rope.apply(K_R, np.arange(K_R.shape[0])))  # (L_k, d_r)
        return Latent(C_Q, D_KV, C_KV, K_R, K_R_rope)

    def head_inputs(
        self, h: int, X: np.ndarray, lat: Latent, rope: Rope | None, r: Rounder
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Head h's (from 1) Q, K, V and, under RoPE, the rotated Q and K: (L_q, d_k), (L_k, d_k), (L_k, d_v), then each or None.

        Q = [q_C | q_R], K = [c_KV·W_UK | k_R]; rotated, only the last d_r columns turn.
        """
        d_n, d_r, d_v = self.d_n, self.d_r, self.d_v
        source = X if lat.C_Q is None else lat.C_Q  # (L_q, d_cq or d_model)
        q_C = r(source @ self.W_UQ[:, (h - 1) * d_n : h * d_n])  # (L_q, d_n)
        q_R = r(source @ self.W_QR[:, (h - 1) * d_r : h * d_r])  # (L_q, d_r)
        k_C = r(lat.C_KV @ self.W_UK[:, (h - 1) * d_n : h * d_n])  # (L_k, d_c) @ (d_c, d_n) -> (L_k, d_n)
        V = r(lat.C_KV @ self.W_UV[:, (h - 1) * d_v : h * d_v])  # (L_k, d_c) @ (d_c, d_v) -> (L_k, d_v)
        Q, K = np.hstack([q_C, q_R]), np.hstack([k_C, lat.K_R])  # (L_q, d_k), (L_k, d_k)
        if rope is None:
            return Q, K, V, None, None
        q_R_rope = r(rope.apply(q_R, np.arange(q_R.shape[0])))  # (L_q, d_r)
        return Q, K, V, np.hstack([q_C, q_R_rope]), np.hstack([k_C, lat.K_R_rope])

    def absorbed_inputs(self, h: int, q: np.ndarray, lat: Latent, r: Rounder) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The absorbed form's query, key and the up-projection left for after the weighting.

        q is head h's query as the scores meet it, [q_C | RoPE(q_R)] (L_q, d_k). Returns
        [q_C·W_UK,hᵀ | RoPE(q_R)] (L_q, d_c + d_r), [c_KV | RoPE(k_R)] (L_k, d_c + d_r) and W_UK,h (d_c, d_n):
        their products are the expanded scores, and the values to weigh are c_KV itself.
        """
        W_UK = self.W_UK[:, (h - 1) * self.d_n : h * self.d_n]  # (d_c, d_n)
        q_latent = r(q[:, : self.d_n] @ W_UK.T)  # (L_q, d_n) @ (d_n, d_c) -> (L_q, d_c)
        return np.hstack([q_latent, q[:, self.d_n :]]), np.hstack([lat.C_KV, lat.K_R_rope]), W_UK

    def absorbed(self, h: int, W_UK: np.ndarray, q_both: np.ndarray, weights: np.ndarray, mixed: np.ndarray, expanded: np.ndarray, r: Rounder) -> MlaHead:
        """Head h's absorbed form from what the engine computed: its weights (absorbed) and Σ w c_KV (mixed), then ·W_UV,h."""
        W_UV = self.W_UV[:, (h - 1) * self.d_v : h * self.d_v]  # (d_c, d_v)
        output = r(mixed @ W_UV)  # (L_q, d_c) @ (d_c, d_v) -> (L_q, d_v)
        hidden = ~np.isfinite(weights) | ~np.isfinite(expanded)
        difference = float(np.max(np.abs(np.where(hidden, 0.0, weights - expanded)), initial=0.0))
        return MlaHead(W_UK, W_UV, q_both[:, : self.d_c], weights, mixed, output, difference)

    # -- words and JSON ------------------------------------------------------------------------

    def describe(self) -> str:
        queries = "queries from X" if self.W_DQ is None else f"queries through a latent of d_cq = {self.d_cq}"
        return (
            f"multi-head latent attention (DeepSeek): latent d_c = {self.d_c}, decoupled RoPE part d_r = {self.d_r}, "
            f"d_n = {self.d_n}, {queries}; cache {self.cached} numbers a token against {self.expanded} expanded"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "d_c": self.d_c,
            "d_r": self.d_r,
            "d_n": self.d_n,
            "d_cq": self.d_cq,
            "kv_norm_eps": None if self.kv_norm is None else self.kv_norm.eps,
            "q_norm_eps": None if self.q_norm is None else self.q_norm.eps,
            "cache_per_token": self.cached,
            "expanded_per_token": self.expanded,
        }

    # -- how it is shown (core.variants.shown; written in mla_shown.py) -------------------------------------

    rows: ClassVar[tuple[StageRow, ...]] = mla_shown.ROWS  # the latents (stage `latent`), W_UK and W_UV, the absorbed form (`absorbed`)
    tells: ClassVar[tuple[str, ...]] = ("qk",)  # the stages it narrates itself: RoPE's step (it turns only the decoupled part)

    def projection(self, n: Any, s: Any, letter: str) -> str:
        """How each head's Q, K or V is written in the stage table: Q = [X·W_UQ | X·W_QR], K = [C_KV·W_UK | K_R], V = C_KV·W_UV."""
        return mla_shown.projection(n, s, letter)

    def introduce(self, expl: Any) -> list[str]:
        """What explain's intro says of the head's columns (instead of W_Q's, W_K's, W_V's)."""
        return mla_shown.introduce(self, expl)

    def narrate(self, expl: Any, say: Say) -> list[Narrated]:
        """Explain's steps instead of the query's and the keys': the query, the latent and its keys and values, the rotation."""
        return mla_shown.narrate(self, expl, say)

    def narrate_output(self, expl: Any, say: Say) -> Narrated | None:
        """Explain's step after the output: the same row the absorbed way, and what each form caches."""
        return mla_shown.narrate_output(self, expl, say)

    # -- its scenario key (core.variants.keys; read by sources.yaml_scenario, which builds the heads from it) --

    schema: ClassVar[Schema] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["W_DKV", "W_KR", "W_UK", "W_UV", "W_UQ", "W_QR"],
        "description": "Multi-head latent attention (DeepSeek-V2/V3): keys and values expanded per head from one cached latent "
        "c_KV = RMSNorm(X·W_DKV), position on a separate decoupled part (one shared RoPE key X·W_KR); the scenario's `rope` "
        "turns only that part. Instead of W_Q, W_K and W_V.",
        "properties": {
            "W_DKV": {**MATRIX, "description": "d_model x d_c: down-projection to the key/value latent."},
            "kv_norm": {"$ref": "#/$defs/rms_norm", "description": "RMSNorm of the latent (DeepSeek's kv_a_layernorm)."},
            "W_UK": {"anyOf": [MATRIX, MATRICES], "description": "d_c x (H*d_n), or H per-head d_c x d_n: the keys' up-projection."},
            "W_UV": {"anyOf": [MATRIX, MATRICES], "description": "d_c x (H*d_v), or H per-head d_c x d_v: the values' up-projection."},
            "W_KR": {**MATRIX, "description": "d_model x d_r: the decoupled key part, one per token shared by all heads."},
            "W_DQ": {**MATRIX, "description": "d_model x d_cq: the queries' own latent (optional; without it queries come from X)."},
            "q_norm": {"$ref": "#/$defs/rms_norm", "description": "RMSNorm of the query latent (q_a_layernorm)."},
            "W_UQ": {"anyOf": [MATRIX, MATRICES], "description": "(d_cq or d_model) x (H*d_n): the queries' part without position."},
            "W_QR": {"anyOf": [MATRIX, MATRICES], "description": "(d_cq or d_model) x (H*d_r): the queries' decoupled RoPE part."},
        },
    }
    schema_after: ClassVar[str] = "qk_norm"
    softmax_only: ClassVar[bool] = True  # its absorbed form regroups a softmax's weighted sum
    excludes: ClassVar[dict[str, tuple[str, str]]] = {  # keys it has no use beside: why, and what to write instead
        **{key: (f"`{key}` has no use with `mla`: every head's q, k and v come from the latents", "`mla:` without it")
           for key in ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V", "Q", "K", "V", "context")},
        "qk_norm": ("`qk_norm` has no use with `mla`: MLA normalises its latents (`kv_norm`, `q_norm`), not each head's q and k",
                    "`mla:` without `qk_norm` (its `kv_norm` and `q_norm` are the RMSNorms DeepSeek applies)"),
    }  # fmt: skip

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> Mla:
        """`mla:` its latent projections, shapes checked against d_model and the heads; nothing it makes (W_Q … V, context) beside it.

        Read before the weights (it makes each head's q, k and v, so d_k and d_v are its own: `sized`), from embeddings X.
        """
        if read.form != "mapping":
            raise read.error(read.found(), "a mapping of W_DKV, W_KR, W_UK, W_UV, W_UQ, W_QR (and W_DQ, kv_norm, q_norm)")
        items = read.mapping(mapping_keys(cls.schema))
        heads = sizes.heads  # (the keys of `excludes` were refused before any variant was read)
        if sizes.kv_heads != heads and (given := read.beside("kv_heads")) is not None:
            raise given.error("`kv_heads` has no use with `mla`: every head's q, k and v come from the latents", "`mla:` without it")

        def matrix(key: str, rows: int, what: str, per_head: bool = False) -> np.ndarray:
            item = items.get(key)
            if item is None:
                raise read.error(f"`mla` needs `{key}`", f"a matrix of {rows} rows ({what})", key=f"mla.{key}")
            blocks = item.matrices() if per_head else None
            if blocks is not None:
                if len(blocks) != heads:
                    raise item.error(f"{len(blocks)} per-head matrices for heads = {heads}", f"{heads} matrices of one shape, one per head")
                for h, (part, block) in enumerate(zip(blocks, item.items()), 1):
                    if part.shape != blocks[0].shape:
                        raise block.error(f"head {h}'s matrix is {part.shape[0]} × {part.shape[1]} but head 1's is {blocks[0].shape[0]} × "
                                          f"{blocks[0].shape[1]}", "the same shape for every head")  # fmt: skip
                found = np.hstack(blocks)
            else:
                found = item.matrix()
            if found.shape[0] != rows or (per_head and found.shape[1] % heads):
                columns = f" and a multiple of {heads} columns" if per_head else ""
                raise item.error(f"mla.{key} is {found.shape[0]} × {found.shape[1]}", f"{rows} rows ({what}){columns}")
            return frozen(found)

        def norm(key: str, size: int) -> Norm | None:
            item = items.get(key)
            if item is None:
                return None
            expected = f"{{weight: [{size} numbers], eps: 1e-6}}"
            if item.form != "mapping":
                raise item.error(item.found(), expected)
            parts = item.mapping(("weight", "eps"))
            weight = np.ones(size) if "weight" not in parts else parts["weight"].vector()
            eps = 1e-6 if "eps" not in parts else parts["eps"].number()
            if weight.shape != (size,) or not eps >= 0:
                raise item.error(f"{weight.shape[0]} weights, eps = {eps:g}", expected)
            return Norm(frozen(weight), float(eps))

        d_model = sizes.d_model
        W_DKV = matrix("W_DKV", d_model, "d_model × d_c")
        d_c = W_DKV.shape[1]
        W_DQ = None if "W_DQ" not in items else matrix("W_DQ", d_model, "d_model × d_cq")
        if W_DQ is None and "q_norm" in items:
            raise items["q_norm"].error("`q_norm` normalises the query latent, but no `W_DQ` makes one", "`W_DQ` beside it, or no `q_norm`")
        q_rows = d_model if W_DQ is None else W_DQ.shape[1]
        q_what = "d_model" if W_DQ is None else "d_cq, the columns of W_DQ"
        W_UK = matrix("W_UK", d_c, "d_c, the columns of W_DKV", per_head=True)
        W_UQ = matrix("W_UQ", q_rows, q_what, per_head=True)
        if W_UQ.shape[1] != W_UK.shape[1]:
            raise items["W_UQ"].error(f"W_UQ has {W_UQ.shape[1]} columns but W_UK has {W_UK.shape[1]}", f"{W_UK.shape[1]} columns: H·d_n, as W_UK")
        W_KR = matrix("W_KR", d_model, "d_model × d_r")
        W_QR = matrix("W_QR", q_rows, q_what, per_head=True)
        if W_QR.shape[1] != heads * W_KR.shape[1]:
            raise items["W_QR"].error(f"W_QR has {W_QR.shape[1]} columns", f"H·d_r = {heads} × {W_KR.shape[1]} columns: each head's part meets k_R")
        return cls(
            heads=heads,
            W_DKV=W_DKV,
            W_KR=W_KR,
            W_UK=W_UK,
            W_UV=matrix("W_UV", d_c, "d_c, the columns of W_DKV", per_head=True),
            W_UQ=W_UQ,
            W_QR=W_QR,
            W_DQ=W_DQ,
            kv_norm=norm("kv_norm", d_c),
            q_norm=None if W_DQ is None else norm("q_norm", W_DQ.shape[1]),
        )

    def sized(self, sizes: Sizes) -> Sizes:
        """The scenario's sizes with it: d_k = d_n + d_r and d_v its own, RoPE's width the decoupled part d_r."""
        return sizes._replace(d_k=self.d_k, d_rope=self.d_r, d_v=self.d_v)
