"""`attncli scenarios new`: the file it writes runs, means what its options say, and reads back exactly."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli import api
from attncli.core.variants import LearnedSink, QkNorm, Rope, SoftCap
from attncli.errors import AttnError
from attncli.sources.generator import new_scenario
from tests import reference as ref
from tests.reference import sees

WORDS = st.lists(st.sampled_from(["the", "cat", "sat", "on", "a", "mat", "and", "slept"]), min_size=1, max_size=7)


def _run(tmp_path, text: str):
    path = tmp_path / "new.yaml"
    path.write_text(text, encoding="utf-8")
    return api.run(path).result


@settings(max_examples=40, deadline=None)
@given(
    words=WORDS,
    heads=st.integers(1, 3),
    d_k=st.integers(1, 5),
    causal=st.booleans(),
    window=st.one_of(st.none(), st.integers(0, 4)),
    sinks=st.integers(0, 2),
    data=st.data(),
)
def test_generated_masks_are_the_masks_the_reference_reads(tmp_path_factory, words, heads, d_k, causal, window, sinks, data):
    """Whatever --d-k, --mask, --window, --sink-tokens and --padding say, the engine hides exactly the keys the naive reference hides."""
    L = len(words)
    padding = tuple(data.draw(st.sets(st.integers(1, L), max_size=L - 1), label="padding")) if L > 1 else ()
    sink_tokens = min(sinks, L) if window is not None else None
    rules = {"causal": causal, "window": window, "sinks": sink_tokens or 0, "padding": padding}
    expected = np.array([[sees(i, j, rules) for j in range(1, L + 1)] for i in range(1, L + 1)])
    options = {"d_model": 3, "heads": heads, "d_k": d_k, "causal": causal, "window": window, "sink_tokens": sink_tokens, "padding": padding, "seed": 1}
    if not expected.any(axis=1).all():  # some query would see no key: refused before a file is written
        with pytest.raises(AttnError, match="would see no key"):
            new_scenario(" ".join(words), **options)
        return
    text = new_scenario(" ".join(words), **options)
    mask = yaml.safe_load(text)["mask"]
    assert isinstance(mask, dict) == (window is not None or bool(padding))
    result = _run(tmp_path_factory.mktemp("g"), text)
    for head in result.heads:
        assert head.Q.shape == (L, d_k)
        np.testing.assert_array_equal(head.visible, expected)
        seen_rows = expected.any(axis=1)
        np.testing.assert_allclose(head.weights.sum(axis=1)[seen_rows], 1.0, atol=1e-12)


def _spread_and_entropy(tmp_path, sharpness: float) -> tuple[float, float]:
    """Over 30 seeds: the standard deviation of the scaled scores, and the mean row entropy relative to uniform."""
    spreads, entropies = [], []
    words = "one two three four five six seven eight"
    for seed in range(30):
        head = _run(tmp_path, new_scenario(words, d_model=16, sharpness=sharpness, seed=seed)).heads[0]
        spreads.append(head.scaled.std())
        a = head.weights
        entropies.append(float((-(a * np.log(a)).sum(axis=1) / np.log(a.shape[1])).mean()))
    return float(np.median(spreads)), float(np.mean(entropies))


def test_sharpness_sets_the_spread_of_the_scaled_scores(tmp_path):
    """--sharpness S gives scaled scores with a spread of about S, and so rows far from uniform at 4 where 1 leaves them nearly even."""
    soft_spread, soft_entropy = _spread_and_entropy(tmp_path, 1.0)
    sharp_spread, sharp_entropy = _spread_and_entropy(tmp_path, 4.0)
    assert 0.6 < soft_spread < 1.6
    assert 2.4 < sharp_spread < 6.4
    assert soft_entropy > 0.8  # the pattern of random default weights is faint: why the option exists
    assert sharp_entropy < soft_entropy - 0.25


def test_default_sharpness_keeps_the_files_people_already_generated(tmp_path):
    """Adding the options changed no byte of what `scenarios new` wrote before (same seed, same file)."""
    text = new_scenario("The cat sat", d_model=4, heads=2, kv_heads=1, causal=True, rope=True, seed=7)
    assert "mask: causal" in text.splitlines()
    assert text == new_scenario("The cat sat", d_model=4, heads=2, kv_heads=1, d_k=2, causal=True, rope=True, sharpness=1.0, seed=7)
    doc = yaml.safe_load(text)
    assert len(doc["W_Q"][0]) == 4 and len(doc["W_K"][0]) == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"d_model": 5, "heads": 2}, "does not split into 2 heads"),
        ({"d_model": 4, "sink_tokens": 1}, "there is no window"),
        ({"d_model": 4, "window": 1, "sink_tokens": 4}, "4 sink keys, but the sentence has 3 tokens"),
        ({"d_model": 4, "padding": (4,)}, "beyond the sentence's 3 tokens"),
        ({"d_model": 4, "padding": (1, 2, 3)}, "would see no key"),
        ({"d_model": 4, "causal": True, "padding": (1,)}, "query 1 \\('a'\\) would see no key"),
        ({"d_model": 4, "d_k": 3, "rope": True}, "RoPE needs an even d_k"),
    ],
)
def test_options_that_make_no_scenario_are_refused(options, message):
    with pytest.raises(AttnError, match=message):
        new_scenario("a b c", **options)


def test_cli_writes_a_file_that_runs(cli, tmp_path):
    out = cli(*["scenarios", "new", "one two three four", "--d-model", "6", "--heads", "2", "--d-k", "4", "--mask", "causal", "--window", "1", "--sink-tokens", "1", "--padding", "2", "--sharpness", "3"])
    assert out.exit_code == 0, out.stderr
    result = _run(tmp_path, out.stdout)
    assert result.heads[0].Q.shape == (4, 4)
    assert not result.heads[0].visible[:, 1].any()  # position 2 is padding


@pytest.mark.parametrize(("value", "expected"), [("x,", "positions from 1, comma-separated"), ("0", "counted from 1")])
def test_cli_refuses_bad_padding_in_one_line(cli, value, expected):
    out = cli("scenarios", "new", "a b c", "--padding", value)
    assert out.exit_code == 1 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and expected in out.stderr and "--padding" in out.stderr


@settings(max_examples=30, deadline=None)
@given(
    words=WORDS,
    heads=st.integers(1, 2),
    half_d_k=st.integers(1, 3),
    fraction=st.sampled_from([None, 0.5, 1.0]),
    offset=st.one_of(st.none(), st.integers(0, 200)),
    qk_norm=st.booleans(),
    softcap=st.one_of(st.none(), st.sampled_from([0.5, 5.0, 50.0])),
    sink_logits=st.booleans(),
    seed=st.integers(0, 50),
)
def test_generated_mechanisms_are_what_the_reference_computes(tmp_path_factory, words, heads, half_d_k, fraction, offset, qk_norm, softcap,
                                                              sink_logits, seed):  # fmt: skip
    """--rotary-fraction, --rope-offset, --qk-norm, --softcap and --sink-logits write keys that load into those mechanisms,
    whose numbers are the naive reference's (tests/reference.py: RoPE partial and from an offset, RMSNorm, cap·tanh, the sink's sum)."""
    d_k = 2 * half_d_k
    if fraction is not None and (d_k * fraction) % 2:
        fraction = 1.0
    text = new_scenario(" ".join(words), d_model=4, heads=heads, d_k=d_k, causal=True, rotary_fraction=fraction, rope_offset=offset,
                        qk_norm=qk_norm, softcap=softcap, sink_logits=sink_logits, sharpness=3.0, seed=seed)  # fmt: skip
    doc = yaml.safe_load(text)
    result = _run(tmp_path_factory.mktemp("g"), text)
    s = result.scenario
    rope = s.variant(Rope)
    assert (rope is not None) == (fraction is not None or offset is not None)
    if rope is not None:
        assert rope.offset == (offset or 0) and rope.width(d_k) == int(d_k * (fraction or 1))
    assert (s.variant(QkNorm) is not None) == qk_norm and (s.variant(SoftCap) is not None) == (softcap is not None)
    assert (s.variant(LearnedSink) is not None) == sink_logits
    Q, K, V = (ref.matmul(doc["embeddings"], doc[key]) for key in ("W_Q", "W_K", "W_V"))
    for h, head in enumerate(result.heads):
        q, k, v = (ref.columns(rows, h * d_k, (h + 1) * d_k) for rows in (Q, K, V))
        if qk_norm:
            norm = doc["qk_norm"]
            q = [ref.rms_norm(row, norm["q_weight"], norm["eps"]) for row in q]
            k = [ref.rms_norm(row, norm["k_weight"], norm["eps"]) for row in k]
        if rope is not None:
            q, k = ref.rope_rows(q, doc["rope"]), ref.rope_rows(k, doc["rope"])
        sink = doc["sink_logits"][h] if sink_logits else None
        expected = ref.head_attention(q, k, v, scale=1 / np.sqrt(d_k), sees=lambda i, j: j <= i, cap=softcap, sink=sink)
        np.testing.assert_allclose(head.weights, expected["weights"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(head.output, expected["output"], rtol=1e-9, atol=1e-12)


def test_cli_new_mechanisms_are_shown(cli, tmp_path):
    """The generated file of every new option runs through explain, which narrates each mechanism."""
    out = cli("scenarios", "new", "a b c d", "--d-model", "8", "--heads", "2", "--mask", "causal", "--qk-norm", "--softcap", "5",
              "--sink-logits", "--rotary-fraction", "0.5", "--rope-offset", "100", "--sharpness", "4", "--seed", "3")  # fmt: skip
    assert out.exit_code == 0, out.stderr
    path = tmp_path / "new.yaml"
    path.write_text(out.stdout, encoding="utf-8")
    said = " ".join(cli("explain", str(path), "--position", "4").stdout.split())
    for step in ("(QK-norm)", "Rotating the query and the keys (RoPE)", "Soft-capping the scores", "The learned sink's share"):
        assert step in said, step
    assert "positions from 100" in said and "Partial rotary: only the first r = 2 of the d_k = 4 coordinates turn" in said


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--rotary-fraction", "0.3"], "--rotary-fraction"),
        (["--rotary-fraction", "0.25"], "0.25 of d_k = 4 is 1 coordinate (expected"),
        (["--rope-offset", "2147483649"], "--rope-offset: found 2,147,483,649 (expected a position from 0 to 2,147,483,648)"),
        (["--softcap", "0"], "--softcap"),
        (["--softcap", "nan"], "--softcap"),
    ],
)
def test_cli_refuses_mechanism_options_in_one_line(cli, options, message):
    out = cli("scenarios", "new", "a b c", "--d-model", "4", *options)
    assert out.exit_code != 0 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and message in out.stderr, out.stderr


def test_mla_new_has_the_builtin_examples_sizes(tmp_path):
    """--mla at the built-in `mla` example's settings writes its sizes: d_c = d_r = d_n = d_v = 2, a norm of the latent,
    RoPE in interleaved pairs; --latent N sets d_c and turns MLA on; the same seed gives the same file."""
    from attncli.core.variants import Mla
    from attncli.sources.yaml_scenario import load

    builtin = load("mla")
    text = new_scenario("the cat sat down", d_model=4, heads=2, causal=True, mla=True, rope=True, seed=3)
    assert text == new_scenario("the cat sat down", d_model=4, heads=2, causal=True, mla=True, rope=True, seed=3)
    s = _run(tmp_path, text).scenario
    mla, expected = s.variant(Mla), builtin.variant(Mla)
    assert mla is not None and expected is not None and mla.kv_norm is not None and s.variant(Rope) is not None
    assert (mla.d_c, mla.d_r, mla.d_n, mla.d_v, mla.d_cq, s.heads, s.d_model) == (
        expected.d_c, expected.d_r, expected.d_n, expected.d_v, expected.d_cq, builtin.heads, builtin.d_model)  # fmt: skip
    assert s.variant(Rope).style == builtin.variant(Rope).style == "interleaved" and s.mask.causal
    wide = _run(tmp_path, new_scenario("a b c", d_model=8, heads=2, latent=3, d_k=8)).scenario.variant(Mla)
    assert wide is not None and (wide.d_c, wide.d_n, wide.d_v, wide.d_r) == (3, 8, 8, 4)
    assert "W_Q" not in yaml.safe_load(text) and "rope" not in yaml.safe_load(new_scenario("a b", d_model=4, mla=True))


def test_mla_sharpness_sets_the_spread_of_the_scaled_scores(tmp_path):
    """Under --mla too, --sharpness S gives scaled scores with a spread of about S (the latent's weights drawn for its rms of 1)."""
    spreads = {}
    for sharpness in (1.0, 4.0):
        runs = [_run(tmp_path, new_scenario("one two three four five six seven eight", d_model=16, heads=2, mla=True, rope=True,
                                            sharpness=sharpness, seed=seed)) for seed in range(20)]  # fmt: skip
        spreads[sharpness] = float(np.median([result.heads[0].scaled.std() for result in runs]))
    assert 0.5 < spreads[1.0] < 1.6 and 2.4 < spreads[4.0] < 6.4


@settings(max_examples=25, deadline=None)
@given(words=WORDS, heads=st.integers(1, 3), d_k=st.integers(1, 5), latent=st.one_of(st.none(), st.integers(1, 4)), rope=st.booleans(),
       offset=st.one_of(st.none(), st.integers(0, 50)), seed=st.integers(0, 50))  # fmt: skip
def test_generated_mla_is_what_the_reference_computes(tmp_path_factory, words, heads, d_k, latent, rope, offset, seed):
    """--mla writes a scenario whose weights and outputs are the naive reference's MLA (tests/reference.py: q, k, v by hand)."""
    text = new_scenario(" ".join(words), d_model=4, heads=heads, d_k=d_k, causal=True, mla=True, latent=latent, rope=rope,
                        rope_offset=offset, sharpness=3.0, seed=seed)  # fmt: skip
    result = _run(tmp_path_factory.mktemp("m"), text)
    expected = ref.document_attention(ref.scenario_document(result.scenario))
    for h, head in enumerate(result.heads):
        np.testing.assert_allclose(head.weights, expected["weights"][h], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(head.output, expected["head_outputs"][h], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--heads", "2", "--kv-heads", "1", "--mla"], "--kv-heads has no use with --mla"),
        (["--qk-norm", "--latent", "2"], "--qk-norm has no use with --mla"),
        (["--mla", "--rotary-fraction", "0.5"], "--rotary-fraction has no use with --mla"),
    ],
)
def test_cli_refuses_what_mla_has_no_use_for_in_one_line(cli, options, message):
    out = cli("scenarios", "new", "a b c", "--d-model", "4", *options)
    assert out.exit_code != 0 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and message in out.stderr, out.stderr


def test_cli_new_mla_runs_and_is_explained(cli, tmp_path):
    """The generated MLA file runs through explain, which narrates the latent and the absorbed form."""
    out = cli("scenarios", "new", "the cat sat down", "--d-model", "4", "--heads", "2", "--mask", "causal", "--mla", "--rope", "--seed", "5")
    assert out.exit_code == 0, out.stderr
    path = tmp_path / "new.yaml"
    path.write_text(out.stdout, encoding="utf-8")
    said = " ".join(cli("explain", str(path), "--position", "3", "--head", "2").stdout.split())
    for step in ("The latent, and the keys and values expanded from it", "Rotating the decoupled part (RoPE)", "absorbed form"):
        assert step in said, step
