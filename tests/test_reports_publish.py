"""Tiling (`run --block-size`) and decode reports as a post would use them, each through the tool its readers use.

Built-ins and a checkpoint fixture, in every format: pdflatex (no error, no overfull box), KaTeX and
MathJax for every `$$` block, markdown-it for Markdown, an HTML and an XML parser for HTML and SVG,
and the text a reader sees (headings, labels as written, no U+ codes, no comment lines); the
terminal fitted to 80 columns.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from attncli.document import escape
from tests import renderers
from tests.test_models import model_args

SENTENCE = "When Mary and John went to the store"
REPORTS = {  # name: (arguments, headings a reader must see, a sentence of the text)
    "tiling": (["run", "journey-causal", "--block-size", "2"], ["FlashAttention tiling of", "output = o / l"], "A tile the mask hides"),
    "decode": (["decode", "sliding-window"], ["Decoding", "Step 1:", "Step 6:"], "leave"),
    "gpt2-tiling": (["run", *model_args("gpt2", 1, SENTENCE), "--block-size", "3", "--head", "2"], ["Head 2: output = o / l"],
                    "working memory, tiled"),
    "gpt2-decode": (["decode", *model_args("gpt2", 1, SENTENCE), "--head", "2"], ["Step 1: ", "Step 17: "],
                    "row 1 of the full causal run"),
    "llama-decode": (["decode", "llama-style", "--head", "3"], ["Step 1: ", "Step 4: "], "key/value head 2"),
}  # fmt: skip


# A tokenizer's leading-space mark ␣ gets its own TeX symbol in escape.latex (issue 23, the "truth" branch); until
# that is merged it prints as U+2423, and only it is let through. Once escape has it, nothing is.
PENDING = "" if "U{+}" not in escape.latex("␣") else "U+2423"
PENDING_TEX = "" if not PENDING else "U{+}2423"


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.slow
@pytest.mark.parametrize("name", list(REPORTS))
def test_report_latex_compiles_and_renders(cli, name, latex_tools, katex_modules, mathjax_modules, tmp_path):
    """--standalone compiles with no overfull box and shows the headings as written (×, −, ·, Σ, never U+); the fragment is
    paragraphs and $$ blocks, no comment line, each block and inline piece rendering in KaTeX and MathJax on its own."""
    from attncli.formats import texmatrix

    args, headings, sentence = REPORTS[name]
    pdf = renderers.pdflatex(cli(*args, "--format", "latex", "--standalone").stdout, tmp_path / "article")
    log = (tmp_path / "article" / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert "Overfull" not in log, [line for line in log.splitlines() if "Overfull" in line]
    text = _words(renderers.pdf_text(pdf))
    assert [h for h in headings if h not in text] == [] and sentence in text, text[:600]
    assert "U+" not in text.replace(PENDING, "") and "\\u" not in text and "%" not in text

    fragment = cli(*args, "--format", "latex").stdout
    assert not any(line.startswith("%") for line in fragment.splitlines()) and "U{+}" not in fragment.replace(PENDING_TEX, "")
    blocks = renderers.latex_display_blocks(fragment)
    assert blocks, fragment[:300]
    pieces = blocks + [m for line in fragment.splitlines() if line and not line.startswith("$$") for m in renderers.latex_prose_math(line)]
    for render in (renderers.katex(katex_modules, pieces), renderers.mathjax(mathjax_modules, pieces)):
        assert [(p[:80], r.error) for p, r in zip(pieces, render) if r.error] == []
        assert not any("U+" in r.text.replace(PENDING, "") for r in render)
    wrapped = renderers.pdflatex(texmatrix.standalone(fragment), tmp_path / "fragment")  # the fragment inside someone's article
    log = (tmp_path / "fragment" / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert "Overfull" not in log and headings[0] in _words(renderers.pdf_text(wrapped))
    paragraphs = [e.text for e in renderers.html_elements(renderers.markdown_html(fragment)) if e.tag == "p"]
    assert any(headings[0] in p for p in paragraphs) and not any(re.sub(r"\$[^$]*\$", "", p).count("\\") for p in paragraphs if not p.startswith("$$"))


@pytest.mark.parametrize("name", list(REPORTS))
def test_report_markdown_reads_in_markdown_it(cli, name):
    """Markdown: the title at --heading-level, the sections one below, tables as tables, labels as written."""
    args, headings, _ = REPORTS[name]
    for level, top in ((1, "h1"), (3, "h3"), (0, None)):
        html = renderers.markdown_html(cli(*args, "--format", "markdown", "--heading-level", str(level)).stdout)
        elements = renderers.html_elements(html)
        tags = [e.tag for e in elements if re.fullmatch(r"h\d", e.tag)]
        assert (top is None and "h1" not in tags and tags[0] == "h2") or tags[0] == top, tags[:3]
        assert any(e.tag == "table" for e in elements)
        text = _words(" ".join(e.text for e in elements if re.fullmatch(r"h\d", e.tag)))
        assert [h for h in headings[1:] if h not in text] == []


@pytest.mark.parametrize("name", list(REPORTS))
def test_report_html_and_svg_are_figures(cli, name):
    """HTML (a page with dark colours, a fragment without) holds the figure; the SVG parses as XML and is a figure, not text."""
    args, headings, _ = REPORTS[name]
    page = cli(*args, "--format", "html").stdout
    elements = renderers.html_elements(page)
    assert [e.tag for e in elements][:2] == ["html", "head"] and "prefers-color-scheme: dark" in page
    assert any(e.tag == "svg" for e in elements) and not any(e.tag in ("script", "link", "img") for e in elements)
    assert all(h in _words(" ".join(e.text for e in elements if e.tag in ("h1", "h2", "title"))) for h in headings[:1])
    fragment = cli(*args, "--format", "html", "--fragment", "--heading-level", "0").stdout
    assert fragment.startswith('<div class="attncli">') and "<h1>" not in fragment and "<svg" in fragment
    svg = cli(*args, "--format", "svg").stdout
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    cells = [r for r in root.iter(f"{ns}rect") if "cell" in (r.get("class") or "")]
    assert cells and "U+" not in svg
    title = root.find(f"{ns}title")
    assert title is not None and ("FlashAttention tiling" if "tiling" in name else "Decoding") in (title.text or "")
    if "decode" in name:
        assert root.iter(f"{ns}text") and any(r.get("class") == "empty" for r in root.iter(f"{ns}rect"))
    else:
        assert any(line.get("class") == "tile" for line in root.iter(f"{ns}line"))


def test_decode_figure_marks_the_keys_that_left_the_cache(cli):
    """sliding-window decode: keys outside the window are crossed out as having left the cache, in the figure and its legend."""
    root = ET.fromstring(cli("decode", "sliding-window", "--format", "svg").stdout)
    ns = "{http://www.w3.org/2000/svg}"
    dropped = [r for r in root.iter(f"{ns}rect") if r.get("class") == "dropped"]
    assert len(dropped) > 1 and any("left the cache" in (t.text or "") for t in root.iter(f"{ns}text"))
    tips = [t.text or "" for r in dropped for t in r.iter(f"{ns}title")]
    assert all(tip.endswith(": left the cache") for tip in tips)


def test_tiling_figure_marks_skipped_tiles_and_the_running_maximum(cli):
    """journey-causal in tiles of 2: the three tiles above the diagonal are marked skipped, and m is given after each key block."""
    root = ET.fromstring(cli("run", "journey-causal", "--block-size", "2", "--format", "svg").stdout)
    ns = "{http://www.w3.org/2000/svg}"
    assert len([r for r in root.iter(f"{ns}rect") if r.get("class") == "skipped"]) == 3
    texts = [t.text or "" for t in root.iter(f"{ns}text")]
    assert sum(t.startswith("m after ") for t in texts) == 3 and texts.count("skipped") == 3


@pytest.mark.parametrize("name", ["gpt2-tiling", "gpt2-decode"])
def test_report_fits_an_80_column_terminal(cli, name, monkeypatch):
    """A checkpoint's reports in 80 columns: no line wider, the vectors shortened and a too-wide table split."""
    monkeypatch.setenv("COLUMNS", "80")
    args, _, _ = REPORTS[name]
    out = cli(*args).stdout
    assert max(map(len, out.splitlines())) <= 80
    wide = cli(*args, "--full").stdout
    assert max(map(len, wide.splitlines())) > 80 or "…" not in wide


def test_decode_names_the_softmax_input_score(cli):
    """The column the softmax reads is "score" (the logit of an LLM reader is the vocabulary's), beside q·k."""
    out = cli("decode", "alibi", "--format", "markdown").stdout
    assert "| q·k | score | weight |" in out and "logit" not in out
    assert cli("decode", "alibi", "--format", "csv").stdout.splitlines()[0].endswith("q_dot_k,score,weight")


def test_stages_are_refused_where_they_mean_nothing(cli):
    """The tiling report shows tiles: --stages is refused in one line (and still chooses the JSON's stages)."""
    done = cli("run", "cat", "--block-size", "2", "--stages", "weights")
    assert done.exit_code != 0 and done.stdout == "" and len(done.stderr.strip().splitlines()) == 1 and "--stages" in done.stderr
    assert cli("run", "cat", "--block-size", "2", "--stages", "weights", "--format", "json").exit_code == 0


def test_export_regenerates_tiling_and_decode(cli, tmp_path):
    """export --block-size and --decode write what the commands print, byte for byte; together with --explain, --decode is refused."""
    done = cli("export", "journey-causal", "--block-size", "2", "--format", "latex", "--standalone", "--out-dir", str(tmp_path))
    assert done.exit_code == 0
    assert (tmp_path / "journey-causal.tex").read_text(encoding="utf-8") == cli("run", "journey-causal", "--block-size", "2", "--format", "latex", "--standalone").stdout
    assert cli("export", "sliding-window", "--decode", "--format", "svg", "--out-dir", str(tmp_path)).exit_code == 0
    assert (tmp_path / "sliding-window.svg").read_text(encoding="utf-8") == cli("decode", "sliding-window", "--format", "svg").stdout
    refused = cli("export", "cat", "--decode", "--explain", "cat", "--format", "svg", "--out-dir", str(tmp_path))
    assert refused.exit_code != 0 and "--decode" in refused.stderr


def test_a_fragment_figure_stays_light():
    """A fragment is light only (htmltable's rule): its figure carries no dark stylesheet, a page's does."""
    from attncli import api

    decoded = api.decode("sliding-window")
    assert "prefers-color-scheme: dark" not in decoded.render("html", standalone=False)
    assert "prefers-color-scheme: dark" in decoded.render("svg") and "<svg" in decoded.render("html")


def test_vector_cells_shorten_as_run_does():
    """A vector cell is its text, shortened on demand to the first numbers, …, the last and the count; never when --full."""
    from attncli.document.blocks import Vector

    numbers = [f"0.{i}" for i in range(10)]
    cell = Vector("[0.0, 0.1, 0.2, 0.3, …, 0.8, 0.9] (10 numbers)", numbers)
    assert cell.shortened(3) == "[0.0, 0.1, …, 0.9] (10)" and cell.shortened(9) == str(cell)
    assert Vector("[0.0, 0.1, 0.2]", numbers[:3]).shortened(2) == "[0.0, 0.1, 0.2]"  # hiding one number saves nothing
    assert Vector("[" + ", ".join(numbers) + "]", numbers, fixed=True).shortened(2) == "[" + ", ".join(numbers) + "]"


def test_export_explains_the_online_softmax(cli, tmp_path):
    """export --explain WORD --block-size B writes explain's online-softmax walk-through, as `explain --block-size` prints it."""
    assert cli("export", "cat", "--explain", "cat", "--block-size", "2", "--format", "markdown", "--out-dir", str(tmp_path)).exit_code == 0
    expected = cli("explain", "cat", "--word", "cat", "--block-size", "2", "--format", "markdown").stdout
    assert (tmp_path / "cat.md").read_text(encoding="utf-8") == expected and "Online softmax" in expected


def test_tiling_figure_marks_where_the_running_maximum_grew(cli):
    """cat in tiles of 2: only 'sat' meets a larger score in a later block (2 among keys 3–4), so only that m is marked as grown."""
    root = ET.fromstring(cli("run", "cat", "--block-size", "2", "--format", "svg").stdout)
    ns = "{http://www.w3.org/2000/svg}"
    grew = [t for t in root.iter(f"{ns}text") if t.get("class") == "grew"]
    assert ["".join(t.itertext()).split("rescaled")[-1] for t in grew] == ["↑2.000"]


@pytest.mark.parametrize("name", ["tiling", "decode", "gpt2-tiling"])
def test_a_figure_is_as_wide_as_its_grid_not_its_caption(cli, name):
    """The title and caption wrap to the figure's width: every line fits, and the figure is no wider than its grid and legend need."""
    from attncli.formats.fontmetrics import text_width
    from attncli.formats.gridfigure import CAPTION_SIZE

    args, _, _ = REPORTS[name]
    root = ET.fromstring(cli(*args, "--format", "svg").stdout)
    ns = "{http://www.w3.org/2000/svg}"
    width = float(root.get("width") or 0)
    captions = ["".join(t.itertext()) for t in root.iter(f"{ns}text") if t.get("font-size") == str(CAPTION_SIZE)]
    assert captions and all(12 + text_width(line, CAPTION_SIZE) <= width - 12 for line in captions)
    if len(captions) > 1:  # wrapped because the whole caption was wider than the figure, in lines of even length
        assert width < 24 + text_width(" ".join(captions), CAPTION_SIZE) and " " in captions[-1]
    if name == "tiling":  # six keys in tiles of two: about 700 px, as wide as grid, running maxima and legend (was 1,389)
        assert width < 800 and len(captions) > 1


def test_a_long_sentence_s_figures_draw_their_first_cells_and_say_so(cli, tmp_path):
    """Tiling 200 tokens draws the first 96 × 96 cells (six whole tiles of 16), not 40,000, and its caption says what was left out."""
    from attncli.formats import gridfigure
    from attncli.sources.generator import new_scenario

    path = tmp_path / "long.yaml"
    path.write_text(new_scenario(" ".join(f"w{i}" for i in range(200)), d_model=4, heads=1, causal=True, seed=1), encoding="utf-8")
    svg = cli("run", str(path), "--block-size", "16", "--format", "svg").stdout
    root = ET.fromstring(svg)
    cells = [e for e in root.iter("{http://www.w3.org/2000/svg}rect") if "cell" in (e.get("class") or "").split()]
    assert len(cells) == 96 * 96 == gridfigure.MAX_FIGURE**2
    text = " ".join("".join(root.itertext()).split())
    assert "Drawn: the first 96 queries × 96 keys of 200 × 200 (the JSON output has every number)" in text
    assert len(svg) < 2_000_000
