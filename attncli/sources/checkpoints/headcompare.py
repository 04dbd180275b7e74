"""The same heads of two runs compared: one checkpoint on two sentences, or two checkpoints of one architecture on one sentence.

Each run is one forward pass (sources.checkpoints.headmap). The first run's weights are kept,
one (H, L, L) array per layer; the second run compares each of its layers with them as soon as
it computes it. Memory: the first run's attention (layers × H × L² float64, 8.8 MB for 30 × 9
heads at 64 tokens) beside one layer's activations.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from attncli.core.compare import Comparison
from attncli.errors import AttnError, option
from attncli.sources.checkpoints.headmap import ModelMap, model_map
from attncli.sources.limits import Limits


class Compared(NamedTuple):
    first: ModelMap
    second: ModelMap
    comparison: Comparison


def compare_models(
    folder: Path,
    other: Path,
    *,
    sentence: str,
    other_sentence: str,
    special_tokens: str = "auto",
    limits: Limits = Limits(),
) -> Compared:
    """`folder` on `sentence` against `other` on `other_sentence`: every layer and head, cell by cell (same tokens count, same heads)."""
    kept: list[tuple[np.ndarray, np.ndarray]] = []
    first = model_map(folder, sentence=sentence, special_tokens=special_tokens, limits=limits,
                      each_layer=lambda weights, visible: kept.append((weights.copy(), visible)))  # fmt: skip
    heads = first.map
    comparison = Comparison(heads=heads.heads, kv_heads=heads.kv_heads, tokens=heads.tokens, other_tokens=())
    key = option("compare_model") if other != folder else option("compare_sentence")
    seen_layers = 0

    def compare(weights: np.ndarray, visible: np.ndarray) -> None:
        nonlocal seen_layers
        index, seen_layers = seen_layers, seen_layers + 1
        if index < len(kept) and weights.shape == kept[index][0].shape:
            a, seen = kept[index]
            comparison.add(a, weights, seen | visible)
            kept[index] = (a[:0], seen)  # compared: let the layer's weights go
        # a different shape: the checks below name what differs once the run is over

    second = model_map(other, sentence=other_sentence, special_tokens=special_tokens, limits=limits, each_layer=compare)
    theirs = second.map
    same = "a checkpoint of the same architecture"
    if seen_layers != len(kept):
        raise AttnError(f"the second model has {seen_layers} layers, the first {len(kept)}", key=key, expected=same)
    if (theirs.heads, theirs.kv_heads) != (heads.heads, heads.kv_heads):
        raise AttnError(f"the second model has {theirs.heads} query and {theirs.kv_heads} key/value heads per layer, the first "
                        f"{heads.heads} and {heads.kv_heads}", key=key, expected=same)  # fmt: skip
    if len(theirs.tokens) != len(heads.tokens):
        raise AttnError(
            f"the two runs give {len(heads.tokens)} and {len(theirs.tokens)} tokens",
            key=key,
            expected="as many tokens in both: the weights are compared cell by cell (query i, key j)",
        )
    comparison.other_tokens = second.map.tokens
    return Compared(first, second, comparison)
