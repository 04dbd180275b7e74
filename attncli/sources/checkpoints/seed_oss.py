"""Seed-OSS (ByteDance Seed-OSS-36B): Llama's layer with q, k and v biased (attention_bias, true) and o apart (attention_out_bias).

transformers' SeedOssAttention: q_proj, k_proj and v_proj carry biases when attention_bias (true by default),
o_proj when attention_out_bias (false by default); RoPE rotate-half, grouped-query, √d_k, causal; the MLP is
Llama's SwiGLU (biased when mlp_bias). Everything else is llama.py's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.config import ModelConfig, _Reader, llama_like, no_windows
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata, renamed

layer_inputs = llama.layer_inputs
VERIFY = llama.VERIFY  # Llama's float32 steps: RMSNorm, RoPE, softmax

DEFAULTS: dict[str, Any] = {
    "layers": 64, "hidden": 4096, "heads": 80, "kv": 8, "positions": 524288, "inter": 27648, "head_dim": 128,
}  # SeedOssConfig  # fmt: skip


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with Seed-OSS's defaults; its two bias switches and mlp_bias."""
    cfg = llama_like(read, "seed_oss", DEFAULTS, windows=no_windows, mlp_bias=True)
    return dataclasses.replace(cfg, qkv_bias=read.flag("attention_bias", True), output_bias=read.flag("attention_out_bias", False))


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """Seed-OSS's bias switches from the tensors the file has (the converter writes what the checkpoint has)."""
    return {
        **llama.gguf_keys(file, a, raw, head_dim),
        "attention_out_bias": "blk.0.attn_output.bias" in file.tensors,
        "mlp_bias": "blk.0.ffn_up.bias" in file.tensors,
    }


# SeedOssModel only renames; gguf-py names the norm before the MLP post_attention_norm
GGUF_NAMES = (
    *renamed(llama.GGUF_NAMES, "post_attention_layernorm"),
    (r"layers\.(\d+)\.post_attention_layernorm\.weight", r"blk.\1.post_attention_norm.weight"),
)
GGUF = (GgufArchitecture("seed_oss", "seed_oss", GGUF_NAMES, keys=gguf_keys),)
