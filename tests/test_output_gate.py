"""The registry's "output" stage: a gate on each head's output (Qwen3-Next's gated attention), o ← o ⊙ σ(X·W_gate)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import OutputGate
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text, load

GATED = Path(__file__).parent / "scenarios" / "gated-output.yaml"


def test_each_head_s_output_is_gated_before_the_concatenation_and_W_O():
    """Written out with NumPy: head h's output times σ(X·W_gate_h), side by side, through W_O."""
    s = load(str(GATED))
    result = engine.run(s)
    gate = s.variant(OutputGate)
    assert gate is not None
    X, d_v = np.asarray(s.X), s.d_v
    parts = []
    for head in result.heads:
        h = head.head
        expected_gate = 1 / (1 + np.exp(-(X @ gate.W[:, (h - 1) * d_v : h * d_v])))
        np.testing.assert_allclose(head.gated["output_gate"].gate, expected_gate, rtol=0, atol=1e-15)
        parts.append(head.output * expected_gate)
    np.testing.assert_allclose(result.concat, np.hstack(parts), rtol=0, atol=1e-15)
    np.testing.assert_allclose(result.output, np.hstack(parts) @ s.W_O, rtol=0, atol=1e-14)
    ungated = engine.run(s.without(OutputGate))
    assert np.abs(ungated.output - result.output).max() > 0.1  # the gate changes the output: the check can fail


def test_a_gate_of_the_wrong_shape_is_one_error_naming_its_key():
    """output_gate must be d_model × heads·d_v; another shape is refused at its line."""
    text = GATED.read_text()
    for row in ("[1.0, -1.0, 0.5, 0.0, 2.0, -0.5]", "[0.0, 0.5, -1.0, 1.0, 0.0, 0.5]", "[-0.5, 0.0, 1.0, -1.0, 0.5, 0.0]"):
        text = text.replace(row, row.rsplit(",", 1)[0] + "]")  # one column short: 3 × 5
    with pytest.raises(AttnError) as caught:
        from_text(text)
    assert str(caught.value).count("\n") == 0 and "output_gate" in str(caught.value) and "3 × 5" in str(caught.value)


def test_explain_narrates_the_gate_and_run_shows_its_rows(cli):
    """explain has an output-gate step; run's table shows the gate and the gated output; JSON holds both."""
    explained = cli("explain", str(GATED), "--word", "fox", "--head", "2")
    assert explained.exit_code == 0 and "The output gate" in explained.stdout and "⊙" in explained.stdout
    shown = cli("run", str(GATED))
    assert "Output gate" in shown.stdout and "Gated output" in shown.stdout
    import json

    data = json.loads(cli("run", str(GATED), "--format", "json").stdout)
    assert data["scenario"]["output_gate"]["W_gate"][0][:2] == [1.0, -1.0]
