"""`model info` describes each attention mechanism a model uses, in words, and what its key/value cache costs per token.

The cache arithmetic is checked against numbers worked out by hand from each fixture's config.json (heads, head size,
layers, windows, dtype), and the descriptions against the mechanisms docs/families.md lists per family.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attncli.sources.checkpoints.describe import CacheLayer, cache_bytes, compact
from attncli.sources.checkpoints.layer import model_info

HERE = Path(__file__).parent / "checkpoints"


def keys(info: dict) -> list[str]:
    return [m["key"] for m in info["mechanisms"]]


def test_layers_are_listed_compactly():
    assert compact([1, 3, 5, 7, 9]) == "1, 3, …, 9 (every 2nd)"
    assert compact([6, 12, 18, 24, 30]) == "6, 12, …, 30 (every 6th)"
    assert compact([1, 2, 3, 4, 5, 7, 8, 9, 10, 11]) == "1–5, 7–11"
    assert compact([1, 3]) == "1, 3" and compact([2]) == "2" and compact([1, 2, 4]) == "1, 2, 4"


def test_a_cache_holds_each_layer_s_window_at_most():
    layers = [CacheLayer(1, 32, 4), CacheLayer(2, 32, None), CacheLayer(3, 32, 4)]
    assert cache_bytes(layers, 3, 4) == 3 * 3 * 32 * 4  # shorter than the window: every layer holds every token
    assert cache_bytes(layers, 100, 4) == (4 + 100 + 4) * 32 * 4


def test_gemma2_local_global_cap_and_cache():
    """Layers 1 and 3 slide over 4 tokens, layer 2 is global; cap 5; K and V of 2 heads × 8 in float32."""
    info = model_info(HERE / "gemma2")
    assert keys(info) == ["gqa", "local_global", "query_scale", "softcap"]
    assert info["sliding_layers"] == [1, 3] and info["global_layers"] == [2]
    cache = info["kv_cache"]
    assert (cache["layout"], cache["dtype"], cache["bytes_per_number"]) == ("gqa", "float32", 4)
    assert cache["numbers_per_layer"] == [2 * 2 * 8] * 3
    assert cache["bytes_per_token"] == 3 * 32 * 4 and cache["bytes_per_token_beyond_windows"] == 32 * 4
    assert cache["sliding_bound_bytes"] == 2 * 4 * 32 * 4
    assert cache["bytes_at_max_positions"] == (64 + 4 + 4) * 32 * 4


def test_gpt_oss_sinks_biases_experts_and_cache():
    info = model_info(HERE / "gpt_oss")
    assert keys(info) == ["gqa", "local_global", "sinks", "attention_bias", "moe"]
    assert "2 of 4 experts per token" in info["mechanisms"][-1]["text"]
    assert info["kv_cache"]["bytes_per_token"] == 2 * (2 * 2 * 4) * 4  # the sinks cost nothing in the cache


def test_mechanisms_of_families_attncli_does_not_compute_are_read_from_their_config():
    """Qwen3/OLMo 2/Gemma 3 QK-norm, Phi-3 and GPT-NeoX partial rotary, GPT-NeoX's parallel block, DeepSeek's MLA and MoE."""
    assert "qk_norm" in keys(model_info(HERE / "qwen3")) and "qk_norm" in keys(model_info(HERE / "olmo2"))
    gemma3 = model_info(HERE / "gemma3")
    assert {"qk_norm", "local_global"} <= set(keys(gemma3))
    assert "layers 1–5 (local)" in next(m["text"] for m in gemma3["mechanisms"] if m["key"] == "local_global")
    assert "partial_rotary" in keys(model_info(HERE / "phi3"))
    assert {"partial_rotary", "parallel_residual"} <= set(keys(model_info(HERE / "gpt_neox")))
    deepseek = model_info(HERE / "deepseek_v3")
    assert keys(deepseek)[0] == "mla" and "moe" in keys(deepseek) and "gqa" not in keys(deepseek)
    config = json.loads((HERE / "deepseek_v3" / "config.json").read_text())
    latent = config["kv_lora_rank"] + config["qk_rope_head_dim"]
    assert deepseek["kv_cache"]["layout"] == "mla" and deepseek["kv_cache"]["numbers_per_layer"] == [latent] * config["num_hidden_layers"]


def test_an_encoder_has_no_cache_and_says_so():
    info = model_info(HERE / "bert")
    assert info["kv_cache"] is None and "bidirectional" in keys(info)


@pytest.mark.parametrize("name", ["gemma2", "gpt_oss", "llama", "deepseek_v3"])
def test_model_info_text_shows_the_attention_and_the_cache(cli, name):
    result = cli("model", "info", str(HERE / name))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("attention ") for line in lines) and any(line.startswith("kv cache ") for line in lines)
    doc = json.loads(cli("model", "info", str(HERE / name), "--format", "json").stdout)
    assert doc["schema"] == "attncli.model-info/1" and doc["mechanisms"] and doc["kv_cache"]["bytes_per_token"] > 0


def test_llama_in_bfloat16_costs_two_bytes_a_number():
    cache = model_info(HERE / "llama")["kv_cache"]
    assert (cache["dtype"], cache["dtype_from"]) == ("bfloat16", "as the weights are stored")
    assert cache["bytes_per_token"] == 3 * (2 * 2 * 8) * 2 and cache["windows"] == []
