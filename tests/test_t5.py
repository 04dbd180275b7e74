"""T5 read from its tiny fixture gives transformers' own weights in its three attentions, every layer and head, and its
relative-position buckets are a variant a scenario can write.

The fixture (tests/checkpoints/t5, scripts/make_checkpoints.py) has 8 buckets and a maximum distance of 8, so the
13-token sentence meets the exact buckets, the logarithmic ones and the last one; 2 encoder and 3 decoder layers of 4
heads; a gated-GELU MLP. The bound is 2e-6: transformers' T5 RMSNorm takes the mean square in float32 (observed: under
8e-7 in the inputs, under 6e-7 in the weights); its softmax runs in float64.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import RelativeBuckets
from attncli.core.variants.relative import relative_bucket
from attncli.errors import AttnError
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario
from attncli.sources.yaml_scenario import from_text

HERE = Path(__file__).parent / "checkpoints"
BOUND = 2e-6
LAYERS = {"encoder": 2, "decoder": 3, "cross": 3}


def golden() -> dict[str, np.ndarray]:
    with np.load(HERE / "t5" / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def case_of(attention: str, layer: int):
    expected = golden()
    target = None if attention == "encoder" else str(expected["decoder_text"])
    return load_layer(HERE / "t5", layer=layer, text=str(expected["text"]), target=target, attention=attention)


def weights_of(case) -> np.ndarray:
    """(H, L_q, L_k) the layer's attention weights as attncli's engine computes them from the LayerCase."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


@pytest.mark.parametrize(("attention", "layer"), [(a, n) for a, count in LAYERS.items() for n in range(1, count + 1)])
def test_every_head_of_every_attention_matches_transformers(attention, layer):
    """X (and the cross-attention's encoder output), and every head's weights, equal the golden ones within the bound."""
    expected = golden()
    case = case_of(attention, layer)
    ids = expected["ids"] if attention == "encoder" else expected["decoder_ids"]
    assert case.token_ids == tuple(ids.tolist())
    np.testing.assert_allclose(case.X, expected[f"{attention}_attention_inputs"][layer - 1], rtol=0, atol=BOUND)
    if attention == "cross":
        np.testing.assert_allclose(case.X_kv, expected["encoder_output"], rtol=0, atol=BOUND)
    np.testing.assert_allclose(weights_of(case), expected[f"{attention}_attentions"][layer - 1], rtol=0, atol=BOUND)


def written_bucket(r: int, buckets: int, distance: int, bidirectional: bool) -> int:
    """T5's bucket of one relative position r = j − i, written out with Python's integers and float64 logarithms."""
    offset = 0
    if bidirectional:
        buckets //= 2
        offset = buckets if r > 0 else 0
        d = abs(r)
    else:
        d = max(-r, 0)
    exact = buckets // 2
    if d < exact:
        return offset + d
    return offset + min(exact + int(math.log(d / exact) / math.log(distance / exact) * (buckets - exact)), buckets - 1)


@pytest.mark.parametrize(("buckets", "distance"), [(32, 128), (8, 8), (16, 20)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_the_buckets_are_t5_s(buckets, distance, bidirectional):
    """Every relative position from −300 to 300 falls in the bucket T5's rule gives; distances past D share the last one."""
    relative = np.arange(-300, 301)
    got = relative_bucket(relative, buckets=buckets, max_distance=distance, bidirectional=bidirectional)
    assert got.tolist() == [written_bucket(int(r), buckets, distance, bidirectional) for r in relative]
    assert got.min() == 0 and got.max() == buckets - 1


def test_the_comparison_can_fail():
    """The encoder's buckets made one-way, or the scores divided by √d_k as elsewhere, miss by far more than the bound."""
    expected = golden()
    case = case_of("encoder", 2)
    (buckets,) = case.variants
    assert isinstance(buckets, RelativeBuckets) and buckets.bidirectional and buckets.table.shape == (4, 8) and case.divisor == 1
    one_way = dataclasses.replace(case, variants=(dataclasses.replace(buckets, bidirectional=False),))
    assert np.abs(weights_of(one_way) - expected["encoder_attentions"][1]).max() > 1e-2
    scaled = dataclasses.replace(case, divisor=2.0)
    assert np.abs(weights_of(scaled) - expected["encoder_attentions"][1]).max() > 1e-2


def test_every_layer_of_a_stack_reads_its_first_layer_s_table():
    """The encoder's layers share one table, the decoder's another; the cross-attention has no position bias."""
    encoder = [case_of("encoder", n).variants[0].table for n in (1, 2)]
    decoder = [case_of("decoder", n).variants[0].table for n in (1, 2, 3)]
    assert all(np.array_equal(t, encoder[0]) for t in encoder) and all(np.array_equal(t, decoder[0]) for t in decoder)
    assert not np.array_equal(encoder[0], decoder[0]) and case_of("cross", 2).variants == ()


# T5's relative-position buckets as a worked example: two heads, 8 buckets (4 each way, 2 exact), max distance 6
WORKED = """name: t5-buckets
description: T5's bucketed relative-position bias, as in Raffel et al. (2020), on five words
tokens: [the, cat, sat, on, mats]
embeddings: [[1, 0], [0, 1], [1, 1], [1, -1], [0, 2]]
heads: 2
W_Q: [[1, 0, 0, 1], [0, 1, 1, 0]]
W_K: [[1, 0, 1, 0], [0, 1, 0, 1]]
W_V: identity
scale: 1
relative_buckets:
  table: [[0.5, 0.2, -0.1, -0.4, 0.3, 0.1, -0.2, -0.6], [-0.5, 0, 0.25, 0.5, 0, -0.25, -0.5, -1]]
  max_distance: 6
  bidirectional: true
"""


def test_a_scenario_writes_t5_s_buckets_as_a_worked_example():
    """`relative_buckets` adds table[h][bucket(j − i)]: here head 1's bias of the query 'the' over the keys is by hand."""
    s = from_text(WORKED, path="t5.yaml")
    variant = s.variant(RelativeBuckets)
    assert variant is not None and variant.buckets == 8 and variant.max_distance == 6
    head = engine.run(s).heads[0]
    row = [0.5, 0.1, -0.2, -0.2, -0.6]  # j − i = 0, 1, 2 exact after (buckets 4 + 0, 1), 2 → log bucket 6, 3 → 6, 4 → 7
    assert [written_bucket(j, 8, 6, True) for j in range(5)] == [0, 5, 6, 6, 7]
    np.testing.assert_allclose(head.bias[0], row, rtol=0, atol=0)
    np.testing.assert_allclose(head.biased, head.scaled + head.bias, rtol=0, atol=0)


def test_a_table_without_a_row_per_head_is_one_error_at_its_line():
    """One row for two heads is refused at the table's line, saying what it expected."""
    with pytest.raises(AttnError) as caught:
        from_text(WORKED.replace(", [-0.5, 0, 0.25, 0.5, 0, -0.25, -0.5, -1]]", "]"), path="t5.yaml")
    assert caught.value.line == 11 and "2 rows (one per head)" in str(caught.value.expected)


def test_explain_names_each_key_s_bucket(cli, tmp_path):
    """explain's bias step adds each key's number and says which bucket each j − i fell in."""
    path = tmp_path / "t5.yaml"
    path.write_text(WORKED)
    result = cli("explain", str(path), "--word", "the")
    assert result.exit_code == 0, result.stderr
    assert "Adding the bias" in result.stdout and "j − i = 2 → bucket 6" in result.stdout


def test_model_info_describes_the_buckets_and_both_stacks(cli):
    """`model info` reads T5: both stacks, the buckets, no RoPE and no scaling; the command it suggests takes a target."""
    info = model_info(HERE / "t5")
    assert info["supported"] is True and info["rope"] is None and info["encoder"] == {"layers": 2, "heads": 4, "head_dim": 4}
    texts = " ".join(m["text"] for m in info["mechanisms"])
    assert "relative-position buckets" in texts and "8 buckets" in texts and "scale 1" in texts and "cross_attention" in [m["key"] for m in info["mechanisms"]]
    result = cli("model", "info", str(HERE / "t5"))
    assert result.exit_code == 0, result.stderr
    assert "--target" in result.stdout


@pytest.mark.parametrize("attention", ["encoder", "decoder", "cross"])
def test_run_and_explain_read_each_attention(cli, attention):
    """run and explain show each of the three attentions, with --target for the decoder's."""
    base = ["--model", str(HERE / "t5"), "--layer", "2", "--sentence", "The cat sat on the mat", "--attention", attention]
    if attention != "encoder":
        base += ["--target", "The cat"]
    for args in (["run", *base, "--head", "3"], ["explain", *base, "--position", "2"]):
        result = cli(*args)
        assert result.exit_code == 0, result.stderr


def test_live_model_verify_compares_the_three_attentions(cli):
    """With torch and transformers: model verify runs T5 beside attncli, every layer of each attention within its bound."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except Exception as error:
        pytest.skip(f"torch and transformers are not importable ({error}); pip install torch==2.13.0 transformers")
    expected = golden()
    args = ["model", "verify", str(HERE / "t5"), "--sentence", str(expected["text"]), "--target", str(expected["decoder_text"])]
    result = cli(*args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["within"] is True and "float32" in doc["bound"]["why"] and doc["target_ids"] == expected["decoder_ids"].tolist()
    assert sorted({(row["attention"], row["layer"]) for row in doc["layers"]}) == sorted((a, n) for a, c in LAYERS.items() for n in range(1, c + 1))


def test_an_unknown_feed_forward_projection_is_one_error(tmp_path):
    """feed_forward_proj names T5's MLP; one attncli cannot compute is refused at that key, naming the forms it reads."""
    import shutil

    from attncli.sources.checkpoints.families import read_config

    folder = tmp_path / "t5"
    shutil.copytree(HERE / "t5", folder)
    config = json.loads((folder / "config.json").read_text())
    config["feed_forward_proj"] = "gated-wobble"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(AttnError) as caught:
        read_config(folder)
    assert caught.value.key == "feed_forward_proj" and "gated-" in str(caught.value.expected)
