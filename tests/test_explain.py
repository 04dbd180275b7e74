"""`attncli explain`: seed 001's walk-through, exact and hand-rounded, and agreement with `run`."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import engine
from attncli.core.explain import explain, find_word
from attncli.formats.jsonout import dumps
from attncli.sources import builtin
from attncli.sources.yaml_scenario import from_text, load
from attncli.walkthroughs.data import explain_json
from tests import reference
from tests.strategies import divisor_of, scenarios

ARTICLE_LINES = [
    "q·k(The) = (0 × 0) + (1 × 1) = 1",
    "q·k(cat) = (0 × 1) + (1 × 0) = 0",
    "q·k(sat) = (0 × 1) + (1 × 1) = 1",
    "q·k(on) = (0 × -1) + (1 × 0) = 0",
    "The: e^1 = 2.718",
    "cat: e^0 = 1",
    "Σ = 2.718 + 1 + 2.718 + 1 + 2.718 + 1 = 11.154",
    "α(The) = 2.718 / 11.154 = 0.244",
    "α(cat) = 1 / 11.154 = 0.090",
    "The: 0.244 × [1, 1] = [0.244, 0.244]",
    "cat: 0.090 × [1, -1] = [0.090, -0.090]",
    "sat: 0.244 × [2, 0] = [0.488, 0.000]",
    "on: 0.090 × [-1, 1] = [-0.090, 0.090]",
    "= [1.066, 0.398]",
    "exact: [1.0644, 0.3977]",
]


def test_explain_cat_round_steps_3_is_the_article_digit_for_digit(cli):
    """`attncli explain --word cat --round-steps 3` prints seed 001's own arithmetic."""
    result = cli("explain", "--word", "cat", "--round-steps", "3")
    assert result.exit_code == 0, result.stderr
    for line in ARTICLE_LINES:
        assert line in result.stdout, line


def test_explain_cat_exact_tells_the_whole_story(cli):
    """Without rounding: every step, the exact sum 11.155 and output [1.064, 0.398]."""
    out = " ".join(cli("explain", "--word", "cat").stdout.split())  # prose may wrap
    for heading in ("The query", "One dot product per key", "Exponentials", "The sum", "The weights", "The weighted values", "The output"):
        assert heading in out
    assert "Σ = 2.718 + 1 + 2.718 + 1 + 2.718 + 1 ≈ 11.155" in out  # the shown terms add up to 11.154: ≈
    assert "≈ [1.064, 0.398]" in out  # 0.244 + 0.090 + 0.487 - 0.090 + 0.244 + 0.090 = 1.065
    assert "attends most to The, sat and the (0.244 each) and least to cat, on and mat (0.090 each)" in out


def test_explain_json_round_steps_holds_the_rounded_chain():
    """JSON under --round-steps 3: the article's numbers, and the exact output beside them."""
    scenario = load("cat")
    position, others = find_word(scenario, "cat", None)
    doc = json.loads(dumps(explain_json(explain(engine.run(scenario, round_steps=3), position=position, others=others))))
    assert doc["schema"] == "attncli.explain/1" and doc["head"] == 1
    assert {key: doc["query"][key] for key in ("position", "token", "q")} == {"position": 2, "token": "cat", "q": [0.0, 1.0]}
    assert [k["exp"] for k in doc["keys"]] == [2.718, 1.0, 2.718, 1.0, 2.718, 1.0]
    assert doc["exp_sum"] == 11.154
    assert [k["weight"] for k in doc["keys"]] == [0.244, 0.09, 0.244, 0.09, 0.244, 0.09]
    assert [k["weighted_v"] for k in doc["keys"]] == [
        [0.244, 0.244], [0.09, -0.09], [0.488, 0.0], [-0.09, 0.09], [0.244, 0.244], [0.09, -0.09],
    ]  # fmt: skip
    assert doc["output"] == [1.066, 0.398]
    assert doc["rounding"]["decimals"] == 3
    assert np.round(doc["rounding"]["exact_output"], 3).tolist() == [1.064, 0.398]


def test_explain_json_via_cli_is_standard_json(cli):
    """--format json: one document, exact by default, rounding null."""
    doc = json.loads(cli("explain", "--word", "cat", "--format", "json").stdout)
    assert doc["rounding"] is None
    assert doc["scenario"]["name"] == "cat"
    assert round(doc["output"][0], 4) == 1.0644


def test_run_json_round_steps_has_rounding_key(cli):
    """`run --round-steps 3 --format json`: every stage rounded, the exact output in `rounding`."""
    doc = json.loads(cli("run", "cat", "--format", "json", "--round-steps", "3").stdout)
    assert doc["output"][1] == [1.066, 0.398]
    assert doc["heads"][0]["exp_sum"][1] == 11.154
    assert doc["rounding"]["decimals"] == 3
    assert round(doc["rounding"]["exact_output"][1][0], 4) == 1.0644


def test_causal_explain_shows_hidden_keys(cli):
    """journey-causal: keys after the query are hidden, with exp 0, weight 0 and their raw scores kept."""
    out = cli("explain", "-s", "journey-causal", "--word", "starts").stdout
    assert "Hidden: with (4), one (5), step (6)" in " ".join(out.split())  # prose may wrap
    doc = json.loads(cli("explain", "-s", "journey-causal", "--word", "starts", "--format", "json").stdout)
    hidden = [k for k in doc["keys"] if k["masked"]]
    assert [k["position"] for k in hidden] == [4, 5, 6]
    for key in hidden:
        assert key["exp"] == 0 and key["weight"] == 0 and key["weighted_v"] == [0.0, 0.0]
        assert key["score"] != 0 and key["scaled"] == pytest.approx(key["score"] / 2**0.5)


def test_multihead_explain_head_2(cli):
    """--head 2 explains head 2 and says where its output goes."""
    out = " ".join(cli("explain", "-s", "multihead", "--word", "sat", "--head", "2").stdout.split())
    assert "Head 2 of 2" in out
    assert "columns 3–4 of the heads' concatenation" in out and "W_O" in out
    result = cli("explain", "-s", "multihead", "--word", "sat", "--head", "3")
    assert result.exit_code == 1 and "head 3 does not exist" in result.stderr


def test_repeated_word_uses_first_position_and_says_where_else(cli):
    """"the" is explained at position 1 with a note about position 5; --position 5 picks the other."""
    out = " ".join(cli("explain", "--word", "the").stdout.split())
    assert "position 1 of 6" in out and "also occurs at position 5" in out
    doc = json.loads(cli("explain", "--word", "the", "--position", "5", "--format", "json").stdout)
    assert doc["query"]["position"] == 5 and doc["query"]["token"] == "the"


def test_unknown_word_lists_the_tokens(cli):
    """An unknown word: exit 1, nothing on stdout, the scenario's tokens and a near match on stderr."""
    result = cli("explain", "--word", "cta")
    assert result.exit_code == 1 and result.stdout == ""
    assert "'cta' is not a token" in result.stderr and "did you mean 'cat'?" in result.stderr
    assert "The cat sat on the mat" in result.stderr


def test_extreme_scores_narrate_the_shift(cli, tmp_path):
    """Scores beyond ±700: the exponentials step shows e^(x − m) and explains the shift."""
    path = tmp_path / "big.yaml"
    path.write_text("tokens: [a, b]\nembeddings: [[100], [-100]]\nscale: none\n")
    out = " ".join(cli("explain", "-s", str(path), "--word", "a").stdout.split())
    assert "e^(10000 − 10000) = 1" in out and "shifted by the row's largest score" in out


@pytest.mark.parametrize("name", builtin.names())
def test_explain_works_on_every_builtin_word_and_head(cli, name):
    """Every token of every built-in scenario, in every head, explains without error."""
    scenario = load(name)
    for position in range(1, scenario.L + 1):
        for head in range(1, scenario.heads + 1):
            result = cli("explain", "-s", name, "--position", str(position), "--head", str(head))
            assert result.exit_code == 0, result.stderr


@settings(max_examples=100, deadline=None)
@given(scenarios(), st.data())
def test_explain_agrees_with_the_naive_reference(doc, data):
    """For random scenarios (biases, W_O, causal or not), every number of the explained row is the loop reference's."""
    result = engine.run(from_text(json.dumps(doc)))
    position = data.draw(st.integers(1, len(doc["tokens"])))
    head = data.draw(st.integers(1, doc["heads"]))
    expl = explain(result, position=position, head=head)
    causal = doc["mask"] == "causal"
    expected = reference.attention(
        doc["embeddings"], doc["W_Q"], doc["W_K"], doc["W_V"],
        heads=doc["heads"], divisor=divisor_of(doc), causal=causal,
        b_Q=doc.get("b_Q"), b_K=doc.get("b_K"), b_V=doc.get("b_V"), W_O=doc.get("W_O"), b_O=doc.get("b_O"),
    )  # fmt: skip
    d_k, d_v = len(doc["W_Q"][0]) // doc["heads"], len(doc["W_V"][0]) // doc["heads"]
    h, i = head - 1, position - 1
    Q, K, V = (
        reference.columns(reference.add_bias(reference.matmul(doc["embeddings"], doc[w]), doc.get(b)), h * d, (h + 1) * d)
        for w, b, d in (("W_Q", "b_Q", d_k), ("W_K", "b_K", d_k), ("W_V", "b_V", d_v))
    )

    def close(actual, wanted, atol=1e-9):
        np.testing.assert_allclose(actual, wanted, rtol=1e-9, atol=atol)

    close(expl.q, Q[i])
    for j, key in enumerate(expl.keys):
        assert key.position == j + 1 and key.masked == (causal and j > i)
        close(key.k, K[j])
        close(key.v, V[j])
        score = sum(a * b for a, b in zip(Q[i], K[j]))
        close(key.score, score)
        close(key.scaled, score / divisor_of(doc))
        close(key.weight, expected["weights"][h][i][j], atol=1e-12)
        close(key.weighted_v, [expected["weights"][h][i][j] * v for v in V[j]])
        close(key.exp / expl.exp_sum, expected["weights"][h][i][j], atol=1e-12)  # the shown e^x over the shown Σ
    close(expl.output, expected["head_outputs"][h][i])
    np.testing.assert_allclose(sum(k.weighted_v for k in expl.keys), expl.output, rtol=1e-9, atol=1e-12)
