"""Hostile inputs to the mechanisms and options that landed together (QK-norm, soft-capping, learned sinks, partial and
given RoPE, MLA, the new report options): each gives a result or one clear line naming the key, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from attncli.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
QKV = {
    "tokens": ["a", "b", "c"],
    "heads": 2,
    "Q": [[1, 0, 2, 3], [0.5, -1, 0, 2], [1, 1, 1, 1]],
    "K": [[1, 1, 0, 1], [0, 1, 2, -1], [1, 0, 0, 1]],
    "V": [[0.5, 1, 1.5, 2], [2.5, 3, 3.5, 4], [1, 1, 1, 1]],
    "mask": "causal",
}


def mla(**top: object) -> dict[str, object]:
    """The built-in MLA scenario with top-level keys replaced (a value of None removes the key; `mla` entries merge)."""
    scenario = yaml.safe_load((ROOT / "scenarios" / "mla.yaml").read_text())
    for key, value in top.items():
        if key == "mla":
            scenario["mla"].update(value)
        elif value is None:
            scenario.pop(key, None)
        else:
            scenario[key] = value
    return scenario


def invoke(tmp_path: Path, scenario: dict[str, object], *args: str) -> tuple[int, str, str]:
    path = tmp_path / "hostile.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = CliRunner().invoke(app, [args[0], str(path), *args[1:]], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def one_line(tmp_path: Path, scenario: dict[str, object], *args: str) -> str:
    """The one error line of a refused command (nothing on stdout, exit 1), without its file name."""
    code, out, err = invoke(tmp_path, scenario, *args)
    assert (code, out, len(err.splitlines())) == (1, "", 1), (code, out, err)
    assert "internal error" not in err
    return err.split("hostile.yaml", 1)[1]


def test_a_cap_below_the_precision_is_narrated(tmp_path: Path) -> None:
    """A soft-cap that shows as 0.0000 at the precision was divided by in explain's narration (DivisionByZero, exit 70)."""
    code, out, err = invoke(tmp_path, {**QKV, "softcap": 1e-5}, "explain", "--position", "2", "--head", "2")
    assert (code, err) == (0, ""), err
    assert "Soft-capping the scores" in out


@pytest.mark.parametrize("command", [("run",), ("explain", "--position", "2"), ("decode",)])
def test_qk_norm_beside_mla_is_refused(tmp_path: Path, command: tuple[str, ...]) -> None:
    """`qk_norm` with `mla` was silently ignored by run (no Q_norm) and crashed explain with KeyError: 'qk_norm'."""
    line = one_line(tmp_path, mla(qk_norm=True), *command)
    assert "qk_norm" in line and "mla" in line and "kv_norm" in line


@pytest.mark.parametrize("command", [("run",), ("explain", "--position", "1"), ("decode",), ("run", "--block-size", "2")])
def test_qk_norm_of_a_zero_row_with_no_epsilon_names_epsilon(tmp_path: Path, command: tuple[str, ...]) -> None:
    """ε = 0 and an all-zero q row is 0 / 0: it was reported as an overflow ("use smaller numbers"), the opposite advice."""
    scenario = {**QKV, "Q": [[0, 0, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]], "qk_norm": {"eps": 0}}
    line = one_line(tmp_path, scenario, *command)
    assert "qk_norm.eps" in line and "row 1 ('a')" in line and "all zeros" in line
    assert "overflow" not in line


def test_qk_norm_with_no_epsilon_still_runs_on_nonzero_rows(tmp_path: Path) -> None:
    """ε = 0 stays allowed (a textbook example may leave it out) when no row is all zeros."""
    code, out, err = invoke(tmp_path, {**QKV, "qk_norm": {"eps": 0}}, "run", "-f", "json")
    assert (code, err) == (0, ""), err


@pytest.mark.parametrize("norm", ["kv_norm", "q_norm"])
def test_an_mla_latent_norm_of_a_zero_row_with_no_epsilon_names_it(tmp_path: Path, norm: str) -> None:
    """The same 0 / 0 in MLA's latent RMSNorms was reported as Q·Kᵀ overflowing; now the file, the norm and its eps are named."""
    entries: dict[str, object] = {"kv_norm": {"weight": [1, 1], "eps": 0}, "W_DKV": [[0, 0]] * 4}
    if norm == "q_norm":
        entries = {
            "W_DQ": [[0, 0]] * 4,
            "q_norm": {"weight": [1, 1], "eps": 0},
            "W_UQ": [[1, 0, 0, 1], [0, 1, 1, 0]],
            "W_QR": [[1, 0, 0, 1], [0, 1, 1, 0]],
        }
    code, out, err = invoke(tmp_path, mla(mla=entries), "run")
    assert (code, out, len(err.splitlines())) == (1, "", 1), err
    assert f"hostile.yaml: mla.{norm}.eps: row 1 of the latent is all zeros" in err


@pytest.mark.parametrize("sharpness", ["nan", "NaN", "-nan"])
def test_scenarios_new_refuses_a_sharpness_of_nan(sharpness: str) -> None:
    """Click's range check lets NaN through: `scenarios new --sharpness nan` wrote nan weights that `run` then refused."""
    result = CliRunner().invoke(app, ["scenarios", "new", "the cat sat", "--sharpness", sharpness])
    assert (result.exit_code, result.stdout) == (1, ""), result.stdout
    assert result.stderr.startswith("attncli: error: --sharpness: found nan") and len(result.stderr.splitlines()) == 1
