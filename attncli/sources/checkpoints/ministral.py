"""Ministral (Ministral 8B): Mistral's layer with a window per layer, chosen by `layer_types`.

transformers' MinistralAttention is Mistral's (no biases, RoPE rotate-half, grouped-query, √d_k, causal) whose
`sliding_attention` layers see the last `sliding_window` keys and whose `full_attention` layers see every earlier
key; without layer_types every layer slides when sliding_window is set (4096 unless config.json says null), none
when it is null. The module is its declaration (`LLAMA_LIKE`): its window rule; llama.py computes the rest.
"""

from __future__ import annotations

from typing import Any

from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.config import LlamaLike, _Reader, _shown, _window

VERIFY = llama.VERIFY  # Llama's float32 steps: RMSNorm, RoPE, softmax

DEFAULTS: dict[str, Any] = {"layers": 32, "hidden": 4096, "heads": 32, "kv": 8, "positions": 131072, "inter": 14336}  # MinistralConfig


def _windows(read: _Reader, layers: int) -> tuple[int | None, ...]:
    """layer_types with one sliding_window; without them, every layer sliding when the window is set (MinistralConfig)."""
    size = read.raw.get("sliding_window", 4096)
    window = None if size is None else _window(read, "sliding_window", size)
    kinds = read.raw.get("layer_types")
    if kinds is None:
        return (window,) * layers
    if not isinstance(kinds, list) or len(kinds) != layers or (window is None and "sliding_attention" in kinds):
        raise read.fail("layer_types", f"found {_shown(kinds)}", f"a list of {layers} layer kinds (sliding ones need a sliding_window)")
    return tuple(window if kind == "sliding_attention" else None for kind in kinds)


LLAMA_LIKE = LlamaLike("ministral", "Ministral", DEFAULTS, windows=_windows)
