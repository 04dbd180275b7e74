""""Did you mean": every closed choice answers a misspelling with its closest choice, through errors.closest alone.

The choices: output formats, stages, the map's statistics and a comparison's measures, the query word,
the special-tokens mode, BART's attention, a built-in scenario's name, `scenarios new --mask`, a scenario
file's keys, its `scale` and `mask`, a GGUF tensor, an Ollama model and a config's model type; in the
command line (the flag named) and in the Python API (the keyword named) alike.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import attncli
import attncli.api as attn
from attncli.errors import AttnError, closest, did_you_mean, misspelt
from tests.test_checkpoints import HERE

FORMATS = ["table", "json", "markdown", "latex", "csv", "html", "svg", "typst"]
GGUF = HERE / "gguf"


def test_ties_go_to_the_earlier_choice():
    """'kat' is as close to 'cat' as to 'sat' and 'mat': the sentence's first of them wins (difflib alone says 'sat')."""
    import difflib

    tokens = ["The", "cat", "sat", "on", "the", "mat"]
    assert difflib.get_close_matches("kat", tokens, n=1) == ["sat"]  # the ordering this helper exists to replace
    assert closest("kat", tokens) == "cat"
    assert closest("kat", list(reversed(tokens))) == "mat"


def test_a_shortening_or_a_beginning_is_recognised():
    """'md' is short for markdown and 'weight' the start of weights, though difflib's ratio finds neither close enough to 'md'."""
    assert closest("md", FORMATS) == "markdown"
    assert closest("weight", ["embeddings", "q", "k", "v", "scores", "weights", "output"]) == "weights"
    assert closest("tex", FORMATS) == "latex"
    assert closest("CAT", ["cat", "act"]) == "cat"


def test_nothing_close_gives_no_hint():
    """A word like none of the choices gets no suggestion, and the message no hint."""
    assert closest("zzz", FORMATS) is None
    assert did_you_mean("zzz", FORMATS) == ""
    assert misspelt("zzz", FORMATS) == "'zzz'"
    assert misspelt("csb", FORMATS) == "'csb' (did you mean 'csv'?)"


def test_fold_compares_as_the_caller_matches():
    """With the scenario's fold (a word mark dropped), '␣cat' is close to 'kat' as 'cat' is."""
    from attncli.core.heads import fold

    assert closest("kat", ["<s>", "␣the", "␣cat"], fold=fold) == "␣cat"


CLI_CASES = [
    (["run", "cat", "--format", "md"], "'md' is not one of", "did you mean 'markdown'?"),
    (["heads", "cat", "--format", "htm"], "'htm' is not one of", "did you mean 'html'?"),
    (["run", "cat", "--stages", "weight"], "--stages: unknown stage 'weight'", "; did you mean 'weights'?"),
    (["run", "cat", "--stages", "weight,scors"], "--stages: unknown stages 'weight' (did you mean 'weights'?),", "'scors' (did you mean 'scores'?)"),
    (["explain", "--word", "kat"], "--word: 'kat' is not a token", "did you mean 'cat'?"),
    (["heads", "cat", "--word", "kat"], "--word: 'kat' is not a token", "did you mean 'cat'?"),
    (["heads", "cat", "--sort", "entropy-ratio"], "--sort: found 'entropy-ratio'", "did you mean 'entropy_ratio'?"),
    (["scenarios", "show", "catt"], "no built-in scenario 'catt'", "did you mean 'cat'?"),
    (["run", "journy"], "no such file or built-in scenario", "did you mean the built-in 'journey'?"),
    (["scenarios", "new", "a b", "--mask", "casual"], "--mask: found 'casual'", "did you mean 'causal'?"),
    (["model", "tokens", str(HERE / "gpt2"), "hi", "--special-tokens", "none!"], "--special-tokens: found 'none!'", "did you mean 'none'?"),
    (["model", "dequant", str(GGUF / "quantised.gguf"), "blk.0.attn_q.weigth"], "no tensor 'blk.0.attn_q.weigth'", "did you mean 'blk.0.attn_q.weight'?"),
]


@pytest.mark.parametrize(("args", "problem", "hint"), CLI_CASES, ids=[" ".join(case[0][:3]) for case in CLI_CASES])
def test_the_command_line_suggests_the_closest_choice(cli, args, problem, hint):
    """Each closed choice of the command line, misspelt: one error naming the flag and the closest choice."""
    result = cli(*args)
    assert result.exit_code in (1, 2) and result.stdout == ""
    assert problem in result.stderr and hint in result.stderr, result.stderr


def test_bart_s_attention_is_suggested(cli):
    """--attention crss: did you mean 'cross'?"""
    result = cli("run", "--model", str(HERE / "bart"), "--layer", "1", "--sentence", "hi", "--attention", "crss")
    assert result.exit_code == 1 and "found 'crss'; did you mean 'cross'?" in result.stderr, result.stderr


API_CASES = [
    (lambda: attn.run("cat").render("md"), "format: found 'md'; did you mean 'markdown'?"),
    (lambda: attn.run("cat").render("markdown", stages="weight"), "stages: unknown stage 'weight'; did you mean 'weights'?"),
    (lambda: attn.explain("cat", "kat"), "word: 'kat' is not a token of the scenario 'cat'; did you mean 'cat'?"),
    (lambda: attn.heads("cat", sort="max-weight"), "sort: found 'max-weight'; did you mean 'max_weight'?"),
    (lambda: attn.heads("cat", word="kat"), "word: 'kat' is not a token of the sentence; did you mean 'cat'?"),
    (lambda: attn.model_tokens(HERE / "gpt2", "hi", special_tokens="Auto"), "special_tokens: found 'Auto'; did you mean 'auto'?"),
    (lambda: attn.load_model(HERE / "bart", layer=1, sentence="hi", attention="decodr"), "found 'decodr'; did you mean 'decoder'?"),
    (lambda: attn.load("jorney"), "did you mean the built-in 'journey'?"),
]


@pytest.mark.parametrize(("call", "message"), API_CASES, ids=[case[1].split(":")[0] for case in API_CASES])
def test_the_api_suggests_the_closest_choice_naming_the_keyword(call, message):
    """The same suggestions from the Python API, the option named by its keyword (no flag)."""
    with pytest.raises(AttnError) as raised:
        call()
    assert message in str(raised.value) and "--" not in str(raised.value), str(raised.value)


def test_a_comparison_s_measures_are_suggested():
    """A comparison's --sort takes its measures, and a misspelt one is answered before any forward pass."""
    from attncli.walkthroughs.compare import sorted_rows

    with pytest.raises(AttnError, match=re.escape("found 'js-divergence'; did you mean 'js_divergence'?")):
        sorted_rows([], "js-divergence", None)


def test_a_scenario_file_s_closed_values_are_suggested(tmp_path):
    """In a YAML file: a misspelt key, `scale` and `mask` value, each with its closest choice."""
    base = "tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\n"
    for extra, hint in (("scael: none\n", "did you mean 'scale'?"), ("scale: sqrt_d\n", "did you mean 'sqrt_dk'?"),
                        ("mask: casual\n", "did you mean 'causal'?")):  # fmt: skip
        path = tmp_path / "s.yaml"
        path.write_text(base + extra)
        with pytest.raises(AttnError, match=re.escape(hint)):
            attn.load(path)


@pytest.mark.parametrize(("written", "hint"), [("GPT-NeoX", "; did you mean 'gpt_neox'?"), ("mamba", " (expected"), ("qwen2_vl", " (expected")])
def test_a_model_type_is_suggested_only_when_spelt_another_way(tmp_path, written, hint):
    """A config.json's model_type written with other case or separators gets the supported name; another architecture
    whose name is near one ("mamba", "qwen2_vl") gets no suggestion, since it is not a typo."""
    folder = tmp_path / "m"
    shutil.copytree(HERE / "gpt_neox", folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": written}))
    with pytest.raises(AttnError, match=re.escape(f"model_type {written!r} is not supported{hint}")):
        attn.load_model(folder, layer=1, sentence="hi")


def test_an_ollama_model_is_suggested_from_the_store(tmp_path, monkeypatch):
    """ollama:tiny when the store holds tiny:q4: did you mean 'tiny:q4'?"""
    from attncli.sources.checkpoints.gguf import ollama_blob

    manifest = tmp_path / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "q4"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("{}")
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path))
    with pytest.raises(AttnError, match=re.escape("did you mean 'tiny:q4'?")):
        ollama_blob("tiny")


def test_explain_names_the_positions_a_repeated_word_takes(cli):
    """'the' of 'the cat sat on the mat' also at 5: the hint says --position 5, not --position N."""
    result = cli("explain", "alibi", "--word", "the")
    assert "'the' also occurs at position 5; pick it with --position 5." in result.stdout
    assert "--position N" not in result.stdout
    out_of_range = cli("explain", "alibi", "--word", "the", "--position", "9")  # the next try of a reader who guessed N
    assert out_of_range.exit_code == 1 and "--position: position 9 is outside the sentence (expected a position from 1 to 6)" in out_of_range.stderr


def test_did_you_mean_has_one_home():
    """No module of attncli but errors.py ranks suggestions: difflib is imported nowhere else."""
    package = Path(attncli.__file__).parent
    users = sorted(str(path.relative_to(package)) for path in package.rglob("*.py") if "difflib" in path.read_text(encoding="utf-8"))
    assert users == ["errors.py"], users


@pytest.mark.parametrize(
    ("variant", "hint"),
    [("rope: {style: interleave}\n", "did you mean 'interleaved'?"), ("qk_norm: {over: heads}\n", "did you mean 'head'?")],
)
def test_a_variant_s_closed_values_are_suggested(tmp_path, variant, hint):
    """A variant's word of a closed set (RoPE's style, QK-norm's `over`) misspelt in a scenario file is answered with the closest."""
    path = tmp_path / "v.yaml"
    path.write_text("tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\n" + variant)
    with pytest.raises(AttnError, match=re.escape(hint)):
        attn.load(path)
