"""One attention layer of a local Hugging Face checkpoint, as exact float64 inputs: X, the weights, scaling, mask, RoPE.

The public entry points: `load_layer`, `model_info`, `tokenize`. Nothing here touches the network.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attncli.core.variants import LearnedSink, QkNorm, Rope, SoftCap, Variant
from attncli.core.variants.mla import Mla
from attncli.errors import AttnError, option
from attncli.sources.arguments import shown_path
from attncli.sources.checkpoints import bart, tokenizer_process
from attncli.sources.checkpoints.config import MULTIMODAL_PREFIXES, ModelConfig, read_raw, text_stack
from attncli.sources.checkpoints.families import (
    ARCHITECTURES,
    ENCODER_DECODERS,
    check_shapes,
    layer_reader,
    read_config,
)
from attncli.sources.checkpoints.gguf import OLLAMA_PREFIX, GgufModel, gguf_path, model_config, tensors_of
from attncli.sources.checkpoints.tokenizer_process import Tokenized
from attncli.sources.checkpoints.tokens import Tokens, encode, not_applied_note

__all__ = ["LayerCase", "Tokens", "load_layer", "model_info", "tokenize"]



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
    W_Q: np.ndarray | None  # (d_model, H·d_k): Q = X·W_Q + b_Q; None under multi-head latent attention
    W_K: np.ndarray | None  # (d_model, G·d_k)
    W_V: np.ndarray | None  # (d_model, G·d_k)
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
    qk_norm: QkNorm | None = None  # Qwen3, OLMo 2: RMSNorm of q and k before RoPE
    attention: str | None = None  # an encoder–decoder's: "encoder", "decoder" or "cross"; None for one stack
    context_ids: tuple[int, ...] | None = None  # cross-attention: the source's tokens, whose encoding gives keys and values
    context_labels: tuple[str, ...] | None = None
    X_kv: np.ndarray | None = None  # (L_k, d_model) the encoder's output, which the keys and values project
    softcap: SoftCap | None = None  # Gemma 2's attn_logit_softcapping
    sink: LearnedSink | None = None  # gpt-oss's learned sinks, one logit per head
    layer_kind: str | None = None  # "sliding" or "global" in a model whose layers differ (Gemma 2, gpt-oss), else None
    mla: Mla | None = None  # DeepSeek's multi-head latent attention: the latent projections instead of W_Q, W_K, W_V
    variants: tuple[Variant, ...] = ()  # any other registry variant of the layer (blocks.AttentionWeights.variants: an output gate)
    kv_from: int | None = None  # the layer (from 1) whose keys and values it reuses (Gemma 3n's KV sharing: X_kv is that layer's input)
    chunk: int | None = None  # Llama 4's chunked attention: query i sees the keys of its own chunk of positions only
    name: str = ""  # the model's name as a post shows it (model_name): GGUF's general.name, else the folder's or file's name


MAX_NAME = 80  # characters of a model's name shown; a GGUF file's general.name is untrusted text of any length


def model_name(model: Path, named: object = None) -> str:
    """The model's name for a header, never a path: `named` (a GGUF file's general.name) when it is text, else the name of
    the folder or of the file without .gguf (ollama:NAME[:TAG]'s NAME[:TAG]), else "the model"."""
    if isinstance(named, str) and " ".join(named.split()):
        text = " ".join(named.split())  # no line breaks or runs of spaces inside a header's line
        return text if len(text) <= MAX_NAME else text[: MAX_NAME - 1] + "…"
    text = str(model)
    if text.startswith(OLLAMA_PREFIX):
        return text[len(OLLAMA_PREFIX) :] or "the model"
    path = model.resolve() if model.name in ("", "..") else model  # "." and ".." name no folder: the one they are
    name = path.stem if path.suffix.lower() == ".gguf" else path.name
    return shown_path(name) or "the model"


def checkpoint_tokens(
    model: Path, text: str, *, special_tokens: bool, max_tokens: int, too_many: Callable[[int], AttnError] | None = None
) -> Tokenized:
    """The tokens of `text` as the model's forward pass receives them, and what the tokenizer file asked for that was left out.

    A folder's tokenizer.json runs in a bounded child process (tokenizer_process: the file is a
    program as much as data); a GGUF file's tokenizer is built by attncli from the metadata's
    vocabulary and merges with fixed pieces, and runs here. More than `max_tokens` tokens is
    `too_many(count)`.
    """
    gguf = gguf_path(model)
    if gguf is None:
        return tokenizer_process.tokenize(model, text, special_tokens=special_tokens, max_tokens=max_tokens, too_many=too_many)
    from attncli.sources.checkpoints.gguf import open_file
    from attncli.sources.checkpoints.gguf_tokens import cached_tokenizer

    tokenizer_process.check_text(text)

    def name() -> str:
        # the header holds the vocabulary, the merges and the special tokens: a file with the same header bytes has the same
        # tokenizer, which may have tokenized this text before (the file is opened once per command: the layer reads it next)
        return open_file(gguf).header.sha256

    def tokenized() -> Tokenized:
        tokenizer, not_applied = cached_tokenizer(gguf)
        (ids, labels), pieces, special_ids = encode(tokenizer, text, special_tokens=special_tokens)
        return Tokenized(ids, labels, pieces, not_applied, tokenizer.get_vocab_size(with_added_tokens=False), special_ids)

    return tokenizer_process.through_cache(name, text, special_tokens, max_tokens, too_many, tokenized)


def tokenize(folder: Path, text: str, *, special_tokens: bool = True) -> Tokens:
    """The checkpoint's tokens of `text`: (ids, labels), with `.positions` from 1."""
    tokenized = checkpoint_tokens(folder, text, special_tokens=special_tokens, max_tokens=tokenizer_process.MAX_TEXT_CHARACTERS)
    return Tokens(tokenized.ids, tokenized.labels)


def load_layer(
    folder: Path,
    *,
    layer: int,
    text: str,
    special_tokens: bool = True,
    max_cells: int | None = None,
    target: str | None = None,
    attention: str | None = None,
    first: int | None = None,
    held: int | None = None,
) -> LayerCase:
    """Run `text` through layers 1 … layer−1 of the checkpoint in float64 and return layer `layer`'s attention inputs.

    With `first`, only the text's first tokens (decode's run before a longrope switch: api.longrope_prefix).

    With `max_cells`, a text whose heads × L × L attention cells pass it is refused as soon as its
    tokens are counted, before any layer is computed. `held` is how many heads' cells the command holds
    (`run --head 3` one: the engine computes the others in one buffer for their outputs); None: every head.
    An earlier layer computes each head in one buffer and keeps none of its cells.
    An encoder–decoder (BART) also takes the `target` text the decoder has produced so far, and
    `attention` says which of its three attentions layer `layer` means (bart.chosen_attention).
    """
    cfg, model = model_config(folder)
    if cfg.model_type in ENCODER_DECODERS:
        return _encoder_decoder_layer(folder, cfg, layer=layer, text=text, target=target, attention=attention, special_tokens=special_tokens,
                                      max_cells=max_cells, model=model)  # fmt: skip
    _one_stack(cfg, target, attention)
    if not 1 <= layer <= cfg.layers:
        raise AttnError(
            f"layer {layer} is out of range: the model has {cfg.layers} layers", key="layer", expected=f"1 to {cfg.layers}"
        )
    widest = cfg.intermediate_size if layer > 1 else 0  # the earlier layers' MLPs hold L × intermediate numbers
    heads = cfg.heads if held is None else min(held, cfg.heads)
    tokenized = _bounded_tokens(folder, cfg, text, "sentence", special_tokens, max_cells, heads=heads, widest=widest, layer=layer, what="the sentence")
    ids, labels, not_applied = tokenized.ids, tokenized.labels, tokenized.not_applied
    if first is not None:
        ids, labels = ids[:first], labels[:first]
    checkpoint = tensors_of(folder, model)
    with np.errstate(all="ignore"):  # an overflow is reported below, as what it is, not as numpy's warning
        inputs = layer_reader(cfg.model_type)(cfg, checkpoint, ids, layer)
    if not np.isfinite(inputs.X).all():
        raise AttnError(
            f"the input of layer {layer} overflows float64: layers 1–{layer - 1} of the checkpoint give ±∞ or NaN for this sentence",
            file=str(folder),
            expected="weights whose products stay within float64",
        )
    w = inputs.attention
    notes = inputs.notes
    if model is not None:  # a GGUF file: say which matrix was stored how, in place of the one storage line
        notes = (*(n for n in notes if not n.startswith("weights stored as")), *model.checkpoint.provenance(layer))
    return LayerCase(
        folder=shown_path(folder), model_type=cfg.model_type, layer=layer, layers=cfg.layers,
        token_ids=ids, labels=labels, X=inputs.X,
        heads=w.heads, kv_heads=w.kv_heads, head_dim=w.head_dim,
        W_Q=w.W_Q, W_K=w.W_K, W_V=w.W_V, b_Q=w.b_Q, b_K=w.b_K, b_V=w.b_V, W_O=w.W_O, b_O=w.b_O,
        divisor=w.divisor, causal=w.causal, window=w.window, rope=w.rope,
        dtype=inputs.dtype, notes=(*notes, *not_applied_note(not_applied)),
        gguf=None if model is None else model.file.where, tokens_from="its tokenizer.json" if model is None else "the GGUF metadata",
        qk_norm=w.qk_norm, softcap=w.softcap, sink=w.sink, layer_kind="chunked" if w.chunk is not None else _layer_kind(cfg, layer), mla=w.mla,
        variants=w.variants, chunk=w.chunk,
        X_kv=inputs.X_kv, context_labels=None if inputs.X_kv is None else labels, kv_from=inputs.kv_from,  # Gemma 3n's shared layers
        name=model_name(folder, None if model is None else model.file.value("general.name")),
    )  # fmt: skip


def _layer_kind(cfg: ModelConfig, layer: int) -> str | None:
    """'sliding' or 'global' when some layers of the model slide and others do not; None when all are alike."""
    if len({w is None for w in cfg.windows}) < 2:
        return None
    return "global" if cfg.windows[layer - 1] is None else "sliding"


def _one_stack(cfg: ModelConfig, target: str | None, attention: str | None) -> None:
    """Refuse what only an encoder–decoder takes: a target text, or an attention other than the model's one."""
    if target is not None:
        raise AttnError(
            f"a {cfg.model_type} model reads one text: a target text is for an encoder–decoder ({', '.join(ENCODER_DECODERS)})",
            key="target",
            expected=f"the sentence alone, or a model of type {', '.join(ENCODER_DECODERS)}",
        )
    own = "decoder" if cfg.causal else "encoder"
    if attention is not None and attention != own:
        raise AttnError(
            f"a {cfg.model_type} model has one attention per layer, its {own}'s", key="attention", expected=f"{own}, or leave it out"
        )


def _encoder_decoder_layer(
    folder: Path, cfg: ModelConfig, *, layer: int, text: str, target: str | None, attention: str | None, special_tokens: bool, max_cells: int | None,
    model: GgufModel | None = None,
) -> LayerCase:
    """Layer `layer` of the encoder (the source's self-attention) or of the decoder (its causal self-attention, or its cross-attention)."""
    family = ARCHITECTURES[cfg.model_type]  # BART's or T5's module: the stacks, the decoder's input, the layer
    chosen = bart.chosen_attention(attention, target is not None)
    stack = family.stacks(cfg)[bart.stack_of(chosen)]
    if not 1 <= layer <= stack.layers:
        raise AttnError(
            f"layer {layer} is out of range: the {stack.name} has {stack.layers} layers", key="layer", expected=f"1 to {stack.layers}"
        )
    source = _bounded_tokens(folder, cfg, text, "sentence", special_tokens, max_cells, heads=max(cfg.heads, cfg.encoder_heads))
    ids, labels = source.ids, source.labels
    target_ids: tuple[int, ...] = ()
    target_labels: tuple[str, ...] = ()
    if target is not None:
        tokens = _bounded_tokens(folder, cfg, target, "target", special_tokens, max_cells, heads=cfg.heads)
        start = cfg.decoder_start_token_id
        start_label = next((label for i, label in zip(source.ids + tokens.ids, source.labels + tokens.labels) if i == start), f"<id {start}>")
        target_ids = family.decoder_ids(cfg, tokens.ids)
        target_labels = (start_label, *tokens.labels[: len(target_ids) - 1])
        if len(target_ids) > cfg.max_positions:
            raise AttnError(
                f"the target is {len(target_ids):,} tokens long with its start token, more than the model's {cfg.max_positions:,} positions",
                key="target", expected=f"at most {cfg.max_positions - 1:,} tokens",
            )  # fmt: skip
    with np.errstate(all="ignore"):
        inputs = family.layer_inputs(cfg, tensors_of(folder, model), ids, layer, attention=chosen, target_ids=target_ids)
    if not (np.isfinite(inputs.X).all() and (inputs.X_kv is None or np.isfinite(inputs.X_kv).all())):
        raise AttnError(
            f"the input of {stack.name} layer {layer} overflows float64 for this text", file=str(folder), expected="weights whose products stay within float64"
        )
    w = inputs.attention
    queries_ids, queries = (ids, labels) if chosen == "encoder" else (target_ids, target_labels)
    return LayerCase(
        folder=shown_path(folder), model_type=cfg.model_type, layer=layer, layers=stack.layers,
        token_ids=queries_ids, labels=queries, X=inputs.X,
        heads=w.heads, kv_heads=w.kv_heads, head_dim=w.head_dim,
        W_Q=w.W_Q, W_K=w.W_K, W_V=w.W_V, b_Q=w.b_Q, b_K=w.b_K, b_V=w.b_V, W_O=w.W_O, b_O=w.b_O,
        divisor=w.divisor, causal=w.causal, window=w.window, rope=w.rope,
        dtype=inputs.dtype, notes=(*inputs.notes, *not_applied_note(source.not_applied)),
        attention=chosen,
        context_ids=ids if chosen == "cross" else None, context_labels=labels if chosen == "cross" else None, X_kv=inputs.X_kv,
        variants=w.variants,
        name=model_name(folder),
    )  # fmt: skip


def _bounded_tokens(
    folder: Path, cfg: ModelConfig, text: str, key: str, special_tokens: bool, max_cells: int | None, *,
    heads: int, widest: int = 0, layer: int = 1, what: str = "the text",
) -> Tokenized:  # fmt: skip
    """A text's tokens, refused as soon as they are counted when longer than the model's positions or than `max_cells` allows.

    `max_cells` bounds the heads × L × L attention cells, and L × `widest` (the MLP width of layers 1 … layer − 1,
    which each hold that many numbers); nothing is computed before the count.
    """
    by_cells = cfg.max_positions
    if max_cells is not None:
        by_cells = min(math.isqrt(max_cells // heads), max_cells // widest if widest else by_cells)

    def too_long(count: int) -> AttnError:
        if count > cfg.max_positions:
            return AttnError(
                f"{what} is {count:,} tokens long, more than the model's {cfg.max_positions:,} positions", key=key, expected=f"at most {cfg.max_positions:,} tokens"
            )
        if max_cells is not None and count * widest > max_cells:
            return AttnError(
                f"{count:,} tokens × {widest:,} (the MLP width of layers 1–{layer - 1}) = {count * widest:,} numbers, "
                f"more than the limit of {max_cells:,}",
                key=key,
                expected=f"a shorter sentence, an earlier layer, or raise the limit with {option('max_cells')}",
            )
        return too_many_cells(count, heads, max_cells or 0)

    tokens = checkpoint_tokens(folder, text, special_tokens=special_tokens, max_tokens=min(cfg.max_positions, by_cells), too_many=too_long)
    if not tokens.ids:
        raise AttnError(f"{what} gives no tokens", key=key, expected="some text")
    return tokens


def too_many_cells(tokens: int, heads: int, max_cells: int) -> AttnError:
    """The error for a sentence whose heads × L × L attention cells pass `max_cells`."""
    cells = heads * tokens**2
    return AttnError(
        f"{tokens:,} tokens × {tokens:,} × {heads} head{'s' * (heads != 1)} = {cells:,} attention cells, more than the limit of {max_cells:,}",
        key="sentence",
        expected=f"a shorter sentence, or raise the limit with {option('max_cells')}",
    )


def model_info(folder: Path) -> dict[str, Any]:
    """What a checkpoint folder or GGUF file holds and whether attncli can read it (with the reason when not)."""
    from attncli.sources.checkpoints.describe import config_cache, describe_config, describe_raw
    from attncli.sources.checkpoints.safetensors import FLOAT_NAMES, Checkpoint

    gguf = gguf_path(folder)
    if gguf is not None:
        from attncli.sources.checkpoints.gguf_data import gguf_info

        return gguf_info(gguf, str(folder))
    whole, where = read_raw(folder, whole=True)
    info: dict[str, Any] = {
        "folder": shown_path(folder),
        "model_type": whole.get("model_type"),
        "architectures": whole.get("architectures"),
        "supported": False,
        "reason": None,
    }
    try:
        raw = text_stack(whole, where)  # a multimodal model's text_config: its text stack is what attncli reads
        if raw is not whole:
            info["text_model_type"] = raw.get("model_type")
            info["multimodal"] = (f"a multimodal model ({info['model_type']}): attncli reads its text stack ({raw.get('model_type')}, "
                                  "from text_config); the vision tower and the projector are not read")  # fmt: skip
        cfg = read_config(folder)
    except AttnError as error:
        info["reason"] = str(error)
        info.update(describe_raw(text_stack(whole, where) if "multimodal" in info else whole))  # what its keys tell, even unread
        return info
    info.update(describe_config(cfg, raw))
    softmax_layers = getattr(cfg.family, "softmax_layers", None)  # a family with layers that are not softmax attention says which are
    if softmax_layers is not None:
        info["softmax_layers"] = softmax_layers()
    words = getattr(ARCHITECTURES.get(cfg.model_type), "mechanisms", None)
    if words is not None:  # what a family module says of itself beyond the mechanisms describe.py detects in every family
        try:
            info["mechanisms"] = [*info.get("mechanisms", []), *({"key": cfg.model_type, "text": text} for text in words(cfg, folder))]
        except AttnError as error:
            info["reason"] = str(error)
            return info
    try:
        checkpoint = Checkpoint(folder)
        check_shapes(cfg, checkpoint)
        if "multimodal" in info:  # which of the two spellings of the text stack's tensors the folder holds
            prefix = next((p for p in MULTIMODAL_PREFIXES if checkpoint.has(p + "embed_tokens.weight")), None)
            info["multimodal"] += f"; its tensors under {prefix}*" if prefix else ""
        stored = checkpoint.stored_dtypes()
        floats = {FLOAT_NAMES[k]: n for k, n in stored.items() if k in FLOAT_NAMES}
        info["weights"] = checkpoint.described_by
        info["stored_dtype"] = max(floats, key=lambda k: floats[k]) if floats else None
        if info["stored_dtype"] is not None:  # the cache holds what the layers compute in: the weights' dtype
            info["kv_cache"] = config_cache(cfg, raw, info["stored_dtype"], "as the weights are stored")
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


