"""One attention layer of a local Hugging Face checkpoint, as exact float64 inputs: X, the weights, scaling, mask, RoPE.

The public entry points: `load_layer`, `model_info`, `tokenize`. Nothing here touches the network.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attncli.arguments import shown_path
from attncli.checkpoints import bert, gpt2, llama, tokenizer_process
from attncli.checkpoints.config import SUPPORTED, ModelConfig, read_config, read_raw
from attncli.checkpoints.rope import RopeSpec, rope_spec
from attncli.checkpoints.safetensors import FLOAT_NAMES, Checkpoint
from attncli.checkpoints.tokens import Tokens, not_applied_note
from attncli.errors import AttnError

__all__ = ["LayerCase", "RopeSpec", "Tokens", "load_layer", "model_info", "tokenize"]

_ARCHITECTURES = {"gpt2": gpt2, "bert": bert, "llama": llama, "qwen2": llama, "mistral": llama}


@dataclass(frozen=True, eq=False)
class LayerCase:
    """Everything one attention layer of a real model computes with, in float64 and the row-vector convention."""

    folder: str
    model_type: str
    layer: int  # counted from 1
    layers: int
    token_ids: tuple[int, ...]
    labels: tuple[str, ...]
    X: np.ndarray  # (L, d_model) exactly what the layer's attention projects
    heads: int
    kv_heads: int
    head_dim: int
    W_Q: np.ndarray  # (d_model, H·d_k): Q = X·W_Q + b_Q
    W_K: np.ndarray  # (d_model, G·d_k)
    W_V: np.ndarray  # (d_model, G·d_k)
    b_Q: np.ndarray | None
    b_K: np.ndarray | None
    b_V: np.ndarray | None
    W_O: np.ndarray  # (H·d_k, d_model): out = concat·W_O + b_O
    b_O: np.ndarray | None
    divisor: float  # scores are divided by this
    causal: bool
    window: int | None  # query i sees keys i − window … i (with causal; |i − j| ≤ window without)
    rope: RopeSpec | None
    dtype: str  # how the weights are stored, e.g. "bfloat16"
    notes: tuple[str, ...]  # provenance, for the header


def tokenize(folder: Path, text: str, *, special_tokens: bool = True) -> Tokens:
    """The checkpoint's tokens of `text`: (ids, labels), with `.positions` from 1."""
    tokenized = tokenizer_process.tokenize(folder, text, special_tokens=special_tokens, max_tokens=tokenizer_process.MAX_TEXT_CHARACTERS)
    return Tokens(tokenized.ids, tokenized.labels)


def load_layer(folder: Path, *, layer: int, text: str, special_tokens: bool = True, max_cells: int | None = None) -> LayerCase:
    """Run `text` through layers 1 … layer−1 of the checkpoint in float64 and return layer `layer`'s attention inputs.

    With `max_cells`, a text whose heads × L × L attention cells pass it is refused as soon as its
    tokens are counted, before any layer is computed (each earlier layer holds as many cells).
    """
    cfg = read_config(folder)
    if not 1 <= layer <= cfg.layers:
        raise AttnError(
            f"layer {layer} is out of range: the model has {cfg.layers} layers", key="layer", expected=f"1 to {cfg.layers}"
        )
    widest = cfg.intermediate_size if layer > 1 else 0  # the earlier layers' MLPs hold L × intermediate numbers
    by_cells = cfg.max_positions
    if max_cells is not None:
        by_cells = min(math.isqrt(max_cells // cfg.heads), max_cells // widest if widest else by_cells)

    def too_long(count: int) -> AttnError:
        if count > cfg.max_positions:
            return AttnError(
                f"the sentence is {count:,} tokens long, more than the model's {cfg.max_positions:,} positions",
                key="sentence",
                expected=f"at most {cfg.max_positions:,} tokens",
            )
        if max_cells is not None and count * widest > max_cells:
            return AttnError(
                f"{count:,} tokens × {widest:,} (the MLP width of layers 1–{layer - 1}) = {count * widest:,} numbers, "
                f"more than the limit of {max_cells:,}",
                key="sentence",
                expected="a shorter sentence, an earlier layer, or raise the limit with --max-cells",
            )
        return too_many_cells(count, cfg.heads, max_cells or 0)

    tokenized = tokenizer_process.tokenize(
        folder, text, special_tokens=special_tokens, max_tokens=min(cfg.max_positions, by_cells), too_many=too_long
    )
    ids, labels, not_applied = tokenized.ids, tokenized.labels, tokenized.not_applied
    if not ids:
        raise AttnError("the sentence gives no tokens", key="sentence", expected="some text")
    checkpoint = Checkpoint(folder)
    with np.errstate(all="ignore"):  # an overflow is reported below, as what it is, not as numpy's warning
        inputs = _ARCHITECTURES[cfg.model_type].layer_inputs(cfg, checkpoint, ids, layer)
    if not np.isfinite(inputs.X).all():
        raise AttnError(
            f"the input of layer {layer} overflows float64: layers 1–{layer - 1} of the checkpoint give ±∞ or NaN for this sentence",
            file=str(folder),
            expected="weights whose products stay within float64",
        )
    w = inputs.attention
    return LayerCase(
        folder=shown_path(folder), model_type=cfg.model_type, layer=layer, layers=cfg.layers,
        token_ids=ids, labels=labels, X=inputs.X,
        heads=w.heads, kv_heads=w.kv_heads, head_dim=w.head_dim,
        W_Q=w.W_Q, W_K=w.W_K, W_V=w.W_V, b_Q=w.b_Q, b_K=w.b_K, b_V=w.b_V, W_O=w.W_O, b_O=w.b_O,
        divisor=w.divisor, causal=w.causal, window=w.window, rope=w.rope,
        dtype=inputs.dtype, notes=(*inputs.notes, *not_applied_note(not_applied)),
    )  # fmt: skip


def too_many_cells(tokens: int, heads: int, max_cells: int) -> AttnError:
    """The error for a sentence whose heads × L × L attention cells pass `max_cells`."""
    cells = heads * tokens**2
    return AttnError(
        f"{tokens:,} tokens × {tokens:,} × {heads} heads = {cells:,} attention cells, more than the limit of {max_cells:,}",
        key="sentence",
        expected="a shorter sentence, or raise the limit with --max-cells",
    )


def model_info(folder: Path) -> dict[str, Any]:
    """What a checkpoint folder holds and whether attncli can read it (with the reason when not)."""
    raw, _ = read_raw(folder)
    info: dict[str, Any] = {
        "folder": shown_path(folder),
        "model_type": raw.get("model_type"),
        "architectures": raw.get("architectures"),
        "supported": False,
        "reason": None,
    }
    try:
        cfg = read_config(folder)
    except AttnError as error:
        info["reason"] = str(error)
        return info
    info.update(_describe(cfg))
    try:
        checkpoint = Checkpoint(folder)
        check_shapes(cfg, checkpoint)
        stored = checkpoint.stored_dtypes()
        floats = {FLOAT_NAMES[k]: n for k, n in stored.items() if k in FLOAT_NAMES}
        info["weights"] = checkpoint.described_by
        info["stored_dtype"] = max(floats, key=lambda k: floats[k]) if floats else None
    except AttnError as error:
        info["reason"] = str(error)
        return info
    try:
        tokenizer_process.check(folder)
    except AttnError as error:
        info["reason"] = str(error)
        return info
    info["supported"] = True
    return info


def check_shapes(cfg: ModelConfig, checkpoint: Checkpoint) -> None:
    """The embedding table and layer 1's projections have the shapes config.json implies (from the headers: nothing is read)."""
    from attncli.checkpoints.blocks import Weights

    d, H, G, d_k, inner = cfg.hidden_size, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.intermediate_size
    gpt2_shapes = {"wte.weight": (None, d), "h.0.attn.c_attn.weight": (d, 3 * d), "h.0.mlp.c_fc.weight": (d, inner)}
    bert_shapes = {
        "embeddings.word_embeddings.weight": (None, d),
        "encoder.layer.0.attention.self.query.weight": (d, d),
        "encoder.layer.0.intermediate.dense.weight": (inner, d),
    }
    llama_shapes = {
        "embed_tokens.weight": (None, d),
        "layers.0.self_attn.q_proj.weight": (H * d_k, d),
        "layers.0.self_attn.k_proj.weight": (G * d_k, d),
        "layers.0.mlp.gate_proj.weight": (inner, d),
    }
    probe, prefixes, shapes = {
        "gpt2": ("wte.weight", ("", "transformer."), gpt2_shapes),
        "bert": ("embeddings.word_embeddings.weight", ("bert.", ""), bert_shapes),
    }.get(cfg.model_type, ("embed_tokens.weight", ("model.", ""), llama_shapes))
    weights = Weights(checkpoint, probe=probe, prefixes=prefixes)
    for name, implied in shapes.items():
        full = weights.prefix + name
        stored = checkpoint.entry(full).shape
        if len(stored) != len(implied) or any(want is not None and have != want for have, want in zip(stored, implied)):
            shown = ["any" if want is None else want for want in implied]
            raise AttnError(f"tensor '{full}' has shape {list(stored)} but config.json implies {shown}", file=str(checkpoint.file_of(full)))


def _describe(cfg: ModelConfig) -> dict[str, Any]:
    rope = None
    if cfg.rope is not None:
        spec = rope_spec(cfg.rope, cfg.head_dim)
        rope = {"theta": spec.theta, "scaling": spec.scaling, "style": spec.style, "inv_freq": spec.inv_freq.tolist()}
    windows = sorted({w for w in cfg.windows if w is not None})
    return {
        "layers": cfg.layers,
        "hidden_size": cfg.hidden_size,
        "heads": cfg.heads,
        "kv_heads": cfg.kv_heads,
        "head_dim": cfg.head_dim,
        "max_positions": cfg.max_positions,
        "causal": cfg.causal,
        "activation": cfg.activation,
        "dtype": cfg.dtype,
        "rope": rope,
        "sliding_window": windows[0] if windows else None,  # transformers' spelling: keys i − w + 1 … i
        "sliding_layers": [i + 1 for i, w in enumerate(cfg.windows) if w is not None],
        "supported_types": list(SUPPORTED),
    }
