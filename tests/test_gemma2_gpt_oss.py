"""Gemma 2 and gpt-oss read from their fixtures give transformers' golden numbers, every layer and head.

Two comparisons per family (docs/families.md):
- the whole path, as `run --model` computes it: embeddings, every earlier layer (Gemma 2's (1 + w) norms, post-norms
  and GeGLU; gpt-oss's mixture of experts) and the layer's attention, against the golden weights, block inputs and
  hidden states. Bound 1e-6: transformers' RMSNorm, RoPE table and (Gemma 2) softmax are float32 even in a float64 model.
- the attention alone, from the golden block input and transformers' own cos/sin table, through attncli's engine:
  1e-12 for gpt-oss, which computes its softmax (with the sinks) in float64; Gemma 2 stays at its float32 softmax.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import engine
from attncli.core.variants import LearnedSink, Rope, SoftCap
from attncli.errors import AttnError
from attncli.sources.checkpoints import gemma2, gpt_oss
from attncli.sources.checkpoints.blocks import rms_norm
from attncli.sources.checkpoints.families import read_config
from attncli.sources.checkpoints.layer import LayerCase, load_layer
from attncli.sources.checkpoints.safetensors import Checkpoint
from attncli.sources.checkpoints.scenario import layer_scenario

HERE = Path(__file__).parent / "checkpoints"
FAMILIES = {"gemma2": gemma2, "gpt_oss": gpt_oss}
WHOLE_PATH = 1e-6  # float32 RMSNorm, RoPE angles (and Gemma 2's softmax) inside transformers' float64 model
ATTENTION_ALONE = {"gemma2": 1e-6, "gpt_oss": 1e-12}
STREAM = 1e-6  # per unit of the residual stream's largest entry: float32's rounding grows with the values (up to 7 here)


def golden(family: str) -> dict[str, np.ndarray]:
    with np.load(HERE / family / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def layers_of(family: str) -> int:
    return int(golden(family)["attentions"].shape[0])


CASES = [(f, layer) for f in FAMILIES for layer in range(1, layers_of(f) + 1)]


def weights(case: LayerCase, without: tuple[type, ...] = (), **replaced: object) -> np.ndarray:
    """(H, L, L) the engine's attention weights for the case's scenario (with fields replaced, the variants `without` left out)."""
    scenario = dataclasses.replace(layer_scenario(case).without(*without), **replaced)
    return np.stack([head.weights for head in engine.run(scenario).heads])


def rotate_by_table(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, heads: int) -> np.ndarray:
    """(L, heads·d) each head's halves turned by a (L, d/2) table, written out plainly."""
    d = x.shape[1] // heads
    half = d // 2
    out = np.empty_like(x)
    for h in range(heads):
        a, b = x[:, h * d : h * d + half], x[:, h * d + half : (h + 1) * d]
        out[:, h * d : h * d + half] = a * cos - b * sin
        out[:, h * d + half : (h + 1) * d] = b * cos + a * sin
    return out


@pytest.mark.parametrize(("family", "layer"), CASES)
def test_every_head_of_every_layer_matches_transformers(family, layer):
    """The whole path: the layer's input X and every head's weights equal transformers' within float32's bound."""
    expected = golden(family)
    case = load_layer(HERE / family, layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist())
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=WHOLE_PATH)
    np.testing.assert_allclose(weights(case), expected["attentions"][layer - 1], rtol=0, atol=WHOLE_PATH)


@pytest.mark.parametrize(("family", "layer"), CASES)
def test_the_attention_alone_is_exact_from_transformers_inputs(family, layer):
    """From the golden block input and transformers' cos/sin table, attncli's weights, biases, scale, cap, sinks and
    window give the golden weights: to 1e-12 for gpt-oss (its table has d_k/2 columns, one per pair)."""
    expected = golden(family)
    case = load_layer(HERE / family, layer=layer, text=str(expected["text"]))
    X = expected["attention_inputs"][layer - 1]  # (L, d)
    cos, sin = expected["cos"][layer - 1], expected["sin"][layer - 1]
    if family == "gpt_oss":
        assert cos.shape[1] == case.head_dim // 2
    else:  # both halves of transformers' table are equal
        assert np.array_equal(cos[:, : case.head_dim // 2], cos[:, case.head_dim // 2 :])
        cos, sin = cos[:, : case.head_dim // 2], sin[:, : case.head_dim // 2]

    def project(W: np.ndarray, b: np.ndarray | None) -> np.ndarray:
        return X @ W + (0 if b is None else b)

    given = dict(
        X=None, W_Q=None, W_K=None, W_V=None, b_Q=None, b_K=None, b_V=None, W_O=None, b_O=None, without=(Rope,),
        Q=rotate_by_table(project(case.W_Q, case.b_Q), cos, sin, case.heads),
        K=rotate_by_table(project(case.W_K, case.b_K), cos, sin, case.kv_heads),
        V=project(case.W_V, case.b_V),
    )  # fmt: skip
    np.testing.assert_allclose(weights(case, **given), expected["attentions"][layer - 1], rtol=0, atol=ATTENTION_ALONE[family])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_layer_s_output_matches_transformers(family):
    """The residual stream after each layer (Gemma 2's post-norms and GeGLU, gpt-oss's experts), and after the final norm."""
    expected = golden(family)
    cfg = read_config(HERE / family)
    ids = tuple(expected["ids"].tolist())
    module = FAMILIES[family]
    for layers in range(cfg.layers + 1):
        found = module.forward(cfg, Checkpoint(HERE / family), ids, layers)
        h = found[0] if isinstance(found, tuple) else found
        if layers < cfg.layers:
            want = expected["hidden_states"][layers]
            np.testing.assert_allclose(h, want, rtol=0, atol=STREAM * max(1.0, np.abs(want).max()), err_msg=f"after layer {layers}")
    norm = Checkpoint(HERE / family).read("model.norm.weight")
    final = rms_norm(h, 1.0 + norm if family == "gemma2" else norm, cfg.norm_eps)
    np.testing.assert_allclose(final, expected["hidden_states"][-1], rtol=0, atol=STREAM * np.abs(expected["hidden_states"][-1]).max())


def test_leaving_out_a_mechanism_breaks_the_agreement():
    """Without the cap, with √d_k for the scale, without the window, without (1 + w) or without the sinks, the
    weights miss transformers' by far more than the bound: each is tested by the fixtures."""
    from attncli.core.variants import Mask

    expected = golden("gemma2")
    case = load_layer(HERE / "gemma2", layer=3, text=str(expected["text"]))
    target = expected["attentions"][2]
    assert case.softcap is not None and case.softcap.cap == 5.0 and case.window == 3
    assert np.abs(weights(case, without=(SoftCap,)) - target).max() > 1e-3
    scale = layer_scenario(case).scale
    assert np.abs(weights(case, scale=scale._replace(divisor=np.sqrt(8))) - target).max() > 1e-3
    assert np.abs(weights(case, mask=Mask(causal=True)) - target).max() > 1e-3
    expected = golden("gpt_oss")
    case = load_layer(HERE / "gpt_oss", layer=1, text=str(expected["text"]))
    assert case.sink is not None and case.window == 3
    assert np.abs(weights(case, without=(LearnedSink,)) - expected["attentions"][0]).max() > 1e-3
    assert np.abs(weights(case, mask=Mask(causal=True)) - expected["attentions"][0]).max() > 1e-3
    rows = weights(case).sum(axis=-1)  # (H, L): the sink's share is missing from every row
    assert (rows < 1 - 1e-3).all()


def test_gemma_s_norm_scales_by_one_plus_w(monkeypatch):
    """With Llama's w in place of Gemma's (1 + w), layer 2's input is another matrix."""
    expected = golden("gemma2")
    monkeypatch.setattr(gemma2, "_norm", lambda cfg, w, name, x: rms_norm(x, w.get(name + ".weight", (cfg.hidden_size,)), cfg.norm_eps))
    case = load_layer(HERE / "gemma2", layer=2, text=str(expected["text"]))
    assert np.abs(case.X - expected["attention_inputs"][1]).max() > 1e-2


def test_the_moe_routing_and_clamp_are_what_the_outputs_need(monkeypatch):
    """Routing every token to its first k experts, or dropping the SwiGLU clamp's +1, moves layer 1's output."""
    expected = golden("gpt_oss")
    cfg = read_config(HERE / "gpt_oss")
    ids = tuple(expected["ids"].tolist())
    h, routings = gpt_oss.forward(cfg, Checkpoint(HERE / "gpt_oss"), ids, 1)
    assert np.abs(h - expected["hidden_states"][1]).max() < WHOLE_PATH
    assert routings[0].experts.shape == (len(ids), 2) and np.allclose(routings[0].weights.sum(axis=-1), 1.0)
    assert len({tuple(sorted(row)) for row in routings[0].experts.tolist()}) > 1  # tokens go to different experts
    from attncli.sources.checkpoints import moe

    real = moe.top_k_softmax
    monkeypatch.setattr(moe, "top_k_softmax", lambda logits, k, *, layer: real(-logits, k, layer=layer))  # the k lowest instead
    wrong, _ = gpt_oss.forward(cfg, Checkpoint(HERE / "gpt_oss"), ids, 1)
    assert np.abs(wrong - expected["hidden_states"][1]).max() > 1e-2


def test_the_header_says_the_layer_kind_the_cap_the_sinks_and_the_experts():
    """The notes name a sliding or global layer, the cap and query_pre_attn_scalar, the sinks, and each earlier layer's experts."""
    text = str(golden("gemma2")["text"])
    notes = load_layer(HERE / "gemma2", layer=1, text=text).notes
    assert any(n.startswith("layer 1 is a sliding (local) layer") and "sliding_window = 4" in n for n in notes)
    assert any("5·tanh(s / 5)" in n for n in notes)
    assert any("√query_pre_attn_scalar = √12" in n for n in notes)
    notes = load_layer(HERE / "gemma2", layer=2, text=text).notes
    assert any(n.startswith("layer 2 is a global layer") for n in notes)
    notes = load_layer(HERE / "gpt_oss", layer=2, text=text).notes
    assert any(n.startswith("learned attention sinks") for n in notes)
    routed = [n for n in notes if n.startswith("layer 1's MoE MLP (2 of 4 experts per token")]
    assert len(routed) == 1 and "token 1 → " in routed[0] and "tokens per expert:" in routed[0]
    assert not any("MoE" in n for n in load_layer(HERE / "gpt_oss", layer=1, text=text).notes)  # no layer before


def test_run_and_explain_show_the_cap_and_the_sink(cli):
    """`run --model` prints the soft-capped stage and the header; `explain` narrates the sink's share."""
    text = str(golden("gemma2")["text"])
    result = cli("run", "--model", str(HERE / "gemma2"), "--layer", "1", "--sentence", text, "--head", "1", "--long-notes")
    assert result.exit_code == 0, result.stderr
    assert "(sliding)" in result.stdout.splitlines()[0]  # the title says the layer's kind; the notes say how it was read
    assert "sliding (local) layer" in result.stdout and "tanh" in result.stdout
    result = cli("explain", "--model", str(HERE / "gpt_oss"), "--layer", "2", "--sentence", text, "--head", "2", "--position", "5")
    assert result.exit_code == 0, result.stderr
    assert "gpt_oss layer 2 (global)" in result.stdout.splitlines()[0]
    assert "e^sink" in result.stdout
    result = cli("explain", "--model", str(HERE / "gemma2"), "--layer", "1", "--sentence", text, "--head", "2", "--position", "8")
    assert result.exit_code == 0, result.stderr
    assert "gemma2 layer 1 (sliding)" in result.stdout.splitlines()[0]
    assert "Soft-capping the scores   capped = c·tanh(scaled / c), c = 5" in result.stdout


def test_transformers_4_configs_alternate_from_a_sliding_first_layer(tmp_path):
    """Without layer_types, Gemma 2 slides on layers 1, 3, … (transformers' default); a bad layer_types is one clear error."""
    import json
    import shutil

    folder = tmp_path / "gemma2"
    shutil.copytree(HERE / "gemma2", folder)
    config = json.loads((folder / "config.json").read_text())
    del config["layer_types"]
    (folder / "config.json").write_text(json.dumps(config))
    cfg = read_config(folder)
    assert cfg.windows == (4, None, 4)
    assert "transformers' default alternation" in gemma2.layer_kind_note(cfg, 1)
    config["layer_types"] = ["sliding_attention", "local"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(AttnError, match="layer_types"):
        read_config(folder)


def test_mxfp4_blocks_without_scales_are_one_line(tmp_path):
    """MXFP4 experts are read (tests/test_mxfp4.py); `_blocks` without `_scales` is a missing tensor, in one line."""
    import json
    import struct

    folder = tmp_path / "gpt_oss"
    import shutil

    shutil.copytree(HERE / "gpt_oss", folder)
    raw = (folder / "model.safetensors").read_bytes()
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + size])
    header["model.layers.0.mlp.experts.gate_up_proj_blocks"] = header.pop("model.layers.0.mlp.experts.gate_up_proj")
    text = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + size :])
    with pytest.raises(AttnError, match="no tensor 'model.layers.0.mlp.experts.gate_up_proj'"):
        load_layer(folder, layer=2, text="The cat")


CAPPED = "tokens: [a, b, c]\nembeddings: [[10, 0], [0, 10], [7, 7]]\nscale: none\nmask: causal\nsoftcap: 50.0\nalibi: true\n"


@pytest.mark.parametrize("fmt", ["table", "markdown", "latex", "html"])
def test_explain_narrates_the_soft_capping_step_in_every_format(cli, tmp_path, fmt):
    """A soft-capping step between scaling and the bias, in every narrated format, with the engine's capped numbers."""
    path = tmp_path / "capped.yaml"
    path.write_text(CAPPED)
    result = cli("explain", str(path), "--word", "c", "--format", fmt)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "Soft-capping" in out and out.index("Soft-capping") < out.index("Adding the bias")
    assert "48.0545" in out  # 50·tanh(98 / 50), the engine's logit of key c before ALiBi
    from attncli.sources.yaml_scenario import from_text

    head = engine.run(from_text(CAPPED)).head(1)
    assert f"{head.reshaped['softcap'][2, 2]:.4f}" == "48.0545"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_earlier_layers_run_the_engine_that_run_shows(family):
    """A layer inside the forward pass (cap, sinks and window included) is engine.run of that layer's scenario, bit for bit."""
    from attncli.sources.checkpoints.blocks import AttentionWeights, self_attention

    case = load_layer(HERE / family, layer=layers_of(family), text=str(golden(family)["text"]))
    weights_ = AttentionWeights(
        W_Q=case.W_Q, W_K=case.W_K, W_V=case.W_V, b_Q=case.b_Q, b_K=case.b_K, b_V=case.b_V, W_O=case.W_O, b_O=case.b_O,
        heads=case.heads, kv_heads=case.kv_heads, head_dim=case.head_dim, divisor=case.divisor, causal=case.causal,
        window=case.window, rope=case.rope, softcap=case.softcap, sink=case.sink,
    )  # fmt: skip
    assert self_attention(case.X, weights_).tobytes() == engine.run(layer_scenario(case)).output.tobytes()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_one_forward_pass_sees_every_layer_s_golden_weights(family):
    """The map's one pass (`attncli heads`): the weights each layer hands on are transformers' for every layer and head."""
    from attncli.sources.checkpoints.blocks import weights_seen

    expected = golden(family)
    cfg = read_config(HERE / family)
    seen: list[np.ndarray] = []
    with weights_seen(lambda w, _: seen.append(w)):
        FAMILIES[family].forward(cfg, Checkpoint(HERE / family), tuple(expected["ids"].tolist()), cfg.layers)
    np.testing.assert_allclose(np.stack(seen), expected["attentions"], rtol=0, atol=WHOLE_PATH)


def test_run_shows_the_soft_capped_scores_as_a_table_and_in_json(cli, tmp_path):
    """A 'Soft-capped scores' table after the scaled stage (the engine's capped logits) and the JSON key 'softcap'."""
    import json

    path = tmp_path / "capped.yaml"
    path.write_text(CAPPED)
    result = cli("run", str(path))
    assert result.exit_code == 0, result.stderr
    assert "Soft-capped scores  50·tanh(S / 50)" in result.stdout
    assert "Masked scores  mask(50·tanh(S / 50) + B)" in result.stdout
    doc = json.loads(cli("run", str(path), "--format", "json").stdout)
    from attncli.sources.yaml_scenario import from_text

    head = engine.run(from_text(CAPPED)).head(1)
    assert np.array_equal(np.array(doc["heads"][0]["softcap"]), head.reshaped["softcap"])
    doc = json.loads(cli("run", "cat", "--format", "json").stdout)
    assert "softcap" not in doc["heads"][0]  # only with a cap


def test_the_soft_capping_latex_renders_with_katex(cli, tmp_path, katex_modules):
    """run's capped table and explain's soft-capping step, in LaTeX, render with KaTeX in strict mode."""
    from tests import renderers

    path = tmp_path / "capped.yaml"
    path.write_text(CAPPED)
    texts = [cli("run", str(path), "--format", "latex").stdout, cli("explain", str(path), "--word", "c", "--format", "latex").stdout]
    blocks = [block for text in texts for block in renderers.latex_display_blocks(text)]
    assert any(r"\tanh" in block for block in blocks)
    errors = [(i, r.error) for i, r in enumerate(renderers.katex(katex_modules, blocks)) if r.error is not None]
    assert errors == []


def test_the_embedding_scale_note_says_when_transformers_rounds_it():
    """Gemma 2 9B's √3584 is 59.75 in bfloat16 (step 0.25 between 32 and 64), 27B's √4608 is 68; 2B's √2304 = 48 is exact."""
    assert gemma2.embedding_scale_note(2304, "bfloat16") == "√2304 = 48"
    assert "multiplies by 59.75, √d rounded to bfloat16" in gemma2.embedding_scale_note(3584, "bfloat16")
    assert "multiplies by 68," in gemma2.embedding_scale_note(4608, "bfloat16")
    assert "multiplies by 59.875," in gemma2.embedding_scale_note(3584, "float16")
    assert gemma2.embedding_scale_note(3584, "float32") == "√3584 = 59.8665"



@settings(max_examples=80, deadline=None)
@given(st.data())
def test_routing_is_the_top_k_with_a_softmax_over_them(data):
    """Against a plain loop: each token's k largest router logits (ties to the lower expert), weighted e^l / Σ over the k."""
    import math

    from attncli.sources.checkpoints import moe

    experts = data.draw(st.integers(1, 8))
    k = data.draw(st.integers(1, experts))
    rows = data.draw(st.lists(st.lists(st.floats(-20, 20), min_size=experts, max_size=experts), min_size=1, max_size=5))
    routing = moe.top_k_softmax(np.array(rows), k, layer=1)
    for i, row in enumerate(rows):
        order = sorted(range(experts), key=lambda e: (-row[e], e))[:k]
        assert routing.experts[i].tolist() == order
        total = sum(math.exp(row[e] - row[order[0]]) for e in order)
        expected = [math.exp(row[e] - row[order[0]]) / total for e in order]
        np.testing.assert_allclose(routing.weights[i], expected, rtol=1e-12, atol=0)
    note = moe.routing_note(routing)
    assert note.startswith(f"layer 1's MoE MLP ({k} of {experts} experts per token")
