"""QK-norm (Qwen3, Gemma 3 per head; OLMo 2 over the whole projection): the engine against the naive reference and a published example."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import engine
from attncli.core.explain import explain_scenario
from attncli.document import stages
from attncli.errors import AttnError
from attncli.sources.yaml_scenario import from_text, load
from attncli.walkthroughs import data
from attncli.walkthroughs.narration import steps
from tests import reference as ref
from tests.test_explain_rows import assert_same

LEETGPU = "tests/scenarios/qk-norm-leetgpu.yaml"


def test_leetgpu_published_example():
    """LeetGPU's "QK-Norm Attention" example (AlphaGPU/leetgpu-challenges, challenges/medium/89_qk_norm_attention, commit
    790cd696): two heads of d_k = 2, q and k weights 1, eps 1e-6, no mask; its printed output to 4 decimals."""
    result = engine.run(load(LEETGPU))
    published = [[1.0379, 1.5379, 2.0374, 2.5374], [1.1125, 1.6125, 1.7288, 2.2288]]
    np.testing.assert_allclose(result.output, published, atol=0.5e-4)


@st.composite
def qk_cases(draw):
    L = draw(st.integers(1, 5))
    G = draw(st.integers(1, 2))
    H = G * draw(st.integers(1, 2))
    d_k = 2 * draw(st.integers(1, 2))
    d_model = draw(st.integers(1, 4))
    number = st.floats(-3, 3, allow_nan=False, allow_infinity=False)
    matrix = lambda rows, cols: st.lists(st.lists(number, min_size=cols, max_size=cols), min_size=rows, max_size=rows)  # noqa: E731
    over = draw(st.sampled_from(["head", "whole"]))
    form = draw(st.sampled_from(["w", "1+w"]))
    positive = st.floats(0.1, 2, allow_nan=False)
    q_weight = draw(st.lists(positive, min_size=(H if over == "whole" else 1) * d_k, max_size=(H if over == "whole" else 1) * d_k))
    k_weight = draw(st.lists(positive, min_size=(G if over == "whole" else 1) * d_k, max_size=(G if over == "whole" else 1) * d_k))
    doc = {
        "tokens": [f"t{i}" for i in range(L)],
        "embeddings": draw(matrix(L, d_model)),
        "heads": H,
        "kv_heads": G,
        "W_Q": draw(matrix(d_model, H * d_k)),
        "W_K": draw(matrix(d_model, G * d_k)),
        "W_V": draw(matrix(d_model, G * 2)),
        "mask": draw(st.sampled_from(["none", "causal"])),
        "rope": draw(st.booleans()),
        "qk_norm": {"over": over, "form": form, "eps": draw(st.sampled_from([1e-6, 1e-5, 0.1])), "q_weight": q_weight, "k_weight": k_weight},
    }
    return doc


def _reference_norm(rows, heads, weight, eps, over, offset):
    if over == "whole":
        return [ref.rms_norm(row, weight, eps, offset=offset) for row in rows]
    return ref.qk_norm_per_head(rows, heads, weight, eps, offset=offset)


@settings(max_examples=150, deadline=None)
@given(qk_cases())
def test_engine_agrees_with_the_naive_reference(doc):
    """q̂, k̂ per head or over the whole projection, (1 + w) or w, then RoPE and the softmax: the loop reference of tests/reference.py."""
    s = from_text(json.dumps(doc))
    result = engine.run(s)
    H, G, norm = doc["heads"], doc["kv_heads"], doc["qk_norm"]
    d_k = len(doc["W_Q"][0]) // H
    offset = 1.0 if norm["form"] == "1+w" else 0.0
    X = doc["embeddings"]
    Qn = _reference_norm(ref.matmul(X, doc["W_Q"]), H, norm["q_weight"], norm["eps"], norm["over"], offset)
    Kn = _reference_norm(ref.matmul(X, doc["W_K"]), G, norm["k_weight"], norm["eps"], norm["over"], offset)
    V = ref.matmul(X, doc["W_V"])
    for h, head in enumerate(result.heads):
        g = h * G // H
        q = [row[h * d_k : (h + 1) * d_k] for row in Qn]
        k = [row[g * d_k : (g + 1) * d_k] for row in Kn]
        np.testing.assert_allclose(head.normed["qk_norm"].q, q, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(head.normed["qk_norm"].k, k, rtol=1e-12, atol=1e-12)
        if doc["rope"]:
            q = [ref.rotate(row, i, 10000.0, "half") for i, row in enumerate(q)]
            k = [ref.rotate(row, j, 10000.0, "half") for j, row in enumerate(k)]
        sees = (lambda i, j: j <= i) if doc["mask"] == "causal" else None
        expected = ref.head_attention(q, k, [row[g * 2 : (g + 1) * 2] for row in V], scale=d_k**-0.5, sees=sees)
        np.testing.assert_allclose(head.weights, expected["weights"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(head.output, expected["output"], rtol=1e-9, atol=1e-9)


def test_whole_and_per_head_differ_and_the_weight_is_per_projection():
    """OLMo 2's norm over the whole projection is not the per-head norm (one rms for all heads' slices)."""
    doc = yaml_doc(over="whole", q_weight=[1, 1, 1, 1], k_weight=[1, 1, 1, 1])
    whole, per_head = engine.run(from_text(doc)).head(1), engine.run(from_text(yaml_doc())).head(1)
    assert not np.allclose(whole.normed["qk_norm"].q, per_head.normed["qk_norm"].q)
    with pytest.raises(AttnError) as error:
        from_text(yaml_doc(over="whole", q_weight=[1, 1], k_weight=[1, 1, 1, 1]))
    assert error.value.key == "qk_norm.q_weight" and "4 numbers" in str(error.value)


def yaml_doc(**norm) -> str:
    doc = {"tokens": ["a", "b", "c"], "embeddings": [[1, 0, 2], [0, 1, 1], [2, 2, 0]], "heads": 2,
           "W_Q": [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]], "W_K": [[1, 0, 0, 1], [0, 2, 1, 0], [1, 0, 0, 0]],
           "W_V": [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]], "mask": "causal", "rope": True, "qk_norm": norm or True}  # fmt: skip
    return json.dumps(doc)


@pytest.mark.parametrize("norm", [{}, {"over": "whole", "q_weight": [1, 2, 1, 0.5], "k_weight": [2, 1, 1, 1]}, {"form": "1+w", "q_weight": [0.5, -0.5]}])
def test_explain_reads_the_same_rows(norm):
    s = from_text(yaml_doc(**norm))
    for position in (1, 2, 3):
        assert_same(s, position=position, head=2)
        assert_same(s, position=position, head=1, round_steps=3)


def test_the_narrated_step_adds_up():
    """The step shows mean(q²) of the shown numbers, the rms, the weight and q̂ with '=' where the shown numbers give it."""
    expl = explain_scenario(from_text(yaml_doc(q_weight=[1.0, 0.5], k_weight=[2.0, 1.0])), position=2, head=1)
    step = next(step for step in steps(expl, 4) if "QK-norm" in step.title)
    said = {line.lhs: line.rhs for line in step.lines}
    assert said["mean(q²)"] == "(1² + 2²) / 2 = 2.5000"  # q(b) = [1, 2] in head 1
    assert said["rms(q)"] == "√(2.5000 + ε) = 1.5811"
    assert said["q̂"].endswith("[0.6325, 0.6325]") and said["w"] == "[1, 0.5000]"
    assert any("bounded" in note for note in step.notes)
    titles = [step.title for step in steps(expl, 4)]
    assert titles.index(step.title) < next(i for i, t in enumerate(titles) if "RoPE" in t)  # before the rotation


def test_json_scenario_key_and_stage_rows():
    s = from_text(yaml_doc(form="1+w"))
    assert data.scenario_json(s)["qk_norm"]["form"] == "1+w"
    assert data.scenario_json(from_text(yaml_doc().replace(', "qk_norm": true', "")))["qk_norm"] is None
    doc = data.run_json(engine.run(s), stages.STAGE_NAMES, [1])
    assert "Q_norm" in doc["heads"][0] and "K_norm" in doc["heads"][0]
    explained = data.explain_json(explain_scenario(s, position=2, head=2))
    head = engine.run(s).head(2)
    assert np.array_equal(explained["query"]["q_normed"], head.normed_q[1]) and np.array_equal(explained["keys"][2]["k_normed"], head.normed_k[2])
    assert "q_normed" not in data.explain_json(explain_scenario(from_text(yaml_doc().replace(', "qk_norm": true', "")), position=2))["query"]
    assert "qk_norm" in stages.default(s) and "qk_norm" not in stages.default(from_text(yaml_doc().replace(', "qk_norm": true', "")))


@pytest.mark.parametrize("value", ["maybe", "3", "[1, 2]", "{over: heads}", "{form: 2w}", "{eps: -1}", "{q_weight: [1, 2, 3]}", "{gain: 1}"])
def test_bad_values_are_refused(value):
    doc = "tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\nqk_norm: " + value + "\n"
    with pytest.raises(AttnError) as error:
        from_text(doc)
    assert error.value.key is not None and error.value.key.startswith("qk_norm")


# -- every command and format of the variants that show themselves, read by their readers' tools -------------

SHOWN = "tests/scenarios/qk-softcap-sink.yaml"  # QK-norm over the whole projection, RoPE, soft-capping, a learned sink
SHOWN_COMMANDS = {
    "run": ["run", SHOWN],
    "explain": ["explain", "-s", SHOWN, "--word", "sat", "--head", "2"],
    "decode": ["decode", SHOWN, "--head", "2"],
    "tiling": ["run", SHOWN, "--block-size", "2", "--head", "1"],
}


@pytest.mark.parametrize("fmt", ["json", "csv", "markdown", "html", "svg"])
@pytest.mark.parametrize("what", SHOWN_COMMANDS)
def test_every_format_parses(cli, what, fmt):
    import csv
    import io
    import xml.etree.ElementTree as ET

    from tests import renderers

    result = cli(*SHOWN_COMMANDS[what], "--format", fmt)
    assert result.exit_code == 0, result.output
    text = result.stdout
    if fmt == "json":
        json.loads(text)
    elif fmt == "csv":
        rows = list(csv.reader(io.StringIO(text)))
        assert len(rows) > 1 and len({len(row) for row in rows}) == 1
    elif fmt == "markdown":
        assert renderers.markdown_html(text).strip()
    elif fmt == "html":
        assert renderers.html_elements(text)
    else:
        ET.fromstring(text)


@pytest.mark.parametrize("what", ["run", "explain"])
def test_latex_compiles_with_the_new_rows_and_steps(cli, what, latex_tools, tmp_path):
    """Q̂, K̂, the soft-capped scores, the sink and their explain steps compile in a plain article and print."""
    from tests import renderers

    tex = cli(*SHOWN_COMMANDS[what], "--format", "latex").stdout
    assert "U{+}" not in tex  # no character the prose cannot print (a combining hat goes in math only)
    document = "\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{lmodern}\n\\usepackage{amsmath}\n\\begin{document}\n" + tex + "\\end{document}\n"
    printed = renderers.pdf_text(renderers.pdflatex(document, tmp_path))
    assert ("rms" in printed and "tanh" in printed) if what == "run" else (  # run's titles are TeX comments: its formulas print
        "QK-norm" in printed and "Soft-capping" in printed and "learned sink" in printed)
