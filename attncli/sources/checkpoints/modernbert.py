"""ModernBERT: a bidirectional encoder whose layers alternate global and local attention, each kind with its own RoPE base.

Per transformers' ModernBertModel: the token embeddings go through a LayerNorm (`embeddings.norm`); each layer is
pre-norm, x + Wo(attention(attn_norm(x))), then x + mlp(mlp_norm(x)), where layer 1 has no attn_norm (the identity);
LayerNorms have a bias only with norm_bias. Wqkv's output rows are [q | k | v], each H·d_k wide; RoPE (rotate-half,
the whole head) turns q and k with θ = the full_attention base (global_rope_theta, 160 000) on the global layers and the
sliding_attention base (local_rope_theta, 10 000) on the local ones; scores ÷ √d_k. A local layer's token sees the tokens
at most local_attention / 2 positions away on either side (transformers' sliding_window: |i − j| ≤ w), a global layer's
every token. Layer kinds: layer_types, else global every global_attn_every_n_layers-th layer from the first. The MLP is
GeGLU: Wo(act(a) ⊙ g), [a | g] = Wi·x. Dimension names: L tokens, d = d_model, H heads, d_k head size.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

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
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    MOST,
    Description,
    ModelConfig,
    RopeConfig,
    Tensors,
    Verification,
    _activation,
    _dtype,
    _heads_divide,
    _Reader,
    _rope,
    _shown,
    _window,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata
from attncli.sources.checkpoints.rope import rope_spec
from attncli.sources.checkpoints.source import TensorSource

TENSORS = Tensors("embeddings.tok_embeddings.weight", ("model.", ""))  # ModernBertModel's names, under `model.` in the task models
DEFAULTS: dict[str, Any] = {"layers": 22, "hidden": 768, "heads": 12, "positions": 8192, "inter": 1152, "eps": 1e-5, "act": "gelu", "local": 128}
THETAS = {"full_attention": 160_000.0, "sliding_attention": 10_000.0}  # ModernBertConfig's global_rope_theta and local_rope_theta
FLOAT32_QK = "RoPE turns q and k in float32"


class ModernBertSettings(NamedTuple):
    """ModernBERT's own config keys, beside the common ones of ModelConfig (whose `rope` is the global layers')."""

    local_rope: RopeConfig  # the local (sliding) layers' RoPE
    norm_bias: bool  # its LayerNorms have a bias


def read_config(read: _Reader) -> ModelConfig:
    """ModernBERT's config.json keys: transformers 5's rope_parameters per layer type, or 4's global/local_rope_theta."""
    d = DEFAULTS
    layers = read.count("num_hidden_layers", default=d["layers"], most=MOST["layers"])
    hidden = read.count("hidden_size", default=d["hidden"], most=MOST["hidden"])
    heads = read.count("num_attention_heads", default=d["heads"], most=MOST["heads"])
    head_dim = _heads_divide(read, hidden, heads, "num_attention_heads")
    if head_dim % 2:
        raise read.fail("num_attention_heads", f"the head size {head_dim} is odd", "an even head size (RoPE turns pairs)")
    max_positions = read.count("max_position_embeddings", default=d["positions"], most=MOST["positions"])
    ropes = {}
    parameters = read.raw.get("rope_parameters")
    for kind, old in (("full_attention", "global_rope_theta"), ("sliding_attention", "local_rope_theta")):
        if isinstance(parameters, dict) and isinstance(parameters.get(kind), dict):
            ropes[kind] = _rope(read, max_positions, per_type=kind)
        else:
            ropes[kind] = RopeConfig(theta=read.number(old, THETAS[kind]), kind="default")
    local = _window(read, "local_attention", read.raw.get("local_attention", d["local"])) // 2  # ± tokens a local layer sees
    kinds = read.raw.get("layer_types")
    if kinds is None:
        every = read.count("global_attn_every_n_layers", default=3, most=MOST["layers"])
        kinds = ["sliding_attention" if i % every else "full_attention" for i in range(layers)]
    if not isinstance(kinds, list) or len(kinds) != layers or not set(kinds) <= set(THETAS):
        raise read.fail("layer_types", f"found {_shown(kinds)}", f"a list of {layers} layer kinds, full_attention or sliding_attention")
    bias = read.flag("attention_bias", False)
    return ModelConfig(
        model_type="modernbert",
        layers=layers,
        hidden_size=hidden,
        heads=heads,
        kv_heads=heads,
        head_dim=head_dim,
        intermediate_size=read.count("intermediate_size", default=d["inter"], most=MOST["inner"]),
        max_positions=max_positions,
        norm_eps=read.number("norm_eps", d["eps"]),
        activation=_activation(read, "hidden_activation", default=d["act"]),
        dtype=_dtype(read),
        rope=ropes["full_attention"],
        windows=tuple(local if kind == "sliding_attention" else None for kind in kinds),
        causal=False,
        qkv_bias=bias,
        output_bias=bias,
        mlp_bias=read.flag("mlp_bias", False),
        family=ModernBertSettings(local_rope=ropes["sliding_attention"], norm_bias=read.flag("norm_bias", False)),
    )


def settings(cfg: ModelConfig) -> ModernBertSettings:
    assert isinstance(cfg.family, ModernBertSettings)
    return cfg.family


class ModernBert:
    """The checkpoint's tensors, read as each step needs them, and the two RoPEs."""

    def __init__(self, cfg: ModelConfig, checkpoint: TensorSource) -> None:
        assert cfg.rope is not None
        self.cfg = cfg
        self.w = Weights(checkpoint, probe=TENSORS.probe, prefixes=TENSORS.prefixes)
        self.global_rope, self.local_rope = rope_spec(cfg.rope, cfg.head_dim), rope_spec(settings(cfg).local_rope, cfg.head_dim)

    def norm(self, name: str, x: np.ndarray) -> np.ndarray:
        """(L, d) through the nn.LayerNorm `name`, with its bias when norm_bias."""
        d = self.cfg.hidden_size
        bias = self.w.get(name + ".bias", (d,)) if settings(self.cfg).norm_bias else np.zeros(d)
        return layer_norm(x, self.w.get(name + ".weight", (d,)), bias, self.cfg.norm_eps)

    def attention_input(self, index: int, h: np.ndarray) -> np.ndarray:
        """(L, d) what layer `index`'s attention projects: attn_norm(h), or h itself in the first layer."""
        return h if index == 0 else self.norm(f"layers.{index}.attn_norm", h)

    def attention(self, index: int) -> AttentionWeights:
        """Layer `index` (from 0): Wqkv's rows [q | k | v] as (d, H·d_k) each; its kind's RoPE and window."""
        cfg, w = self.cfg, self.w
        d, H, d_k = cfg.hidden_size, cfg.heads, cfg.head_dim
        p = f"layers.{index}.attn."
        fused, fused_bias = w.linear(p + "Wqkv", d, 3 * H * d_k, cfg.qkv_bias)  # (d, 3·H·d_k)
        W_Q, W_K, W_V = (np.ascontiguousarray(fused[:, part * H * d_k : (part + 1) * H * d_k]) for part in range(3))
        b_Q = b_K = b_V = None
        if fused_bias is not None:
            b_Q, b_K, b_V = (fused_bias[part * H * d_k : (part + 1) * H * d_k] for part in range(3))
        W_O, b_O = w.linear(p + "Wo", H * d_k, d, cfg.output_bias)
        window = cfg.windows[index]
        return AttentionWeights(
            W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=b_Q, b_K=b_K, b_V=b_V, W_O=W_O, b_O=b_O, heads=H, kv_heads=H, head_dim=d_k,
            divisor=math.sqrt(d_k), causal=False, window=window, rope=self.global_rope if window is None else self.local_rope,
        )  # fmt: skip

    def mlp(self, index: int, x: np.ndarray) -> np.ndarray:
        """(L, d) Wo(act(a) ⊙ g) with [a | g] = Wi·x (GeGLU)."""
        cfg, inner = self.cfg, self.cfg.intermediate_size
        W_in, b_in = self.w.linear(f"layers.{index}.mlp.Wi", cfg.hidden_size, 2 * inner, cfg.mlp_bias)
        both = x @ W_in + (0 if b_in is None else b_in)  # (L, 2·inner)
        W_out, b_out = self.w.linear(f"layers.{index}.mlp.Wo", inner, cfg.hidden_size, cfg.mlp_bias)
        out: np.ndarray = (activate(cfg.activation, both[:, :inner]) * both[:, inner:]) @ W_out
        return out if b_out is None else out + b_out

    def layer(self, index: int, h: np.ndarray) -> np.ndarray:
        h = h + self_attention(self.attention_input(index, h), self.attention(index))  # (L, d)
        out: np.ndarray = h + self.mlp(index, self.norm(f"layers.{index}.mlp_norm", h))
        return out


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = attn_norm of the hidden state entering `layer` (from 1; the first layer: the normalised embeddings), and its attention."""
    model = ModernBert(cfg, checkpoint)
    h = model.norm("embeddings.norm", model.w.rows("embeddings.tok_embeddings.weight", ids, cfg.hidden_size))  # (L, d)
    for index in range(layer - 1):
        h = model.layer(index, h)
    index = layer - 1
    X = model.attention_input(index, h)
    attention = model.attention(index)
    dtype = model.w.dtype(f"layers.{index}.attn.Wqkv.weight")
    window = cfg.windows[index]
    assert attention.rope is not None
    notes = (
        "X = the embeddings' LayerNorm (layer 1 has no attn_norm)" if layer == 1
        else f"X = attn_norm (LayerNorm) of the hidden state entering layer {layer}: token embeddings, LayerNorm{through(layer)}",
        "W_Q, W_K, W_V are the three row blocks of Wqkv [q | k | v]",
        f"a global layer: every token sees every token; RoPE θ = {attention.rope.theta:g} (the global layers' base)" if window is None
        else f"a local layer: each token sees the tokens at most {window} positions away on either side (local_attention "
        f"{2 * window}); RoPE θ = {attention.rope.theta:g} (the local layers' base)",
        f"scores divided by √d_k = √{cfg.head_dim} = {attention.divisor:g}",
        storage_note(dtype),
    )
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=notes)


def mechanisms(cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of ModernBERT beyond describe.py: its two RoPE bases, its norms and its GeGLU MLP."""
    assert cfg.rope is not None
    return [
        f"RoPE θ = {cfg.rope.theta:g} on the global layers and {settings(cfg).local_rope.theta:g} on the local ones",
        "LayerNorm of the embeddings; pre-norm layers, the first without a norm before its attention; GeGLU MLP",
    ]


VERIFY = Verification(r"(?:^|\.)layers\.(\d+)\.attn\.Wo$", (FLOAT32_ROPE, FLOAT32_QK, FLOAT32_SOFTMAX))  # LayerNorm in float64
DESCRIPTION = Description()


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json (q, k and v in one projection; Wi holds a and g)."""
    d = cfg.hidden_size
    return {
        "embeddings.tok_embeddings.weight": (None, d),
        "layers.0.attn.Wqkv.weight": (3 * d, d),
        "layers.0.mlp.Wi.weight": (2 * cfg.intermediate_size, d),
    }


# -- GGUF: ModernBertModel (BertModel's converter) strips `model.` and renames; Wqkv stays [q | k | v] and Wi [a | g], as
# llama.cpp's graph splits them; the rows keep their rotate-half order (llama.cpp turns modern-bert as NeoX does)
GGUF_NAMES = (
    (r"embeddings\.tok_embeddings\.weight", "token_embd.weight"),
    (r"embeddings\.norm\.(weight|bias)", r"token_embd_norm.\1"),
    (r"final_norm\.(weight|bias)", r"output_norm.\1"),
    (r"layers\.(\d+)\.attn_norm\.(weight|bias)", r"blk.\1.attn_norm.\2"),
    (r"layers\.(\d+)\.attn\.Wqkv\.(weight|bias)", r"blk.\1.attn_qkv.\2"),
    (r"layers\.(\d+)\.attn\.Wo\.(weight|bias)", r"blk.\1.attn_output.\2"),
    (r"layers\.(\d+)\.mlp_norm\.(weight|bias)", r"blk.\1.ffn_norm.\2"),
    (r"layers\.(\d+)\.mlp\.Wi\.(weight|bias)", r"blk.\1.ffn_up.\2"),
    (r"layers\.(\d+)\.mlp\.Wo\.(weight|bias)", r"blk.\1.ffn_down.\2"),
)


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """ModernBERT's config.json keys from a modern-bert file, as llama.cpp reads it: local layers only with a positive
    attention.sliding_window (local_attention, seen ± half of it), every sliding_window_pattern-th layer global from the
    first (3 when absent; a per-layer list: true for local), the local θ from rope.freq_base_swa (else the global one);
    norm_eps, which TextModel writes as layer_norm_rms_epsilon, though the norms are LayerNorms; GELU unless hidden_activation."""
    layers = raw["num_hidden_layers"]
    window = file.count(a + "attention.sliding_window", default=0, minimum=0)
    pattern = file.value(a + "attention.sliding_window_pattern")
    if not window:
        local = [False] * layers
    elif isinstance(pattern, list):
        if len(pattern) != layers:
            raise file.fail(f"{len(pattern)} layer kinds for {layers} layers", key=a + "attention.sliding_window_pattern")
        local = [bool(x) for x in pattern]
    else:
        every = 3 if pattern is None else file.count(a + "attention.sliding_window_pattern")
        local = [i % every != 0 for i in range(layers)]
    theta = raw["rope_parameters"]["rope_theta"]
    eps_key = a + ("attention.layer_norm_epsilon" if file.has_key(a + "attention.layer_norm_epsilon") else "attention.layer_norm_rms_epsilon")
    activation = file.value(a + "hidden_activation")  # written for ModernBERT derivatives with SiLU (llama.cpp: GeGLU without it)
    return {
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": theta},
            "sliding_attention": {"rope_type": "default", "rope_theta": file.number(a + "rope.freq_base_swa", default=theta)},
        },
        "layer_types": ["sliding_attention" if x else "full_attention" for x in local],
        **({"local_attention": window} if window else {}),
        "norm_eps": file.number(eps_key, default=1e-5),
        "hidden_activation": activation if isinstance(activation, str) else "gelu",
        "attention_bias": "blk.0.attn_qkv.bias" in file.tensors,
        "mlp_bias": "blk.0.ffn_up.bias" in file.tensors,
        "norm_bias": "token_embd_norm.bias" in file.tensors,
    }


GGUF = (GgufArchitecture("modern-bert", "modernbert", GGUF_NAMES, keys=gguf_keys),)
