"""Every format draws every block type of the shared document vocabulary (attncli.document.blocks)."""

import csv
import io
import typing
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from attncli.document import blocks
from attncli.document.blocks import Document, Heading, Line, Note, Paragraph, Step, Steps, Table, Values
from attncli.formats import report

FORMATS = ["table", "markdown", "latex", "csv", "html", "svg"]  # json is written from the data, not from blocks


def every_block() -> Document:
    step = Step("The query", "q = e·W_Q", [Line("q", "[1, 0]·W_Q"), Line("", "= [2, 3]")], ["A step note."], ("W_Q", np.array([[1.5, 2.0]])))
    return Document(
        "The title",
        [
            Heading("The title"),
            Paragraph("An intro paragraph."),
            Heading("A section", level=2),
            Values([("name", "value-1")]),
            Table(["query", "number"], [["cell-a", "1.25"]], [False, True]),
            Note("A note at the end."),
            Steps([step], precision=2),
        ],
        tidy=Table(["query", "number"], [["cell-a", "1.25"]], [False, True]),
    )


def test_the_document_covers_every_block_type():
    shown = {type(block) for block in every_block().blocks}
    assert shown == set(typing.get_args(blocks.Block))


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_draws_every_block_type(fmt):
    text = report.render(every_block(), fmt, to_file=True)
    if fmt == "csv":
        assert list(csv.reader(io.StringIO(text))) == [["query", "number"], ["cell-a", "1.25"]]
        return
    if fmt == "svg":
        ET.fromstring(text)  # well-formed
    words = ["The title", "intro paragraph", "A section", "value-1", "cell-a", "1.25", "A note at the end", "Step 1", "The query", "[2, 3]",
             "A step note", "1.50"]  # fmt: skip
    if fmt == "markdown":
        text = text.replace("\\", "")  # Markdown's escapes (1\.25) are not shown
    missing = [word for word in words if word not in text]
    assert not missing, f"{fmt} lost {missing}"
