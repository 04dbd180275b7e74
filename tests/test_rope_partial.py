"""Partial rotary, a position offset, and RoPE from given angles or a cos/sin table: the engine against the naive
reference (tests/reference.py: rope_angles, rotate_by_angles, rotate_by_table), published worked examples, and
every command and format."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import decode, engine, explain
from attncli.core.variants import Rope
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text
from tests import reference as ref
from tests.strategies import matrix


@st.composite
def rope_documents(draw):
    """A random causal scenario whose RoPE rotates part or all of each head, from θ at an offset, given angles or a table."""
    L = draw(st.integers(1, 5))
    heads = draw(st.integers(1, 2))
    d_k = 2 * draw(st.integers(1, 4))
    r = 2 * draw(st.integers(1, d_k // 2))
    d_model = draw(st.integers(1, 4))
    doc: dict = {
        "tokens": [f"t{i}" for i in range(L)], "heads": heads, "mask": "causal",
        "embeddings": draw(matrix(L, d_model)), "W_Q": draw(matrix(d_model, heads * d_k)),
        "W_K": draw(matrix(d_model, heads * d_k)), "W_V": draw(matrix(d_model, heads * 2)),
    }  # fmt: skip
    style = draw(st.sampled_from(["half", "interleaved"]))
    rope: dict = {"style": style}
    how = draw(st.sampled_from(["theta", "angles", "table"]))
    if how == "theta":
        rope["theta"] = draw(st.sampled_from([100, 10000, 500000]))
        rope["offset"] = draw(st.sampled_from([0, 1, 7, 100, 4096]))
        if r < d_k or draw(st.booleans()):
            rope.update({"rotary_dim": r} if draw(st.booleans()) else {"fraction": r / d_k})
    elif how == "angles":
        rope["angles"] = draw(matrix(L, r // 2, bound=4))
    else:
        angles = np.array(draw(matrix(L, r // 2, bound=4)))  # the table of these angles, in transformers' layout
        first, second = (np.arange(r // 2), np.arange(r // 2, r)) if style == "half" else (np.arange(0, r, 2), np.arange(1, r, 2))
        cos, sin = np.empty((L, r)), np.empty((L, r))
        cos[:, first], cos[:, second], sin[:, first], sin[:, second] = np.cos(angles), np.cos(angles), np.sin(angles), np.sin(angles)
        rope["cos"], rope["sin"] = cos.tolist(), sin.tolist()
        if draw(st.booleans()):
            rope["offset"] = draw(st.integers(0, 300))  # with a given table the offset only names the positions
    doc["rope"] = rope
    return doc, d_k, r, how


def reference_rotation(doc: dict, rows: list[list[float]], r: int, how: str) -> list[list[float]]:
    """The rows of one head rotated by hand: from θ at offset + p, from the given angle row, or from the given table row."""
    rope = doc["rope"]
    out = []
    for p, row in enumerate(rows):
        if how == "theta":
            out.append(ref.rotate_by_angles(row, ref.rope_angles(p, r, rope["theta"], offset=rope["offset"]), rope["style"]))
        elif how == "angles":
            out.append(ref.rotate_by_angles(row, rope["angles"][p], rope["style"]))
        elif rope["style"] == "half":
            out.append(ref.rotate_by_table(row, rope["cos"][p], rope["sin"][p]))
        else:
            out.append(ref.rotate_by_table(row, rope["cos"][p], rope["sin"][p], "interleaved"))
    return out


@settings(max_examples=200, deadline=None)
@given(rope_documents())
def test_partial_offset_and_given_rope_agree_with_the_naive_reference(case):
    """Rotated q and k, unrotated coordinates past r, weights and outputs: the engine equals the loop reference."""
    doc, d_k, r, how = case
    result = engine.run(from_text(json.dumps(doc)))
    Q, K, V = (ref.matmul(doc["embeddings"], doc[w]) for w in ("W_Q", "W_K", "W_V"))
    for h, head in enumerate(result.heads):
        q = reference_rotation(doc, ref.columns(Q, h * d_k, (h + 1) * d_k), r, how)
        k = reference_rotation(doc, ref.columns(K, h * d_k, (h + 1) * d_k), r, how)
        np.testing.assert_allclose(head.Q_rope, q, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(head.K_rope, k, rtol=1e-12, atol=1e-12)
        assert head.Q_rope[:, r:].tobytes() == head.Q[:, r:].tobytes()  # past r: unchanged, bit for bit
        expected = ref.head_attention(q, k, ref.columns(V, 2 * h, 2 * h + 2), scale=1 / math.sqrt(d_k), sees=lambda i, j: j <= i)
        np.testing.assert_allclose(head.weights, expected["weights"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(head.output, expected["output"], rtol=1e-9, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(rope_documents(), st.integers(1, 4))
def test_decode_and_block_size_agree_with_run_under_partial_and_offset_rope(case, block):
    """Decode's cached keys and the online softmax's output are the run's own, at the same absolute positions."""
    doc, _, _, _ = case
    scenario = from_text(json.dumps(doc))
    result = engine.run(scenario)
    dec = decode.decode(result, 1)
    for step in dec.steps:
        np.testing.assert_array_equal(step.k, result.heads[0].K_rope[step.position - 1])
        np.testing.assert_allclose(step.output, result.heads[0].output[step.position - 1], rtol=0, atol=0)
    last = scenario.L
    e = explain.explain(result, position=last, head=1, block_size=block)
    assert e.online is not None
    np.testing.assert_allclose(e.online.output, result.heads[0].output[last - 1], rtol=1e-12, atol=1e-12)


# -- published worked examples -------------------------------------------------------------------------


FUSED_QKV = """
name: leetgpu-fused-qkv-rope
tokens: [x]
embeddings: [[1.0, 0.0]]
W_Q: [[1.0, 0.0], [0.0, 1.0]]
W_K: [[0.0, 1.0], [1.0, 0.0]]
W_V: [[1.0, 1.0], [2.0, 2.0]]
"""


@pytest.mark.parametrize(
    "rope",
    ["{offset: 1}", "{angles: [[1.0]]}", "{cos: [[0.5403023, 0.5403023]], sin: [[0.8414710, 0.8414710]]}"],
    ids=["theta-at-offset-1", "given-angle", "given-table"],
)
def test_rope_at_position_1_leetgpu_fused_qkv(rope):
    """LeetGPU's fused QKV + RoPE example, as a scenario: the new token at position 1 turns q and k by 1 rad.

    Source: LeetGPU challenge "Fused QKV + RoPE + KV-Cache Update", repository AlphaGPU/leetgpu-challenges,
    challenges/medium/115_fused_qkv_rope_kv_cache_update/challenge.html (commit 7e48d44d), "Example": x = [1, 0],
    W_qkv = [[1, 0, 0, 1, 1, 1], [0, 1, 1, 0, 2, 2]] (its column blocks are W_Q, W_K, W_V here), D = 2,
    cos_sin_cache row 1 = [0.5403023, 0.8414710], positions = [1]; RoPE(q) = [0.5403023, 0.8414710],
    RoPE(k) = [−0.8414710, 0.5403023], v = [1, 1] (printed to 7 decimals). The position comes three ways: θ = 10000
    at offset 1 (the one token is the second of its sequence, the first already cached), the angle given, the
    printed table row given.
    """
    head = engine.run(from_text(FUSED_QKV + f"rope: {rope}\n")).heads[0]
    np.testing.assert_allclose(head.Q_rope[0], [0.5403023, 0.8414710], rtol=0, atol=5e-8)
    np.testing.assert_allclose(head.K_rope[0], [-0.8414710, 0.5403023], rtol=0, atol=5e-8)
    np.testing.assert_array_equal(head.V[0], [1.0, 1.0])


def test_rope_from_a_cos_sin_table_leetgpu():
    """LeetGPU's "Rotary Positional Embedding" Example 1, as a scenario with Q given and the cos/sin table given.

    Source: LeetGPU challenge "Rotary Positional Embedding", repository AlphaGPU/leetgpu-challenges,
    challenges/medium/61_rope_embedding/challenge.html, "Example 1": Q = [[1, 2, 3, 4], [1, 1, 1, 1]],
    Cos = [[1, 1, 1, 1], [0, 0, 0, 0]], Sin = [[0, 0, 0, 0], [1, 1, 1, 1]]; result = [[1, 2, 3, 4], [−1, −1, 1, 1]]
    (exact: row 0 is the identity, row 1 a quarter turn).
    """
    text = """
tokens: [a, b]
Q: [[1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0]]
K: [[1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0]]
V: [[1.0], [2.0]]
rope: {cos: [[1, 1, 1, 1], [0, 0, 0, 0]], sin: [[0, 0, 0, 0], [1, 1, 1, 1]]}
"""
    head = engine.run(from_text(text)).heads[0]
    assert head.Q_rope.tolist() == [[1.0, 2.0, 3.0, 4.0], [-1.0, -1.0, 1.0, 1.0]]


# -- the variant's own rules ----------------------------------------------------------------------------


def test_partial_rotary_uses_the_rotated_width_in_the_frequencies():
    """ω_i = θ^(−2i/r) over the rotated width, as transformers' partial rotary: r = 4 of d_k = 8 gives 1 and θ^(−1/2)."""
    scenario = from_text("tokens: [a]\nQ: [[1, 0, 0, 0, 0, 0, 0, 0]]\nK: [[1, 0, 0, 0, 0, 0, 0, 0]]\nV: [[1]]\nrope: {fraction: 0.5, theta: 100}\n")
    assert scenario.variant(Rope) is not None and scenario.variant(Rope).rotary_dim == 4
    np.testing.assert_allclose(scenario.variant(Rope).frequencies(8), [1.0, 0.1])
    assert scenario.variant(Rope).pairs(8)[1].tolist() == [2, 3]  # rotate-half within the first r coordinates


def test_offset_shifts_every_position_and_keeps_relative_scores():
    """An offset turns every q and k further by the same angle: the scores (which see only i − j) stay, the rotated rows move."""
    base = FUSED_QKV.replace("tokens: [x]", "tokens: [x, y, z]").replace("[[1.0, 0.0]]", "[[1.0, 0.0], [0.3, 0.7], [-0.5, 0.2]]")
    at_0 = engine.run(from_text(base + "rope: true\n")).heads[0]
    at_100 = engine.run(from_text(base + "rope: {offset: 100}\n")).heads[0]
    np.testing.assert_allclose(at_100.scores, at_0.scores, rtol=0, atol=1e-12)
    assert np.abs(at_100.Q_rope - at_0.Q_rope).max() > 0.1


BAD = [
    ("rope: {fraction: 0.3}", "rope.fraction", "fraction 0.3 of d_k = 4 is 1.2 coordinates"),
    ("rope: {fraction: 0.25}", "rope.fraction", "fraction 0.25 of d_k = 4 is 1 coordinates"),
    ("rope: {rotary_dim: 3}", "rope.rotary_dim", "rotary_dim 3 is odd"),
    ("rope: {rotary_dim: 6}", "rope.rotary_dim", "out of range"),
    ("rope: {fraction: 0.5, rotary_dim: 2}", "rope.rotary_dim", "both `fraction` and `rotary_dim`"),
    ("rope: {offset: -1}", "rope.offset", "out of range"),
    ("rope: {angles: [[1.0]]}", "rope.angles", "1 rows for 2 tokens"),
    ("rope: {angles: [[1, 2, 3], [1, 2, 3]]}", "rope.angles", "implies r = 6"),
    ("rope: {angles: [[1], [2]], rotary_dim: 4}", "rope.angles", "implies r = 2"),
    ("rope: {cos: [[1, 1], [1, 1]]}", "rope.sin", "`cos` is given without `sin`"),
    ("rope: {cos: [[1, 1], [1, 1]], sin: [[0, 0, 0, 0], [0, 0, 0, 0]]}", "rope.sin", "sin is 2 × 4 but cos is 2 × 2"),
    ("rope: {angles: [[1], [2]], cos: [[1, 1], [1, 1]], sin: [[0, 0], [0, 0]]}", "rope.cos", "both `angles` and `cos`"),
    ("rope: {theta: 100, angles: [[1], [2]]}", "rope.angles", "both `theta` and `angles`"),
]


@pytest.mark.parametrize(("rope", "key", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_rope_mapping_is_one_clear_error(rope, key, message):
    """Each impossible partial rotary, offset or given table names its key and what was expected."""
    text = f"tokens: [a, b]\nQ: [[1, 0, 0, 0], [0, 1, 0, 0]]\nK: [[1, 0, 0, 0], [0, 1, 0, 0]]\nV: [[1], [2]]\n{rope}\n"
    with pytest.raises(AttnError) as error:
        from_text(text)
    assert error.value.key == key and message in str(error.value), str(error.value)
    assert error.value.expected


# -- every command and format ---------------------------------------------------------------------------

PARTIAL = """
name: partial
sentence: "the cat sat down"
heads: 2
mask: causal
embeddings:
  - [0.48, -0.24, 0.96, -0.2]
  - [-0.87, 3.32, 0.23, -0.35]
  - [0.48, -0.24, 0.96, -0.2]
  - [-0.18, 0.54, 1.94, -0.27]
W_Q: [[0.31, 0.21, 0.03, 0.24, 0.1, 0.2, 0.3, 0.4], [0.1, 0.25, -0.16, -0.38, 0.5, 0.6, -0.7, 0.8],
      [0.07, 0.39, -0.07, -0.33, 0.9, -0.1, 0.2, 0.3], [0.08, -0.88, 0.24, 0.17, -0.4, 0.5, 0.6, 0.7]]
W_K: [[0.0, 0.43, 0.27, 0.08, 0.3, 0.2, 0.1, 0.0], [-0.28, 0.05, -0.04, 0.19, 0.1, -0.2, 0.3, 0.4],
      [-0.72, -0.12, -0.22, 0.19, 0.5, 0.6, 0.7, 0.8], [-0.35, -0.28, 0.02, 0.23, -0.9, 0.1, 0.2, 0.3]]
W_V: [[0.3, -0.14], [-0.17, 0.05], [-0.05, 0.28], [0.06, 0.26]]
"""


@pytest.mark.parametrize("command", ["run", "explain", "decode", "explain-block"])
@pytest.mark.parametrize("fmt", ["table", "json", "markdown", "latex", "csv", "html", "svg"])
def test_partial_rotary_at_an_offset_works_in_every_command_and_format(cli, tmp_path, command, fmt):
    """run, explain, decode and --block-size, in every format, with a partial rotary from position 100."""
    path = tmp_path / "partial.yaml"
    path.write_text(PARTIAL + "rope: {fraction: 0.5, offset: 100}\n", encoding="utf-8")
    args = {
        "run": ["run", str(path)],
        "explain": ["explain", "--scenario", str(path), "--word", "sat", "--position", "3"],
        "decode": ["decode", str(path)],
        "explain-block": ["explain", "--scenario", str(path), "--position", "4", "--block-size", "2"],
    }[command]
    result = cli(*args, "--format", fmt)  # every command draws every format: a failure fails, it never skips
    assert result.exit_code == 0, result.stderr
    if fmt == "json":
        rope = json.loads(result.stdout)["scenario"]["rope"]
        assert (rope["rotary_dim"], rope["offset"], rope["given"]) == (2, 100, None)
    if command == "run" and fmt == "table":
        assert "at positions 100–103; columns 3–4 unchanged" in result.stdout
    if command == "explain" and fmt == "table":
        assert "φ = 102 × 1 = 102" in result.stdout
        assert "coordinates 3–4: [" in result.stdout and "pass through unrotated" in result.stdout
        assert "RoPE([" in result.stdout and ", 100) = [" in result.stdout
    if command == "decode" and fmt == "table":
        assert "(position 3; RoPE position 102)" in result.stdout


def test_explain_with_a_given_table_shows_cos_and_sin(cli, tmp_path):
    """With a given table the rotation step prints each pair's cos and sin, not an angle computed from θ."""
    path = tmp_path / "table.yaml"
    path.write_text(FUSED_QKV + "rope: {cos: [[0.5403023, 0.5403023]], sin: [[0.8414710, 0.8414710]]}\n", encoding="utf-8")
    result = cli("explain", "--scenario", str(path), "--word", "x")
    assert result.exit_code == 0, result.stderr
    assert "pair 1 (1, 2) = cos 0.5403, sin 0.8415: (1, 0) turns to (0.5403, 0.8415)" in result.stdout
    assert "given cos/sin table" in result.stdout


def test_the_schema_takes_the_new_keys_and_refuses_what_the_reader_refuses():
    """Editors see fraction, rotary_dim, offset, angles, cos and sin; both fraction and rotary_dim, or cos alone, are invalid."""
    import jsonschema

    from attncli.sources import fields

    schema = fields.json_schema()

    def valid(rope: dict) -> bool:
        doc = {"tokens": ["a"], "Q": [[1, 0]], "K": [[1, 0]], "V": [[1]], "rope": rope}
        return jsonschema.Draft202012Validator(schema).is_valid(doc)

    assert valid({"fraction": 0.5, "offset": 100}) and valid({"rotary_dim": 2, "style": "interleaved"})
    assert valid({"angles": [[1.0]]}) and valid({"cos": [[1, 1]], "sin": [[0, 0]]})
    assert not valid({"fraction": 0.5, "rotary_dim": 2}) and not valid({"cos": [[1, 1]]}) and not valid({"offset": -1})


def test_the_latex_of_partial_offset_and_given_rope_renders_with_katex(cli, tmp_path, katex_modules):
    """Every display block of run's rotated q/k and of explain's rotation step renders with KaTeX in strict mode."""
    from tests import renderers

    texts = []
    for name, rope in (("partial", "{fraction: 0.5, offset: 100}"), ("table", None)):
        path = tmp_path / f"{name}.yaml"
        if rope is None:
            path.write_text(FUSED_QKV + "rope: {cos: [[0.5403023, 0.5403023]], sin: [[0.8414710, 0.8414710]]}\n", encoding="utf-8")
            texts.append(cli("explain", "--scenario", str(path), "--word", "x", "--format", "latex").stdout)
            continue
        path.write_text(PARTIAL + f"rope: {rope}\n", encoding="utf-8")
        texts.append(cli("run", str(path), "--format", "latex", "--stages", "rope").stdout)
        texts.append(cli("explain", "--scenario", str(path), "--position", "3", "--format", "latex").stdout)
    blocks = [block for text in texts for block in renderers.latex_display_blocks(text)]
    assert any("unrotated" in block for block in blocks) and any("100-103" in block for block in blocks)
    rendered = renderers.katex(katex_modules, blocks)
    assert [(blocks[i][:160], r.error) for i, r in enumerate(rendered) if r.error] == []
