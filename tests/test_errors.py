"""Every bad input gets one clear line on stderr: FILE:LINE: key: what is wrong (expected ...)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attncli.sources.checkpoints.families import SUPPORTED

BAD = Path(__file__).parent / "bad"

# file in tests/bad, line the message must name (None: no line applies), fragment it must contain
CASES = [
    ("empty.yaml", None, "the file is empty"),
    ("comments-only.yaml", None, "the file is empty"),
    ("latin1.yaml", 1, "not UTF-8 text: byte 0xe9"),
    ("binary.yaml", 2, "this is a binary file"),
    ("syntax-error.yaml", 4, "YAML syntax error, column 4: did not find expected ',' or ']' while parsing a flow sequence that begins at line 3"),
    ("not-a-mapping.yaml", 1, "the document is a list (expected a mapping"),
    ("two-documents.yaml", 3, "the file holds several YAML documents"),
    ("unknown-key.yaml", 3, "W_q: unknown key 'W_q'; did you mean 'W_Q'?"),
    ("missing-embeddings.yaml", 1, "the required key `embeddings` is missing"),
    ("tokens-and-sentence.yaml", 2, "sentence: both `tokens` and `sentence` are given"),
    ("no-tokens.yaml", 1, "neither `tokens` nor `sentence` is given"),
    ("string-for-number.yaml", 4, "embeddings.b[2]: found 'one' (expected a number)"),
    ("quoted-number.yaml", 3, "embeddings.a[1]: found the text '0.5' (remove the quotes) (expected a number)"),
    ("boolean-for-number.yaml", 5, "W_Q[2][1]: found the word 'yes' (read as a boolean) (expected a number)"),
    ("nested-list-for-number.yaml", 3, "embeddings.a[1]: found a list (expected a number)"),
    ("nested-too-deep.yaml", 3, "extra: nested too deep"),
    ("ragged-rows.yaml", 5, "embeddings[3]: row 3 has 2 numbers but row 1 has 3 (ragged rows)"),
    ("empty-vector.yaml", 4, "embeddings.b: the vector is empty"),
    ("nan.yaml", 4, "W_V[1][2]: .nan is not a finite number"),
    ("infinity.yaml", 2, "embeddings[1][2]: -.inf is not a finite number"),
    ("huge-number.yaml", 2, "1e400 is too large for float64"),
    ("embedding-vs-wq.yaml", 3, "W_Q has 2 rows but the embeddings have d_model = 3 numbers"),
    ("wq-vs-wk.yaml", 4, "W_K has 3 columns but W_Q has 2"),
    ("heads-not-dividing.yaml", 4, "W_Q has 3 columns, which do not split evenly into heads = 2"),
    ("wo-rows.yaml", 3, "W_O has 3 rows but the heads' concatenated output has H·d_v = 2 columns"),
    ("bias-length.yaml", 3, "b_Q: b_Q has 3 numbers (expected 2 = H·d_k, the columns of W_Q)"),
    ("rows-vs-tokens.yaml", 3, "embeddings: 2 embedding rows for 3 tokens"),
    ("missing-embedding.yaml", 3, "no embedding for 'cat' (did you mean 'cats'?), 'on', 'mat' (did you mean 'sat'?)"),
    ("empty-tokens.yaml", 1, "tokens: the token list is empty"),
    ("window-negative.yaml", 3, "mask.window: -1 is out of range (expected a window from 0 to 2147483648)"),
    ("sink-outside.yaml", 3, "mask.sinks: 3 is out of range (expected a number of sink keys from 0 to 2)"),
    ("padding-outside.yaml", 4, "mask.padding[2]: 5 is out of range (expected a key position from 1 to 2)"),
    ("row-sees-nothing.yaml", 3, "mask: query 1 ('a') would see no key at all"),
    ("rope-odd.yaml", 3, "rope: RoPE turns pairs of coordinates, but d_k = 3 is odd (expected an even d_k)"),
    ("kv-heads-not-dividing.yaml", 4, "kv_heads: kv_heads = 3 does not divide heads = 4"),
    ("qkv-with-embeddings.yaml", 2, "embeddings: Q, K and V are given directly, so `embeddings` has no use"),
    ("causal-cross.yaml", 6, "mask: a causal mask needs as many queries as keys, but there are 2 and 3"),
    ("bias-shape.yaml", 3, "bias: the bias is 2 × 3 (expected 2 × 2: one row per query, one column per key)"),
    ("alibi-few-slopes.yaml", 4, "alibi.slopes: 1 slopes for 2 heads (too few) (expected 2 slopes, one per head)"),
    ("sink-logits-count.yaml", 4, "sink_logits: 3 sink logits for heads = 2 (expected 2 finite numbers, one logit per head (gpt-oss's learned sinks), or one number for every head)"),
    ("mask-misspelt.yaml", 3, "mask: found 'casual'; did you mean 'causal'?"),
    ("heads-zero.yaml", 3, "heads: 0 is out of range (expected a whole number 1 or more)"),
    ("heads-text.yaml", 3, "heads: found 'two' (expected a whole number 1 or more)"),
    ("precision-too-big.yaml", 3, "precision: 20 is out of range (expected a whole number from 0 to 15 (float64 carries no more))"),
    ("scale-zero.yaml", 3, "scale: 0 is not positive"),
    ("scale-word.yaml", 3, "scale: found 'sqrt'; did you mean 'sqrt_dk'? (expected `sqrt_dk`, `none` or a positive number"),
    ("mask-unknown.yaml", 3, "mask: found 'triangular' (expected `none`, `causal`, a mapping {causal, window, chunk, sinks, padding}, or an L_q × L_k matrix of 0/1)"),
    ("python-tag.yaml", 2, "the YAML tag '!!python/object/apply:os.system' is not allowed"),
    ("duplicate-key.yaml", 4, "the key 'mask' appears twice (lines 3 and 4)"),
    ("vector-lengths.yaml", 4, "the vector of 'b' has 3 numbers but that of 'a' has 2"),
    ("case-conflict.yaml", 4, "'The' and 'the' are the same word when case is ignored, but their vectors differ"),
    ("per-head-count.yaml", 5, "W_Q: 3 per-head matrices for heads = 2"),
    ("undefined-alias.yaml", 2, "the alias *row refers to no anchor before it"),
    ("billion-laughs.yaml", 9, "the document expands through anchors and aliases to more than 2,000,000 values"),
    ("too-many-tokens.yaml", 1, "sentence: 5,000 tokens × 5,000 × 1 head = 25,000,000 attention cells, more than the limit"),
    # mistakes newcomers make, named for what they are, on the line that holds them
    ("tab-indent.yaml", 3, "a tab character indents line 3: YAML indents with spaces"),
    ("missing-colon.yaml", 4, "the ':' after the key is missing in 'b [0, 1]'"),
    ("decimal-comma.yaml", 3, "embeddings.a: `0,5` in [1, 0,5] has a decimal comma: YAML reads it as two numbers (expected a decimal point, 0.5"),
    ("merge-key.yaml", 4, "merge keys (<<) are not supported: write the keys out"),
    ("utf16.yaml", 1, "UTF-16 text: save it as UTF-8"),
    ("numbers-without-commas.yaml", 4, "embeddings.b[1]: found '0 1' (separate the numbers of a list with commas: [0, 1])"),
    ("colon-in-value.yaml", 1, "a second ': ' on the line (expected one `key: value` per line; put a value that holds ': ' in quotes)"),
    ("key-without-space.yaml", 3, "embeddings: found 'a:[1, 0]' (a space is missing after the ':'?)"),
    # numbers that leave float64's range: the stage, the head and the row, never inf or NaN
    ("overflow-scores.yaml", None, "scores: head 1, row 1 ('a'): Q·Kᵀ overflows float64 (a number beyond ±1.8e308)"),
    ("overflow-q.yaml", None, "q: head 1, row 1 ('a'): X·W_Q overflows float64"),
    ("overflow-scaled.yaml", None, "scaled: head 1, row 1 ('a'): Q·Kᵀ / divisor overflows float64"),
    ("overflow-bias.yaml", None, "bias: head 1, row 1 ('a'): the bias B overflows float64"),
    ("overflow-output.yaml", None, "output: row 1 ('a'): concat·W_O overflows float64"),
    # sizes: a width attncli would fill in itself counts like tokens; many missing words stay one short line
    ("identity-too-wide.yaml", 3, "embeddings: an identity W_Q for d_model = 4,100 would hold 16,810,000 numbers, more than the limit of 16,777,216"),
    ("missing-4000-words.yaml", 3, "embeddings: no embedding for 'w0', 'w1', 'w2', 'w3', 'w4', 'w5', 'w6', 'w7', 'w8', 'w9' and 3,990 more"),
    # one layer of a real checkpoint (`model:`), its folder relative to the scenario file's
    ("model-missing-folder.yaml", 1, "model: " + str(BAD / "../checkpoints/nothere") + ": the checkpoint folder does not exist"),
    # an error line is capped at 300 characters: under a long checkout path the end of the list of types is cut
    ("model-unsupported.yaml", 1, "model_type 'mamba' is not supported (expected one of " + ", ".join(SUPPORTED[:5])),
    ("model-missing-tokenizer.yaml", 1, "missing-tokenizer: no tokenizer.json in the checkpoint folder"),
    ("model-truncated-weights.yaml", 1, "truncated/model.safetensors: tensor 'h.0.mlp.c_proj.bias' has data_offsets [1184, 1200] outside the data area"),
    ("model-layer-out-of-range.yaml", 3, "layer: layer 4 is out of range: the model has 3 layers (expected 1 to 3)"),
    ("model-layer-zero.yaml", 2, "layer: 0 is out of range (expected a layer number 1 or more)"),
    ("model-sentence-too-long.yaml", 3, "sentence: the sentence is 44 tokens long, more than the model's 32 positions"),
    ("model-special-tokens.yaml", 4, "special_tokens: found 'some' (expected auto (as the tokenizer adds them) or none)"),
    ("model-with-embeddings.yaml", 4, "embeddings: `embeddings` has no use with `model`"),
    ("model-without-layer.yaml", 1, "layer: `model` needs `layer`"),
    ("layer-without-model.yaml", 3, "layer: `layer` is for a real model, but no `model` is given"),
    ("mla-with-wq.yaml", 3, "W_Q: `W_Q` has no use with `mla`: every head's q, k and v come from the latents"),
    ("mla-missing-wuv.yaml", 4, "mla.W_UV: `mla` needs `W_UV` (expected a matrix of 1 rows (d_c, the columns of W_DKV))"),
    ("mla-wqr-columns.yaml", 10, "mla.W_QR: W_QR has 1 columns (expected H·d_r = 1 × 2 columns"),
]


def test_the_corpus_and_the_table_agree():
    """Every file in tests/bad has a case, and every case a file."""
    assert sorted(p.name for p in BAD.glob("*.yaml")) == sorted(name for name, _, _ in CASES)


@pytest.mark.parametrize(("name", "line", "fragment"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("command", ["run", "explain"])
def test_bad_scenario_gets_one_clear_line(cli, name, line, fragment, command):
    """Exit 1, empty stdout, one stderr line `attncli: error: FILE:LINE: ...` with the fragment."""
    path = str(BAD / name)
    args = ["run", path] if command == "run" else ["explain", "--scenario", path, "--position", "1"]
    result = cli(*args)
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert lines[0].startswith(f"attncli: error: {where}"), lines[0]
    assert fragment in lines[0]


def test_missing_file(cli):
    """A path that does not exist names it and lists the built-in scenarios."""
    result = cli("run", "no/such/file.yaml")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("attncli: error: no/such/file.yaml: no such file or built-in scenario")
    assert "cat, journey" in result.stderr


def test_folder(cli, tmp_path):
    """A folder is not a scenario file."""
    result = cli("run", str(tmp_path))
    assert result.exit_code == 1 and "this is a folder" in result.stderr


def test_unreadable_file(cli, tmp_path, monkeypatch):
    """A file that cannot be read says so (simulated: tests may run as root, who reads anything)."""
    path = tmp_path / "locked.yaml"
    path.write_text("tokens: [a]\nembeddings: [[1]]\n")

    real_open = os.open

    def refuse(name, *args, **kwargs):
        if str(name) == str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    result = cli("run", str(path))
    assert result.exit_code == 1 and result.stdout == ""
    assert f"{path}: cannot be read: permission denied" in result.stderr


def test_limits_can_be_raised_explicitly(cli):
    """--max-cells lets a scenario past the default size limit through."""
    result = cli("run", str(BAD / "too-many-tokens.yaml"), "--max-cells", "30000000", "--stages", "output", "--format", "json")
    assert result.exit_code == 0, result.stderr


def test_limits_can_be_lowered(cli):
    """--max-cells 10 refuses even the 6-token cat scenario, before computing it."""
    result = cli("run", "cat", "--max-cells", "10")
    assert result.exit_code == 1 and "36 attention cells, more than the limit of 10" in result.stderr


def test_usage_errors_keep_clicks_status_2(cli):
    """A malformed command line is a usage error: status 2."""
    assert cli("run").exit_code == 2
    assert cli("run", "cat", "--precision", "99").exit_code == 2
    assert cli("run", "cat", "--format", "yaml").exit_code == 2


def test_unknown_stage(cli):
    """--stages with a misspelt stage lists the valid ones."""
    result = cli("run", "cat", "--stages", "weigths")
    assert result.exit_code == 1 and result.stdout == ""
    assert "--stages: unknown stage 'weigths'; did you mean 'weights'? (expected a comma list of: embeddings, cache, latent, q, k" in result.stderr


def test_output_into_a_missing_folder_is_refused(cli, tmp_path):
    """--output in a folder that does not exist: a clear error, nothing written."""
    target = tmp_path / "nope" / "out.json"
    result = cli("run", "cat", "--format", "json", "--output", str(target))
    assert result.exit_code == 1 and "does not exist" in result.stderr
    assert not target.parent.exists()


def test_failed_run_leaves_an_existing_output_untouched(cli, tmp_path):
    """An error before writing keeps the old file as it was."""
    target = tmp_path / "out.json"
    target.write_text("old")
    result = cli("run", str(BAD / "nan.yaml"), "--format", "json", "--output", str(target))
    assert result.exit_code == 1 and target.read_text() == "old"


def test_ctrl_c_exits_130_with_one_line(cli, monkeypatch):
    """KeyboardInterrupt mid-run: status 130, one line, no traceback."""
    from attncli.core import engine

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "run", interrupted)
    result = cli("run", "cat")
    assert result.exit_code == 130
    assert result.stderr == "attncli: interrupted\n" and result.stdout == ""


def test_traceback_on_request(cli, monkeypatch):
    """ATTNCLI_TRACEBACK=1 lets the exception through for debugging."""
    from attncli.errors import AttnError

    monkeypatch.setenv("ATTNCLI_TRACEBACK", "1")
    with pytest.raises(AttnError):
        cli("run", str(BAD / "nan.yaml"))


def _attncli(*args: str, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "attncli", *args], capture_output=True, env=environment, **kwargs)


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_output_piped_into_a_closed_reader_ends_quietly(fmt):
    """`attncli run X | head -c 100` when the reader is gone: no BrokenPipeError traceback, status 141."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before attncli writes: its first write fails with EPIPE
    try:
        process = subprocess.run(
            [sys.executable, "-m", "attncli", "run", "cat", "--format", fmt],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert process.stderr.decode() == ""
    assert process.returncode == 141


def test_no_color_and_json_never_carry_escape_codes():
    """NO_COLOR gives plain tables even on a forced terminal; JSON never has escape codes."""
    tables = _attncli("run", "cat", env={"NO_COLOR": "1", "FORCE_COLOR": "1"})
    assert tables.returncode == 0 and b"\x1b[" not in tables.stdout
    coloured = _attncli("run", "cat", env={"FORCE_COLOR": "1"})
    assert b"\x1b[" in coloured.stdout  # the check above can fail
    json_out = _attncli("run", "cat", "--format", "json", env={"FORCE_COLOR": "1"})
    assert b"\x1b[" not in json_out.stdout
    piped = _attncli("run", "cat")
    assert b"\x1b[" not in piped.stdout


def test_a_file_larger_than_the_limit_is_refused_before_it_is_read(tmp_path):
    """The byte limit is checked from the file's size, before reading it."""
    from attncli.errors import AttnError
    from attncli.sources.yaml_scenario import read_text

    path = tmp_path / "big.yaml"
    path.write_text("tokens: [a]\nembeddings: [[1]]\n")
    with pytest.raises(AttnError, match="the file is 30 bytes, larger than the 10 a scenario may be"):
        read_text(path, str(path), max_bytes=10)
    assert read_text(path, str(path)).startswith("tokens")


OVERFLOW = "attncli: error: {path}: scores: head 1, row 1 ('a'): Q·Kᵀ overflows float64 (a number beyond ±1.8e308)"


@pytest.mark.parametrize(
    "extra",
    [
        ["--heatmap"],
        ["--round-steps", "3"],
        *[["--format", fmt] for fmt in ("json", "markdown", "latex", "csv", "html", "svg")],
        ["explain"],
        ["explain", "--round-steps", "2", "--format", "json"],
    ],
    ids=lambda extra: " ".join(extra),
)
def test_overflow_is_one_line_in_every_format(cli, extra):
    """`embeddings: [[1e200, 1e200], [1, 1]]`: the same clear line for every format and option, no NaN, no numpy warning."""
    import warnings

    path = str(BAD / "overflow-scores.yaml")
    args = ["explain", "--scenario", path, "--word", "a", *extra[1:]] if extra[0] == "explain" else ["run", path, *extra]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = cli(*args)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith(OVERFLOW.format(path=path)) and result.stderr.count("\n") == 1
    assert [str(w.message) for w in caught] == []


def test_overflow_puts_no_numpy_warning_on_stderr():
    """In a real process, with every warning shown (-W always), stderr holds the one error line and nothing else."""
    path = str(BAD / "overflow-scores.yaml")
    done = subprocess.run([sys.executable, "-W", "always", "-m", "attncli", "run", path], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(OVERFLOW.format(path=path)) and done.stderr.count("\n") == 1


def test_hand_rounding_keeps_huge_exponentials_finite():
    """e^676 ≈ 3.8e293 rounded to 5 decimals: np.round would overflow multiplying by 10⁵; the value is whole and kept."""
    from attncli.core import engine
    from attncli.sources.yaml_scenario import from_text

    scenario = from_text("tokens: [a, b]\nembeddings: [[26, 0], [1, 1]]\nscale: none\n")
    exact, rounded = engine.run(scenario).heads[0], engine.run(scenario, round_steps=5).heads[0]
    assert rounded.exp[0, 0] == exact.exp[0, 0] == pytest.approx(3.828862465745284e293)
    assert all(np.isfinite(getattr(rounded, stage)).all() for stage in ("exp", "exp_sum", "weights", "output"))


def test_a_wide_identity_counts_against_max_cells(cli, tmp_path):
    """An identity W_Q, W_K, W_V is d_model² numbers attncli builds itself: refused past --max-cells, like tokens."""
    path = tmp_path / "wide.yaml"
    path.write_text("tokens: [a]\nembeddings: [[1, 2, 3]]\n")
    assert cli("run", str(path), "--max-cells", "9").exit_code == 0
    result = cli("run", str(path), "--max-cells", "8")
    assert result.exit_code == 1
    assert "embeddings: an identity W_Q for d_model = 3 would hold 9 numbers, more than the limit of 8" in result.stderr


MAGNITUDES = st.sampled_from([0.0, 1e-300, 1e-5, 1.0, 1e5, 1e100, 1e154, 1e200, 1e300, 1.7e308])
NUMBERS = st.builds(lambda m, sign, f: sign * m * f, MAGNITUDES, st.sampled_from([1.0, -1.0]), st.floats(0.5, 1.0))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    embeddings=st.lists(st.lists(NUMBERS, min_size=2, max_size=2), min_size=1, max_size=3),
    weights=st.lists(NUMBERS, min_size=4, max_size=4),
    scale=st.sampled_from(["sqrt_dk", "none", "1e-300", "1e300"]),
    mask=st.sampled_from(["none", "causal"]),
    round_steps=st.sampled_from([None, 0, 3, 15]),
)
def test_extreme_numbers_give_finite_stages_or_one_clear_error(embeddings, weights, scale, mask, round_steps):
    """Any magnitudes up to float64's largest: every stage is finite (−∞ only where masked), or an AttnError names the overflow."""
    import warnings

    from attncli.core import engine
    from attncli.errors import AttnError
    from attncli.sources.yaml_scenario import from_text

    tokens = [f"t{i}" for i in range(len(embeddings))]
    W = f"[[{weights[0]!r}, {weights[1]!r}], [{weights[2]!r}, {weights[3]!r}]]"
    text = f"tokens: {tokens}\nembeddings: {embeddings!r}\nW_Q: {W}\nW_O: {W}\nscale: {scale}\nmask: {mask}\n"
    scenario = from_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy RuntimeWarning fails the test
        try:
            result = engine.run(scenario, round_steps=round_steps)
        except AttnError as error:
            assert ("overflows float64" in str(error) and "row " in str(error)) or "rounds to 0" in str(error)
            return
    for run_result in (result, result.exact) if result.exact is not None else (result,):
        assert np.isfinite(run_result.output).all()
        for head in run_result.heads:
            for stage in ("Q", "K", "V", "scores", "scaled", "shift", "exp", "exp_sum", "weights", "output"):
                assert np.isfinite(getattr(head, stage)).all(), stage
            assert np.array_equal(np.isfinite(head.masked), head.visible)
            if run_result.round_steps is None:  # hand-rounded weights need not sum to 1
                assert np.allclose(head.weights.sum(axis=1), 1.0)
