"""The delta rule (DeltaNet) as a scenario key: the unrolled weights equal the state's recurrence, shown as what it is."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import DeltaRule, Mask
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text, load

DELTA = Path(__file__).parent / "scenarios" / "delta-rule.yaml"


def recurrence(q: np.ndarray, k: np.ndarray, V: np.ndarray, beta: float, divisor: float) -> np.ndarray:
    """(L, d_v) written out token by token: S ← S + k̂ ⊗ β(v − Sᵀk̂), out = Sᵀq̂ / s, from S = 0."""
    S = np.zeros((k.shape[1], V.shape[1]))
    out = []
    for t in range(k.shape[0]):
        k_hat, q_hat = k[t] / np.linalg.norm(k[t]), q[t] / np.linalg.norm(q[t])
        S = S + np.outer(k_hat, beta * (V[t] - S.T @ k_hat))
        out.append(S.T @ q_hat / divisor)
    return np.array(out)


def test_the_weights_times_V_equal_the_state_s_recurrence_on_every_head():
    """Each head's output (its weights · V) is the delta rule run token by token with the head's β."""
    s = load(str(DELTA))
    result = engine.run(s)
    rule = s.variant(DeltaRule)
    assert rule is not None and len(set(rule.betas)) == 2
    for head in result.heads:
        expected = recurrence(head.Q, head.K, head.V, rule.beta(head.head), s.scale.divisor)
        np.testing.assert_allclose(head.output, expected, rtol=0, atol=1e-14)
        linear = recurrence(head.Q, head.K, head.V, 1.0, s.scale.divisor) if rule.beta(head.head) != 1 else None
        if linear is not None:  # another β gives other numbers: the check can fail
            assert np.abs(linear - head.output).max() > 1e-3


def test_a_bad_beta_and_a_softmax_variant_beside_it_are_one_error_line_each():
    """β outside (0, 1], or soft-capping beside the delta rule, is refused at its key."""
    text = DELTA.read_text()
    for bad, words in ((text.replace("beta: [1.0, 0.5]", "beta: 1.5"), "delta_rule.beta"), (text + "softcap: 5\n", "softcap")):
        with pytest.raises(AttnError) as caught:
            from_text(bad)
        assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_mask_that_is_not_plainly_causal_is_refused():
    """The delta rule reads the keys in order: a window would need a state per query."""
    windowed = load(str(DELTA)).with_variants(Mask(causal=True, window=1))
    with pytest.raises(AttnError) as caught:
        engine.run(windowed)
    assert "delta rule" in str(caught.value) and "mask: causal" in str(caught.value)


def test_explain_tells_the_state_s_step_and_tiling_refuses(cli):
    """explain narrates the delta rule's step; --block-size (the online softmax, which it has not) says so in one line."""
    explained = cli("explain", str(DELTA), "--word", "sat", "--head", "1")
    assert explained.exit_code == 0 and "The delta rule instead of the softmax" in explained.stdout and "recalled" in explained.stdout
    refused = cli("run", str(DELTA), "--block-size", "2")
    assert refused.exit_code != 0 and refused.stderr.count("\n") == 1 and "delta_rule" in refused.stderr


@pytest.mark.parametrize("name", ["delta-rule.yaml", "kda.yaml"])
def test_decode_steps_the_state_and_each_step_equals_the_unrolled_row(name):
    """decode's state after each token is one step (DeltaRule.step) from the state of the prefix before it, recomputed from
    scratch; its output S_tᵀq̂_t / s is row t of the parallel (unrolled) run; and the plain rule's states are the recurrence's."""
    from attncli.core.decode import decode

    s = load(str(Path(__file__).parent / "scenarios" / name))
    result = engine.run(s)
    rule = s.variant(DeltaRule)
    assert rule is not None
    for head in result.heads:
        dec = decode(result, head.head)
        assert dec.recurrent is not None and dec.recurrent.normalisers is None
        t = head.kernel
        assert t is not None
        for i in range(s.L):
            prefix = rule.state_before(head.head, t.phi_k, head.V, i)  # (d_k, d_v) S_{i−1}, from tokens 1 … i only
            np.testing.assert_allclose(rule.step(head.head, prefix, t.phi_k[i], head.V[i], i), dec.recurrent.states[i], rtol=0, atol=1e-15)
        np.testing.assert_allclose(dec.recurrent.outputs, head.output, rtol=0, atol=1e-13)
        if rule.decays is None:
            np.testing.assert_allclose(dec.recurrent.outputs, recurrence(head.Q, head.K, head.V, rule.beta(head.head), s.scale.divisor),
                                       rtol=0, atol=1e-14)  # fmt: skip


def test_decode_report_names_the_rule_and_checks_every_step(cli):
    """attncli decode of the delta rule shows its state, not a cache, and each step's output against the parallel row."""
    shown = cli("decode", str(DELTA), "--head", "2")
    assert shown.exit_code == 0, shown.stderr
    text = " ".join(shown.stdout.split())  # the report wraps its lines
    assert "with a recurrent state" in text and "the delta rule keeps S_t = S_{t−1} + k̂_t ⊗ β(v_t − S_{t−1}ᵀk̂_t)" in text
    assert "β = 0.5" in text and text.count("the parallel run's row") == 4 and "the score the softmax sees" not in text
