"""`explain --block-size`, `run --block-size` and `attncli decode` through the CLI, in every format and real renderer."""

import csv
import io
import json
import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from attncli.sources import builtin
from attncli.sources.yaml_scenario import load
from tests import reference, renderers

FORMATS = ["table", "json", "markdown", "latex", "csv", "html", "svg"]


def decodable() -> list[str]:
    """Built-in self-attention scenarios: decode adds the causal rule to any of them."""
    return [name for name in builtin.names() if not load(name).cross]


def run_json(cli, *args: str) -> dict:
    result = cli(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# -- explain --block-size -----------------------------------------------------------------------------


def test_explain_cat_tells_the_online_softmax_story(cli):
    """`explain --word cat --block-size 2`: three blocks of the article's keys, running m, l and o, and o / l beside the ordinary result."""
    out = cli("explain", "--word", "cat", "--block-size", "2").stdout
    for line in ("Block 1 of 3: keys 1–2", "Block 3 of 3: keys 5–6", "l = 1 + 0.368 = 1.368", "rescale = e^(1 − 1) = 1",
                 "output = o / l = [4.368, 1.632] / 4.104 = [1.064, 0.398]", "ordinary = [1.064, 0.398]",
                 "Why rescale:", "Why the answer is exact:"):  # fmt: skip
        assert line in out


@pytest.mark.parametrize("block_size", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("name", ["cat", "journey-causal", "sliding-window", "alibi", "llama-style", "translation"])
def test_explain_online_json_matches_the_ordinary_row(cli, name, block_size):
    """The "online" object: ⌈L_k / B⌉ blocks of keys from 1 in order, rescale 0 first, output within 1e-12 of the ordinary one."""
    scenario = load(name)
    word = scenario.tokens[-1]
    doc = run_json(cli, "explain", "-s", name, "--word", word, "--position", str(scenario.L), "--block-size", str(block_size))
    online = doc["online"]
    assert online["block_size"] == block_size
    keys = [k for block in online["blocks"] for k in block["keys"]]
    assert keys == list(range(1, scenario.L_k + 1)) and len(online["blocks"]) == math.ceil(scenario.L_k / block_size)
    seen = [b for b in online["blocks"] if not b["skipped"]]
    assert seen[0]["rescale"] == 0 and all(0 < b["rescale"] <= 1 for b in seen[1:])
    assert np.allclose(online["output"], doc["output"], rtol=0, atol=1e-12)
    assert np.allclose(online["difference"], np.subtract(online["output"], doc["output"]), rtol=0, atol=0)


def test_a_block_the_mask_hides_is_skipped_and_says_so(cli):
    """journey-causal's first word sees only key 1: later blocks are skipped, in the story and in the JSON."""
    out = cli("explain", "-s", "journey-causal", "--word", "Your", "--block-size", "2").stdout
    assert out.count("Every key of this block is hidden by the mask: the block is skipped") == 2
    doc = run_json(cli, "explain", "-s", "journey-causal", "--word", "Your", "--block-size", "2")
    assert [b["skipped"] for b in doc["online"]["blocks"]] == [False, True, True]
    assert doc["online"]["blocks"][1]["rescale"] == 1 and doc["online"]["blocks"][1]["block_max"] is None


def test_round_steps_shows_the_hand_rounded_online_chain_beside_the_exact_one(cli):
    """Under --round-steps the online result is the hand-rounded recurrence, and the exact online result is given too."""
    out = cli("explain", "--word", "cat", "--block-size", "2", "--round-steps", "3").stdout
    assert "Rounded by hand, the two orders of work round at different points" in out
    assert "In exact arithmetic the online result is [1.0644, 0.3977]" in out


def test_shown_arithmetic_adds_up_or_says_approximately(cli):
    """Every `l = …` line of the online story either adds up at the shown decimals or uses ≈."""
    out = cli("explain", "-s", "journey", "--word", "starts", "--block-size", "2", "--precision", "2").stdout
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("l = ") and "×" not in line and "=" in line[4:]:
            terms, result = line[4:].rsplit("=", 1)
            assert round(sum(float(t) for t in terms.split("+")), 2) == float(result)


def test_online_steps_render_in_katex(cli, katex_modules):
    """Every display block of explain --block-size in LaTeX renders in KaTeX's strict mode."""
    tex = cli("explain", "-s", "llama-style", "--word", "grass", "--block-size", "2", "--format", "latex").stdout
    blocks = [block.strip() for block in tex.split("$$")[1::2]]
    assert any(r"\max(" in block for block in blocks)
    results = renderers.katex(katex_modules, blocks)
    assert [r.error for r in results if r.error] == []


# -- run --block-size -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", builtin.names())
def test_run_block_size_tiles_every_builtin(cli, name):
    """Every built-in tiles: the tiled output of every head is the loop reference's (1e-9), tiles in loop order."""
    doc = run_json(cli, "run", name, "--block-size", "2")
    scenario = load(name)
    expected = reference.document_attention(reference.scenario_document(scenario))
    for entry in doc["heads"]:
        tiling = entry["tiling"]
        np.testing.assert_allclose(tiling["output"], expected["head_outputs"][entry["head"] - 1], rtol=1e-9, atol=1e-9)
        assert tiling["max_difference"] <= 1e-12
        order = [(t["query_block"], t["key_block"]) for t in tiling["tiles"]]
        assert order == [(q, k) for q in range(1, math.ceil(scenario.L / 2) + 1) for k in range(1, math.ceil(scenario.L_k / 2) + 1)]
        assert tiling["memory"]["ordinary_numbers"] == 2 * scenario.L * scenario.L_k


def test_run_block_size_skips_the_tiles_above_the_causal_diagonal(cli):
    """journey-causal in blocks of 2: tiles (1,2), (1,3), (2,3) are skipped, and the table says so."""
    doc = run_json(cli, "run", "journey-causal", "--block-size", "2")
    skipped = [(t["query_block"], t["key_block"]) for t in doc["heads"][0]["tiling"]["tiles"] if t["skipped"]]
    assert skipped == [(1, 2), (1, 3), (2, 3)]
    out = cli("run", "journey-causal", "--block-size", "2").stdout
    assert [line.split()[:2] + line.split()[-1:] for line in out.splitlines() if line.endswith("skipped")] == [
        ["1,", "2", "skipped"], ["1,", "3", "skipped"], ["2,", "3", "skipped"]]
    assert "working memory, tiled = 24 numbers" in out


@pytest.mark.parametrize("fmt", ["table", "markdown", "latex", "typst", "html"])
def test_a_first_block_says_it_has_nothing_to_rescale(cli, fmt, tmp_path):
    """A query's first block prints no rescale factor of 0 (it reads as "multiplied by zero"): — per query, or "none: first block"."""
    scenario = tmp_path / "window.yaml"  # a window of 1: query 4 sees nothing in keys 1–2, so tile 2, 2 is query 3's second block, query 4's first
    made = cli("scenarios", "new", "a b c d e f", "--d-model", "2", "--mask", "causal", "--window", "1", "--seed", "1")
    scenario.write_text(made.stdout, encoding="utf-8")
    out = cli("run", str(scenario), "--block-size", "2", "--format", fmt).stdout
    assert out.count("none: first block") == 3 + 1  # tiles 1, 1 · 2, 1 · 3, 2, and the intro that explains it
    doc = run_json(cli, "run", str(scenario), "--block-size", "2")
    mixed = next(t for t in doc["heads"][0]["tiling"]["tiles"] if (t["query_block"], t["key_block"]) == (2, 2))
    assert mixed["rescale"][1] == 0  # JSON keeps the number: it is data
    assert f"{mixed['rescale'][0]:.3f}, —" in out  # the first query rescales, the second has nothing before
    assert "[0, 0]" not in cli("run", "journey-causal", "--block-size", "2", "--format", fmt).stdout


def test_run_block_size_shortens_many_tiles_unless_full(cli):
    """Train-station in blocks of 1 has more tiles than a screen: the table is shortened with a note, whole with --full."""
    short = cli("run", "train-station", "--block-size", "1").stdout
    assert "left out; --full shows every one." in short
    whole = cli("run", "train-station", "--block-size", "1", "--full").stdout
    assert "left out" not in whole and whole.count("\n") > short.count("\n")


# -- decode ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", decodable())
def test_decode_json_steps_are_the_reference_rows(cli, name):
    """Each step's weights over its cache and its output, as the JSON gives them, are the loop reference's row t (1e-9)."""
    scenario = load(name)
    expected = reference.document_attention(reference.scenario_document(scenario, causal=True))
    for head in range(1, scenario.heads + 1):
        doc = run_json(cli, "decode", name, "--head", str(head))
        assert doc["schema"] == "attncli.decode/1" and doc["head"] == head and len(doc["steps"]) == scenario.L
        weights, outputs = expected["weights"][head - 1], expected["head_outputs"][head - 1]
        for step in doc["steps"]:
            t, cached = step["position"], step["cache"]["positions"]
            np.testing.assert_allclose(step["output"], outputs[t - 1], rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(step["weights"], [weights[t - 1][j - 1] for j in cached], rtol=1e-9, atol=1e-12)
            assert sum(weights[t - 1][j - 1] for j in cached) == pytest.approx(1.0, abs=1e-12)  # no weight outside the cache
            assert len(step["cache"]["K"]) == len(cached)


def test_decode_says_when_it_adds_the_causal_mask_and_refuses_cross_attention(cli):
    """cat has no mask: decode says it adds one; translation is cross-attention: one error line."""
    assert "decoding adds one" in cli("decode", "cat").stdout
    result = cli("decode", "translation")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "needs self-attention" in result.stderr


def test_decode_shows_the_window_dropping_keys_and_the_sink_staying(cli):
    """sliding-window: key 2 leaves at step 5, key 1 stays as an attention sink."""
    out = cli("decode", "sliding-window").stdout
    assert "Key 2 leaves the cache: no query from this step on reads it (outside the window)." in out
    assert "Key 1 stays in the cache outside the window: attention sink" in out


def test_decode_names_the_shared_cache_of_grouped_heads(cli):
    """llama-style head 3 reads key/value head 2's cache, and the RoPE positions continue."""
    out = cli("decode", "llama-style", "--head", "3").stdout
    assert "Head 3 reads the cache of key/value head 2 of 2" in out and "positions simply continue" in out


def test_decode_shortens_long_generations_unless_full(cli):
    """More steps than MAX_STEPS: the middle ones are left out with a note; --full shows them all."""
    short = cli("decode", "train-station").stdout
    whole = cli("decode", "train-station", "--full").stdout
    L = load("train-station").L
    assert whole.count("Step ") == L and ("left out" in short) == (L > 12)


# -- every format, checked by the tool its readers use -----------------------------------------------------


COMMANDS = {
    "decode": ["decode", "llama-style", "--head", "2"],
    "tiling": ["run", "journey-causal", "--block-size", "4"],
    "explain": ["explain", "-s", "journey-causal", "--word", "starts", "--block-size", "2"],
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("what", COMMANDS)
def test_every_format_parses(cli, what, fmt):
    """Each command in each format exits 0 and parses with the reader's tool: JSON, CSV, Markdown, HTML, XML."""
    result = cli(*COMMANDS[what], "--format", fmt)
    assert result.exit_code == 0, result.output
    text = result.stdout
    if fmt == "json":
        json.loads(text)
    elif fmt == "csv":
        rows = list(csv.reader(io.StringIO(text)))
        assert len(rows) > 1 and len({len(row) for row in rows}) == 1
    elif fmt == "markdown":
        html = renderers.markdown_html(text)
        assert ("<table>" in html) == (what != "explain" or "<table>" in html)
    elif fmt == "html":
        tags = [e.tag for e in renderers.html_elements(text)]
        assert "table" in tags or what == "explain"
    elif fmt == "svg":
        ET.fromstring(text)
    else:
        assert text.strip()


@pytest.mark.parametrize("what", ["decode", "tiling"])
def test_latex_reports_compile(cli, what, latex_tools, tmp_path):
    """The LaTeX of decode and of the tiling compiles in a plain article and prints its tokens."""
    tex = cli(*COMMANDS[what], "--format", "latex").stdout
    document = "\\documentclass{article}\n\\usepackage{amsmath}\n\\begin{document}\n" + tex + "\\end{document}\n"
    printed = renderers.pdf_text(renderers.pdflatex(document, tmp_path))
    assert "grass" in printed if what == "decode" else "journey" in printed


def test_awkward_tokens_stay_text_in_decode(cli, tmp_path):
    """Tokens like <eos>, R&D and =1+1 reach every format of decode as text: escaped, never markup or a formula."""
    path = tmp_path / "awkward.yaml"
    path.write_text(
        "tokens: ['<eos>', 'R&D', '=1+1', '[b]x[/b]']\nmask: causal\nembeddings: [[1, 0], [0, 1], [1, 1], [0.5, 0]]\n"
        "W_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n",
        encoding="utf-8",
    )
    assert "[b]x[/b]" in cli("decode", str(path)).stdout
    html = cli("decode", str(path), "--format", "html").stdout
    assert "&lt;eos&gt;" in html and "R&amp;D" in html
    rows = list(csv.reader(io.StringIO(cli("decode", str(path), "--format", "csv").stdout)))
    assert "'=1+1" in [row[1] for row in rows] and "=1+1" not in [row[1] for row in rows]
    assert "&lt;eos&gt;" in renderers.markdown_html(cli("decode", str(path), "--format", "markdown").stdout)


def test_explain_csv_gives_each_key_its_block_and_the_running_state(cli):
    """With --block-size the explain CSV adds block, running max, rescale, running sum and running output to each key row."""
    rows = list(csv.DictReader(io.StringIO(cli("explain", "--word", "cat", "--block-size", "4", "--format", "csv").stdout)))
    assert [row["block"] for row in rows] == ["1", "1", "1", "1", "2", "2"]
    assert float(rows[0]["rescale"]) == 0 and float(rows[-1]["running_sum"]) == pytest.approx(4.103638323514327, abs=1e-15)


def test_tiling_under_round_steps_names_the_rounding(cli):
    """Rounded by hand the tiled output differs from the ordinary chain, and the report says the exact ones agree."""
    out = cli("run", "cat", "--block-size", "2", "--round-steps", "3").stdout
    assert "in exact arithmetic the two differ by" in " ".join(out.split())  # the terminal wraps the sentence


def test_decode_a_real_checkpoint_layer(cli):
    """`decode --model` on the Llama fixture: head 3 reads key/value head 2's cache, and every step's weights over its
    cache are transformers' own attention weights of row t (the golden file), to 1e-5."""
    from tests.test_checkpoints import TOLERANCE, golden
    from tests.test_models import model_args

    expected = golden("llama")
    doc = run_json(cli, "decode", *model_args("llama", 2, str(expected["text"])), "--head", "3")
    assert doc["kv_head"] == 2  # 4 query heads over 2 key/value heads: heads 3 and 4 share the second
    rows = expected["attentions"][1][2]  # layer 2, head 3: (L, L)
    assert len(doc["steps"]) == rows.shape[0]
    for step in doc["steps"]:
        t, cached = step["position"], np.array(step["cache"]["positions"]) - 1
        np.testing.assert_allclose(step["weights"], rows[t - 1, cached], rtol=0, atol=TOLERANCE["llama"])
        assert rows[t - 1].sum() - rows[t - 1, cached].sum() < TOLERANCE["llama"]  # transformers gives no weight outside the cache
        np.testing.assert_allclose(step["output"], rows[t - 1, cached] @ np.array(step["cache"]["V"]), rtol=0, atol=1e-4)


def test_report_html_rows_have_one_row_header_and_data_cells():
    """In decode's HTML every body row is one <th scope=row> naming the cached key, then <td> cells."""
    from typer.testing import CliRunner

    from attncli.cli.app import app

    html = CliRunner().invoke(app, ["decode", "cat", "--format", "html"]).stdout
    elements = renderers.html_elements(html)
    row_headers = [e for e in elements if e.tag == "th" and e.attrs.get("scope") == "row"]
    cells = [e for e in elements if e.tag == "td"]
    assert len(row_headers) == sum(range(1, 7)) and len(cells) == 5 * len(row_headers)
    assert [e.text for e in row_headers[:3]] == ["The", "The", "cat"]


@pytest.mark.slow
def test_too_many_tiles_or_cached_rows_are_one_clear_line(cli, tmp_path):
    """`run --block-size 1` on 400 tokens (160,000 tiles) and decode of 2,000 tokens are refused up front, naming the way out."""
    tokens = [f"w{i}" for i in range(2000)]
    path = tmp_path / "long.yaml"
    rows = [[1.0] * 12] * 2000  # d_k = d_v = 12: 2,001,000 cached rows × 24 numbers
    path.write_text(f"tokens: {tokens}\nmask: causal\nQ: {rows}\nK: {rows}\nV: {rows}\n".replace("'", ""), encoding="utf-8")
    result = cli("run", str(path), "--block-size", "1")
    assert result.exit_code == 1 and result.stdout == "" and "tiles" in result.stderr and "at least" in result.stderr
    assert cli("run", str(path), "--block-size", "64", "--format", "json").exit_code == 0
    result = cli("decode", str(path))
    assert result.exit_code == 1 and result.stdout == "" and "cached rows" in result.stderr


def test_run_block_size_html_fragment_is_a_fragment(cli):
    """`run --block-size --format html --fragment` gives the tiling report without the page around it (it used to ignore --fragment)."""
    page = cli("run", "journey-causal", "--block-size", "2", "--format", "html").stdout
    fragment = cli("run", "journey-causal", "--block-size", "2", "--format", "html", "--fragment").stdout
    assert "<html" in page.lower() and "<html" not in fragment.lower() and "<table" in fragment
