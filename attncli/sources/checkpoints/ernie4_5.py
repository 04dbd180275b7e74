"""ERNIE 4.5 (the dense 0.3B): Llama's layer with RoPE on interleaved pairs, turned in float32, and one bias switch.

transformers' Ernie4_5Attention: q, k, v and o projections, all biased when use_bias (false by default), as are
the MLP's; RoPE on pairs (2i, 2i + 1) turned by ω_i (GLM's rotate_half, its cos repeat_interleave'd), over the
whole head, applied in float32; grouped-query, √d_k, causal. Everything else is llama.py's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import LayerInputs
from attncli.sources.checkpoints.cohere2 import FLOAT32_ROPE_TURNED
from attncli.sources.checkpoints.config import (
    FLOAT32_RMSNORM,
    FLOAT32_SOFTMAX,
    O_PROJ,
    Description,
    ModelConfig,
    Verification,
    _Reader,
    llama_like,
    no_windows,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata
from attncli.sources.checkpoints.source import TensorSource

DEFAULTS: dict[str, Any] = {
    "layers": 18, "hidden": 1024, "heads": 16, "kv": 2, "positions": 131072, "inter": 3072, "head_dim": 128, "eps": 1e-5,
}  # Ernie4_5Config  # fmt: skip


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with ERNIE 4.5's defaults; use_bias biases every projection, attention's and the MLP's."""
    cfg = llama_like(read, "ernie4_5", DEFAULTS, windows=no_windows)
    biased = read.flag("use_bias", False)
    return dataclasses.replace(cfg, qkv_bias=biased, output_bias=biased, mlp_bias=biased)


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm (RMSNorm) of the residual entering `layer` (from 1), and that layer's attention, RoPE on interleaved pairs."""
    w, rope = llama.weights_and_rope(cfg, checkpoint)
    rope = dataclasses.replace(rope, style="interleaved")
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    for index in range(layer - 1):
        h = llama._layer(cfg, w, index, h, rope)
    index = layer - 1
    X = llama._norm(cfg, w, f"layers.{index}.input_layernorm", h)  # (L, d)
    attention = llama._attention(cfg, w, index, rope)
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    turned = f"RoPE (interleaved pairs 2i, 2i + 1) on q and k at positions 0, 1, 2, …: θ = {rope.theta:g}" + (f", {rope.scaling}" if rope.scaling else "")
    notes = tuple(turned if note.startswith("RoPE (rotate-half)") else note for note in llama.notes(cfg, layer, rope, attention, dtype))
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=notes)


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """ERNIE 4.5's config.json keys from the metadata: use_bias from the tensors (the converter writes what the checkpoint has)."""
    return {**llama.gguf_keys(file, a, raw, head_dim), "use_bias": "blk.0.attn_q.bias" in file.tensors,
            "rms_norm_eps": file.number(a + "attention.layer_norm_rms_epsilon", default=1e-5)}  # fmt: skip


# Ernie4_5Model only renames: W_Q and W_K keep their rows, already in interleaved pairs, which llama.cpp turns as such
GGUF = (GgufArchitecture("ernie4_5", "ernie4_5", llama.GGUF_NAMES, keys=gguf_keys),)
VERIFY = Verification(O_PROJ, (FLOAT32_RMSNORM, FLOAT32_ROPE_TURNED, FLOAT32_SOFTMAX))
DESCRIPTION = Description(interleaved_rope=lambda raw: True)
