"""BLOOM: ALiBi instead of position embeddings, one query_key_value laid out per head, LayerNorm after the embeddings.

Per transformers' BloomAttention: query_key_value(x) (with bias) is viewed as (…, heads, 3·d_k), [q | k | v] head by
head (as GPT-NeoX); scores are q·k/√d_k plus ALiBi, causal; `dense` (with bias) projects back. BLOOM's ALiBi is
the paper's: the same slopes as attncli's `alibi_slopes` (2^(−8/n)·h for n the largest power of two up to the head
count, then every other slope of 2n), added to the scaled scores. It differs from attncli's ALiBi variant in
three ways, none of which changes a weight: BLOOM adds +m·j (j the key's position from 0), attncli −m·(i − j)
(the paper's form, i and j from 1), and the two differ by m·(i − 1), the same for every key of a query's row,
which the softmax ignores (BLOOM's biased scores are m·(i − 1) higher); BLOOM's slopes and their products with the
positions are float32 (attncli's float64: 1e-8 relative apart when the head count is not a power of two); and
BLOOM's ALiBi is not causal in itself (the mask hides later keys). BloomBlock: x + attention(input_layernorm(x)),
then + the MLP of post_attention_layernorm (with apply_residual_connection_post_layernorm, the residual is the
normalised stream instead). MLP: dense_4h_to_h(gelu(dense_h_to_4h(x))), BLOOM's tanh GELU with its constant
0.79788456. Dimension names: L tokens, d = d_model, H heads, d_k head size.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from attncli.core.variants import Alibi
from attncli.core.variants.biases import alibi_slopes
from attncli.sources.checkpoints.blocks import AttentionWeights, LayerInputs, Weights, self_attention, storage_note, through
from attncli.sources.checkpoints.config import (
    FLOAT32_SOFTMAX,
    MOST,
    Description,
    ModelConfig,
    Tensors,
    Verification,
    _dtype,
    _heads_divide,
    _Reader,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata
from attncli.sources.checkpoints.source import TensorSource


class BloomSettings(NamedTuple):
    """BLOOM's own config keys, beside the common ones of ModelConfig."""

    residual_after_norm: bool  # apply_residual_connection_post_layernorm: the residual is the normalised stream


TENSORS = Tensors("word_embeddings.weight", ("transformer.", ""))  # BloomModel's names, under `transformer.` in BloomForCausalLM
DEFAULTS: dict[str, Any] = {"layers": 2, "hidden": 64, "heads": 8, "positions": 2048, "eps": 1e-5}  # BloomConfig; 2048: its training length
ACTIVATION = "bloom_gelu"  # x·½·(1 + tanh(0.79788456·x·(1 + 0.044715·x²))): gelu_new's form with BLOOM's rounded constant
DESCRIPTION = Description(own_biases=True)
FLOAT32_ALIBI = "ALiBi's slopes and their products with the key positions are float32"


def read_config(read: _Reader) -> ModelConfig:
    """BLOOM's config.json keys (n_layer, n_head; num_hidden_layers and num_attention_heads as aliases), BloomConfig's defaults."""
    d = DEFAULTS
    layers = read.count("n_layer", "num_hidden_layers", default=d["layers"], most=MOST["layers"])
    hidden = read.count("hidden_size", "n_embed", default=d["hidden"], most=MOST["hidden"])
    heads = read.count("n_head", "num_attention_heads", default=d["heads"], most=MOST["heads"])
    return ModelConfig(
        model_type="bloom",
        layers=layers,
        hidden_size=hidden,
        heads=heads,
        kv_heads=heads,
        head_dim=_heads_divide(read, hidden, heads, "n_head"),
        intermediate_size=4 * hidden,
        max_positions=read.count("seq_length", default=d["positions"], most=MOST["positions"]),  # ALiBi has no table: its training length
        norm_eps=read.number("layer_norm_epsilon", d["eps"]),
        activation=ACTIVATION,
        dtype=_dtype(read),
        rope=None,
        windows=(None,) * layers,
        causal=True,
        qkv_bias=True,
        output_bias=True,
        mlp_bias=True,
        family=BloomSettings(residual_after_norm=read.flag("apply_residual_connection_post_layernorm", False)),
    )


def _residual_after_norm(cfg: ModelConfig) -> bool:
    return cfg.family.residual_after_norm if isinstance(cfg.family, BloomSettings) else False


def _gelu(x: np.ndarray) -> np.ndarray:
    """BLOOM's tanh GELU (bloom_gelu_forward), in float64."""
    out: np.ndarray = x * 0.5 * (1.0 + np.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))
    return out


def _attention(cfg: ModelConfig, w: Weights, index: int) -> AttentionWeights:
    """Layer `index` (from 0): query_key_value's rows split per head into q, k and v, each returned as (d, H·d_k); ALiBi."""
    d, H, d_k = cfg.hidden_size, cfg.heads, cfg.head_dim
    p = f"h.{index}.self_attention."
    per_head = w.get(p + "query_key_value.weight", (3 * H * d_k, d)).reshape(H, 3, d_k, d)  # (H, q/k/v, d_k, d): nn.Linear (out, in)
    W_Q, W_K, W_V = (np.ascontiguousarray(per_head[:, part].reshape(H * d_k, d).T) for part in range(3))  # (d, H·d_k) each
    bias = w.get(p + "query_key_value.bias", (3 * H * d_k,)).reshape(H, 3, d_k)  # (H, q/k/v, d_k)
    b_Q, b_K, b_V = (np.ascontiguousarray(bias[:, part].reshape(H * d_k)) for part in range(3))  # (H·d_k,) each
    return AttentionWeights(
        W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=b_Q, b_K=b_K, b_V=b_V, W_O=w.get(p + "dense.weight", (d, H * d_k)).T, b_O=w.get(p + "dense.bias", (d,)),
        heads=H, kv_heads=H, head_dim=d_k, divisor=math.sqrt(d_k), causal=True, window=None, rope=None, variants=(Alibi(alibi_slopes(H)),),
    )  # fmt: skip


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray) -> np.ndarray:
    """(L, d) the hidden state after block `index`: attention of input_layernorm(h) added, then the MLP of post_attention_layernorm."""
    d, inner = cfg.hidden_size, cfg.intermediate_size
    p = f"h.{index}."
    normed = w.layer_norm(p + "input_layernorm", h, cfg.norm_eps)  # (L, d)
    h = (normed if _residual_after_norm(cfg) else h) + self_attention(normed, _attention(cfg, w, index))
    normed = w.layer_norm(p + "post_attention_layernorm", h, cfg.norm_eps)
    hidden = _gelu(w.product(p + "mlp.dense_h_to_4h.weight", normed, (inner, d)) + w.get(p + "mlp.dense_h_to_4h.bias", (inner,)))
    mlp = w.product(p + "mlp.dense_4h_to_h.weight", hidden, (d, inner)) + w.get(p + "mlp.dense_4h_to_h.bias", (d,))  # (L, d)
    out: np.ndarray = (normed if _residual_after_norm(cfg) else h) + mlp
    return out


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm of the hidden state entering `layer` (from 1), and that layer's attention weights."""
    w = Weights(checkpoint, probe=TENSORS.probe, prefixes=TENSORS.prefixes)
    h = w.layer_norm("word_embeddings_layernorm", w.rows("word_embeddings.weight", ids, cfg.hidden_size), cfg.norm_eps)  # (L, d)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h)
    index = layer - 1
    X = w.layer_norm(f"h.{index}.input_layernorm", h, cfg.norm_eps)  # (L, d)
    attention = _attention(cfg, w, index)
    dtype = w.dtype(f"h.{index}.self_attention.query_key_value.weight")
    notes = (
        f"X = input_layernorm (LayerNorm) of the hidden state entering layer {layer}: token embeddings, "
        f"word_embeddings_layernorm{through(layer)}",
        "W_Q, W_K, W_V come from query_key_value, whose rows run [q | k | v] head by head; q, k, v and dense (W_O) have biases",
        "no position embeddings: ALiBi with the paper's slopes; BLOOM adds +m·j (j the key's position from 0), attncli "
        "−m·(i − j) (i and j from 1): they differ by m·(i − 1), the same for every key of a row, so the weights are BLOOM's "
        "and its biased scores m·(i − 1) higher",
        f"scores divided by √d_k = √{cfg.head_dim} = {attention.divisor:g}, then ALiBi added",
        "causal mask: each token sees itself and the tokens before it",
        "the residual is the normalised stream (apply_residual_connection_post_layernorm)" if _residual_after_norm(cfg) else None,
        storage_note(dtype),
    )
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=tuple(note for note in notes if note is not None))


def mechanisms(cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of BLOOM beyond describe.py: ALiBi, its slopes and how BLOOM writes them."""
    slopes = ", ".join(f"{m:.6g}" for m in alibi_slopes(cfg.heads))
    return [
        f"ALiBi instead of position embeddings: head h adds its slope m_h times the key's position to the scaled scores "
        f"(m = {slopes}: the paper's slopes; BLOOM writes +m·j, the paper −m·(i − j), the same weights)",
        "LayerNorm of the token embeddings (word_embeddings_layernorm) before the first layer",
    ]


# -- GGUF and model verify ---------------------------------------------------------------------

GGUF_NAMES = (
    (r"word_embeddings\.weight", "token_embd.weight"),
    (r"word_embeddings_layernorm\.(weight|bias)", r"token_embd_norm.\1"),
    (r"ln_f\.(weight|bias)", r"output_norm.\1"),
    (r"h\.(\d+)\.input_layernorm\.(weight|bias)", r"blk.\1.attn_norm.\2"),
    (r"h\.(\d+)\.self_attention\.query_key_value\.(weight|bias)", r"blk.\1.attn_qkv.\2"),
    (r"h\.(\d+)\.self_attention\.dense\.(weight|bias)", r"blk.\1.attn_output.\2"),
    (r"h\.(\d+)\.post_attention_layernorm\.(weight|bias)", r"blk.\1.ffn_norm.\2"),
    (r"h\.(\d+)\.mlp\.dense_h_to_4h\.(weight|bias)", r"blk.\1.ffn_up.\2"),
    (r"h\.(\d+)\.mlp\.dense_4h_to_h\.(weight|bias)", r"blk.\1.ffn_down.\2"),
)


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """BLOOM's config.json keys from the metadata under bloom.…: its context length as seq_length, its LayerNorm's ε."""
    return {"seq_length": raw["max_position_embeddings"], "layer_norm_epsilon": file.number(a + "attention.layer_norm_epsilon", default=1e-5)}


# query_key_value, laid out per head, is stored as all queries, all keys, all values (BloomModel's "bloom-style to gpt-style")
GGUF = (GgufArchitecture("bloom", "bloom", GGUF_NAMES, keys=gguf_keys, qkv_by_kind=True),)
VERIFY = Verification(r"(?:^|\.)h\.(\d+)\.self_attention\.dense$", (FLOAT32_ALIBI, FLOAT32_SOFTMAX))  # LayerNorm in float64


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json (q, k and v in one projection)."""
    d = cfg.hidden_size
    return {
        "word_embeddings.weight": (None, d),
        "h.0.self_attention.query_key_value.weight": (3 * d, d),
        "h.0.mlp.dense_h_to_4h.weight": (cfg.intermediate_size, d),
    }
