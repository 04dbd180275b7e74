"""Gemma 3 (text): (1 + w) QK-norm per head, 5 sliding layers to 1 global with a RoPE θ each, √hidden embeddings, four norms.

Against transformers 5.24's goldens in tests/checkpoints/gemma3 (scripts/make_checkpoints.py; docs/families.md):
every layer and head. transformers computes Gemma's RMSNorms (x.float()) and the softmax in float32 inside the
float64 model, so the bound is 1e-6 for the weights and 1e-5 for the block inputs X.
"""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.sources.checkpoints.families import read_config
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario

FOLDER = Path(__file__).parent / "checkpoints" / "gemma3"


def golden() -> dict[str, np.ndarray]:
    with np.load(FOLDER / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case) -> np.ndarray:
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


@pytest.mark.parametrize("layer", range(1, 7))
def test_every_head_of_every_layer_matches_transformers(layer):
    expected = golden()
    case = load_layer(FOLDER, layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist())
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=1e-5)
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=1e-6)


def test_five_local_layers_then_one_global_each_with_its_theta():
    cfg = read_config(FOLDER)
    assert cfg.windows == (4, 4, 4, 4, 4, None)  # transformers' sliding_window = 4: keys i−3 … i
    text = str(golden()["text"])
    local, full = load_layer(FOLDER, layer=1, text=text), load_layer(FOLDER, layer=6, text=text)
    assert local.window == 3 and full.window is None
    assert local.rope.theta == 10_000 and full.rope.theta == 1_000_000
    assert local.divisor == np.sqrt(8) and local.qk_norm.offset == 1.0  # query_pre_attn_scalar = 8


def test_the_comparison_can_fail():
    """w instead of (1 + w) in QK-norm, the global θ on a local layer, or no window each break the agreement."""
    expected = golden()
    case = load_layer(FOLDER, layer=2, text=str(expected["text"]))
    far = lambda changed: np.abs(weights_of(changed) - expected["attentions"][1]).max()  # noqa: E731
    assert far(dataclasses.replace(case, qk_norm=dataclasses.replace(case.qk_norm, offset=0.0))) > 1e-3
    assert far(dataclasses.replace(case, window=None)) > 1e-3
    full = load_layer(FOLDER, layer=6, text=str(expected["text"]))
    assert far(dataclasses.replace(case, rope=full.rope)) > 1e-4


def test_model_info_says_supported():
    info = model_info(FOLDER)
    assert info["supported"] is True and info["sliding_layers"] == [1, 2, 3, 4, 5]
    said = " ".join(m["text"] for m in info["mechanisms"])
    assert "(1 + w)" in said and "on layers 1–5, the local ones; full causal attention on layer 6" in said and "θ = 10000 on the sliding" in said
