"""Qwen3: Llama's layer (RMSNorm before attention and MLP, RoPE rotate-half, grouped-query attention, SwiGLU) with QK-norm.

Each head's q and k go through RMSNorm over head_dim before RoPE (transformers' Qwen3Attention: `q_norm`,
`k_norm` applied to the (…, heads, head_dim) view), one weight of head_dim numbers shared by all heads,
ε = rms_norm_eps. Everything else is llama.py's.
"""

from __future__ import annotations

from typing import Any

from attncli.core.variants import Rope
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import AttentionWeights, Weights
from attncli.sources.checkpoints.config import (
    FLOAT32_QK_NORM,
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    O_PROJ,
    Description,
    LlamaLike,
    ModelConfig,
    QkNormKind,
    Verification,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture

DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 4096, "heads": 32, "kv": 32, "positions": 32768, "inter": 22016, "head_dim": 128}  # Qwen3Config
# Llama's keys with Qwen3's defaults; attention_bias read; windows by use_sliding_window, as Qwen2's; QK-norm per head
QK_NORM = QkNormKind(over="head")
LLAMA_LIKE = LlamaLike("qwen3", "Qwen3", DEFAULTS, qk_norm=QK_NORM, attention_bias=True)


def _attention(cfg: ModelConfig[Any], w: Weights, index: int, rope: Rope | None) -> AttentionWeights:
    """Llama's projections of layer `index` with Qwen3's QK-norm per head: for Qwen3-MoE (qwen3_moe.py), whose MLP keeps it code."""
    return llama.with_qk_norm(cfg, w, index, llama._attention(cfg, w, index, rope), QK_NORM)


# -- GGUF and model verify: Llama's names and its q_norm, k_norm; the rotate-half order kept (llama.cpp turns it as NeoX does)
GGUF = (GgufArchitecture("qwen3", "qwen3", (*llama.GGUF_NAMES, *llama.GGUF_QK_NORMS), keys=llama.gguf_keys),)
VERIFY = Verification(O_PROJ, (FLOAT32_QK_NORM, FLOAT32_ROPE, FLOAT32_SOFTMAX))
DESCRIPTION = Description(qk_norm=QK_NORM.words())  # qwen3_moe has its own module (qwen3_moe.py)
