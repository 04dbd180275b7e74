"""Earlier layers in little memory: matrices widened a block of rows at a time, with the same numbers as whole.

The 8B-class measurements themselves are in benchmarks/big_layer.py (rows 14-15): here the
blocked reading is checked for exactness on the committed fixtures, with blocks small enough
that every matrix is read in several.
"""

from __future__ import annotations

import numpy as np
import pytest

from attncli.errors import AttnError
from attncli.sources.checkpoints import safetensors
from attncli.sources.checkpoints.blocks import Weights
from attncli.sources.checkpoints.safetensors import Checkpoint
from tests.test_checkpoints import HERE, golden


@pytest.mark.parametrize(("name", "tensor", "shape"), [("llama", "layers.1.mlp.down_proj.weight", (24, 48)), ("mistral", "layers.0.mlp.up_proj.weight", (32, 24))])
def test_a_product_read_in_blocks_equals_the_whole_matrix(monkeypatch, name, tensor, shape):
    """x·Wᵀ from blocks of 5 rows' worth of numbers equals x·Wᵀ from the matrix read whole (bfloat16 and float16 files)."""
    w = Weights(Checkpoint(HERE / name), probe="embed_tokens.weight", prefixes=("model.", ""))
    x = np.random.default_rng(0).standard_normal((7, shape[1]))
    whole = x @ w.get(tensor, shape).T
    monkeypatch.setattr(safetensors, "ROW_BLOCK", 5 * shape[1])
    assert len(list(w.checkpoint.row_blocks(w.prefix + tensor))) == -(-shape[0] // 5)
    np.testing.assert_allclose(w.product(tensor, x, shape), whole, rtol=1e-15, atol=1e-15)


def test_row_blocks_cover_every_row_once_exactly(monkeypatch):
    """The blocks, put back together, are the tensor read whole, bit for bit."""
    checkpoint = Checkpoint(HERE / "llama")
    name = "model.layers.0.mlp.gate_proj.weight"
    monkeypatch.setattr(safetensors, "ROW_BLOCK", 3 * 24)
    parts = [(first, block.copy()) for first, block in checkpoint.row_blocks(name)]
    assert [first for first, _ in parts] == list(range(0, 48, 3))
    assert np.array_equal(np.concatenate([block for _, block in parts]), checkpoint.read(name))


def test_a_product_with_the_wrong_shape_is_refused():
    """The shape config.json implies is checked before any number is read."""
    w = Weights(Checkpoint(HERE / "llama"), probe="embed_tokens.weight", prefixes=("model.", ""))
    with pytest.raises(AttnError, match=r"has shape \[48, 24\] but config.json implies \[24, 48\]"):
        w.product("layers.0.mlp.gate_proj.weight", np.zeros((2, 48)), (24, 48))


def test_layers_read_in_blocks_still_give_the_golden_weights(monkeypatch):
    """With blocks of a few rows, the last layer of the Llama fixture (two layers before it) still matches transformers."""
    from attncli.sources.checkpoints.layer import load_layer
    from tests.test_checkpoints import attention_weights

    monkeypatch.setattr(safetensors, "ROW_BLOCK", 100)
    expected = golden("llama")
    case = load_layer(HERE / "llama", layer=3, text=str(expected["text"]))
    np.testing.assert_allclose(attention_weights(case), expected["attentions"][2], rtol=0, atol=1e-5)
