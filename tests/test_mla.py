"""Multi-head latent attention (scenario key `mla`, core/variants/mla.py) against the naive reference and itself.

The engine's expanded form and its absorbed form both equal `tests.reference.mla` (a loop implementation of
DeepSeek-V2 §2.1, eqs. 9–19) on random scenarios read through the YAML reader; the two forms agree with each
other to float64 rounding; every command and format accepts the built-in example; the cache sizes are
DeepSeek-V2's Table 1 (d_c + d_r per token). No published worked example of MLA with numbers was found (see
the report of this branch); DeepSeek V3's transformers fixture is the golden for real weights
(tests/test_deepseek.py).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import engine
from attncli.core.decode import decode
from attncli.core.explain import explain_scenario
from attncli.core.variants import Mla, Rope
from attncli.sources.yaml_scenario import from_text, load
from tests import reference as ref
from tests.strategies import matrix


def per_head(columns: list[list[float]], heads: int, first: int, second: int) -> tuple[list[list[float]], list[list[float]]]:
    """A reference matrix whose head blocks are [first | second] split into the two parts, each (rows, H·part)."""
    width = first + second
    a = [[row[h * width + i] for h in range(heads) for i in range(first)] for row in columns]
    b = [[row[h * width + first + i] for h in range(heads) for i in range(second)] for row in columns]
    return a, b


@st.composite
def mla_documents(draw):
    """A random MLA scenario document (causal, RoPE on the decoupled part) and the reference's arguments."""
    L, d, heads = draw(st.integers(1, 6)), draw(st.integers(1, 5)), draw(st.integers(1, 3))
    rank, nope, rope_dim, v_dim = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.sampled_from([2, 4])), draw(st.integers(1, 3))
    style = draw(st.sampled_from(["half", "interleaved"]))
    X = draw(matrix(L, d, bound=2))
    q_rank = draw(st.sampled_from([None, 2, 3]))
    q_in = d if q_rank is None else q_rank
    W_q = draw(matrix(q_in, heads * (nope + rope_dim), bound=1.5))
    W_dkv = draw(matrix(d, rank + rope_dim, bound=1.5))
    W_ukv = draw(matrix(rank, heads * (nope + v_dim), bound=1.5))
    norm = draw(st.lists(st.floats(0.5, 1.5), min_size=rank, max_size=rank))
    W_UQ, W_QR = per_head(W_q, heads, nope, rope_dim)
    W_UK, W_UV = per_head(W_ukv, heads, nope, v_dim)
    mla: dict = {
        "W_DKV": [row[:rank] for row in W_dkv], "kv_norm": {"weight": norm, "eps": 1e-6}, "W_UK": W_UK, "W_UV": W_UV,
        "W_KR": [row[rank:] for row in W_dkv], "W_UQ": W_UQ, "W_QR": W_QR,
    }  # fmt: skip
    source = X
    if q_rank is not None:  # the queries' own latent: the reference reads [c_Q | X] with weights that read their own part
        W_DQ = draw(matrix(d, q_rank, bound=1.5))
        q_norm = draw(st.lists(st.floats(0.5, 1.5), min_size=q_rank, max_size=q_rank))
        mla |= {"W_DQ": W_DQ, "q_norm": {"weight": q_norm, "eps": 1e-6}}
        c_Q = [ref.rms_norm(row, q_norm, 1e-6) for row in ref.matmul(X, W_DQ)]
        source = [a + b for a, b in zip(c_Q, X)]
        W_q = W_q + [[0.0] * len(W_q[0]) for _ in range(d)]
        W_dkv = [[0.0] * len(W_dkv[0]) for _ in range(q_rank)] + W_dkv
    doc = {"tokens": [f"w{i}" for i in range(L)], "embeddings": X, "heads": heads, "mask": "causal",
           "rope": {"theta": 10000, "style": style}, "mla": mla}  # fmt: skip
    arguments = {"heads": heads, "W_q": W_q, "W_dkv": W_dkv, "kv_norm": (norm, 1e-6), "W_ukv": W_ukv, "nope": nope,
                 "rope_dim": rope_dim, "v_dim": v_dim, "theta": 10000.0, "style": style, "scale": (nope + rope_dim) ** -0.5}  # fmt: skip
    return doc, source, arguments


@settings(max_examples=150, deadline=None)
@given(mla_documents())
def test_engine_agrees_with_the_reference_both_ways(drawn):
    """Expanded weights and head outputs, and the absorbed form's, equal the reference's to 1e-9; the two forms to 1e-12."""
    doc, source, arguments = drawn
    result = engine.run(from_text(json.dumps(doc)))
    expanded = ref.mla(source, absorbed=False, **arguments)
    absorbed = ref.mla(source, absorbed=True, **arguments)
    for h, head in enumerate(result.heads):
        assert head.mla is not None
        np.testing.assert_allclose(head.weights, expanded["weights"][h], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(head.output, expanded["head_outputs"][h], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(head.mla.weights, absorbed["weights"][h], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(head.mla.output, absorbed["head_outputs"][h], rtol=1e-9, atol=1e-9)
        assert head.mla.difference <= 1e-12
        np.testing.assert_allclose(head.mla.output, head.output, rtol=0, atol=1e-12 * (1 + np.abs(head.output).max()))
    assert result.scenario.variant(Mla) is not None
    assert result.scenario.variant(Mla).cached == absorbed["cache_per_token"]
    assert result.scenario.variant(Mla).expanded == expanded["cache_per_token"]
    np.testing.assert_allclose(result.output, np.hstack(expanded["head_outputs"]), rtol=1e-9, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(mla_documents(), st.data())
def test_explain_and_decode_read_the_runs_rows(drawn, data):
    """explain's lean path (one row kept) and decode's steps give the full run's numbers bit for bit, absorbed form included."""
    doc, _, _ = drawn
    scenario = from_text(json.dumps(doc))
    full = engine.run(scenario)
    position = data.draw(st.integers(1, scenario.L))
    head = data.draw(st.integers(1, scenario.heads))
    expl = explain_scenario(scenario, position=position, head=head)
    assert [key.weight for key in expl.keys] == list(full.head(head).weights[position - 1])
    assert expl.head.mla is not None and full.head(head).mla is not None
    assert list(expl.head.mla.weights[0]) == list(full.head(head).mla.weights[position - 1])
    steps = decode(full, head).steps
    np.testing.assert_array_equal(steps[-1].output, full.head(head).output[-1])


def test_cache_per_token_is_deepseek_v2_table_1_at_v3_sizes():
    """d_c + d_r = 512 + 64 = 576 numbers a token and layer against H·(d_k + d_v) = 128·(192 + 128) = 40 960.

    Source: DeepSeek-V2 (arXiv:2405.04434) §2.1.4 Table 1 (MLA: (d_c + d_h^R)·l), with DeepSeek-V3's sizes
    (kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128, 128 heads); docs/families.md.
    """
    from attncli.core.variants.mla import Mla

    z = np.zeros
    mla = Mla(heads=128, W_DKV=z((1, 512)), W_KR=z((1, 64)), W_UK=z((512, 128 * 128)), W_UV=z((512, 128 * 128)),
              W_UQ=z((1, 128 * 128)), W_QR=z((1, 128 * 64)))  # fmt: skip
    assert (mla.cached, mla.expanded, mla.d_k) == (576, 40960, 192)


@pytest.mark.parametrize("fmt", ["table", "json", "markdown", "latex", "csv", "html", "svg"])
@pytest.mark.parametrize("command", [["run", "mla"], ["explain", "-s", "mla", "--word", "down"], ["decode", "mla"],
                                     ["run", "mla", "--block-size", "2"], ["explain", "-s", "mla", "--word", "sat", "--block-size", "2"]])  # fmt: skip
def test_every_command_and_format_takes_the_example(cli, command, fmt):
    """The built-in MLA example goes through run, explain, decode and --block-size in every format."""
    result = cli(*command, "--format", fmt)
    assert result.exit_code == 0, result.stderr
    assert result.stdout


def test_run_json_has_the_latents_and_the_absorbed_form(cli):
    """run's JSON adds the shared latents and each head's absorbed form (keys only added); the scenario says the cache."""
    doc = json.loads(cli("run", "mla", "--format", "json").stdout)
    assert {"D_KV", "C_KV", "K_R", "K_R_rope"} <= set(doc)
    assert {"W_UK", "W_UV", "Q_latent", "A_absorbed", "mixed", "O_absorbed"} <= set(doc["heads"][0])
    assert doc["scenario"]["mla"]["cache_per_token"] == 4 and doc["scenario"]["mla"]["expanded_per_token"] == 12
    for head in doc["heads"]:
        np.testing.assert_allclose(np.nan_to_num(np.array(head["A_absorbed"], dtype=float)), np.nan_to_num(np.array(head["weights"], dtype=float)), atol=1e-15)


def test_explain_says_the_forms_agree_and_the_cache_is_smaller(cli):
    """explain's absorbed step gives the difference between the two forms' weights and both cache sizes."""
    out = " ".join(cli("explain", "-s", "mla", "--word", "down", "--head", "2").stdout.split())  # lines joined
    assert "The same row from the latent (absorbed form)" in out
    assert "Both forms give the same weights" in out
    assert "d_c + d_r = 2 + 2 = 4 numbers per layer" in out and "= 12 for the expanded keys and values" in out


def test_rope_turns_only_the_decoupled_part():
    """Under MLA the first d_n columns of q and k are never rotated, the last d_r are; K's last part is shared by the heads."""
    result = engine.run(load("mla"))
    mla = result.scenario.variant(Mla)
    assert mla is not None and result.mla is not None
    for head in result.heads:
        assert head.Q_rope is not None and head.K_rope is not None
        np.testing.assert_array_equal(head.Q_rope[:, : mla.d_n], head.Q[:, : mla.d_n])
        np.testing.assert_array_equal(head.K_rope[:, mla.d_n :], result.mla.K_R_rope)
        assert not np.array_equal(head.Q_rope[1:, mla.d_n :], head.Q[1:, mla.d_n :])


def test_decoding_the_example_gives_the_references_rows():
    """Each decode step of the built-in example, every head: weights over the cache and output = reference.mla's row t."""
    scenario = load("mla")
    mla = scenario.variant(Mla)
    assert mla is not None and scenario.X is not None and scenario.variant(Rope) is not None and mla.kv_norm is not None
    H, d_n, d_r, d_v = scenario.heads, mla.d_n, mla.d_r, mla.d_v
    W_q = np.hstack([np.hstack([mla.W_UQ[:, h * d_n : (h + 1) * d_n], mla.W_QR[:, h * d_r : (h + 1) * d_r]]) for h in range(H)])
    W_ukv = np.hstack([np.hstack([mla.W_UK[:, h * d_n : (h + 1) * d_n], mla.W_UV[:, h * d_v : (h + 1) * d_v]]) for h in range(H)])
    expected = ref.mla(
        scenario.X.tolist(), heads=H, W_q=W_q.tolist(), W_dkv=np.hstack([mla.W_DKV, mla.W_KR]).tolist(),
        kv_norm=(mla.kv_norm.weight.tolist(), mla.kv_norm.eps), W_ukv=W_ukv.tolist(), nope=d_n, rope_dim=d_r, v_dim=d_v,
        theta=scenario.variant(Rope).theta, style=scenario.variant(Rope).style, scale=1 / scenario.scale.divisor, absorbed=True,
    )  # fmt: skip
    for h in range(1, H + 1):
        for step in decode(scenario, h).steps:
            t = step.position
            np.testing.assert_allclose(step.weights, expected["weights"][h - 1][t - 1][:t], rtol=0, atol=1e-14)
            np.testing.assert_allclose(step.output, expected["head_outputs"][h - 1][t - 1], rtol=0, atol=1e-14)


@settings(max_examples=80, deadline=None)
@given(mla_documents(), st.sampled_from([{}, {"mask": "none"}, {"mask": {"causal": True, "window": 1}}, {"alibi": True},
                                         {"scale": 0.7}, {"mask": {"padding": [1]}}]))  # fmt: skip
def test_mla_with_the_other_variants_agrees_with_the_reference(drawn, extra):
    """Masks, windows, padding, ALiBi and a given scale act on MLA's scores as on any: the engine equals the reference
    attention over MLA's q, k, v computed by hand (reference.mla_qkv), every head, to 1e-9."""
    doc, _, _ = drawn
    if "padding" in str(extra) and len(doc["tokens"]) < 2:
        return  # the first key hidden from every query: only with a second key to see
    doc = {**doc, **extra}
    scenario = from_text(json.dumps(doc))
    result = engine.run(scenario)
    expected = ref.document_attention(ref.scenario_document(scenario))
    for h, head in enumerate(result.heads):
        np.testing.assert_allclose(head.weights, expected["weights"][h], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(head.output, expected["head_outputs"][h], rtol=1e-9, atol=1e-9)
        assert head.mla is not None and head.mla.difference <= 1e-12


def test_mla_is_shown_and_read_through_the_registry(monkeypatch, cli):
    """The stage table, the narration and the YAML reader name neither MLA nor the KV cache: each is its own module's.

    Its rows (the latents, W_UK, W_UV, the absorbed form) are Mla.rows, explain's steps its narrate and narrate_output,
    its key its from_yaml: replacing them changes what the commands show and read.
    """
    import inspect

    from attncli.document import stages
    from attncli.sources import yaml_scenario
    from attncli.walkthroughs import narration

    for module in (stages, narration, yaml_scenario):
        source = inspect.getsource(module)
        assert "Mla" not in source and "KvCache" not in source, module.__name__
    assert {row.key for row in Mla.rows} <= {row.key for row in stages.ROWS}
    assert [stage for stage in stages.STAGE_NAMES if stage in ("embeddings", "latent", "q", "output", "absorbed")] == [
        "embeddings", "latent", "q", "output", "absorbed"]  # fmt: skip
    monkeypatch.setattr(Mla, "narrate_output", lambda self, expl, say: None)
    out = cli("explain", "-s", "mla", "--word", "down").stdout
    assert "The latent, and the keys and values expanded from it" in out and "absorbed form" not in out

    def refuse(cls, read, sizes):
        raise read.error("read by Mla.from_yaml", "nothing")

    monkeypatch.setattr(Mla, "from_yaml", classmethod(refuse))
    result = cli("run", "mla")
    assert result.exit_code != 0 and "mla: read by Mla.from_yaml" in result.stderr


@pytest.mark.parametrize(
    ("extra", "where", "message"),
    [
        ({"kv_heads": 1}, ("kv_heads", 4), "`kv_heads` has no use with `mla`"),
        ({"mla_q_norm": True}, ("mla.q_norm", 6), "`q_norm` normalises the query latent, but no `W_DQ` makes one"),
        ({"context": True}, ("context", 4), "`context` has no use with `mla`"),
        ({"qk_norm": True}, ("qk_norm", 4), "`qk_norm` has no use with `mla`"),
    ],
)
def test_mla_refuses_in_one_line_where_the_key_is(extra, where, message):
    """MLA's own reading refuses what it has no use for at the line of the key that says it."""
    from attncli.errors import AttnError

    lines = ["tokens: [a, b]", "embeddings: [[1, 0], [0, 1]]", "heads: 2"]
    if "kv_heads" in extra:
        lines.append("kv_heads: 1")
    if "context" in extra:
        lines.append("context: {tokens: [c]}")
    if "qk_norm" in extra:
        lines.append("qk_norm: true")
    lines += ["mla:", "  W_DKV: [[1], [0]]", "  q_norm: {eps: 1.0e-6}" if "mla_q_norm" in extra else "  W_KR: [[1, 0], [0, 1]]",
              "  W_UK: [[1, 0]]", "  W_UV: [[1, 0]]", "  W_UQ: [[1, 0], [0, 1]]", "  W_QR: [[1, 0, 0, 1], [0, 1, 1, 0]]"]  # fmt: skip
    if "mla_q_norm" in extra:
        lines.append("  W_KR: [[1, 0], [0, 1]]")
    with pytest.raises(AttnError) as caught:
        from_text("\n".join(lines) + "\n")
    assert (caught.value.key, caught.value.line) == where and message in caught.value.message, caught.value
