"""GLM-4 (GLM-4-9B-0414, GLM-4-32B): partial rotary on interleaved pairs, q/k/v biases, four norms around attention and MLP.

transformers' Glm4DecoderLayer: h + post_self_attn_layernorm(attention(input_layernorm h)), then
h + post_mlp_layernorm(mlp(post_attention_layernorm h)), every norm an RMSNorm. Glm4Attention: q, k, v
projections with biases (attention_bias, true by default), o_proj without; RoPE on the first
r = head_dim · partial_rotary_factor coordinates of each head (0.5 when config.json names none), in interleaved
pairs (2i, 2i + 1) turned by ω_i = θ^(−2i/r) (its cos is the first r/2 columns repeat_interleave'd); the rest
carry no position; grouped-query; scores × d_k^−½; causal. Glm4MLP: gate_up_proj(x) chunked in two, down(up·act(gate)).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from attncli.core.variants import Rope
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import AttentionWeights, LayerInputs, Weights, activate, self_attention, through
from attncli.sources.checkpoints.config import Description, ModelConfig, _Reader, llama_like, no_windows
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, renamed
from attncli.sources.checkpoints.source import TensorSource

DEFAULTS: dict[str, Any] = {
    "layers": 40, "hidden": 4096, "heads": 32, "kv": 2, "positions": 131072, "inter": 13696, "head_dim": 128, "eps": 1.5625e-07,
}  # Glm4Config  # fmt: skip


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with GLM-4's defaults: q, k and v biased unless attention_bias is false (o never); partial rotary 0.5 unless given."""
    cfg = llama_like(read, "glm4", DEFAULTS, windows=no_windows)
    assert cfg.rope is not None
    parameters = read.raw.get("rope_parameters") or read.raw.get("rope_scaling") or {}
    named = "partial_rotary_factor" in read.raw or (isinstance(parameters, dict) and "partial_rotary_factor" in parameters)
    rope = cfg.rope if named else dataclasses.replace(cfg.rope, partial=0.5)  # Glm4Config's default for its checkpoints
    return dataclasses.replace(cfg, rope=rope, qkv_bias=read.flag("attention_bias", True), output_bias=False)


def rope_of(cfg: ModelConfig, checkpoint: TensorSource) -> tuple[Weights, Rope]:
    """The checkpoint's tensors and its RoPE on interleaved pairs of the rotated part."""
    w, rope = llama.weights_and_rope(cfg, checkpoint)
    return w, dataclasses.replace(rope, style="interleaved")


def _mlp(cfg: ModelConfig, w: Weights, index: int, x: np.ndarray) -> np.ndarray:
    """(L, d) down(up·act(gate)) of layer `index`, gate and up the two halves of the fused gate_up_proj."""
    d, inner, p = cfg.hidden_size, cfg.intermediate_size, f"layers.{index}.mlp."
    gate_up = w.product(p + "gate_up_proj.weight", x, (2 * inner, d))  # (L, 2·inner)
    hidden = gate_up[:, inner:] * activate(cfg.activation, gate_up[:, :inner])  # (L, inner) up·act(gate)
    out: np.ndarray = w.product(p + "down_proj.weight", hidden, (d, inner))  # (L, d)
    return out


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray, rope: Rope) -> np.ndarray:
    """(L, d) the residual after layer `index`: each block between its own pre- and post-norm."""
    p = f"layers.{index}."
    attended = self_attention(llama._norm(cfg, w, p + "input_layernorm", h), llama._attention(cfg, w, index, rope))  # (L, d)
    h = h + llama._norm(cfg, w, p + "post_self_attn_layernorm", attended)  # (L, d)
    mixed = _mlp(cfg, w, index, llama._norm(cfg, w, p + "post_attention_layernorm", h))  # (L, d)
    out: np.ndarray = h + llama._norm(cfg, w, p + "post_mlp_layernorm", mixed)  # (L, d)
    return out


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm (RMSNorm) of the residual entering `layer` (from 1), and that layer's attention."""
    w, rope = rope_of(cfg, checkpoint)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h, rope)
    index = layer - 1
    X = llama._norm(cfg, w, f"layers.{index}.input_layernorm", h)  # (L, d)
    attention: AttentionWeights = llama._attention(cfg, w, index, rope)
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    first = (f"X = input_layernorm (RMSNorm) of the residual entering layer {layer}: token embeddings{through(layer)}"
             + (", each block's output RMS-normed again before it joins the residual" if layer > 1 else ""))  # fmt: skip
    r = rope.width(cfg.head_dim)
    turned = (f"RoPE on interleaved pairs (2i, 2i + 1) of the first {r} of each head's {cfg.head_dim} coordinates (partial rotary), "
              f"at positions 0, 1, 2, …: θ = {rope.theta:g}; the other {cfg.head_dim - r} carry no position")  # fmt: skip
    notes = tuple(turned if note.startswith("RoPE (rotate-half)") else note for note in llama.notes(cfg, layer, rope, attention, dtype, first=first))
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=notes)


def mechanisms(cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of GLM-4 beyond describe.py: the rotated pairs, and the four norms."""
    return [
        "RoPE turns interleaved pairs (2i, 2i + 1) of the rotated coordinates, not their two halves",
        "four RMSNorms per layer: before attention and MLP, and on each one's output before it joins the residual",
    ]


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json: layer 1's projections and its fused gate_up_proj."""
    d, H, G, d_k = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim
    return {
        "embed_tokens.weight": (None, d),
        "layers.0.self_attn.q_proj.weight": (H * d_k, d),
        "layers.0.self_attn.k_proj.weight": (G * d_k, d),
        "layers.0.mlp.gate_up_proj.weight": (2 * cfg.intermediate_size, d),
    }


# -- GGUF: Glm4Model only renames (the rows keep GLM's interleaved pairs, which llama.cpp turns as such) and stores the
# rotated part as rope.dimension_count; its two extra norms are post_attention_norm and post_ffw_norm, gate_up_proj ffn_up
GGUF_NAMES = (
    *renamed(llama.GGUF_NAMES, "gate_proj", "up_proj"),
    (r"layers\.(\d+)\.post_self_attn_layernorm\.weight", r"blk.\1.post_attention_norm.weight"),
    (r"layers\.(\d+)\.post_mlp_layernorm\.weight", r"blk.\1.post_ffw_norm.weight"),
    (r"layers\.(\d+)\.mlp\.gate_up_proj\.weight", r"blk.\1.ffn_up.weight"),
)
GGUF = (GgufArchitecture("glm4", "glm4", GGUF_NAMES, keys=llama.gguf_keys),)
VERIFY = llama.VERIFY  # Llama's float32 steps: RMSNorm, RoPE, softmax
DESCRIPTION = Description(interleaved_rope=lambda raw: True)
