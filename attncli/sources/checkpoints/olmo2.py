"""OLMo 2: no norm before attention or MLP, RMSNorm after each (post-norms), and QK-norm over the whole projection.

transformers' Olmo2DecoderLayer: h = x + post_attention_layernorm(attention(x)), then
h + post_feedforward_layernorm(mlp(h)); the attention block reads the raw residual stream. Its
Olmo2Attention normalises q_proj(x) with `q_norm` (H·head_dim weights) and k_proj(x) with `k_norm`
(G·head_dim weights), each over the whole projection before the split into heads, then RoPE
rotate-half, grouped-query attention, √d_k, causal. The module is its declaration (`LLAMA_LIKE`, a config.LlamaLike):
llama.py computes it.
"""

from __future__ import annotations

from typing import Any

from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.config import (
    FLOAT32_QK_NORM,
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    O_PROJ,
    Description,
    LlamaLike,
    QkNormKind,
    Verification,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata, layer_types, renamed

DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 4096, "heads": 32, "kv": None, "positions": 2048, "inter": 11008, "eps": 1e-5}  # Olmo2Config
# Llama's keys with OLMo 2's defaults; attention_bias read; QK-norm over the whole projection; norms after attention and MLP
QK_NORM = QkNormKind(over="whole")
LLAMA_LIKE = LlamaLike("olmo2", "OLMo 2", DEFAULTS, qk_norm=QK_NORM, norms="post", attention_bias=True)


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
DESCRIPTION = Description(qk_norm=QK_NORM.words())
