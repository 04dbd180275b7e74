"""The JSON keys added for blog posts and pandas: W_O, b_O and unique labels, added beside the first version's keys."""

import json

import numpy as np

from attncli.core import engine
from attncli.formats import jsonout
from attncli.sources.yaml_scenario import from_text, load
from attncli.walkthroughs import data

WITH_OUTPUT = """
tokens: [the, cat, the]
embeddings: [[1, 0], [0, 1], [1, 0]]
heads: 2
W_Q: [[1, 0], [0, 1]]
W_K: [[0, 1], [1, 0]]
W_V: [[1, 2], [3, 4]]
W_O: [[1, 0, 2], [0, 1, 3]]
b_O: [0.5, -0.5, 1]
"""


def test_w_o_and_b_o_are_written_when_the_scenario_has_them():
    """W_O and b_O are top-level keys holding the scenario's matrix and vector; the output is concat·W_O + b_O."""
    s = from_text(WITH_OUTPUT)
    doc = json.loads(jsonout.dumps(data.run_json(engine.run(s), ("embeddings", "output"), [1, 2])))
    assert doc["W_O"] == [[1, 0, 2], [0, 1, 3]] and doc["b_O"] == [0.5, -0.5, 1]
    assert np.allclose(np.array(doc["output"]), np.array(doc["concat"]) @ np.array(doc["W_O"]) + np.array(doc["b_O"]))
    first = ["schema", "scenario", "embeddings", "heads", "concat", "output"]
    assert [key for key in doc if key in first] == first  # the first version's keys keep their order


def test_without_w_o_the_keys_are_absent():
    """A scenario without an output projection has no W_O or b_O key."""
    doc = json.loads(jsonout.dumps(data.run_json(engine.run(load("cat")), ("output",), [1])))
    assert "W_O" not in doc and "b_O" not in doc


def test_labels_tell_repeated_tokens_apart():
    """scenario.labels are unique ("the (1)", "the (4)"), beside the tokens, which stay as written."""
    doc = json.loads(jsonout.dumps(data.run_json(engine.run(load("train-station")), ("weights",), [1])))
    assert doc["scenario"]["tokens"][0] == doc["scenario"]["tokens"][3] == "the"
    assert doc["scenario"]["labels"][0] == "the (1)" and doc["scenario"]["labels"][3] == "the (4)"
    assert len(set(doc["scenario"]["labels"])) == len(doc["scenario"]["labels"])


def test_tables_show_b_o_where_they_show_w_o(cli):
    """The terminal tables have an output bias table after the output projection."""
    import pathlib
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "out.yaml"
        path.write_text(WITH_OUTPUT)
        out = cli("run", str(path), "--stages", "output").stdout
    assert out.index("Output projection") < out.index("Output bias") and "b_O" in out
