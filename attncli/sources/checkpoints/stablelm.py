"""StableLM (2): Llama's projections and SwiGLU MLP with LayerNorms, per-head QK LayerNorm, partial rotary, parallel residual.

Per transformers' StableLmDecoderLayer: input_layernorm is an nn.LayerNorm (weight and bias), not an RMSNorm; q, k and v
have biases with use_qkv_bias, o_proj none. With qk_layernorm (StableLM 2 12B), q and k of each head go through that
head's own nn.LayerNorm over head_dim without a bias (StableLmLayerNormPerHead: q_layernorm.norms.<h>, k_layernorm.norms.<g>),
before RoPE: the QK LayerNorm variant (core.variants.qklayernorm), not QK-norm's RMSNorm. RoPE (rotate-half) turns the
first int(head_dim · partial_rotary_factor) coordinates (0.25 when config.json gives none). With use_parallel_residual:
x + attention(ln(x)) + mlp(ln(x)) of the one input_layernorm; otherwise attention, then the MLP of
post_attention_layernorm. Dimension names: L tokens, d = d_model, H query heads, G key/value heads, d_k head size.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from attncli.core.variants import QkLayerNorm, Rope
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import (
    AttentionWeights,
    LayerInputs,
    Weights,
    self_attention,
    sharing_note,
    storage_note,
    through,
)
from attncli.sources.checkpoints.config import (
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    LLAMA_TENSORS,
    O_PROJ,
    Description,
    ModelConfig,
    Verification,
    _Reader,
    llama_like,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata
from attncli.sources.checkpoints.rope import rope_spec
from attncli.sources.checkpoints.source import TensorSource


class StableLmSettings(NamedTuple):
    """StableLM's own config keys, beside the common ones of ModelConfig."""

    qk_layernorm: bool  # each head's q and k through its own LayerNorm before RoPE
    parallel_residual: bool  # use_parallel_residual: x + attention(ln(x)) + mlp(ln(x))


DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 2560, "heads": 32, "kv": 32, "positions": 4096, "inter": 6912, "eps": 1e-5}  # StableLmConfig


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with StableLmConfig's defaults; layer_norm_eps, use_qkv_bias, qk_layernorm, use_parallel_residual; partial 0.25."""
    cfg = llama_like(read, "stablelm", DEFAULTS)
    parameters = read.raw.get("rope_parameters")
    given = "partial_rotary_factor" in read.raw or (isinstance(parameters, dict) and "partial_rotary_factor" in parameters)
    rope = cfg.rope if given or cfg.rope is None else dataclasses.replace(cfg.rope, partial=0.25)
    return dataclasses.replace(
        cfg,
        rope=rope,
        norm_eps=read.number("layer_norm_eps", DEFAULTS["eps"]),
        qkv_bias=read.flag("use_qkv_bias", False),
        family=StableLmSettings(qk_layernorm=read.flag("qk_layernorm", False), parallel_residual=read.flag("use_parallel_residual", False)),
    )


def settings(cfg: ModelConfig) -> StableLmSettings:
    assert isinstance(cfg.family, StableLmSettings)
    return cfg.family


def _attention(cfg: ModelConfig, w: Weights, index: int, rope: Rope) -> AttentionWeights:
    """Llama's projections of layer `index` (biases on q, k, v with use_qkv_bias), and each head's QK LayerNorm weights."""
    attention = llama._attention(cfg, w, index, rope)
    if not settings(cfg).qk_layernorm:
        return attention
    p = f"layers.{index}.self_attn."
    d_k = cfg.head_dim
    if w.has(p + "q_layernorm.weight"):  # a GGUF file: llama.cpp's converter stacked each layer's per-head norms
        q, k = w.get(p + "q_layernorm.weight", (cfg.heads, d_k)), w.get(p + "k_layernorm.weight", (cfg.kv_heads, d_k))
    else:
        q = np.stack([w.get(p + f"q_layernorm.norms.{h}.weight", (d_k,)) for h in range(cfg.heads)])  # (H, d_k)
        k = np.stack([w.get(p + f"k_layernorm.norms.{g}.weight", (d_k,)) for g in range(cfg.kv_heads)])  # (G, d_k)
    return dataclasses.replace(attention, variants=(QkLayerNorm(q, k, eps=cfg.norm_eps),))


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray, rope: Rope) -> np.ndarray:
    """(L, d) the residual stream after layer `index`: parallel (x + attn + mlp of one LayerNorm) or sequential."""
    p = f"layers.{index}."
    normed = w.layer_norm(p + "input_layernorm", h, cfg.norm_eps)  # (L, d)
    attention = self_attention(normed, _attention(cfg, w, index, rope))  # (L, d)
    if settings(cfg).parallel_residual:
        out: np.ndarray = h + attention + llama._mlp(cfg, w, index, normed)
        return out
    h = h + attention
    out = h + llama._mlp(cfg, w, index, w.layer_norm(p + "post_attention_layernorm", h, cfg.norm_eps))
    return out


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm (LayerNorm) of the residual entering `layer` (from 1), and that layer's attention."""
    assert cfg.rope is not None
    w = Weights(checkpoint, probe=LLAMA_TENSORS.probe, prefixes=LLAMA_TENSORS.prefixes)
    rope = rope_spec(cfg.rope, cfg.head_dim)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h, rope)
    index = layer - 1
    X = w.layer_norm(f"layers.{index}.input_layernorm", h, cfg.norm_eps)  # (L, d)
    attention = _attention(cfg, w, index, rope)
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    s, r = settings(cfg), rope.width(cfg.head_dim)
    notes = (
        f"X = input_layernorm (LayerNorm, with bias) of the residual entering layer {layer}: token embeddings{through(layer)}",
        sharing_note(cfg.heads, cfg.kv_heads),
        "q, k and v have biases (use_qkv_bias), o_proj none" if cfg.qkv_bias else None,
        f"QK LayerNorm: each head's q and k centred and divided by their standard deviation over its {cfg.head_dim} numbers, "
        f"times the head's own weight (q_layernorm.norms.<h>, k_layernorm.norms.<g>; no bias), ε = {cfg.norm_eps:g}, before RoPE"
        if s.qk_layernorm else None,
        f"RoPE (rotate-half) on the first {r} of each head's {cfg.head_dim} coordinates (partial_rotary_factor {cfg.rope.partial:g}; "
        f"the other {cfg.head_dim - r} pass through unrotated) at positions 0, 1, 2, …: θ = {rope.theta:g}",
        f"scores divided by √d_k = √{cfg.head_dim} = {attention.divisor:g}",
        "causal mask: each token sees itself and the tokens before it",
        "parallel residual: each layer adds attention and the MLP, both of input_layernorm(x)"
        if s.parallel_residual else "sequential residual: attention, then the MLP of post_attention_layernorm of the updated stream",
        storage_note(dtype),
    )
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=tuple(note for note in notes if note is not None))


def mechanisms(cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of StableLM beyond describe.py: its LayerNorms (not RMSNorm)."""
    return ["LayerNorm (with bias) before attention and MLP, not RMSNorm"]


# -- GGUF and model verify: Llama's names with LayerNorm biases, and each layer's per-head QK norms stacked (heads, d_k)
GGUF_NAMES = (
    (r"norm\.(weight|bias)", r"output_norm.\1"),
    (r"layers\.(\d+)\.input_layernorm\.(weight|bias)", r"blk.\1.attn_norm.\2"),
    (r"layers\.(\d+)\.post_attention_layernorm\.(weight|bias)", r"blk.\1.ffn_norm.\2"),
    *(entry for entry in llama.GGUF_NAMES if "norm" not in entry[0]),  # the embeddings, q, k, v, o and the MLP
    (r"layers\.(\d+)\.self_attn\.q_layernorm\.weight", r"blk.\1.attn_q_norm.weight"),
    (r"layers\.(\d+)\.self_attn\.k_layernorm\.weight", r"blk.\1.attn_k_norm.weight"),
)


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """StableLM's config.json keys from the metadata under stablelm.…: key/value heads, ε, the residual, biases and QK norms."""
    return {
        "num_key_value_heads": file.count(a + "attention.head_count_kv", default=raw["num_attention_heads"]),
        "layer_norm_eps": file.number(a + "attention.layer_norm_epsilon", default=1e-5),
        "use_parallel_residual": bool(file.value(a + "use_parallel_residual") if file.has_key(a + "use_parallel_residual") else True),
        "use_qkv_bias": "blk.0.attn_q.bias" in file.tensors,
        "qk_layernorm": "blk.0.attn_q_norm.weight" in file.tensors,
    }


# q and k keep Hugging Face's rows: llama.cpp turns StableLM's pairs as NeoX does (rotate-half), so nothing is permuted
GGUF = (GgufArchitecture("stablelm", "stablelm", GGUF_NAMES, keys=gguf_keys),)
VERIFY = Verification(O_PROJ, (FLOAT32_ROPE, FLOAT32_SOFTMAX))  # its LayerNorms run in float64
DESCRIPTION = Description(
    qk_norm="per head, each head its own LayerNorm weight over head_dim (no bias)", qk_norm_kind="centred and divided by their standard deviation (LayerNorm)"
)
