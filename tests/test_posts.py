"""Post-shaped output of checkpoints whose tokens carry a leading space (GPT-2's Ġ, Llama's ▁, shown ␣), through the readers' tools.

A blogger pastes run's and explain's LaTeX into a Markdown post (KaTeX or MathJax render each
`$$` block) or compiles the article; reads explain's Markdown through markdown-it; opens HTML and
SVG in a browser. Each test checks the text a reader sees: labels as written, no `U+` code, no
`%` comment text, long vectors shortened as in the terminal.
"""

from __future__ import annotations

import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from attncli.document import escape
from tests import renderers

HERE = Path(__file__).parent
SENTENCE = "cats and dogs"
MODELS = {"gpt2": ("␣and", "and"), "llama": ("␣and", "and")}  # the label shown, the --word that finds it


def _model_args(model: str) -> list[str]:
    return ["--model", str(HERE / "checkpoints" / model), "--layer", "2", "--sentence", SENTENCE]


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("command", ["run", "explain"])
def test_latex_fragment_renders_labels_as_written_in_katex_and_mathjax(cli, model, command, katex_modules, mathjax_modules):
    """Every $$ block renders in KaTeX and MathJax; ␣ shows as ⊔ (never U+2423); the fragment holds no % comment line."""
    label, word = MODELS[model]
    args = [command, *_model_args(model), "--format", "latex"] + (["--word", word] if command == "explain" else ["--stages", "q,scores,weights"])
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    assert not [line for line in result.stdout.splitlines() if line.startswith("%")]
    assert "U{+}" not in result.stdout
    blocks = renderers.latex_display_blocks(result.stdout)
    assert blocks
    for render, modules in ((renderers.katex, katex_modules), (renderers.mathjax, mathjax_modules)):
        rendered = render(modules, blocks)
        assert [r.error for r in rendered if r.error] == [], render.__name__
        assert any("⊔and" in r.text for r in rendered), render.__name__
        assert not any("U+" in r.text for r in rendered), render.__name__


@pytest.mark.parametrize("model", sorted(MODELS))
def test_run_article_prints_labels_and_titles(cli, model, latex_tools, tmp_path):
    """run's standalone article compiles with no overfull box; the PDF shows the titles as text and ⊔and, never U+2423 or a comment."""
    result = cli("run", *_model_args(model), "--stages", "q,scores,weights", "--format", "latex", "--standalone")
    assert result.exit_code == 0, result.stderr
    pdf = renderers.pdflatex(result.stdout, tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert "Overfull" not in log
    text = renderers.pdf_text(pdf)
    assert "Head 1: Queries" in text and "Head 1: Attention weights" in text
    assert "⊔and" in text.replace(" ", "") and "U+" not in text


def test_run_fragment_markdown_post_shows_settings_as_text(cli):
    """Pasted into a Markdown post, the fragment's text is paragraphs (titles, settings) and its blocks stay `$$ … $$`."""
    result = cli("run", "journey-causal", "--stages", "weights", "--format", "latex")
    html = renderers.markdown_html(result.stdout)
    paragraphs = [e.text for e in renderers.html_elements(html) if e.tag == "p"]
    assert paragraphs[0] == "journey-causal — Your journey starts with one step"  # one title line: the sentence is said once
    assert any(p.startswith("Attention weights (6") for p in paragraphs)
    assert any(p.startswith("$$ A = ") and p.endswith(" $$") for p in paragraphs)
    assert not any("needs amsmath" in p or p.startswith("%") for p in paragraphs)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_explain_markdown_shortens_hidden_states_as_the_terminal_does(cli, model):
    """explain's Markdown shows a checkpoint's hidden states as the terminal does: four numbers, …, two, and how many; --full all."""
    label, word = MODELS[model]
    short = cli("explain", *_model_args(model), "--word", word, "--format", "markdown").stdout
    table_rows = [line for line in short.splitlines() if line.startswith("| ") and "numbers)" in line]
    assert table_rows and all(re.search(r"\[[^]]*, …, [^]]*\] \(\d+ numbers\) \|$", row) for row in table_rows)
    assert "## Hidden states" in short and "Embedding" not in short
    full = cli("explain", *_model_args(model), "--word", word, "--format", "markdown", "--full").stdout
    assert len(full) > len(short) and "numbers)" not in full.split("## Scores")[0]
    elements = renderers.html_elements(renderers.markdown_html(short))
    headings = [e.text for e in elements if e.tag == "h2"]
    assert headings[:1] == ["Hidden states"] and "Step by step" in headings
    assert any(e.tag == "td" and e.text == label for e in elements)  # the label as written, in its table cell


@pytest.mark.parametrize("model", sorted(MODELS))
def test_explain_html_and_svg_parse_and_show_labels(cli, model):
    """explain's HTML (html.parser) and SVG (an XML parser) parse and show the label as written."""
    label, word = MODELS[model]
    html = cli("explain", *_model_args(model), "--word", word, "--format", "html").stdout
    assert any(label in e.text for e in renderers.html_elements(html))
    svg = cli("explain", *_model_args(model), "--word", word, "--format", "svg").stdout
    texts = "".join(ElementTree.fromstring(svg).itertext())
    assert label in texts and "U+" not in texts


def _word_right_edges(pdf: Path) -> dict[str, float]:
    """Each word pdftotext finds (by its text) and the x of its right edge."""
    import subprocess

    layout = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    return {word: float(x) for x, word in re.findall(r'xMax="([\d.]+)"[^>]*>([^<]+)</word>', layout)}


@pytest.mark.parametrize("first", [[-1.25, 2.5], [1.25, -2.5]])
def test_a_wide_label_leaves_the_first_row_in_its_column(first, latex_tools, tmp_path):
    """Under a label wider than its numbers, the first row's number ends where the column's other numbers end (it used to be centred)."""
    import numpy as np

    from attncli.formats import texmatrix

    data = np.array([first, [3.75, 4.5], [-5.25, -6.75]])
    matrix = texmatrix.labelled_matrix(data, precision=2, rows=["x", "y", "z"], cols=["a", "averyveryverylonglabel"])
    source = "\\documentclass{article}\n\\usepackage{amsmath}\n\\begin{document}\n\\[ M = " + matrix + " \\]\n\\end{document}\n"
    edges = _word_right_edges(renderers.pdflatex(source, tmp_path))
    for column in range(2):
        rights = [edges[texmatrix.number(float(data[r, column]), 2).replace("-", "−")] for r in range(3)]
        assert max(rights) - min(rights) < 0.3, (column, rights)


def test_twelve_heads_side_by_side_compile(cli, latex_tools, tmp_path):
    """GPT-2's 12 heads: C = [O⁽¹⁾ … O⁽¹²⁾] is an array, since amsmath's bmatrix stops pdflatex at 10 columns."""
    scenario = tmp_path / "twelve.yaml"
    scenario.write_text(cli("scenarios", "new", "a b c", "--d-model", "24", "--heads", "12", "--seed", "1").stdout, encoding="utf-8")
    result = cli("run", str(scenario), "--stages", "output", "--format", "latex", "--standalone")
    assert r"C = \left[\begin{array}{cccccccccccc} O^{(1)}" in result.stdout
    text = renderers.pdf_text(renderers.pdflatex(result.stdout, tmp_path / "tex"))
    assert "Heads side by side" in text



def test_a_long_path_in_an_article_breaks_at_its_slashes(latex_tools, tmp_path):
    """A checkpoint's folder deep in the file system (CI's clone, a home directory) breaks after a slash, not into the margin."""
    from attncli.formats import texmatrix

    folder = "/" + "/".join(["somewhere", "deep", "in", "a", "checkout", "of", "attncli"] * 3) + "/tests/checkpoints/llama"
    prose = escape.latex_text(f"llama checkpoint {folder}: layer 2 of 4, rotate-half pairs (i, i + d_k/2)")
    pdf = renderers.pdflatex(texmatrix.standalone(prose + "\n\n$$ \\frac{1}{2} = 1/2 $$\n"), tmp_path)
    assert "Overfull" not in (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert folder in renderers.pdf_text(pdf).replace("\n", "")


@pytest.mark.parametrize("fmt", ["table", "markdown", "latex", "typst", "html"])
def test_run_says_its_title_once(cli, fmt):
    """`run cat`'s header is one title line: the sentence once (no heading, sentence and description saying it again), then the rest."""
    out = cli("run", "cat", "--format", fmt).stdout
    assert out.count("The cat sat on the mat") == 1
    assert "cat — The cat sat on the mat" in out and "Attention in cat" not in out
    assert "2-d embeddings, no scaling" in out  # the description, less the sentence it repeated
    without = cli("run", "cat", "--format", fmt, "--heading-level", "0").stdout if fmt in ("markdown", "typst", "html") else out
    assert without.count("The cat sat on the mat") == 1  # without the heading, the sentence alone


@pytest.mark.parametrize("fmt", ["table", "markdown", "latex", "typst", "html"])
def test_explain_names_the_sentence_not_the_scenario_as_text(cli, fmt):
    """explain says where the word is in the sentence, not "in 'cat'" (a file's stem quoted as if it were text); a model's layer by name."""
    out = cli("explain", "--word", "cat", "--format", fmt).stdout
    assert "position 2 of 6: The cat sat on the mat" in out and "in 'cat'" not in out and "in ‘cat’" not in out
    model = cli("explain", "--word", "and", "--format", fmt, *_model_args("gpt2")).stdout
    assert "of 6 in gpt2 layer 2: " in model and "checkpoints" not in model


@pytest.mark.parametrize("fragment", [False, True])
def test_html_explain_of_a_real_model_wraps_instead_of_clipping(cli, fragment):
    """A checkpoint's 1 × 32 weights strip is tables of at most 8 keys that wrap (flex), and its steps' long lines wrap (pre-wrap):
    at 1000 px nothing is cut off at the right edge (the strip was one 32-column table, each step line one unbroken line)."""
    from attncli.formats.htmltable import STRIP_COLUMNS

    sentence = "When Mary and John went to the store, John gave a drink to"
    args = ["explain", "--model", str(HERE / "checkpoints" / "gpt2"), "--layer", "2", "--sentence", sentence, "--position", "19"]
    html = cli(*args, "--format", "html", *(["--fragment"] if fragment else [])).stdout
    elements = renderers.html_elements(html)
    strip = next(e for e in elements if e.tag == "div" and e.attrs.get("class") == "attn-strip")
    assert "flex-wrap:wrap" in strip.attrs["style"].replace(" ", "")
    assert "Attention weights" in strip.text
    after = html[html.index('class="attn-strip"') :]
    chunks = re.findall(r"<table.*?</table>", after[: after.index("</div>")], flags=re.S)
    assert [len(re.findall(r'<th scope="col">', chunk)) for chunk in chunks] == [STRIP_COLUMNS] * 4  # 32 keys, 8 to a table, each once
    steps = [e for e in elements if e.tag == "pre" and "attn-steps" in e.attrs.get("class", "")]
    assert steps and all("white-space:pre-wrap" in e.attrs.get("style", "") for e in steps)


CUT_OFF_PROBE = """<script>
const cut = [];
for (const e of document.querySelectorAll("main *")) {  // past the window's right edge, or wider than its own box (scrolled)
  if (e.getBoundingClientRect().right > window.innerWidth + 1 || e.scrollWidth > e.clientWidth + 1) cut.push(e.tagName);
}
document.body.setAttribute("data-cut", cut.join(" ") || "none");
</script>"""


def test_html_explain_of_a_real_model_fits_1000_pixels_in_chromium(cli, tmp_path):
    """Laid out by headless Chromium at 1000 px, no element of a real model's explain page runs past the edge or scrolls."""
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("headless Chromium is not installed (Debian: apt-get install -y chromium)")
    sentence = "When Mary and John went to the store, John gave a drink to"
    args = ["explain", "--model", str(HERE / "checkpoints" / "gpt2"), "--layer", "2", "--sentence", sentence, "--position", "19"]
    page = tmp_path / "explain.html"
    page.write_text(cli(*args, "--format", "html").stdout.replace("</body>", CUT_OFF_PROBE + "</body>"), encoding="utf-8")
    run = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1000,800", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    found = re.search(r'data-cut="([^"]*)"', run.stdout)
    assert found is not None, run.stdout[:500]
    assert found.group(1) == "none"
