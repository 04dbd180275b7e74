"""OLMo 3: OLMo 2's layer (post-norms, QK-norm over the whole projection) with sliding layers and a RoPE per kind of layer.

transformers' Olmo3Attention is Olmo2Attention with, on `sliding_attention` layers, the last `sliding_window` keys;
`layer_types` (else every 4th layer full) says which. Olmo3RotaryEmbedding keeps one RoPE per layer kind
(`rope_parameters` given per layer type; OLMo 3's long-context checkpoints scale only the full layers' with YaRN);
θ is 500 000 when none is named. Everything else is olmo2.py's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from attncli.core.variants import Rope
from attncli.sources.checkpoints import llama, olmo2
from attncli.sources.checkpoints.blocks import LayerInputs, through
from attncli.sources.checkpoints.config import (
    ModelConfig,
    RopeConfig,
    _Reader,
    _rope,
    _shown,
    _window,
    llama_like,
)
from attncli.sources.checkpoints.rope import rope_spec
from attncli.sources.checkpoints.source import TensorSource

DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 4096, "heads": 32, "kv": None, "positions": 2048, "inter": 11008, "eps": 1e-5}  # Olmo3Config
THETA = 500_000.0  # Olmo3Config.default_theta


def _windows(read: _Reader, layers: int) -> tuple[int | None, ...]:
    """layer_types, else every 4th layer full and the others sliding (Olmo3Config)."""
    size = _window(read, "sliding_window", read.raw.get("sliding_window", 4096))
    kinds = read.raw.get("layer_types")
    if kinds is None:
        kinds = ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(layers)]
    if not isinstance(kinds, list) or len(kinds) != layers:
        raise read.fail("layer_types", f"found {_shown(kinds)}", f"a list of {layers} layer kinds")
    return tuple(size if kind == "sliding_attention" else None for kind in kinds)


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with OLMo 3's defaults (θ 500 000), the full layers' RoPE as `rope`, the sliding layers' as `family`."""
    read = _Reader({**read.raw, "rope_theta": read.raw.get("rope_theta", THETA)}, read.where)
    cfg = llama_like(read, "olmo3", DEFAULTS, windows=_windows, attention_bias=True, rope_per_type="full_attention")
    return dataclasses.replace(cfg, family=_rope(read, cfg.max_positions, per_type="sliding_attention"))


def rope_of(cfg: ModelConfig, index: int) -> Rope:
    """The RoPE of layer `index` (from 0): its kind's."""
    assert cfg.rope is not None and isinstance(cfg.family, RopeConfig)
    return rope_spec(cfg.rope if cfg.windows[index] is None else cfg.family, cfg.head_dim)


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = the residual stream entering `layer` (from 1), unnormalised, and that layer's attention with its QK-norm and RoPE."""
    w, _ = llama.weights_and_rope(cfg, checkpoint)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    for index in range(layer - 1):
        h = olmo2._layer(cfg, w, index, h, rope_of(cfg, index))
    rope = rope_of(cfg, layer - 1)
    attention = olmo2._attention(cfg, w, layer - 1, rope)
    dtype = w.dtype(f"layers.{layer - 1}.self_attn.q_proj.weight")
    first = f"X = the residual stream entering layer {layer}, not normalised (OLMo 3 norms after attention and MLP): token embeddings{through(layer)}"
    kind = "sliding" if cfg.windows[layer - 1] is not None else "full"
    notes = tuple(note + f" (the {kind} layers' RoPE)" if note.startswith("RoPE (rotate-half)") else note
                  for note in llama.notes(cfg, layer, rope, attention, dtype, first=first))  # fmt: skip
    return LayerInputs(X=h, attention=attention, dtype=dtype, notes=notes)


def mechanisms(cfg: ModelConfig, folder: Any, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of OLMo 3 beyond describe.py: its two RoPEs and its post-norms."""
    assert cfg.rope is not None and isinstance(cfg.family, RopeConfig)
    full, sliding = (f"θ = {r.theta:g}" + (f", {r.describe()}" if r.describe() else "") for r in (cfg.rope, cfg.family))
    return [
        f"RoPE per kind of layer: {sliding} on the sliding layers, {full} on the full ones",
        "no norm before attention or MLP: RMSNorm on each one's output (post_attention_layernorm, post_feedforward_layernorm)",
    ]


VERIFY = olmo2.VERIFY  # RMSNorm (q and k norms too), RoPE, softmax in float32
DESCRIPTION = olmo2.DESCRIPTION
