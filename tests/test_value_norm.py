"""The registry's "value" stage: each head's value rows RMS-normalised without a weight (Gemma 3n's v_norm), v̂ = v / rms(v)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import ValueNorm
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text, load

NORMED = Path(__file__).parent / "scenarios" / "value-norm.yaml"
CACHED = Path(__file__).parent / "scenarios" / "cache-rope.yaml"


def test_each_head_weighs_its_values_divided_by_their_rms():
    """Written out with NumPy: V = X·W_V per key/value head, each row over √(mean(v²) + ε), then weights·V̂ and the heads through W_O."""
    s = load(str(NORMED))
    result = engine.run(s)
    X, d_v = np.asarray(s.X), s.d_v
    parts = []
    for head in result.heads:
        V = X @ s.W_V[:, (head.kv_head - 1) * d_v : head.kv_head * d_v]
        V_hat = V / np.sqrt((V * V).mean(axis=-1, keepdims=True) + 1e-6)
        np.testing.assert_allclose(head.V, V, rtol=0, atol=1e-15)
        np.testing.assert_allclose(head.value_normed, V_hat, rtol=0, atol=1e-15)
        np.testing.assert_allclose(head.output, head.weights @ V_hat, rtol=0, atol=1e-15)
        parts.append(head.weights @ V_hat)
    np.testing.assert_allclose(result.concat, np.hstack(parts), rtol=0, atol=1e-15)
    plain = engine.run(s.without(ValueNorm))
    assert plain.heads[0].value_normed is None and np.abs(plain.concat - result.concat).max() > 0.1  # the check can fail


def test_a_given_cache_holds_values_as_the_weights_meet_them():
    """With a KV cache, the cached rows join the normalised values as given; only the sentence's own rows are normalised."""
    s = from_text(CACHED.read_text() + "v_norm: true\n")
    head = engine.run(s).head(1)
    assert head.value_normed.shape == head.V.shape == (4, 2)
    np.testing.assert_array_equal(head.value_normed[:2], [[1.0, 2.0], [3.0, 4.0]])
    own = head.V[2:]
    np.testing.assert_allclose(head.value_normed[2:], own / np.sqrt((own * own).mean(axis=-1, keepdims=True) + 1e-6), rtol=0, atol=1e-15)


@pytest.mark.parametrize(("value", "words"), [("-1", "≥ 0"), ("{eps: 1}", "found a mapping"), ("yes please", "true (ε = 1e-6)")])
def test_a_wrong_v_norm_is_one_error_naming_its_key(value, words):
    """v_norm takes true, false or ε ≥ 0; anything else is refused at its line."""
    with pytest.raises(AttnError) as caught:
        from_text(NORMED.read_text().replace("v_norm: 1e-6", f"v_norm: {value}"))
    message = str(caught.value)
    assert message.count("\n") == 0 and "v_norm" in message and words in message


def test_false_leaves_it_out_and_true_means_eps_1e_6():
    """`v_norm: false` is no value norm; `true` is ε = 1e-6."""
    assert from_text(NORMED.read_text().replace("v_norm: 1e-6", "v_norm: false")).variant(ValueNorm) is None
    given = from_text(NORMED.read_text().replace("v_norm: 1e-6", "v_norm: true")).variant(ValueNorm)
    assert given is not None and given.eps == 1e-6


def test_explain_shows_the_projection_then_the_norm_and_run_its_rows(cli):
    """explain's keys-and-values step shows v = e·W_V as projected, then its own step divides by the rms; the output is A·V̂."""
    explained = cli("explain", str(NORMED), "--word", "ran")
    assert explained.exit_code == 0
    text = explained.stdout
    assert "v(red) = [1, 0, 0.500] · W_V⁽¹⁾ = [2.500, 1.500]" in text
    assert "Normalising the values (v_norm)" in text and "v̂(red) = [2.500, 1.500] / 2.062 ≈ [1.213, 0.728]" in text
    shown = cli("run", str(NORMED)).stdout
    assert "Normalised values  V̂⁽¹⁾ = V⁽¹⁾ / rms(V⁽¹⁾)" in shown and "O⁽¹⁾ = A⁽¹⁾·V̂⁽¹⁾" in shown
    data = json.loads(cli("run", str(NORMED), "--format", "json").stdout)
    assert data["scenario"]["v_norm"] == {"eps": 1e-6} and "V_norm" in data["heads"][0]
