"""`heads --word A --to B`: which head links A to B, every layer × head ranked by the weight A gives B."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import attncli.api as attn

GPT2 = "tests/checkpoints/gpt2"
SENTENCE = "The cat sat on the mat and the cat"


@pytest.fixture
def at_root(monkeypatch):
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parent.parent)


def test_every_head_is_ranked_by_the_weight_each_layer_gives(at_root):
    """The weights and ranks equal those read from each layer's own run (the engine's weights of that head, row A, columns B)."""
    mapped = attn.heads(model=GPT2, sentence=SENTENCE, word="cat", position=9, to="sat")
    ranked = mapped.links()
    assert len(ranked) == 3 * 4 and [r.rank for r in ranked] == list(range(1, 13))
    assert all(a.weight >= b.weight for a, b in zip(ranked, ranked[1:]))
    for link in ranked:
        layer = attn.run(attn.load_model(GPT2, layer=link.layer, sentence=SENTENCE))
        expected = layer.head(link.head).weights[8, 2]  # query 'cat' at position 9, key 'sat' at position 3
        assert link.weight == pytest.approx(expected, abs=1e-12)


def test_a_repeated_key_word_sums_its_positions_and_a_position_picks_one(at_root):
    """--to cat counts both copies of 'cat' the query sees; --to-position 2 only the first."""
    both = {(r.layer, r.head): r.weight for r in attn.heads(model=GPT2, sentence=SENTENCE, word="mat", to="cat").links()}
    first = {(r.layer, r.head): r.weight for r in attn.heads(model=GPT2, sentence=SENTENCE, word="mat", to_position=2).links()}
    run = attn.run(attn.load_model(GPT2, layer=2, sentence=SENTENCE))
    weights = run.head(3).weights  # (L, L); 'mat' is position 6: it sees the 'cat' at 2, not the one at 9 (causal)
    assert both[(2, 3)] == pytest.approx(weights[5, 1] + weights[5, 8], abs=1e-12) and weights[5, 8] == 0
    assert first[(2, 3)] == pytest.approx(weights[5, 1], abs=1e-12)


def test_a_scenario_links_its_one_layer():
    """A scenario's heads are ranked too: the built-in multihead's two heads, by their weights from the engine."""
    ranked = attn.heads("multihead", word="sat", to="cat").links()
    run = attn.run("multihead")
    tokens = [t.lower() for t in run.scenario.tokens]
    q, k = tokens.index("sat"), tokens.index("cat")
    expected = sorted(((run.head(h).weights[q, k], h) for h in (1, 2)), key=lambda x: -x[0])
    assert [(r.head, r.weight) for r in ranked] == [(h, pytest.approx(w, abs=1e-15)) for w, h in expected]


def test_json_has_its_own_schema_and_one_row_per_head(cli, at_root):
    """attncli.heads-link/1: from, to (every position), one row per head with layer, head, weight, rank and its explain command."""
    result = cli("heads", "--model", GPT2, "--sentence", SENTENCE, "--word", "cat", "--position", "9", "--to", "the", "--format", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema"] == "attncli.heads-link/1"
    assert data["from"] == {"label": "␣cat", "position": 9} and data["to"]["positions"] == [1, 5, 8]
    assert [(h["layer"], h["head"]) for h in data["heads"]] != [] and len(data["heads"]) == 12
    assert [h["rank"] for h in data["heads"]] == list(range(1, 13))
    assert data["heads"][0]["explain"].startswith("attncli explain --model tests/checkpoints/gpt2 --layer ")


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "svg", "html", "typst"])
def test_every_format_of_the_map_draws_the_link(cli, at_root, fmt):
    """The grid shaded by the link weight, the ranked table and the best heads' commands, in every format the map draws."""
    result = cli("heads", "--model", GPT2, "--sentence", SENTENCE, "--word", "cat", "--position", "9", "--to", "sat", "--top", "3",
                 "--format", fmt)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        assert [r["rank"] for r in rows] == ["1", "2", "3"] and set(rows[0]) == {"rank", "layer", "head", "weight"}
    elif fmt == "svg":
        root = ET.fromstring(text.encode())
        assert "Which heads link" in "".join(root.itertext())
    elif fmt in ("table", "markdown", "html"):
        assert text.count("attncli explain --model") == 3
    else:
        assert "Which heads link" in text


@pytest.mark.parametrize(("args", "fragment"), [
    (["--to", "sat"], "--to: found 'sat' without a query token"),
    (["--word", "cat", "--to", "dog"], "--to: 'dog' is not a token of the sentence"),
    (["--word", "cat", "--to-position", "40"], "--to-position: position 40 is outside the sentence"),
    (["--word", "cat", "--to", "sat", "--to-position", "2"], "--to-position: position 2 holds '␣cat', not 'sat'"),
    (["--word", "cat", "--to", "sat", "--sort", "self"], "--sort: found self beside a query token"),
    (["--word", "cat", "--to", "sat", "--layer", "2"], "--layer: found 2 beside --to"),
])  # fmt: skip
def test_a_link_that_cannot_be_asked_is_one_line(cli, at_root, args, fragment):
    """Each wrong combination is one line on stderr naming the option, and nothing on stdout."""
    result = cli("heads", "--model", GPT2, "--sentence", SENTENCE, *args)
    assert result.exit_code == 1 and result.stdout == "" and result.stderr.count("\n") == 1
    assert fragment in result.stderr, result.stderr


@pytest.mark.parametrize(("scenario", "args", "message"), [
    ("journey-causal", ["--word", "journey", "--to", "step"],
     "--to: the mask hides 'step' (position 6) from 'journey' (position 2) in every layer: no head can link them "
     "(expected a key the query sees: positions 1–2)"),
    ("sliding-window", ["--word", "lazy", "--to", "brown"],
     "--to: the mask hides 'brown' (position 3) from 'lazy' (position 8) in every layer: no head can link them "
     "(expected a key the query sees: positions 1, 6, 7, 8)"),
])  # fmt: skip
def test_a_key_the_mask_hides_is_not_ranked_as_a_link(cli, scenario, args, message):
    """A key after a causal query, or outside its window, gets no weight in any head: one line saying why, not a ranking of 0%."""
    result = cli("heads", scenario, *args)
    assert result.exit_code == 1 and result.stdout == "" and result.stderr == f"attncli: error: {message}\n"
    assert cli("heads", "sliding-window", "--word", "lazy", "--to", "the").exit_code == 0  # one of its two copies is seen


def test_the_grid_holds_each_heads_weight():
    """The grid's one-cell thumbnails are the ranked weights, at each head's place."""
    from attncli.walkthroughs import links

    mapped = attn.heads("multihead", word="sat", to="cat")
    ranked = mapped.links()
    cells = links.grid(mapped.map, ranked)
    assert cells.shape == (1, 2, 1, 1)
    assert {(r.head, r.weight) for r in ranked} == {(h + 1, float(cells[0, h, 0, 0])) for h in range(2)}
    assert np.isclose(cells.sum(), sum(r.weight for r in ranked))


def test_the_title_counts_heads_as_the_map_title_does(at_root):
    """The link grid's title says '3 layers × 4 heads', not a bare '× 4'."""
    from attncli.walkthroughs import links

    mapped = attn.heads(model=GPT2, sentence=SENTENCE, word="cat", position=9, to="sat")
    assert links.title(mapped.source, mapped.map, [2]).endswith("3 layers × 4 heads")
