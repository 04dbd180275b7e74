"""Issue 30's Llama-like families (Qwen3-MoE, Granite, Cohere2, GLM-4, GLM-4.5, Ministral, Ministral 3, EXAONE 4, OLMo 3,
Apertus, ERNIE 4.5, Seed-OSS): every layer and head against transformers.

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
from attncli.sources.checkpoints import config, families
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario
from tests.live import fixture_script

HERE = Path(__file__).parent / "checkpoints"
FAMILIES = {
    "qwen3_moe": 3, "granite": 3, "cohere2": 3, "glm4": 2, "glm4_moe": 3, "ministral": 3, "ministral3": 2, "exaone4": 3, "olmo3": 3,
    "apertus": 2, "ernie4_5": 2, "seed_oss": 2,
}  # family → its fixture's layers  # fmt: skip


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


def test_glm4_moe_bias_chooses_qk_norm_and_halves_matter(monkeypatch):
    """Choosing without the correction bias, leaving QK-norm out, or turning interleaved pairs each breaks GLM-4.5's agreement."""
    from attncli.sources.checkpoints import deepseek

    text = str(golden("glm4_moe")["text"])
    case = load_layer(HERE / "glm4_moe", layer=1, text=text)
    assert case.qk_norm is not None and case.rope is not None and case.rope.style == "half"
    assert miss("glm4_moe", 1, dataclasses.replace(case, qk_norm=None)) > 1e-3
    assert miss("glm4_moe", 1, dataclasses.replace(case, rope=dataclasses.replace(case.rope, style="interleaved"))) > 1e-3
    route = deepseek.route
    monkeypatch.setattr(deepseek, "route", lambda ds, logits, bias: route(ds, logits, None))
    assert miss("glm4_moe", 3, load_layer(HERE / "glm4_moe", layer=3, text=text)) > 1e-4


def test_glm4_moe_refuses_expert_groups(tmp_path):
    """More than one expert group (DeepSeek V3's group-limited choice) is refused in one line, not guessed."""
    from attncli.errors import AttnError

    with pytest.raises(AttnError, match="2 expert groups"):
        families.read_config(edited(tmp_path, "glm4_moe", n_group=2, topk_group=1))


def test_windows_by_layer_matter():
    """Ministral's, EXAONE 4's and OLMo 3's global layer 2 sees every key, their sliding layer 1 the last 4: swapping breaks both."""
    for name in ("ministral", "exaone4", "olmo3"):
        text = str(golden(name)["text"])
        sliding, full = (load_layer(HERE / name, layer=layer, text=text) for layer in (1, 2))
        assert (sliding.window, full.window) == (3, None), name
        assert miss(name, 1, dataclasses.replace(sliding, window=None)) > 1e-3, name
        assert miss(name, 2, dataclasses.replace(full, window=3)) > 1e-3, name


def test_exaone4_global_layers_have_no_rope_and_qk_norm_matters():
    """EXAONE 4's global layer has no RoPE (giving it layer 1's breaks it); without QK-norm layer 1 misses."""
    text = str(golden("exaone4")["text"])
    sliding, full = (load_layer(HERE / "exaone4", layer=layer, text=text) for layer in (1, 2))
    assert full.rope is None and sliding.rope is not None
    assert miss("exaone4", 2, dataclasses.replace(full, rope=sliding.rope)) > 1e-3
    assert miss("exaone4", 1, dataclasses.replace(sliding, qk_norm=None)) > 1e-3


def test_olmo3_full_layers_have_their_own_rope():
    """OLMo 3's full layer 2 turns with its YaRN RoPE; the sliding layers' RoPE there misses."""
    text = str(golden("olmo3")["text"])
    sliding, full = (load_layer(HERE / "olmo3", layer=layer, text=text) for layer in (1, 2))
    assert sliding.rope is not None and full.rope is not None
    assert full.rope.attention_factor > 1 and sliding.rope.attention_factor == 1  # YaRN on the full layer only
    assert miss("olmo3", 2, dataclasses.replace(full, rope=sliding.rope)) > 1e-3


def test_apertus_xielu_reaches_the_next_layer(tmp_path):
    """Layer 2 reads layer 1's xIELU MLP: SiLU in its place, or no QK-norm, misses."""
    text = str(golden("apertus")["text"])
    assert families.read_config(HERE / "apertus").activation == "xielu"
    assert miss("apertus", 2, load_layer(edited(tmp_path, "apertus", hidden_act="silu"), layer=2, text=text)) > 1e-4
    case = load_layer(HERE / "apertus", layer=1, text=text)
    assert miss("apertus", 1, dataclasses.replace(case, qk_norm=None)) > 1e-3


def test_ernie4_5_and_seed_oss_biases_and_pairs():
    """ERNIE 4.5 turns interleaved pairs and biases o; Seed-OSS biases q, k, v but not o: each left out misses."""
    ernie = load_layer(HERE / "ernie4_5", layer=1, text=str(golden("ernie4_5")["text"]))
    assert ernie.rope is not None and ernie.rope.style == "interleaved" and ernie.b_O is not None
    assert miss("ernie4_5", 1, dataclasses.replace(ernie, rope=dataclasses.replace(ernie.rope, style="half"))) > 1e-3
    seed = load_layer(HERE / "seed_oss", layer=1, text=str(golden("seed_oss")["text"]))
    assert seed.b_Q is not None and seed.b_O is None
    assert miss("seed_oss", 1, dataclasses.replace(seed, b_Q=None, b_K=None)) > 1e-3


def test_ministral3_shows_no_temperature_where_it_is_1():
    """Below YaRN's 16 original positions Ministral 3's query temperature is exactly 1: the layer is Mistral's, and says so."""
    text = str(golden("ministral3")["text"])
    case = load_layer(HERE / "ministral3", layer=1, text=text)
    assert any("= 1 at every position here" in note for note in case.notes) and case.variants == ()
    longer = load_layer(HERE / "ministral3", layer=1, text=text + " " + text)  # past 16 tokens: its temperature is on
    assert [type(v).__name__ for v in longer.variants] == ["QueryTemperature"] and longer.variants[0].original == 16


MECHANISMS = {
    "qwen3_moe": ("per head", "softmax over all experts (float32)", "renormalised", "layer 2 keeps a dense MLP"),
    "granite": ("attention_multiplier = 0.2", "embedding_multiplier = 3", "residual_multiplier = 0.4", "logits_scaling = 2"),
    "cohere2": ("sliding window of the last 4 tokens", "on layers 1, 3", "no position encoding (NoPE)", "parallel attention and MLP"),
    "glm4": ("first 4 of each head's 8", "interleaved pairs", "q, k, v projections have biases", "four RMSNorms"),
    "glm4_moe": ("first 4 of each head's 8", "RMS-normalised per head", "1 shared expert", "the first layer keeps a dense MLP",
                 "correction bias (e_score_correction_bias) chooses the experts but does not weigh them"),
    "ministral": ("sliding window of the last 4 tokens", "on layers 1, 3", "full causal attention on layer 2"),
    "ministral3": ("sliding window of the last 4 tokens (sliding_window = 4) on every layer", "1 + 0.1·ln(1 + ⌊p / 16⌋)", "1 below 16 tokens"),
    "exaone4": ("on layers 1, 3", "RMS-normalised per head", "global layers have no position encoding (NoPE)", "no norm before attention"),
    "olmo3": ("on layers 1, 3", "over the whole q and k projections", "θ = 10000 on the sliding layers, θ = 500000, yarn", "no norm before"),
    "apertus": ("RMS-normalised per head", "down(xielu(up(x))), no gate"),
    "ernie4_5": ("q, k, v and o projections have biases",),
    "seed_oss": ("multi-query attention", "q, k, v projections have biases"),
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
    """The rope row of Cohere2, GLM-4 and ERNIE 4.5 says interleaved pairs; the others (GLM-4.5 too) turn halves."""
    for name in FAMILIES:
        assert model_info(HERE / name)["rope"]["style"] == ("interleaved" if name in ("cohere2", "glm4", "ernie4_5") else "half"), name


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_model_verify_is_declared(name):
    """Each family declares what `model verify` needs, with the float32 steps its transformers model takes."""
    declared = families.verification(name)
    assert declared is not None and declared.float32_steps
    assert declared.eager_experts == (name in ("qwen3_moe", "glm4_moe"))
    assert any("LayerNorm" in step for step in declared.float32_steps) == (name == "cohere2")
    assert any("turns q and k in float32" in step for step in declared.float32_steps) == (name in ("cohere2", "ernie4_5"))


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_live_transformers_still_gives_the_goldens(name):
    """transformers, run now on the fixture by the fixture script's own code, gives every committed golden array to
    1e-12 (skips without torch): a transformers upgrade that changes a family shows here first."""
    script = fixture_script()
    expected = golden(name)
    live = script.golden_with_inputs(HERE / name, expected["ids"].tolist(), moe=script.FAMILIES_2026[name].get("moe", False))
    assert set(live) <= set(expected)
    for key, array in live.items():
        np.testing.assert_allclose(array, expected[key], rtol=0, atol=1e-12, err_msg=key)


DECLARED = ("granite", "cohere2", "glm4", "ministral", "ministral3", "exaone4", "olmo3", "apertus", "ernie4_5", "seed_oss")


@pytest.mark.parametrize("name", DECLARED)
def test_families_that_differ_by_fields_are_declarations(name):
    """A family whose difference from Llama a LlamaLike field says is its declaration: no config reader or layer code of its own."""
    module = families.ARCHITECTURES[name]
    assert module.LLAMA_LIKE.model_type == name
    assert not hasattr(module, "read_config") and not hasattr(module, "layer_inputs")
    assert isinstance(families.read_config(HERE / name).family, config.LlamaSettings)


def test_declared_multipliers_and_norms_say_what_they_do():
    """The header says Granite's multipliers, GLM-4's second norms and Cohere2's parallel LayerNorm, from their declarations."""
    granite, glm4, cohere2 = (load_layer(HERE / name, layer=2, text=str(golden(name)["text"])).notes for name in ("granite", "glm4", "cohere2"))
    assert "× embedding_multiplier 3" in granite[0] and "× residual_multiplier 0.4" in granite[0]
    assert any(note.startswith("scores × attention_multiplier = 0.2 (divided by 5") for note in granite)
    assert "each block's output RMS-normed again" in glm4[0]
    assert any(note.startswith("RoPE (interleaved pairs 2i, 2i + 1)") and "the first 4 of each head's 8 coordinates turned" in note for note in glm4)
    assert cohere2[0].startswith("X = input_layernorm (LayerNorm, no bias)") and "both of the same normed input" in cohere2[0]
