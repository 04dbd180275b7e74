"""Every format shows tokens and commands as text (a code span that holds any command, quotes in prose, never a Markdown
backtick in the terminal), and the map's pages are whole documents or fragments on request, read by the real renderers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import attncli.api as attn
from tests import renderers

ROOT = Path(__file__).resolve().parent.parent
GPT2 = str(ROOT / "tests/checkpoints/gpt2")
TOKENS = ["a`b", "<s>", "*x*", "$y", "#z", "don't"]  # each special somewhere: Markdown, HTML, TeX, Typst, the shell
BACKTICKED = "The `cat` didn't $HOME"  # a sentence whose explain command holds backticks, a quote and a dollar


@pytest.fixture
def hostile(cli, tmp_path) -> str:
    """A scenario file whose tokens are TOKENS (random weights from `scenarios new`, seed 4, causal)."""
    made = cli("scenarios", "new", "a b c d e f", "--d-model", "4", "--heads", "4", "--mask", "causal", "--sharpness", "12", "--seed", "4")
    assert made.exit_code == 0, made.stderr
    listed = ", ".join('"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"' for t in TOKENS)
    text = re.sub(r"^sentence: .*$", f"tokens: [{listed}]", made.stdout, count=1, flags=re.M)
    path = tmp_path / "hostile.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_command_with_backticks_is_a_markdown_code_span_that_shows_it_whole(cli):
    """Markdown writes each explain command as a code span with a longer fence when it holds backticks (it was left out)."""
    result = cli("heads", "--model", GPT2, "--sentence", BACKTICKED, "--word", "cat", "--to", "The", "--top", "2", "--format", "markdown")
    assert result.exit_code == 0, result.stderr
    shown = [e.text for e in renderers.html_elements(renderers.markdown_html(result.stdout)) if e.tag == "code"]
    terminal = [line.strip() for line in cli("heads", "--model", GPT2, "--sentence", BACKTICKED, "--word", "cat", "--to", "The", "--top", "2").stdout.splitlines()
                if line.strip().startswith("attncli explain")]  # fmt: skip
    assert len(shown) == 2 and shown == terminal and all("\\`cat\\`" in command for command in shown)


@pytest.mark.parametrize("text", ["plain", "a`b", "``x``", "`lead", "trail`", " both ", "```"])
def test_a_code_span_shows_any_line_as_written(text):
    """markdown.code_span's fence and padding give back the text itself in a CommonMark parser, backticks and spaces included."""
    from attncli.formats.markdown import code_span

    html = renderers.markdown_html(f"- {code_span(text)}\n")
    assert [e.text for e in renderers.html_elements(html) if e.tag == "code"] == [text]


def test_the_shaded_sentence_quotes_its_query_token_and_shows_no_markdown_in_the_terminal(cli, hostile):
    """The query token is quoted in the title and the footnote, as the readings quote tokens; the terminal shows no backtick span."""
    table = cli("heads", hostile, "--word", "don't").stdout
    assert table.startswith("What 'don't' (position 6) attends to: every layer")
    assert "Under each token the weight 'don't' gives it" in table and "`don't`" not in table
    markdown = cli("heads", hostile, "--word", "don't", "--format", "markdown").stdout
    paragraphs = [e.text for e in renderers.html_elements(renderers.markdown_html(markdown)) if e.tag in ("h1", "p")]
    assert paragraphs[0].startswith("What 'don't' (position 6) attends to")
    assert "The weight 'don't' (position 6) gives each token; – marks a token it cannot see." in paragraphs


def test_the_shaded_sentence_in_typst_shows_its_tokens_as_text(cli, hostile):
    """Typst (compiled by the real compiler) shows the title's quoted token and every token's header as written."""
    from tests.test_typst import elements, plain, tree

    source = cli("heads", hostile, "--word", "don't", "--format", "typst").stdout
    document = tree(source)
    assert plain(elements(document, "heading")[0]).startswith("What 'don't' (position 6) attends to")
    assert all(token in plain(document) for token in TOKENS)


def test_the_shaded_sentence_is_an_html_fragment_on_request_and_in_a_notebook(cli, hostile):
    """heads --word --fragment is a <div> to paste (it was a whole page), and so is a notebook's display of the result."""
    page = cli("heads", hostile, "--word", "don't", "--format", "html").stdout
    assert page.startswith("<!DOCTYPE html>")
    fragment = cli("heads", hostile, "--word", "don't", "--format", "html", "--fragment").stdout
    assert fragment.startswith('<div class="attncli">') and "<html" not in fragment.lower() and "<body" not in fragment.lower()
    tags = [e.tag for e in renderers.html_elements(fragment)]
    assert tags[0] == "div" and "svg" in tags and "table" in tags
    headers = [e.text for e in renderers.html_elements(fragment) if e.tag == "th" and e.attrs.get("scope") == "col"]
    assert headers == TOKENS
    shown = attn.heads(hostile, word="don't")._repr_html_()
    assert shown.startswith('<div class="attncli">') and "<html" not in shown.lower()


@pytest.mark.parametrize("extra", [("--word", "don't"), ("--word", "don't", "--to", "*x*")], ids=["shade", "link"])
def test_each_page_of_the_map_is_a_whole_typst_document_with_standalone(cli, hostile, extra):
    """heads --word (and --to) --format typst --standalone is a document with its page set that the real compiler compiles."""
    from tests.test_typst import compiled

    result = cli("heads", hostile, *extra, "--format", "typst", "--standalone")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("#set document(") and compiled(result.stdout).startswith(b"%PDF")
    assert "#set page" not in cli("heads", hostile, *extra, "--format", "typst").stdout


@pytest.mark.parametrize("text", ["The animal didn't cross", BACKTICKED, 'say "hi", it\'s \\ ok', "it's!", "plain", "two words", "$HOME",
                                  "The\tcat sat", "red \x1b[31mcat", "it's x\u202eRLO \\ \n", "bell\x07 $HOME `x`"])
def test_an_explain_command_quotes_a_sentence_so_that_a_shell_reads_it_back(text):
    """shell_word: double quotes (with backslashes before " $ ` \\) for a sentence with an apostrophe, never 'didn'"'"'t' unless a
    ! forces it; bash reads each word back as the text itself."""
    import shutil
    import subprocess

    from attncli.cli.model import shell_word
    from attncli.errors import visible

    word = shell_word(text)
    assert visible(word) == word  # every output shows it as it is: nothing in it is rewritten on the way to the reader
    if "'" in text and "!" not in text and text.isprintable():
        assert word.startswith('"') and "'\"'\"'" not in word
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash to read the command back")
    assert subprocess.run([bash, "-c", f"printf %s {word}"], capture_output=True, text=True, check=True).stdout == text


def test_the_map_s_explain_command_for_a_sentence_with_backticks_reads_at_a_glance(cli):
    """The sentence 'The `cat` didn't $HOME' is one double-quoted word in the command, with backslashes where the shell needs them."""
    result = cli("heads", "--model", GPT2, "--sentence", BACKTICKED, "--word", "cat", "--to", "The", "--top", "1")
    assert '--sentence "The \\`cat\\` didn\'t \\$HOME" --word cat' in result.stdout


def test_variance_is_a_whole_document_with_standalone_or_a_fragment(cli):
    """variance takes --standalone/--fragment as run does (it was 'No such option'): Typst with its page set compiles, HTML a <div>."""
    from tests.test_typst import compiled

    small = ("variance", "--samples", "200", "--dims", "1,8")
    typst_doc = cli(*small, "--format", "typst", "--standalone")
    assert typst_doc.exit_code == 0, typst_doc.stderr
    assert typst_doc.stdout.startswith("#set document(") and compiled(typst_doc.stdout).startswith(b"%PDF")
    assert "#set page" not in cli(*small, "--format", "typst").stdout
    fragment = cli(*small, "--format", "html", "--fragment").stdout
    assert fragment.startswith('<div class="attncli">') and "<html" not in fragment.lower()
    assert "\\documentclass" in cli(*small, "--format", "latex", "--standalone").stdout


def test_variance_as_a_latex_article_compiles_with_pdflatex(cli, latex_tools, tmp_path):
    """variance --format latex --standalone is an article pdflatex compiles, with its table's columns and samples in the text."""
    article = cli("variance", "--samples", "200", "--dims", "1,8", "--format", "latex", "--standalone").stdout
    text = renderers.pdf_text(renderers.pdflatex(article, tmp_path))
    assert "200 samples per d" in text and "var scaled" in text and "8.02 (8)" in text
