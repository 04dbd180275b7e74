"""Seed-OSS (ByteDance Seed-OSS-36B): Llama's layer with q, k and v biased (attention_bias, true) and o apart (attention_out_bias).

transformers' SeedOssAttention: q_proj, k_proj and v_proj carry biases when attention_bias (true by default),
o_proj when attention_out_bias (false by default); RoPE rotate-half, grouped-query, √d_k, causal; the MLP is
Llama's SwiGLU (biased when mlp_bias). The module is its declaration (`LLAMA_LIKE`): its bias switches.
"""

from __future__ import annotations

from typing import Any

from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.config import Biases, LlamaLike, no_windows
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata, renamed

VERIFY = llama.VERIFY  # Llama's float32 steps: RMSNorm, RoPE, softmax

DEFAULTS: dict[str, Any] = {
    "layers": 64, "hidden": 4096, "heads": 80, "kv": 8, "positions": 524288, "inter": 27648, "head_dim": 128,
}  # SeedOssConfig  # fmt: skip
BIASES = Biases(qkv=("attention_bias", True), output=("attention_out_bias", False), mlp=("mlp_bias", False))
LLAMA_LIKE = LlamaLike("seed_oss", "Seed-OSS", DEFAULTS, windows=no_windows, biases=BIASES)


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """Seed-OSS's bias switches from the tensors the file has (the converter writes what the checkpoint has)."""
    return {
        **llama.gguf_keys(file, a, raw, head_dim),
        "attention_out_bias": "blk.0.attn_output.bias" in file.tensors,
        "mlp_bias": "blk.0.ffn_up.bias" in file.tensors,
    }


# SeedOssModel only renames; gguf-py names the norm before the MLP post_attention_norm
GGUF_NAMES = (
    *renamed(llama.GGUF_NAMES, "post_attention_layernorm"),
    (r"layers\.(\d+)\.post_attention_layernorm\.weight", r"blk.\1.post_attention_norm.weight"),
)
GGUF = (GgufArchitecture("seed_oss", "seed_oss", GGUF_NAMES, keys=gguf_keys),)
