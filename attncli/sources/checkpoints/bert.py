"""BERT: word + position + token-type embeddings, then LayerNorm; post-LN layers; bidirectional attention."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attncli.sources.checkpoints.blocks import (
    AttentionWeights,
    LayerInputs,
    Weights,
    activate,
    layer_norm,
    self_attention,
    storage_note,
    through,
)
from attncli.sources.checkpoints.config import (
    MOST,
    Description,
    ModelConfig,
    Tensors,
    Verification,
    _activation,
    _dtype,
    _heads_divide,
    _Reader,
    _shown,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata
from attncli.sources.checkpoints.source import TensorSource


def _norm(cfg: ModelConfig, w: Weights, name: str, x: np.ndarray) -> np.ndarray:
    """LayerNorm `name`; files converted from TensorFlow call its weight and bias gamma and beta."""
    d = cfg.hidden_size
    weight = w.get((name + ".weight", name + ".gamma"), (d,))
    bias = w.get((name + ".bias", name + ".beta"), (d,))
    return layer_norm(x, weight, bias, cfg.norm_eps)


def _attention(cfg: ModelConfig, w: Weights, index: int) -> AttentionWeights:
    d = cfg.hidden_size
    p = f"encoder.layer.{index}.attention."
    W_Q, b_Q = w.linear(p + "self.query", d, d)
    W_K, b_K = w.linear(p + "self.key", d, d)
    W_V, b_V = w.linear(p + "self.value", d, d)
    W_O, b_O = w.linear(p + "output.dense", d, d)
    return AttentionWeights(
        W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=b_Q, b_K=b_K, b_V=b_V, W_O=W_O, b_O=b_O,
        heads=cfg.heads, kv_heads=cfg.heads, head_dim=cfg.head_dim,
        divisor=math.sqrt(cfg.head_dim), causal=cfg.causal, window=None, rope=None,
    )  # fmt: skip


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray) -> np.ndarray:
    """(L, d) the hidden state after layer `index`: attention, add, LayerNorm; MLP, add, LayerNorm."""
    d, inner = cfg.hidden_size, cfg.intermediate_size
    p = f"encoder.layer.{index}."
    h = _norm(cfg, w, p + "attention.output.LayerNorm", self_attention(h, _attention(cfg, w, index)) + h)  # (L, d)
    W_in, b_in = w.linear(p + "intermediate.dense", d, inner)
    hidden = activate(cfg.activation, h @ W_in + b_in)  # (L, inner)
    del W_in  # one MLP matrix in float64 at a time
    W_out, b_out = w.linear(p + "output.dense", inner, d)
    return _norm(cfg, w, p + "output.LayerNorm", hidden @ W_out + b_out + h)  # (L, d)


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = the hidden state entering `layer` (from 1): BERT normalises after attention, so no norm comes first."""
    w = Weights(checkpoint, probe=TENSORS.probe, prefixes=TENSORS.prefixes)
    d = cfg.hidden_size
    embeddings = (
        w.rows("embeddings.word_embeddings.weight", ids, d)
        + w.rows("embeddings.token_type_embeddings.weight", [0] * len(ids), d)  # one sentence: segment 0 throughout
        + w.rows("embeddings.position_embeddings.weight", range(len(ids)), d)
    )  # (L, d)
    h = _norm(cfg, w, "embeddings.LayerNorm", embeddings)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h)
    index = layer - 1
    attention = _attention(cfg, w, index)
    dtype = w.dtype(f"encoder.layer.{index}.attention.self.query.weight")
    notes = (
        f"X = the hidden state entering layer {layer}: word + position + token-type embeddings, LayerNorm{through(layer)}; "
        "BERT normalises after attention (post-LN), so the layer's input is the residual stream itself",
        f"scores divided by √d_k = √{cfg.head_dim} = {attention.divisor:g}",
        "causal mask (is_decoder)" if cfg.causal else "bidirectional: every token sees every token",
        "W_O is attention.output.dense; its output is added to X and normalised by LayerNorm",
        storage_note(dtype),
    )
    return LayerInputs(X=h, attention=attention, dtype=dtype, notes=notes)


DEFAULTS: dict[str, Any] = {"layers": 12, "hidden": 768, "heads": 12, "positions": 512, "eps": 1e-12, "act": "gelu", "inter": 3072}  # BertConfig


def read_config(read: _Reader) -> ModelConfig:
    """BERT's config.json keys, with transformers' BertConfig defaults; absolute positions only."""
    d = DEFAULTS
    position_kind = read.raw.get("position_embedding_type", "absolute")
    if position_kind != "absolute":
        raise read.fail("position_embedding_type", f"found {_shown(position_kind)}", "absolute (the only kind attncli reads)")
    layers = read.count("num_hidden_layers", default=d["layers"], most=MOST["layers"])
    hidden = read.count("hidden_size", default=d["hidden"], most=MOST["hidden"])
    heads = read.count("num_attention_heads", default=d["heads"], most=MOST["heads"])
    return ModelConfig(
        model_type="bert",
        layers=layers,
        hidden_size=hidden,
        heads=heads,
        kv_heads=heads,
        head_dim=_heads_divide(read, hidden, heads, "num_attention_heads"),
        intermediate_size=read.count("intermediate_size", default=d["inter"], most=MOST["inner"]),
        max_positions=read.count("max_position_embeddings", default=d["positions"], most=MOST["positions"]),
        norm_eps=read.number("layer_norm_eps", d["eps"]),
        activation=_activation(read, "hidden_act", default=d["act"]),
        dtype=_dtype(read),
        rope=None,
        windows=(None,) * layers,
        causal=read.flag("is_decoder", False),
        qkv_bias=True,
        output_bias=True,
        mlp_bias=True,
        type_vocab_size=read.count("type_vocab_size", default=2, most=MOST["vocabulary"]),
    )


# -- GGUF and model verify ---------------------------------------------------------------------

GGUF_NAMES = (
    (r"embeddings\.word_embeddings\.weight", "token_embd.weight"),
    (r"embeddings\.position_embeddings\.weight", "position_embd.weight"),
    (r"embeddings\.token_type_embeddings\.weight", "token_types.weight"),
    (r"embeddings\.LayerNorm\.(weight|bias)", r"token_embd_norm.\1"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.query\.(weight|bias)", r"blk.\1.attn_q.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.key\.(weight|bias)", r"blk.\1.attn_k.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.value\.(weight|bias)", r"blk.\1.attn_v.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.(weight|bias)", r"blk.\1.attn_output.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.(weight|bias)", r"blk.\1.attn_output_norm.\2"),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.(weight|bias)", r"blk.\1.ffn_up.\2"),
    (r"encoder\.layer\.(\d+)\.output\.dense\.(weight|bias)", r"blk.\1.ffn_down.\2"),
    (r"encoder\.layer\.(\d+)\.output\.LayerNorm\.(weight|bias)", r"blk.\1.layer_output_norm.\2"),
)


def gguf_config(file: Metadata, a: str, common: dict[str, Any]) -> ModelConfig:
    """BERT's config from the metadata under bert.…: biases everywhere, token types as many as token_types has rows."""
    layers, hidden, heads = common["layers"], common["hidden_size"], common["heads"]
    if hidden % heads:
        raise file.fail(f"{heads} heads do not divide the hidden size {hidden}", key=a + "attention.head_count")
    types = file.tensors.get("token_types.weight")
    return ModelConfig(
        model_type="bert", kv_heads=heads, head_dim=hidden // heads, norm_eps=file.number(a + "attention.layer_norm_epsilon", default=1e-12),
        activation="gelu", rope=None, windows=(None,) * layers, causal=bool(file.value(a + "attention.causal") or False),
        qkv_bias=True, output_bias=True, mlp_bias=True, type_vocab_size=types.shape[0] if types else 0, **common,
    )  # fmt: skip


GGUF = (GgufArchitecture("bert", "bert", GGUF_NAMES, config=gguf_config),)
VERIFY = Verification(r"(?:^|\.)encoder\.layer\.(\d+)\.attention\.output\.dense$")  # float64 throughout
TENSORS = Tensors("embeddings.word_embeddings.weight", ("bert.", ""))  # BertModel's names, under `bert.` in the task models
DESCRIPTION = Description(learned_positions=True, own_biases=True)


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json (layer 1's, from the headers)."""
    d, inner = cfg.hidden_size, cfg.intermediate_size
    return {
        "embeddings.word_embeddings.weight": (None, d),
        "encoder.layer.0.attention.self.query.weight": (d, d),
        "encoder.layer.0.intermediate.dense.weight": (inner, d),
    }
