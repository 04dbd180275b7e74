"""Real models on the command line: `--model DIR --layer N --sentence TEXT`, `model:` scenarios, `model info`, `model tokens`.

The numbers are checked against the committed fixtures' goldens (transformers' eager attention in
float64, see tests/test_checkpoints.py for the tolerances): 1e-12 for GPT-2 and BERT, 1e-5 for the
Llama family, whose RMSNorm, RoPE and softmax transformers computes in float32.
"""

import json
import os
import re
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from attncli.sources.checkpoints.families import SUPPORTED
from attncli.sources.checkpoints.layer import tokenize
from attncli.sources.yamltree import parse
from tests.test_checkpoints import HERE, TOLERANCE, golden
from tests.test_schema import SCHEMA, as_editor_sees_it

GPT2 = str(HERE / "gpt2")
SENTENCE = "Mary and John saw Mary."


def model_args(name: str, layer: int, text: str) -> list[str]:
    return ["--model", str(HERE / name), "--layer", str(layer), "--sentence", text]


def scenario_file(folder: Path, name: str, layer: int, text: str, stem: str = "real") -> Path:
    """A `model:` scenario in `folder`, its checkpoint given relative to that folder."""
    path = folder / f"{stem}.yaml"
    path.write_text(f"model: {os.path.relpath(HERE / name, folder)}\nlayer: {layer}\nsentence: {text}\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(TOLERANCE))
def test_run_json_gives_transformers_weights_for_every_head(cli, name):
    """`run --model … --format json` on the middle layer: every head's weights equal the golden ones."""
    expected = golden(name)
    layer = (expected["attentions"].shape[0] + 1) // 2
    result = cli("run", *model_args(name, layer, str(expected["text"])), "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    weights = np.array([head["weights"] for head in doc["heads"]])
    np.testing.assert_allclose(weights, expected["attentions"][layer - 1], rtol=0, atol=TOLERANCE[name])
    assert len(doc["scenario"]["tokens"]) == len(expected["ids"])


def test_one_head_of_one_layer_matches_the_golden_and_the_stored_tensors(cli):
    """GPT-2 layer 2, head 3: the weights match the golden; W_V, b_V and W_O are the stored c_attn/c_proj blocks; output = A·V."""
    from attncli.sources.checkpoints.safetensors import SafetensorsFile

    expected = golden("gpt2")
    result = cli("run", *model_args("gpt2", 2, str(expected["text"])), "--head", "3", "--format", "json", "--stages", "embeddings,v,weights,output")
    doc = json.loads(result.stdout)
    (head,) = doc["heads"]
    np.testing.assert_allclose(head["weights"], expected["attentions"][1][2], rtol=0, atol=1e-12)
    stored = SafetensorsFile(HERE / "gpt2" / "model.safetensors")
    c_attn, c_bias = stored.read("transformer.h.1.attn.c_attn.weight"), stored.read("transformer.h.1.attn.c_attn.bias")  # (16, 48): [q | k | v], 4 heads of 4
    assert np.array_equal(np.array(head["W_V"]), c_attn[:, 32 + 8 : 32 + 12]) and np.array_equal(np.array(head["b_V"]), c_bias[40:44])
    assert np.array_equal(np.array(doc["W_O"]), stored.read("transformer.h.1.attn.c_proj.weight"))
    V = np.array(doc["embeddings"]) @ np.array(head["W_V"]) + np.array(head["b_V"])  # (L, 4)
    np.testing.assert_allclose(np.array(head["V"]), V, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.array(head["output"]), np.array(head["weights"]) @ V, rtol=0, atol=1e-12)


def test_the_header_says_where_the_numbers_come_from(cli):
    """The table header names the model and layer and the head's key/value head; --long-notes adds X's origin and the storage dtype,
    and without it the header says how many notes it leaves out and how to see them."""
    result = cli("run", *model_args("llama", 2, SENTENCE), "--head", "3", "--stages", "weights", "--long-notes")
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert out.startswith("llama layer 2 — ") and "llama architecture, 3 layers" in out
    assert "X = input_layernorm (RMSNorm) of the residual entering layer 2" in out
    assert "weights stored as bfloat16, arithmetic in float64" in out
    assert "head 3 reads key/value head 2 of 2" in out
    assert "llama3" in out
    short = " ".join(cli("run", *model_args("llama", 2, SENTENCE), "--head", "3", "--stages", "weights").stdout.split())
    assert "head 3 reads key/value head 2 of 2" in short and "input_layernorm" not in short and "bfloat16" not in short
    assert re.search(r"\d+ more notes on how the layer was read: --long-notes shows them\.", short)


@pytest.mark.parametrize("fmt", ["table", "markdown", "latex", "typst", "html"])
def test_a_post_names_the_model_never_its_path_unless_asked(cli, fmt):
    """A GGUF file's header names the model by its general.name, and a folder's by its name; the path only with --show-path."""
    from attncli.document import escape

    gguf = HERE / "gguf" / "llama.gguf"
    for model, name in ((gguf, "attncli tiny llama"), (HERE / "llama", "llama")):
        args = ("run", "--model", str(model), "--layer", "1", "--sentence", "The cat sat", "--stages", "weights", "--format", fmt)
        post = cli(*args).stdout
        assert f"{name} layer 1" in post and str(model) not in post and "checkpoints" not in post
        assert "residual entering layer 1" not in post and "stored as" not in post  # the long notes (~1,400 characters) only when asked
        assert "residual entering layer 1" in cli(*args, "--long-notes").stdout
        shown = {"latex": escape.latex_text, "markdown": escape.markdown}.get(fmt, str)(str(model))  # a clone's path may hold a "_"
        assert shown in cli(*args, "--show-path").stdout
        assert "more notes" in post if fmt == "table" else "long-notes" not in post  # a post names no option


def test_gpt2_scale_by_inverse_layer_index_is_the_divisor(cli):
    """gpt2-bare scales layer 3's scores by √d_k × 3 = 6, a value the JSON carries."""
    result = cli("run", *model_args("gpt2-bare", 3, "The cat"), "--format", "json", "--stages", "weights")
    assert json.loads(result.stdout)["scenario"]["scale"] == {"mode": "value", "divisor": 6.0}


def test_bert_has_no_mask_and_its_special_tokens_can_be_left_out(cli):
    """BERT attends both ways; --special-tokens none drops [CLS] and [SEP]."""
    doc = json.loads(cli("run", *model_args("bert", 1, "The cat"), "--format", "json", "--stages", "weights").stdout)
    assert doc["scenario"]["mask"] == "none" and doc["scenario"]["tokens"] == ["[CLS]", "The", "cat", "[SEP]"]
    doc = json.loads(cli("run", *model_args("bert", 1, "The cat"), "--special-tokens", "none", "--format", "json").stdout)
    assert doc["scenario"]["tokens"] == ["The", "cat"]


def test_rope_and_grouped_heads_reach_the_scenario(cli):
    """Llama's scaled inverse frequencies and its 2 key/value heads of 4 are what the engine used."""
    doc = json.loads(cli("run", *model_args("llama", 1, "The cat"), "--format", "json", "--stages", "weights").stdout)
    assert doc["scenario"]["kv_heads"] == 2 and doc["scenario"]["mask"] == "causal"
    assert doc["scenario"]["rope"]["scaling"].startswith("llama3")


@pytest.mark.parametrize("word", ["Mary", "mary", "ĠMary", "␣Mary"])
def test_explain_word_matches_a_token_without_its_space_mark(cli, word):
    """`--word Mary` finds the token '␣Mary' (GPT-2's piece 'ĠMary'), the first of its occurrences."""
    result = cli("explain", *model_args("gpt2", 2, "Mary saw Mary."), "--word", word, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["query"]["token"] == "␣Mary"


def test_explain_position_and_head_on_a_llama_checkpoint(cli):
    """`--position` picks one token; the explained weights are that row of the golden matrix."""
    expected = golden("llama")
    result = cli("explain", *model_args("llama", 3, str(expected["text"])), "--position", "5", "--head", "4", "--format", "json")
    assert result.exit_code == 0, result.stderr
    weights = [key["weight"] for key in json.loads(result.stdout)["keys"]]
    np.testing.assert_allclose(weights, expected["attentions"][2][3][4], rtol=0, atol=1e-5)


def test_explain_narrates_a_real_head(cli):
    """The terminal walk-through of a real head runs to the output step."""
    result = cli("explain", *model_args("gpt2", 2, SENTENCE), "--word", "John", "--head", "2")
    assert result.exit_code == 0, result.stderr
    assert "'␣John'" in result.stdout and "The output" in result.stdout


@pytest.mark.parametrize("fmt", ["table", "json", "markdown", "latex", "csv", "html", "svg"])
@pytest.mark.parametrize("command", ["run", "explain"])
def test_every_format_works_on_a_checkpoint(cli, fmt, command):
    """run and explain on a real layer succeed in every format, with --round-steps too."""
    args = [command, *model_args("qwen2", 2, SENTENCE), "--format", fmt, "--round-steps", "4"]
    if command == "explain":
        args += ["--word", "John"]
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip()


def test_stages_and_round_steps_on_a_checkpoint(cli):
    """--stages picks the tables; --round-steps keeps the exact output beside the rounded one."""
    result = cli("run", *model_args("mistral", 2, SENTENCE), "--stages", "rope,weights", "--format", "json", "--round-steps", "3")
    doc = json.loads(result.stdout)
    assert set(doc["heads"][0]) == {"head", "kv_head", "Q_rope", "K_rope", "weights"}
    assert doc["rounding"]["decimals"] == 3


def test_a_model_scenario_file_runs_relative_to_its_folder(cli, tmp_path, monkeypatch):
    """`model:` is read relative to the scenario file's folder, whatever the current folder; the numbers are the CLI's."""
    path = scenario_file(tmp_path, "gpt2", 2, SENTENCE)
    monkeypatch.chdir(HERE.parent)
    from_file = json.loads(cli("run", str(path), "--format", "json").stdout)
    from_options = json.loads(cli("run", *model_args("gpt2", 2, SENTENCE), "--format", "json").stdout)
    assert from_file["heads"] == from_options["heads"]
    assert from_file["scenario"]["name"] == "gpt2 layer 2"  # no name: the model's and the layer's, not the file's stem


def test_a_model_scenario_passes_the_schema(tmp_path):
    """A `model:` scenario validates against the shipped JSON Schema, as an editor reads it."""
    path = scenario_file(tmp_path, "gpt2", 2, SENTENCE)
    jsonschema.validate(as_editor_sees_it(parse(path.read_text())), SCHEMA, cls=jsonschema.Draft202012Validator)


@pytest.mark.parametrize("fmt", ["markdown", "json", "csv"])
def test_export_writes_checkpoint_scenarios(cli, tmp_path, fmt):
    """export renders `model:` scenarios beside plain ones, run and --explain alike."""
    source = tmp_path / "src"
    source.mkdir()
    scenario_file(source, "gpt2", 1, SENTENCE, stem="gpt2-layer1")
    scenario_file(source, "bert", 2, "The cat sat", stem="bert-layer2")
    out = tmp_path / "out"
    out.mkdir()
    result = cli("export", str(source), "--format", fmt, "--out-dir", str(out))
    assert result.exit_code == 0, result.stderr
    assert sorted(p.stem for p in out.iterdir()) == ["bert-layer2", "gpt2-layer1"]
    result = cli("export", str(source), "--explain", "cat", "--format", fmt, "--out-dir", str(out))
    assert result.exit_code == 0, result.stderr  # bert has 'cat'; gpt2's sentence has none: skipped with a note
    assert "skipped" in result.stderr


def test_model_info_describes_the_checkpoint(cli):
    """`model info` names the architecture, layers, heads, sizes, positions, RoPE, dtype and support."""
    result = cli("model", "info", str(HERE / "llama"))
    assert result.exit_code == 0, result.stderr
    rows = dict(line.split(None, 1) for line in result.stdout.splitlines())
    assert rows["architecture"] == "llama (LlamaForCausalLM)" and rows["layers"] == "3"
    assert rows["heads"].startswith("4 query heads, 2 key/value heads") and rows["d_model"] == "24" and rows["head_dim"] == "8"
    assert rows["positions"] == "128" and "llama3" in rows["rope"] and rows["dtype"].startswith("bfloat16")
    assert rows["supported"].startswith("yes")


def test_model_info_json_and_an_unsupported_model(cli):
    """JSON carries the same facts; an unsupported model_type is described, with the supported ones listed."""
    doc = json.loads(cli("model", "info", GPT2, "--format", "json").stdout)
    assert doc["schema"] == "attncli.model-info/1" and doc["heads"] == 4 and doc["supported"] is True
    result = cli("model", "info", str(HERE / "bad" / "unsupported-model-type"))
    assert result.exit_code == 0
    words = " ".join(result.stdout.split())  # the reason wraps to the terminal's width
    assert "no: " in words and f"expected one of {', '.join(SUPPORTED)}" in words


def test_model_tokens_lists_positions_ids_labels_and_pieces(cli):
    """`model tokens` counts positions from 1 and shows each id, label and the tokenizer's piece."""
    result = cli("model", "tokens", GPT2, "The cat sat")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["position", "id", "label", "piece"]
    assert lines[2].split()[0] == "2" and lines[2].split()[2:] == ["␣cat", "Ġcat"]
    doc = json.loads(cli("model", "tokens", str(HERE / "bert"), "The cat", "--format", "json").stdout)
    assert [t["label"] for t in doc["tokens"]] == ["[CLS]", "The", "cat", "[SEP]"]
    assert [t["position"] for t in doc["tokens"]] == [1, 2, 3, 4]
    assert tuple(t["id"] for t in doc["tokens"]) == tokenize(HERE / "bert", "The cat").ids


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "cat", "--model", GPT2, "--layer", "1", "--sentence", "hi"], "--model: both SCENARIO and --model are given"),
        (["explain", "-s", "cat", "--model", GPT2, "--layer", "1", "--sentence", "hi", "--position", "1"], "both --scenario and --model"),
        (["run", "--model", GPT2, "--sentence", "hi"], "--layer: --model needs --layer"),
        (["run", "--model", GPT2, "--layer", "1"], "--sentence: --model needs --sentence"),
        (["run", "cat", "--layer", "2"], "--layer: --layer needs --model"),
        (["run", "--model", GPT2, "--layer", "4", "--sentence", "hi"], "--layer: layer 4 is out of range: the model has 3 layers (expected 1 to 3)"),
        (["run", "--model", GPT2, "--layer", "1", "--sentence", "The cat sat. " * 9], "--sentence: the sentence is 45 tokens long, more than the model's 32 positions"),
        (["run", "--model", "no/such/folder", "--layer", "1", "--sentence", "hi"], "no/such/folder: the checkpoint folder does not exist"),
        (["run", "--model", str(HERE / "bad" / "unsupported-model-type"), "--layer", "1", "--sentence", "hi"], "is not supported (expected one of " + ", ".join(SUPPORTED[:5])),
        (["run", "--model", str(HERE / "bad" / "missing-tokenizer"), "--layer", "1", "--sentence", "hi"], "no tokenizer.json in the checkpoint folder"),
        (["run", "--model", GPT2, "--layer", "1", "--sentence", "hi", "--special-tokens", "all"], "--special-tokens: found 'all'"),
        (["run", "--model", GPT2, "--layer", "1", "--sentence", "hi", "--max-cells", "10"], "more than the limit of 10"),
        (["model", "info", "no/such/folder"], "no/such/folder: the checkpoint folder does not exist"),
        (["model", "tokens", "no/such/folder", "hi"], "no/such/folder: the checkpoint folder does not exist"),
    ],
)
def test_model_errors_are_one_line(cli, args, message):
    """Each mistake with a real model is one line on stderr, status 1, nothing on stdout."""
    result = cli(*args)
    assert result.exit_code == 1, result.stdout
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncli: error: ") and message in lines[0], result.stderr


def test_run_with_neither_scenario_nor_model_is_a_usage_error(cli):
    """Nothing to run: Click's usage error, status 2, naming both ways."""
    result = cli("run")
    assert result.exit_code == 2 and "--model DIR" in result.stderr


def test_no_output_may_replace_a_file_of_the_checkpoint(cli, tmp_path):
    """--output onto the checkpoint's own config.json is refused and the file stays."""
    import shutil

    folder = tmp_path / "gpt2"
    shutil.copytree(HERE / "gpt2", folder)
    before = (folder / "config.json").read_bytes()
    result = cli("run", "--model", str(folder), "--layer", "1", "--sentence", "hi", "--output", str(folder / "config.json"))
    assert result.exit_code == 1 and "is an input of this command" in result.stderr
    assert (folder / "config.json").read_bytes() == before


def test_json_carries_where_the_numbers_come_from(cli):
    """scenario.notes in JSON holds the header's provenance lines for a checkpoint, and is empty for a scenario file."""
    doc = json.loads(cli("run", *model_args("gpt2", 2, SENTENCE), "--format", "json").stdout)
    assert any("ln_1 of the residual entering layer 2" in note for note in doc["scenario"]["notes"])
    assert json.loads(cli("run", "cat", "--format", "json").stdout)["scenario"]["notes"] == []


def padded_copy(folder: Path, name: str, length: int) -> Path:
    """A copy of fixture `name` whose tokenizer.json asks for fixed padding and truncation, as sentence-transformers folders do."""
    import shutil

    copy = folder / f"{name}-padded"
    shutil.copytree(HERE / name, copy)
    tokenizer = json.loads((copy / "tokenizer.json").read_text(encoding="utf-8"))
    pad_id = tokenizer["model"]["vocab"].get("[PAD]", 0) if isinstance(tokenizer["model"].get("vocab"), dict) else 0
    tokenizer["padding"] = {
        "strategy": {"Fixed": length}, "direction": "Right", "pad_to_multiple_of": None,
        "pad_id": pad_id, "pad_type_id": 0, "pad_token": "[PAD]",
    }  # fmt: skip
    tokenizer["truncation"] = {"direction": "Right", "max_length": length, "strategy": "LongestFirst", "stride": 0}
    (copy / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    return copy


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_saved_padding_and_truncation_are_not_applied(cli, tmp_path, name):
    """A tokenizer.json that asks for padding to 20 gives the model's own weights (the golden's), and the header says so."""
    expected = golden(name)
    copy = padded_copy(tmp_path, name, 20)
    result = cli("run", "--model", str(copy), "--layer", "1", "--sentence", str(expected["text"]), "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert len(doc["scenario"]["tokens"]) == len(expected["ids"]) < 20
    weights = np.array([head["weights"] for head in doc["heads"]])
    np.testing.assert_allclose(weights, expected["attentions"][0], rtol=0, atol=TOLERANCE[name])
    assert any("asks for padding to 20 tokens and truncation at 20 tokens; not applied" in note for note in doc["scenario"]["notes"])
    table = cli("run", "--model", str(copy), "--layer", "1", "--sentence", str(expected["text"]), "--stages", "weights", "--long-notes")
    assert "not applied" in table.stdout


def test_a_saved_truncation_does_not_cut_a_long_sentence(cli, tmp_path):
    """Truncation at 8 tokens in tokenizer.json: a 45-token sentence is refused for the model's 32 positions, not cut to 8."""
    copy = padded_copy(tmp_path, "gpt2", 8)
    result = cli("run", "--model", str(copy), "--layer", "1", "--sentence", "The cat sat. " * 9)
    assert result.exit_code == 1 and result.stdout == ""
    assert "the sentence is 45 tokens long, more than the model's 32 positions" in result.stderr


def test_model_tokens_prints_the_ids_the_computation_uses(cli, tmp_path):
    """`model tokens` on a padded tokenizer.json lists only the sentence's tokens and says the padding was not applied."""
    copy = padded_copy(tmp_path, "bert", 16)
    doc = json.loads(cli("model", "tokens", str(copy), "The cat", "--format", "json").stdout)
    assert [t["label"] for t in doc["tokens"]] == ["[CLS]", "The", "cat", "[SEP]"]
    assert doc["not_applied"] == "padding to 16 tokens and truncation at 16 tokens"
    table = cli("model", "tokens", str(copy), "The cat").stdout
    assert "4 tokens" in table and "not applied" in table
    assert json.loads(cli("model", "tokens", str(HERE / "bert"), "The cat", "--format", "json").stdout)["not_applied"] is None


def test_a_checkpoint_path_is_shown_as_written_never_expanded(cli, tmp_path, monkeypatch):
    """`model: ~/models/gpt2` is named so in every header that shows the path (--show-path), and JSON has no home folder either."""
    import shutil

    from attncli.document import escape

    home = tmp_path / "home"
    shutil.copytree(HERE / "gpt2", home / "models" / "gpt2")
    monkeypatch.setenv("HOME", str(home))
    scenario = tmp_path / "post.yaml"
    scenario.write_text("model: ~/models/gpt2\nlayer: 1\nsentence: The cat sat\n", encoding="utf-8")
    for fmt in ("markdown", "html", "json", "latex", "table"):
        result = cli("run", str(scenario), "--format", fmt, "--show-path")
        assert result.exit_code == 0, result.stderr
        written = escape.latex_text("~/models/gpt2") if fmt == "latex" else "~/models/gpt2"  # LaTeX: a paragraph of text
        assert (written in result.stdout or fmt == "json") and str(home) not in result.stdout, fmt
        assert "gpt2 layer 1" in result.stdout and "post" not in result.stdout.replace("posit", ""), fmt  # the model, not the stem


def test_decode_refuses_an_encoder(cli):
    """BERT reads a whole text at once: decode says so in one line instead of building a KV cache it never has."""
    result = cli("decode", *model_args("bert", 1, "The cat sat"))
    assert result.exit_code == 1 and result.stdout == ""
    assert "decode needs a model that generates, but bert is an encoder" in result.stderr
    assert cli("decode", *model_args("gpt2", 1, "The cat sat")).exit_code == 0


def test_the_api_names_the_path_and_the_long_notes_only_when_asked():
    """`render(…, show_path=True, long_notes=True)` in the Python API says what the command line's --show-path and --long-notes say."""
    import attncli.api as attn
    from attncli.document import escape

    ran = attn.run(attn.load_model(HERE / "gguf" / "llama.gguf", layer=1, sentence="The cat sat"))
    short = ran.render("markdown", stages="weights")
    assert "# attncli tiny llama layer 1 — " in short and "llama.gguf" not in short and "residual entering" not in short
    whole = ran.render("markdown", stages="weights", show_path=True, long_notes=True)
    assert escape.markdown(str(HERE / "gguf" / "llama.gguf")) in whole and "residual entering layer 1" in whole


def test_a_models_name_is_one_short_line_whatever_its_metadata_says(monkeypatch, tmp_path):
    """general.name is untrusted: line breaks and runs of spaces become one space, a long one is cut with …, a name that is not
    text (or blank) gives way to the file's name without .gguf; "." names its folder, ollama:NAME the NAME."""
    from attncli.sources.checkpoints.layer import MAX_NAME, model_name

    gguf = Path("models/smollm2.gguf")
    assert model_name(gguf, "SmolLM2\n135M\t Instruct") == "SmolLM2 135M Instruct"
    long = model_name(gguf, "x" * 1000)
    assert len(long) == MAX_NAME and long.endswith("…")
    assert model_name(gguf, 7) == model_name(gguf, "  \n") == model_name(gguf) == "smollm2"
    assert model_name(Path("checkpoints/gpt2")) == "gpt2" and model_name(Path("ollama:llama3.2:1b")) == "llama3.2:1b"
    monkeypatch.chdir(tmp_path)
    assert model_name(Path(".")) == tmp_path.name
