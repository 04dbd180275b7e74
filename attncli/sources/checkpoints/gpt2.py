"""GPT-2: learned positions, pre-LN blocks (ln_1 before attention), Conv1D weights stored as (in, out), causal."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

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
    MOST,
    Description,
    ModelConfig,
    Tensors,
    Verification,
    _activation,
    _dtype,
    _heads_divide,
    _Reader,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata
from attncli.sources.checkpoints.source import TensorSource

TENSORS = Tensors("wte.weight", ("", "transformer."))  # GPT2Model's names, under `transformer.` in GPT2LMHeadModel
DESCRIPTION = Description(learned_positions=True, own_biases=True)


def _attention(cfg: ModelConfig, w: Weights, index: int) -> AttentionWeights:
    """Layer `index` (from 0): c_attn's columns are [q | k | v]; Conv1D is already x·W + b."""
    d = cfg.hidden_size
    p = f"h.{index}.attn."
    c_attn = w.get(p + "c_attn.weight", (d, 3 * d))  # (d, 3d)
    c_bias = w.get(p + "c_attn.bias", (3 * d,))  # (3d,)
    divisor = math.sqrt(cfg.head_dim) if cfg.scale_attn_weights else 1.0
    if cfg.scale_attn_by_inverse_layer_idx:
        divisor *= index + 1
    return AttentionWeights(
        W_Q=c_attn[:, :d], W_K=c_attn[:, d : 2 * d], W_V=c_attn[:, 2 * d :],
        b_Q=c_bias[:d], b_K=c_bias[d : 2 * d], b_V=c_bias[2 * d :],
        W_O=w.get(p + "c_proj.weight", (d, d)), b_O=w.get(p + "c_proj.bias", (d,)),
        heads=cfg.heads, kv_heads=cfg.heads, head_dim=cfg.head_dim,
        divisor=divisor, causal=True, window=None, rope=None,
    )  # fmt: skip


def _block(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray) -> np.ndarray:
    """(L, d) the residual stream after block `index`: attention, then the MLP, each pre-normalised."""
    d, inner = cfg.hidden_size, cfg.intermediate_size
    p = f"h.{index}."
    h = h + self_attention(w.layer_norm(p + "ln_1", h, cfg.norm_eps), _attention(cfg, w, index))  # (L, d)
    hidden = activate(
        cfg.activation,
        w.layer_norm(p + "ln_2", h, cfg.norm_eps) @ w.get(p + "mlp.c_fc.weight", (d, inner)) + w.get(p + "mlp.c_fc.bias", (inner,)),
    )
    out: np.ndarray = h + hidden @ w.get(p + "mlp.c_proj.weight", (inner, d)) + w.get(p + "mlp.c_proj.bias", (d,))  # (L, d)
    return out


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = ln_1 of the residual entering `layer` (from 1), and that layer's attention weights."""
    w = Weights(checkpoint, probe=TENSORS.probe, prefixes=TENSORS.prefixes)
    d = cfg.hidden_size
    h = w.rows("wte.weight", ids, d) + w.rows("wpe.weight", range(len(ids)), d)  # (L, d)
    for index in range(layer - 1):
        h = _block(cfg, w, index, h)
    index = layer - 1
    X = w.layer_norm(f"h.{index}.ln_1", h, cfg.norm_eps)  # (L, d)
    attention = _attention(cfg, w, index)
    dtype = w.dtype(f"h.{index}.attn.c_attn.weight")
    scale = f"√d_k = √{cfg.head_dim}" if cfg.scale_attn_weights else "1 (scale_attn_weights is false)"
    if cfg.scale_attn_by_inverse_layer_idx:
        scale += f" × {layer} (scale_attn_by_inverse_layer_idx: × the layer number)"
    notes = (
        f"X = ln_1 of the residual entering layer {layer}: token + position embeddings{through(layer)}",
        "W_Q, W_K, W_V are the three column blocks of c_attn (Conv1D, stored as input × output)",
        f"scores divided by {scale} = {attention.divisor:g}",
        "causal mask: each token sees itself and the tokens before it",
        "W_O is c_proj; its output is added to the residual stream",
        storage_note(dtype),
    )
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=notes)


DEFAULTS: dict[str, Any] = {"layers": 12, "hidden": 768, "heads": 12, "positions": 1024, "eps": 1e-5, "act": "gelu_new"}  # transformers' GPT2Config


def read_config(read: _Reader) -> ModelConfig:
    """GPT-2's config.json keys (transformers 4 and 5 spellings), with transformers' GPT2Config defaults."""
    d = DEFAULTS
    layers = read.count("n_layer", "num_hidden_layers", default=d["layers"], most=MOST["layers"])
    hidden = read.count("n_embd", "hidden_size", default=d["hidden"], most=MOST["hidden"])
    heads = read.count("n_head", "num_attention_heads", default=d["heads"], most=MOST["heads"])
    inner = read.raw.get("n_inner")
    return ModelConfig(
        model_type="gpt2",
        layers=layers,
        hidden_size=hidden,
        heads=heads,
        kv_heads=heads,
        head_dim=_heads_divide(read, hidden, heads, "n_head"),
        intermediate_size=4 * hidden if inner is None else read.count("n_inner", default=None, most=MOST["inner"]),
        max_positions=read.count("n_positions", "max_position_embeddings", default=d["positions"], most=MOST["positions"]),
        norm_eps=read.number("layer_norm_epsilon", d["eps"]),
        activation=_activation(read, "activation_function", default=d["act"]),
        dtype=_dtype(read),
        rope=None,
        windows=(None,) * layers,
        causal=True,
        qkv_bias=True,
        output_bias=True,
        mlp_bias=True,
        scale_attn_weights=read.flag("scale_attn_weights", True),
        scale_attn_by_inverse_layer_idx=read.flag("scale_attn_by_inverse_layer_idx", False),
    )


# -- GGUF and model verify ---------------------------------------------------------------------

GGUF_NAMES = (
    (r"wte\.weight", "token_embd.weight"),
    (r"wpe\.weight", "position_embd.weight"),
    (r"h\.(\d+)\.ln_1\.(weight|bias)", r"blk.\1.attn_norm.\2"),
    (r"h\.(\d+)\.attn\.c_attn\.(weight|bias)", r"blk.\1.attn_qkv.\2"),
    (r"h\.(\d+)\.attn\.c_proj\.(weight|bias)", r"blk.\1.attn_output.\2"),
    (r"h\.(\d+)\.ln_2\.(weight|bias)", r"blk.\1.ffn_norm.\2"),
    (r"h\.(\d+)\.mlp\.c_fc\.(weight|bias)", r"blk.\1.ffn_up.\2"),
    (r"h\.(\d+)\.mlp\.c_proj\.(weight|bias)", r"blk.\1.ffn_down.\2"),
)


def gguf_config(file: Metadata, a: str, common: dict[str, Any]) -> ModelConfig:
    """GPT-2's config from the metadata under gpt2.…: biases wherever c_attn has one."""
    layers, hidden, heads = common["layers"], common["hidden_size"], common["heads"]
    if hidden % heads:
        raise file.fail(f"{heads} heads do not divide the hidden size {hidden}", key=a + "attention.head_count")
    bias = "blk.0.attn_qkv.bias" in file.tensors
    return ModelConfig(
        model_type="gpt2", kv_heads=heads, head_dim=hidden // heads, norm_eps=file.number(a + "attention.layer_norm_epsilon", default=1e-5),
        activation="gelu_new", rope=None, windows=(None,) * layers, causal=True, qkv_bias=bias, output_bias=bias, mlp_bias=bias, **common,
    )  # fmt: skip


# the Conv1D weights, (in, out) in the checkpoint, are stored transposed (as nn.Linear's (out, in)): transposed back
GGUF = (GgufArchitecture("gpt2", "gpt2", GGUF_NAMES, config=gguf_config, transposed=r"h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight"),)
VERIFY = Verification(r"(?:^|\.)h\.(\d+)\.attn\.c_proj$")  # LayerNorm, learned positions, softmax: float64 throughout


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json (Conv1D weights are stored (in, out))."""
    d, inner = cfg.hidden_size, cfg.intermediate_size
    return {"wte.weight": (None, d), "h.0.attn.c_attn.weight": (d, 3 * d), "h.0.mlp.c_fc.weight": (d, inner)}
