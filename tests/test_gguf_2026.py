"""GGUF files of issue 30's families: Granite, Seed-OSS, ERNIE 4.5, EXAONE 4, GLM-4, GLM-4.5 and Hunyuan dense (committed), OLMo 3,
Qwen3-MoE and Llama 4 (written in the test from folders with what llama.cpp can store).

tests/checkpoints/gguf/<family>.gguf are written by scripts/make_gguf.py (`write_converted`) from the tiny Hugging Face
fixtures beside them, with gguf-py's tensor names as convert_hf_to_gguf.py's map_tensor_name gives them, W_Q and W_K
permuted to interleaved pairs for granite (GraniteModel is LlamaModel's converter) and Granite's multipliers as
granite.attention.scale, embedding_scale, residual_scale and logit_scale. attncli on the file must equal attncli on the
folder (1e-9; Granite's multipliers are float32 in the metadata: 1e-7), and so transformers' goldens (1e-6). GLM-4.5's
file (`write_glm4_moe`) merges the routed experts and keeps DeepSeek V3's routing keys; OLMo 3's and Qwen3-MoE's are
written in the test from folders the converter can convert (one RoPE for both layer kinds; experts in every layer).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario
from tests.test_gguf import make_gguf

gguf = pytest.importorskip("gguf")

HF = Path(__file__).parent / "checkpoints"
FIXTURES = HF / "gguf"
FOLDER_BOUND = {"granite": 1e-7}  # attention_multiplier 0.2, residual_multiplier 0.4 as float32


def golden(name: str) -> dict[str, np.ndarray]:
    with np.load(HF / name / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case) -> np.ndarray:
    """(H, L, L) the engine's weights for the layer's scenario."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


WRITERS = {**{name: lambda path, name=name: make_gguf.write_converted(name, path) for name in make_gguf.CONVERTED},
           "glm4_moe": make_gguf.write_glm4_moe, "hunyuan_v1_dense": make_gguf.write_hunyuan_dense}  # fixture -> how scripts/make_gguf.py writes its file  # fmt: skip
CASES = [(name, layer) for name in WRITERS for layer in range(1, golden(name)["attentions"].shape[0] + 1)]


def test_the_fixtures_are_what_the_script_writes(tmp_path):
    """The committed files are the script's output today (the writer is deterministic)."""
    for name, write in WRITERS.items():
        path = tmp_path / f"{name}.gguf"
        write(path)
        assert path.read_bytes() == (FIXTURES / path.name).read_bytes(), name


@pytest.mark.parametrize(("name", "layer"), CASES)
def test_the_file_gives_the_folder_s_attention_and_transformers_goldens(name, layer):
    """Every head of every layer: the file equals its folder, hence transformers' goldens (1e-6), with the same token ids."""
    expected = golden(name)
    text = str(expected["text"])
    from_folder = load_layer(HF / name, layer=layer, text=text)
    from_file = load_layer(FIXTURES / f"{name}.gguf", layer=layer, text=text)
    assert from_file.token_ids == from_folder.token_ids == tuple(expected["ids"].tolist())
    for matrix in ("W_Q", "W_K", "W_V", "W_O"):
        assert np.array_equal(getattr(from_file, matrix), getattr(from_folder, matrix)), matrix
    assert (from_file.b_O is None) == (from_folder.b_O is None) and (from_file.b_Q is None) == (from_folder.b_Q is None)
    assert from_file.window == from_folder.window and (from_file.rope is None) == (from_folder.rope is None)  # EXAONE 4's kinds
    bound = FOLDER_BOUND.get(name, 1e-9)
    np.testing.assert_allclose(from_file.X, from_folder.X, rtol=0, atol=bound * 10)
    np.testing.assert_allclose(weights_of(from_file), weights_of(from_folder), rtol=0, atol=bound)
    np.testing.assert_allclose(weights_of(from_file), expected["attentions"][layer - 1], rtol=0, atol=1e-6)


def test_granite_s_multipliers_come_from_the_metadata():
    """The file's attention.scale is the divisor's inverse; its model info names the multipliers as the folder's does."""
    case = load_layer(FIXTURES / "granite.gguf", layer=1, text="The cat")
    assert case.divisor == pytest.approx(5.0, rel=1e-6)
    text = " | ".join(m["text"] for m in model_info(FIXTURES / "granite.gguf")["mechanisms"])
    assert "attention_multiplier = 0.2" in text and "residual_multiplier = 0.4" in text


def test_granite_without_attention_scale_takes_llama_cpp_s_default(tmp_path, monkeypatch):
    """A granite file without attention.scale is scaled by 1/√d_k, as llama.cpp reads it (it writes the key only when set)."""
    path = tmp_path / "granite.gguf"
    monkeypatch.setattr(gguf.GGUFWriter, "add_attention_scale", lambda self, value: None)
    make_gguf.write_converted("granite", path)
    assert load_layer(path, layer=1, text="The cat").divisor == pytest.approx(np.sqrt(8))


def test_an_olmo3_file_is_read_as_olmo3(tmp_path):
    """llama.cpp writes OLMo 3 as architecture olmo2 with a sliding window: attncli reads it as OLMo 3, windows included,
    and every head of every layer equals the folder's (one RoPE for both kinds: what the converter can store)."""
    import json
    import shutil

    folder = tmp_path / "olmo3"
    shutil.copytree(HF / "olmo3", folder)
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0}
    (folder / "config.json").write_text(json.dumps(config))
    path = tmp_path / "olmo3.gguf"
    make_gguf.write_olmo3(path, folder)
    info = model_info(path)
    assert info["model_type"] == "olmo3" and info["sliding_layers"] == [1, 3]
    text = str(golden("olmo3")["text"])
    for layer in (1, 2, 3):
        from_folder, from_file = load_layer(folder, layer=layer, text=text), load_layer(path, layer=layer, text=text)
        assert from_file.window == from_folder.window == (3 if layer != 2 else None)
        np.testing.assert_allclose(weights_of(from_file), weights_of(from_folder), rtol=0, atol=1e-9)


def every_layer_moe(tmp_path: Path) -> Path:
    """The qwen3_moe fixture with layer 2's dense MLP replaced by random experts and a router (mlp_only_layers []), as every
    published Qwen3-MoE has it; what gguf-py can convert."""
    import json
    import shutil

    folder = tmp_path / "qwen3_moe"
    folder.mkdir()
    shutil.copy(HF / "qwen3_moe" / "tokenizer.json", folder)
    config = json.loads((HF / "qwen3_moe" / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "mlp_only_layers": []}))
    tensors = {k: v for k, v in make_gguf.raw_tensors(HF / "qwen3_moe").items() if not k.startswith("model.layers.1.mlp.")}
    rng = np.random.default_rng(30)
    d, inner, experts = config["hidden_size"], config["moe_intermediate_size"], config["num_local_experts"]
    tensors["model.layers.1.mlp.gate.weight"] = rng.normal(0, 0.3, (experts, d)).astype(np.float32)
    for e in range(experts):
        for what, shape in (("gate", (inner, d)), ("up", (inner, d)), ("down", (d, inner))):
            tensors[f"model.layers.1.mlp.experts.{e}.{what}_proj.weight"] = rng.normal(0, 0.3, shape).astype(np.float32)
    make_gguf.save_safetensors(folder / "model.safetensors", tensors)
    return folder


def test_a_qwen3moe_file_gives_its_folder_s_attention(tmp_path):
    """A Qwen3-MoE GGUF (experts merged, router as ffn_gate_inp) equals its folder on every head of every layer: the experts
    taken out of the merged tensors route and compute as the folder's do (the folder's own agreement with transformers is
    tests/test_llama_like_2026.py's)."""
    folder = every_layer_moe(tmp_path)
    path = tmp_path / "qwen3_moe.gguf"
    make_gguf.write_qwen3_moe(path, folder)
    assert model_info(path)["model_type"] == "qwen3_moe"
    text = str(golden("qwen3_moe")["text"])
    for layer in (1, 2, 3):
        from_folder, from_file = load_layer(folder, layer=layer, text=text), load_layer(path, layer=layer, text=text)
        np.testing.assert_allclose(weights_of(from_file), weights_of(from_folder), rtol=0, atol=1e-9)
    routed = [n for n in load_layer(path, layer=3, text=text).notes if "MoE MLP" in n]
    assert len(routed) == 2  # layers 1 and 2 both mixtures of experts


def four_layer_cohere2(tmp_path: Path) -> Path:
    """The cohere2 fixture grown to four layers (layer 4 a copy of layer 2) without layer_types: Cohere2Config's default,
    layers 1–3 sliding and layer 4 global, the only pattern llama.cpp reads from a cohere2 file."""
    import json
    import shutil

    folder = tmp_path / "cohere2"
    folder.mkdir()
    shutil.copy(HF / "cohere2" / "tokenizer.json", folder)
    config = json.loads((HF / "cohere2" / "config.json").read_text())
    config = {k: v for k, v in config.items() if k != "layer_types"} | {"num_hidden_layers": 4}
    (folder / "config.json").write_text(json.dumps(config))
    tensors = make_gguf.raw_tensors(HF / "cohere2")
    tensors |= {k.replace("layers.1.", "layers.3."): v for k, v in tensors.items() if k.startswith("model.layers.1.")}
    make_gguf.save_safetensors(folder / "model.safetensors", tensors)
    return folder


def test_a_cohere2_file_gives_its_folder_s_attention(tmp_path):
    """A Command R7B GGUF (rows kept, LayerNorm's ε, the window; every 4th layer global as llama.cpp has it) equals its
    folder on every head of every layer, the global layer 4 without RoPE."""
    folder = four_layer_cohere2(tmp_path)
    path = tmp_path / "cohere2.gguf"
    make_gguf.write_cohere2(path, folder)
    assert model_info(path)["sliding_layers"] == [1, 2, 3]
    text = str(golden("cohere2")["text"])
    for layer in (1, 2, 3, 4):
        from_folder, from_file = load_layer(folder, layer=layer, text=text), load_layer(path, layer=layer, text=text)
        assert from_file.window == from_folder.window and (from_file.rope is None) == (from_folder.rope is None) == (layer == 4)
        np.testing.assert_allclose(weights_of(from_file), weights_of(from_folder), rtol=0, atol=1e-9)


def llama4_as_llama_cpp_fixes_it(tmp_path: Path, rope: dict | None) -> Path:
    """The llama4_text fixture with the values llama.cpp fixes for every llama4 file (chunks of 8192, NoPE on every 4th layer,
    temperature floor 8192 and scale 0.1), and `rope` in place of its llama3 RoPE when given."""
    import json
    import shutil

    folder = tmp_path / "llama4_text"
    shutil.copytree(HF / "llama4_text", folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(no_rope_layers=[1, 1, 1, 0], layer_types=["chunked_attention"] * 3 + ["full_attention"], attention_chunk_size=8192,
                  floor_scale=8192, attn_scale=0.1, **({"rope_parameters": rope} if rope else {}))  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(("rope", "bound"), [({"rope_type": "default", "rope_theta": 500000.0}, 1e-9), (None, 1e-7)])
def test_a_llama4_file_gives_its_folder_s_attention(tmp_path, rope, bound):
    """A Llama 4 GGUF (Llama4Model: nothing permuted, experts split into ffn_gate_exps and ffn_up_exps, shared expert, router)
    equals its folder on every head of every layer: chunks, NoPE and temperature as llama.cpp fixes them, QK-norm after RoPE
    on the RoPE layers. With llama3 scaling the file's rope_freqs are float32 divisors: 3.5e-8 from the folder's float64 ones."""
    folder = llama4_as_llama_cpp_fixes_it(tmp_path, rope)
    path = tmp_path / "llama4.gguf"
    make_gguf.write_llama4(path, folder)
    assert model_info(path)["model_type"] == "llama4_text"
    text = str(golden("llama4_text")["text"])
    for layer in (1, 2, 3, 4):
        from_folder, from_file = load_layer(folder, layer=layer, text=text), load_layer(path, layer=layer, text=text)
        assert (from_file.rope is None, from_file.chunk, [type(v) for v in from_file.variants]) == (
            from_folder.rope is None, from_folder.chunk, [type(v) for v in from_folder.variants])
        np.testing.assert_allclose(weights_of(from_file), weights_of(from_folder), rtol=0, atol=bound)
    assert sum("MoE MLP" in note for note in load_layer(path, layer=4, text=text).notes) == 1  # layer 2's experts, taken out of the file


def test_a_llama4_file_without_chunks_is_refused(tmp_path, monkeypatch):
    """sliding_window 0 (llama.cpp's MobileLLM branch, whose RoPE layers it sets otherwise) is one error naming the key."""
    from attncli.errors import AttnError

    folder = llama4_as_llama_cpp_fixes_it(tmp_path, {"rope_type": "default", "rope_theta": 500000.0})
    path = tmp_path / "llama4.gguf"
    original = gguf.GGUFWriter.add_expert_feed_forward_length

    def with_no_window(self, length):  # as Llama4Model writes a folder whose layer_types are all full_attention
        original(self, length)
        self.add_sliding_window(0)

    monkeypatch.setattr(gguf.GGUFWriter, "add_expert_feed_forward_length", with_no_window)
    make_gguf.write_llama4(path, folder)
    with pytest.raises(AttnError) as caught:
        load_layer(path, layer=1, text="The cat")
    assert caught.value.key == "llama4.attention.sliding_window"
