"""An int8 KV cache: the cache's K and V given as int8 codes and scales, dequantised as a shown step before use.

The engine against the naive reference: random int8 caches (tests/strategies.py: a scale for the whole cache, per row
or per group of columns, codes as one matrix or one per key/value head) dequantised here by loops, code × scale, and
decoded by tests/reference.py's decode_from_cache; the stage table's rows (K_int8, s_K, K_cache = K_int8 ⊙ s_K), explain's
step and every format on tests/scenarios/int8-kv-cache.yaml; one line for each malformed cache.
"""

import json

import numpy as np
import pytest
from hypothesis import given, settings

from attncli.core import engine
from attncli.core.explain import explain_scenario
from attncli.core.variants import KvCache
from attncli.sources.yaml_scenario import from_text, load
from attncli.walkthroughs.narration import steps
from tests import reference
from tests.strategies import int8_cache_documents

EXAMPLE = "tests/scenarios/int8-kv-cache.yaml"


def dequantised(part: dict, c: int, G: int) -> list[list[float]]:
    """(c, G·d) code × scale, by loops: the codes side by side when given per head, each column's scale by its group."""
    codes = part["int8"]
    if isinstance(codes[0][0], list):  # one matrix per key/value head
        codes = [sum((codes[g][i] for g in range(G)), []) for i in range(c)]
    width = len(codes[0])
    scale = part["scale"]
    out = []
    for i in range(c):
        row = []
        for j in range(width):
            if isinstance(scale, float):
                s = scale
            elif not isinstance(scale[i], list):
                s = scale[i]
            else:
                s = scale[i][j // (width // len(scale[i]))]
            row.append(codes[i][j] * s)
        out.append(row)
    return out


@settings(max_examples=120, deadline=None)
@given(int8_cache_documents())
def test_an_int8_cache_is_dequantised_then_attended_as_the_reference_does(document):
    """Every head's weights and output equal the reference's decode from the cache dequantised by hand (code × scale)."""
    s = from_text(json.dumps(document))
    H, G = document["heads"], document["kv_heads"]
    c = len(document["cache"]["tokens"])
    K_cache, V_cache = (dequantised(document["cache"][key], c, G) for key in ("K", "V"))
    d_k, d_v = len(document["K"][0]) // G, len(document["V"][0]) // G
    result = engine.run(s)
    for head in result.heads:
        g = (head.head - 1) * G // H
        cols = lambda rows, d, g=g: [row[g * d : (g + 1) * d] for row in rows]  # noqa: E731
        q = [row[(head.head - 1) * d_k : head.head * d_k] for row in document["Q"]]
        wanted = reference.decode_from_cache(q, cols(K_cache, d_k), cols(V_cache, d_v), cols(document["K"], d_k), cols(document["V"], d_v),
                                             scale=1 / s.scale.divisor)  # fmt: skip
        np.testing.assert_allclose(head.weights, wanted["weights"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(head.output, wanted["output"], rtol=1e-9, atol=1e-12)


def test_the_stage_table_shows_codes_scales_and_their_product(cli):
    """run's JSON holds K_int8, s_K and K_cache = K_int8 ⊙ s_K (V too, per head's group of columns); the table says the formula."""
    doc = json.loads(cli("run", EXAMPLE, "--format", "json").stdout)
    assert doc["scenario"]["cache"]["int8"] == {"K": {"scales": "row", "groups": 1}, "V": {"scales": "group", "groups": 2}}
    codes, scales = np.array(doc["K_int8"]), np.array(doc["s_K"])
    assert codes.tolist() == [[64, -32, 127, 0], [-127, 16, 8, 95]] and scales.shape == (2, 1)
    np.testing.assert_array_equal(doc["K_cache"], codes * scales)
    np.testing.assert_array_equal(doc["V_cache"], np.array(doc["V_int8"]) * np.repeat(doc["s_V"], 2, axis=1))
    assert doc["V_cache"][0] == [2.54, 1.28, 0.32, -1.27]
    head = doc["heads"][1]
    np.testing.assert_array_equal(head["V"][:2], np.array(doc["V_cache"])[:, 2:])  # head 2 reads the second group of columns
    table = " ".join(cli("run", EXAMPLE, "--stages", "cache").stdout.split())
    assert "K_cache = K_int8 ⊙ s_K" in table and "s_V (given: one scale per group of 2 columns)" in table
    assert "s_K (given: one scale per row)" in table


def test_explain_dequantises_each_cached_key_and_value():
    """explain's step before the scores writes each cached k and v as its codes times its scale, = the numbers the head uses."""
    s = load(EXAMPLE)
    expl = explain_scenario(s, position=1, head=2)
    told = steps(expl, 4)
    titles = [step.title for step in told]
    assert titles.index("Dequantising the int8 cache") < titles.index("One dot product per key")
    step = told[titles.index("Dequantising the int8 cache")]
    lines = {line.lhs: line.rhs for line in step.lines}
    assert lines["k(cat (cached))"] == "[8, 95] × 0.0157 ≈ [0.1260, 1.4961]"  # head 2 reads columns 3–4 of row 2, scale 2/127
    assert lines["v(The (cached))"] == "[32, -127] × 0.0100 = [0.3200, -1.2700]"  # row 1's scale of the second group
    assert "int8 codes" in " ".join(step.notes)


def test_a_cache_without_int8_has_no_such_step_nor_rows(cli):
    """The paged example (a plain cache) shows no dequantisation: no step, no codes or scales, and its JSON has no int8 key."""
    expl = explain_scenario(load("tests/scenarios/paged-attention-leetgpu.yaml"), position=1)
    assert "Dequantising the int8 cache" not in [step.title for step in steps(expl, 4)]
    doc = json.loads(cli("run", "tests/scenarios/paged-attention-leetgpu.yaml", "--format", "json").stdout)
    assert "K_int8" not in doc and "int8" not in doc["scenario"]["cache"]


def test_the_int8_cache_is_in_every_format(cli):
    """run, explain and decode of the int8 example write every format."""
    for command in (["run"], ["explain", "--word", "sat", "--head", "2"], ["decode"]):
        for fmt in ("table", "json", "markdown", "latex", "csv", "html", "svg", "typst"):
            result = cli(*command, EXAMPLE, "--format", fmt)
            assert result.exit_code == 0 and result.stdout, (command, fmt, result.stderr)


def test_the_scenario_keeps_the_codes_and_scales():
    """The loaded scenario's cache holds the codes, the scales and K as their product."""
    cache = load(EXAMPLE).variant(KvCache)
    assert cache is not None and cache.K_int8 is not None and cache.K_int8.per == "row"
    np.testing.assert_array_equal(cache.K, cache.K_int8.codes * cache.K_int8.scale)


BASE = {"tokens": ["x"], "Q": [[1.0, 0.0]], "K": [[1.0, 0.0]], "V": [[1.0, 0.0]], "mask": "causal"}


@pytest.mark.parametrize(
    ("K", "message"),
    [
        ({"int8": [[128, 0]], "scale": 0.1}, "cache.K.int8: row 1, column 1 is 128"),
        ({"int8": [[1.5, 0]], "scale": 0.1}, "cache.K.int8: row 1, column 1 is 1.5"),
        ({"int8": [[1, 0]], "scale": 0}, "a scale of 0"),
        ({"int8": [[1, 0]], "scale": [0.1, 0.2]}, "cache.K.scale has 2 rows but there are 1 cached tokens"),
        ({"int8": [[1, 0]], "scale": [[0.1, 0.2, 0.3]]}, "3 scales per row do not split 2 columns"),
        ({"int8": [[1, 0]]}, "cache.K has no `scale`"),
        ({"int8": [[1, 0, 0]], "scale": 0.1}, "cache.K has 3 columns"),
        ({"int8": [[1, 0]], "scale": 0.1, "zero": 0}, "unknown key 'zero'"),
    ],
)
def test_a_malformed_int8_cache_is_one_line(K, message, cli, tmp_path):
    """Codes outside int8, non-positive scales, scales that fit neither the rows nor the columns: one error line each."""
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps({**BASE, "cache": {"tokens": ["a"], "K": K, "V": [[1.0, 0.0]]}}), encoding="utf-8")
    result = cli("run", str(path))
    assert result.exit_code != 0 and result.stdout == ""
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
