"""Hunyuan dense (hunyuan_v1_dense): Llama's layer with QK-norm after RoPE, and RoPE's base stretched by NTK alpha.

transformers' HunYuanDenseV1Attention: q, k, v and o projections (biases when attention_bias), RoPE rotate-half on q and
k, then `query_layernorm` and `key_layernorm` (RMSNorm of each head's head_dim numbers, one weight shared by the heads,
ε = rms_norm_eps) on the rotated q and k: QK-norm after RoPE, the engine's "rotated" stage (core.variants.QkNormAfterRope).
transformers builds both norms whatever config.json's use_qk_norm says, and so does attncli. With rope_type "dynamic" and
an `alpha` (Hunyuan-7B: 1000), HunYuanDenseV1RotaryEmbedding takes its "ntk_alpha" path: the base becomes
θ·alpha^(d/(d − 2)) once, whatever the sentence's length (not dynamic NTK, which would depend on it). Everything else is
Llama's: grouped-query attention, √d_k, causal, pre-norm RMSNorm, SwiGLU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from attncli.core.variants import QkNormAfterRope, Rope
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import AttentionWeights, LayerInputs, Weights
from attncli.sources.checkpoints.config import (
    FLOAT32_QK_NORM,
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    O_PROJ,
    Description,
    ModelConfig,
    Verification,
    _Reader,
    _shown,
    llama_like,
    no_windows,
    with_family,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture
from attncli.sources.checkpoints.source import TensorSource


class HunyuanSettings(NamedTuple):
    """What Hunyuan dense reads beyond the Llama-like keys."""

    alpha: float | None  # NTK alpha of rope_type "dynamic": θ became θ·alpha^(d/(d − 2)); None without
    base: float  # θ as config.json gives it, before alpha stretched it


def settings(cfg: ModelConfig[Any]) -> HunyuanSettings:
    assert isinstance(cfg.family, HunyuanSettings)
    return cfg.family


DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 4096, "heads": 32, "kv": None, "positions": 2048, "inter": 11008, "eps": 1e-5}  # HunYuanDenseV1Config


def _parameters(raw: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(key, settings) of the RoPE settings as transformers 5 reads them: rope_scaling wins over rope_parameters."""
    key = "rope_scaling" if raw.get("rope_scaling") else "rope_parameters"
    given = raw.get(key)
    return key, dict(given) if isinstance(given, dict) else {}


def read_config(read: _Reader) -> ModelConfig[HunyuanSettings]:
    """Llama's keys with Hunyuan's defaults; a "dynamic" RoPE with alpha read as the fixed base it is."""
    raw = dict(read.raw)
    key, parameters = _parameters(raw)
    alpha = parameters.get("alpha") if parameters.get("rope_type", parameters.get("type")) == "dynamic" else None
    if alpha is not None and (isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha <= 1e12):
        raise read.fail(f"{key}.alpha", f"found {_shown(alpha)}", "a positive number")
    if alpha:  # the "ntk_alpha" path: a default RoPE whose base is stretched once
        raw[key] = {"rope_type": "default", "rope_theta": parameters.get("rope_theta", raw.get("rope_theta", 10000.0))}
    cfg = llama_like(_Reader(raw, read.where), "hunyuan_v1_dense", DEFAULTS, windows=no_windows, attention_bias=True)
    if not alpha or cfg.rope is None:
        return with_family(cfg, HunyuanSettings(None, cfg.rope.theta if cfg.rope is not None else 0.0))
    d = cfg.head_dim
    rope = dataclasses.replace(cfg.rope, theta=cfg.rope.theta * float(alpha) ** (d / (d - 2)))  # θ·alpha^(d/(d − 2))
    return with_family(dataclasses.replace(cfg, rope=rope), HunyuanSettings(float(alpha), cfg.rope.theta))


def _scaled(cfg: ModelConfig[Any], rope: Rope) -> Rope:
    """The RoPE, its scaling said in words when NTK alpha stretched its base."""
    s = settings(cfg)
    if s.alpha is None:
        return rope
    d = cfg.head_dim
    return dataclasses.replace(rope, scaling=f"NTK alpha {s.alpha:g} (θ = {s.base:g}·{s.alpha:g}^({d}/{d - 2}), whatever the length)")


def _attention(cfg: ModelConfig[Any], w: Weights, index: int, rope: Rope | None) -> AttentionWeights:
    """Llama's projections of layer `index` with query_layernorm and key_layernorm on the rotated q and k."""
    attention = llama._attention(cfg, w, index, None if rope is None else _scaled(cfg, rope))
    p, d_k = f"layers.{index}.self_attn.", cfg.head_dim
    norm = QkNormAfterRope(w.get(p + "query_layernorm.weight", (d_k,)), w.get(p + "key_layernorm.weight", (d_k,)), eps=cfg.norm_eps)
    return dataclasses.replace(attention, variants=(*attention.variants, norm))


def layer_inputs(cfg: ModelConfig[Any], checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """Llama's, with Hunyuan's attention."""
    return llama.layer_inputs(cfg, checkpoint, ids, layer, attention=_attention)


def _raw(folder: Path) -> dict[str, Any]:
    from attncli.sources.checkpoints.config import read_raw

    return read_raw(folder)[0]


def mechanisms(cfg: ModelConfig[Any], folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of Hunyuan beyond describe.py: the base NTK alpha stretched."""
    s = settings(cfg)
    if s.alpha is None or cfg.rope is None:
        return []
    d = cfg.head_dim
    return [f"RoPE's base stretched by NTK alpha (rope_type dynamic with alpha {s.alpha:g}): θ = {s.base:g}·{s.alpha:g}^({d}/{d - 2}) "
            f"= {cfg.rope.theta:.6g}, fixed whatever the sentence's length"]  # fmt: skip


def shapes(cfg: ModelConfig[Any]) -> dict[str, tuple[int | None, ...]]:
    """Llama's tensors and layer 1's query_layernorm."""
    return {**llama.shapes(cfg), "layers.0.self_attn.query_layernorm.weight": (cfg.head_dim,)}


# llama.cpp's hunyuan-dense (HunYuanModel): gguf-py's names, query_layernorm and key_layernorm as attn_q_norm and attn_k_norm;
# nothing permuted (llama.cpp turns the pairs as NeoX does); alpha already in rope.freq_base, so the file's θ is the stretched one
GGUF_NAMES = (
    *llama.GGUF_NAMES,
    (r"layers\.(\d+)\.self_attn\.query_layernorm\.weight", r"blk.\1.attn_q_norm.weight"),
    (r"layers\.(\d+)\.self_attn\.key_layernorm\.weight", r"blk.\1.attn_k_norm.weight"),
)
GGUF = (GgufArchitecture("hunyuan-dense", "hunyuan_v1_dense", GGUF_NAMES, keys=llama.gguf_keys),)
VERIFY = Verification(O_PROJ, (FLOAT32_QK_NORM, FLOAT32_ROPE, FLOAT32_SOFTMAX))
DESCRIPTION = Description(qk_norm="per head (query_layernorm, key_layernorm of head_dim weights, shared by the heads), after RoPE")
