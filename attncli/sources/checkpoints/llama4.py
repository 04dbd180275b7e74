"""Llama 4 (text): Llama's block with chunked attention and QK-norm after RoPE on the RoPE layers, NoPE layers with attention
temperature tuning, and a mixture of experts with a shared expert on every `interleave_moe_layer_step`-th layer.

As transformers' Llama4TextAttention computes it, per layer i (from 0):
  - RoPE or none: `no_rope_layers[i]` 1 turns q and k, 0 leaves them (NoPE); an empty or absent list puts NoPE on every
    `no_rope_layer_interval`-th layer (4). RoPE turns interleaved pairs (2i, 2i + 1): transformers multiplies q and k viewed
    as complex numbers by e^(i·p·ω), not rotate-half; θ 500 000 and llama3 scaling as the config says.
  - on a RoPE layer, with use_qk_norm, q and k are then divided by their rms over each head with no weight (Llama4TextL2Norm,
    ε = rms_norm_eps): QK-norm after RoPE, the engine's "rotated" stage (core.variants.QkNormAfterRope).
  - on a NoPE layer, with attn_temperature_tuning, each query at position p is multiplied by
    1 + attn_scale·ln(1 + ⌊(p + 1) / floor_scale⌋) (core.variants.QueryTemperature).
  - chunked attention: the layers `layer_types` marks "chunked_attention" (by default the RoPE layers, when
    attention_chunk_size is set) see only the keys of their own chunk of attention_chunk_size positions.
  - scores ÷ √d_k, a causal mask, grouped-query attention; biases on q, k, v and o when attention_bias.
The MLP of a layer in `moe_layers` (else every interleave_moe_layer_step-th, from the step's last) is the mixture: router
logits x·W_r, each token's top k, their sigmoids as weights (the other experts' 0); every expert reads x × its weight
(the weight scales the expert's input, not its output: the SwiGLU is not linear) through gate_up_proj (d, 2·inner: gate
then up) and down_proj, and a shared expert (a SwiGLU of intermediate_size) adds its output on every token. The other
layers' MLP is a SwiGLU of intermediate_size_mlp.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from attncli.core.variants import QkNormAfterRope, QueryTemperature, Rope
from attncli.sources.checkpoints import llama, moe
from attncli.sources.checkpoints.blocks import AttentionWeights, LayerInputs, Weights, activate, self_attention, through
from attncli.sources.checkpoints.config import (
    FLOAT32_RMSNORM,
    MOST,
    O_PROJ,
    Description,
    ModelConfig,
    Verification,
    _Reader,
    _shown,
    llama_like,
    no_windows,
    whole,
    with_family,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Joined, Metadata, outermost, renamed
from attncli.sources.checkpoints.source import TensorSource


class Llama4Settings(NamedTuple):
    """What Llama 4 reads beyond the Llama-like keys (transformers' Llama4TextConfig defaults)."""

    rope_layers: tuple[bool, ...]  # per layer, whether RoPE turns q and k (False: NoPE)
    chunks: tuple[int | None, ...]  # per layer, the attention chunk (chunked_attention layers), else None
    qk_norm: bool  # use_qk_norm: the weightless RMSNorm after RoPE, on the RoPE layers
    temperature: tuple[int, float] | None  # (floor_scale, attn_scale) with attn_temperature_tuning, on the NoPE layers
    experts: int  # num_local_experts
    top_k: int  # num_experts_per_tok
    dense_inner: int  # intermediate_size_mlp: the dense layers' SwiGLU (intermediate_size is each expert's and the shared one's)
    sparse: tuple[bool, ...]  # per layer, whether its MLP is the mixture of experts


def settings(cfg: ModelConfig[Any]) -> Llama4Settings:
    assert isinstance(cfg.family, Llama4Settings)
    return cfg.family


DEFAULTS: dict[str, Any] = {
    "layers": 48, "hidden": 5120, "heads": 40, "kv": 8, "positions": 131072, "inter": 8192, "head_dim": 128, "eps": 1e-5,
    "theta": 500000.0,
}  # Llama4TextConfig  # fmt: skip


def _layer_list(read: _Reader, key: str, layers: int) -> list[Any] | None:
    """config.json's per-layer list under `key`; None when absent or empty (transformers then derives it)."""
    given = read.raw.get(key)
    if given is None or given == []:
        return None
    if not isinstance(given, list) or len(given) != layers:
        raise read.fail(key, f"found {_shown(given)}", f"a list of {layers} entries, one per layer")
    return given


def _rope_layers(read: _Reader, layers: int) -> tuple[bool, ...]:
    """no_rope_layers (1: RoPE, 0: NoPE), else NoPE on every no_rope_layer_interval-th layer (an empty list counts as absent)."""
    given = _layer_list(read, "no_rope_layers", layers)
    if given is None:
        every = read.count("no_rope_layer_interval", default=4, most=MOST["layers"])
        return tuple((i + 1) % every != 0 for i in range(layers))
    if any(v not in (0, 1) or isinstance(v, float) for v in given):
        raise read.fail("no_rope_layers", f"found {_shown(given)}", f"a list of {layers} numbers, 1 (RoPE) or 0 (none)")
    return tuple(bool(v) for v in given)


def _chunks(read: _Reader, rope_layers: tuple[bool, ...]) -> tuple[int | None, ...]:
    """attention_chunk_size on the layers layer_types marks chunked_attention (by default the RoPE layers); none when null."""
    layers = len(rope_layers)
    size = read.raw.get("attention_chunk_size", 8192)
    if size is not None:
        size = read.count("attention_chunk_size", default=8192, most=MOST["positions"])
    kinds = _layer_list(read, "layer_types", layers)
    if kinds is None:
        return tuple(size if rope else None for rope in rope_layers)
    if any(kind not in ("chunked_attention", "full_attention") for kind in kinds):
        raise read.fail("layer_types", f"found {_shown(kinds)}", "chunked_attention or full_attention for each layer")
    if size is None and "chunked_attention" in kinds:
        raise read.fail("attention_chunk_size", "chunked_attention layers without a chunk size", "a whole number of positions")
    return tuple(size if kind == "chunked_attention" else None for kind in kinds)


def _sparse(read: _Reader, layers: int, experts: int) -> tuple[bool, ...]:
    """moe_layers (layer numbers from 0), else every interleave_moe_layer_step-th layer, from the step's last."""
    listed = read.raw.get("moe_layers")
    if listed is None:
        step = read.count("interleave_moe_layer_step", default=1, most=MOST["layers"])
        listed = list(range(step - 1, layers, step))
    if not isinstance(listed, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in listed):
        raise read.fail("moe_layers", f"found {_shown(listed)}", f"a list of layer numbers from 0 to {layers - 1}")
    return tuple(i in listed and experts > 0 for i in range(layers))


def read_config(read: _Reader) -> ModelConfig[Llama4Settings]:
    """Llama's keys with Llama 4's defaults, and its own: NoPE layers, chunks, QK-norm, temperature, experts."""
    cfg = llama_like(read, "llama4_text", DEFAULTS, windows=no_windows, attention_bias=True)
    rope_layers = _rope_layers(read, cfg.layers)
    temperature = None
    tuning = read.raw.get("attn_temperature_tuning", True)  # Llama 4 Scout's config.json says 4: transformers tests it as a truth value
    if isinstance(tuning, float) or not isinstance(tuning, bool | int) or tuning < 0:
        raise read.fail("attn_temperature_tuning", f"found {_shown(tuning)}", "true or false (a whole number counts as its truth value)")
    if tuning:
        floor = read.count("floor_scale", default=8192, most=MOST["positions"])
        scale = read.raw.get("attn_scale", 0.1)
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not 0 <= scale <= 1e6:
            raise read.fail("attn_scale", f"found {_shown(scale)}", "a number from 0 to 1e6")
        temperature = (floor, float(scale))
    experts = read.count("num_local_experts", default=16, minimum=0, most=MOST["heads"])
    family = Llama4Settings(
        rope_layers=rope_layers, chunks=_chunks(read, rope_layers), qk_norm=read.flag("use_qk_norm", True), temperature=temperature,
        experts=experts, top_k=read.count("num_experts_per_tok", default=1, most=max(experts, 1)),
        dense_inner=read.count("intermediate_size_mlp", default=16384, most=MOST["inner"]), sparse=_sparse(read, cfg.layers, experts),
    )  # fmt: skip
    return with_family(cfg, family)


def rope(cfg: ModelConfig[Any], checkpoint: TensorSource) -> tuple[Weights, Rope]:
    """The tensors and the RoPE, which turns interleaved pairs (transformers' complex multiplication)."""
    w, turned = llama.weights_and_rope(cfg, checkpoint)
    return w, dataclasses.replace(turned, style="interleaved")


def _attention(cfg: ModelConfig[Any], w: Weights, index: int, turned: Rope | None) -> AttentionWeights:
    """Layer `index`'s projections, its RoPE or none, QK-norm after RoPE, temperature and chunk, as its settings say."""
    s = settings(cfg)
    on = s.rope_layers[index]
    attention = llama._attention(cfg, w, index, turned if on else None)
    after: list[QkNormAfterRope | QueryTemperature] = []
    if on and s.qk_norm:
        ones = np.ones(cfg.head_dim)
        ones.setflags(write=False)
        after.append(QkNormAfterRope(ones, ones, eps=cfg.norm_eps, weighted=False))
    if not on and s.temperature is not None:
        floor, scale = s.temperature
        after.append(QueryTemperature(scale, floor, shift=1))  # τ_p = 1 + scale·ln(1 + ⌊(p + 1) / floor⌋)
    return dataclasses.replace(attention, chunk=s.chunks[index], variants=(*attention.variants, *after))


def _swiglu(cfg: ModelConfig[Any], w: Weights, prefix: str, x: np.ndarray, inner: int) -> np.ndarray:
    """(L, d) down(act(gate(x))·up(x)) of the SwiGLU under `prefix`."""
    hidden = activate(cfg.activation, llama._linear(w, prefix + "gate_proj", x, inner, False))  # (L, inner)
    hidden *= llama._linear(w, prefix + "up_proj", x, inner, False)
    return llama._linear(w, prefix + "down_proj", hidden, cfg.hidden_size, False)  # (L, d)


def _experts(cfg: ModelConfig[Any], w: Weights, index: int, x: np.ndarray) -> tuple[np.ndarray, moe.Routing]:
    """(L, d) layer `index`'s mixture: the shared expert, plus each chosen expert on x × its sigmoid weight; and the routing."""
    s, d, inner = settings(cfg), cfg.hidden_size, cfg.intermediate_size
    p = f"layers.{index}.feed_forward."
    logits = x @ w.get(p + "router.weight", (s.experts, d)).T  # (L, E)
    routing = moe.top_k_sigmoid(logits, s.top_k, layer=index + 1)
    gate_up = w.get(p + "experts.gate_up_proj", (s.experts, d, 2 * inner))  # (E, d, 2·inner): gate, then up
    down = w.get(p + "experts.down_proj", (s.experts, inner, d))  # (E, inner, d)
    out = _swiglu(cfg, w, p + "shared_expert.", x, inner)  # (L, d)
    for expert in np.unique(routing.experts):
        tokens, slot = np.nonzero(routing.experts == expert)  # the tokens that chose it, and where in their top k
        routed = x[tokens] * routing.weights[tokens, slot][:, None]  # (L_e, d) its input, scaled by the weight
        both = routed @ gate_up[expert]  # (L_e, 2·inner)
        hidden = activate(cfg.activation, both[:, :inner]) * both[:, inner:]  # (L_e, inner) act(gate)·up
        out[tokens] += hidden @ down[expert]  # (L_e, d)
    return out, routing


def _layer(cfg: ModelConfig[Any], w: Weights, index: int, h: np.ndarray, turned: Rope) -> tuple[np.ndarray, moe.Routing | None]:
    """(L, d) the residual after layer `index`: h + attention(norm h), then + its MLP (experts or dense); and its routing."""
    p = f"layers.{index}."
    h = h + self_attention(llama._norm(cfg, w, p + "input_layernorm", h), _attention(cfg, w, index, turned))  # (L, d)
    x = llama._norm(cfg, w, p + "post_attention_layernorm", h)  # (L, d)
    if not settings(cfg).sparse[index]:
        return h + _swiglu(cfg, w, p + "feed_forward.", x, settings(cfg).dense_inner), None
    mixed, routing = _experts(cfg, w, index, x)
    return h + mixed, routing


def layer_inputs(cfg: ModelConfig[Any], checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm (RMSNorm) of the residual entering `layer` (from 1), that layer's attention, and the experts used before."""
    w, turned = rope(cfg, checkpoint)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    routings = []
    for index in range(layer - 1):
        h, routing = _layer(cfg, w, index, h, turned)
        routings += [routing] if routing is not None else []
    index = layer - 1
    X = llama._norm(cfg, w, f"layers.{index}.input_layernorm", h)  # (L, d)
    attention = _attention(cfg, w, index, turned)
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    s = settings(cfg)
    first = (f"X = input_layernorm (RMSNorm) of the residual entering layer {layer}: token embeddings{through(layer)}"
             + (f", the MLP of layer{'s' * (len(routings) > 1)} {', '.join(str(r.layer) for r in routings)} a mixture of experts "
                f"(sigmoid top {s.top_k} of {s.experts}, and a shared expert)" if routings else ""))  # fmt: skip
    lines = list(llama.notes(cfg, layer, turned, attention, dtype, first=first))
    if any(isinstance(variant, QueryTemperature) for variant in attention.variants):  # the position reaches the query after all
        lines = [NOPE_TEMPERED if line.startswith("no RoPE on this layer") else line for line in lines]
    lines[-1:-1] = [*_notes(cfg, index, attention), *map(moe.routing_note, routings)]
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=tuple(lines))


NOPE_TEMPERED = ("no RoPE on this layer (NoPE): q and k meet as projected; the order reaches the scores through the causal mask "
                 "and the query's temperature, which depends on its position alone")


def _notes(cfg: ModelConfig[Any], index: int, attention: AttentionWeights) -> list[str]:
    """The header's lines for what Llama 4 adds to Llama's layer beyond llama.notes: the temperature, the chunk."""
    lines = []
    for variant in attention.variants:
        if isinstance(variant, QueryTemperature):
            lines.append(f"attention temperature (NoPE layer): the query at position p × 1 + {variant.beta:g}·ln(1 + ⌊(p + 1) / {variant.original}⌋)")
    if attention.chunk is not None:
        lines.append(f"chunked attention: query i sees keys of its own chunk of {attention.chunk} positions (1–{attention.chunk}, "
                     f"{attention.chunk + 1}–{2 * attention.chunk}, …), causal within it (attention_chunk_size)")  # fmt: skip
    return lines


def shapes(cfg: ModelConfig[Any]) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json: layer 1's attention, and its router or dense MLP."""
    d, H, G, d_k, s = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim, settings(cfg)
    mlp = ({"layers.0.feed_forward.router.weight": (s.experts, d), "layers.0.feed_forward.experts.gate_up_proj": (s.experts, d, 2 * cfg.intermediate_size)}
           if s.sparse[0] else {"layers.0.feed_forward.gate_proj.weight": (s.dense_inner, d)})  # fmt: skip
    return {
        "embed_tokens.weight": (None, d),
        "layers.0.self_attn.q_proj.weight": (H * d_k, d),
        "layers.0.self_attn.k_proj.weight": (G * d_k, d),
        **mlp,
    }


def _raw(folder: Path) -> dict[str, Any]:
    from attncli.sources.checkpoints.config import read_raw

    return read_raw(folder)[0]


def mechanisms(cfg: ModelConfig[Any], folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of Llama 4 beyond describe.py: the chunks and the temperature, on which layers."""
    s = settings(cfg)
    said = []
    chunked = [i + 1 for i, chunk in enumerate(s.chunks) if chunk is not None]
    if chunked:
        sizes = sorted({c for c in s.chunks if c is not None})
        said.append(f"chunked attention on layers {', '.join(map(str, chunked))}: each query sees only the keys of its own chunk of "
                    f"{' / '.join(f'{c:,}' for c in sizes)} positions, causally (attention_chunk_size); the other layers see every earlier key")  # fmt: skip
    nope = [i + 1 for i, on in enumerate(s.rope_layers) if not on]
    if s.temperature is not None and nope:
        floor, scale = s.temperature
        said.append(f"attention temperature tuning on the NoPE layers ({', '.join(map(str, nope))}): the query at position p (from 0) "
                    f"× 1 + {scale:g}·ln(1 + ⌊(p + 1) / {floor:,}⌋), 1 below position {floor - 1:,} (attn_temperature_tuning)")  # fmt: skip
    return said


def _qk_norm(raw: Mapping[str, Any]) -> str | None:
    """Llama 4's QK-norm in model info's words (use_qk_norm, true when absent)."""
    if raw.get("use_qk_norm", True) is not True:
        return None
    return "per head with no weight (Llama4TextL2Norm: x / √(mean(x²) + ε)), after RoPE, on the RoPE layers only"


def _router(raw: Mapping[str, Any]) -> str:
    """How Llama 4's router picks, in model info's words."""
    step = whole(raw, "interleave_moe_layer_step") or 1
    listed = raw.get("moe_layers")
    layers = whole(raw, "num_hidden_layers", most=MOST["layers"])
    if isinstance(listed, list) and listed != list(range(layers or 0)):
        where = f"on layers {', '.join(str(i + 1) for i in listed if isinstance(i, int))} (moe_layers), the others a dense MLP"
    else:
        where = "on every layer" if isinstance(listed, list) or step == 1 else f"on every {step}th layer (interleave_moe_layer_step), the others a dense MLP"
    return (f"the router's top k logits through a sigmoid as weights (not a softmax), each chosen expert reading the token × its weight, "
            f"a shared expert on every token; {where}")  # fmt: skip


# -- GGUF: llama.cpp's llama4 (Llama4Model: LlamaModel's names, nothing permuted) ------------------------------------------------

GGUF_NAMES = (
    *renamed(llama.GGUF_NAMES, "mlp"),
    (r"layers\.(\d+)\.feed_forward\.(gate|up|down)_proj\.weight", r"blk.\1.ffn_\2.weight"),
    (r"layers\.(\d+)\.feed_forward\.router\.weight", r"blk.\1.ffn_gate_inp.weight"),
    (r"layers\.(\d+)\.feed_forward\.shared_expert\.(gate|up|down)_proj\.weight", r"blk.\1.ffn_\2_shexp.weight"),
)


def gguf_joined(file: Metadata, blk: str, rest: str) -> Joined | None:
    """The experts as Llama4Model stores them: experts.gate_up_proj (E, d, 2·inner), gate then up, as ffn_gate_exps and
    ffn_up_exps (E, inner, d); experts.down_proj (E, inner, d) as ffn_down_exps (E, d, inner)."""
    if rest == "feed_forward.experts.gate_up_proj":
        parts = (blk + "ffn_gate_exps.weight", blk + "ffn_up_exps.weight")
        if not all(part in file.tensors for part in parts):
            return None
        E, inner, d = outermost(file, parts[0])
        return Joined((E, d, 2 * inner), parts, "gate_then_up")
    if rest == "feed_forward.experts.down_proj" and blk + "ffn_down_exps.weight" in file.tensors:
        E, d, inner = outermost(file, blk + "ffn_down_exps.weight")
        return Joined((E, inner, d), (blk + "ffn_down_exps.weight",), "down")
    return None


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """Llama 4's config.json keys as llama.cpp reads the file (llama-model.cpp, LLM_ARCH_LLAMA4): the experts from the metadata;
    the chunk (8192), the NoPE step (every 4th layer), the temperature (floor 8192, scale 0.1) fixed, as llama.cpp fixes them;
    QK-norm unless 128 experts (Maverick). A file whose sliding_window is 0 (no chunked layers) is refused."""
    if file.has_key(a + "attention.sliding_window") and file.value(a + "attention.sliding_window") == 0:
        raise file.fail("sliding_window 0: a llama4 file without chunked layers, whose NoPE layers llama.cpp sets otherwise",
                        key=a + "attention.sliding_window", expected="a Llama 4 file with its chunked attention")  # fmt: skip
    experts = file.count(a + "expert_count", default=0, minimum=0)
    return {
        **llama.gguf_keys(file, a, raw, head_dim),
        "intermediate_size_mlp": raw["intermediate_size"],
        "intermediate_size": file.count(a + "expert_feed_forward_length", default=raw["intermediate_size"]),
        "num_local_experts": experts,
        "num_experts_per_tok": file.count(a + "expert_used_count", default=1),
        "interleave_moe_layer_step": file.count(a + "interleave_moe_layer_step", default=1),
        "no_rope_layer_interval": 4, "attention_chunk_size": 8192, "attn_temperature_tuning": True, "floor_scale": 8192, "attn_scale": 0.1,
        "use_qk_norm": experts != 128,
    }  # fmt: skip


GGUF = (GgufArchitecture("llama4", "llama4_text", GGUF_NAMES, keys=gguf_keys, joined=gguf_joined),)
FLOAT32_STEPS = (  # Llama 4's eager attention keeps the softmax in the model's dtype: not one of them
    FLOAT32_RMSNORM,
    "the rotary embedding casts q and k to float32 and turns them there as complex numbers (frequencies and e^(iθ) in float32 too)",
    "the QK-norm after RoPE (Llama4TextL2Norm) casts q and k to float32",
    "the router's sigmoid runs in float32, and the temperature's factors are float32",
)
VERIFY = Verification(O_PROJ, FLOAT32_STEPS, eager_experts=True)
DESCRIPTION = Description(qk_norm=_qk_norm, qk_norm_kind="RMS-normalised", interleaved_rope=lambda raw: True, router=_router)
