"""SmolLM3 (NoPE on every n-th layer, a window on those layers): every layer and head against transformers, and a family that is a declaration.

The golden in tests/checkpoints/smollm3 is transformers 5.24's (scripts/make_checkpoints.py): 4 layers, no_rope_layer_interval 2
(layers 2 and 4 have no RoPE), use_sliding_window with a 4-token window on those layers, q, k, v and o biases. transformers
runs RMSNorm, RoPE and the softmax in float32 even in a float64 model: the bound is 1e-6 for the weights, 1e-5 for X.
"""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.sources.checkpoints import families
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario

HERE = Path(__file__).parent / "checkpoints" / "smollm3"


def golden() -> dict[str, np.ndarray]:
    with np.load(HERE / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case) -> np.ndarray:
    """(H, L, L) the engine's weights for the layer's scenario."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


@pytest.mark.parametrize("layer", [1, 2, 3, 4])
def test_every_head_of_every_layer_matches_transformers(layer):
    """X and the weights of each layer, RoPE and NoPE layers alike, equal transformers' (the NoPE layers' inputs pass RoPE layers and back)."""
    expected = golden()
    case = load_layer(HERE, layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist())
    assert (case.rope is None) == (layer % 2 == 0) and case.window == (3 if layer % 2 == 0 else None)
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=1e-5)
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=1e-6)


def test_the_comparison_can_fail():
    """RoPE on a NoPE layer, or a NoPE layer without its window, breaks the agreement."""
    expected = golden()
    rope = load_layer(HERE, layer=1, text=str(expected["text"])).rope
    case = load_layer(HERE, layer=2, text=str(expected["text"]))
    assert np.abs(weights_of(dataclasses.replace(case, rope=rope)) - expected["attentions"][1]).max() > 1e-3
    assert np.abs(weights_of(dataclasses.replace(case, window=None)) - expected["attentions"][1]).max() > 1e-3


def test_the_header_says_a_layer_has_no_rope():
    """A NoPE layer's notes say so and state no θ; a RoPE layer's state its θ."""
    text = str(golden()["text"])
    nope = load_layer(HERE, layer=2, text=text).notes
    assert any(note.startswith("no RoPE on this layer (NoPE)") for note in nope) and not any("θ =" in note for note in nope)
    assert any("θ = 50000" in note for note in load_layer(HERE, layer=3, text=text).notes)


def test_model_info_names_the_nope_layers_and_their_windows():
    """model info lists the layers without RoPE and the sliding ones, from the family's reading and from config.json alone."""
    info = model_info(HERE)
    said = {m["key"]: m["text"] for m in info["mechanisms"]}
    assert info["supported"] is True
    assert said["nope"].startswith("no RoPE (NoPE) on layers 2, 4") and "RoPE on layers 1, 3" in said["nope"]
    assert "on layers 2, 4, the local ones" in said["local_global"]
    from attncli.sources.checkpoints.describe import describe_raw

    raw = json.loads((HERE / "config.json").read_text()) | {"model_type": "not_read_by_attncli"}
    described = {m["key"]: m["text"] for m in describe_raw(raw)["mechanisms"]}
    assert described["nope"] == said["nope"]


def test_smollm3_is_a_declaration():
    """The family's module declares how it differs and brings no code of its own to read a layer or its config."""
    module = families.ARCHITECTURES["smollm3"]
    assert module.LLAMA_LIKE.rope_layers is not None
    assert not hasattr(module, "read_config") and not hasattr(module, "layer_inputs")


def test_layer_types_window_the_layers_even_without_use_sliding_window(tmp_path):
    """SmolLM3Model masks the layers layer_types marks sliding with sliding_window whatever use_sliding_window says (it only
    picks the flash-attention argument); without layer_types, use_sliding_window false leaves every layer unwindowed."""
    import shutil

    folder = tmp_path / "smollm3"
    shutil.copytree(HERE, folder)
    config = json.loads((HERE / "config.json").read_text()) | {"use_sliding_window": False}
    (folder / "config.json").write_text(json.dumps(config))
    text = str(golden()["text"])
    expected = golden()["attentions"][1]  # the fixture's (use_sliding_window true): the same masks
    np.testing.assert_allclose(weights_of(load_layer(folder, layer=2, text=text)), expected, rtol=0, atol=1e-6)
    (folder / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "layer_types"}))
    assert load_layer(folder, layer=2, text=text).window is None
