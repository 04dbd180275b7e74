"""Random and mutated YAML through the CLI: a valid result or one clean error, never a traceback."""

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from attncli.cli.app import app
from attncli.sources import builtin

SEEDS = [builtin.path(name).read_text(encoding="utf-8") for name in builtin.names()]
SNIPPETS = [
    ": ", "- ", "[", "]", "{", "}", ", ", "\n", "  ", "\t", "#", "&a ", "*a", "!!python/object:os.system ",
    "!!str ", "---\n", "...\n", ".nan", ".inf", "-.inf", "1e999", "yes", "null", "~", "''", '"', "|\n",
    "heads: 3\n", "heads: 0\n", "mask: causal\n", "scale: -1\n", "W_O: [[1]]\n", "b_Q: [1, 2, 3]\n",
    "tokens: []\n", "sentence: a b\n", "precision: 99\n", "<<: *a\n", "\x00", "\ufeff", "é", "0x1F", "1_000",
]  # fmt: skip


@st.composite
def mutated(draw):
    """A built-in scenario with a few random edits: deletions, insertions of YAML-ish snippets."""
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            text = text[:at] + text[at + draw(st.integers(1, 20)) :]
        else:
            text = text[:at] + draw(st.sampled_from(SNIPPETS)) + text[at:]
    return text


yamlish = st.lists(
    st.sampled_from(list("abc01-.:[]{},&*!#|>'\" \n\t") + ["yes", "on", "null", "\n  ", "tokens: ", "embeddings: "]), max_size=80
).map("".join)


def check(text: str, command: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.yaml"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        args = [arg.replace("FILE", str(path)) for arg in command]
        result = CliRunner().invoke(app, args, catch_exceptions=True)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.stderr
    if result.exit_code == 0:
        if "json" in command:
            json.loads(result.stdout)
    else:
        assert result.exit_code == 1, (result.exit_code, result.stderr)
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("attncli: error: "), result.stderr


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_scenarios_give_a_result_or_one_clean_error(text):
    """Mutations of real scenarios, through `run --format json`."""
    check(text, ["run", "FILE", "--format", "json"])


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_scenarios_through_tables_and_explain(text):
    """The same mutations through the table renderer and `explain`."""
    check(text, ["run", "FILE"])
    check(text, ["explain", "--scenario", "FILE", "--position", "1"])


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(yamlish)
def test_random_yaml_gives_a_result_or_one_clean_error(text):
    """Random YAML-like text, through `run --format json`."""
    check(text, ["run", "FILE", "--format", "json"])
