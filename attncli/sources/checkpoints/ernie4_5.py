"""ERNIE 4.5 (the dense 0.3B): Llama's layer with RoPE on interleaved pairs, turned in float32, and one bias switch.

transformers' Ernie4_5Attention: q, k, v and o projections, all biased when use_bias (false by default), as are
the MLP's; RoPE on pairs (2i, 2i + 1) turned by ω_i (GLM's rotate_half, its cos repeat_interleave'd), over the
whole head, applied in float32; grouped-query, √d_k, causal. The module is its declaration (`LLAMA_LIKE`): its
pairs and its bias switch.
"""

from __future__ import annotations

from typing import Any

from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.cohere2 import FLOAT32_ROPE_TURNED
from attncli.sources.checkpoints.config import (
    FLOAT32_RMSNORM,
    FLOAT32_SOFTMAX,
    O_PROJ,
    Biases,
    LlamaLike,
    Verification,
    no_windows,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata

DEFAULTS: dict[str, Any] = {
    "layers": 18, "hidden": 1024, "heads": 16, "kv": 2, "positions": 131072, "inter": 3072, "head_dim": 128, "eps": 1e-5,
}  # Ernie4_5Config  # fmt: skip
USE_BIAS = ("use_bias", False)  # one switch for every projection, attention's and the MLP's
LLAMA_LIKE = LlamaLike("ernie4_5", "ERNIE 4.5", DEFAULTS, windows=no_windows, rope_style="interleaved",
                       biases=Biases(USE_BIAS, USE_BIAS, USE_BIAS))  # fmt: skip


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """ERNIE 4.5's config.json keys from the metadata: use_bias from the tensors (the converter writes what the checkpoint has)."""
    return {**llama.gguf_keys(file, a, raw, head_dim), "use_bias": "blk.0.attn_q.bias" in file.tensors,
            "rms_norm_eps": file.number(a + "attention.layer_norm_rms_epsilon", default=1e-5)}  # fmt: skip


# Ernie4_5Model only renames: W_Q and W_K keep their rows, already in interleaved pairs, which llama.cpp turns as such
GGUF = (GgufArchitecture("ernie4_5", "ernie4_5", llama.GGUF_NAMES, keys=gguf_keys),)
VERIFY = Verification(O_PROJ, (FLOAT32_RMSNORM, FLOAT32_ROPE_TURNED, FLOAT32_SOFTMAX))
