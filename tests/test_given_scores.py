"""A score matrix given directly (`scores:`): no Q·Kᵀ; everything from the scaling on, shown and checked.

The engine against the naive reference on random scenarios (tests/strategies.py's given_score_documents): the reference's
own head_attention, handed each head's scores as its queries and the identity as its keys (so that q_i·k_j = S_ij), with
the same scale, mask, cap and sink; the stage table, explain's steps and every format on tests/scenarios/given-scores.yaml;
one line for each thing that makes no sense beside given scores.
"""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings

from attncli.core import engine
from attncli.core.explain import explain_scenario
from attncli.core.variants import GivenScores
from attncli.sources.yaml_scenario import from_text, load
from attncli.walkthroughs.narration import intro, steps
from tests import reference
from tests.strategies import given_score_documents

EXAMPLE = "tests/scenarios/given-scores.yaml"


@settings(max_examples=150, deadline=None)
@given(given_score_documents())
def test_given_scores_give_the_references_weights_and_output(document):
    """Every head's scaled scores, weights and output equal the reference's from the same scores (as q·k with identity keys)."""
    s = from_text(json.dumps(document))
    H, G = document["heads"], document["kv_heads"]
    scores = document["scores"]["S"] if isinstance(document["scores"], dict) else document["scores"]
    scores = scores if isinstance(scores[0][0], list) else [scores]
    L = len(document["tokens"])
    d_v = len(document["V"][0]) // G
    identity = [[float(i == j) for j in range(L)] for i in range(L)]
    causal = document["mask"] == "causal"
    result = engine.run(s)
    for head in result.heads:
        g = (head.head - 1) * G // H
        sink = document.get("sink_logits", [None] * H)[head.head - 1]
        wanted = reference.head_attention(scores[head.head - 1], identity, [row[g * d_v : (g + 1) * d_v] for row in document["V"]],
                                          scale=1 / s.scale.divisor, sees=(lambda i, j: j <= i) if causal else None,
                                          cap=document.get("softcap"), sink=sink)  # fmt: skip
        np.testing.assert_allclose(head.scores, scores[head.head - 1], rtol=0, atol=0)
        np.testing.assert_allclose(head.weights, wanted["weights"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(head.output, wanted["output"], rtol=1e-9, atol=1e-12)


def test_the_example_divides_by_the_given_d_k():
    """√d_k = √64 = 8: head 1's row 'cat' is softmax(8 / 8, 16 / 8) = e / (e + e²), e² / (e + e²)."""
    s = load(EXAMPLE)
    assert s.variant(GivenScores) is not None and s.d_k == 64 and s.scale.divisor == 8.0
    weights = engine.run(s).head(1).weights[1]
    e1, e2 = math.exp(1), math.exp(2)
    np.testing.assert_allclose(weights, [e1 / (e1 + e2), e2 / (e1 + e2), 0, 0], rtol=1e-15, atol=0)


def test_the_stage_table_shows_no_queries_or_keys(cli):
    """run shows V as given and S as given, and neither Q nor K; its JSON has the scores and no Q or K per head."""
    table = " ".join(cli("run", EXAMPLE).stdout.split())
    assert "S⁽¹⁾ (given)" in table and "V⁽¹⁾ (given)" in table
    assert "Queries" not in table and "Keys " not in table and "Q·K" not in table
    doc = json.loads(cli("run", EXAMPLE, "--format", "json").stdout)
    assert doc["scenario"]["given_scores"] is True and doc["scenario"]["d_k"] == 64
    head = doc["heads"][0]
    assert "Q" not in head and "K" not in head
    assert head["scores"][3] == [0.0, 16.0, 8.0, 8.0]
    assert json.loads(cli("run", "cat", "--format", "json").stdout)["scenario"]["given_scores"] is False


def test_explain_starts_at_the_given_row():
    """explain says where the scores come from, writes the query's row of S in place of the query and the dot products."""
    expl = explain_scenario(load(EXAMPLE), position=4, head=2)
    said = " ".join(intro(expl))
    assert "row 4 of the given S of head 2 (of 2); its values are columns 3–4 of V" in said and "no dot products" in said
    told = steps(expl, 4)
    titles = [step.title for step in told]
    assert titles[0] == "The given scores" and "One dot product per key" not in titles and "The query" not in titles
    assert titles[1] == "Scaling"
    assert [line.rhs for line in told[0].lines] == ["-8", "0", "4", "16"]


def test_given_scores_are_in_every_format(cli):
    """run and explain of the example write every format; --block-size tiles the given scores."""
    for command in (["run"], ["explain", "--word", "down", "--head", "2"], ["run", "--block-size", "2"]):
        for fmt in ("table", "json", "markdown", "latex", "csv", "html", "svg", "typst"):
            result = cli(*command, EXAMPLE, "--format", fmt)
            assert result.exit_code == 0 and result.stdout, (command, fmt, result.stderr)


BASE = {"tokens": ["a", "b"], "scores": [[1.0, 0.0], [0.5, 2.0]], "V": [[1.0], [0.0]], "scale": "none"}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"Q": [[1.0], [0.0]]}, "`Q` beside `scores`"),
        ({"embeddings": [[1.0], [0.0]]}, "`embeddings` beside `scores`"),
        ({"rope": True}, "`rope` beside `scores`"),
        ({"V": None}, "the scores are given but not V"),
        ({"scores": [[1.0, 0.0]]}, "the scores are 1 × 2"),
        ({"scores": [[[1.0, 0.0], [0.5, 2.0]]] * 2}, "2 score matrices for heads = 1"),
        ({"scale": None}, "cannot be divided by √d_k"),
        ({"scores": {"S": [[1.0, 0.0], [0.5, 2.0]], "d_k": 0}}, "scores.d_k"),
        ({"scores": {"d_k": 4}}, "`scores` has no `S`"),
        ({"scores": "identity"}, "scores: found"),
    ],
)
def test_what_makes_no_sense_beside_given_scores_is_one_line(changes, message, cli, tmp_path):
    """Q, K, embeddings or RoPE beside the scores, no V, scores of the wrong shape or count, √d_k without d_k: one line each."""
    doc = {key: value for key, value in {**BASE, **changes}.items() if value is not None}
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = cli("run", str(path))
    assert result.exit_code != 0 and result.stdout == ""
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_decode_refuses_given_scores_in_one_line(cli):
    """decode shows q meeting the cached k: with the scores given there are none, which it says in one line."""
    result = cli("decode", EXAMPLE)
    assert result.exit_code != 0 and "there is no q and no k to cache" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
