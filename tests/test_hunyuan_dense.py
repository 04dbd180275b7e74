"""Hunyuan dense (hunyuan_v1_dense): QK-norm after RoPE with weights and RoPE's base stretched by NTK alpha, every layer and
head against transformers.

The golden in tests/checkpoints/hunyuan_v1_dense is transformers 5.24's (scripts/make_checkpoints.py, FAMILIES_2026): 3 layers,
query_layernorm and key_layernorm on the rotated q and k, rope_type dynamic with alpha 1000 (θ = 10000·1000^(8/6) = 1e8), q, k,
v and o biases. transformers runs its norms, RoPE and softmax in float32 even in a float64 model: the bounds are 1e-6 for the
weights, 1e-5 for X (measured: 1.9e-7 and 7.4e-7).
"""

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import QkNorm, QkNormAfterRope
from attncli.sources.checkpoints import families
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario
from tests.live import fixture_script

HERE = Path(__file__).parent / "checkpoints" / "hunyuan_v1_dense"


def golden() -> dict[str, np.ndarray]:
    with np.load(HERE / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


TEXT = str(golden()["text"])


def miss(layer: int, case: Any) -> float:
    """How far a layer's weights are from transformers' goldens."""
    weights = np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])
    return float(np.abs(weights - golden()["attentions"][layer - 1]).max())


def edited(tmp_path: Path, **change: Any) -> Path:
    """A copy of the fixture whose config.json has `change` applied."""
    folder = tmp_path / "hunyuan_v1_dense"
    shutil.copytree(HERE, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    return folder


@pytest.mark.parametrize("layer", [1, 2, 3])
def test_every_head_of_every_layer_matches_transformers(layer):
    """X and every head's weights of each layer equal transformers'."""
    expected = golden()
    case = load_layer(HERE, layer=layer, text=TEXT)
    assert case.token_ids == tuple(expected["ids"].tolist())
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=1e-5)
    np.testing.assert_allclose(np.stack([h.weights for h in engine.run(layer_scenario(case)).heads]), expected["attentions"][layer - 1],
                               rtol=0, atol=1e-6)  # fmt: skip


def test_the_norm_belongs_after_rope():
    """The same weighted norm before RoPE (Qwen3's place), or no norm, misses: the weight does not commute with the turn."""
    case = load_layer(HERE, layer=1, text=TEXT)
    (after,) = case.variants
    assert isinstance(after, QkNormAfterRope) and after.weighted and case.qk_norm is None
    assert miss(1, dataclasses.replace(case, variants=(), qk_norm=QkNorm(after.q_weight, after.k_weight, eps=after.eps))) > 1e-3
    assert miss(1, dataclasses.replace(case, variants=())) > 1e-3


def test_alpha_stretches_the_base(tmp_path):
    """θ is 10000·1000^(8/6) = 1e8: RoPE on θ = 10000 misses, and the header says where θ came from."""
    case = load_layer(HERE, layer=1, text=TEXT)
    assert case.rope is not None and case.rope.theta == pytest.approx(1e8) and "NTK alpha 1000" in (case.rope.scaling or "")
    config = json.loads((HERE / "config.json").read_text())
    plain = {**config["rope_parameters"], "rope_type": "default"}
    del plain["alpha"]
    assert miss(1, load_layer(edited(tmp_path, rope_parameters=plain), layer=1, text=TEXT)) > 1e-3
    assert any("NTK alpha 1000 scaling (θ = 10000·1000^(8/6)" in note for note in case.notes)


def test_model_info_says_the_norm_is_after_rope_and_the_alpha():
    """model info: QK-norm after RoPE with its weights (never "before RoPE"), and the base alpha stretched."""
    info = model_info(HERE)
    said = {m["key"]: m["text"] for m in info["mechanisms"]}
    assert info["supported"] is True
    assert "after RoPE" in said["qk_norm"] and "before RoPE" not in said["qk_norm"] and "query_layernorm" in said["qk_norm"]
    assert "NTK alpha" in said["hunyuan_v1_dense"] and "= 1e+08" in said["hunyuan_v1_dense"]


def test_use_qk_norm_false_is_still_normed_as_transformers_does(tmp_path):
    """transformers' HunYuanDenseV1Attention builds both norms whatever use_qk_norm says: attncli reads and describes them too."""
    folder = edited(tmp_path, use_qk_norm=False)
    assert miss(2, load_layer(folder, layer=2, text=TEXT)) < 1e-6
    assert "qk_norm" in [m["key"] for m in model_info(folder)["mechanisms"]]
    assert families.read_config(folder).model_type == "hunyuan_v1_dense"


def test_live_transformers_agrees():
    """transformers itself, run now on the fixture, gives the stored goldens (skips without torch and transformers)."""
    script = fixture_script()
    expected = golden()
    live = script.golden_with_inputs(HERE, expected["ids"].tolist())
    for key, array in live.items():
        np.testing.assert_allclose(array, expected[key], rtol=0, atol=1e-12, err_msg=key)
