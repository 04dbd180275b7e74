"""ModernBERT read from its tiny fixture gives transformers' own attention weights, every layer and head, global and local.

The fixture (tests/checkpoints/modernbert, scripts/make_checkpoints.py) has a global layer (θ = 160 000) and two local
ones (each token sees ±2 tokens; θ = 10 000) over a 14-token sentence, so the window hides keys both ways. The bound
is 1e-6: transformers turns q and k, computes RoPE's angles and the softmax in float32 (its LayerNorms in float64).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.sources.checkpoints.families import read_config
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario

HERE = Path(__file__).parent / "checkpoints"
BOUND = 1e-6


def golden() -> dict[str, np.ndarray]:
    with np.load(HERE / "modernbert" / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case) -> np.ndarray:
    """(H, L, L) the layer's attention weights as attncli's engine computes them from the LayerCase."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


@pytest.mark.parametrize("layer", [1, 2, 3])
def test_every_head_of_every_layer_matches_transformers(layer):
    """X, and the weights of every head, equal the golden ones within the bound; the local layers hide keys 3 or more apart."""
    expected = golden()
    case = load_layer(HERE / "modernbert", layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist()) and case.causal is False
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=BOUND)
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=BOUND)
    far = np.abs(np.subtract.outer(np.arange(14), np.arange(14))) > 2
    assert (case.window == 2) == (layer > 1) and (expected["attentions"][layer - 1][:, far] == 0).all() == (layer > 1)


def test_each_kind_of_layer_turns_with_its_own_base():
    """The global layer's RoPE is θ = 160 000 and the local layers' θ = 10 000, as the golden cos/sin tables."""
    expected = golden()
    thetas = []
    for layer in (1, 2):
        case = load_layer(HERE / "modernbert", layer=layer, text=str(expected["text"]))
        cos, _ = case.rope.table(np.arange(14), case.head_dim)
        np.testing.assert_allclose(cos, expected["cos"][layer - 1], rtol=0, atol=1e-6)
        thetas.append(case.rope.theta)
    assert thetas == [160_000.0, 10_000.0]


def test_the_comparison_can_fail():
    """The global base on a local layer, or a causal mask, misses by far more than the bound."""
    expected = golden()
    case = load_layer(HERE / "modernbert", layer=2, text=str(expected["text"]))
    other = load_layer(HERE / "modernbert", layer=1, text=str(expected["text"])).rope
    assert np.abs(weights_of(dataclasses.replace(case, rope=other)) - expected["attentions"][1]).max() > 1e-3
    assert np.abs(weights_of(dataclasses.replace(case, causal=True)) - expected["attentions"][1]).max() > 1e-2


def test_transformers_4_spellings_read_as_transformers_5(tmp_path):
    """global_rope_theta, local_rope_theta and global_attn_every_n_layers mean rope_parameters and layer_types."""
    folder = tmp_path / "modernbert"
    shutil.copytree(HERE / "modernbert", folder)
    config = json.loads((folder / "config.json").read_text())
    del config["rope_parameters"], config["layer_types"]
    config.update(global_rope_theta=160000.0, local_rope_theta=10000.0, global_attn_every_n_layers=3)
    (folder / "config.json").write_text(json.dumps(config))
    assert read_config(folder) == read_config(HERE / "modernbert")


def test_model_info_says_local_windows_reach_both_ways(cli):
    """`model info` names the two bases and a window on either side, never "every token sees every token" or a causal window."""
    info = model_info(HERE / "modernbert")
    assert info["supported"] is True and info["global_layers"] == [1] and info["sliding_layers"] == [2, 3]
    texts = " ".join(m["text"] for m in info["mechanisms"])
    assert "160000 on the global layers and 10000 on the local ones" in texts and "on either side" in texts
    assert "full causal" not in texts and "every token sees every token" not in texts and "the last 2 tokens" not in texts
    result = cli("model", "info", str(HERE / "modernbert"))
    assert result.exit_code == 0, result.stderr
    assert "at most 2 positions away on either side" in result.stdout


@pytest.mark.parametrize("command", ["run", "explain"])
def test_every_command_reads_the_family(cli, command):
    """run and explain work on a local layer."""
    model = ["--model", str(HERE / "modernbert"), "--layer", "2", "--sentence", "The cat sat on the mat"]
    args = {"run": ["run", *model, "--head", "2"], "explain": ["explain", *model, "--position", "3"]}[command]
    result = cli(*args)
    assert result.exit_code == 0, result.stderr


def test_layer_kinds_of_the_wrong_length_are_one_error(tmp_path):
    """layer_types must name each layer's kind; two kinds for three layers are refused at that key."""
    from attncli.errors import AttnError

    folder = tmp_path / "modernbert"
    shutil.copytree(HERE / "modernbert", folder)
    config = json.loads((folder / "config.json").read_text())
    config["layer_types"] = ["full_attention", "sliding_attention"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(AttnError) as caught:
        read_config(folder)
    assert caught.value.key == "layer_types" and "3 layer kinds" in str(caught.value.expected)
