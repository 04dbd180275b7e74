"""`model info` and `model tokens` in every format: documents of blocks (attncli.walkthroughs.model), each checked by its readers' tool.

The terminal's lines and the JSON are pinned byte for byte (they were written by hand before these commands became
documents); Markdown by markdown-it, HTML by html.parser, LaTeX's `$$` blocks by KaTeX, CSV by the csv module, SVG by
ElementTree, Typst by the Typst compiler. A token's label and piece are text in every format, however hostile.
"""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import attncli.api as attn
from attncli.document import escape
from attncli.formats import Format
from tests import renderers
from tests.test_typst import compiled, elements, plain, table_rows, tree

HERE = Path(__file__).parent / "checkpoints"
FORMATS = [f.value for f in Format]

GPT2_INFO = """\
folder        tests/checkpoints/gpt2
architecture  gpt2 (GPT2LMHeadModel)
layers        3
heads         4 query heads, 4 key/value heads
d_model       16
head_dim      4
positions     32
rope          none (learned positions)
mask          causal
activation    gelu_new
dtype         float32; arithmetic in float64
weights       model.safetensors
attention     multi-head attention: 4 heads, each with its own keys and values
kv cache      K and V: 2 · 4 key/value heads · 4 = 32 numbers per layer and token, × 4 bytes (float32, as the weights are stored) = 384 bytes per token over 3 layers
              a full context of 32 tokens: 12,288 bytes (12 KiB)
supported     yes: attncli run --model tests/checkpoints/gpt2 --layer 1..3 --sentence TEXT
"""

GPT2_TOKENS = """\
position   id  label  piece
       1  289  Whe    Whe
       2   78  n      n
       3  288  ␣Mary  ĠMary
       4  286  ␣and   Ġand
       5   92  |      |
       6    4  $      $
6 tokens; ␣ marks a leading space
"""

# a token's label and piece as a hostile tokenizer could give them: markup of every format, a control character, a line break
HOSTILE = ["<eos>", "*x*", "a|b", "$x$", "\x1b[31m", "a\nb", "-1", ".", "=cmd()", "\\textbf{x}", "#set", "</td>", "&amp;", "_x_"]


def hostile_tokens() -> attn.ModelTokens:
    rows = [{"position": n, "id": 100 + n, "label": text, "piece": "Ġ" + text} for n, text in enumerate(HOSTILE, 1)]
    return attn.ModelTokens("models/<evil>|*x*", "text $x$ <eos>", rows, "padding to 8 tokens")


def cli_out(cli, *args: str) -> str:
    done = cli(*args)
    assert done.exit_code == 0, done.output
    return done.stdout


# -- the terminal and the JSON, as they were ---------------------------------------------------------


def test_model_info_in_the_terminal_is_aligned_lines_as_before(cli, monkeypatch):
    """On a terminal wide enough for every value (narrower ones wrap: tests/test_terminal_width.py), the lines as they were."""
    monkeypatch.setenv("COLUMNS", "1000")
    assert cli_out(cli, "model", "info", str(HERE / "gpt2")).replace(str(HERE / "gpt2"), "tests/checkpoints/gpt2") == GPT2_INFO


def test_model_tokens_in_the_terminal_is_a_listing_as_before(cli):
    assert cli_out(cli, "model", "tokens", str(HERE / "gpt2"), "When Mary and|$") == GPT2_TOKENS  # at the margin, no rule, ids right


def test_the_json_is_the_data_with_its_schema(cli):
    info = json.loads(cli_out(cli, "model", "info", str(HERE / "llama"), "--format", "json"))
    assert info["schema"] == "attncli.model-info/1" and info["layers"] == 3 and info == {"schema": info["schema"], **attn.model_info(HERE / "llama").info}
    tokens = json.loads(cli_out(cli, "model", "tokens", str(HERE / "gpt2"), "When Mary", "--format", "json"))
    assert tokens["schema"] == "attncli.model-tokens/1" and [t["position"] for t in tokens["tokens"]] == [1, 2, 3]
    assert tokens["tokens"] == attn.model_tokens(HERE / "gpt2", "When Mary").tokens


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("model", ["gpt2", "bert", "llama", "bart", "gguf/gpt2.gguf", "gguf/quantised.gguf"])
def test_both_commands_print_every_format(cli, fmt, model):
    """No format is refused any more: each prints something its reader accepts (the JSON parses, the SVG is XML)."""
    for args in (("info",), ("tokens", "When Mary and John")):
        text = cli_out(cli, "model", args[0], str(HERE / model), *args[1:], "--format", fmt)
        assert text.strip()
        if fmt == "json":
            json.loads(text)
        elif fmt == "svg":
            ET.fromstring(text)


def test_the_api_spells_a_supported_model_as_its_own_call():
    text = attn.model_info(HERE / "gpt2").render("markdown")
    assert "attn.load\\_model('" in text and "--model" not in text


def test_errors_are_as_before(cli):
    bad = cli("model", "tokens", str(HERE / "gpt2"), "x", "--special-tokens", "some")
    assert bad.exit_code != 0 and "--special-tokens" in bad.stderr and not bad.stdout
    missing = cli("model", "tokens", str(HERE / "nowhere"), "x", "--format", "markdown")
    assert missing.exit_code != 0 and "does not exist" in missing.stderr and not missing.stdout


# -- each format by its reader -------------------------------------------------------------------------


def test_markdown_of_the_tokens_is_a_table_of_the_labels_as_text():
    tokens = hostile_tokens()
    elements_ = renderers.html_elements(renderers.markdown_html(tokens.render("markdown")))
    cells = [e.text for e in elements_ if e.tag == "td"]
    assert cells[2::4] == [escape.visible(t) for t in HOSTILE] and cells[3::4] == [escape.visible("Ġ" + t) for t in HOSTILE]
    assert not {"em", "strong", "code"} & {e.tag for e in elements_}
    assert [e.text for e in elements_ if e.tag == "th"] == ["position", "id", "label", "piece"]


def test_markdown_of_model_info_is_a_list_with_a_field_of_several_lines_nested():
    html = renderers.markdown_html(attn.model_info(HERE / "llama").render("markdown"))
    items = [e.text for e in renderers.html_elements(html) if e.tag == "li"]
    assert "layers: 3" in items and any(item.startswith("kv cache:") for item in items)
    assert "a full context of 128 tokens: 24,576 bytes (24 KiB)" in items  # the field's second line, an item of its own


@pytest.mark.parametrize("fragment", [True, False])
def test_html_shows_every_label_as_text(fragment):
    text = hostile_tokens().render("html", standalone=not fragment)
    found = renderers.html_elements(text)
    cells = [e.text for e in found if e.tag == "td"]
    assert cells[1::3] == [escape.visible(t) for t in HOSTILE]  # the position is the row's <th>
    assert not {"eos", "script", "b", "em"} & {e.tag for e in found}


def test_csv_is_the_tidy_table():
    rows = list(csv.reader(io.StringIO(hostile_tokens().render("csv"))))
    assert rows[0] == ["position", "id", "label", "piece"] and len(rows) == len(HOSTILE) + 1
    assert [row[2] for row in rows[1:]] == [escape.csv_cell(t) for t in HOSTILE]
    assert rows[9][2] != "=cmd()" and "=cmd()" in rows[9][2]  # a formula is guarded
    info = list(csv.reader(io.StringIO(attn.model_info(HERE / "llama").render("csv"))))
    assert info[0] == ["field", "value"] and ["layers", "3"] in info
    assert [row[0] for row in info].count("kv cache") == 2  # a field's second line names its field too


def test_latex_blocks_render_in_katex_and_show_the_labels(katex_modules):
    text = hostile_tokens().render("latex")
    math = renderers.latex_display_blocks(text)
    rendered = renderers.katex(katex_modules, math)
    assert [r.error for r in rendered] == [None]
    shown = renderers.fold(rendered[0].text)
    missing = [t for t in HOSTILE if renderers.fold(renderers.printed(t)) not in shown]
    assert not missing
    info = renderers.latex_display_blocks(attn.model_info(HERE / "llama").render("latex"))  # paragraphs only: any math inline is checked there
    assert info == []


def test_svg_is_xml_holding_every_label():
    root = ET.fromstring(hostile_tokens().render("svg"))
    texts = "\n".join("".join(node.itertext()) for node in root.iter() if node.tag.endswith("text"))
    assert all(escape.visible(t) in texts for t in HOSTILE)


def test_typst_compiles_and_reads_back_every_label_as_text():
    source = hostile_tokens().render("typst")
    content = tree(source)
    rows = table_rows(elements(content, "table")[0])
    assert rows[0] == ["position", "id", "label", "piece"]
    assert [row[2] for row in rows[1:]] == [escape.visible(t) for t in HOSTILE]
    assert [row[3] for row in rows[1:]] == [escape.visible("Ġ" + t) for t in HOSTILE]
    assert "not applied" in plain(content)
    compiled(attn.model_info(HERE / "llama").render("typst", standalone=True))
    info = plain(tree(attn.model_info(HERE / "llama").render("typst")))
    assert "layers: 3" in info and "a full context of 128 tokens" in info


def test_the_terminal_shows_labels_as_text():
    text = hostile_tokens().render("table")
    assert "\x1b" not in text and "\\x1b[31m" in text and "a\\nb" in text


def test_latex_articles_compile_and_print_every_label(latex_tools, tmp_path):
    pdf = renderers.pdflatex(hostile_tokens().render("latex", standalone=True), tmp_path, "tokens")
    text = renderers.fold(renderers.pdf_text(pdf))
    assert [t for t in HOSTILE if renderers.fold(renderers.printed(t)) not in text] == []
    info = renderers.fold(renderers.pdf_text(renderers.pdflatex(attn.model_info(HERE / "llama").render("latex", standalone=True), tmp_path, "info")))
    assert renderers.fold("layers: 3") in info and renderers.fold("a full context of 128 tokens") in info


def test_a_notebook_shows_both_as_html_and_markdown():
    info, tokens = attn.model_info(HERE / "gpt2"), attn.model_tokens(HERE / "gpt2", "When Mary")
    assert "<html" not in info._repr_html_() and "<li>layers: 3</li>" in info._repr_html_()
    assert "| 3 | 288 | ␣Mary | ĠMary |" in tokens._repr_markdown_()
