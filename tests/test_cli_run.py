"""`attncli run` and `attncli scenarios` through Typer's CliRunner."""

import json

import pytest

from attncli.sources import builtin


def test_run_cat_shows_every_stage_with_the_seed_numbers(cli):
    """The terminal tables carry the article's scores, weights and the exact output."""
    result = cli("run", "cat")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    for title in ("Embeddings", "Queries", "Keys", "Values", "Scores  S = Q·Kᵀ  (6 × 6)", "Exponentials", "Attention weights", "Output"):
        assert title in out
    cat_row = next(line for line in out.splitlines() if line.startswith("│ cat ") and "0.244" in line)
    assert [cell.strip() for cell in cat_row.split("│")[2:8]] == ["0.244", "0.090", "0.244", "0.090", "0.244", "0.090"]
    assert "│ cat │ 1.064 │  0.398 │" in out
    assert result.stderr == ""


def test_run_json_is_the_documented_contract(cli):
    """attncli.run/1: schema key, scenario object, per-head stages, concat and output, full precision."""
    doc = json.loads(cli("run", "journey", "--format", "json").stdout)
    assert doc["schema"] == "attncli.run/1"
    first_version = {
        "name": "journey", "tokens": ["Your", "journey", "starts", "with", "one", "step"],
        "d_model": 3, "heads": 1, "d_k": 2, "d_v": 2, "d_out": 2,
        "scale": {"mode": "sqrt_dk", "divisor": 2**0.5}, "mask": "none",
    }  # fmt: skip
    assert list(doc["scenario"])[: len(first_version)] == list(first_version)  # keys are added after, never renamed
    assert {key: doc["scenario"][key] for key in first_version} == first_version
    assert doc["scenario"]["labels"] == first_version["tokens"]
    assert doc["scenario"]["kv_heads"] == 1 and doc["scenario"]["context"] is None and doc["scenario"]["rope"] is None
    head = doc["heads"][0]
    assert head["head"] == 1
    for key in ("W_Q", "W_K", "W_V", "Q", "K", "V", "scores", "scaled", "masked", "shift", "exp", "exp_sum", "weights", "output"):
        assert key in head
    assert doc["output"] == doc["concat"] == head["output"]
    assert round(doc["output"][0][0], 4) == 0.2996
    assert doc["rounding"] is None


def test_run_json_masked_cells_are_null_and_nothing_is_nan(cli):
    """Standard JSON only: -inf becomes null in `masked`, exp and weights are 0 there."""
    text = cli("run", "journey-causal", "--format", "json").stdout
    assert "Infinity" not in text and "NaN" not in text
    head = json.loads(text)["heads"][0]
    assert head["masked"][0][1:] == [None] * 5
    assert head["weights"][0] == [1.0, 0, 0, 0, 0, 0]


def test_stages_limit_every_format(cli):
    """--stages: a stage left out is absent from JSON and from the tables."""
    doc = json.loads(cli("run", "cat", "--format", "json", "--stages", "weights").stdout)
    assert set(doc["heads"][0]) == {"head", "kv_head", "weights"}
    assert "embeddings" not in doc and "output" not in doc
    tables = cli("run", "cat", "--stages", "scores").stdout
    assert "Scores" in tables and "Attention weights" not in tables and "Embeddings" not in tables


def test_head_option_selects_one_head(cli):
    """--head 2 shows head 2 only, numbered from 1."""
    doc = json.loads(cli("run", "multihead", "--format", "json", "--head", "2").stdout)
    assert [h["head"] for h in doc["heads"]] == [2]
    tables = cli("run", "multihead", "--head", "2", "--stages", "weights").stdout
    assert "Head 2 · Attention weights" in tables and "Head 1" not in tables


def test_head_beyond_the_scenario_is_a_clear_error(cli):
    """--head 3 on a 2-head scenario: one line on stderr, nothing on stdout, exit 1."""
    result = cli("run", "multihead", "--head", "3")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "head 3 does not exist: the scenario has 2 heads" in result.stderr


def test_precision_option_changes_decimals(cli):
    """--precision 2 shows two decimals."""
    out = cli("run", "cat", "--stages", "weights", "--precision", "2").stdout
    assert "0.24 " in out and "0.244" not in out


def test_causal_tables_show_minus_infinity(cli):
    """The masked stage shows −∞ above the diagonal."""
    out = cli("run", "journey-causal", "--stages", "masked").stdout
    assert "−∞" in out


def test_wide_matrix_is_shortened_with_an_ellipsis_column(cli, tmp_path):
    """A 40 × 40 score matrix in 120 columns: an ellipsis column and a note on how to see all."""
    tokens = [f"t{i}" for i in range(40)]
    path = tmp_path / "wide.yaml"
    path.write_text(f"tokens: {tokens}\nembeddings: {[[i / 40] for i in range(40)]}\n".replace("'", ""))
    out = cli("run", str(path), "--stages", "scores").stdout
    assert " … " in out and "Showing" in out and "--full" in out
    assert max(len(line) for line in out.splitlines()) <= 120
    full = cli("run", str(path), "--stages", "scores", "--full").stdout
    assert " … " not in full and "t39" in full


@pytest.mark.parametrize("name", builtin.names())
def test_every_builtin_scenario_runs(cli, name):
    """Each built-in scenario runs in both formats."""
    assert cli("run", name).exit_code == 0
    assert json.loads(cli("run", name, "--format", "json").stdout)["scenario"]["name"] == name


def test_scenarios_lists_the_builtins_with_descriptions(cli):
    """`attncli scenarios` names each built-in with its description."""
    out = cli("scenarios").stdout
    for name in ("cat", "journey", "journey-causal", "journey-simple", "multihead", "train-station"):
        assert any(line.startswith(name + " ") for line in out.splitlines())
    assert "The cat sat on the mat" in out


def test_scenarios_show_prints_a_copyable_file(cli, tmp_path):
    """The printed YAML, saved and run, gives the same result as the built-in."""
    text = cli("scenarios", "show", "cat").stdout
    copy = tmp_path / "mine.yaml"
    copy.write_text(text)
    assert cli("run", str(copy), "--format", "json").stdout == cli("run", "cat", "--format", "json").stdout


def test_unknown_scenario_suggests_a_builtin(cli):
    """A misspelt built-in name gets a suggestion and the list of names."""
    result = cli("run", "journy")
    assert result.exit_code == 1 and result.stdout == ""
    assert "did you mean the built-in 'journey'?" in result.stderr


def test_version(cli):
    """--version prints the version."""
    from attncli import __version__

    assert cli("--version").stdout.strip() == f"attncli {__version__}"


def _subprocess_run(*args: str, env: dict) -> str:
    import os
    import subprocess
    import sys

    environment = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    environment.update(env)
    return subprocess.run([sys.executable, "-m", "attncli", *args], capture_output=True, text=True, env=environment, check=True).stdout


def test_weights_are_shaded_in_a_colour_terminal():
    """In a colour terminal the weights cells get a background colour, and a legend follows."""
    out = _subprocess_run("run", "cat", "--stages", "weights", env={"FORCE_COLOR": "1", "COLUMNS": "120", "TERM": "xterm-256color"})
    assert ";48;5;" in out  # a background colour from the 256-colour palette
    assert "shade:" in out and "▁▂▃" not in out
    basic = _subprocess_run("run", "cat", "--stages", "weights", env={"FORCE_COLOR": "1", "COLUMNS": "120", "TERM": "xterm"})
    assert "0.244 ▂" in basic  # 16 colours cannot show the shades: the block ramp instead


def test_no_color_terminal_shows_the_block_ramp():
    """NO_COLOR on a terminal: the same shading as a Unicode block ramp, no escape codes."""
    out = _subprocess_run("run", "journey-causal", "--stages", "weights", env={"FORCE_COLOR": "1", "NO_COLOR": "1", "COLUMNS": "120"})
    assert "\x1b[" not in out
    assert "1.0000 █" in out and "shade: 0.0000 ▁▂▃▄▅▆▇█ 1.0000" in out


def test_piped_tables_are_plain_unless_heatmap_is_asked(cli):
    """Output that is not a terminal stays plain; --heatmap shades every tokens × tokens stage."""
    assert "shade:" not in cli("run", "cat", "--stages", "weights").stdout
    out = cli("run", "cat", "--stages", "scores,exp,weights", "--heatmap").stdout
    assert out.count("shade:") == 3
    assert "shade: -1.000 ▁▂▃▄▅▆▇█ 2.000" in out  # scores are shaded from their minimum to their maximum


def test_variance_matches_the_theory(cli):
    """The √d appendix as an experiment: var q·k ≈ d, var q·k/√d ≈ 1, and scaling keeps softmax from saturating."""
    import json as json_module

    doc = json_module.loads(cli("variance", "--dims", "1,16,256", "--samples", "20000", "--format", "json").stdout)
    assert doc["schema"] == "attncli.variance/1"
    assert [row["d"] for row in doc["rows"]] == [1, 16, 256]
    for row in doc["rows"]:
        assert set(row) == {"d", "samples", "mean_raw", "var_raw", "var_scaled", "max_weight_raw", "max_weight_scaled"}
        assert abs(row["var_raw"] / row["d"] - 1) < 0.1  # 20,000 samples: well within 10 %
        assert abs(row["var_scaled"] - 1) < 0.1
        assert abs(row["mean_raw"]) < 0.1 * row["d"] ** 0.5
    raw = [row["max_weight_raw"] for row in doc["rows"]]
    assert raw == sorted(raw) and raw[-1] > 0.8  # unscaled: towards one-hot as d grows
    assert all(0.15 < row["max_weight_scaled"] < 0.3 for row in doc["rows"])  # scaled: stays spread


def test_variance_same_seed_same_numbers(cli):
    """Reproducible: the same seed gives the same numbers, another seed others."""
    args = ("variance", "--dims", "4,32", "--samples", "500", "--format", "json")
    assert cli(*args, "--seed", "3").stdout == cli(*args, "--seed", "3").stdout
    assert cli(*args, "--seed", "3").stdout != cli(*args, "--seed", "4").stdout


def test_variance_table_and_bad_dims(cli):
    """The table names the theory; a bad --dims is a clear error."""
    assert "theory in brackets" in cli("variance", "--dims", "2", "--samples", "100").stdout
    result = cli("variance", "--dims", "2,zero")
    assert result.exit_code == 1 and "--dims: found '2,zero'" in result.stderr


def test_explain_takes_the_scenario_as_run_does(cli):
    """`attncli explain journey --word starts`, natural after `attncli run journey`, is `explain -s journey --word starts`."""
    assert cli("explain", "journey", "--word", "starts").stdout == cli("explain", "-s", "journey", "--word", "starts").stdout
    bare = cli("explain", "cat")
    assert bare.exit_code == 1 and bare.stdout == "" and "no word to explain (expected --word WORD or --position N)" in bare.stderr
    both = cli("explain", "cat", "-s", "journey", "--word", "the")
    assert both.exit_code == 1 and "both SCENARIO ('cat') and --scenario ('journey') are given" in both.stderr


def test_a_misspelt_builtin_gets_a_did_you_mean(cli):
    """`scenarios show catt` names the built-in it probably meant, as `run catt` does."""
    for args in (["scenarios", "show", "catt"], ["run", "catt"]):
        result = cli(*args)
        assert result.exit_code == 1 and result.stdout == ""
        assert "did you mean" in result.stderr and "'cat'" in result.stderr


def test_the_stages_help_names_real_stages(cli, monkeypatch):
    """`--stages` names its stages by hand (the help must not import NumPy): the textbook's all, the mechanisms' as examples
    (a new mechanism's stage needs no change to the command line: a wrong name lists every stage)."""
    from attncli.document import stages

    monkeypatch.setenv("COLUMNS", "400")
    words = " ".join(cli("run", "--help").stdout.split())
    listed = words.split("Comma list of stages to show: ", 1)[1].split(" [default", 1)[0]
    textbook, mechanisms = listed.split(", and each mechanism's own (", 1)
    examples = mechanisms.split("; a wrong name lists every one)", 1)[0].removesuffix(", …").split(", ")
    names = [stage.name for stage in stages.STAGES]
    assert textbook.split(", ") == [stage.name for stage in stages._TEXTBOOK_STAGES]
    assert examples and all(name in names for name in examples)
    error = cli("run", "cat", "--stages", "nonsense").stderr
    assert error.rstrip().endswith("(expected a comma list of: " + ", ".join(names) + ")")


def test_counts_of_one_are_singular(cli, tmp_path):
    """'L = 1 token', 'rounded to 1 decimal', 'Hand-rounded (1 decimal)', 'blocks of 1 query × 1 key', '1 tile': never '1 tokens'."""
    one = tmp_path / "one.yaml"
    one.write_text("tokens: [solo]\nembeddings: [[1, 0]]\n", encoding="utf-8")
    assert "L = 1 token · d_model = 2" in cli("run", str(one)).stdout
    rounded = cli("run", "cat", "--round-steps", "1", "--format", "markdown").stdout
    assert "rounded to 1 decimal before the next step" in rounded and "Hand-rounded (1 decimal) vs exact output" in rounded
    tiled = cli("run", str(one), "--block-size", "1", "--format", "markdown").stdout
    assert "blocks of 1 query × 1 key" in tiled and "1 tile\n" in tiled and " 1 tiles" not in tiled
