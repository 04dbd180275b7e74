"""A query temperature by position (Llama 4, Ministral 3): the scenario key against a naive reference, and Ministral 3
beyond its original length against transformers on every layer and head.

tests/checkpoints/ministral3-long (scripts/make_checkpoints.py, seed 441) has YaRN over n₀ = 4 original positions and
llama_4_scaling_beta 0.1 under a sentence of 13 tokens, so its queries are scaled by 1, 1 + 0.1·ln 2, 1 + 0.1·ln 3 and
1 + 0.1·ln 4 along it. transformers runs its norms, RoPE and softmax in float32 even in a float64 model: measured
2.4e-7 at most for the weights and 6.7e-7 for the block inputs; the bounds are 1e-6 and 1e-5, as for the other families.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import engine
from attncli.core.variants import QueryTemperature
from attncli.errors import AttnError
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario
from attncli.sources.yaml_scenario import from_text
from tests import reference
from tests.live import fixture_script

LONG = Path(__file__).parent / "checkpoints" / "ministral3-long"
SCENARIO = """name: query-temperature
tokens: [the, cat, sat, on, the, mat]
embeddings: [[1, 0], [0, 1], [1, 1], [1, -1], [1, 0], [2, 1]]
W_Q: [[1, 0], [0, 1]]
W_K: [[1, 0.5], [0, 1]]
W_V: [[1, 0], [0, 1]]
mask: causal
query_temperature: {beta: 0.5, original: 2}
"""


def golden() -> dict[str, np.ndarray]:
    with np.load(LONG / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case: Any) -> np.ndarray:
    """(H, L, L) the engine's weights for the layer's scenario."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


def naive_tau(position: int, beta: float, original: int, shift: int) -> float:
    """τ written out with the math module: 1 + β·ln(1 + ⌊(p + shift) / n₀⌋)."""
    return 1 + beta * math.log(1 + (position + shift) // original)


@settings(max_examples=40, deadline=None)
@given(
    beta=st.floats(0, 2), original=st.integers(1, 5), shift=st.integers(0, 2), offset=st.integers(0, 9),
    rows=st.lists(st.lists(st.floats(-2, 2), min_size=2, max_size=2), min_size=2, max_size=7),
)  # fmt: skip
def test_the_engine_s_weights_equal_a_naive_softmax_of_tempered_queries(beta, original, shift, offset, rows):
    """Each query scaled by its τ before q·k, then softmax, written with loops, equals the engine's weights."""
    X = [[float(x) for x in row] for row in rows]
    W = [[1.0, 0.5], [-0.5, 1.0]]
    s = from_text("tokens: [" + ", ".join(f"t{i}" for i in range(len(X))) + f"]\nembeddings: {json.dumps(X)}\nW_Q: {json.dumps(W)}\n"
                  f"W_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\nmask: causal\n"
                  f"query_temperature: {{beta: {beta!r}, original: {original}, shift: {shift}, offset: {offset}}}\n")  # fmt: skip
    Q = reference.matmul(X, W)
    tempered = [[naive_tau(offset + i, beta, original, shift) * x for x in q] for i, q in enumerate(Q)]
    expected = reference.head_attention(tempered, X, X, scale=1 / math.sqrt(2), sees=lambda i, j: j <= i)
    np.testing.assert_allclose(engine.run(s).heads[0].weights, expected["weights"], rtol=0, atol=1e-12)


def test_tau_is_1_below_the_original_length_and_steps_at_each_multiple():
    """τ = 1 for positions below n₀ − shift, then 1 + β·ln 2 up to 2n₀, 1 + β·ln 3 …; a shift moves every step one earlier."""
    tau = QueryTemperature(0.5, 4, 0).factors(13)
    np.testing.assert_array_equal(tau[:4], 1.0)
    assert tau[4] == tau[7] == 1 + 0.5 * math.log(2) and tau[12] == 1 + 0.5 * math.log(4)
    assert QueryTemperature(0.5, 4, 1).factors(13)[3] == 1 + 0.5 * math.log(2)


def test_explain_narrates_tau_and_each_tempered_score(cli, tmp_path):
    """explain shows the query's τ from its position and each key's scaled score × τ; run shows the tempered matrix."""
    path = tmp_path / "t.yaml"
    path.write_text(SCENARIO)
    explained = cli("explain", str(path), "--word", "mat")
    assert explained.exit_code == 0, explained.stderr
    assert "The query temperature" in explained.stdout and "1 + 0.5·ln(1 + ⌊5 / 2⌋) = 1 + 0.5·ln(3) = 1.5493" in explained.stdout
    assert "Scores × each query's temperature τ" in cli("run", str(path)).stdout


@pytest.mark.parametrize(
    ("change", "words"),
    [("{beta: -1, original: 2}", "a number from 0 to 1e6"), ("{beta: 1e300, original: 2}", "a number from 0 to 1e6"), ("{beta: 0.1}", "no original"), ("{beta: 0.1, original: 0}", "original"),
     ("0.1", "a mapping {beta")],
)  # fmt: skip
def test_a_bad_temperature_is_one_error_line(change, words):
    """A negative β, a missing or zero n₀, or a bare number is refused at its key in one line."""
    with pytest.raises(AttnError) as caught:
        from_text(SCENARIO.replace("{beta: 0.5, original: 2}", change))
    assert "query_temperature" in str(caught.value) and words in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("layer", [1, 2, 3])
def test_ministral3_past_its_original_length_matches_transformers(layer):
    """Every head of every layer, and each layer's input, equal transformers' with the temperature on a sentence past n₀."""
    expected = golden()
    case = load_layer(LONG, layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist()) and len(case.token_ids) > 3 * 4
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=1e-5)
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=1e-6)
    assert any(note.startswith("query temperature: after RoPE the query at position p (from 0) × 1 + 0.1·ln(1 + ⌊p / 4⌋)") for note in case.notes)


def test_ministral3_without_its_temperature_misses(tmp_path):
    """Leaving the temperature out of layer 1, or out of the layers before layer 3 (β = 0), breaks the agreement."""
    expected = golden()
    text = str(expected["text"])
    case = load_layer(LONG, layer=1, text=text)
    assert np.abs(weights_of(dataclasses.replace(case, variants=())) - expected["attentions"][0]).max() > 1e-2
    folder = tmp_path / "ministral3-long"
    shutil.copytree(LONG, folder)
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"]["llama_4_scaling_beta"] = 0.0
    (folder / "config.json").write_text(json.dumps(config))
    without = load_layer(folder, layer=3, text=text)
    assert without.variants == () and np.abs(without.X - expected["attention_inputs"][2]).max() > 1e-3


def test_model_info_says_the_temperature_is_computed():
    """model info describes the temperature as computed, with no limit on the sentence's length."""
    text = " | ".join(m["text"] for m in model_info(LONG)["mechanisms"])
    assert "1 + 0.1·ln(1 + ⌊p / 4⌋)" in text and "then more at each further multiple" in text and "up to that length" not in text


def test_live_transformers_still_gives_the_goldens():
    """transformers, run now on the fixture by the fixture script's own code, gives every committed golden array to 1e-12
    (skips without torch)."""
    script = fixture_script()
    expected = golden()
    live = script.golden_with_inputs(LONG, expected["ids"].tolist())
    for key, array in live.items():
        np.testing.assert_allclose(array, expected[key], rtol=0, atol=1e-12, err_msg=key)


@pytest.mark.parametrize("fmt", ["table", "markdown", "latex", "csv", "html", "svg", "json"])
def test_every_command_and_format_renders(cli, tmp_path, fmt):
    """run, explain and decode of a scenario with a query temperature in every format: exit 0, output, nothing on stderr."""
    path = tmp_path / "t.yaml"
    path.write_text(SCENARIO)
    for command in (["run", str(path)], ["explain", str(path), "--word", "mat"], ["decode", str(path)]):
        if fmt == "csv" and command[0] == "run":
            command += ["--stages", "weights"]
        result = cli(*command, "--format", fmt)
        assert result.exit_code == 0 and result.stdout and not result.stderr, (command, fmt, result.output)


def test_the_latex_renders_with_katex(cli, katex_modules, tmp_path):
    """run's tempered scores and explain's τ step, in LaTeX, render with KaTeX in strict mode."""
    from tests import renderers

    path = tmp_path / "t.yaml"
    path.write_text(SCENARIO)
    texts = [cli("run", str(path), "--format", "latex").stdout, cli("explain", str(path), "--word", "mat", "--format", "latex").stdout]
    blocks = [block for text in texts for block in renderers.latex_display_blocks(text)]
    errors = [(i, r.error) for i, r in enumerate(renderers.katex(katex_modules, blocks)) if r.error is not None]
    assert errors == []
