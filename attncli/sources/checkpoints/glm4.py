"""GLM-4 (GLM-4-9B-0414, GLM-4-32B): partial rotary on interleaved pairs, q/k/v biases, four norms around attention and MLP.

transformers' Glm4DecoderLayer: h + post_self_attn_layernorm(attention(input_layernorm h)), then
h + post_mlp_layernorm(mlp(post_attention_layernorm h)), every norm an RMSNorm. Glm4Attention: q, k, v
projections with biases (attention_bias, true by default), o_proj without; RoPE on the first
r = head_dim · partial_rotary_factor coordinates of each head (0.5 when config.json names none), in interleaved
pairs (2i, 2i + 1) turned by ω_i = θ^(−2i/r) (its cos is the first r/2 columns repeat_interleave'd); the rest
carry no position; grouped-query; scores × d_k^−½; causal. Glm4MLP: gate_up_proj(x) chunked in two, down(up·act(gate)).
The module is its declaration (`LLAMA_LIKE`): llama.py computes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.config import Biases, LayerNorms, LlamaLike, ModelConfig, no_windows
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, renamed

DEFAULTS: dict[str, Any] = {
    "layers": 40, "hidden": 4096, "heads": 32, "kv": 2, "positions": 131072, "inter": 13696, "head_dim": 128, "eps": 1.5625e-07,
}  # Glm4Config  # fmt: skip


NORMS = LayerNorms("input_layernorm", "post_self_attn_layernorm", "post_attention_layernorm", "post_mlp_layernorm")
# Llama's keys with GLM-4's defaults: q, k and v biased unless attention_bias is false (o never); half of each head turned, in
# interleaved pairs, unless config.json names its partial_rotary_factor; four norms; the fused MLP
LLAMA_LIKE = LlamaLike("glm4", "GLM-4", DEFAULTS, windows=no_windows, rope_style="interleaved", partial_rotary=0.5,
                       biases=Biases(qkv=("attention_bias", True), output=None), layer_norms=NORMS, mlp=llama.fused_mlp)  # fmt: skip


def mechanisms(cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of GLM-4 beyond describe.py: the rotated pairs, and the four norms."""
    return [
        "RoPE turns interleaved pairs (2i, 2i + 1) of the rotated coordinates, not their two halves",
        "four RMSNorms per layer: before attention and MLP, and on each one's output before it joins the residual",
    ]


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json: layer 1's projections and its fused gate_up_proj."""
    d, H, G, d_k = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim
    return {
        "embed_tokens.weight": (None, d),
        "layers.0.self_attn.q_proj.weight": (H * d_k, d),
        "layers.0.self_attn.k_proj.weight": (G * d_k, d),
        "layers.0.mlp.gate_up_proj.weight": (2 * cfg.intermediate_size, d),
    }


# -- GGUF: Glm4Model only renames (the rows keep GLM's interleaved pairs, which llama.cpp turns as such) and stores the
# rotated part as rope.dimension_count; its two extra norms are post_attention_norm and post_ffw_norm, gate_up_proj ffn_up
GGUF_NAMES = (
    *renamed(llama.GGUF_NAMES, "gate_proj", "up_proj"),
    (r"layers\.(\d+)\.post_self_attn_layernorm\.weight", r"blk.\1.post_attention_norm.weight"),
    (r"layers\.(\d+)\.post_mlp_layernorm\.weight", r"blk.\1.post_ffw_norm.weight"),
    (r"layers\.(\d+)\.mlp\.gate_up_proj\.weight", r"blk.\1.ffn_up.weight"),
)
GGUF = (GgufArchitecture("glm4", "glm4", GGUF_NAMES, keys=llama.gguf_keys),)
VERIFY = llama.VERIFY  # Llama's float32 steps: RMSNorm, RoPE, softmax
