"""gpt-oss: learned attention sinks, alternating 128-token windows, attention biases, and a mixture-of-experts MLP in every layer.

As transformers' GptOss computes it (docs/families.md, "gpt-oss"): Llama-style pre-norm blocks;
q, k, v and o projections with biases; RoPE on the two halves of each head from a table of
d_k/2 columns (one angle per pair: rotate-half, which core's Rope "half" is); scale d_k^−½;
causal, and on `sliding_attention` layers the last `sliding_window` keys; then each head's
learned `sinks` logit joins the softmax's denominator and takes weight from the real keys.
The MLP: router logits x·Wᵀ + b, each token's top k, a softmax over those k, and the sum of the
chosen experts' outputs by those weights; an expert is a clamped SwiGLU
    gate, up = (x·W_gu + b_gu)[::2], [1::2];  gate ≤ limit;  −limit ≤ up ≤ limit
    out = ((up + 1) · gate · σ(α·gate))·W_down + b_down
with W_gu stored (E, d, 2·inner) and W_down (E, inner, d): x·W, not nn.Linear's x·Wᵀ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from attncli.core.variants import LearnedSink, Rope
from attncli.errors import AttnError
from attncli.sources.checkpoints import llama, moe, mxfp4
from attncli.sources.checkpoints.blocks import (
    AttentionWeights,
    LayerInputs,
    Weights,
    rms_norm,
    self_attention,
    storage_note,
    through,
)
from attncli.sources.checkpoints.config import (
    FLOAT32_RMSNORM,
    FLOAT32_ROPE,
    MOST,
    O_PROJ,
    Description,
    ModelConfig,
    Verification,
    _Reader,
    _window,
    alternating,
    llama_like,
    with_family,
)
from attncli.sources.checkpoints.gemma2 import layer_kinds
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Joined, Metadata, layer_types, outermost, renamed
from attncli.sources.checkpoints.rope import rope_spec
from attncli.sources.checkpoints.safetensors import Checkpoint
from attncli.sources.checkpoints.source import TensorSource


class GptOssSettings(NamedTuple):
    """What gpt-oss reads beyond the Llama-like keys."""

    experts: int  # num_local_experts
    top_k: int  # num_experts_per_tok
    limit: float  # swiglu_limit: gate ≤ limit, |up| ≤ limit
    alpha: float  # swiglu_alpha: gate · σ(α·gate)
    kinds: tuple[str, ...]  # per layer, "sliding_attention" or "full_attention"
    sliding_window: int | None
    kinds_given: bool


DEFAULTS: dict[str, Any] = {"layers": 36, "hidden": 2880, "heads": 64, "kv": 8, "positions": 131072, "inter": 2880}  # GptOssConfig


def read_config(read: _Reader) -> ModelConfig[GptOssSettings]:
    """gpt-oss's config: the Llama-like keys, then its own (transformers' GptOssConfig defaults)."""
    cfg = llama_like(read, "gpt_oss", DEFAULTS)
    experts = read.count("num_local_experts", default=128, most=MOST["heads"])
    top_k = read.count("num_experts_per_tok", default=4, most=experts)
    size = read.raw.get("sliding_window", 128)
    window = None if size is None else _window(read, "sliding_window", size)
    kinds, given = layer_kinds(read, cfg.layers)
    bias = read.flag("attention_bias", True)
    cfg = dataclasses.replace(
        cfg,
        norm_eps=read.number("rms_norm_eps", 1e-5),
        intermediate_size=read.count("intermediate_size", default=2880, most=MOST["inner"]),
        windows=tuple(window if kind == "sliding_attention" else None for kind in kinds),
        qkv_bias=bias,
        output_bias=bias,
    )
    settings = GptOssSettings(experts, top_k, read.number("swiglu_limit", 7.0), read.number("swiglu_alpha", 1.702), kinds, window, given)
    return with_family(cfg, settings)


def settings(cfg: ModelConfig[GptOssSettings]) -> GptOssSettings:
    """What gpt_oss's read_config read beyond the Llama-like keys (typed: ModelConfig[GptOssSettings])."""
    return cfg.family



def _attention(cfg: ModelConfig[GptOssSettings], w: Weights, index: int, rope: Rope) -> AttentionWeights:
    """Llama's projections, biases and window, with the layer's learned sinks (one logit per head)."""
    sinks = w.get(f"layers.{index}.self_attn.sinks", (cfg.heads,))  # (H,)
    return dataclasses.replace(llama._attention(cfg, w, index, rope), sink=LearnedSink(tuple(float(s) for s in sinks)))


def _norm(cfg: ModelConfig[GptOssSettings], w: Weights, name: str, x: np.ndarray) -> np.ndarray:
    return rms_norm(x, w.get(name + ".weight", (cfg.hidden_size,)), cfg.norm_eps)


def _expert_blocks(w: Weights, name: str, shape: tuple[int, ...]) -> tuple[str, bool]:
    """The full name of an experts tensor, checked for shape, and whether it is stored as MXFP4 (`_blocks` + `_scales`)."""
    full = w.prefix + name
    if not w.checkpoint.has(full) and mxfp4.has_mxfp4(w.checkpoint, full):
        return full, True  # shapes checked per expert as it is read
    stored = w.checkpoint.shape(full) if w.checkpoint.has(full) else None
    if stored is None:
        w.get(name, shape)  # names the missing tensor
    if stored != shape:
        raise AttnError(
            f"tensor '{full}' has shape {list(stored or ())} but {w.checkpoint.config_source} implies {list(shape)}",
            file=str(w.checkpoint.file_of(full)),
        )
    return full, False


def _each_expert(w: Weights, name: str, quantised: bool, shape: tuple[int, int], used: list[int]) -> Iterator[tuple[int, np.ndarray]]:
    """(expert, its (shape) float64 matrix) for each used expert: from float blocks of rows, or dequantised from MXFP4."""
    if quantised:
        assert isinstance(w.checkpoint, Checkpoint)
        for e in used:
            yield e, mxfp4.expert(w.checkpoint, name, e, shape)
        return
    for first, block in w.checkpoint.row_blocks(name):  # block: (experts, *shape)
        for e in (e for e in used if first <= e < first + block.shape[0]):
            yield e, block[e - first]


def experts(cfg: ModelConfig[GptOssSettings], w: Weights, index: int, x: np.ndarray) -> tuple[np.ndarray, moe.Routing]:
    """(L, d) the MoE MLP's output for layer `index` (from 0), and which experts each token used."""
    s = settings(cfg)
    d, inner, E = cfg.hidden_size, cfg.intermediate_size, s.experts
    p = f"layers.{index}.mlp."
    logits = x @ w.get(p + "router.weight", (E, d)).T + w.get(p + "router.bias", (E,))  # (L, E)
    routing = moe.top_k_softmax(logits, s.top_k, layer=index + 1)
    gate_up_bias = w.get(p + "experts.gate_up_proj_bias", (E, 2 * inner))  # (E, 2·inner)
    down_bias = w.get(p + "experts.down_proj_bias", (E, d))  # (E, d)
    gate_up_name, gate_up_q = _expert_blocks(w, p + "experts.gate_up_proj", (E, d, 2 * inner))
    down_name, down_q = _expert_blocks(w, p + "experts.down_proj", (E, inner, d))
    share = np.zeros((x.shape[0], E))  # (L, E) each token's weight per expert, 0 where not chosen
    np.put_along_axis(share, routing.experts, routing.weights, axis=-1)
    used = [e for e in range(E) if share[:, e].any()]
    glu: dict[int, np.ndarray] = {}  # expert → (L_e, inner) its activation for the tokens routed to it
    for e, matrix in _each_expert(w, gate_up_name, gate_up_q, (d, 2 * inner), used):  # matrix: (d, 2·inner)
        _finite(w, gate_up_name, matrix)
        rows = share[:, e] > 0  # (L,)
        gate_up = x[rows] @ matrix + gate_up_bias[e]  # (L_e, 2·inner)
        gate = np.minimum(gate_up[:, ::2], s.limit)  # (L_e, inner)
        up = np.clip(gate_up[:, 1::2], -s.limit, s.limit)  # (L_e, inner)
        glu[e] = (up + 1.0) * gate / (1.0 + np.exp(-s.alpha * gate))  # (L_e, inner) (up + 1)·gate·σ(α·gate)
    out = np.zeros_like(x)  # (L, d)
    for e, matrix in _each_expert(w, down_name, down_q, (inner, d), used):  # matrix: (inner, d)
        _finite(w, down_name, matrix)
        rows = share[:, e] > 0
        out[rows] += (glu[e] @ matrix + down_bias[e]) * share[rows, e][:, None]  # (L_e, d)
    return out, routing


def _finite(w: Weights, name: str, value: np.ndarray) -> None:
    if not np.isfinite(value).all():
        raise AttnError(f"tensor '{name}' holds NaN or ∞", file=str(w.checkpoint.file_of(name)), expected="finite weights")


def _layer(cfg: ModelConfig[GptOssSettings], w: Weights, index: int, h: np.ndarray, rope: Rope) -> tuple[np.ndarray, moe.Routing]:
    """(L, d) the residual stream after layer `index` (from 0): h + attention(norm h), then + MoE(norm h); and the routing."""
    p = f"layers.{index}."
    h = h + self_attention(_norm(cfg, w, p + "input_layernorm", h), _attention(cfg, w, index, rope))  # (L, d)
    mixed, routing = experts(cfg, w, index, _norm(cfg, w, p + "post_attention_layernorm", h))
    return h + mixed, routing


def forward(cfg: ModelConfig[GptOssSettings], checkpoint: TensorSource, ids: tuple[int, ...], layers: int) -> tuple[np.ndarray, list[moe.Routing]]:
    """(L, d) the residual stream after `layers` layers, and each layer's routing."""
    assert cfg.rope is not None
    w = Weights(checkpoint, probe="embed_tokens.weight", prefixes=("model.", ""))
    rope = rope_spec(cfg.rope, cfg.head_dim)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    routings = []
    for index in range(layers):
        h, routing = _layer(cfg, w, index, h, rope)
        routings.append(routing)
    return h, routings


def layer_inputs(cfg: ModelConfig[GptOssSettings], checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm (RMSNorm) of the residual entering `layer` (from 1), that layer's attention weights, and the experts used before."""
    assert cfg.rope is not None
    h, routings = forward(cfg, checkpoint, ids, layer - 1)
    w = Weights(checkpoint, probe="embed_tokens.weight", prefixes=("model.", ""))
    rope = rope_spec(cfg.rope, cfg.head_dim)
    index = layer - 1
    X = _norm(cfg, w, f"layers.{index}.input_layernorm", h)  # (L, d)
    attention = _attention(cfg, w, index, rope)
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=notes(cfg, layer, attention, rope, dtype, routings))


def notes(
    cfg: ModelConfig[GptOssSettings], layer: int, attention: AttentionWeights, rope: Rope, dtype: str, routings: list[moe.Routing]
) -> tuple[str, ...]:
    s = settings(cfg)
    H, G = cfg.heads, cfg.kv_heads
    window = cfg.windows[layer - 1]
    source = "layer_types" if s.kinds_given else "no layer_types: transformers' default alternation, odd layers local"
    kind = (
        f"layer {layer} is a global layer: full causal attention over every earlier token ({source})"
        if window is None
        else f"layer {layer} is a sliding (local) layer: query i sees keys i−{window - 1} … i, the last {window} tokens "
        f"(sliding_window = {window}; {source})"
    )
    assert attention.sink is not None
    sinks = ", ".join(f"{v:.4g}" for v in attention.sink.logits)
    sharing = f"grouped-query attention: {H} query heads share {G} key/value heads, {H // G} each" if 1 < G < H else None
    found = (
        f"X = input_layernorm (RMSNorm) of the residual entering layer {layer}: token embeddings{through(layer)}"
        + (f", each MLP a mixture of experts (top {s.top_k} of {s.experts}, clamped SwiGLU, limit {s.limit:g})" if layer > 1 else ""),
        kind,
        f"learned attention sinks (self_attn.sinks): each head's logit joins the softmax's denominator with no value, so a "
        f"row's weights sum to less than 1: sink = {sinks}",
        f"RoPE (rotate-half: the two halves of each head turned by a table of d_k/2 angles) at positions 0, 1, 2, …: θ = {rope.theta:g}"
        + (f", {rope.scaling}" if rope.scaling else ""),
        sharing,
        "q, k, v and o projections have biases" if cfg.output_bias else None,
        f"scores divided by √d_k = √{cfg.head_dim} = {attention.divisor:g}",
        "causal mask: each token sees itself and the tokens before it",
        *(moe.routing_note(r) for r in routings),
        storage_note(dtype),
    )
    return tuple(note for note in found if note is not None)


def shapes(cfg: ModelConfig[GptOssSettings]) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against config.json (layer 1's, from the headers)."""
    d, H, G, d_k = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim
    return {
        "embed_tokens.weight": (None, d),
        "layers.0.self_attn.q_proj.weight": (H * d_k, d),
        "layers.0.self_attn.k_proj.weight": (G * d_k, d),
        "layers.0.self_attn.sinks": (H,),
        "layers.0.mlp.router.weight": (settings(cfg).experts, d),
    }


# -- GGUF and model verify ---------------------------------------------------------------------

GGUF_NAMES = (
    *renamed(llama.GGUF_NAMES, "post_attention_layernorm", "mlp"),
    (r"layers\.(\d+)\.post_attention_layernorm\.weight", r"blk.\1.post_attention_norm.weight"),
    (r"layers\.(\d+)\.self_attn\.sinks", r"blk.\1.attn_sinks.weight"),
    (r"layers\.(\d+)\.mlp\.router\.(weight|bias)", r"blk.\1.ffn_gate_inp.\2"),
    (r"layers\.(\d+)\.mlp\.experts\.down_proj_bias", r"blk.\1.ffn_down_exps.bias"),
)  # the experts' matrices and gate/up biases are joined from several tensors (gguf_joined)


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """gpt-oss's config.json keys from the metadata; the SwiGLU clamp and α are llama.cpp's constants (7 and 1.702)."""
    layers = raw["num_hidden_layers"]
    experts = file.count(a + "expert_count")
    return {
        "num_key_value_heads": file.count(a + "attention.head_count_kv", default=raw["num_attention_heads"]),
        "head_dim": head_dim,
        "rms_norm_eps": file.number(a + "attention.layer_norm_rms_epsilon", default=1e-5),
        "intermediate_size": file.count(a + "expert_feed_forward_length", default=raw["intermediate_size"]),
        "num_local_experts": experts,
        "num_experts_per_tok": file.count(a + "expert_used_count"),
        "sliding_window": file.count(a + "attention.sliding_window"),
        "layer_types": layer_types(file, a, layers, 2),
        "attention_bias": "blk.0.attn_q.bias" in file.tensors,
        "swiglu_limit": 7.0,
        "swiglu_alpha": 1.702,
        "hidden_act": "silu",
    }


def gguf_joined(file: Metadata, blk: str, rest: str) -> Joined | None:
    """The experts as the converter stored them: experts.gate_up_proj (E, d, 2·inner), gate and up interleaved along the
    last axis (x·W, not x·Wᵀ), as ffn_gate_exps and ffn_up_exps (E, inner, d) (or both in ffn_gate_up_exps (E, 2·inner, d));
    experts.down_proj (E, inner, d) as ffn_down_exps (E, d, inner); the gate/up bias (E, 2·inner) as two biases."""
    if not rest.startswith("mlp.experts."):
        return None
    have = file.tensors
    what = rest.removeprefix("mlp.experts.")
    fused = blk + "ffn_gate_up_exps." + ("bias" if what.endswith("_bias") else "weight")
    if what in ("gate_up_proj", "gate_up_proj_bias"):
        suffix = "bias" if what.endswith("_bias") else "weight"
        parts = (fused,) if fused in have else (f"{blk}ffn_gate_exps.{suffix}", f"{blk}ffn_up_exps.{suffix}")
        if not all(part in have for part in parts):
            return None
        dims = outermost(file, parts[0])
        rows = dims[1] if len(parts) == 2 else dims[1] // 2  # inner
        if suffix == "bias":
            return Joined((dims[0], 2 * rows), parts, "gate_up_bias")
        return Joined((dims[0], dims[2], 2 * rows), parts, "gate_up")
    if what == "down_proj" and blk + "ffn_down_exps.weight" in have:
        E, d, inner = outermost(file, blk + "ffn_down_exps.weight")
        return Joined((E, inner, d), (blk + "ffn_down_exps.weight",), "down")
    return None


GGUF = (GgufArchitecture("gpt-oss", "gpt_oss", GGUF_NAMES, keys=gguf_keys, joined=gguf_joined),)
# its softmax (with the sink column) runs in the model's dtype
VERIFY = Verification(O_PROJ, (FLOAT32_RMSNORM, FLOAT32_ROPE), eager_experts=True)
DESCRIPTION = Description(sinks=True, windows=alternating)
