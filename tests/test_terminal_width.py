"""`model info` and `scenarios` fit the terminal: long values wrap under themselves instead of running to 229 characters."""

from __future__ import annotations

import pytest

from tests.test_checkpoints import HERE

ROOT = HERE.parent.parent
MODELS = [HERE / "gguf" / "llama.gguf", HERE / "gguf" / "gemma3-q8_0.gguf", HERE / "gguf" / "quantised.gguf", HERE / "llama", HERE / "bart"]


@pytest.fixture(autouse=True)
def _in_the_checkout(monkeypatch):
    """Paths relative to the checkout, as a user types them: a path is one word, and a word longer than the line stays whole."""
    monkeypatch.chdir(ROOT)


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


@pytest.mark.parametrize("columns", [100, 60])
@pytest.mark.parametrize("model", MODELS, ids=[path.name for path in MODELS])
def test_model_info_fits_the_terminal(cli, monkeypatch, model, columns):
    """Every line of `model info` fits COLUMNS but for a single word longer than the values' column (a path, never cut), and the
    wrapped text is the unwrapped text (nothing lost or cut)."""
    monkeypatch.setenv("COLUMNS", str(columns))
    narrow = cli("model", "info", str(model.relative_to(ROOT))).stdout
    monkeypatch.setenv("COLUMNS", "1000")
    wide = cli("model", "info", str(model.relative_to(ROOT))).stdout
    assert widest(wide) > columns  # the case this test is about: lines longer than the terminal
    column = len(narrow.splitlines()[0]) - len(str(model.relative_to(ROOT)))  # `file  tests/…` or `folder  tests/…`
    too_long = [line for line in narrow.splitlines() if len(line) > columns]
    assert all(len(line[column:].split()) == 1 for line in too_long), narrow
    assert sum(map(len, too_long)) < len(narrow) // 10, narrow
    assert narrow.split() == wide.split()


def test_a_wrapped_value_continues_under_itself(cli, monkeypatch):
    """A wrapped line of a field starts at the values' column, so the names stay a column of their own."""
    monkeypatch.setenv("COLUMNS", "60")
    lines = cli("model", "info", "tests/checkpoints/gguf/llama.gguf").stdout.splitlines()
    column = lines[0].index("tests/")  # `file  tests/checkpoints/…`: where the values start
    continued = [line for line in lines if line.startswith(" ")]
    assert continued and all(line[:column].isspace() and not line[column].isspace() for line in continued), lines


@pytest.mark.parametrize("columns", [100, 60])
def test_scenarios_fits_the_terminal(cli, monkeypatch, columns):
    """`attncli scenarios` wraps each description under the descriptions' column, every line within COLUMNS."""
    monkeypatch.setenv("COLUMNS", str(columns))
    out = cli("scenarios").stdout
    assert widest(out) <= columns, out
    lines = out.splitlines()
    column = lines[0].index("ALiBi")
    assert any(line.startswith(" " * column) and line[column] != " " for line in lines)  # a description went on
    monkeypatch.setenv("COLUMNS", "1000")
    assert cli("scenarios").stdout.split() == out.split()


def test_a_listing_s_last_column_wraps(monkeypatch):
    """A listing whose last column is text (a token's piece, a scenario's description) wraps that column under itself."""
    from attncli.document.blocks import Document, Table
    from attncli.formats.terminal import text_lines

    table = Table(("name", "what"), [["cat", "the cat sat on the mat " * 4]], (False, False), listing=True)
    lines = text_lines(Document("t", [table]), 40)
    assert lines[0].startswith("name  what") and len(lines) > 2 and max(map(len, lines)) <= 40
    assert all(line.startswith("     ") for line in lines[2:])
