"""Cohere2 (Command R7B): sliding layers with interleaved RoPE, global layers with no position encoding, attention ∥ MLP.

transformers' Cohere2DecoderLayer: x = input_layernorm(h), a LayerNorm with no bias (mean removed, then
× w); then h + attention(x) + mlp(x), both blocks reading the same x (parallel). Cohere2Attention: q, k, v, o
projections (biased when attention_bias), grouped-query, scores × d_k^−½, causal; on a `sliding_attention`
layer the last `sliding_window` keys and RoPE on interleaved pairs (2i, 2i + 1) turned by ω_i (its rotate_half
pairs neighbours, its cos repeat_interleave'd); on a `full_attention` layer no RoPE at all (NoPE). Layer kinds:
`layer_types`, else every sliding_window_pattern-th (4th) layer global. The MLP is Llama's SwiGLU, unbiased.
The module is its declaration (`LLAMA_LIKE`): llama.py computes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.config import (
    FLOAT32_SOFTMAX,
    O_PROJ,
    LayerNorms,
    LlamaLike,
    ModelConfig,
    Verification,
    every_nth_full,
    sliding_only,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata, layer_types

DEFAULTS: dict[str, Any] = {"layers": 40, "hidden": 8192, "heads": 64, "kv": None, "positions": 8192, "inter": 22528}  # Cohere2Config
WINDOWS = every_nth_full("sliding_window_pattern", 4)
NORMS = LayerNorms("input_layernorm", None, None, None, kind="LayerNorm, no bias", parallel=True)
# Llama's keys with Cohere2's defaults; its layer kinds, interleaved RoPE on the sliding ones only; one LayerNorm (ε:
# layer_norm_eps) read by attention and MLP in parallel; attention_bias read
LLAMA_LIKE = LlamaLike("cohere2", "Cohere2", DEFAULTS, windows=WINDOWS, rope_layers=sliding_only(WINDOWS), rope_style="interleaved",
                       layer_norms=NORMS, eps_key="layer_norm_eps", attention_bias=True)  # fmt: skip


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
