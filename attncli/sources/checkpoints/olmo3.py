"""OLMo 3: OLMo 2's layer (post-norms, QK-norm over the whole projection) with sliding layers and a RoPE per kind of layer.

transformers' Olmo3Attention is Olmo2Attention with, on `sliding_attention` layers, the last `sliding_window` keys;
`layer_types` (else every 4th layer full) says which. Olmo3RotaryEmbedding keeps one RoPE per layer kind
(`rope_parameters` given per layer type; OLMo 3's long-context checkpoints scale only the full layers' with YaRN);
θ is 500 000 when none is named. The module is its declaration (`LLAMA_LIKE`): OLMo 2's with its windows and the
sliding layers' own RoPE; llama.py computes it.
"""

from __future__ import annotations

from typing import Any

from attncli.sources.checkpoints import olmo2
from attncli.sources.checkpoints.config import LlamaLike, LlamaSettings, ModelConfig, every_nth_full

DEFAULTS: dict[str, Any] = {
    "layers": 32, "hidden": 4096, "heads": 32, "kv": None, "positions": 2048, "inter": 11008, "eps": 1e-5, "theta": 500_000.0,
}  # Olmo3Config (θ: its default_theta)  # fmt: skip
LLAMA_LIKE = LlamaLike("olmo3", "OLMo 3", DEFAULTS, windows=every_nth_full(None, 4), qk_norm=olmo2.QK_NORM, norms="post",
                       attention_bias=True, rope_per_type="full_attention", sliding_rope="sliding_attention")  # fmt: skip


def mechanisms(cfg: ModelConfig[LlamaSettings], folder: Any, raw: dict[str, Any] | None = None) -> list[str]:
    """What `model info` says of OLMo 3 beyond describe.py: its two RoPEs and its post-norms."""
    assert cfg.rope is not None and cfg.family.sliding_rope is not None
    full, sliding = (f"θ = {r.theta:g}" + (f", {r.describe()}" if r.describe() else "") for r in (cfg.rope, cfg.family.sliding_rope))
    return [
        f"RoPE per kind of layer: {sliding} on the sliding layers, {full} on the full ones",
        "no norm before attention or MLP: RMSNorm on each one's output (post_attention_layernorm, post_feedforward_layernorm)",
    ]


VERIFY = olmo2.VERIFY  # RMSNorm (q and k norms too), RoPE, softmax in float32
DESCRIPTION = olmo2.DESCRIPTION
