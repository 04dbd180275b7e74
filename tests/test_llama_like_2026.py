"""Issue 30's Llama-like families (Qwen3-MoE, Granite, Cohere2, GLM-4): every layer and head against transformers.

The goldens in tests/checkpoints/<family> are transformers 5.24's attention weights and block inputs for the fixture's
sentence (scripts/make_checkpoints.py, FAMILIES_2026). transformers runs its norms, RoPE, softmax (and Qwen3-MoE's
router softmax) in float32 even in a float64 model, so attncli's float64 numbers agree to about 1e-7 (measured:
2.9e-7 at most for the weights, 1.4e-6 for the inputs); the bounds are 1e-6 for the weights, 1e-5 for the block
inputs X, which pass through every earlier layer's float32 steps.
"""

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attncli.core import engine
from attncli.sources.checkpoints import families
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario

HERE = Path(__file__).parent / "checkpoints"
FAMILIES = {"qwen3_moe": 3, "granite": 3, "cohere2": 3, "glm4": 2}  # family → its fixture's layers


def golden(name: str) -> dict[str, np.ndarray]:
    with np.load(HERE / name / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case: Any) -> np.ndarray:
    """(H, L, L) the engine's weights for the layer's scenario."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


def miss(name: str, layer: int, case: Any) -> float:
    """How far a layer's weights are from transformers' goldens."""
    return float(np.abs(weights_of(case) - golden(name)["attentions"][layer - 1]).max())


def edited(tmp_path: Path, name: str, **change: Any) -> Path:
    """A copy of the fixture whose config.json has `change` applied."""
    folder = tmp_path / name
    shutil.copytree(HERE / name, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    return folder


@pytest.mark.parametrize(("name", "layer"), [(name, layer) for name, layers in FAMILIES.items() for layer in range(1, layers + 1)])
def test_every_head_of_every_layer_matches_transformers(name, layer):
    """The layer's block input and every head's weights equal transformers' goldens within float32's steps."""
    expected = golden(name)
    assert expected["attentions"].shape[0] == FAMILIES[name]
    case = load_layer(HERE / name, layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist())
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=1e-5)
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=1e-6)


def test_qwen3_moe_routing_reaches_the_next_layers(tmp_path):
    """Layer 3 reads two mixture-of-experts layers' outputs: using the top-2 probabilities unnormalised breaks it."""
    text = str(golden("qwen3_moe")["text"])
    case = load_layer(edited(tmp_path, "qwen3_moe", norm_topk_prob=False), layer=3, text=text)
    assert miss("qwen3_moe", 3, case) > 1e-4
    assert any(note.startswith("layer 1's MoE MLP (2 of 4 experts") for note in load_layer(HERE / "qwen3_moe", layer=3, text=text).notes)


def test_granite_multipliers_each_matter(tmp_path):
    """Without attention_multiplier (Llama's 1/√d_k), residual_multiplier or embedding_multiplier, the weights miss."""
    text = str(golden("granite")["text"])
    case = load_layer(HERE / "granite", layer=1, text=text)
    assert case.divisor == pytest.approx(5.0)
    assert miss("granite", 1, dataclasses.replace(case, divisor=np.sqrt(case.head_dim))) > 1e-3
    for key in ("residual_multiplier", "embedding_multiplier"):
        assert miss("granite", 2, load_layer(edited(tmp_path / key, "granite", **{key: 1.0}), layer=2, text=text)) > 1e-4, key


def test_cohere2_turns_only_sliding_layers_and_interleaved_pairs():
    """Layer 2 (global) has no RoPE and giving it layer 1's breaks it; layer 1 turned rotate-half instead of interleaved misses."""
    text = str(golden("cohere2")["text"])
    sliding, full = (load_layer(HERE / "cohere2", layer=layer, text=text) for layer in (1, 2))
    assert full.rope is None and sliding.rope is not None and sliding.rope.style == "interleaved" and sliding.window == 3
    assert miss("cohere2", 2, dataclasses.replace(full, rope=sliding.rope)) > 1e-3
    assert miss("cohere2", 1, dataclasses.replace(sliding, rope=dataclasses.replace(sliding.rope, style="half"))) > 1e-3


def test_glm4_rotates_interleaved_pairs_of_half_of_each_head(tmp_path):
    """GLM-4 turns interleaved pairs of the first half of each head: the two halves, or the whole head, miss."""
    text = str(golden("glm4")["text"])
    case = load_layer(HERE / "glm4", layer=1, text=text)
    assert case.rope is not None and case.rope.style == "interleaved" and case.rope.width(case.head_dim) == case.head_dim // 2
    assert miss("glm4", 1, dataclasses.replace(case, rope=dataclasses.replace(case.rope, style="half"))) > 1e-3
    config = json.loads((HERE / "glm4" / "config.json").read_text())
    whole = {**config["rope_parameters"], "partial_rotary_factor": 1.0}
    assert miss("glm4", 1, load_layer(edited(tmp_path, "glm4", rope_parameters=whole), layer=1, text=text)) > 1e-3


def test_glm4_partial_rotary_defaults_to_half(tmp_path):
    """A GLM-4 config.json that names no partial_rotary_factor rotates half of each head, as Glm4Config's default does."""
    config = json.loads((HERE / "glm4" / "config.json").read_text())
    parameters = {k: v for k, v in config["rope_parameters"].items() if k != "partial_rotary_factor"}
    cfg = families.read_config(edited(tmp_path, "glm4", rope_parameters=parameters))
    assert cfg.rope is not None and cfg.rope.partial == 0.5


MECHANISMS = {
    "qwen3_moe": ("per head", "softmax over all experts (float32)", "renormalised", "layer 2 keeps a dense MLP"),
    "granite": ("attention_multiplier = 0.2", "embedding_multiplier = 3", "residual_multiplier = 0.4", "logits_scaling = 2"),
    "cohere2": ("sliding window of the last 4 tokens", "on layers 1, 3", "no position encoding (NoPE)", "parallel attention and MLP"),
    "glm4": ("first 4 of each head's 8", "interleaved pairs", "q, k, v projections have biases", "four RMSNorms"),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_model_info_describes_every_mechanism(name):
    """`model info` says the family is supported and names each of its mechanisms."""
    info = model_info(HERE / name)
    assert info["supported"] is True and info["model_type"] == name and info["reason"] is None
    text = " | ".join(m["text"] for m in info["mechanisms"])
    for words in MECHANISMS[name]:
        assert words in text, words


def test_model_info_rope_row_says_interleaved_where_it_is():
    """The rope row of Cohere2 and GLM-4 says interleaved pairs; Qwen3-MoE and Granite turn halves."""
    for name in FAMILIES:
        assert model_info(HERE / name)["rope"]["style"] == ("interleaved" if name in ("cohere2", "glm4") else "half"), name


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_model_verify_is_declared(name):
    """Each family declares what `model verify` needs, with the float32 steps its transformers model takes."""
    declared = families.verification(name)
    assert declared is not None and declared.float32_steps
    assert declared.eager_experts == (name == "qwen3_moe")
    assert any("LayerNorm" in step for step in declared.float32_steps) == (name == "cohere2")


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_live_transformers_still_gives_the_goldens(name):
    """transformers, run now on the fixture by the fixture script's own code, gives every committed golden array to
    1e-12 (skips without torch): a transformers upgrade that changes a family shows here first."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except Exception as error:
        pytest.skip(f"torch and transformers are not importable ({error}); pip install torch==2.13.0 transformers")
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_checkpoints", Path(__file__).parent.parent / "scripts" / "make_checkpoints.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    expected = golden(name)
    live = script.golden_with_inputs(HERE / name, expected["ids"].tolist(), moe=script.FAMILIES_2026[name].get("moe", False))
    assert set(live) <= set(expected)
    for key, array in live.items():
        np.testing.assert_allclose(array, expected[key], rtol=0, atol=1e-12, err_msg=key)
