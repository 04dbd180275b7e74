"""Kimi Delta Attention (KDA): the delta rule's `decay`, each key channel of the state decayed at its own rate before each
token, against a naive token-by-token reference (tests/reference.py), and shown as what it is.

No published worked example of KDA with its numbers was found (searched: the Kimi Linear paper's notes, flash-linear-
attention's docs, third-party write-ups give the recurrence only), so there is no golden test here; the reference is the
paper's recurrence S_t = (I − β k_t k_tᵀ)·Diag(α_t)·S_{t−1} + β k_t v_tᵀ written out with loops, and the live tier runs
transformers' own (kimi_linear's reference loop) on the worked example.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import engine
from attncli.core.variants import DeltaRule
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text
from tests import reference

KDA = (Path(__file__).parent / "scenarios" / "kda.yaml").read_text()  # the worked example

rows = st.lists(st.floats(-2, 2).filter(lambda x: abs(x) > 1e-3), min_size=2, max_size=2)


@settings(max_examples=40, deadline=None)
@given(
    X=st.lists(rows, min_size=1, max_size=6), beta=st.floats(0.05, 1.0),
    decay=st.lists(st.lists(st.floats(0.05, 1.0), min_size=2, max_size=2), min_size=6, max_size=6),
)  # fmt: skip
def test_the_unrolled_weights_equal_the_paper_s_recurrence(X, beta, decay):
    """weights·V of the engine (the unrolled form) equals KDA run token by token with loops, whatever the decays."""
    L = len(X)
    alpha = decay[:L]
    W_Q, W_K = [[1.0, 0.5], [-0.5, 1.0]], [[1.0, 0.0], [0.25, 1.0]]
    s = from_text(f"tokens: [{', '.join(f't{i}' for i in range(L))}]\nembeddings: {json.dumps(X)}\nW_Q: {json.dumps(W_Q)}\n"
                  f"W_K: {json.dumps(W_K)}\nW_V: [[1, 0], [0, 1]]\nmask: causal\n"
                  f"delta_rule: {{beta: {beta!r}, decay: {json.dumps(alpha)}}}\n")  # fmt: skip
    Q, K = reference.matmul(X, W_Q), reference.matmul(X, W_K)
    if any(math.hypot(*row) < 1e-6 for row in Q + K):  # no direction to normalise: refused, not compared
        return
    expected = reference.kda(Q, K, X, beta, alpha, math.sqrt(2))
    head = engine.run(s).heads[0]
    np.testing.assert_allclose(head.output, expected, rtol=0, atol=1e-10)


def test_without_decay_it_is_the_delta_rule_and_the_decay_changes_every_later_output():
    """α = 1 everywhere gives the plain delta rule's numbers; the scenario's decays change each output after the first."""
    s = from_text(KDA)
    plain = from_text(KDA.replace(", decay: [0.9, 0.2]", ""))
    ones = from_text(KDA.replace("decay: [0.9, 0.2]", "decay: [1, 1]"))
    decayed, delta, one = (engine.run(x) for x in (s, plain, ones))
    for a, b, c in zip(decayed.heads, delta.heads, one.heads):
        np.testing.assert_allclose(c.output, b.output, rtol=0, atol=1e-14)
        np.testing.assert_array_equal(a.output[0], b.output[0])  # the first token has nothing to decay
        assert np.abs(a.output[1:] - b.output[1:]).min(axis=1).max() > 1e-3


def test_decay_given_per_token_and_per_head():
    """A matrix of a row per token, and one matrix per head, are read as such: each head decays by its own."""
    per_token = "[[0.9, 0.2], [0.5, 0.5], [1.0, 0.1], [0.3, 0.7]]"
    s = from_text(KDA.replace("decay: [0.9, 0.2]", f"decay: {per_token}"))
    rule = s.variant(DeltaRule)
    assert rule is not None and rule.decays is not None
    np.testing.assert_array_equal(rule.decay(2), json.loads(per_token))
    per_head = from_text(KDA.replace("decay: [0.9, 0.2]", f"decay: [{per_token}, [[1, 1], [1, 1], [1, 1], [1, 1]]]"))
    plain = engine.run(from_text(KDA.replace(", decay: [0.9, 0.2]", "")))
    result = engine.run(per_head)
    np.testing.assert_allclose(result.heads[1].output, plain.heads[1].output, rtol=0, atol=1e-14)
    assert np.abs(result.heads[0].output - plain.heads[0].output).max() > 1e-3


@pytest.mark.parametrize(
    ("decay", "words"),
    [("[0.9, 1.5]", "outside (0, 1]"), ("[0.9]", "1 decays for d_k = 2"), ("[[0.9, 0.2]]", "a 1 × 2 matrix"), ("0.5", "found"),
     ("[0.9, 0]", "outside (0, 1]")],
)  # fmt: skip
def test_a_bad_decay_is_one_error_line(decay, words):
    """A decay outside (0, 1], of the wrong size, or not a list is refused at delta_rule.decay in one line."""
    with pytest.raises(AttnError) as caught:
        from_text(KDA.replace("[0.9, 0.2]", decay))
    text = str(caught.value)
    assert "delta_rule.decay" in text and words in text and "\n" not in text


def test_run_shows_the_decays_and_explain_the_decayed_state_s_step(cli, tmp_path):
    """run shows the α of each token and key channel; explain names KDA, shows α and decays the state before reading it."""
    path = tmp_path / "kda.yaml"
    path.write_text(KDA)
    shown = cli("run", str(path))
    assert shown.exit_code == 0 and "Decay of each key channel α (Kimi Delta Attention)" in shown.stdout
    explained = cli("explain", str(path), "--word", "sat", "--head", "1")
    assert explained.exit_code == 0 and "Kimi Delta Attention instead of the softmax" in explained.stdout
    assert "decay α of S's rows = [0.900, 0.200]" in explained.stdout


@pytest.mark.parametrize("fmt", ["table", "markdown", "latex", "csv", "html", "svg", "json"])
def test_every_command_and_format_renders(cli, fmt):
    """run, explain and decode of the KDA example in every format: exit 0, something written, nothing on stderr."""
    path = str(Path(__file__).parent / "scenarios" / "kda.yaml")
    for command in (["run", path], ["explain", path, "--word", "sat"], ["decode", path]):
        if fmt == "csv" and command[0] == "run":
            command += ["--stages", "weights"]
        result = cli(*command, "--format", fmt)
        assert result.exit_code == 0 and result.stdout and not result.stderr, (command, fmt, result.output)


def test_the_latex_renders_with_katex(cli, katex_modules):
    """run's decay, similarity and T tables and explain's decayed state step, in LaTeX, render with KaTeX in strict mode."""
    from tests import renderers

    path = str(Path(__file__).parent / "scenarios" / "kda.yaml")
    texts = [cli("run", path, "--format", "latex").stdout, cli("explain", path, "--word", "sat", "--format", "latex").stdout]
    blocks = [block for text in texts for block in renderers.latex_display_blocks(text)]
    errors = [(i, r.error) for i, r in enumerate(renderers.katex(katex_modules, blocks)) if r.error is not None]
    assert errors == []


def test_live_transformers_kimi_linear_recurrence_gives_the_same_outputs():
    """transformers' own KDA (kimi_linear's recurrent_kimi_delta_attention, its reference PyTorch loop, which runs in float32)
    gives every head's outputs of the example within float32's rounding (measured 3.1e-8; bound 1e-6); skips without torch."""
    try:
        import torch
        from transformers.models.kimi_linear.modeling_kimi_linear import recurrent_kimi_delta_attention
    except Exception as error:
        pytest.skip(f"torch and transformers' kimi_linear are not importable ({error}); pip install torch==2.13.0 transformers")
    s = from_text(KDA)
    rule = s.variant(DeltaRule)
    assert rule is not None
    for head in engine.run(s).heads:
        t = head.kernel
        assert t is not None and t.phi_q is not None and t.phi_k is not None
        q, k, v = (torch.tensor(x, dtype=torch.float64)[None, :, None, :] for x in (t.phi_q, t.phi_k, head.V))  # (1, L, 1, d)
        log_decay = torch.log(torch.tensor(rule.decay(head.head)))[None, :, None, :]  # (1, L, 1, d_k): its g, the log of α
        beta = torch.full((1, s.L, 1), rule.beta(head.head), dtype=torch.float64)
        out, _ = recurrent_kimi_delta_attention(q, k, v, log_decay, beta, None, False, use_qk_l2norm_in_kernel=False)
        np.testing.assert_allclose(out[0, :, 0].numpy(), head.output, rtol=0, atol=1e-6)  # its 1/√d_k is the scenario's scale
