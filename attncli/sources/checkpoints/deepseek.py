"""DeepSeek V2 and V3: multi-head latent attention, dense first layers, then a mixture of experts.

V2 (`deepseek_v2`) has V3's attention and another router, read against transformers' DeepseekV2TopkRouter and
DeepseekV2Attention: router logits in float32 → softmax over all experts (float32); topk_method "greedy" takes the
top-k experts, "group_limited_greedy" scores each group by its best expert, keeps topk_group groups (the others'
scores set to 0) and takes the top-k of the rest; the weights are the chosen softmax scores × routed_scaling_factor,
never renormalised (transformers 5 reads norm_topk_prob for V2 but does not use it; the released V2 configs set it
false) and with no correction bias. moe_layer_freq (the original remote code's) is not read: transformers makes every
layer from first_k_dense_replace on a MoE layer. Its RoPE always turns interleaved pairs (complex e^(iθ), no
rope_interleave key), with the angles and the rotation in float32. Defaults: transformers' DeepseekV2Config.

V3 read against transformers' DeepseekV3Attention, DeepseekV3TopkRouter and DeepseekV3MoE (docs/families.md):
- attention: q = q_b_proj(RMSNorm(q_a_proj(x))) or q_proj(x), per head [q_nope | q_rope];
  kv_a_proj_with_mqa(x) = [c | k_rope]; c → kv_a_layernorm → kv_b_proj, per head [k_nope | v]; k_rope is one vector
  per token for all heads; RoPE on the rope parts only (interleaved pairs with rope_interleave, which give the same
  dot products as transformers' de-interleaving); scale (nope + rope)^−½. This is core's Mla (core/variants/mla.py):
  kv_b_proj's per-head blocks are split into W_UK and W_UV, q_b_proj's into W_UQ and W_QR.
- MLP: dense SwiGLU in layers < first_k_dense_replace; after that the MoE: router logits in float32 (as transformers
  casts them) → sigmoid; + e_score_correction_bias for the choice only; groups scored by the sum of their top 2;
  keep topk_group groups (the others' experts out of the choice, masked_fill(…, -inf)); top-k experts; weights are the
  sigmoid scores (not the corrected ones), normalised when norm_topk_prob (+1e-20), × routed_scaling_factor; plus
  the shared experts' MLP on every token.
Dimension names: L tokens, d hidden, H heads, d_c kv_lora_rank, d_cq q_lora_rank, d_n nope, d_r rope, d_v value, E experts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attncli.core.variants import Rope
from attncli.core.variants.mla import Mla, Norm
from attncli.errors import AttnError
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import (
    AttentionWeights,
    LayerInputs,
    Weights,
    activate,
    rms_norm,
    self_attention,
    storage_note,
    through,
)
from attncli.sources.checkpoints.config import (
    FLOAT32_RMSNORM,
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    MOST,
    O_PROJ,
    Description,
    ModelConfig,
    Verification,
    _Reader,
    llama_like,
    read_raw,
    whole,
    yarn_mscale,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Joined, Metadata, outermost, renamed
from attncli.sources.checkpoints.rope import rope_spec
from attncli.sources.checkpoints.source import TensorSource


@dataclass(frozen=True)
class DeepseekConfig:
    """The keys of config.json only DeepSeek has (transformers' DeepseekV3Config defaults where a key is left out)."""

    q_lora_rank: int | None  # None: one q_proj
    kv_lora_rank: int
    nope: int  # qk_nope_head_dim
    rope: int  # qk_rope_head_dim
    v_dim: int  # v_head_dim
    interleave: bool  # rope_interleave
    experts: int  # n_routed_experts
    per_token: int  # num_experts_per_tok
    shared: int  # n_shared_experts
    groups: int  # n_group
    top_groups: int  # topk_group
    dense_layers: int  # first_k_dense_replace
    moe_inner: int  # moe_intermediate_size
    scaling: float  # routed_scaling_factor
    norm_topk: bool  # norm_topk_prob
    topk_method: str = "noaux_tc"  # V3's sigmoid router; V2's softmax routers: "greedy", "group_limited_greedy"

    @property
    def cached(self) -> int:
        """Numbers MLA caches per token and layer: the latent and the rotary key."""
        return self.kv_lora_rank + self.rope


def _count(raw: dict[str, Any], where: str, key: str, default: int | None, *, minimum: int = 1, most: int = MOST["head_dim"]) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= most:
        raise AttnError(f"found {value!r}", file=where, key=key, expected=f"a whole number from {minimum} to {most:,}")
    return value


V2_METHODS = ("greedy", "group_limited_greedy")  # DeepseekV2TopkRouter's choices (another leaves its weights undefined)


def read_deepseek(folder: Any, cfg: ModelConfig, keys: dict[str, Any] | None = None) -> DeepseekConfig:
    """DeepSeek's own config keys, checked (defaults: transformers' DeepseekV3Config, or DeepseekV2Config for
    deepseek_v2); `keys`: a GGUF file's metadata as them."""
    raw, where = (keys, str(folder)) if keys is not None else read_raw(folder)
    v2 = cfg.model_type == "deepseek_v2"
    q_lora = raw.get("q_lora_rank", 1536)
    experts = _count(raw, where, "n_routed_experts", 64 if v2 else 256, most=MOST["heads"])
    method = "noaux_tc"
    if v2:
        method = raw.get("topk_method", "greedy")
        if method not in V2_METHODS:
            raise AttnError(f"found {method!r}", file=where, key="topk_method", expected=" or ".join(V2_METHODS) + " (DeepSeek V2's routers)")
    grouped = not v2 or method == "group_limited_greedy"  # V2's greedy router reads neither n_group nor topk_group
    groups = _count(raw, where, "n_group", None if v2 else 8, most=experts) if grouped else 1
    interleave = True if v2 else raw.get("rope_interleave", True)  # V2 always turns interleaved pairs
    if not isinstance(interleave, bool):
        raise AttnError(f"found {interleave!r}", file=where, key="rope_interleave", expected="true or false")
    norm_topk = False if v2 else raw.get("norm_topk_prob", True)  # V2: transformers does not renormalise
    scaling = raw.get("routed_scaling_factor", 1.0 if v2 else 2.5)
    if isinstance(scaling, bool) or not isinstance(scaling, int | float) or not 0 < scaling < 1e6:
        raise AttnError(f"found {scaling!r}", file=where, key="routed_scaling_factor", expected="a positive number")
    ds = DeepseekConfig(
        q_lora_rank=None if q_lora is None else _count(raw, where, "q_lora_rank", None, most=MOST["hidden"]),
        kv_lora_rank=_count(raw, where, "kv_lora_rank", 512, most=MOST["hidden"]),
        nope=_count(raw, where, "qk_nope_head_dim", 128),
        rope=_count(raw, where, "qk_rope_head_dim", 64),
        v_dim=_count(raw, where, "v_head_dim", 128),
        interleave=interleave,
        experts=experts,
        per_token=_count(raw, where, "num_experts_per_tok", None if v2 else 8, most=experts),
        shared=_count(raw, where, "n_shared_experts", 2 if v2 else 1, minimum=0, most=MOST["heads"]),
        groups=groups,
        top_groups=_count(raw, where, "topk_group", None if v2 else 4, most=groups) if grouped else 1,
        dense_layers=_count(raw, where, "first_k_dense_replace", 0 if v2 else 3, minimum=0, most=MOST["layers"]),
        moe_inner=_count(raw, where, "moe_intermediate_size", 1407 if v2 else 2048, most=MOST["inner"]),
        scaling=float(scaling),
        norm_topk=bool(norm_topk),
        topk_method=method,
    )
    if ds.rope % 2:
        raise AttnError(f"qk_rope_head_dim {ds.rope} is odd", file=where, key="qk_rope_head_dim", expected="an even size (RoPE turns pairs)")
    if grouped and (experts % groups or experts // groups < 2):
        raise AttnError(f"{experts} experts in {groups} groups", file=where, key="n_group", expected="groups of at least 2 experts each")
    if grouped and ds.per_token > ds.top_groups * (experts // groups):
        raise AttnError(f"{ds.per_token} experts per token from {ds.top_groups} groups of {experts // groups}", file=where,
                        key="num_experts_per_tok", expected="at most topk_group × experts per group (transformers would pick experts of dropped groups in no defined order)")  # fmt: skip
    return ds


def _rope(cfg: ModelConfig, ds: DeepseekConfig) -> Rope:
    """RoPE on the d_r rope part: the config's frequencies for heads of d_r, interleaved pairs with rope_interleave."""
    assert cfg.rope is not None
    spec = rope_spec(cfg.rope, ds.rope)
    if not ds.interleave:
        return spec
    return Rope(theta=spec.theta, style="interleaved", inv_freq=spec.inv_freq, scaling=spec.scaling, attention_factor=spec.attention_factor)


def _mscale(cfg: ModelConfig) -> float:
    """DeepSeek's YaRN softmax factor: the scale (d_n + d_r)^−½ is multiplied by mscale(factor, mscale_all_dim)² when
    mscale_all_dim is set (transformers' yarn_apply_mscale; 1 otherwise)."""
    rope = cfg.rope
    if rope is None or rope.kind != "yarn" or not rope.mscale_all_dim:
        return 1.0
    return yarn_mscale(rope.factor, rope.mscale_all_dim)


def _attention(cfg: ModelConfig, ds: DeepseekConfig, w: Weights, index: int, rope: Rope) -> AttentionWeights:
    """Layer `index`'s MLA as core's Mla (each nn.Linear stored (out, in), turned to (in, out)) and its W_O."""
    d, H, d_n, d_r, d_v, d_c = cfg.hidden_size, cfg.heads, ds.nope, ds.rope, ds.v_dim, ds.kv_lora_rank
    p = f"layers.{index}.self_attn."
    eps = cfg.norm_eps
    if ds.q_lora_rank is None:
        W_DQ, q_norm = None, None
        W_q = w.get(p + "q_proj.weight", (H * (d_n + d_r), d)).T  # (d, H·(d_n + d_r))
    else:
        W_DQ = w.get(p + "q_a_proj.weight", (ds.q_lora_rank, d)).T  # (d, d_cq)
        q_norm = Norm(w.get(p + "q_a_layernorm.weight", (ds.q_lora_rank,)), eps)
        W_q = w.get(p + "q_b_proj.weight", (H * (d_n + d_r), ds.q_lora_rank)).T  # (d_cq, H·(d_n + d_r))
    W_kv_a = w.get(p + "kv_a_proj_with_mqa.weight", (d_c + d_r, d)).T  # (d, d_c + d_r)
    W_kv_b = w.get(p + "kv_b_proj.weight", (H * (d_n + d_v), d_c)).T  # (d_c, H·(d_n + d_v))
    q_blocks = W_q.reshape(W_q.shape[0], H, d_n + d_r)  # per head [nope | rope]
    kv_blocks = W_kv_b.reshape(d_c, H, d_n + d_v)  # per head [k_nope | v]
    mla = Mla(
        heads=H,
        W_DKV=np.ascontiguousarray(W_kv_a[:, :d_c]),
        W_KR=np.ascontiguousarray(W_kv_a[:, d_c:]),
        W_UK=np.ascontiguousarray(kv_blocks[:, :, :d_n].reshape(d_c, H * d_n)),
        W_UV=np.ascontiguousarray(kv_blocks[:, :, d_n:].reshape(d_c, H * d_v)),
        W_UQ=np.ascontiguousarray(q_blocks[:, :, :d_n].reshape(-1, H * d_n)),
        W_QR=np.ascontiguousarray(q_blocks[:, :, d_n:].reshape(-1, H * d_r)),
        W_DQ=W_DQ,
        kv_norm=Norm(w.get(p + "kv_a_layernorm.weight", (d_c,)), eps),
        q_norm=q_norm,
    )
    W_O = w.get(p + "o_proj.weight", (d, H * d_v)).T  # (H·d_v, d)
    return AttentionWeights(
        W_Q=None, W_K=None, W_V=None, b_Q=None, b_K=None, b_V=None, W_O=W_O, b_O=None,
        heads=H, kv_heads=H, head_dim=d_n + d_r, divisor=math.sqrt(d_n + d_r) / _mscale(cfg) ** 2, causal=True, window=None, rope=rope, mla=mla,
    )  # fmt: skip


def _swiglu(cfg: ModelConfig, w: Weights, prefix: str, x: np.ndarray, inner: int) -> np.ndarray:
    """(L, d) down(act(gate(x))·up(x))."""
    d = cfg.hidden_size
    hidden = activate(cfg.activation, w.product(prefix + "gate_proj.weight", x, (inner, d)))  # (L, inner)
    hidden *= w.product(prefix + "up_proj.weight", x, (inner, d))  # (L, inner)
    out: np.ndarray = w.product(prefix + "down_proj.weight", hidden, (d, inner))  # (L, d)
    return out


def route_softmax(ds: DeepseekConfig, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DeepSeek V2: (L, k) the experts each token uses and (L, k) their weights, from float32 router logits (L, E): a
    float32 softmax over all experts; greedy top-k, or top-k within the topk_group groups whose best expert scores
    highest; the chosen scores × routed_scaling_factor (DeepseekV2TopkRouter)."""
    logits32 = logits.astype(np.float32)
    shifted = np.exp(logits32 - logits32.max(axis=1, keepdims=True)).astype(np.float32)  # (L, E) stable softmax, float32
    scores = (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)  # (L, E)
    if ds.topk_method == "group_limited_greedy":
        per_group = scores.reshape(len(scores), ds.groups, ds.experts // ds.groups)  # (L, groups, E/groups)
        kept_groups = np.argsort(-per_group.max(axis=2), axis=1, kind="stable")[:, : ds.top_groups]  # (L, topk_group)
        keep = np.zeros((len(scores), ds.groups), dtype=bool)
        np.put_along_axis(keep, kept_groups, True, axis=1)
        scores = np.where(np.repeat(keep, ds.experts // ds.groups, axis=1), scores, np.float32(0.0))  # masked_fill(…, 0.0)
    chosen = np.argsort(-scores, axis=1, kind="stable")[:, : ds.per_token]  # (L, k) best first
    weights = (np.take_along_axis(scores, chosen, axis=1) * np.float32(ds.scaling)).astype(np.float32)  # (L, k)
    return chosen, weights.astype(np.float64)


def route(ds: DeepseekConfig, logits: np.ndarray, bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(L, k) the experts each token uses and (L, k) their weights, from float32 router logits (L, E), as transformers chooses them."""
    if ds.topk_method in V2_METHODS:
        return route_softmax(ds, logits)
    logits32 = logits.astype(np.float32)
    scores = (np.float32(1) / (np.float32(1) + np.exp(-logits32))).astype(np.float32)  # (L, E) sigmoid, float32
    choice = scores + (np.zeros(ds.experts, np.float32) if bias is None else bias.astype(np.float32))  # (L, E)
    per_group = choice.reshape(len(choice), ds.groups, ds.experts // ds.groups)  # (L, groups, E/groups)
    group_scores = np.sort(per_group, axis=2)[:, :, -2:].sum(axis=2)  # (L, groups) sum of each group's top 2
    kept_groups = np.argsort(-group_scores, axis=1, kind="stable")[:, : ds.top_groups]  # (L, topk_group)
    keep = np.zeros_like(group_scores, dtype=bool)
    np.put_along_axis(keep, kept_groups, True, axis=1)
    # (L, E) the other groups' experts out of the choice, as masked_fill(…, -inf) (transformers 5): a fill of 0 (transformers
    # 4's) let an expert of a dropped group beat a kept one whose corrected score is below 0, which a large negative bias makes
    masked = np.where(np.repeat(keep, ds.experts // ds.groups, axis=1), choice, np.float32(-np.inf))
    chosen = np.argsort(-masked, axis=1, kind="stable")[:, : ds.per_token]  # (L, k)
    weights = np.take_along_axis(scores, chosen, axis=1).astype(np.float32)  # (L, k) the scores, not the corrected ones
    if ds.norm_topk:
        weights = (weights / (weights.sum(axis=1, keepdims=True) + np.float32(1e-20))).astype(np.float32)
    weights = (weights * np.float32(ds.scaling)).astype(np.float32)
    return chosen, weights.astype(np.float64)


def _moe(cfg: ModelConfig, ds: DeepseekConfig, w: Weights, index: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(L, d) the MoE block's output (routed experts, weighted, + the shared experts), and (L, k) each token's experts."""
    p = f"layers.{index}.mlp."
    d, L = cfg.hidden_size, x.shape[0]
    gate = w.get(p + "gate.weight", (ds.experts, d))  # (E, d)
    logits = x.astype(np.float32) @ gate.astype(np.float32).T  # (L, E) in float32, as transformers computes the router
    bias = w.get(p + "gate.e_score_correction_bias", (ds.experts,)) if w.has(p + "gate.e_score_correction_bias") else None
    chosen, weights = route(ds, logits, bias)
    out = np.zeros((L, d))  # (L, d)
    for expert in np.unique(chosen):
        tokens, slot = np.nonzero(chosen == expert)  # the tokens that use this expert, and where in their top-k
        out[tokens] += weights[tokens, slot][:, None] * _swiglu(cfg, w, f"{p}experts.{int(expert)}.", x[tokens], ds.moe_inner)
    if ds.shared:
        out += _swiglu(cfg, w, p + "shared_experts.", x, ds.moe_inner * ds.shared)
    return out, chosen


def _layer(cfg: ModelConfig, ds: DeepseekConfig, w: Weights, index: int, h: np.ndarray, rope: Rope) -> tuple[np.ndarray, np.ndarray | None]:
    """(L, d) the residual after layer `index`, and (L, k) the experts each token used (None in a dense layer)."""
    p = f"layers.{index}."
    d = cfg.hidden_size
    X = rms_norm(h, w.get(p + "input_layernorm.weight", (d,)), cfg.norm_eps)  # (L, d)
    h = h + self_attention(X, _attention(cfg, ds, w, index, rope))  # (L, d)
    x = rms_norm(h, w.get(p + "post_attention_layernorm.weight", (d,)), cfg.norm_eps)  # (L, d)
    if index < ds.dense_layers:
        return h + _swiglu(cfg, w, p + "mlp.", x, cfg.intermediate_size), None
    out, chosen = _moe(cfg, ds, w, index, x)
    return h + out, chosen


def forward(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layers: int) -> tuple[np.ndarray, list[np.ndarray | None]]:
    """(L, d) the residual after the first `layers` layers, and each layer's (L, k) experts per token (None: dense)."""
    ds = read_deepseek(checkpoint.folder, cfg, getattr(checkpoint, "config_keys", None))
    w = Weights(checkpoint, probe="embed_tokens.weight", prefixes=("model.", ""))
    rope = _rope(cfg, ds)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    experts: list[np.ndarray | None] = []
    for index in range(layers):
        h, chosen = _layer(cfg, ds, w, index, h, rope)
        experts.append(chosen)
    return h, experts


def _experts_note(experts: list[np.ndarray | None], ds: DeepseekConfig) -> list[str]:
    """'layer 2 (MoE): token 1 used experts 3, 1; token 2 …' for each earlier MoE layer, experts counted from 1."""
    notes = []
    for layer, chosen in enumerate(experts, 1):
        if chosen is None:
            continue
        per_token = "; ".join(f"token {t} → {', '.join(str(int(e) + 1) for e in row)}" for t, row in enumerate(chosen, 1))
        notes.append(f"layer {layer} MoE, experts each token used ({ds.per_token} of {ds.experts}, counted from 1: mlp.experts.0 is 1; "
                     f"+ {ds.shared} shared): {per_token}")
    return notes


def _router_note(ds: DeepseekConfig) -> str:
    """How the layer's router chooses: V3's sigmoid with groups, V2's softmax, greedy or group-limited."""
    if ds.topk_method == "greedy":
        return f"softmax router in float32, greedy: {ds.per_token} of {ds.experts} experts, × {ds.scaling:g}"
    kind = "softmax router in float32, group-limited greedy" if ds.topk_method in V2_METHODS else "sigmoid router in float32"
    return f"{kind}: {ds.per_token} of {ds.experts} experts, {ds.top_groups} of {ds.groups} groups, × {ds.scaling:g}"


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm of the residual entering `layer` (from 1), and that layer's MLA weights."""
    ds = read_deepseek(checkpoint.folder, cfg, getattr(checkpoint, "config_keys", None))
    w = Weights(checkpoint, probe="embed_tokens.weight", prefixes=("model.", ""))
    h, experts = forward(cfg, checkpoint, ids, layer - 1)
    index = layer - 1
    X = rms_norm(h, w.get(f"layers.{index}.input_layernorm.weight", (cfg.hidden_size,)), cfg.norm_eps)  # (L, d)
    rope = _rope(cfg, ds)
    attention = _attention(cfg, ds, w, index, rope)
    mla = attention.mla
    assert mla is not None
    name = "kv_a_proj_with_mqa.weight"
    dtype = w.dtype(f"layers.{index}.self_attn.{name}")
    dense = "no dense layers" if not ds.dense_layers else "dense MLP in layer 1" if ds.dense_layers == 1 else f"dense MLP in layers 1–{ds.dense_layers}"
    queries = "q = q_proj(x)" if ds.q_lora_rank is None else f"q = q_b_proj(RMSNorm(q_a_proj(x))), query latent d_cq = {ds.q_lora_rank}"
    notes = (
        f"X = input_layernorm (RMSNorm) of the residual entering layer {layer}: token embeddings{through(layer)}",
        f"multi-head latent attention: {queries}; kv_a_proj_with_mqa(x) = [latent ({ds.kv_lora_rank}) | shared rotary key "
        f"({ds.rope})], latent → kv_a_layernorm → kv_b_proj = per head [k_nope ({ds.nope}) | v ({ds.v_dim})]",
        f"RoPE ({'interleaved pairs' if ds.interleave else 'rotate-half'}) on the {ds.rope} rotary numbers of q and k only: θ = {rope.theta:g}"
        + (f", {rope.scaling}" if rope.scaling else ""),
        f"KV cache per token and layer: {mla.cached} numbers (latent + rotary key) against {mla.expanded} expanded",
        f"scores divided by √(d_n + d_r) = √{ds.nope + ds.rope} = {attention.divisor:g}"
        if _mscale(cfg) == 1.0
        else f"scores divided by √(d_n + d_r) / mscale² = √{ds.nope + ds.rope} / {_mscale(cfg):.6g}² = {attention.divisor:g} "
        f"(YaRN's mscale(factor {cfg.rope.factor:g}, mscale_all_dim {cfg.rope.mscale_all_dim:g}) squared)",  # type: ignore[union-attr]
        "causal mask: each token sees itself and the tokens before it",
        f"{dense}, then mixture of experts ({_router_note(ds)}, {ds.shared} shared)",
        *_experts_note(experts, ds),
        storage_note(dtype),
    )
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=notes)


DEFAULTS: dict[str, Any] = {"layers": 61, "hidden": 7168, "heads": 128, "kv": None, "positions": 4096, "inter": 18432}  # DeepseekV3Config
V2_DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 4096, "heads": 32, "kv": None, "positions": 2048, "inter": 11008}  # DeepseekV2Config


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with DeepSeek V3's (or, for deepseek_v2, V2's) defaults; MLA's own keys are read by `read_deepseek`."""
    if read.raw.get("model_type") == "deepseek_v2":
        return llama_like(read, "deepseek_v2", V2_DEFAULTS)
    return llama_like(read, "deepseek_v3", DEFAULTS)


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json (DeepSeek V2 and V3)."""
    return {"embed_tokens.weight": (None, cfg.hidden_size), "layers.0.self_attn.kv_a_proj_with_mqa.weight": (None, cfg.hidden_size)}


# -- GGUF and model verify ---------------------------------------------------------------------

EXPERT_GATING = {1: "softmax", 2: "sigmoid", 3: "softmax over the chosen experts"}  # llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE
GGUF_NAMES = (
    *renamed(llama.GGUF_NAMES, "k_proj", "v_proj"),
    (r"layers\.(\d+)\.self_attn\.q_a_proj\.weight", r"blk.\1.attn_q_a.weight"),
    (r"layers\.(\d+)\.self_attn\.q_a_layernorm\.weight", r"blk.\1.attn_q_a_norm.weight"),
    (r"layers\.(\d+)\.self_attn\.q_b_proj\.weight", r"blk.\1.attn_q_b.weight"),
    (r"layers\.(\d+)\.self_attn\.kv_a_proj_with_mqa\.weight", r"blk.\1.attn_kv_a_mqa.weight"),
    (r"layers\.(\d+)\.self_attn\.kv_a_layernorm\.weight", r"blk.\1.attn_kv_a_norm.weight"),
    (r"layers\.(\d+)\.self_attn\.kv_b_proj\.weight", r"blk.\1.attn_kv_b.weight"),  # older files; newer ones split it (gguf_joined)
    (r"layers\.(\d+)\.mlp\.gate\.weight", r"blk.\1.ffn_gate_inp.weight"),
    (r"layers\.(\d+)\.mlp\.gate\.e_score_correction_bias", r"blk.\1.exp_probs_b.bias"),
    (r"layers\.(\d+)\.mlp\.shared_experts\.(gate|up|down)_proj\.weight", r"blk.\1.ffn_\2_shexp.weight"),
)


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """DeepSeek V3's config.json keys from the metadata under deepseek2.… (the converter's set_gguf_parameters undone).

    The converter writes MLA as multi-query attention over the latent: key_length = kv_lora_rank + rope, value_length =
    kv_lora_rank, and the per-head sizes as key_length_mla / value_length_mla (older files: key_length = nope + rope and
    value_length = v_head_dim). llama.cpp applies RoPE to interleaved pairs (the checkpoint's own order: nothing permuted).
    A file whose router is not the sigmoid (DeepSeek V2's softmax, or no gating key, which llama.cpp reads as V2) is refused:
    attncli reads V3's files only (V2's, with their softmax router, have no fixture yet).
    """
    gating = file.value(a + "expert_gating_func")
    if gating != 2:
        said = EXPERT_GATING.get(gating, repr(gating)) if gating is not None else "not stored (llama.cpp then routes as DeepSeek V2, by softmax)"
        raise file.fail(f"the expert router is {said}: attncli reads DeepSeek V3 (sigmoid router) only", key=a + "expert_gating_func",
                        expected="2 (sigmoid), as DeepSeek V3 files have it")  # fmt: skip
    rope = file.count(a + "rope.dimension_count")
    kv_lora = file.count(a + "attention.kv_lora_rank")
    if file.has_key(a + "attention.key_length_mla"):
        qk, v = file.count(a + "attention.key_length_mla"), file.count(a + "attention.value_length_mla")
    else:
        qk, v = file.count(a + "attention.key_length"), file.count(a + "attention.value_length")
    if qk <= rope:
        raise file.fail(f"a query/key head of {qk} numbers with {rope} rotary ones", key=a + "attention.key_length_mla", expected="more than the rotary part")
    experts = file.count(a + "expert_count")
    groups = file.count(a + "expert_group_count", default=1)
    q_lora = file.count(a + "attention.q_lora_rank") if file.has_key(a + "attention.q_lora_rank") else None
    return {
        "num_key_value_heads": raw["num_attention_heads"],  # the converter's head_count_kv = 1 is MLA seen as MQA
        "head_dim": rope,
        "rms_norm_eps": file.number(a + "attention.layer_norm_rms_epsilon", default=1e-6),
        "rope_parameters": {"rope_type": "default", "rope_theta": raw["rope_parameters"]["rope_theta"]},
        "q_lora_rank": q_lora,
        "kv_lora_rank": kv_lora,
        "qk_nope_head_dim": qk - rope,
        "qk_rope_head_dim": rope,
        "v_head_dim": v,
        "rope_interleave": True,
        "n_routed_experts": experts,
        "num_experts_per_tok": file.count(a + "expert_used_count"),
        "n_shared_experts": file.count(a + "expert_shared_count", default=0, minimum=0),
        "n_group": groups,
        "topk_group": file.count(a + "expert_group_used_count", default=groups),
        "first_k_dense_replace": file.count(a + "leading_dense_block_count", default=0, minimum=0),
        "moe_intermediate_size": file.count(a + "expert_feed_forward_length"),
        "routed_scaling_factor": file.number(a + "expert_weights_scale", default=1.0),
        "norm_topk_prob": bool(file.value(a + "expert_weights_norm") or False),
        "attention_bias": False,
    }


def gguf_joined(file: Metadata, blk: str, rest: str) -> Joined | None:
    """What the converter split or merged.

    - kv_b_proj (H·(d_n + d_v), d_c), per head [k | v], is stored by newer converters as attn_k_b (H, d_c, d_n), each
      head's k block transposed, and attn_v_b (H, d_v, d_c); older files keep attn_kv_b whole.
    - experts.E.{gate,up,down}_proj is expert E of the merged ffn_{gate,up,down}_exps (E, rows, in).
    """
    have = file.tensors
    if rest == "self_attn.kv_b_proj.weight" and blk + "attn_kv_b.weight" not in have:
        k_b, v_b = blk + "attn_k_b.weight", blk + "attn_v_b.weight"
        if k_b not in have or v_b not in have:
            return None
        (H, d_c, d_n), (H_v, d_v, d_c_v) = outermost(file, k_b), outermost(file, v_b)
        if (H, d_c) != (H_v, d_c_v):
            raise AttnError(f"attn_k_b {[H, d_c, d_n]} and attn_v_b {[H_v, d_v, d_c_v]} do not pair", file=file.where,
                            expected="(heads, kv_lora_rank, nope) and (heads, v_head_dim, kv_lora_rank)")  # fmt: skip
        return Joined((H * (d_n + d_v), d_c), (k_b, v_b), "kv_b")
    e = re.fullmatch(r"mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight", rest)
    if e is not None:
        merged = f"{blk}ffn_{e.group(2)}_exps.weight"
        if merged not in have or len(outermost(file, merged)) != 3 or int(e.group(1)) >= outermost(file, merged)[0]:
            return None
        return Joined(outermost(file, merged)[1:], (merged,), "expert", int(e.group(1)))
    return None


# llama.cpp's deepseek2 architecture; V2's files (a softmax router) are refused by gguf_keys
GGUF = (GgufArchitecture("deepseek2", "deepseek_v3", GGUF_NAMES, keys=gguf_keys, joined=gguf_joined),)
# the steps transformers runs in float32 in a float64 DeepSeek
FLOAT32_ROUTER = "the MoE router's logits and sigmoid run in float32 (a near-tie between two experts could choose another one)"
FLOAT32_COMPLEX_ROPE = "the rotary embedding computes its angles in float32 and turns q's and k's rotary parts as float32 complex numbers"
FLOAT32_SOFTMAX_ROUTER = "the MoE router's logits and its softmax over the experts run in float32 (a near-tie between two experts could choose another one)"
VERIFY = {
    "deepseek_v3": Verification(O_PROJ, (FLOAT32_RMSNORM, FLOAT32_ROPE, FLOAT32_SOFTMAX, FLOAT32_ROUTER), eager_experts=True),
    "deepseek_v2": Verification(O_PROJ, (FLOAT32_RMSNORM, FLOAT32_COMPLEX_ROPE, FLOAT32_SOFTMAX, FLOAT32_SOFTMAX_ROUTER), eager_experts=True),
}


def _v2_router(raw: Mapping[str, Any]) -> str:
    """V2's router: a softmax over the experts, no correction bias, no renormalising."""
    groups, kept = whole(raw, "n_group"), whole(raw, "topk_group")
    if raw.get("topk_method") == "group_limited_greedy" and groups and kept:
        return f"a softmax router picks them within the {kept} of {groups} groups whose best expert scores highest"
    return "a softmax router picks the best-scoring experts (greedy)"


def _v3_router(raw: Mapping[str, Any]) -> str:
    """V3's router: sigmoid scores, the correction bias in the choice only, groups, normalised weights × the scaling
    (DeepseekV3Config's defaults where a key is left out: 8 groups, 4 kept, normalised, × 2.5)."""
    groups, kept = whole(raw, "n_group") or 8, whole(raw, "topk_group") or 4
    scaling = raw.get("routed_scaling_factor", 2.5)
    scaled = f" × {scaling:g}" if isinstance(scaling, int | float) and not isinstance(scaling, bool) else ""
    where = f"within the {kept} of {groups} groups whose two best experts score highest" if groups > 1 else "among all experts"
    weights = "normalised to sum to 1" if raw.get("norm_topk_prob", True) is not False else "not normalised"
    return (f"a sigmoid router picks them {where}, the correction bias (e_score_correction_bias) added for the choice "
            f"only; their weights are their sigmoid scores, {weights},{scaled}")  # fmt: skip


DESCRIPTION = {
    "deepseek_v2": Description(interleaved_rope=lambda raw: True, router=_v2_router),  # MLA's rope part turns interleaved pairs
    "deepseek_v3": Description(interleaved_rope=lambda raw: raw.get("rope_interleave", True) is not False, router=_v3_router),
}
