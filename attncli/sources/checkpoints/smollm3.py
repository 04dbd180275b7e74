"""SmolLM3: Llama's layer with no RoPE on every 4th layer (NoPE), as transformers' SmolLM3Attention computes it.

`no_rope_layers` lists per layer 1 (RoPE) or 0 (none); without it, every `no_rope_layer_interval`-th layer (4) has none.
A NoPE layer's q and k meet as projected: the order of the tokens reaches its scores only through the causal mask
(and what earlier layers wrote into the residual stream). With a sliding_window, the layers `layer_types` marks
sliding see the last `sliding_window` tokens (without layer_types: the NoPE layers if use_sliding_window, else none). Everything else is Llama's
(attention_bias and mlp_bias read, θ = 2,000,000 when config.json gives none). The module is its declaration.
"""

from __future__ import annotations

from typing import Any

from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.config import (
    FLOAT32_RMSNORM,
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    O_PROJ,
    LlamaLike,
    Verification,
    _Reader,
    _shown,
    _window,
    every_nth_without_rope,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Metadata


def _windows(read: _Reader, layers: int) -> tuple[int | None, ...]:
    """With a sliding_window, the window on the layers layer_types marks sliding. SmolLM3Model masks those layers by
    layer_types alone (use_sliding_window only chooses the flash-attention argument); when config.json has no
    layer_types, SmolLM3Config marks the NoPE layers sliding if use_sliding_window, else none."""
    size = read.raw.get("sliding_window")
    if size is None:
        return (None,) * layers
    window = _window(read, "sliding_window", size)
    kinds = read.raw.get("layer_types")
    if kinds is None:
        sliding = read.flag("use_sliding_window", False)
        kinds = ["sliding_attention" if sliding and not rope else "full_attention" for rope in ROPE_LAYERS(read, layers)]
    if not isinstance(kinds, list) or len(kinds) != layers:
        raise read.fail("layer_types", f"found {_shown(kinds)}", f"a list of {layers} layer kinds")
    return tuple(window if kind == "sliding_attention" else None for kind in kinds)


ROPE_LAYERS = every_nth_without_rope("no_rope_layers", "no_rope_layer_interval", 4)
DEFAULTS: dict[str, Any] = {
    "layers": 36, "hidden": 2048, "heads": 16, "kv": 4, "positions": 32768, "inter": 11008, "theta": 2_000_000.0,
}  # SmolLM3Config  # fmt: skip
LLAMA_LIKE = LlamaLike("smollm3", "SmolLM3", DEFAULTS, windows=_windows, rope_layers=ROPE_LAYERS, attention_bias=True, mlp_bias=True)
VERIFY = Verification(O_PROJ, (FLOAT32_RMSNORM, FLOAT32_ROPE, FLOAT32_SOFTMAX))


def gguf_keys(file: Metadata, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """SmolLM3's config.json keys from a smollm3 file: SmolLM3Model (LlamaModel's converter) stores no NoPE layers and no
    window, and llama.cpp fixes them (n_no_rope_layer_step = 4: layer i from 0 has no RoPE when (i + 1) % 4 = 0; no window)."""
    return {
        **llama.gguf_keys(file, a, raw, head_dim),
        "mlp_bias": "blk.0.ffn_up.bias" in file.tensors,
        "no_rope_layer_interval": 4,
        "use_sliding_window": False,
    }


# SmolLM3Model is LlamaModel's converter: W_Q's and W_K's rows permuted to interleaved pairs, put back on reading
GGUF = (GgufArchitecture("smollm3", "smollm3", llama.GGUF_NAMES, keys=gguf_keys, interleaved_qk=True),)
