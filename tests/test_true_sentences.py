"""Every sentence attncli prints about a scenario is true of that scenario (issue 23): one test per sentence that was not."""

from __future__ import annotations

import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

HERE = Path(__file__).parent
GPT2 = HERE / "checkpoints" / "gpt2"
SVG = "{http://www.w3.org/2000/svg}"


def _scenario(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


ALIBI_OPEN = """name: alibi-open
sentence: the cat sat on the mat
heads: 2
embeddings:
  the: [1, 0, 1, 0]
  cat: [0, 1, 0, 1]
  sat: [1, 1, 0, 0]
  on:  [0, -1, 1, 0]
  mat: [0, 1, 1, 1]
alibi:
  slopes: [1.0, 0.25]
precision: 3
"""


def test_alibi_without_a_causal_mask_says_later_keys_are_raised(cli, tmp_path):
    """With no mask, ALiBi's −m·(i − j) is positive for keys after the query: explain says their scores are raised, and they are."""
    result = cli("explain", "-s", _scenario(tmp_path, "alibi-open", ALIBI_OPEN), "--word", "cat")
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "scores are raised" in text and "j > i" in text
    # the numbers agree: mat (position 6) gets + 1 × 4 on top of its scaled score
    assert re.search(r"mat: 0\.707 − 1 × \(2 − 6\) = 4\.707", text), text


def test_alibi_with_a_causal_mask_says_nothing_of_raised_scores(cli):
    """The built-in alibi is causal: every visible key lies before the query, so only 'lowered' is said, and = is exact (slope 1)."""
    result = cli("explain", "alibi", "--word", "cat")
    text = " ".join(result.stdout.split())
    assert "lowered" in text and "raised" not in text
    assert "the (1): 0 − 1 × (2 − 1) = -1" in text  # slope 1 is exactly the slope shown: =, not ≈


DIRECT = """name: direct
sentence: a b c
heads: 2
Q: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]]
K: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]]
V: [[1, 2, 3, 4], [5, 6, 7, 8], [9, 1, 2, 3]]
"""


def test_given_q_k_v_are_not_called_columns_of_weights(cli, tmp_path):
    """Q, K and V given directly have no W_Q, W_K, W_V: the intro names the given matrices' columns."""
    result = cli("explain", "-s", _scenario(tmp_path, "direct", DIRECT), "--word", "b", "--head", "2")
    text = " ".join(result.stdout.split())
    assert "W_Q" not in text and "W_K" not in text and "W_V" not in text
    assert "columns 3–4 of the given Q and K and 3–4 of V" in text


@pytest.mark.parametrize(("scenario", "argument"), [("cat", "exp(S)"), ("journey", "exp(S / √d_k)"), ("journey-causal", "exp(masked)")])
def test_the_exponentials_title_names_what_was_exponentiated(cli, scenario, argument):
    """`E = exp(masked)` only where a mask hides something; otherwise the scores as they are (never `S / 1`)."""
    result = cli("run", scenario, "--stages", "exp")
    assert f"E = {argument}" in result.stdout
    assert "S / 1" not in result.stdout


def test_a_formula_names_no_m_that_stages_left_out(cli):
    """--stages without masked: E and A say mask(…) themselves instead of naming an M that is not shown."""
    shown = cli("run", "journey-causal", "--stages", "exp,weights", "--format", "latex").stdout
    assert not re.search(r"\bM(\^|\b)", shown) and r"\operatorname{mask}" in shown
    everything = cli("run", "journey-causal", "--format", "latex").stdout
    assert r"\operatorname{softmax}\left(M\right)" in everything  # with M shown, A = softmax(M)


def test_a_checkpoint_row_is_a_hidden_state_not_an_embedding(cli):
    """A checkpoint's layer input is a hidden state: x(token), never 'embedding e(token)'; run's table says so too."""
    result = cli("explain", "--model", str(GPT2), "--layer", "2", "--sentence", "cats and dogs", "--word", "and")
    text = " ".join(result.stdout.split())
    assert "x(␣and) = [" in text and "q = x·W_Q" in text and "hidden state x" in text
    assert "e(␣and)" not in text and "embedding" not in text
    table = cli("run", "--model", str(GPT2), "--layer", "2", "--sentence", "cats and dogs", "--stages", "embeddings").stdout
    assert "Hidden states (what enters the attention)  X" in table and "Embeddings" not in table


def test_a_built_in_row_is_still_an_embedding(cli):
    """A scenario's X is its embeddings: e(token)."""
    text = " ".join(cli("explain", "journey", "--word", "starts").stdout.split())
    assert "e(starts) = [" in text and "embedding e" in text


def test_masked_heatmap_cells_show_no_number(cli):
    """Hatched (masked) cells of the SVG heatmap carry no number; every visible cell does."""
    root = ElementTree.fromstring(cli("run", "journey-causal", "--stages", "weights", "--format", "svg").stdout)
    masked = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "cell masked"]
    cells = [r for r in root.iter(f"{SVG}rect") if (r.get("class") or "").startswith("cell ")]
    numbers = [t for t in root.iter(f"{SVG}text") if re.fullmatch(r"k\d+", t.get("class") or "")]
    assert len(masked) == 15 and len(numbers) == len(cells) - len(masked) == 21


@pytest.mark.parametrize("fmt", ["html", "svg"])
def test_explain_head_mark_is_a_superscript(cli, fmt):
    """Head 2's weights are α⁽²⁾ in explain's HTML and SVG, as everywhere else."""
    shown = cli("explain", "multihead", "--word", "sat", "--head", "2", "--format", fmt).stdout
    assert "α⁽²⁾" in shown and "⁽2⁾" not in shown
