"""CSV: one stage of one head as a plain matrix, for spreadsheets and scripts; a document as its tidy table (`document_csv`).

Numbers carry full float64 precision (the shortest text that reads back to the same
float) unless --precision asks for fewer decimals (then a number that rounds to zero is
0.00, never -0.00, as in every other format); a masked cell is -inf.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from attncli.document.blocks import Document, Table
from attncli.document.blocks import Matrix as MatrixView
from attncli.document.escape import csv_cell
from attncli.document.numbers import plain, plain_rows, plain_writer

if TYPE_CHECKING:
    from attncli.document.pages import ExplainPage, HeadsPage, ReportPage, RunPage, ShadePage
    from attncli.formats import Options

number = plain  # CSV's numbers: full precision, or fixed decimals without "-0.00"


def _write(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def run_csv(view: MatrixView, *, precision: int | None) -> Iterator[bytes]:
    """The matrix of one stage of one head, with its labels, written a block of rows at a time."""
    return _matrix_rows(view.data, view.rows, view.cols, precision)


BLOCK_VALUES = 1 << 16  # numbers per chunk: about 1.5 MB of text


def _matrix_rows(data: np.ndarray, rows: list[str], cols: list[str], precision: int | None) -> Iterator[bytes]:
    yield _write([["token", *map(csv_cell, cols)]]).encode("utf-8")
    step = max(1, BLOCK_VALUES // max(1, data.shape[1]))
    if precision is None:  # full precision: repr's digits, written by orjson a block at a time
        for start in range(0, data.shape[0], step):
            texts = plain_rows(data[start : start + step])
            labels = [_field(csv_cell(label)).encode("utf-8") for label in rows[start : start + step]]
            yield b"".join([label + b"," + text + b"\n" for label, text in zip(labels, texts)])
        return
    write = plain_writer(precision)  # a whole row through one map() each
    for start in range(0, data.shape[0], step):
        block = data[start : start + step].tolist()  # Python floats, formatted as number() does
        lines = [_field(csv_cell(label)) + "," + ",".join(map(write, values)) for label, values in zip(rows[start : start + step], block)]
        yield ("\n".join(lines) + "\n").encode("utf-8")


def _field(text: str) -> str:
    """One CSV field as csv.writer writes it (minimal quoting); `text` has no line breaks (csv_cell made them visible)."""
    return '"' + text.replace('"', '""') + '"' if "," in text or '"' in text else text


def document_csv(document: Document) -> str:
    """The document's tidy table (its other blocks are for people): text cells guarded against spreadsheet formulas, numbers as they are."""
    assert document.tidy is not None, "a document written as CSV has a tidy table"
    return _table(document.tidy)


def _table(tidy: Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([csv_cell(cell) for cell in tidy.header])
    for row in tidy.rows:
        writer.writerow([cell if numeric else csv_cell(cell) for cell, numeric in zip(row, tidy.numeric)])
    return buffer.getvalue()


# -- the pages (attncli.document.pages): the one table of each --------------------------------------


def run(page: RunPage, options: Options) -> Iterator[bytes]:
    """One stage of one head (the weights unless a stage is asked for)."""
    return run_csv(page.matrix(), precision=options.precision)


def explain(page: ExplainPage, options: Options) -> str:
    """A row per key: its score, logit, exponential, weight and value."""
    return _table(page.tidy())


def report(page: ReportPage, options: Options) -> str:
    return document_csv(page.document())


def heads(page: HeadsPage, options: Options) -> str:
    """A row per head: its layer, number and statistics."""
    from attncli.formats.headgrid import table_csv

    return table_csv(page.table())


def shade(page: ShadePage, options: Options) -> str:
    """A row per token: the weight each head (or layer) gives it."""
    from attncli.formats.shade import csv

    return csv(page.shaded())
