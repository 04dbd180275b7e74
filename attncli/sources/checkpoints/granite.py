"""Granite (IBM Granite 3): Llama's layer with four multipliers — of the scores, the embeddings, each block's output, the logits.

transformers' GraniteModel: token embeddings × embedding_multiplier; GraniteDecoderLayer: h + residual_multiplier ·
attention(input_layernorm h), then h + residual_multiplier · mlp(post_attention_layernorm h); GraniteAttention is
Llama's (RoPE rotate-half, grouped-query, causal) with its scores multiplied by attention_multiplier in place of
1/√d_k (Granite 3's 1/128 for d_k = 128, where Llama would take 1/√128); the logits are divided by logits_scaling,
which no attention reads. The projections, norms, MLP and notes are llama.py's.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from attncli.core.variants import Rope
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import AttentionWeights, LayerInputs, Weights, self_attention, through
from attncli.sources.checkpoints.config import ModelConfig, _Reader, llama_like, no_windows
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata
from attncli.sources.checkpoints.source import TensorSource


class GraniteSettings(NamedTuple):
    """Granite's multipliers (transformers' GraniteConfig defaults: 1 each)."""

    attention: float  # attention_multiplier: the scores' factor, the divisor 1/attention_multiplier
    embedding: float  # embedding_multiplier
    residual: float  # residual_multiplier
    logits: float  # logits_scaling: the logits are divided by it


def settings(cfg: ModelConfig) -> GraniteSettings:
    assert isinstance(cfg.family, GraniteSettings)
    return cfg.family


DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 4096, "heads": 32, "kv": None, "positions": 2048, "inter": 11008}  # GraniteConfig


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with Granite's defaults (attention_bias and mlp_bias read, no windows), and its four multipliers."""
    cfg = llama_like(read, "granite", DEFAULTS, windows=no_windows, attention_bias=True, mlp_bias=True)
    multipliers = (read.number(key, 1.0) for key in ("attention_multiplier", "embedding_multiplier", "residual_multiplier", "logits_scaling"))
    return dataclasses.replace(cfg, family=GraniteSettings(*multipliers))


def _attention(cfg: ModelConfig, w: Weights, index: int, rope: Rope) -> AttentionWeights:
    """Llama's attention of layer `index`, its scores × attention_multiplier (the divisor 1/attention_multiplier)."""
    return dataclasses.replace(llama._attention(cfg, w, index, rope), divisor=1.0 / settings(cfg).attention)


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray, rope: Rope) -> np.ndarray:
    """(L, d) the residual after layer `index`: each block's output × residual_multiplier before it is added."""
    p, r = f"layers.{index}.", settings(cfg).residual
    h = h + self_attention(llama._norm(cfg, w, p + "input_layernorm", h), _attention(cfg, w, index, rope)) * r  # (L, d)
    out: np.ndarray = h + llama._mlp(cfg, w, index, llama._norm(cfg, w, p + "post_attention_layernorm", h)) * r  # (L, d)
    return out


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm (RMSNorm) of the residual entering `layer` (from 1), and that layer's attention."""
    s = settings(cfg)
    w, rope = llama.weights_and_rope(cfg, checkpoint)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size) * s.embedding  # (L, d)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h, rope)
    index = layer - 1
    X = llama._norm(cfg, w, f"layers.{index}.input_layernorm", h)  # (L, d)
    attention = _attention(cfg, w, index, rope)
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    first = (f"X = input_layernorm (RMSNorm) of the residual entering layer {layer}: token embeddings × embedding_multiplier "
             f"{s.embedding:g}{through(layer)}" + (f", each block's output × residual_multiplier {s.residual:g}" if layer > 1 else ""))  # fmt: skip
    notes = tuple(
        f"scores × attention_multiplier = {s.attention:g} (divided by {attention.divisor:g}, not by √d_k = √{cfg.head_dim})"
        if note.startswith("scores divided") else note
        for note in llama.notes(cfg, layer, rope, attention, dtype, first=first)
    )  # fmt: skip
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=notes)


def mechanisms(cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of Granite beyond describe.py: its four multipliers."""
    s = settings(cfg)
    return [
        f"scores × attention_multiplier = {s.attention:g} in place of 1/√head_dim = 1/√{cfg.head_dim}",
        f"embeddings × embedding_multiplier = {s.embedding:g}; each attention and MLP output × residual_multiplier = {s.residual:g} "
        f"before it joins the residual; logits ÷ logits_scaling = {s.logits:g}",
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
