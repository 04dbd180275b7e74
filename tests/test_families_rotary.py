"""GPT-NeoX/Pythia and Phi-3 read from their tiny fixtures give transformers' own attention weights, every layer and head.

The fixtures (tests/checkpoints/gpt_neox, phi3; scripts/make_checkpoints.py) hold golden weights from transformers'
eager attention with the model in float64. The bound is 1e-6, not 1e-12: transformers computes the RoPE angles (inverse
frequencies, cos, sin) and the softmax in float32 in both families, and Phi-3's RMSNorm too (docs/families.md);
the observed differences are below 3e-7. GPT-NeoX's LayerNorm is float64 throughout, so its first layer's input is
exact to 1e-12.
"""

from __future__ import annotations

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
FAMILIES = {"gpt_neox": 8, "phi3": 4}  # head_dim of each fixture
BOUND = 1e-6


def golden(name: str) -> dict[str, np.ndarray]:
    with np.load(HERE / name / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case) -> np.ndarray:
    """(H, L, L) the layer's attention weights as attncli's engine computes them from the LayerCase."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


def rotate_half_partial(x: np.ndarray, r: int, inv_freq: np.ndarray) -> np.ndarray:
    """(L, d) the first r coordinates turned as transformers' apply_rotary_pos_emb does, the rest as they are (written plainly)."""
    out = x.copy()
    for p in range(x.shape[0]):
        for i in range(r // 2):
            c, s = np.cos(p * inv_freq[i]), np.sin(p * inv_freq[i])
            out[p, i] = x[p, i] * c - x[p, i + r // 2] * s
            out[p, i + r // 2] = x[p, i + r // 2] * c + x[p, i] * s
    return out


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.parametrize("layer", [1, 2])
def test_every_head_of_every_layer_matches_transformers(name, layer):
    """X, and the weights of every head, from attncli's reading of the checkpoint equal the golden ones within the bound."""
    expected = golden(name)
    case = load_layer(HERE / name, layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist())
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=BOUND)
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=BOUND)
    assert case.rope is not None and case.rope.width(case.head_dim) == expected["cos"].shape[-1] < case.head_dim


def test_gpt_neox_first_layer_input_is_exact():
    """LayerNorm is float64 in transformers too: layer 1's X equals the golden input to 1e-12."""
    expected = golden("gpt_neox")
    case = load_layer(HERE / "gpt_neox", layer=1, text=str(expected["text"]))
    np.testing.assert_allclose(case.X, expected["attention_inputs"][0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_rotation_is_the_golden_table_and_a_plain_partial_rotate_half(name):
    """The engine's rotated q equals a plain loop over the first r coordinates, and its cos/sin the fixture's table."""
    expected = golden(name)
    case = load_layer(HERE / name, layer=1, text=str(expected["text"]))
    rope, r = case.rope, case.rope.width(case.head_dim)
    head = engine.run(layer_scenario(case)).heads[0]
    np.testing.assert_allclose(head.Q_rope, rotate_half_partial(head.Q, r, rope.inv_freq), rtol=0, atol=1e-12)
    cos, sin = rope.table(np.arange(len(case.token_ids)), case.head_dim)
    np.testing.assert_allclose(cos, expected["cos"][0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(sin, expected["sin"][0], rtol=0, atol=1e-6)


def test_the_comparison_can_fail():
    """Rotating the whole head, splitting NeoX's qkv as blocks, or a sequential residual each miss by far more than the bound."""
    import dataclasses

    from attncli.sources.checkpoints import neox

    expected = golden("gpt_neox")
    case = load_layer(HERE / "gpt_neox", layer=2, text=str(expected["text"]))
    whole = dataclasses.replace(case, rope=dataclasses.replace(case.rope, rotary_dim=None, inv_freq=None))
    assert np.abs(weights_of(whole) - expected["attentions"][1]).max() > 1e-3
    blocks = dataclasses.replace(case, W_Q=case.W_K, W_K=case.W_Q)
    assert np.abs(weights_of(blocks) - expected["attentions"][1]).max() > 1e-3
    cfg = dataclasses.replace(read_config(HERE / "gpt_neox"), family=neox.NeoxSettings(parallel_residual=False))
    from attncli.sources.checkpoints.safetensors import Checkpoint

    sequential = neox.layer_inputs(cfg, Checkpoint(HERE / "gpt_neox"), case.token_ids, 2)
    assert np.abs(sequential.X - expected["attention_inputs"][1]).max() > 1e-3


def copy_with_config(name: str, tmp_path: Path, change) -> Path:
    folder = tmp_path / name
    shutil.copytree(HERE / name, folder)
    config = json.loads((folder / "config.json").read_text())
    change(config)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_transformers_4_spellings_read_as_transformers_5():
    """GPT-NeoX's rotary_pct + rotary_emb_base and Phi's top-level partial_rotary_factor + rope_theta mean rope_parameters."""

    def neox_old(config):
        parameters = config.pop("rope_parameters")
        config.update(rotary_pct=parameters["partial_rotary_factor"], rotary_emb_base=parameters["rope_theta"])

    def phi_old(config):
        parameters = config.pop("rope_parameters")
        config.update(partial_rotary_factor=parameters["partial_rotary_factor"], rope_theta=parameters["rope_theta"])

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name, change in (("gpt_neox", neox_old), ("phi3", phi_old)):
            old, new = read_config(copy_with_config(name, Path(tmp), change)), read_config(HERE / name)
            assert old.rope == new.rope and new.rope is not None and new.rope.partial < 1
            assert old == new


def test_a_fraction_that_leaves_an_odd_width_is_one_clear_error(tmp_path):
    """partial_rotary_factor 0.375 of head_dim 4 is 1.5 → 1 coordinate: refused, naming the key."""
    from attncli.errors import AttnError

    folder = copy_with_config("phi3", tmp_path, lambda c: c["rope_parameters"].update(partial_rotary_factor=0.375))
    with pytest.raises(AttnError) as error:
        load_layer(folder, layer=1, text="The cat")
    assert error.value.key == "partial_rotary_factor" and "rotates 1 coordinates" in str(error.value)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_model_info_says_supported_and_describes_the_partial_rotary(cli, name):
    """`model info` reads the family, says it is supported, and says how much of each head RoPE turns."""
    info = model_info(HERE / name)
    assert info["supported"] is True and info["reason"] is None
    assert info["rope"]["rotary_dim"] == golden(name)["cos"].shape[-1] and info["rope"]["partial_rotary_factor"] < 1
    result = cli("model", "info", str(HERE / name))
    assert result.exit_code == 0, result.stderr
    assert "partial rotary: the first 2 of each head's" in result.stdout and "pass through unrotated" in result.stdout


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.parametrize("command", ["run", "explain", "decode"])
def test_every_command_reads_the_family(cli, name, command):
    """run, explain (with --block-size) and decode work on the checkpoint's last layer; explain says what passes through."""
    model = ["--model", str(HERE / name), "--layer", "2", "--sentence", "The cat sat on the mat"]
    args = {"run": ["run", *model, "--head", "2"], "explain": ["explain", *model, "--position", "3", "--block-size", "2"],
            "decode": ["decode", *model]}[command]  # fmt: skip
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    if command == "explain":
        assert "pass through unrotated" in result.stdout


def test_model_verify_knows_where_each_family_projects_its_heads():
    """`model verify` hooks each family's output projection (its input is the heads side by side) and states the float32 bound."""
    from attncli.cli import verify

    assert verify.output_projections("gpt_neox")["self"].search("gpt_neox.layers.1.attention.dense")
    assert verify.output_projections("phi3")["self"].search("model.layers.0.self_attn.o_proj")
    assert not verify.output_projections("gpt_neox")["self"].search("gpt_neox.layers.1.attention.query_key_value")
    assert verify.bound_for("phi3") is verify.FLOAT32_INSIDE
    neox = verify.bound_for("gpt_neox")  # float32 RoPE and softmax; its LayerNorm is float64, so no RMSNorm in the reason
    assert neox.weights == verify.FLOAT32_INSIDE.weights and "softmax" in neox.why and "RMSNorm" not in neox.why
