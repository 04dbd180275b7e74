"""Qwen3-MoE: Qwen3's attention (QK-norm per head, RoPE rotate-half, grouped-query) with a mixture-of-experts MLP.

transformers' Qwen3MoeDecoderLayer: Llama's pre-norm block; its attention is Qwen3's (qwen3.py), with a sliding
window on every layer when use_sliding_window. The MLP of layer i (from 0) is a mixture of experts unless i is in
`mlp_only_layers` or (i + 1) is not a multiple of `decoder_sparse_step` (then Llama's SwiGLU of intermediate_size):
router logits x·Wᵀ (mlp.gate, no bias), a softmax over all experts in float32, each token's top k probabilities
(renormalised over those k when norm_topk_prob), and the sum of the chosen experts' SwiGLU outputs
(moe_intermediate_size each) by those weights (moe.softmax_top_k).
Code, not a declaration (config.LlamaLike): its mixture of experts is a mechanism of its own, whose choices the header
reports layer by layer (which experts each token used), which no field of a declaration says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from attncli.core.variants import Rope
from attncli.sources.checkpoints import deepseek, llama, moe, qwen3
from attncli.sources.checkpoints.blocks import LayerInputs, Weights, activate, self_attention, through
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
    _shown,
    _window,
    llama_like,
    whole,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata
from attncli.sources.checkpoints.source import TensorSource


class Qwen3MoeSettings(NamedTuple):
    """What Qwen3-MoE reads beyond the Llama-like keys (transformers' Qwen3MoeConfig defaults)."""

    experts: int  # num_experts
    top_k: int  # num_experts_per_tok
    inner: int  # moe_intermediate_size
    normalise: bool  # norm_topk_prob
    sparse: tuple[bool, ...]  # per layer, whether its MLP is the mixture of experts


def settings(cfg: ModelConfig) -> Qwen3MoeSettings:
    assert isinstance(cfg.family, Qwen3MoeSettings)
    return cfg.family


DEFAULTS: dict[str, Any] = {"layers": 24, "hidden": 2048, "heads": 32, "kv": 4, "positions": 32768, "inter": 6144}  # Qwen3MoeConfig


def _windows(read: _Reader, layers: int) -> tuple[int | None, ...]:
    """sliding_window on every layer when use_sliding_window (Qwen3MoeAttention reads config.sliding_window on each)."""
    size = read.raw.get("sliding_window", 4096)
    if not read.flag("use_sliding_window", False) or size is None:
        return (None,) * layers
    return (_window(read, "sliding_window", size),) * layers


def read_config(read: _Reader) -> ModelConfig:
    """Qwen3's keys with Qwen3-MoE's defaults, and its experts: which layers, how many, how many per token."""
    cfg = llama_like(read, "qwen3_moe", DEFAULTS, windows=_windows, attention_bias=True)
    experts = read.count("num_experts", "num_local_experts", default=128, minimum=0, most=MOST["heads"])
    top_k = read.count("num_experts_per_tok", default=8, most=max(experts, 1))
    step = read.count("decoder_sparse_step", default=1, most=MOST["layers"])
    dense = read.raw.get("mlp_only_layers") or []
    if not isinstance(dense, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in dense):
        raise read.fail("mlp_only_layers", f"found {_shown(dense)}", "a list of layer numbers from 0")
    sparse = tuple(i not in dense and experts > 0 and (i + 1) % step == 0 for i in range(cfg.layers))
    inner = read.count("moe_intermediate_size", default=768, most=MOST["inner"])
    return dataclasses.replace(cfg, family=Qwen3MoeSettings(experts, top_k, inner, read.flag("norm_topk_prob", False), sparse))


def _experts(cfg: ModelConfig, w: Weights, index: int, x: np.ndarray) -> tuple[np.ndarray, moe.Routing]:
    """(L, d) layer `index`'s mixture of experts on x, and which experts each token used."""
    s = settings(cfg)
    d, p = cfg.hidden_size, f"layers.{index}.mlp."
    logits = x @ w.get(p + "gate.weight", (s.experts, d)).T  # (L, E)
    routing = moe.softmax_top_k(logits, s.top_k, normalise=s.normalise, layer=index + 1)
    out = np.zeros_like(x)  # (L, d)
    for expert in np.unique(routing.experts):
        tokens, slot = np.nonzero(routing.experts == expert)  # the tokens that use it, and where in their top k
        e = f"{p}experts.{int(expert)}."
        hidden = activate(cfg.activation, llama._linear(w, e + "gate_proj", x[tokens], s.inner, False))  # (L_e, inner)
        hidden *= llama._linear(w, e + "up_proj", x[tokens], s.inner, False)
        out[tokens] += routing.weights[tokens, slot][:, None] * llama._linear(w, e + "down_proj", hidden, d, False)  # (L_e, d)
    return out, routing


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray, rope: Rope) -> tuple[np.ndarray, moe.Routing | None]:
    """(L, d) the residual after layer `index`: h + attention(norm h), then + its MLP (experts or dense); and its routing."""
    p = f"layers.{index}."
    h = h + self_attention(llama._norm(cfg, w, p + "input_layernorm", h), qwen3._attention(cfg, w, index, rope))  # (L, d)
    x = llama._norm(cfg, w, p + "post_attention_layernorm", h)  # (L, d)
    if not settings(cfg).sparse[index]:
        return h + llama._mlp(cfg, w, index, x), None
    mixed, routing = _experts(cfg, w, index, x)
    return h + mixed, routing


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm (RMSNorm) of the residual entering `layer` (from 1), that layer's attention, and the experts used before."""
    w, rope = llama.weights_and_rope(cfg, checkpoint)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    routings = []
    for index in range(layer - 1):
        h, routing = _layer(cfg, w, index, h, rope)
        routings += [routing] if routing is not None else []
    index = layer - 1
    X = llama._norm(cfg, w, f"layers.{index}.input_layernorm", h)  # (L, d)
    attention = qwen3._attention(cfg, w, index, rope)
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    s = settings(cfg)
    first = (f"X = input_layernorm (RMSNorm) of the residual entering layer {layer}: token embeddings{through(layer)}"
             + (f", the MLPs mixtures of experts (top {s.top_k} of {s.experts})" if routings else ""))  # fmt: skip
    notes = llama.notes(cfg, layer, rope, attention, dtype, first=first)
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=(*notes[:-1], *map(moe.routing_note, routings), notes[-1]))


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json: layer 1's attention and QK-norm, and its router or dense MLP."""
    d, H, G, d_k, s = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim, settings(cfg)
    mlp = {"layers.0.mlp.gate.weight": (s.experts, d)} if s.sparse[0] else {"layers.0.mlp.gate_proj.weight": (cfg.intermediate_size, d)}
    return {
        "embed_tokens.weight": (None, d),
        "layers.0.self_attn.q_proj.weight": (H * d_k, d),
        "layers.0.self_attn.k_proj.weight": (G * d_k, d),
        "layers.0.self_attn.q_norm.weight": (d_k,),
        **mlp,
    }


def _router(raw: Mapping[str, Any]) -> str:
    """How Qwen3-MoE's router picks, in `model info`'s words."""
    normalise = raw.get("norm_topk_prob") is True
    dense = raw.get("mlp_only_layers")
    step = whole(raw, "decoder_sparse_step") or 1
    text = "a softmax over all experts (float32), each token's top k, " + (
        "their weights renormalised to sum to 1 (norm_topk_prob)" if normalise else "their probabilities used as they are (norm_topk_prob false)"
    )
    listed = [str(i + 1) for i in dense if isinstance(i, int)] if isinstance(dense, list) else []
    if listed:
        text += f"; {'layer ' + listed[0] + ' keeps' if len(listed) == 1 else 'layers ' + ', '.join(listed) + ' keep'} a dense MLP (mlp_only_layers)"
    if step > 1:
        text += f"; experts only on every {step}th layer (decoder_sparse_step)"
    return text


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """Qwen3-MoE's config.json keys from the metadata under qwen3moe.…: the experts' counts and size; norm_topk_prob true, as
    llama.cpp's qwen3moe graph always renormalises the chosen weights; a layer without a router is a dense one (mlp_only_layers)."""
    layers = raw["num_hidden_layers"]
    return {
        **llama.gguf_keys(file, a, raw, head_dim),
        "num_experts": file.count(a + "expert_count"),
        "num_experts_per_tok": file.count(a + "expert_used_count"),
        "moe_intermediate_size": file.count(a + "expert_feed_forward_length"),
        "norm_topk_prob": True,
        "mlp_only_layers": [i for i in range(layers) if f"blk.{i}.ffn_gate_inp.weight" not in file.tensors],
    }


# llama.cpp's qwen3moe: Qwen3's names, the router as ffn_gate_inp, the experts merged (deepseek.gguf_joined takes one out)
GGUF = (
    GgufArchitecture(
        "qwen3moe", "qwen3_moe", (*llama.GGUF_NAMES, *llama.GGUF_QK_NORMS, (r"layers\.(\d+)\.mlp\.gate\.weight", r"blk.\1.ffn_gate_inp.weight")),
        keys=gguf_keys, joined=deepseek.gguf_joined,
    ),
)
FLOAT32_ROUTER = "the router's softmax runs with dtype=float32 (its top k chosen from float32 probabilities)"
VERIFY = Verification(O_PROJ, (FLOAT32_QK_NORM, FLOAT32_ROPE, FLOAT32_SOFTMAX, FLOAT32_ROUTER), eager_experts=True)
DESCRIPTION = Description(qk_norm=qwen3.DESCRIPTION.qk_norm, router=_router)
