"""Publication formats checked with the tools readers use: pdflatex, KaTeX, MathJax, markdown-it-py, HTML and XML parsers."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli import escape
from tests import renderers

# Tokens that broke or misprinted somewhere (issues 11 and 12), and the characters that do most harm.
AWKWARD = ["<eos>", "<|endoftext|>", "a_b", "50%", "R&D", "café", "*x*", "[bold]x[/]", "[/]", "x^2", "~y", "#1", "- x",
           "1. x", "$$x$$", "\\begin{x}", "{}", "a--b", "''q''", "`c`", ":smile:", "=1+1", "@SUM(A1)", "\x1b[31mred",
           "a\nb\rc\td", "\u202eevil", "\u2028", "\ufffe", "a\\", " lead", "trail ", "two  spaces", "中文", "😀", "é", "Ǆ"]  # fmt: skip
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

    comment = escape.latex_comment(token)
    assert comment.isascii() and comment.isprintable()


def test_csv_guard_applies_to_text_and_leaves_numbers_alone():
    """=, +, -, @ (and tab and CR, shown as text) get a leading '; text that is a plain number stays as it is."""
    assert [escape.csv_cell(s) for s in ["=1+1", "+x", "-x", "@SUM(A1)", "\tx", "\rx", "-1", "+0.5", "1e-3", "x=1"]] == [
        "'=1+1", "'+x", "'-x", "'@SUM(A1)", r"\tx", r"\rx", "-1", "+0.5", "1e-3", "x=1"]  # fmt: skip


def test_markdown_of_the_awkward_tokens_is_readable():
    """The escaped Markdown of tokens from the issues, as a blogger would see it in the source."""
    assert [escape.markdown(s) for s in ["<eos>", "<|endoftext|>", "a_b", "50%", "R&D", "*x*", "[bold]x[/]", "- x", "1. x"]] == [
        "&lt;eos&gt;", "&lt;&#124;endoftext&#124;&gt;", "a\\_b", "50%", "R&amp;D", "\\*x\\*", "\\[bold\\]x\\[/\\]", "\\- x", "1\\. x"]  # fmt: skip


def test_latex_comment_is_one_ascii_line():
    """Accents are dropped, symbols spelled out, other characters written \\uXXXX; no line break survives."""
    assert escape.latex_comment("café – x × y\n\\input{evil}") == r"cafe - x x y\n\input{evil}"
    assert escape.latex_comment("中😀") == r"\u4e2d\U0001f600"


def test_latex_pieces_for_the_awkward_tokens():
    """Specials become math symbols outside \\text, ligatures are split, outer spaces are control spaces."""
    assert escape.latex("<eos>") == r"{<}\text{eos}{>}"
    assert escape.latex("a_b") == r"\text{a}{\_}\text{b}"
    assert escape.latex("R&D 50%") == r"\text{R}{\&}\text{D 50}{\%}"
    assert escape.latex("a--b") == r"\text{a-}\text{-b}"
    assert escape.latex(" x  y") == r"\ \text{x}\ \ \text{y}"
    assert escape.latex("中") == r"\,\mathtt{U{+}4E2D}\,"
    assert "$$" not in escape.latex("$$") and escape.latex("") == "{}"


# -- escape: TeX engines -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def katex_modules(request) -> Path:
    """node_modules holding katex, installed from npm on first use (the folder test_formats.py uses)."""
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are needed to render TeX with KaTeX")
    try:
        return renderers.npm_install(Path(request.config.cache.mkdir("katex")), "katex@0.16", "katex")
    except RuntimeError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="session")
def mathjax_modules(request) -> Path:
    """node_modules holding mathjax-full 3, installed from npm on first use."""
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are needed to render TeX with MathJax")
    try:
        return renderers.npm_install(Path(request.config.cache.mkdir("mathjax")), "mathjax-full@3", "mathjax-full")
    except RuntimeError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="session")
def latex_tools() -> None:
    """Skips unless pdflatex, lmodern and poppler's pdftotext are installed (scripts/install-test-tools.sh installs them)."""
    missing = [tool for tool in ("pdflatex", "kpsewhich", "pdftotext", "pdffonts") if not shutil.which(tool)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: scripts/install-test-tools.sh installs TeX Live and poppler")
    found = subprocess.run(["kpsewhich", "lmodern.sty"], capture_output=True, text=True).stdout.strip()
    if not found:
        pytest.skip("the LaTeX package lmodern is not installed: scripts/install-test-tools.sh installs it")


PLAIN_ARTICLE = "\\documentclass{article}\n\\usepackage{amsmath}\n"  # OT1, Computer Modern: LaTeX's defaults
T1_ARTICLE = "\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{lmodern}\n\\usepackage{amsmath}\n"


def token_lines(tokens: list[str], preamble: str) -> str:
    """A document printing each token on its own line between [i] and [/] markers, after a % comment of it."""
    lines = [preamble + "\\usepackage[landscape,margin=5mm]{geometry}\n\\begin{document}\n\\small"]
    for i, token in enumerate(tokens):
        lines.append("% " + escape.latex_comment(token))
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
    for engine, modules in ((renderers.katex, katex_modules), (renderers.mathjax, mathjax_modules)):
        results = engine(modules, blocks)
        wrong = [(t, r) for t, r, e in zip(tokens, results, expected) if r.error or renderers.fold(r.text) != e]
        assert wrong == [], f"{engine.__name__} rendered these differently"


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
    """Every character of escape.LATEX_TEXT_CHARACTERS compiles in OT1 and T1 with outline fonts, and renders in KaTeX and MathJax."""
    characters = sorted(escape.LATEX_TEXT_CHARACTERS)
    body = " ".join(escape.latex(c) for c in characters)
    for name, preamble in (("ot1", PLAIN_ARTICLE), ("t1", T1_ARTICLE)):
        pdf = renderers.pdflatex(preamble + "\\begin{document}\n$" + body + "$\n\\end{document}\n", tmp_path / name)
        assert "Type 3" not in renderers.pdf_fonts(pdf), f"{name}: a bitmap font was needed"
    for engine, modules in ((renderers.katex, katex_modules), (renderers.mathjax, mathjax_modules)):
        results = engine(modules, [escape.latex(c) for c in characters])
        assert [(c, r.error) for c, r in zip(characters, results) if r.error] == []


def test_a_comment_cannot_be_left(latex_tools, tmp_path):
    """A token with a line break and a live-looking command stays inside its % comment."""
    evil = "x\n\\input{/etc/passwd}\r\\end{document}\u2028^^M\\relax"
    source = PLAIN_ARTICLE + "\\begin{document}\n% " + escape.latex_comment(evil) + "\nOK\n\\end{document}\n"
    assert renderers.pdf_text(renderers.pdflatex(source, tmp_path)).split() == ["OK", "1"]
