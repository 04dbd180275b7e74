"""DeepSeek's group-limited routers past the MoE layers, against transformers' goldens, every layer and head.

tests/checkpoints/deepseek_v3_groups and deepseek_v2_groups (scripts/make_checkpoints.py --only …, transformers 5.24,
float64 model, eager attention and experts): 4 layers, the first dense, then 3 mixture-of-experts layers of 8 routed
experts in 4 groups, 3 per token from the 2 best groups, so layers 3 and 4 read a residual stream the routers wrote.
- V3: sigmoid scores; groups scored by the sum of their best two corrected scores; an e_score_correction_bias drawn
  from U(−1, 0.3), so that the bias changes the choice and some kept experts' corrected scores are below 0; the
  weights the uncorrected sigmoids, normalised (norm_topk_prob) and × 2.5. The script asserts that the naive top-k,
  the bias without groups and the groups without bias each pick other experts than transformers in every MoE layer.
- V2: a softmax over all experts; groups scored by their best expert (group_limited_greedy), × 2, no bias;
  greedy.npz is the same folder run with topk_method greedy (no groups).
golden.npz holds the experts transformers picked (`experts`, (MoE layers, L, k), sorted), recorded from its routers.
Bound: 1e-6, as tests/test_deepseek.py says why (transformers' float32 steps inside a float64 model).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.errors import AttnError
from attncli.sources.checkpoints import deepseek
from attncli.sources.checkpoints.blocks import rms_norm
from attncli.sources.checkpoints.families import read_config
from attncli.sources.checkpoints.gguf import open_model
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.safetensors import Checkpoint
from attncli.sources.checkpoints.scenario import layer_scenario, load_scenario

CHECKPOINTS = Path(__file__).parent / "checkpoints"
V3, V2 = CHECKPOINTS / "deepseek_v3_groups", CHECKPOINTS / "deepseek_v2_groups"
FLOAT32 = 1e-6
STREAM = 1e-5  # the residual stream (numbers up to 5) after 3 layers of float32 steps: measured 2e-6
LAYERS = (1, 2, 3, 4)


def golden(folder: Path, name: str = "golden.npz") -> dict[str, np.ndarray]:
    with np.load(folder / name, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


@pytest.fixture(scope="module")
def greedy(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    """The V2 folder with topk_method greedy, and transformers' numbers for it (greedy.npz)."""
    folder = tmp_path_factory.mktemp("greedy") / "deepseek_v2_groups"
    shutil.copytree(V2, folder)
    config = json.loads((V2 / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "topk_method": "greedy"}))
    return folder, {**golden(V2, "greedy.npz"), "text": golden(V2)["text"], "ids": golden(V2)["ids"]}


def cases(greedy: tuple[Path, dict[str, np.ndarray]]) -> dict[str, tuple[Path, dict[str, np.ndarray]]]:
    return {"v3": (V3, golden(V3)), "v2": (V2, golden(V2)), "v2-greedy": greedy}


@pytest.mark.parametrize("name", ["v3", "v2", "v2-greedy"])
@pytest.mark.parametrize("layer", LAYERS)
def test_every_head_of_every_layer_equals_transformers(greedy, name, layer):
    """Each layer's input X and every head's attention weights equal transformers', past every MoE layer, to 1e-6."""
    folder, expected = cases(greedy)[name]
    scenario = load_scenario(folder, layer=layer, sentence=str(expected["text"]))
    np.testing.assert_allclose(scenario.X, expected["attention_inputs"][layer - 1], rtol=0, atol=STREAM)
    for head in engine.run(scenario).heads:
        np.testing.assert_allclose(head.weights, expected["attentions"][layer - 1][head.head - 1], rtol=0, atol=FLOAT32, err_msg=f"head {head.head}")


@pytest.mark.parametrize("name", ["v3", "v2", "v2-greedy"])
def test_each_router_picks_transformers_experts_and_the_stream_follows(greedy, name):
    """In every MoE layer each token's experts are the ones transformers picked, and every layer's output (the last
    after the final norm) is transformers' residual stream."""
    folder, expected = cases(greedy)[name]
    cfg, checkpoint = read_config(folder), Checkpoint(folder)
    ids = tuple(int(i) for i in expected["ids"])
    after, experts = deepseek.forward(cfg, checkpoint, ids, len(LAYERS))
    assert experts[0] is None
    picked = np.stack([np.sort(chosen, axis=1) for chosen in experts[1:] if chosen is not None])
    np.testing.assert_array_equal(picked, expected["experts"])
    for layer in LAYERS[:-1]:
        np.testing.assert_allclose(deepseek.forward(cfg, checkpoint, ids, layer)[0], expected["hidden_states"][layer], rtol=0, atol=STREAM)
    final = rms_norm(after, checkpoint.read("model.norm.weight"), cfg.norm_eps)
    np.testing.assert_allclose(final, expected["hidden_states"][-1], rtol=0, atol=STREAM)


def test_the_v3_fixture_needs_its_groups_and_its_bias(monkeypatch):
    """The fixture's choices are the groups' and the bias's doing: the same router logits routed without groups, or
    without the bias, give some token of every MoE layer other experts than transformers picked."""
    expected = golden(V3)
    cfg = read_config(V3)
    ds = deepseek.read_deepseek(V3, cfg)
    assert (ds.experts, ds.groups, ds.top_groups, ds.per_token, ds.norm_topk, ds.scaling) == (8, 4, 2, 3, True, 2.5)
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    route = deepseek.route

    def recording(ds: deepseek.DeepseekConfig, logits: np.ndarray, bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        assert bias is not None
        seen.append((logits, bias))
        return route(ds, logits, bias)

    monkeypatch.setattr(deepseek, "route", recording)
    deepseek.forward(cfg, Checkpoint(V3), tuple(int(i) for i in expected["ids"]), len(LAYERS))
    assert len(seen) == 3
    one_group = deepseek.DeepseekConfig(**{**ds.__dict__, "groups": 1, "top_groups": 1})
    for (logits, bias), picked in zip(seen, expected["experts"]):
        assert bias.min() < -0.5
        for other in (route(one_group, logits, bias)[0], route(ds, logits, None)[0], route(one_group, logits, None)[0]):
            assert (np.sort(other, axis=1) != picked).any(axis=1).any()


def test_a_dropped_group_stays_out_when_kept_experts_score_below_zero():
    """With a bias that takes a kept group's corrected scores below 0, the router still picks within the kept groups
    (transformers 5 masks the others with −∞; a mask of 0 let a dropped group's expert in)."""
    ds = deepseek.DeepseekConfig(
        q_lora_rank=None, kv_lora_rank=2, nope=2, rope=2, v_dim=2, interleave=True, experts=6, per_token=2, shared=0,
        groups=3, top_groups=1, dense_layers=0, moe_inner=2, scaling=1.0, norm_topk=False,
    )  # fmt: skip
    logits = np.array([[2.0, 1.5, -1.0, -1.2, 0.0, 0.1]])
    bias = np.array([-0.8, -0.9, -2.0, -2.0, -2.0, -2.0])  # group 1 corrected ≈ 0.08, −0.08; groups 2, 3 far below
    chosen, weights = deepseek.route(ds, logits, bias)
    assert sorted(chosen[0].tolist()) == [0, 1]  # a fill of 0 would have put an expert of a dropped group second
    np.testing.assert_allclose(sorted(weights[0]), sorted(1 / (1 + np.exp(-np.array([2.0, 1.5])))), rtol=1e-6)


def test_more_experts_per_token_than_the_kept_groups_hold_is_one_line(tmp_path):
    """num_experts_per_tok above topk_group × experts per group (transformers would pick dropped experts in no
    defined order) is refused in one line naming the key."""
    folder = tmp_path / "deepseek"
    shutil.copytree(V3, folder)
    config = json.loads((V3 / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_experts_per_tok": 5}))
    with pytest.raises(AttnError) as caught:
        deepseek.read_deepseek(folder, read_config(folder))
    message = str(caught.value)
    assert "\n" not in message and "num_experts_per_tok" in message and "topk_group" in message


def test_the_gguf_file_reads_groups_bias_and_gating_as_llama_cpp_writes_them(tmp_path):
    """The grouped fixture written as llama.cpp's converter writes deepseek2 (expert_group_count, expert_group_used_count,
    expert_gating_func, expert_weights_scale, expert_weights_norm; exp_probs_b) gives transformers' weights in every layer."""
    pytest.importorskip("gguf", reason="gguf (llama.cpp's writer) is a test dependency: pip install '.[test]'")
    from tests.test_gguf import make_gguf

    path = tmp_path / "deepseek_v3_groups.gguf"
    make_gguf.write_deepseek(path, V3)
    expected = golden(V3)
    text = str(expected["text"])
    for layer in LAYERS:
        case = load_layer(path, layer=layer, text=text)
        assert case.token_ids == tuple(int(i) for i in expected["ids"])
        for head in engine.run(layer_scenario(case)).heads:
            np.testing.assert_allclose(head.weights, expected["attentions"][layer - 1][head.head - 1], rtol=0, atol=FLOAT32)
    model = open_model(path)
    assert model.file.tensors["blk.2.exp_probs_b.bias"]  # llama.cpp's name for the correction bias
    ds = deepseek.read_deepseek(model.checkpoint.folder, model.cfg, model.checkpoint.config_keys)
    assert (ds.groups, ds.top_groups, ds.scaling, ds.norm_topk, ds.per_token) == (4, 2, 2.5, True, 3)
    bias = model.checkpoint.read("layers.2.mlp.gate.e_score_correction_bias")
    np.testing.assert_array_equal(bias, Checkpoint(V3).read("model.layers.2.mlp.gate.e_score_correction_bias"))


def test_model_info_says_how_the_v3_router_picks():
    """`model info` says V3's router: sigmoid scores within the kept groups, the bias for the choice only, the weights' scaling."""
    info = model_info(V3)
    moe = next(m["text"] for m in info["mechanisms"] if m["key"] == "moe")
    assert moe.endswith("a sigmoid router picks them within the 2 of 4 groups whose two best experts score highest, the correction "
                        "bias (e_score_correction_bias) added for the choice only; their weights are their sigmoid scores, "
                        "normalised to sum to 1, × 2.5")  # fmt: skip
