"""Ministral 3 (text): Mistral's layer with YaRN, and queries scaled by position past YaRN's original length (Llama 4's temperature).

transformers' Ministral3Attention: Mistral's q, k, v, o (no biases), RoPE rotate-half (YaRN by default: factor 16
over 16 384 original positions), grouped-query, √d_k, causal, one sliding_window on every layer when set; after
RoPE each query at position p is multiplied by 1 + β·ln(1 + ⌊p / n₀⌋), β = rope_parameters' llama_4_scaling_beta
and n₀ its original_max_position_embeddings: the engine's query temperature (core.variants.QueryTemperature, shift 0:
p itself, where Llama 4 counts p + 1), exactly 1 below n₀. Everything else is llama.py's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from attncli.core.variants import QueryTemperature, Rope
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import AttentionWeights, LayerInputs, Weights
from attncli.sources.checkpoints.config import ModelConfig, _Reader, every_layer, llama_like
from attncli.sources.checkpoints.source import TensorSource

VERIFY = llama.VERIFY  # Llama's float32 steps: RMSNorm, RoPE, softmax
DEFAULTS: dict[str, Any] = {"layers": 34, "hidden": 4096, "heads": 32, "kv": 8, "positions": 262144, "inter": 14336, "head_dim": 128, "eps": 1e-5}  # Ministral3Config
ROPE = {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 16.0, "original_max_position_embeddings": 16384,
        "beta_fast": 32.0, "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0, "llama_4_scaling_beta": 0.1}  # its default  # fmt: skip


def _parameters(raw: dict[str, Any]) -> dict[str, Any]:
    given = raw.get("rope_parameters") or raw.get("rope_scaling")
    return given if isinstance(given, dict) else ROPE


def read_config(read: _Reader) -> ModelConfig:
    """Mistral's keys with Ministral 3's defaults (its YaRN when config.json names no RoPE), one window on every layer when set."""
    raw = dict(read.raw)
    if not raw.get("rope_parameters") and not raw.get("rope_scaling"):
        raw["rope_parameters"] = ROPE
    cfg = llama_like(_Reader(raw, read.where), "ministral3", DEFAULTS, windows=every_layer(None))
    beta, _ = temperature(cfg, raw)
    if beta < 0:
        raise read.fail("rope_parameters.llama_4_scaling_beta", f"found {beta!r}", "a number from 0 up")
    return cfg


def temperature(cfg: ModelConfig, raw: dict[str, Any]) -> tuple[float, int]:
    """(β, n₀): llama_4_scaling_beta (0 when absent: no scaling) and the original length the positions are counted in."""
    parameters = _parameters(raw)
    beta = parameters.get("llama_4_scaling_beta") or 0.0
    original = parameters.get("original_max_position_embeddings") or cfg.max_positions
    if isinstance(beta, bool) or not isinstance(beta, int | float) or isinstance(original, bool) or not isinstance(original, int):
        return -1.0, cfg.max_positions
    return float(beta), original


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """Llama's layer with each query, after RoPE, × its position's temperature (when llama_4_scaling_beta is set)."""
    raw = getattr(checkpoint, "config_keys", None) or _raw(checkpoint.folder)
    beta, original = temperature(cfg, raw)
    tempered = (QueryTemperature(original, beta, shift=0),) if beta else ()

    def attention(cfg: ModelConfig[Any], w: Weights, index: int, rope: Rope | None) -> AttentionWeights:
        plain = llama._attention(cfg, w, index, rope)
        return dataclasses.replace(plain, variants=(*plain.variants, *tempered))

    inputs = llama.layer_inputs(cfg, checkpoint, ids, layer, attention=attention)
    if not beta:
        return inputs
    at = "1 at every position here" if len(ids) <= original else f"above 1 from position {original} on"
    note = f"query temperature after RoPE: the query at position p × 1 + {beta:g}·ln(1 + ⌊p / {original}⌋) (llama_4_scaling_beta), {at}"
    return LayerInputs(X=inputs.X, attention=inputs.attention, dtype=inputs.dtype, notes=(*inputs.notes[:-1], note, inputs.notes[-1]))


def _raw(folder: Path) -> dict[str, Any]:
    from attncli.sources.checkpoints.config import read_raw

    return read_raw(folder)[0]


def mechanisms(cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of Ministral 3 beyond describe.py: the position-dependent query scale."""
    beta, original = temperature(cfg, raw if raw is not None else _raw(folder))
    if not beta:
        return []
    return [f"query temperature (Llama 4's): after RoPE each query at position p × 1 + {beta:g}·ln(1 + ⌊p / {original}⌋) "
            f"(llama_4_scaling_beta), 1 below {original:,} tokens"]  # fmt: skip
