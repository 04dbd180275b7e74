"""Multimodal folders (Llama 4, Gemma 3, Mistral 3): attncli reads their text stack, equal to the text model's golden.

Each fixture in tests/checkpoints/<family>-multimodal is the multimodal model built by transformers 5.24 with a one-layer vision
tower, its language model holding a text fixture's weights (scripts/make_checkpoints.py, MULTIMODAL), saved with the text
stack's tensors under language_model.model.*; the other spelling, model.language_model.* (transformers 4.52 to 4.57), is the
same file with its tensors renamed. The text fixture's golden is transformers' own for the same weights: the bound is theirs
(1e-6 for the weights, 1e-5 for X).
"""

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.errors import AttnError
from attncli.sources.checkpoints import families
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario
from tests.live import fixture_script

HERE = Path(__file__).parent / "checkpoints"
MULTIMODAL = {"llama4-multimodal": ("llama4_text", "llama4"), "gemma3-multimodal": ("gemma3_text", "gemma3"),
              "mistral3-multimodal": ("mistral", "mistral3")}  # folder → (the text stack's type, config.json's)  # fmt: skip
TEXT = {"llama4-multimodal": "llama4_text", "gemma3-multimodal": "gemma3", "mistral3-multimodal": "mistral"}  # the text fixture


def golden(name: str) -> dict[str, np.ndarray]:
    with np.load(HERE / TEXT[name] / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def agrees(folder: Path, name: str) -> None:
    """Every layer's weights (and X where the golden holds it) of `folder` equal the text fixture's golden."""
    expected = golden(name)
    for layer in range(1, expected["attentions"].shape[0] + 1):
        case = load_layer(folder, layer=layer, text=str(expected["text"]))
        assert case.token_ids == tuple(expected["ids"].tolist())
        weights = np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])
        np.testing.assert_allclose(weights, expected["attentions"][layer - 1], rtol=0, atol=1e-6, err_msg=f"{name} layer {layer}")
        if "attention_inputs" in expected:
            np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", MULTIMODAL)
def test_the_text_stack_equals_the_text_model(name):
    """Every layer and head of the multimodal folder's text stack equals the text model's golden."""
    assert families.read_config(HERE / name).model_type == MULTIMODAL[name][0]
    agrees(HERE / name, name)


@pytest.mark.parametrize("name", MULTIMODAL)
def test_the_other_spelling_of_the_tensors(name, tmp_path):
    """With the text stack's tensors under model.language_model.* (transformers 4.52 to 4.57) the numbers are the same."""
    folder = tmp_path / name
    shutil.copytree(HERE / name, folder)
    path = folder / "model.safetensors"
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    renamed = {key.replace("language_model.model.", "model.language_model.", 1): value for key, value in header.items()}
    assert renamed != header
    text = json.dumps(renamed).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + size :])
    agrees(folder, name)
    assert "model.language_model.*" in model_info(folder)["multimodal"]


@pytest.mark.parametrize("name", MULTIMODAL)
def test_model_info_says_it_is_multimodal(name):
    """model info names config.json's type and architecture, says the text stack is read and which, and describes that stack."""
    info = model_info(HERE / name)
    text_type, own = MULTIMODAL[name]
    assert info["supported"] is True and info["model_type"] == own and info["text_model_type"] == text_type
    assert info["architectures"][0].endswith("ForConditionalGeneration")
    assert info["multimodal"].startswith(f"a multimodal model ({own}): attncli reads its text stack ({text_type}")
    assert "language_model.model.*" in info["multimodal"]
    text_info = model_info(HERE / TEXT[name])
    assert info["mechanisms"] == text_info["mechanisms"] and info["kv_cache"] == text_info["kv_cache"]


def test_a_multimodal_config_without_text_config_is_one_error(tmp_path):
    """A gemma3 config.json with no text_config is refused in one line naming the key, not read as defaults."""
    folder = tmp_path / "gemma3"
    shutil.copytree(HERE / "gemma3-multimodal", folder)
    config = json.loads((folder / "config.json").read_text())
    del config["text_config"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(AttnError) as caught:
        families.read_config(folder)
    assert caught.value.key == "text_config" and "has no text_config" in str(caught.value)
    assert model_info(folder)["supported"] is False


@pytest.mark.parametrize("name", MULTIMODAL)
def test_model_verify_runs_the_language_model(name):
    """model verify on a multimodal folder compares the text stack's layers with transformers' language model (skips without torch)."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except Exception as error:
        pytest.skip(f"torch and transformers are not importable ({error}); pip install torch==2.13.0 transformers")
    from attncli.cli.verify import verify

    report = verify(HERE / name, sentence=str(golden(name)["text"]))
    assert report["within"] is True and len(report["layers"]) == golden(name)["attentions"].shape[0]


def test_live_transformers_agrees():
    """transformers itself, run now on each multimodal folder's language model, gives the text model's golden (skips without torch)."""
    script = fixture_script()
    for name in MULTIMODAL:
        expected = golden(name)
        live = script.multimodal_text_golden(HERE / name, expected["ids"].tolist())
        np.testing.assert_allclose(live, expected["attentions"], rtol=0, atol=1e-12, err_msg=name)
