"""What `model info` says of a model's config, whether it came from config.json or from a GGUF file's metadata."""

from __future__ import annotations

from typing import Any

from attncli.sources.checkpoints.config import SUPPORTED, ModelConfig
from attncli.sources.checkpoints.rope import rope_spec


def describe_config(cfg: ModelConfig) -> dict[str, Any]:
    """`model info`'s description of a config (a folder's config.json or a GGUF file's metadata)."""
    rope = None
    if cfg.rope is not None:
        spec = rope_spec(cfg.rope, cfg.head_dim)
        rope = {"theta": spec.theta, "scaling": spec.scaling, "style": spec.style, "inv_freq": spec.frequencies(cfg.head_dim).tolist(),
                "rotary_dim": spec.width(cfg.head_dim), "partial_rotary_factor": cfg.rope.partial}  # fmt: skip
    windows = sorted({w for w in cfg.windows if w is not None})
    return {
        "layers": cfg.layers,
        "hidden_size": cfg.hidden_size,
        "heads": cfg.heads,
        "kv_heads": cfg.kv_heads,
        "head_dim": cfg.head_dim,
        "max_positions": cfg.max_positions,
        "causal": cfg.causal,
        "activation": cfg.activation,
        "dtype": cfg.dtype,
        "rope": rope,
        "sliding_window": windows[0] if windows else None,  # transformers' spelling: keys i − w + 1 … i
        "sliding_layers": [i + 1 for i, w in enumerate(cfg.windows) if w is not None],
        "supported_types": list(SUPPORTED),
        # an encoder–decoder: the fields above describe the decoder; this, the encoder (None for one stack)
        "encoder": None if not cfg.encoder_layers else {"layers": cfg.encoder_layers, "heads": cfg.encoder_heads, "head_dim": cfg.hidden_size // cfg.encoder_heads},
    }
