"""Falcon: one query_key_value projection in three layouts, multi-query or grouped keys, RoPE or ALiBi, parallel attention.

Per transformers' FalconAttention, query_key_value's output rows are laid out one of three ways:
- the new decoder architecture (Falcon 40B, 180B): per key/value group g, [q … q (H/G heads) | k | v];
- multi_query (Falcon 7B, Falcon-RW): [q_1 … q_H | k | v], every query head reading the one key/value head;
- neither: per head [q | k | v], as GPT-NeoX.
Scores are divided by √d_k; causal; `dense` projects back. Positions are RoPE (rotate-half, the whole head, θ from
rope_parameters) unless `alibi`: then transformers adds m_h·j (j the key's position from 0, m_h the ALiBi paper's
slopes rounded to bfloat16, each product rounded to bfloat16 too) twice, once to q·k before the division by √d_k and
once, divided by √d_k, inside the causal mask: a slope of 2·m_h/√d_k on the scaled scores. attncli rounds the slopes
as transformers does but not the products m·j, which is the same when every slope is a power of two (1, 2, 4 or 8
heads) and the sentence at most 256 tokens long (the header says when it is not: then m·j differs by up to 2^−9·m·j).
FalconDecoderLayer: the new architecture normalises the layer's input twice (ln_attn, ln_mlp; one input_layernorm
with num_ln_in_parallel_attn = 1) and adds attention and MLP together; parallel_attn alone does so with one
input_layernorm; otherwise attention, then the MLP of post_attention_layernorm(updated stream). MLP:
dense_4h_to_h(act(dense_h_to_4h(x))), biases with `bias`. Dimension names: L tokens, d = d_model, H query heads,
G key/value heads, d_k head size.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from attncli.core.variants import Alibi, Rope
from attncli.core.variants.biases import alibi_slopes
from attncli.sources.checkpoints.blocks import (
    AttentionWeights,
    LayerInputs,
    Weights,
    activate,
    self_attention,
    sharing_note,
    storage_note,
    through,
)
from attncli.sources.checkpoints.config import (
    FLOAT32_ROPE,
    MOST,
    ModelConfig,
    RopeConfig,
    Tensors,
    Verification,
    _activation,
    _dtype,
    _heads_divide,
    _Reader,
    _rope,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata
from attncli.sources.checkpoints.rope import rope_spec
from attncli.sources.checkpoints.source import TensorSource

LAYOUTS = ("grouped", "multi_query", "per_head", "by_kind")  # new_decoder_architecture, multi_query, neither; a GGUF file's


class FalconSettings(NamedTuple):
    """Falcon's own config keys, beside the common ones of ModelConfig."""

    layout: str  # one of LAYOUTS: how query_key_value's rows are laid out (by_kind: all q | all k | all v, llama.cpp's)
    alibi: bool  # ALiBi instead of RoPE
    parallel: bool  # attention and MLP of the same input, added together (parallel_attn, or the new architecture)
    norms: int  # 2: ln_attn and ln_mlp (the new architecture's default); 1: input_layernorm for both


TENSORS = Tensors("word_embeddings.weight", ("transformer.", ""))  # FalconModel's names, under `transformer.` in FalconForCausalLM
DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 4544, "heads": 71, "positions": 2048, "eps": 1e-5, "act": "gelu"}  # FalconConfig
BFLOAT16_ALIBI = "ALiBi's slopes and their products with the key positions are rounded to bfloat16"


def read_config(read: _Reader) -> ModelConfig:
    """Falcon's config.json keys (transformers 5, and the n_head / n_layer spellings of the RefinedWeb configs)."""
    d = DEFAULTS
    layers = read.count("num_hidden_layers", "n_layer", default=d["layers"], most=MOST["layers"])
    hidden = read.count("hidden_size", "n_embed", default=d["hidden"], most=MOST["hidden"])
    heads = read.count("num_attention_heads", "n_head", default=d["heads"], most=MOST["heads"])
    head_dim = _heads_divide(read, hidden, heads, "num_attention_heads")
    new = read.flag("new_decoder_architecture", False)
    multi_query = read.flag("multi_query", True)
    layout = "grouped" if new else "multi_query" if multi_query else "per_head"
    kv_heads = {"grouped": None, "multi_query": 1, "per_head": heads}[layout]
    if kv_heads is None:  # num_kv_heads groups of the new architecture (transformers: all heads when absent)
        kv_heads = read.count("num_kv_heads", "n_head_kv", default=heads, most=heads)
        if heads % kv_heads:
            raise read.fail("num_kv_heads", f"{kv_heads} key/value heads do not divide {heads} heads", "a divisor of num_attention_heads")
    alibi = read.flag("alibi", False)
    max_positions = read.count("max_position_embeddings", default=d["positions"], most=MOST["positions"])
    rope: RopeConfig | None = None
    if not alibi:
        rope = _rope(read, max_positions)
        if head_dim % 2:
            raise read.fail("num_attention_heads", f"the head size {head_dim} is odd", "an even head size (RoPE turns pairs)")
    parallel = new or read.flag("parallel_attn", True)
    norms = read.raw.get("num_ln_in_parallel_attn")
    norms = (2 if norms is None else read.count("num_ln_in_parallel_attn", default=2, most=2)) if new else 1
    bias = read.flag("bias", False)
    inner = read.raw.get("ffn_hidden_size")
    return ModelConfig(
        model_type="falcon",
        layers=layers,
        hidden_size=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=4 * hidden if inner is None else read.count("ffn_hidden_size", default=None, most=MOST["inner"]),
        max_positions=max_positions,
        norm_eps=read.number("layer_norm_epsilon", d["eps"]),
        activation=_activation(read, "activation", default=d["act"]),
        dtype=_dtype(read),
        rope=rope,
        windows=(None,) * layers,
        causal=True,
        qkv_bias=bias,
        output_bias=bias,
        mlp_bias=bias,
        family=FalconSettings(layout=layout, alibi=alibi, parallel=parallel, norms=norms),
    )


def settings(cfg: ModelConfig) -> FalconSettings:
    assert isinstance(cfg.family, FalconSettings)
    return cfg.family


def falcon_alibi(heads: int, head_dim: int) -> Alibi:
    """The ALiBi transformers' Falcon applies: the paper's slopes in bfloat16, counted twice and divided by √d_k (module doc)."""
    slopes = np.asarray(alibi_slopes(heads), dtype=np.float64)
    return Alibi(tuple(float(2 * m / math.sqrt(head_dim)) for m in _bfloat16(slopes)), given=True)


def products_caveat(heads: int, tokens: int) -> str | None:
    """What the header says when transformers' bfloat16 products m·j differ from attncli's exact ones, else None: they agree
    when every slope is a power of two (its products then need no more bits than the position) and positions stay below 257."""
    slopes = _bfloat16(np.asarray(alibi_slopes(heads)))
    if (np.log2(slopes) % 1 == 0).all() and tokens <= 256:
        return None
    return (
        f"transformers also rounds each product m·j to bfloat16, attncli does not: with {heads} heads and {tokens} tokens "
        "transformers' biases may differ from attncli's by up to 2^−9·m·j"
    )


def _bfloat16(x: np.ndarray) -> np.ndarray:
    """x rounded to bfloat16 (to nearest, ties to even), as float64: float32's top 16 bits."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


def _split(fused: np.ndarray, cfg: ModelConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """query_key_value's rows (out, …) as the rows of q (H·d_k, …), k and v (G·d_k, …) in the engine's head order."""
    H, G, d_k, layout = cfg.heads, cfg.kv_heads, cfg.head_dim, settings(cfg).layout
    rest = fused.shape[1:]
    if layout == "grouped":
        groups = fused.reshape(G, H // G + 2, d_k, *rest)  # per group: its H/G queries, its key, its value
        return groups[:, : H // G].reshape(H * d_k, *rest), groups[:, -2].reshape(G * d_k, *rest), groups[:, -1].reshape(G * d_k, *rest)
    if layout in ("multi_query", "by_kind"):  # multi-query's one key and one value are G = 1 of them
        return fused[: H * d_k], fused[H * d_k : (H + G) * d_k], fused[(H + G) * d_k :]
    per_head = fused.reshape(H, 3, d_k, *rest)  # (H, q/k/v, d_k, …)
    return tuple(per_head[:, part].reshape(H * d_k, *rest) for part in range(3))  # type: ignore[return-value]


def _attention(cfg: ModelConfig, w: Weights, index: int, rope: Rope | None) -> AttentionWeights:
    """Layer `index` (from 0): query_key_value split by its layout, each returned as (d, H·d_k) or (d, G·d_k)."""
    d, H, G, d_k = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim
    p = f"h.{index}.self_attention."
    out = (H + 2 * G) * d_k
    W_Q, W_K, W_V = (np.ascontiguousarray(part.T) for part in _split(w.get(p + "query_key_value.weight", (out, d)), cfg))
    b_Q = b_K = b_V = b_O = None
    if cfg.qkv_bias:
        b_Q, b_K, b_V = (np.ascontiguousarray(part) for part in _split(w.get(p + "query_key_value.bias", (out,)), cfg))
    if cfg.output_bias:
        b_O = w.get(p + "dense.bias", (d,))
    alibi = falcon_alibi(H, d_k) if settings(cfg).alibi else None
    return AttentionWeights(
        W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=b_Q, b_K=b_K, b_V=b_V, W_O=w.get(p + "dense.weight", (d, H * d_k)).T, b_O=b_O,
        heads=H, kv_heads=G, head_dim=d_k, divisor=math.sqrt(d_k), causal=True, window=None, rope=rope,
        variants=(alibi,) if alibi is not None else (),
    )  # fmt: skip


def _norm_names(cfg: ModelConfig, index: int) -> tuple[str, str]:
    """The LayerNorms of the attention's input and of the MLP's (the same one, or post_attention_layernorm when sequential)."""
    p = f"h.{index}."
    s = settings(cfg)
    if s.norms == 2:
        return p + "ln_attn", p + "ln_mlp"
    return p + "input_layernorm", p + ("input_layernorm" if s.parallel else "post_attention_layernorm")


def _mlp(cfg: ModelConfig, w: Weights, index: int, x: np.ndarray) -> np.ndarray:
    """(L, d) dense_4h_to_h(act(dense_h_to_4h(x))), with biases when the model has them."""
    d, inner = cfg.hidden_size, cfg.intermediate_size
    p = f"h.{index}.mlp."
    hidden = w.product(p + "dense_h_to_4h.weight", x, (inner, d))  # (L, inner)
    if cfg.mlp_bias:
        hidden = hidden + w.get(p + "dense_h_to_4h.bias", (inner,))
    out: np.ndarray = w.product(p + "dense_4h_to_h.weight", activate(cfg.activation, hidden), (d, inner))  # (L, d)
    return out + w.get(p + "dense_4h_to_h.bias", (d,)) if cfg.mlp_bias else out


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray, rope: Rope | None) -> np.ndarray:
    """(L, d) the residual stream after layer `index`: attention and MLP in parallel, or one after the other."""
    attn_norm, mlp_norm = _norm_names(cfg, index)
    attention = self_attention(w.layer_norm(attn_norm, h, cfg.norm_eps), _attention(cfg, w, index, rope))  # (L, d)
    if settings(cfg).parallel:
        out: np.ndarray = _mlp(cfg, w, index, w.layer_norm(mlp_norm, h, cfg.norm_eps)) + attention + h
        return out
    h = attention + h
    out = _mlp(cfg, w, index, w.layer_norm(mlp_norm, h, cfg.norm_eps)) + h
    return out


def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = the attention's LayerNorm of the residual entering `layer` (from 1), and that layer's attention weights."""
    s = settings(cfg)
    w = Weights(checkpoint, probe=TENSORS.probe, prefixes=TENSORS.prefixes)
    rope = None if cfg.rope is None else rope_spec(cfg.rope, cfg.head_dim)
    h = w.rows("word_embeddings.weight", ids, cfg.hidden_size)  # (L, d)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h, rope)
    index = layer - 1
    attn_norm, mlp_norm = _norm_names(cfg, index)
    X = w.layer_norm(attn_norm, h, cfg.norm_eps)  # (L, d)
    attention = _attention(cfg, w, index, rope)
    dtype = w.dtype(f"h.{index}.self_attention.query_key_value.weight")
    layout = {
        "grouped": f"per key/value group [q … q | k | v] ({cfg.heads // cfg.kv_heads} queries, then the group's key and value)",
        "multi_query": f"[q_1 … q_{cfg.heads} | k | v]: {cfg.heads} query heads, then the one key and the one value",
        "per_head": "[q | k | v] head by head",
        "by_kind": f"[q_1 … q_{cfg.heads} | k_1 … k_{cfg.kv_heads} | v_1 … v_{cfg.kv_heads}] (llama.cpp's converter regrouped them)",
    }[s.layout]
    if s.parallel:
        both = "ln_attn and ln_mlp of the same x" if mlp_norm != attn_norm else "both of input_layernorm(x)"
        residual = f"parallel attention: each layer adds attention and the MLP, {both}"
    else:
        residual = "sequential: attention, then the MLP of post_attention_layernorm of the updated stream"
    if s.alibi:
        position = (
            f"no position embeddings: ALiBi as transformers' Falcon adds it, m·j (j the key's position from 0) before the "
            f"division by √d_k and again, divided by √d_k, in the mask: slopes 2·m/√{cfg.head_dim} on the scaled scores "
            "(m: the paper's slopes in bfloat16); m·j and −m·(i − j) differ by a constant per row, which the softmax ignores"
        )
        caveat = products_caveat(cfg.heads, len(ids))
        position += "" if caveat is None else "; " + caveat
    else:
        assert rope is not None
        position = f"RoPE (rotate-half) on every coordinate of each head at positions 0, 1, 2, …: θ = {rope.theta:g}"
    notes = (
        f"X = {attn_norm.rsplit('.', 1)[-1]} (LayerNorm) of the residual entering layer {layer}: token embeddings{through(layer)}",
        f"W_Q, W_K, W_V come from query_key_value, whose rows run {layout}",
        sharing_note(cfg.heads, cfg.kv_heads),
        position,
        "q, k, v and dense (W_O) have biases" if cfg.qkv_bias else None,
        f"scores divided by √d_k = √{cfg.head_dim} = {attention.divisor:g}",
        "causal mask: each token sees itself and the tokens before it",
        residual,
        storage_note(dtype),
    )
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=tuple(note for note in notes if note is not None))


def mechanisms(cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of Falcon beyond describe.py: how query_key_value is laid out, ALiBi, parallel attention."""
    s = settings(cfg)
    said = [
        {
            "grouped": "new decoder architecture: query_key_value holds each key/value group's queries, key and value together",
            "multi_query": "multi-query layout: query_key_value holds every query head, then one key head and one value head",
            "per_head": "query_key_value holds q, k and v head by head",
            "by_kind": "query_key_value (attn_qkv) holds every query head, then every key head, then every value head (llama.cpp's layout)",
        }[s.layout]
    ]
    if s.alibi:
        said.append(
            "ALiBi instead of RoPE, in transformers' Falcon convention: the slopes m (bfloat16) times the key position are added "
            f"to q·k before the division by √d_k and again after it, so each head's slope on the scaled scores is 2·m/√{cfg.head_dim}"
        )
    if s.parallel:
        norms = "ln_attn and ln_mlp" if s.norms == 2 else "one input_layernorm"
        said.append(f"parallel attention and MLP: both read the layer's input ({norms}) and add to the residual together")
    return said


# -- GGUF and model verify ---------------------------------------------------------------------

GGUF_NAMES = (
    (r"word_embeddings\.weight", "token_embd.weight"),
    (r"ln_f\.(weight|bias)", r"output_norm.\1"),
    (r"h\.(\d+)\.(?:input_layernorm|ln_mlp)\.(weight|bias)", r"blk.\1.attn_norm.\2"),  # llama.cpp's MLP norm is attn_norm,
    (r"h\.(\d+)\.ln_attn\.(weight|bias)", r"blk.\1.attn_norm_2.\2"),  # the attention's attn_norm_2 when the file has it
    (r"h\.(\d+)\.self_attention\.query_key_value\.(weight|bias)", r"blk.\1.attn_qkv.\2"),
    (r"h\.(\d+)\.self_attention\.dense\.(weight|bias)", r"blk.\1.attn_output.\2"),
    (r"h\.(\d+)\.mlp\.dense_h_to_4h\.(weight|bias)", r"blk.\1.ffn_up.\2"),
    (r"h\.(\d+)\.mlp\.dense_4h_to_h\.(weight|bias)", r"blk.\1.ffn_down.\2"),
)


def gguf_config(file: Metadata, a: str, common: dict[str, Any]) -> ModelConfig:
    """Falcon as llama.cpp computes a falcon file: parallel attention with RoPE (θ from rope.freq_base, else 10 000), GELU,
    query_key_value by kind; ln_attn and ln_mlp when attn_norm_2 is there, else one input_layernorm; biases where stored."""
    layers, hidden, heads = common["layers"], common["hidden_size"], common["heads"]
    if hidden % heads or (hidden // heads) % 2:
        raise file.fail(f"{heads} heads do not divide the hidden size {hidden} into even heads", key=a + "attention.head_count")
    kv_heads = file.count(a + "attention.head_count_kv", default=1)
    if heads % kv_heads:
        raise file.fail(f"{kv_heads} key/value heads do not divide {heads} heads", key=a + "attention.head_count_kv")
    bias = "blk.0.attn_qkv.bias" in file.tensors
    return ModelConfig(
        model_type="falcon", kv_heads=kv_heads, head_dim=hidden // heads, norm_eps=file.number(a + "attention.layer_norm_epsilon", default=1e-5),
        activation="gelu", rope=RopeConfig(theta=file.number(a + "rope.freq_base", default=10_000.0), kind="default"),
        windows=(None,) * layers, causal=True, qkv_bias=bias, output_bias=bias, mlp_bias=bias,
        family=FalconSettings(layout="by_kind", alibi=False, parallel=True, norms=2 if "blk.0.attn_norm_2.weight" in file.tensors else 1),
        **common,
    )  # fmt: skip


GGUF = (GgufArchitecture("falcon", "falcon", GGUF_NAMES, config=gguf_config),)
# LayerNorm and the softmax run in float64; RoPE's angles in float32, or ALiBi's slopes and products in bfloat16
VERIFY = Verification(r"(?:^|\.)h\.(\d+)\.self_attention\.dense$", (FLOAT32_ROPE + " (with RoPE)", BFLOAT16_ALIBI + " (with ALiBi)"))


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json (q, k and v in one projection, its rows by the layout)."""
    d = cfg.hidden_size
    return {
        "word_embeddings.weight": (None, d),
        "h.0.self_attention.query_key_value.weight": ((cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim, d),
        "h.0.mlp.dense_h_to_4h.weight": (cfg.intermediate_size, d),
    }
