"""A checkpoint folder is untrusted input: each way of corrupting one ends in a correct result or one clean line.

Every case copies a fixture of tests/checkpoints into a temporary folder, breaks one thing in
it (a config value, the shard index, the safetensors header, tokenizer.json, a file swapped for a
FIFO, a device or a sparse file) and runs the real command line in a subprocess under
RLIMIT_AS (memory) and RLIMIT_CPU (time): a case that needed more would die, not pass. Each must
end with status 0, or status 1 with exactly one line on stderr naming the file, nothing on
stdout, no traceback, no "internal error", no numpy warning.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

pytest.importorskip("tokenizers")

HERE = Path(__file__).parent / "checkpoints"
MEMORY = 1024**3  # address space of the attncli process (and so of its tokenizer child): 1 GiB
CPU_SECONDS = 60
SENTENCE = "the cat sat on the mat"


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def attncli(*args: str | os.PathLike[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command line in a subprocess with a memory and a CPU limit (a wall-clock timeout only catches a hang)."""
    return subprocess.run(
        [sys.executable, "-m", "attncli", *map(str, args)],
        capture_output=True,
        text=True,
        preexec_fn=_limited,
        timeout=10 * CPU_SECONDS,
        env=env,
        check=False,
    )


def assert_one_clean_line(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Status 1, nothing on stdout, one `attncli: error:` line on stderr holding every fragment."""
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncli: error: "), done.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def assert_clean(done: subprocess.CompletedProcess[str]) -> None:
    """A correct result (status 0) or one clean line (status 1); never a traceback, an internal error or a warning."""
    assert done.returncode in (0, 1), (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr and "Warning" not in done.stderr, done.stderr
    if done.returncode == 1:
        assert_one_clean_line(done)


def fixture(name: str, tmp_path: Path) -> Path:
    folder = tmp_path / name
    shutil.copytree(HERE / name, folder)
    return folder


def edit_json(path: Path, change: Callable[[dict], object]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def read_safetensors(path: Path) -> tuple[dict, bytes]:
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + size]), raw[8 + size :]


def write_header(path: Path, header: bytes, data: bytes) -> None:
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


# ---------------------------------------------------------------- tokenizer.json: the library run guarded


def set_normalizer(normalizer: dict) -> Callable[[dict], object]:
    return lambda tokenizer: tokenizer.__setitem__("normalizer", normalizer)


def word_level_without_unknown(tokenizer: dict) -> None:
    tokenizer.update(
        model={"type": "WordLevel", "vocab": {"the": 0, "cat": 1}, "unk_token": "[UNK]"},
        pre_tokenizer={"type": "Whitespace"},
        post_processor=None,
        decoder=None,
    )


TOKENIZER_CASES = {
    # an empty-matching Replace regex: the Rust library panics (pyo3_runtime.PanicException, a BaseException)
    "panic": (set_normalizer({"type": "Replace", "pattern": {"Regex": ""}, "content": "xy"}), "panicked"),
    # each Replace doubles every "a": 2⁴⁰ times the text, an abort on a failed allocation without the child's limit
    "expanding-normalizer": (
        set_normalizer({"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"String": "a"}, "content": "aa"}] * 40}),
        "memory limit",
    ),
    "word-level-without-unknown": (word_level_without_unknown, "cannot encode the text"),
    "unknown-model": (lambda t: t["model"].__setitem__("type", "Nonsense"), "cannot read it"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", TOKENIZER_CASES)
def test_a_tokenizer_that_fails_inside_the_library_is_one_line_naming_it(case, tmp_path):
    """Panics, aborts and errors of the tokenizers library: one line naming tokenizer.json, for run and model tokens."""
    change, fragment = TOKENIZER_CASES[case]
    folder = fixture("gpt2", tmp_path)
    edit_json(folder / "tokenizer.json", change)
    commands = [("run", "--model", folder, "--layer", "1", "--sentence", SENTENCE), ("model", "tokens", folder, SENTENCE)]
    for command in commands[:1] if case == "expanding-normalizer" else commands:  # that one takes seconds to fill its memory
        assert_one_clean_line(attncli(*command), str(folder / "tokenizer.json"), fragment)


@pytest.mark.slow
@pytest.mark.parametrize("case", [case for case in TOKENIZER_CASES if case != "expanding-normalizer"])
def test_model_info_says_supported_only_when_the_tokenizer_encodes(case, tmp_path):
    """`model info` tries the tokenizer on a test sentence: a broken one is "supported: no", naming the file."""
    change, fragment = TOKENIZER_CASES[case]
    folder = fixture("gpt2", tmp_path)
    edit_json(folder / "tokenizer.json", change)
    done = attncli("model", "info", folder)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("supported"))
    field = [lines[first], *itertools.takewhile(lambda line: line.startswith(" "), lines[first + 1 :])]  # the value wraps under itself
    supported = " ".join(" ".join(field).split())
    assert "no:" in supported and "tokenizer.json" in supported and fragment in supported, supported


def test_model_info_of_a_good_checkpoint_still_says_supported(tmp_path):
    """The test sentence is no obstacle for a working tokenizer."""
    done = attncli("model", "info", HERE / "gpt2")
    supported = next(line for line in done.stdout.splitlines() if line.startswith("supported"))
    assert done.returncode == 0 and supported.split()[1] == "yes:", done.stdout


def test_a_tokenizer_gets_the_same_tokens_through_the_child_process():
    """The guarded tokenizer gives what the library gives in-process (ids and pieces)."""
    from tokenizers import Tokenizer

    from attncli.sources.checkpoints import tokenizer_process

    for name in ("gpt2", "bert", "llama", "qwen2"):
        library = Tokenizer.from_file(str(HERE / name / "tokenizer.json"))
        library.no_padding()
        library.no_truncation()
        expected = library.encode("Hello, wörld! 中文 🙂", add_special_tokens=True)
        got = tokenizer_process.tokenize(HERE / name, "Hello, wörld! 中文 🙂", special_tokens=True, max_tokens=1000)
        assert (got.ids, got.pieces) == (tuple(expected.ids), tuple(expected.tokens))


def test_a_bug_in_the_child_is_still_an_internal_error(tmp_path, monkeypatch):
    """Only the library's own failures become file errors: anything else the child meets stays a bug (status 70)."""
    from attncli.sources.checkpoints import tokenizer_process

    failure = tokenizer_process._failure(1, b"Traceback ...\nNameError: name 'x' is not defined\n", "tokenizer.json", 1)
    assert isinstance(failure, RuntimeError) and "NameError" in str(failure)


# ---------------------------------------------------------------- files that are not what they say


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def sparse(path: Path) -> None:
    with path.open("r+b") as stream:
        stream.truncate(8 * 1024**3)  # 8 GiB of nothing: no disk used, but reading it whole would exhaust memory


def deeply_nested(path: Path) -> None:
    path.write_text("[" * 100_000 + "]" * 100_000)


def fifty_levels(path: Path) -> None:
    path.write_text('{"a": ' * 70 + "1" + "}" * 70)


def long_number(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("{", '{"long": ' + "9" * 5000 + ", ", 1), encoding="utf-8")


def not_a_number(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("{", '{"nan": NaN, ', 1), encoding="utf-8")


FILE_CASES = {
    "fifo": (fifo, "FIFO"),
    "dev-zero": (dev_zero, "character device"),
    "sparse": (sparse, "bytes to read, more than the"),
    "deeply-nested": (deeply_nested, "nests deeper than"),
    "seventy-levels": (fifty_levels, "nests deeper than"),
    "long-number": (long_number, "5,000 characters"),
    "nan": (not_a_number, "NaN is not a JSON number"),
}
FILES = {"config.json": "gpt2", "tokenizer.json": "gpt2", "model.safetensors.index.json": "llama"}


@pytest.mark.slow
@pytest.mark.parametrize("file", FILES)
@pytest.mark.parametrize("case", FILE_CASES)
def test_every_checkpoint_file_is_read_bounded(file, case, tmp_path):
    """config.json, the shard index and tokenizer.json: special files, huge files, deep nesting, long numbers, NaN."""
    change, fragment = FILE_CASES[case]
    folder = fixture(FILES[file], tmp_path)
    change(folder / file)
    assert_one_clean_line(attncli("run", "--model", folder, "--layer", "1", "--sentence", SENTENCE), str(folder / file), fragment)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["fifo", "dev-zero", "sparse"])
def test_model_info_never_reads_an_unbounded_file(case, tmp_path):
    """`model info` reads the same files through the same reader: never a hang, never all of /dev/zero."""
    change, fragment = FILE_CASES[case]
    folder = fixture("llama", tmp_path)
    change(folder / "config.json")
    assert_one_clean_line(attncli("model", "info", folder), "config.json", fragment)


# ---------------------------------------------------------------- the safetensors header


def mutate_header(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def mutate(path: Path) -> None:
        header, data = read_safetensors(path)
        change(header)
        write_header(path, json.dumps(header).encode(), data)

    return mutate


def raw_header(text: bytes) -> Callable[[Path], None]:
    def mutate(path: Path) -> None:
        _, data = read_safetensors(path)
        write_header(path, text, data)

    return mutate


HEADER_CASES = {
    "dtype-a-list": (mutate_header(lambda h: h["transformer.wte.weight"].__setitem__("dtype", ["F32"])), "unknown dtype ['F32']"),
    "impossible-empty-shape": (
        mutate_header(lambda h: h.__setitem__("extra", {"dtype": "F32", "shape": [0, 10**30, 10**30], "data_offsets": [0, 0]})),
        "beyond what any array can hold",
    ),
    "deep-header": (raw_header(b"[" * 50_000 + b"]" * 50_000), "nests deeper than"),
    "long-number-in-offsets": (raw_header(b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, ' + b"1" * 5000 + b"]}}"), "5,000 characters"),
    "shape-not-a-list": (mutate_header(lambda h: h["transformer.wte.weight"].__setitem__("shape", "6x5")), "has the shape '6x5'"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", HEADER_CASES)
def test_a_corrupt_safetensors_header_is_one_line_naming_the_file(case, tmp_path):
    """Header values of the wrong type or size: the file and the tensor, never "internal error"."""
    change, fragment = HEADER_CASES[case]
    folder = fixture("gpt2", tmp_path)
    change(folder / "model.safetensors")
    for command in (("run", "--model", folder, "--layer", "1", "--sentence", SENTENCE), ("model", "info", folder)):
        done = attncli(*command)
        assert_clean(done)
        said = " ".join((done.stdout + done.stderr).split())  # model info wraps a long value under itself at the terminal's width
        assert fragment in said, (done.stdout, done.stderr)


# ---------------------------------------------------------------- config values: range and type before any allocation


def set_config(**values: object) -> Callable[[dict], object]:
    return lambda config: config.update(values)


CONFIG_CASES = {
    "head-dim-2e8": ("llama", set_config(head_dim=200_000_000), "head_dim: found 200000000"),
    "a-trillion-layers": ("llama", set_config(num_hidden_layers=10**12), "num_hidden_layers: found 1000000000000"),
    "positions-beyond-int64": ("gpt2", set_config(n_positions=10**20), "n_positions: found"),
    "heads-as-text": ("gpt2", set_config(n_head="4"), "n_head: found '4'"),
    "zero-heads": ("bert", set_config(num_attention_heads=0), "num_attention_heads: found 0"),
    "kv-heads-above-heads": ("llama", set_config(num_key_value_heads=1000), "num_key_value_heads: found 1000"),
    "theta-beyond-float64-range": ("llama", set_config(rope_parameters={"rope_theta": 1e300}), "rope_theta: found 1e+300"),
    "theta-negative": ("qwen2", set_config(rope_parameters={"rope_theta": -5.0}), "rope_theta: found -5.0"),
    "rope-factor-zero": ("llama", set_config(rope_scaling={"rope_type": "linear", "factor": 0}), "factor: found 0"),
    "rope-scaling-a-list": ("llama", set_config(rope_scaling=[1, 2]), "rope_scaling: found [1, 2]"),
    "hidden-size-not-what-the-weights-hold": ("gpt2", set_config(n_embd=32, n_head=4), "has rows of 16 numbers but config.json says the hidden size is 32"),
    "huge-mlp-not-in-the-weights": ("llama", set_config(intermediate_size=10_000_000), "(the MLP width of layers 1–1)"),
    "mlp-not-in-the-weights": ("llama", set_config(intermediate_size=10_000), "but config.json implies [10000,"),
    "type-vocabulary-huge": ("bert", set_config(type_vocab_size=10**9), "type_vocab_size: found 1000000000"),
    "window-a-float": ("mistral", set_config(sliding_window=2.5), "sliding_window: found 2.5"),
    "eps-infinite-by-digits": ("gpt2", set_config(layer_norm_epsilon=1e308), "layer_norm_epsilon: found 1e+308"),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("case", CONFIG_CASES)
def test_a_config_value_out_of_range_is_refused_before_anything_is_allocated(case, tmp_path):
    """Each value is checked for type and range, then against the weights' shapes (from the headers, before reading)."""
    name, change, fragment = CONFIG_CASES[case]
    folder = fixture(name, tmp_path)
    edit_json(folder / "config.json", change)
    assert_one_clean_line(attncli("run", "--model", folder, "--layer", "2", "--sentence", SENTENCE), fragment)
    info = attncli("model", "info", folder)
    assert_clean(info)
    assert "supported     yes" not in info.stdout


def test_the_cell_limit_is_checked_before_the_earlier_layers_run(monkeypatch):
    """--max-cells refuses a long sentence at --layer 3 as at --layer 1: before layers 1 and 2 are computed."""
    from attncli.errors import AttnError
    from attncli.sources.checkpoints import gpt2, scenario
    from attncli.sources.limits import Limits

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("a layer was computed before the size check")

    monkeypatch.setattr(gpt2, "layer_inputs", never)
    with pytest.raises(AttnError, match=r"7 tokens × 7 × 4 heads = 196 attention cells, more than the limit of 100"):
        scenario.load_scenario(HERE / "gpt2", layer=1, sentence=SENTENCE, limits=Limits(max_cells=100))
    with pytest.raises(AttnError, match=r"more than the limit of 100"):
        scenario.load_scenario(HERE / "gpt2", layer=3, sentence=SENTENCE, limits=Limits(max_cells=100))


def test_run_head_counts_one_heads_cells(cli):
    """run --model --head counts the cells of the head it holds: 7 tokens × 4 heads (196) pass 100 only when one head (49) is shown."""
    command = ["run", "--model", str(HERE / "gpt2"), "--layer", "1", "--sentence", SENTENCE, "--max-cells", "100", "--format", "json"]
    refused = cli(*command)
    assert refused.exit_code == 1 and "7 tokens × 7 × 4 heads = 196 attention cells" in refused.stderr
    shown = cli(*command, "--head", "3")
    assert shown.exit_code == 0, shown.stderr
    tiled = cli(*command, "--head", "3", "--block-size", "2")  # the tiling report still holds every head
    assert tiled.exit_code == 1 and "196 attention cells" in tiled.stderr
    one = cli(*command[:-4], "--max-cells", "10", "--head", "1")
    assert one.exit_code == 1 and "7 tokens × 7 × 1 head = 49 attention cells, more than the limit of 10" in one.stderr


def test_the_earlier_layers_mlp_counts_against_the_cell_limit(monkeypatch):
    """Layers before the chosen one hold L × intermediate numbers in their MLP: counted too, before computing."""
    from attncli.errors import AttnError
    from attncli.sources.checkpoints import gpt2, scenario
    from attncli.sources.limits import Limits

    monkeypatch.setattr(gpt2, "layer_inputs", lambda *args: pytest.fail("computed before the size check"))
    with pytest.raises(AttnError, match=r"7 tokens × 64 \(the MLP width of layers 1–1\) = 448 numbers"):
        scenario.load_scenario(HERE / "gpt2", layer=2, sentence=SENTENCE, limits=Limits(max_cells=300))


# ---------------------------------------------------------------- weights that are not finite


def as_float64(name: str, value: float) -> Callable[[Path], None]:
    """Rewrite the file with tensor `name` stored as F64 and every number of it `value` (F32 cannot hold 1e300)."""

    def mutate(path: Path) -> None:
        header, data = read_safetensors(path)
        metadata = header.pop("__metadata__", None)
        tensors = {}
        for key, entry in header.items():
            begin, end = entry["data_offsets"]
            tensors[key] = (entry["dtype"], entry["shape"], data[begin:end])
        dtype, shape, raw = tensors[name]
        count = len(raw) // 4
        tensors[name] = ("F64", shape, struct.pack(f"<{count}d", *[value] * count))
        new_header: dict = {} if metadata is None else {"__metadata__": metadata}
        body = b""
        for key, (dtype, shape, raw) in tensors.items():
            new_header[key] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(raw)]}
            body += raw
        write_header(path, json.dumps(new_header).encode(), body)

    return mutate


def set_tensor(name: str, value: float) -> Callable[[Path], None]:
    def mutate(path: Path) -> None:
        header, data = read_safetensors(path)
        entry = header[name]
        begin, end = entry["data_offsets"]
        count = (end - begin) // 4
        assert entry["dtype"] == "F32"
        data = data[:begin] + struct.pack(f"<{count}f", *[value] * count) + data[end:]
        write_header(path, json.dumps(header).encode(), data)

    return mutate


WEIGHT_CASES = {
    "nan": (set_tensor("transformer.h.0.ln_1.weight", float("nan")), "tensor 'transformer.h.0.ln_1.weight' holds NaN"),
    "infinity": (set_tensor("transformer.h.1.attn.c_attn.weight", float("inf")), "tensor 'transformer.h.1.attn.c_attn.weight' holds ∞"),
    "overflow-in-earlier-layers": (as_float64("transformer.h.0.mlp.c_fc.weight", 1e308), "the input of layer 2 overflows float64"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", WEIGHT_CASES)
def test_weights_that_are_not_finite_are_named_for_what_they_are(case, tmp_path):
    """NaN or ∞ stored in a tensor is said so, with the tensor's name; an overflow through earlier layers too; no numpy warning."""
    change, fragment = WEIGHT_CASES[case]
    folder = fixture("gpt2", tmp_path)
    change(folder / "model.safetensors")
    assert_one_clean_line(attncli("run", "--model", folder, "--layer", "2", "--sentence", SENTENCE), fragment)


# ---------------------------------------------------------------- text shown, arguments, locales


def test_the_terminal_header_shows_a_hostile_folder_name_as_text(tmp_path):
    """A folder name with a newline and an escape sequence is written out in the terminal header, as in every other format."""
    folder = tmp_path / "evil\n\x1b[31mred\u202e"
    shutil.copytree(HERE / "gpt2", folder)
    done = attncli("run", "--model", folder, "--layer", "1", "--sentence", SENTENCE)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout
    assert "evil\\n\\x1b[31mred\\u202e" in done.stdout


def test_error_lines_use_the_one_visible_rule():
    """errors.visible is escape.visible: bidi marks (U+061C) and noncharacters (U+FFFE) are written out on stderr too."""
    from attncli import errors
    from attncli.document import escape
    from attncli.errors import AttnError

    assert errors.visible is escape.visible
    assert AttnError("a\u061cb\ufffe", file="x\u202ey").one_line() == "x\\u202ey: a\\u061cb\\ufffe"


NOT_UTF8 = os.fsdecode(b"caf\xff")  # what Python makes of the byte 0xff in argv: a lone surrogate


@pytest.mark.parametrize(
    ("arguments", "key"),
    [
        (("run", "--model", HERE / "gpt2", "--layer", "1", "--sentence", NOT_UTF8), "--sentence"),
        (("model", "tokens", HERE / "gpt2", NOT_UTF8), "TEXT"),
        (("scenarios", "new", NOT_UTF8), "SENTENCE"),
        (("explain", "--word", NOT_UTF8), "--word"),
    ],
    ids=["run", "model-tokens", "scenarios-new", "explain"],
)
def test_bytes_that_are_not_utf8_in_an_argument_are_one_line(arguments, key):
    """A sentence, text or word that is not UTF-8 is named with the byte, never an internal error."""
    assert_one_clean_line(attncli(*arguments), f"{key}: byte 4 (0xff) is not UTF-8")


C_LOCALE = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


@pytest.mark.slow
def test_non_ascii_folder_names_and_text_work_in_a_c_locale(tmp_path):
    """Under LC_ALL=C without UTF-8 mode, a folder named café and a sentence with é read as in any other locale."""
    folder = tmp_path / "café"
    shutil.copytree(HERE / "gpt2", folder)
    done = attncli("run", "--model", folder, "--layer", "1", "--sentence", "héllo wörld", "--format", "json", env=C_LOCALE)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout.encode("utf-8", "surrogateescape"))["scenario"]
    assert shown["name"] == "café layer 1" and "h" in shown["tokens"]
    for command in (("model", "info", folder, "--format", "json"), ("model", "tokens", folder, "héllo", "--format", "json")):
        shown = attncli(*command, env=C_LOCALE)
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout.encode("utf-8", "surrogateescape"))["folder"] == str(folder)


def test_decode_names_a_padding_mask_that_leaves_the_first_query_blind(tmp_path, cli):
    """Decoding makes the mask causal; padding on key 1 then hides every key from query 1: the mask is named, as run names it."""
    scenario = tmp_path / "pad.yaml"
    scenario.write_text("name: pad\ntokens: [a, b, c]\nembeddings: [[1, 0], [0, 1], [1, 1]]\nmask: {padding: [1]}\n")
    result = cli("decode", str(scenario))
    assert result.exit_code == 1 and result.stdout == ""
    assert "mask: query 1 ('a') would see no key at all once decoding makes the mask causal" in result.stderr
    assert "overflows" not in result.stderr


def test_a_huge_layer_in_yaml_is_echoed_exactly(tmp_path, cli):
    """A whole number beyond 2⁵³ is shown as written, not as the float it rounds to."""
    scenario = tmp_path / "big.yaml"
    scenario.write_text(f"model: {HERE / 'gpt2'}\nlayer: 123456789012345678901234567890\nsentence: a b\n")
    result = cli("run", str(scenario))
    assert result.exit_code == 1 and "layer 123456789012345678901234567890 is out of range" in result.stderr


@pytest.mark.slow
@given(sentence=st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_scenarios_new_writes_yaml_that_runs_for_any_unicode_sentence(sentence, tmp_path_factory, cli):
    """Any Unicode sentence (emoji, controls, line separators, quotes) gives a file that `run` reads back with the same tokens."""
    from attncli.sources.words import split_sentence

    assume(split_sentence(sentence))
    made = cli("scenarios", "new", "--", sentence)
    assert made.exit_code == 0, made.stderr
    path = tmp_path_factory.mktemp("new") / "s.yaml"
    path.write_text(made.stdout, encoding="utf-8")
    ran = cli("run", str(path), "--format", "json")
    assert ran.exit_code == 0, ran.stderr
    assert json.loads(ran.stdout)["scenario"]["tokens"] == split_sentence(sentence)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["fifo", "dev-zero", "sparse"])
@pytest.mark.parametrize(("name", "file"), [("gpt2", "model.safetensors"), ("llama", "model-00002-of-00004.safetensors")])
def test_a_weights_file_that_is_not_a_regular_file_is_refused(name, file, case, tmp_path):
    """model.safetensors or one shard swapped for a FIFO or a link to /dev/zero: one line, no hang; grown to a sparse
    8 GiB file, it still reads (only the tensors' own bytes are mapped), within the memory limit."""
    change, _ = FILE_CASES[case]
    folder = fixture(name, tmp_path)
    change(folder / file)
    done = attncli("run", "--model", folder, "--layer", "3", "--sentence", SENTENCE)
    if case == "sparse":
        assert done.returncode == 0 and done.stderr == "", done.stderr
    else:
        assert_one_clean_line(done, file)


INDEX_CASES = {
    "weight-map-a-list": ({"weight_map": ["a", "b"]}, "no weight_map of tensor names to file names"),
    "shard-a-number": ({"weight_map": {"model.embed_tokens.weight": 5}}, "no weight_map of tensor names to file names"),
    "shard-outside-the-folder": ({"weight_map": {"model.embed_tokens.weight": "../../etc/passwd"}}, "is not a file name in the folder"),
    "index-a-string": ("weights", "no weight_map of tensor names to file names"),
    "shard-names-dev-zero": ({"weight_map": {"model.embed_tokens.weight": "zero.safetensors"}}, "character device"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", INDEX_CASES)
def test_a_hostile_shard_index_is_one_line_naming_it(case, tmp_path):
    """The index's weight_map: wrong types, paths out of the folder, a shard that is a device."""
    content, fragment = INDEX_CASES[case]
    folder = fixture("llama", tmp_path)
    (folder / "model.safetensors.index.json").write_text(json.dumps(content))
    (folder / "zero.safetensors").symlink_to("/dev/zero")
    assert_one_clean_line(attncli("run", "--model", folder, "--layer", "1", "--sentence", SENTENCE), fragment)


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (("--layer", "123456789012345678901234567890"), "layer 123456789012345678901234567890 is out of range"),
        (("--layer", "0"), "layer 0 is out of range"),
        (("--layer", "-3"), "layer -3 is out of range"),
        (("--max-cells", str(10**40)), None),
        (("--sentence", "word " * 26_000), "more than the model's 32 positions"),
        (("--sentence", "\x1b[2J\u202e"), None),
        (("--sentence", ""), "ANY"),
    ],
    ids=["huge-layer", "layer-zero", "negative-layer", "huge-cell-limit", "130-kB-sentence", "control-characters", "blank"],
)
@pytest.mark.slow
def test_hostile_arguments_end_in_a_result_or_one_line(arguments, fragment):
    """Layers out of range, absurd limits, a sentence at the kernel's argument limit, controls and blanks."""
    base = {"--layer": "1", "--sentence": SENTENCE}
    base.update(dict(zip(arguments[::2], arguments[1::2])))
    done = attncli("run", "--model", HERE / "gpt2", *[part for pair in base.items() for part in pair])
    assert_clean(done)
    if fragment == "ANY":
        return
    if fragment is not None:
        assert_one_clean_line(done, fragment)
    else:
        assert done.returncode == 0 and "\x1b" not in done.stdout


# ---------------------------------------------------------------- the bounded reader itself (GGUF and any other file can use it)


def test_the_bounded_reader_reads_a_span_and_refuses_past_the_end(tmp_path):
    """read_bytes(offset, length) gives exactly those bytes; a span past the end or over the limit is one error."""
    from attncli.errors import AttnError
    from attncli.sources.bounded import read_bytes

    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(100)))
    assert read_bytes(path, "f.bin", max_bytes=10, offset=20, length=5) == bytes(range(20, 25))
    with pytest.raises(AttnError, match="the file ends after 100 bytes, before byte 105"):
        read_bytes(path, "f.bin", max_bytes=10, offset=100, length=5)
    with pytest.raises(AttnError, match="100 bytes to read, more than the 99"):
        read_bytes(path, "f.bin", max_bytes=99)


def test_the_json_limits_are_exact(tmp_path):
    """Nesting of exactly max_depth reads; one more level is refused with its key path; so is one more digit."""
    from attncli.errors import AttnError
    from attncli.sources.bounded import JsonLimits, parse_json

    limits = JsonLimits(max_depth=3, max_number_chars=5)
    assert parse_json(b'{"a": {"b": [1]}}', "x", what="y", limits=limits) == {"a": {"b": [1]}}
    with pytest.raises(AttnError) as caught:
        parse_json(b'{"a": {"b": [[1]]}}', "x", what="y", limits=limits)
    assert caught.value.key == "a.b[1]"
    assert parse_json(b"[12345, -1.25]", "x", what="y", limits=limits) == [12345, -1.25]
    with pytest.raises(AttnError, match="the number 123456"):
        parse_json(b"[123456]", "x", what="y", limits=limits)
    with pytest.raises(AttnError, match="beyond float64"):
        parse_json(b"[1e999]", "x", what="y", limits=JsonLimits())


@pytest.mark.parametrize("args", [["run", "--model", "/dev/null", "--layer", "1", "--sentence", "hi"], ["heads", "--model", "/dev/null", "--sentence", "hi"],
                                  ["model", "tokens", "/dev/null", "hi"], ["model", "info", "/dev/null"]])  # fmt: skip
def test_a_device_given_as_the_model_is_named_for_what_it_is(cli, args):
    """--model /dev/null (a device, like a FIFO or a socket) is never read, and not called 'a folder that does not exist'."""
    result = cli(*args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("attncli: error: /dev/null: neither a checkpoint folder nor a GGUF file: a device, a pipe or a socket")
