"""`attncli model verify`: transformers beside attncli, head by head; without torch, one line saying what to install.

The comparison itself needs torch and transformers and skips without them (they are never in the
README's test command); the message without them, the argument checks and the lazy import run always.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.test_checkpoints import HERE, golden

SENTENCE = "The cat sat on the mat, then the cat slept."


def test_without_torch_one_line_says_what_to_install(cli, monkeypatch):
    """No torch: status 1, nothing on stdout, one line naming the pinned install."""
    monkeypatch.setitem(sys.modules, "torch", None)
    result = cli("model", "verify", str(HERE / "gpt2"), "--sentence", "hi")
    assert result.exit_code == 1 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncli: error: model verify runs transformers beside attncli"), result.stderr
    assert "pip install torch==2.13.0 transformers" in lines[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no/such/folder", "--sentence", "hi"], "no/such/folder: the checkpoint folder does not exist"),
        ([str(HERE / "gpt2"), "--sentence", "hi", "--layer", "9"], "layer 9 is out of range: the model has 3 layers"),
        ([str(HERE / "gpt2"), "--sentence", "hi", "--format", "csv"], "this command prints a table or JSON, not csv"),
    ],
)
def test_mistakes_are_one_line_before_torch_is_imported(cli, monkeypatch, args, message):
    """A wrong folder, layer or format is named as such, with or without torch."""
    monkeypatch.setitem(sys.modules, "torch", None)
    result = cli("model", "verify", *args)
    assert result.exit_code == 1 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr, result.stderr


def test_the_verify_module_imports_no_torch():
    """torch and transformers are imported only when the command runs."""
    probe = "import sys, attncli.cli.app, attncli.cli.verify; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


# ---------------------------------------------------------------- optional: transformers itself


def reference_libraries() -> None:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except Exception as error:  # not installed, or installed but unable to load
        pytest.skip(f"torch and transformers are not importable ({error}); pip install torch==2.13.0 transformers")


@pytest.mark.parametrize(("name", "bound"), [("gpt2", 1e-12), ("bert", 1e-12), ("llama", 1e-5), ("qwen2", 1e-5)])
def test_every_head_is_within_its_bound(cli, name, bound):
    """JSON: every layer and head within the bound the architecture expects; the tokens match; the weights are the golden ones."""
    reference_libraries()
    expected = golden(name)
    result = cli("model", "verify", str(HERE / name), "--sentence", str(expected["text"]), "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "attncli.model-verify/1" and doc["within"] is True
    assert doc["token_ids"] == expected["ids"].tolist() and doc["tokens_match"] is True
    assert doc["bound"]["weights"] == bound and ("float32" in doc["bound"]["why"]) == (bound > 1e-12)
    assert [row["layer"] for row in doc["layers"]] == list(range(1, expected["attentions"].shape[0] + 1))
    assert all(len(row["heads"]) == expected["attentions"].shape[1] for row in doc["layers"])
    assert max(head["weights_diff"] for row in doc["layers"] for head in row["heads"]) <= bound


def test_the_table_names_the_reference_and_one_layer(cli):
    """--layer 2: one row per head of layer 2, the reference and the bound's reason stated."""
    reference_libraries()
    result = cli("model", "verify", str(HERE / "llama"), "--sentence", SENTENCE, "--layer", "2")
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "eager attention, loaded in float64" in text and "forward pre-hook on the output projection" in text
    assert "RMSNorm casts the hidden state to float32" in text
    assert "4 heads of 1 layer: within the bound" in text
    assert [line.split()[:2] for line in text.splitlines() if line.startswith("    2")] == [["2", str(h)] for h in range(1, 5)]


def test_a_difference_beyond_the_bound_fails(cli, monkeypatch):
    """attncli's weights nudged by 1e-9 on one head: that head is marked, and the command exits 1 with one line on stderr."""
    reference_libraries()
    from attncli.cli import verify

    honest = verify._attncli_heads

    def nudged(*args, **kwargs):
        found = honest(*args, **kwargs)
        weights, output = found["heads"][2][1]
        found["heads"][2][1] = (weights + 1e-9, output)
        return found

    monkeypatch.setattr(verify, "_attncli_heads", nudged)
    result = cli("model", "verify", str(HERE / "gpt2"), "--sentence", SENTENCE, "--layer", "2")
    assert result.exit_code == 1
    assert [line for line in result.stdout.splitlines() if "OUTSIDE" in line][0].split()[:2] == ["2", "2"]
    assert len(result.stderr.splitlines()) == 1 and "more than the bound" in result.stderr
    doc = json.loads(cli("model", "verify", str(HERE / "gpt2"), "--sentence", SENTENCE, "--layer", "2", "--format", "json").stdout)
    assert doc["within"] is False and np.isclose(doc["layers"][0]["heads"][1]["weights_diff"], 1e-9, rtol=1e-3)
