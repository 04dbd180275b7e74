"""Every layer and head of a checkpoint in one forward pass, each layer summarised as soon as it is computed.

The architecture modules run their layers as usual; `blocks.weights_seen` hands each layer's
(H, L, L) weights to a `HeadMap`, which keeps only the statistics and a small thumbnail per head.
Memory: one layer's activations plus that layer's weights, at any time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from attncli.core.heads import HeadMap, repeated_random_tokens
from attncli.errors import AttnError, option
from attncli.sources import reading
from attncli.sources.checkpoints.blocks import AttentionWeights, WeightsSeen, self_attention, weights_seen
from attncli.sources.checkpoints.config import ModelConfig
from attncli.sources.checkpoints.families import ENCODER_DECODERS, layer_reader
from attncli.sources.checkpoints.gguf import model_config, tensors_of
from attncli.sources.checkpoints.layer import checkpoint_tokens
from attncli.sources.checkpoints.lens import Stream, stream, supported
from attncli.sources.checkpoints.source import TensorSource
from attncli.sources.checkpoints.tokenizer_process import MAX_TEXT_CHARACTERS
from attncli.sources.limits import Limits


class ModelMap(NamedTuple):
    """A checkpoint's head map with what it was computed from."""

    map: HeadMap
    folder: str
    model_type: str
    token_ids: tuple[int, ...]
    causal: bool
    induction_tokens: tuple[int, ...] | None  # the repeated random sequence the pattern scores were computed on
    stream: Stream | None = None  # the whole pass kept for the lens (a declared Llama-like decoder, asked with `lens`)


def model_map(
    folder: Path,
    *,
    sentence: str,
    special_tokens: str = "auto",
    induction: int | None = None,
    seed: int = 0,
    limits: Limits = Limits(),
    focus: Callable[[tuple[str, ...]], int] | None = None,
    each_layer: Callable[[np.ndarray, np.ndarray], None] | None = None,
    lens: bool = False,
) -> ModelMap:
    """Every head of every layer for `sentence`; with `induction` = n, the pattern scores on n random tokens repeated twice.

    `focus` picks, from the sentence's tokens, a query row whose weights every layer keeps whole (the shaded sentence);
    `each_layer` is also handed every layer's (H, L, L) weights and (L, L) visible keys, in order (a comparison). With `lens`,
    a family whose whole pass attncli computes (sources/checkpoints/lens.py) keeps it: the same pass, to its last MLP.
    """
    from attncli.sources.checkpoints.scenario import check_special_tokens

    check_special_tokens(special_tokens)
    cfg, model = model_config(folder)  # a GGUF file: its metadata is the config, its tensors answer to Hugging Face's names
    if cfg.model_type in ENCODER_DECODERS:
        raise AttnError(
            f"the map of an encoder–decoder ({cfg.model_type}: its encoder, its decoder and the cross-attention between them) is not built yet",
            key="model",
            expected=f"run or explain of one layer, with {option('target')} and {option('attention')} encoder, decoder or cross",
        )
    softmax_layers = getattr(cfg.family, "softmax_layers", None)  # a family with layers that are not softmax attention says which are
    if softmax_layers is not None and len(softmax_layers()) != cfg.layers:
        raise AttnError(
            f"the map of a model whose layers are not all softmax attention ({cfg.model_type}: only layers "
            f"{', '.join(map(str, softmax_layers()))} are) is not built yet",
            key="model", expected=f"run or explain of one of those layers, with {option('layer')}",
        )  # fmt: skip
    tokenized = checkpoint_tokens(folder, sentence, special_tokens=special_tokens == "auto", max_tokens=MAX_TEXT_CHARACTERS)
    ids, labels = tokenized.ids, tokenized.labels
    if not ids:
        raise AttnError("the sentence gives no tokens", key=option("sentence"), expected="some text")
    _check_length(cfg, len(ids), "sentence", limits)
    special = tokenized.special_ids
    prefix = ids[:1] if special_tokens == "auto" and len(ids) > 1 and ids[0] in special else ()
    if induction is not None:  # refused before any layer is computed
        if induction < 1:
            raise AttnError(f"found {induction}", key=option("induction"), expected="a number of random tokens, at least 1 (they are repeated once)")
        drawable = tokenized.vocabulary - len({i for i in special if 0 <= i < tokenized.vocabulary})
        if induction > drawable:
            raise AttnError(f"found {induction:,}: the vocabulary has {drawable:,} tokens besides the special ones, each drawn once",
                            key=option("induction"), expected=f"at most {drawable:,} random tokens")  # fmt: skip
        _check_length(cfg, len(prefix) + 2 * induction, "induction", limits)
    checkpoint = tensors_of(folder, model)
    heads = HeadMap(heads=cfg.heads, kv_heads=cfg.kv_heads, tokens=labels, focus=None if focus is None else focus(labels), ids=ids)
    def summarise(weights: np.ndarray, w: AttentionWeights) -> None:
        visible = _visible(weights, w)
        heads.add(weights, visible)
        if each_layer is not None:
            each_layer(weights, visible)

    kept = None
    if lens and supported(cfg):
        kept = stream(cfg, checkpoint, ids, seen=summarise)
    else:
        _forward(cfg, checkpoint, ids, summarise)
    repeated = None
    if induction is not None:
        repeated = prefix + repeated_random_tokens(tokenized.vocabulary, induction, seed=seed, avoid=special)
        _forward(cfg, checkpoint, repeated, lambda weights, w: heads.add_patterns(weights, repeated))
    causal = cfg.causal
    return ModelMap(heads, str(folder), cfg.model_type, ids, causal, repeated, kept)


def _forward(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], seen: WeightsSeen) -> None:
    """One pass through every layer; the last layer's attention is computed only for its weights."""
    read_layer = layer_reader(cfg.model_type)  # the same table load_layer reads
    with weights_seen(seen):
        last = read_layer(cfg, checkpoint, ids, cfg.layers)  # layers 1 … N−1, each reported
        self_attention(last.X, last.attention, last.X_kv)  # layer N (its keys and values from another layer's input, when it shares them)


def _visible(weights: np.ndarray, w: AttentionWeights) -> np.ndarray:
    """(L, L) which keys the layer's mask lets each query see: the same Mask the engine applied."""
    L = weights.shape[-1]
    return np.asarray(w.mask.visible(L, L), dtype=bool)


def _check_length(cfg: ModelConfig, L: int, key: str, limits: Limits) -> None:
    if cfg.max_positions < L:
        raise AttnError(
            f"the {'sentence' if key == 'sentence' else 'repeated random sequence'} is {L:,} tokens long, more than the model's {cfg.max_positions:,} positions",
            key=option(key),
            expected=f"at most {cfg.max_positions:,} tokens" + (" in all: n random tokens twice, after the first special token the sentence starts with" if key == "induction" else ""),
        )
    cells = cfg.heads * L * L
    if cells > limits.max_cells:
        raise AttnError(
            f"{L:,} tokens × {L:,} × {cfg.heads} heads = {cells:,} attention cells per layer, more than the limit of {limits.max_cells:,}",
            key=option(key),
            expected=f"a shorter {'sentence' if key == 'sentence' else 'sequence'}, or raise the limit with {option('max_cells')}",
        )


class ModelFile(NamedTuple):
    """What a scenario file with `model:` asks for: the folder (relative to the file), the sentence, the special tokens."""

    folder: Path
    sentence: str
    special_tokens: str


def model_of_file(path: Path, *, limits: Limits = Limits()) -> ModelFile | None:
    """The `model:`, `sentence:` and `special_tokens:` of a scenario file, or None when it has no `model:` (or is not a file)."""
    from attncli.sources.yamltree import Map, parse, to_word

    if not path.is_file():
        return None
    tree = parse(reading.read_text(path, str(path), max_bytes=limits.max_bytes), limits=limits)
    if not isinstance(tree, Map) or "model" not in tree.items:
        return None
    folder = Path(to_word(tree.items["model"], "model")).expanduser()
    words = {key: to_word(tree.items[key], key) for key in ("sentence", "special_tokens") if key in tree.items}
    if "sentence" not in words:
        raise AttnError("`model` needs `sentence`", file=str(path), key="sentence", expected="`sentence: The cat sat on the mat.`")
    return ModelFile(folder if folder.is_absolute() else path.parent / folder, words["sentence"], words.get("special_tokens", "auto"))
