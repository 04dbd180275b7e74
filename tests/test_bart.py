"""BART, the encoder–decoder: its encoder's, its decoder's and its cross-attention's weights equal transformers' on the fixture.

The goldens in tests/checkpoints/bart/golden.npz come from transformers itself (float64, eager
attention; scripts/make_checkpoints.py --only bart), so these tests need neither torch nor
transformers. BART computes in the model's dtype throughout, so float64 agrees to about 1e-15.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attncli import api
from attncli.sources.checkpoints import bart
from attncli.sources.checkpoints.families import read_config
from attncli.sources.checkpoints.safetensors import Checkpoint

FOLDER = Path(__file__).parent / "checkpoints" / "bart"
GOLDEN = np.load(FOLDER / "golden.npz")
SENTENCE = str(GOLDEN["text"])
TARGET = str(GOLDEN["decoder_text"])
BOUND = 1e-12


def _weights(attention: str, layer: int) -> np.ndarray:
    scenario = api.load_model(FOLDER, layer=layer, sentence=SENTENCE, target=TARGET if attention != "encoder" else None, attention=attention)
    return np.stack([head.weights for head in api.run(scenario).result.heads])  # (H, L_q, L_k)


@pytest.mark.parametrize(
    ("attention", "golden", "layers"),
    [("encoder", "encoder_attentions", 2), ("decoder", "decoder_attentions", 2), ("cross", "cross_attentions", 2)],
)
def test_every_layer_and_head_equals_transformers(attention, golden, layers):
    """Through the user's path (tokenizer.json, the shifted target, every earlier layer): transformers' weights to 1e-12."""
    assert GOLDEN[golden].shape[0] == layers
    for layer in range(1, layers + 1):
        ours = _weights(attention, layer)
        theirs = GOLDEN[golden][layer - 1]
        assert ours.shape == theirs.shape
        assert np.abs(ours - theirs).max() < BOUND, (attention, layer)


def test_tokens_are_the_ones_transformers_was_given():
    """The source with <s> … </s>; the decoder's input is the target shifted right behind decoder_start_token_id."""
    cross = api.load_model(FOLDER, layer=1, sentence=SENTENCE, target=TARGET)
    assert cross.cross and cross.context is not None
    assert len(cross.context) == len(GOLDEN["ids"]) and len(cross.tokens) == len(GOLDEN["decoder_ids"])
    assert cross.tokens[0] == "</s>"  # the start token, labelled as the tokenizer spells id 2
    note = cross.details[0]  # how the layer was read, the tokens' ids first
    assert "ids " + ", ".join(map(str, GOLDEN["decoder_ids"])) in note


def test_the_residual_streams_equal_transformers_layer_by_layer():
    """Not only the weights: the encoder's output (every cross-attention's keys and values) and each decoder layer's output."""
    cfg = read_config(FOLDER)
    model = bart.Bart(cfg, Checkpoint(FOLDER))
    ids = tuple(int(i) for i in GOLDEN["ids"])
    memory = model.encode(ids, cfg.encoder_layers)
    np.testing.assert_allclose(memory, GOLDEN["encoder_output"], atol=1e-12, rtol=0)
    h = model.embed("decoder", tuple(int(i) for i in GOLDEN["decoder_ids"]))
    np.testing.assert_allclose(h, GOLDEN["decoder_hidden_states"][0], atol=1e-12, rtol=0)
    for index in range(cfg.layers):
        h = model.decoder_layer(index, h, memory)
        np.testing.assert_allclose(h, GOLDEN["decoder_hidden_states"][index + 1], atol=1e-12, rtol=0)


def test_leaving_out_the_position_offset_breaks_the_agreement(monkeypatch):
    """The test can fail: BART's positions read two rows down; read from row 0, the encoder's weights move far past the bound."""
    monkeypatch.setattr(bart, "POSITION_OFFSET", 0)
    assert np.abs(_weights("encoder", 1) - GOLDEN["encoder_attentions"][0]).max() > 1e-3


def test_the_default_attention_follows_the_target():
    assert api.load_model(FOLDER, layer=1, sentence=SENTENCE, target=TARGET).cross
    encoder = api.load_model(FOLDER, layer=1, sentence=SENTENCE)
    assert not encoder.cross and encoder.heads == 2 and encoder.encoder == "bart's encoder"


def test_run_cli_shows_the_cross_attention(cli):
    out = cli("run", "--model", str(FOLDER), "--layer", "2", "--sentence", SENTENCE, "--target", TARGET, "--format", "json", "--stages", "weights")
    assert out.exit_code == 0, out.stderr
    doc = json.loads(out.stdout)
    heads = doc["heads"]
    assert len(heads) == 4
    np.testing.assert_allclose(np.array(heads[2]["weights"]), GOLDEN["cross_attentions"][1][2], atol=BOUND, rtol=0)


def test_a_scenario_file_takes_target_and_attention(tmp_path):
    path = tmp_path / "bart.yaml"
    path.write_text(f"model: {FOLDER}\nlayer: 1\nsentence: {SENTENCE!r}\ntarget: {TARGET}\nattention: decoder\n", encoding="utf-8")
    scenario = api.load(path)
    assert not scenario.cross and scenario.mask.causal
    ours = np.stack([head.weights for head in api.run(scenario).result.heads])
    assert np.abs(ours - GOLDEN["decoder_attentions"][0]).max() < BOUND


def test_decode_walks_the_decoders_self_attention(cli):
    out = cli("decode", "--model", str(FOLDER), "--layer", "1", "--sentence", SENTENCE, "--target", TARGET, "--attention", "decoder")
    assert out.exit_code == 0, out.stderr
    assert "Step 4" in out.stdout


def test_model_info_describes_both_stacks(cli):
    out = cli("model", "info", str(FOLDER))
    assert out.exit_code == 0
    assert "2 layers of 2 heads (head_dim 8), bidirectional" in out.stdout
    assert "--target" in out.stdout and "supported     yes" in out.stdout
    doc = json.loads(cli("model", "info", str(FOLDER), "--format", "json").stdout)
    assert doc["encoder"] == {"layers": 2, "heads": 2, "head_dim": 8}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "--layer", "1", "--sentence", SENTENCE, "--attention", "decoder"], "--target: the decoder attention reads the decoder's tokens"),
        (["run", "--layer", "3", "--sentence", SENTENCE], "--layer: layer 3 is out of range: the encoder has 2 layers"),
        (["run", "--layer", "1", "--sentence", SENTENCE, "--target", TARGET, "--attention", "sideways"], "expected encoder, decoder or cross"),
        (["decode", "--layer", "1", "--sentence", SENTENCE, "--target", TARGET], "--attention: decode needs self-attention"),
        (["decode", "--layer", "1", "--sentence", SENTENCE], "bart's encoder is an encoder"),
        (["heads", "--sentence", SENTENCE], "the map of an encoder–decoder"),
        (["run", "--layer", "1", "--sentence", SENTENCE, "--target", TARGET, "--attention", "encoder"], "--target: the encoder's self-attention reads the source sentence only"),
    ],
)
def test_what_bart_cannot_do_is_one_line(cli, args, expected):
    out = cli(*args[:1], "--model", str(FOLDER), *args[1:])
    assert out.exit_code == 1 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and expected in out.stderr, out.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "cat", "--target", "x"], "--target needs --model"),
        (["run", "--model", str(FOLDER.parent / "gpt2"), "--layer", "1", "--sentence", "x", "--target", "y"], "a gpt2 model reads one text"),
        (["run", "--model", str(FOLDER.parent / "gpt2"), "--layer", "1", "--sentence", "x", "--attention", "cross"], "a gpt2 model has one attention per layer"),
    ],
)
def test_target_and_attention_are_refused_where_they_mean_nothing(cli, args, expected):
    out = cli(*args)
    assert out.exit_code == 1 and out.stdout == ""
    assert expected in out.stderr


def test_decode_of_a_scenario_file_with_cross_attention_names_its_attention_key(cli, tmp_path):
    """A file with model: and attention: cross was told to drop a `context` it does not have, with neither its name nor its key
    as it writes it (the flag --attention); a file with `context` is still told so."""
    path = tmp_path / "bart-cross.yaml"
    path.write_text(f"model: {FOLDER}\nlayer: 1\nsentence: {SENTENCE!r}\ntarget: {TARGET!r}\nattention: cross\n", encoding="utf-8")
    out = cli("decode", str(path))
    assert out.exit_code == 1 and out.stdout == ""
    assert out.stderr.startswith(f"attncli: error: {path}: attention: decode needs self-attention") and "expected attention: decoder" in out.stderr
    assert "context: decode needs self-attention" in cli("decode", "translation").stderr
