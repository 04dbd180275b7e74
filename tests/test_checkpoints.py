"""Real checkpoints: one layer's inputs, read by attncli, give transformers' own attention weights for every layer and head.

The fixtures in tests/checkpoints/ are tiny random models saved by transformers, with golden
attention weights from transformers' eager attention in float64 (scripts/make_checkpoints.py
builds them; these tests need neither torch nor transformers, except the one live test).

Tolerances: 1e-12 for GPT-2 and BERT, which transformers computes wholly in float64. 1e-5 for
Llama, Qwen2 and Mistral: even in a float64 model, transformers computes RMSNorm, the RoPE angles
(inverse frequencies, cos and sin) and the softmax in float32, so its weights carry float32 rounding.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attncli.errors import AttnError
from attncli.sources.checkpoints.families import SUPPORTED, read_config
from attncli.sources.checkpoints.layer import LayerCase, load_layer, model_info, tokenize
from attncli.sources.checkpoints.safetensors import SafetensorsFile

HERE = Path(__file__).parent / "checkpoints"
BAD = HERE / "bad"
TOLERANCE = {"gpt2": 1e-12, "gpt2-bare": 1e-12, "bert": 1e-12, "llama": 1e-5, "qwen2": 1e-5, "mistral": 1e-5, "llama-old": 1e-5}
FIXTURES = sorted(TOLERANCE)


def golden(name: str) -> dict[str, np.ndarray]:
    with np.load(HERE / name / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def layers_of(name: str) -> int:
    return int(golden(name)["attentions"].shape[0])


def rotate_half(x: np.ndarray, inv_freq: np.ndarray) -> np.ndarray:
    """(L, d_k) rotated as Hugging Face's Llama does: pair i with i + d_k/2, angle position·inv_freq[i], positions 0 …"""
    L, d_k = x.shape
    half = d_k // 2
    out = np.empty_like(x)
    for p in range(L):
        for i in range(half):
            angle = p * inv_freq[i]
            a, b = x[p, i], x[p, i + half]
            out[p, i] = a * np.cos(angle) - b * np.sin(angle)
            out[p, i + half] = b * np.cos(angle) + a * np.sin(angle)
    return out


def attention_weights(case: LayerCase) -> np.ndarray:
    """(H, L, L) softmax(mask(q·kᵀ / divisor)) per head, written out plainly from the LayerCase alone."""
    L, H, G, d_k = case.X.shape[0], case.heads, case.kv_heads, case.head_dim
    Q = case.X @ case.W_Q + (0 if case.b_Q is None else case.b_Q)  # (L, H·d_k)
    K = case.X @ case.W_K + (0 if case.b_K is None else case.b_K)  # (L, G·d_k)
    out = np.zeros((H, L, L))
    for h in range(H):
        g = h * G // H  # head h + 1 reads key/value head ⌊h·G/H⌋ + 1
        q, k = Q[:, h * d_k : (h + 1) * d_k], K[:, g * d_k : (g + 1) * d_k]
        if case.rope is not None:
            assert case.rope.style == "half" and case.rope.inv_freq is not None
            q, k = rotate_half(q, case.rope.inv_freq), rotate_half(k, case.rope.inv_freq)
        for i in range(L):
            seen = [j for j in range(L) if (not case.causal or j <= i) and (case.window is None or abs(i - j) <= case.window)]
            scores = np.array([q[i] @ k[j] / case.divisor for j in seen])
            exp = np.exp(scores - scores.max())
            out[h, i, seen] = exp / exp.sum()
    return out


@pytest.mark.parametrize(("name", "layer"), [(n, layer) for n in FIXTURES for layer in range(1, layers_of(n) + 1)])
def test_every_head_of_every_layer_matches_transformers(name, layer):
    """Attention weights from attncli's X, weights, divisor, mask and RoPE equal transformers' golden weights."""
    expected = golden(name)
    case = load_layer(HERE / name, layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist())
    np.testing.assert_allclose(attention_weights(case), expected["attentions"][layer - 1], rtol=0, atol=TOLERANCE[name])


def test_the_comparison_can_fail():
    """An off-by-one sliding window, a wrong divisor or no RoPE scaling each break the agreement by far more than 1e-5."""
    import dataclasses

    expected = golden("qwen2")
    case = load_layer(HERE / "qwen2", layer=3, text=str(expected["text"]))
    assert case.window == 4  # transformers' sliding_window = 5: keys i−4 … i
    for window in (3, 5):
        wrong = dataclasses.replace(case, window=window)
        assert np.abs(attention_weights(wrong) - expected["attentions"][2]).max() > 1e-3
    wrong = dataclasses.replace(case, divisor=case.divisor * 1.01)
    assert np.abs(attention_weights(wrong) - expected["attentions"][2]).max() > 1e-4
    expected = golden("llama")
    case = load_layer(HERE / "llama", layer=2, text=str(expected["text"]))
    assert case.rope is not None
    unscaled = dataclasses.replace(case, rope=dataclasses.replace(case.rope, inv_freq=1e4 ** (-np.arange(0, 8, 2) / 8)))
    assert np.abs(attention_weights(unscaled) - expected["attentions"][1]).max() > 1e-3


def test_llama3_scaling_keeps_fast_blends_middle_and_slows_long_waves():
    """With d_k = 8, θ = 1e4 and 64 original positions, the four frequencies fall in all three llama3 bands."""
    case = load_layer(HERE / "llama", layer=1, text="The cat")
    assert case.rope is not None
    base = 1e4 ** (-np.arange(0, 8, 2) / 8)  # 1, 0.1, 0.01, 0.001: wavelengths 6.3, 63, 628, 6283
    inv = case.rope.inv_freq
    assert inv[0] == base[0]  # wavelength 6.3 < 64/4: unchanged
    assert base[1] / 8 < inv[1] < base[1]  # 16 ≤ 63 ≤ 64: blended
    np.testing.assert_allclose(inv[2:], base[2:] / 8, rtol=1e-15)  # longer than 64: divided by the factor 8
    assert case.rope.scaling == "llama3 (factor 8, low/high frequency factors 1/4, original 64 positions)"


def test_what_each_fixture_declares():
    """Heads, key/value heads, head size, biases, divisor, mask and storage are read as each config declares them."""
    gpt2 = load_layer(HERE / "gpt2-bare", layer=3, text="The cat")
    assert (gpt2.heads, gpt2.kv_heads, gpt2.head_dim, gpt2.causal, gpt2.window, gpt2.rope) == (4, 4, 4, True, None, None)
    assert gpt2.divisor == pytest.approx(2.0 * 3)  # √d_k × layer number (scale_attn_by_inverse_layer_idx)
    assert gpt2.dtype == "float16" and gpt2.b_Q is not None and gpt2.W_O.shape == (16, 16)
    bert = load_layer(HERE / "bert", layer=1, text="The cat")
    assert (bert.causal, bert.labels[0], bert.labels[-1]) == (False, "[CLS]", "[SEP]")
    assert any("post-LN" in note for note in bert.notes)
    llama = load_layer(HERE / "llama", layer=2, text="The cat")
    assert (llama.heads, llama.kv_heads, llama.head_dim, llama.dtype) == (4, 2, 8, "bfloat16")
    assert llama.W_Q.shape == (24, 32) and llama.W_K.shape == (24, 16) and llama.W_O.shape == (32, 24)
    assert llama.b_Q is None and llama.b_O is None
    assert "weights stored as bfloat16, arithmetic in float64" in llama.notes
    qwen2 = load_layer(HERE / "qwen2", layer=1, text="The cat")
    assert qwen2.kv_heads == 1 and qwen2.b_Q is not None and qwen2.b_K is not None and qwen2.b_O is None
    assert qwen2.window is None  # max_window_layers = 1: layer 1 attends to everything
    assert qwen2.rope is not None and qwen2.rope.theta == 1000.0
    mistral = load_layer(HERE / "mistral", layer=1, text="The cat")
    assert (mistral.window, mistral.dtype) == (3, "float16")
    old = load_layer(HERE / "llama-old", layer=1, text="The cat")
    assert old.b_Q is not None and old.b_O is not None
    assert old.rope is not None and old.rope.scaling == "linear (factor 2)" and old.rope.theta == 5000.0


def test_transformers_4_and_5_spellings_read_the_same():
    """rope_theta + rope_scaling {type: linear} + torch_dtype mean what rope_parameters {rope_type: linear} + dtype mean."""
    config = json.loads((HERE / "llama-old" / "config.json").read_text())
    assert "rope_scaling" in config and "rope_parameters" not in config and "torch_dtype" in config
    old = read_config(HERE / "llama-old")
    assert old.rope is not None and (old.rope.kind, old.rope.factor, old.rope.theta, old.dtype) == (
        "linear",
        2.0,
        5000.0,
        "float32",
    )
    new = read_config(HERE / "llama")
    assert new.rope is not None and (new.rope.kind, new.rope.original_positions, new.dtype) == ("llama3", 64, "bfloat16")


def test_labels_show_the_text_each_token_covers():
    """A leading space shows as ␣ (even when the tokenizer trims it from the offsets), special tokens by name."""
    ids, labels = tokenize(HERE / "gpt2", "The cat sat on the mat")
    assert labels == ("The", "␣cat", "␣sat", "␣on", "␣the", "␣mat")
    assert tokenize(HERE / "llama", "The cat").labels == ("<s>", "The", "␣cat")
    assert tokenize(HERE / "llama", "The cat", special_tokens=False).labels == ("The", "␣cat")
    assert tokenize(HERE / "bert", "The cat").labels == ("[CLS]", "The", "cat", "[SEP]")
    assert tokenize(HERE / "bert", "The cat").positions == (1, 2, 3, 4)
    assert tokenize(HERE / "gpt2", "a\nb").labels[1] == "\\n"
    assert tokenize(HERE / "gpt2", "a<|endoftext|>").labels == ("a", "<|endoftext|>")


def test_a_character_split_into_bytes_is_labelled_byte_by_byte():
    """Byte-level BPE may spell 'é' as two tokens; each shows its byte (<0xC3>, <0xA9>) rather than 'é' twice."""
    assert tokenize(HERE / "gpt2", "café").labels == ("c", "a", "f", "<0xC3>", "<0xA9>")


def test_model_info_describes_a_folder():
    """model_info gives the architecture, heads, key/value heads, head size, dtype and RoPE, and whether it is supported."""
    info = model_info(HERE / "llama")
    assert info["supported"] is True and info["reason"] is None
    assert (info["model_type"], info["layers"], info["heads"], info["kv_heads"], info["head_dim"]) == ("llama", 3, 4, 2, 8)
    assert (info["dtype"], info["stored_dtype"], info["weights"]) == ("bfloat16", "bfloat16", "model.safetensors.index.json")
    assert info["rope"]["scaling"].startswith("llama3")
    assert model_info(HERE / "qwen2")["sliding_window"] == 5 and model_info(HERE / "qwen2")["sliding_layers"] == [2, 3]
    unsupported = model_info(BAD / "unsupported-model-type")
    assert unsupported["supported"] is False and "model_type 'mamba' is not supported" in unsupported["reason"]
    assert model_info(BAD / "missing-tokenizer")["supported"] is False


def test_a_layer_out_of_range_is_refused_naming_the_range():
    """Layer 0 and layer 4 of a 3-layer model are refused with the range."""
    for layer in (0, 4):
        with pytest.raises(AttnError) as caught:
            load_layer(HERE / "gpt2", layer=layer, text="The cat")
        assert str(caught.value) == f"layer: layer {layer} is out of range: the model has 3 layers (expected 1 to 3)"


def test_a_sentence_longer_than_the_positions_is_refused():
    """GPT-2's learned positions stop at n_positions (32 here)."""
    with pytest.raises(AttnError, match="the sentence is 45 tokens long, more than the model's 32 positions"):
        load_layer(HERE / "gpt2", layer=1, text="The cat sat. " * 9)


def test_a_sentence_without_tokens_is_refused():
    """An empty sentence of a model that adds no special tokens has nothing to attend over."""
    with pytest.raises(AttnError, match="the sentence gives no tokens"):
        load_layer(HERE / "gpt2", layer=1, text="")


# ---------------------------------------------------------------- config spellings without a fixture of their own

SMALL = {"hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 2, "num_hidden_layers": 4, "intermediate_size": 8}
LLAMA3 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
# config.json extras, then (sliding windows per layer in transformers' spelling, RoPE kind, θ, original positions, dtype),
# each as transformers 5 reads it
SPELLINGS = {
    "qwen2-window-from-max-window-layers": (
        {"model_type": "qwen2", "use_sliding_window": True, "sliding_window": 3, "max_window_layers": 2},
        ((None, None, 3, 3), "default", 10000.0, None, None),
    ),
    "qwen2-window-off": ({"model_type": "qwen2", "sliding_window": 3}, ((None,) * 4, "default", 10000.0, None, None)),
    "mistral-default-window": ({"model_type": "mistral"}, ((4096,) * 4, "default", 10000.0, None, None)),
    "mistral-no-window": ({"model_type": "mistral", "sliding_window": None}, ((None,) * 4, "default", 10000.0, None, None)),
    "rope_type-inside-rope_scaling": (
        {"model_type": "llama", "rope_theta": 5e5, "rope_scaling": {"rope_type": "llama3", **LLAMA3}, "torch_dtype": "bfloat16"},
        ((None,) * 4, "llama3", 5e5, 8192, "bfloat16"),
    ),
    "theta-at-top-level": (
        {"model_type": "llama", "rope_theta": 123.0, "rope_parameters": {"rope_type": "default"}, "dtype": "float16"},
        ((None,) * 4, "default", 123.0, None, "float16"),
    ),
    "original-positions-at-top-level-win": (
        {"model_type": "llama", "original_max_position_embeddings": 16, "rope_parameters": {"rope_type": "llama3", "rope_theta": 1e4, **LLAMA3}},
        ((None,) * 4, "llama3", 1e4, 16, None),
    ),
    "old-linear-qwen2": (
        {"model_type": "qwen2", "rope_theta": 1e6, "rope_scaling": {"type": "linear", "factor": 4.0}},
        ((None,) * 4, "linear", 1e6, None, None),
    ),
}  # fmt: skip


def write_config(folder: Path, extra: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**SMALL, "vocab_size": 10, **extra}))
    return folder


@pytest.mark.parametrize("name", SPELLINGS)
def test_config_spellings_read_as_transformers_reads_them(name, tmp_path):
    """Sliding windows, RoPE kind, θ, original positions and dtype, across the spellings of transformers 4 and 5."""
    extra, expected = SPELLINGS[name]
    cfg = read_config(write_config(tmp_path, extra))
    assert cfg.rope is not None
    assert (cfg.windows, cfg.rope.kind, cfg.rope.theta, cfg.rope.original_positions, cfg.dtype) == expected


# ---------------------------------------------------------------- broken checkpoints: one clear line each

BAD_CASES = [
    ("truncated", "model.safetensors", "tensor 'h.0.mlp.c_proj.bias' has data_offsets [1184, 1200] outside the data area of 1,192 bytes"),
    ("short-file", "model.safetensors", "the file is 5 bytes long, too short for a safetensors header"),
    ("header-length-too-big", "model.safetensors", "the header length 1,000,000,000,000 is larger than the 100,000,000-byte limit"),
    ("header-past-end", "model.safetensors", "the header length 2,546 runs past the end of the file (2,546 bytes)"),
    ("header-not-json", "model.safetensors:1", "not JSON: Expecting value (column 1) (expected a JSON object after the 8-byte length)"),
    ("unknown-dtype", "model.safetensors", "tensor 'wpe.weight' has the unknown dtype 'F42' (expected one of BOOL, U8,"),
    ("integer-weights", "model.safetensors", "tensor 'h.0.ln_1.weight' is stored as I32 (expected F64, F32, F16 or BF16)"),
    ("shape-vs-bytes", "model.safetensors", "tensor 'wte.weight' of shape [6, 5] and dtype F32 needs 120 bytes but its data_offsets span 96"),
    ("overlapping", "model.safetensors", "tensors 'h.0.ln_1.bias' and 'h.0.attn.c_attn.weight' overlap (bytes 240–256 and 240–432"),
    ("offsets-outside", "model.safetensors", "tensor 'ln_f.bias' has data_offsets [10000, 10016] outside the data area of 1,232 bytes"),
    ("missing-tensor", "model.safetensors", "the checkpoint has no tensor 'h.0.attn.c_proj.weight'"),
    ("wrong-shape", "model.safetensors", "tensor 'h.0.attn.c_proj.weight' has shape [4, 16] but config.json implies [4, 4]"),
    ("unsupported-model-type", "config.json", "model_type 'mamba' is not supported (expected one of " + ", ".join(SUPPORTED[:5])),
    ("config-not-json", "config.json:1", "not JSON: Expecting property name enclosed in double quotes"),
    ("rope-longrope", "config.json", "rope_scaling: the RoPE scaling 'longrope' is read for phi3 only, not llama (expected phi3, or another scaling)"),
    ("missing-tokenizer", "", "no tokenizer.json in the checkpoint folder (expected the tokenizer saved with the model)"),
    ("no-weights", "", "no model.safetensors or model.safetensors.index.json in the folder"),
    ("missing-shard", "model-00001-of-00002.safetensors", "the shard model-00001-of-00002.safetensors named by model.safetensors.index.json is missing"),
]  # fmt: skip


def test_the_bad_corpus_and_the_table_agree():
    """Every folder of tests/checkpoints/bad has a row above, and every row a folder."""
    assert sorted(p.name for p in BAD.iterdir()) == sorted(case for case, _, _ in BAD_CASES)


@pytest.mark.parametrize(("case", "file", "message"), BAD_CASES, ids=[c for c, _, _ in BAD_CASES])
def test_a_broken_checkpoint_is_refused_with_one_clear_line(case, file, message):
    """Loading a layer of a broken checkpoint raises AttnError naming the file and what is wrong, on one line."""
    with pytest.raises(AttnError) as caught:
        load_layer(BAD / case, layer=1, text="the cat sat")
    text = str(caught.value)
    where = str(BAD / case / file) if file else str(BAD / case)
    assert text.startswith(where + ": "), text
    assert message in text
    assert "\n" not in text


# ---------------------------------------------------------------- the safetensors reader on hand-made files


def write_safetensors(path: Path, tensors: dict[str, tuple[str, bytes, list[int]]]) -> None:
    header, data = {}, b""
    for name, (dtype, raw, shape) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_every_float_dtype_is_widened_exactly(tmp_path):
    """F64, F32, F16 and BF16 (its bits shifted into a float32) read back as the very same numbers in float64."""
    values = np.array([[1.5, -3.25, 2.0**-10], [65280.0, -0.0078125, 0.0]])  # representable in every one of them
    bf16 = (values.astype(np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
    write_safetensors(
        tmp_path / "m.safetensors",
        {
            "f64": ("F64", values.astype("<f8").tobytes(), [2, 3]),
            "f32": ("F32", values.astype("<f4").tobytes(), [2, 3]),
            "f16": ("F16", values.astype("<f2").tobytes(), [2, 3]),
            "bf16": ("BF16", bf16, [2, 3]),
            "empty": ("F32", b"", [0, 3]),
        },
    )
    file = SafetensorsFile(tmp_path / "m.safetensors")
    for name in ("f64", "f32", "f16", "bf16"):
        read = file.read(name)
        assert read.dtype == np.float64 and np.array_equal(read, values), name
    assert np.array_equal(file.read_rows("bf16", [1, 1, 0]), values[[1, 1, 0]])
    assert file.read("empty").shape == (0, 3)
    bits = np.array([0x3F80, 0xC0A0, 0x0001], dtype="<u2")  # 1.0, −5.0 and the smallest subnormal bfloat16
    write_safetensors(tmp_path / "b.safetensors", {"b": ("BF16", bits.tobytes(), [3])})
    assert SafetensorsFile(tmp_path / "b.safetensors").read("b").tolist() == [1.0, -5.0, 2.0**-133]


def test_without_the_tokenizers_library_the_error_names_the_extra(monkeypatch):
    """When `tokenizers` is not installed, the one line says how to install it."""
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(AttnError, match=r'pip install "attncli\[models\]"'):
        tokenize(HERE / "gpt2", "The cat")


def test_without_the_tokenizers_library_a_gguf_sentence_seen_before_names_the_extra(monkeypatch, tmp_path):
    """A GGUF file's sentence remembered while the library was installed: without it, the same one line, no traceback."""
    from attncli.sources.checkpoints import gguf, token_cache

    monkeypatch.setenv("ATTNCLI_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(gguf, "_opened", {})
    path = HERE / "gguf" / "llama.gguf"
    assert tokenize(path, "The cat").ids and token_cache.sentence_entries()
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    token_cache._builder.cache_clear()  # what built an entry, asked again without the library
    try:
        with pytest.raises(AttnError, match=r'pip install "attncli\[models\]"'):
            tokenize(path, "The cat")
    finally:
        token_cache._builder.cache_clear()  # the other tests' library, once it is back


def test_importing_the_checkpoint_code_does_not_import_tokenizers():
    """`tokenizers` is imported only when a sentence is tokenized."""
    probe = "import sys, attncli.sources.checkpoints.layer; print('tokenizers' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"


# ---------------------------------------------------------------- optional: transformers itself


@pytest.mark.parametrize("name", FIXTURES)
def test_live_transformers_agrees(name):
    """transformers, run now on the fixture, still gives the committed golden weights and attncli's (skips without torch)."""
    try:
        import torch
        import transformers
    except Exception as error:  # not installed, or installed but unable to load
        pytest.skip(f"torch and transformers are not importable ({error}); pip install torch==2.13.0 transformers")
    expected = golden(name)
    model = transformers.AutoModel.from_pretrained(HERE / name, attn_implementation="eager", dtype=torch.float64).eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([expected["ids"].tolist()]), output_attentions=True)
    live = np.stack([a[0].numpy() for a in out.attentions])
    np.testing.assert_allclose(live, expected["attentions"], rtol=0, atol=1e-12)
    for layer in range(1, live.shape[0] + 1):
        case = load_layer(HERE / name, layer=layer, text=str(expected["text"]))
        np.testing.assert_allclose(attention_weights(case), live[layer - 1], rtol=0, atol=TOLERANCE[name])


@pytest.mark.parametrize("name", SPELLINGS)
def test_live_transformers_reads_the_config_spellings_alike(name, tmp_path):
    """transformers' own sliding windows and RoPE inverse frequencies equal attncli's (float32 rounding apart)."""
    try:
        import transformers
    except Exception as error:  # not installed, or installed but unable to load
        pytest.skip(f"transformers is not importable ({error}); pip install torch==2.13.0 transformers")
    from attncli.sources.checkpoints.rope import inverse_frequencies

    folder = write_config(tmp_path, SPELLINGS[name][0])
    hf = transformers.AutoConfig.from_pretrained(folder)
    window = getattr(hf, "sliding_window", None)  # llama has none
    kinds = getattr(hf, "layer_types", None) or ["sliding_attention" if window else "full_attention"] * 4
    cfg = read_config(folder)
    assert cfg.windows == tuple(window if k == "sliding_attention" else None for k in kinds)
    inv_freq = transformers.AutoModel.from_config(hf).rotary_emb.inv_freq.double().numpy()
    assert cfg.rope is not None
    np.testing.assert_allclose(inverse_frequencies(cfg.rope, cfg.head_dim), inv_freq, rtol=1e-6)


@pytest.mark.parametrize("name", FIXTURES)
def test_earlier_layers_run_the_engine_that_run_shows(name):
    """A layer's attention inside the forward pass is engine.run of that layer's scenario, bit for bit: what one layer prints is what the next reads."""
    from attncli.core import engine
    from attncli.sources.checkpoints.blocks import AttentionWeights, self_attention
    from attncli.sources.checkpoints.scenario import layer_scenario

    case = load_layer(HERE / name, layer=layers_of(name), text=str(golden(name)["text"]))
    weights = AttentionWeights(
        W_Q=case.W_Q, W_K=case.W_K, W_V=case.W_V, b_Q=case.b_Q, b_K=case.b_K, b_V=case.b_V, W_O=case.W_O, b_O=case.b_O,
        heads=case.heads, kv_heads=case.kv_heads, head_dim=case.head_dim, divisor=case.divisor, causal=case.causal,
        window=case.window, rope=case.rope,
    )  # fmt: skip
    assert self_attention(case.X, weights).tobytes() == engine.run(layer_scenario(case)).output.tobytes()
