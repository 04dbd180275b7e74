"""engine.run(rows=...) (explain's lean path: stages in place, one row kept) gives engine.run's numbers bit for bit."""

import json
import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from attncli.core import engine
from attncli.core.explain import explain, explain_scenario
from attncli.errors import AttnError
from attncli.formats import jsonout
from attncli.sources import builtin
from attncli.sources.yaml_scenario import from_text, load
from attncli.walkthroughs import data
from tests.reference import document_attention
from tests.strategies import variant_scenarios


def assert_same(scenario, *, position, head, round_steps=None, block_size=None):
    """The lean explanation's JSON (full precision), online rows and head are those of explain(engine.run(...))."""
    try:
        full = explain(engine.run(scenario, round_steps=round_steps), position=position, head=head, block_size=block_size)
    except AttnError as error:
        with pytest.raises(AttnError, match=re.escape(str(error.args[0])[:30])):
            explain_scenario(scenario, position=position, head=head, round_steps=round_steps, block_size=block_size)
        return
    lean = explain_scenario(scenario, position=position, head=head, round_steps=round_steps, block_size=block_size)
    assert jsonout.dumps(data.explain_json(lean)) == jsonout.dumps(data.explain_json(full))
    assert np.array_equal(lean.result.output, full.result.output) and np.array_equal(lean.head.output, full.head.output)
    with np.printoptions(precision=17, threshold=10**6):
        assert repr(lean.online) == repr(full.online) and repr(lean.exact_online) == repr(full.exact_online)


@pytest.mark.parametrize("name", builtin.names())
@pytest.mark.parametrize("round_steps", [None, 3])
def test_builtins_every_head_and_position(name, round_steps):
    """Every built-in scenario, every head and query, exact and hand-rounded, with and without blocks."""
    s = load(name)
    for head in range(1, s.heads + 1):
        for position in range(1, s.L + 1):
            assert_same(s, position=position, head=head, round_steps=round_steps, block_size=2 if position % 2 else None)


@settings(max_examples=120, deadline=None)
@given(variant_scenarios(), st.data(), st.sampled_from([None, 1, 4]))
def test_random_variants(case, data, round_steps):
    """Cross-attention, direct Q/K/V, GQA, masks, bias, ALiBi and RoPE: the lean path agrees bit for bit, and with the reference."""
    doc, mask = case
    try:
        scenario = from_text(json.dumps(doc))
    except AttnError as error:
        assume("would see no key" not in str(error))
        raise
    position = data.draw(st.integers(1, scenario.L))
    head = data.draw(st.integers(1, scenario.heads))
    assert_same(scenario, position=position, head=head, round_steps=round_steps)
    if round_steps is None:  # the lean path on its own against the loop reference
        expected = document_attention(doc, mask)
        lean = explain_scenario(scenario, position=position, head=head)
        np.testing.assert_allclose([k.weight for k in lean.keys], expected["weights"][head - 1][position - 1], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(lean.q, expected["Q"][head - 1][position - 1], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(lean.output, expected["head_outputs"][head - 1][position - 1], rtol=1e-9, atol=1e-9)


def test_only_one_row_is_kept(monkeypatch):
    """The kept head's tokens × tokens stages are one row; rows beyond the chunk size are shifted in pieces."""
    from attncli.core import arithmetic

    monkeypatch.setattr(arithmetic, "ROWS_AT_ONCE", 2)
    s = load("journey-causal")
    lean = explain_scenario(s, position=4, head=1)
    assert lean.head.scores.shape == lean.head.weights.shape == lean.head.visible.shape == (1, s.L)
    assert_same(s, position=4, head=1)
    extreme = from_text("tokens: [a, b, c, d, e]\nembeddings: [[1], [20], [30], [-30], [5]]\nscale: none\nmask: causal\n")  # shifted rows
    for position in range(1, 6):
        assert_same(extreme, position=position, head=1)


@pytest.mark.parametrize(
    "text",
    [
        "tokens: [a, b]\nembeddings: [[1e200, 1e200], [1, 1]]\n",  # scores overflow: the same error, naming the stage
        "tokens: [a, b]\nembeddings: [[1e9, 3e8], [1.5, -2]]\nscale: none\n",  # beyond 2^52 hand rounding keeps the number
        "tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\nW_O: [[1e300, 1], [1e300, 1]]\nb_O: [1e300, 0]\n",  # the final output overflows
    ],
)
@pytest.mark.parametrize("round_steps", [None, 2])
def test_extreme_numbers_agree(text, round_steps):
    """Overflow is the same clear error, and huge hand-rounded numbers the same numbers, on both paths."""
    s = from_text(text)
    for position in (1, 2):
        assert_same(s, position=position, head=1, round_steps=round_steps)
