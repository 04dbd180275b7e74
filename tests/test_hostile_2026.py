"""Hostile inputs to what landed with Llama 4, Gemma 3n and the precision lab (the query temperature, the value norm,
chunked attention, the `--dtype` lab, the new families' configs): each gives a right result or one clear error.

Each test names the defect it was written for."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import attncli.api as attn
from attncli.cli.app import app
from attncli.core import engine, precision
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text

SCENARIOS = Path(__file__).parent / "scenarios"
BASE = """name: hostile
tokens: [the, cat, sat, on]
embeddings: [[1, 0, 2, 1], [0, 1, 1, 3], [2, 2, 0, 1], [0, 0, 0, 0]]
heads: 2
W_Q: identity
W_K: identity
W_V: identity
mask: causal
"""


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(("key", "value"), [("shift", "1e20"), ("offset", "1e19"), ("offset", "9223372036854775807"), ("original", "1e300")])
def test_a_query_temperatures_position_beyond_2_to_the_31_is_one_error(key: str, value: str, tmp_path: Path) -> None:
    """`query_temperature: {shift: 1e20}` was an internal OverflowError, and `offset: 2⁶³ − 1` wrapped NumPy's int64 sum to a
    negative position whose NaN τ was reported as "weights·V overflows float64"."""
    given = {"beta": "0.1", "original": "2", key: value}
    path = tmp_path / "t.yaml"
    path.write_text(BASE + "query_temperature: {" + ", ".join(f"{k}: {v}" for k, v in given.items()) + "}\n", encoding="utf-8")
    code, out, err = cli("run", str(path))
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and f"query_temperature.{key}:" in err and "2147483648" in err


def test_a_value_norm_with_eps_0_on_a_zero_value_row_says_so() -> None:
    """`v_norm: 0` on an all-zero value row said "V / rms(V) overflows float64 … expected smaller numbers" for a 0 / 0;
    QK-norm's own ε = 0 names the row and asks for ε > 0, and so does the value norm now."""
    with pytest.raises(AttnError, match=r"head 1, row 4 \('on'\): v is all zeros and ε = 0") as caught:
        engine.run(from_text(BASE + "v_norm: 0\n"))
    assert caught.value.key == "v_norm"
    assert engine.run(from_text(BASE + "v_norm: 1e-6\n")).head(1).value_normed[3].tolist() == [0.0, 0.0]


def test_the_precision_lab_meets_the_values_after_the_value_norm() -> None:
    """`run --dtype` on a scenario with `v_norm` computed the kernels from V before its norm, so the lab's "exact" output
    was not the output `run` prints (value-norm.yaml's first row: 2.5 against 1.2127)."""
    result = attn.run(str(SCENARIOS / "value-norm.yaml")).result
    for h in result.heads:
        lab = precision.head_lab(h, h.visible, result.scenario.scale.divisor, precision.number_format("fp32"), "eager")
        step = lab.step("output")
        assert step is not None
        np.testing.assert_allclose(step.exact, h.output, rtol=1e-14, atol=1e-15)
