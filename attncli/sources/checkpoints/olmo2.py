"""OLMo 2: no norm before attention or MLP, RMSNorm after each (post-norms), and QK-norm over the whole projection.

transformers' Olmo2DecoderLayer: h = x + post_attention_layernorm(attention(x)), then
h + post_feedforward_layernorm(mlp(h)); the attention block reads the raw residual stream. Its
Olmo2Attention normalises q_proj(x) with `q_norm` (H·head_dim weights) and k_proj(x) with `k_norm`
(G·head_dim weights), each over the whole projection before the split into heads, then RoPE
rotate-half, grouped-query attention, √d_k, causal. The projections, RoPE, the SwiGLU MLP and the
notes are llama.py's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from attncli.core.variants import QkNorm, Rope
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import AttentionWeights, LayerInputs, Weights, self_attention, through
from attncli.sources.checkpoints.config import (
    FLOAT32_QK_NORM,
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    O_PROJ,
    Description,
    ModelConfig,
    Verification,
    _Reader,
    llama_like,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata, layer_types, renamed
from attncli.sources.checkpoints.source import TensorSource


def _attention(cfg: ModelConfig, w: Weights, index: int, rope: Rope) -> AttentionWeights:
    """Llama's projections of layer `index`, and its q_norm (H·d_k weights) and k_norm (G·d_k) over the whole projection."""
    p = f"layers.{index}.self_attn."
    H, G, d_k = cfg.heads, cfg.kv_heads, cfg.head_dim
    norm = QkNorm(w.get(p + "q_norm.weight", (H * d_k,)), w.get(p + "k_norm.weight", (G * d_k,)), eps=cfg.norm_eps, over="whole")
    return dataclasses.replace(llama._attention(cfg, w, index, rope), qk_norm=norm)


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray, rope: Rope) -> np.ndarray:
    """(L, d) the residual after layer `index`: h + post_attention_layernorm(attention(h)), then + post_feedforward_layernorm(mlp)."""
    p = f"layers.{index}."
    h = h + llama._norm(cfg, w, p + "post_attention_layernorm", self_attention(h, _attention(cfg, w, index, rope)))  # (L, d)
    out: np.ndarray = h + llama._norm(cfg, w, p + "post_feedforward_layernorm", llama._mlp(cfg, w, index, h))  # (L, d)
    return out


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = the residual stream entering `layer` (from 1), unnormalised, and that layer's attention with its QK-norm."""
    w, rope = llama.weights_and_rope(cfg, checkpoint)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h, rope)
    attention = _attention(cfg, w, layer - 1, rope)
    dtype = w.dtype(f"layers.{layer - 1}.self_attn.q_proj.weight")
    first = f"X = the residual stream entering layer {layer}, not normalised (OLMo 2 norms after attention and MLP): token embeddings{through(layer)}"
    return LayerInputs(X=h, attention=attention, dtype=dtype, notes=llama.notes(cfg, layer, rope, attention, dtype, first=first))


DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 4096, "heads": 32, "kv": None, "positions": 2048, "inter": 11008, "eps": 1e-5}  # Olmo2Config


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with OLMo 2's defaults; attention_bias read."""
    return llama_like(read, "olmo2", DEFAULTS, attention_bias=True)


# -- GGUF and model verify: no norm before attention or MLP; the post-norms are post_attention_norm and post_ffw_norm
GGUF_NAMES = (
    *renamed(llama.GGUF_NAMES, "layernorm"),
    *llama.GGUF_QK_NORMS,
    (r"layers\.(\d+)\.post_attention_layernorm\.weight", r"blk.\1.post_attention_norm.weight"),
    (r"layers\.(\d+)\.post_feedforward_layernorm\.weight", r"blk.\1.post_ffw_norm.weight"),
)


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """OLMo 2's keys; a file with a sliding window is OLMo 3, which the converter writes as architecture olmo2 with its
    window and its per-layer pattern (Olmo2Model.set_gguf_parameters)."""
    keys = llama.gguf_keys(file, a, raw, head_dim)
    if not file.has_key(a + "attention.sliding_window"):
        return keys
    layers = raw["num_hidden_layers"]
    return {**keys, "model_type": "olmo3", "sliding_window": file.count(a + "attention.sliding_window"), "layer_types": layer_types(file, a, layers, 4)}


GGUF = (GgufArchitecture("olmo2", "olmo2", GGUF_NAMES, keys=gguf_keys),)
VERIFY = Verification(O_PROJ, (FLOAT32_QK_NORM, FLOAT32_ROPE, FLOAT32_SOFTMAX))
DESCRIPTION = Description(qk_norm="over the whole q and k projections (all heads at once)")
