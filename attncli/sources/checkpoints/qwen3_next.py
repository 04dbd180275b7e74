"""Qwen3-Next: gated attention on every `full_attention_interval`-th layer, Gated DeltaNet (linear attention) on the others, MoE.

As transformers' Qwen3NextDecoderLayer computes it: x → input_layernorm → token mixer → + x, then post_attention_layernorm →
MLP → + residual; every RMSNorm multiplies by (1 + w) (Qwen3NextRMSNorm), q_norm and k_norm too.
- Gated attention (Qwen3NextAttention): q_proj is twice as wide, each head's block [query | gate]; q_norm and k_norm per
  head, (1 + w), before RoPE; RoPE rotate-half on the first partial_rotary_factor (0.25) of each head; GQA; √d_k; causal;
  then each head's output × σ(gate) (the registry's output gate, core.variants.gates) before o_proj.
- Gated DeltaNet (Qwen3NextGatedDeltaNet), computed exactly here so that the next layers read the right residual stream:
  in_proj_qkvz and in_proj_ba give q, k, v, z per key head group and b, a per value head; q, k, v pass a causal depthwise
  conv1d (kernel linear_conv_kernel_dim) and SiLU; q and k are L2-normalised, q ÷ √d_k; β = σ(b), g = −e^A_log ·
  softplus(a + dt_bias); per value head a state S (d_k × d_v) from 0: S ← e^g·S, S ← S + k ⊗ β(v − Sᵀk), o = Sᵀq (the delta
  rule); o through RMSNorm (weight w) × SiLU(z), then out_proj. It has no softmax weights: asked for with --layer it is
  refused in one line naming its kind and the softmax layers.
- MLP: a mixture of experts (router softmax over the experts, top-k, renormalised with norm_topk_prob; each expert SwiGLU;
  a shared expert × σ(x·shared_expert_gate)) on layers (i + 1) % decoder_sparse_step == 0 not in mlp_only_layers, else
  SwiGLU of intermediate_size.
transformers runs the norms, RoPE, the softmax, the router and the delta rule in float32 even in a float64 model.
Dimension names: L tokens, d hidden, H heads, G kv heads, d_k head size; N_k, N_v the DeltaNet's key and value heads of
d_kl and d_vl numbers, E experts.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from attncli.core.variants import OutputGate, QkNorm, Rope
from attncli.errors import AttnError
from attncli.sources.checkpoints import deepseek, llama, moe
from attncli.sources.checkpoints.blocks import AttentionWeights, LayerInputs, Weights, activate, rms_norm, self_attention, through
from attncli.sources.checkpoints.config import (
    FLOAT32_QK_NORM,
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    MOST,
    O_PROJ,
    Description,
    ModelConfig,
    Verification,
    _Reader,
    _shown,
    llama_like,
    no_windows,
    with_family,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Joined, Metadata, outermost, renamed
from attncli.sources.checkpoints.source import TensorSource

KINDS = ("linear_attention", "full_attention")


class Qwen3NextSettings(NamedTuple):
    """What Qwen3-Next reads beyond the Llama-like keys."""

    kinds: tuple[str, ...]  # per layer, "linear_attention" (Gated DeltaNet) or "full_attention" (gated softmax attention)
    conv: int  # linear_conv_kernel_dim
    k_heads: int  # linear_num_key_heads N_k
    v_heads: int  # linear_num_value_heads N_v (a multiple of N_k)
    k_dim: int  # linear_key_head_dim d_kl
    v_dim: int  # linear_value_head_dim d_vl
    experts: int  # num_experts E (0: no MoE)
    top_k: int  # num_experts_per_tok
    moe_inner: int  # moe_intermediate_size
    shared_inner: int  # shared_expert_intermediate_size
    norm_topk: bool  # norm_topk_prob
    sparse_step: int  # decoder_sparse_step
    dense: tuple[int, ...]  # mlp_only_layers (from 0)

    def is_moe(self, index: int) -> bool:
        """Whether layer `index` (from 0) has the mixture of experts (transformers' Qwen3NextDecoderLayer rule)."""
        return index not in self.dense and self.experts > 0 and (index + 1) % self.sparse_step == 0

    def softmax_layers(self) -> list[int]:
        """The gated-attention layers, from 1."""
        return [i + 1 for i, kind in enumerate(self.kinds) if kind == "full_attention"]


DEFAULTS: dict[str, Any] = {
    "layers": 48, "hidden": 2048, "heads": 16, "kv": 2, "positions": 32768, "inter": 5632, "head_dim": 256,
}  # Qwen3NextConfig  # fmt: skip


def read_config(read: _Reader) -> ModelConfig[Qwen3NextSettings]:
    """Llama's keys with Qwen3-Next's defaults (partial_rotary_factor 0.25 when none is given), then its own."""
    cfg = llama_like(read, "qwen3_next", DEFAULTS, windows=no_windows, attention_bias=True)
    parameters = read.raw.get("rope_parameters")
    if "partial_rotary_factor" not in read.raw and not (isinstance(parameters, dict) and "partial_rotary_factor" in parameters):
        assert cfg.rope is not None
        cfg = dataclasses.replace(cfg, rope=dataclasses.replace(cfg.rope, partial=0.25))  # transformers' default for qwen3_next
    kinds = read.raw.get("layer_types")
    if kinds is None:
        every = read.count("full_attention_interval", default=4, most=MOST["layers"])
        kinds = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(cfg.layers)]
    if not isinstance(kinds, list) or len(kinds) != cfg.layers or any(kind not in KINDS for kind in kinds):
        raise read.fail("layer_types", f"found {_shown(kinds)}", f"a list of {cfg.layers} of linear_attention / full_attention")
    k_heads = read.count("linear_num_key_heads", default=16, most=MOST["heads"])
    v_heads = read.count("linear_num_value_heads", default=32, most=MOST["heads"])
    if v_heads % k_heads:
        raise read.fail("linear_num_value_heads", f"{v_heads} value heads for {k_heads} key heads", "a multiple of linear_num_key_heads")
    experts = read.count("num_experts", default=512, minimum=0, most=MOST["heads"])
    dense = read.raw.get("mlp_only_layers") or []
    if not isinstance(dense, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < cfg.layers for i in dense):
        raise read.fail("mlp_only_layers", f"found {_shown(dense)}", f"a list of layer indices from 0 to {cfg.layers - 1}")
    settings = Qwen3NextSettings(
        kinds=tuple(kinds), conv=read.count("linear_conv_kernel_dim", default=4, most=MOST["positions"]), k_heads=k_heads,
        v_heads=v_heads, k_dim=read.count("linear_key_head_dim", default=128, most=MOST["head_dim"]),
        v_dim=read.count("linear_value_head_dim", default=128, most=MOST["head_dim"]), experts=experts,
        top_k=read.count("num_experts_per_tok", default=min(10, max(experts, 1)), most=max(experts, 1)),
        moe_inner=read.count("moe_intermediate_size", default=512, most=MOST["inner"]),
        shared_inner=read.count("shared_expert_intermediate_size", default=512, minimum=0, most=MOST["inner"]),
        norm_topk=read.flag("norm_topk_prob", True), sparse_step=read.count("decoder_sparse_step", default=1, most=MOST["layers"]),
        dense=tuple(dense),
    )  # fmt: skip
    return with_family(cfg, settings)


def _norm(cfg: ModelConfig[Qwen3NextSettings], w: Weights, name: str, x: np.ndarray) -> np.ndarray:
    """Qwen3-Next's RMSNorm: x / rms · (1 + w)."""
    return rms_norm(x, 1.0 + w.get(name + ".weight", (cfg.hidden_size,)), cfg.norm_eps)


def _attention(cfg: ModelConfig[Qwen3NextSettings], w: Weights, index: int, rope: Rope) -> AttentionWeights:
    """Layer `index`'s gated attention: q_proj's query halves as W_Q, its gate halves as the output gate, (1 + w) QK-norm."""
    d, H, G, d_k = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim
    p = f"layers.{index}.self_attn."
    both, both_b = w.linear(p + "q_proj", d, 2 * H * d_k, cfg.qkv_bias)  # (d, H·2d_k): per head [query | gate]
    halves = both.reshape(d, H, 2, d_k)  # (d, H, 2, d_k)
    W_Q, W_gate = (np.ascontiguousarray(halves[:, :, i, :].reshape(d, H * d_k)) for i in (0, 1))  # (d, H·d_k) each
    if both_b is not None:  # a gate with a bias is not what the output gate computes (σ(X·W_gate))
        raise AttnError("q_proj has a bias: attncli reads Qwen3-Next's gated attention without one", key="attention_bias",
                        expected="false, as Qwen3-Next has it")  # fmt: skip
    W_K, _ = w.linear(p + "k_proj", d, G * d_k, False)
    W_V, _ = w.linear(p + "v_proj", d, G * d_k, False)
    W_O, _ = w.linear(p + "o_proj", H * d_k, d, False)
    norm = QkNorm(w.get(p + "q_norm.weight", (d_k,)), w.get(p + "k_norm.weight", (d_k,)), eps=cfg.norm_eps, over="head", offset=1.0)
    return AttentionWeights(
        W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=None, b_K=None, b_V=None, W_O=W_O, b_O=None, heads=H, kv_heads=G, head_dim=d_k,
        divisor=math.sqrt(d_k), causal=True, window=None, rope=rope, qk_norm=norm, variants=(OutputGate(W_gate),),
    )  # fmt: skip


def _sigmoid(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.exp(-np.logaddexp(0.0, -x))
    return out


def gated_delta_net(cfg: ModelConfig[Qwen3NextSettings], w: Weights, index: int, x: np.ndarray) -> np.ndarray:
    """(L, d) layer `index`'s Gated DeltaNet on its normalised input x (L, d): the delta rule, token by token, exactly."""
    s = cfg.family
    L, r = x.shape[0], s.v_heads // s.k_heads  # r value heads per key head
    K_all, V_all = s.k_heads * s.k_dim, s.v_heads * s.v_dim
    p = f"layers.{index}.linear_attn."
    qkvz = llama._linear(w, p + "in_proj_qkvz", x, 2 * K_all + 2 * V_all, False).reshape(L, s.k_heads, -1)  # (L, N_k, 2d_kl + 2r·d_vl)
    ba = llama._linear(w, p + "in_proj_ba", x, 2 * s.v_heads, False).reshape(L, s.k_heads, 2 * r)  # (L, N_k, 2r)
    edges = np.cumsum([s.k_dim, s.k_dim, r * s.v_dim])
    q, k, v, z = np.split(qkvz, edges, axis=-1)  # (L, N_k, d_kl) ×2, (L, N_k, r·d_vl) ×2
    b, a = ba[..., :r].reshape(L, s.v_heads), ba[..., r:].reshape(L, s.v_heads)  # (L, N_v) each
    mixed = np.concatenate([q.reshape(L, K_all), k.reshape(L, K_all), v.reshape(L, V_all)], axis=-1)  # (L, C)
    C = mixed.shape[1]
    kernel = w.get(p + "conv1d.weight", (C, 1, s.conv))[:, 0, :]  # (C, K): a causal depthwise convolution
    padded = np.vstack([np.zeros((s.conv - 1, C)), mixed])  # (K − 1 + L, C)
    conv = sum(kernel[:, j] * padded[j : j + L] for j in range(s.conv))  # (L, C) out[t] = Σ_j w_j · x[t − (K − 1) + j]
    mixed = activate("silu", np.asarray(conv))  # (L, C)
    q = np.repeat(mixed[:, :K_all].reshape(L, s.k_heads, s.k_dim), r, axis=1)  # (L, N_v, d_kl): value head j reads key head ⌊j/r⌋
    k = np.repeat(mixed[:, K_all : 2 * K_all].reshape(L, s.k_heads, s.k_dim), r, axis=1)  # (L, N_v, d_kl)
    v = mixed[:, 2 * K_all :].reshape(L, s.v_heads, s.v_dim)  # (L, N_v, d_vl)
    q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6) / math.sqrt(s.k_dim)  # L2-normalised, ÷ √d_kl
    k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    beta = _sigmoid(b)  # (L, N_v)
    A = np.exp(w.get(p + "A_log", (s.v_heads,)))  # (N_v,)
    g = -A * np.logaddexp(0.0, a + w.get(p + "dt_bias", (s.v_heads,)))  # (L, N_v) log of each step's decay, ≤ 0
    state = np.zeros((s.v_heads, s.k_dim, s.v_dim))  # (N_v, d_kl, d_vl) S, one per value head
    out = np.empty((L, s.v_heads, s.v_dim))  # (L, N_v, d_vl)
    for t in range(L):
        state *= np.exp(g[t])[:, None, None]  # S ← e^g·S
        recalled = np.einsum("hk,hkv->hv", k[t], state)  # (N_v, d_vl) Sᵀk: what the state holds for this key
        delta = (v[t] - recalled) * beta[t][:, None]  # (N_v, d_vl) β(v − Sᵀk)
        state += k[t][:, :, None] * delta[:, None, :]  # S ← S + k ⊗ β(v − Sᵀk)
        out[t] = np.einsum("hk,hkv->hv", q[t], state)  # (N_v, d_vl) Sᵀq
    normed = rms_norm(out, w.get(p + "norm.weight", (s.v_dim,)), cfg.norm_eps)  # (L, N_v, d_vl) per value head
    gated = normed * activate("silu", z.reshape(L, s.v_heads, s.v_dim))  # (L, N_v, d_vl)
    return llama._linear(w, p + "out_proj", gated.reshape(L, V_all), cfg.hidden_size, False)  # (L, d)


def _swiglu(w: Weights, prefix: str, x: np.ndarray, inner: int, d: int) -> np.ndarray:
    """(L, d) down(silu(gate(x))·up(x)) of the MLP under `prefix`."""
    hidden = activate("silu", llama._linear(w, prefix + "gate_proj", x, inner, False)) * llama._linear(w, prefix + "up_proj", x, inner, False)
    return llama._linear(w, prefix + "down_proj", hidden, d, False)


def _mlp(cfg: ModelConfig[Qwen3NextSettings], w: Weights, index: int, x: np.ndarray) -> np.ndarray:
    """(L, d) layer `index`'s MLP: the mixture of experts with its shared expert, or a dense SwiGLU."""
    s, d = cfg.family, cfg.hidden_size
    p = f"layers.{index}.mlp."
    if not s.is_moe(index):
        return _swiglu(w, p, x, cfg.intermediate_size, d)
    logits = llama._linear(w, p + "gate", x, s.experts, False)  # (L, E)
    if s.norm_topk:  # softmax over all, top-k, renormalised = a softmax over the chosen logits
        routing = moe.top_k_softmax(logits, s.top_k, layer=index + 1)
    else:
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)  # (L, E)
        chosen = np.argsort(-probs, axis=-1, kind="stable")[:, : s.top_k]  # (L, k)
        routing = moe.Routing(index + 1, chosen, np.take_along_axis(probs, chosen, axis=-1), s.experts)
    out = np.zeros_like(x)  # (L, d)
    for e in np.unique(routing.experts):
        tokens, slot = np.nonzero(routing.experts == e)
        out[tokens] += _swiglu(w, f"{p}experts.{e}.", x[tokens], s.moe_inner, d) * routing.weights[tokens, slot][:, None]
    if s.shared_inner:
        gate = _sigmoid(llama._linear(w, p + "shared_expert_gate", x, 1, False))  # (L, 1)
        out += gate * _swiglu(w, p + "shared_expert.", x, s.shared_inner, d)
    return out


def _layer(cfg: ModelConfig[Qwen3NextSettings], w: Weights, index: int, h: np.ndarray, rope: Rope) -> np.ndarray:
    """(L, d) the residual after layer `index`: its token mixer (gated attention or Gated DeltaNet), then its MLP."""
    p = f"layers.{index}."
    x = _norm(cfg, w, p + "input_layernorm", h)  # (L, d)
    mixed = gated_delta_net(cfg, w, index, x) if cfg.family.kinds[index] == "linear_attention" else self_attention(x, _attention(cfg, w, index, rope))
    h = h + mixed  # (L, d)
    out: np.ndarray = h + _mlp(cfg, w, index, _norm(cfg, w, p + "post_attention_layernorm", h))
    return out


def layer_inputs(cfg: ModelConfig[Qwen3NextSettings], checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
    """X = input_layernorm ((1 + w) RMSNorm) of the residual entering `layer` (from 1), a gated-attention layer, and its weights."""
    s = cfg.family
    if s.kinds[layer - 1] != "full_attention":
        softmax = ", ".join(map(str, s.softmax_layers())) or "none"
        raise AttnError(
            f"layer {layer} is a Gated DeltaNet layer (linear attention by the delta rule, a state updated token by token): it has no "
            "softmax attention weights to show", key="layer", expected=f"one of the gated softmax-attention layers: {softmax}",
        )  # fmt: skip
    w, rope = llama.weights_and_rope(cfg, checkpoint)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    for index in range(layer - 1):
        h = _layer(cfg, w, index, h, rope)
    index = layer - 1
    X = _norm(cfg, w, f"layers.{index}.input_layernorm", h)  # (L, d)
    attention = _attention(cfg, w, index, rope)
    dtype = w.dtype(f"layers.{index}.self_attn.q_proj.weight")
    deltas = [i + 1 for i in range(index) if s.kinds[i] == "linear_attention"]
    first = (f"X = input_layernorm ((1 + w) RMSNorm) of the residual entering layer {layer}: token embeddings{through(layer)}"
             + (f"; {'layer' if len(deltas) == 1 else 'layers'} {', '.join(map(str, deltas))} {'is' if len(deltas) == 1 else 'are'} "
                "Gated DeltaNet (linear attention by the delta rule), computed exactly" if deltas else ""))  # fmt: skip
    notes = (
        *llama.notes(cfg, layer, rope, attention, dtype, first=first),
        "gated attention: q_proj gives each head its query and a gate; the head's output × σ(X·W_gate) before o_proj",
    )
    return LayerInputs(X=X, attention=attention, dtype=dtype, notes=notes)


def mechanisms(cfg: ModelConfig[Qwen3NextSettings], folder: Path, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of Qwen3-Next beyond the mechanisms every family is described by (describe.py)."""
    s = cfg.family
    deltas = [i + 1 for i, kind in enumerate(s.kinds) if kind == "linear_attention"]
    moe_layers = [i + 1 for i in range(cfg.layers) if s.is_moe(i)]
    return [
        f"gated attention on layers {', '.join(map(str, s.softmax_layers()))}: each head's output × σ(X·W_gate) (q_proj's second half "
        "per head) before o_proj",
        f"Gated DeltaNet (linear attention by the delta rule, no softmax) on layers {', '.join(map(str, deltas)) or 'none'}: "
        f"{s.v_heads} value heads of {s.v_dim} over {s.k_heads} key heads of {s.k_dim}, a causal conv1d of {s.conv}, a state of "
        f"{s.k_dim} × {s.v_dim} per value head instead of a cache that grows",
        f"the mixture of experts on layers {', '.join(map(str, moe_layers)) or 'none'}, with a shared expert behind a sigmoid gate; "
        "a dense SwiGLU MLP on the others",
        "(1 + w) RMSNorm before attention and MLP, and in q_norm and k_norm",
    ]


def shapes(cfg: ModelConfig[Qwen3NextSettings]) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks: the embeddings, and the first gated-attention layer's q_proj (twice as wide) and k_proj."""
    d, H, G, d_k = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim
    first = cfg.family.kinds.index("full_attention") if "full_attention" in cfg.family.kinds else None
    found: dict[str, tuple[int | None, ...]] = {"embed_tokens.weight": (None, d)}
    if first is not None:
        found[f"layers.{first}.self_attn.q_proj.weight"] = (2 * H * d_k, d)
        found[f"layers.{first}.self_attn.k_proj.weight"] = (G * d_k, d)
    return found


FLOAT32_DELTA_RULE = "the Gated DeltaNet's delta rule and its gated RMSNorm run in float32"
VERIFY = Verification(O_PROJ, (FLOAT32_QK_NORM, FLOAT32_ROPE, FLOAT32_SOFTMAX, FLOAT32_DELTA_RULE), eager_experts=True)
DESCRIPTION = Description(qk_norm="per head, (1 + w) RMSNorm")


# -- GGUF: Qwen3NextModel (Qwen2MoeModel's converter) adds 1 to every norm but the Gated DeltaNet's (ggml multiplies by the
# weight); regroups in_proj_qkvz, per key head [q | k | v | z], into attn_qkv (all q, all k, all v) and attn_gate (all z);
# stores A_log as ssm_a = −exp(A_log), dt_bias as ssm_dt.bias, the conv1d kernel squeezed to (C, K); merges the experts
GGUF_NAMES = (
    *renamed(llama.GGUF_NAMES, "post_attention_layernorm"),
    *llama.GGUF_QK_NORMS,
    (r"layers\.(\d+)\.post_attention_layernorm\.weight", r"blk.\1.post_attention_norm.weight"),
    (r"layers\.(\d+)\.linear_attn\.in_proj_ba\.weight", r"blk.\1.ssm_ba.weight"),
    (r"layers\.(\d+)\.linear_attn\.out_proj\.weight", r"blk.\1.ssm_out.weight"),
    (r"layers\.(\d+)\.linear_attn\.norm\.weight", r"blk.\1.ssm_norm.weight"),
    (r"layers\.(\d+)\.linear_attn\.dt_bias", r"blk.\1.ssm_dt.bias"),
    (r"layers\.(\d+)\.mlp\.gate\.weight", r"blk.\1.ffn_gate_inp.weight"),
    (r"layers\.(\d+)\.mlp\.shared_expert\.(gate|up|down)_proj\.weight", r"blk.\1.ffn_\2_shexp.weight"),
    (r"layers\.(\d+)\.mlp\.shared_expert_gate\.weight", r"blk.\1.ffn_gate_inp_shexp.weight"),
)


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """Qwen3-Next's config.json keys from a qwen3next file: the Gated DeltaNet's sizes from ssm.* (state_size the key head
    size, group_count the key heads, time_step_rank the value heads, inner_size all value heads' width); the layer kinds
    from full_attention_interval (llama.cpp: layer i from 0 is gated attention when (i + 1) % n = 0; 4 when absent);
    norm_topk_prob true (llama.cpp's graph renormalises); a layer without a router is a dense one (mlp_only_layers)."""
    layers = raw["num_hidden_layers"]
    every = file.count(a + "full_attention_interval", default=4)
    v_heads = file.count(a + "ssm.time_step_rank")
    inner = file.count(a + "ssm.inner_size")
    if inner % v_heads:
        raise file.fail(f"{inner} value numbers for {v_heads} value heads", key=a + "ssm.inner_size", expected=f"a multiple of {v_heads}")
    return {
        **llama.gguf_keys(file, a, raw, head_dim),
        "layer_types": ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(layers)],
        "linear_conv_kernel_dim": file.count(a + "ssm.conv_kernel"),
        "linear_key_head_dim": file.count(a + "ssm.state_size"),
        "linear_num_key_heads": file.count(a + "ssm.group_count"),
        "linear_num_value_heads": v_heads,
        "linear_value_head_dim": inner // v_heads,
        "num_experts": file.count(a + "expert_count"),
        "num_experts_per_tok": file.count(a + "expert_used_count"),
        "moe_intermediate_size": file.count(a + "expert_feed_forward_length"),
        "shared_expert_intermediate_size": file.count(a + "expert_shared_feed_forward_length", default=0, minimum=0),
        "norm_topk_prob": True,
        "mlp_only_layers": [i for i in range(layers) if f"blk.{i}.ffn_gate_inp.weight" not in file.tensors],
    }


def _qkvz(file: Metadata, qkv: str, gate: str) -> Joined:
    """in_proj_qkvz (N_k·(2d_kl + 2r·d_vl), d), per key head [q | k | v | z], from attn_qkv (all q | all k | all v) and attn_gate (all z)."""
    (rows, d), (z_rows, _) = outermost(file, qkv), outermost(file, gate)
    k_heads = file.count("qwen3next.ssm.group_count")
    k_all = k_heads * file.count("qwen3next.ssm.state_size")
    if rows != 2 * k_all + z_rows or z_rows % k_heads:
        raise file.fail(f"attn_qkv of {rows} rows beside attn_gate of {z_rows}", expected=f"2·{k_all} + {z_rows} rows, as ssm.* give")

    def regroup(fused: np.ndarray, z: np.ndarray) -> np.ndarray:
        parts = (fused[:k_all], fused[k_all : 2 * k_all], fused[2 * k_all :], z)  # each (N_k·width, d), key head by key head
        return np.concatenate([part.reshape(k_heads, -1, d) for part in parts], axis=1)  # (N_k, 2d_kl + 2r·d_vl, d)

    return Joined((rows + z_rows, d), (qkv, gate), "computed", compute=regroup)


def gguf_joined(file: Metadata, blk: str, rest: str) -> Joined | None:
    """The Gated DeltaNet's tensors the converter rearranged (in_proj_qkvz, conv1d, A_log), and the merged experts."""
    have = file.tensors
    if rest == "linear_attn.in_proj_qkvz.weight" and blk + "attn_qkv.weight" in have and blk + "attn_gate.weight" in have:
        return _qkvz(file, blk + "attn_qkv.weight", blk + "attn_gate.weight")
    if rest == "linear_attn.conv1d.weight" and blk + "ssm_conv1d.weight" in have:
        channels, kernel = outermost(file, blk + "ssm_conv1d.weight")  # stored (C, K), Hugging Face's (C, 1, K)
        return Joined((channels, 1, kernel), (blk + "ssm_conv1d.weight",), "computed", compute=lambda w: w)
    if rest == "linear_attn.A_log" and blk + "ssm_a" in have:
        return Joined(outermost(file, blk + "ssm_a"), (blk + "ssm_a",), "computed", compute=lambda a: _log_of_negated(file, blk + "ssm_a", a))
    if re.fullmatch(r"mlp\.experts\.\d+\.(gate|up|down)_proj\.weight", rest):
        return deepseek.gguf_joined(file, blk, rest)
    return None


def _log_of_negated(file: Metadata, name: str, a: np.ndarray) -> np.ndarray:
    """A_log = ln(−ssm_a): the converter stored −exp(A_log), float32's rounding of it (a relative 6e-8) comes back as 6e-8 in A_log."""
    if not np.all(a < 0):
        raise file.fail(f"{name} has a value ≥ 0", expected="−exp(A_log) < 0 for every value head, as the converter stores it")
    logged: np.ndarray = np.log(-a)
    return logged


GGUF = (GgufArchitecture("qwen3next", "qwen3_next", GGUF_NAMES, keys=gguf_keys, shifted_norms=True, kept_norms=r"blk\.\d+\.ssm_norm\.weight",
                         joined=gguf_joined),)  # fmt: skip
