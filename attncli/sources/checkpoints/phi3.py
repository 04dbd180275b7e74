"""Phi-3 (Phi-3, Phi-3.5-mini, Phi-4-mini): Llama's block with one fused qkv_proj and one fused gate_up_proj, partial rotary where set.

Per transformers' Phi3Attention: qkv_proj(x) (no bias) has output rows [q (H·d_k) | k (G·d_k) | v (G·d_k)];
RoPE rotate-half on the first r = head_dim · partial_rotary_factor coordinates of each head (1 in Phi-3, 0.75
in Phi-4-mini); grouped-query heads; scores ÷ √d_k; causal, and windowed on every layer when sliding_window is
set; o_proj. Phi3MLP: gate_up_proj(x) chunked in two, gate the first half, up the second; down(act(gate)·up).
RMSNorm before attention and MLP. Dimension names: L tokens, d = d_model, H query heads, G key/value heads.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attncli.core.variants import Rope
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import (
    AttentionWeights,
    LayerInputs,
    Weights,
    activate,
    rms_norm,
    self_attention,
    sharing_note,
    storage_note,
    through,
    window_note,
)
from attncli.sources.checkpoints.config import (
    FLOAT32_RMSNORM,
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    O_PROJ,
    ModelConfig,
    Verification,
    _Reader,
    every_layer,
    llama_like,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata, renamed
from attncli.sources.checkpoints.rope import rope_spec
from attncli.sources.checkpoints.source import TensorSource


def _attention(cfg: ModelConfig, w: Weights, index: int, rope: Rope) -> AttentionWeights:
    """Layer `index` (from 0): qkv_proj's rows cut into the q, k and v blocks, each returned as (d, ·)."""
    d, H, G, d_k = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim
    p = f"layers.{index}.self_attn."
    qkv = w.get(p + "qkv_proj.weight", ((H + 2 * G) * d_k, d))  # (out, in): rows [q | k | v]
    W_Q = np.ascontiguousarray(qkv[: H * d_k].T)  # (d, H·d_k)
    W_K = np.ascontiguousarray(qkv[H * d_k : (H + G) * d_k].T)  # (d, G·d_k)
    W_V = np.ascontiguousarray(qkv[(H + G) * d_k :].T)  # (d, G·d_k)
    window = cfg.windows[index]
    return AttentionWeights(
        W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=None, b_K=None, b_V=None, W_O=w.get(p + "o_proj.weight", (d, H * d_k)).T, b_O=None,
        heads=H, kv_heads=G, head_dim=d_k, divisor=math.sqrt(d_k), causal=True,
        window=None if window is None else window - 1,  # transformers: key j seen when j > i − sliding_window
        rope=rope,
    )  # fmt: skip


def _norm(cfg: ModelConfig, w: Weights, name: str, x: np.ndarray) -> np.ndarray:
    return rms_norm(x, w.get(name + ".weight", (cfg.hidden_size,)), cfg.norm_eps)


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray, rope: Rope) -> np.ndarray:
    """(L, d) the residual stream after layer `index`: h + attention(norm h), then + down(act(gate)·up) of the fused gate_up."""
    d, inner = cfg.hidden_size, cfg.intermediate_size
    p = f"layers.{index}."
    h = h + self_attention(_norm(cfg, w, p + "input_layernorm", h), _attention(cfg, w, index, rope))  # (L, d)
    gate_up = w.product(p + "mlp.gate_up_proj.weight", _norm(cfg, w, p + "post_attention_layernorm", h), (2 * inner, d))  # (L, 2·inner)
    hidden = activate(cfg.activation, gate_up[:, :inner]) * gate_up[:, inner:]  # (L, inner) act(gate)·up
    out: np.ndarray = h + w.product(p + "mlp.down_proj.weight", hidden, (d, inner))  # (L, d)
    return out


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm (RMSNorm) of the residual entering `layer` (from 1), and that layer's attention weights."""
    assert cfg.rope is not None
    w = Weights(checkpoint, probe="embed_tokens.weight", prefixes=("model.", ""))
    rope = rope_spec(cfg.rope, cfg.head_dim, len(ids))  # longrope: short or long factors by the sentence's length
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h, rope)
    index = layer - 1
    X = _norm(cfg, w, f"layers.{index}.input_layernorm", h)  # (L, d)
    attention = _attention(cfg, w, index, rope)
    dtype = w.dtype(f"layers.{index}.self_attn.qkv_proj.weight")
    H, G, d_k = cfg.heads, cfg.kv_heads, cfg.head_dim
    r = rope.width(d_k)
    part = (f" on the first {r} of each head's {d_k} coordinates (partial_rotary_factor {cfg.rope.partial:g}; "
            f"the other {d_k - r} pass through unrotated)" if r < d_k else "")  # fmt: skip
    scaling = f", {rope.scaling.replace(' (', ' scaling (', 1)}" if rope.scaling else ""
    notes = (
        f"X = input_layernorm (RMSNorm) of the residual entering layer {layer}: token embeddings{through(layer)}",
        f"W_Q, W_K, W_V are the row blocks [q ({H}·{d_k}) | k ({G}·{d_k}) | v ({G}·{d_k})] of qkv_proj",
        f"RoPE (rotate-half){part} at positions 0, 1, 2, …: θ = {rope.theta:g}{scaling}",
        sharing_note(H, G),
        f"scores divided by √d_k = √{d_k} = {attention.divisor:g}",
        "causal mask: each token sees itself and the tokens before it",
        window_note(attention.window),
        storage_note(dtype),
    )  # fmt: skip
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=tuple(note for note in notes if note is not None))


DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 3072, "heads": 32, "kv": None, "positions": 4096, "inter": 8192}  # Phi3Config


def read_config(read: _Reader) -> ModelConfig:
    """Llama's keys with Phi-3's defaults; one window on every layer when sliding_window is set; longrope read."""
    return llama_like(read, "phi3", DEFAULTS, windows=every_layer(None), longrope=True)


# -- GGUF and model verify: the fused qkv_proj is attn_qkv and gate_up_proj ffn_up; the rotate-half order kept ------

GGUF_NAMES = (
    *renamed(llama.GGUF_NAMES, "q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"),
    (r"layers\.(\d+)\.self_attn\.qkv_proj\.weight", r"blk.\1.attn_qkv.weight"),
    (r"layers\.(\d+)\.mlp\.gate_up_proj\.weight", r"blk.\1.ffn_up.weight"),
)


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """Llama's keys, and the window the file stores (on every layer)."""
    keys = llama.gguf_keys(file, a, raw, head_dim)
    window = file.value(a + "attention.sliding_window")
    if window:
        keys["sliding_window"] = window
    return keys


GGUF = (GgufArchitecture("phi3", "phi3", GGUF_NAMES, keys=gguf_keys),)
VERIFY = Verification(O_PROJ, (FLOAT32_RMSNORM, FLOAT32_ROPE, FLOAT32_SOFTMAX))


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json (q, k and v in one projection, gate and up in another)."""
    d, H, G, d_k = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim
    return {
        "embed_tokens.weight": (None, d),
        "layers.0.self_attn.qkv_proj.weight": ((H + 2 * G) * d_k, d),
        "layers.0.mlp.gate_up_proj.weight": (2 * cfg.intermediate_size, d),
    }
