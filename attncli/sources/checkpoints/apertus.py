"""Apertus (Swiss AI): Llama's attention with QK-norm per head, and an MLP of one up projection through xIELU.

transformers' ApertusDecoderLayer: h + attention(attention_layernorm h), then h + mlp(feedforward_layernorm h), both
RMSNorms. ApertusAttention: q, k, v, o (biased when attention_bias); `q_norm`, `k_norm` (RMSNorm over each head's
head_dim, one weight shared by the heads) before RoPE rotate-half (llama3-scaled, θ 12 000 000, when config.json
names none); grouped-query; √d_k; causal. ApertusMLP: down(xIELU(up(x))), no gate, where xIELU has two learned
numbers per layer (mlp.act_fn.alpha_p, alpha_n) and two stored constants (beta, eps):
    α_p = softplus(alpha_p), α_n = beta + softplus(alpha_n)
    xIELU(x) = α_p·x² + beta·x for x > 0, else (expm1(min(x, eps)) − x)·α_n + beta·x
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import numpy as np

from attncli.core.variants import Rope
from attncli.sources.checkpoints import llama, qwen3
from attncli.sources.checkpoints.blocks import LayerInputs, Weights, activate, self_attention, through
from attncli.sources.checkpoints.config import Description, ModelConfig, _Reader, llama_like, no_windows
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Joined, Metadata
from attncli.sources.checkpoints.source import TensorSource

DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 4096, "heads": 32, "kv": None, "positions": 65536, "inter": 14336, "eps": 1e-5}  # ApertusConfig
ROPE = {"rope_type": "llama3", "rope_theta": 12000000.0, "factor": 8.0, "original_max_position_embeddings": 8192,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0}  # ApertusConfig's when config.json names none  # fmt: skip


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with Apertus's defaults (its llama3 RoPE when none is named); hidden_act "xielu" (its default) read here."""
    raw = dict(read.raw)
    if not raw.get("rope_parameters") and not raw.get("rope_scaling"):
        raw["rope_parameters"] = ROPE
    xielu = raw.get("hidden_act", "xielu") == "xielu"
    cfg = llama_like(_Reader({**raw, "hidden_act": "silu"} if xielu else raw, read.where), "apertus", DEFAULTS, windows=no_windows,
                     attention_bias=True)  # fmt: skip
    return dataclasses.replace(cfg, activation="xielu") if xielu else cfg


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


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray, rope: Rope) -> np.ndarray:
    """(L, d) the residual after layer `index`: h + attention(attention_layernorm h), then + mlp(feedforward_layernorm h)."""
    p = f"layers.{index}."
    h = h + self_attention(llama._norm(cfg, w, p + "attention_layernorm", h), qwen3._attention(cfg, w, index, rope))  # (L, d)
    out: np.ndarray = h + _mlp(cfg, w, index, llama._norm(cfg, w, p + "feedforward_layernorm", h))  # (L, d)
    return out


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = attention_layernorm (RMSNorm) of the residual entering `layer` (from 1), and that layer's attention with its QK-norm."""
    w, rope = llama.weights_and_rope(cfg, checkpoint)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h, rope)
    index = layer - 1
    X = llama._norm(cfg, w, f"layers.{index}.attention_layernorm", h)  # (L, d)
    attention = qwen3._attention(cfg, w, index, rope)
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    first = (f"X = attention_layernorm (RMSNorm) of the residual entering layer {layer}: token embeddings{through(layer)}"
             + (f", each MLP down({cfg.activation}(up(x)))" if layer > 1 else ""))  # fmt: skip
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=llama.notes(cfg, layer, rope, attention, dtype, first=first))


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
