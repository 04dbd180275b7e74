"""The published rope settings of three YaRN models (config.json as released), shared by tests/test_yarn.py and
scripts/make_yarn_goldens.py; only the keys RoPE and the head size need, plus what the family's reader requires."""

from __future__ import annotations

from typing import Any

CONFIGS: dict[str, dict[str, Any]] = {
    # openai/gpt-oss-20b config.json
    "gpt-oss-20b": {
        "model_type": "gpt_oss", "num_hidden_layers": 24, "hidden_size": 2880, "num_attention_heads": 64,
        "num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 131072, "rope_theta": 150000,
        "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                         "rope_type": "yarn", "truncate": False},
    },
    # deepseek-ai/DeepSeek-V3 config.json (RoPE on the qk_rope_head_dim = 64 part)
    "DeepSeek-V3": {
        "model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
        "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64, "v_head_dim": 128, "max_position_embeddings": 163840, "rope_theta": 10000,
        "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                         "original_max_position_embeddings": 4096, "type": "yarn"},
    },
    # Qwen/Qwen2.5-7B-Instruct with the YaRN block its model card adds for 128k tokens (as the 1M models' cards do)
    "Qwen2.5-7B-Instruct+yarn": {
        "model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28,
        "num_key_value_heads": 4, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
        "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"},
    },
}  # fmt: skip

# The tiny gpt-oss and DeepSeek-V3 fixtures (tests/checkpoints/) with their real model's YaRN settings in place of
# default RoPE: with 2 rotary pairs per head the first keeps its frequency and the second is blended (gpt-oss's
# untruncated ramp) or divided (DeepSeek's), cos and sin grow by 1.3466 (gpt-oss), DeepSeek's scale by 1.3689².
TINY: dict[str, dict[str, Any]] = {
    "gpt_oss": {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False},
    "deepseek_v3": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "original_max_position_embeddings": 4096,
                    "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
}  # fmt: skip


def with_yarn(config: dict[str, Any], family: str) -> dict[str, Any]:
    """A tiny fixture's config.json with TINY's YaRN settings as its rope_parameters (transformers 5's spelling)."""
    return {**{k: v for k, v in config.items() if k not in ("rope_scaling", "rope_parameters")}, "rope_parameters": TINY[family]}

# longrope: Phi-3-mini-128k-instruct's shape (head 96 → 48 pairs, θ 10000, 4096 original positions, 131072 in all)
# with short and long factors drawn from a seed (tests/test_yarn.py), and the tiny phi3 fixture (1 rotary pair) with
# 8 original positions, so that its 12-token golden sentence takes the long factor and a 3-token one the short.
LONGROPE = {
    "model_type": "phi3", "num_hidden_layers": 32, "hidden_size": 3072, "num_attention_heads": 32,
    "num_key_value_heads": 32, "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": {"type": "longrope", "short_factor": [round(1.0 + 0.05 * i, 4) for i in range(48)],
                     "long_factor": [round(1.0 + 0.9 * i, 4) for i in range(48)]},
}  # fmt: skip
TINY_LONGROPE = {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                 "short_factor": [1.5], "long_factor": [7.0]}  # fmt: skip
SHORT_SENTENCE = "The cat sat"


def with_longrope(config: dict[str, Any]) -> dict[str, Any]:
    """The tiny phi3 fixture's config.json with TINY_LONGROPE and 8 original positions (top level, as Phi-3 keeps it)."""
    out = {k: v for k, v in config.items() if k not in ("rope_scaling", "rope_parameters")}
    return {**out, "rope_parameters": TINY_LONGROPE, "original_max_position_embeddings": 8}


def generated_rows(folder: Any, ids: list[int]) -> tuple[Any, list[int]]:
    """transformers' `generate` (torch and transformers needed) decoding `ids` token by token with a KV cache, each next
    token forced to the sentence's: every step's attention row, (layers, heads, L, L) with step t's row over keys 1 … t,
    and each forward's query length (1, or the whole sequence where Phi-3 dropped its cache at the longrope switch)."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, LogitsProcessor, LogitsProcessorList

    class Forced(LogitsProcessor):  # the sentence's next token, whatever the model would pick (one more after it)
        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
            forced = torch.full_like(scores, -torch.inf)
            forced[:, ids[min(input_ids.shape[1], len(ids) - 1)]] = 0.0
            return forced

    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float64).double().eval()
    L = len(ids)
    with torch.no_grad():
        out = model.generate(
            input_ids=torch.tensor([ids[:1]]), attention_mask=torch.ones((1, 1), dtype=torch.long),  # token 0 is no padding
            max_new_tokens=L, min_new_tokens=L, do_sample=False, logits_processor=LogitsProcessorList([Forced()]),
            output_attentions=True, return_dict_in_generate=True, eos_token_id=None, pad_token_id=0,
        )  # fmt: skip
    assert out.sequences[0].tolist()[:L] == ids
    layers, heads = len(out.attentions[0]), out.attentions[0][0].shape[1]
    rows = np.full((layers, heads, L, L), np.nan)  # step t's row over keys 1 … t
    query_lengths = []
    for per_layer in out.attentions[:L]:  # step 0: the first token; then one forward per generated token
        query_lengths.append(int(per_layer[0].shape[2]))
        for layer, attention in enumerate(per_layer):
            width = attention.shape[3]
            rows[layer, :, width - 1, :width] = attention[0, :, -1].numpy()
    return rows, query_lengths
