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

layer_inputs = llama.layer_inputs
VERIFY = llama.VERIFY  # Llama's float32 steps: RMSNorm, RoPE, softmax

DEFAULTS: dict[str, Any] = {
    "layers": 64, "hidden": 4096, "heads": 80, "kv": 8, "positions": 524288, "inter": 27648, "head_dim": 128,
}  # SeedOssConfig  # fmt: skip


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with Seed-OSS's defaults; its two bias switches and mlp_bias."""
    cfg = llama_like(read, "seed_oss", DEFAULTS, windows=no_windows, mlp_bias=True)
    return dataclasses.replace(cfg, qkv_bias=read.flag("attention_bias", True), output_bias=read.flag("attention_out_bias", False))
