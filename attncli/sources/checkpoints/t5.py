"""T5, the encoder–decoder with relative-position buckets: its encoder's attention, its decoder's, and the cross-attention.

Per transformers' T5Stack and T5Attention: no position embeddings and no scaling of the scores (T5 folds 1/√d_k into
its initialisation); instead head h adds b_h[bucket(j − i)] to q·k (core.variants.relative: the encoder's buckets both
ways, the decoder's backwards only), from one table per stack kept in its first layer
(block.0.layer.0.SelfAttention.relative_attention_bias, buckets × heads) and used by every layer of the stack; the
cross-attention has none. Every block is pre-norm: x + attention(layer_norm(x)), then x + MLP(layer_norm(x)), with T5's
RMSNorm (no mean subtracted, no bias; transformers takes the mean square in float32) and no biases anywhere; each stack
ends with final_layer_norm, and the encoder's normalised output gives every cross-attention's keys and values. The MLP
is wo(act(wi·x)) (T5: ReLU), or wo(act(wi_0·x) ⊙ wi_1·x) for a gated feed_forward_proj (v1.1, Flan-T5: gated-gelu,
computed with gelu_new). The decoder reads the target shifted right behind decoder_start_token_id (T5: <pad>).
Dimension names: L source tokens, T target tokens, d = d_model, d_k = d_kv per head.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from attncli.core.variants import RelativeBuckets
from attncli.errors import AttnError
from attncli.sources.checkpoints.bart import Stack, decoder_ids
from attncli.sources.checkpoints.blocks import (
    AttentionWeights,
    LayerInputs,
    Weights,
    activate,
    cross_attention,
    rms_norm,
    self_attention,
    storage_note,
)
from attncli.sources.checkpoints.config import (
    ACTIVATIONS,
    MOST,
    Description,
    ModelConfig,
    Tensors,
    Verification,
    _dtype,
    _Reader,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata
from attncli.sources.checkpoints.source import TensorSource

__all__ = ["decoder_ids", "layer_inputs", "read_config", "stacks"]

TENSORS = Tensors("shared.weight", ("", "model."))  # T5Model's and T5ForConditionalGeneration's names
DESCRIPTION = Description()
FLOAT32_RMSNORM = "T5's RMSNorm takes the mean square in float32"
DEFAULTS: dict[str, Any] = {"layers": 6, "hidden": 512, "d_kv": 64, "heads": 8, "inner": 2048, "buckets": 32, "distance": 128, "eps": 1e-6}  # T5Config


class T5Settings(NamedTuple):
    """T5's own config keys, beside the common ones of ModelConfig."""

    buckets: int  # relative_attention_num_buckets
    max_distance: int  # relative_attention_max_distance
    gated: bool  # a gated feed_forward_proj (gated-gelu): wo(act(wi_0·x) ⊙ wi_1·x)


def read_config(read: _Reader) -> ModelConfig:
    """T5's config.json keys with T5Config's defaults: the decoder in the common fields, the encoder in its own."""
    d = DEFAULTS
    hidden = read.count("d_model", default=d["hidden"], most=MOST["hidden"])
    encoder_layers = read.count("num_layers", default=d["layers"], most=MOST["layers"])
    layers = read.count("num_decoder_layers", default=encoder_layers, most=MOST["layers"]) if read.raw.get("num_decoder_layers") is not None else encoder_layers
    heads = read.count("num_heads", default=d["heads"], most=MOST["heads"])
    inner = read.count("d_ff", default=d["inner"], most=MOST["inner"])
    projection = read.word("feed_forward_proj", default="relu")
    parts = projection.split("-")
    gated = parts[0] == "gated"
    activation = "gelu_new" if projection == "gated-gelu" else parts[-1]
    if len(parts) > 2 or (len(parts) == 2 and not gated) or activation not in ACTIVATIONS:
        raise read.fail("feed_forward_proj", f"found {projection!r}", "an activation, or gated-<activation> (relu, gated-gelu, …)")
    buckets = read.count("relative_attention_num_buckets", default=d["buckets"], minimum=4, most=1 << 16)
    distance = read.count("relative_attention_max_distance", default=d["distance"], minimum=2, most=MOST["positions"])
    if distance <= buckets // 4:
        raise read.fail("relative_attention_max_distance", f"{distance} is not beyond the {buckets // 4} exact buckets", f"more than {buckets // 4}")
    eos = read.raw.get("eos_token_id", 1)
    return ModelConfig(
        model_type="t5",
        layers=layers,
        hidden_size=hidden,
        heads=heads,
        kv_heads=heads,
        head_dim=read.count("d_kv", default=d["d_kv"], most=MOST["head_dim"]),
        intermediate_size=inner,
        max_positions=read.count("n_positions", default=512, most=MOST["positions"]),  # no table: T5's training length
        norm_eps=read.number("layer_norm_epsilon", d["eps"]),
        activation=activation,
        dtype=_dtype(read),
        rope=None,
        windows=(None,) * layers,
        causal=True,
        qkv_bias=False,
        output_bias=False,
        mlp_bias=False,
        encoder_layers=encoder_layers,
        encoder_heads=heads,
        encoder_inner=inner,
        decoder_start_token_id=read.count("decoder_start_token_id", default=read.raw.get("pad_token_id", 0) or 0, minimum=0, most=MOST["vocabulary"]),
        eos_token_id=eos if isinstance(eos, int) and not isinstance(eos, bool) else None,
        family=T5Settings(buckets=buckets, max_distance=distance, gated=gated),
    )


def settings(cfg: ModelConfig) -> T5Settings:
    assert isinstance(cfg.family, T5Settings)
    return cfg.family


def stacks(cfg: ModelConfig) -> dict[str, Stack]:
    return {
        "encoder": Stack("encoder", cfg.encoder_layers, cfg.heads, cfg.intermediate_size),
        "decoder": Stack("decoder", cfg.layers, cfg.heads, cfg.intermediate_size),
    }


class T5:
    """The checkpoint's tensors, read as each step needs them."""

    def __init__(self, cfg: ModelConfig, checkpoint: TensorSource) -> None:
        self.cfg = cfg
        self.w = Weights(checkpoint, probe=TENSORS.probe, prefixes=TENSORS.prefixes)
        self.d, self.H, self.d_k = cfg.hidden_size, cfg.heads, cfg.head_dim

    def norm(self, name: str, x: np.ndarray) -> np.ndarray:
        """(n, d) T5's RMSNorm `name`: x / √(mean(x²) + ε) · w, no mean subtracted, no bias."""
        return rms_norm(x, self.w.get(name + ".weight", (self.d,)), self.cfg.norm_eps)

    def embed(self, stack: str, ids: tuple[int, ...]) -> np.ndarray:
        """(n, d) the token rows alone: no positions, no scaling."""
        table = f"{stack}.embed_tokens.weight" if self.w.has(f"{stack}.embed_tokens.weight") else "shared.weight"
        return self.w.rows(table, ids, self.d)

    def buckets(self, stack: str) -> RelativeBuckets:
        """The stack's relative-position bias, from its first layer's table (buckets, H) as (H, buckets)."""
        s = settings(self.cfg)
        table = self.w.get(f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight", (s.buckets, self.H)).T  # (H, n)
        return RelativeBuckets(np.ascontiguousarray(table), max_distance=s.max_distance, bidirectional=stack == "encoder")

    def attention(self, stack: str, index: int, kind: str) -> AttentionWeights:
        """Layer `index` (from 0)'s SelfAttention (with the stack's buckets) or EncDecAttention (none), scale 1."""
        p = f"{stack}.block.{index}.layer.{0 if kind == 'SelfAttention' else 1}.{kind}."
        inner = self.H * self.d_k
        W_Q, W_K, W_V = (self.w.linear(p + name, self.d, inner, bias=False)[0] for name in "qkv")
        return AttentionWeights(
            W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=None, b_K=None, b_V=None, W_O=self.w.linear(p + "o", inner, self.d, bias=False)[0], b_O=None,
            heads=self.H, kv_heads=self.H, head_dim=self.d_k, divisor=1.0,
            causal=stack == "decoder" and kind == "SelfAttention", window=None, rope=None,
            variants=(self.buckets(stack),) if kind == "SelfAttention" else (),
        )  # fmt: skip

    def mlp(self, stack: str, index: int, h: np.ndarray) -> np.ndarray:
        """(n, d) h + wo(act(wi·x)) (or the gated form) of x = the block's last layer_norm of h."""
        d, inner = self.d, self.cfg.intermediate_size
        p = f"{stack}.block.{index}.layer.{1 if stack == 'encoder' else 2}."
        x = self.norm(p + "layer_norm", h)
        if settings(self.cfg).gated:
            hidden = activate(self.cfg.activation, self.w.product(p + "DenseReluDense.wi_0.weight", x, (inner, d)))
            hidden = hidden * self.w.product(p + "DenseReluDense.wi_1.weight", x, (inner, d))  # (n, inner)
        else:
            hidden = activate(self.cfg.activation, self.w.product(p + "DenseReluDense.wi.weight", x, (inner, d)))
        out: np.ndarray = h + self.w.product(p + "DenseReluDense.wo.weight", hidden, (d, inner))
        return out

    def self_block(self, stack: str, index: int, h: np.ndarray) -> np.ndarray:
        p = f"{stack}.block.{index}.layer.0."
        out: np.ndarray = h + self_attention(self.norm(p + "layer_norm", h), self.attention(stack, index, "SelfAttention"))
        return out

    def encode(self, ids: tuple[int, ...], layers: int) -> np.ndarray:
        """(L, d) the encoder's residual stream after its first `layers` layers (before final_layer_norm)."""
        h = self.embed("encoder", ids)
        for index in range(layers):
            h = self.mlp("encoder", index, self.self_block("encoder", index, h))
        return h

    def decoder_layer(self, index: int, h: np.ndarray, memory: np.ndarray) -> np.ndarray:
        h = self.self_block("decoder", index, h)  # (T, d)
        x = self.norm(f"decoder.block.{index}.layer.1.layer_norm", h)
        h = h + cross_attention(x, memory, self.attention("decoder", index, "EncDecAttention"))
        return self.mlp("decoder", index, h)


def layer_inputs(
    cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int, *, attention: str, target_ids: tuple[int, ...] = ()
) -> LayerInputs:
    """The inputs of layer `layer` (from 1) of the encoder (`attention="encoder"`) or of the decoder's self- or cross-attention.

    `ids` are the source sentence's tokens; `target_ids` the decoder's input (decoder_ids: already shifted right).
    """
    model = T5(cfg, checkpoint)
    index = layer - 1
    s = settings(cfg)
    scale = "scores not divided (T5 folds 1/√d_k into its weights): scale 1"
    if attention == "encoder":
        X = model.norm(f"encoder.block.{index}.layer.0.layer_norm", model.encode(ids, index))  # (L, d)
        dtype = model.w.dtype(f"encoder.block.{index}.layer.0.SelfAttention.q.weight")
        return LayerInputs(
            X=X, attention=model.attention("encoder", index, "SelfAttention"), dtype=dtype,
            notes=(
                f"encoder layer {layer} of {cfg.encoder_layers}: X = layer_norm (T5's RMSNorm) of the residual entering it "
                f"(token embeddings{_through('encoder', layer)})",
                f"T5's relative-position bias: {s.buckets} buckets, half for keys before the query and half after, up to "
                f"{s.max_distance} positions apart; the encoder's table (its first layer's) serves every encoder layer",
                "bidirectional: every source token sees every source token",
                scale,
                storage_note(dtype),
            ),
        )  # fmt: skip
    if not 1 <= layer <= cfg.layers:
        raise AttnError(f"layer {layer} is out of range: the decoder has {cfg.layers} layers", key="layer", expected=f"1 to {cfg.layers}")
    memory = model.norm("encoder.final_layer_norm", model.encode(ids, cfg.encoder_layers))  # (L, d) every cross-attention's keys and values
    h = model.embed("decoder", target_ids)  # (T, d)
    for earlier in range(index):
        h = model.decoder_layer(earlier, h, memory)
    kind = "SelfAttention" if attention == "decoder" else "EncDecAttention"
    dtype = model.w.dtype(f"decoder.block.{index}.layer.{0 if attention == 'decoder' else 1}.{kind}.q.weight")
    entering = f"token embeddings{_through('decoder', layer)}, the target shifted right behind its start token"
    if attention == "decoder":
        return LayerInputs(
            X=model.norm(f"decoder.block.{index}.layer.0.layer_norm", h), attention=model.attention("decoder", index, kind), dtype=dtype,
            notes=(
                f"decoder layer {layer} of {cfg.layers}, its self-attention: X = layer_norm (T5's RMSNorm) of the decoder's stream ({entering})",
                f"T5's relative-position bias: {s.buckets} buckets for keys at or before the query, up to {s.max_distance} positions "
                "back; the decoder's table (its first layer's) serves every decoder layer",
                "causal mask: each target token sees itself and the target tokens before it",
                scale,
                storage_note(dtype),
            ),
        )  # fmt: skip
    h = model.self_block("decoder", index, h)
    return LayerInputs(
        X=model.norm(f"decoder.block.{index}.layer.1.layer_norm", h), X_kv=memory, attention=model.attention("decoder", index, kind), dtype=dtype,
        notes=(
            f"decoder layer {layer} of {cfg.layers}, its cross-attention (EncDecAttention): the queries' X is layer_norm of the "
            f"decoder's stream after this layer's self-attention block ({entering})",
            f"keys and values come from the encoder's output: the source after all {cfg.encoder_layers} encoder layers and final_layer_norm",
            "no mask and no position bias: every target token sees every source token",
            scale,
            storage_note(dtype),
        ),
    )  # fmt: skip


def _through(stack: str, layer: int) -> str:
    return "" if layer == 1 else f", then {stack} " + ("layer 1" if layer == 2 else f"layers 1–{layer - 1}")


def mechanisms(cfg: ModelConfig, folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of T5 beyond describe.py: its relative-position buckets, its unscaled scores, its norms."""
    s = settings(cfg)
    return [
        f"relative-position buckets instead of position embeddings: each head adds a learned number for the bucket of j − i "
        f"({s.buckets} buckets, exact for the nearest {s.buckets // 4} distances, logarithmic up to {s.max_distance}; the "
        "encoder's both ways, the decoder's backwards only, none in the cross-attention), one table per stack for all its layers",
        "scores not divided by √d_k (scale 1); T5's RMSNorm before every block; no biases",
        "gated MLP: wo(act(wi_0·x) ⊙ wi_1·x)" if s.gated else f"MLP: wo({cfg.activation}(wi·x))",
    ]


# model verify: each of T5's three attentions has its own output projection (`o`), the layer counted within its stack
VERIFY = Verification(
    {
        "encoder": r"(?:^|\.)encoder\.block\.(\d+)\.layer\.0\.SelfAttention\.o$",
        "decoder": r"(?:^|\.)decoder\.block\.(\d+)\.layer\.0\.SelfAttention\.o$",
        "cross": r"(?:^|\.)decoder\.block\.(\d+)\.layer\.1\.EncDecAttention\.o$",
    },
    (FLOAT32_RMSNORM,),
)


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json: both stacks' first layer, their bucket tables and the cross-attention."""
    d, inner, n = cfg.hidden_size, cfg.heads * cfg.head_dim, settings(cfg).buckets
    return {
        "shared.weight": (None, d),
        "encoder.block.0.layer.0.SelfAttention.q.weight": (inner, d),
        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight": (n, cfg.heads),
        "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight": (n, cfg.heads),
        "decoder.block.0.layer.1.EncDecAttention.k.weight": (inner, d),
    }


# -- GGUF: T5Model (convert_hf_to_gguf.py) keeps one token table (shared.weight, or the first stack's) and renames, the
# encoder's blocks as enc.blk.N, the decoder's as dec.blk.N (its EncDecAttention as cross_attn); nothing else changes
GGUF_NAMES = (
    (r"shared\.weight", "token_embd.weight"),
    (r"encoder\.final_layer_norm\.weight", "enc.output_norm.weight"),
    (r"decoder\.final_layer_norm\.weight", "dec.output_norm.weight"),
    *((rf"{stack}\.block\.(\d+)\.{hf}", rf"{short}.blk.\1.{gguf}")
      for stack, short in (("encoder", "enc"), ("decoder", "dec"))
      for hf, gguf in (
          (r"layer\.0\.SelfAttention\.(q|k|v|o)\.weight", r"attn_\2.weight"),
          (r"layer\.0\.SelfAttention\.relative_attention_bias\.weight", "attn_rel_b.weight"),
          (r"layer\.0\.layer_norm\.weight", "attn_norm.weight"),
      )),
    (r"decoder\.block\.(\d+)\.layer\.1\.EncDecAttention\.(q|k|v|o)\.weight", r"dec.blk.\1.cross_attn_\2.weight"),
    (r"decoder\.block\.(\d+)\.layer\.1\.layer_norm\.weight", r"dec.blk.\1.cross_attn_norm.weight"),
    *((rf"{stack}\.block\.(\d+)\.layer\.{at}\.{hf}", rf"{short}.blk.\1.{gguf}")
      for stack, short, at in (("encoder", "enc", 1), ("decoder", "dec", 2))
      for hf, gguf in (
          (r"DenseReluDense\.wi_0\.weight", "ffn_gate.weight"), (r"DenseReluDense\.wi_1\.weight", "ffn_up.weight"),
          (r"DenseReluDense\.wi\.weight", "ffn_up.weight"), (r"DenseReluDense\.wo\.weight", "ffn_down.weight"),
          (r"layer_norm\.weight", "ffn_norm.weight"),
      )),
)  # fmt: skip
GGUF_MAX_DISTANCE = 128  # llama.cpp's llama_relative_position_bucket: relative_attention_max_distance is not stored, but fixed


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """T5's config.json keys from a t5 file, as llama.cpp reads it: block_count the encoder's layers, decoder_block_count the
    decoder's; relative_buckets_count; relative_attention_max_distance 128, which llama.cpp fixes (the converter stores none);
    the feed-forward gated GELU (tanh, T5's gelu_new) when the blocks have ffn_gate, else ReLU, as llama.cpp's graph chooses."""
    eps_key = a + ("attention.layer_norm_rms_epsilon" if file.has_key(a + "attention.layer_norm_rms_epsilon") else "attention.layer_norm_epsilon")
    keys: dict[str, Any] = {
        "d_model": raw["hidden_size"], "num_layers": raw["num_hidden_layers"], "num_heads": raw["num_attention_heads"],
        "num_decoder_layers": file.count(a + "decoder_block_count", default=raw["num_hidden_layers"]),
        "d_kv": head_dim, "d_ff": raw["intermediate_size"], "n_positions": raw["max_position_embeddings"],
        "layer_norm_epsilon": file.number(eps_key, default=1e-6),
        "relative_attention_num_buckets": file.count(a + "attention.relative_buckets_count", default=DEFAULTS["buckets"], minimum=4),
        "relative_attention_max_distance": GGUF_MAX_DISTANCE,
        "feed_forward_proj": "gated-gelu" if "enc.blk.0.ffn_gate.weight" in file.tensors else "relu",
    }  # fmt: skip
    if file.has_key(a + "decoder_start_token_id"):
        keys["decoder_start_token_id"] = file.count(a + "decoder_start_token_id", minimum=0)
    if file.has_key("tokenizer.ggml.eos_token_id"):
        keys["eos_token_id"] = file.count("tokenizer.ggml.eos_token_id", minimum=0)
    return keys


GGUF = (GgufArchitecture("t5", "t5", GGUF_NAMES, keys=gguf_keys),)
