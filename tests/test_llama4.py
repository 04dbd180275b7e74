"""Llama 4 (text): chunked attention, NoPE layers with attention temperature tuning, QK-norm after RoPE, interleaved RoPE and
an interleaved mixture of experts, every layer and head against transformers.

The golden in tests/checkpoints/llama4_text is transformers 5.24's (scripts/make_checkpoints.py, FAMILIES_2026): 4 layers;
layers 1 and 3 turn q and k (llama3-scaled RoPE on interleaved pairs), normalise them after that without a weight and see
4-token chunks; layers 2 and 4 have no RoPE and multiply each query by 1 + 0.5·ln(1 + ⌊(p + 1) / 2⌋); layers 2 and 4 have
the mixture of experts (4 experts, sigmoid top 2, a shared expert), so layers 3 and 4 read one. transformers runs its norms,
RoPE (q and k cast to float32), the router's sigmoid and the temperature in float32 even in a float64 model: the bounds are
1e-6 for the weights, 1e-5 for the block inputs X (measured: 4.9e-7 and 8.7e-7).
"""

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import QkNorm, QkNormAfterRope, QueryTemperature
from attncli.sources.checkpoints import moe
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario
from tests.live import fixture_script

HERE = Path(__file__).parent / "checkpoints" / "llama4_text"


def golden() -> dict[str, np.ndarray]:
    with np.load(HERE / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


TEXT = str(golden()["text"])


def weights_of(case: Any) -> np.ndarray:
    """(H, L, L) the engine's weights for the layer's scenario."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


def miss(layer: int, case: Any) -> float:
    """How far a layer's weights are from transformers' goldens."""
    return float(np.abs(weights_of(case) - golden()["attentions"][layer - 1]).max())


def edited(tmp_path: Path, **change: Any) -> Path:
    """A copy of the fixture whose config.json has `change` applied."""
    folder = tmp_path / "llama4_text"
    shutil.copytree(HERE, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    return folder


@pytest.mark.parametrize("layer", [1, 2, 3, 4])
def test_every_head_of_every_layer_matches_transformers(layer):
    """X and every head's weights of each layer (chunked RoPE layers, tempered NoPE layers, after MoE layers) equal transformers'."""
    expected = golden()
    case = load_layer(HERE, layer=layer, text=TEXT)
    assert case.token_ids == tuple(expected["ids"].tolist())
    assert (case.rope is None) == (layer % 2 == 0) and case.chunk == (None if layer % 2 == 0 else 4)
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=1e-5)
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=1e-6)


def test_each_attention_mechanism_matters():
    """Without the chunks, the QK-norm after RoPE, the interleaved pairs or the temperature, the weights miss transformers'."""
    rope_layer, nope_layer = (load_layer(HERE, layer=layer, text=TEXT) for layer in (1, 2))
    assert miss(1, dataclasses.replace(rope_layer, chunk=None)) > 1e-3
    assert miss(1, dataclasses.replace(rope_layer, variants=())) > 1e-3
    assert rope_layer.rope is not None and rope_layer.rope.style == "interleaved"
    assert miss(1, dataclasses.replace(rope_layer, rope=dataclasses.replace(rope_layer.rope, style="half"))) > 1e-3
    assert [type(v) for v in nope_layer.variants] == [QueryTemperature]
    assert miss(2, dataclasses.replace(nope_layer, variants=())) > 1e-3


def test_a_weightless_norm_commutes_with_rope_but_is_shown_after_it():
    """RoPE keeps each head's length, so Llama 4's weightless norm before RoPE gives the same weights; attncli still places it after."""
    case = load_layer(HERE, layer=1, text=TEXT)
    (after,) = case.variants
    assert isinstance(after, QkNormAfterRope) and not after.weighted and after.stage == "rotated"
    before = dataclasses.replace(case, variants=(), qk_norm=QkNorm(after.q_weight, after.k_weight, eps=after.eps))
    assert miss(1, before) < 1e-6
    head = engine.run(layer_scenario(case)).heads[0]
    assert head.Q_rope is not None and not np.allclose(head.q, head.Q_rope)  # the rotated rows, then normalised
    rms = np.sqrt((head.Q_rope**2).mean(axis=1, keepdims=True) + after.eps)  # (L, 1) each rotated row's
    np.testing.assert_allclose(head.q, head.Q_rope / rms, rtol=0, atol=1e-12)


def test_the_mixture_of_experts_reaches_the_next_layers(monkeypatch):
    """Layer 3 reads layer 2's experts: a softmax instead of the sigmoid, or the weight on the expert's output instead of its input, breaks it."""
    from attncli.sources.checkpoints import llama4

    case = load_layer(HERE, layer=3, text=TEXT)
    assert any(note.startswith("layer 2's MoE MLP (2 of 4 experts") for note in case.notes)
    monkeypatch.setattr(llama4.moe, "top_k_sigmoid", lambda logits, k, layer: moe.top_k_softmax(logits, k, layer=layer))
    assert np.abs(load_layer(HERE, layer=3, text=TEXT).X - golden()["attention_inputs"][2]).max() > 1e-3


def test_the_header_says_what_each_layer_does():
    """A RoPE layer's notes name interleaved pairs, the norm after RoPE and the chunk; a NoPE layer's the temperature."""
    rope_notes, nope_notes = (load_layer(HERE, layer=layer, text=TEXT).notes for layer in (1, 2))
    assert any(note.startswith("RoPE (interleaved pairs") for note in rope_notes)
    assert any(note.startswith("QK-norm after RoPE") and "no weight" in note for note in rope_notes)
    assert any(note.startswith("chunked attention") and "chunk of 4 positions" in note for note in rope_notes)
    assert any(note.startswith("attention temperature") for note in nope_notes)
    assert not any("alone knows the order" in note for note in nope_notes)


def test_model_info_describes_every_mechanism():
    """model info says chunked layers, NoPE with the temperature, the QK-norm after RoPE without weight, interleaved RoPE, the MoE."""
    info = model_info(HERE)
    said = {m["key"]: m["text"] for m in info["mechanisms"]}
    assert info["supported"] is True and info["rope"]["style"] == "interleaved"
    assert "after RoPE" in said["qk_norm"] and "no weight" in said["qk_norm"] and "before RoPE" not in said["qk_norm"]
    assert said["nope"].startswith("no RoPE (NoPE) on layers 2, 4") and "temperature" in said["nope"]
    assert "sigmoid" in said["moe"] and "shared expert" in said["moe"]
    texts = [m["text"] for m in info["mechanisms"] if m["key"] == "llama4_text"]
    assert any(text.startswith("chunked attention on layers 1, 3") for text in texts)
    assert any(text.startswith("attention temperature tuning on the NoPE layers (2, 4)") for text in texts)
    assert info["kv_cache"]["windows"] == [4] and info["kv_cache"]["bounded_layers"] == "chunked"  # a chunked layer keeps at most a chunk


def test_real_configs_spelling(tmp_path):
    """An empty no_rope_layers and no layer_types (as Llama 4 Scout's config.json) mean NoPE every 4th layer and chunks on the others."""
    from attncli.sources.checkpoints import families, llama4

    cfg = families.read_config(edited(tmp_path, no_rope_layers=[], layer_types=None, moe_layers=None, no_rope_layer_interval=4))
    s = llama4.settings(cfg)
    assert s.rope_layers == (True, True, True, False) and s.chunks == (4, 4, 4, None) and s.sparse == (False, True, False, True)


def test_live_transformers_agrees():
    """transformers itself, run now on the fixture, gives the stored goldens (skips without torch and transformers)."""
    script = fixture_script()
    expected = golden()
    live = script.golden_with_inputs(HERE, expected["ids"].tolist(), moe=True)
    for key, array in live.items():
        np.testing.assert_allclose(array, expected[key], rtol=0, atol=1e-12, err_msg=key)


def test_llama_4_scout_s_config_is_read(tmp_path):
    """Llama 4 Scout's config.json (multimodal, attn_temperature_tuning 4, llama3 RoPE, 48 layers of experts, NoPE every 4th) is
    read and described as transformers reads it; without weights the folder is refused for that reason alone."""
    text = {
        "attention_bias": False, "attention_chunk_size": 8192, "attn_scale": 0.1, "attn_temperature_tuning": 4, "floor_scale": 8192,
        "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "interleave_moe_layer_step": 1, "intermediate_size": 8192,
        "intermediate_size_mlp": 16384, "max_position_embeddings": 262144, "model_type": "llama4_text", "moe_layers": list(range(48)),
        "no_rope_layers": [0 if (i + 1) % 4 == 0 else 1 for i in range(48)], "num_attention_heads": 40, "num_experts_per_tok": 1,
        "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": 16, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192,
                         "rope_type": "llama3"},
        "rope_theta": 500000.0, "torch_dtype": "bfloat16", "use_qk_norm": True, "vocab_size": 202048,
    }  # fmt: skip
    folder = tmp_path / "scout"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "text_config": text}))
    info = model_info(folder)
    said = {m["key"]: m["text"] for m in info["mechanisms"]}
    assert info["model_type"] == "llama4" and info["text_model_type"] == "llama4_text" and info["layers"] == 48
    assert said["nope"].startswith("no RoPE (NoPE) on layers 4, 8, …, 48 (every 4th)") and "temperature" in said["nope"]
    assert "1 of 16 experts" in said["moe"] and said["moe"].endswith("on every layer")
    assert info["supported"] is False and "safetensors" in info["reason"]
    (folder / "config.json").write_text(json.dumps({"model_type": "llama4", "text_config": {**text, "attn_temperature_tuning": "yes"}}))
    assert "attn_temperature_tuning" in model_info(folder)["reason"]
