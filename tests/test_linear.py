"""Attention without softmax: linear attention (φ) and retention (decay mask), against published numbers and the naive reference."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import engine
from attncli.core.variants.linear import LinearAttention, Retention, recurrent
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text
from tests import reference as ref
from tests.test_explain_rows import assert_same

FEATURES = {"elu+1": ref.elu_plus_one, "relu": lambda x: max(x, 0.0), "identity": lambda x: x}


@pytest.mark.parametrize(
    ("path", "printed"),
    [
        ("tests/scenarios/linear-attention-leetgpu-1.yaml",
         [[2.8461537, 3.8461537, 4.8461537, 5.8461537], [3.1538463, 4.1538463, 5.1538463, 6.1538463]]),
        ("tests/scenarios/linear-attention-leetgpu-2.yaml", [[4.0, 5.0], [4.0, 5.0]]),
    ],
)  # fmt: skip
def test_leetgpu_linear_attention_examples_through_the_cli(cli, path, printed):
    """LeetGPU's "Linear Attention" Examples 1 and 2 (AlphaGPU/leetgpu-challenges, challenges/hard/56_linear_attention,
    commit 07f01fa9; printed by a float32 program to 7 decimals: 37/13 …), as `attncli run --format json` computes them."""
    result = cli("run", path, "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    np.testing.assert_allclose(doc["heads"][0]["output"], printed, rtol=1e-6)
    assert doc["scenario"]["linear_attention"] == {"feature_map": "elu+1"} and doc["scenario"]["retention"] is None
    weights = np.array(doc["heads"][0]["linear_weights"])
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-15)
    assert "weights" not in doc["heads"][0] and "exp" not in doc["heads"][0]  # the softmax's keys name no softmax here


def _doc(rows: list[list[float]], extra: dict) -> str:
    d = len(rows[0]) // 3
    return json.dumps({
        "tokens": [f"t{i}" for i in range(len(rows))], "scale": "none",
        "Q": [row[:d] for row in rows], "K": [row[d:2 * d] for row in rows], "V": [row[2 * d:] for row in rows], **extra,
    })  # fmt: skip


ROWS = st.integers(1, 3).flatmap(
    lambda d: st.lists(st.lists(st.floats(-3, 3, allow_subnormal=False), min_size=3 * d, max_size=3 * d), min_size=1, max_size=5)
)


@settings(max_examples=80, deadline=None)
@given(ROWS, st.sampled_from(sorted(FEATURES)), st.booleans())
def test_linear_attention_against_the_reference(rows, feature_map, causal):
    """The engine's linear attention equals Katharopoulos et al.'s formula written as loops (tests/reference.py), causal or not."""
    scenario = from_text(_doc(rows, {"linear_attention": {"feature_map": feature_map}, "mask": "causal" if causal else "none"}))
    d = len(rows[0]) // 3
    Q, K, V = ([row[a * d:(a + 1) * d] for row in rows] for a in range(3))
    phi = FEATURES[feature_map]
    sums = [sum(sum(phi(a) * phi(b) for a, b in zip(Q[i], K[j])) for j in range(len(rows)) if not causal or j <= i) for i in range(len(rows))]
    if feature_map != "elu+1" and min(sums) <= 1e-9:  # relu, identity: a row may sum to 0 (or cancel): refused, checked below
        return
    head = engine.run(scenario).head(1)
    expected = ref.linear_attention(Q, K, V, causal=causal, feature=phi)
    np.testing.assert_allclose(head.output, expected, rtol=1e-9, atol=1e-9 * max(1.0, max(map(abs, sum(V, [])))))
    if causal:  # the recurrent form, token by token, is the parallel row
        _, states_out = recurrent(scenario.variant(LinearAttention), 1, np.array(Q), np.array(K), np.array(V))
        np.testing.assert_allclose(states_out, head.output, rtol=1e-9, atol=1e-9)


@settings(max_examples=80, deadline=None)
@given(ROWS, st.floats(0.05, 1.0), st.booleans())
def test_retention_against_the_reference(rows, gamma, scaled):
    """The engine's retention equals RetNet's parallel form (tests/reference.py) and its own recurrent form, with or without a scale."""
    scenario = from_text(_doc(rows, {"retention": {"gamma": gamma}, **({"scale": 2.0} if scaled else {})}))
    d = len(rows[0]) // 3
    Q, K, V = ([row[a * d:(a + 1) * d] for row in rows] for a in range(3))
    divisor = 2.0 if scaled else 1.0
    expected = ref.retention([[x / divisor for x in q] for q in Q], K, V, gamma)
    head = engine.run(scenario).head(1)
    np.testing.assert_allclose(head.kernel.decay, expected["mask"], rtol=1e-14)
    np.testing.assert_allclose(head.kernel.weights, expected["scores"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(head.output, expected["output"], rtol=1e-12, atol=1e-11)
    _, out = recurrent(scenario.variant(Retention), 1, np.array(Q) / divisor, np.array(K), np.array(V))
    np.testing.assert_allclose(out, head.output, rtol=1e-9, atol=1e-11)


def test_retention_per_head_gamma_and_gqa():
    """Two query heads share one key/value head (GQA) and each has its own γ; the reference is run on the engine's own head q, k, v."""
    doc = ("tokens: [a, b, c]\nembeddings: [[1, 0.5], [0.2, -1], [0.3, 0.7]]\nheads: 2\nkv_heads: 1\nscale: none\n"
           "W_Q: [[1, 0, 0.5, 1], [0, 1, -1, 0.2]]\nW_K: [[0.3, 1], [1, -0.4]]\nW_V: [[1, 2], [0.5, -1]]\nretention: {gamma: [0.5, 0.9]}\n")
    result = engine.run(from_text(doc))
    for h, gamma in ((1, 0.5), (2, 0.9)):
        head = result.head(h)
        assert head.kv_head == 1
        expected = ref.retention(head.Q.tolist(), head.K.tolist(), head.V.tolist(), gamma)
        np.testing.assert_allclose(head.output, expected["output"], rtol=1e-13)


def test_softmax_contrast_is_the_softmax_of_the_same_scores():
    """The contrast row is softmax(q·k / s) over the keys the mask shows, not the weights used."""
    head = engine.run(from_text(_doc([[1, 0, 2, 0.5, 1, 1], [0, 1, 1, 1, 0, 2]], {"linear_attention": {}, "mask": "causal"}))).head(1)
    scores = head.Q @ head.K.T
    np.testing.assert_allclose(head.kernel.softmax[1], np.exp(scores[1]) / np.exp(scores[1]).sum(), rtol=1e-14)
    assert head.kernel.softmax[0, 1] == 0.0 and head.kernel.weights[0, 1] == 0.0


@pytest.mark.parametrize("extra", [{"linear_attention": {"feature_map": "relu"}, "mask": "causal"}, {"retention": {"gamma": [0.8]}}])
def test_explain_reads_the_same_rows(extra):
    """explain's lean run (one row) gives the full run's numbers."""
    s = from_text(_doc([[1, -0.5, 2, 0.5], [0.3, 1, 1, 1], [2, 0.2, -1, 3]], extra))
    for position in (1, 2, 3):
        assert_same(s, position=position, head=1)
        assert_same(s, position=position, head=1, round_steps=3)


def test_explain_narrates_the_softmax_it_replaces(cli):
    out = cli("explain", "tests/scenarios/linear-attention-leetgpu-1.yaml", "--word", "a").stdout
    assert "Linear attention instead of the softmax" in out and "α = 7 / 13 = 0.5385 (softmax: 0.7311)" in out
    assert "Exponentials" not in out and "KV cache" in out


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ({"linear_attention": {}, "softcap": 5}, "linear_attention beside softcap"),
        ({"retention": {"gamma": 0.9}, "linear_attention": {}}, "linear_attention beside retention"),
        ({"retention": {"gamma": 1.5}}, "retention.gamma: found 1.5"),
        ({"retention": {"gamma": [0.5, 0.5]}}, "2 decays for heads = 1"),
        ({"retention": {}}, "retention: found"),
        ({"linear_attention": {"feature_map": "softmax"}}, "linear_attention.feature_map"),
        ({"linear_attention": {"phi": "relu"}}, "unknown key 'phi'"),
    ],
)
def test_bad_keys_get_one_clear_error(extra, fragment):
    with pytest.raises(AttnError, match=fragment.replace(".", r"\.").replace("(", r"\(")):
        from_text(_doc([[1, 0, 2], [0, 1, 1]], extra))


def test_a_row_whose_similarities_sum_to_zero_is_refused():
    """relu features of a query with no positive number: 0/0 weights, said in one line, never a nan."""
    with pytest.raises(AttnError, match="similarities sum to 0"):
        engine.run(from_text(_doc([[-1, 1, 2], [-2, 1, 1]], {"linear_attention": {"feature_map": "relu"}})))


@pytest.mark.parametrize("command", [["run", "--block-size", "2"], ["explain", "--word", "a", "--block-size", "2"]])
def test_softmax_only_options_are_refused_in_one_line(cli, command):
    result = cli(command[0], "tests/scenarios/linear-attention-leetgpu-1.yaml", *command[1:])
    assert result.exit_code != 0 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "needs a softmax, and linear_attention has none" in result.stderr


def test_variants_say_what_they_are():
    assert "elu+1" in LinearAttention().describe() and "γ = [0.5, 0.9]" in Retention((0.5, 0.9)).describe()
    assert math.isclose(Retention((0.5,)).decay(1, 3, 3)[2, 0], 0.25) and Retention((0.5,)).decay(1, 3, 3)[0, 2] == 0.0


@pytest.mark.parametrize("extra", [{"linear_attention": {"feature_map": "elu+1"}}, {"retention": {"gamma": 0.7}, "scale": 2.0}])
def test_decode_carries_a_state_whose_output_is_the_parallel_row(cli, tmp_path, extra):
    """decode shows S_t (and z_t) instead of a KV cache; each step's recurrent output is row t of the causal parallel run."""
    rows = [[1, -0.5, 2, 0.5], [0.3, 1, 1, 1], [2, 0.2, -1, 3], [-1, 0.4, 0.5, -2]]
    path = tmp_path / "s.yaml"
    path.write_text(_doc(rows, extra))
    result = cli("decode", str(path), "--format", "json")
    assert result.exit_code == 0, result.output
    steps = json.loads(result.stdout)["steps"]
    K, V = np.array([r[1:2] for r in rows]), np.array([r[2:] for r in rows])
    for t, step in enumerate(steps):
        np.testing.assert_allclose(step["recurrent_output"], step["output"], rtol=1e-12, atol=1e-12)
        if "linear_attention" in extra:
            phi = np.where(K[: t + 1] > 0, K[: t + 1] + 1, np.exp(np.minimum(K[: t + 1], 0)))
            np.testing.assert_allclose(step["state"], phi.T @ V[: t + 1], rtol=1e-13)
            np.testing.assert_allclose(step["normaliser"], phi.sum(axis=0), rtol=1e-13)
    text = cli("decode", str(path)).stdout
    assert "with a recurrent state" in text and "no KV cache" in text and "differs by less than 1e-13 (float64's rounding)" in text


def test_decode_refuses_a_window(cli, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(_doc([[1, 0, 2], [0, 1, 1], [1, 1, 0]], {"linear_attention": {}, "mask": {"causal": True, "window": 1}}))
    result = cli("decode", str(path))
    assert result.exit_code != 0 and result.stdout == "" and "recurrent state" in result.stderr and result.stderr.count("\n") == 1


RETENTION = "tests/scenarios/retention-two-heads.yaml"


@pytest.mark.parametrize("path", ["tests/scenarios/linear-attention-leetgpu-1.yaml", RETENTION])
@pytest.mark.parametrize("fmt", ["table", "markdown", "latex", "csv", "html", "svg", "json"])
def test_every_command_and_format_renders(cli, path, fmt):
    """run, explain and decode in every format: exit 0, something written, nothing on stderr."""
    for command in (["run", path], ["explain", path, "--word", "b"], ["decode", path]):
        if fmt == "csv" and command[0] == "run":
            command += ["--stages", "weights"]
        result = cli(*command, "--format", fmt)
        assert result.exit_code == 0 and result.stdout and not result.stderr, (command, fmt, result.output)


@pytest.mark.parametrize("path", ["tests/scenarios/linear-attention-leetgpu-1.yaml", RETENTION])
def test_the_latex_renders_with_katex(cli, katex_modules, path):
    """run's feature, similarity, decay and contrast tables and explain's step, in LaTeX, render with KaTeX in strict mode."""
    from tests import renderers

    texts = [cli("run", path, "--format", "latex").stdout, cli("explain", path, "--word", "b", "--format", "latex").stdout]
    blocks = [block for text in texts for block in renderers.latex_display_blocks(text)]
    errors = [(i, r.error) for i, r in enumerate(renderers.katex(katex_modules, blocks)) if r.error is not None]
    assert errors == []
