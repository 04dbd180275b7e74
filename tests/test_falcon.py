"""Falcon read from its tiny fixtures gives transformers' own attention weights, every layer and head, in each of its forms.

The fixtures (tests/checkpoints/falcon*, scripts/make_checkpoints.py) hold golden weights from transformers' eager
attention with the model in float64: `falcon` (the new decoder architecture: 4 heads in 2 key/value groups, RoPE,
ln_attn and ln_mlp), `falcon-alibi` (multi-query, ALiBi, parallel attention, biases) and `falcon-sequential`
(q, k, v per head, attention then MLP, RoPE). Bounds: 1e-6 with RoPE, whose angles transformers computes in float32;
1e-12 with ALiBi, whose bfloat16 slopes attncli rounds as transformers does (4 heads: powers of two, exact).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import Alibi
from attncli.sources.checkpoints.families import read_config
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario

HERE = Path(__file__).parent / "checkpoints"
BOUNDS = {"falcon": 1e-6, "falcon-alibi": 1e-12, "falcon-sequential": 1e-6}


def golden(name: str) -> dict[str, np.ndarray]:
    with np.load(HERE / name / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case) -> np.ndarray:
    """(H, L, L) the layer's attention weights as attncli's engine computes them from the LayerCase."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


@pytest.mark.parametrize("name", sorted(BOUNDS))
@pytest.mark.parametrize("layer", [1, 2])
def test_every_head_of_every_layer_matches_transformers(name, layer):
    """X, and the weights of every head, from attncli's reading of the checkpoint equal the golden ones within the bound."""
    expected = golden(name)
    case = load_layer(HERE / name, layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist())
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=BOUNDS[name])
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=BOUNDS[name])


def test_each_form_reads_its_own_keys_and_positions():
    """The new architecture groups 4 heads in 2, multi-query has 1 key/value head whatever num_kv_heads says, per-head has H."""
    grouped, multi, per_head = (read_config(HERE / name) for name in ("falcon", "falcon-alibi", "falcon-sequential"))
    assert (grouped.heads, grouped.kv_heads) == (4, 2) and grouped.rope is not None and grouped.rope.theta == 1000
    assert json.loads((HERE / "falcon-alibi" / "config.json").read_text())["num_kv_heads"] == 4
    assert (multi.heads, multi.kv_heads, multi.rope) == (4, 1, None)
    assert (per_head.heads, per_head.kv_heads) == (2, 2) and per_head.rope is not None and per_head.rope.theta == 10_000


def test_the_comparison_can_fail():
    """ALiBi counted once (not twice, as transformers' Falcon adds it), or the multi-query rows split per head, miss by far more."""
    expected = golden("falcon-alibi")
    case = load_layer(HERE / "falcon-alibi", layer=2, text=str(expected["text"]))
    (alibi,) = case.variants
    assert isinstance(alibi, Alibi) and alibi.slopes == (0.25, 0.0625, 0.015625, 0.00390625)  # 2·m/√4 for m = 2^-2 … 2^-8
    once = dataclasses.replace(case, variants=(Alibi(tuple(m / 2 for m in alibi.slopes), given=True),))
    assert np.abs(weights_of(once) - expected["attentions"][1]).max() > 1e-2
    swapped = dataclasses.replace(case, W_Q=case.W_Q[:, ::-1])
    assert np.abs(weights_of(swapped) - expected["attentions"][1]).max() > 1e-2
    grouped = golden("falcon")
    case = load_layer(HERE / "falcon", layer=1, text=str(grouped["text"]))
    blocks = dataclasses.replace(case, W_K=case.W_V, W_V=case.W_K)  # a group's key and value read the wrong way round
    assert np.abs(weights_of(blocks) - grouped["attentions"][0]).max() > 1e-2


def test_new_architecture_without_num_kv_heads_gives_every_head_its_own(tmp_path):
    """transformers' FalconConfig: num_kv_heads absent means all heads, so the new architecture is then multi-head."""
    folder = tmp_path / "falcon"
    shutil.copytree(HERE / "falcon", folder)
    config = json.loads((folder / "config.json").read_text())
    del config["num_kv_heads"]
    (folder / "config.json").write_text(json.dumps(config))
    assert read_config(folder).kv_heads == 4


def test_model_info_describes_multi_query_and_alibi_truly(cli):
    """Multi-query is one key/value head for all query heads (never "each head its own"); ALiBi and parallel attention are named."""
    info = model_info(HERE / "falcon-alibi")
    assert info["supported"] is True and info["kv_heads"] == 1 and info["rope"] is None
    keys = [m["key"] for m in info["mechanisms"]]
    assert "mqa" in keys and "mha" not in keys
    texts = " ".join(m["text"] for m in info["mechanisms"])
    assert "all 4 query heads read one key/value head" in texts and "its own keys and values" not in texts
    assert "ALiBi" in texts and "2·m/√4" in texts and "parallel attention and MLP" in texts
    assert info["kv_cache"]["layout"] == "mqa" and info["kv_cache"]["numbers_per_layer"] == [8, 8]
    grouped = model_info(HERE / "falcon")
    assert "gqa" in [m["key"] for m in grouped["mechanisms"]] and grouped["rope"]["theta"] == 1000
    result = cli("model", "info", str(HERE / "falcon-alibi"))
    assert result.exit_code == 0, result.stderr
    assert "multi-query attention" in result.stdout and "ALiBi instead of RoPE" in result.stdout


@pytest.mark.parametrize("name", ["falcon", "falcon-alibi"])
@pytest.mark.parametrize("command", ["run", "explain", "decode"])
def test_every_command_reads_the_family(cli, name, command):
    """run, explain and decode work on the checkpoint's last layer; explain says how ALiBi biases the scores."""
    model = ["--model", str(HERE / name), "--layer", "2", "--sentence", "The cat sat on the mat"]
    args = {"run": ["run", *model, "--head", "2"], "explain": ["explain", *model, "--position", "3"], "decode": ["decode", *model]}[command]
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    if command == "explain" and name == "falcon-alibi":
        assert "ALiBi" in result.stdout


def test_model_verify_knows_where_falcon_projects_its_heads():
    """`model verify` hooks self_attention.dense and states why its bound is not float64's."""
    from attncli.cli import verify

    assert verify.output_projections("falcon")["self"].search("transformer.h.1.self_attention.dense")
    assert not verify.output_projections("falcon")["self"].search("transformer.h.1.self_attention.query_key_value")
    bound = verify.bound_for("falcon")
    assert "rotary" in bound.why and "bfloat16" in bound.why and "softmax" not in bound.why


@pytest.mark.parametrize("layer", [1, 2])
def test_a_gguf_file_of_it_gives_the_same_weights(layer):
    """falcon.gguf (scripts/make_gguf.py: query_key_value regrouped to all q | all k | all v, ln_attn as attn_norm_2 and
    ln_mlp as attn_norm, as llama.cpp's converter writes them) gives transformers' weights on every head."""
    expected = golden("falcon")
    case = load_layer(HERE / "gguf" / "falcon.gguf", layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist()) and (case.heads, case.kv_heads) == (4, 2)
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=BOUNDS["falcon"])
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=BOUNDS["falcon"])


def test_the_gguf_norms_are_llama_cpp_s_way_round(monkeypatch):
    """Reading ln_attn from attn_norm (the MLP's norm in llama.cpp's falcon) instead of attn_norm_2 misses by far more."""
    from attncli.sources.checkpoints import falcon

    swapped = tuple((pattern, target.replace("attn_norm.", "#").replace("attn_norm_2.", "attn_norm.").replace("#", "attn_norm_2."))
                    for pattern, target in falcon.GGUF_NAMES)  # fmt: skip
    assert swapped != falcon.GGUF_NAMES
    monkeypatch.setattr(falcon, "GGUF", (falcon.GGUF[0]._replace(names=swapped),))
    expected = golden("falcon")
    case = load_layer(HERE / "gguf" / "falcon.gguf", layer=1, text=str(expected["text"]))
    assert np.abs(case.X - expected["attention_inputs"][0]).max() > 1e-2


def test_alibi_says_when_transformers_rounds_its_products_otherwise():
    """4 heads (slopes powers of two) over the fixture's sentence: no caveat in the header; 16 heads (slopes 2^(−h/2)), or
    more than 256 tokens, and the header says transformers rounds each m·j to bfloat16 and attncli does not."""
    from attncli.sources.checkpoints.falcon import products_caveat

    expected = golden("falcon-alibi")
    exact = load_layer(HERE / "falcon-alibi", layer=1, text=str(expected["text"]))
    assert not any("rounds each product" in note for note in exact.notes)
    assert products_caveat(4, 12) is None and products_caveat(8, 256) is None
    assert "16 heads" in (products_caveat(16, 12) or "") and "300 tokens" in (products_caveat(4, 300) or "")


def test_key_value_groups_that_do_not_divide_the_heads_are_one_error(tmp_path):
    """The new architecture with 3 key/value groups for 4 heads is refused at num_kv_heads, before any tensor is read."""
    from attncli.errors import AttnError

    folder = tmp_path / "falcon"
    shutil.copytree(HERE / "falcon", folder)
    config = json.loads((folder / "config.json").read_text())
    config["num_kv_heads"] = 3
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(AttnError) as caught:
        read_config(folder)
    assert caught.value.key == "num_kv_heads" and "do not divide 4 heads" in str(caught.value)
