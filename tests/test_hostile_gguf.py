"""A GGUF file is untrusted input, and the Python API keeps the command line's promises (issue 32).

A corpus of GGUF files written with llama.cpp's own writer and then mutated (tests/gguf_mutants.py): the
metadata's sizes, a bomb of strings in a key nobody reads, the tokenizer's vocabulary and merges, tensor
data, split files; outputs onto inputs by any name; and the Python API called with hostile values. Each
case ends in a correct result or one clean line (one AttnError), never another exception. The `slow`
tier runs the heavy cases in a child process under resource limits (CPU seconds and address space) and
measures its CPU time and peak memory.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

pytest.importorskip("gguf", reason="the corpus is written with llama.cpp's gguf package (the test extra installs it)")
pytest.importorskip("tokenizers", reason="the GGUF tokenizer is rebuilt with the tokenizers library (the models extra)")

import attncli.api as attn  # noqa: E402
from attncli.cli.app import app  # noqa: E402
from attncli.errors import AttnError  # noqa: E402
from tests import gguf_mutants as mutants  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINTS = ROOT / "tests" / "checkpoints"


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def one_clean_line(code: int, err: str) -> str:
    """The error a command printed: status 1 and exactly one line on stderr, no traceback, no internal error."""
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    return lines[0]


# -- the metadata's sizes: checked with config.json's limits and words before anything is built from them ------------

SIZES = [
    ("llama.block_count", 2**64 - 1, "UINT64", "a whole number from 1 to 10,000"),
    ("llama.block_count", 10**9, "UINT32", "a whole number from 1 to 10,000"),
    ("llama.block_count", 0, "UINT32", "a whole number from 1 to 10,000"),
    ("llama.block_count", "3", "STRING", "found '3'"),
    ("llama.embedding_length", 2**40, "UINT64", "a whole number from 1 to 1,048,576"),
    ("llama.attention.key_length", 2**31, "UINT32", "a whole number from 1 to 65,536"),
    ("llama.attention.head_count", 2**32 - 1, "UINT32", "a whole number from 1 to 65,536"),
    ("llama.attention.head_count_kv", -2, "INT32", "found -2"),
    ("llama.feed_forward_length", 2**62, "UINT64", "a whole number from 1 to 16,777,216"),
    ("llama.context_length", 2**40, "UINT64", "a whole number from 1 to 2,147,483,648"),
    ("llama.rope.freq_base", float("inf"), "FLOAT32", "a positive number from 1e-30 to 1e+30"),
    ("llama.rope.freq_base", float("nan"), "FLOAT32", "found nan"),
    ("llama.rope.freq_base", 1e-320, "FLOAT64", "a positive number from 1e-30 to 1e+30"),
    ("llama.attention.layer_norm_rms_epsilon", -1.0, "FLOAT32", "found -1.0"),
    ("llama.attention.layer_norm_rms_epsilon", True, "BOOL", "found True"),
]


@pytest.fixture(scope="module")
def sized(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, str, str]]:
    folder = tmp_path_factory.mktemp("sizes")
    return [
        (mutants.rewrite(folder / f"size-{n}.gguf", set_keys={key: (value, kind)}), key, words)
        for n, (key, value, kind, words) in enumerate(SIZES)
    ]


def test_every_size_in_the_metadata_is_checked_before_use(sized: list[tuple[Path, str, str]]) -> None:
    """A block count of 2⁶⁴−1 was an internal error and 10⁹ layers, an embedding length of 2⁴⁰ or a key length of 2³¹ ran out of
    memory: now each is one line naming the key and the range, in config.json's words, from run and from model info's reason."""
    for path, key, words in sized:
        line = one_clean_line(*cli("run", "--model", str(path), "--layer", "1", "--sentence", "The cat")[::2])
        assert key in line and words in line, line
        code, out, err = cli("model", "info", str(path), "--format", "json")
        assert code == 0, err
        assert '"supported": false' in out and key in out, out


def test_sizes_within_the_limits_but_not_the_tensors_are_not_supported(tmp_path: Path) -> None:
    """Sizes the limits allow but the tensors contradict (10,000 layers over 3 blocks, a hidden size of 2²⁰ over rows of 24):
    model info says why, as for a folder, instead of "supported: yes"; run refuses with one line."""
    for keys, words, layer in (({"llama.block_count": (10_000, "UINT32")}, "no tensor of layer 10,000", "10000"),
                               ({"llama.embedding_length": (1 << 20, "UINT32")}, "the GGUF metadata implies", "2")):  # fmt: skip
        path = mutants.rewrite(tmp_path / "sized.gguf", set_keys=keys)
        info = attn.model_info(path).info
        assert info["supported"] is False and words in info["reason"], info["reason"]
        one_clean_line(*cli("run", "--model", str(path), "--layer", layer, "--sentence", "The cat")[::2])


def test_a_rope_factor_of_1e_320_is_refused_without_a_warning(tmp_path: Path) -> None:
    """A RoPE scaling factor of 1e-320 printed NumPy's overflow RuntimeWarning (config.json and GGUF alike): now one clean refusal."""
    import json

    folder = tmp_path / "llama"
    shutil.copytree(CHECKPOINTS / "llama", folder)
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "linear", "factor": 1e-320, "rope_theta": 10000.0}
    (folder / "config.json").write_text(json.dumps(config))
    path = mutants.rewrite(tmp_path / "factor.gguf", set_keys={"llama.rope.scaling.type": ("linear", "STRING"),
                                                               "llama.rope.scaling.factor": (1e-320, "FLOAT64")})  # fmt: skip
    for model in (folder, path):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            info = attn.model_info(model).info
            assert info["supported"] is False and "a positive number from 1e-30" in info["reason"]
            with pytest.raises(AttnError, match="factor: found 1e-320"):
                attn.load_model(model, layer=1, sentence="The cat")


# -- a bomb of strings in a key nobody reads: stepped over, never built -----------------------------------------------


def test_a_key_nobody_reads_is_stepped_over_not_built(tmp_path: Path) -> None:
    """100,000 short strings in an unread key: model info is right, and the key's value is never built (gguf-py built all of them)."""
    from attncli.sources.checkpoints.gguf import GgufFile

    path = mutants.bomb(tmp_path / "bomb.gguf", 100_000)
    info = attn.model_info(path).info
    assert info["supported"] is True
    file = GgufFile(path)
    assert file.header.fields["general.junk"].count == 100_000
    attn.model_tokens(path, "The cat")
    assert "general.junk" not in file._values
    assert file.value("general.junk")[:3] == ["0", "1", "2"]  # built only when asked for


# -- the tokenizer: what the tokenizers library would refuse is one line naming the key ------------------------------


def _tokens_of(source: str = "llama.gguf") -> tuple[list[str], list[str]]:
    from gguf import GGUFReader

    reader = GGUFReader(mutants.FIXTURES / source)
    return reader.fields["tokenizer.ggml.tokens"].contents(), reader.fields["tokenizer.ggml.merges"].contents()


def test_tokenizer_metadata_the_library_refuses_is_one_line(tmp_path: Path) -> None:
    """A merge of a token not in the vocabulary, a merge whose product is not in it, and a duplicated token (which drops the
    token a merge makes) were internal errors (exit 70) or a Rust panic: now one line naming the metadata key."""
    tokens, merges = _tokens_of()
    duplicated = list(tokens)
    duplicated[-1] = duplicated[5]
    cases = {
        "merge-unknown": ({"tokenizer.ggml.merges": ([*merges, "zz qq"], "ARRAY", "STRING")}, "needs 'zz'"),
        "merge-product": ({"tokenizer.ggml.merges": ([*merges, "a b"], "ARRAY", "STRING")}, "needs 'ab'"),
        "duplicate": ({"tokenizer.ggml.tokens": (duplicated, "ARRAY", "STRING")}, "lists a token twice"),
        "no-pair": ({"tokenizer.ggml.merges": ([*merges, "abc"], "ARRAY", "STRING")}, "not pairs of tokens"),
    }
    for name, (keys, words) in cases.items():
        path = mutants.rewrite(tmp_path / f"{name}.gguf", set_keys=keys)
        line = one_clean_line(*cli("model", "tokens", str(path), "ab cat")[::2])
        assert "tokenizer.ggml.merges" in line and words in line, (name, line)
        with pytest.raises(AttnError, match="tokenizer.ggml.merges"):
            attn.load_model(path, layer=1, sentence="ab cat")


def test_sentencepiece_scores_that_are_not_numbers_are_one_line(tmp_path: Path) -> None:
    """Scores stored as strings were a TypeError from the sort of the merges."""
    bad = tmp_path / "bad.gguf"
    _sentencepiece_with_string_scores(bad)
    line = one_clean_line(*cli("model", "tokens", str(bad), "a")[::2])
    assert "tokenizer.ggml.scores" in line


def _sentencepiece_with_string_scores(out: Path) -> None:
    from gguf import GGUFValueType, GGUFWriter

    writer = GGUFWriter(out, "llama")
    for add, value in ((writer.add_block_count, 1), (writer.add_context_length, 64), (writer.add_embedding_length, 8),
                       (writer.add_feed_forward_length, 16), (writer.add_head_count, 2)):  # fmt: skip
        add(value)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(["<unk>", "▁", "a", "▁a"])
    writer.add_key_value("tokenizer.ggml.scores", ["x", "y", "z", "w"], GGUFValueType.ARRAY, sub_type=GGUFValueType.STRING)
    import numpy as np

    writer.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_megabyte_token_rebuilds_the_merges_the_quadratic_way_would(tmp_path: Path) -> None:
    """A 1 MB SentencePiece token kept `model tokens` busy for minutes (every cut sliced); now a few cuts, and the same merges
    as cutting at every position, checked on the fixture's vocabulary."""
    from attncli.sources.checkpoints.gguf import GgufFile
    from attncli.sources.checkpoints.gguf_tokens import _merges_from_scores

    words = ["▁", "a", "b", "▁a", "ab", "▁ab", "ba", "a" * 1_000_000]
    path = mutants.sentencepiece(tmp_path / "long.gguf", words)
    tokens = attn.model_tokens(path, "ab ba").tokens
    assert [t["piece"] for t in tokens] == ["<s>", "▁ab", "▁", "ba"]
    file = GgufFile(path)
    vocab_tokens, scores = file.value("tokenizer.ggml.tokens"), file.value("tokenizer.ggml.scores")
    short = [t for t in vocab_tokens if len(t) < 100]
    every_cut = sorted(
        (-scores[vocab_tokens.index(t)], vocab_tokens.index(t[:c]), vocab_tokens.index(t[c:]), t[:c], t[c:])
        for t in short for c in range(1, len(t)) if t[:c] in vocab_tokens and t[c:] in vocab_tokens
    )  # fmt: skip
    found = _merges_from_scores(file, vocab_tokens)
    assert found[: len(every_cut)] == [(left, right) for *_, left, right in every_cut]


def test_a_vocabulary_made_to_cost_quadratic_work_is_refused(tmp_path: Path) -> None:
    """Tokens of every length up to 1,500, so that every cut has both parts' lengths: more than MERGE_WORK characters compared
    per character of the vocabulary, refused as one line instead of minutes."""
    words = [chr(0x4E00 + n) * n for n in range(1, 1_500)]  # one character per length, each token unique
    path = mutants.sentencepiece(tmp_path / "quadratic.gguf", words)
    line = one_clean_line(*cli("model", "tokens", str(path), "a")[::2])
    assert "tokenizer.ggml.tokens" in line and "the vocabulary's characters" in line


# -- tensor data and split files ----------------------------------------------------------------------------------------


def test_tensor_data_that_is_not_finite_is_one_line(tmp_path: Path) -> None:
    """NaN in W_Q and ∞ in the embeddings: one line, from run and from the API."""
    import numpy as np

    def poisoned(name: str, data: np.ndarray) -> np.ndarray:
        if name in ("blk.0.attn_q.weight", "token_embd.weight"):
            data = data.copy()
            data.flat[0] = np.nan if "attn_q" in name else np.inf
        return data

    path = mutants.rewrite(tmp_path / "nan.gguf", tensors=poisoned)
    one_clean_line(*cli("run", "--model", str(path), "--layer", "1", "--sentence", "The cat")[::2])
    with pytest.raises(AttnError):
        attn.run(attn.load_model(path, layer=1, sentence="The cat"))


def test_rope_factors_of_the_wrong_size_are_refused_from_the_header(tmp_path: Path) -> None:
    """rope_freqs.weight was decoded whole before its size was compared: a large one cost its float64 copy first."""
    import numpy as np

    path = mutants.rewrite(tmp_path / "freqs.gguf", tensors=lambda name, data: np.ones(100_000, np.float32) if name == "rope_freqs.weight" else data)
    line = one_clean_line(*cli("run", "--model", str(path), "--layer", "1", "--sentence", "The cat")[::2])
    assert "rope_freqs.weight has 100,000 numbers" in line


def test_a_tensor_left_out_is_one_line(tmp_path: Path) -> None:
    """A file without layer 1's W_K: one line naming the tensor."""
    path = mutants.rewrite(tmp_path / "missing.gguf", tensors=lambda name, data: None if name == "blk.0.attn_k.weight" else data)
    line = one_clean_line(*cli("run", "--model", str(path), "--layer", "1", "--sentence", "The cat")[::2])
    assert "blk.0.attn_k.weight" in line


def test_each_part_of_a_split_file_says_which_part_it_is(tmp_path: Path) -> None:
    """model info said "supported: yes" for part 1 of 3 and the command it suggested failed: now every command says
    "part N of 3" and how to join the parts."""
    parts = mutants.split(tmp_path, 3)
    assert len(parts) == 3
    for n, part in enumerate(parts, 1):
        for args in (("model", "info", str(part)), ("run", "--model", str(part), "--layer", "1", "--sentence", "The cat"),
                     ("model", "tokens", str(part), "cat")):  # fmt: skip
            line = one_clean_line(*cli(*args)[::2])
            assert f"part {n} of 3" in line and "llama-gguf-split --merge" in line, line


# -- no command writes onto its inputs, by any name ----------------------------------------------------------------------


def test_no_output_replaces_a_gguf_input_by_any_name(tmp_path: Path) -> None:
    """`model dequant -o` overwrote the GGUF file it read (directly or through a hard link): exit 0, the model gone."""
    model = tmp_path / "model.gguf"
    shutil.copy(mutants.FIXTURES / "llama.gguf", model)
    os.link(model, tmp_path / "hard.gguf")
    (tmp_path / "soft.gguf").symlink_to(model)
    original = model.read_bytes()
    for name in ("model.gguf", "hard.gguf", "soft.gguf", f"../{tmp_path.name}/model.gguf"):
        out = str(tmp_path / name)
        for args in (("model", "dequant", str(model), "blk.0.attn_q.weight", "-o", out),
                     ("run", "--model", str(model), "--layer", "1", "--sentence", "The cat", "-o", out),
                     ("heads", "--model", str(model), "--sentence", "The cat", "-o", out)):  # fmt: skip
            line = one_clean_line(*cli(*args)[::2])
            assert "it is an input of this command" in line, (args, line)
    assert model.read_bytes() == original


def test_no_output_replaces_a_file_of_a_checkpoint_folder(tmp_path: Path) -> None:
    """config.json, tokenizer.json (read by the tokenizer's child process) and model.safetensors are inputs as well."""
    folder = tmp_path / "gpt2"
    shutil.copytree(CHECKPOINTS / "gpt2", folder)
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        target = folder / name
        before = target.read_bytes()
        line = one_clean_line(*cli("run", "--model", str(folder), "--layer", "1", "--sentence", "The cat", "-o", str(target))[::2])
        assert "it is an input of this command" in line
        assert target.read_bytes() == before


# -- the Python API: hostile values, one AttnError named by the keyword --------------------------------------------------

NAMED = [
    (lambda: attn.run(None), "scenario"),
    (lambda: attn.run("cat", round_steps="3"), "round_steps"),
    (lambda: attn.run("cat", round_steps=99), "round_steps"),
    (lambda: attn.run("cat").head(1.5), "number"),
    (lambda: attn.load_model(mutants.FIXTURES / "llama.gguf", layer="1", sentence="The cat"), "layer"),
    (lambda: attn.load_model(mutants.FIXTURES / "llama.gguf", layer=1, sentence="a\ud800b"), "sentence"),
    (lambda: attn.load_model(mutants.FIXTURES / "llama.gguf", layer=1, sentence=b"cat"), "sentence"),
    (lambda: attn.model_info(None), "path"),
    (lambda: attn.model_tokens(mutants.FIXTURES / "llama.gguf", "\udfff"), "text"),
    (lambda: attn.run("cat").render(stages=5), "stages"),
    (lambda: attn.run("cat").render("markdown", nonsense=1), "nonsense"),
    (lambda: attn.run("cat").render(full="yes"), "full"),
    (lambda: attn.run("cat").document({"format": "json"}), "options"),
    (lambda: attn.render_options(["json"]), "format"),
    (lambda: attn.text_of(7), "document"),
    (lambda: attn.run_page(None, attn.render_options()), "result"),
    (lambda: attn.explain_page(attn.run("cat").result, attn.render_options()), "expl"),
    (lambda: attn.tiles("cat", "2"), "block_size"),
    (lambda: attn.decode("cat", switch="no"), "switch"),
    (lambda: attn.decode("cat", before=3), "before"),
    (lambda: attn.heads("cat", seed=1.5), "seed"),
    (lambda: attn.heads(model=5, sentence="x"), "model"),
    (lambda: attn.load("cat\0"), "source"),
    (lambda: attn.load("cat", limits={}), "limits"),
    (lambda: attn.longrope_prefix(CHECKPOINTS / "phi3", layer=None, sentence="x"), "layer"),
    (lambda: attn.compare_heads(CHECKPOINTS / "gpt2", sentence="a", top=1.5), "top"),
]


@pytest.mark.parametrize(("call", "keyword"), NAMED, ids=[k for _, k in NAMED])
def test_a_wrong_type_is_one_attn_error_named_by_its_keyword(call: Callable[[], Any], keyword: str) -> None:
    """Each call of the issue (run(None), round_steps='3', .head(1.5), load_model(layer='1'), model_info(None), render(stages=5),
    a lone surrogate …) escaped as TypeError, AttributeError, OverflowError or RuntimeError: now one AttnError naming the keyword."""
    with pytest.raises(AttnError) as caught:
        call()
    assert str(caught.value).startswith(f"{keyword}:") or f" {keyword}:" in str(caught.value), str(caught.value)


def _ran() -> Any:
    return attn.run("cat")


def _keyword(key: str) -> Callable[[Any], Any]:
    return lambda value: attn.render_options("markdown", **{key: value})


GGUF_MODEL = mutants.FIXTURES / "llama.gguf"
# every public entry, one parameter at a time: (name, call with the hostile value in that parameter)
ENTRIES: list[tuple[str, Callable[[Any], Any]]] = [
    ("load.source", lambda v: attn.load(v)),
    ("load.limits", lambda v: attn.load("cat", limits=v)),
    ("run.scenario", lambda v: attn.run(v)),
    ("run.round_steps", lambda v: attn.run("cat", round_steps=v)),
    ("tiles.block_size", lambda v: attn.tiles("cat", v)),
    ("tiles.round_steps", lambda v: attn.tiles("cat", 3, round_steps=v)),
    ("explain.word", lambda v: attn.explain("cat", v)),
    ("explain.position", lambda v: attn.explain("cat", position=v)),
    ("explain.head", lambda v: attn.explain("cat", "cat", head=v)),
    ("explain.round_steps", lambda v: attn.explain("cat", "cat", round_steps=v)),
    ("explain.block_size", lambda v: attn.explain("cat", "cat", block_size=v)),
    ("decode.head", lambda v: attn.decode("cat", head=v)),
    ("decode.round_steps", lambda v: attn.decode("cat", round_steps=v)),
    ("decode.before", lambda v: attn.decode("cat", before=v)),
    ("decode.switch", lambda v: attn.decode("cat", switch=v)),
    ("variance.dims", lambda v: attn.variance(v, samples=4, keys=2)),
    ("variance.samples", lambda v: attn.variance([2], samples=v, keys=2)),
    ("variance.seed", lambda v: attn.variance([2], samples=4, keys=2, seed=v)),
    ("variance.advance", lambda v: attn.variance([2], samples=4, keys=2, advance=v)),
    ("render_tiling.block_size", lambda v: attn.render_tiling(_ran().result, attn.render_options(), v)),
    ("heads.scenario", lambda v: attn.heads(v)),
    ("heads.sort", lambda v: attn.heads("cat", sort=v)),
    ("heads.top", lambda v: attn.heads("cat", top=v)),
    ("heads.seed", lambda v: attn.heads("cat", seed=v)),
    ("heads.word", lambda v: attn.heads("cat", word=v)),
    ("heads.position", lambda v: attn.heads("cat", position=v)),
    ("heads.layer", lambda v: attn.heads("cat", word="cat", layer=v)),
    ("heads.sentence", lambda v: attn.heads(model=GGUF_MODEL, sentence=v)),
    ("heads.model", lambda v: attn.heads(model=v, sentence="The cat")),
    ("load_model.path", lambda v: attn.load_model(v, layer=1, sentence="The cat")),
    ("load_model.layer", lambda v: attn.load_model(GGUF_MODEL, layer=v, sentence="The cat")),
    ("load_model.sentence", lambda v: attn.load_model(GGUF_MODEL, layer=1, sentence=v)),
    ("load_model.special_tokens", lambda v: attn.load_model(GGUF_MODEL, layer=1, sentence="The cat", special_tokens=v)),
    ("load_model.head", lambda v: attn.load_model(GGUF_MODEL, layer=1, sentence="The cat", head=v)),
    ("model_info.path", lambda v: attn.model_info(v)),
    ("model_tokens.text", lambda v: attn.model_tokens(GGUF_MODEL, v)),
    ("model_tokens.special_tokens", lambda v: attn.model_tokens(GGUF_MODEL, "cat", special_tokens=v)),
    ("longrope_prefix.folder", lambda v: attn.longrope_prefix(v, layer=1, sentence="x")),
    ("render_options.format", lambda v: attn.render_options(v)),
    *((f"render_options.{k}", _keyword(k)) for k in ("stages", "heads", "precision", "full", "heatmap", "standalone", "heading_level", "to_file")),
    ("text_of.document", lambda v: attn.text_of(v)),
    ("run_page.result", lambda v: attn.run_page(v, attn.render_options())),
    ("run_page.options", lambda v: attn.run_page(_ran().result, v)),
    ("Ran.head", lambda v: _ran().head(v)),
    ("Ran.render.format", lambda v: _ran().render(v)),
    ("Ran.render.precision", lambda v: _ran().render("markdown", precision=v)),
    ("Ran.document", lambda v: _ran().document(v)),
]  # fmt: skip


def _hostile() -> Any:
    from hypothesis import strategies as st

    odd = st.sampled_from(["", "\ud800", "a\0b", "3", "cat", "0", "-1", "nan", "1.5", b"cat", 1.5, -1, 0, 10**30, 2**64, float("nan"),
                           float("inf"), True, [1.0], ["x"], [], {}, (), object(), {"a": 1}, Path(), 3j])  # fmt: skip
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8), st.binary(max_size=8))
    return st.one_of(odd, scalars, st.lists(scalars, max_size=3), st.dictionaries(st.text(max_size=3), scalars, max_size=2))


@pytest.mark.parametrize(("name", "call"), ENTRIES, ids=[n for n, _ in ENTRIES])
def test_every_public_entry_takes_any_python_value(name: str, call: Callable[[Any], Any], tmp_path: Path) -> None:
    """Property: whatever Python value one parameter of a public function or method receives, the call returns or raises one
    AttnError, never another exception."""
    from hypothesis import HealthCheck, given, settings

    cwd = os.getcwd()
    os.chdir(tmp_path)  # a random text is a path nothing holds here

    @settings(max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(value=_hostile())
    def check(value: Any) -> None:
        with contextlib.suppress(AttnError):  # a result, or one AttnError: any other exception fails the test
            call(value)

    try:
        check()
    finally:
        os.chdir(cwd)


# -- the slow tier: each heavy case in a child process under resource limits --------------------------------------------

CPU_SECONDS = 30
ADDRESS_SPACE = 3 << 30  # bytes of address space: a bomb that allocated would end the child, not the machine


# Linux keeps a process's peak RSS across fork and exec: a child forked from this test process (hundreds of MB once other
# tests have run) reports this process's peak as its own. A small launcher forks the command itself and writes its
# status, CPU seconds and peak RSS to the pipe it is given (argument 1).
_LAUNCHER = (
    "import os, subprocess, sys\n"
    "with subprocess.Popen(sys.argv[2:]) as child:\n"
    "    _, status, usage = os.wait4(child.pid, 0)\n"
    "os.write(int(sys.argv[1]), f'{os.waitstatus_to_exitcode(status)} {usage.ru_utime + usage.ru_stime} {usage.ru_maxrss}'.encode())\n"
)


def bounded(*args: str, cpu: int = CPU_SECONDS) -> tuple[int, str, str, float, int]:
    """`attncli ARGS` in a child limited to `cpu` seconds and ADDRESS_SPACE: (status, stdout, stderr, CPU seconds, peak RSS in bytes)."""

    def limit() -> None:  # the launcher's limits, which the command inherits
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "120"}
    report, write_end = os.pipe()
    try:
        with open(os.devnull, "rb") as stdin, subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(write_end), sys.executable, "-m", "attncli", *args], stdin=stdin,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit, pass_fds=(write_end,), env=env,
        ) as launcher:  # fmt: skip
            os.close(write_end)
            write_end = -1
            out, err = launcher.communicate()
        code, seconds, peak = os.read(report, 200).split()
    finally:
        os.close(report)
        if write_end >= 0:
            os.close(write_end)
    return int(code), out.decode(), err.decode(), float(seconds), int(peak) * 1024


@pytest.fixture(scope="module")
def heavy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("heavy")
    mutants.bomb(folder / "bomb.gguf", 1_900_000)
    mutants.sentencepiece(folder / "long.gguf", ["▁", "a", "b", "▁a", "a" * 1_000_000, "b" * 999_999])
    mutants.sentencepiece(folder / "quadratic.gguf", [chr(0x4E00 + n) * n for n in range(1, 3_000)])
    return folder


@pytest.mark.slow
def test_bounded_a_bomb_of_strings_costs_what_attncli_reads(heavy: Path) -> None:
    """1.9 million short strings in one unread key of a 22 MB file cost 58 s of CPU and 2.6 GB: now model info and a layer take
    a few seconds and under 300 MB."""
    assert (heavy / "bomb.gguf").stat().st_size > 20_000_000
    for args in (("model", "info", str(heavy / "bomb.gguf")), ("run", "--model", str(heavy / "bomb.gguf"), "--layer", "1", "--sentence", "The cat")):
        code, out, err, cpu, rss = bounded(*args)
        assert code == 0, err
        assert cpu < 5 and rss < 300 << 20, (args, cpu, rss)


@pytest.mark.slow
def test_bounded_a_megabyte_token_and_a_quadratic_vocabulary(heavy: Path) -> None:
    """A 1 MB token: model tokens in about a second; a vocabulary made for quadratic work: one line, as quickly."""
    code, out, err, cpu, rss = bounded("model", "tokens", str(heavy / "long.gguf"), "ab")
    assert code == 0 and "▁a" in out, err
    assert cpu < 5 and rss < 300 << 20, (cpu, rss)
    code, out, err, cpu, rss = bounded("model", "tokens", str(heavy / "quadratic.gguf"), "ab")
    assert "the vocabulary's characters" in one_clean_line(code, err)
    assert cpu < 5 and rss < 300 << 20, (cpu, rss)


@pytest.mark.slow
def test_bounded_every_size_and_broken_header(sized: list[tuple[Path, str, str]], tmp_path: Path) -> None:
    """Every size case and every broken header of test_gguf.broken_files, in a limited child: one line, under a second of CPU
    beyond start-up and under 300 MB (10⁹ layers or an embedding length of 2⁴⁰ ran out of memory)."""
    from tests.test_gguf import broken_files

    paths = [path for path, _, _ in sized] + [path for path, _ in broken_files(tmp_path).values()]
    for path in paths:
        code, out, err, cpu, rss = bounded("run", "--model", str(path), "--layer", "1", "--sentence", "The cat")
        one_clean_line(code, err)
        assert cpu < 5 and rss < 300 << 20, (path.name, cpu, rss)
