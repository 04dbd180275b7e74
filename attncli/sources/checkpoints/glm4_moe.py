"""GLM-4.5 (glm4_moe): partial rotary on the two halves, an optional QK-norm, and DeepSeek V3's mixture of experts.

transformers' Glm4MoeDecoderLayer: Llama's pre-norm block. Glm4MoeAttention: q, k, v projections (biased when
attention_bias), o_proj without; with use_qk_norm, `q_norm` and `k_norm` (RMSNorm over each head's head_dim,
one weight shared by the heads) before RoPE; RoPE rotate-half on the first r = head_dim · partial_rotary_factor
coordinates of each head (0.5 when config.json names none: GPT-NeoX's split, not GLM-4's interleaved pairs);
grouped-query; scores × d_k^−½; causal. The MLP of the first `first_k_dense_replace` layers is Llama's SwiGLU;
after them DeepSeek V3's (deepseek.py): a float32 sigmoid router whose correction bias chooses but does not weigh,
the chosen scores renormalised (norm_topk_prob) and × routed_scaling_factor, plus the shared experts. GLM-4.5 routes
with one group (n_group 1); more groups are refused rather than guessed.
Code, not a declaration (config.LlamaLike): DeepSeek V3's mixture of experts is a mechanism of its own, whose choices the
header reports layer by layer, which no field of a declaration says.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from attncli.core.variants import QkNorm, Rope
from attncli.sources.checkpoints import deepseek, llama
from attncli.sources.checkpoints.blocks import AttentionWeights, LayerInputs, Weights, rms_norm, self_attention, through
from attncli.sources.checkpoints.config import (
    FLOAT32_QK_NORM,
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    MOST,
    O_PROJ,
    Description,
    ModelConfig,
    Verification,
    _Reader,
    llama_like,
    names_partial,
    no_windows,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata, renamed
from attncli.sources.checkpoints.source import TensorSource


def _count(read: _Reader, key: str, default: int, *, minimum: int = 1, most: int = MOST["heads"]) -> int:
    return read.count(key, default=default, minimum=minimum, most=most)


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with GLM-4.5's defaults, partial rotary 0.5 unless named, o_proj unbiased; its QK-norm switch and experts."""
    cfg = llama_like(read, "glm4_moe", DEFAULTS, windows=no_windows)
    assert cfg.rope is not None
    named = names_partial(read)
    experts = _count(read, "n_routed_experts", 128)
    groups = _count(read, "n_group", 1, most=experts)
    if groups != 1:
        raise read.fail("n_group", f"{groups} expert groups: attncli reads GLM-4.5's router with one group", "1, as GLM-4.5 and GLM-4.6 have it")
    scaling = read.number("routed_scaling_factor", 1.0, most=1e6)
    ds = deepseek.DeepseekConfig(
        q_lora_rank=None, kv_lora_rank=0, nope=0, rope=0, v_dim=0, interleave=False,  # no latent attention: DeepSeek's MoE only
        experts=experts, per_token=_count(read, "num_experts_per_tok", 8, most=experts),
        shared=_count(read, "n_shared_experts", 1, minimum=0), groups=1, top_groups=1,
        dense_layers=_count(read, "first_k_dense_replace", 1, minimum=0, most=MOST["layers"]),
        moe_inner=_count(read, "moe_intermediate_size", 1408, most=MOST["inner"]), scaling=scaling,
        norm_topk=read.flag("norm_topk_prob", True),
    )  # fmt: skip
    return dataclasses.replace(
        cfg, rope=cfg.rope if named else dataclasses.replace(cfg.rope, partial=0.5), qkv_bias=read.flag("attention_bias", False),
        output_bias=False, family=Glm4MoeSettings(ds, read.flag("use_qk_norm", False)),
    )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Glm4MoeSettings:
    """GLM-4.5's own keys: DeepSeek V3's MoE settings (its MLA fields unused) and whether q and k are RMS-normalised."""

    moe: deepseek.DeepseekConfig
    qk_norm: bool  # use_qk_norm


def settings(cfg: ModelConfig) -> Glm4MoeSettings:
    assert isinstance(cfg.family, Glm4MoeSettings)
    return cfg.family


DEFAULTS: dict[str, Any] = {"layers": 46, "hidden": 4096, "heads": 96, "kv": 8, "positions": 131072, "inter": 10944, "eps": 1e-5}  # Glm4MoeConfig


def _attention(cfg: ModelConfig, w: Weights, index: int, rope: Rope) -> AttentionWeights:
    """Llama's projections of layer `index`, with q_norm and k_norm per head when use_qk_norm."""
    base = llama._attention(cfg, w, index, rope)
    if not settings(cfg).qk_norm:
        return base
    p, d_k = f"layers.{index}.self_attn.", cfg.head_dim
    return dataclasses.replace(base, qk_norm=QkNorm(w.get(p + "q_norm.weight", (d_k,)), w.get(p + "k_norm.weight", (d_k,)), eps=cfg.norm_eps, over="head"))


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray, rope: Rope) -> tuple[np.ndarray, np.ndarray | None]:
    """(L, d) the residual after layer `index`, and (L, k) the experts each token used (None in a dense layer)."""
    ds, p = settings(cfg).moe, f"layers.{index}."
    h = h + self_attention(llama._norm(cfg, w, p + "input_layernorm", h), _attention(cfg, w, index, rope))  # (L, d)
    x = rms_norm(h, w.get(p + "post_attention_layernorm.weight", (cfg.hidden_size,)), cfg.norm_eps)  # (L, d)
    if index < ds.dense_layers:
        return h + llama._mlp(cfg, w, index, x), None
    out, chosen = deepseek._moe(cfg, ds, w, index, x)
    return h + out, chosen


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm (RMSNorm) of the residual entering `layer` (from 1), that layer's attention, and the experts used before."""
    w, rope = llama.weights_and_rope(cfg, checkpoint)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    experts: list[np.ndarray | None] = []
    for index in range(layer - 1):
        h, chosen = _layer(cfg, w, index, h, rope)
        experts.append(chosen)
    index = layer - 1
    X = llama._norm(cfg, w, f"layers.{index}.input_layernorm", h)  # (L, d)
    attention = _attention(cfg, w, index, rope)
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    ds = settings(cfg).moe
    first = (f"X = input_layernorm (RMSNorm) of the residual entering layer {layer}: token embeddings{through(layer)}"
             + (f", the MLPs after layer {ds.dense_layers} mixtures of experts ({deepseek._router_note(ds)}, {ds.shared} shared)"
                if any(e is not None for e in experts) else ""))  # fmt: skip
    notes = llama.notes(cfg, layer, rope, attention, dtype, first=first)
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=(*notes[:-1], *deepseek._experts_note(experts, ds), notes[-1]))


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json: layer 1's projections, and its dense MLP or router."""
    d, H, G, d_k, ds = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim, settings(cfg).moe
    mlp = {"layers.0.mlp.gate_proj.weight": (cfg.intermediate_size, d)} if ds.dense_layers else {"layers.0.mlp.gate.weight": (ds.experts, d)}
    return {
        "embed_tokens.weight": (None, d),
        "layers.0.self_attn.q_proj.weight": (H * d_k, d),
        "layers.0.self_attn.k_proj.weight": (G * d_k, d),
        **mlp,
    }


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """GLM-4.5's config.json keys from the metadata under glm4moe.… (Glm4MoeModel.set_gguf_parameters undone); use_qk_norm from
    the tensors. A router other than the sigmoid is refused, as deepseek.py refuses one. The converter appends GLM-4.5's
    multi-token-prediction layers (num_nextn_predict_layers, 1 in the published configs) as the last blocks and counts them
    in block_count, with nextn_predict_layers saying how many: they are not layers of the model (transformers reads
    num_hidden_layers of them; llama.cpp runs n_layer − nextn_predict_layers), so they are not counted here."""
    gating = file.value(a + "expert_gating_func")
    if gating != 2:
        raise file.fail(f"expert_gating_func {gating!r}", key=a + "expert_gating_func", expected="2 (sigmoid), as GLM-4.5 routes")
    blocks = raw["num_hidden_layers"]
    nextn = file.count(a + "nextn_predict_layers", default=0, minimum=0)
    if nextn >= blocks:
        raise file.fail(f"{nextn} of the {blocks} blocks are next-token-prediction layers", key=a + "nextn_predict_layers",
                        expected=f"fewer than block_count ({blocks})")  # fmt: skip
    return {
        **llama.gguf_keys(file, a, raw, head_dim),
        "num_hidden_layers": blocks - nextn,
        "n_routed_experts": file.count(a + "expert_count"),
        "num_experts_per_tok": file.count(a + "expert_used_count"),
        "moe_intermediate_size": file.count(a + "expert_feed_forward_length"),
        "n_shared_experts": file.count(a + "expert_shared_count", default=0, minimum=0),
        "first_k_dense_replace": file.count(a + "leading_dense_block_count", default=0, minimum=0),
        "routed_scaling_factor": file.number(a + "expert_weights_scale", default=1.0),
        "norm_topk_prob": file.value(a + "expert_weights_norm") is True,
        "n_group": file.count(a + "expert_group_count", default=1),
        "use_qk_norm": "blk.0.attn_q_norm.weight" in file.tensors,
    }


# llama.cpp's glm4moe: Llama's names with the pre-MLP norm as post_attention_norm, QK-norm, the router, its correction bias,
# the shared experts; the routed experts merged (deepseek.gguf_joined takes one out); nothing permuted (rotate-half kept)
GGUF_NAMES = (
    *renamed(llama.GGUF_NAMES, "post_attention_layernorm"),
    *llama.GGUF_QK_NORMS,
    (r"layers\.(\d+)\.post_attention_layernorm\.weight", r"blk.\1.post_attention_norm.weight"),
    *[entry for entry in deepseek.GGUF_NAMES if "mlp" in entry[0]],
)
GGUF = (GgufArchitecture("glm4moe", "glm4_moe", GGUF_NAMES, keys=gguf_keys, joined=deepseek.gguf_joined),)
VERIFY = Verification(O_PROJ, (FLOAT32_QK_NORM, FLOAT32_ROPE, FLOAT32_SOFTMAX, deepseek.FLOAT32_ROUTER), eager_experts=True)
DESCRIPTION = Description(
    qk_norm=lambda raw: "per head (one RMSNorm weight of head_dim, shared by the heads)" if raw.get("use_qk_norm") is True else None,
    router=lambda raw: "a float32 sigmoid router; its correction bias (e_score_correction_bias) chooses the experts but does not weigh "
    "them; the chosen scores renormalised and × routed_scaling_factor",
)
