"""GGUF files of Gemma 2, gpt-oss and DeepSeek V3 (architectures gemma2, gpt-oss, deepseek2), as llama.cpp's converter writes them.

tests/checkpoints/gguf/{gemma2,gpt_oss,deepseek_v3}.gguf are written by scripts/make_gguf.py from the tiny Hugging Face
fixtures beside them with gguf-py's writer, llama.cpp's metadata keys and gguf-py's own tensor-name map (the one the
converter's map_tensor_name uses), and the converter's rearrangements (norms as 1 + w; gpt-oss's experts split into
gate/up/down (E, out, in) and their biases; DeepSeek's experts merged, kv_b_proj split into attn_k_b and attn_v_b).
torch is not needed: convert_hf_to_gguf.py itself was not run (it imports torch), so the layout is the converter's as
read in its source, which the tests below tie to the folders, every layer and head:
- gpt-oss and DeepSeek: the file equals its folder to 1e-9 (measured 2.4e-12 and 2e-14: ε and θ are float32 in the
  metadata), so transformers' goldens within the folder's bound (1e-6); the learned sinks come through unchanged.
- gpt-oss with MXFP4 experts: the fixture's rows (16 wide) fill no 32-number MXFP4 block, so a wider gpt-oss with
  MXFP4 experts in both formats (make_gguf.gpt_oss_mxfp4_folder) equals its folder; the repacked blocks are
  dequantised by gguf-py to the same numbers as the folder's by attncli's mxfp4.py (checked against transformers).
- DeepSeek both ways: the split attn_k_b / attn_v_b of newer converters and the whole attn_kv_b of older files.
- Gemma 2: the file stores no query_pre_attn_scalar, and llama.cpp derives the scale from the model's size (head_dim,
  or d_model / H for the 46-layer 27B). The fixture's scalar (12, head_dim 8) is not what the rule gives, so the file
  is computed with √8, as llama.cpp computes it, and equals a copy of its folder whose query_pre_attn_scalar is 8
  (1e-6: the norms come back from float32(1 + w)); the header says which scale was derived and why.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.errors import AttnError
from attncli.sources.checkpoints import mxfp4
from attncli.sources.checkpoints.gemma2 import gemma2_scalar
from attncli.sources.checkpoints.gguf import GgufFile, open_model
from attncli.sources.checkpoints.layer import checkpoint_tokens, load_layer, model_info
from attncli.sources.checkpoints.safetensors import Checkpoint
from attncli.sources.checkpoints.scenario import layer_scenario
from tests.test_gguf import make_gguf

gguf = pytest.importorskip("gguf")

HF = Path(__file__).parent / "checkpoints"
FIXTURES = HF / "gguf"
FOLDER_BOUND = {"gemma2": 1e-6, "gpt_oss": 1e-9, "deepseek_v3": 1e-9}  # Gemma 2's norms: float32(1 + w) − 1
GOLDEN_BOUND = 1e-6  # the folders' own bound against transformers (tests/test_gemma2_gpt_oss.py, tests/test_deepseek.py)
ARCH = {"gemma2": "gemma2", "gpt_oss": "gpt-oss", "deepseek_v3": "deepseek2"}


def golden(name: str) -> dict[str, np.ndarray]:
    with np.load(HF / name / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case) -> np.ndarray:
    """(H, L, L) the engine's weights for the layer's scenario."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


def text_of(name: str) -> str:
    return str(golden(name)["text"])


def gemma2_folder(tmp_path: Path, scalar: int) -> Path:
    folder = tmp_path / "gemma2"
    shutil.copytree(HF / "gemma2", folder)
    config = json.loads((folder / "config.json").read_text())
    config["query_pre_attn_scalar"] = scalar
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def assert_same_layer(from_file, from_folder, bound: float) -> None:
    """Every head: the weights within `bound`, the projections, window, scale, cap and sinks equal."""
    assert from_file.token_ids == from_folder.token_ids
    mla = ("W_DKV", "W_KR", "W_UK", "W_UV", "W_UQ", "W_QR", "W_DQ")  # DeepSeek's projections live in its Mla
    for matrix in ("W_O", *(mla if from_folder.mla is not None else ("W_Q", "W_K", "W_V"))):
        source = (from_file.mla, from_folder.mla) if matrix in mla else (from_file, from_folder)
        np.testing.assert_allclose(getattr(source[0], matrix), getattr(source[1], matrix), rtol=0, atol=bound, err_msg=matrix)
    np.testing.assert_allclose(from_file.X, from_folder.X, rtol=0, atol=bound * 10)
    ours, theirs = weights_of(from_file), weights_of(from_folder)
    assert ours.shape == theirs.shape and ours.shape[0] == from_folder.heads
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=bound)
    assert (from_file.window, from_file.divisor, from_file.layer_kind) == (from_folder.window, from_folder.divisor, from_folder.layer_kind)
    assert repr(from_file.softcap) == repr(from_folder.softcap) and repr(from_file.sink) == repr(from_folder.sink)
    assert (from_file.mla is None) == (from_folder.mla is None)


def test_the_fixtures_are_what_the_script_writes(tmp_path):
    for name, write in make_gguf.NEW_FAMILIES.items():
        path = tmp_path / f"{name}.gguf"
        write(path)
        assert path.read_bytes() == (FIXTURES / path.name).read_bytes(), path.name


@pytest.mark.parametrize(("name", "layer"), [("gpt_oss", 1), ("gpt_oss", 2), ("deepseek_v3", 1), ("deepseek_v3", 2)])
def test_the_file_gives_the_folder_s_attention_and_transformers_goldens(name, layer):
    """Every head of every layer: the file equals its folder (1e-9), hence transformers' goldens (1e-6)."""
    expected = golden(name)
    from_folder = load_layer(HF / name, layer=layer, text=text_of(name))
    from_file = load_layer(FIXTURES / f"{name}.gguf", layer=layer, text=text_of(name))
    assert from_file.token_ids == tuple(expected["ids"].tolist())
    assert_same_layer(from_file, from_folder, FOLDER_BOUND[name])
    np.testing.assert_allclose(weights_of(from_file), expected["attentions"][layer - 1], rtol=0, atol=GOLDEN_BOUND)
    routed = [n for n in from_folder.notes if "expert" in n and "layer" in n]
    assert all(note in from_file.notes for note in routed)  # the experts each token used before, the same


def test_gpt_oss_sinks_come_through():
    """The learned sinks are attn_sinks.weight, read unchanged: each layer's, per head, equal to the folder's to the bit."""
    for layer in (1, 2):
        from_file = load_layer(FIXTURES / "gpt_oss.gguf", layer=layer, text="The cat")
        stored = Checkpoint(HF / "gpt_oss").read(f"model.layers.{layer - 1}.self_attn.sinks")
        assert from_file.sink is not None and from_file.sink.logits == tuple(float(v) for v in stored)
        assert len(set(from_file.sink.logits)) > 1  # the fixture's sinks differ per head: a mix-up of heads would show
    assert open_model(FIXTURES / "gpt_oss.gguf").file.tensors["blk.0.attn_sinks.weight"].kind.name == "F32"


def test_gpt_oss_expert_layout_is_undone():
    """gate_up_proj (E, d, 2·inner) interleaves gate and up columns; the file's ffn_gate_exps / ffn_up_exps are its halves, transposed."""
    model = open_model(FIXTURES / "gpt_oss.gguf")
    hf = Checkpoint(HF / "gpt_oss").read("model.layers.1.mlp.experts.gate_up_proj")
    gate = model.file.read("blk.1.ffn_gate_exps.weight")  # (E, inner, d)
    assert np.array_equal(gate, hf[:, :, 0::2].transpose(0, 2, 1))
    assert np.array_equal(model.checkpoint.read("layers.1.mlp.experts.gate_up_proj"), hf)
    blocks = list(model.checkpoint.row_blocks("layers.1.mlp.experts.gate_up_proj"))
    assert [first for first, _ in blocks] == list(range(hf.shape[0])) and all(b.shape == (1, *hf.shape[1:]) for _, b in blocks)
    down = Checkpoint(HF / "gpt_oss").read("model.layers.1.mlp.experts.down_proj")
    assert np.array_equal(model.checkpoint.read("layers.1.mlp.experts.down_proj"), down)
    bias = Checkpoint(HF / "gpt_oss").read("model.layers.1.mlp.experts.gate_up_proj_bias")
    assert np.array_equal(model.checkpoint.read("layers.1.mlp.experts.gate_up_proj_bias"), bias)


@pytest.fixture(scope="module")
def mxfp4_pair(tmp_path_factory) -> tuple[Path, Path]:
    folder = make_gguf.gpt_oss_mxfp4_folder(tmp_path_factory.mktemp("mxfp4") / "gpt_oss_mxfp4")
    path = folder.parent / "gpt_oss_mxfp4.gguf"
    make_gguf.write_gpt_oss(path, folder)
    return folder, path


def test_mxfp4_experts_equal_the_folder_s(mxfp4_pair):
    """A gpt-oss with MXFP4 experts in both formats: every layer and head equal; layer 2's input passed through layer 1's experts."""
    folder, path = mxfp4_pair
    model = open_model(path)
    assert {model.file.tensors[f"blk.0.ffn_{w}_exps.weight"].kind.name for w in ("gate", "up", "down")} == {"MXFP4"}
    text = "The cat sat on the mat."
    for layer in (1, 2):
        assert_same_layer(load_layer(path, layer=layer, text=text), load_layer(folder, layer=layer, text=text), 1e-12)
    notes = load_layer(path, layer=2, text=text).notes
    assert any("experts' gate of layer 1 stored as MXFP4 (4.25 bits per weight)" in n for n in notes)  # the experts before layer 2
    assert not any("experts'" in n for n in load_layer(path, layer=1, text=text).notes)  # no experts before layer 1


def test_mxfp4_blocks_are_repacked_without_a_number_changed(mxfp4_pair):
    """gguf-py's own MXFP4 dequantisation of the file's experts equals the folder's MXFP4 (attncli's mxfp4.py), and attncli's
    GGUF decoder equals gguf-py's, bit for bit."""
    folder, path = mxfp4_pair
    model = open_model(path)
    stored = make_gguf.raw_tensors(folder)
    blocks, scales = stored["model.layers.0.mlp.experts.gate_up_proj_blocks"], stored["model.layers.0.mlp.experts.gate_up_proj_scales"]
    folder_rows = mxfp4.dequantise(blocks, scales)  # (E, 2·inner, d) rows as stored: gate, up, gate, …
    for part, rows in (("gate", folder_rows[:, 0::2]), ("up", folder_rows[:, 1::2])):
        entry = model.file.tensors[f"blk.0.ffn_{part}_exps.weight"]
        raw = np.asarray(model.file.raw(entry)).reshape(-1, 17)
        reference = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.MXFP4).reshape(rows.shape)
        assert np.array_equal(reference.astype(np.float64), rows), part
        assert np.array_equal(model.file.read(entry.name), rows), part


def test_model_dequant_walks_an_mxfp4_block_and_says_why_it_is_exact(mxfp4_pair):
    """`model dequant` on an MXFP4 expert: exponent and levels, and no word of fp16 (MXFP4 has none)."""
    from attncli.sources.checkpoints.gguf_data import dequant_data
    from attncli.walkthroughs.dequant import dequant_report

    _, path = mxfp4_pair
    doc = dequant_data(path, "blk.0.ffn_gate_exps.weight", 1)
    assert doc["type"] == "MXFP4" and doc["formula"] == "w = 2^(e − 128) · level[q]"
    text = " ".join(block.text for block in dequant_report(doc).blocks if hasattr(block, "text"))
    assert "a power of two times an e2m1 level is exact" in text and "fp16" not in text


def test_deepseek_both_layouts_of_kv_b(tmp_path):
    """Newer files split kv_b_proj into attn_k_b (keys, transposed per head) and attn_v_b; older ones keep attn_kv_b: both read as the folder."""
    whole = tmp_path / "deepseek_v3-kv_b.gguf"
    make_gguf.write_deepseek(whole, split_kv_b=False)
    split, joined = open_model(FIXTURES / "deepseek_v3.gguf"), open_model(whole)
    assert "blk.0.attn_k_b.weight" in split.file.tensors and "blk.0.attn_kv_b.weight" not in split.file.tensors
    assert "blk.0.attn_kv_b.weight" in joined.file.tensors and "blk.0.attn_k_b.weight" not in joined.file.tensors
    hf = Checkpoint(HF / "deepseek_v3")
    for index in (0, 1):
        want = hf.read(f"model.layers.{index}.self_attn.kv_b_proj.weight")
        k_b = split.file.read(f"blk.{index}.attn_k_b.weight")  # (H, d_c, d_n)
        assert k_b.shape == (2, 6, 4) and not np.array_equal(k_b.reshape(-1, 6), want[: k_b.size // 6])  # stored otherwise
        for model in (split, joined):
            assert np.array_equal(model.checkpoint.read(f"layers.{index}.self_attn.kv_b_proj.weight"), want)
            assert model.checkpoint.shape(f"layers.{index}.self_attn.kv_b_proj.weight") == want.shape
    text = text_of("deepseek_v3")
    for layer in (1, 2):
        from_folder = load_layer(HF / "deepseek_v3", layer=layer, text=text)
        assert_same_layer(load_layer(whole, layer=layer, text=text), from_folder, 1e-9)
    notes = load_layer(FIXTURES / "deepseek_v3.gguf", layer=2, text=text).notes
    assert any("joined from attn_k_b" in n for n in notes)
    assert not any("joined from attn_k_b" in n for n in load_layer(whole, layer=2, text=text).notes)


def test_deepseek_experts_are_slices_of_the_merged_tensors():
    model = open_model(FIXTURES / "deepseek_v3.gguf")
    hf = Checkpoint(HF / "deepseek_v3")
    for e in range(4):
        for what in ("gate", "up", "down"):
            name = f"layers.1.mlp.experts.{e}.{what}_proj.weight"
            assert np.array_equal(model.checkpoint.read(name), hf.read("model." + name)), name
    assert not model.checkpoint.has("layers.1.mlp.experts.4.gate_proj.weight")


def test_gemma2_scale_is_llama_cpp_s_and_the_rest_is_the_folder_s(tmp_path):
    """The file's scale is √8 (head_dim: llama.cpp's rule for a 3-layer Gemma 2), not the folder's √12; with the folder's
    query_pre_attn_scalar set to 8, every layer and head equal (1e-6), soft-cap and windows included."""
    text = text_of("gemma2")
    folder = gemma2_folder(tmp_path, 8)
    for layer in (1, 2, 3):
        from_file = load_layer(FIXTURES / "gemma2.gguf", layer=layer, text=text)
        assert from_file.divisor == math.sqrt(8) and load_layer(HF / "gemma2", layer=layer, text=text).divisor == math.sqrt(12)
        assert_same_layer(from_file, load_layer(folder, layer=layer, text=text), FOLDER_BOUND["gemma2"])
        assert any("stores no query_pre_attn_scalar" in n and "query_pre_attn_scalar = 8, the head size" in n for n in from_file.notes)
    assert not np.allclose(weights_of(load_layer(FIXTURES / "gemma2.gguf", layer=2, text=text)), golden("gemma2")["attentions"][1], atol=1e-3)


def metadata_only(path: Path, arch: str, values: dict[str, object]) -> Path:
    writer = gguf.GGUFWriter(path, arch)
    for key, value in values.items():
        (writer.add_uint32 if isinstance(value, int) else writer.add_float32)(f"{arch}.{key}", value)
    make_gguf._finish(writer)
    return path


@pytest.mark.parametrize(
    ("shape", "scalar"),
    [
        ((26, 2304, 8, 256), 256),  # Gemma 2 2B: query_pre_attn_scalar 256
        ((42, 3584, 16, 256), 256),  # 9B: 256
        ((46, 4608, 32, 128), 144),  # 27B: 144 = 4608 / 32, not head_dim
        ((3, 16, 4, 8), 8),
        ((46, 16, 4, 8), 4),
    ],
)
def test_gemma2_rule_gives_the_published_scalars(shape, scalar, tmp_path):
    layers, d, H, d_k = shape
    path = metadata_only(tmp_path / "g.gguf", "gemma2", {"block_count": layers, "embedding_length": d, "attention.head_count": H, "attention.key_length": d_k})
    assert gemma2_scalar(GgufFile(path))[0] == scalar


def test_deepseek_v2_router_is_one_clear_line(tmp_path):
    """A deepseek2 file routed by softmax (DeepSeek V2) or with no gating key (llama.cpp reads it as V2) is refused in one line."""
    base = {"block_count": 1, "embedding_length": 16, "attention.head_count": 2, "context_length": 64, "feed_forward_length": 32}
    for gating in (1, None):
        values = base | ({"expert_gating_func": gating} if gating else {})
        with pytest.raises(AttnError) as caught:
            open_model(metadata_only(tmp_path / f"v2-{gating}.gguf", "deepseek2", values))
        message = str(caught.value)
        assert "\n" not in message and "DeepSeek V3 (sigmoid router) only" in message and "expert_gating_func" in message


@pytest.mark.parametrize("name", ["gemma2", "gpt_oss", "deepseek_v3"])
def test_tokens_and_model_info(name):
    for text in ["The cat sat on the mat.", "  two spaces, a tab\tand é ü 日本"]:
        from_file = checkpoint_tokens(FIXTURES / f"{name}.gguf", text, special_tokens=True, max_tokens=1000)
        from_folder = checkpoint_tokens(HF / name, text, special_tokens=True, max_tokens=1000)
        assert (from_file.ids, from_file.labels) == (from_folder.ids, from_folder.labels)
    info, folder_info = model_info(FIXTURES / f"{name}.gguf"), model_info(HF / name)
    assert info["supported"] is True and info["model_type"] == name and info["gguf_architecture"] == ARCH[name]
    assert info["layers"] == folder_info["layers"] and info["heads"] == folder_info["heads"]
    assert [m["key"] for m in info["mechanisms"]] == [m["key"] for m in folder_info["mechanisms"]]


def test_yarn_in_these_files_is_one_clear_line(tmp_path):
    """The published gpt-oss and DeepSeek V3 use YaRN; it is not read from GGUF yet, and says so in one line."""
    base = {"block_count": 1, "embedding_length": 16, "attention.head_count": 2, "context_length": 64, "feed_forward_length": 32}
    path = tmp_path / "yarn.gguf"
    writer = gguf.GGUFWriter(path, "gpt-oss")
    for key, value in base.items():
        writer.add_uint32(f"gpt-oss.{key}", value)
    writer.add_string("gpt-oss.rope.scaling.type", "yarn")
    make_gguf._finish(writer)
    with pytest.raises(AttnError) as caught:
        open_model(path)
    assert "\n" not in str(caught.value) and "'yarn' is not supported" in str(caught.value) and "rope.scaling.type" in str(caught.value)


@pytest.mark.parametrize("name", ["gemma2", "gpt_oss", "deepseek_v3"])
def test_run_and_heads_on_the_command_line(cli, name):
    """`run --model FILE.gguf` and `heads` work on each file: the last layer's JSON has every head, the header names the
    file's storage, and the heads map equals the folder's where the folder computes the same (all but Gemma 2's scale)."""
    import json as json_module

    text = "The cat sat on the mat."
    result = cli("run", "--model", str(FIXTURES / f"{name}.gguf"), "--layer", "2", "--sentence", text, "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json_module.loads(result.stdout)
    assert "schema" in doc and len(doc["heads"]) == {"gemma2": 4, "gpt_oss": 4, "deepseek_v3": 2}[name]
    assert "stored as F32" in result.stdout
    if name == "gemma2":
        return
    from_file = json_module.loads(cli("heads", "--model", str(FIXTURES / f"{name}.gguf"), "--sentence", text, "--format", "json").stdout)
    from_folder = json_module.loads(cli("heads", "--model", str(HF / name), "--sentence", text, "--format", "json").stdout)
    assert len(from_file["heads"]) == len(from_folder["heads"]) > 1
    for a, b in zip(from_file["heads"], from_folder["heads"]):
        assert a["entropy"] == pytest.approx(b["entropy"], abs=1e-9) and a["max_weight"] == pytest.approx(b["max_weight"], abs=1e-9)
