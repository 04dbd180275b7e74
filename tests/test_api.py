"""The Python API: the commands are thin shells over it, so it gives the same bytes; its results show as tables in Jupyter."""

import dataclasses
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import attncli.api as attn
from attncli.core import engine
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import load
from tests.test_checkpoints import HERE

NOTEBOOK = Path(__file__).parent.parent / "docs" / "examples" / "api.ipynb"


@pytest.mark.parametrize(
    ("command", "call"),
    [
        (["run", "multihead", "--format", "markdown"], lambda: attn.run("multihead").render("markdown")),
        (["run", "cat", "--format", "latex", "--stages", "scores,weights", "--precision", "3"],
         lambda: attn.run("cat").render("latex", stages=["scores", "weights"], precision=3)),
        (["run", "cat", "--format", "json", "--round-steps", "3"], lambda: attn.run("cat", round_steps=3).render("json")),
        (["run", "journey-causal", "--block-size", "2", "--format", "markdown"], lambda: attn.tiles("journey-causal", 2).render("markdown")),
        (["explain", "--word", "cat", "--round-steps", "3", "--format", "markdown"], lambda: attn.explain("cat", "cat", round_steps=3).render("markdown")),
        (["explain", "-s", "llama-style", "--word", "grass", "--head", "2", "--format", "html", "--fragment"],
         lambda: attn.explain("llama-style", "grass", head=2).render("html", standalone=False)),
        (["decode", "sliding-window", "--format", "csv"], lambda: attn.decode("sliding-window").render("csv")),
    ],
)  # fmt: skip
def test_the_api_renders_what_the_command_prints(cli, tmp_path, command, call):
    """The command and the API give the same bytes: the command is the API plus option parsing."""
    target = tmp_path / "out"
    result = cli(*command, "--output", str(target))
    assert result.exit_code == 0, result.stderr
    assert call() == target.read_text(encoding="utf-8")


def test_results_hold_the_engines_arrays():
    """`run(...).head(h)` is the engine's head h; a Scenario, a name and a path are the same input."""
    path = Path(__file__).parent.parent / "scenarios" / "multihead.yaml"
    by_name, by_path, by_scenario = attn.run("multihead"), attn.run(path), attn.run(load("multihead"))
    expected = engine.run(load("multihead")).head(2)
    for ran in (by_name, by_path, by_scenario):
        np.testing.assert_array_equal(ran.head(2).weights, expected.weights)
        assert not ran.head(2).weights.flags.writeable
    with pytest.raises(AttnError, match="head"):
        by_name.head(9)


def test_a_run_of_some_heads_shows_them_and_refuses_the_others():
    """run(heads=[2]) renders head 2 as the full run does and refuses head 1, whose stages it did not keep, in one AttnError."""
    lean, full = attn.run("multihead", heads=[2]), attn.run("multihead")
    for fmt in ("markdown", "json"):
        assert lean.render(fmt, heads=[2]) == full.render(fmt, heads=[2])
    with pytest.raises(AttnError, match="head 1's stages were not kept"):
        lean.head(1)
    with pytest.raises(AttnError, match="head 1's stages were not kept"):
        lean.render("markdown")
    with pytest.raises(AttnError, match="head 3 does not exist"):
        attn.run("multihead", heads=[3])
    with pytest.raises(AttnError, match="heads"):
        attn.run("multihead", heads="2")  # type: ignore[arg-type]


def test_a_checkpoint_through_the_api():
    """`load_model` gives the layer the command shows; its weights are transformers' golden ones."""
    golden = np.load(HERE / "gpt2" / "golden.npz")
    scenario = attn.load_model(HERE / "gpt2", layer=2, sentence=str(golden["text"]))
    weights = np.array([attn.run(scenario).head(h).weights for h in scenario.head_numbers(None)])
    np.testing.assert_allclose(weights, golden["attentions"][1], rtol=0, atol=1e-12)


def test_notebook_reprs_are_fragments_not_pages():
    """`_repr_html_` is a fragment (no <html>), `_repr_markdown_` the Markdown document."""
    ran = attn.run("cat")
    html, markdown = ran._repr_html_(), ran._repr_markdown_()
    assert "<table" in html and "<html" not in html.lower()
    assert markdown == ran.render("markdown")


def test_a_head_shows_its_own_tables_and_stays_a_head_result():
    """`run.head(2)` is a HeadResult (arrays as before) that displays the run's tables of head 2 alone, and says so in one line."""
    from attncli.core.engine import HeadResult

    ran = attn.run("multihead")
    head = ran.head(2)
    assert isinstance(head, HeadResult) and head.head == 2 and head.weights is ran.result.head(2).weights
    markdown = head._repr_markdown_()
    assert markdown == ran.render("markdown", heads=[2]) and "## Head 2" in markdown and "Head 1" not in markdown
    assert "<table" in head._repr_html_()
    assert repr(head) == "<Head 2 (key/value head 2): Q (4, 2), K (4, 2), V (4, 2), weights (4, 4), output (4, 2)>"


def test_a_loaded_scenario_shows_a_card_and_stays_a_scenario():
    """`attn.load` and `attn.load_model` give a Scenario that displays its header and inputs (not the run), in one repr line."""
    from attncli.core.scenario import Scenario

    loaded = attn.load("llama-style")
    assert isinstance(loaded, Scenario) and attn.run(loaded).head(1).weights.shape == (4, 4)
    markdown = loaded._repr_markdown_()
    assert "Embeddings" in markdown and "Scores" not in markdown and "Weights" not in markdown
    assert "RoPE" in markdown and "<table" in loaded._repr_html_()
    assert repr(loaded) == "<Scenario 'llama-style': 4 tokens, d_model 8, 4 heads sharing 2 key/value heads (d_k 2, d_v 2)>"
    one_kv = dataclasses.replace(loaded, kv_heads=1, W_K=loaded.W_K[:, :2], W_V=loaded.W_V[:, :2])  # multi-query: one key/value head
    assert repr(one_kv) == "<Scenario 'llama-style': 4 tokens, d_model 8, 4 heads sharing 1 key/value head (d_k 2, d_v 2)>"
    direct = attn.load(Path(__file__).parent / "scenarios" / "linear-attention-leetgpu-1.yaml")  # Q, K and V given: those are its inputs
    assert "Q, K and V given" in repr(direct) and "## Queries: `Q (given)`" in direct._repr_markdown_()
    model = attn.load_model(HERE / "gpt2", layer=1, sentence="hi there")
    assert repr(model).startswith("<Scenario 'gpt2 layer 1'") and "<table" in model._repr_html_()


def test_every_result_has_a_short_repr():
    """Each result of the API is one line of at most 160 characters in repr (the dataclass repr of a run was several KB)."""
    results = [attn.run("cat"), attn.run("cat").head(1), attn.run("cat").result, attn.load("cat"), attn.heads("cat"), attn.heads("cat", word="cat"),
               attn.explain("cat", "cat"), attn.decode("journey-causal"), attn.tiles("cat", 2), attn.variance([1, 2], samples=10),
               attn.model_info(HERE / "gpt2"), attn.model_tokens(HERE / "gpt2", "hi"), attn.scenarios()]  # fmt: skip
    for result in results:
        text = repr(result)
        assert "\n" not in text and len(text) <= 160 and text.startswith("<"), text
    assert repr(results[0]) == "<Ran of 'cat': 6 tokens, 1 head>"


def test_the_built_in_scenarios_are_a_result_in_every_format():
    """`attn.scenarios()` lists what `attncli scenarios` lists, as a table in Jupyter and as attncli.scenarios/1 JSON."""
    listed = attn.scenarios()
    assert [name for name, _ in listed.scenarios][:2] == ["alibi", "cat"]
    assert "| cat | The cat sat on the mat" in listed._repr_markdown_() and "<table" in listed._repr_html_()
    data = json.loads(listed.render("json"))
    assert data["schema"] == "attncli.scenarios/1" and {"name": "cat", "description": listed.scenarios[1][1]} in data["scenarios"]


def test_errors_are_attn_errors():
    """A word the scenario lacks is the same AttnError the command prints."""
    with pytest.raises(AttnError, match="did you mean 'cat'"):
        attn.explain("cat", "catt")


def test_the_notebook_runs_in_a_real_kernel_and_shows_tables(tmp_path):
    """docs/examples/api.ipynb executed in an IPython kernel: each result cell displays HTML tables and Markdown."""
    if os.environ.get("ATTNCLI_NOTEBOOK_TIER") == "1":  # .ci/run installed the kernel: a missing piece is a failure, not a skip
        import ipykernel  # noqa: F401
        import nbclient
        import nbformat
    else:
        nbclient = pytest.importorskip("nbclient", reason="the notebook tier needs nbclient, nbformat and ipykernel (.ci/run installs them)")
        nbformat = pytest.importorskip("nbformat")
        pytest.importorskip("ipykernel")
    if shutil.which("python") is None:
        pytest.skip("no python on PATH for the kernel")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    client.execute()
    outputs = [cell.outputs for cell in notebook.cells if cell.cell_type == "code"]
    assert all(not any(o.output_type == "error" for o in out) for out in outputs)
    weights = outputs[0][0]["data"]["text/plain"]
    assert weights.startswith("array([[") and "0.0" in weights  # the (6, 6) weights of cat
    for out in outputs[1:4]:  # run, explain, decode: shown as HTML tables, with Markdown beside
        data = out[0]["data"]
        assert "<table" in data["text/html"] and "text/markdown" in data
    assert "1.066" in outputs[2][0]["data"]["text/html"] and "0.398" in outputs[2][0]["data"]["text/html"]
    printed = outputs[4][0]
    assert printed.output_type == "stream" and "| " in printed.text
    for out in outputs[5:9]:  # a head, a loaded scenario, the built-in scenarios, the map: tables too, and a one-line text/plain
        data = out[0]["data"]
        assert "<table" in data["text/html"] and "text/markdown" in data, data.keys()
        assert "\n" not in data["text/plain"] and len(data["text/plain"]) < 200, data["text/plain"]
    assert json.dumps(notebook)  # the executed notebook is still valid JSON
