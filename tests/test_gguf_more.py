"""GGUF files of issue 30's families read from folders before: SmolLM3, Apertus, Ministral 3, ModernBERT, Qwen3-Next, T5, each
as llama.cpp's converter (convert_hf_to_gguf.py, its class for the family) writes it; and GLM-4.5's MTP blocks.

tests/checkpoints/gguf/apertus.gguf is scripts/make_gguf.py's `write_llama_converted` on the apertus fixture: rows kept
(ApertusModel sets undo_permute = False), llama3 scaling as rope_freqs, each layer's xIELU numbers as the metadata lists
xielu.alpha_p, alpha_n, beta, eps. It must equal its folder (1e-9) and so transformers' golden (1e-6).

tests/checkpoints/gguf/modernbert.gguf is `write_modernbert` on the modernbert fixture (ModernBertModel: `model.` stripped,
Wqkv and Wi whole, the two θ as rope.freq_base and rope.freq_base_swa, local_attention as the window; its WordPiece
vocabulary as BertModel writes one): the same two bounds.

The smollm3 and ministral3 fixtures exercise what the converter cannot store (NoPE every 2nd layer and a window; a window),
so each test writes the file from a copy of the fixture the converter can convert as it is (NoPE every 4th layer, which
llama.cpp fixes for smollm3, and no window): the file equals that folder, and the live tests run transformers on it.
A GLM-4.5 file with the next-token-prediction block the converter appends is read with the model's layers only.

A qwen3next file (`write_qwen3_next`) is written from a copy of the qwen3_next fixture with experts in every layer (gguf-py
names no dense MLP for it) and full_attention_interval 2 (the converter stores the interval, not layer_types): its gated
attention layers equal the folder's within 1e-6 (its norms come back from float32's 1 + w, A_log from −exp(A_log)), the
Gated DeltaNet layers before them computed from the regrouped tensors.

A t5 file (`write_t5`) is written from a copy of the t5 fixture with relative_attention_max_distance 128, which llama.cpp
fixes (the converter stores none): its encoder, decoder and cross-attention layers equal the folder's within 1e-9.
tests/checkpoints/gguf/t5-sentencepiece.gguf has the SentencePiece unigram vocabulary a published T5's file has.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants.temperature import QueryTemperature
from attncli.errors import AttnError
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario
from tests.live import fixture_script
from tests.test_gguf import make_gguf

gguf = pytest.importorskip("gguf")

HF = Path(__file__).parent / "checkpoints"
FIXTURES = HF / "gguf"
TEXT = "The cat sat on the mat, then the cat slept."
# what each family's converter can store: llama.cpp's smollm3 has NoPE on every 4th layer and no window; mistral3 no window
CONVERTIBLE: dict[str, dict[str, Any]] = {
    "smollm3": {"no_rope_layers": None, "layer_types": None, "sliding_window": None, "no_rope_layer_interval": 4, "use_sliding_window": False},
    "ministral3": {"sliding_window": None},
}


def golden(name: str) -> dict[str, np.ndarray]:
    with np.load(HF / name / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case: Any) -> np.ndarray:
    """(H, L, L) the engine's weights for the layer's scenario."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


def convertible(tmp_path: Path, name: str) -> Path:
    """A copy of the fixture with the config the converter can store (CONVERTIBLE: a None drops the key)."""
    folder = tmp_path / name
    shutil.copytree(HF / name, folder)
    config = json.loads((HF / name / "config.json").read_text())
    for key, value in CONVERTIBLE[name].items():
        config.pop(key, None)
        if value is not None:
            config[key] = value
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def written(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """(the convertible folder, its GGUF file as the converter writes it)."""
    folder = convertible(tmp_path, name)
    path = tmp_path / f"{name}.gguf"
    make_gguf.write_llama_converted(name, path, folder)
    return folder, path


def assert_same(folder: Path, path: Path, layers: int) -> None:
    """Every layer of the file: its token ids, matrices, window and RoPE are the folder's, and its weights within 1e-9."""
    for layer in range(1, layers + 1):
        from_folder, from_file = load_layer(folder, layer=layer, text=TEXT), load_layer(path, layer=layer, text=TEXT)
        assert from_file.token_ids == from_folder.token_ids
        for matrix in ("W_Q", "W_K", "W_V", "W_O"):
            assert np.array_equal(getattr(from_file, matrix), getattr(from_folder, matrix)), matrix
        assert from_file.window == from_folder.window and (from_file.rope is None) == (from_folder.rope is None)
        np.testing.assert_allclose(from_file.X, from_folder.X, rtol=0, atol=1e-8)
        np.testing.assert_allclose(weights_of(from_file), weights_of(from_folder), rtol=0, atol=1e-9)


WRITERS = {"apertus": lambda path: make_gguf.write_llama_converted("apertus", path), "modernbert": make_gguf.write_modernbert}


def test_the_fixtures_are_what_the_script_writes(tmp_path):
    """The committed files are the script's output today (the writer is deterministic)."""
    for name, write in WRITERS.items():
        write(tmp_path / f"{name}.gguf")
        assert (tmp_path / f"{name}.gguf").read_bytes() == (FIXTURES / f"{name}.gguf").read_bytes(), name


@pytest.mark.parametrize(("name", "layer"), [("apertus", 1), ("apertus", 2), ("modernbert", 1), ("modernbert", 2), ("modernbert", 3)])
def test_the_file_gives_its_folder_s_attention_and_transformers_golden(name, layer):
    """Every head of each layer equals the folder's (1e-9; Apertus's llama3 scaling from rope_freqs and xIELU from the
    metadata, ModernBERT's local layers with their θ and window) and transformers' golden (1e-6), with the same token ids."""
    expected = golden(name)
    from_folder = load_layer(HF / name, layer=layer, text=TEXT)
    from_file = load_layer(FIXTURES / f"{name}.gguf", layer=layer, text=TEXT)
    assert from_file.token_ids == from_folder.token_ids == tuple(expected["ids"].tolist())
    for matrix in ("W_Q", "W_K", "W_V", "W_O"):
        assert np.array_equal(getattr(from_file, matrix), getattr(from_folder, matrix)), matrix
    assert from_file.window == from_folder.window and from_file.rope is not None and from_folder.rope is not None
    assert from_file.rope.theta == from_folder.rope.theta
    np.testing.assert_allclose(weights_of(from_file), weights_of(from_folder), rtol=0, atol=1e-9)
    np.testing.assert_allclose(weights_of(from_file), expected["attentions"][layer - 1], rtol=0, atol=1e-6)
    assert model_info(FIXTURES / f"{name}.gguf")["model_type"] == name


def test_a_modern_bert_file_without_window_or_local_base_is_read_as_llama_cpp_reads_it(tmp_path, monkeypatch):
    """Without rope.freq_base_swa the local layers turn with the global θ; without attention.sliding_window every layer is
    global; a pattern of 2 makes every 2nd layer global from the first (llama.cpp's set_swa_pattern, dense first)."""
    path = tmp_path / "modernbert.gguf"
    monkeypatch.setattr(gguf.GGUFWriter, "add_rope_freq_base_swa", lambda self, value: None)
    make_gguf.write_modernbert(path)
    case = load_layer(path, layer=2, text=TEXT)
    assert case.window == 2 and case.rope is not None and case.rope.theta == 160_000.0
    folder = tmp_path / "modernbert"
    shutil.copytree(HF / "modernbert", folder)
    config = json.loads((HF / "modernbert" / "config.json").read_text()) | {"global_attn_every_n_layers": 2}
    (folder / "config.json").write_text(json.dumps(config))
    make_gguf.write_modernbert(path, folder)
    assert model_info(path)["sliding_layers"] == [2]
    monkeypatch.setattr(gguf.GGUFWriter, "add_sliding_window", lambda self, value: None)
    make_gguf.write_modernbert(path)
    assert model_info(path)["sliding_layers"] == [] and load_layer(path, layer=2, text=TEXT).window is None


def test_apertus_xielu_numbers_come_from_the_metadata(tmp_path, monkeypatch):
    """Layer 2's input passes layer 1's xIELU, whose numbers are the metadata's: changing alpha_p there changes layer 2;
    a list of the wrong length is one error naming the key."""
    changed = tmp_path / "changed.gguf"
    original = gguf.GGUFWriter.add_xielu_alpha_p
    monkeypatch.setattr(gguf.GGUFWriter, "add_xielu_alpha_p", lambda self, values: original(self, [v + 1.0 for v in values]))
    make_gguf.write_llama_converted("apertus", changed)
    base = weights_of(load_layer(FIXTURES / "apertus.gguf", layer=2, text=TEXT))
    assert np.abs(weights_of(load_layer(changed, layer=2, text=TEXT)) - base).max() > 1e-3
    short = tmp_path / "short.gguf"
    monkeypatch.setattr(gguf.GGUFWriter, "add_xielu_alpha_p", lambda self, values: original(self, values[:1]))
    make_gguf.write_llama_converted("apertus", short)
    with pytest.raises(AttnError, match=r"xielu\.alpha_p.*a list of 2 numbers, one per layer"):
        load_layer(short, layer=2, text=TEXT)


def test_a_smollm3_file_has_llama_cpp_s_nope_layers(tmp_path):
    """A smollm3 file (rows permuted, put back) equals its folder on every head of every layer: layer 4 without RoPE, as
    llama.cpp fixes it (every 4th layer) whatever the file says, and no window."""
    folder, path = written(tmp_path, "smollm3")
    info = model_info(path)
    assert info["model_type"] == "smollm3" and info["sliding_layers"] == []
    assert [load_layer(path, layer=layer, text=TEXT).rope is None for layer in (1, 2, 3, 4)] == [False, False, False, True]
    assert_same(folder, path, 4)


def test_a_mistral3_file_reads_yarn_and_the_query_temperature(tmp_path):
    """A mistral3 file equals its Ministral 3 folder on every head: YaRN from rope.scaling.*, yarn_log_multiplier as
    mscale_all_dim, llama_4_scaling_beta from attention.temperature_scale over original_context_length positions."""
    folder, path = written(tmp_path, "ministral3")
    assert model_info(path)["model_type"] == "ministral3"
    case = load_layer(path, layer=1, text=TEXT)
    assert case.rope is not None and "yarn scaling (factor 4, original 16 positions" in " ".join(case.notes)
    assert any("1 + 0.1·ln(1 + ⌊p / 16⌋)" in note for note in case.notes)
    assert_same(folder, path, 2)
    long = " ".join(["cat"] * 17)  # past the 16 original positions: the queries' temperature grows, read from the file
    from_folder, from_file = load_layer(folder, layer=2, text=long), load_layer(path, layer=2, text=long)
    assert len(from_file.token_ids) > 16
    np.testing.assert_allclose(weights_of(from_file), weights_of(from_folder), rtol=0, atol=1e-9)
    temperatures = [variant for variant in from_file.variants if isinstance(variant, QueryTemperature)]
    assert [t.original for t in temperatures] == [16] and temperatures[0].beta == pytest.approx(0.1, rel=1e-7)  # β stored as float32


def test_a_mistral3_file_without_yarn_is_unscaled_and_another_scaling_is_refused(tmp_path, monkeypatch):
    """Without rope.scaling.type the file's RoPE is plain; a linear scaling (not what Ministral3Model writes) is refused."""
    folder, path = convertible(tmp_path, "ministral3"), tmp_path / "ministral3.gguf"
    monkeypatch.setattr(gguf.GGUFWriter, "add_rope_scaling_type", lambda self, value: None)
    make_gguf.write_llama_converted("ministral3", path, folder)
    assert "yarn" not in " ".join(load_layer(path, layer=1, text=TEXT).notes)
    monkeypatch.setattr(gguf.GGUFWriter, "add_rope_scaling_type", lambda self, value: self.add_string("mistral3.rope.scaling.type", "linear"))
    make_gguf.write_llama_converted("ministral3", path, folder)
    with pytest.raises(AttnError, match="the RoPE scaling 'linear' is not supported in mistral3 files"):
        load_layer(path, layer=1, text=TEXT)


@pytest.mark.parametrize("name", sorted(CONVERTIBLE))
def test_live_transformers_on_the_convertible_folder_equals_the_file(tmp_path, name):
    """transformers on the folder the file was written from gives the file's weights on every head of every layer (1e-6;
    skips without torch): the file is right, not only equal to attncli's reading of its folder."""
    script = fixture_script()
    folder, path = written(tmp_path, name)
    ids = list(load_layer(path, layer=1, text=TEXT).token_ids)
    live = script.golden_with_inputs(folder, ids)
    for layer in range(1, live["attentions"].shape[0] + 1):
        np.testing.assert_allclose(weights_of(load_layer(path, layer=layer, text=TEXT)), live["attentions"][layer - 1], rtol=0, atol=1e-6)


def test_a_glm4moe_file_s_next_token_prediction_block_is_not_a_layer(tmp_path):
    """GLM-4.5's converter appends its multi-token-prediction layer (num_nextn_predict_layers) as one more block, counted in
    block_count, and writes nextn_predict_layers: attncli counts the model's layers only, as transformers and llama.cpp do,
    and every one of them equals the folder's."""
    folder = tmp_path / "glm4_moe"
    folder.mkdir()
    shutil.copy(HF / "glm4_moe" / "tokenizer.json", folder)
    config = json.loads((HF / "glm4_moe" / "config.json").read_text()) | {"num_nextn_predict_layers": 1}
    (folder / "config.json").write_text(json.dumps(config))
    layers, d = config["num_hidden_layers"], config["hidden_size"]
    tensors = make_gguf.raw_tensors(HF / "glm4_moe")
    last = f"model.layers.{layers - 1}."
    tensors |= {k.replace(last, f"model.layers.{layers}."): v for k, v in tensors.items() if k.startswith(last)}
    rng = np.random.default_rng(30)
    for name, shape in (("eh_proj.weight", (d, 2 * d)), ("enorm.weight", (d,)), ("hnorm.weight", (d,)), ("shared_head.norm.weight", (d,))):
        tensors[f"model.layers.{layers}.{name}"] = rng.normal(0, 0.3, shape).astype(np.float32)
    make_gguf.save_safetensors(folder / "model.safetensors", tensors)
    path = tmp_path / "glm4_moe.gguf"
    make_gguf.write_glm4_moe(path, folder)
    assert model_info(path)["layers"] == model_info(HF / "glm4_moe")["layers"] == layers
    text = str(golden("glm4_moe")["text"])
    for layer in range(1, layers + 1):
        expected = golden("glm4_moe")["attentions"][layer - 1]
        np.testing.assert_allclose(weights_of(load_layer(path, layer=layer, text=text)), expected, rtol=0, atol=1e-6)
    with pytest.raises(AttnError):
        load_layer(path, layer=layers + 1, text=text)


def every_layer_moe_qwen3_next(tmp_path: Path) -> Path:
    """The qwen3_next fixture with its dense layers' MLPs replaced by random experts, a router and a gated shared expert,
    and full_attention_interval 2 (its layer_types): what the converter can convert."""
    folder = tmp_path / "qwen3_next"
    folder.mkdir()
    shutil.copy(HF / "qwen3_next" / "tokenizer.json", folder)
    config = json.loads((HF / "qwen3_next" / "config.json").read_text())
    dense = config["mlp_only_layers"]
    (folder / "config.json").write_text(json.dumps({**config, "mlp_only_layers": [], "full_attention_interval": 2}))
    tensors = {k: v for k, v in make_gguf.raw_tensors(HF / "qwen3_next").items() if not any(k.startswith(f"model.layers.{i}.mlp.") for i in dense)}
    rng = np.random.default_rng(30)
    d, inner, shared = config["hidden_size"], config["moe_intermediate_size"], config["shared_expert_intermediate_size"]
    for i in dense:
        p = f"model.layers.{i}.mlp."
        shapes = {"gate.weight": (config["num_experts"], d), "shared_expert_gate.weight": (1, d), "shared_expert.gate_proj.weight": (shared, d),
                  "shared_expert.up_proj.weight": (shared, d), "shared_expert.down_proj.weight": (d, shared),
                  **{f"experts.{e}.{what}_proj.weight": (d, inner) if what == "down" else (inner, d)
                     for e in range(config["num_experts"]) for what in ("gate", "up", "down")}}  # fmt: skip
        tensors |= {p + name: rng.normal(0, 0.3, shape).astype(np.float32) for name, shape in shapes.items()}
    make_gguf.save_safetensors(folder / "model.safetensors", tensors)
    return folder


def test_a_qwen3next_file_gives_its_folder_s_gated_attention(tmp_path):
    """Every head of both gated-attention layers equals the folder's (1e-6), with the Gated DeltaNet layers before them
    computed from attn_qkv and attn_gate regrouped, ssm_a and the squeezed kernel; the linear layers are still refused as
    softmax attention, naming their kind; the tensors come back as the folder's (A_log within float32's rounding)."""
    folder = every_layer_moe_qwen3_next(tmp_path)
    path = tmp_path / "qwen3_next.gguf"
    make_gguf.write_qwen3_next(path, folder)
    assert model_info(path)["model_type"] == "qwen3_next"
    for layer in (2, 4):
        from_folder, from_file = load_layer(folder, layer=layer, text=TEXT), load_layer(path, layer=layer, text=TEXT)
        assert from_file.token_ids == from_folder.token_ids
        np.testing.assert_allclose(from_file.W_Q, from_folder.W_Q, rtol=0, atol=0)
        np.testing.assert_allclose(weights_of(from_file), weights_of(from_folder), rtol=0, atol=1e-6)
    with pytest.raises(AttnError, match="Gated DeltaNet"):
        load_layer(path, layer=1, text=TEXT)
    from attncli.sources.checkpoints.gguf import open_model
    from attncli.sources.checkpoints.safetensors import Checkpoint

    file, hf = open_model(path).checkpoint, Checkpoint(folder)
    for name in ("linear_attn.in_proj_qkvz.weight", "linear_attn.conv1d.weight", "linear_attn.in_proj_ba.weight", "linear_attn.dt_bias",
                 "linear_attn.norm.weight", "mlp.experts.3.down_proj.weight"):  # fmt: skip
        assert np.array_equal(file.read(f"layers.0.{name}"), hf.read(f"model.layers.0.{name}")), name
    for name, bound in (("linear_attn.A_log", 2e-7), ("input_layernorm.weight", 1e-7)):  # −exp(A_log) and 1 + w in float32
        np.testing.assert_allclose(file.read(f"layers.0.{name}"), hf.read(f"model.layers.0.{name}"), rtol=0, atol=bound, err_msg=name)


def test_live_transformers_on_the_qwen3next_folder_equals_the_file(tmp_path):
    """transformers on the folder the qwen3next file was written from gives the file's gated-attention weights (1e-6; skips
    without torch)."""
    script = fixture_script()
    folder = every_layer_moe_qwen3_next(tmp_path)
    path = tmp_path / "qwen3_next.gguf"
    make_gguf.write_qwen3_next(path, folder)
    live = script.golden_with_inputs(folder, list(load_layer(path, layer=2, text=TEXT).token_ids), moe=True)  # the softmax layers'
    for at, layer in enumerate((2, 4)):
        np.testing.assert_allclose(weights_of(load_layer(path, layer=layer, text=TEXT)), live["attentions"][at], rtol=0, atol=1e-6)


def t5_file(tmp_path: Path) -> tuple[Path, Path]:
    """(a copy of the t5 fixture with llama.cpp's relative_attention_max_distance 128, its file as T5Model writes it)."""
    folder = tmp_path / "t5"
    shutil.copytree(HF / "t5", folder)
    config = json.loads((HF / "t5" / "config.json").read_text()) | {"relative_attention_max_distance": 128}
    (folder / "config.json").write_text(json.dumps(config))
    path = tmp_path / "t5.gguf"
    make_gguf.write_t5(path, folder)
    return folder, path


T5_BOUND = 2e-6  # tests/test_t5.py's bound of the folder against transformers
T5_ATTENTIONS = (("encoder", 2), ("decoder", 3), ("cross", 3))  # the fixture's stacks: 2 encoder layers, 3 decoder layers


def test_a_t5_file_gives_its_folder_s_three_attentions(tmp_path):
    """Every layer of the encoder, the decoder's self-attention and its cross-attention: the file (enc.blk.N, dec.blk.N,
    one token table, decoder_block_count) equals its folder (1e-9), with the same token ids, and its buckets reach 128
    positions, as llama.cpp's."""
    folder, path = t5_file(tmp_path)
    expected = golden("t5")
    text, target = str(expected["text"]), str(expected["decoder_text"])
    info = model_info(path)
    assert info["model_type"] == "t5"
    for attention, layers in T5_ATTENTIONS:
        for layer in range(1, layers + 1):
            chosen = None if attention == "encoder" else target
            from_folder = load_layer(folder, layer=layer, text=text, target=chosen, attention=attention)
            from_file = load_layer(path, layer=layer, text=text, target=chosen, attention=attention)
            assert from_file.token_ids == from_folder.token_ids
            for matrix in ("W_Q", "W_K", "W_V", "W_O"):
                assert np.array_equal(getattr(from_file, matrix), getattr(from_folder, matrix)), (attention, layer, matrix)
            np.testing.assert_allclose(weights_of(from_file), weights_of(from_folder), rtol=0, atol=1e-9)
    assert any("up to 128 positions apart" in note for note in load_layer(path, layer=1, text=text, attention="encoder").notes)


SENTENCES = ("The cat sat on the mat, then the cat slept.", "  Ｔｈｅ  ﬁne cat —  ½ ", "the\tcat\n\nsat", "</s> cat</s>", "ünïcödé", "a  b", "")


def test_a_t5_file_s_sentencepiece_vocabulary_tokenizes_as_transformers(tmp_path):
    """tests/checkpoints/gguf/t5-sentencepiece.gguf carries a SentencePiece unigram vocabulary (tokenizer model "t5": scores,
    types, add_space_prefix, remove_extra_whitespaces, the precompiled character map) as T5Model writes it: attncli's
    tokenizer from it gives the ids of transformers' own tokenizer.json for the same spiece.model, NFKC, runs of
    whitespace, special tokens and unknown characters included; and every layer of the three attentions equals the folder's."""
    from tokenizers import Tokenizer

    from attncli.sources.checkpoints.gguf import open_file
    from attncli.sources.checkpoints.gguf_tokens import gguf_tokenizer

    path = FIXTURES / "t5-sentencepiece.gguf"
    assert open_file(path).value("tokenizer.ggml.model") == "t5"
    reference = Tokenizer.from_file(str(HF / "t5" / "sentencepiece" / "tokenizer.json"))
    built = gguf_tokenizer(open_file(path)).tokenizer
    for sentence in SENTENCES:
        assert built.encode(sentence).ids == reference.encode(sentence).ids, sentence
    folder = make_gguf.t5_sentencepiece_folder(tmp_path)
    text, target = SENTENCES[1], "The cat"
    for attention, layers in T5_ATTENTIONS:
        for layer in range(1, layers + 1):
            chosen = None if attention == "encoder" else target
            from_folder = load_layer(folder, layer=layer, text=text, target=chosen, attention=attention)
            from_file = load_layer(path, layer=layer, text=text, target=chosen, attention=attention)
            assert from_file.token_ids == from_folder.token_ids and from_file.labels == from_folder.labels
            np.testing.assert_allclose(weights_of(from_file), weights_of(from_folder), rtol=0, atol=1e-9)


def test_the_t5_sentencepiece_fixture_is_what_the_script_writes(tmp_path):
    """The committed file is write_t5 on t5_sentencepiece_folder today (skips without sentencepiece, which reads spiece.model)."""
    pytest.importorskip("sentencepiece", reason="writing a T5 vocabulary reads spiece.model with sentencepiece (pip install sentencepiece)")
    make_gguf.write_t5(tmp_path / "t5.gguf", make_gguf.t5_sentencepiece_folder(tmp_path))
    assert (tmp_path / "t5.gguf").read_bytes() == (FIXTURES / "t5-sentencepiece.gguf").read_bytes()


def test_a_unigram_vocabulary_without_its_scores_is_one_line(tmp_path, monkeypatch):
    """A "t5" vocabulary whose scores do not pair with its tokens is refused in one line naming the key."""
    pytest.importorskip("sentencepiece", reason="writing a T5 vocabulary reads spiece.model with sentencepiece (pip install sentencepiece)")
    original = gguf.GGUFWriter.add_token_scores
    monkeypatch.setattr(gguf.GGUFWriter, "add_token_scores", lambda self, scores: original(self, scores[:-1]))
    path = tmp_path / "t5.gguf"
    make_gguf.write_t5(path, make_gguf.t5_sentencepiece_folder(tmp_path))
    with pytest.raises(AttnError) as caught:
        load_layer(path, layer=1, text="The cat", attention="encoder")
    assert "\n" not in str(caught.value) and "tokenizer.ggml.scores" in str(caught.value)


def test_live_transformers_on_the_t5_folder_equals_the_file(tmp_path):
    """transformers on the folder the t5 file was written from gives the file's three attentions on every layer (within the
    folder's own bound, test_t5's 2e-6: T5's RMSNorm takes its mean square in float32; skips without torch)."""
    script = fixture_script()
    folder, path = t5_file(tmp_path)
    expected = golden("t5")
    text, target = str(expected["text"]), str(expected["decoder_text"])
    source = load_layer(path, layer=1, text=text, attention="encoder").token_ids
    decoder = load_layer(path, layer=1, text=text, target=target, attention="decoder").token_ids
    live = script.golden_encoder_decoder(folder, list(source), list(decoder))
    for attention, layers in T5_ATTENTIONS:
        for layer in range(1, layers + 1):
            case = load_layer(path, layer=layer, text=text, target=None if attention == "encoder" else target, attention=attention)
            np.testing.assert_allclose(weights_of(case), live[f"{attention}_attentions"][layer - 1], rtol=0, atol=T5_BOUND, err_msg=f"{attention} {layer}")
