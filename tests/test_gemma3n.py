"""Gemma 3n (text): AltUp, Laurel, per-layer inputs, KV sharing, activation sparsity, q/k/v norms, scores × 1, two RoPE bases.

Against transformers 5.24's goldens in tests/checkpoints/gemma3n (scripts/make_checkpoints.py, FAMILIES_2026): every layer
and head. `*_float64` are transformers' run with its float32 steps (RMSNorm's cast, the RoPE angles, AltUp's router tanh,
the Gaussian top-k's Φ⁻¹, the softmax) computed in float64: attncli meets them to rounding (1e-14 measured; bound 1e-12).
The plain goldens are the model as transformers runs it: within 1e-5 (7e-6 measured at layer 6, where AltUp's float32
router has passed through five layers).
"""

import dataclasses
import json
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.variants import ValueNorm
from attncli.sources.checkpoints import gemma3n
from attncli.sources.checkpoints.families import read_config
from attncli.sources.checkpoints.layer import load_layer, model_info
from attncli.sources.checkpoints.scenario import layer_scenario
from tests.live import fixture_script

FOLDER = Path(__file__).parent / "checkpoints" / "gemma3n"
LAYERS = 6


def golden() -> dict[str, np.ndarray]:
    with np.load(FOLDER / "golden.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def weights_of(case: Any) -> np.ndarray:
    """(H, L, L) the engine's weights for the layer's scenario."""
    return np.stack([head.weights for head in engine.run(layer_scenario(case)).heads])


def edited(tmp_path: Path, **change: Any) -> Path:
    """A copy of the fixture whose config.json has `change` applied."""
    folder = tmp_path / "gemma3n"
    shutil.copytree(FOLDER, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    return folder


def renamed_tensors(folder: Path, prefix: str) -> None:
    """The folder's model.safetensors with every tensor's `model.` renamed to `prefix` (the header only: the bytes stay)."""
    path = folder / "model.safetensors"
    data = path.read_bytes()
    length = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + length])
    header = {(prefix + name.removeprefix("model.") if name != "__metadata__" else name): value for name, value in header.items()}
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length :])


@pytest.mark.parametrize("layer", range(1, LAYERS + 1))
def test_every_head_of_every_layer_matches_transformers_in_float64(layer):
    """Each layer's block input and every head's weights equal transformers' with its float32 steps in float64, to rounding."""
    expected = golden()
    case = load_layer(FOLDER, layer=layer, text=str(expected["text"]))
    assert case.token_ids == tuple(expected["ids"].tolist())
    np.testing.assert_allclose(case.X, expected["attention_inputs_float64"][layer - 1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights_of(case), expected["attentions_float64"][layer - 1], rtol=0, atol=1e-12)


@pytest.mark.parametrize("layer", range(1, LAYERS + 1))
def test_every_head_of_every_layer_matches_transformers_as_it_runs(layer):
    """Against transformers as it runs (float32 steps inside the float64 model), within 1e-5."""
    expected = golden()
    case = load_layer(FOLDER, layer=layer, text=str(expected["text"]))
    np.testing.assert_allclose(case.X, expected["attention_inputs"][layer - 1], rtol=0, atol=1e-5)
    np.testing.assert_allclose(weights_of(case), expected["attentions"][layer - 1], rtol=0, atol=1e-5)


def test_the_fixture_exercises_each_mechanism():
    """Two kinds of layer with their windows and θs, three layers sharing keys and values, two sparse MLPs, ids on both sides
    of the per-layer table's end."""
    cfg = read_config(FOLDER)
    s = gemma3n.settings(cfg)
    assert cfg.windows == (4, 4, None, 4, 4, None) and s.local_theta == 10_000 and cfg.rope.theta == 1_000_000
    assert s.sources == (0, 1, 2, 1, 1, 2)  # layers 4, 5 reuse layer 2's keys and values, layer 6 layer 3's
    assert s.sparsity[:2] == (0.95, 0.8) and not any(s.sparsity[2:]) and s.multipliers[2:] == (None,) * 4
    assert s.inner == (32, 32, 24, 32, 32, 32) and s.streams == 4 and s.laurel_rank == 4
    ids = golden()["ids"]
    assert (ids < s.per_layer_vocab).any() and (ids >= s.per_layer_vocab).any()


def test_a_shared_layer_reads_the_keys_and_values_of_the_layer_it_shares():
    """Layer 4 projects layer 2's input by layer 2's W_K and W_V (shown as keys from another input), with its own queries."""
    expected, text = golden(), str(golden()["text"])
    shared, source = load_layer(FOLDER, layer=4, text=text), load_layer(FOLDER, layer=2, text=text)
    assert source.X_kv is None and shared.X_kv is not None
    np.testing.assert_allclose(shared.X_kv, expected["attention_inputs_float64"][1], rtol=0, atol=1e-12)
    assert np.array_equal(shared.W_K, source.W_K) and np.array_equal(shared.W_V, source.W_V)
    assert np.array_equal(shared.qk_norm.k_weight, source.qk_norm.k_weight) and not np.array_equal(shared.W_Q, source.W_Q)
    assert shared.kv_from == 2 and source.kv_from is None and any("reuses layer 2's" in note for note in shared.notes)
    assert any(note.startswith("keys and values reused from layer 2") for note in layer_scenario(shared).notes)  # said in the header
    own_keys = dataclasses.replace(shared, X_kv=None, context_labels=None)  # keys from the layer's own input: not the model
    assert np.abs(weights_of(own_keys) - expected["attentions_float64"][3]).max() > 1e-3


def test_the_comparison_can_fail():
    """√d_k as the divisor, no value norm, or Gemma 3's (1 + w) in QK-norm each break the agreement."""
    expected = golden()
    case = load_layer(FOLDER, layer=3, text=str(expected["text"]))
    far = lambda changed: np.abs(weights_of(changed) - expected["attentions_float64"][2]).max()  # noqa: E731
    assert far(case) < 1e-12
    assert far(dataclasses.replace(case, divisor=np.sqrt(8))) > 1e-3
    assert far(dataclasses.replace(case, qk_norm=dataclasses.replace(case.qk_norm, offset=1.0))) > 1e-3
    run = engine.run(layer_scenario(case))
    unnormed = engine.run(layer_scenario(dataclasses.replace(case, variants=())))
    assert np.abs(run.output - unnormed.output).max() > 1e-3  # v_norm changes what the layer hands on


@pytest.mark.parametrize(
    "change", [{"activation_sparsity_pattern": [0.0] * 6}, {"altup_correct_scale": False}, {"num_kv_shared_layers": 0}]
)
def test_each_mechanism_changes_the_deep_layers(tmp_path, change):
    """The config's sparsity, AltUp's output scale and KV sharing each decide the later layers."""
    expected = golden()
    text = str(expected["text"])
    if change == {"num_kv_shared_layers": 0}:  # the shared layers have no k_proj of their own: refused by name, not guessed
        with pytest.raises(Exception, match="k_proj"):
            load_layer(edited(tmp_path, **change), layer=4, text=text)
        return
    case = load_layer(edited(tmp_path, **change), layer=5, text=text)
    assert np.abs(case.X - expected["attention_inputs_float64"][4]).max() > 1e-4


@pytest.mark.parametrize("prefix", ["model.language_model.", "language_model.model."])
def test_a_multimodal_folder_s_text_stack_is_read(tmp_path, prefix):
    """A gemma3n folder (text_config; tensors under the language model's prefix, transformers 5's and the older spelling)."""
    folder = tmp_path / "multimodal"
    shutil.copytree(FOLDER, folder)
    text_config = json.loads((folder / "config.json").read_text())
    config = {"model_type": "gemma3n", "architectures": ["Gemma3nForConditionalGeneration"], "text_config": text_config,
              "vision_config": {"model_type": "gemma3n_vision"}, "audio_config": {"model_type": "gemma3n_audio"}}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    renamed_tensors(folder, prefix)
    expected = golden()
    case = load_layer(folder, layer=6, text=str(expected["text"]))
    np.testing.assert_allclose(weights_of(case), expected["attentions_float64"][5], rtol=0, atol=1e-12)
    info = model_info(folder)
    assert info["supported"] is True and any("text_config" in m["text"] for m in info["mechanisms"])


def test_transformers_4_s_spelling_of_the_two_rope_bases_reads_the_same(tmp_path):
    """rope_theta and rope_local_base_freq at the top (transformers 4.53's Gemma3nTextConfig) give the same layers."""
    folder = tmp_path / "old"
    shutil.copytree(FOLDER, folder)
    config = json.loads((folder / "config.json").read_text())
    config.pop("rope_parameters")
    config.update(rope_theta=1_000_000.0, rope_local_base_freq=10_000.0, torch_dtype=config.pop("dtype"), transformers_version="4.53.0")
    (folder / "config.json").write_text(json.dumps(config))
    expected = golden()
    for layer in (1, 3):
        case = load_layer(folder, layer=layer, text=str(expected["text"]))
        np.testing.assert_allclose(weights_of(case), expected["attentions_float64"][layer - 1], rtol=0, atol=1e-12)
    config["rope_local_base_freq"] = 1_000_000.0  # the check can fail: the local θ decides the sliding layers
    (folder / "config.json").write_text(json.dumps(config))
    case = load_layer(folder, layer=1, text=str(expected["text"]))
    assert np.abs(weights_of(case) - expected["attentions_float64"][0]).max() > 1e-4


def test_a_multimodal_folder_without_text_config_is_one_error(tmp_path):
    """model_type gemma3n without a text_config mapping is refused naming the key."""
    folder = tmp_path / "multimodal"
    shutil.copytree(FOLDER, folder)
    (folder / "config.json").write_text(json.dumps({"model_type": "gemma3n", "text_config": [1]}))
    with pytest.raises(Exception, match="text_config"):
        read_config(folder)


def test_the_map_of_every_head_reads_the_shared_keys_too():
    """`attncli heads`' one pass gives the last layer (which shares layer 3's keys and values) the weights `run` shows."""
    from attncli.sources.checkpoints.headmap import model_map

    expected = golden()
    found = model_map(FOLDER, sentence=str(expected["text"])).map
    run = weights_of(load_layer(FOLDER, layer=LAYERS, text=str(expected["text"])))
    assert found.table("max_weight")[LAYERS - 1].tolist() == pytest.approx(run.max(axis=-1).mean(axis=-1).tolist(), abs=1e-12)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"activation_sparsity_pattern": [1.0] + [0.0] * 5}, "activation_sparsity_pattern"),  # Φ⁻¹(1) = ∞
        ({"activation_sparsity_pattern": [0.95]}, "activation_sparsity_pattern"),
        ({"intermediate_size": [32, 32]}, "intermediate_size"),
        ({"altup_active_idx": 1}, "altup_active_idx"),
        ({"altup_active_idx": 4}, "altup_active_idx"),
        ({"num_kv_shared_layers": 5}, "num_kv_shared_layers"),  # the full layers would share with none before them
        ({"layer_types": ["sliding_attention"] * 5 + ["chunked_attention"]}, "layer_types"),
        ({"rope_parameters": {"sliding_attention": {"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0},
                              "full_attention": {"rope_type": "default", "rope_theta": 1e6}}}, "rope_type"),
    ],
)  # fmt: skip
def test_a_config_attncli_cannot_compute_is_one_line_naming_its_key(tmp_path, change, key):
    """A Gemma 3n config outside what attncli computes exactly is refused in one line that names the key, never guessed."""
    from attncli.errors import AttnError

    with pytest.raises(AttnError) as caught:
        read_config(edited(tmp_path, **change))
    message = str(caught.value)
    assert message.count("\n") == 0 and key in message, message


def test_model_info_describes_every_mechanism():
    """`model info` names AltUp, Laurel, the per-layer inputs, the norms, the scale, both θs, sparsity and KV sharing."""
    info = model_info(FOLDER)
    assert info["supported"] is True and info["sliding_layers"] == [1, 2, 4, 5]
    said = " | ".join(m["text"] for m in info["mechanisms"])
    for words in ("AltUp: 4 residual streams", "Laurel: a rank-4", "per-layer inputs: 4 numbers", "v_norm without weight",
                  "scores × 1, not divided by √d_k", "θ = 10000 on the sliding layers and 1e+06",
                  "layer 1 keeps what lies above mean + 1.64485·std of each token's gate (Φ⁻¹(0.95)",
                  "layers 4, 5 reuse layer 2's keys and values", "layer 6 reuses layer 3's", "final logit soft-capping 30"):  # fmt: skip
        assert words in said, words
    assert "1 + w" not in said


def test_model_info_counts_the_cache_of_the_layers_that_keep_one():
    """The KV cache is counted over the 3 layers that make keys and values, not the 3 that reuse them."""
    cache = model_info(FOLDER)["kv_cache"]
    assert cache["numbers_per_layer"] == [32, 32, 32, 0, 0, 0] and cache["bytes_per_token"] == 3 * 32 * 4


def test_a_value_norm_divides_each_value_row_by_its_rms():
    """The variant's values are V / √(mean(V²) + ε), and the output weighs those."""
    case = load_layer(FOLDER, layer=1, text=str(golden()["text"]))
    head = engine.run(layer_scenario(case)).head(1)
    expected = head.V / np.sqrt((head.V**2).mean(axis=-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(head.value_normed, expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(head.output, head.weights @ expected, rtol=0, atol=1e-14)
    assert ValueNorm(1e-6).describe().startswith("value norm")


def test_decode_refuses_a_shared_layer_in_one_line_and_decodes_the_others(cli):
    """decode of a layer that reuses another's keys and values names --layer and KV sharing (not cross-attention's --attention);
    a layer that makes its own decodes."""
    refused = cli("decode", "--model", str(FOLDER), "--layer", "4", "--sentence", "The cat sat on")
    assert refused.exit_code != 0 and refused.stderr.count("\n") == 1
    assert "--layer" in refused.stderr and "KV sharing" in refused.stderr and "--attention" not in refused.stderr
    decoded = cli("decode", "--model", str(FOLDER), "--layer", "2", "--sentence", "The cat sat on")
    assert decoded.exit_code == 0 and "Decoding 'gemma3n layer 2" in decoded.stdout


def test_run_and_explain_say_kv_sharing_not_cross_attention(cli):
    """A shared layer's header and explain's introduction say whose keys they are, not 'cross-attention' and 'the context'."""
    args = ("--model", str(FOLDER), "--layer", "6", "--sentence", "The cat sat on")
    shown = cli("run", *args).stdout
    assert "keys (an earlier layer's, KV sharing)" in shown and "cross-attention" not in shown
    explained = cli("explain", *args, "--word", "on").stdout
    assert "KV sharing: this layer makes only its query" in explained and "from the context" not in explained


GGUF = Path(__file__).parent / "checkpoints" / "gguf" / "gemma3n.gguf"
IN_TABLE = "The cat sat"  # ids 0, 266, 264, 265: all inside the fixture's per-layer table of 268 rows


@pytest.mark.parametrize("layer", range(1, LAYERS + 1))
def test_a_gguf_file_reads_as_the_folder_it_came_from(layer):
    """llama.cpp's gemma3n file (scripts/make_gguf.py, as Gemma3NModel converts): every layer equals the folder's, to the float32
    the converter stores ε and Φ⁻¹(sparsity) in, for a sentence whose ids lie inside the per-layer table."""
    folder, file = load_layer(FOLDER, layer=layer, text=IN_TABLE), load_layer(GGUF, layer=layer, text=IN_TABLE)
    assert file.token_ids == folder.token_ids and max(file.token_ids) < 268
    np.testing.assert_allclose(file.X, folder.X, rtol=0, atol=5e-6)
    np.testing.assert_allclose(weights_of(file), weights_of(folder), rtol=0, atol=5e-6)
    assert (file.kv_from is None) == (folder.kv_from is None)


def test_a_gguf_file_reads_the_zero_rows_its_converter_padded_the_per_layer_table_with(tmp_path):
    """Past the original per-layer table, the file holds the converter's zero rows: read as such (said in the notes), the same
    as a folder whose table has those zero rows, and not transformers' row 0."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
    from make_checkpoints import safetensors_bytes
    from make_gguf import hf_tensors

    text = str(golden()["text"])
    tensors = hf_tensors(FOLDER)
    table = tensors["model.embed_tokens_per_layer.weight"]
    vocab = tensors["model.embed_tokens.weight"].shape[0]
    tensors["model.embed_tokens_per_layer.weight"] = np.concatenate([table, np.zeros((vocab - table.shape[0], table.shape[1]), np.float32)])
    padded = edited(tmp_path, vocab_size_per_layer_input=vocab)
    (padded / "model.safetensors").write_bytes(safetensors_bytes(tensors))
    file, zeros, folder = (load_layer(where, layer=3, text=text) for where in (GGUF, padded, FOLDER))
    np.testing.assert_allclose(weights_of(file), weights_of(zeros), rtol=0, atol=5e-6)
    assert np.abs(weights_of(file) - weights_of(folder)).max() > 1e-2
    assert any("pads the table with zero rows" in note for note in file.notes)


def test_a_gguf_file_s_stacked_altup_projections_are_the_folder_s():
    """altup_proj (3, d, d), stacked by the converter, gives each altup_projections.i back exactly."""
    from attncli.sources.checkpoints.gguf import open_model
    from attncli.sources.checkpoints.safetensors import Checkpoint

    model, folder = open_model(GGUF), Checkpoint(FOLDER)
    for i in range(3):
        name = f"altup_projections.{i}.weight"
        assert model.checkpoint.shape(name) == (16, 16)
        np.testing.assert_array_equal(model.checkpoint.read(name), folder.read("model." + name))


def test_model_info_reads_a_gguf_file_s_gemma3n():
    """model info on the GGUF file: supported, the multipliers the file stores, the shared layers and what the reading assumes."""
    info = model_info(GGUF)
    said = " | ".join(m["text"] for m in info["mechanisms"])
    assert info["supported"] is True and info["model_type"] == "gemma3n_text"
    assert "layer 1 keeps what lies above mean + 1.64485·std" in said and "layer 6 reuses layer 3's" in said
    assert info["kv_cache"]["numbers_per_layer"] == [32, 32, 32, 0, 0, 0]


def test_live_transformers_still_gives_the_goldens():
    """transformers, run now on the fixture by the fixture script's own code (both runs), gives every committed array to 1e-12
    (skips without torch): a transformers upgrade that changes Gemma 3n shows here first."""
    script = fixture_script()
    expected = golden()
    ids = expected["ids"].tolist()
    live = script.golden_with_inputs(FOLDER, ids)
    live.update({f"{key}_float64": value for key, value in script.golden_float64(FOLDER, ids, "gemma3n").items()})
    assert set(live) == set(expected) - {"text", "ids"}
    for key, array in live.items():
        np.testing.assert_allclose(array, expected[key], rtol=0, atol=1e-12, err_msg=key)


def test_live_transformers_meets_the_gguf_file_inside_the_per_layer_table():
    """transformers on the folder (float32 steps in float64), given the GGUF file's tokens of a sentence inside the per-layer
    table, gives every layer's weights of attncli's reading of the file within the file's float32 ε and Φ⁻¹ (skips without torch)."""
    script = fixture_script()
    cases = [load_layer(GGUF, layer=layer, text=IN_TABLE) for layer in range(1, LAYERS + 1)]
    live = script.golden_float64(FOLDER, list(cases[0].token_ids), "gemma3n")["attentions"]
    for layer, case in enumerate(cases, start=1):
        np.testing.assert_allclose(weights_of(case), live[layer - 1], rtol=0, atol=5e-6, err_msg=f"layer {layer}")


@pytest.mark.parametrize(
    ("keys", "drop", "words"),
    [
        ({"gemma3n.activation_sparsity_scale": ([float("nan")] * 6, "ARRAY", "FLOAT32")}, (), "activation_sparsity_scale"),
        ({"gemma3n.activation_sparsity_scale": ([1.0] * 5, "ARRAY", "FLOAT32")}, (), "activation_sparsity_scale"),
        ({"gemma3n.feed_forward_length": ([32] * 5, "ARRAY", "UINT32")}, (), "intermediate_size"),
        ({"gemma3n.attention.shared_kv_layers": (5, "UINT32")}, (), "num_kv_shared_layers"),
        ({}, ("gemma3n.embedding_length_per_layer_input",), "embedding_length_per_layer_input"),
    ],
)  # fmt: skip
def test_a_hostile_gguf_file_is_one_line_naming_what_is_wrong(tmp_path, keys, drop, words):
    """A gemma3n file whose Φ⁻¹ are not numbers, whose per-layer lists are short, whose shared layers leave a kind without a
    layer to share, or whose per-layer width is missing, is refused in one line that names it."""
    pytest.importorskip("gguf", reason="the hostile GGUF files are written with llama.cpp's writer: pip install gguf")
    from attncli.errors import AttnError
    from tests import gguf_mutants

    path = gguf_mutants.rewrite(tmp_path / "hostile.gguf", "gemma3n.gguf", set_keys=keys, drop=drop)
    with pytest.raises(AttnError) as caught:
        load_layer(path, layer=2, text=IN_TABLE)
    message = str(caught.value)
    assert message.count("\n") == 0 and words in message, message
