"""Gemma 2: logit soft-capping, query_pre_attn_scalar, alternating sliding/global layers, (1 + w) RMSNorm, √d embeddings, post-norms, GeGLU.

As transformers' Gemma2 computes it (docs/families.md, "Gemma 2"): the embeddings are multiplied by
√d_model; every RMSNorm scales by (1 + w); a block is
    h = x + post_attention_layernorm(attention(input_layernorm(x)))
    out = h + post_feedforward_layernorm(down(gelu_tanh(gate(y)) · up(y))),  y = pre_feedforward_layernorm(h)
and attention divides the scores by √query_pre_attn_scalar (not √d_k), soft-caps them with
cap·tanh(s / cap) before the mask, and on `sliding_attention` layers sees only the last
`sliding_window` keys.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import numpy as np

from attncli.core.variants import Rope, SoftCap
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import (
    AttentionWeights,
    LayerInputs,
    Weights,
    activate,
    rms_norm,
    self_attention,
    storage_note,
    through,
)
from attncli.sources.checkpoints.config import (
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    MOST,
    O_PROJ,
    Description,
    ModelConfig,
    Verification,
    _Reader,
    _shown,
    _window,
    alternating,
    llama_like,
    with_family,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata, layer_types, renamed
from attncli.sources.checkpoints.rope import rope_spec
from attncli.sources.checkpoints.source import TensorSource

LAYER_KINDS = ("sliding_attention", "full_attention")


class Gemma2Settings(NamedTuple):
    """What Gemma 2 reads beyond the Llama-like keys."""

    query_pre_attn_scalar: float  # scores are divided by its square root
    attn_cap: float | None  # attn_logit_softcapping: scores become cap·tanh(s / cap); None = off
    final_cap: float | None  # final_logit_softcapping (the output logits; not attention's)
    kinds: tuple[str, ...]  # per layer, "sliding_attention" or "full_attention"
    sliding_window: int | None  # transformers' W: query i sees keys i − W + 1 … i on sliding layers
    kinds_given: bool  # config.json lists layer_types (else transformers 4's default: even layers, from 0, slide)


DEFAULTS: dict[str, Any] = {"layers": 26, "hidden": 2304, "heads": 8, "kv": 4, "positions": 8192, "inter": 9216}  # Gemma2Config


def read_config(read: _Reader) -> ModelConfig[Gemma2Settings]:
    """Gemma 2's config: the Llama-like keys, then its own (with transformers' Gemma2Config defaults)."""
    cfg = llama_like(read, "gemma2", DEFAULTS)
    if read.raw.get("use_bidirectional_attention"):
        raise read.fail("use_bidirectional_attention", "bidirectional Gemma 2 is not supported", "false or null (a causal model)")
    scalar = read.number("query_pre_attn_scalar", 256, most=MOST["head_dim"] ** 2)
    caps = [None if read.raw.get(key, default) is None else read.number(key, default) for key, default in
            (("attn_logit_softcapping", 50.0), ("final_logit_softcapping", 30.0))]  # fmt: skip
    size = read.raw.get("sliding_window", 4096)
    window = None if size is None else _window(read, "sliding_window", size)
    kinds, given = layer_kinds(read, cfg.layers)
    activation = read.word("hidden_activation", "hidden_act", default="gelu_pytorch_tanh")
    if activation not in ("gelu_pytorch_tanh", "gelu_new", "gelu", "gelu_python_tanh"):
        raise read.fail("hidden_activation", f"the activation {activation!r} is not Gemma 2's", "gelu_pytorch_tanh")
    bias = read.flag("attention_bias", False)
    cfg = dataclasses.replace(
        cfg,
        activation=activation,
        windows=tuple(window if kind == "sliding_attention" else None for kind in kinds),
        qkv_bias=bias,
        output_bias=bias,
    )
    return with_family(cfg, Gemma2Settings(scalar, caps[0], caps[1], kinds, window, given))


def layer_kinds(read: _Reader, layers: int) -> tuple[tuple[str, ...], bool]:
    """`layer_types`, or transformers 4's alternation: layer 1 (index 0) sliding, layer 2 full, …"""
    kinds = read.raw.get("layer_types")
    if kinds is None:
        return tuple("sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)), False
    if not isinstance(kinds, list) or len(kinds) != layers or any(kind not in LAYER_KINDS for kind in kinds):
        raise read.fail("layer_types", f"found {_shown(kinds)}", f"a list of {layers} of sliding_attention / full_attention")
    return tuple(kinds), True


def settings(cfg: ModelConfig[Gemma2Settings]) -> Gemma2Settings:
    """What gemma2's read_config read beyond the Llama-like keys (typed: ModelConfig[Gemma2Settings])."""
    return cfg.family



def _attention(cfg: ModelConfig[Gemma2Settings], w: Weights, index: int, rope: Rope) -> AttentionWeights:
    """Llama's projections and window, scores divided by √query_pre_attn_scalar and soft-capped."""
    g = settings(cfg)
    return dataclasses.replace(
        llama._attention(cfg, w, index, rope), divisor=math.sqrt(g.query_pre_attn_scalar), softcap=None if g.attn_cap is None else SoftCap(g.attn_cap)
    )


def _norm(cfg: ModelConfig[Gemma2Settings], w: Weights, name: str, x: np.ndarray) -> np.ndarray:
    """Gemma's RMSNorm: x / rms(x) · (1 + w), the weight stored as its offset from 1."""
    return rms_norm(x, 1.0 + w.get(name + ".weight", (cfg.hidden_size,)), cfg.norm_eps)


def _linear(w: Weights, name: str, x: np.ndarray, n_out: int) -> np.ndarray:
    """(L, n_out) x·W, W widened to float64 a block of rows at a time."""
    return w.product(name + ".weight", x, (n_out, x.shape[1]))


def _layer(cfg: ModelConfig[Gemma2Settings], w: Weights, index: int, h: np.ndarray, rope: Rope) -> np.ndarray:
    """(L, d) the residual stream after layer `index` (from 0): attention and GeGLU MLP, each between a pre- and a post-norm."""
    d, inner = cfg.hidden_size, cfg.intermediate_size
    p = f"layers.{index}."
    attended = self_attention(_norm(cfg, w, p + "input_layernorm", h), _attention(cfg, w, index, rope))  # (L, d)
    h = h + _norm(cfg, w, p + "post_attention_layernorm", attended)  # (L, d)
    x = _norm(cfg, w, p + "pre_feedforward_layernorm", h)  # (L, d)
    hidden = activate(cfg.activation, _linear(w, p + "mlp.gate_proj", x, inner))  # (L, inner)
    hidden *= _linear(w, p + "mlp.up_proj", x, inner)  # (L, inner) gelu(gate)·up
    out: np.ndarray = h + _norm(cfg, w, p + "post_feedforward_layernorm", _linear(w, p + "mlp.down_proj", hidden, d))  # (L, d)
    return out


def embed(cfg: ModelConfig[Gemma2Settings], w: Weights, ids: tuple[int, ...]) -> np.ndarray:
    """(L, d) the token embeddings × √d_model (Gemma2TextScaledWordEmbedding), √d exact in float64."""
    return w.rows("embed_tokens.weight", ids, cfg.hidden_size) * math.sqrt(cfg.hidden_size)


def forward(cfg: ModelConfig[Gemma2Settings], checkpoint: TensorSource, ids: tuple[int, ...], layers: int) -> np.ndarray:
    """(L, d) the residual stream after the first `layers` layers (0: the scaled embeddings)."""
    assert cfg.rope is not None
    w = Weights(checkpoint, probe="embed_tokens.weight", prefixes=("model.", ""))
    rope = rope_spec(cfg.rope, cfg.head_dim)
    h = embed(cfg, w, ids)  # (L, d)
    for index in range(layers):
        h = _layer(cfg, w, index, h, rope)
    return h


def layer_inputs(cfg: ModelConfig[Gemma2Settings], checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm ((1 + w) RMSNorm) of the residual entering `layer` (from 1), and that layer's attention weights."""
    assert cfg.rope is not None
    w = Weights(checkpoint, probe="embed_tokens.weight", prefixes=("model.", ""))
    rope = rope_spec(cfg.rope, cfg.head_dim)
    h = forward(cfg, checkpoint, ids, layer - 1)  # (L, d)
    index = layer - 1
    X = _norm(cfg, w, f"layers.{index}.input_layernorm", h)  # (L, d)
    attention = _attention(cfg, w, index, rope)
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=notes(cfg, layer, attention, rope, dtype))


def embedding_scale_note(hidden: int, dtype: str) -> str:
    """'√16 = 4', or '√3584 = 59.8665 exactly (transformers running in bfloat16 multiplies by 59.75, √d rounded to bfloat16)'."""
    scale = math.sqrt(hidden)
    rounded = {"float16": float(np.float16(scale)), "bfloat16": _bfloat16(scale)}.get(dtype, scale)
    said = f"√{hidden} = {scale:.6g}"
    if rounded == scale:
        return said
    return f"{said} exactly (transformers running in {dtype} multiplies by {rounded:g}, √d rounded to {dtype})"


def _bfloat16(x: float) -> float:
    """x rounded to bfloat16 (the top 16 bits of float32, to nearest, ties to even)."""
    bits = int(np.array(x, dtype=np.float32).view(np.uint32))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(np.array(bits, dtype=np.uint32).view(np.float32))


def layer_kind_note(cfg: ModelConfig[Gemma2Settings], layer: int) -> str:
    """'layer 1 is a sliding (local) layer: …' or 'layer 2 is a global layer: …', with where the kinds come from."""
    g = settings(cfg)
    source = "layer_types" if g.kinds_given else "no layer_types: transformers' default alternation, odd layers local"
    window = cfg.windows[layer - 1]
    if window is None:
        return f"layer {layer} is a global layer: full causal attention over every earlier token ({source})"
    return (f"layer {layer} is a sliding (local) layer: query i sees keys i−{window - 1} … i, the last {window} tokens "
            f"(sliding_window = {window}; {source})")  # fmt: skip


def notes(cfg: ModelConfig[Gemma2Settings], layer: int, attention: AttentionWeights, rope: Rope, dtype: str) -> tuple[str, ...]:
    g = settings(cfg)
    H, G = cfg.heads, cfg.kv_heads
    scalar = f"{g.query_pre_attn_scalar:g}"
    scale = f"scores divided by √query_pre_attn_scalar = √{scalar} = {attention.divisor:g}" + (
        f" (not √d_k = √{cfg.head_dim})" if g.query_pre_attn_scalar != cfg.head_dim else " (= √d_k here)"
    )
    cap = (
        f"logit soft-capping: each scaled score s becomes {g.attn_cap:g}·tanh(s / {g.attn_cap:g}) before the mask "
        f"(attn_logit_softcapping = {g.attn_cap:g}): scores stay within ±{g.attn_cap:g}"
        if g.attn_cap is not None
        else "no logit soft-capping (attn_logit_softcapping is null)"
    )
    sharing = f"grouped-query attention: {H} query heads share {G} key/value heads, {H // G} each" if 1 < G < H else None
    if G == 1 and H > 1:
        sharing = f"multi-query attention: all {H} query heads read one key/value head"
    found = (
        f"X = input_layernorm of the residual entering layer {layer}: token embeddings × √d_model, {embedding_scale_note(cfg.hidden_size, dtype)}"
        f"{through(layer)}; Gemma's RMSNorm scales by (1 + w), and each block's attention and MLP outputs pass a "
        "post-norm before the residual",
        layer_kind_note(cfg, layer),
        cap,
        scale,
        f"RoPE (rotate-half) on q and k at positions 0, 1, 2, …: θ = {rope.theta:g}",
        sharing,
        "causal mask: each token sees itself and the tokens before it",
        storage_note(dtype),
    )
    return tuple(note for note in found if note is not None)


def shapes(cfg: ModelConfig[Gemma2Settings]) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json (layer 1's, from the headers)."""
    d, H, G, d_k, inner = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.intermediate_size
    return {
        "embed_tokens.weight": (None, d),
        "layers.0.self_attn.q_proj.weight": (H * d_k, d),
        "layers.0.self_attn.k_proj.weight": (G * d_k, d),
        "layers.0.post_feedforward_layernorm.weight": (d,),
        "layers.0.mlp.gate_proj.weight": (inner, d),
    }


# -- GGUF and model verify ---------------------------------------------------------------------

GEMMA2_27B_LAYERS = 46  # llama.cpp's LLM_TYPE_27B for gemma2: the one size whose scale is 1/√(n_embd / n_head)
# Gemma's four norms of a layer under llama.cpp's names (stored as 1 + w: ggml multiplies by the weight, transformers by 1 + w)
GGUF_NORMS = (
    (r"layers\.(\d+)\.input_layernorm\.weight", r"blk.\1.attn_norm.weight"),
    (r"layers\.(\d+)\.post_attention_layernorm\.weight", r"blk.\1.post_attention_norm.weight"),
    (r"layers\.(\d+)\.pre_feedforward_layernorm\.weight", r"blk.\1.ffn_norm.weight"),
    (r"layers\.(\d+)\.post_feedforward_layernorm\.weight", r"blk.\1.post_ffw_norm.weight"),
)
GGUF_NAMES = (*renamed(llama.GGUF_NAMES, "layernorm"), *GGUF_NORMS)


def gemma2_scalar(file: Metadata) -> tuple[int, str]:
    """(query_pre_attn_scalar, why) as llama.cpp derives it for gemma2: n_embd / n_head for the 27B (46 layers), else key_length.

    The converter stores no query_pre_attn_scalar; llama.cpp (llama-model.cpp, LLM_ARCH_GEMMA2) sets the attention scale
    from the model's size, after gemma_pytorch's config: 1/√(n_embd / n_head) when the file has 46 layers (LLM_TYPE_27B),
    1/√(n_embd_head_k) otherwise. It gives the published configs' values: 256 for Gemma 2 2B and 9B (head_dim 256),
    144 = 4608 / 32 for the 27B (head_dim 128).
    """
    a = "gemma2."
    layers = file.count(a + "block_count")
    hidden, heads = file.count(a + "embedding_length"), file.count(a + "attention.head_count")
    head_dim = file.count(a + "attention.key_length", default=hidden // heads)
    if layers == GEMMA2_27B_LAYERS:
        return hidden // heads, f"n_embd / n_head = {hidden} / {heads}, llama.cpp's rule for the 27B ({GEMMA2_27B_LAYERS} layers)"
    return head_dim, f"the head size (key_length), llama.cpp's rule for every Gemma 2 but the 27B ({GEMMA2_27B_LAYERS} layers; this file has {layers})"


def gemma2_scale_note(file: Metadata) -> str:
    scalar, why = gemma2_scalar(file)
    return (f"the GGUF file stores no query_pre_attn_scalar: the scale is derived as llama.cpp derives it, "
            f"query_pre_attn_scalar = {scalar}, {why}")  # fmt: skip


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """Gemma 2's config.json keys from the metadata, with llama.cpp's rules where the converter stores nothing."""
    layers = raw["num_hidden_layers"]
    heads = raw["num_attention_heads"]
    caps = {key: file.number(a + key, default=default) for key, default in (("attn_logit_softcapping", 50.0), ("final_logit_softcapping", 30.0))}
    return {
        "num_key_value_heads": file.count(a + "attention.head_count_kv", default=heads),
        "head_dim": head_dim,
        "rms_norm_eps": file.number(a + "attention.layer_norm_rms_epsilon", default=1e-6),
        "hidden_activation": "gelu_pytorch_tanh",
        "sliding_window": file.count(a + "attention.sliding_window", default=4096),  # llama.cpp's default for gemma2
        "layer_types": layer_types(file, a, layers, 2),
        "query_pre_attn_scalar": gemma2_scalar(file)[0],
        "attention_bias": "blk.0.attn_q.bias" in file.tensors,
        **caps,
    }


GGUF = (GgufArchitecture("gemma2", "gemma2", GGUF_NAMES, keys=gguf_keys, shifted_norms=True, notes=lambda file: (gemma2_scale_note(file),)),)
# the steps transformers runs in float32 in a float64 Gemma (2 and 3)
FLOAT32_GEMMA_NORM = "RMSNorm casts the hidden state to float32 and normalises it there (x / rms · (1 + w), the q and k norms too)"
FLOAT32_EMBED_SCALE = "the embedding scale √hidden is kept as a float32 number (exact only where √hidden is)"
VERIFY = Verification(O_PROJ, (FLOAT32_GEMMA_NORM, FLOAT32_ROPE, FLOAT32_SOFTMAX, FLOAT32_EMBED_SCALE))
DESCRIPTION = Description(softcap=50.0, windows=alternating)  # transformers' defaults where config.json says nothing
