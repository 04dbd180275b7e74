"""Cohere2 (Command R7B): sliding layers with interleaved RoPE, global layers with no position encoding, attention ∥ MLP.

transformers' Cohere2DecoderLayer: x = input_layernorm(h), a LayerNorm with no bias (mean removed, then
× w); then h + attention(x) + mlp(x), both blocks reading the same x (parallel). Cohere2Attention: q, k, v, o
projections (biased when attention_bias), grouped-query, scores × d_k^−½, causal; on a `sliding_attention`
layer the last `sliding_window` keys and RoPE on interleaved pairs (2i, 2i + 1) turned by ω_i (its rotate_half
pairs neighbours, its cos repeat_interleave'd); on a `full_attention` layer no RoPE at all (NoPE). Layer kinds:
`layer_types`, else every sliding_window_pattern-th (4th) layer global. The MLP is Llama's SwiGLU, unbiased.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from attncli.core.variants import Rope
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import AttentionWeights, LayerInputs, Weights, layer_norm, self_attention, through
from attncli.sources.checkpoints.config import (
    FLOAT32_SOFTMAX,
    MOST,
    O_PROJ,
    Description,
    ModelConfig,
    Verification,
    _Reader,
    _shown,
    _window,
    llama_like,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata, layer_types
from attncli.sources.checkpoints.source import TensorSource


def _windows(read: _Reader, layers: int) -> tuple[int | None, ...]:
    """layer_types, else (Cohere2Config) every sliding_window_pattern-th layer full, the others sliding."""
    size = _window(read, "sliding_window", read.raw.get("sliding_window", 4096))
    kinds = read.raw.get("layer_types")
    if kinds is None:
        pattern = read.count("sliding_window_pattern", default=4, most=MOST["layers"])
        kinds = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)]
    if not isinstance(kinds, list) or len(kinds) != layers:
        raise read.fail("layer_types", f"found {_shown(kinds)}", f"a list of {layers} layer kinds")
    return tuple(size if kind == "sliding_attention" else None for kind in kinds)


DEFAULTS: dict[str, Any] = {"layers": 40, "hidden": 8192, "heads": 64, "kv": None, "positions": 8192, "inter": 22528}  # Cohere2Config


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with Cohere2's defaults, its layer kinds, LayerNorm's ε (layer_norm_eps) and attention_bias."""
    cfg = llama_like(read, "cohere2", DEFAULTS, windows=_windows, attention_bias=True)
    return dataclasses.replace(cfg, norm_eps=read.number("layer_norm_eps", 1e-5))


def _norm(cfg: ModelConfig, w: Weights, name: str, x: np.ndarray) -> np.ndarray:
    """(L, d) Cohere's LayerNorm: mean removed, divided by the standard deviation, × w (no bias)."""
    return layer_norm(x, w.get(name + ".weight", (cfg.hidden_size,)), np.zeros(cfg.hidden_size), cfg.norm_eps)


def _attention(cfg: ModelConfig, w: Weights, index: int, rope: Rope) -> AttentionWeights:
    """Llama's projections and window of layer `index`; interleaved RoPE on a sliding layer, none on a global one."""
    return dataclasses.replace(llama._attention(cfg, w, index, rope), rope=rope if cfg.windows[index] is not None else None)


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray, rope: Rope) -> np.ndarray:
    """(L, d) the residual after layer `index`: h + attention(x) + mlp(x), x = input_layernorm(h)."""
    x = _norm(cfg, w, f"layers.{index}.input_layernorm", h)  # (L, d)
    out: np.ndarray = h + self_attention(x, _attention(cfg, w, index, rope)) + llama._mlp(cfg, w, index, x)  # (L, d)
    return out


def _rope(cfg: ModelConfig, checkpoint: TensorSource) -> tuple[Weights, Rope]:
    w, rope = llama.weights_and_rope(cfg, checkpoint)
    return w, dataclasses.replace(rope, style="interleaved")


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm (LayerNorm, no bias) of the residual entering `layer` (from 1), and that layer's attention."""
    w, rope = _rope(cfg, checkpoint)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h, rope)
    index = layer - 1
    X = _norm(cfg, w, f"layers.{index}.input_layernorm", h)  # (L, d)
    attention = _attention(cfg, w, index, rope)
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    first = (f"X = input_layernorm (LayerNorm, no bias) of the residual entering layer {layer}: token embeddings{through(layer)}"
             + (", each layer adding its attention and its MLP, both of the same normed input" if layer > 1 else ""))  # fmt: skip
    turned = (f"RoPE (interleaved pairs 2i, 2i + 1) on q and k at positions 0, 1, 2, …: θ = {rope.theta:g} (a sliding layer)"
              if attention.rope is not None else
              f"no RoPE: layer {layer} is a global layer, whose scores carry no position (NoPE); only the causal mask orders the tokens")  # fmt: skip
    notes = tuple(turned if note.startswith("RoPE (rotate-half)") else note for note in llama.notes(cfg, layer, rope, attention, dtype, first=first))
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=notes)


def mechanisms(cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of Cohere2 beyond describe.py: RoPE on the sliding layers only, and the parallel block."""
    return [
        "RoPE (interleaved pairs) on the sliding layers only; the global layers have no position encoding (NoPE): "
        "only the causal mask orders their tokens",
        "parallel attention and MLP: both read one LayerNorm (no bias) of the layer input, and both add to the residual",
    ]


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """Cohere2's config.json keys from the metadata under cohere2.…: LayerNorm's ε, the window, and llama.cpp's layer kinds
    (every 4th layer global; a stored attention.sliding_window_pattern when there is one). The converter drops biases."""
    return {
        "num_key_value_heads": file.count(a + "attention.head_count_kv", default=raw["num_attention_heads"]),
        "head_dim": head_dim,
        "layer_norm_eps": file.number(a + "attention.layer_norm_epsilon", default=1e-5),
        "attention_bias": "blk.0.attn_q.bias" in file.tensors,
        "sliding_window": file.count(a + "attention.sliding_window"),
        "layer_types": layer_types(file, a, raw["num_hidden_layers"], 4),
    }


# Cohere2Model only renames: the rows keep Cohere's interleaved pairs, which llama.cpp turns as such
GGUF = (GgufArchitecture("cohere2", "cohere2", llama.GGUF_NAMES, keys=gguf_keys),)
# RoPE's rotation itself in float32 (q.float()), not only its table: Cohere2's and ERNIE 4.5's apply_rotary_pos_emb
FLOAT32_ROPE_TURNED = "the rotary embedding computes its inverse frequencies, angles, cos and sin in float32, and turns q and k in float32"
VERIFY = Verification(O_PROJ, ("LayerNorm casts the hidden state to float32 and normalises it there", FLOAT32_ROPE_TURNED, FLOAT32_SOFTMAX))
DESCRIPTION = Description(interleaved_rope=lambda raw: True)
