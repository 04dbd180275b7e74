"""Qwen3: Llama's layer (RMSNorm before attention and MLP, RoPE rotate-half, grouped-query attention, SwiGLU) with QK-norm.

Each head's q and k go through RMSNorm over head_dim before RoPE (transformers' Qwen3Attention: `q_norm`,
`k_norm` applied to the (…, heads, head_dim) view), one weight of head_dim numbers shared by all heads,
ε = rms_norm_eps. Everything else is llama.py's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from attncli.core.variants import QkNorm, Rope
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import AttentionWeights, LayerInputs, Weights
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
from attncli.sources.checkpoints.gguf_family import GgufArchitecture
from attncli.sources.checkpoints.source import TensorSource


def _attention(cfg: ModelConfig, w: Weights, index: int, rope: Rope) -> AttentionWeights:
    """Llama's projections of layer `index`, and its q_norm and k_norm (head_dim weights each, shared by the heads)."""
    p = f"layers.{index}.self_attn."
    norm = QkNorm(w.get(p + "q_norm.weight", (cfg.head_dim,)), w.get(p + "k_norm.weight", (cfg.head_dim,)), eps=cfg.norm_eps, over="head")
    return dataclasses.replace(llama._attention(cfg, w, index, rope), qk_norm=norm)


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm (RMSNorm) of the residual entering `layer` (from 1), and that layer's attention with its QK-norm."""
    return llama.layer_inputs(cfg, checkpoint, ids, layer, attention=_attention)


DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 4096, "heads": 32, "kv": 32, "positions": 32768, "inter": 22016, "head_dim": 128}  # Qwen3Config


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with Qwen3's defaults; attention_bias read; windows by use_sliding_window, as Qwen2's."""
    return llama_like(read, "qwen3", DEFAULTS, attention_bias=True)


# -- GGUF and model verify: Llama's names and its q_norm, k_norm; the rotate-half order kept (llama.cpp turns it as NeoX does)
GGUF = (GgufArchitecture("qwen3", "qwen3", (*llama.GGUF_NAMES, *llama.GGUF_QK_NORMS), keys=llama.gguf_keys),)
VERIFY = Verification(O_PROJ, (FLOAT32_QK_NORM, FLOAT32_ROPE, FLOAT32_SOFTMAX))
DESCRIPTION = Description(qk_norm="per head (one RMSNorm weight of head_dim, shared by the heads)")
