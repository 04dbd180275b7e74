"""Llama, Qwen2 and Mistral: RMSNorm before attention and MLP, RoPE rotate-half, grouped-query attention, SwiGLU; and every
Llama-like family that declares how it differs (a `config.LlamaLike`, its module's `LLAMA_LIKE`).

A declared family's module holds its declaration and what model info, model verify and GGUF need (DESCRIPTION, VERIFY,
GGUF); families.py hands its config to `config.declared_config` and its layers to `declared_layer_inputs` here, which
computes what the declaration says: RoPE or none per layer (NoPE), windows per layer, QK-norm over each head or the whole
projection, norms before or after attention and MLP, the scores' divisor, the biases. qwen3.py, olmo2.py and smollm3.py are
such declarations; Llama, Qwen2 and Mistral are this module's own (`DECLARED`).

Its pieces serve the families that keep code of their own (gemma3.py, phi3.py, gpt_oss.py, …): `_attention` reads a
layer's projections, `_mlp` its SwiGLU, and `layer_inputs` takes the family's own attention reader.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from attncli.core.variants import QkNorm, QkNormAfterRope, QueryTemperature, Rope
from attncli.sources.checkpoints.blocks import (
    AttentionWeights,
    LayerInputs,
    Weights,
    activate,
    layer_norm,
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
    LLAMA_TENSORS,
    O_PROJ,
    LlamaLike,
    LlamaSettings,
    ModelConfig,
    QkNormKind,
    Temperature,
    Verification,
    _Reader,
    declared_config,
    every_layer,
    layer_norms,
    no_windows,
    sliding_layers,
)
from attncli.sources.checkpoints.gguf_family import ConfigReader, GgufArchitecture, Metadata
from attncli.sources.checkpoints.gguf_family import rope as gguf_rope
from attncli.sources.checkpoints.rope import rope_spec
from attncli.sources.checkpoints.source import TensorSource


def _attention(cfg: ModelConfig[Any], w: Weights, index: int, rope: Rope | None) -> AttentionWeights:
    d, H, G, d_k = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim
    p = f"layers.{index}.self_attn."
    W_Q, b_Q = w.linear(p + "q_proj", d, H * d_k, cfg.qkv_bias)
    W_K, b_K = w.linear(p + "k_proj", d, G * d_k, cfg.qkv_bias)
    W_V, b_V = w.linear(p + "v_proj", d, G * d_k, cfg.qkv_bias)
    W_O, b_O = w.linear(p + "o_proj", H * d_k, d, cfg.output_bias)
    window = cfg.windows[index]
    return AttentionWeights(
        W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=b_Q, b_K=b_K, b_V=b_V, W_O=W_O, b_O=b_O,
        heads=H, kv_heads=G, head_dim=d_k, divisor=math.sqrt(d_k), causal=True,
        window=None if window is None else window - 1,  # transformers: key j seen when j > i − sliding_window
        rope=rope,
    )  # fmt: skip


def _norm(cfg: ModelConfig, w: Weights, name: str, x: np.ndarray) -> np.ndarray:
    return rms_norm(x, w.get(name + ".weight", (cfg.hidden_size,)), cfg.norm_eps)


def _linear(w: Weights, name: str, x: np.ndarray, n_out: int, bias: bool) -> np.ndarray:
    """(L, n_out) x·W + b, W widened to float64 a block of rows at a time, only for this product."""
    y = w.product(name + ".weight", x, (n_out, x.shape[1]))  # (L, n_in) @ (n_in, n_out)
    return y if not bias else y + w.get(name + ".bias", (n_out,))


Attention = Callable[[ModelConfig[Any], Weights, int, Rope], AttentionWeights]  # a family's reader of layer `index`'s attention


def _mlp(cfg: ModelConfig, w: Weights, index: int, x: np.ndarray) -> np.ndarray:
    """(L, d) down(act(gate(x))·up(x)) of layer `index`."""
    inner = cfg.intermediate_size
    p = f"layers.{index}."
    hidden = activate(cfg.activation, _linear(w, p + "mlp.gate_proj", x, inner, cfg.mlp_bias))  # (L, inner)
    hidden *= _linear(w, p + "mlp.up_proj", x, inner, cfg.mlp_bias)  # (L, inner) act(gate)·up
    return _linear(w, p + "mlp.down_proj", hidden, cfg.hidden_size, cfg.mlp_bias)  # (L, d)


def _layer(cfg: ModelConfig, w: Weights, index: int, h: np.ndarray, rope: Rope, attention: Attention = _attention) -> np.ndarray:
    """(L, d) the residual stream after layer `index`: h + attention(norm h), then + down(act(gate)·up).

    The attention is the engine's (blocks.self_attention, the very computation `run` shows); each
    MLP matrix (an 8B model's are 470 MB each in float64) is widened a block of rows at a time
    inside its product, so an earlier layer holds its attention weights, 16 MiB of MLP weights
    and its activations.
    """
    p = f"layers.{index}."
    h = h + self_attention(_norm(cfg, w, p + "input_layernorm", h), attention(cfg, w, index, rope))  # (L, d)
    out: np.ndarray = h + _mlp(cfg, w, index, _norm(cfg, w, p + "post_attention_layernorm", h))  # (L, d)
    return out


def weights_and_rope(cfg: ModelConfig, checkpoint: TensorSource) -> tuple[Weights, Rope]:
    """The checkpoint's tensors under `model.` and its RoPE (with a GGUF file's per-frequency factors)."""
    assert cfg.rope is not None
    w = Weights(checkpoint, probe=LLAMA_TENSORS.probe, prefixes=LLAMA_TENSORS.prefixes)
    rope = rope_spec(cfg.rope, cfg.head_dim)
    factors = getattr(checkpoint, "rope_factors", None)  # a GGUF file's llama3 scaling: llama.cpp's per-frequency divisors
    if factors is not None:
        rope = dataclasses.replace(rope, inv_freq=rope.inv_freq / factors, scaling="per-frequency factors (rope_freqs)")
    return w, rope


def layer_inputs(
    cfg: ModelConfig[Any], checkpoint: TensorSource, ids: tuple[int, ...], layer: int, attention: Attention | None = None
) -> LayerInputs:
    """X = input_layernorm (RMSNorm) of the residual entering `layer` (from 1), and that layer's attention weights: as the
    family declares them (`declared_layer_inputs`), or read by the family's own `attention`."""
    if attention is None:
        return declared_layer_inputs(cfg, checkpoint, ids, layer)
    w, rope = weights_and_rope(cfg, checkpoint)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h, rope, attention)
    index = layer - 1
    X = _norm(cfg, w, f"layers.{index}.input_layernorm", h)  # (L, d)
    weights = attention(cfg, w, index, rope)
    return LayerInputs(X=X, attention=weights, dtype=w.dtype(f"layers.{index}.self_attn.q_proj.weight"),
                       notes=notes(cfg, layer, rope, weights, w.dtype(f"layers.{index}.self_attn.q_proj.weight")))  # fmt: skip


def notes(cfg: ModelConfig, layer: int, rope: Rope, attention: AttentionWeights, dtype: str, *, first: str | None = None) -> tuple[str, ...]:
    """The header's lines for a Llama-like layer; `first` replaces the line that says what X is."""
    H, G = cfg.heads, cfg.kv_heads
    sharing = sharing_note(H, G)
    turned = attention.rope or rope
    scaling = f", {turned.scaling.replace(' (', ' scaling (', 1)}" if turned.scaling else ""
    norm = attention.qk_norm
    qk_norm = None if norm is None else (
        f"QK-norm: q and k divided by their rms over {'each head (q_norm, k_norm of ' + str(cfg.head_dim) + ' weights, shared by the heads)' if not norm.whole else 'the whole projection (q_norm, k_norm of H·d_k and G·d_k weights)'}, "
        f"times {'(1 + w)' if norm.offset else 'w'}, ε = {norm.eps:g}, before RoPE"
    )  # fmt: skip
    biases = (
        "q, k, v and o projections have biases"
        if cfg.output_bias
        else "q, k and v projections have biases"
        if cfg.qkv_bias
        else None
    )
    after = next((variant for variant in attention.variants if isinstance(variant, QkNormAfterRope)), None)
    after_rope = None if after is None else (
        "QK-norm after RoPE: each head's rotated q and k divided by their rms, "
        + (f"times a weight of {cfg.head_dim} shared by the heads" if after.weighted else "no weight")
        + f", ε = {after.eps:g}"
    )  # fmt: skip
    lines = tuple(
        note
        for note in (
            first or f"X = input_layernorm (RMSNorm) of the residual entering layer {layer}: token embeddings{through(layer)}",
            qk_norm,
            rope_note(attention.rope, scaling, cfg.head_dim),
            after_rope,
            sharing,
            biases,
            f"scores divided by √d_k = √{cfg.head_dim} = {attention.divisor:g}",
            "causal mask: each token sees itself and the tokens before it",
            window_note(attention.window),
            storage_note(dtype),
        )
        if note is not None
    )
    return lines


def rope_note(rope: Rope | None, scaling: str, head_dim: int | None = None) -> str:
    """The header's RoPE line: how q and k are turned (which pairs; how much of each head of `head_dim`), or that this layer has no
    RoPE (NoPE)."""
    if rope is None:
        return "no RoPE on this layer (NoPE): q and k meet as projected; the causal mask alone knows the order"
    pairs = "interleaved pairs 2i, 2i + 1" if rope.style == "interleaved" else "rotate-half"
    line = f"RoPE ({pairs}) on q and k at positions 0, 1, 2, …: θ = {rope.theta:g}{scaling}"
    r = rope.width(head_dim) if head_dim is not None else None
    if r is not None and head_dim is not None and r < head_dim:
        line += f"; the first {r} of each head's {head_dim} coordinates turned (partial rotary), the other {head_dim - r} carry no position"
    return line


# -- a declared Llama-like family (config.LlamaLike) -------------------------------------------------------------------


def declared(cfg: ModelConfig[Any]) -> LlamaSettings:
    """The family's settings; Llama's own (RoPE everywhere, no QK-norm, pre-norms) for a config built by `llama_like` alone."""
    if isinstance(cfg.family, LlamaSettings):
        return cfg.family
    return LlamaSettings(LlamaLike(cfg.model_type, cfg.model_type, {}), (True,) * cfg.layers, None)


def declared_rope(cfg: ModelConfig[Any], index: int, rope: Rope) -> Rope | None:
    """Layer `index`'s RoPE as its family declares it: none (NoPE), the sliding layers' own, or `rope`; turned as declared."""
    s = declared(cfg)
    if not s.rope_layers[index]:
        return None
    turned = rope if s.sliding_rope is None or cfg.windows[index] is None else rope_spec(s.sliding_rope, cfg.head_dim)
    return turned if s.declared.rope_style == turned.style else dataclasses.replace(turned, style=s.declared.rope_style)


def declared_attention(cfg: ModelConfig[Any], w: Weights, index: int, rope: Rope) -> AttentionWeights:
    """Layer `index`'s projections, with the RoPE, QK-norm and divisor its family declares."""
    s = declared(cfg)
    attention = _attention(cfg, w, index, declared_rope(cfg, index, rope))
    if s.declared.qk_norm is not None:
        attention = with_qk_norm(cfg, w, index, attention, s.declared.qk_norm)
    if s.divisor is not None:
        attention = dataclasses.replace(attention, divisor=s.divisor)
    return attention


def with_qk_norm(cfg: ModelConfig[Any], w: Weights, index: int, attention: AttentionWeights, norm: QkNormKind) -> AttentionWeights:
    """`attention` with layer `index`'s q_norm and k_norm, of the kind `norm` says (over each head, or the whole projection)."""
    p = f"layers.{index}.self_attn."
    H, G, d_k = cfg.heads, cfg.kv_heads, cfg.head_dim
    q_size, k_size = (d_k, d_k) if norm.over == "head" else (H * d_k, G * d_k)
    weights = QkNorm(w.get(p + "q_norm.weight", (q_size,)), w.get(p + "k_norm.weight", (k_size,)), eps=cfg.norm_eps, over=norm.over,
                     offset=norm.offset)  # fmt: skip
    return dataclasses.replace(attention, qk_norm=weights)


def declared_norm(cfg: ModelConfig[Any], w: Weights, name: str, x: np.ndarray) -> np.ndarray:
    """(L, d) x through the norm `name`, of the kind its family declares: RMSNorm, or Cohere's LayerNorm without bias."""
    if layer_norms(declared(cfg).declared).kind == "RMSNorm":
        return _norm(cfg, w, name, x)
    return layer_norm(x, w.get(name + ".weight", (cfg.hidden_size,)), np.zeros(cfg.hidden_size), cfg.norm_eps)


def with_temperature(cfg: ModelConfig[Any], index: int, attention: AttentionWeights, length: int) -> AttentionWeights:
    """`attention` with layer `index`'s query temperature when its family declares one that is not 1 at every one of
    `length` positions (below n₀ it is exactly 1: the layer is then shown, and computed, without it)."""
    s = declared(cfg)
    t = s.temperatures[index] if s.temperatures else None
    if t is None or not t.beta or length - 1 + t.shift < t.original:
        return attention
    return dataclasses.replace(attention, variants=(*attention.variants, QueryTemperature(t.beta, t.original, t.shift)))


def _declared_layer(cfg: ModelConfig[Any], w: Weights, index: int, h: np.ndarray, rope: Rope) -> np.ndarray:
    """(L, d) the residual after layer `index`: each block between the norms its family declares (before, after, both), its
    output × the residual multiplier; or, parallel, attention and MLP of one norm both added."""
    s, p = declared(cfg), f"layers.{index}."
    n, mlp = layer_norms(s.declared), s.declared.mlp or _mlp
    x = h if n.before_attention is None else declared_norm(cfg, w, p + n.before_attention, h)  # (L, d)
    attended = self_attention(x, with_temperature(cfg, index, declared_attention(cfg, w, index, rope), h.shape[0]))  # (L, d)
    if n.parallel:
        both: np.ndarray = h + attended + mlp(cfg, w, index, x)  # (L, d)
        return both
    if n.after_attention is not None:
        attended = declared_norm(cfg, w, p + n.after_attention, attended)
    h = h + (attended if s.residual == 1 else attended * s.residual)  # (L, d)
    x = h if n.before_mlp is None else declared_norm(cfg, w, p + n.before_mlp, h)  # (L, d)
    mixed = mlp(cfg, w, index, x)  # (L, d)
    if n.after_mlp is not None:
        mixed = declared_norm(cfg, w, p + n.after_mlp, mixed)
    out: np.ndarray = h + (mixed if s.residual == 1 else mixed * s.residual)  # (L, d)
    return out


def declared_layer_inputs(cfg: ModelConfig[Any], checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X, the input of layer `layer`'s (from 1) attention as its family declares it, that layer's attention, and the header's notes."""
    w, rope = weights_and_rope(cfg, checkpoint)
    s = declared(cfg)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    if s.embedding != 1:
        h = h * s.embedding  # (L, d)
    for index in range(layer - 1):
        h = _declared_layer(cfg, w, index, h, rope)
    index = layer - 1
    attention = with_temperature(cfg, index, declared_attention(cfg, w, index, rope), len(ids))
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    norm = layer_norms(s.declared).before_attention
    X = h if norm is None else declared_norm(cfg, w, f"layers.{index}.{norm}", h)  # (L, d)
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=declared_notes(cfg, layer, rope, attention, dtype))


def declared_notes(cfg: ModelConfig[Any], layer: int, rope: Rope, attention: AttentionWeights, dtype: str) -> tuple[str, ...]:
    """The header's lines for a declared family's layer: Llama's, with what X is, which RoPE and which divisor as it declares."""
    s = declared(cfg)
    n, name = layer_norms(s.declared), s.declared.name
    embeddings = "token embeddings" + (f" × {s.declared.embedding_multiplier} {s.embedding:g}" if s.declared.embedding_multiplier else "")
    later = "" if layer == 1 else (
        ", each layer adding its attention and its MLP, both of the same normed input" if n.parallel
        else f", each block's output {'RMS-' if n.kind == 'RMSNorm' else ''}normed again before it joins the residual" if n.before_attention and n.after_attention
        else f", each block's output × {s.declared.residual_multiplier} {s.residual:g}" if s.declared.residual_multiplier else ""
    )  # fmt: skip
    first = (f"X = the residual stream entering layer {layer}, not normalised ({name} norms after attention and MLP): {embeddings}{through(layer)}"
             if n.before_attention is None else
             f"X = {n.before_attention} ({n.kind}) of the residual entering layer {layer}: {embeddings}{through(layer)}{later}")  # fmt: skip
    kind = "sliding" if cfg.windows[layer - 1] is not None else "full"
    lines = []
    for note in notes(cfg, layer, rope, attention, dtype, first=first):
        if note.startswith("RoPE (") and s.sliding_rope is not None:
            note += f" (the {kind} layers' RoPE)"
        elif note.startswith("RoPE (") and not all(s.rope_layers) and kind == "sliding":  # Cohere2, EXAONE 4: only the sliding ones turn
            note += " (a sliding layer)"
        elif note.startswith("scores divided") and s.divisor is not None:
            note = (f"scores × {s.declared.score_multiplier} = {1 / s.divisor:g} (divided by {s.divisor:g}, not by √d_k = √{cfg.head_dim})"
                    if s.declared.score_multiplier else f"scores divided by {s.divisor:g} (not by √d_k = √{cfg.head_dim})")  # fmt: skip
        lines.append(note)
    t = s.temperatures[layer - 1] if s.temperatures else None
    if t is not None and t.beta:  # before the storage line, as the window's
        lines.insert(len(lines) - 1, temperature_note(t, attention))
    return tuple(lines)


def temperature_note(t: Temperature, attention: AttentionWeights) -> str:
    """The header's line on a layer's query temperature: its rule, and what it comes to for this sentence."""
    shifted = f"p + {t.shift}" if t.shift else "p"
    rule = f"1 + {t.beta:g}·ln(1 + ⌊{shifted} / {t.original}⌋) ({t.source})"
    if not any(isinstance(v, QueryTemperature) for v in attention.variants):
        return f"query temperature {rule} = 1 at every position here (p < {t.original - t.shift})"
    return (f"query temperature: after RoPE the query at position p (from 0) × {rule}: 1 below position {t.original - t.shift}, "
            f"more at each further multiple of {t.original}; each row of scores × its query's τ")  # fmt: skip


def fused_mlp(cfg: ModelConfig[Any], w: Weights, index: int, x: np.ndarray) -> np.ndarray:
    """(L, d) down(up·act(gate)) of layer `index`, gate and up the two halves of one fused gate_up_proj (GLM-4; Phi-3's layout)."""
    d, inner, p = cfg.hidden_size, cfg.intermediate_size, f"layers.{index}.mlp."
    gate_up = w.product(p + "gate_up_proj.weight", x, (2 * inner, d))  # (L, 2·inner)
    hidden = gate_up[:, inner:] * activate(cfg.activation, gate_up[:, :inner])  # (L, inner) up·act(gate)
    out: np.ndarray = w.product(p + "down_proj.weight", hidden, (d, inner))  # (L, d)
    return out


# transformers' defaults per model type (configuration_llama.py, _qwen2.py, _mistral.py)
DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {"layers": 32, "hidden": 4096, "heads": 32, "kv": None, "positions": 2048, "inter": 11008},
    "qwen2": {"layers": 32, "hidden": 4096, "heads": 32, "kv": 32, "positions": 32768, "inter": 22016},
    "mistral": {"layers": 32, "hidden": 4096, "heads": 32, "kv": 8, "positions": 131072, "inter": 14336},
}


# Llama (attention_bias and mlp_bias read), Qwen2 (q, k and v always biased; windows by use_sliding_window) and Mistral
# (one window on every layer, 4096 when left out)
LLAMA_LIKE = {
    "llama": LlamaLike("llama", "Llama", DEFAULTS["llama"], windows=no_windows, attention_bias=True, mlp_bias=True),
    "qwen2": LlamaLike("qwen2", "Qwen2", DEFAULTS["qwen2"], windows=sliding_layers, qkv_bias=True),
    "mistral": LlamaLike("mistral", "Mistral", DEFAULTS["mistral"], windows=every_layer(4096)),
}


def read_config(read: _Reader) -> ModelConfig[LlamaSettings]:
    """Llama's, Qwen2's or Mistral's config, as their declarations say."""
    return declared_config(LLAMA_LIKE[str(read.raw["model_type"])], read)



# -- GGUF and model verify ---------------------------------------------------------------------

# llama.cpp's names of Llama's tensors, which every family built on it shares (each drops or adds a few)
GGUF_NAMES = (
    (r"embed_tokens\.weight", "token_embd.weight"),
    (r"norm\.weight", "output_norm.weight"),
    (r"lm_head\.weight", "output.weight"),  # absent when the unembedding is tied to the embeddings
    (r"layers\.(\d+)\.input_layernorm\.weight", r"blk.\1.attn_norm.weight"),
    (r"layers\.(\d+)\.post_attention_layernorm\.weight", r"blk.\1.ffn_norm.weight"),
    (r"layers\.(\d+)\.self_attn\.q_proj\.(weight|bias)", r"blk.\1.attn_q.\2"),
    (r"layers\.(\d+)\.self_attn\.k_proj\.(weight|bias)", r"blk.\1.attn_k.\2"),
    (r"layers\.(\d+)\.self_attn\.v_proj\.(weight|bias)", r"blk.\1.attn_v.\2"),
    (r"layers\.(\d+)\.self_attn\.o_proj\.(weight|bias)", r"blk.\1.attn_output.\2"),
    (r"layers\.(\d+)\.mlp\.gate_proj\.(weight|bias)", r"blk.\1.ffn_gate.\2"),
    (r"layers\.(\d+)\.mlp\.up_proj\.(weight|bias)", r"blk.\1.ffn_up.\2"),
    (r"layers\.(\d+)\.mlp\.down_proj\.(weight|bias)", r"blk.\1.ffn_down.\2"),
)
GGUF_QK_NORMS = (
    (r"layers\.(\d+)\.self_attn\.q_norm\.weight", r"blk.\1.attn_q_norm.weight"),
    (r"layers\.(\d+)\.self_attn\.k_norm\.weight", r"blk.\1.attn_k_norm.weight"),
)


def _gguf_config(model_type: str, eps: float) -> ConfigReader:
    def read(file: Metadata, a: str, common: dict[str, Any]) -> ModelConfig:
        """Llama's or Qwen2's config from the metadata under `a`: d_v = d_k, RoPE on the whole head, biases as the tensors show."""
        layers, hidden, heads = common["layers"], common["hidden_size"], common["heads"]
        kv_heads = file.count(a + "attention.head_count_kv", default=heads)
        if heads % kv_heads:
            raise file.fail(f"{kv_heads} key/value heads do not divide {heads} heads", key=a + "attention.head_count_kv")
        if not file.has_key(a + "attention.key_length") and hidden % heads:
            raise file.fail(f"{heads} heads do not divide the hidden size {hidden}", key=a + "attention.head_count")
        head_dim = file.count(a + "attention.key_length", default=hidden // heads)
        value_dim = file.count(a + "attention.value_length", default=head_dim)
        if value_dim != head_dim:
            raise file.fail(f"values of {value_dim} numbers beside keys of {head_dim}", key=a + "attention.value_length", expected="d_v = d_k")
        rotary = file.count(a + "rope.dimension_count", default=head_dim)
        if rotary != head_dim:
            raise file.fail(f"RoPE turns {rotary} of the {head_dim} numbers of each head", key=a + "rope.dimension_count", expected="RoPE on the whole head")
        if head_dim % 2:
            raise file.fail(f"the head size {head_dim} is odd", key=a + "attention.key_length", expected="an even head size (RoPE turns pairs)")
        return ModelConfig(
            model_type=model_type, kv_heads=kv_heads, head_dim=head_dim,
            norm_eps=file.number(a + "attention.layer_norm_rms_epsilon", default=eps),
            activation="silu", rope=gguf_rope(file, a), windows=(None,) * layers, causal=True,
            qkv_bias="blk.0.attn_q.bias" in file.tensors, output_bias="blk.0.attn_output.bias" in file.tensors,
            mlp_bias="blk.0.ffn_up.bias" in file.tensors, **common,
        )  # fmt: skip

    return read


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """The config.json keys a Llama-like family (Qwen3, OLMo 2, Phi-3) spells from the metadata beside the shared ones."""
    return {
        "num_key_value_heads": file.count(a + "attention.head_count_kv", default=raw["num_attention_heads"]),
        "head_dim": head_dim,
        "rms_norm_eps": file.number(a + "attention.layer_norm_rms_epsilon", default=1e-6),
        "attention_bias": "blk.0.attn_q.bias" in file.tensors,
    }


# For the llama architecture (Llama, Mistral) the converter permutes the rows of W_Q and W_K within each head, from
# Hugging Face's rotate-half pairing (i, i + d_k/2) to llama.cpp's interleaved pairs (2i, 2i + 1); they are put back, so
# the numbers equal the Hugging Face model's. qwen2 files keep the rotate-half order: llama.cpp turns them as NeoX does.
GGUF = (
    GgufArchitecture("llama", "llama", GGUF_NAMES, config=_gguf_config("llama", 1e-5), interleaved_qk=True),
    GgufArchitecture("qwen2", "qwen2", GGUF_NAMES, config=_gguf_config("qwen2", 1e-6)),
)
VERIFY = Verification(O_PROJ, (FLOAT32_RMSNORM, FLOAT32_ROPE, FLOAT32_SOFTMAX))


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json (layer 1's, from the headers); every family that declares none uses these."""
    d, H, G, d_k, inner = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.intermediate_size
    return {
        "embed_tokens.weight": (None, d),
        "layers.0.self_attn.q_proj.weight": (H * d_k, d),
        "layers.0.self_attn.k_proj.weight": (G * d_k, d),
        "layers.0.mlp.gate_proj.weight": (inner, d),
    }
