"""Every format draws every block type of the shared document vocabulary (attncli.document.blocks), each in its own module.

`attncli.formats.render_document` hands a document to its format's module (markdown.py, latex.py,
csvout.py, htmltable.py, svg.py, terminal.py); these tests draw every block type, alone
and together, through it, check the result with the tools the format's readers use, and check that a
block type a format has no drawing for is an error, not drawn as something else.
"""

import csv
import io
import typing
import xml.etree.ElementTree as ET
from typing import NamedTuple

import numpy as np
import pytest

from attncli.document import blocks
from attncli.document.blocks import Document, Heading, Line, Note, Paragraph, Step, Steps, Table, Values, Vector
from attncli.formats import Format, render_document
from attncli.formats.terminal import document_terminal
from tests import renderers
from tests.test_formats import BalancedHTML

FORMATS = [f.value for f in Format if f not in (Format.json, Format.png)]  # json is written from the data, not from blocks; png is the svg drawn
TIDY = Table(["query", "number"], [["cell-a", "1.25"]], [False, True])


def one_of_each() -> dict[type, tuple[blocks.Block, list[str]]]:
    """A block of each type, and the words each format must show of it."""
    step = Step("The query", "q = e·W_Q", [Line("q", "[1, 0]·W_Q"), Line("", "= [2, 3]")], ["A step note."], ("W_Q", np.array([[1.5, 2.0]])))
    vector = Vector("[0.5, 0.25]", ["0.5", "0.25"])
    return {
        Heading: (Heading("A section", level=2), ["A section"]),
        Paragraph: (Paragraph("An intro paragraph."), ["intro paragraph"]),
        Values: (Values([("name", "value-1"), ("q", vector)]), ["value-1", "0.25"]),
        Table: (Table(["query", "number", "vector"], [["cell-a", "1.25", vector]], [False, True, False]), ["cell-a", "1.25", "0.25"]),
        Note: (Note("A note at the end."), ["A note at the end"]),
        Steps: (Steps([step], precision=2), ["Step 1", "The query", "[2, 3]", "A step note", "1.50"]),
    }


def every_block() -> Document:
    return Document("The title", [Heading("The title"), *(block for block, _ in one_of_each().values())], tidy=TIDY)


def shown(text: str, fmt: str) -> str:
    """The text as its reader sees the words: Markdown's escapes (1\\.25) are not shown."""
    return text.replace("\\", "") if fmt == "markdown" else text


def test_the_document_covers_every_block_type():
    assert set(one_of_each()) == set(typing.get_args(blocks.Block))
    assert {type(block) for block in every_block().blocks} == set(typing.get_args(blocks.Block))


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_draws_every_block_type(fmt):
    text = render_document(every_block(), fmt, to_file=True)
    if fmt == "csv":  # a document's CSV is its tidy table, whatever its blocks
        assert list(csv.reader(io.StringIO(text))) == [["query", "number"], ["cell-a", "1.25"]]
        return
    if fmt == "svg":
        ET.fromstring(text)  # well-formed
    words = ["The title"] + [word for _, words in one_of_each().values() for word in words]
    missing = [word for word in words if word not in shown(text, fmt)]
    assert not missing, f"{fmt} lost {missing}"


@pytest.mark.parametrize("kind", list(one_of_each()), ids=lambda kind: kind.__name__)
@pytest.mark.parametrize("fmt", [fmt for fmt in FORMATS if fmt != "csv"])
def test_every_format_draws_each_block_type_on_its_own(fmt, kind):
    """A document of one block (after its title) in each format and each way of writing it: the block's words are there."""
    block, words = one_of_each()[kind]
    document = Document("The title", [Heading("The title"), block], tidy=TIDY)
    ways = {"latex": [{"standalone": True}, {"standalone": False}], "html": [{"fragment": True}, {}],
            "markdown": [{"heading_level": 0}, {"heading_level": 3}]}.get(fmt, [{}])  # fmt: skip
    for way in ways:
        text = shown(render_document(document, fmt, to_file=True, **way), fmt)
        missing = [word for word in words if word not in text]
        assert not missing, f"{fmt} {way} lost {missing} of {kind.__name__}"


def test_the_boxed_terminal_draws_every_block_type():
    """variance's framed tables (terminal.document_terminal(boxed=True)) draw the other blocks too, not only tables and notes."""
    text = document_terminal(every_block(), to_file=True, boxed=True)
    missing = [word for _, words in one_of_each().values() for word in words if word not in text]
    assert not missing and "┃" in text  # the table framed


class Unknown(NamedTuple):
    text: str


@pytest.mark.parametrize("fmt", [fmt for fmt in FORMATS if fmt != "csv"])
def test_a_block_a_format_cannot_draw_is_an_error(fmt):
    """A block type added to the vocabulary but not to a format fails loudly rather than being drawn as another type."""
    document = Document("The title", [Unknown("words")], tidy=TIDY)
    with pytest.raises(TypeError, match="no drawing for Unknown"):
        render_document(document, fmt, to_file=True)  # type: ignore[arg-type]
    if fmt == "table":
        with pytest.raises(TypeError, match="no drawing for Unknown"):
            document_terminal(document, to_file=True, boxed=True)  # type: ignore[arg-type]


@pytest.mark.parametrize("fragment", [False, True])
def test_html_of_every_block_is_balanced(fragment):
    parser = BalancedHTML()
    parser.feed(render_document(every_block(), "html", to_file=True, fragment=fragment))
    parser.close()
    assert parser.stack == [] and {"h1", "h2", "p", "ul", "li", "table", "th", "td", "pre"} <= parser.seen


def test_markdown_of_every_block_parses_as_a_table_and_headings():
    html = renderers.markdown_html(render_document(every_block(), "markdown", to_file=True))
    elements = renderers.html_elements(html)
    tags = [element.tag for element in elements]
    assert {"h1", "h2", "ul", "table", "pre"} <= set(tags)
    assert [e.text for e in elements if e.tag == "td"] == ["cell-a", "1.25", "[0.5, 0.25]"]


def test_latex_article_of_every_block_compiles(latex_tools, tmp_path):
    pdf = renderers.pdflatex(render_document(every_block(), "latex", to_file=True, standalone=True), tmp_path)
    text = renderers.fold(renderers.pdf_text(pdf))
    missing = [word for word in ["The title", *(w for _, words in one_of_each().values() for w in words)] if renderers.fold(word) not in text]
    assert not missing


def test_latex_fragment_blocks_of_every_block_render_in_katex(katex_modules):
    math = renderers.latex_display_blocks(render_document(every_block(), "latex", to_file=True))  # paragraphs and $$ blocks only
    assert len(math) == 3  # the values, the table, the step's arithmetic
    errors = [(i, r.error) for i, r in enumerate(renderers.katex(katex_modules, math)) if r.error is not None]
    assert not errors


# -- the block options: a record (`Values(record=True)`, model info) and a listing (`Table(listing=True)`, model tokens) ----------

RECORD = Values([("name", "one"), ("field", "first line"), ("", "second line")], record=True)
LISTING = Table(["n", "word"], [["1", "-1"], ["12", "ab"]], [True, False], listing=True)


def with_options() -> Document:
    return Document("The title", [Heading("The title"), RECORD, LISTING], tidy=LISTING)


def test_the_terminal_draws_a_record_aligned_and_a_listing_at_the_margin_without_a_rule():
    text = render_document(Document("T", [RECORD, LISTING], tidy=LISTING), "table", to_file=True)
    assert text == "name   one\nfield  first line\n       second line\n n  word\n 1  -1\n12  ab\n"
    assert blocks.fields(RECORD) == [("name", ["one"]), ("field", ["first line", "second line"])]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_draws_a_record_and_a_listing(fmt):
    text = render_document(with_options(), fmt, to_file=True)
    if fmt == "csv":
        assert list(csv.reader(io.StringIO(text))) == [["n", "word"], ["1", "-1"], ["12", "ab"]]
        return
    if fmt == "svg":
        ET.fromstring(text)
    missing = [w for w in ["name", "one", "first line", "second line", "-1", "ab", "12"] if w not in shown(text, fmt)]
    assert not missing, f"{fmt} lost {missing}"


def test_markdown_and_html_draw_a_record_as_a_list_a_field_of_several_lines_nested():
    for html in (renderers.markdown_html(render_document(with_options(), "markdown", to_file=True)),
                 render_document(with_options(), "html", to_file=True, fragment=True)):  # fmt: skip
        found = renderers.html_elements(html)
        items = ["".join(e.text.split()) for e in found if e.tag == "li"]  # the words, without the spaces and breaks between items
        assert items == ["name:one", "field:firstlinesecondline", "firstline", "secondline"]
        assert [e.text for e in found if e.tag in ("td", "th")][-4:] == ["1", "-1", "12", "ab"]  # HTML: the first cell is the row's <th>
    parser = BalancedHTML()
    parser.feed(render_document(with_options(), "html", to_file=True))
    parser.close()
    assert parser.stack == []


def test_latex_of_a_record_and_a_listing_renders_in_katex(katex_modules):
    math = renderers.latex_display_blocks(render_document(with_options(), "latex", to_file=True))  # the record: paragraphs
    assert len(math) == 1  # the listing
    rendered = renderers.katex(katex_modules, math)
    assert rendered[0].error is None and "-1" in rendered[0].text.replace("−", "-")
