"""EXAONE 4.0: OLMo 2's post-norms, Qwen3's QK-norm per head, and sliding layers with RoPE beside global layers without.

transformers' Exaone4DecoderLayer: h + post_attention_layernorm(attention(h)), then h + post_feedforward_layernorm(mlp(h));
the attention reads the raw residual stream (no norm before it). Exaone4Attention: q, k, v, o without biases;
`q_norm`, `k_norm` (RMSNorm over each head's head_dim, one weight shared by the heads) before RoPE; RoPE rotate-half
on `sliding_attention` layers, which see the last `sliding_window` keys; `full_attention` layers see every earlier
key and have no RoPE (NoPE) — unless sliding_window is null, when every layer is global and turned (EXAONE 4.0
1.2B). Layer kinds: `layer_types`, else every sliding_window_pattern-th (4th) layer global. The MLP is Llama's SwiGLU.
The module is its declaration (`LLAMA_LIKE`): llama.py computes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attncli.sources.checkpoints import llama, olmo2, qwen3
from attncli.sources.checkpoints.config import (
    Description,
    LlamaLike,
    LlamaSettings,
    ModelConfig,
    _Reader,
    every_nth_full,
    sliding_only,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata, layer_types

DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 4096, "heads": 32, "kv": 32, "positions": 2048, "inter": 16384, "eps": 1e-5}  # Exaone4Config
WINDOWS = every_nth_full("sliding_window_pattern", 4, nullable=True)


def _rope_layers(read: _Reader, layers: int) -> tuple[bool, ...]:
    """RoPE on the sliding layers only, unless sliding_window is null: then every layer (global) is turned (EXAONE 4.0 1.2B)."""
    if read.raw.get("sliding_window", 4096) is None:
        return (True,) * layers
    return sliding_only(WINDOWS)(read, layers)


# Llama's keys with EXAONE 4.0's defaults; its layer kinds, RoPE on the sliding ones; Qwen3's QK-norm; OLMo 2's post-norms
LLAMA_LIKE = LlamaLike("exaone4", "EXAONE 4", DEFAULTS, windows=WINDOWS, rope_layers=_rope_layers, qk_norm=qwen3.QK_NORM, norms="post")


def mechanisms(cfg: ModelConfig[LlamaSettings], folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of EXAONE 4 beyond describe.py: where RoPE is, and its post-norms."""
    where = ("RoPE on the sliding layers only; the global layers have no position encoding (NoPE): only the causal mask orders "
             "their tokens") if not all(cfg.family.rope_layers) or any(cfg.windows) else "RoPE on every layer (sliding_window null: no NoPE layers)"  # fmt: skip
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
