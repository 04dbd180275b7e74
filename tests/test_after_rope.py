"""The stages after RoPE (QK-norm there, a query temperature) and chunked masks, in scenarios (tests/scenarios/llama4-chunks.yaml)."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import Mask, QkNorm, QkNormAfterRope, QueryTemperature, Rope
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text, load

SHOWN = "tests/scenarios/llama4-chunks.yaml"


def test_the_norm_after_rope_meets_the_rotated_rows_and_the_temperature_the_normed_query():
    """q̂ = RoPE(q) / rms · w, then each query's row of scores × 1 + 0.5·ln(1 + ⌊(p + 1) / 2⌋); the keys normalised, not tempered."""
    s = load(SHOWN)
    head = engine.run(s).heads[1]
    norm, temperature = s.variant(QkNormAfterRope), s.variant(QueryTemperature)
    assert norm is not None and temperature is not None and head.Q_rope is not None and head.K_rope is not None
    rms = np.sqrt((head.Q_rope**2).mean(axis=1, keepdims=True) + norm.eps)  # (L, 1)
    normed = head.Q_rope / rms * norm.q_weight
    factors = 1 + 0.5 * np.log(1 + np.floor((np.arange(6) + 1) / 2))
    np.testing.assert_allclose(head.q, normed, rtol=0, atol=1e-12)
    np.testing.assert_allclose(head.reshaped["query_temperature"], head.scaled * factors[:, None], rtol=0, atol=1e-12)
    np.testing.assert_allclose(head.k, head.K_rope / np.sqrt((head.K_rope**2).mean(axis=1, keepdims=True) + norm.eps) * norm.k_weight, atol=1e-12)
    np.testing.assert_allclose(head.scores, head.q @ head.k.T, atol=1e-12)


def test_a_weighted_norm_after_rope_is_not_the_norm_before_it():
    """With a weight the order matters (the weight does not commute with the turn): the same norm before RoPE gives other weights."""
    s = load(SHOWN)
    norm = s.variant(QkNormAfterRope)
    assert norm is not None
    before = dataclasses.replace(s, variants=tuple(v for v in s.variants if not isinstance(v, QkNormAfterRope))
                                 + (QkNorm(norm.q_weight, norm.k_weight, eps=norm.eps),))  # fmt: skip
    assert np.abs(engine.run(before).heads[0].weights - engine.run(s).heads[0].weights).max() > 1e-3


def test_a_chunk_hides_the_keys_of_earlier_chunks():
    """With chunks of 4, query 5 sees key 5 only and query 4 keys 1–4; the mask says why a key is hidden."""
    mask = Mask(causal=True, chunk=4)
    seen = mask.visible(6, 6)
    assert seen[4].tolist() == [False, False, False, False, True, False] and seen[3].tolist() == [True] * 4 + [False] * 2
    assert mask.why_hidden(5, 2) == "in another chunk of 4" and mask.name == "custom" and "chunks of 4" in mask.describe()
    assert mask.as_json()["chunk"] == 4


def test_the_stage_table_and_json_show_the_stages():
    """run's JSON carries both variants' keys and the rows after RoPE; explain narrates them after RoPE's step."""
    import json

    from typer.testing import CliRunner

    from attncli.cli.app import app

    out = CliRunner().invoke(app, ["run", SHOWN, "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["scenario"]["qk_norm_after_rope"]["place"] == "after RoPE" and doc["scenario"]["query_temperature"]["original"] == 2
    head = doc["heads"][0]
    assert {"Q_rope_norm", "K_rope_norm", "query_temperature"} <= set(head)
    told = CliRunner().invoke(app, ["explain", SHOWN, "--word", "on"])
    assert told.exit_code == 0, told.output
    explained = json.loads(CliRunner().invoke(app, ["explain", SHOWN, "--word", "on", "--format", "json"]).output)
    result = engine.run(load(SHOWN))
    np.testing.assert_array_equal(explained["query"]["q_rotated"], result.heads[0].Q_rope[4])  # what RoPE left; "q" what the keys meet
    np.testing.assert_array_equal(explained["query"]["q"], result.heads[0].q[4])
    assert told.output.index("(RoPE)") < told.output.index("(QK-norm after RoPE)") < told.output.index("The query temperature")


@pytest.mark.parametrize(("written", "message"), [("{beta: 0.1}", "no original"), ("{beta: 0.1, original: 0}", "query_temperature.original")])
def test_a_temperature_needs_its_original_length(written, message):
    """A query temperature without a positive original length is one error at its key."""
    text = Path(SHOWN).read_text().replace("query_temperature: {beta: 0.5, original: 2, shift: 1}", f"query_temperature: {written}")
    with pytest.raises(AttnError) as caught:
        from_text(text, path="t.yaml")
    assert message in str(caught.value) + str(caught.value.key)


def test_rope_is_there():
    """The scenario turns interleaved pairs, as Llama 4 does."""
    rope = load(SHOWN).variant(Rope)
    assert rope is not None and rope.style == "interleaved"
