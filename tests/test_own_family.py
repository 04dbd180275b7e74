"""A family owns itself: one defined only here, added to the family table, works end to end without touching attncli.

`toyllama` is Llama's layer with rules of its own: q, k and v always have biases (whatever `attention_bias`
says), no layer has a window, and transformers (were there a toyllama in it) would run its RoPE, its softmax
and a gate of its own in float32 but its RMSNorm in float64. Its module is built here, as its file in
sources/checkpoints/ would be, and registered in families.ARCHITECTURES with monkeypatch, as its one line
there would. Then `run --model`, `model info` and `heads --model` read a tiny safetensors checkpoint of it;
model verify finds its output projection and its bound in its own declaration (the lookup, not the
transformers run: no torch here); and its GGUF file is read through the same declaration.
"""

from __future__ import annotations

import json
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from attncli.cli import verify
from attncli.errors import AttnError
from attncli.sources.checkpoints import families, llama
from attncli.sources.checkpoints.config import (
    FLOAT32_ROPE,
    FLOAT32_SOFTMAX,
    ModelConfig,
    Verification,
    _Reader,
    llama_like,
    no_windows,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture
from tests.test_checkpoints import HERE
from tests.test_gguf import make_gguf, write_safetensors

SENTENCE = "the cat sat on the mat"
TOY_GATE = "the toy's gate runs in float32"  # a step of its own, in its own words
TOY_PROJECTION = r"(?:^|\.)blocks\.(\d+)\.mix\.out$"  # where its heads' outputs would enter the output projection


def toy_family() -> types.ModuleType:
    """The module a new Llama-like family is: its config reader, its layer, what model verify and GGUF reading need."""
    toy = types.ModuleType("toyllama")
    toy.DEFAULTS = {"layers": 2, "hidden": 8, "heads": 2, "kv": 1, "positions": 64, "inter": 16}

    def read_config(read: _Reader) -> ModelConfig:
        """Llama's keys with the toy's defaults; q, k and v always biased; no windows."""
        return llama_like(read, "toyllama", toy.DEFAULTS, windows=no_windows, qkv_bias=True)

    toy.read_config = read_config
    toy.layer_inputs = llama.layer_inputs
    toy.VERIFY = Verification(TOY_PROJECTION, (FLOAT32_ROPE, FLOAT32_SOFTMAX, TOY_GATE))
    toy.GGUF = (GgufArchitecture("toyllama", "toyllama", llama.GGUF_NAMES, keys=llama.gguf_keys),)
    return toy


@pytest.fixture
def registered(monkeypatch):
    """The toy's one line in families.ARCHITECTURES."""
    monkeypatch.setitem(families.ARCHITECTURES, "toyllama", toy_family())


def tensors(seed: int = 5) -> dict[str, np.ndarray]:
    """A 2-layer model of d = 8, 2 query heads sharing 1 key/value head of 4, biased q, k, v; float32-exact values."""
    rng = np.random.default_rng(seed)
    d, H, G, d_k, inner, vocab = 8, 2, 1, 4, 16, 290

    def draw(*shape: int, scale: float = 0.5, centre: float = 0.0) -> np.ndarray:
        return (centre + rng.standard_normal(shape) * scale).astype(np.float32).astype(np.float64)

    out = {"model.embed_tokens.weight": draw(vocab, d), "model.norm.weight": draw(d, scale=0.1, centre=1.0)}
    for i in range(2):
        p = f"model.layers.{i}."
        out |= {
            p + "input_layernorm.weight": draw(d, scale=0.1, centre=1.0),
            p + "post_attention_layernorm.weight": draw(d, scale=0.1, centre=1.0),
            p + "self_attn.q_proj.weight": draw(H * d_k, d), p + "self_attn.q_proj.bias": draw(H * d_k),
            p + "self_attn.k_proj.weight": draw(G * d_k, d), p + "self_attn.k_proj.bias": draw(G * d_k),
            p + "self_attn.v_proj.weight": draw(G * d_k, d), p + "self_attn.v_proj.bias": draw(G * d_k),
            p + "self_attn.o_proj.weight": draw(d, H * d_k),
            p + "mlp.gate_proj.weight": draw(inner, d), p + "mlp.up_proj.weight": draw(inner, d), p + "mlp.down_proj.weight": draw(d, inner),
        }  # fmt: skip
    return out


def checkpoint(folder: Path, model_type: str, **extra: object) -> Path:
    """A tiny safetensors folder of `tensors()` under `model_type`, with the qwen2 fixture's byte-level tokenizer; ε = 2⁻²⁰, which
    GGUF's float32 metadata holds exactly."""
    folder.mkdir(parents=True)
    config = {
        "model_type": model_type, "num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "num_key_value_heads": 1,
        "head_dim": 4, "intermediate_size": 16, "max_position_embeddings": 64, "rms_norm_eps": 2.0**-20, "hidden_act": "silu",
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "attention_bias": False, "vocab_size": 290,
        "tie_word_embeddings": True, "dtype": "float32", **extra,
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    write_safetensors(folder / "model.safetensors", tensors())
    shutil.copy(HERE / "qwen2" / "tokenizer.json", folder / "tokenizer.json")
    return folder


def run_json(cli, model: Path, layer: int = 2) -> dict:
    result = cli("run", "--model", str(model), "--layer", str(layer), "--sentence", SENTENCE, "--format", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def heads_of(doc: dict) -> list[dict[str, np.ndarray]]:
    """Per head its arrays (b_Q only where the model reads biases)."""
    return [{key: np.asarray(head[key], dtype=float) for key in ("b_Q", "Q", "K", "weights", "output") if key in head} for head in doc["heads"]]


def test_unregistered_it_is_one_clear_error(cli, tmp_path):
    """Without its line in the table, the folder is refused in one line naming the model type."""
    result = cli("run", "--model", str(checkpoint(tmp_path / "toy", "toyllama")), "--layer", "1", "--sentence", SENTENCE)
    assert result.exit_code == 1 and result.stdout == ""
    assert "model_type 'toyllama' is not supported" in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr


def test_run_reads_it_with_its_own_bias_rule(registered, cli, tmp_path):
    """`run --model` reads the toy through its module: its numbers are Qwen2's on the same tensors (q, k, v biased there
    too), and not Llama's with attention_bias false, which reads no bias."""
    toy = heads_of(run_json(cli, checkpoint(tmp_path / "toy", "toyllama")))
    qwen2 = heads_of(run_json(cli, checkpoint(tmp_path / "qwen2", "qwen2", use_sliding_window=False)))
    unbiased = heads_of(run_json(cli, checkpoint(tmp_path / "llama", "llama")))
    assert len(toy) == 2
    for ours, theirs, plain in zip(toy, qwen2, unbiased, strict=True):
        for key in ("Q", "K", "weights", "output"):
            np.testing.assert_array_equal(ours[key], theirs[key])
        assert np.abs(ours["b_Q"]).max() > 0.1 and "b_Q" not in plain  # the biases it reads are there, and they change the numbers
        assert np.abs(ours["weights"] - plain["weights"]).max() > 1e-3


def test_model_info_describes_it(registered, cli, tmp_path):
    """`model info` reads its config through its module, checks its tensors' shapes and lists it as supported."""
    result = cli("model", "info", str(checkpoint(tmp_path / "toy", "toyllama")), "--format", "json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    assert (info["model_type"], info["supported"], info["reason"]) == ("toyllama", True, None)
    assert (info["layers"], info["heads"], info["kv_heads"], info["head_dim"]) == (2, 2, 1, 4)
    assert "toyllama" in info["supported_types"]


def test_heads_maps_every_layer(registered, cli, tmp_path):
    """`heads --model` runs the toy's forward pass: 2 layers of 2 heads, and its weights are run's."""
    folder = checkpoint(tmp_path / "toy", "toyllama")
    result = cli("heads", "--model", str(folder), "--sentence", SENTENCE, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["layers"], doc["heads_per_layer"], doc["kv_heads"]) == (2, 2, 1)
    assert len(doc["heads"]) == 4


def test_model_verify_finds_its_declaration(registered, tmp_path):
    """model verify's output projection, bound and experts come from the toy's VERIFY, the bound's words included."""
    projection = verify.output_projections("toyllama")
    assert list(projection) == ["self"]
    assert projection["self"].search("model.blocks.1.mix.out").group(1) == "1"
    assert not projection["self"].search("model.layers.1.self_attn.o_proj")
    bound = verify.bound_for("toyllama")
    assert (bound.weights, bound.output) == (1e-5, 1e-5)
    assert f"{FLOAT32_ROPE}, {FLOAT32_SOFTMAX}, and {TOY_GATE};" in bound.why and "RMSNorm" not in bound.why
    assert verify._declared("toyllama").eager_experts is False
    cfg = families.read_config(checkpoint(tmp_path / "toy", "toyllama"))
    assert verify._units(cfg, None, None) == [("self", 1), ("self", 2)]


def test_model_verify_without_torch_gets_past_the_lookup(registered, cli, monkeypatch, tmp_path):
    """The command finds the toy's declaration and stops only at torch; a family that declares nothing is named as such."""
    monkeypatch.setitem(sys.modules, "torch", None)
    folder = checkpoint(tmp_path / "toy", "toyllama")
    result = cli("model", "verify", str(folder), "--sentence", "hi")
    assert result.exit_code == 1 and "model verify runs transformers beside attncli" in result.stderr, result.stderr
    undeclared = toy_family()
    del undeclared.VERIFY
    monkeypatch.setitem(families.ARCHITECTURES, "toyllama", undeclared)
    result = cli("model", "verify", str(folder), "--sentence", "hi")
    assert result.exit_code == 1 and result.stdout == ""
    assert "model verify does not compare toyllama models yet" in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    with pytest.raises(AttnError, match="does not compare toyllama"):
        verify.bound_for("toyllama")


def write_toy_gguf(path: Path, folder: Path) -> None:
    """The toy's folder as llama.cpp's converter would write a Llama-like architecture it keeps in rotate-half order."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    writer = gguf.GGUFWriter(path, "toyllama")
    make_gguf._common(writer, config)
    writer.add_key_length(config["head_dim"])
    writer.add_value_length(config["head_dim"])
    writer.add_rope_freq_base(config["rope_parameters"]["rope_theta"])
    make_gguf._tokenizer(writer, make_gguf.tokenizer_metadata(folder))
    for name, value in make_gguf.hf_tensors(folder).items():
        target = make_gguf.gguf_name(name, make_gguf.LLAMA_NAMES)
        if target is not None:
            writer.add_tensor(target, np.ascontiguousarray(value))
    make_gguf._finish(writer)


def test_its_gguf_file_reads_as_its_folder(registered, cli, tmp_path):
    """A GGUF file of architecture toyllama is read through the toy's GGUF declaration (its names, its metadata spelled
    as config.json keys and read by its own read_config, biases included): the numbers are the folder's, exactly."""
    folder = checkpoint(tmp_path / "toy", "toyllama")
    path = tmp_path / "toy.gguf"
    write_toy_gguf(path, folder)
    from_file, from_folder = heads_of(run_json(cli, path)), heads_of(run_json(cli, folder))
    for ours, theirs in zip(from_file, from_folder, strict=True):
        for key in ("b_Q", "Q", "K", "weights", "output"):
            np.testing.assert_array_equal(ours[key], theirs[key])
    info = json.loads(cli("model", "info", str(path), "--format", "json").stdout)
    assert (info["model_type"], info["gguf_architecture"], info["supported"]) == ("toyllama", "toyllama", True), info


def test_every_family_declares_what_verify_and_gguf_need():
    """Each model type of the table has model verify's declaration, and each GGUF architecture names a model type its own
    module serves, so neither reader can meet a family the table does not know."""
    for model_type in families.ARCHITECTURES:
        assert isinstance(families.verification(model_type), Verification), model_type
        assert verify.output_projections(model_type), model_type
    declared = families.gguf_architectures()
    assert {arch: entry.model_type for arch, entry in declared.items()} == families.GGUF_MODEL_TYPES  # each file imports its family alone
    for arch, entry in declared.items():
        assert entry.arch == arch and families.gguf_architecture(arch) == entry
        assert entry in getattr(families.ARCHITECTURES[entry.model_type], "GGUF", ()), arch
        assert (entry.config is None) != (entry.keys is None), arch  # one way to its config


def test_a_declared_family_is_one_record_and_one_line(monkeypatch, cli, tmp_path):
    """A Llama-like family whose module holds only its LLAMA_LIKE declaration (here: no RoPE on layer 2) runs end to end."""
    from attncli.sources.checkpoints.config import LlamaLike

    toy = types.ModuleType("toynope")
    toy.LLAMA_LIKE = LlamaLike("toynope", "ToyNoPE", {"layers": 2, "hidden": 8, "heads": 2, "kv": 1, "positions": 64, "inter": 16},
                               windows=no_windows, rope_layers=lambda read, layers: (True, False))  # fmt: skip
    monkeypatch.setitem(families.ARCHITECTURES, "toynope", toy)
    ours = run_json(cli, checkpoint(tmp_path / "toy", "toynope"))
    llama = run_json(cli, checkpoint(tmp_path / "llama", "llama"))
    assert ours["scenario"]["rope"] is None and llama["scenario"]["rope"] is not None
    for head, theirs in zip(heads_of(ours), heads_of(llama), strict=True):
        np.testing.assert_array_equal(head["Q"], theirs["Q"])  # layer 1 is Llama's: the same input to layer 2
        scores = head["Q"] @ head["K"].T / 2.0  # √d_k = 2, no rotation
        scores[np.triu_indices_from(scores, 1)] = -np.inf
        expected = np.exp(scores - scores.max(axis=1, keepdims=True))
        np.testing.assert_allclose(head["weights"], expected / expected.sum(axis=1, keepdims=True), rtol=0, atol=1e-15)
        assert np.abs(head["weights"] - theirs["weights"]).max() > 1e-3  # RoPE would have changed them
