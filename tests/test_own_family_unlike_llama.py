"""A family unlike Llama owns itself too: one defined only here, with its line in the family table, and nothing else.

`toygpt` is GPT-2's block with a layout of its own: its tensors only under `transformer.` (GPT-2 also reads them
bare), learned positions instead of RoPE, q, k and v biases that are the architecture itself rather than a
mechanism to point out, and a shape check of its own (the position table's rows too). Its module declares all of
it (`TENSORS`, `shapes`, `DESCRIPTION`) and is registered in families.ARCHITECTURES with monkeypatch, as its one
line there would be. Then `run --model`, `model info` and `heads --model` read it; where it differs from GPT-2,
what they do follows its declarations; and without a `DESCRIPTION` it gets the generic description.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import types
from pathlib import Path

import numpy as np
import pytest

from attncli.sources.checkpoints import families, gpt2
from attncli.sources.checkpoints.blocks import LayerInputs, Weights
from attncli.sources.checkpoints.config import Description, ModelConfig, Tensors, _Reader
from attncli.sources.checkpoints.source import TensorSource
from tests.test_gguf import make_gguf, write_safetensors

GPT2 = Path(__file__).parent / "checkpoints" / "gpt2"  # GPT2LMHeadModel's fixture: its tensors are under transformer.
SENTENCE = "the cat sat on the mat"


def toy_family(*, described: bool = True) -> types.ModuleType:
    """The module a GPT-2-like family is: its config reader, its layout, its layer, its shapes and its description."""
    toy = types.ModuleType("toygpt")
    toy.TENSORS = Tensors("wte.weight", ("transformer.",))

    def read_config(read: _Reader) -> ModelConfig:
        return dataclasses.replace(gpt2.read_config(read), model_type="toygpt")

    def layer_inputs(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], layer: int) -> LayerInputs:
        """X = ln_1 of the residual entering `layer` (from 1): token rows plus learned position rows, then GPT-2's blocks."""
        w = Weights(checkpoint, probe=toy.TENSORS.probe, prefixes=toy.TENSORS.prefixes)
        d = cfg.hidden_size
        h = w.rows("wte.weight", ids, d) + w.rows("wpe.weight", range(len(ids)), d)  # (L, d)
        for index in range(layer - 1):
            h = gpt2._block(cfg, w, index, h)
        X = w.layer_norm(f"h.{layer - 1}.ln_1", h, cfg.norm_eps)  # (L, d)
        dtype = w.dtype(f"h.{layer - 1}.attn.c_attn.weight")
        return LayerInputs(X=X, attention=gpt2._attention(cfg, w, layer - 1), dtype=dtype, notes=("the toy's layer",))

    def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
        d = cfg.hidden_size
        return {"wte.weight": (None, d), "wpe.weight": (cfg.max_positions, d), "h.0.attn.c_attn.weight": (d, 3 * d)}

    toy.read_config, toy.layer_inputs, toy.shapes = read_config, layer_inputs, shapes
    if described:
        toy.DESCRIPTION = Description(learned_positions=True, own_biases=True)
    return toy


@pytest.fixture
def registered(monkeypatch):
    """The toy's one line in families.ARCHITECTURES."""
    monkeypatch.setitem(families.ARCHITECTURES, "toygpt", toy_family())


def checkpoint(folder: Path, *, prefix: str = "transformer.", positions: int | None = None) -> Path:
    """GPT-2's fixture as a toygpt folder: its tensors (under `prefix` instead of transformer.), its tokenizer; `positions`
    rows of the position table instead of the fixture's, to break the toy's shape check."""
    folder.mkdir(parents=True)
    config = json.loads((GPT2 / "config.json").read_text(encoding="utf-8")) | {"model_type": "toygpt"}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    tensors = {prefix + name.removeprefix("transformer."): value for name, value in make_gguf.hf_tensors(GPT2).items()}
    if positions is not None:
        tensors[prefix + "wpe.weight"] = tensors[prefix + "wpe.weight"][:positions]
    write_safetensors(folder / "model.safetensors", tensors)
    shutil.copy(GPT2 / "tokenizer.json", folder / "tokenizer.json")
    return folder


def run_json(cli, model: Path, layer: int = 2) -> dict:
    result = cli("run", "--model", str(model), "--layer", str(layer), "--sentence", SENTENCE, "--format", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def info_of(cli, folder: Path) -> tuple[dict, str]:
    """model info's JSON document and its text."""
    as_json, as_text = cli("model", "info", str(folder), "--format", "json"), cli("model", "info", str(folder))
    assert as_json.exit_code == as_text.exit_code == 0, as_json.stderr + as_text.stderr
    return json.loads(as_json.stdout), as_text.stdout


def test_run_reads_it_through_its_own_layout(registered, cli, tmp_path):
    """Its numbers are GPT-2's on the same tensors, every stage of both heads, at every layer."""
    folder = checkpoint(tmp_path / "toy")
    for layer in (1, 3):
        toy, theirs = run_json(cli, folder, layer), run_json(cli, GPT2, layer)
        assert len(toy["heads"]) == 4
        for ours, reference in zip(toy["heads"], theirs["heads"], strict=True):
            for key in ("Q", "K", "V", "weights", "output"):
                np.testing.assert_array_equal(np.asarray(ours[key], dtype=float), np.asarray(reference[key], dtype=float))


def test_its_layout_is_its_own(registered, cli, tmp_path):
    """GPT-2 reads bare tensor names; the toy declares `transformer.` only: run and model info both refuse them, naming its tensor."""
    folder = checkpoint(tmp_path / "toy", prefix="")
    result = cli("run", "--model", str(folder), "--layer", "1", "--sentence", SENTENCE)
    assert result.exit_code == 1 and result.stdout == ""
    assert "the checkpoint has no tensor 'transformer.wte.weight'" in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    info, _ = info_of(cli, folder)
    assert info["supported"] is False and "'transformer.wte.weight'" in info["reason"], info["reason"]


def test_model_info_describes_it_from_its_declarations(registered, cli, tmp_path):
    """Learned positions in the rope row, no RoPE in the JSON, its biases not listed as a mechanism; its shapes checked."""
    info, text = info_of(cli, checkpoint(tmp_path / "toy"))
    assert (info["model_type"], info["supported"], info["reason"], info["rope"]) == ("toygpt", True, None, None)
    assert "toygpt" in info["supported_types"] and [m["key"] for m in info["mechanisms"]] == ["mha"]
    gpt2_info, gpt2_text = info_of(cli, GPT2)
    assert info["mechanisms"] == gpt2_info["mechanisms"]  # the same words (its weights are stored in float64 here: not the cache)
    row = next(line for line in text.splitlines() if line.startswith("rope "))
    assert row == next(line for line in gpt2_text.splitlines() if line.startswith("rope ")) and row.endswith("none (learned positions)")
    short = checkpoint(tmp_path / "short", positions=16)  # the toy checks its position table; GPT-2's check does not
    info, _ = info_of(cli, short)
    assert info["supported"] is False, info
    assert "tensor 'transformer.wpe.weight' has shape [16, 16] but config.json implies [32, 16]" in info["reason"], info["reason"]


def test_a_family_that_describes_nothing_gets_the_generic_description(cli, monkeypatch, tmp_path):
    """Without DESCRIPTION: no rope at all is just 'none', and biased q, k, v are listed as a mechanism."""
    monkeypatch.setitem(families.ARCHITECTURES, "toygpt", toy_family(described=False))
    info, text = info_of(cli, checkpoint(tmp_path / "toy"))
    assert info["supported"] is True and [m["key"] for m in info["mechanisms"]] == ["mha", "attention_bias"]
    assert next(line for line in text.splitlines() if line.startswith("rope ")).split() == ["rope", "none"]


def test_heads_maps_every_layer(registered, cli, tmp_path):
    """`heads --model` runs the toy's forward pass through its own layer_inputs: 3 layers of 4 heads, as GPT-2's."""
    result = cli("heads", "--model", str(checkpoint(tmp_path / "toy")), "--sentence", SENTENCE, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    theirs = json.loads(cli("heads", "--model", str(GPT2), "--sentence", SENTENCE, "--format", "json").stdout)
    assert (doc["layers"], doc["heads_per_layer"], len(doc["heads"])) == (3, 4, 12)
    for ours, reference in zip(doc["heads"], theirs["heads"], strict=True):  # the statistics of the same weights
        assert {key: ours[key] for key in ("entropy", "max_weight", "previous_token")} == {key: reference[key] for key in ("entropy", "max_weight", "previous_token")}


def test_a_config_whose_model_type_is_not_a_string_is_one_clear_error(cli, tmp_path):
    """A list is no model type: refused as unsupported in one line (it once met the table's dict as an unhashable key)."""
    folder = checkpoint(tmp_path / "odd")
    (folder / "config.json").write_text(json.dumps({"model_type": ["toygpt"], "n_layer": 3, "n_head": 4}), encoding="utf-8")
    result = cli("run", "--model", str(folder), "--layer", "1", "--sentence", SENTENCE)
    assert result.exit_code == 1 and result.stdout == ""
    assert "model_type ['toygpt'] is not supported" in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    info, _ = info_of(cli, folder)
    assert info["supported"] is False and "is not supported" in info["reason"]


def test_a_target_text_is_refused_naming_the_encoder_decoders_of_the_table(registered, cli, monkeypatch, tmp_path):
    """A one-stack family refuses --target, naming the encoder–decoders families.ENCODER_DECODERS lists (not a fixed name)."""
    folder = checkpoint(tmp_path / "toy")
    monkeypatch.setattr(families, "ENCODER_DECODERS", ("bart", "toyt5"))
    monkeypatch.setattr("attncli.sources.checkpoints.layer.ENCODER_DECODERS", ("bart", "toyt5"))
    result = cli("run", "--model", str(folder), "--layer", "1", "--sentence", SENTENCE, "--target", "hi")
    assert result.exit_code == 1 and result.stdout == ""
    assert "a toygpt model reads one text: a target text is for an encoder–decoder (bart, toyt5)" in result.stderr, result.stderr
