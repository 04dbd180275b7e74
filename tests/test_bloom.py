"""BLOOM read from its tiny fixture gives transformers' own attention weights, every layer and head, with attncli's ALiBi.

The fixture (tests/checkpoints/bloom, scripts/make_checkpoints.py) has 6 heads, so its slopes are those of 4 heads and
then every other slope of 8; its golden weights come from transformers' eager attention with the model in float64.
The bound is 1e-6: BLOOM's softmax runs in float32 (and its slopes and their products, exact here: powers of two).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import Alibi
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario

HERE = Path(__file__).parent / "checkpoints"
BOUND = 1e-6


def golden() -> dict[str, np.ndarray]:
    with np.load(HERE / "bloom" / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case) -> np.ndarray:
    """(H, L, L) the layer's attention weights as attncli's engine computes them from the LayerCase."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


@pytest.mark.parametrize("layer", [1, 2])
def test_every_head_of_every_layer_matches_transformers(layer):
    """X, and the weights of every head, from attncli's reading of the checkpoint equal the golden ones within the bound."""
    expected = golden()
    case = load_layer(HERE / "bloom", layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist())
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=BOUND)
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=BOUND)


def test_first_layer_input_is_exact():
    """LayerNorm is float64 in transformers too: layer 1's X (after word_embeddings_layernorm and input_layernorm) to 1e-12."""
    expected = golden()
    case = load_layer(HERE / "bloom", layer=1, text=str(expected["text"]))
    np.testing.assert_allclose(case.X, expected["attention_inputs"][0], rtol=0, atol=1e-12)


def test_bloom_s_plus_m_j_and_the_paper_s_minus_m_i_minus_j_give_the_same_weights():
    """BLOOM's bias +m·j over the scaled scores, softmaxed under the causal mask by hand, gives the engine's weights;
    the engine's logits are BLOOM's less m·(i − 1), the same for every key of a row."""
    expected = golden()
    case = load_layer(HERE / "bloom", layer=2, text=str(expected["text"]))
    (alibi,) = case.variants
    assert isinstance(alibi, Alibi) and alibi.slopes == (0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125)
    L = len(case.token_ids)
    for head in engine.run(layer_scenario(case)).heads:
        m = alibi.slopes[head.head - 1]
        bloom = head.scaled + m * np.arange(L)[None, :]  # (L, L) +m·j, j from 0
        masked = np.where(np.tril(np.ones((L, L), dtype=bool)), bloom, -np.inf)
        weights = np.exp(masked - masked.max(axis=1, keepdims=True))
        np.testing.assert_allclose(weights / weights.sum(axis=1, keepdims=True), head.weights, rtol=0, atol=1e-15)
        difference = (bloom - head.biased)[np.tril(np.ones((L, L), dtype=bool))].reshape(-1)
        rows = np.repeat(np.arange(L), np.arange(1, L + 1))
        np.testing.assert_allclose(difference, m * rows, rtol=0, atol=1e-12)  # m·(i − 1), i the query's position from 1


def test_the_comparison_can_fail():
    """The slopes in the other order, or query_key_value split as [all q | all k | all v], miss by far more than the bound."""
    expected = golden()
    case = load_layer(HERE / "bloom", layer=2, text=str(expected["text"]))
    (alibi,) = case.variants
    reversed_slopes = dataclasses.replace(case, variants=(Alibi(alibi.slopes[::-1], given=True),))
    assert np.abs(weights_of(reversed_slopes) - expected["attentions"][1]).max() > 1e-2
    blocks = dataclasses.replace(case, W_K=case.W_V, W_V=case.W_K)
    assert np.abs(weights_of(blocks) - expected["attentions"][1]).max() > 1e-2


def test_model_info_describes_alibi(cli):
    """`model info` reads BLOOM, has no RoPE, and names ALiBi with the slopes of its 6 heads."""
    info = model_info(HERE / "bloom")
    assert info["supported"] is True and info["rope"] is None and info["activation"] == "bloom_gelu"
    texts = " ".join(m["text"] for m in info["mechanisms"])
    assert "ALiBi" in texts and "0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125" in texts
    assert "projections have biases" not in texts  # q, k, v biases are BLOOM's architecture, not a mechanism
    result = cli("model", "info", str(HERE / "bloom"))
    assert result.exit_code == 0, result.stderr
    assert "ALiBi instead of position embeddings" in result.stdout


@pytest.mark.parametrize("command", ["run", "explain", "decode"])
def test_every_command_reads_the_family(cli, command):
    """run, explain and decode work on the checkpoint's last layer; explain narrates ALiBi's step."""
    model = ["--model", str(HERE / "bloom"), "--layer", "2", "--sentence", "The cat sat on the mat"]
    args = {"run": ["run", *model, "--head", "5"], "explain": ["explain", *model, "--position", "3"], "decode": ["decode", *model]}[command]
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    if command == "explain":
        assert "ALiBi" in result.stdout


@pytest.mark.parametrize("layer", [1, 2])
def test_a_gguf_file_of_it_gives_the_same_weights(layer):
    """bloom.gguf (scripts/make_gguf.py: query_key_value regrouped to all q | all k | all v, as llama.cpp's converter
    writes it) gives transformers' weights on every head; model info reads it as BLOOM with ALiBi."""
    expected = golden()
    path = HERE / "gguf" / "bloom.gguf"
    case = load_layer(path, layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist())
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=BOUND)
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=BOUND)
    info = model_info(path)
    assert info["supported"] is True and "ALiBi" in " ".join(m["text"] for m in info["mechanisms"])
