"""DeepSeek V3 (sources/checkpoints/deepseek.py) against transformers' goldens on the tiny fixture, every layer and head.

tests/checkpoints/deepseek_v3 (scripts/make_checkpoints.py --only deepseek_v3, transformers 5.24, float64 model,
eager attention): 2 layers, the first dense, the second a mixture of experts (4 routed + 1 shared, 2 groups);
MLA with a query latent (q_lora_rank 8), kv_lora_rank 6, nope 4, rope 4 (interleaved), v 4.

Bound: 1e-6, not 1e-12. transformers computes this float64 model with float32 inside: every RMSNorm casts its
input to float32 (DeepseekV3RMSNorm), the eager softmax is softmax(…, dtype=float32), the rotary table is float32
(DeepseekV3RotaryEmbedding.forward) and the router's logits are float32 (DeepseekV3TopkRouter); attncli computes
all of it in float64 except the router, whose choice it makes in float32 as transformers does.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import Mla, Rope
from attncli.sources.checkpoints import deepseek
from attncli.sources.checkpoints.blocks import rms_norm
from attncli.sources.checkpoints.describe import describe_config
from attncli.sources.checkpoints.families import read_config
from attncli.sources.checkpoints.layer import model_info
from attncli.sources.checkpoints.safetensors import Checkpoint
from attncli.sources.checkpoints.scenario import load_scenario

FOLDER = Path(__file__).parent / "checkpoints" / "deepseek_v3"
FLOAT32 = 1e-6


@pytest.fixture(scope="module")
def golden():
    return np.load(FOLDER / "golden.npz")


@pytest.mark.parametrize("layer", [1, 2])
def test_every_head_of_every_layer_equals_transformers(golden, layer):
    """The layer's input X and every head's weights equal transformers' to 1e-6; the absorbed form equals the expanded to 1e-12."""
    scenario = load_scenario(FOLDER, layer=layer, sentence=str(golden["text"]))
    assert scenario.variant(Mla) is not None
    np.testing.assert_allclose(scenario.X, golden["attention_inputs"][layer - 1], rtol=0, atol=FLOAT32)
    result = engine.run(scenario)
    for head in result.heads:
        np.testing.assert_allclose(head.weights, golden["attentions"][layer - 1][head.head - 1], rtol=0, atol=FLOAT32, err_msg=f"head {head.head}")
        assert head.mla is not None and head.mla.difference <= 1e-12


def test_the_rotary_part_turns_by_transformers_angles(golden):
    """The interleaved pairs (2i, 2i+1) of the rope part turn by p·θ^(−2i/d_r): transformers' cos/sin table (whose halves
    are alike, cat(freqs, freqs)) holds the same angles, to float32."""
    scenario = load_scenario(FOLDER, layer=1, sentence=str(golden["text"]))
    assert scenario.variant(Rope) is not None and scenario.variant(Rope).style == "interleaved"
    angles = scenario.variant(Rope).angles(np.arange(scenario.L), 4)  # (L, 2)
    np.testing.assert_allclose(np.cos(angles), golden["cos"][0][:, :2], rtol=0, atol=FLOAT32)
    np.testing.assert_allclose(np.sin(angles), golden["sin"][0][:, 2:], rtol=0, atol=FLOAT32)


def test_dense_and_moe_layers_give_transformers_hidden_states(golden):
    """Layer 1 (dense SwiGLU) and layer 2 (grouped top-k router with the correction bias, weighted experts, the shared
    expert) give transformers' residual stream; the last golden state is after the final norm, as transformers returns it."""
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
    assert all(len(set(row)) == 2 and set(row) <= {0, 1, 2, 3} for row in chosen.tolist())
    groups = [{int(e) // 2 for e in row} for row in chosen]
    assert all(len(g) == 1 for g in groups), "topk_group = 1: both experts of a token come from one group"


def test_router_by_hand():
    """Grouped top-k as DeepseekV3TopkRouter: the correction bias steers the choice, the weights are the uncorrected
    sigmoids of the chosen experts, normalised and × routed_scaling_factor; a group outside topk_group is never chosen."""
    ds = deepseek.DeepseekConfig(
        q_lora_rank=None, kv_lora_rank=2, nope=2, rope=2, v_dim=2, interleave=True, experts=4, per_token=2, shared=0,
        groups=2, top_groups=1, dense_layers=0, moe_inner=2, scaling=2.0, norm_topk=True,
    )  # fmt: skip
    logits = np.array([[2.0, 1.0, 0.0, 0.5]])  # sigmoids ≈ 0.881, 0.731, 0.5, 0.622
    chosen, weights = deepseek.route(ds, logits, None)
    assert sorted(chosen[0].tolist()) == [0, 1]  # group 1 (experts 1, 2) sums 1.612 > group 2's 1.122
    s = 1 / (1 + np.exp(-np.array([2.0, 1.0])))
    np.testing.assert_allclose(sorted(weights[0]), sorted(2.0 * s / s.sum()), rtol=1e-6)
    chosen, weights = deepseek.route(ds, logits, np.array([0.0, 0.0, 1.0, 1.0]))  # the bias moves the choice to group 2
    assert sorted(chosen[0].tolist()) == [2, 3]
    s = 1 / (1 + np.exp(-np.array([0.0, 0.5])))  # the weights stay the uncorrected scores
    np.testing.assert_allclose(sorted(weights[0]), sorted(2.0 * s / s.sum()), rtol=1e-6)


def test_model_info_says_the_latent_cache(tmp_path):
    """`model info` gives MLA's cache per token: the fixture's 6 + 4 = 10 against 2·(8 + 4) = 24, and at DeepSeek V3's
    sizes 512 + 64 = 576 against 128·(192 + 128) = 40 960 (DeepSeek-V2 Table 1; docs/families.md)."""
    info = model_info(FOLDER)
    assert info["supported"] and info["kv_cache"]["layout"] == "mla" and info["kv_cache"]["numbers_per_layer"] == [10, 10]
    assert "= 10 numbers (expanded per head it would be 2 · (4 + 4 + 4) = 24)" in info["kv_cache"]["per_layer"]
    config = json.loads((FOLDER / "config.json").read_text())
    config.update(hidden_size=7168, num_attention_heads=128, num_key_value_heads=128, q_lora_rank=1536, kv_lora_rank=512,
                  qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, head_dim=64)  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    cache = describe_config(read_config(tmp_path), config)["kv_cache"]
    assert cache["numbers_per_layer"][0] == 576 and cache["per_layer"].endswith("= 40,960)")


@pytest.mark.parametrize("command", [["run", "--layer", "2"], ["explain", "--layer", "2", "--word", "cat"], ["decode", "--layer", "2"]])
def test_commands_read_the_checkpoint(cli, command):
    """run, explain and decode take a DeepSeek layer; the header names MLA and its cache."""
    result = cli(command[0], "--model", str(FOLDER), *command[1:], "--sentence", "The cat sat")
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "multi-head latent attention" in text.lower()


def test_the_header_names_each_tokens_experts(golden):
    """The note for an earlier MoE layer lists each token's experts counted from 1 (layer 2 is the fixture's only MoE
    layer, so it is read here as the layer before a third)."""
    cfg = read_config(FOLDER)
    ds = deepseek.read_deepseek(FOLDER, cfg)
    _, experts = deepseek.forward(cfg, Checkpoint(FOLDER), tuple(int(i) for i in golden["ids"][:3]), 2)
    (note,) = deepseek._experts_note(experts, ds)
    assert note.startswith("layer 2 MoE, experts each token used (2 of 4, counted from 1: mlp.experts.0 is 1; + 1 shared): token 1 → ")
    assert experts[1] is not None
    first = ", ".join(str(int(e) + 1) for e in experts[1][0])
    assert f"token 1 → {first}; token 2 → " in note
