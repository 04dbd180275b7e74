"""EXAONE 4.0: OLMo 2's post-norms, Qwen3's QK-norm per head, and sliding layers with RoPE beside global layers without.

transformers' Exaone4DecoderLayer: h + post_attention_layernorm(attention(h)), then h + post_feedforward_layernorm(mlp(h));
the attention reads the raw residual stream (no norm before it). Exaone4Attention: q, k, v, o without biases;
`q_norm`, `k_norm` (RMSNorm over each head's head_dim, one weight shared by the heads) before RoPE; RoPE rotate-half
on `sliding_attention` layers, which see the last `sliding_window` keys; `full_attention` layers see every earlier
key and have no RoPE (NoPE) — unless sliding_window is null, when every layer is global and turned (EXAONE 4.0
1.2B). Layer kinds: `layer_types`, else every sliding_window_pattern-th (4th) layer global. The MLP is Llama's SwiGLU.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from attncli.core.variants import Rope
from attncli.sources.checkpoints import llama, olmo2, qwen3
from attncli.sources.checkpoints.blocks import AttentionWeights, LayerInputs, Weights, self_attention, through
from attncli.sources.checkpoints.config import MOST, Description, ModelConfig, _Reader, _shown, _window, llama_like
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata, layer_types

DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 4096, "heads": 32, "kv": 32, "positions": 2048, "inter": 16384, "eps": 1e-5}  # Exaone4Config


def _windows(read: _Reader, layers: int) -> tuple[int | None, ...]:
    """layer_types (or every sliding_window_pattern-th layer full); no window anywhere when sliding_window is null."""
    size = read.raw.get("sliding_window", 4096)
    if size is None:
        return (None,) * layers
    window = _window(read, "sliding_window", size)
    kinds = read.raw.get("layer_types")
    if kinds is None:
        pattern = read.count("sliding_window_pattern", default=4, most=MOST["layers"])
        kinds = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)]
    if not isinstance(kinds, list) or len(kinds) != layers:
        raise read.fail("layer_types", f"found {_shown(kinds)}", f"a list of {layers} layer kinds")
    return tuple(window if kind == "sliding_attention" else None for kind in kinds)


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with EXAONE 4.0's defaults, its layer kinds, and whether the global layers go without RoPE (`family`)."""
    cfg = llama_like(read, "exaone4", DEFAULTS, windows=_windows)
    return dataclasses.replace(cfg, family=Exaone4Settings(nope=read.raw.get("sliding_window", 4096) is not None))


@dataclasses.dataclass(frozen=True)
class Exaone4Settings:
    nope: bool  # the global layers have no RoPE (transformers turns every layer when sliding_window is null)


def _turned(cfg: ModelConfig, index: int) -> bool:
    family = cfg.family
    assert isinstance(family, Exaone4Settings)
    return not family.nope or cfg.windows[index] is not None


def _attention(cfg: ModelConfig, w: Weights, index: int, rope: Rope) -> AttentionWeights:
    """Qwen3's attention of layer `index` (QK-norm per head), without RoPE on a global layer."""
    return dataclasses.replace(qwen3._attention(cfg, w, index, rope), rope=rope if _turned(cfg, index) else None)


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray, rope: Rope) -> np.ndarray:
    """(L, d) the residual after layer `index`: h + post_attention_layernorm(attention(h)), then + post_feedforward_layernorm(mlp)."""
    p = f"layers.{index}."
    h = h + llama._norm(cfg, w, p + "post_attention_layernorm", self_attention(h, _attention(cfg, w, index, rope)))  # (L, d)
    out: np.ndarray = h + llama._norm(cfg, w, p + "post_feedforward_layernorm", llama._mlp(cfg, w, index, h))  # (L, d)
    return out


def layer_inputs(cfg: ModelConfig, checkpoint: Any, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = the residual stream entering `layer` (from 1), unnormalised, and that layer's attention."""
    w, rope = llama.weights_and_rope(cfg, checkpoint)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h, rope)
    index = layer - 1
    attention = _attention(cfg, w, index, rope)
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    first = f"X = the residual stream entering layer {layer}, not normalised (EXAONE 4 norms after attention and MLP): token embeddings{through(layer)}"
    nope = f"no RoPE: layer {layer} is a global layer, whose scores carry no position (NoPE); only the causal mask orders the tokens"
    notes = tuple(nope if note.startswith("RoPE (rotate-half)") and attention.rope is None else note
                  for note in llama.notes(cfg, layer, rope, attention, dtype, first=first))  # fmt: skip
    return LayerInputs(X=h, attention=attention, dtype=dtype, notes=notes)


def mechanisms(cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of EXAONE 4 beyond describe.py: where RoPE is, and its post-norms."""
    family = cfg.family
    assert isinstance(family, Exaone4Settings)
    where = ("RoPE on the sliding layers only; the global layers have no position encoding (NoPE): only the causal mask orders "
             "their tokens") if family.nope else "RoPE on every layer (sliding_window null: no NoPE layers)"  # fmt: skip
    return [where, "no norm before attention or MLP: RMSNorm on each one's output (post_attention_layernorm, post_feedforward_layernorm)"]


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """EXAONE 4's config.json keys from the metadata: Exaone4Model writes the window and its per-layer pattern only when
    sliding_window is set (no key: every layer global and turned, as transformers reads a null window)."""
    keys = {**llama.gguf_keys(file, a, raw, head_dim), "rms_norm_eps": file.number(a + "attention.layer_norm_rms_epsilon", default=1e-5)}
    if not file.has_key(a + "attention.sliding_window"):
        return {**keys, "sliding_window": None}
    layers = raw["num_hidden_layers"]
    return {**keys, "sliding_window": file.count(a + "attention.sliding_window"), "layer_types": layer_types(file, a, layers, 4)}


# Exaone4Model only renames (OLMo 2's names: no pre-norms, post_attention_norm and post_ffw_norm, attn_q_norm, attn_k_norm)
GGUF = (GgufArchitecture("exaone4", "exaone4", olmo2.GGUF_NAMES, keys=gguf_keys),)
VERIFY = qwen3.VERIFY  # RMSNorm (q and k norms too), RoPE, softmax in float32
DESCRIPTION = Description(qk_norm=qwen3.DESCRIPTION.qk_norm)
