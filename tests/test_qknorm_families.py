"""Qwen3 (QK-norm per head) and OLMo 2 (QK-norm over the whole projection, post-norms): every layer and head against transformers.

The goldens in tests/checkpoints/{qwen3,olmo2} are transformers 5.24's attention weights and block inputs for the
fixture's sentence (scripts/make_checkpoints.py; docs/families.md says what each family computes). transformers
runs its RMSNorms (input, q_norm, k_norm, post-norms) and the softmax in float32 even in a float64 model, so attncli's
float64 numbers agree to about 1e-7 (measured: 1.6e-7 at most); the bound is 1e-6 for the weights, 1e-5 for the
block inputs X, which pass through every earlier layer's float32 norms.
"""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import QkNorm
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario

HERE = Path(__file__).parent / "checkpoints"
FAMILIES = ("qwen3", "olmo2")


def golden(name: str) -> dict[str, np.ndarray]:
    with np.load(HERE / name / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case) -> np.ndarray:
    """(H, L, L) the engine's weights for the layer's scenario."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


@pytest.mark.parametrize(("name", "layer"), [(name, layer) for name in FAMILIES for layer in (1, 2)])
def test_every_head_of_every_layer_matches_transformers(name, layer):
    expected = golden(name)
    assert expected["attentions"].shape[0] == 2
    case = load_layer(HERE / name, layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist())
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=1e-5)
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", FAMILIES)
def test_the_comparison_can_fail(name):
    """Leaving QK-norm out, or normalising per head where OLMo 2 normalises the whole projection, breaks the agreement."""
    expected = golden(name)
    case = load_layer(HERE / name, layer=2, text=str(expected["text"]))
    norm = case.qk_norm
    assert norm is not None and norm.over == ("head" if name == "qwen3" else "whole")
    assert np.abs(weights_of(dataclasses.replace(case, qk_norm=None)) - expected["attentions"][1]).max() > 1e-3
    if name == "olmo2":
        d_k = case.head_dim
        per_head = QkNorm(norm.q_weight[:d_k], norm.k_weight[:d_k], eps=norm.eps, over="head")
        assert np.abs(weights_of(dataclasses.replace(case, qk_norm=per_head)) - expected["attentions"][1]).max() > 1e-4


@pytest.mark.parametrize("name", FAMILIES)
def test_model_info_says_supported(name):
    info = model_info(HERE / name)
    assert info["supported"] is True and info["model_type"] == name and info["reason"] is None
    qk_norm = next(m["text"] for m in info["mechanisms"] if m["key"] == "qk_norm")
    assert ("over the whole q and k projections" in qk_norm) == (name == "olmo2") and "before RoPE" in qk_norm


@pytest.mark.parametrize("name", FAMILIES)
def test_earlier_layers_run_the_engine_that_run_shows(name):
    """Layer 1 inside the forward pass is engine.run of layer 1's scenario, bit for bit, QK-norm included."""
    from attncli.sources.checkpoints.blocks import AttentionWeights, self_attention

    case = load_layer(HERE / name, layer=1, text=str(golden(name)["text"]))
    weights = AttentionWeights(
        W_Q=case.W_Q, W_K=case.W_K, W_V=case.W_V, b_Q=case.b_Q, b_K=case.b_K, b_V=case.b_V, W_O=case.W_O, b_O=case.b_O,
        heads=case.heads, kv_heads=case.kv_heads, head_dim=case.head_dim, divisor=case.divisor, causal=case.causal,
        window=case.window, rope=case.rope, qk_norm=case.qk_norm,
    )  # fmt: skip
    assert self_attention(case.X, weights).tobytes() == engine.run(layer_scenario(case)).output.tobytes()
