"""Gemma 3 (text): QK-norm in Gemma's (1 + w) form, 5 sliding-window layers to 1 global, a RoPE θ per kind of layer.

transformers' Gemma3DecoderLayer: x → input_layernorm → attention → post_attention_layernorm → + x, then
pre_feedforward_layernorm → GeGLU MLP (down(gelu_tanh(gate)·up)) → post_feedforward_layernorm → + residual;
every RMSNorm multiplies by (1 + w). The embeddings are multiplied by √hidden_size, kept as a float32
number (4 for hidden 16; √2304 = 48 exactly; other sizes carry float32's rounding, as in transformers).
Gemma3Attention: q, k, v projections; `q_norm`, `k_norm`: (1 + w) RMSNorm of each head's head_dim numbers,
before RoPE; RoPE with the table of the layer's kind (`rope_parameters` per layer type: θ 10 000 on
sliding layers, 1 000 000 on full ones; transformers 4 spells the local one `rope_local_base_freq`);
scores × query_pre_attn_scalar^−½; causal, and the window on sliding layers. Its own config keys are
read here: `query_pre_attn_scalar`, the local RoPE, `attn_logit_softcapping` (null in Gemma 3; refused
when set). The projections and the shapes are llama.py's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from attncli.core.variants import QkNorm, Rope
from attncli.errors import AttnError
from attncli.sources.checkpoints import gemma2, llama
from attncli.sources.checkpoints.blocks import AttentionWeights, LayerInputs, Weights, rms_norm, self_attention, through
from attncli.sources.checkpoints.config import (
    MOST,
    MULTIMODAL_PREFIXES,
    Description,
    ModelConfig,
    RopeConfig,
    Tensors,
    _Reader,
    _shown,
    _window,
    llama_like,
    read_raw,
    whole,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata, renamed, sliding_layers
from attncli.sources.checkpoints.rope import rope_spec
from attncli.sources.checkpoints.source import TensorSource


class Gemma3:
    """The keys of config.json that only Gemma 3 has, read once per load."""

    def __init__(self, cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> None:
        raw, where = (raw, str(folder)) if raw is not None else read_raw(folder)  # raw: a GGUF file's metadata as config.json keys
        self.scalar = _positive(raw, "query_pre_attn_scalar", 256, where)
        if raw.get("attn_logit_softcapping") is not None:
            raise AttnError("attn_logit_softcapping is set: attncli reads Gemma 3 without soft-capping", file=where,
                            key="attn_logit_softcapping", expected="null, as every Gemma 3 checkpoint has it")  # fmt: skip
        parameters = raw.get("rope_parameters")
        local = parameters.get("sliding_attention") if isinstance(parameters, dict) else None
        theta = local.get("rope_theta") if isinstance(local, dict) else raw.get("rope_local_base_freq", 10_000.0)
        if isinstance(theta, bool) or not isinstance(theta, int | float) or not 1 < theta <= 1e30:
            raise AttnError(f"found {theta!r}", file=where, key="rope_parameters.sliding_attention.rope_theta", expected="a RoPE base above 1")
        assert cfg.rope is not None
        self.global_rope = rope_spec(cfg.rope, cfg.head_dim)
        self.local_rope = rope_spec(RopeConfig(theta=float(theta), kind="default"), cfg.head_dim)
        self.embedding_scale = float(np.float32(math.sqrt(cfg.hidden_size)))  # transformers keeps it as a float32 tensor

    def rope(self, cfg: ModelConfig, index: int) -> Rope:
        """The RoPE of layer `index` (from 0): the local θ on sliding layers, the global one (with its scaling) on full ones."""
        return self.local_rope if cfg.windows[index] is not None else self.global_rope


def _positive(raw: dict[str, Any], key: str, default: float, where: str) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1e30:
        raise AttnError(f"found {value!r}", file=where, key=key, expected="a positive number")
    return float(value)


def _norm(cfg: ModelConfig, w: Weights, name: str, x: np.ndarray) -> np.ndarray:
    """Gemma's RMSNorm: x / rms · (1 + w)."""
    return rms_norm(x, 1.0 + w.get(name + ".weight", (cfg.hidden_size,)), cfg.norm_eps)


def _attention(cfg: ModelConfig, w: Weights, index: int, g: Gemma3) -> AttentionWeights:
    """Llama's projections of layer `index`, its (1 + w) q_norm and k_norm per head, the layer's RoPE and the scalar."""
    p = f"layers.{index}.self_attn."
    d_k = cfg.head_dim
    norm = QkNorm(w.get(p + "q_norm.weight", (d_k,)), w.get(p + "k_norm.weight", (d_k,)), eps=cfg.norm_eps, over="head", offset=1.0)
    base = llama._attention(cfg, w, index, g.rope(cfg, index))
    return dataclasses.replace(base, qk_norm=norm, divisor=math.sqrt(g.scalar))


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray, g: Gemma3) -> np.ndarray:
    """(L, d) the residual after layer `index`: four (1 + w) norms around attention and MLP."""
    p = f"layers.{index}."
    attended = self_attention(_norm(cfg, w, p + "input_layernorm", h), _attention(cfg, w, index, g))  # (L, d)
    h = h + _norm(cfg, w, p + "post_attention_layernorm", attended)  # (L, d)
    out: np.ndarray = h + _norm(cfg, w, p + "post_feedforward_layernorm", llama._mlp(cfg, w, index, _norm(cfg, w, p + "pre_feedforward_layernorm", h)))
    return out


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm ((1 + w) RMSNorm) of the residual entering `layer` (from 1), and that layer's attention."""
    g = Gemma3(cfg, checkpoint.folder, getattr(checkpoint, "config_keys", None))
    w = Weights(checkpoint, probe=TENSORS.probe, prefixes=TENSORS.prefixes)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size) * g.embedding_scale  # (L, d)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h, g)
    index = layer - 1
    X = _norm(cfg, w, f"layers.{index}.input_layernorm", h)  # (L, d)
    attention = _attention(cfg, w, index, g)
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    rope = g.rope(cfg, index)
    kind = "sliding-window (local)" if cfg.windows[index] is not None else "global"
    first = (f"X = input_layernorm ((1 + w) RMSNorm) of the residual entering layer {layer}: token embeddings × "
             f"√{cfg.hidden_size} = {g.embedding_scale:g}{through(layer)}")  # fmt: skip
    notes = llama.notes(cfg, layer, rope, attention, dtype, first=first)
    notes = tuple(
        note.replace("scores divided by √d_k", f"a {kind} layer; scores divided by √query_pre_attn_scalar = √{g.scalar:g}").replace(
            f" = √{cfg.head_dim} = ", " = ") if note.startswith("scores divided") else note
        for note in notes
    )  # fmt: skip
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=notes)


def mechanisms(cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of Gemma 3 beyond the mechanisms every family is described by (describe.py)."""
    g = Gemma3(cfg, folder, raw)
    return [
        f"RoPE θ = {g.local_rope.theta:g} on the sliding layers and {g.global_rope.theta:g} on the global ones",
        f"embeddings × √hidden_size = {g.embedding_scale:g}; (1 + w) RMSNorm before and after attention and MLP",
    ]


TENSORS = Tensors("embed_tokens.weight", ("model.", "", *MULTIMODAL_PREFIXES))  # the text model alone, or inside Gemma 3's multimodal one


def _raw_windows(raw: Mapping[str, Any], layers: int, size: int) -> tuple[int | None, ...] | None:
    """transformers 4's layers before layer_types: every sliding_window_pattern-th layer global, the others sliding."""
    pattern = whole(raw, "sliding_window_pattern")
    return tuple(None if (i + 1) % pattern == 0 else size for i in range(layers)) if pattern else None


_DESCRIBED = Description(qk_norm="per head, Gemma's (1 + w) RMSNorm", windows=_raw_windows)
DESCRIPTION = _DESCRIBED  # the multimodal gemma3's text stack is gemma3_text (config.text_stack)
DEFAULTS: dict[str, Any] = {
    "layers": 26, "hidden": 2304, "heads": 8, "kv": 4, "positions": 131072, "inter": 9216, "head_dim": 256, "act": "gelu_pytorch_tanh",
}  # transformers' Gemma3TextConfig  # fmt: skip


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with Gemma 3's defaults, the full-attention layers' RoPE settings and its layer types;
    its own keys (the local RoPE, query_pre_attn_scalar, QK-norm) are read by `settings`."""
    return llama_like(read, "gemma3_text", DEFAULTS, windows=_windows, attention_bias=True, rope_per_type="full_attention")


def _windows(read: _Reader, layers: int) -> tuple[int | None, ...]:
    """layer_types, or (transformers 4) every sliding_window_pattern-th layer full."""
    size = _window(read, "sliding_window", read.raw.get("sliding_window", 4096))
    kinds = read.raw.get("layer_types")
    if kinds is None:
        pattern = read.count("sliding_window_pattern", "_sliding_window_pattern", default=6, most=MOST["layers"])
        kinds = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)]
    if not isinstance(kinds, list) or len(kinds) != layers:
        raise read.fail("layer_types", f"found {_shown(kinds)}", f"a list of {layers} layer kinds")
    return tuple(size if kind == "sliding_attention" else None for kind in kinds)


# -- GGUF and model verify ---------------------------------------------------------------------

GGUF_NAMES = (*renamed(llama.GGUF_NAMES, "layernorm"), *llama.GGUF_QK_NORMS, *gemma2.GGUF_NORMS)


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """Gemma 3's config.json keys from the metadata: llama.cpp's own rules where the converter stores nothing (llama-model.cpp,
    LLM_ARCH_GEMMA3)."""
    layers, hidden, heads = raw["num_hidden_layers"], raw["hidden_size"], raw["num_attention_heads"]
    sliding = sliding_layers(file, a, layers, 6)
    theta = raw["rope_parameters"]["rope_theta"]
    return {
        "num_key_value_heads": file.count(a + "attention.head_count_kv", default=heads),
        "head_dim": head_dim,
        "rms_norm_eps": file.number(a + "attention.layer_norm_rms_epsilon", default=1e-6),
        "hidden_activation": "gelu_pytorch_tanh",
        "sliding_window": file.count(a + "attention.sliding_window", default=4096),
        "layer_types": ["sliding_attention" if s else "full_attention" for s in sliding],
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": theta},
            "sliding_attention": {"rope_type": "default", "rope_theta": file.number(a + "rope.freq_base_swa", default=10_000.0)},
        },
        "query_pre_attn_scalar": hidden // heads if layers == 62 else head_dim,  # llama.cpp: 1/√(d/H) for the 27B (62 layers), else 1/√d_k
        "attention_bias": False,
    }


GGUF = (GgufArchitecture("gemma3", "gemma3_text", GGUF_NAMES, keys=gguf_keys, shifted_norms=True),)
VERIFY = gemma2.VERIFY  # the same float32 steps: (1 + w) norms, RoPE, softmax, the embedding scale
