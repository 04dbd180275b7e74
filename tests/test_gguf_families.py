"""GGUF files of the families of issue 20 (Qwen3, OLMo 2, Phi-3, GPT-NeoX/Pythia), as llama.cpp's converter writes them.

tests/checkpoints/gguf/<family>.gguf (F32) and <family>-q8_0.gguf (Q8_0 where a matrix's rows fill
whole blocks, F16 elsewhere, F32 norms) are written by scripts/make_gguf.py from the tiny Hugging Face
fixtures beside them, with the converter's layout: its tensor names (attn_q_norm, post_attention_norm,
post_ffw_norm, attn_qkv, the fused gate_up as ffn_up) and GPT-NeoX's query_key_value regrouped from
per head to all q | all k | all v. attncli on the F32 file must equal attncli on the folder (to 1e-9:
the metadata's ε and θ are float32), and so transformers' goldens within the family's bound (1e-6:
transformers runs its norms and softmax in float32). The Q8_0 file must equal a float64 folder of its
own dequantised tensors, which checks the dequantisation and the undone layout on every matrix.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.sources.checkpoints.gguf import neox_per_head, open_model
from attncli.sources.checkpoints.layer import checkpoint_tokens, load_layer, model_info
from attncli.sources.checkpoints.safetensors import Checkpoint
from attncli.sources.checkpoints.scenario import layer_scenario
from tests.test_gguf import make_gguf, write_safetensors

gguf = pytest.importorskip("gguf")

HF = Path(__file__).parent / "checkpoints"
FIXTURES = HF / "gguf"
FAMILIES = {"qwen3": "qwen3", "olmo2": "olmo2", "phi3": "phi3", "gpt_neox": "gptneox", "gemma3": "gemma3"}  # fixture -> GGUF architecture
# the file against its folder: 1e-9 (ε and θ are float32 in the metadata); Gemma 3's norms are stored as float32(1 + w)
# (the converter's norm_shift), so w comes back within 2⁻²⁴ of the folder's and the weights move by up to FOLDER_BOUND
FOLDER_BOUND = {"gemma3": 1e-6}
MODEL_TYPES = {"gemma3": "gemma3_text"}
GOLDEN_BOUND = 1e-6  # the folders' own bound against transformers (tests/test_qknorm_families.py, tests/test_families_rotary.py)


def golden(name: str) -> dict[str, np.ndarray]:
    with np.load(HF / name / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case) -> np.ndarray:
    """(H, L, L) the engine's weights for the layer's scenario."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


def layers(name: str) -> int:
    return int(golden(name)["attentions"].shape[0])


CASES = [(name, layer) for name in FAMILIES for layer in range(1, layers(name) + 1)]


def test_the_fixtures_are_what_the_script_writes(tmp_path):
    """The committed files are the script's output today (the writer is deterministic; the Q8_0 rounding too)."""
    for name in FAMILIES:
        for suffix, quantised in (("", None), ("-q8_0", "Q8_0")):
            path = tmp_path / f"{name}{suffix}.gguf"
            make_gguf.write_family(name, path, quantised=quantised)
            assert path.read_bytes() == (FIXTURES / path.name).read_bytes(), path.name


@pytest.mark.parametrize(("name", "layer"), CASES)
def test_the_file_gives_the_folder_s_attention_and_transformers_goldens(name, layer):
    """Every head of every layer: the F32 file equals its folder (1e-9), hence transformers' goldens (1e-6), and its token ids."""
    expected = golden(name)
    text = str(expected["text"])
    from_folder = load_layer(HF / name, layer=layer, text=text)
    from_file = load_layer(FIXTURES / f"{name}.gguf", layer=layer, text=text)
    assert from_file.token_ids == from_folder.token_ids == tuple(expected["ids"].tolist())
    for matrix in ("W_Q", "W_K", "W_V", "W_O"):
        assert np.array_equal(getattr(from_file, matrix), getattr(from_folder, matrix)), matrix
    bound = FOLDER_BOUND.get(name, 1e-9)
    np.testing.assert_allclose(from_file.X, from_folder.X, rtol=0, atol=bound * 10)
    np.testing.assert_allclose(weights_of(from_file), weights_of(from_folder), rtol=0, atol=bound)
    assert (from_file.window, from_file.divisor, from_file.layer_kind) == (from_folder.window, from_folder.divisor, from_folder.layer_kind)
    np.testing.assert_allclose(weights_of(from_file), expected["attentions"][layer - 1], rtol=0, atol=GOLDEN_BOUND)
    assert (from_file.qk_norm is None) == (from_folder.qk_norm is None) == (name not in ("qwen3", "olmo2", "gemma3"))
    assert from_file.rope is not None and from_folder.rope is not None
    assert from_file.rope.width(from_file.head_dim) == from_folder.rope.width(from_folder.head_dim)


def dequantised_folder(name: str, tmp_path: Path) -> Path:
    """A float64 copy of the fixture folder whose every tensor is the Q8_0 file's, read back through Hugging Face's names."""
    model = open_model(FIXTURES / f"{name}-q8_0.gguf")
    tensors = {}
    for full in Checkpoint(HF / name).names:
        short = full.removeprefix("model.").removeprefix("gpt_neox.")
        if model.checkpoint.has(short):
            tensors[full] = model.checkpoint.read(short)
    folder = tmp_path / name
    folder.mkdir()
    write_safetensors(folder / "model.safetensors", tensors)
    for file in ("config.json", "tokenizer.json"):
        shutil.copy(HF / name / file, folder)
    config = json.loads((folder / "config.json").read_text())
    config["dtype"] = "float64"
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("name", FAMILIES)
def test_the_q8_0_file_equals_its_dequantised_tensors(name, tmp_path):
    """Every layer and head of the Q8_0 file equals a float64 folder of its dequantised tensors; the Q8_0 matrices are gguf-py's."""
    folder = dequantised_folder(name, tmp_path)
    text = str(golden(name)["text"])
    for layer in range(1, layers(name) + 1):
        from_file = load_layer(FIXTURES / f"{name}-q8_0.gguf", layer=layer, text=text)
        from_folder = load_layer(folder, layer=layer, text=text)
        np.testing.assert_allclose(weights_of(from_file), weights_of(from_folder), rtol=0, atol=1e-9)
        assert any("stored as Q8_0" in note for note in from_file.notes) or any("stored as F16" in note for note in from_file.notes)
    model = open_model(FIXTURES / f"{name}-q8_0.gguf")
    q8 = [entry for entry in model.file.tensors.values() if entry.kind.name == "Q8_0"]
    assert q8, "the fixture stores no matrix as Q8_0"
    for entry in q8:
        reference = gguf.quants.dequantize(np.asarray(model.file.raw(entry)).reshape(entry.shape[0], -1), gguf.GGMLQuantizationType.Q8_0)
        assert np.array_equal(model.file.read(entry.name), reference.astype(np.float64)), entry.name


def test_the_neox_regrouping_is_undone():
    """GPT-NeoX's stored attn_qkv rows are all q, all k, all v (they differ from the folder's); read back they are per head."""
    model = open_model(FIXTURES / "gpt_neox.gguf")
    stored = model.file.read("blk.0.attn_qkv.weight")
    hf = Checkpoint(HF / "gpt_neox").read("gpt_neox.layers.0.attention.query_key_value.weight")
    assert not np.array_equal(stored, hf)
    assert np.array_equal(neox_per_head(stored, model.cfg.heads), hf)
    assert np.array_equal(make_gguf.neox_fused(hf, model.cfg.heads), stored)


def test_the_comparison_can_fail():
    """GPT-NeoX's stored rows read as if per head (not regrouped) give another W_Q: the regrouping is needed, not vacuous."""
    text = str(golden("gpt_neox")["text"])
    case = load_layer(FIXTURES / "gpt_neox.gguf", layer=1, text=text)
    model = open_model(FIXTURES / "gpt_neox.gguf")
    stored = model.file.read("blk.0.attn_qkv.weight")
    d_k, H = case.head_dim, case.heads
    assert np.array_equal(stored[: H * d_k].T, case.W_Q)  # stored: all q first
    naive = stored.reshape(H, 3, d_k, -1)[:, 0].reshape(H * d_k, -1)  # the stored rows read as per head, as neox.py reads a folder
    assert not np.array_equal(naive.T, case.W_Q)


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
def test_tokens_equal_the_folder_s_tokenizer(name):
    for text in ["The cat sat on the mat.", "  two spaces, a tab\tand é ü 日本", ""]:
        for special in (True, False):
            from_file = checkpoint_tokens(FIXTURES / f"{name}.gguf", text, special_tokens=special, max_tokens=1000)
            from_folder = checkpoint_tokens(HF / name, text, special_tokens=special, max_tokens=1000)
            assert (from_file.ids, from_file.labels) == (from_folder.ids, from_folder.labels), (name, text, special)


@pytest.mark.parametrize("name", FAMILIES)
def test_model_info_on_the_file(name):
    """model info reads the file: the family, its GGUF architecture, the mechanisms the folder's info names, each tensor's type."""
    from_file = model_info(FIXTURES / f"{name}-q8_0.gguf")
    from_folder = model_info(HF / name)
    model_type = MODEL_TYPES.get(name, name)
    assert from_file["supported"] is True and from_file["model_type"] == model_type
    assert from_file["gguf_architecture"] == FAMILIES[name]
    assert [m["key"] for m in from_file["mechanisms"]] == [m["key"] for m in from_folder["mechanisms"]]
    assert from_file["layers"] == from_folder["layers"] and from_file["heads"] == from_folder["heads"]
