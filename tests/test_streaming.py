"""JSON and CSV are written a block of rows at a time, byte for byte as when the whole text was built at once."""

import csv
import io

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import engine
from attncli.document import views
from attncli.formats import csvout, jsonout
from attncli.sources.yaml_scenario import load
from attncli.walkthroughs import data


def whole_json(doc: dict) -> bytes:
    """The document with every matrix in one chunk (the block size made larger than any matrix)."""
    return b"".join(jsonout.document(doc))


def test_json_blocks_join_to_the_same_bytes(monkeypatch):
    """A matrix cut into blocks of one or two rows gives the same text as one block."""
    result = engine.run(load("journey-causal"))
    doc = data.run_json(result, ("embeddings", "q", "scores", "masked", "weights", "output"), [1])
    whole = whole_json(doc)
    for values in (1, 2, 7):
        monkeypatch.setattr(jsonout, "CHUNK_VALUES", values)
        assert whole_json(doc) == whole


def test_json_matrix_with_no_rows_is_unchanged():
    """An empty matrix is still written as an empty list on its own lines."""
    assert b"".join(jsonout.encode({"m": np.zeros((0, 3))})) == b'{\n  "m": [\n    \n  ]\n}'


def reference_csv(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12))
def test_csv_field_quotes_as_the_csv_module_does(label):
    """A label cell is quoted exactly when, and as, csv.writer would quote it."""
    assert csvout._field(label) + ",1\n" == reference_csv([[label, "1"]])


def test_csv_blocks_join_to_the_same_text(monkeypatch):
    """The CSV of a stage is the same whatever the block size, and reads back to the engine's numbers."""
    result = engine.run(load("journey-causal"))
    view = views.view_of(result, "masked", 1)
    assert view is not None
    whole = b"".join(csvout.run_csv(view, precision=None)).decode()
    monkeypatch.setattr(csvout, "BLOCK_VALUES", 1)
    assert b"".join(csvout.run_csv(view, precision=None)).decode() == whole
    rows = list(csv.reader(io.StringIO(whole)))
    assert np.array_equal(np.array([[float(x) for x in row[1:]] for row in rows[1:]]), result.head(1).masked)
