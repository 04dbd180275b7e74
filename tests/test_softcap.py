"""Logit soft-capping (Gemma 2): cap·tanh(s / cap) on the scaled scores, before the bias and the mask."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import engine
from attncli.core.variants import Alibi, SoftCap
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text
from attncli.walkthroughs import data
from tests.test_explain_rows import assert_same

DOC = "tokens: [a, b, c]\nembeddings: [[10, 0], [0, 10], [7, 7]]\nscale: none\nmask: causal\nsoftcap: 50.0\n"


def test_capped_scores_are_gemma2s_formula_bit_for_bit():
    """As transformers' Gemma 2 writes it: attn_weights / softcap, tanh, * softcap."""
    head = engine.run(from_text(DOC)).head(1)
    assert head.reshaped["softcap"].tobytes() == (np.tanh(head.scaled / 50.0) * 50.0).tobytes()
    assert np.array_equal(head.masked[2], head.reshaped["softcap"][2]) and head.logits is head.reshaped["softcap"]
    assert np.abs(head.logits).max() < 50.0 < np.abs(head.scaled).max()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.floats(-30, 30), min_size=2, max_size=2), min_size=2, max_size=5),
    st.floats(0.5, 100.0),
    st.booleans(),
    st.booleans(),
)
def test_weights_are_the_softmax_of_the_capped_logits(rows, cap, causal, alibi):
    """Against a plain loop: logit_ij = cap·tanh(s_ij / cap) + ALiBi, softmax over the visible keys."""
    doc = {"tokens": [f"t{i}" for i in range(len(rows))], "embeddings": rows, "softcap": cap, "mask": "causal" if causal else "none",
           "alibi": alibi}  # fmt: skip
    scenario = from_text(json.dumps(doc))
    head = engine.run(scenario).head(1)
    L = len(rows)
    for i in range(L):
        seen = [j for j in range(L) if not causal or j <= i]
        logits = [cap * np.tanh(head.scores[i, j] / scenario.scale.divisor / cap) - (scenario.variant(Alibi).slopes[0] * (i - j) if alibi else 0.0) for j in seen]
        exp = np.exp(np.array(logits) - max(logits))
        np.testing.assert_allclose(head.weights[i, seen], exp / exp.sum(), rtol=1e-12, atol=1e-15)


def test_explain_reads_the_same_rows():
    s = from_text(DOC)
    for position in (1, 2, 3):
        assert_same(s, position=position, head=1)
        assert_same(s, position=position, head=1, round_steps=3)


def test_json_names_the_cap_and_null_without_it():
    assert data.scenario_json(from_text(DOC))["softcap"] == {"cap": 50.0}
    assert data.scenario_json(from_text(DOC.replace("softcap: 50.0\n", "")))["softcap"] is None


@pytest.mark.parametrize("value", ["0", "-3", "[1, 2]", "big", ".inf"])
def test_a_cap_that_is_not_a_positive_number_is_refused(value):
    with pytest.raises(AttnError) as error:
        from_text(DOC.replace("50.0", value))
    assert error.value.key == "softcap"


def test_summary_says_it():
    assert SoftCap(50.0).describe() == "logit soft-capping: cap·tanh(s / cap), cap = 50"


def test_its_own_stage_row_and_narrated_step():
    """The variant's module brings its stage-table row (stage `softcap`, after `scaled`) and its step of explain, before the bias."""
    from attncli.core.explain import explain_scenario
    from attncli.document import stages
    from attncli.walkthroughs.narration import steps

    s = from_text(DOC + "alibi: true\n")
    assert stages.STAGE_NAMES.index("softcap") == stages.STAGE_NAMES.index("scaled") + 1 and "softcap" in stages.default(s)
    assert "softcap" not in stages.default(from_text(DOC.replace("softcap: 50.0\n", "")))
    head_json = data.run_json(engine.run(s), stages.STAGE_NAMES, [1])["heads"][0]
    assert list(head_json).index("softcap") == list(head_json).index("scaled") + 1
    told = steps(explain_scenario(s, position=3, head=1), 4)
    titles = [step.title for step in told]
    assert titles.index("Soft-capping the scores") + 1 == titles.index("Adding the bias")
    capped = told[titles.index("Soft-capping the scores")]
    assert [line.rhs for line in capped.lines] == ["50 × tanh(70 / 50) = 44.2676", "50 × tanh(70 / 50) = 44.2676", "50 × tanh(98 / 50) = 48.0545"]
    bias = told[titles.index("Adding the bias")]
    assert bias.lines[0].rhs.startswith("44.2676 − ")  # the bias is added to the capped score, not the scaled one
