"""Hostile inputs to what landed last (the map, decode from a given cache, attention without softmax, the generator, BART's
target, the scenario keys' number checks): each gives a right result or one clear line, never a traceback.

Each test names the defect it was written for."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attncli.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINTS = ROOT / "tests" / "checkpoints"
PAGED = ROOT / "tests" / "scenarios" / "paged-attention-leetgpu.yaml"
RETENTION = ROOT / "tests" / "scenarios" / "retention-two-heads.yaml"

# A given cache of 2 tokens before 3 new ones, causal, given Q, K and V: the smallest scenario where row t of a step is not
# position t (it is position c + t).
CACHED: dict[str, object] = {
    "cache": {"tokens": ["t1", "t2"], "K": [[1, 0], [0, 1]], "V": [[2, 0], [0, 2]]},
    "tokens": ["t3", "t4", "t5"],
    "Q": [[1, 1], [0, 1], [1, 0]],
    "K": [[0, 1], [1, 1], [2, 0]],
    "V": [[0, 4], [1, 1], [3, 3]],
    "mask": "causal",
}


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False, env=env)
    return result.exit_code, result.stdout, result.stderr


def write(tmp_path: Path, scenario: dict[str, object] | str, name: str = "hostile.yaml") -> str:
    path = tmp_path / name
    path.write_text(scenario if isinstance(scenario, str) else yaml.safe_dump(scenario))
    return str(path)


def refused(*args: str) -> str:
    """The one error line of a refused command: exit 1, nothing on stdout, not an internal error."""
    code, out, err = cli(*args)
    assert (code, out, len(err.splitlines())) == (1, "", 1), (code, out, err)
    assert "internal error" not in err, err
    return err


# -- the map -------------------------------------------------------------------------------------------------------


def test_the_map_of_a_scenario_with_a_given_cache_is_refused_in_one_line() -> None:
    """`heads` on LeetGPU's paged-attention scenario was an internal error (ValueError: as many keys as queries, exit 70)."""
    line = refused("heads", str(PAGED))
    assert "cache" in line


def test_the_shaded_sentence_of_a_scenario_with_a_given_cache_is_refused_in_one_line() -> None:
    line = refused("heads", str(PAGED), "--word", "t2")
    assert "cache" in line


def test_the_map_refuses_retention_whose_rows_are_not_weights() -> None:
    """Retention's rows are scores times a decay: the map printed a negative 'weight on the previous token' (−0.126) and
    called head 2 a previous-token head ("75% of the weight") from rows that do not sum to 1."""
    line = refused("heads", str(RETENTION))
    assert "retention" in line and "not weights" in line


def test_the_map_refuses_linear_attention_with_negative_weights(tmp_path: Path) -> None:
    """φ = identity makes weights negative: the map printed an entropy of −0.062 nats."""
    scenario = {
        "tokens": ["a", "b", "c"], "scale": "none", "linear_attention": {"feature_map": "identity"},
        "Q": [[1, 0], [0, 1], [1, -1]], "K": [[1, 0], [0, 2], [-2, 1]], "V": [[1, 2], [3, 4], [5, 6]],
    }  # fmt: skip
    line = refused("heads", write(tmp_path, scenario))
    assert "linear_attention.feature_map" in line and "row 1 ('a')" in line and "negative" in line


def test_the_map_of_linear_attention_with_elu_still_works() -> None:
    """elu+1 never gives a negative weight: its rows are distributions and the map stays."""
    code, out, err = cli("heads", str(ROOT / "tests" / "scenarios" / "linear-attention-leetgpu-1.yaml"), "-f", "json")
    assert (code, err) == (0, "")
    assert json.loads(out)["heads"][0]["max_weight"] > 0


def _table_lines(columns: int, *extra: str) -> list[str]:
    code, out, err = cli("heads", "--model", str(CHECKPOINTS / "gpt2"), "--sentence", "the_cat_sat", *extra, env={"COLUMNS": str(columns)})
    assert (code, err) == (0, "")
    return out.splitlines()


@pytest.mark.parametrize("columns", [1, 20, 40])
def test_the_statistics_table_is_never_cut_in_a_narrow_terminal(columns: int) -> None:
    """Below the table's width its columns go into bands under each other (each repeating L and H): every number whole."""
    wide = _table_lines(200)
    narrow = _table_lines(columns)
    header = next(line for line in wide if line.split()[:3] == ["L", "H", "ent"])
    rows = [line.split() for line in wide[wide.index(header) + 1 : wide.index(header) + 13]]
    names = header.split()
    bands = [line.split() for line in narrow if line.split()[:2] == ["L", "H"]]
    assert "…" not in "\n".join(narrow) and sorted(name for band in bands for name in band[2:]) == sorted(names[2:])
    for band in bands:
        start = narrow.index(next(line for line in narrow if line.split() == band))
        shown = [line.split() for line in narrow[start + 1 : start + 13]]
        assert shown == [[row[0], row[1], *(row[names.index(name)] for name in band[2:])] for row in rows], (columns, band)


# -- decode from a given cache ---------------------------------------------------------------------------------------


def test_decode_json_of_a_cache_with_a_learned_sink_gives_each_steps_sink_weight(tmp_path: Path) -> None:
    """Each step's sink weight was read at its position (c + t) instead of its row t: IndexError (exit 70) at the last step,
    and the next row's share at the others."""
    path = write(tmp_path, {**CACHED, "sink_logits": [0.5]})
    code, out, err = cli("decode", path, "-f", "json")
    assert (code, err) == (0, "")
    steps = json.loads(out)["steps"]
    code, out, err = cli("run", path, "-f", "json")
    assert [step["sink_weight"] for step in steps] == json.loads(out)["heads"][0]["sink_weight"]
    assert [step["position"] for step in steps] == [3, 4, 5]


@pytest.mark.parametrize("kernel", [{"retention": {"gamma": 0.5}}, {"linear_attention": {"feature_map": "elu+1"}}])
@pytest.mark.parametrize("fmt", ["table", "json", "markdown", "csv"])
def test_decode_without_softmax_from_a_given_cache(tmp_path: Path, kernel: dict[str, object], fmt: str) -> None:
    """The recurrent state was run over the c + L keys with L queries: IndexError (exit 70) for any cache."""
    code, out, err = cli("decode", write(tmp_path, {**CACHED, **kernel}), "-f", fmt)
    assert (code, err) == (0, ""), err
    assert out


@pytest.mark.parametrize("kernel", [{"retention": {"gamma": 0.5}}, {"linear_attention": {"feature_map": "elu+1"}}])
def test_the_recurrent_state_from_a_given_cache_gives_the_parallel_rows(tmp_path: Path, kernel: dict[str, object]) -> None:
    """The state starts from the cached keys and values: each step's recurrent output is the run's row, and the state is
    the sum over every key up to that position, cached ones included (checked here by a loop of its own)."""
    path = write(tmp_path, {**CACHED, **kernel})
    code, out, _ = cli("decode", path, "-f", "json")
    steps = json.loads(out)["steps"]
    code, out, _ = cli("run", path, "-f", "json")
    rows = json.loads(out)["heads"][0]["output"]
    K = np.array([[1, 0], [0, 1], [0, 1], [1, 1], [2, 0]], dtype=float)
    V = np.array([[2, 0], [0, 2], [0, 4], [1, 1], [3, 3]], dtype=float)
    for t, step in enumerate(steps):
        assert np.allclose(step["recurrent_output"], rows[t], rtol=0, atol=1e-12)
        keys = range(2 + t + 1)
        if "retention" in kernel:
            state = sum(0.5 ** (2 + t - j) * np.outer(K[j], V[j]) for j in keys)
        else:
            phi = np.where(K > 0, K + 1, np.exp(K))  # elu + 1
            state = sum(np.outer(phi[j], V[j]) for j in keys)
        assert np.allclose(step["state"], state, rtol=0, atol=1e-12)


# -- the generator -----------------------------------------------------------------------------------------------------


def test_scenarios_new_refuses_a_scenario_that_run_would_refuse() -> None:
    """--d-model 512 --heads 64 --d-k 512 wrote a 325 MB file (about two minutes) that `run` then refused as too large."""
    line = refused("scenarios", "new", "a b c", "--d-model", "512", "--heads", "64", "--d-k", "512")
    assert "50,333,184 numbers" in line and "2,000,000" in line and "--d-model" in line


def test_scenarios_new_refuses_more_attention_cells_than_run_computes() -> None:
    line = refused("scenarios", "new", " ".join(["w"] * 4097))
    assert "attention cells" in line and "16,777,216" in line


def test_scenarios_new_at_its_limit_writes_what_run_reads(tmp_path: Path) -> None:
    code, out, err = cli("scenarios", "new", "a b c", "--d-model", "512", "--heads", "8", "--d-k", "64")
    assert (code, err) == (0, "")
    code, out, err = cli("run", write(tmp_path, out), "--stages", "weights", "-f", "csv")
    assert (code, err) == (0, "")


@pytest.mark.parametrize("padding", ["٣", "1_0", "+2", "2,٣"])
def test_scenarios_new_padding_takes_ascii_digits_only(padding: str) -> None:
    """int() reads '٣' (Arabic-Indic three) and '1_0' as 3 and 10: they were written as padding [3] and [10]."""
    line = refused("scenarios", "new", "a b c d e f g h i j k", "--padding", padding)
    assert "--padding" in line


def test_scenarios_new_padding_keeps_spaces_around_numbers() -> None:
    code, out, err = cli("scenarios", "new", "a b c d", "--padding", " 2 , 3")
    assert (code, err) == (0, "")
    assert "padding: [2, 3]" in out


# -- numbers echoed in errors --------------------------------------------------------------------------------------------

BASE = "tokens: [a, b]\nQ: [[1, 2], [3, 4]]\nK: [[1, 2], [3, 4]]\nV: [[1, 2], [3, 4]]\n"


@pytest.mark.parametrize("line", ["softcap: 1" + "0" * 400, "rope: {offset: 1" + "0" * 400 + "}", "sink_logits: -1" + "0" * 400])
def test_a_400_digit_number_is_named_by_its_length_and_the_reason_stays_on_the_line(tmp_path: Path, line: str) -> None:
    """The 401 digits were echoed whole and the error line cut at 300 characters in the middle: 'is too large for float64'
    was cut away, leaving a wall of zeros."""
    error = refused("run", write(tmp_path, BASE + line))
    assert re.search(r"… \(40[12] characters\) is too large for float64", error)
    assert not re.search(r"\d{30}", error)


def test_a_position_of_1e300_is_echoed_as_written(tmp_path: Path) -> None:
    error = refused("run", write(tmp_path, BASE + "rope: {offset: 1e300}"))
    assert "1e300 is out of range" in error
    assert not re.search(r"\d{30}", error)


# -- BART ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["null", "~"])
def test_a_bart_scenario_with_a_null_target_is_refused(tmp_path: Path, target: str) -> None:
    text = f"model: {CHECKPOINTS / 'bart'}\nlayer: 1\nsentence: the cat\nattention: decoder\ntarget: {target}\n"
    line = refused("run", write(tmp_path, text))
    assert "target" in line and "null" in line


def test_a_bart_scenario_with_a_quoted_null_target_reads_the_word(tmp_path: Path) -> None:
    """Quoting keeps the word: what the null refusal must leave alone."""
    text = f"model: {CHECKPOINTS / 'bart'}\nlayer: 1\nsentence: the cat\nattention: decoder\ntarget: 'null'\n"
    code, out, err = cli("run", write(tmp_path, text), "-f", "json")
    assert (code, err) == (0, "")


# -- MLA --------------------------------------------------------------------------------------------------------------


def test_mismatched_per_head_mla_blocks_name_their_shapes(tmp_path: Path) -> None:
    scenario = yaml.safe_load((ROOT / "scenarios" / "mla.yaml").read_text())
    uk = scenario["mla"]["W_UK"]  # d_c × (H·d_n) = 2 × 4
    scenario["mla"]["W_UK"] = [[row[:2] for row in uk], [row[2:] + [0.5] for row in uk]]  # 2 × 2 and 2 × 3
    line = refused("run", write(tmp_path, scenario))
    assert "mla.W_UK[2]" in line and "2 × 3" in line and "2 × 2" in line


# -- block sizes -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [("run", "cat"), ("explain", "cat", "--word", "cat")])
@pytest.mark.parametrize("block", ["99999999999999999999", str(10**40)])
def test_a_block_size_beyond_64_bits_is_one_line(command: tuple[str, ...], block: str) -> None:
    """orjson writes no integer past 64 bits: --block-size 10**20 -f json was an internal error (TypeError, exit 70) after
    part of the JSON had gone to stdout."""
    line = refused(*command, "--block-size", block, "-f", "json")
    assert "--block-size" in line and "2,147,483,648" in line
    assert not re.search(r"\d{30}", line)


def test_export_refuses_a_block_size_beyond_64_bits_once(tmp_path: Path) -> None:
    """Once for the option, not once per scenario of the folder."""
    posts = tmp_path / "posts"
    posts.mkdir()
    for name in ("a", "b"):
        (posts / f"{name}.yaml").write_text((ROOT / "scenarios" / "cat.yaml").read_text())
    line = refused("export", str(posts), "-d", str(tmp_path), "--block-size", "99999999999999999999", "-f", "json")
    assert "--block-size" in line
    assert not list(tmp_path.glob("*.json"))


def test_the_largest_block_size_is_one_tile() -> None:
    code, out, err = cli("run", "cat", "--block-size", str(2**31), "-f", "json")
    assert (code, err) == (0, "")
    assert len(json.loads(out)["heads"][0]["tiling"]["tiles"]) == 1


@pytest.mark.parametrize(
    "command",
    [("heads", "--model", str(CHECKPOINTS / "gpt2"), "--sentence", "the_cat_sat", "--induction", "5"), ("variance", "--samples", "10")],
)
def test_a_seed_beyond_64_bits_is_one_line(command: tuple[str, ...]) -> None:
    """The JSON carries the seed: --seed 10**23 -f json was an internal error (TypeError, exit 70) after part of the JSON."""
    line = refused(*command, "--seed", str(10**23), "-f", "json")
    assert "--seed" in line and "18,446,744,073,709,551,615" in line


def test_the_largest_seed_is_carried_by_json() -> None:
    code, out, err = cli("variance", "--samples", "10", "--seed", str(2**64 - 1), "-f", "json")
    assert (code, err) == (0, "")
    assert str(2**64 - 1) in out


def test_scenarios_new_refuses_a_window_json_cannot_carry() -> None:
    line = refused("scenarios", "new", "a b c", "--window", str(10**20))
    assert "--window" in line and "2,147,483,648" in line


@pytest.mark.parametrize("command", [("run",), ("decode",), ("explain", "--position", "1")])
def test_a_window_json_cannot_carry_is_refused_in_one_line(tmp_path: Path, command: tuple[str, ...]) -> None:
    path = write(tmp_path, BASE + f"mask: {{causal: true, window: {10**20}}}\n")
    line = refused(command[0], path, *command[1:], "-f", "json")
    assert "mask.window" in line


# -- output paths --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a" * 300, "a" * 300 + "/x.txt"])
def test_a_too_long_output_name_keeps_the_reason_on_the_error_line(tmp_path: Path, name: str) -> None:
    """The path was written whole into the message and the 300-character line cut inside it: the reason
    ('the file name is too long') never reached the terminal."""
    line = refused("run", "mla", "-o", str(tmp_path / name))
    assert "the file name is too long" in line
    assert name[-6:] in line  # the end of the name is what tells files apart


# -- text arguments ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["--sentence", "--compare-sentence", "--word"])
def test_heads_names_bytes_that_are_not_utf8(option: str) -> None:
    """`heads --sentence` with a 0xff byte was an internal error (the tokenizer's child process: TypeError, exit 70), and
    `--word` said the surrogate '\\udcff' is not a token; run and explain name the byte."""
    import os
    import subprocess
    import sys

    args = {"--sentence": b"a\xffb", "--compare-sentence": b"h\xffllo", "--word": b"\xff"}
    command = [os.fsencode(sys.executable), b"-m", b"attncli", b"heads", b"--model", os.fsencode(CHECKPOINTS / "gpt2")]
    command += [b"--sentence", args.get("--sentence", b"hello") if option == "--sentence" else b"hello"]
    if option != "--sentence":
        command += [option.encode(), args[option]]
    done = subprocess.run(command, capture_output=True, timeout=120)
    err = done.stderr.decode()
    assert (done.returncode, done.stdout, len(err.splitlines())) == (1, b"", 1), err
    assert f"{option}: byte" in err and "(0xff) is not UTF-8" in err


def test_decode_counts_a_given_caches_rows_from_the_first_step(tmp_path: Path) -> None:
    """A cache of 4,200 keys and one new token holds 4,201 rows of K and V; decode counted each cached key as held from its
    own position (8.8 million rows) and refused the scenario as more than the 33,554,432 numbers it keeps."""
    c = 4200
    scenario = {
        "cache": {"tokens": ["c"] * c, "K": [[1, 0]] * c, "V": [[0, 1]] * c},
        "tokens": ["a"], "Q": [[1, 0]], "K": [[1, 0]], "V": [[1, 0]], "mask": "causal",
    }  # fmt: skip
    code, out, err = cli("decode", write(tmp_path, scenario), "-f", "json")
    assert (code, err) == (0, "")
    (step,) = json.loads(out)["steps"]
    assert step["position"] == c + 1
    assert step["weights"] == pytest.approx([1 / (c + 1)] * (c + 1), abs=1e-15)
