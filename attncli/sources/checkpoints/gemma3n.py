"""Gemma 3n (text): AltUp's streams, Laurel, per-layer embeddings, KV sharing, activation sparsity, q/k/v norms, scale 1.

As transformers' Gemma3nTextModel computes it (modeling_gemma3n.py). A = altup_num_inputs streams of d numbers per token:
    stream 0 = embeddings × √d; stream i = altup_projections[i−1](stream 0), rescaled to stream 0's root mean square
    per-layer inputs (L, layers, p) = (rms_norm(per_layer_model_projection(stream 0) × d^−½) + embed_tokens_per_layer(ids) × √p) × 2^−½
and each layer:
    predict: stream j += Σ_i c_ji·stream i, c = prediction_coefs(tanh(modality_router(router_norm(stream 0) / d)))
    x = input_layernorm(prediction 0); laurel = x + post_laurel_norm(linear_right(linear_left(x)))
    a = (prediction 0 + post_attention_layernorm(attention(x)) + laurel) / √2
    out = a + post_feedforward_layernorm(down(gelu_tanh(sparse(gate(y)))·up(y))), y = pre_feedforward_layernorm(a)
    correct: stream j = prediction j + (1 + c'_j)·(out − prediction 0), c' = correction_coefs(tanh(router(out)))
    streams 1 … A−1 += post_per_layer_input_norm(per_layer_projection(gelu_tanh(per_layer_input_gate(stream 0 × correct_output_scale))
                       ⊙ per-layer input of the layer))
Attention: q_norm and k_norm (RMSNorm × w, over each head) before RoPE, v_norm (RMSNorm with no weight), scores × 1 (no
1/√d_k); RoPE θ per layer type (10 000 sliding, 1 000 000 full); the window on sliding layers. The last
num_kv_shared_layers layers compute no keys or values: each reuses those of the last earlier layer of its own type.
`sparse` (activation_sparsity_pattern > 0, the first layers): relu(g − (mean(g) + std(g)·Φ⁻¹(sparsity))) over each
token's gate, a Gaussian top-k. Every RMSNorm here multiplies by w, not Gemma 3's (1 + w). After the layers: the
streams are rescaled and averaged, then normed (the model's output; no attention reads it).
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from statistics import NormalDist
from typing import Any, NamedTuple

import numpy as np

from attncli.core.variants import QkNorm, Rope, ValueNorm
from attncli.sources.checkpoints.blocks import (
    AttentionWeights,
    LayerInputs,
    Weights,
    activate,
    compact,
    rms_norm,
    self_attention,
    storage_note,
)
from attncli.sources.checkpoints.config import (
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    MOST,
    O_PROJ,
    Description,
    ModelConfig,
    RopeConfig,
    Tensors,
    Verification,
    _Reader,
    _shown,
    _window,
    llama_like,
    with_family,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Joined, Metadata, layer_types, outermost
from attncli.sources.checkpoints.rope import rope_spec
from attncli.sources.checkpoints.source import TensorSource

LAYER_KINDS = ("sliding_attention", "full_attention")
MAGNITUDE_FLOOR = 1e-5  # transformers clamps a stream's mean square to at least this before dividing by its root


class Gemma3nSettings(NamedTuple):
    """What Gemma 3n reads beyond the Llama-like keys."""

    kinds: tuple[str, ...]  # per layer, "sliding_attention" or "full_attention"
    local_theta: float  # RoPE θ of the sliding layers (the full layers' is cfg.rope)
    inner: tuple[int, ...]  # per layer, the MLP's width (intermediate_size may be a list)
    sparsity: tuple[float | None, ...]  # per layer, activation_sparsity_pattern (0: a dense MLP); None: only Φ⁻¹ known (a GGUF file)
    multipliers: tuple[float | None, ...]  # per layer, Φ⁻¹(sparsity), the top-k's cutoff in standard deviations; None: a dense MLP
    streams: int  # altup_num_inputs, A
    active: int  # altup_active_idx: the stream the layer computes on
    correct_scale: bool  # altup_correct_scale: the active stream × correct_output_scale before the per-layer gate
    laurel_rank: int
    per_layer: int  # hidden_size_per_layer_input, p
    per_layer_vocab: int  # vocab_size_per_layer_input: ids at or past it read row 0 of embed_tokens_per_layer
    sources: tuple[int, ...]  # per layer, the layer (from 0) whose keys and values it uses: itself, or the one it shares
    final_cap: float | None  # final_logit_softcapping (the output logits; not attention's)
    multimodal: bool  # read from a multimodal gemma3n folder's text_config


DEFAULTS: dict[str, Any] = {
    "layers": 35, "hidden": 2048, "heads": 8, "kv": 2, "positions": 32768, "inter": 16384, "head_dim": 256, "act": "gelu_pytorch_tanh",
}  # transformers' Gemma3nTextConfig  # fmt: skip


def settings(cfg: ModelConfig[Gemma3nSettings]) -> Gemma3nSettings:
    """What read_config read beyond the Llama-like keys (typed: ModelConfig[Gemma3nSettings])."""
    return cfg.family


def read_config(read: _Reader) -> ModelConfig[Gemma3nSettings]:
    """Gemma 3n's text config: config.json's own (gemma3n_text), or a multimodal folder's text_config (gemma3n)."""
    multimodal = read.raw.get("model_type") == "gemma3n"
    if multimodal:
        text = read.raw.get("text_config")
        if not isinstance(text, dict):
            raise read.fail("text_config", f"found {_shown(text)}", "the text model's config (a mapping), as every gemma3n config.json has it")
        read = _Reader(text, read.where)
    layers = read.count("num_hidden_layers", default=DEFAULTS["layers"], most=MOST["layers"])
    inner = _per_layer_sizes(read, layers)
    raw = {**read.raw, "intermediate_size": max(inner)}  # Llama's reader takes one width; the layers' own are the family's
    cfg = llama_like(_Reader(raw, read.where), "gemma3n_text", DEFAULTS, attention_bias=True, rope_per_type="full_attention")
    kinds = _kinds(read, layers)
    size = _window(read, "sliding_window", read.raw.get("sliding_window", 512))
    activation = cfg.activation
    if activation not in ("gelu_pytorch_tanh", "gelu_new", "gelu", "gelu_python_tanh"):
        raise read.fail("hidden_activation", f"the activation {activation!r} is not Gemma 3n's", "gelu_pytorch_tanh")
    streams = read.count("altup_num_inputs", default=4, most=64)
    active = read.count("altup_active_idx", default=0, minimum=0, most=streams - 1)
    if active != 0:  # transformers adds the per-layer input to streams 1 … A−1, which leaves out the active one only when it is 0
        raise read.fail("altup_active_idx", f"found {active}", "0, as every Gemma 3n checkpoint has it")
    shared = read.count("num_kv_shared_layers", default=15, minimum=0, most=layers)
    parameters = read.raw.get("rope_parameters")
    local = parameters.get("sliding_attention") if isinstance(parameters, dict) else None
    theta = local.get("rope_theta") if isinstance(local, dict) else read.raw.get("rope_local_base_freq", 10_000.0)
    if isinstance(theta, bool) or not isinstance(theta, int | float) or not 1 < theta <= 1e30:
        raise read.fail("rope_parameters.sliding_attention.rope_theta", f"found {_shown(theta)}", "a RoPE base above 1")
    if isinstance(local, dict) and local.get("rope_type", "default") != "default":
        raise read.fail("rope_parameters.sliding_attention.rope_type", f"found {_shown(local.get('rope_type'))}", "default")
    cap = read.raw.get("final_logit_softcapping", 30.0)
    scales = read.raw.get("activation_sparsity_scale")  # a GGUF file's Φ⁻¹(sparsity) per layer, as llama.cpp's converter stores them
    if scales is None:
        sparsity: tuple[float | None, ...] = _sparsity(read, layers)
        multipliers = tuple(NormalDist().inv_cdf(s) if s else None for s in sparsity)
    else:
        sparsity, multipliers = (None,) * layers, _multipliers(read, layers, scales)
    family = Gemma3nSettings(
        kinds=kinds, local_theta=float(theta), inner=inner, sparsity=sparsity, multipliers=multipliers, streams=streams, active=active,
        correct_scale=read.flag("altup_correct_scale", True), laurel_rank=read.count("laurel_rank", default=64, most=MOST["inner"]),
        per_layer=read.count("hidden_size_per_layer_input", default=256, most=MOST["hidden"]),
        per_layer_vocab=read.count("vocab_size_per_layer_input", default=262_144, most=MOST["vocabulary"]),
        sources=_sources(read, kinds, shared), final_cap=None if cap is None else read.number("final_logit_softcapping", 30.0),
        multimodal=multimodal,
    )  # fmt: skip
    cfg = dataclasses.replace(cfg, windows=tuple(size if kind == "sliding_attention" else None for kind in kinds))
    return with_family(cfg, family)


def _per_layer_sizes(read: _Reader, layers: int) -> tuple[int, ...]:
    """intermediate_size: one width for every layer, or a list of one per layer."""
    value = read.raw.get("intermediate_size", DEFAULTS["inter"])
    values = value if isinstance(value, list) else [value] * layers
    if len(values) != layers or any(isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MOST["inner"] for v in values):
        raise read.fail("intermediate_size", f"found {_shown(value)}", f"a whole number, or a list of {layers} (one per layer)")
    return tuple(values)


def _kinds(read: _Reader, layers: int) -> tuple[str, ...]:
    """layer_types, or transformers' default: every fifth layer full, the others sliding."""
    kinds = read.raw.get("layer_types")
    if kinds is None:
        return tuple("full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(layers))
    if not isinstance(kinds, list) or len(kinds) != layers or any(kind not in LAYER_KINDS for kind in kinds):
        raise read.fail("layer_types", f"found {_shown(kinds)}", f"a list of {layers} of sliding_attention / full_attention")
    return tuple(kinds)


def _sparsity(read: _Reader, layers: int) -> tuple[float, ...]:
    """activation_sparsity_pattern, one fraction per layer; transformers' default: 0.95 on the first 10 layers of a model of more."""
    value = read.raw.get("activation_sparsity_pattern")
    if value is None:
        sparse = 10 if layers > 10 else 0
        return (0.95,) * sparse + (0.0,) * (layers - sparse)
    values = value if isinstance(value, list) else [value] * layers
    if len(values) != layers or any(isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < 1 for v in values):
        raise read.fail("activation_sparsity_pattern", f"found {_shown(value)}", f"a list of {layers} fractions from 0 up to (not including) 1")
    return tuple(float(v) for v in values)


def _multipliers(read: _Reader, layers: int, scales: object) -> tuple[float | None, ...]:
    """A GGUF file's activation_sparsity_scale: Φ⁻¹(sparsity) per layer, −∞ (Φ⁻¹(0)) on a dense layer."""
    if not isinstance(scales, list) or len(scales) != layers or any(
        isinstance(s, bool) or not isinstance(s, int | float) or math.isnan(s) or s == math.inf for s in scales
    ):
        raise read.fail("activation_sparsity_scale", f"found {_shown(scales)}", f"a list of {layers} numbers (−inf on a dense layer)")
    return tuple(None if s == -math.inf else float(s) for s in scales)


def _sources(read: _Reader, kinds: tuple[str, ...], shared: int) -> tuple[int, ...]:
    """Per layer, the layer whose keys and values it uses: its own, or (the last `shared` layers) the last earlier layer of its kind."""
    first = len(kinds) - shared
    sources = list(range(len(kinds)))
    for index in range(first, len(kinds)):
        earlier = [i for i in range(first) if kinds[i] == kinds[index]]
        if not earlier:
            raise read.fail("num_kv_shared_layers", f"layer {index + 1} ({kinds[index]}) shares keys and values, but no earlier layer of its kind "
                            "makes them", "fewer shared layers, so that each kind has a layer before them")  # fmt: skip
        sources[index] = earlier[-1]
    return tuple(sources)


# -- the forward pass ------------------------------------------------------------------------------------


class Pass:
    """One sentence through Gemma 3n's layers: the weights, the RoPE of each kind, the per-layer inputs."""

    def __init__(self, cfg: ModelConfig[Gemma3nSettings], checkpoint: TensorSource, ids: tuple[int, ...]) -> None:
        assert cfg.rope is not None
        self.cfg, self.s = cfg, settings(cfg)
        self.w = Weights(checkpoint, probe=TENSORS.probe, prefixes=TENSORS.prefixes)
        self.global_rope = rope_spec(cfg.rope, cfg.head_dim)
        self.local_rope = rope_spec(RopeConfig(theta=self.s.local_theta, kind="default"), cfg.head_dim)
        self.ids = ids
        self.kv_inputs: dict[int, np.ndarray] = {}  # layer (from 0) -> (L, d) the input its keys and values project, for the layers sharing them

    def rope(self, index: int) -> Rope:
        return self.local_rope if self.s.kinds[index] == "sliding_attention" else self.global_rope

    def norm(self, name: str, x: np.ndarray) -> np.ndarray:
        """Gemma 3n's RMSNorm: x / √(mean(x²) + ε) · w (not (1 + w))."""
        return rms_norm(x, self.w.get(name + ".weight", (x.shape[-1],)), self.cfg.norm_eps)

    def linear(self, name: str, x: np.ndarray, n_out: int) -> np.ndarray:
        """(L, n_out) x·Wᵀ of an nn.Linear without bias, W widened to float64 a block of rows at a time (Weights.product)."""
        return self.w.product(name + ".weight", x, (n_out, x.shape[-1]))

    def streams(self) -> tuple[np.ndarray, np.ndarray]:
        """(A, L, d) AltUp's streams before layer 1, and (L, layers, p) every layer's per-layer input."""
        cfg, s, w = self.cfg, self.s, self.w
        d, p = cfg.hidden_size, s.per_layer
        h0 = w.rows("embed_tokens.weight", self.ids, d) * math.sqrt(d)  # (L, d)
        rows = tuple(i if 0 <= i < s.per_layer_vocab else 0 for i in self.ids)  # ids past the per-layer table read its row 0
        table = w.rows("embed_tokens_per_layer.weight", rows, cfg.layers * p) * math.sqrt(p)  # (L, layers·p)
        projected = self.linear("per_layer_model_projection", h0, cfg.layers * p) * d**-0.5  # (L, layers·p)
        projected = self.norm("per_layer_projection_norm", projected.reshape(len(self.ids), cfg.layers, p))  # (L, layers, p)
        per_layer = (projected + table.reshape(len(self.ids), cfg.layers, p)) * 2**-0.5  # (L, layers, p)
        streams = [h0]
        for i in range(1, s.streams):
            streams.append(_rescaled(self.linear(f"altup_projections.{i - 1}", h0, d), h0))  # (L, d)
        return np.stack(streams), per_layer  # (A, L, d), (L, layers, p)

    def router(self, index: int, x: np.ndarray) -> np.ndarray:
        """(L, A) tanh(modality_router(router_norm(x) / d)): the coefficients' input."""
        p = f"layers.{index}.altup."
        routed: np.ndarray = np.tanh(self.linear(p + "modality_router", self.norm(p + "router_norm", x) / self.cfg.hidden_size, self.s.streams))
        return routed

    def attention(self, index: int) -> AttentionWeights:
        """Layer `index`'s attention: its q, and the keys and values of the layer it takes them from (itself, or the one it shares)."""
        cfg, w = self.cfg, self.w
        d, H, G, d_k = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim
        p, source = f"layers.{index}.self_attn.", f"layers.{self.s.sources[index]}.self_attn."
        W_Q, b_Q = w.linear(p + "q_proj", d, H * d_k, cfg.qkv_bias)
        W_K, b_K = w.linear(source + "k_proj", d, G * d_k, cfg.qkv_bias)
        W_V, b_V = w.linear(source + "v_proj", d, G * d_k, cfg.qkv_bias)
        W_O, b_O = w.linear(p + "o_proj", H * d_k, d, cfg.output_bias)
        norm = QkNorm(w.get(p + "q_norm.weight", (d_k,)), w.get(source + "k_norm.weight", (d_k,)), eps=cfg.norm_eps, over="head")
        window = cfg.windows[index]
        return AttentionWeights(
            W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=b_Q, b_K=b_K, b_V=b_V, W_O=W_O, b_O=b_O, heads=H, kv_heads=G, head_dim=d_k,
            divisor=1.0, causal=True, window=None if window is None else window - 1, rope=self.rope(index), qk_norm=norm,
            variants=(ValueNorm(cfg.norm_eps),),
        )  # fmt: skip

    def layer_input(self, index: int, streams: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """AltUp's prediction of layer `index` from the streams (A, L, d): the predictions, the active one, and X = its norm."""
        s = self.s
        coefs = self.linear(f"layers.{index}.altup.prediction_coefs", self.router(index, streams[s.active]), s.streams**2)  # (L, A·A)
        mixing = coefs.reshape(-1, s.streams, s.streams)  # (L, A, A): mixing[l, j, i] weighs stream i in prediction j
        predictions = streams + np.einsum("lji,ild->jld", mixing, streams)  # (A, L, d)
        X = self.norm(f"layers.{index}.input_layernorm", predictions[s.active])  # (L, d)
        self.kv_inputs[index] = X
        return predictions, predictions[s.active], X

    def layer(self, index: int, streams: np.ndarray, per_layer: np.ndarray) -> np.ndarray:
        """(A, L, d) the streams after layer `index`."""
        s, d = self.s, self.cfg.hidden_size
        p = f"layers.{index}."
        predictions, active, X = self.layer_input(index, streams)
        laurel = X + self.norm(p + "laurel.post_laurel_norm", self.linear(p + "laurel.linear_right", self.linear(p + "laurel.linear_left", X, s.laurel_rank), d))
        source = s.sources[index]
        attended = self_attention(X, self.attention(index), None if source == index else self.kv_inputs[source])  # (L, d)
        mixed = (active + self.norm(p + "post_attention_layernorm", attended) + laurel) / math.sqrt(2)  # (L, d)
        out = mixed + self.norm(p + "post_feedforward_layernorm", self.mlp(index, self.norm(p + "pre_feedforward_layernorm", mixed)))  # (L, d)
        coefs = self.linear(p + "altup.correction_coefs", self.router(index, out), s.streams) + 1.0  # (L, A)
        corrected: np.ndarray = predictions + coefs.T[:, :, None] * (out - active)  # (A, L, d) stream j + (1 + c'_j)·innovation
        first = corrected[s.active]
        if s.correct_scale:
            first = first * self.w.get(p + "altup.correct_output_scale", (d,))
        gate = activate(self.cfg.activation, self.linear(p + "per_layer_input_gate", first, s.per_layer)) * per_layer[:, index, :]  # (L, p)
        corrected[1:] += self.norm(p + "post_per_layer_input_norm", self.linear(p + "per_layer_projection", gate, d))
        return corrected

    def mlp(self, index: int, x: np.ndarray) -> np.ndarray:
        """(L, d) down(gelu_tanh(gate)·up), the gate made sparse on a layer with activation sparsity."""
        p, inner, d = f"layers.{index}.mlp.", self.s.inner[index], self.cfg.hidden_size
        gate = self.linear(p + "gate_proj", x, inner)  # (L, inner)
        multiplier = self.s.multipliers[index]
        if multiplier is not None:
            gate = gaussian_top_k(gate, multiplier)
        return self.linear(p + "down_proj", activate(self.cfg.activation, gate) * self.linear(p + "up_proj", x, inner), d)


def _rescaled(x: np.ndarray, like: np.ndarray) -> np.ndarray:
    """(L, d) x times rms(like) / rms(x) per row, x's mean square floored at 1e-5 (transformers' clamp)."""
    target = np.sqrt((like * like).mean(axis=-1, keepdims=True))  # (L, 1)
    own = np.sqrt(np.maximum((x * x).mean(axis=-1, keepdims=True), MAGNITUDE_FLOOR))  # (L, 1)
    out: np.ndarray = x * target / own
    return out


def gaussian_top_k(gate: np.ndarray, multiplier: float) -> np.ndarray:
    """(L, n) relu(g − (mean + std·multiplier)) per row (std over n, as transformers'): with multiplier Φ⁻¹(s), it keeps what lies
    above the `s` quantile of a normal fitted to the row."""
    cutoff = gate.mean(axis=-1, keepdims=True) + gate.std(axis=-1, keepdims=True) * multiplier  # (L, 1)
    out: np.ndarray = np.maximum(gate - cutoff, 0.0)
    return out


def layer_inputs(cfg: ModelConfig[Gemma3nSettings], checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm of AltUp's active prediction entering `layer` (from 1), and that layer's attention: its keys and
    values from the layer it shares them with, when it is one of the last num_kv_shared_layers."""
    run = Pass(cfg, checkpoint, ids)
    streams, per_layer = run.streams()
    index = layer - 1
    for earlier in range(index):
        streams = run.layer(earlier, streams, per_layer)
    _, _, X = run.layer_input(index, streams)
    source = settings(cfg).sources[index]
    attention = run.attention(index)
    dtype = run.w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    X_kv = None if source == index else run.kv_inputs[source]
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=notes(cfg, layer, attention, dtype), X_kv=X_kv,
                       kv_from=None if X_kv is None else source + 1)  # fmt: skip


def notes(cfg: ModelConfig[Gemma3nSettings], layer: int, attention: AttentionWeights, dtype: str) -> tuple[str, ...]:
    """The header's lines for layer `layer` (from 1) of Gemma 3n."""
    s, index = settings(cfg), layer - 1
    source = s.sources[index]
    kind = "a sliding (local) layer" if cfg.windows[index] is not None else "a global layer"
    rope = attention.rope
    assert rope is not None
    found = [
        f"X = input_layernorm (RMSNorm × w) of AltUp's prediction of stream 1 of {s.streams} entering layer {layer}: token embeddings × "
        f"√{cfg.hidden_size}, the other streams projected from them{', then ' + ('layer 1' if layer == 2 else f'layers 1–{layer - 1}') + ' (AltUp predict and correct, Laurel, attention, MLP, per-layer inputs)' if layer > 1 else ''}",
        f"layer {layer} is {kind}; RoPE (rotate-half) θ = {rope.theta:g}",
        "QK-norm: q and k divided by their rms over each head, times w (q_norm, k_norm), before RoPE; v_norm: each value row divided "
        "by its rms, no weight",
        "scores × 1: no division by √d_k (Gemma 3n's scaling is 1.0; the norms keep q and k near rms 1)",
        "causal mask: each token sees itself and the tokens before it"
        + ("" if attention.window is None else f"; sliding window: query i sees keys i−{attention.window} … i (sliding_window = {attention.window + 1})"),
    ]
    if source != index:
        found.append(f"keys and values shared (KV sharing): layer {layer} computes none; it reuses layer {source + 1}'s, the last "
                     f"{s.kinds[index].replace('_attention', '')} layer before the {_shared(s)} "
                     f"shared ones: K and V = layer {source + 1}'s input × its W_K, W_V, k_norm, v_norm")  # fmt: skip
    if 1 < cfg.kv_heads < cfg.heads:
        found.append(f"grouped-query attention: {cfg.heads} query heads share {cfg.kv_heads} key/value heads, {cfg.heads // cfg.kv_heads} each")
    found.append(storage_note(dtype))
    return tuple(found)


def _grouped(by_layer: dict[int, Any]) -> list[tuple[Any, str]]:
    """[(value, 'layers 1–10'), …]: the layers (from 1) of each value, in the order values first occur."""
    values = list(dict.fromkeys(by_layer.values()))
    return [(value, ("layer " if len(found) == 1 else "layers ") + compact(found)) for value in values
            for found in [[n for n, v in by_layer.items() if v == value]]]  # fmt: skip


def _shared(s: Gemma3nSettings) -> int:
    """How many of the last layers share keys and values."""
    return sum(1 for index, source in enumerate(s.sources) if source != index)


def mechanisms(cfg: ModelConfig[Gemma3nSettings], folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of Gemma 3n beyond the mechanisms every family is described by (describe.py)."""
    s = settings(cfg)
    sparse = _grouped({i + 1: (m, f) for i, (m, f) in enumerate(zip(s.multipliers, s.sparsity)) if m is not None})
    shared = _grouped({i + 1: source + 1 for i, source in enumerate(s.sources) if source != i})
    said = [
        f"AltUp: {s.streams} residual streams of {cfg.hidden_size}; each layer predicts every stream from all of them, computes on "
        "stream 1 and corrects the others by its result (router: tanh of a projection of the normed stream)",
        f"Laurel: a rank-{s.laurel_rank} residual beside attention, (x + attention + laurel) / √2",
        f"per-layer inputs: {s.per_layer} numbers per layer and token (embed_tokens_per_layer and a projection of the embeddings), "
        "gated into streams 2 … after each layer",
        "scores × 1, not divided by √d_k (the q, k and v norms keep their size near 1)",
        f"RoPE θ = {s.local_theta:g} on the sliding layers and {cfg.rope.theta if cfg.rope else 0:g} on the global ones",
        "activation sparsity (Gaussian top-k of the MLP's gate): " + (
            "; ".join(f"{layers} keep{'s' * layers.startswith('layer ')} what lies above mean + {m:.6g}·std of each token's gate"
                      + ("" if f is None else f" (Φ⁻¹({f:g}): about {1 - f:.0%} of it)") for (m, f), layers in sparse) if sparse else "none"),
        "KV sharing: " + ("; ".join(f"{layers} reuse{'s' * layers.startswith('layer ')} layer {j}'s keys and values" for j, layers in shared)
                          if shared else "none, every layer makes its own"),
    ]  # fmt: skip
    if s.final_cap is not None:
        said.append(f"final logit soft-capping {s.final_cap:g}·tanh(logit / {s.final_cap:g}) (the output logits, not attention's)")
    if s.multimodal:
        said.append("a multimodal gemma3n folder: its text stack (text_config) is read; vision and audio towers are not")
    return said


# transformers 5 saves Gemma3nForCausalLM under model., the multimodal model's text stack under model.language_model.;
# older conversions spelled it language_model.model.
TENSORS = Tensors("embed_tokens.weight", ("model.", "model.language_model.", "language_model.model.", ""))


def shapes(cfg: ModelConfig[Gemma3nSettings]) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json (layer 1's and the model's own, from the headers)."""
    s = settings(cfg)
    d, H, G, d_k = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim
    return {
        "embed_tokens.weight": (None, d),
        "embed_tokens_per_layer.weight": (s.per_layer_vocab, cfg.layers * s.per_layer),
        "layers.0.self_attn.q_proj.weight": (H * d_k, d),
        "layers.0.self_attn.k_proj.weight": (G * d_k, d),
        "layers.0.mlp.gate_proj.weight": (s.inner[0], d),
        "layers.0.altup.prediction_coefs.weight": (s.streams**2, s.streams),
        "layers.0.laurel.linear_left.weight": (s.laurel_rank, d),
    }


# -- GGUF (llama.cpp's gemma3n, as its converter Gemma3NModel writes it) --------------------------------------------

GGUF_NAMES = (
    (r"embed_tokens\.weight", "token_embd.weight"),
    (r"norm\.weight", "output_norm.weight"),
    (r"embed_tokens_per_layer\.weight", "per_layer_token_embd.weight"),
    (r"per_layer_model_projection\.weight", "per_layer_model_proj.weight"),
    (r"per_layer_projection_norm\.weight", "per_layer_proj_norm.weight"),
    (r"layers\.(\d+)\.input_layernorm\.weight", r"blk.\1.attn_norm.weight"),
    (r"layers\.(\d+)\.post_attention_layernorm\.weight", r"blk.\1.post_attention_norm.weight"),
    (r"layers\.(\d+)\.pre_feedforward_layernorm\.weight", r"blk.\1.ffn_norm.weight"),
    (r"layers\.(\d+)\.post_feedforward_layernorm\.weight", r"blk.\1.post_ffw_norm.weight"),
    (r"layers\.(\d+)\.self_attn\.q_proj\.weight", r"blk.\1.attn_q.weight"),
    (r"layers\.(\d+)\.self_attn\.k_proj\.weight", r"blk.\1.attn_k.weight"),
    (r"layers\.(\d+)\.self_attn\.v_proj\.weight", r"blk.\1.attn_v.weight"),
    (r"layers\.(\d+)\.self_attn\.o_proj\.weight", r"blk.\1.attn_output.weight"),
    (r"layers\.(\d+)\.self_attn\.q_norm\.weight", r"blk.\1.attn_q_norm.weight"),
    (r"layers\.(\d+)\.self_attn\.k_norm\.weight", r"blk.\1.attn_k_norm.weight"),
    (r"layers\.(\d+)\.mlp\.(gate|up|down)_proj\.weight", r"blk.\1.ffn_\2.weight"),
    (r"layers\.(\d+)\.altup\.correct_output_scale", r"blk.\1.altup_correct_scale.weight"),  # the converter adds .weight to _scale
    (r"layers\.(\d+)\.altup\.correction_coefs\.weight", r"blk.\1.altup_correct_coef.weight"),
    (r"layers\.(\d+)\.altup\.prediction_coefs\.weight", r"blk.\1.altup_predict_coef.weight"),
    (r"layers\.(\d+)\.altup\.modality_router\.weight", r"blk.\1.altup_router.weight"),
    (r"layers\.(\d+)\.altup\.router_norm\.weight", r"blk.\1.altup_router_norm.weight"),
    (r"layers\.(\d+)\.laurel\.linear_left\.weight", r"blk.\1.laurel_l.weight"),
    (r"layers\.(\d+)\.laurel\.linear_right\.weight", r"blk.\1.laurel_r.weight"),
    (r"layers\.(\d+)\.laurel\.post_laurel_norm\.weight", r"blk.\1.laurel_post_norm.weight"),
    (r"layers\.(\d+)\.per_layer_input_gate\.weight", r"blk.\1.inp_gate.weight"),
    (r"layers\.(\d+)\.per_layer_projection\.weight", r"blk.\1.proj.weight"),
    (r"layers\.(\d+)\.post_per_layer_input_norm\.weight", r"blk.\1.post_norm.weight"),
)
_STACKED = {"altup_projections": "altup_proj.weight", "altup_unembed_projections": "altup_unembd_proj.weight"}


def gguf_joined(file: Metadata, blk: str, rest: str) -> Joined | None:
    """altup_projections.i (and altup_unembed_projections.i), which the converter stacks into one (A − 1, d, d) tensor."""
    m = re.fullmatch(r"(altup_projections|altup_unembed_projections)\.(\d+)\.weight", rest)
    if blk or m is None or _STACKED[m.group(1)] not in file.tensors:
        return None
    merged, index = _STACKED[m.group(1)], int(m.group(2))
    dims = outermost(file, merged)
    if len(dims) != 3 or index >= dims[0]:
        return None
    return Joined(dims[1:], (merged,), "expert", index)


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """Gemma 3n's config.json keys from the metadata (Gemma3NModel.set_gguf_parameters undone); the per-layer table's rows
    (the converter pads it to the whole vocabulary) and Laurel's rank from the tensors' headers."""
    layers, theta = raw["num_hidden_layers"], raw["rope_parameters"]["rope_theta"]
    table = "per_layer_token_embd.weight"
    if table not in file.tensors or "blk.0.laurel_l.weight" not in file.tensors:
        raise file.fail("the file has no per_layer_token_embd or Laurel tensors", expected="a gemma3n file as llama.cpp's converter writes it")
    scales = file.value(a + "activation_sparsity_scale")
    return {
        "num_key_value_heads": file.count(a + "attention.head_count_kv", default=raw["num_attention_heads"]),
        "head_dim": head_dim,
        "rms_norm_eps": file.number(a + "attention.layer_norm_rms_epsilon", default=1e-6),
        "hidden_activation": "gelu_pytorch_tanh",
        "sliding_window": file.count(a + "attention.sliding_window", default=512),
        "layer_types": layer_types(file, a, layers, 5),
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": theta},
            "sliding_attention": {"rope_type": "default", "rope_theta": file.number(a + "rope.freq_base_swa", default=10_000.0)},
        },
        "altup_num_inputs": file.count(a + "altup.num_inputs", default=4),
        "altup_active_idx": file.count(a + "altup.active_idx", default=0, minimum=0),
        "altup_correct_scale": True,  # llama.cpp always multiplies by altup_correct_scale
        "hidden_size_per_layer_input": file.count(a + "embedding_length_per_layer_input"),
        "vocab_size_per_layer_input": outermost(file, table)[0],
        "laurel_rank": outermost(file, "blk.0.laurel_l.weight")[0],
        "num_kv_shared_layers": file.count(a + "attention.shared_kv_layers", default=0, minimum=0),
        "final_logit_softcapping": file.number(a + "final_logit_softcapping", default=30.0),
        "attention_bias": False,
        **({} if scales is None else {"activation_sparsity_scale": scales}),
    }


def gguf_notes(file: Metadata) -> tuple[str, ...]:
    """How the file's Gemma 3n is read where llama.cpp's converter or graph leaves transformers' model."""
    return (
        "per-layer embeddings: the converter pads the table with zero rows to the whole vocabulary, so a token past the original "
        "table reads zeros here (as in llama.cpp), where transformers reads that table's row 0",
        "activation sparsity: each layer's Φ⁻¹(sparsity) is the file's activation_sparsity_scale (float32, as the converter computed "
        "it), with the std over n as in transformers (llama.cpp's graph divides by n − 1 and applies Φ⁻¹(0.95) to its first 10 "
        "layers whatever the file says)",
    )


GGUF = (GgufArchitecture("gemma3n", "gemma3n_text", GGUF_NAMES, keys=gguf_keys, joined=gguf_joined, notes=gguf_notes),)

# the steps transformers' Gemma 3n runs in float32 inside a float64 model (scripts/make_checkpoints.py's float64_steps undoes them)
FLOAT32_GEMMA3N_NORM = "RMSNorm casts the hidden state to float32 and normalises it there (every norm: the q, k and v norms, AltUp's router, Laurel's)"
FLOAT32_ALTUP_ROUTER = "AltUp's router takes its tanh in float32"
FLOAT32_SPARSITY = "the Gaussian top-k's Φ⁻¹(sparsity) is computed in float32"
VERIFY = Verification(O_PROJ, (FLOAT32_GEMMA3N_NORM, FLOAT32_ROPE, FLOAT32_ALTUP_ROUTER, FLOAT32_SPARSITY, FLOAT32_SOFTMAX))
DESCRIPTION = Description(qk_norm="per head (q_norm, k_norm × w), before RoPE; v_norm without weight")
