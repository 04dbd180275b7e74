"""Learned attention sinks (gpt-oss): a per-head logit in the softmax's denominator, with no value behind it."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import decode, engine
from attncli.core.variants import LearnedSink
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text
from attncli.walkthroughs import data
from tests import reference as ref
from tests.test_explain_rows import assert_same

DOC = ("tokens: [a, b, c]\nembeddings: [[1, 0], [0, 1], [1, 1]]\nheads: 2\nW_Q: [[1, 0, 0.5, 0], [0, 1, 0, 0.5]]\n"
       "W_K: [[1, 0, 1, 0], [0, 1, 0, 1]]\nW_V: [[1, 2, 0, 1], [3, 0, 1, 1]]\nmask: causal\nsink_logits: [0.5, -1.0]\n")  # fmt: skip


def _check_against_reference(scenario, sinks):
    result = engine.run(scenario)
    for head in result.heads:
        visible = head.visible
        mine = ref.head_attention(head.q.tolist(), head.k.tolist(), head.V.tolist(), scale=1 / scenario.scale.divisor,
                                  sees=lambda i, j, visible=visible: bool(visible[i, j]), sink=sinks[head.head - 1])  # fmt: skip
        np.testing.assert_allclose(head.weights, mine["weights"], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(head.sink_weight, mine["sink_weights"], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(head.output, mine["output"], rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(head.weights.sum(axis=1) + head.sink_weight, 1.0, rtol=0, atol=1e-14)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 5).flatmap(lambda L: st.lists(st.lists(st.floats(-8, 8), min_size=4, max_size=4), min_size=L, max_size=L)),
    st.lists(st.floats(-30, 30), min_size=2, max_size=2),
    st.sampled_from(["none", "causal", {"causal": True, "window": 2}, {"causal": True, "window": 1, "sinks": 1}]),
)
def test_weights_and_the_sinks_share_are_the_naive_references(rows, sinks, mask):
    doc = {"tokens": [f"t{i}" for i in range(len(rows))], "embeddings": rows, "heads": 2, "mask": mask, "sink_logits": sinks}
    _check_against_reference(from_text(json.dumps(doc)), sinks)


@pytest.mark.parametrize("sink", [800.0, -800.0, 705.0])
def test_extreme_sinks_shift_the_row_and_stay_exact(sink):
    """The shift rule counts the sink as one more logit: e^800 would overflow, the shifted row does not."""
    doc = {"tokens": ["a", "b"], "embeddings": [[30, 0], [0, 30]], "scale": "none", "mask": "causal", "sink_logits": sink}
    scenario = from_text(json.dumps(doc))
    _check_against_reference(scenario, [sink])
    head = engine.run(scenario).head(1)
    assert np.isfinite(head.exp_sum).all() and (head.sink_weight <= 1).all()


def test_one_number_is_every_heads_logit():
    assert from_text(DOC.replace("[0.5, -1.0]", "0.25")).variant(LearnedSink).logits == (0.25, 0.25)


def test_without_a_sink_nothing_changes_bit_for_bit():
    with_sink = engine.run(from_text(DOC.replace("[0.5, -1.0]", "-700"))).head(1)  # e^-700 ≈ 1e-304 is below the sum's last bit
    without = engine.run(from_text(DOC.replace("sink_logits: [0.5, -1.0]\n", ""))).head(1)
    assert with_sink.weights.tobytes() == without.weights.tobytes() and without.sink_weight is None


def test_explain_reads_the_same_rows_and_narrates_the_sink():
    s = from_text(DOC)
    for position in (1, 2, 3):
        assert_same(s, position=position, head=2)
        assert_same(s, position=position, head=2, round_steps=3)
    from attncli.core.explain import explain_scenario

    expl = explain_scenario(s, position=3, head=1)
    assert expl.sink_weight == pytest.approx(engine.run(s).head(1).sink_weight[2], abs=0)


def test_decode_keeps_the_sink_in_every_step():
    s = from_text(DOC)
    dec = decode.decode(s, 1)
    full = engine.run(s).head(1)
    for step in dec.steps:
        assert step.weights.sum() == pytest.approx(1 - full.sink_weight[step.position - 1], abs=1e-15)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 6).flatmap(lambda L: st.lists(st.lists(st.floats(-8, 8), min_size=2, max_size=2), min_size=L, max_size=L)),
    st.floats(-20, 20),
    st.integers(1, 3),
    st.booleans(),
)
def test_the_online_softmax_starts_from_the_sink_and_gives_the_ordinary_output(rows, sink, block_size, causal):
    """m = sink, l = 1, o = 0 before the first block: the tiles' o / l is the engine's output, and each row's final l is Σ."""
    from attncli.core import online
    from attncli.core.explain import explain_scenario

    doc = {"tokens": [f"t{i}" for i in range(len(rows))], "embeddings": rows, "mask": "causal" if causal else "none", "sink_logits": sink}
    s = from_text(json.dumps(doc))
    head = engine.run(s).head(1)
    tiling = online.tiled(head.masked, head.V, block_size=block_size, d_k=s.d_k, sink=sink)
    np.testing.assert_allclose(tiling.output, head.output, rtol=1e-12, atol=1e-13)
    expl = explain_scenario(s, position=len(rows), head=1, block_size=block_size)
    assert expl.online is not None and expl.online.sink == sink
    np.testing.assert_allclose(expl.online.output, head.output[-1], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(expl.online.sum * np.exp(expl.online.max - max(sink, head.masked[-1].max())), head.exp_sum[-1] * np.exp(head.shift[-1] - max(sink, head.masked[-1].max())), rtol=1e-12)


def test_json_names_the_logits_and_each_rows_share():
    assert data.scenario_json(from_text(DOC))["sink_logits"] == {"logits": [0.5, -1.0]}
    assert data.scenario_json(from_text(DOC.replace("sink_logits: [0.5, -1.0]\n", "")))["sink_logits"] is None


@pytest.mark.parametrize("value", ["[1, 2, 3]", "[]", "{a: 1}", "true", "[1, .nan]", "big"])
def test_a_wrong_value_is_refused(value):
    with pytest.raises(AttnError) as error:
        from_text(DOC.replace("[0.5, -1.0]", value))
    assert error.value.key.startswith("sink_logits")


def test_summary_says_it_is_not_the_mask_sinks():
    assert LearnedSink((0.5, -1.0)).describe() == "learned attention sinks (gpt-oss): e^sink joins each row's softmax denominator, sink = [0.5, -1]"


def test_engine_against_transformers_gpt_oss_eager_attention():
    """transformers' GptOss eager_attention_forward (sinks as one more column, dropped after the softmax), in float64."""
    torch = pytest.importorskip("torch", reason="optional oracle: pip install torch==2.13.0 transformers")
    m = pytest.importorskip("transformers.models.gpt_oss.modeling_gpt_oss", reason="optional oracle: transformers with gpt-oss")
    rng = np.random.default_rng(3)
    L, H, d = 5, 2, 3
    Q, K, V = (rng.normal(size=(L, H * d)) * 2 for _ in range(3))
    sinks = [0.7, -0.4]
    doc = {"tokens": [f"t{i}" for i in range(L)], "Q": Q.tolist(), "K": K.tolist(), "V": V.tolist(), "heads": H, "mask": "causal",
           "sink_logits": sinks}  # fmt: skip
    result = engine.run(from_text(json.dumps(doc)))

    class Module(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.num_key_value_groups = 1
            self.sinks = torch.nn.Parameter(torch.tensor(sinks, dtype=torch.float64))

    def heads(a):
        return torch.tensor(a, dtype=torch.float64).reshape(L, H, d).transpose(0, 1)[None]  # (1, H, L, d)

    causal = torch.triu(torch.full((L, L), -torch.inf, dtype=torch.float64), 1)[None, None]
    _, weights = m.eager_attention_forward(Module().eval(), heads(Q), heads(K), heads(V), causal, scaling=d**-0.5, dropout=0.0)
    for h in range(H):
        np.testing.assert_allclose(result.head(h + 1).weights, weights[0, h].detach().numpy(), rtol=0, atol=1e-12)


def test_explain_and_decode_json_carry_the_sinks_share():
    from attncli.core.explain import explain_scenario

    s = from_text(DOC)
    share = engine.run(s).head(2).sink_weight
    expl = data.explain_json(explain_scenario(s, position=3, head=2))
    assert expl["sink_weight"] == share[2] and expl["exp_sum"] > expl["sink_exp"] > 0
    steps = data.decode_json(decode.decode(s, 2))["steps"]
    assert [step["sink_weight"] for step in steps] == list(share)
    plain = from_text(DOC.replace("sink_logits: [0.5, -1.0]\n", ""))
    assert "sink_weight" not in data.explain_json(explain_scenario(plain, position=3, head=2))
    assert "sink_weight" not in data.decode_json(decode.decode(plain, 2))["steps"][0]


def test_its_own_stage_row_and_narrated_step():
    """The sink's module brings a stage-table row (stage `sink`: the weight it took per query) and a step of explain."""
    from attncli.core import engine
    from attncli.core.explain import explain_scenario
    from attncli.document import stages
    from attncli.sources.yaml_scenario import from_text
    from attncli.walkthroughs.narration import steps

    s = from_text("tokens: [a, b, c]\nembeddings: [[1, 0], [0, 1], [1, 1]]\nmask: causal\nsink_logits: 0.5\n")
    assert "sink" in stages.default(s)
    result = engine.run(s)
    sink_row = next(row for row in stages.ROWS if row.stage == "sink")
    np.testing.assert_array_equal(sink_row.get(result, result.head(1))[:, 0], result.head(1).sink_weight)
    told = steps(explain_scenario(s, position=3, head=1), 4)
    share = next(step for step in told if step.title == "The learned sink's share")
    assert share.lines[0].rhs == "0.5000" and "without the sink" in share.lines[3].rhs
    assert sum(float(line.rhs.split()[-1]) for line in share.lines[3:]) == pytest.approx(1 - result.head(1).sink_weight[2], abs=2e-4)
