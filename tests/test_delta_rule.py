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


def test_explain_tells_the_state_s_step_and_decode_and_tiling_refuse(cli):
    """explain narrates the delta rule's step; decode and --block-size say in one line that they do not show it."""
    explained = cli("explain", str(DELTA), "--word", "sat", "--head", "1")
    assert explained.exit_code == 0 and "The delta rule instead of the softmax" in explained.stdout and "recalled" in explained.stdout
    for args in (("decode", str(DELTA)), ("run", str(DELTA), "--block-size", "2")):
        refused = cli(*args)
        assert refused.exit_code != 0 and refused.stderr.count("\n") == 1 and "delta_rule" in refused.stderr
