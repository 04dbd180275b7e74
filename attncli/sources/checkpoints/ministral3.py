"""Ministral 3 (text): Mistral's layer with YaRN, and queries scaled by position past YaRN's original length (Llama 4's temperature).

transformers' Ministral3Attention: Mistral's q, k, v, o (no biases), RoPE rotate-half (YaRN by default: factor 16
over 16 384 original positions), grouped-query, √d_k, causal, one sliding_window on every layer when set; after
RoPE each query at position p is multiplied by 1 + β·ln(1 + ⌊p / n₀⌋), β = rope_parameters' llama_4_scaling_beta
and n₀ its original_max_position_embeddings. Below n₀ that factor is exactly 1, so a sentence of at most n₀
tokens is Mistral's computation; attncli's engine has no per-position query scale, and a longer one is refused
rather than shown wrongly. Everything else is llama.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attncli.errors import AttnError
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import LayerInputs
from attncli.sources.checkpoints.config import ModelConfig, _Reader, every_layer, llama_like
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata
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
    """Llama's, for a sentence short enough that every query's position factor is 1; a longer one is refused."""
    raw = getattr(checkpoint, "config_keys", None) or _raw(checkpoint.folder)
    beta, original = temperature(cfg, raw)
    if beta and len(ids) > original:
        raise AttnError(
            f"{len(ids)} tokens: Ministral 3 multiplies the query at position p ≥ {original} by 1 + {beta:g}·ln(1 + ⌊p / {original}⌋) "
            "(llama_4_scaling_beta), a per-position scale attncli's engine does not compute yet",
            expected=f"a sentence of at most {original} tokens, where the factor is 1",
        )
    inputs = llama.layer_inputs(cfg, checkpoint, ids, layer)
    note = f"query temperature 1 + {beta:g}·ln(1 + ⌊p / {original}⌋) (llama_4_scaling_beta) = 1 at every position here (p < {original})"
    return LayerInputs(X=inputs.X, attention=inputs.attention, dtype=inputs.dtype, notes=(*inputs.notes[:-1], note, inputs.notes[-1]) if beta else inputs.notes)


def _raw(folder: Path) -> dict[str, Any]:
    from attncli.sources.checkpoints.config import read_raw

    return read_raw(folder)[0]


def mechanisms(cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of Ministral 3 beyond describe.py: the position-dependent query scale."""
    beta, original = temperature(cfg, raw if raw is not None else _raw(folder))
    if not beta:
        return []
    return [f"query temperature (Llama 4's): after RoPE each query at position p × 1 + {beta:g}·ln(1 + ⌊p / {original}⌋) "
            f"(llama_4_scaling_beta), 1 below {original:,} tokens; attncli reads sentences up to that length"]  # fmt: skip


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """Ministral 3's config.json keys from a mistral3 file. Ministral3Model (LlamaModel's converter) writes YaRN as TextModel
    does (type, factor, original_context_length, beta_fast, beta_slow), mscale_all_dim as yarn_log_multiplier and
    llama_4_scaling_beta as attention.temperature_scale, whose positions llama.cpp counts in original_context_length; it
    writes no mscale (llama.cpp takes it equal to mscale_all_dim) and no window."""
    parameters: dict[str, Any] = dict(raw["rope_parameters"])
    kind = file.value(a + "rope.scaling.type")
    if kind == "yarn":
        log_mul = file.number(a + "rope.scaling.yarn_log_multiplier", default=0.0)
        parameters |= {
            "rope_type": "yarn", "factor": file.number(a + "rope.scaling.factor"),
            "original_max_position_embeddings": file.count(a + "rope.scaling.original_context_length"),
            "beta_fast": file.number(a + "rope.scaling.yarn_beta_fast", default=32.0),
            "beta_slow": file.number(a + "rope.scaling.yarn_beta_slow", default=1.0),
            **({"mscale": log_mul, "mscale_all_dim": log_mul} if log_mul else {}),
        }  # fmt: skip
        if file.has_key(a + "rope.scaling.yarn_attn_factor"):
            parameters["attention_factor"] = file.number(a + "rope.scaling.yarn_attn_factor")
    beta = file.number(a + "attention.temperature_scale", default=0.0)
    if beta:
        parameters["llama_4_scaling_beta"] = beta
        parameters.setdefault("original_max_position_embeddings", file.count(a + "rope.scaling.original_context_length"))
    return {**llama.gguf_keys(file, a, raw, head_dim), "rope_parameters": parameters}


# Ministral3Model is LlamaModel's converter: W_Q's and W_K's rows permuted to interleaved pairs, put back on reading
GGUF = (GgufArchitecture("mistral3", "ministral3", llama.GGUF_NAMES, keys=gguf_keys, interleaved_qk=True, rope_scaling=("yarn",)),)
