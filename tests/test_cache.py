"""Decoding from a given KV cache: a scenario's tokens after c cached keys and values (prefix caching, paged attention).

The engine against the naive reference: a random causal scenario computed whole by tests/reference.py, then
the same scenario cut after c tokens, those c given as a cache (their keys as the reference rotated them), must
give the reference's rows c + 1 … L in run and in every decode step; and LeetGPU's published example through the CLI.
"""

import json

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from attncli.core import engine
from attncli.core.decode import decode
from attncli.core.explain import explain_scenario
from attncli.core.variants import Rope
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text, load
from attncli.walkthroughs.narration import steps
from tests import reference
from tests.strategies import causal_documents

PAGED = "tests/scenarios/paged-attention-leetgpu.yaml"


def test_leetgpu_paged_attention_through_the_cli(cli):
    """LeetGPU "Paged Attention" (AlphaGPU/leetgpu-challenges, challenges/medium/86_paged_attention, commit bb42a8eb),
    "Example": Q = [1, 1, 0, 0] against K_0 = [1, 0, 0, 0], K_1 = [0, 1, 0, 0] with V_0 = [2, 0, 0, 0], V_1 = [0, 4, 0, 0],
    scale 1/√4: scores 0.5 and 0.5, weights [0.5, 0.5], output [1, 2, 0, 0] (exact)."""
    run = json.loads(cli("run", PAGED, "--format", "json").stdout)
    head = run["heads"][0]
    assert head["scaled"] == [[0.5, 0.5]]
    assert head["weights"] == [[0.5, 0.5]]
    assert run["output"] == [[1.0, 2.0, 0.0, 0.0]]
    assert run["scenario"]["cache"] == {"tokens": ["t1"], "length": 1, "keys_after_rope": True}
    assert run["scenario"]["labels"] == ["t2"] and run["scenario"]["tokens"] == ["t2"]
    decoded = json.loads(cli("decode", PAGED, "--format", "json").stdout)
    (step,) = decoded["steps"]
    assert step["position"] == 2 and step["cache"]["positions"] == [1, 2]
    assert step["weights"] == [0.5, 0.5] and step["output"] == [1.0, 2.0, 0.0, 0.0]
    table = cli("run", PAGED).stdout
    assert "t1 (cached)" in table
    said = cli("decode", PAGED).stdout
    assert "The cache starts with 1 given key and value" in said and "Step 2: 't2' (position 2)" in said


@st.composite
def qk_norms(draw, document: dict) -> dict:
    """A `qk_norm` for the document: per head or over the whole projection, w or 1 + w, random weights."""
    H, G = document["heads"], document["kv_heads"]
    d_k = len((document.get("Q") or document["W_Q"])[0]) // H
    over = draw(st.sampled_from(["head", "whole"]))
    weight = lambda count: draw(st.lists(st.floats(0.1, 2), min_size=d_k * count, max_size=d_k * count))  # noqa: E731
    return {"over": over, "form": draw(st.sampled_from(["w", "1+w"])), "eps": draw(st.sampled_from([1e-6, 0.1])),
            "q_weight": weight(H if over == "whole" else 1), "k_weight": weight(G if over == "whole" else 1)}  # fmt: skip


@st.composite
def cut_documents(draw):
    """A causal document (any ALiBi; QK-norm half the time) and where to cut it: c ≥ 1 tokens become the cache, at least one stays."""
    document = json.loads(draw(causal_documents()))
    assume(len(document["tokens"]) >= 2)
    if draw(st.booleans()):
        document["qk_norm"] = draw(qk_norms(document))
    try:
        from_text(json.dumps(document))
    except AttnError as error:  # padding can leave a query with no key at all
        assume("would see no key" not in str(error))
        raise
    return document, draw(st.integers(1, len(document["tokens"]) - 1)), draw(st.booleans())


def cached_document(document: dict, c: int, per_head: bool, expected: dict) -> dict:
    """The document's tokens after c, those c given as a cache: each key/value head's keys as the reference met them (normed, rotated)."""
    H, G = document["heads"], document["kv_heads"]
    rows = lambda matrix: matrix[c:]  # noqa: E731
    K_heads = [expected["K"][g * H // G] for g in range(G)]  # the first query head of each group reads key/value head g
    V_heads = [expected["V"][g * H // G] for g in range(G)]
    blocks = lambda heads: [head[:c] for head in heads] if per_head else [sum((head[i] for head in heads), []) for i in range(c)]  # noqa: E731
    cut = {key: value for key, value in document.items() if key not in ("tokens", "Q", "K", "V", "embeddings", "mask", "bias")}
    cut["tokens"] = document["tokens"][c:]
    cut["cache"] = {"tokens": document["tokens"][:c], "K": blocks(K_heads), "V": blocks(V_heads)}
    for key in ("Q", "K", "V", "embeddings", "bias"):
        if key in document:
            cut[key] = rows(document[key])
    mask = document["mask"]
    cut["mask"] = mask if isinstance(mask, dict) else rows(mask)  # the rules count absolute positions; a matrix loses its first rows
    return cut


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(cut_documents())
def test_a_cut_scenario_gives_the_references_last_rows(case):
    """run and decode of the scenario after a cache of c tokens are the whole scenario's rows c + 1 … L (RoPE continuing at c,
    ALiBi counting from the cache's start, QK-norm's cached keys given as normalised)."""
    document, c, per_head = case
    expected = reference.document_attention(document)
    try:
        s = from_text(json.dumps(cached_document(document, c, per_head, expected)))
    except AttnError as error:  # padding can leave a query with no key at all
        assume("would see no key" not in str(error))
        raise
    assert s.cached == c and len(document["tokens"]) - c == s.L and s.L_k == len(document["tokens"])
    result = engine.run(s)
    close = lambda actual, wanted: np.testing.assert_allclose(actual, np.asarray(wanted, dtype=np.float64), rtol=1e-9, atol=1e-9)  # noqa: E731
    for h, head in enumerate(result.heads):
        close(head.weights, expected["weights"][h][c:])
        close(head.masked, expected["logits"][h][c:])  # ALiBi's −m·(i − j) counts absolute positions: a row's shift would not move its weights
        close(head.output, expected["head_outputs"][h][c:])
        close(head.k, expected["K"][h])
        for step in decode(result, h + 1).steps:
            t = step.position
            assert t > c
            close(step.output, expected["head_outputs"][h][t - 1])
            close(step.weights, [expected["weights"][h][t - 1][j - 1] for j in step.cache])
            close(step.k, expected["K"][h][t - 1])


@settings(max_examples=60, deadline=None)
@given(cut_documents())
def test_decode_from_cache_of_the_reference_agrees(case):
    """The reference's own decode_from_cache (positions c + n, every cached key seen) on plain causal documents (QK-norm kept)."""
    document, c, per_head = case
    document = {**{key: value for key, value in document.items() if key not in ("bias", "alibi")}, "mask": {"causal": True}}
    expected = reference.document_attention(document)
    s = from_text(json.dumps(cached_document(document, c, per_head, expected)))
    result = engine.run(s)
    for h, head in enumerate(result.heads):
        Q, K, V = expected["Q"][h], expected["K"][h], expected["V"][h]
        wanted = reference.decode_from_cache(Q[c:], K[:c], V[:c], K[c:], V[c:], scale=1 / s.scale.divisor)
        np.testing.assert_allclose(head.weights, wanted["weights"], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(head.output, wanted["output"], rtol=1e-9, atol=1e-9)


def test_rope_continues_after_the_cache_and_explain_says_the_keys_are_given():
    """RoPE turns the first new token by position c (plus any offset); explain shows the cached k and v as given, not projected."""
    doc = {
        "tokens": ["sat", "on"], "embeddings": [[1.0, 0.0], [0.0, 1.0]], "W_Q": "identity", "W_K": "identity", "W_V": "identity",
        "cache": {"tokens": ["the", "cat"], "K": [[0.5, 0.5], [1.0, -1.0]], "V": [[1.0, 2.0], [3.0, 4.0]]},
        "mask": "causal", "rope": {"offset": 10},
    }  # fmt: skip
    s = from_text(json.dumps(doc))
    assert s.variant(Rope) is not None and s.variant(Rope).offset == 12
    head = engine.run(s).head(1)
    angle = reference.rope_angles(0, 2, 10000.0, offset=12)
    np.testing.assert_allclose(head.k[2], reference.rotate_by_angles([1.0, 0.0], angle, "half"), rtol=1e-12)
    np.testing.assert_array_equal(head.k[:2], [[0.5, 0.5], [1.0, -1.0]])  # as given
    assert s.key_labels == ("the (cached)", "cat (cached)", "sat", "on")
    text = "\n".join(str(step) for step in steps(explain_scenario(s, position=2), 4))
    assert "come from the given KV cache" in text and "not projected" in text and "already turned at position 11" in text
    assert "'on' at position 4 sees every key" in text  # the mask step counts from the first cached key, as the mask does


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"context": {"tokens": ["a"], "embeddings": [[1.0, 0.0]]}}, "no use in cross-attention"),
        ({"mla": {}}, "`cache` with `mla`"),
        ({"cache": {"tokens": ["a"], "K": [[1.0, 0.0, 0.0]], "V": [[1.0, 0.0]]}}, "cache.K has 3 columns"),
        ({"cache": {"tokens": ["a", "b"], "K": [[1.0, 0.0]], "V": [[1.0, 0.0]]}}, "cache.K has 1 rows but there are 2 cached tokens"),
        ({"cache": {"tokens": ["a"], "K": [[1.0, 0.0]]}}, "the cache has no `V`"),
        ({"cache": {"K": [[1.0, 0.0]], "V": [[1.0, 0.0]]}}, "cache: the cache has no `tokens`"),
        ({"cache": {"tokens": [], "K": [[1.0, 0.0]], "V": [[1.0, 0.0]]}}, "cache.tokens: the token list is empty"),
        ({"cache": {"tokens": ["a"], "K": [[[1.0, 0.0]], [[1.0, 0.0]]], "V": [[1.0, 0.0]]}}, "cache.K: 2 per-head matrices for heads = 1"),
        ({"cache": {"tokens": ["a"], "K": "identity", "V": [[1.0, 0.0]]}}, "cache.K: found"),
        ({"mask": [[1]]}, "the mask matrix is 1 × 1"),
    ],
)
def test_what_makes_no_sense_is_one_line(extra, message, cli, tmp_path):
    doc = {"tokens": ["x"], "embeddings": [[1.0, 0.0]], "cache": {"tokens": ["a"], "K": [[1.0, 0.0]], "V": [[1.0, 0.0]]}, "mask": "causal"}
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps({**doc, **extra}), encoding="utf-8")
    result = cli("run", str(path))
    assert result.exit_code != 0 and result.stdout == ""
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_the_cache_is_in_every_format(cli):
    """run, explain and decode of the paged example write every format."""
    for command in (["run"], ["explain", "--position", "2"], ["decode"], ["run", "--block-size", "1"]):
        for fmt in ("table", "json", "markdown", "latex", "csv", "html", "svg"):
            result = cli(*command, PAGED, "--format", fmt)
            assert result.exit_code == 0 and result.stdout, (command, fmt)
            assert "--block-size" in command or "t1" in result.stdout, (command, fmt)  # the tiles number their keys


def test_a_loaded_file_keeps_its_cache():
    s = load(PAGED)
    assert s.cached == 1 and s.key_tokens == ("t1", "t2")


def test_a_window_drops_cached_keys_at_the_first_step():
    """Under a window of 1, the cache of 2 given keys loses key 1 at the first step (position 3): no query reads it."""
    doc = {
        "tokens": ["sat", "on"], "Q": [[1.0, 0.0], [0.0, 1.0]], "K": [[1.0, 1.0], [0.5, 0.0]], "V": [[1.0, 0.0], [0.0, 1.0]],
        "cache": {"tokens": ["the", "cat"], "K": [[0.5, 0.5], [1.0, -1.0]], "V": [[1.0, 2.0], [3.0, 4.0]]},
        "mask": {"causal": True, "window": 1},
    }  # fmt: skip
    first, second = decode(from_text(json.dumps(doc)), 1).steps
    assert (first.position, first.cache.tolist(), first.dropped.tolist()) == (3, [2, 3], [1])
    assert (second.position, second.cache.tolist(), second.dropped.tolist()) == (4, [3, 4], [2])
    assert first.visible.all() and second.visible.all()


def test_qk_norm_and_alibi_with_a_cache_are_narrated(cli, tmp_path):
    """explain marks the cached keys as already normalised and writes ALiBi's distance from the cache's start; decode says both."""
    doc = {
        "tokens": ["sat", "on"], "embeddings": [[1.0, 0.0], [0.0, 1.0]], "W_Q": "identity", "W_K": "identity", "W_V": "identity",
        "cache": {"tokens": ["the", "cat"], "K": [[0.5, 0.5], [1.0, -1.0]], "V": [[1.0, 2.0], [3.0, 4.0]]},
        "mask": "causal", "rope": True, "qk_norm": {"q_weight": [1.0, 2.0], "k_weight": [0.5, 1.5]}, "alibi": True,
    }  # fmt: skip
    s = from_text(json.dumps(doc))
    head = engine.run(s).head(1)
    np.testing.assert_array_equal(head.normed["qk_norm"].k[:2], [[0.5, 0.5], [1.0, -1.0]])  # the cache holds k̂: used as given
    np.testing.assert_allclose(head.bias[1], [-(4 - j) / 256 for j in (1, 2, 3, 4)], rtol=1e-15)  # query 'on' sits at position 4
    path = tmp_path / "cached.yaml"
    path.write_text(json.dumps(doc), encoding="utf-8")
    text = " ".join(cli("explain", str(path), "--position", "4").stdout.split())  # the terminal's line breaks undone
    assert "k̂(the (cached)) = [0.5000, 0.5000] (cached: already normalised)" in text
    assert "× (4 − 1)" in text and "this query sits at position i = 2 + 2 = 4" in text
    assert "already normalised by QK-norm and turned by RoPE" in text
    intro = " ".join(cli("decode", str(path)).stdout.split())
    assert "already normalised by QK-norm and turned by RoPE" in intro and "ALiBi counts positions from the cache's start" in intro


# -- explain after a given cache: the query's position counts as the keys do --------------------------------------------

SELF_AFTER_CACHE = """
name: self-after-cache
cache:
  tokens: [a, b]
  K: [[1, 0], [0, 1]]
  V: [[1, 0], [0, 1]]
tokens: [c, d]
Q: [[4, 4], [0, 0]]
K: [[4, 4], [5, -5]]
V: [[2, 2], [3, 3]]
mask: causal
"""


def test_explain_after_a_cache_counts_the_query_as_the_keys_do(tmp_path):
    """t2 was position 1 as the query and position 2 as a key in the same JSON; now both 2, and --position takes the tables' number."""
    import json

    import attncli.api as attn
    from attncli.errors import AttnError

    path = tmp_path / "cache.yaml"
    path.write_text(SELF_AFTER_CACHE, encoding="utf-8")
    doc = json.loads(attn.explain(path, "c").render("json"))
    assert doc["query"]["position"] == 3 == [k["position"] for k in doc["keys"] if k["token"] == "c"][0]
    assert attn.explain(path, position=3).explanation.token == "c"
    assert attn.explain(path, position=4).explanation.token == "d"
    with pytest.raises(AttnError, match="position 2 is a key of the given cache"):
        attn.explain(path, position=2)
    with pytest.raises(AttnError, match="expected a position from 3 to 4"):
        attn.explain(path, position=5)
    assert attn.explain(path, "c").render("table").startswith("Explaining 'c', position 3 of 4: ")


def test_the_readings_after_a_cache_name_the_query_itself_not_a_cached_key(tmp_path):
    """c (position 3) puts nearly all its weight on itself: the reading says c, where it said the cached b (row 1 read as key 1)."""
    import attncli.api as attn

    path = tmp_path / "cache.yaml"
    path.write_text(SELF_AFTER_CACHE, encoding="utf-8")
    text = attn.explain(path, "c").render("table")
    assert "of this row goes to c itself" in text.replace("`", "").replace("'", "")
    assert "goes to b itself" not in text.replace("`", "").replace("'", "")


def test_the_map_of_a_cache_names_the_file_that_has_it(cli):
    """heads refuses a given cache (its keys have no query rows): the line names the file, then its key."""
    out = cli("heads", PAGED)
    assert out.exit_code == 1 and out.stdout == ""
    assert out.stderr.startswith(f"attncli: error: {PAGED}: cache: the scenario starts from a given KV cache"), out.stderr
