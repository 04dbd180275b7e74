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
    assert "layers 1–5, the local ones; full causal attention on layer 6, the global ones" in next(m["text"] for m in gemma3["mechanisms"] if m["key"] == "local_global")
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


def test_a_config_attncli_refuses_is_still_described(tmp_path):
    """gpt-oss-20b's config with longrope RoPE (which attncli refuses; its own YaRN is read): windows, sinks, experts, cache.
    24 layers × K and V of 8 heads × 64 in bfloat16 = 49,152 bytes a token; the 12 sliding layers hold at most 128 tokens."""
    config = {
        "model_type": "gpt_oss", "num_hidden_layers": 24, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
        "hidden_size": 2880, "layer_types": ["sliding_attention", "full_attention"] * 12, "sliding_window": 128,
        "num_local_experts": 32, "num_experts_per_tok": 4, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
        "rope_scaling": {"rope_type": "longrope", "long_factor": [1.0] * 32, "short_factor": [1.0] * 32}, "rope_theta": 150000,
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    info = model_info(tmp_path)
    assert info["supported"] is False and "longrope" in info["reason"]
    assert keys(info) == ["gqa", "local_global", "sinks", "rope_scaling", "moe"]
    assert "layers 1, 3, …, 23 (every 2nd), the local ones" in info["mechanisms"][1]["text"]
    cache = info["kv_cache"]
    assert cache["bytes_per_token"] == 49_152 and cache["bytes_per_token_beyond_windows"] == 24_576
    assert cache["sliding_bound_bytes"] == 12 * 128 * 2048 and cache["bytes_at_max_positions"] == 24_576 * 131_072 + 12 * 128 * 2048


def test_a_hostile_config_is_described_as_far_as_it_can_be(tmp_path):
    """Keys of the wrong type are left out of the description, never a traceback."""
    config = {"model_type": "qwen3", "num_hidden_layers": "many", "num_attention_heads": 4}
    (tmp_path / "config.json").write_text(json.dumps(config))
    info = model_info(tmp_path)
    assert info["supported"] is False and "mechanisms" not in info
    config = {"model_type": "x", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": [1], "head_dim": 8,
              "partial_rotary_factor": "half", "sliding_window": -1, "layer_types": 3, "kv_lora_rank": True, "rope_scaling": [1]}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    info = model_info(tmp_path)
    assert keys(info) == ["mha"] and info["kv_cache"] is None  # no dtype declared: no bytes to count


@pytest.mark.parametrize(("name", "pairs"), [("deepseek_v2", "interleaved pairs"), ("deepseek_v3", "interleaved pairs"), ("llama", "rotate-half")])
def test_model_info_names_the_pairs_rope_turns(cli, name, pairs):
    """MLA's rope part turns interleaved pairs (DeepSeek), Llama's heads rotate halves: model info's RoPE line says which."""
    out = cli("model", "info", str(Path(__file__).parent / "checkpoints" / name)).stdout
    line = next(line for line in out.splitlines() if line.split()[:1] == ["rope"])
    assert pairs in line
