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
        ([str(HERE / "llama" / "config.json"), "--sentence", "hi"], "config.json: a file that is neither a checkpoint folder nor a GGUF file"),
        ([str(HERE / "gpt2"), "--sentence", "hi", "--layer", "9"], "layer 9 is out of range: the model has 3 layers"),
        ([str(HERE / "gpt2"), "--sentence", "hi", "--format", "csv"], "this command prints a table or JSON, not csv"),
        ([str(HERE / "bart"), "--sentence", "hi"], "--target: a bart model's decoder and cross-attention read the text the decoder has produced"),
        ([str(HERE / "gpt2"), "--sentence", "hi", "--target", "x"], "--target: a gpt2 model reads one text: a target text is for an encoder–decoder"),
        ([str(HERE / "bart"), "--sentence", "hi", "--target", "x", "--layer", "3"], "layer 3 is out of range: the model has 2 encoder and 2 decoder layers"),
    ],
)
def test_mistakes_are_one_line_before_torch_is_imported(cli, monkeypatch, args, message):
    """A wrong folder, layer or format is named as such, with or without torch."""
    monkeypatch.setitem(sys.modules, "torch", None)
    result = cli("model", "verify", *args)
    assert result.exit_code == 1 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr, result.stderr


@pytest.mark.parametrize("name", ["llama.gguf", "quantised.gguf", "gpt_neox.gguf"])
def test_a_gguf_file_is_one_line_saying_what_verify_compares(cli, monkeypatch, name):
    """A GGUF file that exists is not "a folder that does not exist": one line says verify compares with transformers on a
    checkpoint folder, why a GGUF file is not verified, and what to verify instead; with or without torch."""
    monkeypatch.setitem(sys.modules, "torch", None)
    result = cli("model", "verify", str(HERE / "gguf" / name), "--sentence", "hi")
    assert result.exit_code == 1 and result.stdout == "" and len(result.stderr.splitlines()) == 1, result.stderr
    line = result.stderr
    assert "does not exist" not in line and "…" not in line, line
    assert "model verify compares with transformers on a checkpoint folder; a GGUF file is not verified, as transformers' GGUF reader" in line
    assert "(expected the checkpoint folder it was converted from)" in line


def test_transformers_gguf_reader_is_no_reference_for_a_gguf_file():
    """Why model verify refuses a GGUF file, measured: transformers reading llama.gguf itself gives other attention weights than
    transformers on the folder it was converted from (llama.cpp's rope_freqs dropped), where attncli's reading of the file meets
    the folder's (tests/test_gguf.py). Should this fail, transformers reads the file faithfully and verify could compare it."""
    torch = pytest.importorskip("torch", reason="the measurement runs transformers: pip install torch==2.13.0 transformers accelerate gguf")
    transformers = pytest.importorskip("transformers", reason="pip install torch==2.13.0 transformers accelerate gguf")
    pytest.importorskip("accelerate", reason="transformers reads a GGUF file only with accelerate: pip install accelerate")
    pytest.importorskip("gguf", reason="transformers reads a GGUF file through the gguf package: pip install gguf")
    expected = golden("llama")
    transformers.utils.logging.set_verbosity_error()
    model = transformers.AutoModel.from_pretrained(HERE / "gguf", gguf_file="llama.gguf", dtype=torch.float64, attn_implementation="eager")
    with torch.no_grad():
        out = model(torch.tensor([expected["ids"].tolist()]), output_attentions=True)
    first = out.attentions[0][0].numpy()  # (H, L, L) of layer 1
    assert np.abs(first - expected["attentions"][0]).max() > 1e-2


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


# every single-stack fixture in tests/checkpoints (BART, the encoder–decoder, has its own test below), the bound
# `model verify` states for its family, and the float32 steps its reason must name (docs/families.md)
FAMILIES = [
    ("gpt2", 1e-12, ()),
    ("gpt2-bare", 1e-12, ()),
    ("bert", 1e-12, ()),
    ("llama", 1e-5, ("RMSNorm", "rotary", "softmax")),
    ("llama-old", 1e-5, ("RMSNorm", "rotary", "softmax")),
    ("qwen2", 1e-5, ("RMSNorm", "rotary", "softmax")),
    ("mistral", 1e-5, ("RMSNorm", "rotary", "softmax")),
    ("phi3", 1e-5, ("RMSNorm", "rotary", "softmax")),
    ("gpt_neox", 1e-5, ("rotary", "softmax")),
    ("qwen3", 1e-5, ("q and k norms", "rotary", "softmax")),
    ("olmo2", 1e-5, ("q and k norms", "rotary", "softmax")),
    ("gemma2", 1e-5, ("(1 + w)", "rotary", "softmax", "embedding scale")),
    ("gemma3", 1e-5, ("(1 + w)", "q and k norms", "rotary", "softmax", "embedding scale")),
    ("gpt_oss", 1e-5, ("RMSNorm", "rotary")),
    ("deepseek_v3", 1e-5, ("RMSNorm", "rotary", "softmax", "router")),
    ("deepseek_v2", 1e-5, ("RMSNorm", "rotary", "complex numbers", "softmax", "router")),
    ("deepseek_v3_groups", 1e-5, ("RMSNorm", "rotary", "softmax", "router")),
    ("deepseek_v2_groups", 1e-5, ("RMSNorm", "rotary", "complex numbers", "softmax", "router")),
    ("falcon", 1e-5, ("rotary", "bfloat16")),
    ("falcon-alibi", 1e-5, ("rotary", "bfloat16")),
    ("falcon-sequential", 1e-5, ("rotary", "bfloat16")),
    ("bloom", 1e-5, ("ALiBi", "softmax")),
    ("stablelm", 1e-5, ("rotary", "softmax")),
    ("stablelm-parallel", 1e-5, ("rotary", "softmax")),
    ("modernbert", 1e-5, ("rotary", "softmax")),
    # issue 30's Llama-like families
    ("qwen3_moe", 1e-5, ("q and k norms", "rotary", "softmax", "router")),
    ("granite", 1e-5, ("RMSNorm", "rotary", "softmax")),
    ("cohere2", 1e-5, ("LayerNorm", "rotary", "turns q and k in float32", "softmax")),
    ("glm4", 1e-5, ("RMSNorm", "rotary", "softmax")),
    ("glm4_moe", 1e-5, ("q and k norms", "rotary", "softmax", "router")),
    ("ministral", 1e-5, ("RMSNorm", "rotary", "softmax")),
    ("ministral3", 1e-5, ("RMSNorm", "rotary", "softmax")),
    ("ministral3-long", 1e-5, ("RMSNorm", "rotary", "softmax")),  # its query temperature on: 13 tokens past n₀ = 4
    ("exaone4", 1e-5, ("q and k norms", "rotary", "softmax")),
    ("olmo3", 1e-5, ("q and k norms", "rotary", "softmax")),
    ("apertus", 1e-5, ("q and k norms", "rotary", "softmax")),
    ("ernie4_5", 1e-5, ("RMSNorm", "rotary", "turns q and k in float32", "softmax")),
    ("seed_oss", 1e-5, ("RMSNorm", "rotary", "softmax")),
    ("smollm3", 1e-5, ("RMSNorm", "rotary", "softmax")),
    ("qwen3_next", 1e-5, ("q and k norms", "rotary", "softmax", "delta rule")),
    ("gemma3n", 1e-5, ("q, k and v norms", "rotary", "AltUp's router", "Φ⁻¹(sparsity)", "softmax")),
    ("llama4_text", 1e-5, ("RMSNorm", "rotary", "complex numbers", "QK-norm after RoPE", "router")),
    ("hunyuan_v1_dense", 1e-5, ("q and k norms", "rotary", "softmax")),
    # multimodal folders: their text stack's family, its bound
    ("llama4-multimodal", 1e-5, ("RMSNorm", "rotary", "complex numbers", "QK-norm after RoPE", "router")),
    ("gemma3-multimodal", 1e-5, ("(1 + w)", "q and k norms", "rotary", "softmax", "embedding scale")),
    ("mistral3-multimodal", 1e-5, ("RMSNorm", "rotary", "softmax")),
]


def test_every_fixture_family_is_listed():
    """A fixture added to tests/checkpoints without a line above fails here, with or without torch."""
    fixtures = {path.parent.name for path in HERE.glob("*/config.json")} - {"bart", "t5"}  # encoder–decoders: tested apart
    assert fixtures == {name for name, _, _ in FAMILIES}


@pytest.mark.parametrize(("name", "bound", "float32_steps"), FAMILIES)
def test_every_head_is_within_its_bound(cli, name, bound, float32_steps):
    """JSON: every layer and head within the bound the architecture expects, for the reason it states; the tokens are the golden ones."""
    reference_libraries()
    expected = golden(name)
    result = cli("model", "verify", str(HERE / name), "--sentence", str(expected["text"]), "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "attncli.model-verify/1" and doc["within"] is True
    assert doc["token_ids"] == expected["ids"].tolist() and doc["tokens_match"] is not False
    why = doc["bound"]["why"]
    assert doc["bound"]["weights"] == bound and ("float32" in why) == bool(float32_steps)
    assert all(step in why for step in float32_steps), why
    assert ("softmax" in why) == ("softmax" in float32_steps), why  # gpt-oss's softmax runs in float64
    kinds = json.loads((HERE / name / "config.json").read_text()).get("layer_types") or []
    softmax = [i + 1 for i, kind in enumerate(kinds) if kind != "linear_attention"] or list(range(1, expected["attentions"].shape[0] + 1))
    assert [row["layer"] for row in doc["layers"]] == softmax  # a layer without softmax (Qwen3-Next's Gated DeltaNet) has no weights to compare
    assert {row["attention"] for row in doc["layers"]} == {"self"} and doc["target"] is None and doc["target_ids"] is None
    assert all(len(row["heads"]) == expected["attentions"].shape[1] for row in doc["layers"])
    assert max(head["weights_diff"] for row in doc["layers"] for head in row["heads"]) <= bound


def test_bart_compares_its_three_attentions(cli):
    """BART with --target: every layer of the encoder, the decoder's self-attention and the cross-attention, 1e-12 (float64 throughout)."""
    reference_libraries()
    expected = golden("bart")
    args = ["model", "verify", str(HERE / "bart"), "--sentence", str(expected["text"]), "--target", str(expected["decoder_text"])]
    result = cli(*args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["within"] is True and doc["bound"]["weights"] == 1e-12 and "float32" not in doc["bound"]["why"]
    assert doc["token_ids"] == expected["ids"].tolist() and doc["target_ids"] == expected["decoder_ids"].tolist()
    for attention in ("encoder", "decoder", "cross"):
        shape = expected[f"{attention}_attentions"].shape  # (layers, heads, queries, keys)
        rows = [row for row in doc["layers"] if row["attention"] == attention]
        assert [row["layer"] for row in rows] == list(range(1, shape[0] + 1)), attention
        assert all(len(row["heads"]) == shape[1] for row in rows), attention
    assert max(head["weights_diff"] for row in doc["layers"] for head in row["heads"]) <= 1e-12
    table = cli(*args, "--layer", "2")
    assert table.exit_code == 0, table.stderr
    rows = [line.split()[:3] for line in table.stdout.splitlines() if line.split()[:1] in (["encoder"], ["decoder"], ["cross"])]
    heads = {"encoder": 2, "decoder": 4, "cross": 4}
    assert rows == [[attention, "2", str(h)] for attention, count in heads.items() for h in range(1, count + 1)], table.stdout
    assert "10 heads of 3 attention layers: within the bound" in table.stdout


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
        weights, output = found["heads"][("self", 2)][1]
        found["heads"][("self", 2)][1] = (weights + 1e-9, output)
        return found

    monkeypatch.setattr(verify, "_attncli_heads", nudged)
    result = cli("model", "verify", str(HERE / "gpt2"), "--sentence", SENTENCE, "--layer", "2")
    assert result.exit_code == 1
    assert [line for line in result.stdout.splitlines() if "OUTSIDE" in line][0].split()[:2] == ["2", "2"]
    assert len(result.stderr.splitlines()) == 1 and "more than the bound" in result.stderr
    doc = json.loads(cli("model", "verify", str(HERE / "gpt2"), "--sentence", SENTENCE, "--layer", "2", "--format", "json").stdout)
    assert doc["within"] is False and np.isclose(doc["layers"][0]["heads"][1]["weights_diff"], 1e-9, rtol=1e-3)
