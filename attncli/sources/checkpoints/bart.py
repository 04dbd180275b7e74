"""BART, the encoder–decoder: its three attentions — the encoder's, the decoder's causal self-attention, and the cross-attention.

The encoder reads the sentence (with `<s> … </s>`); the decoder reads the target text so far, shifted
right behind `decoder_start_token_id` as in training and generation. Each cross-attention's queries
come from the decoder's stream, its keys and values from the encoder's last hidden state: the
attention a translation or summary pays to its source.

Both stacks are post-norm (`x + attention(x)`, then LayerNorm); embeddings are token rows (× √d when
`scale_embedding`) plus learned positions read two rows down (BartLearnedPositionalEmbedding's offset
of 2), then `layernorm_embedding`. Every projection has a bias; scores are divided by √d_k.
Dimension names: L source tokens, T target tokens, d = d_model, d_k head size.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from attncli.errors import AttnError, did_you_mean
from attncli.sources.checkpoints.blocks import (
    AttentionWeights,
    LayerInputs,
    Weights,
    activate,
    cross_attention,
    self_attention,
    storage_note,
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
from attncli.sources.checkpoints.source import TensorSource

ATTENTIONS = ("encoder", "decoder", "cross")  # which of the three a layer number counts in
POSITION_OFFSET = 2  # BartLearnedPositionalEmbedding: position p reads row p + 2
TENSORS = Tensors("shared.weight", ("model.", ""))  # the embedding both stacks share
DESCRIPTION = Description(learned_positions=True)


class Stack(NamedTuple):
    """One of the two stacks: its tensors' prefix, layers, heads and MLP width."""

    name: str  # "encoder" or "decoder"
    layers: int
    heads: int
    inner: int


def stacks(cfg: ModelConfig) -> dict[str, Stack]:
    return {
        "encoder": Stack("encoder", cfg.encoder_layers, cfg.encoder_heads, cfg.encoder_inner),
        "decoder": Stack("decoder", cfg.layers, cfg.heads, cfg.intermediate_size),
    }


def stack_of(attention: str) -> str:
    """The stack whose layers `attention` counts: the encoder's own, else the decoder's (which holds the cross-attention)."""
    return "encoder" if attention == "encoder" else "decoder"


def chosen_attention(attention: str | None, has_target: bool) -> str:
    """The attention shown: as asked, else the cross-attention when there is a target text, else the encoder's."""
    if attention is None:
        return "cross" if has_target else "encoder"
    if attention not in ATTENTIONS:
        hint = did_you_mean(attention, ATTENTIONS) if isinstance(attention, str) else ""
        raise AttnError(f"found {attention!r}{hint}", key="attention", expected="encoder, decoder or cross")
    if attention == "encoder" and has_target:
        raise AttnError(
            "the encoder's self-attention reads the source sentence only: the target text would be left unused",
            key="target",
            expected="no target with attention encoder, or attention decoder or cross to see the target's tokens",
        )
    if attention != "encoder" and not has_target:
        raise AttnError(
            f"the {attention} attention reads the decoder's tokens, and no target text was given",
            key="target",
            expected="the text the decoder has produced so far, e.g. the start of a translation",
        )
    return attention


def decoder_ids(cfg: ModelConfig, target_ids: tuple[int, ...]) -> tuple[int, ...]:
    """The decoder's input: the start token, then the target's tokens without its closing end-of-sequence (shifted right)."""
    ids = target_ids[:-1] if target_ids and target_ids[-1] == cfg.eos_token_id else target_ids
    return (cfg.decoder_start_token_id, *ids)


class Bart:
    """The checkpoint's tensors, read as each step needs them."""

    def __init__(self, cfg: ModelConfig, checkpoint: TensorSource) -> None:
        self.cfg = cfg
        self.w = Weights(checkpoint, probe=TENSORS.probe, prefixes=TENSORS.prefixes)
        self.d = cfg.hidden_size
        self.d_k = {name: _head_dim(cfg, stack) for name, stack in stacks(cfg).items()}

    def _norm(self, name: str, x: np.ndarray) -> np.ndarray:
        return self.w.layer_norm(name, x, self.cfg.norm_eps)

    def embed(self, stack: str, ids: tuple[int, ...]) -> np.ndarray:
        """(n, d) token rows (× √d with scale_embedding) + learned positions from row 2, then layernorm_embedding."""
        table = f"{stack}.embed_tokens.weight" if self.w.has(f"{stack}.embed_tokens.weight") else "shared.weight"
        scale = math.sqrt(self.d) if self.cfg.scale_embedding else 1.0
        positions = range(POSITION_OFFSET, POSITION_OFFSET + len(ids))
        if len(ids) + POSITION_OFFSET > self.w.checkpoint.shape(self.w.prefix + f"{stack}.embed_positions.weight")[0]:
            raise AttnError(f"{len(ids)} {stack} tokens, more than the model's {self.cfg.max_positions} positions", key="sentence" if stack == "encoder" else "target")
        h = self.w.rows(table, ids, self.d) * scale + self.w.rows(f"{stack}.embed_positions.weight", positions, self.d)  # (n, d)
        return self._norm(f"{stack}.layernorm_embedding", h)

    def attention(self, stack: str, index: int, kind: str) -> AttentionWeights:
        """Layer `index` (from 0)'s `self_attn` or `encoder_attn` (the cross-attention) as the engine takes it."""
        H, d_k = stacks(self.cfg)[stack].heads, self.d_k[stack]
        p = f"{stack}.layers.{index}.{kind}."
        W_Q, b_Q = self.w.linear(p + "q_proj", self.d, H * d_k)
        W_K, b_K = self.w.linear(p + "k_proj", self.d, H * d_k)
        W_V, b_V = self.w.linear(p + "v_proj", self.d, H * d_k)
        W_O, b_O = self.w.linear(p + "out_proj", H * d_k, self.d)
        return AttentionWeights(
            W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=b_Q, b_K=b_K, b_V=b_V, W_O=W_O, b_O=b_O,
            heads=H, kv_heads=H, head_dim=d_k, divisor=math.sqrt(d_k),
            causal=stack == "decoder" and kind == "self_attn", window=None, rope=None,
        )  # fmt: skip

    def mlp(self, stack: str, index: int, h: np.ndarray) -> np.ndarray:
        """(n, d) h + fc2(act(fc1(h))), then final_layer_norm."""
        inner = stacks(self.cfg)[stack].inner
        p = f"{stack}.layers.{index}."
        W_in, b_in = self.w.linear(p + "fc1", self.d, inner)
        hidden = activate(self.cfg.activation, h @ W_in + b_in)  # (n, inner)
        W_out, b_out = self.w.linear(p + "fc2", inner, self.d)
        return self._norm(p + "final_layer_norm", h + hidden @ W_out + b_out)

    def encoder_layer(self, index: int, h: np.ndarray) -> np.ndarray:
        p = f"encoder.layers.{index}."
        h = self._norm(p + "self_attn_layer_norm", h + self_attention(h, self.attention("encoder", index, "self_attn")))  # (L, d)
        return self.mlp("encoder", index, h)

    def decoder_self(self, index: int, h: np.ndarray) -> np.ndarray:
        """(T, d) after the decoder layer's causal self-attention block: what its cross-attention's queries read."""
        return self._norm(f"decoder.layers.{index}.self_attn_layer_norm", h + self_attention(h, self.attention("decoder", index, "self_attn")))

    def decoder_layer(self, index: int, h: np.ndarray, memory: np.ndarray) -> np.ndarray:
        h = self.decoder_self(index, h)  # (T, d)
        cross = cross_attention(h, memory, self.attention("decoder", index, "encoder_attn"))  # (T, d)
        h = self._norm(f"decoder.layers.{index}.encoder_attn_layer_norm", h + cross)
        return self.mlp("decoder", index, h)

    def encode(self, ids: tuple[int, ...], layers: int) -> np.ndarray:
        """(L, d) the hidden state after the first `layers` encoder layers."""
        h = self.embed("encoder", ids)
        for index in range(layers):
            h = self.encoder_layer(index, h)
        return h


def _head_dim(cfg: ModelConfig, stack: Stack) -> int:
    if cfg.hidden_size % stack.heads:
        raise AttnError(f"{stack.heads} {stack.name} heads do not divide d_model {cfg.hidden_size}", key=f"{stack.name}_attention_heads", expected="a divisor of d_model")
    return cfg.hidden_size // stack.heads


def layer_inputs(
    cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int, *, attention: str, target_ids: tuple[int, ...] = ()
) -> LayerInputs:
    """The inputs of layer `layer` (from 1) of the encoder (`attention="encoder"`) or of the decoder's self- or cross-attention.

    `ids` are the source sentence's tokens; `target_ids` the decoder's input (decoder_ids: already shifted right).
    """
    model = Bart(cfg, checkpoint)
    index = layer - 1
    if attention == "encoder":
        X = model.encode(ids, index)  # (L, d)
        return LayerInputs(
            X=X, attention=model.attention("encoder", index, "self_attn"), dtype=model.w.dtype(f"encoder.layers.{index}.self_attn.q_proj.weight"),
            notes=(
                f"encoder layer {layer} of {cfg.encoder_layers}: X = the hidden state entering it ({_embedding_note(cfg)}{_through('encoder', layer)}); "
                "BART normalises after attention (post-LN), so X is the residual stream itself",
                "bidirectional: every source token sees every source token",
                f"scores divided by √d_k = √{model.d_k['encoder']} = {math.sqrt(model.d_k['encoder']):g}",
                storage_note(model.w.dtype(f"encoder.layers.{index}.self_attn.q_proj.weight")),
            ),
        )  # fmt: skip
    memory = model.encode(ids, cfg.encoder_layers)  # (L, d) the encoder's output: every cross-attention's keys and values
    h = model.embed("decoder", target_ids)  # (T, d)
    for earlier in range(index):
        h = model.decoder_layer(earlier, h, memory)
    kind = "self_attn" if attention == "decoder" else "encoder_attn"
    dtype = model.w.dtype(f"decoder.layers.{index}.{kind}.q_proj.weight")
    d_k = model.d_k["decoder"]
    scale_note = f"scores divided by √d_k = √{d_k} = {math.sqrt(d_k):g}"
    if attention == "decoder":
        return LayerInputs(
            X=h, attention=model.attention("decoder", index, kind), dtype=dtype,
            notes=(
                f"decoder layer {layer} of {cfg.layers}, its self-attention: X = the decoder's hidden state entering it "
                f"({_embedding_note(cfg)}{_through('decoder', layer)}), the target shifted right behind its start token",
                "causal mask: each target token sees itself and the target tokens before it",
                scale_note,
                storage_note(dtype),
            ),
        )  # fmt: skip
    X = model.decoder_self(index, h)  # (T, d)
    return LayerInputs(
        X=X, X_kv=memory, attention=model.attention("decoder", index, kind), dtype=dtype,
        notes=(
            f"decoder layer {layer} of {cfg.layers}, its cross-attention (encoder_attn): the queries' X is the decoder's stream "
            f"after this layer's self-attention block and self_attn_layer_norm ({_embedding_note(cfg)}{_through('decoder', layer)})",
            f"keys and values come from the encoder's output: the source sentence after all {cfg.encoder_layers} encoder layers",
            "no mask: every target token sees every source token",
            scale_note,
            storage_note(dtype),
        ),
    )  # fmt: skip


def _embedding_note(cfg: ModelConfig) -> str:
    scale = " × √d_model" if cfg.scale_embedding else ""
    return f"token embeddings{scale} + learned positions (rows p + 2), layernorm_embedding"


def _through(stack: str, layer: int) -> str:
    if layer == 1:
        return ""
    return f", then {stack} " + ("layer 1" if layer == 2 else f"layers 1–{layer - 1}")


DEFAULTS: dict[str, Any] = {"layers": 12, "hidden": 1024, "heads": 16, "positions": 1024, "inter": 4096, "act": "gelu"}  # transformers' BartConfig


def read_config(read: _Reader) -> ModelConfig:
    """BART's config: the decoder in the common fields, the encoder in its own (both stacks share d_model)."""
    d = DEFAULTS
    hidden = read.count("d_model", default=d["hidden"], most=MOST["hidden"])
    layers = read.count("decoder_layers", default=d["layers"], most=MOST["layers"])
    heads = read.count("decoder_attention_heads", default=d["heads"], most=MOST["heads"])
    eos = read.raw.get("eos_token_id", 2)
    return ModelConfig(
        model_type="bart",
        layers=layers,
        hidden_size=hidden,
        heads=heads,
        kv_heads=heads,
        head_dim=_heads_divide(read, hidden, heads, "decoder_attention_heads"),
        intermediate_size=read.count("decoder_ffn_dim", default=d["inter"], most=MOST["inner"]),
        max_positions=read.count("max_position_embeddings", default=d["positions"], most=MOST["positions"]),
        norm_eps=1e-5,  # BART's LayerNorms are nn.LayerNorm's default
        activation=_activation(read, "activation_function", default=d["act"]),
        dtype=_dtype(read),
        rope=None,
        windows=(None,) * layers,
        causal=True,
        qkv_bias=True,
        output_bias=True,
        mlp_bias=True,
        encoder_layers=read.count("encoder_layers", default=d["layers"], most=MOST["layers"]),
        encoder_heads=read.count("encoder_attention_heads", default=d["heads"], most=MOST["heads"]),
        encoder_inner=read.count("encoder_ffn_dim", default=d["inter"], most=MOST["inner"]),
        scale_embedding=read.flag("scale_embedding", False),
        decoder_start_token_id=read.count("decoder_start_token_id", default=2, minimum=0, most=MOST["vocabulary"]),
        eos_token_id=eos if isinstance(eos, int) and not isinstance(eos, bool) else None,
    )


# model verify: each of BART's three attentions has its own output projection (`out_proj`), the layer counted within its
# stack; LayerNorm, learned positions and the softmax run in the model's dtype: float64 throughout
VERIFY = Verification({
    "encoder": r"(?:^|\.)encoder\.layers\.(\d+)\.self_attn\.out_proj$",
    "decoder": r"(?:^|\.)decoder\.layers\.(\d+)\.self_attn\.out_proj$",
    "cross": r"(?:^|\.)decoder\.layers\.(\d+)\.encoder_attn\.out_proj$",
})  # fmt: skip


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json: both stacks' layer 1 and the cross-attention."""
    d = cfg.hidden_size
    return {
        "shared.weight": (None, d),
        "encoder.layers.0.self_attn.q_proj.weight": (d, d),
        "decoder.layers.0.encoder_attn.k_proj.weight": (d, d),
        "decoder.layers.0.fc1.weight": (cfg.intermediate_size, d),
        "encoder.layers.0.fc1.weight": (cfg.encoder_inner, d),
    }
