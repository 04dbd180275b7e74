"""Write tiny GGUF files with llama.cpp's own writer (gguf-py's GGUFWriter), laid out as llama.cpp's converter lays them out.

    pip install gguf tokenizers          # no torch, no transformers
    python scripts/make_gguf.py          # tests/checkpoints/gguf/*.gguf

From the tiny Hugging Face fixtures of tests/checkpoints (llama, qwen2, mistral, gpt2, bert), each
tensor is renamed as convert_hf_to_gguf.py names it (blk.N.attn_q.weight …), the rows of W_Q and
W_K of llama-architecture models are permuted per head as the converter permutes them (rotate-half
pairs (i, i + d/2) become interleaved pairs (2i, 2i + 1)), GPT-2's Conv1D weights are transposed to
nn.Linear's layout, llama3 RoPE scaling becomes a `rope_freqs` tensor, and the tokenizer.json's
vocabulary, merges, token types and BOS setting go into the tokenizer.ggml.* metadata. Weights are
stored in the dtype the fixture has (F32, or F16 for the float16 Mistral; bfloat16 as F32, exactly).
Mistral is written with architecture "llama", as the converter writes it; llama.cpp's converter
stores no sliding window for llama or qwen2, so neither file has one.

The families of issue 20 (qwen3, olmo2, phi3, gpt_neox, gemma3) are written by `write_family` as
<name>.gguf (F32) and <name>-q8_0.gguf (Q8_0 where a matrix's rows fill whole blocks, F16 elsewhere),
with the converter's names, GPT-NeoX's query_key_value regrouped to all q | all k | all v, and Gemma 3's
norms stored as 1 + w.

`quantised.gguf` is a Llama-shaped model (d_model 256, so every matrix's rows fill whole blocks)
whose matrices use every quantisation type attncli reads, one type per matrix, with random weights
quantised by gguf.quants where it can quantise (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, BF16) and random
blocks with fp16 scales in range for the K-quants and IQ4_NL (gguf-py only dequantises those).

This module is also imported by the tests (`llama_like`, `write_*`) to build broken files and
larger cases in a temporary folder.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "tests" / "checkpoints" / "gguf"
HF = ROOT / "tests" / "checkpoints"

NORMAL, CONTROL, USER_DEFINED = 1, 3, 4


# ---------------------------------------------------------------- reading the HF fixtures


def hf_tensors(folder: Path) -> dict[str, np.ndarray]:
    """Every tensor of a fixture, in float32 (its float16/bfloat16 values exactly), keyed by its name."""
    from attncli.sources.checkpoints.safetensors import Checkpoint

    checkpoint = Checkpoint(folder)
    return {name: checkpoint.read(name).astype(np.float32) for name in sorted(checkpoint.names)}


def tokenizer_metadata(folder: Path) -> dict[str, Any]:
    """tokens, token types, merges, bos/eos ids and add_bos from a byte-level BPE tokenizer.json."""
    raw = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab: dict[str, int] = dict(raw["model"]["vocab"])
    added = {t["content"]: t for t in raw["added_tokens"]}
    for content, token in added.items():
        vocab[content] = token["id"]
    tokens = [""] * (max(vocab.values()) + 1)
    for token, i in vocab.items():
        tokens[i] = token
    types = [CONTROL if t in added and added[t]["special"] else USER_DEFINED if t in added else NORMAL for t in tokens]
    merges = [m if isinstance(m, str) else " ".join(m) for m in raw["model"]["merges"]]
    post = json.dumps(raw.get("post_processor"))
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return {
        "tokens": tokens, "types": types, "merges": merges,
        "bos": config.get("bos_token_id"), "eos": config.get("eos_token_id"),
        "add_bos": '"<s>"' in post and "TemplateProcessing" in post,
    }  # fmt: skip


# ---------------------------------------------------------------- llama.cpp's layout


def permute(rows: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's rows (2, d/2) → (d/2, 2)."""
    return rows.reshape(heads, 2, rows.shape[0] // heads // 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


LLAMA_NAMES = {
    "embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
}  # fmt: skip
GPT2_NAMES = {
    "wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight", "ln_f.weight": "output_norm.weight", "ln_f.bias": "output_norm.bias",
    "ln_1.weight": "attn_norm.weight", "ln_1.bias": "attn_norm.bias", "attn.c_attn.weight": "attn_qkv.weight", "attn.c_attn.bias": "attn_qkv.bias",
    "attn.c_proj.weight": "attn_output.weight", "attn.c_proj.bias": "attn_output.bias", "ln_2.weight": "ffn_norm.weight", "ln_2.bias": "ffn_norm.bias",
    "mlp.c_fc.weight": "ffn_up.weight", "mlp.c_fc.bias": "ffn_up.bias", "mlp.c_proj.weight": "ffn_down.weight", "mlp.c_proj.bias": "ffn_down.bias",
}  # fmt: skip


def gguf_name(hf: str, names: dict[str, str]) -> str | None:
    for prefix in ("model.", "transformer."):
        hf = hf.removeprefix(prefix)
    for layer_prefix in ("layers.", "h."):
        if hf.startswith(layer_prefix):
            index, _, rest = hf[len(layer_prefix) :].partition(".")
            return f"blk.{index}.{names[rest]}" if rest in names else None
    return names.get(hf)


def llama3_factors(rope: dict[str, Any], head_dim: int) -> np.ndarray:
    """What llama.cpp's converter stores as rope_freqs for llama3 scaling: per frequency, base / scaled."""
    theta = rope["rope_theta"]
    base = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    factor, low, high, original = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"], rope["original_max_position_embeddings"]
    out = []
    for freq in base:
        wavelen = 2 * math.pi / freq
        if wavelen < original / high:
            out.append(1.0)
        elif wavelen > original / low:
            out.append(factor)
        else:
            smooth = (original / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def _tokenizer(writer: Any, meta: dict[str, Any]) -> None:
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt2")  # the fixtures split text with GPT-2's own regular expression
    writer.add_token_list(meta["tokens"])
    writer.add_token_types(meta["types"])
    writer.add_token_merges(meta["merges"])
    if meta["bos"] is not None:
        writer.add_bos_token_id(meta["bos"])
    if meta["eos"] is not None:
        writer.add_eos_token_id(meta["eos"])
    writer.add_add_bos_token(bool(meta["add_bos"]))


def _finish(writer: Any) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_llama_family(name: str, path: Path) -> None:
    """A llama, qwen2 or mistral fixture as the converter writes it (mistral as architecture llama)."""
    import gguf

    folder = HF / name
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    arch = "qwen2" if config["model_type"] == "qwen2" else "llama"
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    rope = config["rope_parameters"]
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name(f"attncli tiny {name}")
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(rope["rope_theta"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_file_type(1 if config.get("dtype") == "float16" else 0)
    _tokenizer(writer, tokenizer_metadata(folder))
    float16 = config.get("dtype") == "float16"
    if rope.get("rope_type") == "llama3":
        writer.add_tensor("rope_freqs.weight", llama3_factors(rope, head_dim))
    for hf, value in hf_tensors(folder).items():
        target = gguf_name(hf, LLAMA_NAMES)
        if target is None:
            continue
        if arch == "llama" and ".attn_q." in target:
            value = permute(value, heads)
        elif arch == "llama" and ".attn_k." in target:
            value = permute(value, kv_heads)
        stored = value.astype(np.float16) if float16 and value.ndim == 2 else value  # llama.cpp keeps norms in F32
        writer.add_tensor(target, np.ascontiguousarray(stored))
    _finish(writer)


def write_gpt2(path: Path) -> None:
    import gguf

    folder = HF / "gpt2"
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    writer = gguf.GGUFWriter(path, "gpt2")
    writer.add_name("attncli tiny gpt2")
    writer.add_block_count(config["n_layer"])
    writer.add_context_length(config["n_positions"])
    writer.add_embedding_length(config["n_embd"])
    writer.add_feed_forward_length(4 * config["n_embd"])
    writer.add_head_count(config["n_head"])
    writer.add_layer_norm_eps(config["layer_norm_epsilon"])
    writer.add_file_type(0)
    _tokenizer(writer, tokenizer_metadata(folder))
    for hf, value in hf_tensors(folder).items():
        target = gguf_name(hf, GPT2_NAMES)
        if target is None:
            continue
        if value.ndim == 2 and any(hf.endswith(s) for s in ("c_attn.weight", "c_proj.weight", "c_fc.weight")):
            value = value.T  # Conv1D (in, out) → nn.Linear (out, in), as the converter writes it
        writer.add_tensor(target, np.ascontiguousarray(value))
    _finish(writer)


BERT_NAMES = {
    "embeddings.word_embeddings.weight": "token_embd.weight", "embeddings.position_embeddings.weight": "position_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "embeddings.LayerNorm.weight": "token_embd_norm.weight", "embeddings.LayerNorm.bias": "token_embd_norm.bias",
    **{f"attention.self.{hf}.{p}": f"{gg}.{p}" for hf, gg in (("query", "attn_q"), ("key", "attn_k"), ("value", "attn_v")) for p in ("weight", "bias")},
    **{f"{hf}.{p}": f"{gg}.{p}" for hf, gg in (("attention.output.dense", "attn_output"), ("attention.output.LayerNorm", "attn_output_norm"),
                                               ("intermediate.dense", "ffn_up"), ("output.dense", "ffn_down"),
                                               ("output.LayerNorm", "layer_output_norm")) for p in ("weight", "bias")},
}  # fmt: skip


def write_bert(path: Path) -> None:
    """The BERT fixture as llama.cpp's converter writes it: WordPiece tokens respelled ("▁" starts a word, "##" dropped)."""
    import gguf

    folder = HF / "bert"
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    raw = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = raw["model"]["vocab"]
    pieces = sorted(vocab, key=vocab.get)
    special = {t["content"] for t in raw["added_tokens"] if t["special"]}
    tokens = [t if t.startswith("[") and t.endswith("]") else t[2:] if t.startswith("##") else "▁" + t for t in pieces]
    writer = gguf.GGUFWriter(path, "bert")
    writer.add_name("attncli tiny bert")
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_layer_norm_eps(config["layer_norm_eps"])
    writer.add_causal_attention(False)
    writer.add_tokenizer_model("bert")
    writer.add_token_list(tokens)
    writer.add_token_types([CONTROL if t in special else NORMAL for t in pieces])
    writer.add_unk_token_id(vocab["[UNK]"])
    writer.add_sep_token_id(vocab["[SEP]"])
    writer.add_pad_token_id(vocab["[PAD]"])
    writer.add_uint32("tokenizer.ggml.cls_token_id", vocab["[CLS]"])
    writer.add_mask_token_id(vocab["[MASK]"])
    for hf, value in hf_tensors(folder).items():
        name = hf.removeprefix("bert.")
        if name.startswith("encoder.layer."):
            index, _, rest = name[len("encoder.layer.") :].partition(".")
            target = f"blk.{index}.{BERT_NAMES[rest]}" if rest in BERT_NAMES else None
        else:
            target = BERT_NAMES.get(name)
        if target is not None:
            writer.add_tensor(target, np.ascontiguousarray(value))
    _finish(writer)


def write_sentencepiece(path: Path) -> None:
    """A one-layer file whose tokenizer is SentencePiece BPE as Llama 2 GGUFs store it: scores, byte tokens, no merges."""
    import gguf

    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, CONTROL, CONTROL] + [6] * 256  # unknown, control, bytes
    words = ["▁", "t", "h", "e", "c", "a", "s", "o", "n", "m", "▁t", "he", "▁the", "▁c", "at", "▁cat", "▁s", "▁sat", "on", "▁on",
             "▁m", "▁mat", "▁a", "▁ca", "th", "▁th"]  # fmt: skip
    writer = gguf.GGUFWriter(path, "llama")
    for add, value in ((writer.add_block_count, 1), (writer.add_context_length, 64), (writer.add_embedding_length, 8),
                       (writer.add_feed_forward_length, 16), (writer.add_head_count, 2)):  # fmt: skip
        add(value)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(pieces + words)
    writer.add_token_types(types + [NORMAL] * len(words))
    writer.add_token_scores([0.0] * len(pieces) + [-float(i) for i in range(len(words))])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_tensor("token_embd.weight", np.zeros((len(pieces) + len(words), 8), np.float32))
    _finish(writer)


# ---------------------------------------------------------------- the families of issue 20

FAMILIES = {"qwen3": "qwen3", "olmo2": "olmo2", "phi3": "phi3", "gpt_neox": "gptneox", "gemma3": "gemma3"}  # fixture -> GGUF architecture
FAMILY_NAMES = {
    **LLAMA_NAMES,
    "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
    "self_attn.qkv_proj.weight": "attn_qkv.weight", "mlp.gate_up_proj.weight": "ffn_up.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight", "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "embed_in.weight": "token_embd.weight", "final_layer_norm.weight": "output_norm.weight", "final_layer_norm.bias": "output_norm.bias",
    "embed_out.weight": "output.weight", "lm_head.weight": "output.weight",
    **{f"{hf}.{p}": f"{gg}.{p}" for hf, gg in (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm"),
                                               ("attention.query_key_value", "attn_qkv"), ("attention.dense", "attn_output"),
                                               ("mlp.dense_h_to_4h", "ffn_up"), ("mlp.dense_4h_to_h", "ffn_down")) for p in ("weight", "bias")},
}  # fmt: skip


def neox_fused(rows: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf.py's GPTNeoXModel: query_key_value per head (q, k, v of head 1, …) → all q, all k, all v."""
    return rows.reshape(heads, 3, -1, *rows.shape[1:]).swapaxes(0, 1).reshape(rows.shape)


def write_family(name: str, path: Path, *, quantised: str | None = None) -> None:
    """A Qwen3, OLMo 2, Phi-3 or GPT-NeoX fixture as the converter writes it.

    With `quantised` (Q8_0), each matrix whose rows fill whole blocks is stored so, the other matrices
    as F16 and the norms as F32, as llama.cpp's quantiser leaves a tensor whose rows do not fit its blocks.
    """
    import gguf

    folder = HF / name
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    arch = FAMILIES[name]
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    rope = config["rope_parameters"]
    rope = rope.get("full_attention", rope)  # Gemma 3: the global layers' θ (the converter stores no local one)
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name(f"attncli tiny {name}" + (f" {quantised}" if quantised else ""))
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_rope_dimension_count(int(rope.get("partial_rotary_factor", 1.0) * head_dim))
    writer.add_rope_freq_base(rope["rope_theta"])
    if arch == "gptneox":
        writer.add_parallel_residual(config.get("use_parallel_residual", True))
        writer.add_layer_norm_eps(config["layer_norm_eps"])
    else:
        writer.add_head_count_kv(config["num_key_value_heads"])
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
        writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
        if arch in ("phi3", "gemma3") and config.get("sliding_window"):
            writer.add_sliding_window(config["sliding_window"])
    writer.add_file_type(7 if quantised else 0)
    _tokenizer(writer, tokenizer_metadata(folder))
    for hf, value in hf_tensors(folder).items():
        rest = hf.removeprefix("model.").removeprefix("gpt_neox.")
        if arch == "gemma3" and hf.endswith("norm.weight"):
            value = value + np.float32(1)  # Gemma3Model.norm_shift: llama.cpp multiplies by the weight, transformers by 1 + w
        if arch == "gemma3" and hf.endswith("embed_tokens.weight"):
            raw = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
            value = value[: len(raw["model"]["vocab"]) + len(raw["added_tokens"])]  # the converter drops rows past the vocabulary
        if arch in ("olmo2", "gemma3"):  # their post_attention_layernorm is a norm after attention, not before the MLP
            rest = rest.replace("post_attention_layernorm", "post_attention_norm_")
        names = {**FAMILY_NAMES, "post_attention_norm_.weight": "post_attention_norm.weight"}
        target = gguf_name(rest, names)
        if target is None:
            continue
        if arch == "gptneox" and ".attn_qkv." in target:
            value = neox_fused(value, heads)
        if quantised and value.ndim == 2:
            qtype = gguf.GGMLQuantizationType[quantised]
            if value.shape[1] % gguf.GGML_QUANT_SIZES[qtype][0] == 0:
                writer.add_tensor(target, gguf.quants.quantize(value, qtype), raw_dtype=qtype)
                continue
            value = value.astype(np.float16)
        writer.add_tensor(target, np.ascontiguousarray(value))
    _finish(writer)


# ---------------------------------------------------------------- every quantisation type in one model

QUANTISED_TYPES = {
    # layer 0 and layer 1: (W_Q, W_K, W_V, W_O, gate, up, down)
    0: ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K"),
    1: ("Q4_K", "Q5_K", "Q6_K", "Q8_0", "IQ4_NL", "BF16", "F16"),
}
EMBEDDING_TYPE = "Q6_K"
HALF_FIELDS = {"Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,), "IQ4_NL": (0,)}


def quantised_bytes(kind: str, values: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, Any]:
    """(rows, bytes per row) of `values` quantised as `kind` by gguf.quants, or random blocks with a scale near the values'."""
    import gguf

    qtype = gguf.GGMLQuantizationType[kind]
    if kind in ("F16",):
        return values.astype(np.float16), None
    if kind not in HALF_FIELDS:
        return gguf.quants.quantize(values.astype(np.float32), qtype), qtype
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    rows, cols = values.shape
    raw = rng.integers(0, 256, size=(rows * cols // block, size), dtype=np.uint8)
    scale = float(np.abs(values).max()) / {"Q2_K": 48, "Q3_K": 128, "Q6_K": 2048, "IQ4_NL": 127}.get(kind, 480)
    for at in HALF_FIELDS[kind]:
        halves = (rng.uniform(0.5, 1.0, raw.shape[0]) * scale).astype(np.float16)
        raw[:, at : at + 2] = halves.view(np.uint8).reshape(-1, 2)
    return raw.reshape(rows, -1), qtype


def write_quantised(path: Path, *, seed: int = 0) -> None:
    """A two-layer Llama (d_model 256, 4 heads of 64, 2 key/value heads, MLP 512) whose 14 matrices use 13 types."""
    import gguf

    rng = np.random.default_rng(seed)
    d, H, G, d_k, inner = 256, 4, 2, 64, 512
    meta = tokenizer_metadata(HF / "llama")
    vocab = len(meta["tokens"])
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("attncli quantisation types")
    for add, value in (
        (writer.add_block_count, 2), (writer.add_context_length, 128), (writer.add_embedding_length, d),
        (writer.add_feed_forward_length, inner), (writer.add_head_count, H), (writer.add_head_count_kv, G),
        (writer.add_rope_dimension_count, d_k), (writer.add_rope_freq_base, 10_000.0), (writer.add_layer_norm_rms_eps, 1e-5),
    ):  # fmt: skip
        add(value)
    _tokenizer(writer, meta)
    embedding, qtype = quantised_bytes(EMBEDDING_TYPE, rng.normal(0, 1.0, (vocab, d)), rng)
    writer.add_tensor("token_embd.weight", embedding, raw_dtype=qtype)
    writer.add_tensor("output_norm.weight", rng.uniform(0.8, 1.2, d).astype(np.float32))
    shapes = {"attn_q": (H * d_k, d), "attn_k": (G * d_k, d), "attn_v": (G * d_k, d), "attn_output": (d, H * d_k),
              "ffn_gate": (inner, d), "ffn_up": (inner, d), "ffn_down": (d, inner)}  # fmt: skip
    for layer, kinds in QUANTISED_TYPES.items():
        writer.add_tensor(f"blk.{layer}.attn_norm.weight", rng.uniform(0.8, 1.2, d).astype(np.float32))
        writer.add_tensor(f"blk.{layer}.ffn_norm.weight", rng.uniform(0.8, 1.2, d).astype(np.float32))
        for (role, shape), kind in zip(shapes.items(), kinds):
            values = rng.normal(0, 1 / math.sqrt(shape[1]) * (3 if role in ("attn_q", "attn_k") else 1), shape)
            stored, qtype = quantised_bytes(kind, values, rng)
            writer.add_tensor(f"blk.{layer}.{role}.weight", np.ascontiguousarray(stored), raw_dtype=qtype)
    _finish(writer)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in ("llama", "qwen2", "mistral"):
        write_llama_family(name, OUT / f"{name}.gguf")
    write_gpt2(OUT / "gpt2.gguf")
    write_bert(OUT / "bert.gguf")
    write_quantised(OUT / "quantised.gguf")
    for name in FAMILIES:
        write_family(name, OUT / f"{name}.gguf")
        write_family(name, OUT / f"{name}-q8_0.gguf", quantised="Q8_0")
    for path in sorted(OUT.glob("*.gguf")):
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
