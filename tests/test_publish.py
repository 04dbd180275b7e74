"""Publication formats checked with the tools readers use: pdflatex, KaTeX, MathJax, markdown-it-py, HTML and XML parsers."""

from __future__ import annotations

import csv
import io
import re
import tempfile
import xml.etree.ElementTree as ElementTree
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from attncli.core import engine
from attncli.document import escape, stages, views
from attncli.document.blocks import step_lines
from attncli.document.views import MatrixView
from attncli.errors import AttnError
from attncli.formats import htmltable, palette, svgheatmap, texmatrix
from attncli.sources.yaml_scenario import load
from tests import renderers

# Tokens that broke or misprinted somewhere (issues 11 and 12), and the characters that do most harm.
AWKWARD = ["<eos>", "<|endoftext|>", "a_b", "50%", "R&D", "café", "*x*", "[bold]x[/]", "[/]", "x^2", "~y", "#1", "- x",
           "1. x", "$$x$$", "\\begin{x}", "{}", "a--b", "''q''", "`c`", ":smile:", "=1+1", "@SUM(A1)", "\x1b[31mred",
           "a\nb\rc\td", "\u202eevil", "\u2028", "\ufffe", "a\\", " lead", "trail ", "two  spaces", "中文", "😀", "é", "Ǆ",
           "␣and", "␣"]  # fmt: skip
SPECIALS = list("\\{}$&%#^_~<>|`'\"*[]-:!?.,@=+() \t\n\r\x00\x1b\x7f\x85\u00a0\u200b\u200e\u202e\u2028\u2066\ufeff\ufffeéÉßœ–’…中😀")
TOKENS = st.text(st.one_of(st.sampled_from(SPECIALS), st.characters(exclude_categories=())), min_size=1, max_size=12)


# -- escape: the Python-side parsers -------------------------------------------------------------


def test_visible_writes_controls_and_invisible_overrides_as_text():
    """Controls, separators, bidi overrides, surrogates and U+FFFE show as escape text; everything else is unchanged."""
    assert escape.visible("a\x1b[31m\n\r\t\x00\x7f\x9b") == r"a\x1b[31m\n\r\t\x00\x7f\x9b"
    assert escape.visible("\u2028\u2029\u202a\u202e\u2066\u2069\u200e\u061c") == r"\u2028\u2029\u202a\u202e\u2066\u2069\u200e\u061c"
    assert escape.visible("\ud800\ufffe\uffff") == r"\ud800\ufffe\uffff"
    assert escape.visible("café 中文 😀 \u200d a\\b") == "café 中文 😀 \u200d a\\b"


@settings(max_examples=300, deadline=None)
@given(TOKENS)
def test_any_token_reads_back_from_every_python_side_format(token):
    """Rich markup, Markdown (paragraph, heading, table cell, bold), HTML, XML and CSV each show visible(token) exactly."""
    from rich.text import Text

    shown = escape.visible(token)
    assert shown.isprintable() or all(c.isprintable() or c in "\u00a0\u200b\u200d\ufeff" or not c.isascii() for c in shown)
    assert "\n" not in shown and "\r" not in shown and "\x1b" not in shown

    markup = escape.rich(token)
    assert Text.from_markup(markup).plain == shown
    assert Text.from_markup(markup + "[bold]x[/bold]").plain == shown + "x"

    md = escape.markdown(token)
    for source, tag in ((f"{md}\n", "p"), (f"## {md}\n", "h2"), (f"| h |\n|---|\n| {md} |\n", "td"), (f"**{md}**\n", "strong")):
        elements = renderers.html_elements(renderers.markdown_html(source))
        assert [e.text for e in elements if e.tag == tag] == [shown], (source, elements)
        assert {e.tag for e in elements} <= {"p", "h2", "table", "thead", "tbody", "tr", "th", "td", "strong"}, source

    elements = renderers.html_elements(f'<p title="{escape.html(token)}">{escape.html(token)}</p>')
    assert elements == [renderers.Element("p", {"title": shown}, shown)]

    root = ElementTree.fromstring(f'<a b="{escape.xml(token)}">{escape.xml(token)}</a>')
    assert (root.text or "") == shown and root.get("b") == shown

    buffer = io.StringIO()
    csv.writer(buffer).writerow([escape.csv_cell(token), 0.5, -1.0])
    cell, half, minus_one = next(csv.reader(io.StringIO(buffer.getvalue())))
    assert cell == escape.csv_cell(token) and (half, minus_one) == ("0.5", "-1.0")
    assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")) or re.fullmatch(r"[+-]?[\d.]+(?:[eE][+-]?\d+)?", cell)


def test_csv_guard_applies_to_text_and_leaves_numbers_alone():
    """=, +, -, @ (and tab and CR, shown as text) get a leading '; text that is a plain number stays as it is."""
    assert [escape.csv_cell(s) for s in ["=1+1", "+x", "-x", "@SUM(A1)", "\tx", "\rx", "-1", "+0.5", "1e-3", "x=1"]] == [
        "'=1+1", "'+x", "'-x", "'@SUM(A1)", r"\tx", r"\rx", "-1", "+0.5", "1e-3", "x=1"]  # fmt: skip


def test_markdown_of_the_awkward_tokens_is_readable():
    """The escaped Markdown of tokens from the issues, as a blogger would see it in the source."""
    assert [escape.markdown(s) for s in ["<eos>", "<|endoftext|>", "a_b", "50%", "R&D", "*x*", "[bold]x[/]", "- x", "1. x"]] == [
        "&lt;eos&gt;", "&lt;&#124;endoftext&#124;&gt;", "a\\_b", "50%", "R&amp;D", "\\*x\\*", "\\[bold\\]x\\[/\\]", "\\- x", "1\\. x"]  # fmt: skip


def test_latex_pieces_for_the_awkward_tokens():
    """Specials become math symbols outside \\text, ligatures are split, outer spaces are control spaces."""
    assert escape.latex("<eos>") == r"{<}\text{eos}{>}"
    assert escape.latex("a_b") == r"\text{a}{\_}\text{b}"
    assert escape.latex("R&D 50%") == r"\text{R}{\&}\text{D 50}{\%}"
    assert escape.latex("a--b") == r"\text{a-}\text{-b}"
    assert escape.latex(" x  y") == r"\text{ }\text{x}\text{ }\text{ }\text{y}"
    assert escape.latex("中") == r"\,\mathtt{U{+}4E2D}\,"
    assert "$$" not in escape.latex("$$") and escape.latex("") == "{}"


# -- escape: TeX engines -----------------------------------------------------------------------


PLAIN_ARTICLE = "\\documentclass{article}\n\\usepackage{amsmath}\n"  # OT1, Computer Modern: LaTeX's defaults
T1_ARTICLE = "\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{lmodern}\n\\usepackage{amsmath}\n"


def token_lines(tokens: list[str], preamble: str) -> str:
    """A document printing each token on its own line between [i] and [/] markers."""
    lines = [preamble + "\\usepackage[landscape,margin=5mm]{geometry}\n\\begin{document}\n\\small"]
    for i, token in enumerate(tokens):
        lines.append(f"\\noindent[{i}] ${escape.latex(token)}$ [/]\\par")
    return "\n".join(lines + ["\\end{document}\n"])


def printed_lines(pdf: Path) -> dict[int, str]:
    found = re.findall(r"^\[(\d+)\](.*)\[/\]$", renderers.pdf_text(pdf).replace("\f", ""), flags=re.MULTILINE)
    return {int(i): text for i, text in found}


# pdftotext reads a cedilla or comma below as a separate ","; these print right but do not read back.
UNREADABLE_IN_PDF = set("ĢģĶķĻļŅņŖŗȘșȚț¸")


def check_tex_engines(tokens: list[str], folder: Path, katex_modules: Path, mathjax_modules: Path) -> None:
    """pdflatex (T1 and OT1), KaTeX and MathJax each print every token as `renderers.printed` says."""
    expected = [renderers.fold(renderers.printed(t)) for t in tokens]
    t1 = printed_lines(renderers.pdflatex(token_lines(tokens, T1_ARTICLE), folder / "t1"))
    ot1 = printed_lines(renderers.pdflatex(token_lines(tokens, PLAIN_ARTICLE), folder / "ot1"))
    assert sorted(t1) == sorted(ot1) == list(range(len(tokens)))  # every line printed, no comment swallowed one
    wrong = [(t, t1[i]) for i, t in enumerate(tokens) if renderers.fold(t1[i]) != expected[i] and not UNREADABLE_IN_PDF & set(t)]
    assert wrong == [], "pdflatex (T1) printed these differently"
    blocks = [escape.latex(t) for t in tokens]
    for render, modules in ((renderers.katex, katex_modules), (renderers.mathjax, mathjax_modules)):
        results = render(modules, blocks)
        wrong = [(t, r) for t, r, e in zip(tokens, results, expected) if r.error or renderers.fold(r.text) != e]
        assert wrong == [], f"{render.__name__} rendered these differently"


def test_awkward_tokens_print_as_written_everywhere(latex_tools, katex_modules, mathjax_modules, tmp_path):
    """<eos>, <|endoftext|>, a_b, 50%, R&D, café, *x*, [bold]x[/] and friends print as written in pdflatex, KaTeX, MathJax."""
    check_tex_engines(AWKWARD, tmp_path, katex_modules, mathjax_modules)
    text = renderers.pdf_text(tmp_path / "t1" / "doc.pdf")
    for token in ["<eos>", "<|endoftext|>", "a_b", "50%", "R&D", "café", "*x*", "[bold]x[/]"]:
        assert f"] {token} [" in text.replace("\u2009", " ") or f"]{token}[" in text.replace(" ", ""), token


def test_random_tokens_print_in_every_tex_engine(latex_tools, katex_modules, mathjax_modules, tmp_path):
    """Random tokens of any Unicode, controls included: one pdflatex run per encoding, one KaTeX and one MathJax batch."""
    tokens: list[str] = []

    @settings(max_examples=150, deadline=None, database=None)
    @given(TOKENS)
    def gather(token):
        tokens.append(token)

    gather()
    check_tex_engines(tokens, tmp_path, katex_modules, mathjax_modules)


def test_latex_text_characters_print_in_every_encoding_and_engine(latex_tools, katex_modules, mathjax_modules, tmp_path):
    """Every character of escape.LATEX_TEXT_CHARACTERS, and every Greek letter written as a math symbol (variance's "max α"),
    compiles in OT1 and T1 with outline fonts, and renders in KaTeX and MathJax."""
    greek = [c for c in "αβγδεζηθικλμνξπρστυφχψωΓΔΘΛΞΠΣΥΦΨΩ" if "U{+}" not in escape.latex(c)]
    assert len(greek) == 34
    characters = sorted(escape.LATEX_TEXT_CHARACTERS) + greek
    body = " ".join(escape.latex(c) for c in characters)
    for name, preamble in (("ot1", PLAIN_ARTICLE), ("t1", T1_ARTICLE)):
        pdf = renderers.pdflatex(preamble + "\\begin{document}\n$" + body + "$\n\\end{document}\n", tmp_path / name)
        assert "Type 3" not in renderers.pdf_fonts(pdf), f"{name}: a bitmap font was needed"
    for render, modules in ((renderers.katex, katex_modules), (renderers.mathjax, mathjax_modules)):
        results = render(modules, [escape.latex(c) for c in characters])
        assert [(c, r.error) for c, r in zip(characters, results) if r.error] == []


# -- views to draw -----------------------------------------------------------------------------

FOURTEEN = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "while", "the", "cat", "sat", "on"]


def attention_views(tokens: list[str], *, seed: int = 0, d: int = 3) -> list[MatrixView]:
    """Scores, masked scores, exponentials (with Σ) and weights of a causal head over `tokens`, computed here."""
    rng = np.random.default_rng(seed)
    n = len(tokens)
    x = rng.normal(size=(n, d))
    scores = x @ x.T
    hidden = np.triu(np.ones((n, n), dtype=bool), 1)
    masked = np.where(hidden, -np.inf, scores)
    exp = np.exp(masked - masked.max(axis=1, keepdims=True))
    weights = exp / exp.sum(axis=1, keepdims=True)
    return [
        MatrixView("scores", "scores", None, "Scores", "S = Q·Kᵀ", r"S = QK^\top", scores, tokens, tokens, square=True),
        MatrixView("masked", "masked", 2, "Masked scores", "mask(S)", r"\operatorname{mask}(S)", masked, tokens, tokens, hidden,
                   square=True),
        MatrixView("exp", "exp", None, "Exponentials", "E = exp(masked − shift)", r"E = \exp(\text{masked} - \text{shift})", exp,
                   tokens, tokens, hidden, [("Σ", exp.sum(axis=1))], square=True),
        MatrixView("weights", "weights", None, "Attention weights", "A = E / Σ", r"A = E / \Sigma", weights, tokens, tokens, hidden,
                   square=True),
        MatrixView("output", "output", None, "Output", "O = A·V", "O = AV", weights @ x, tokens, ["o1", "o2", "o3"]),
    ]  # fmt: skip


def builtin_views(name: str) -> list[MatrixView]:
    result = engine.run(load(name))
    return views.views(result, stages.STAGE_NAMES, list(range(1, result.scenario.heads + 1)))


# -- texmatrix ------------------------------------------------------------------------------------


def test_a_matrix_of_any_width_is_one_array_without_bmatrix():
    """40 columns: one array with 40 right-aligned columns (bmatrix would stop at 10), labels above and to the left."""
    tokens = [f"t{i}" for i in range(40)]
    tex = texmatrix.labelled_matrix(np.zeros((40, 40)), precision=2, rows=tokens, cols=tokens)
    assert "bmatrix" not in tex and tex.count("\\begin{array}{" + "r" * 40 + "}") == 2  # header and numbers
    assert tex.count("\\text{t39}") == 2 + 2  # shown in the header and the row labels, and measured by a phantom each


def test_matrix_blocks_split_rows_and_columns_and_say_which():
    """8 × 5 in pieces of 3 × 4: six blocks, each naming its rows and columns; Σ only beside the last columns."""
    blocks = texmatrix.matrix_blocks("E", np.ones((8, 5)), precision=1, rows=list("abcdefgh"), cols=list("vwxyz"),
                                     extra=[("Σ", np.arange(8.0))], max_rows=3, max_cols=4)  # fmt: skip
    assert len(blocks) == 6
    assert blocks[0].startswith(r"E \quad \text{(rows 1 to 3, columns 1 to 4)} = ")
    assert [r"\Sigma" in b for b in blocks] == [False, True] * 3


def test_standalone_turns_to_landscape_for_wide_matrices_and_align_for_aligned_steps():
    """More than 9 columns: landscape A4; an aligned block becomes align*, so its steps may break across pages."""
    wide = "$$ " + texmatrix.labelled_matrix(np.zeros((2, 10)), precision=1) + " $$"
    narrow = "$$ " + texmatrix.labelled_matrix(np.zeros((2, 9)), precision=1) + " $$"
    assert "landscape" in texmatrix.standalone(wide) and "landscape" not in texmatrix.standalone(narrow)
    steps = texmatrix.standalone("% steps\n$$ \\begin{aligned} a &= 1 \\\\ b &= 2 \\end{aligned} $$")
    assert "\\begin{align*} a &= 1 \\\\ b &= 2 \\end{align*}" in steps and "% steps" in steps


def test_labelled_matrices_compile_and_print_their_labels(latex_tools, tmp_path):
    """A standalone document of 14-token views, awkward tokens, 40 columns and a 120-column matrix in pieces compiles with pdflatex."""
    blocks = [b for v in attention_views(FOURTEEN) for b in texmatrix.view_blocks(v, precision=4)]
    blocks += [b for v in attention_views(AWKWARD[:12], seed=1) for b in texmatrix.view_blocks(v, precision=4, max_cols=16)]
    forty = [f"w{i}" for i in range(40)]
    blocks += texmatrix.matrix_blocks("W", np.ones((3, 40)), precision=2, rows=["a", "b", "c"], cols=forty)
    blocks += texmatrix.matrix_blocks("Z", np.ones((30, 120)), precision=2, max_rows=20, max_cols=16)
    pdf = renderers.pdflatex(texmatrix.standalone("\n".join(f"$$ {b} $$" for b in blocks), title="attncli <eos>"), tmp_path)
    text = renderers.fold(renderers.pdf_text(pdf))
    for label in FOURTEEN + ["<eos>", "<|endoftext|>", "a_b", "50%", "R&D", "café", "*x*", "[bold]x[/]", "w39"]:
        assert renderers.fold(label) in text, label
    assert renderers.fold("(rows 21 to 30, columns 113 to 120)") in text


def test_labelled_matrices_render_in_katex_and_mathjax(katex_modules, mathjax_modules):
    """Every block of multihead's views (W_O, heads), 14 tokens and awkward tokens renders in KaTeX (strict) and MathJax."""
    every = builtin_views("multihead") + attention_views(FOURTEEN) + attention_views(AWKWARD[:20], seed=2)
    blocks = [b for v in every for b in texmatrix.view_blocks(v, precision=4, max_cols=16)]
    for engine_render, modules in ((renderers.katex, katex_modules), (renderers.mathjax, mathjax_modules)):
        results = engine_render(modules, blocks)
        assert [(b[:120], r.error) for b, r in zip(blocks, results) if r.error] == []
    awkward = attention_views(AWKWARD[:8], seed=3)[3]
    text = renderers.fold(renderers.katex(katex_modules, texmatrix.view_blocks(awkward, precision=4))[0].text)
    assert all(renderers.fold(token) in text for token in AWKWARD[:8])


# -- HTML ---------------------------------------------------------------------------------------


def cells_of(document: str) -> list[list[renderers.Element]]:
    """Each table's cells (th and td), in order."""
    tables, current = [], None
    for element in renderers.html_elements(document):
        if element.tag == "table":
            current = []
            tables.append(current)
        elif element.tag in ("th", "td") and current is not None:
            current.append(element)
    return tables


@pytest.mark.parametrize("fragment", [False, True])
def test_html_tables_are_semantic_with_token_headers_and_shaded_cells(fragment):
    """A <table> per view with its caption, <th scope=col> keys, <th scope=row> queries, every number, shades and masked cells."""
    shown = attention_views(AWKWARD, seed=4)
    document = htmltable.html_document([htmltable.Heading("Attention <eos>", 3), "A paragraph & <b>"] + shown, fragment=fragment)
    elements = renderers.html_elements(document)
    assert ("html" in {e.tag for e in elements}) is not fragment
    assert [e.text for e in elements if e.tag == "h3"] == ["Attention <eos>"]
    assert "A paragraph & <b>" in [e.text for e in elements if e.tag == "p"]
    captions = [e.text for e in elements if e.tag == "caption"]
    n = len(AWKWARD)
    assert captions[:2] == [f"Scores S = Q·Kᵀ ({n} × {n})", f"Head 2 · Masked scores mask(S) ({n} × {n})"]
    tables = cells_of(document)
    assert len(tables) == len(shown)
    for view, cells in zip(shown, tables):
        n_cols = len(view.cols) + len(view.extra)
        cols = [c for c in cells if c.attrs.get("scope") == "col"]
        rows = [c for c in cells if c.attrs.get("scope") == "row"]
        assert [c.text for c in cols[: len(view.cols)]] == [escape.visible(t) for t in view.cols]
        assert [c.text for c in rows] == [escape.visible(t) for t in view.rows]
        numbers = [c for c in cells if c.tag == "td" and "attn-corner" not in (c.attrs.get("class") or "")]
        assert len(numbers) == len(view.rows) * n_cols
        shaded = view.square
        classes = [c.attrs.get("class") or "" for c in numbers]
        assert shaded == any(cls.startswith("attn-l") for cls in classes)
        if view.hidden is not None:
            assert classes.count("attn-masked") == int(view.hidden.sum())
    assert "http" not in document.replace("http://www.w3.org", "") and "@import" not in document and "<script" not in document


def test_html_fragment_keeps_its_colours_without_its_stylesheet():
    """A fragment's shaded cells carry their light colours and text colour inline; its CSS is scoped under .attncli."""
    document = htmltable.html_document([attention_views(FOURTEEN)[3]], fragment=True)
    cells = [c for c in cells_of(document)[0] if (c.attrs.get("class") or "").startswith("attn-l")]
    assert cells and all("background:#" in (c.attrs.get("style") or "") and ";color:#" in (c.attrs.get("style") or "") for c in cells)
    style = next(e.text for e in renderers.html_elements(document) if e.tag == "style")
    selectors = [rule.split("{")[0].strip() for rule in style.splitlines() if "{" in rule and not rule.startswith("@media")]
    assert selectors and all(s.startswith(".attncli") for s in selectors)
    assert "prefers-color-scheme" not in style  # a fragment keeps its light cells unless asked: the site decides its theme
    dark = htmltable.html_document([attention_views(FOURTEEN)[3]], fragment=True, dark_mode=True)
    assert "@media (prefers-color-scheme: dark) {" in dark and "!important" in dark


def test_html_page_turns_dark_with_the_reader():
    """A whole page switches background, text and shades under prefers-color-scheme: dark, and says it supports both."""
    page = htmltable.html_document([attention_views(FOURTEEN)[3]], fragment=False)
    assert '<meta name="color-scheme" content="light dark">' in page
    assert f"body {{ background: {palette.DARK.background}" in page and f"background: {palette.DARK.shades[0]} !important" in page


# -- SVG ------------------------------------------------------------------------------------------

SVG = "{http://www.w3.org/2000/svg}"


def test_svg_heatmap_is_well_formed_with_a_cell_per_pair_and_token_labels():
    """Awkward tokens: valid XML, one rect per cell, masked cells hatched, labels as written, numbers where they fit, a colour bar."""
    view = attention_views(AWKWARD[:14], seed=5)[3]
    root = ElementTree.fromstring(svgheatmap.heatmap_svg(view, precision=2))
    cells = [r for r in root.iter(f"{SVG}rect") if "cell" in r.get("class", "").split()]
    assert len(cells) == 14 * 14
    masked = [r for r in cells if "masked" in r.get("class", "")]
    assert len(masked) == int(view.hidden.sum()) and all(r.get("fill") == "url(#attncli-hatch)" for r in masked)
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    for token in AWKWARD[:14]:
        assert texts.count(escape.visible(token)) == 2, token  # a row label and a column label
    assert texts.count(f"{view.data[1, 0]:.2f}") >= 1 and "1.00" in texts and "0.00" in texts
    assert "masked" in texts and root.find(f"{SVG}title") is not None
    assert "font-face" not in ElementTree.tostring(root, encoding="unicode") and root.find(f".//{SVG}image") is None


def test_svg_stacks_one_figure_per_head():
    """heatmap_svgs: one document, one group per view, each below the last."""
    shown = [v for v in builtin_views("multihead") if v.key == "weights"]
    root = ElementTree.fromstring(svgheatmap.heatmap_svgs(shown))
    groups = [g for g in root.findall(f"{SVG}g")]
    assert len(shown) == 2 and len(groups) == 2
    offsets = [float(g.get("transform").split()[1].rstrip(")")) for g in groups]
    assert offsets[0] == 0 and offsets[1] > 0 and float(root.get("height")) > offsets[1]


def test_big_svg_drops_numbers_but_keeps_every_cell():
    """200 tokens: cells shrink to fit, numbers go, every cell stays."""
    tokens = [f"t{i}" for i in range(200)]
    root = ElementTree.fromstring(svgheatmap.heatmap_svg(attention_views(tokens, seed=6)[3]))
    assert len([r for r in root.iter(f"{SVG}rect") if "cell" in r.get("class", "")]) == 200 * 200
    assert float(root.get("width")) < 2200


# -- palette ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("ramp", [palette.LIGHT, palette.DARK], ids=lambda r: r.name)
def test_every_shade_has_text_colour_with_wcag_aa_contrast(ramp):
    """Each shade and the masked grey with its text colour: contrast ≥ 4.5; labels on the background too."""
    for fill in (*ramp.shades, ramp.masked):
        assert palette.contrast(fill, palette.ink(fill)) >= palette.WCAG_AA, fill
    assert palette.contrast(ramp.text, ramp.background) >= 7


def test_dark_ramp_starts_dim_and_light_ramp_starts_light():
    """On a dark background the lowest value is the dimmest shade; on a light one the lightest; both ramps are monotone."""
    dark = [palette.luminance(s) for s in palette.DARK.shades]
    light = [palette.luminance(s) for s in palette.LIGHT.shades]
    assert dark == sorted(dark) and light == sorted(light, reverse=True)


def test_light_ramp_is_the_terminal_heatmaps_blues():
    """The terminal heatmap (render/heatmap.py) and the palette hold the same light shades, until heatmap.py imports them."""
    from attncli.formats.heatmap import PALETTE

    assert list(palette.LIGHT.shades) == PALETTE


def test_the_old_white_on_blue_shade_failed_aa():
    """The terminal heatmap's white text on its sixth blue reads at 3.4:1; the palette puts black there (6.2:1)."""
    assert palette.contrast("#4292c6", palette.WHITE) < palette.WCAG_AA <= palette.contrast("#4292c6", palette.ink("#4292c6"))


# -- whole documents through every format and renderer (issue 12's "done when") -----------------------

AWKWARD_SCENARIO = """name: awkward
tokens: ["<eos>", "<|endoftext|>", "a_b", "50%", "R&D", "café"]
embeddings: [[1, 0, 2], [0, 1, 1], [1, 1, 0], [0, -1, 1], [2, 0, 1], [1, 2, 0]]
W_Q: [[1, 0], [0, 1], [1, 1]]
W_K: [[0, 1], [1, 0], [1, -1]]
W_V: [[1, 1], [1, -1], [0, 2]]
W_O: [[1, 0], [0, 1]]
b_O: [0.5, -0.5]
mask: causal
"""
PRINTED = ["<eos>", "<|endoftext|>", "a_b", "50%", "R&D", "café"]


@pytest.fixture(params=["awkward", "fourteen"])
def document_scenario(request, tmp_path) -> tuple[Path, list[str]]:
    """The awkward-token scenario, or a 14-token causal sentence with random weights; its path and its tokens."""
    from attncli.sources.generator import new_scenario

    path = tmp_path / f"{request.param}.yml"
    if request.param == "awkward":
        path.write_text(AWKWARD_SCENARIO, encoding="utf-8")
        return path, PRINTED
    path.write_text(new_scenario(" ".join(FOURTEEN), d_model=4, causal=True, seed=3), encoding="utf-8")
    return path, [token for token in FOURTEEN if FOURTEEN.count(token) == 1]  # "the" repeats: its labels are "the (1)", ...


def test_every_format_of_run_and_explain_shows_the_tokens_as_written(cli, document_scenario):
    """run and explain in each format: markdown-it-py cells, HTML <th>, SVG labels, JSON and CSV all hold each token as written."""
    path, tokens = document_scenario
    word = tokens[4]
    for command in (["run", str(path), "--stages", "weights"], ["explain", "-s", str(path), "--word", word, "--full"]):
        for fmt in ("table", "json", "markdown", "latex", "csv", "html", "svg"):
            result = cli(*command, "--format", fmt)
            assert result.exit_code == 0, (command, fmt, result.stderr)
        md = cli(*command, "--format", "markdown").stdout
        texts = {e.text for e in renderers.html_elements(renderers.markdown_html(md)) if e.tag in ("td", "th", "strong")}
        assert set(tokens) <= texts, set(tokens) - texts
        html = cli(*command, "--format", "html").stdout
        headers = {e.text for e in renderers.html_elements(html) if e.tag == "th"}
        assert set(tokens) <= headers, set(tokens) - headers
        assert "http" not in html.replace("http://www.w3.org", "") and "<script" not in html
        svg = ElementTree.fromstring(cli(*command, "--format", "svg").stdout)
        labels = {"".join(t.itertext()) for t in svg.iter("{http://www.w3.org/2000/svg}text")}
        assert set(tokens) <= labels, set(tokens) - labels
    labels = cli("run", str(path), "--format", "json").stdout
    assert all(json_string(token) in labels for token in tokens)


def json_string(token: str) -> str:
    import json

    return json.dumps(token, ensure_ascii=False)


def test_html_fragment_and_heading_levels(cli, document_scenario):
    """--fragment gives one <div class="attncli"> with no <html>; --heading-level 0 leaves the top heading out, 3 makes it <h3>."""
    path, _ = document_scenario
    fragment = cli("run", str(path), "--format", "html", "--fragment", "--heading-level", "3").stdout
    tags = [e.tag for e in renderers.html_elements(fragment)]
    assert tags[0] == "div" and "html" not in tags and "h3" in tags
    md = cli("explain", "-s", str(path), "--word", "R&D" if "R&D" in path.read_text() else "fox", "--format", "markdown",
             "--heading-level", "0").stdout  # fmt: skip
    assert not md.startswith("#") and "\n## " in md
    assert cli("run", str(path), "--format", "markdown", "--heading-level", "2").stdout.startswith("## ")


def test_latex_documents_compile_and_print_the_tokens(cli, document_scenario, latex_tools, tmp_path):
    """--standalone run and explain compile with pdflatex, and every token prints as written (pdftotext)."""
    path, tokens = document_scenario
    for name, command in (("run", ["run", str(path)]), ("explain", ["explain", "-s", str(path), "--word", tokens[4], "--full"])):
        source = cli(*command, "--format", "latex", "--standalone").stdout
        assert "bmatrix}{" not in source
        text = renderers.pdf_text(renderers.pdflatex(source, tmp_path / name))
        for token in tokens:
            assert token in text.replace("\u2009", ""), (name, token)


def test_latex_fragments_render_in_katex_strict(cli, document_scenario, katex_modules):
    """Every display block of run (all stages) and explain renders in KaTeX's strict mode; labels carry the tokens."""
    path, tokens = document_scenario
    blocks = []
    for command in (["run", str(path), "--stages", ",".join(stages.STAGE_NAMES)], ["explain", "-s", str(path), "--word", tokens[4], "--full"]):
        text = cli(*command, "--format", "latex").stdout
        blocks += [line[3:-3] for line in text.splitlines() if line.startswith("$$ ")]
    results = renderers.katex(katex_modules, blocks)
    assert [(b[:80], r.error) for b, r in zip(blocks, results) if r.error] == []
    rendered = renderers.fold("".join(r.text for r in results))
    assert all(renderers.fold(renderers.printed(token)) in rendered for token in tokens)


def test_latex_equations_read_as_mathematics(cli):
    """Symbol on the left, matrix on the right: no '√3 = matrix', no prose in the masked scores, no exp(masked) without a mask."""
    causal = cli("run", "journey-causal", "--format", "latex", "--stages", "scaled,masked,exp,weights").stdout
    assert r"\frac{S}{\sqrt{d_k}} = \frac{S}{\sqrt{2}} = " in causal
    masked = next(line for line in causal.splitlines() if line.startswith(r"$$ M = "))
    assert r"\text{ above" not in masked and r"\quad" not in masked.split(" = ")[1][:20]
    plain = cli("run", "journey", "--format", "latex", "--stages", "exp").stdout
    equations = [line for line in plain.splitlines() if line.startswith("$$")]
    assert r"E = \exp\left(\frac{S}{\sqrt{d_k}}\right)" in equations[0] and "mask" not in " ".join(equations)
    single = cli("run", "multihead", "--format", "latex", "--stages", "output").stdout
    assert "Y = C W_O" in single and r"C = \begin{bmatrix} O^{(1)} & O^{(2)} \end{bmatrix}" in single


# -- arithmetic that checks by hand --------------------------------------------------------------------------

_NUMBER = r"-?\d+(?:\.\d+)?"


def _numbers(text: str) -> list[Decimal]:
    return [Decimal(x) for x in re.findall(_NUMBER, text.replace("−", "-"))]


def _checked_sums(lines: list[str], p: int) -> int:
    """Checks every '… = result' line of the dot products, the sum and the output: the shown terms give the result. Returns how many."""
    from decimal import Decimal as D

    tolerance = D(5) * D(10) ** -(p + 1)
    checked = 0
    vectors: list[list[Decimal]] = []
    shortened = False
    for line in lines:
        body = line.strip()
        if re.match(r"\s*q′?·k", line):  # q·k(x) = (a × b) + … + [n more terms: r] = s
            left, relation, result = re.split(r" ([=≈]) (?=\S+$)", line.split(" = ", 1)[1])
            if relation == "=":
                products = sum((D(a) * D(b) for a, b in re.findall(rf"\(({_NUMBER}) × ({_NUMBER})\)", left)), D(0))
                rest = sum((D(x) for x in re.findall(rf"more terms: ({_NUMBER})\]", left)), D(0))
                assert abs(products + rest - D(result)) <= tolerance, line
                checked += 1
        elif line.lstrip().startswith("Σ = "):
            left, relation, result = re.split(r" ([=≈]) (?=\S+$)", body.split("Σ = ", 1)[1])
            if relation == "=":
                assert abs(sum(_numbers(re.sub(r"\[\d+ more terms: ", "[", left)), D(0)) - D(result)) <= tolerance, line
                checked += 1
        elif re.match(r"\s*output\(", line):
            shortened = "…" in line
            vectors = [_numbers(line.split(" = ", 1)[1].split(" (")[0])]
        elif vectors and line.lstrip().startswith("+ "):
            shortened = shortened or "…" in line
            vectors.append(_numbers(re.sub(r"\d+ more terms: |\(\d+ numbers\)", "", line.lstrip()[2:])))
        elif vectors and line.lstrip().startswith(("= ", "≈ ")):
            if line.lstrip().startswith("= ") and not shortened and "…" not in line:
                total = [sum(column, D(0)) for column in zip(*vectors)]
                assert all(abs(a - b) <= tolerance for a, b in zip(total, _numbers(line))), (vectors, line)
                checked += 1
            vectors = []
    return checked


@settings(max_examples=40, deadline=None)
@given(
    words=st.integers(1, 16),
    d_model=st.sampled_from([1, 2, 3, 4, 8, 16]),
    seed=st.integers(0, 10_000),
    precision=st.integers(1, 4),
    round_steps=st.sampled_from([None, 2, 3]),
    causal=st.booleans(),
)
def test_every_displayed_sum_adds_up_or_says_approximately(words, d_model, seed, precision, round_steps, causal):
    """On random scenarios, every shown sum (dot products, Σ, the output) adds up at the shown precision, or is written ≈."""
    from attncli.core import explain
    from attncli.document.numbers import decimals
    from attncli.sources.generator import new_scenario
    from attncli.sources.yaml_scenario import load as load_scenario
    from attncli.walkthroughs import narration

    sentence = " ".join(f"w{i}" for i in range(words))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.yaml"
        path.write_text(new_scenario(sentence, d_model=d_model, causal=causal, seed=seed), encoding="utf-8")
        scenario = load_scenario(str(path))
    try:
        result = engine.run(scenario, round_steps=round_steps)
    except AttnError:  # a hand-rounded row whose exponentials all round to 0: refused, rightly
        assume(False)
    p = decimals(precision, scenario.precision, round_steps)
    expl = explain.explain(result, position=words, head=1)
    lines = [line for step in narration.steps(expl, p) for line in step_lines(step, p)]
    _checked_sums(lines, p)
    notes = [note for step in narration.steps(expl, p) for note in step.notes if note.startswith("≈")]
    assert len(notes) == (1 if any("≈" in line for line in lines) else 0)


def test_cat_checks_by_hand():
    """Seed article's exact walk-through: Σ and the output say ≈ (their shown terms add up to 11.154 and 1.065), the rest =."""
    from attncli.core import explain
    from attncli.walkthroughs import narration

    result = engine.run(load("cat"))
    expl = explain.explain(result, position=2, head=1)
    lines = [line for step in narration.steps(expl, 3) for line in step_lines(step, 3)]
    assert "Σ = 2.718 + 1 + 2.718 + 1 + 2.718 + 1 ≈ 11.155" in lines
    assert "sat: 0.244 × [2, 0] ≈ [0.487, 0.000]" in lines
    assert _checked_sums(lines, 3) == 6  # the six dot products


def test_long_dot_products_show_the_largest_terms_and_the_rest(tmp_path):
    """d_model = 200, d_k = 64: six terms and '[58 more terms: r]', no full W_Q; --full (full=True) shows all 64."""
    from attncli.core import explain
    from attncli.sources.generator import new_scenario
    from attncli.walkthroughs import narration

    path = tmp_path / "wide.yaml"
    path.write_text(new_scenario("a b c", d_model=64, seed=1), encoding="utf-8")
    expl = explain.explain(engine.run(load(str(path))), position=1, head=1)
    short = [line for step in narration.steps(expl, 3) for line in step_lines(step, 3)]
    dots = [line for line in short if line.startswith("q·k")]
    assert all("[58 more terms: " in line and line.count(" × ") == 6 for line in dots)
    assert _checked_sums(short, 3) >= 0 and not any(line.startswith("W_Q =") for line in short)
    full = [line for step in narration.steps(expl, 3, full=True) for line in step_lines(step, 3)]
    assert all(line.count(" × ") == 64 for line in full if line.startswith("q·k"))


EXPLAINED = {  # a built-in, RoPE with grouped-query heads, a causal mask: the headings and a sentence a reader must see
    "cat": (["--word", "cat"], ["Step 1: The query", "Step 8: The output", "The weights sum to 1.000."]),
    "llama-style": (["-s", "llama-style", "--position", "3"],
                    ["Step 3: Rotating the query and the keys (RoPE)", "Grouped-query attention: head 1 reads key/value head 1 of 2",
                     "(1.621, −0.941) turns to (0.181, 1.866)", "Step 6: The causal mask"]),
    "journey-causal": (["-s", "journey-causal", "--word", "starts"],
                       ["Step 5: The causal mask", "The mask is causal: ‘starts’ at position 3 may only look at positions 1–3",
                        "= 1.4142, which keeps the softmax from saturating as dk grows."]),  # d_k: d with a subscript k
    "mla": (["-s", "mla", "--position", "2", "--block-size", "2"],  # the most names in prose (c_KV, W_UK, k_R′), e^(m_old − m_new)
            ["Each token is compressed to a latent cKV = x · WDKV", "multiplying it by"]),
}  # fmt: skip


@pytest.mark.parametrize("name", list(EXPLAINED))
def test_explain_latex_reads_as_a_worked_example(cli, name, latex_tools, katex_modules, mathjax_modules, tmp_path):
    """explain --standalone compiles with pdflatex with no overfull box, and its PDF shows every step's heading and the narration;
    the fragment's $$ blocks and the inline math of its paragraphs render in KaTeX and MathJax on their own."""
    args, seen = EXPLAINED[name]
    pdf = renderers.pdflatex(cli("explain", *args, "--format", "latex", "--standalone").stdout, tmp_path)
    assert "Overfull" not in (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    text = " ".join(renderers.pdf_text(pdf).split())
    steps = len(re.findall(r"^Step \d+ · ", cli("explain", *args).stdout, flags=re.M))
    assert steps >= 8 and all(f"Step {n}: " in text for n in range(1, steps + 1)), text[:500]
    assert [s for s in seen if s not in text] == [], text
    assert "U+" not in text and "\\u" not in text and not re.search(r"(^|\s)%", text)  # a comment's text, not a percentage
    assert not re.search(r"\b\w_", text) and "--" not in text and "ˆ" not in text  # W_K with subscripts (kv_a_layernorm a name), – not --, e^x a power

    fragment = cli("explain", *args, "--format", "latex").stdout
    assert not any(line.startswith("%") for line in fragment.splitlines())
    pieces = renderers.latex_display_blocks(fragment)
    pieces += [m for line in fragment.splitlines() if line and not line.startswith("$$") for m in renderers.latex_prose_math(line)]
    for render in (renderers.katex(katex_modules, pieces), renderers.mathjax(mathjax_modules, pieces)):
        assert [(p[:80], r.error) for p, r in zip(pieces, render) if r.error] == []
    paragraphs = [e.text for e in renderers.html_elements(renderers.markdown_html(fragment)) if e.tag == "p"]
    words = [re.sub(r"\$[^$]*\$", "", p) for p in paragraphs if not p.startswith("$$")]  # a post's text, less its inline math
    assert "Step 1: The query" in words and not any("\\" in w for w in words), words
    assert not any(re.search(r"\b\w_", w) or "--" in w for w in words), words  # a post shows W_K and d_k as math, dashes as – and —


@pytest.mark.parametrize("model", ["gpt2", "llama", "qwen2", "bert"])
def test_explain_latex_of_a_checkpoint_fits_the_page(cli, model, latex_tools, tmp_path):
    """A checkpoint's long rows (e·W_Q + b = q, weight × vector ≈ vector) are broken into aligned rows: no overfull box."""
    args = ["--model", f"tests/checkpoints/{model}", "--layer", "1", "--sentence", "The cat sat", "--position", "2"]
    pdf = renderers.pdflatex(cli("explain", *args, "--format", "latex", "--standalone").stdout, tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert "Overfull" not in log, [line for line in log.splitlines() if "Overfull" in line]
    text = " ".join(renderers.pdf_text(pdf).split())
    assert "Step 1: The query" in text and "Step 2: The keys and the values" in text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(TOKENS, st.sampled_from(["W_K", "d_k", "c_KV", "e^(m_old − m_new)", "e^−∞", "·", "q·k = ", "'", "√d_k", "ᵀ", " ",
                                                   "L_q × L_k", "√8", "√d", "I_d"])),
                max_size=8))
@example(["--$"])  # an option's dashes then a dollar: two math spans side by side made `$$` (found by hypothesis)
@example(["q·k = ", "--", "√d_k"])
@example(["--<"])  # an option's hyphens, then a symbol: was "$\\text{-}\\text{-}$$<$"
def test_latex_prose_is_text_and_paired_inline_math(pieces):
    """latex_prose of any narration with any tokens in it: `$` paired, never `$$`, no command outside math (tests.renderers)."""
    renderers.latex_prose_math(escape.latex_prose("Step 1: " + "".join(pieces)).replace("\n", " "))


def test_latex_prose_writes_roots_and_sequence_lengths_as_math(cli, katex_modules):
    """LaTeX prose: √d_k is $\\sqrt{d_{k}}$ (not a surd beside d_k), √8 $\\sqrt{8}$, L_q × L_k math (not L\\_q); KaTeX renders them."""
    assert escape.latex_prose("scale: ÷ √d_k = √8, N(0, I_d)") == r"scale: $\div{}$ $\sqrt{d_{k}}$ = $\sqrt{8}$, N(0, $I_{d}$)"
    report = cli("run", "journey-causal", "--block-size", "2", "--format", "latex").stdout
    assert "L\\_q" not in report and "$L_{q}$" in report and "$L_{k}$" in report
    header = cli("run", "journey-causal", "--stages", "weights", "--format", "latex").stdout
    assert r"\sqrt{d_{k}}" in header and r"\surd" not in header
    lines = [line for text in (report, header) for line in text.splitlines() if line and not line.startswith("$$")]
    pieces = [m for line in lines for m in renderers.latex_prose_math(line)]
    assert [(p, r.error) for p, r in zip(pieces, renderers.katex(katex_modules, pieces)) if r.error] == []


def test_latex_text_prints_the_awkward_tokens_as_prose(latex_tools, tmp_path):
    """escape.latex_text: each awkward token in a paragraph prints as written in pdflatex, T1 and OT1 (where it has the glyphs)."""
    assert escape.latex_text("k = e·W_K ≈ 2, 50% R&D") == r"k = e$\cdot{}$W\_K $\approx{}$ 2, 50\% R\&D"
    assert escape.latex_prose("k = e·W_K ≈ 2, 50% R&D, a_b") == r"$k$ = $e\cdot{}W_{K}$ $\approx{}$ 2, 50\% R\&D, a\_b"
    assert escape.latex_text("keys 1–2 — so") == "keys 1–2 — so"  # pdflatex prints them; a post would show TeX's -- as it is
    assert escape.latex_text("α⁽²⁾ and $<") == r"$\alpha{}^{(2)}$ and ${\$}<$" and "$$" not in escape.latex_text("$$x$$")
    tokens = [t for t in AWKWARD if t.isascii() or t in ("café", "é")]
    for name, preamble in (("t1", T1_ARTICLE), ("ot1", PLAIN_ARTICLE)):
        lines = [preamble + "\\begin{document}"] + [f"\\noindent[{i}] {escape.latex_text(t)} [/]\\par" for i, t in enumerate(tokens)]
        shown = printed_lines(renderers.pdflatex("\n".join(lines + ["\\end{document}\n"]), tmp_path / name))
        assert sorted(shown) == list(range(len(tokens)))
        if name == "t1":  # OT1 has no < > | _ glyphs of its own: only that every line printed
            wrong = [(t, shown[i]) for i, t in enumerate(tokens) if renderers.fold(shown[i]) != renderers.fold(renderers.printed(t))]
            assert wrong == []


def test_greek_letters_print_as_themselves_in_every_tex_engine(latex_tools, katex_modules, mathjax_modules, tmp_path):
    """A token or a header in Greek (variance's "max α", a Greek sentence) prints its letters, not their code points."""
    check_tex_engines(["max α", "λόγος", "ΣΩΔ", "αβγδεζηθικλμνξπρστυφχψω"], tmp_path, katex_modules, mathjax_modules)


def test_curly_quotes_beside_straight_ones_do_not_join_into_double_quotes(latex_tools, katex_modules, mathjax_modules, tmp_path):
    """’ and ‘ are the fonts' ' and `: beside one, T1 printed the pair as ” (found by the random tokens above)."""
    check_tex_engines(["_'’", "’'", "’’", "‘‘", "`‘", "!‘"], tmp_path, katex_modules, mathjax_modules)


@pytest.mark.parametrize("token", ["[", ",", "(", ")", ".", "cat"])
def test_a_quoted_token_opens_and_closes_its_quotes_in_pdflatex(latex_tools, tmp_path, token):
    """The narration's '[' prints ‘[’ in pdflatex (the closing quote before a comma is no second opening one), as 'cat' prints ‘cat’."""
    from attncli.formats import latex

    body = latex.prose(f"52% of this row goes to '{token}', the first token: a sink; '{token}'. Then '{token}' itself.")
    source = T1_ARTICLE + "\\begin{document}\n" + body + "\n\\end{document}\n"
    printed = " ".join(renderers.pdf_text(renderers.pdflatex(source, tmp_path)).split())
    assert f"goes to ‘{token}’, the first token: a sink; ‘{token}’. Then ‘{token}’ itself." in printed
