"""StableLM 2 read from its tiny fixtures gives transformers' own attention weights, every layer and head, and its per-head
QK LayerNorm is a variant a scenario can write.

The fixtures (tests/checkpoints/stablelm, stablelm-parallel; scripts/make_checkpoints.py) turn on qk_layernorm (each head its
own LayerNorm weight), a partial rotary (0.25 and 0.5), GQA 4:2 with q/k/v biases, and the parallel residual in one of them.
The bound is 1e-6: transformers computes RoPE's angles and the softmax in float32 (its LayerNorms in float64).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import QkLayerNorm, QkNorm
from attncli.errors import AttnError
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario
from attncli.sources.yaml_scenario import from_text

HERE = Path(__file__).parent / "checkpoints"
FIXTURES = ("stablelm", "stablelm-parallel")
BOUND = 1e-6


def golden(name: str) -> dict[str, np.ndarray]:
    with np.load(HERE / name / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case) -> np.ndarray:
    """(H, L, L) the layer's attention weights as attncli's engine computes them from the LayerCase."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("layer", [1, 2])
def test_every_head_of_every_layer_matches_transformers(name, layer):
    """X, and the weights of every head, from attncli's reading of the checkpoint equal the golden ones within the bound."""
    expected = golden(name)
    case = load_layer(HERE / name, layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist())
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=BOUND)
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=BOUND)
    assert case.rope is not None and case.rope.width(case.head_dim) == expected["cos"].shape[-1] < case.head_dim


def test_the_norm_is_a_layernorm_per_head_written_plainly():
    """Each head's q̂ is its q centred, divided by √(var + ε) and times that head's own weight, by a plain loop."""
    case = load_layer(HERE / "stablelm", layer=2, text="The cat sat on the mat")
    (norm,) = case.variants
    assert isinstance(norm, QkLayerNorm) and norm.q_weight.shape == (4, 8) and norm.k_weight.shape == (2, 8)
    for head in engine.run(layer_scenario(case)).heads:
        weight = norm.q_weight[head.head - 1]
        for row, q in zip(head.normed["qk_layernorm"].q, head.Q):
            mean = sum(q) / len(q)
            variance = sum((x - mean) ** 2 for x in q) / len(q)
            expected = [(x - mean) / (variance + norm.eps) ** 0.5 * w for x, w in zip(q, weight)]
            np.testing.assert_allclose(row, expected, rtol=0, atol=1e-12)


def test_the_comparison_can_fail():
    """An RMSNorm in place of the LayerNorm, or head 1's weight for every head, misses by far more than the bound."""
    expected = golden("stablelm")
    case = load_layer(HERE / "stablelm", layer=2, text=str(expected["text"]))
    (norm,) = case.variants
    rms = dataclasses.replace(case, variants=(), qk_norm=QkNorm(norm.q_weight[0], norm.k_weight[0], eps=norm.eps))
    assert np.abs(weights_of(rms) - expected["attentions"][1]).max() > 1e-3
    shared = dataclasses.replace(case, variants=(QkLayerNorm(norm.q_weight[0], norm.k_weight[0], eps=norm.eps),))
    assert np.abs(weights_of(shared) - expected["attentions"][1]).max() > 1e-3


def test_model_info_says_layernorm_not_rms(cli):
    """`model info` calls StableLM's QK-norm a per-head LayerNorm (never RMS) and its block norms LayerNorms."""
    info = model_info(HERE / "stablelm")
    assert info["supported"] is True and info["rope"]["rotary_dim"] == 2
    (qk,) = [m["text"] for m in info["mechanisms"] if m["key"] == "qk_norm"]
    assert "LayerNorm" in qk and "RMS" not in qk and "each head its own" in qk
    parallel = model_info(HERE / "stablelm-parallel")
    assert "parallel_residual" in [m["key"] for m in parallel["mechanisms"]]
    result = cli("model", "info", str(HERE / "stablelm"))
    assert result.exit_code == 0, result.stderr
    assert "RMS-normalised" not in result.stdout and "centred and divided by their standard deviation (LayerNorm)" in result.stdout


SCENARIO = """name: qk-layernorm
tokens: [the, cat, sat]
embeddings: [[1, 0, 2], [0, 1, 1], [2, 2, 0]]
heads: 2
kv_heads: 1
W_Q: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]]
W_K: [[1, 0], [0, 2], [1, -1]]
W_V: [[1, 0], [0, 1], [1, 1]]
qk_layernorm: {q_weight: [[1, 0.5], [2, 1]], k_weight: [0.5, 1]}
mask: causal
"""


def test_a_scenario_writes_it_with_a_weight_per_head_or_shared():
    """`qk_layernorm` reads per-head rows or one shared row; head 2 uses its own row; a wrong shape is one error at its line."""
    s = from_text(SCENARIO, path="ln.yaml")
    norm = s.variant(QkLayerNorm)
    assert norm is not None and norm.q_weight.shape == (2, 2) and norm.k_weight.shape == (2,) and norm.eps == 1e-5
    head = engine.run(s).heads[1]
    q = head.Q[0]
    centred = q - q.mean()
    np.testing.assert_allclose(head.normed["qk_layernorm"].q[0], centred / np.sqrt((centred**2).mean() + 1e-5) * [2, 1], atol=1e-12)
    with pytest.raises(AttnError) as caught:
        from_text(SCENARIO.replace("[[1, 0.5], [2, 1]]", "[[1, 0.5], [2, 1], [3, 3]]"), path="ln.yaml")
    assert caught.value.line == 9 and "2 rows of 2" in str(caught.value.expected)


def test_explain_narrates_its_step(cli, tmp_path):
    """explain shows the mean, the variance, the standard deviation and the head's weight, as a LayerNorm's step."""
    path = tmp_path / "ln.yaml"
    path.write_text(SCENARIO)
    result = cli("explain", str(path), "--word", "sat", "--head", "2")
    assert result.exit_code == 0, result.stderr
    assert "QK LayerNorm" in result.stdout and "mean(q) =" in result.stdout and "var(q)" in result.stdout and "w_q,2" in result.stdout


@pytest.mark.parametrize("command", ["run", "explain", "decode"])
def test_every_command_reads_the_family(cli, command):
    """run, explain and decode work on the checkpoint's last layer."""
    model = ["--model", str(HERE / "stablelm"), "--layer", "2", "--sentence", "The cat sat on the mat"]
    args = {"run": ["run", *model, "--head", "3"], "explain": ["explain", *model, "--position", "3"], "decode": ["decode", *model]}[command]
    result = cli(*args)
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("layer", [1, 2])
def test_a_gguf_file_of_it_gives_the_same_weights(layer):
    """stablelm.gguf (scripts/make_gguf.py: each layer's per-head QK norms stacked into one (heads, d_k) attn_q_norm and
    attn_k_norm, as llama.cpp's converter writes them) gives transformers' weights on every head, QK LayerNorm per head."""
    expected = golden("stablelm")
    case = load_layer(HERE / "gguf" / "stablelm.gguf", layer=layer, text=str(expected["text"]))
    (norm,) = case.variants
    assert isinstance(norm, QkLayerNorm) and norm.q_weight.shape == (4, 8) and case.rope.width(case.head_dim) == 2
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=BOUND)
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=BOUND)


def test_a_config_attncli_does_not_read_with_qk_layernorm_is_described_as_layernorm(tmp_path):
    """A Persimmon config (qk_layernorm, not computed) is described from its keys: its QK-norm a LayerNorm, never RMS."""
    from attncli.sources.checkpoints.describe import describe_raw

    raw = {"model_type": "persimmon", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 16, "qk_layernorm": True}
    (qk,) = [m["text"] for m in describe_raw(raw)["mechanisms"] if m["key"] == "qk_norm"]
    assert "LayerNorm" in qk and "RMS" not in qk
