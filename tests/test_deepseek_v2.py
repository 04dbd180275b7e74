"""DeepSeek V2 (sources/checkpoints/deepseek.py, model_type deepseek_v2) against transformers' goldens on its tiny
fixture, every layer and head.

tests/checkpoints/deepseek_v2 (scripts/make_checkpoints.py --only deepseek_v2, transformers 5.24, float64 model, eager
attention and experts): 2 layers, the first dense, the second a mixture of experts (4 routed + 2 shared, a softmax
router, group-limited greedy top 2 within 1 of 2 groups, × 2); MLA as V2-Lite has it, without a query latent
(q_lora_rank null: one q_proj), kv_lora_rank 6, nope 4, rope 4 (always interleaved pairs), v 4.

Bound: 1e-6, not 1e-12. transformers computes this float64 model with float32 inside: every RMSNorm casts its input to
float32, the eager softmax is softmax(…, dtype=float32), the rotary angles are float32 and apply_rotary_emb turns
q's and k's rotary parts as float32 complex numbers, and the router's logits and softmax are float32; attncli computes
all of it in float64 except the router, whose choice it makes in float32 as transformers does.
tests/checkpoints/lite_deepseek_v2.npz is the same fixture run with DeepSeek-V2-Lite's greedy router and YaRN
(scripts/make_checkpoints.py's V2_LITE).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import Mla, Rope
from attncli.errors import AttnError
from attncli.sources.checkpoints import deepseek
from attncli.sources.checkpoints.blocks import Weights, rms_norm
from attncli.sources.checkpoints.families import read_config
from attncli.sources.checkpoints.layer import model_info
from attncli.sources.checkpoints.safetensors import Checkpoint
from attncli.sources.checkpoints.scenario import load_scenario

FOLDER = Path(__file__).parent / "checkpoints" / "deepseek_v2"
FLOAT32 = 1e-6


@pytest.fixture(scope="module")
def golden():
    return np.load(FOLDER / "golden.npz")


def test_the_fixture_is_v2_as_v2_lite_has_it():
    """The fixture exercises what differs from V3: no query latent, the group-limited softmax router, scaling ≠ 1."""
    config = json.loads((FOLDER / "config.json").read_text())
    assert config["model_type"] == "deepseek_v2" and config["q_lora_rank"] is None
    assert config["topk_method"] == "group_limited_greedy" and config["routed_scaling_factor"] != 1.0
    ds = deepseek.read_deepseek(FOLDER, read_config(FOLDER))
    assert ds.q_lora_rank is None and ds.interleave and not ds.norm_topk and ds.shared == 2 and ds.topk_method == "group_limited_greedy"


@pytest.mark.parametrize("layer", [1, 2])
def test_every_head_of_every_layer_equals_transformers(golden, layer):
    """The layer's input X and every head's weights equal transformers' to 1e-6; the absorbed form equals the expanded to 1e-12."""
    scenario = load_scenario(FOLDER, layer=layer, sentence=str(golden["text"]))
    assert scenario.variant(Mla) is not None
    np.testing.assert_allclose(scenario.X, golden["attention_inputs"][layer - 1], rtol=0, atol=FLOAT32)
    result = engine.run(scenario)
    assert len(result.heads) == 2
    for head in result.heads:
        np.testing.assert_allclose(head.weights, golden["attentions"][layer - 1][head.head - 1], rtol=0, atol=FLOAT32, err_msg=f"head {head.head}")
        assert head.mla is not None and head.mla.difference <= 1e-12


def test_the_rotary_part_turns_by_transformers_angles(golden):
    """V2's table is e^(iθ) per interleaved pair (its real and imaginary parts saved as cos and sin): the same angles
    p·θ^(−2i/d_r) attncli turns the pairs (2i, 2i+1) by, to float32."""
    scenario = load_scenario(FOLDER, layer=1, sentence=str(golden["text"]))
    rope = scenario.variant(Rope)
    assert rope is not None and rope.style == "interleaved"
    angles = rope.angles(np.arange(scenario.L), 4)  # (L, 2)
    np.testing.assert_allclose(np.cos(angles), golden["cos"][0], rtol=0, atol=FLOAT32)
    np.testing.assert_allclose(np.sin(angles), golden["sin"][0], rtol=0, atol=FLOAT32)


def test_dense_and_moe_layers_give_transformers_hidden_states(golden):
    """Layer 1 (dense SwiGLU) and layer 2 (softmax router, group-limited top 2, weights × 2 unnormalised, two shared
    experts) give transformers' residual stream; the last golden state is after the final norm."""
    cfg = read_config(FOLDER)
    checkpoint = Checkpoint(FOLDER)
    ids = tuple(int(i) for i in golden["ids"])
    after_one, experts_one = deepseek.forward(cfg, checkpoint, ids, 1)
    np.testing.assert_allclose(after_one, golden["hidden_states"][1], rtol=0, atol=FLOAT32)
    assert experts_one == [None]
    after_two, experts = deepseek.forward(cfg, checkpoint, ids, 2)
    final = rms_norm(after_two, checkpoint.read("model.norm.weight"), cfg.norm_eps)
    np.testing.assert_allclose(final, golden["hidden_states"][2], rtol=0, atol=1e-5)
    chosen = experts[1]
    assert chosen is not None and chosen.shape == (len(ids), 2)
    assert all(len({int(e) // 2 for e in row}) == 1 for row in chosen), "topk_group = 1: both experts from one group"
    assert len({tuple(sorted(row)) for row in chosen.tolist()}) > 1, "the tokens do not all use the same experts"


def test_the_router_is_not_v3s(golden):
    """V3's sigmoid router, normalised, on the same layer would give other residuals: the fixture tells the two apart."""
    cfg = read_config(FOLDER)
    checkpoint = Checkpoint(FOLDER)
    ds = deepseek.read_deepseek(FOLDER, cfg)
    w = Weights(checkpoint, probe="embed_tokens.weight", prefixes=("model.", ""))
    x = rms_norm(golden["hidden_states"][1], checkpoint.read("model.layers.1.post_attention_layernorm.weight"), cfg.norm_eps)
    ours, _ = deepseek._moe(cfg, ds, w, 1, x)
    v3 = deepseek.DeepseekConfig(**{**ds.__dict__, "topk_method": "noaux_tc", "norm_topk": True})
    theirs, _ = deepseek._moe(cfg, v3, w, 1, x)
    assert np.abs(ours - theirs).max() > 1e-2


def _ds(method: str, *, groups: int = 2, top_groups: int = 1) -> deepseek.DeepseekConfig:
    return deepseek.DeepseekConfig(
        q_lora_rank=None, kv_lora_rank=2, nope=2, rope=2, v_dim=2, interleave=True, experts=4, per_token=2, shared=0,
        groups=groups, top_groups=top_groups, dense_layers=0, moe_inner=2, scaling=3.0, norm_topk=False, topk_method=method,
    )  # fmt: skip


def test_router_by_hand():
    """DeepseekV2TopkRouter: softmax over all experts; greedy takes the best 2 anywhere; group-limited keeps the group
    whose best expert is best (group 2 here: 0.5 > 0.45, though group 1 sums more) and takes the best 2 inside it; the
    weights are the softmax scores themselves × routed_scaling_factor, not renormalised."""
    logits = np.log(np.array([[0.45, 0.40, 0.50, 0.05]]))  # softmax = [0.3, 0.2667, 0.3333, 0.0333] (sum 1.4 → /1.4)
    p = np.array([0.45, 0.40, 0.50, 0.05]) / 1.4
    chosen, weights = deepseek.route(_ds("greedy", groups=1), logits, None)
    assert chosen[0].tolist() == [2, 0]
    np.testing.assert_allclose(weights[0], 3.0 * p[[2, 0]], rtol=1e-6)
    chosen, weights = deepseek.route(_ds("group_limited_greedy"), logits, None)
    assert chosen[0].tolist() == [2, 3]
    np.testing.assert_allclose(weights[0], 3.0 * p[[2, 3]], rtol=1e-6)
    chosen, _ = deepseek.route(_ds("group_limited_greedy", top_groups=2), logits, None)  # both groups kept: greedy
    assert chosen[0].tolist() == [2, 0]


def _config(tmp_path: Path, **changes) -> Path:
    config = json.loads((FOLDER / "config.json").read_text())
    config.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del config[key]
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_greedy_reads_no_groups_and_defaults_are_v2s(tmp_path):
    """topk_method greedy needs neither n_group nor topk_group; a key left out takes DeepseekV2Config's default."""
    folder = _config(tmp_path, topk_method="greedy", n_group=None, topk_group=None, routed_scaling_factor=None, n_shared_experts=None)
    ds = deepseek.read_deepseek(folder, read_config(folder))
    assert ds.topk_method == "greedy" and ds.scaling == 1.0 and ds.shared == 2 and ds.groups == 1
    folder = _config(tmp_path, topk_method=None)
    assert deepseek.read_deepseek(folder, read_config(folder)).topk_method == "greedy"


@pytest.mark.parametrize(("changes", "key"), [({"topk_method": "noaux_tc"}, "topk_method"), ({"n_group": None}, "n_group"),
                                              ({"num_experts_per_tok": None}, "num_experts_per_tok")])  # fmt: skip
def test_a_bad_router_key_is_one_clear_line(tmp_path, changes, key):
    """V3's router name, or a group-limited router without its groups, is an AttnError naming the key."""
    folder = _config(tmp_path, **changes)
    with pytest.raises(AttnError) as caught:
        deepseek.read_deepseek(folder, read_config(folder))
    assert key in str(caught.value)


def test_model_info_says_the_latent_cache():
    """`model info` names MLA and the MoE and gives the latent cache, 6 + 4 = 10 numbers a layer, as for V3."""
    info = model_info(FOLDER)
    assert info["supported"] and info["kv_cache"]["layout"] == "mla" and info["kv_cache"]["numbers_per_layer"] == [10, 10]
    keys = [m["key"] for m in info["mechanisms"]]
    assert keys[0] == "mla" and "moe" in keys and "gqa" not in keys
    moe = next(m["text"] for m in info["mechanisms"] if m["key"] == "moe")
    assert moe.endswith("a softmax router picks them within the 1 of 2 groups whose best expert scores highest")


@pytest.mark.parametrize("command", [["run", "--layer", "2"], ["explain", "--layer", "2", "--word", "cat"], ["decode", "--layer", "2"]])
def test_commands_read_the_checkpoint(cli, command):
    """run, explain and decode take a DeepSeek V2 layer; the header names MLA and the softmax router."""
    result = cli(command[0], "--model", str(FOLDER), *command[1:], "--sentence", "The cat sat")
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split()).lower()
    assert "multi-head latent attention" in text


def test_the_header_names_each_tokens_experts(golden):
    """The note for an earlier MoE layer lists each token's experts counted from 1, best first."""
    cfg = read_config(FOLDER)
    ds = deepseek.read_deepseek(FOLDER, cfg)
    _, experts = deepseek.forward(cfg, Checkpoint(FOLDER), tuple(int(i) for i in golden["ids"][:3]), 2)
    (note,) = deepseek._experts_note(experts, ds)
    assert note.startswith("layer 2 MoE, experts each token used (2 of 4, counted from 1: mlp.experts.0 is 1; + 2 shared): token 1 → ")
    assert experts[1] is not None
    first = ", ".join(str(int(e) + 1) for e in experts[1][0])
    assert f"token 1 → {first}; token 2 → " in note


# DeepSeek-V2-Lite's router and RoPE, as scripts/make_checkpoints.py's V2_LITE runs the fixture for lite_deepseek_v2.npz
V2_LITE = {
    "topk_method": "greedy",
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "original_max_position_embeddings": 4096,
                        "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707},
}  # fmt: skip


@pytest.fixture(scope="module")
def lite(tmp_path_factory):
    """The fixture with V2-Lite's greedy router and YaRN (mscale_all_dim 0.707), and transformers' numbers for it."""
    folder = tmp_path_factory.mktemp("lite") / "deepseek_v2"
    folder.mkdir()
    for path in FOLDER.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    config = json.loads((FOLDER / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **V2_LITE}))
    return folder, np.load(FOLDER.parent / "lite_deepseek_v2.npz")


@pytest.mark.parametrize("layer", [1, 2])
def test_v2_lite_settings_equal_transformers(lite, layer):
    """Greedy routing and YaRN with mscale_all_dim: every head of every layer as transformers, to 1e-6; the scale is
    √(d_n + d_r) / mscale(40, 0.707)², not √8."""
    folder, expected = lite
    scenario = load_scenario(folder, layer=layer, sentence=str(expected["text"]))
    np.testing.assert_allclose(scenario.X, expected["attention_inputs"][layer - 1], rtol=0, atol=FLOAT32)
    result = engine.run(scenario)
    for head in result.heads:
        np.testing.assert_allclose(head.weights, expected["attentions"][layer - 1][head.head - 1], rtol=0, atol=FLOAT32)
    mscale = 0.1 * 0.707 * np.log(40.0) + 1.0
    assert scenario.variant(Mla) is not None and deepseek._mscale(read_config(folder)) == pytest.approx(mscale, rel=1e-12)


def test_v2_lite_greedy_router_gives_transformers_hidden_states(lite):
    """The greedy router chooses across groups (some token takes its two experts from both), and the MoE layer's
    output is transformers'."""
    folder, expected = lite
    cfg = read_config(folder)
    ids = tuple(int(i) for i in expected["ids"])
    after, experts = deepseek.forward(cfg, Checkpoint(folder), ids, 2)
    final = rms_norm(after, Checkpoint(folder).read("model.norm.weight"), cfg.norm_eps)
    np.testing.assert_allclose(final, expected["hidden_states"][2], rtol=0, atol=1e-5)
    chosen = experts[1]
    assert chosen is not None and any(len({int(e) // 2 for e in row}) == 2 for row in chosen)  # never with topk_group 1
