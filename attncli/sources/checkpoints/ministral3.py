"""Ministral 3 (text): Mistral's layer with YaRN, and queries scaled by position past YaRN's original length (Llama 4's temperature).

transformers' Ministral3Attention: Mistral's q, k, v, o (no biases), RoPE rotate-half (YaRN by default: factor 16
over 16 384 original positions), grouped-query, √d_k, causal, one sliding_window on every layer when set; after
RoPE each query at position p is multiplied by 1 + β·ln(1 + ⌊p / n₀⌋), β = rope_parameters' llama_4_scaling_beta
and n₀ its original_max_position_embeddings (core.variants.QueryTemperature). Below n₀ that factor is exactly 1, so
a sentence of at most n₀ tokens is Mistral's computation, and is shown without it. The module is its declaration
(`LLAMA_LIKE`): its RoPE when config.json names none, its windows, its temperature; llama.py computes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.config import (
    MOST,
    LlamaLike,
    LlamaSettings,
    ModelConfig,
    Temperature,
    _Reader,
    _shown,
    every_layer,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata

VERIFY = llama.VERIFY  # Llama's float32 steps: RMSNorm, RoPE, softmax
DEFAULTS: dict[str, Any] = {"layers": 34, "hidden": 4096, "heads": 32, "kv": 8, "positions": 262144, "inter": 14336, "head_dim": 128, "eps": 1e-5}  # Ministral3Config
ROPE = {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 16.0, "original_max_position_embeddings": 16384,
        "beta_fast": 32.0, "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0, "llama_4_scaling_beta": 0.1}  # its default  # fmt: skip
BETA = "rope_parameters.llama_4_scaling_beta"


def _temperatures(read: _Reader, layers: int) -> tuple[Temperature | None, ...]:
    """β (llama_4_scaling_beta; absent or 0: none) and n₀ (original_max_position_embeddings, else max_position_embeddings), every layer."""
    given = read.raw.get("rope_parameters") or read.raw.get("rope_scaling")
    parameters = given if isinstance(given, dict) else {}
    beta = parameters.get("llama_4_scaling_beta") or 0.0
    if isinstance(beta, bool) or not isinstance(beta, int | float) or not 0 <= beta <= 1e6:
        raise read.fail(BETA, f"found {_shown(beta)}", "a number from 0 to 1e6")
    if not beta:
        return (None,) * layers
    original = parameters.get("original_max_position_embeddings") or read.raw.get("max_position_embeddings", DEFAULTS["positions"])
    if isinstance(original, bool) or not isinstance(original, int) or not 1 <= original <= MOST["positions"]:
        raise read.fail("rope_parameters.original_max_position_embeddings", f"found {_shown(original)}", f"a whole number from 1 to {MOST['positions']:,}")
    return (Temperature(float(beta), original, 0, "llama_4_scaling_beta"),) * layers


LLAMA_LIKE = LlamaLike("ministral3", "Ministral 3", DEFAULTS, windows=every_layer(None), rope_default=ROPE, query_temperature=_temperatures)


def mechanisms(cfg: ModelConfig[LlamaSettings], folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of Ministral 3 beyond describe.py: the position-dependent query scale."""
    t = cfg.family.temperatures[0] if cfg.family.temperatures else None
    if t is None:
        return []
    return [f"query temperature (Llama 4's): after RoPE each query at position p × 1 + {t.beta:g}·ln(1 + ⌊p / {t.original}⌋) "
            f"(llama_4_scaling_beta), 1 below {t.original:,} tokens, then more at each further multiple"]  # fmt: skip


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
