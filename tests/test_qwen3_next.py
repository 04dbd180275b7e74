"""Qwen3-Next: gated attention (the registry's output gate) equal to transformers on every softmax layer and head, its Gated
DeltaNet layers computed exactly for the residual stream, and a DeltaNet layer refused as what it is.

The golden in tests/checkpoints/qwen3_next is transformers 5.24's (scripts/make_checkpoints.py): 4 layers, Gated DeltaNet on
1 and 3, gated attention on 2 and 4, a mixture of 4 experts with a shared expert on layers 1 and 2. transformers runs its
norms, RoPE, softmax, router and delta rule in float32 even in a float64 model: bounds 1e-6 for weights, 1e-5 for X and
the residual stream.
"""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import OutputGate
from attncli.errors import AttnError
from attncli.sources.checkpoints import llama, qwen3_next
from attncli.sources.checkpoints.families import read_config
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.safetensors import Checkpoint
from attncli.sources.checkpoints.scenario import layer_scenario

HERE = Path(__file__).parent / "checkpoints" / "qwen3_next"
SOFTMAX_LAYERS = (2, 4)


def golden() -> dict[str, np.ndarray]:
    with np.load(HERE / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


@pytest.mark.parametrize("layer", SOFTMAX_LAYERS)
def test_every_head_of_every_softmax_layer_matches_transformers(layer):
    """X (after Gated DeltaNet and MoE layers) and the weights of each gated-attention layer equal transformers'."""
    expected = golden()
    case = load_layer(HERE, layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist())
    i = SOFTMAX_LAYERS.index(layer)  # transformers returns the softmax layers' weights and inputs only
    np.testing.assert_allclose(case.X, expected["attention_inputs"][i], rtol=0, atol=1e-5)
    weights = np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])
    np.testing.assert_allclose(weights, expected["attentions"][i], rtol=0, atol=1e-6)


def test_the_residual_stream_after_every_layer_matches_transformers():
    """Each layer's output (Gated DeltaNet, gated attention, MoE or dense MLP) equals transformers' hidden state after it (the last after the final norm)."""
    expected = golden()
    cfg = read_config(HERE)
    w, rope = llama.weights_and_rope(cfg, Checkpoint(HERE))
    ids = tuple(expected["ids"].tolist())
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)
    for index in range(cfg.layers):
        h = qwen3_next._layer(cfg, w, index, h, rope)
        if index == cfg.layers - 1:  # transformers' last hidden state is after the model's final norm
            h = qwen3_next._norm(cfg, w, "norm", h)
        np.testing.assert_allclose(h, expected["hidden_states"][index + 1], rtol=0, atol=1e-5, err_msg=f"layer {index + 1}")


def test_the_comparison_can_fail(monkeypatch):
    """Without its gate the attention layer's output, and with a plain delta rule's sign slip the DeltaNet's, differ from transformers'."""
    expected = golden()
    case = load_layer(HERE, layer=2, text=str(expected["text"]))
    gated, ungated = (engine.run(layer_scenario(c)).output for c in (case, dataclasses.replace(case, variants=())))
    assert any(isinstance(v, OutputGate) for v in case.variants) and np.abs(gated - ungated).max() > 1e-2
    cfg = read_config(HERE)
    w, rope = llama.weights_and_rope(cfg, Checkpoint(HERE))
    h = w.rows("embed_tokens.weight", tuple(expected["ids"].tolist()), cfg.hidden_size)
    monkeypatch.setattr(qwen3_next, "_sigmoid", lambda x: 1 / (1 + np.exp(x)))  # β and the shared expert's gate as 1 − σ
    assert np.abs(qwen3_next._layer(cfg, w, 0, h, rope) - expected["hidden_states"][1]).max() > 1e-3


def test_a_deltanet_layer_is_refused_in_one_line_naming_the_softmax_layers(cli):
    """--layer 1 names its kind and the layers that have softmax weights; it never prints weights it does not have."""
    with pytest.raises(AttnError) as caught:
        load_layer(HERE, layer=1, text="the cat")
    assert "Gated DeltaNet" in str(caught.value) and "2, 4" in str(caught.value)
    result = cli("run", "--model", str(HERE), "--layer", "3", "--sentence", "the cat")
    assert result.exit_code != 0 and result.stdout == "" and result.stderr.count("\n") == 1 and "Gated DeltaNet" in result.stderr
    mapped = cli("heads", "--model", str(HERE), "--sentence", "the cat")
    assert mapped.exit_code != 0 and "not all softmax attention" in mapped.stderr


def test_model_info_describes_each_kind_of_layer_and_the_cache_of_the_softmax_ones():
    """model info names the gated layers, the DeltaNet layers, the experts, and counts a cache only where keys and values are kept."""
    info = model_info(HERE)
    said = " | ".join(m["text"] for m in info["mechanisms"])
    assert "gated attention on layers 2, 4" in said and "Gated DeltaNet" in said and "on layers 1, 3" in said and "shared expert" in said
    assert info["softmax_layers"] == [2, 4] and info["kv_cache"]["numbers_per_layer"] == [0, 32, 0, 32]


def test_run_shows_the_gate_of_a_checkpoint_layer(cli):
    """run --model on a gated layer shows each head's gate and gated output; explain narrates the gate."""
    shown = cli("run", "--model", str(HERE), "--layer", "2", "--sentence", "the cat sat", "--head", "1")
    assert shown.exit_code == 0 and "Output gate" in shown.stdout and "Gated output" in shown.stdout
    explained = cli("explain", "--model", str(HERE), "--layer", "4", "--sentence", "the cat sat", "--position", "3", "--head", "2")
    assert explained.exit_code == 0 and "The output gate" in explained.stdout


def test_a_config_without_experts_reads_with_dense_mlps(tmp_path):
    """num_experts 0 and no num_experts_per_tok: the default top-k is not checked against 0 experts, and no layer is MoE."""
    import json

    raw = json.loads((HERE / "config.json").read_text())
    raw.pop("num_experts_per_tok")
    raw["num_experts"] = 0
    (tmp_path / "config.json").write_text(json.dumps(raw))
    cfg = read_config(tmp_path)
    assert not any(cfg.family.is_moe(i) for i in range(cfg.layers))
