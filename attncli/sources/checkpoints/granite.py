"""Granite (IBM Granite 3): Llama's layer with four multipliers — of the scores, the embeddings, each block's output, the logits.

transformers' GraniteModel: token embeddings × embedding_multiplier; GraniteDecoderLayer: h + residual_multiplier ·
attention(input_layernorm h), then h + residual_multiplier · mlp(post_attention_layernorm h); GraniteAttention is
Llama's (RoPE rotate-half, grouped-query, causal) with its scores multiplied by attention_multiplier in place of
1/√d_k (Granite 3's 1/128 for d_k = 128, where Llama would take 1/√128); the logits are divided by logits_scaling,
which no attention reads. The module is its declaration (`LLAMA_LIKE`): the three multipliers attention reads.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.config import LlamaLike, LlamaSettings, ModelConfig, _Reader, no_windows, read_raw
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata

DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 4096, "heads": 32, "kv": None, "positions": 2048, "inter": 11008}  # GraniteConfig
# Llama's keys with Granite's defaults (attention_bias and mlp_bias read, no windows), and its multipliers (1 each by default)
LLAMA_LIKE = LlamaLike("granite", "Granite", DEFAULTS, windows=no_windows, attention_bias=True, mlp_bias=True,
                       score_multiplier="attention_multiplier", embedding_multiplier="embedding_multiplier",
                       residual_multiplier="residual_multiplier")  # fmt: skip


def mechanisms(cfg: ModelConfig[LlamaSettings], folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of Granite beyond describe.py: its four multipliers."""
    s = cfg.family
    assert s.divisor is not None
    keys = raw if raw is not None else read_raw(folder)[0]
    logits = _Reader(keys, "config.json").number("logits_scaling", 1.0)  # divides the logits: no attention reads it
    return [
        f"scores × attention_multiplier = {1 / s.divisor:g} in place of 1/√head_dim = 1/√{cfg.head_dim}",
        f"embeddings × embedding_multiplier = {s.embedding:g}; each attention and MLP output × residual_multiplier = {s.residual:g} "
        f"before it joins the residual; logits ÷ logits_scaling = {logits:g}",
    ]


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """Granite's config.json keys from the metadata: GraniteModel writes the multipliers as attention.scale, embedding_scale,
    residual_scale and logit_scale, each only when set; llama.cpp takes 1/√d_k for a missing attention.scale and 1 for the others."""
    return {
        **llama.gguf_keys(file, a, raw, head_dim),
        "mlp_bias": "blk.0.ffn_up.bias" in file.tensors,
        "attention_multiplier": file.number(a + "attention.scale", default=1.0 / math.sqrt(head_dim)),
        "embedding_multiplier": file.number(a + "embedding_scale", default=1.0),
        "residual_multiplier": file.number(a + "residual_scale", default=1.0),
        "logits_scaling": file.number(a + "logit_scale", default=1.0),
    }


# GraniteModel is LlamaModel's converter: W_Q's and W_K's rows permuted to interleaved pairs, put back on reading
GGUF = (GgufArchitecture("granite", "granite", llama.GGUF_NAMES, keys=gguf_keys, interleaved_qk=True),)
VERIFY = llama.VERIFY  # Llama's float32 steps: RMSNorm, RoPE, softmax
