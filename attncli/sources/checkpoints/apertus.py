"""Apertus (Swiss AI): Llama's attention with QK-norm per head, and an MLP of one up projection through xIELU.

transformers' ApertusDecoderLayer: h + attention(attention_layernorm h), then h + mlp(feedforward_layernorm h), both
RMSNorms. ApertusAttention: q, k, v, o (biased when attention_bias); `q_norm`, `k_norm` (RMSNorm over each head's
head_dim, one weight shared by the heads) before RoPE rotate-half (llama3-scaled, θ 12 000 000, when config.json
names none); grouped-query; √d_k; causal. ApertusMLP: down(xIELU(up(x))), no gate, where xIELU has two learned
numbers per layer (mlp.act_fn.alpha_p, alpha_n) and two stored constants (beta, eps):
    α_p = softplus(alpha_p), α_n = beta + softplus(alpha_n)
    xIELU(x) = α_p·x² + beta·x for x > 0, else (expm1(min(x, eps)) − x)·α_n + beta·x
The module is its declaration (`LLAMA_LIKE`) and the one mechanism no field says, its MLP (`_mlp`, declared as its `mlp`):
llama.py computes the rest.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from attncli.sources.checkpoints import llama, qwen3
from attncli.sources.checkpoints.blocks import Weights, activate
from attncli.sources.checkpoints.config import Description, LayerNorms, LlamaLike, ModelConfig, no_windows
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Joined, Metadata

DEFAULTS: dict[str, Any] = {
    "layers": 32, "hidden": 4096, "heads": 32, "kv": None, "positions": 65536, "inter": 14336, "eps": 1e-5, "act": "xielu",
}  # ApertusConfig  # fmt: skip
ROPE = {"rope_type": "llama3", "rope_theta": 12000000.0, "factor": 8.0, "original_max_position_embeddings": 8192,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0}  # ApertusConfig's when config.json names none  # fmt: skip


def _xielu(w: Weights, p: str, x: np.ndarray) -> np.ndarray:
    """(L, inner) xIELU of x with layer prefix `p`'s act_fn numbers (see the module's doc)."""
    alpha_p, alpha_n, beta, eps = (float(w.get(p + "act_fn." + name, shape).reshape(-1)[0])
                                   for name, shape in (("alpha_p", (1,)), ("alpha_n", (1,)), ("beta", ()), ("eps", ())))  # fmt: skip
    a_p = np.logaddexp(0.0, alpha_p)  # softplus
    a_n = beta + np.logaddexp(0.0, alpha_n)
    out: np.ndarray = np.where(x > 0, a_p * x * x + beta * x, (np.expm1(np.minimum(x, eps)) - x) * a_n + beta * x)
    return out


def _mlp(cfg: ModelConfig, w: Weights, index: int, x: np.ndarray) -> np.ndarray:
    """(L, d) down(act(up(x))) of layer `index`."""
    p = f"layers.{index}.mlp."
    up = llama._linear(w, p + "up_proj", x, cfg.intermediate_size, False)  # (L, inner)
    hidden = _xielu(w, p, up) if cfg.activation == "xielu" else activate(cfg.activation, up)
    return llama._linear(w, p + "down_proj", hidden, cfg.hidden_size, False)  # (L, d)


NORMS = LayerNorms("attention_layernorm", None, "feedforward_layernorm", None)
# Llama's keys with Apertus's defaults (its llama3 RoPE when none is named); Qwen3's QK-norm; its norms' names; its own MLP
LLAMA_LIKE = LlamaLike("apertus", "Apertus", DEFAULTS, windows=no_windows, qk_norm=qwen3.QK_NORM, attention_bias=True, rope_default=ROPE,
                       layer_norms=NORMS, mlp=_mlp, own_activation="xielu")  # fmt: skip


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json: layer 1's projections, QK-norm and up projection."""
    d, H, G, d_k = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim
    return {
        "embed_tokens.weight": (None, d),
        "layers.0.self_attn.q_proj.weight": (H * d_k, d),
        "layers.0.self_attn.k_proj.weight": (G * d_k, d),
        "layers.0.self_attn.q_norm.weight": (d_k,),
        "layers.0.mlp.up_proj.weight": (cfg.intermediate_size, d),
    }


def mechanisms(cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of Apertus beyond describe.py: its MLP, which no attention reads but every later layer does."""
    return [f"MLP: down({cfg.activation}(up(x))), no gate" + (" — xIELU with two learned numbers per layer" if cfg.activation == "xielu" else "")]


VERIFY = qwen3.VERIFY  # RMSNorm (q and k norms too), RoPE, softmax in float32
DESCRIPTION = Description(qk_norm=qwen3.DESCRIPTION.qk_norm)


# -- GGUF: ApertusModel is LlamaModel's converter without the permutation (undo_permute = False: the rows keep Hugging
# Face's rotate-half order, which llama.cpp turns as NeoX does); llama3 scaling becomes rope_freqs (read by llama.py);
# each layer's four xIELU numbers leave the tensors for the metadata lists xielu.alpha_p, alpha_n, beta, eps (raw, before softplus)
GGUF_NAMES = (
    *llama.GGUF_NAMES,
    *llama.GGUF_QK_NORMS,
    (r"layers\.(\d+)\.attention_layernorm\.weight", r"blk.\1.attn_norm.weight"),
    (r"layers\.(\d+)\.feedforward_layernorm\.weight", r"blk.\1.ffn_norm.weight"),
)


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """Apertus's config.json keys from an apertus file: xIELU (the converter writes the xielu lists only for it)."""
    return {**llama.gguf_keys(file, a, raw, head_dim), "hidden_act": "xielu" if file.has_key("xielu.alpha_p") else "silu"}


def gguf_joined(file: Metadata, blk: str, rest: str) -> Joined | None:
    """mlp.act_fn.alpha_p (1,), alpha_n (1,), beta (), eps (): layer N's entry of the metadata list xielu.<name>."""
    found = re.fullmatch(r"mlp\.act_fn\.(alpha_p|alpha_n|beta|eps)", rest)
    if found is None:
        return None
    return Joined((1,) if found.group(1).startswith("alpha") else (), ("xielu." + found.group(1),), "value", int(blk.split(".")[1]))


GGUF = (GgufArchitecture("apertus", "apertus", GGUF_NAMES, keys=gguf_keys, joined=gguf_joined),)
