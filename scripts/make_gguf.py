"""Write tiny GGUF files with llama.cpp's own writer (gguf-py's GGUFWriter), laid out as llama.cpp's converter lays them out.

    pip install gguf tokenizers sentencepiece   # no transformers (sentencepiece reads T5's spiece.model); torch only for gemma3n.gguf (the converter's float32 Φ⁻¹)
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
<name>.gguf (F32) and <name>-q8_0.gguf (Q8_0 where a matrix's rows fill whole blocks, F16 elsewhere; qwen3 also as
qwen3-f16.gguf, every matrix F16, the source a quantiser starts from),
with the converter's names, GPT-NeoX's query_key_value regrouped to all q | all k | all v, and Gemma 3's
norms stored as 1 + w.

Issue 30's families are written as their converter classes write them (`write_converted`, `write_llama_converted`,
`write_modernbert`, `write_glm4_moe`; `write_qwen3_next`, `write_cohere2`, `write_olmo3`, `write_qwen3_moe` from folders
the tests derive where the fixture holds what the converter cannot store).

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


def _wordpiece(writer: Any, folder: Path) -> None:
    """A WordPiece tokenizer.json as BertModel.set_vocab writes it: "▁" starts a word, "##" dropped, special tokens by name."""
    raw = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = raw["model"]["vocab"]
    pieces = sorted(vocab, key=vocab.get)
    special = {t["content"] for t in raw["added_tokens"] if t["special"]}
    writer.add_tokenizer_model("bert")
    writer.add_token_list([t if t.startswith("[") and t.endswith("]") else t[2:] if t.startswith("##") else "▁" + t for t in pieces])
    writer.add_token_types([CONTROL if t in special else NORMAL for t in pieces])
    writer.add_unk_token_id(vocab["[UNK]"])
    writer.add_sep_token_id(vocab["[SEP]"])
    writer.add_pad_token_id(vocab["[PAD]"])
    writer.add_uint32("tokenizer.ggml.cls_token_id", vocab["[CLS]"])
    writer.add_mask_token_id(vocab["[MASK]"])


def write_modernbert(path: Path, folder: Path = HF / "modernbert") -> None:
    """ModernBERT as ModernBertModel (BertModel's converter) writes it: `model.` stripped and gguf-py's names (Wqkv and Wi
    kept whole), TextModel's keys (the global θ as rope.freq_base, the local one as rope.freq_base_swa, norm_eps as
    layer_norm_rms_epsilon), non-causal, local_attention as the sliding window, global_attn_every_n_layers as its pattern
    when config.json names it (llama.cpp: every 3rd from the first otherwise). decoder.bias, which gguf-py maps to nothing,
    is left out. ModernBertModel.set_vocab reads BPE vocabularies only; the fixture's is WordPiece, written as BertModel
    writes one, with ModernBertModel's add_bos, add_eos and add_sep."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    layers, ropes = config["num_hidden_layers"], config["rope_parameters"]
    writer = gguf.GGUFWriter(path, "modern-bert")
    writer.add_name("attncli tiny modernbert")
    writer.add_block_count(layers)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_rope_freq_base(ropes["full_attention"]["rope_theta"])
    writer.add_rope_freq_base_swa(ropes["sliding_attention"]["rope_theta"])
    writer.add_layer_norm_rms_eps(config["norm_eps"])
    writer.add_file_type(0)
    writer.add_causal_attention(False)
    writer.add_sliding_window(config["local_attention"])
    if "global_attn_every_n_layers" in config:
        writer.add_sliding_window_pattern(config["global_attn_every_n_layers"])
    writer.add_rope_scaling_type(gguf.RopeScalingType.NONE)
    writer.add_vocab_size(config["vocab_size"])
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)
    writer.add_add_sep_token(True)
    _wordpiece(writer, folder)
    for hf, value in hf_tensors(folder).items():
        name = hf.removeprefix("model.")
        if name != "decoder.bias":
            writer.add_tensor(converter_name("modern-bert", layers, name), np.ascontiguousarray(value))
    _finish(writer)


def _sentencepiece_unigram(writer: Any, model: Path, config: dict[str, Any]) -> None:
    """A SentencePiece unigram spiece.model as T5Model.set_vocab writes it, with the special ids the folder's config names."""
    from sentencepiece import SentencePieceProcessor
    from sentencepiece import sentencepiece_model_pb2 as proto

    spec = proto.ModelProto()
    spec.ParseFromString(model.read_bytes())
    assert spec.trainer_spec.model_type == 1  # unigram
    processor = SentencePieceProcessor(model_file=str(model))
    size = config.get("vocab_size", processor.vocab_size())
    tokens, scores, types = [f"[PAD{i}]" for i in range(size)], [-10000.0] * size, [5] * size  # 5: unused
    for i in range(processor.vocab_size()):
        tokens[i], scores[i] = processor.IdToPiece(i), processor.GetScore(i)
        types[i] = 2 if processor.IsUnknown(i) else CONTROL if processor.IsControl(i) else 5 if processor.IsUnused(i) else 6 if processor.IsByte(i) else NORMAL
    writer.add_tokenizer_model("t5")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_add_space_prefix(spec.normalizer_spec.add_dummy_prefix)
    writer.add_remove_extra_whitespaces(spec.normalizer_spec.remove_extra_whitespaces)
    if spec.normalizer_spec.precompiled_charsmap:
        writer.add_precompiled_charsmap(spec.normalizer_spec.precompiled_charsmap)
    writer.add_eos_token_id(config["eos_token_id"])
    writer.add_unk_token_id(processor.unk_id())
    writer.add_pad_token_id(config["pad_token_id"])


def t5_sentencepiece_folder(out: Path) -> Path:
    """The t5 fixture as a published T5 ships it, with a SentencePiece unigram vocabulary: tests/checkpoints/t5/sentencepiece's
    spiece.model (sentencepiece 0.2.3's trainer on a few English lines, unigram, nmt_nfkc normalisation, pad 0, eos 1, unk 2,
    no bos; 54 pieces) and the tokenizer.json transformers 5.24 builds from it (T5TokenizerFast.from_pretrained of a folder
    holding only spiece.model, extra_ids=0), and relative_attention_max_distance 128, which llama.cpp fixes."""
    import shutil

    folder = out / "t5-sentencepiece"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(HF / "t5" / "model.safetensors", folder)
    for name in ("spiece.model", "tokenizer.json"):
        shutil.copy(HF / "t5" / "sentencepiece" / name, folder)
    config = json.loads((HF / "t5" / "config.json").read_text(encoding="utf-8")) | {"relative_attention_max_distance": 128}
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return folder


def write_t5(path: Path, folder: Path = HF / "t5") -> None:
    """T5 as T5Model writes it: n_positions (512 when absent) as the context, d_model, d_ff, num_layers as block_count and
    num_decoder_layers as decoder_block_count, num_heads, d_kv as key and value length, layer_norm_epsilon (as both epsilons),
    relative_attention_num_buckets, decoder_start_token_id; one token table; gguf-py's enc.blk.N / dec.blk.N names. It stores
    no relative_attention_max_distance (llama.cpp fixes 128) and no feed_forward_proj (llama.cpp: gated GELU with ffn_gate).
    T5Model.set_vocab reads spiece.model (tokenizer model "t5": each piece, its score and type, padded with [PAD{i}] to
    vocab_size, add_space_prefix, remove_extra_whitespaces, the precompiled character map; needs pip install sentencepiece);
    a folder without one (the t5 fixture: byte-level BPE) has its vocabulary written as gpt2's."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    writer = gguf.GGUFWriter(path, "t5")
    writer.add_name("attncli tiny t5")
    writer.add_context_length(config.get("n_positions", 512))
    writer.add_embedding_length(config["d_model"])
    writer.add_feed_forward_length(config["d_ff"])
    writer.add_block_count(config["num_layers"])
    if "num_decoder_layers" in config:
        writer.add_decoder_block_count(config["num_decoder_layers"])
    writer.add_head_count(config["num_heads"])
    writer.add_key_length(config["d_kv"])
    writer.add_value_length(config["d_kv"])
    writer.add_layer_norm_eps(config["layer_norm_epsilon"])
    writer.add_relative_attn_buckets_count(config["relative_attention_num_buckets"])
    writer.add_layer_norm_rms_eps(config["layer_norm_epsilon"])
    writer.add_decoder_start_token_id(config["decoder_start_token_id"])
    writer.add_file_type(0)
    if (folder / "spiece.model").is_file():
        _sentencepiece_unigram(writer, folder / "spiece.model", config)
    else:
        _tokenizer(writer, tokenizer_metadata(folder))
    post = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["post_processor"]
    template = next(p for p in post.get("processors", [post]) if p["type"] == "TemplateProcessing")
    writer.add_add_eos_token("SpecialToken" in template["single"][-1])  # gguf-py's SpecialVocab reads "$A </s>" so
    blocks = max(config["num_layers"], config.get("num_decoder_layers", 0))
    shared = False
    for hf, value in hf_tensors(folder).items():
        if hf in ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
            if shared:
                continue  # the converter keeps the first token table it meets
            hf, shared = "shared.weight", True
        if hf == "lm_head.weight" and config.get("tie_word_embeddings", True):
            continue
        writer.add_tensor(converter_name("t5", blocks, hf), np.ascontiguousarray(value))
    _finish(writer)


def write_bert(path: Path) -> None:
    """The BERT fixture as llama.cpp's converter writes it: WordPiece tokens respelled ("▁" starts a word, "##" dropped)."""
    import gguf

    folder = HF / "bert"
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    writer = gguf.GGUFWriter(path, "bert")
    writer.add_name("attncli tiny bert")
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_layer_norm_eps(config["layer_norm_eps"])
    writer.add_causal_attention(False)
    _wordpiece(writer, folder)
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
    With "F16", every matrix is F16 and the norms F32, as the converter's `--outtype f16` writes the file a
    quantiser then starts from.
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
    writer.add_file_type({None: 0, "F16": 1, "Q8_0": 7}[quantised])  # llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0
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
        if quantised == "F16" and value.ndim == 2:
            value = value.astype(np.float16)  # convert_hf_to_gguf.py --outtype f16: every matrix F16, the norms F32
        elif quantised and value.ndim == 2:
            qtype = gguf.GGMLQuantizationType[quantised]
            if value.shape[1] % gguf.GGML_QUANT_SIZES[qtype][0] == 0:
                writer.add_tensor(target, gguf.quants.quantize(value, qtype), raw_dtype=qtype)
                continue
            value = value.astype(np.float16)
        writer.add_tensor(target, np.ascontiguousarray(value))
    _finish(writer)


# ---------------------------------------------------------------- Gemma 2, gpt-oss and DeepSeek V3 (llama.cpp's own name map)


def converter_name(arch: str, blocks: int, hf: str) -> str:
    """The GGUF name convert_hf_to_gguf.py's map_tensor_name gives `hf`: gguf-py's TensorNameMap for the architecture."""
    import gguf

    by_name = {name: key for key, name in gguf.MODEL_ARCH_NAMES.items()}
    target = gguf.get_tensor_name_map(by_name[arch], blocks).get_name(hf, try_suffixes=(".weight", ".bias"))
    if target is None:
        raise KeyError(f"gguf-py maps no {arch} tensor for {hf}")
    return str(target)


def _common(
    writer: Any, config: dict[str, Any], *, kv_heads: int | None = None, blocks: int | None = None, context: int | None = None,
    inner: int | None = None,
) -> None:
    """What the converter's TextModel.set_gguf_parameters writes for every architecture (the keys these fixtures have);
    `context` and `inner` where a converter writes its own (Hunyuan's 256k positions, Llama 4's dense MLP width)."""
    writer.add_block_count(config["num_hidden_layers"] if blocks is None else blocks)
    writer.add_context_length(config["max_position_embeddings"] if context is None else context)
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"] if inner is None else inner)
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"] if kv_heads is None else kv_heads)
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_file_type(0)


def write_gemma2(path: Path, folder: Path = HF / "gemma2") -> None:
    """Gemma 2 as Gemma2Model writes it: no RoPE θ (llama.cpp's default, 10 000, is the fixture's), norms as 1 + w,
    soft-caps and window stored, and no query_pre_attn_scalar: llama.cpp derives the scale from the model's size."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert config["rope_parameters"]["rope_theta"] == 10_000.0  # what llama.cpp assumes for a file that stores none
    writer = gguf.GGUFWriter(path, "gemma2")
    writer.add_name("attncli tiny gemma2")
    _common(writer, config)
    writer.add_key_length(config["head_dim"])
    writer.add_value_length(config["head_dim"])
    writer.add_attn_logit_softcapping(config["attn_logit_softcapping"])
    writer.add_final_logit_softcapping(config["final_logit_softcapping"])
    writer.add_sliding_window(config["sliding_window"])
    _tokenizer(writer, tokenizer_metadata(folder))
    for hf, value in hf_tensors(folder).items():
        if hf == "lm_head.weight":
            continue
        if hf.endswith("norm.weight"):
            value = value + np.float32(1)  # Gemma2Model.modify_tensors: ggml multiplies by the weight, transformers by 1 + w
        writer.add_tensor(converter_name("gemma2", config["num_hidden_layers"], hf), np.ascontiguousarray(value))
    _finish(writer)


def _split_gate_up(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """gpt-oss's gate_up rows interleave gate and up (gate, up, gate, …): the converter takes [::2] and [1::2] along axis 1."""
    return rows[:, 0::2], rows[:, 1::2]


def mxfp4_to_ggml(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """(…, rows, G·17) ggml MXFP4 blocks from Hugging Face's (…, rows, G, 16) blocks and (…, rows, G) e8m0 scales.

    Hugging Face packs numbers 2j and 2j + 1 of a block in byte j (low nibble first); ggml packs numbers j and j + 16
    in byte j, after the block's exponent byte, which is the same e8m0 byte (ggml's doubled levels × 2^(e − 128) =
    e2m1 × 2^(e − 127)). Written from the two layouts, not from the converter's code (repack_mxfp4).
    """
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)  # number by number
    packed = (codes[..., :16] | (codes[..., 16:] << 4)).astype(np.uint8)
    out = np.concatenate([scales[..., None].astype(np.uint8), packed], axis=-1)  # (…, rows, G, 17)
    return out.reshape(*out.shape[:-2], -1)


def write_gpt_oss(path: Path, folder: Path = HF / "gpt_oss") -> None:
    """gpt-oss as GptOssModel writes it: sinks as attn_sinks, the router as ffn_gate_inp, the experts split into
    ffn_gate_exps / ffn_up_exps / ffn_down_exps (E, rows, in) with their biases; float experts transposed to (out, in),
    MXFP4 experts (a folder with _blocks and _scales) repacked to ggml's MXFP4 without a number changed."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    layers = config["num_hidden_layers"]
    writer = gguf.GGUFWriter(path, "gpt-oss")
    writer.add_name(f"attncli tiny gpt-oss{' mxfp4' if folder.name != 'gpt_oss' else ''}")
    _common(writer, config)
    writer.add_rope_freq_base(config["rope_parameters"]["rope_theta"])
    writer.add_expert_count(config["num_local_experts"])
    writer.add_expert_used_count(config["num_experts_per_tok"])
    writer.add_key_length(config["head_dim"])
    writer.add_value_length(config["head_dim"])
    writer.add_sliding_window(config["sliding_window"])
    writer.add_expert_feed_forward_length(config["intermediate_size"])
    _tokenizer(writer, tokenizer_metadata(folder))
    tensors = raw_tensors(folder)
    for hf, value in tensors.items():
        name = lambda n: converter_name("gpt-oss", layers, n)  # noqa: E731
        prefix = hf.rsplit(".mlp.experts.", 1)[0] + ".mlp.experts."
        if hf.endswith("_scales"):
            continue
        if hf.endswith("gate_up_proj_blocks"):
            all_scales = tensors[hf.replace("_blocks", "_scales")]
            for part, rows, scales in (("gate", value[:, 0::2], all_scales[:, 0::2]), ("up", value[:, 1::2], all_scales[:, 1::2])):
                writer.add_tensor(name(f"{prefix}{part}_proj.weight"), mxfp4_to_ggml(rows, scales), raw_dtype=gguf.GGMLQuantizationType.MXFP4)
        elif hf.endswith("down_proj_blocks"):
            scales = tensors[hf.replace("_blocks", "_scales")]
            writer.add_tensor(name(prefix + "down_proj.weight"), mxfp4_to_ggml(value, scales), raw_dtype=gguf.GGMLQuantizationType.MXFP4)
        elif hf.endswith("experts.gate_up_proj"):
            gate, up = _split_gate_up(value.transpose(0, 2, 1))  # (E, 2·inner, d) → two (E, inner, d)
            writer.add_tensor(name(prefix + "gate_proj.weight"), np.ascontiguousarray(gate))
            writer.add_tensor(name(prefix + "up_proj.weight"), np.ascontiguousarray(up))
        elif hf.endswith("experts.down_proj"):
            writer.add_tensor(name(prefix + "down_proj.weight"), np.ascontiguousarray(value.transpose(0, 2, 1)))  # (E, d, inner)
        elif hf.endswith("gate_up_proj_bias"):
            gate, up = value[:, 0::2], value[:, 1::2]
            writer.add_tensor(name(prefix + "gate_proj.bias"), np.ascontiguousarray(gate))
            writer.add_tensor(name(prefix + "up_proj.bias"), np.ascontiguousarray(up))
        elif hf.endswith("down_proj_bias"):
            writer.add_tensor(name(prefix + "down_proj.bias"), value)
        else:
            writer.add_tensor(name(hf + ".weight" if hf.endswith("sinks") else hf), np.ascontiguousarray(value))
    _finish(writer)


def raw_tensors(folder: Path) -> dict[str, np.ndarray]:
    """Every tensor of a fixture's model.safetensors as stored (float32, or uint8 for MXFP4 blocks and scales)."""
    raw = (folder / "model.safetensors").read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    header.pop("__metadata__", None)
    out = {}
    for name, entry in sorted(header.items()):
        begin, end = entry["data_offsets"]
        dtype = {"F32": "<f4", "U8": "u1"}[entry["dtype"]]
        out[name] = np.frombuffer(raw[8 + size + begin : 8 + size + end], dtype=dtype).reshape(entry["shape"])
    return out


def save_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """A safetensors file of float32 and uint8 tensors."""
    header, data = {}, b""
    for name, array in tensors.items():
        blob = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": "U8" if array.dtype == np.uint8 else "F32", "shape": list(array.shape), "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)


def gpt_oss_mxfp4_folder(out: Path, *, seed: int = 11) -> Path:
    """A gpt-oss folder whose experts are MXFP4 as OpenAI publishes them, wide enough for ggml's MXFP4 (rows of 32).

    The tiny fixture's hidden size (16) fills no 32-number block along a row, so its GGUF keeps the experts in F32
    (as the converter writes float experts); this folder (hidden 32, 4 heads of 8, experts of 32) has MXFP4 experts
    in both formats. Random weights (seeded), the fixture's tokenizer; attncli reads it through mxfp4.py, which
    tests/test_mxfp4.py checks against transformers.
    """
    import shutil

    rng = np.random.default_rng(seed)
    config = json.loads((HF / "gpt_oss" / "config.json").read_text(encoding="utf-8"))
    d, H, G, d_k, inner, E, V = 32, 4, 2, 8, 32, 4, config["vocab_size"]
    config |= {"hidden_size": d, "num_attention_heads": H, "num_key_value_heads": G, "head_dim": d_k, "intermediate_size": inner}
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    shutil.copy(HF / "gpt_oss" / "tokenizer.json", out / "tokenizer.json")
    f32 = lambda *shape, scale=0.3: rng.normal(0, scale, shape).astype(np.float32)  # noqa: E731
    tensors: dict[str, np.ndarray] = {"model.embed_tokens.weight": f32(V, d, scale=1.0), "model.norm.weight": 1 + f32(d, scale=0.1),
                                      "lm_head.weight": f32(V, d)}  # fmt: skip
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        tensors |= {
            p + "input_layernorm.weight": 1 + f32(d, scale=0.1), p + "post_attention_layernorm.weight": 1 + f32(d, scale=0.1),
            p + "self_attn.q_proj.weight": f32(H * d_k, d), p + "self_attn.q_proj.bias": f32(H * d_k),
            p + "self_attn.k_proj.weight": f32(G * d_k, d), p + "self_attn.k_proj.bias": f32(G * d_k),
            p + "self_attn.v_proj.weight": f32(G * d_k, d), p + "self_attn.v_proj.bias": f32(G * d_k),
            p + "self_attn.o_proj.weight": f32(d, H * d_k), p + "self_attn.o_proj.bias": f32(d),
            p + "self_attn.sinks": f32(H, scale=1.0), p + "mlp.router.weight": f32(E, d), p + "mlp.router.bias": f32(E),
            p + "mlp.experts.gate_up_proj_bias": f32(E, 2 * inner), p + "mlp.experts.down_proj_bias": f32(E, d),
        }  # fmt: skip
        for what, rows, columns in (("gate_up_proj", 2 * inner, d), ("down_proj", d, inner)):
            tensors[p + f"mlp.experts.{what}_blocks"] = rng.integers(0, 256, (E, rows, columns // 32, 16)).astype(np.uint8)
            tensors[p + f"mlp.experts.{what}_scales"] = rng.integers(120, 128, (E, rows, columns // 32)).astype(np.uint8)
    save_safetensors(out / "model.safetensors", tensors)
    return out


DEEPSEEK_EXPERTS = ("gate", "up", "down")


def write_deepseek(path: Path, folder: Path = HF / "deepseek_v3", *, split_kv_b: bool = True) -> None:
    """DeepSeek V3 as DeepseekV2Model writes it (architecture deepseek2): MLA as multi-query attention over the latent
    (head_count_kv 1, key_length = kv_lora_rank + rope, value_length = kv_lora_rank, the head sizes as key/value_length_mla),
    the routed experts merged into ffn_{gate,up,down}_exps (E, rows, in), e_score_correction_bias as exp_probs_b, and
    kv_b_proj split into attn_k_b (each head's key block transposed) and attn_v_b, or kept whole as attn_kv_b
    (split_kv_b=False: the files converted before the split). The fixture's config has no scoring_func (transformers'
    DeepseekV3Config has none: V3 always routes by sigmoid); the published V3 configs say "sigmoid", which the converter
    writes as expert_gating_func 2, so it is written here.
    """
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    layers, H = config["num_hidden_layers"], config["num_attention_heads"]
    d_n, d_r, d_v, d_c = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"], config["kv_lora_rank"]
    writer = gguf.GGUFWriter(path, "deepseek2")
    writer.add_name("attncli tiny deepseek_v3" + ("" if split_kv_b else " (attn_kv_b)"))
    _common(writer, config, kv_heads=1)
    writer.add_rope_freq_base(config["rope_parameters"]["rope_theta"])
    writer.add_expert_count(config["n_routed_experts"])
    writer.add_expert_used_count(config["num_experts_per_tok"])
    writer.add_expert_group_count(config["n_group"])
    writer.add_expert_group_used_count(config["topk_group"])
    writer.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    writer.add_leading_dense_block_count(config["first_k_dense_replace"])
    writer.add_vocab_size(config["vocab_size"])
    writer.add_q_lora_rank(config["q_lora_rank"])
    writer.add_kv_lora_rank(d_c)
    writer.add_key_length(d_c + d_r)
    writer.add_value_length(d_c)
    writer.add_key_length_mla(d_n + d_r)
    writer.add_value_length_mla(d_v)
    writer.add_expert_feed_forward_length(config["moe_intermediate_size"])
    writer.add_expert_shared_count(config["n_shared_experts"])
    writer.add_expert_weights_scale(config["routed_scaling_factor"])
    if config["norm_topk_prob"]:
        writer.add_expert_weights_norm(True)
    writer.add_rope_dimension_count(d_r)
    _tokenizer(writer, tokenizer_metadata(folder))
    tensors = hf_tensors(folder)
    name = lambda n: converter_name("deepseek2", layers, n)  # noqa: E731
    for hf, value in tensors.items():
        if ".mlp.experts." in hf:
            continue
        if hf.endswith("kv_b_proj.weight") and split_kv_b:
            per_head = value.reshape(H, d_n + d_v, d_c)
            writer.add_tensor(name(hf.replace("kv_b_proj", "k_b_proj")), np.ascontiguousarray(per_head[:, :d_n].transpose(0, 2, 1)))
            writer.add_tensor(name(hf.replace("kv_b_proj", "v_b_proj")), np.ascontiguousarray(per_head[:, d_n:]))
            continue
        writer.add_tensor(name(hf.replace("e_score_correction_bias", "e_score_correction.bias")), np.ascontiguousarray(value))
    for i in range(config["first_k_dense_replace"], layers):
        for what in DEEPSEEK_EXPERTS:
            merged = np.stack([tensors[f"model.layers.{i}.mlp.experts.{e}.{what}_proj.weight"] for e in range(config["n_routed_experts"])])
            writer.add_tensor(name(f"model.layers.{i}.mlp.experts.{what}_proj.weight"), merged)
    _finish(writer)


def write_bloom(path: Path, folder: Path = HF / "bloom") -> None:
    """BLOOM as BloomModel writes it: query_key_value (and its bias) regrouped from per head to all q | all k | all v,
    `transformer.` dropped, the context length from seq_length (else the width, as the converter has it)."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    d, heads, layers = config["hidden_size"], config["n_head"], config["n_layer"]
    writer = gguf.GGUFWriter(path, "bloom")
    writer.add_name("attncli tiny bloom")
    writer.add_context_length(config.get("seq_length", d))
    writer.add_embedding_length(d)
    writer.add_feed_forward_length(4 * d)
    writer.add_block_count(layers)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_layer_norm_eps(config["layer_norm_epsilon"])
    writer.add_file_type(0)
    _tokenizer(writer, tokenizer_metadata(folder))
    for hf, value in hf_tensors(folder).items():
        name = hf.removeprefix("transformer.")
        if "query_key_value" in name:
            value = neox_fused(value, heads)  # the same regrouping as GPT-NeoX's
        writer.add_tensor(converter_name("bloom", layers, name), np.ascontiguousarray(value))
    _finish(writer)


def falcon_fused(rows: np.ndarray, heads: int, kv_heads: int) -> np.ndarray:
    """FalconModel.modify_tensors: kv groups of [q … q | k | v] → all q (H·d), all k (G·d), all v (G·d)."""
    groups = rows.reshape(kv_heads, heads // kv_heads + 2, -1, *rows.shape[1:])
    parts = [groups[:, :-2], groups[:, -2], groups[:, -1]]
    return np.concatenate([part.reshape(-1, *rows.shape[1:]) for part in parts]).reshape(rows.shape)


def write_falcon(path: Path, folder: Path = HF / "falcon") -> None:
    """Falcon (the new decoder architecture) as FalconModel writes it: context 2048, feed-forward 4·d, query_key_value
    regrouped to all q | all k | all v ("jploski" layout), no RoPE θ from the converter; this file adds falcon.rope.freq_base,
    which llama.cpp reads for every architecture, since the fixture turns with θ = 1000, not llama.cpp's default 10 000."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    d, heads, layers = config["hidden_size"], config["num_attention_heads"], config["num_hidden_layers"]
    kv_heads = config["num_kv_heads"]
    writer = gguf.GGUFWriter(path, "falcon")
    writer.add_name("attncli tiny falcon")
    writer.add_context_length(2048)
    writer.add_tensor_data_layout("jploski")
    writer.add_embedding_length(d)
    writer.add_feed_forward_length(4 * d)
    writer.add_block_count(layers)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_eps(config["layer_norm_epsilon"])
    writer.add_rope_freq_base(config["rope_parameters"]["rope_theta"])
    writer.add_file_type(0)
    _tokenizer(writer, tokenizer_metadata(folder))
    for hf, value in hf_tensors(folder).items():
        if "query_key_value" in hf:
            value = falcon_fused(value, heads, kv_heads)
        writer.add_tensor(converter_name("falcon", layers, hf), np.ascontiguousarray(value))
    _finish(writer)


def write_stablelm(path: Path, folder: Path = HF / "stablelm") -> None:
    """StableLM 2 as StableLMModel writes it: each layer's per-head q_layernorm and k_layernorm norms stacked into one
    (heads, d_k) attn_q_norm / attn_k_norm, the rotary width, the parallel-residual flag, LayerNorm's ε; no RoPE θ (llama.cpp's
    default, 10 000, is the fixture's)."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert config["rope_parameters"]["rope_theta"] == 10_000.0  # what llama.cpp assumes for a file that stores none
    d, heads, kv_heads, layers = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"], config["num_hidden_layers"]
    writer = gguf.GGUFWriter(path, "stablelm")
    writer.add_name("attncli tiny stablelm")
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(d)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_rope_dimension_count(int(config["rope_parameters"]["partial_rotary_factor"] * (d // heads)))
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_parallel_residual(config.get("use_parallel_residual", True))
    writer.add_layer_norm_eps(config["layer_norm_eps"])
    writer.add_file_type(0)
    _tokenizer(writer, tokenizer_metadata(folder))
    tensors = hf_tensors(folder)
    for hf, value in tensors.items():
        if ".norms." in hf:
            continue
        writer.add_tensor(converter_name("stablelm", layers, hf), np.ascontiguousarray(value))
    for bid in range(layers):
        for kind, count in (("q_layernorm", heads), ("k_layernorm", kv_heads)):
            stacked = np.stack([tensors[f"model.layers.{bid}.self_attn.{kind}.norms.{h}.weight"] for h in range(count)])
            writer.add_tensor(converter_name("stablelm", layers, f"model.layers.{bid}.self_attn.{kind}.weight"), stacked)
    _finish(writer)


NEW_FAMILIES = {"gemma2": write_gemma2, "gpt_oss": write_gpt_oss, "deepseek_v3": write_deepseek, "bloom": write_bloom, "falcon": write_falcon,
                "stablelm": write_stablelm}


# Issue 30's families whose converter classes only rename (TextModel: seed_oss, ernie4_5, exaone4, glm4) or rename and permute
# W_Q, W_K as LlamaModel does (GraniteModel), with the extra metadata each class writes
CONVERTED = {"granite": "granite", "seed_oss": "seed_oss", "ernie4_5": "ernie4_5", "exaone4": "exaone4", "glm4": "glm4"}  # fixture -> GGUF architecture


def write_converted(name: str, path: Path) -> None:
    """A fixture of CONVERTED as its converter class writes it: gguf-py's names, the Llama permutation for granite,
    Granite's multipliers as granite.attention.scale, embedding_scale, residual_scale and logit_scale, and EXAONE 4's
    sliding window with its per-layer pattern (True: sliding)."""
    import gguf

    folder = HF / name
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    arch = CONVERTED[name]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name(f"attncli tiny {name}")
    _common(writer, config)
    if arch != "granite":  # GraniteModel drops head_dim
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(int(head_dim * config["rope_parameters"].get("partial_rotary_factor", 1.0)))  # Glm4Model: the rotated part
    writer.add_rope_freq_base(config["rope_parameters"]["rope_theta"])
    if arch == "granite":
        writer.add_attention_scale(config["attention_multiplier"])
        writer.add_embedding_scale(config["embedding_multiplier"])
        writer.add_residual_scale(config["residual_multiplier"])
        writer.add_logit_scale(config["logits_scaling"])
    if arch == "exaone4" and config.get("sliding_window") is not None:
        writer.add_sliding_window(config["sliding_window"])
        writer.add_sliding_window_pattern([kind == "sliding_attention" for kind in config["layer_types"]])
    _tokenizer(writer, tokenizer_metadata(folder))
    for hf, value in hf_tensors(folder).items():
        if hf == "lm_head.weight" and config.get("tie_word_embeddings"):
            continue
        target = converter_name(arch, config["num_hidden_layers"], hf)
        if arch == "granite" and ".attn_q." in target:
            value = permute(value, heads)
        elif arch == "granite" and ".attn_k." in target:
            value = permute(value, kv_heads)
        writer.add_tensor(target, np.ascontiguousarray(value))
    _finish(writer)


# Issue 30's Llama-like families whose converter class is LlamaModel's (SmolLM3Model, ApertusModel, Ministral3Model): fixture
# -> (GGUF architecture, whether LlamaModel.permute reorders W_Q and W_K: ApertusModel sets undo_permute = False)
LLAMA_CONVERTED = {"smollm3": ("smollm3", True), "apertus": ("apertus", False), "ministral3": ("mistral3", True)}


def write_llama_converted(name: str, path: Path, folder: Path | None = None) -> None:
    """A SmolLM3, Apertus or Ministral 3 folder as LlamaModel's converter writes it: TextModel's keys (YaRN as type, factor,
    original context, beta fast and slow), vocab_size and the rope dimension count; W_Q and W_K permuted (not Apertus's);
    llama3 scaling as rope_freqs; Apertus's xIELU numbers as the metadata lists xielu.alpha_p, alpha_n, beta, eps (no
    tensors); Ministral 3's mscale_all_dim as yarn_log_multiplier and llama_4_scaling_beta as attention.temperature_scale.
    No NoPE layers and no window: the converter writes neither (llama.cpp fixes SmolLM3's NoPE at every 4th layer)."""
    import gguf

    folder = folder or HF / name
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    arch, permuted = LLAMA_CONVERTED[name]
    layers, heads, kv_heads = config["num_hidden_layers"], config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    rope = config["rope_parameters"]
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name(f"attncli tiny {name}")
    _common(writer, config)
    if rope.get("rope_type") == "yarn":
        writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        writer.add_rope_scaling_factor(rope["factor"])
        writer.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
        writer.add_rope_scaling_yarn_beta_fast(rope["beta_fast"])
        writer.add_rope_scaling_yarn_beta_slow(rope["beta_slow"])
    writer.add_rope_freq_base(rope["rope_theta"])
    if "head_dim" in config:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    writer.add_vocab_size(config["vocab_size"])
    writer.add_rope_dimension_count(head_dim)
    if arch == "mistral3":
        writer.add_rope_scaling_yarn_log_mul(rope["mscale_all_dim"])
        writer.add_attn_temperature_scale(rope["llama_4_scaling_beta"])
    _tokenizer(writer, tokenizer_metadata(folder))
    if rope.get("rope_type") == "llama3":
        writer.add_tensor("rope_freqs.weight", llama3_factors(rope, head_dim))
    tensors = hf_tensors(folder)
    if arch == "apertus":
        for what, add in (("alpha_n", writer.add_xielu_alpha_n), ("alpha_p", writer.add_xielu_alpha_p), ("beta", writer.add_xielu_beta),
                          ("eps", writer.add_xielu_eps)):  # fmt: skip
            add([float(tensors[f"model.layers.{i}.mlp.act_fn.{what}"].reshape(-1)[0]) for i in range(layers)])
    for hf, value in tensors.items():
        if ".act_fn." in hf or (hf == "lm_head.weight" and config.get("tie_word_embeddings")):
            continue
        target = converter_name(arch, layers, hf)
        if permuted and ".attn_q." in target:
            value = permute(value, heads)
        elif permuted and ".attn_k." in target:
            value = permute(value, kv_heads)
        writer.add_tensor(target, np.ascontiguousarray(value))
    _finish(writer)


def write_hunyuan_dense(path: Path, folder: Path = HF / "hunyuan_v1_dense") -> None:
    """Hunyuan dense as HunYuanModel writes it: architecture hunyuan-dense, gguf-py's names (query_layernorm as attn_q_norm),
    nothing permuted (llama.cpp turns its pairs as NeoX does); a "dynamic" RoPE with alpha as the base it stretches to,
    θ·alpha^(d/(d − 2)), no scaling, and 256k positions (the converter's context length for it)."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    arch, rope = "hunyuan-dense", config["rope_parameters"]
    head_dim = config["head_dim"]
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name("attncli tiny hunyuan_v1_dense")
    _common(writer, config, context=256 * 1024)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(rope["rope_theta"] * rope["alpha"] ** (head_dim / (head_dim - 2)))
    writer.add_rope_scaling_type(gguf.RopeScalingType.NONE)
    writer.add_rope_scaling_factor(1)
    writer.add_rope_scaling_orig_ctx_len(256 * 1024)
    _tokenizer(writer, tokenizer_metadata(folder))
    for hf, value in hf_tensors(folder).items():
        writer.add_tensor(converter_name(arch, config["num_hidden_layers"], hf), np.ascontiguousarray(value))
    _finish(writer)


def write_llama4(path: Path, folder: Path) -> None:
    """A Llama 4 folder as Llama4Model writes it: architecture llama4, W_Q and W_K as they are (undo_permute False: Meta's
    pairs are already interleaved), feed_forward_length the dense MLP's (intermediate_size_mlp), the experts' width as
    expert_feed_forward_length, experts.gate_up_proj split and transposed into ffn_gate_exps and ffn_up_exps (E, inner, d),
    down_proj transposed into ffn_down_exps (E, d, inner), llama3 scaling as rope_freqs. llama.cpp stores no chunk, NoPE
    step, temperature or QK-norm switch: it fixes them (8192, every 4th layer, floor 8192 and 0.1, on unless 128 experts),
    so the test writes this from a folder that has those values."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    arch, rope = "llama4", config["rope_parameters"]
    head_dim, inner = config["head_dim"], config["intermediate_size"]
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name("attncli tiny llama4")
    _common(writer, config, inner=config["intermediate_size_mlp"])
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(rope["rope_theta"])
    writer.add_expert_count(config["num_local_experts"])
    writer.add_expert_used_count(config["num_experts_per_tok"])
    writer.add_interleave_moe_layer_step(config["interleave_moe_layer_step"])
    writer.add_expert_feed_forward_length(inner)
    _tokenizer(writer, tokenizer_metadata(folder))
    if rope.get("rope_type") == "llama3":
        writer.add_tensor("rope_freqs.weight", llama3_factors(rope, head_dim))
    blocks = config["num_hidden_layers"]
    for hf, value in hf_tensors(folder).items():
        if hf.endswith("experts.gate_up_proj"):  # (E, d, 2·inner) as x·W: gate then up, each stored (E, inner, d)
            both = value.transpose(0, 2, 1)
            for part, rows in (("gate_proj", both[:, :inner]), ("up_proj", both[:, inner:])):
                writer.add_tensor(converter_name(arch, blocks, hf.replace("gate_up_proj", part + ".weight")), np.ascontiguousarray(rows))
            continue
        if hf.endswith("experts.down_proj"):  # (E, inner, d) → (E, d, inner)
            writer.add_tensor(converter_name(arch, blocks, hf + ".weight"), np.ascontiguousarray(value.transpose(0, 2, 1)))
            continue
        writer.add_tensor(converter_name(arch, blocks, hf), np.ascontiguousarray(value))
    _finish(writer)


def write_olmo3(path: Path, folder: Path) -> None:
    """An OLMo 3 folder with one RoPE for both layer kinds, as Olmo2Model writes it: architecture olmo2, the sliding window
    and the per-layer pattern (True: sliding) beside OLMo 2's keys. (A per-kind θ or YaRN the converter cannot store.)"""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    writer = gguf.GGUFWriter(path, "olmo2")
    writer.add_name("attncli tiny olmo3")
    _common(writer, config)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(config["rope_parameters"]["rope_theta"])
    writer.add_sliding_window(config["sliding_window"])
    writer.add_sliding_window_pattern([kind == "sliding_attention" for kind in config["layer_types"]])
    _tokenizer(writer, tokenizer_metadata(folder))
    for hf, value in hf_tensors(folder).items():
        writer.add_tensor(converter_name("olmo2", config["num_hidden_layers"], hf), np.ascontiguousarray(value))
    _finish(writer)


def write_qwen3_moe(path: Path, folder: Path) -> None:
    """Qwen3-MoE as Qwen3MoeModel writes it (architecture qwen3moe): Qwen3's names, the router as ffn_gate_inp, each layer's
    experts merged into ffn_{gate,up,down}_exps (E, rows, in), expert_count, expert_used_count and expert_feed_forward_length.
    gguf-py names no dense MLP for qwen3moe (llama.cpp has none), so the fixture, whose layer 2 is dense (mlp_only_layers),
    cannot be converted: tests/test_gguf_2026.py writes a folder of it with experts in every layer first."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    layers, heads = config["num_hidden_layers"], config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    experts = config["num_local_experts"]
    writer = gguf.GGUFWriter(path, "qwen3moe")
    writer.add_name("attncli tiny qwen3_moe")
    _common(writer, config)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(config["rope_parameters"]["rope_theta"])
    writer.add_expert_count(experts)
    writer.add_expert_used_count(config["num_experts_per_tok"])
    writer.add_expert_feed_forward_length(config["moe_intermediate_size"])
    _tokenizer(writer, tokenizer_metadata(folder))
    tensors = hf_tensors(folder)
    for hf, value in tensors.items():
        if ".mlp.experts." not in hf:
            writer.add_tensor(converter_name("qwen3moe", layers, hf), np.ascontiguousarray(value))
    for i in range(layers):
        if f"model.layers.{i}.mlp.gate.weight" not in tensors:
            continue
        for what in DEEPSEEK_EXPERTS:
            merged = np.stack([tensors[f"model.layers.{i}.mlp.experts.{e}.{what}_proj.weight"] for e in range(experts)])
            writer.add_tensor(converter_name("qwen3moe", layers, f"model.layers.{i}.mlp.experts.{what}_proj.weight"), merged)
    _finish(writer)


def write_glm4_moe(path: Path, folder: Path = HF / "glm4_moe") -> None:
    """GLM-4.5 as Glm4MoeModel writes it (architecture glm4moe): the rotated part as rope.dimension_count, the routed experts
    merged into ffn_{gate,up,down}_exps, the correction bias as exp_probs_b, the shared experts as ffn_*_shexp, and
    DeepSeek V3's routing keys (sigmoid gating, expert_weights_scale, expert_weights_norm, leading dense blocks). With
    num_nextn_predict_layers, the folder's layers past num_hidden_layers (the multi-token-prediction blocks) follow as more
    blocks, counted in block_count, and nextn_predict_layers says how many, as the converter writes them without --no-mtp."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    nextn = config.get("num_nextn_predict_layers", 0)
    layers, heads = config["num_hidden_layers"] + nextn, config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    experts = config["n_routed_experts"]
    writer = gguf.GGUFWriter(path, "glm4moe")
    writer.add_name("attncli tiny glm4_moe")
    _common(writer, config, blocks=layers)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(int(head_dim * config["rope_parameters"].get("partial_rotary_factor", 0.5)))
    writer.add_rope_freq_base(config["rope_parameters"]["rope_theta"])
    writer.add_expert_count(experts)
    writer.add_expert_used_count(config["num_experts_per_tok"])
    writer.add_expert_feed_forward_length(config["moe_intermediate_size"])
    writer.add_expert_shared_count(config["n_shared_experts"])
    writer.add_leading_dense_block_count(config["first_k_dense_replace"])
    writer.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    writer.add_expert_weights_scale(config["routed_scaling_factor"])
    writer.add_expert_weights_norm(config["norm_topk_prob"])
    if nextn:
        writer.add_nextn_predict_layers(nextn)
    _tokenizer(writer, tokenizer_metadata(folder))
    tensors = hf_tensors(folder)
    for hf, value in tensors.items():
        if ".mlp.experts." not in hf:
            writer.add_tensor(converter_name("glm4moe", layers, hf.replace("e_score_correction_bias", "e_score_correction.bias")), np.ascontiguousarray(value))
    for i in range(config["first_k_dense_replace"], layers):
        for what in DEEPSEEK_EXPERTS:
            merged = np.stack([tensors[f"model.layers.{i}.mlp.experts.{e}.{what}_proj.weight"] for e in range(experts)])
            writer.add_tensor(converter_name("glm4moe", layers, f"model.layers.{i}.mlp.experts.{what}_proj.weight"), merged)
    _finish(writer)


def write_qwen3_next(path: Path, folder: Path) -> None:
    """Qwen3-Next as Qwen3NextModel (Qwen2MoeModel's converter) writes it: TextModel's keys, the experts' sizes, ssm.conv_kernel,
    state_size (the key head size), group_count (key heads), time_step_rank (value heads), inner_size (all value heads'
    width), full_attention_interval (4 unless config.json names one) and the rotated part; every norm but the Gated
    DeltaNet's stored as 1 + w; in_proj_qkvz, per key head [q | k | v | z], regrouped into attn_qkv (all q, all k, all v)
    and attn_gate (all z); A_log as −exp(A_log), dt_bias as ssm_dt.bias, the conv1d kernel squeezed; the experts merged.
    gguf-py names no dense MLP for qwen3next, so the folder must have experts in every layer."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    layers, heads = config["num_hidden_layers"], config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    k_heads, k_dim, v_heads, v_dim = (config[f"linear_{key}"] for key in ("num_key_heads", "key_head_dim", "num_value_heads", "value_head_dim"))
    experts = config["num_experts"]
    writer = gguf.GGUFWriter(path, "qwen3next")
    writer.add_name("attncli tiny qwen3_next")
    _common(writer, config)
    writer.add_rope_freq_base(config["rope_parameters"]["rope_theta"])
    writer.add_expert_count(experts)
    writer.add_expert_used_count(config["num_experts_per_tok"])
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_expert_feed_forward_length(config["moe_intermediate_size"])
    writer.add_expert_shared_feed_forward_length(config["shared_expert_intermediate_size"])
    writer.add_ssm_conv_kernel(config["linear_conv_kernel_dim"])
    writer.add_ssm_state_size(k_dim)
    writer.add_ssm_group_count(k_heads)
    writer.add_ssm_time_step_rank(v_heads)
    writer.add_ssm_inner_size(v_dim * v_heads)
    writer.add_full_attention_interval(config.get("full_attention_interval", 4))
    writer.add_rope_dimension_count(int(head_dim * config["rope_parameters"].get("partial_rotary_factor", 0.25)))
    _tokenizer(writer, tokenizer_metadata(folder))
    tensors = hf_tensors(folder)
    name = lambda n: converter_name("qwen3next", layers, n)  # noqa: E731
    for hf, value in tensors.items():
        if ".mlp.experts." in hf:
            continue
        if hf.endswith(".A_log"):
            value = -np.exp(value)
        elif hf.endswith(".dt_bias"):
            hf = hf.removesuffix(".dt_bias") + ".dt_proj.bias"
        elif "conv1d" in hf:
            value = value.squeeze()
        elif hf.endswith("norm.weight") and not hf.endswith("linear_attn.norm.weight"):
            value = value + np.float32(1)
        if hf.endswith("in_proj_qkvz.weight"):
            grouped = value.reshape(k_heads, -1, value.shape[1])  # per key head [q | k | v | z]
            q, k, v, z = np.split(grouped, np.cumsum([k_dim, k_dim, v_heads // k_heads * v_dim]), axis=1)
            index = hf.split(".")[2]
            writer.add_tensor(f"blk.{index}.attn_qkv.weight", np.concatenate([part.reshape(-1, value.shape[1]) for part in (q, k, v)]))
            writer.add_tensor(f"blk.{index}.attn_gate.weight", np.ascontiguousarray(z.reshape(-1, value.shape[1])))
            continue
        writer.add_tensor(name(hf), np.ascontiguousarray(value))
    for i in range(layers):
        for what in DEEPSEEK_EXPERTS:
            merged = np.stack([tensors[f"model.layers.{i}.mlp.experts.{e}.{what}_proj.weight"] for e in range(experts)])
            writer.add_tensor(name(f"model.layers.{i}.mlp.experts.{what}_proj.weight"), merged)
    _finish(writer)


def write_cohere2(path: Path, folder: Path) -> None:
    """Command R7B as Cohere2Model writes it (architecture cohere2): names only (rows kept: llama.cpp turns consecutive pairs,
    as transformers' Cohere2 does), biases dropped, LayerNorm's ε, the window and logit_scale; no layer pattern (llama.cpp
    makes every 4th layer global). The converter reads `rotary_pct`, which transformers' Cohere2Config does not write: 1."""
    import gguf

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    writer = gguf.GGUFWriter(path, "cohere2")
    writer.add_name("attncli tiny cohere2")
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_layer_norm_eps(config["layer_norm_eps"])
    writer.add_file_type(0)
    writer.add_rope_freq_base(config["rope_parameters"]["rope_theta"])
    writer.add_logit_scale(config["logit_scale"])
    writer.add_sliding_window(config["sliding_window"])
    writer.add_rope_dimension_count(int(config.get("rotary_pct", 1.0) * head_dim))
    _tokenizer(writer, tokenizer_metadata(folder))
    for hf, value in hf_tensors(folder).items():
        if not hf.endswith(".bias"):
            writer.add_tensor(converter_name("cohere2", config["num_hidden_layers"], hf), np.ascontiguousarray(value))
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


def write_gemma3n(path: Path, folder: Path = HF / "gemma3n") -> None:
    """Gemma 3n's text model as Gemma3NModel writes it: Gemma 3's keys without the norm shift (Gemma 3n multiplies by w),
    AltUp's active index and streams, the per-layer input width, the shared KV layers, each layer's Φ⁻¹(sparsity) in float32
    (activation_sparsity_scale: −∞ on a dense layer), the sliding pattern; altup_projections and altup_unembed_projections
    stacked into one 3-d tensor each; both embedding tables padded with zero rows to vocab_size; `_scale` tensors + .weight.
    torch computes Φ⁻¹ of the float32 fraction in float32, as the converter does (numpy has no icdf)."""
    import gguf
    import torch

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    layers, vocab = config["num_hidden_layers"], config["vocab_size"]
    writer = gguf.GGUFWriter(path, "gemma3n")
    writer.add_name("attncli tiny gemma3n")
    _common(writer, config)
    writer.add_key_length(config["head_dim"])
    writer.add_value_length(config["head_dim"])
    writer.add_rope_freq_base(config["rope_parameters"]["full_attention"]["rope_theta"])
    writer.add_final_logit_softcapping(config["final_logit_softcapping"])
    writer.add_sliding_window(config["sliding_window"])
    writer.add_altup_active_idx(config["altup_active_idx"])
    writer.add_altup_num_inputs(config["altup_num_inputs"])
    writer.add_embedding_length_per_layer_input(config["hidden_size_per_layer_input"])
    writer.add_shared_kv_layers(config["num_kv_shared_layers"])
    normal = torch.distributions.normal.Normal(0, 1)
    writer.add_activation_sparsity_scale([normal.icdf(torch.tensor(s, dtype=torch.float32)).item() for s in config["activation_sparsity_pattern"]])
    writer.add_sliding_window_pattern([kind == "sliding_attention" for kind in config["layer_types"]])
    _tokenizer(writer, tokenizer_metadata(folder))
    tensors = hf_tensors(folder)
    for hf, value in tensors.items():
        if hf == "lm_head.weight" or ".altup_projections." in hf or ".altup_unembed_projections." in hf:
            continue
        if hf.endswith(("embed_tokens.weight", "embed_tokens_per_layer.weight")) and value.shape[0] < vocab:
            value = np.concatenate([value, np.zeros((vocab - value.shape[0], value.shape[1]), dtype=value.dtype)])
        name = hf + ".weight" if hf.endswith("_scale") else hf
        writer.add_tensor(converter_name("gemma3n", layers, name), np.ascontiguousarray(value))
    for kind in ("altup_projections", "altup_unembed_projections"):
        stacked = np.stack([tensors[f"model.{kind}.{i}.weight"] for i in range(config["altup_num_inputs"] - 1)])
        writer.add_tensor(converter_name("gemma3n", layers, f"model.{kind}.weight"), stacked)
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
    write_family("qwen3", OUT / "qwen3-f16.gguf", quantised="F16")  # the float16 source of qwen3-q8_0.gguf, for the map's comparison
    for name, write in NEW_FAMILIES.items():
        write(OUT / f"{name}.gguf")
    for name in CONVERTED:
        write_converted(name, OUT / f"{name}.gguf")
    write_glm4_moe(OUT / "glm4_moe.gguf")
    write_llama_converted("apertus", OUT / "apertus.gguf")
    write_modernbert(OUT / "modernbert.gguf")
    write_gemma3n(OUT / "gemma3n.gguf")
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        write_t5(OUT / "t5-sentencepiece.gguf", t5_sentencepiece_folder(Path(scratch)))  # needs pip install sentencepiece
    write_hunyuan_dense(OUT / "hunyuan_v1_dense.gguf")
    for path in sorted(OUT.glob("*.gguf")):
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
