"""One attention layer of a local Hugging Face checkpoint, as exact float64 inputs: X, the weights, scaling, mask, RoPE.

The public entry points: `load_layer`, `model_info`, `tokenize`. Nothing here touches the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attncli.core.variants import Rope
from attncli.errors import AttnError
from attncli.sources.checkpoints import bert, gpt2, llama
from attncli.sources.checkpoints.config import read_config, read_raw
from attncli.sources.checkpoints.describe import describe_config
from attncli.sources.checkpoints.gguf import gguf_path, open_model
from attncli.sources.checkpoints.safetensors import FLOAT_NAMES, Checkpoint
from attncli.sources.checkpoints.source import TensorSource
from attncli.sources.checkpoints.tokens import CheckpointTokenizer, Tokens, load_tokenizer, not_applied_note, tokenize_text

__all__ = ["LayerCase", "Tokens", "load_layer", "model_info", "tokenize"]

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
    rope: Rope | None  # core's, with the checkpoint's frequencies
    dtype: str  # how the weights are stored, e.g. "bfloat16"
    notes: tuple[str, ...]  # provenance, for the header
    gguf: str | None = None  # the GGUF file read, when the model is one
    tokens_from: str = "its tokenizer.json"


def checkpoint_tokenizer(model: Path) -> CheckpointTokenizer:
    """The tokenizer of a checkpoint folder (tokenizer.json) or of a GGUF file (its metadata)."""
    gguf = gguf_path(model)
    if gguf is None:
        return load_tokenizer(model)
    from attncli.sources.checkpoints.gguf import GgufFile
    from attncli.sources.checkpoints.gguf_tokens import gguf_tokenizer

    return gguf_tokenizer(GgufFile(gguf))


def tokenize(folder: Path, text: str, *, special_tokens: bool = True) -> Tokens:
    """The checkpoint's tokens of `text`: (ids, labels), with `.positions` from 1."""
    return tokenize_text(checkpoint_tokenizer(folder).tokenizer, text, special_tokens=special_tokens)


def load_layer(folder: Path, *, layer: int, text: str, special_tokens: bool = True) -> LayerCase:
    """Run `text` through layers 1 … layer−1 of the checkpoint in float64 and return layer `layer`'s attention inputs."""
    gguf = gguf_path(folder)
    checkpoint: TensorSource
    if gguf is not None:
        from attncli.sources.checkpoints.gguf_tokens import gguf_tokenizer

        model = open_model(gguf)
        cfg, checkpoint = model.cfg, model.checkpoint
    else:
        cfg = read_config(folder)
    if not 1 <= layer <= cfg.layers:
        raise AttnError(
            f"layer {layer} is out of range: the model has {cfg.layers} layers", key="layer", expected=f"1 to {cfg.layers}"
        )
    if gguf is not None:
        tokenizer, not_applied = gguf_tokenizer(model.file)
    else:
        tokenizer, not_applied = load_tokenizer(folder)
        checkpoint = Checkpoint(folder)
    ids, labels = tokenize_text(tokenizer, text, special_tokens=special_tokens)
    if not ids:
        raise AttnError("the sentence gives no tokens", key="sentence", expected="some text")
    if len(ids) > cfg.max_positions:
        raise AttnError(
            f"the sentence is {len(ids):,} tokens long, more than the model's {cfg.max_positions:,} positions",
            key="sentence",
            expected=f"at most {cfg.max_positions:,} tokens",
        )
    inputs = _ARCHITECTURES[cfg.model_type].layer_inputs(cfg, checkpoint, ids, layer)
    w = inputs.attention
    notes = inputs.notes
    if gguf is not None:  # say which matrix was stored how, in place of the one storage line
        notes = (*(n for n in notes if not n.startswith("weights stored as")), *model.checkpoint.provenance(layer))
    return LayerCase(
        folder=str(folder), model_type=cfg.model_type, layer=layer, layers=cfg.layers,
        token_ids=ids, labels=labels, X=inputs.X,
        heads=w.heads, kv_heads=w.kv_heads, head_dim=w.head_dim,
        W_Q=w.W_Q, W_K=w.W_K, W_V=w.W_V, b_Q=w.b_Q, b_K=w.b_K, b_V=w.b_V, W_O=w.W_O, b_O=w.b_O,
        divisor=w.divisor, causal=w.causal, window=w.window, rope=w.rope,
        dtype=inputs.dtype, notes=(*notes, *not_applied_note(not_applied)),
        gguf=None if gguf is None else str(gguf), tokens_from="its tokenizer.json" if gguf is None else "the GGUF metadata",
    )  # fmt: skip


def model_info(folder: Path) -> dict[str, Any]:
    """What a checkpoint folder or GGUF file holds and whether attncli can read it (with the reason when not)."""
    gguf = gguf_path(folder)
    if gguf is not None:
        from attncli.sources.checkpoints.gguf_data import gguf_info

        return gguf_info(gguf, str(folder))
    raw, _ = read_raw(folder)
    info: dict[str, Any] = {
        "folder": str(folder),
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
    info.update(describe_config(cfg))
    try:
        checkpoint = Checkpoint(folder)
        stored = checkpoint.stored_dtypes()
        floats = {FLOAT_NAMES[k]: n for k, n in stored.items() if k in FLOAT_NAMES}
        info["weights"] = checkpoint.described_by
        info["stored_dtype"] = max(floats, key=lambda k: floats[k]) if floats else None
    except AttnError as error:
        info["reason"] = str(error)
        return info
    if not (folder / "tokenizer.json").is_file():
        info["reason"] = f"{folder / 'tokenizer.json'}: no tokenizer.json in the checkpoint folder"
        return info
    info["supported"] = True
    return info
