"""GPT-NeoX / Pythia: LayerNorm with bias, one query_key_value laid out per head, partial rotary, parallel residual.

Per transformers' GPTNeoXAttention: query_key_value(x) (with bias) is viewed as (…, heads, 3·d_k), so its
output rows run [q | k | v] for head 1, then head 2, … (not a q block, a k block, a v block as GPT-2 and Phi-3);
RoPE rotate-half turns the first r = head_dim · rotary_pct coordinates of each head (Pythia: a quarter);
scores ÷ √d_k; causal; `dense` (with bias) projects back. GPTNeoXLayer with use_parallel_residual (Pythia):
x + attention(input_layernorm(x)) + mlp(post_attention_layernorm(x)), the two norms of the same x; without it,
sequential. MLP: dense_4h_to_h(act(dense_h_to_4h(x))). Its config keys are read here (families.read_config hands a
gpt_neox config.json to `read_config`): rotary_pct + rotary_emb_base (transformers 4) or rope_parameters (5),
use_parallel_residual, attention_bias. Dimension names: L tokens, d = d_model, H heads, d_k head size.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import numpy as np

from attncli.core.variants import Rope
from attncli.sources.checkpoints.blocks import (
    AttentionWeights,
    LayerInputs,
    Weights,
    activate,
    self_attention,
    storage_note,
    through,
)
from attncli.sources.checkpoints.config import (
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    MOST,
    ModelConfig,
    RopeConfig,
    Tensors,
    Verification,
    _activation,
    _dtype,
    _heads_divide,
    _partial,
    _Reader,
    _rope,
    _shown,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata
from attncli.sources.checkpoints.rope import rope_spec
from attncli.sources.checkpoints.source import TensorSource


class NeoxSettings(NamedTuple):
    """GPT-NeoX's own config keys, beside the common ones of ModelConfig."""

    parallel_residual: bool  # use_parallel_residual (Pythia: true): x + attn(ln1(x)) + mlp(ln2(x)) of the same x


TENSORS = Tensors("embed_in.weight", ("gpt_neox.", ""))  # GPTNeoXModel's names, under `gpt_neox.` in GPTNeoXForCausalLM
DEFAULTS: dict[str, Any] = {"layers": 44, "hidden": 6144, "heads": 64, "positions": 2048, "eps": 1e-5, "act": "gelu", "inter": 24576}  # GPTNeoXConfig


def read_config(read: _Reader) -> ModelConfig[NeoxSettings]:
    """GPT-NeoX / Pythia: transformers 4's rotary_pct + rotary_emb_base, or transformers 5's rope_parameters."""
    d = DEFAULTS
    layers = read.count("num_hidden_layers", default=d["layers"], most=MOST["layers"])
    hidden = read.count("hidden_size", default=d["hidden"], most=MOST["hidden"])
    heads = read.count("num_attention_heads", default=d["heads"], most=MOST["heads"])
    max_positions = read.count("max_position_embeddings", default=d["positions"], most=MOST["positions"])
    if "rotary_pct" in read.raw or "rotary_emb_base" in read.raw:  # transformers 4 (Pythia's hub configs)
        rope = RopeConfig(
            theta=read.number("rotary_emb_base", 10_000.0), kind="default", partial=_partial(read, "rotary_pct", read.raw.get("rotary_pct", 0.25))
        )
    else:
        parameters = read.raw.get("rope_parameters") or {}
        if not isinstance(parameters, dict):
            raise read.fail("rope_parameters", f"found {_shown(parameters)}", "a mapping of RoPE settings")
        rope = _rope(read, max_positions) if parameters else RopeConfig(theta=10_000.0, kind="default", partial=0.25)
        if "partial_rotary_factor" not in parameters and "partial_rotary_factor" not in read.raw:
            rope = dataclasses.replace(rope, partial=0.25)
    bias = read.flag("attention_bias", True)
    return ModelConfig(
        model_type="gpt_neox",
        layers=layers,
        hidden_size=hidden,
        heads=heads,
        kv_heads=heads,
        head_dim=_heads_divide(read, hidden, heads, "num_attention_heads"),
        intermediate_size=read.count("intermediate_size", default=d["inter"], most=MOST["inner"]),
        max_positions=max_positions,
        norm_eps=read.number("layer_norm_eps", d["eps"]),
        activation=_activation(read, "hidden_act", default=d["act"]),
        dtype=_dtype(read),
        rope=rope,
        windows=(None,) * layers,
        causal=True,
        qkv_bias=bias,
        output_bias=bias,
        mlp_bias=True,
        family=NeoxSettings(parallel_residual=read.flag("use_parallel_residual", True)),
    )


def _parallel(cfg: ModelConfig[NeoxSettings]) -> bool:
    return cfg.family.parallel_residual


def _attention(cfg: ModelConfig[NeoxSettings], w: Weights, index: int, rope: Rope) -> AttentionWeights:
    """Layer `index` (from 0): query_key_value's rows split per head into q, k and v, each returned as (d, H·d_k)."""
    d, H, d_k = cfg.hidden_size, cfg.heads, cfg.head_dim
    p = f"layers.{index}.attention."
    per_head = w.get(p + "query_key_value.weight", (3 * H * d_k, d)).reshape(H, 3, d_k, d)  # (H, q/k/v, d_k, d): nn.Linear (out, in)
    W_Q, W_K, W_V = (np.ascontiguousarray(per_head[:, part].reshape(H * d_k, d).T) for part in range(3))  # (d, H·d_k) each
    b_Q = b_K = b_V = b_O = None
    if cfg.qkv_bias:
        bias = w.get(p + "query_key_value.bias", (3 * H * d_k,)).reshape(H, 3, d_k)  # (H, q/k/v, d_k)
        b_Q, b_K, b_V = (np.ascontiguousarray(bias[:, part].reshape(H * d_k)) for part in range(3))  # (H·d_k,) each
    if cfg.output_bias:
        b_O = w.get(p + "dense.bias", (d,))
    return AttentionWeights(
        W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=b_Q, b_K=b_K, b_V=b_V, W_O=w.get(p + "dense.weight", (d, H * d_k)).T, b_O=b_O,
        heads=H, kv_heads=H, head_dim=d_k, divisor=math.sqrt(d_k), causal=True, window=None, rope=rope,
    )  # fmt: skip


def _mlp(cfg: ModelConfig[NeoxSettings], w: Weights, index: int, x: np.ndarray) -> np.ndarray:
    """(L, d) dense_4h_to_h(act(dense_h_to_4h(x))), each with its bias."""
    d, inner = cfg.hidden_size, cfg.intermediate_size
    p = f"layers.{index}.mlp."
    hidden = activate(cfg.activation, w.product(p + "dense_h_to_4h.weight", x, (inner, d)) + w.get(p + "dense_h_to_4h.bias", (inner,)))
    out: np.ndarray = w.product(p + "dense_4h_to_h.weight", hidden, (d, inner)) + w.get(p + "dense_4h_to_h.bias", (d,))  # (L, d)
    return out


def _layer(cfg: ModelConfig[NeoxSettings], w: Weights, index: int, h: np.ndarray, rope: Rope) -> np.ndarray:
    """(L, d) the residual stream after layer `index`: parallel (x + attn + mlp of the same x) or sequential."""
    p = f"layers.{index}."
    attention = self_attention(w.layer_norm(p + "input_layernorm", h, cfg.norm_eps), _attention(cfg, w, index, rope))  # (L, d)
    if _parallel(cfg):
        out: np.ndarray = _mlp(cfg, w, index, w.layer_norm(p + "post_attention_layernorm", h, cfg.norm_eps)) + attention + h
        return out
    h = attention + h
    out = _mlp(cfg, w, index, w.layer_norm(p + "post_attention_layernorm", h, cfg.norm_eps)) + h
    return out


def layer_inputs(cfg: ModelConfig[NeoxSettings], checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm of the residual entering `layer` (from 1), and that layer's attention weights."""
    assert cfg.rope is not None
    w = Weights(checkpoint, probe=TENSORS.probe, prefixes=TENSORS.prefixes)
    rope = rope_spec(cfg.rope, cfg.head_dim)
    h = w.rows("embed_in.weight", ids, cfg.hidden_size)  # (L, d)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h, rope)
    index = layer - 1
    X = w.layer_norm(f"layers.{index}.input_layernorm", h, cfg.norm_eps)  # (L, d)
    attention = _attention(cfg, w, index, rope)
    dtype = w.dtype(f"layers.{index}.attention.query_key_value.weight")
    r = rope.width(cfg.head_dim)
    residual = (
        "parallel residual: each layer adds attention(input_layernorm(x)) and mlp(post_attention_layernorm(x)) of the same x"
        if _parallel(cfg)
        else "sequential residual: attention, then the MLP of the updated stream"
    )
    notes = (
        f"X = input_layernorm (LayerNorm) of the residual entering layer {layer}: token embeddings{through(layer)}",
        "W_Q, W_K, W_V come from query_key_value, whose rows run [q | k | v] head by head",
        f"RoPE (rotate-half) on the first {r} of each head's {cfg.head_dim} coordinates (rotary_pct {cfg.rope.partial:g}; "
        f"the other {cfg.head_dim - r} pass through unrotated) at positions 0, 1, 2, …: θ = {rope.theta:g}",
        "q, k, v and dense (W_O) have biases" if cfg.qkv_bias else None,
        f"scores divided by √d_k = √{cfg.head_dim} = {attention.divisor:g}",
        "causal mask: each token sees itself and the tokens before it",
        residual,
        storage_note(dtype),
    )
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=tuple(note for note in notes if note is not None))


# -- GGUF and model verify ---------------------------------------------------------------------

GGUF_NAMES = (
    (r"embed_in\.weight", "token_embd.weight"),
    (r"final_layer_norm\.(weight|bias)", r"output_norm.\1"),
    (r"layers\.(\d+)\.input_layernorm\.(weight|bias)", r"blk.\1.attn_norm.\2"),
    (r"layers\.(\d+)\.post_attention_layernorm\.(weight|bias)", r"blk.\1.ffn_norm.\2"),
    (r"layers\.(\d+)\.attention\.query_key_value\.(weight|bias)", r"blk.\1.attn_qkv.\2"),
    (r"layers\.(\d+)\.attention\.dense\.(weight|bias)", r"blk.\1.attn_output.\2"),
    (r"layers\.(\d+)\.mlp\.dense_h_to_4h\.(weight|bias)", r"blk.\1.ffn_up.\2"),
    (r"layers\.(\d+)\.mlp\.dense_4h_to_h\.(weight|bias)", r"blk.\1.ffn_down.\2"),
)


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """GPT-NeoX's config.json keys from the metadata under gptneox.… beside the shared ones."""
    return {
        "layer_norm_eps": file.number(a + "attention.layer_norm_epsilon", default=1e-5),
        "use_parallel_residual": bool(file.value(a + "use_parallel_residual") if file.has_key(a + "use_parallel_residual") else True),
        "attention_bias": "blk.0.attn_qkv.bias" in file.tensors,
        "hidden_act": "gelu",  # GGUF stores no activation; Pythia's is GELU (llama.cpp computes it with tanh's approximation)
    }


# query_key_value, laid out per head (q, k, v of head 1, then of head 2, …), is stored as all queries, then all keys,
# then all values (the converter's "bloom-style to gpt-style"); the rows are put back per head
GGUF = (GgufArchitecture("gptneox", "gpt_neox", GGUF_NAMES, keys=gguf_keys, qkv_by_kind=True),)
VERIFY = Verification(r"(?:^|\.)layers\.(\d+)\.attention\.dense$", (FLOAT32_ROPE, FLOAT32_SOFTMAX))  # LayerNorm is float64


def shapes(cfg: ModelConfig[NeoxSettings]) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json (q, k and v in one projection)."""
    d, d_k = cfg.hidden_size, cfg.head_dim
    return {
        "embed_in.weight": (None, d),
        "layers.0.attention.query_key_value.weight": (3 * cfg.heads * d_k, d),
        "layers.0.mlp.dense_h_to_4h.weight": (cfg.intermediate_size, d),
    }
