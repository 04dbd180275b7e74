"""GGUF files (llama.cpp, Ollama, LM Studio) as another source of a model's tensors and config.

The header is first walked with bounds (gguf_header.py); then llama.cpp's own Python reader
(gguf-py, the `gguf` package, imported only here) maps the file and reads the metadata. Only the
tensors a layer needs are dequantised (gguf_quants.py), exactly, to float64.

`GgufCheckpoint` answers to the Hugging Face tensor names the architecture modules ask for
(`layers.3.self_attn.q_proj.weight`) with the tensors llama.cpp's converter (convert_hf_to_gguf.py)
wrote (`blk.3.attn_q.weight`), undoing what the converter changed:
- shapes are stored innermost first; read outermost first they are nn.Linear's (out, in) again;
- for the llama architecture (Llama, Mistral) the converter permutes the rows of W_Q and W_K
  within each head, from Hugging Face's rotate-half pairing (i, i + d_k/2) to llama.cpp's
  interleaved pairs (2i, 2i + 1); the rows are put back, so the numbers equal the Hugging Face
  model's (qwen2 files keep the rotate-half order: llama.cpp applies that model's RoPE as NeoX does);
- GPT-2's Conv1D weights are stored transposed (as nn.Linear); they are transposed back;
- GPT-NeoX's query_key_value, laid out per head (q, k, v of head 1, then of head 2, …), is stored as
  all queries, then all keys, then all values (the converter's "bloom-style to gpt-style"); the rows
  are put back per head.
- Gemma 2 and 3's norms are stored as 1 + w (ggml multiplies by the weight, transformers by 1 + w); the 1 is
  taken off again.
- gpt-oss's experts are split into ffn_gate_exps / ffn_up_exps / ffn_down_exps (out, in) per expert, and
  DeepSeek's per-expert matrices merged into one 3-d tensor each; DeepSeek's kv_b_proj is split by newer
  converters into attn_k_b and attn_v_b: each is put back as the Hugging Face tensor (GgufCheckpoint._joined).
Qwen3, OLMo 2, Phi-3 and Gemma 3 keep Hugging Face's row order (llama.cpp turns them as NeoX does);
OLMo 2's post-norms are post_attention_norm and post_ffw_norm, and its MLP has no norm before it.
The config of these families is the metadata spelled as config.json's keys and read by config.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attncli.errors import AttnError, option
from attncli.sources.checkpoints.config import ModelConfig, RopeConfig
from attncli.sources.checkpoints.gguf_header import Header, TensorInfo, read_header
from attncli.sources.checkpoints.gguf_quants import READABLE, dequantize

if TYPE_CHECKING:
    from gguf import GGUFReader

SUFFIX = ".gguf"
OLLAMA_PREFIX = "ollama:"
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
ARCHITECTURES = {
    "llama": "llama", "qwen2": "qwen2", "gpt2": "gpt2", "bert": "bert",
    "qwen3": "qwen3", "olmo2": "olmo2", "phi3": "phi3", "gptneox": "gpt_neox", "gemma3": "gemma3_text",
    "gemma2": "gemma2", "gpt-oss": "gpt_oss", "deepseek2": "deepseek_v3",
}  # GGUF arch -> attncli's model type  # fmt: skip
GEMMA2_27B_LAYERS = 46  # llama.cpp's LLM_TYPE_27B for gemma2: the one size whose scale is 1/√(n_embd / n_head)
EXPERT_GATING = {1: "softmax", 2: "sigmoid", 3: "softmax over the chosen experts"}  # llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE


# -- finding the file ------------------------------------------------------------------------


def gguf_path(model: Path) -> Path | None:
    """The GGUF file `--model` names (a .gguf file, a folder holding exactly one, or ollama:NAME[:TAG]), else None."""
    text = str(model)
    if text.startswith(OLLAMA_PREFIX):
        return ollama_blob(text[len(OLLAMA_PREFIX) :])
    if model.is_file():
        with model.open("rb") as stream:
            if stream.read(4) == b"GGUF" or model.suffix.lower() == SUFFIX:
                return model
        return None
    if model.suffix.lower() == SUFFIX and not model.exists():
        raise AttnError("the GGUF file does not exist", file=text, expected="a .gguf file, a checkpoint folder, or ollama:NAME[:TAG]")
    if model.suffix.lower() == SUFFIX and not model.is_dir():  # a FIFO, a device, /dev/zero behind a link: never read
        raise AttnError("not a regular file", file=text, expected="a .gguf file as llama.cpp, Ollama or LM Studio keep it")
    if model.is_dir() and not (model / "config.json").is_file():
        found = sorted(p for p in model.iterdir() if p.suffix.lower() == SUFFIX and not p.is_dir())  # a special file is refused below
        if len(found) == 1:
            if not found[0].is_file():
                raise AttnError("not a regular file", file=str(found[0]), expected="a .gguf file as llama.cpp, Ollama or LM Studio keep it")
            return found[0]
        if len(found) > 1:
            names = ", ".join(p.name for p in found[:4]) + (", …" if len(found) > 4 else "")
            raise AttnError(f"the folder holds {len(found)} GGUF files ({names})", file=text, expected="the path of one of them")
    return None


def ollama_root() -> Path:
    """Where Ollama keeps its models: $OLLAMA_MODELS, else ~/.ollama/models."""
    configured = os.environ.get("OLLAMA_MODELS")
    return Path(configured).expanduser() if configured else Path.home() / ".ollama" / "models"


def ollama_blob(name: str) -> Path:
    """The GGUF blob of an Ollama model: manifests/HOST/NAMESPACE/MODEL/TAG names it by digest, blobs/sha256-HEX holds it.

    `smollm2`, `smollm2:135m`, `user/model:tag` and `host/namespace/model:tag` are read as Ollama
    reads them: host registry.ollama.ai, namespace library and tag latest unless given.
    """
    model, _, tag = name.partition(":")
    parts = [p for p in model.split("/") if p]
    if not parts or len(parts) > 3 or not all(re.fullmatch(r"[\w.\-]+", p) and p not in (".", "..") for p in [*parts, tag or "x"]):
        raise AttnError(f"found {name!r}", key=option("model"), expected="ollama:NAME[:TAG], e.g. ollama:smollm2:135m")
    host, namespace = "registry.ollama.ai", "library"
    if len(parts) == 3:
        host, namespace = parts[0], parts[1]
    elif len(parts) == 2:
        namespace = parts[0]
    root = ollama_root()
    manifest = root / "manifests" / host / namespace / parts[-1] / (tag or "latest")
    if not manifest.is_file():
        raise AttnError(
            f"Ollama has no model {name!r} here (no manifest {manifest})",
            expected="a model `ollama pull` fetched, or OLLAMA_MODELS set to the store that holds it",
        )
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AttnError(f"the manifest is not readable JSON: {error}", file=str(manifest)) from None
    layers = doc.get("layers") if isinstance(doc, dict) else None
    model_layers = [layer for layer in layers or [] if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL_LAYER]
    if len(model_layers) != 1:
        raise AttnError(f"the manifest lists {len(model_layers)} model layers", file=str(manifest), expected=f"one layer of mediaType {OLLAMA_MODEL_LAYER}")
    digest = model_layers[0].get("digest")
    if not isinstance(digest, str) or not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise AttnError(f"the model layer's digest is {digest!r}", file=str(manifest), expected="sha256: and 64 hex digits")
    blob = root / "blobs" / digest.replace(":", "-")
    if not blob.is_file():
        raise AttnError("the blob the manifest names is missing", file=str(blob), expected="the store as `ollama pull` left it")
    return blob


# -- the file --------------------------------------------------------------------------------


class GgufFile:
    """A checked GGUF file: its header, its metadata through gguf-py's reader, its tensors mapped and dequantised on demand."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)
        self.header: Header = read_header(path)
        self._reader = _open_reader(path)

    @property
    def tensors(self) -> dict[str, TensorInfo]:
        return self.header.tensors

    def fail(self, message: str, key: str | None = None, expected: str | None = None) -> AttnError:
        return AttnError(message, file=self.where, key=key, expected=expected)

    def has_key(self, key: str) -> bool:
        return key in self._reader.fields

    def value(self, key: str) -> Any:
        """A metadata value as Python: int, float, bool, str, or a list; None when absent."""
        field = self._reader.fields.get(key)
        if field is None:
            return None
        try:
            return field.contents()
        except (UnicodeDecodeError, ValueError, IndexError) as error:
            raise self.fail(f"the metadata value cannot be read: {error}", key=key) from None

    def count(self, key: str, *, default: int | None = None, minimum: int = 1) -> int:
        value = self.value(key)
        if value is None:
            if default is not None:
                return default
            raise self.fail("the metadata key is missing", key=key, expected=f"a whole number {minimum} or more")
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(f"found {value!r}", key=key, expected=f"a whole number {minimum} or more")
        return value

    def number(self, key: str, *, default: float | None = None) -> float:
        value = self.value(key)
        if value is None and default is not None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value <= 0:
            raise self.fail(f"found {value!r}", key=key, expected="a positive number")
        return float(value)

    def info(self, name: str) -> TensorInfo:
        entry = self.tensors.get(name)
        if entry is None:
            raise self.fail(f"no tensor '{name}' in the file")
        return entry

    def raw(self, entry: TensorInfo) -> np.ndarray:
        """(nbytes,) uint8: the tensor's bytes, a view into the memory map (nothing copied)."""
        view: np.ndarray = self._reader.data[entry.begin : entry.begin + entry.nbytes]
        return view

    def _readable(self, entry: TensorInfo) -> None:
        if entry.kind.name not in READABLE:
            raise self.fail(
                f"tensor '{entry.name}' is stored as {entry.kind.name}, which attncli does not dequantise",
                expected="one of " + ", ".join(READABLE),
            )

    def read(self, name: str) -> np.ndarray:
        """The whole tensor in float64, outermost dimension first."""
        entry = self.info(name)
        self._readable(entry)
        return dequantize(entry.kind.name, self.raw(entry), entry.count).reshape(entry.shape)

    def read_expert(self, name: str, expert: int) -> np.ndarray:
        """(rows, in) float64: expert `expert` of a 3-d tensor (experts, rows, in); only that expert's bytes are decoded."""
        entry = self.info(name)
        self._readable(entry)
        if len(entry.dims) != 3 or not 0 <= expert < entry.shape[0]:
            raise self.fail(f"tensor '{name}' has shape {list(entry.shape)}", expected=f"a 3-d tensor of experts with an expert {expert + 1}")
        per = entry.nbytes // entry.shape[0]  # each expert's rows are whole blocks, stored one expert after another
        raw = self.raw(entry)[expert * per : (expert + 1) * per]
        return dequantize(entry.kind.name, raw, entry.count // entry.shape[0]).reshape(entry.shape[1:])

    def read_rows(self, name: str, rows: Sequence[int]) -> np.ndarray:
        """(len(rows), row length) chosen rows of a 2-d tensor in float64; only their blocks are decoded."""
        entry = self.info(name)
        self._readable(entry)
        if len(entry.dims) != 2:
            raise self.fail(f"tensor '{name}' has shape {list(entry.shape)}", expected="a 2-d table")
        n_rows, width = entry.shape
        bad = [r for r in rows if not 0 <= r < n_rows]
        if bad:
            raise self.fail(f"row {bad[0]} of tensor '{name}' does not exist: it has {n_rows:,} rows")
        table = self.raw(entry).reshape(n_rows, -1)  # (rows, bytes per row)
        picked = np.ascontiguousarray(table[np.asarray(rows, dtype=np.int64)])  # (k, bytes per row)
        return dequantize(entry.kind.name, picked, len(rows) * width).reshape(len(rows), width)


def _open_reader(path: Path) -> GGUFReader:
    try:
        from gguf import GGUFReader
    except ImportError:
        raise AttnError("reading a GGUF file needs llama.cpp's gguf library", expected='pip install "attncli[models]"') from None
    try:
        return GGUFReader(path, "r")
    except (ValueError, KeyError, IndexError, OverflowError, OSError) as error:  # the header walk makes these unexpected
        raise AttnError(f"llama.cpp's reader refused the file: {error}", file=str(path)) from None


# -- Hugging Face names -> GGUF names --------------------------------------------------------

_LLAMA_NAMES = [
    (r"embed_tokens\.weight", "token_embd.weight"),
    (r"norm\.weight", "output_norm.weight"),
    (r"layers\.(\d+)\.input_layernorm\.weight", r"blk.\1.attn_norm.weight"),
    (r"layers\.(\d+)\.post_attention_layernorm\.weight", r"blk.\1.ffn_norm.weight"),
    (r"layers\.(\d+)\.self_attn\.q_proj\.(weight|bias)", r"blk.\1.attn_q.\2"),
    (r"layers\.(\d+)\.self_attn\.k_proj\.(weight|bias)", r"blk.\1.attn_k.\2"),
    (r"layers\.(\d+)\.self_attn\.v_proj\.(weight|bias)", r"blk.\1.attn_v.\2"),
    (r"layers\.(\d+)\.self_attn\.o_proj\.(weight|bias)", r"blk.\1.attn_output.\2"),
    (r"layers\.(\d+)\.mlp\.gate_proj\.(weight|bias)", r"blk.\1.ffn_gate.\2"),
    (r"layers\.(\d+)\.mlp\.up_proj\.(weight|bias)", r"blk.\1.ffn_up.\2"),
    (r"layers\.(\d+)\.mlp\.down_proj\.(weight|bias)", r"blk.\1.ffn_down.\2"),
]
_GPT2_NAMES = [
    (r"wte\.weight", "token_embd.weight"),
    (r"wpe\.weight", "position_embd.weight"),
    (r"h\.(\d+)\.ln_1\.(weight|bias)", r"blk.\1.attn_norm.\2"),
    (r"h\.(\d+)\.attn\.c_attn\.(weight|bias)", r"blk.\1.attn_qkv.\2"),
    (r"h\.(\d+)\.attn\.c_proj\.(weight|bias)", r"blk.\1.attn_output.\2"),
    (r"h\.(\d+)\.ln_2\.(weight|bias)", r"blk.\1.ffn_norm.\2"),
    (r"h\.(\d+)\.mlp\.c_fc\.(weight|bias)", r"blk.\1.ffn_up.\2"),
    (r"h\.(\d+)\.mlp\.c_proj\.(weight|bias)", r"blk.\1.ffn_down.\2"),
]
_BERT_NAMES = [
    (r"embeddings\.word_embeddings\.weight", "token_embd.weight"),
    (r"embeddings\.position_embeddings\.weight", "position_embd.weight"),
    (r"embeddings\.token_type_embeddings\.weight", "token_types.weight"),
    (r"embeddings\.LayerNorm\.(weight|bias)", r"token_embd_norm.\1"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.query\.(weight|bias)", r"blk.\1.attn_q.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.key\.(weight|bias)", r"blk.\1.attn_k.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.value\.(weight|bias)", r"blk.\1.attn_v.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.(weight|bias)", r"blk.\1.attn_output.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.(weight|bias)", r"blk.\1.attn_output_norm.\2"),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.(weight|bias)", r"blk.\1.ffn_up.\2"),
    (r"encoder\.layer\.(\d+)\.output\.dense\.(weight|bias)", r"blk.\1.ffn_down.\2"),
    (r"encoder\.layer\.(\d+)\.output\.LayerNorm\.(weight|bias)", r"blk.\1.layer_output_norm.\2"),
]
_QK_NORMS = [
    (r"layers\.(\d+)\.self_attn\.q_norm\.weight", r"blk.\1.attn_q_norm.weight"),
    (r"layers\.(\d+)\.self_attn\.k_norm\.weight", r"blk.\1.attn_k_norm.weight"),
]
_OLMO2_NAMES = [
    *(entry for entry in _LLAMA_NAMES if "layernorm" not in entry[0]),
    *_QK_NORMS,
    (r"layers\.(\d+)\.post_attention_layernorm\.weight", r"blk.\1.post_attention_norm.weight"),
    (r"layers\.(\d+)\.post_feedforward_layernorm\.weight", r"blk.\1.post_ffw_norm.weight"),
]
_PHI3_NAMES = [
    *(entry for entry in _LLAMA_NAMES if not re.search(r"[qkv]_proj|gate_proj|up_proj", entry[0])),
    (r"layers\.(\d+)\.self_attn\.qkv_proj\.weight", r"blk.\1.attn_qkv.weight"),
    (r"layers\.(\d+)\.mlp\.gate_up_proj\.weight", r"blk.\1.ffn_up.weight"),
]
_NEOX_NAMES = [
    (r"embed_in\.weight", "token_embd.weight"),
    (r"final_layer_norm\.(weight|bias)", r"output_norm.\1"),
    (r"layers\.(\d+)\.input_layernorm\.(weight|bias)", r"blk.\1.attn_norm.\2"),
    (r"layers\.(\d+)\.post_attention_layernorm\.(weight|bias)", r"blk.\1.ffn_norm.\2"),
    (r"layers\.(\d+)\.attention\.query_key_value\.(weight|bias)", r"blk.\1.attn_qkv.\2"),
    (r"layers\.(\d+)\.attention\.dense\.(weight|bias)", r"blk.\1.attn_output.\2"),
    (r"layers\.(\d+)\.mlp\.dense_h_to_4h\.(weight|bias)", r"blk.\1.ffn_up.\2"),
    (r"layers\.(\d+)\.mlp\.dense_4h_to_h\.(weight|bias)", r"blk.\1.ffn_down.\2"),
]
_GEMMA3_NAMES = [
    *(entry for entry in _LLAMA_NAMES if "layernorm" not in entry[0]),
    *_QK_NORMS,
    (r"layers\.(\d+)\.input_layernorm\.weight", r"blk.\1.attn_norm.weight"),
    (r"layers\.(\d+)\.post_attention_layernorm\.weight", r"blk.\1.post_attention_norm.weight"),
    (r"layers\.(\d+)\.pre_feedforward_layernorm\.weight", r"blk.\1.ffn_norm.weight"),
    (r"layers\.(\d+)\.post_feedforward_layernorm\.weight", r"blk.\1.post_ffw_norm.weight"),
]
_GPT_OSS_NAMES = [
    *(entry for entry in _LLAMA_NAMES if "post_attention_layernorm" not in entry[0] and "mlp" not in entry[0]),
    (r"layers\.(\d+)\.post_attention_layernorm\.weight", r"blk.\1.post_attention_norm.weight"),
    (r"layers\.(\d+)\.self_attn\.sinks", r"blk.\1.attn_sinks.weight"),
    (r"layers\.(\d+)\.mlp\.router\.(weight|bias)", r"blk.\1.ffn_gate_inp.\2"),
    (r"layers\.(\d+)\.mlp\.experts\.down_proj_bias", r"blk.\1.ffn_down_exps.bias"),
]  # the experts' matrices and gate/up biases are joined from several tensors (GgufCheckpoint._joined)
_DEEPSEEK2_NAMES = [
    *(entry for entry in _LLAMA_NAMES if re.search(r"embed|norm|layernorm|o_proj|q_proj|mlp", entry[0])),
    (r"layers\.(\d+)\.self_attn\.q_a_proj\.weight", r"blk.\1.attn_q_a.weight"),
    (r"layers\.(\d+)\.self_attn\.q_a_layernorm\.weight", r"blk.\1.attn_q_a_norm.weight"),
    (r"layers\.(\d+)\.self_attn\.q_b_proj\.weight", r"blk.\1.attn_q_b.weight"),
    (r"layers\.(\d+)\.self_attn\.kv_a_proj_with_mqa\.weight", r"blk.\1.attn_kv_a_mqa.weight"),
    (r"layers\.(\d+)\.self_attn\.kv_a_layernorm\.weight", r"blk.\1.attn_kv_a_norm.weight"),
    (r"layers\.(\d+)\.self_attn\.kv_b_proj\.weight", r"blk.\1.attn_kv_b.weight"),  # older files; newer ones split it (_joined)
    (r"layers\.(\d+)\.mlp\.gate\.weight", r"blk.\1.ffn_gate_inp.weight"),
    (r"layers\.(\d+)\.mlp\.gate\.e_score_correction_bias", r"blk.\1.exp_probs_b.bias"),
    (r"layers\.(\d+)\.mlp\.shared_experts\.(gate|up|down)_proj\.weight", r"blk.\1.ffn_\2_shexp.weight"),
]
_NAMES = {
    "llama": _LLAMA_NAMES, "qwen2": _LLAMA_NAMES, "gpt2": _GPT2_NAMES, "bert": _BERT_NAMES,
    "qwen3": [*_LLAMA_NAMES, *_QK_NORMS], "olmo2": _OLMO2_NAMES, "phi3": _PHI3_NAMES, "gptneox": _NEOX_NAMES,
    "gemma3": _GEMMA3_NAMES, "gemma2": [entry for entry in _GEMMA3_NAMES if entry not in _QK_NORMS],
    "gpt-oss": _GPT_OSS_NAMES, "deepseek2": _DEEPSEEK2_NAMES,
}  # fmt: skip
SHIFTED_NORMS = ("gemma2", "gemma3")  # norms stored as 1 + w
_GPT2_TRANSPOSED = re.compile(r"h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight")

# what each kind of tensor is, for `model info` and the header ("W_Q of layer 5 stored as Q4_1")
ROLES = {
    "attn_q": "W_Q", "attn_k": "W_K", "attn_v": "W_V", "attn_qkv": "W_Q, W_K, W_V (fused)", "attn_output": "W_O",
    "ffn_gate": "MLP gate", "ffn_up": "MLP up", "ffn_down": "MLP down",
    "attn_norm": "attention norm", "ffn_norm": "MLP norm", "attn_output_norm": "attention output norm",
    "layer_output_norm": "layer output norm", "token_embd": "token embeddings", "position_embd": "position embeddings",
    "token_types": "token-type embeddings", "token_embd_norm": "embedding norm", "output_norm": "final norm",
    "output": "output (unembedding)", "rope_freqs": "RoPE frequency factors",
    "attn_q_norm": "QK-norm of q", "attn_k_norm": "QK-norm of k",
    "post_attention_norm": "norm after attention", "post_ffw_norm": "norm after the MLP",
    "attn_sinks": "learned attention sinks", "ffn_gate_inp": "MoE router", "ffn_gate_exps": "experts' gate",
    "ffn_up_exps": "experts' up", "ffn_down_exps": "experts' down", "ffn_gate_up_exps": "experts' gate and up (fused)",
    "exp_probs_b": "router's correction bias", "ffn_gate_shexp": "shared expert gate", "ffn_up_shexp": "shared expert up",
    "ffn_down_shexp": "shared expert down", "attn_q_a": "W_DQ (query down-projection)", "attn_q_a_norm": "query latent norm",
    "attn_q_b": "W_UQ | W_QR (query up-projection)", "attn_kv_a_mqa": "W_DKV | W_KR (key/value down-projection, rotary key)",
    "attn_kv_a_norm": "key/value latent norm", "attn_kv_b": "W_UK | W_UV (key/value up-projection)",
    "attn_k_b": "W_UK (key up-projection, split)", "attn_v_b": "W_UV (value up-projection, split)",
}  # fmt: skip


def kind_of(name: str) -> str:
    """'attn_q.weight' of 'blk.5.attn_q.weight'; 'token_embd.weight' stays."""
    return re.sub(r"^blk\.\d+\.", "", name)


def neox_per_head(rows: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's GPT-NeoX query_key_value order: stored (q of all heads, k of all, v of all), back to per head (q, k, v).

    Works on a weight (3·d, in) and on a bias (3·d,).
    """
    back: np.ndarray = rows.reshape(3, heads, -1, *rows.shape[1:]).swapaxes(0, 1).reshape(rows.shape)
    return back


def unpermute(rows: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's per-head row order (pairs 2i, 2i+1) back to Hugging Face's rotate-half order (i, i + d_k/2).

    The converter reshapes a head's d_k rows as (2, d_k/2) and swaps the two axes; this reshapes
    them as (d_k/2, 2) and swaps back. Works on a weight (rows, in) and on a bias (rows,).
    """
    n = rows.shape[0]
    half = n // heads // 2
    back: np.ndarray = rows.reshape(heads, half, 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)
    return back


@dataclass(frozen=True)
class Stored:
    """Where a Hugging Face tensor lives in the file and what must be undone."""

    gguf_name: str
    permute_heads: int | None  # llama's W_Q / W_K rows
    transpose: bool  # GPT-2's Conv1D
    neox_heads: int | None = None  # GPT-NeoX's query_key_value rows
    shift: float = 0.0  # Gemma 2 and 3's norms, stored as 1 + w


@dataclass(frozen=True)
class Joined:
    """A Hugging Face tensor llama.cpp's converter split or rearranged: its shape, and how to rebuild it from the file's tensors."""

    shape: tuple[int, ...]
    parts: tuple[str, ...]  # the GGUF tensors it is made of
    kind: str  # "kv_b" (DeepSeek's attn_k_b + attn_v_b), "expert" (one expert of a 3-d tensor), "gate_up", "down", "gate_up_bias"
    expert: int = 0


class GgufCheckpoint:
    """A GGUF file seen through Hugging Face's tensor names: the same interface as safetensors.Checkpoint."""

    config_source = "the GGUF metadata"

    def __init__(self, file: GgufFile, arch: str, cfg: ModelConfig) -> None:
        self.file = file
        self.arch = arch
        self.cfg = cfg
        self.folder = file.path.parent
        self.described_by = file.path.name
        self.rope_factors = rope_factors(file, cfg.head_dim) if cfg.rope is not None else None
        self.config_keys = config_keys(file) if cfg.model_type in CONFIG_FAMILIES else None  # what a family module reads of config.json

    def locate(self, name: str) -> Stored | None:
        for pattern, target in _NAMES[self.arch]:
            if re.fullmatch(pattern, name):
                gguf_name = re.sub(pattern, target, name)
                heads = None
                if self.arch == "llama" and re.search(r"\.attn_[qk]\.", gguf_name):
                    heads = self.cfg.heads if ".attn_q." in gguf_name else self.cfg.kv_heads
                transpose = self.arch == "gpt2" and bool(_GPT2_TRANSPOSED.fullmatch(name))
                neox = self.cfg.heads if self.arch == "gptneox" and ".attn_qkv." in gguf_name else None
                shift = 1.0 if self.arch in SHIFTED_NORMS and gguf_name.endswith("norm.weight") else 0.0
                return Stored(gguf_name, heads, transpose, neox, shift)
        return None

    def _stored(self, name: str) -> Stored:
        stored = self.locate(name)
        if stored is None or stored.gguf_name not in self.file.tensors:
            wanted = f"'{stored.gguf_name}' (Hugging Face's '{name}')" if stored else f"for '{name}'"
            raise AttnError(f"the file has no tensor {wanted}", file=self.file.where)
        return stored

    def _dims(self, gguf_name: str) -> tuple[int, ...]:
        """A tensor's shape outermost first, from the header."""
        return tuple(reversed(self.file.info(gguf_name).dims))

    def _joined(self, name: str) -> Joined | None:
        """What the converter split or rearranged (DeepSeek's kv_b_proj, merged experts, gpt-oss's gate_up), or None.

        - DeepSeek's kv_b_proj (H·(d_n + d_v), d_c), per head [k | v], is stored by newer converters as attn_k_b
          (H, d_c, d_n), each head's k block transposed, and attn_v_b (H, d_v, d_c); older files keep attn_kv_b whole.
        - DeepSeek's experts.E.{gate,up,down}_proj is expert E of the merged ffn_{gate,up,down}_exps (E, rows, in).
        - gpt-oss's experts.gate_up_proj (E, d, 2·inner), gate and up interleaved along the last axis (x·W, not x·Wᵀ),
          is stored as ffn_gate_exps and ffn_up_exps (E, inner, d) (or both in ffn_gate_up_exps (E, 2·inner, d));
          experts.down_proj (E, inner, d) as ffn_down_exps (E, d, inner); the gate/up bias (E, 2·inner) as two biases.
        """
        m = re.fullmatch(r"layers\.(\d+)\.(.+)", name)
        if m is None:
            return None
        blk, rest = f"blk.{m.group(1)}.", m.group(2)
        have = self.file.tensors
        if self.arch == "deepseek2":
            if rest == "self_attn.kv_b_proj.weight" and blk + "attn_kv_b.weight" not in have:
                k_b, v_b = blk + "attn_k_b.weight", blk + "attn_v_b.weight"
                if k_b not in have or v_b not in have:
                    return None
                (H, d_c, d_n), (H_v, d_v, d_c_v) = self._dims(k_b), self._dims(v_b)
                if (H, d_c) != (H_v, d_c_v):
                    raise AttnError(f"attn_k_b {[H, d_c, d_n]} and attn_v_b {[H_v, d_v, d_c_v]} do not pair", file=self.file.where,
                                    expected="(heads, kv_lora_rank, nope) and (heads, v_head_dim, kv_lora_rank)")  # fmt: skip
                return Joined((H * (d_n + d_v), d_c), (k_b, v_b), "kv_b")
            e = re.fullmatch(r"mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight", rest)
            if e is not None:
                merged = f"{blk}ffn_{e.group(2)}_exps.weight"
                if merged not in have or len(self._dims(merged)) != 3 or int(e.group(1)) >= self._dims(merged)[0]:
                    return None
                return Joined(self._dims(merged)[1:], (merged,), "expert", int(e.group(1)))
        if self.arch == "gpt-oss" and rest.startswith("mlp.experts."):
            what = rest.removeprefix("mlp.experts.")
            fused = blk + "ffn_gate_up_exps." + ("bias" if what.endswith("_bias") else "weight")
            if what in ("gate_up_proj", "gate_up_proj_bias"):
                suffix = "bias" if what.endswith("_bias") else "weight"
                parts = (fused,) if fused in have else (f"{blk}ffn_gate_exps.{suffix}", f"{blk}ffn_up_exps.{suffix}")
                if not all(part in have for part in parts):
                    return None
                dims = self._dims(parts[0])
                rows = dims[1] if len(parts) == 2 else dims[1] // 2  # inner
                if suffix == "bias":
                    return Joined((dims[0], 2 * rows), parts, "gate_up_bias")
                return Joined((dims[0], dims[2], 2 * rows), parts, "gate_up")
            if what == "down_proj" and blk + "ffn_down_exps.weight" in have:
                E, d, inner = self._dims(blk + "ffn_down_exps.weight")
                return Joined((E, inner, d), (blk + "ffn_down_exps.weight",), "down")
        return None

    def _rebuild(self, joined: Joined, expert: int | None = None) -> np.ndarray:
        """The Hugging Face tensor (or, for the 3-d gpt-oss experts, one expert of it) from the file's tensors, exactly."""
        f = self.file
        if joined.kind == "kv_b":
            k_b, v_b = f.read(joined.parts[0]), f.read(joined.parts[1])  # (H, d_c, d_n), (H, d_v, d_c)
            per_head = np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1)  # (H, d_n + d_v, d_c)
            return np.ascontiguousarray(per_head.reshape(joined.shape))
        if joined.kind == "expert":
            return f.read_expert(joined.parts[0], joined.expert)
        if joined.kind == "gate_up_bias":
            gate, up = (f.read(joined.parts[0]), f.read(joined.parts[1])) if len(joined.parts) == 2 else np.split(f.read(joined.parts[0]), 2, axis=1)
            out = np.empty(joined.shape)  # (E, 2·inner)
            out[:, 0::2], out[:, 1::2] = gate, up
            return out
        experts = range(joined.shape[0]) if expert is None else (expert,)
        blocks = [self._expert(joined, e) for e in experts]
        return np.stack(blocks) if expert is None else blocks[0]

    def _expert(self, joined: Joined, e: int) -> np.ndarray:
        """One expert of gpt-oss's gate_up_proj (d, 2·inner) or down_proj (inner, d), from the file's per-expert rows."""
        f = self.file
        if joined.kind == "down":
            return np.ascontiguousarray(f.read_expert(joined.parts[0], e).T)  # (d, inner) → (inner, d)
        if len(joined.parts) == 2:
            gate, up = f.read_expert(joined.parts[0], e), f.read_expert(joined.parts[1], e)  # (inner, d) each
        else:
            gate, up = np.split(f.read_expert(joined.parts[0], e), 2, axis=0)
        out = np.empty(joined.shape[1:])  # (d, 2·inner)
        out[:, 0::2], out[:, 1::2] = gate.T, up.T
        return out

    def has(self, name: str) -> bool:
        if self._joined(name) is not None:
            return True
        stored = self.locate(name)
        return stored is not None and stored.gguf_name in self.file.tensors

    def file_of(self, name: str) -> Path:
        return self.file.path

    def shape(self, name: str) -> tuple[int, ...]:
        """Hugging Face's shape of the tensor, from the header (stored innermost first); nothing is read."""
        joined = self._joined(name)
        if joined is not None:
            return joined.shape
        stored = self._stored(name)
        shape = tuple(reversed(self.file.info(stored.gguf_name).dims))
        return shape[::-1] if stored.transpose else shape

    def read(self, name: str) -> np.ndarray:
        joined = self._joined(name)
        if joined is not None:
            return self._rebuild(joined)
        stored = self._stored(name)
        value = self.file.read(stored.gguf_name)
        if stored.permute_heads is not None:
            value = unpermute(value, stored.permute_heads)
        if stored.transpose:
            value = np.ascontiguousarray(value.T)
        if stored.neox_heads is not None:
            value = neox_per_head(value, stored.neox_heads)
        if stored.shift:
            value = value - stored.shift  # exact: a float32 1 + w less 1 is a float64 number
        return value

    def read_rows(self, name: str, rows: Sequence[int]) -> np.ndarray:
        return self.file.read_rows(self._stored(name).gguf_name, rows)

    def row_blocks(self, name: str) -> Iterator[tuple[int, np.ndarray]]:
        """The tensor in one block (a quantised tensor is dequantised whole: its blocks run along rows anyway);
        gpt-oss's 3-d experts one expert at a time, so only one expert's matrix is in float64 at once."""
        joined = self._joined(name)
        if joined is not None and joined.kind in ("gate_up", "down"):
            for e in range(joined.shape[0]):
                yield e, self._rebuild(joined, e)[None]
            return
        yield 0, self.read(name)

    def stored_dtype(self, name: str) -> str:
        joined = self._joined(name)
        return self.file.info(joined.parts[0] if joined else self._stored(name).gguf_name).kind.name

    def provenance(self, layer: int) -> tuple[str, ...]:
        """'W_Q of layer 5 stored as Q4_1 (5.0 bits per weight), dequantised exactly to float64', one line per matrix."""
        lines = []
        attention = ("attn_q", "attn_k", "attn_v", "attn_qkv", "attn_q_a", "attn_q_b", "attn_kv_a_mqa", "attn_kv_b", "attn_k_b", "attn_v_b", "attn_output")
        experts = ("ffn_gate_exps", "ffn_up_exps", "ffn_gate_up_exps", "ffn_down_exps")  # the layer before's: they made this layer's input
        for kind, at in (*((k, layer) for k in attention), *((k, layer - 1) for k in experts)):
            entry = self.file.tensors.get(f"blk.{at - 1}.{kind}.weight")
            if entry is not None and at >= 1:
                how = "widened exactly" if entry.kind.name in ("F32", "F16", "BF16", "F64") else "dequantised exactly"
                lines.append(
                    f"{ROLES[kind]} of layer {at} stored as {entry.kind.name} ({entry.kind.bits_per_weight:g} bits per weight), {how} to float64"
                )
        if f"blk.{layer - 1}.attn_k_b.weight" in self.file.tensors and f"blk.{layer - 1}.attn_kv_b.weight" not in self.file.tensors:
            lines.append(f"kv_b_proj of layer {layer} joined from attn_k_b (transposed back per head) and attn_v_b, as the converter split it")
        if self.arch == "gemma2":
            lines.append(gemma2_scale_note(self.file))
        return tuple(lines)


# -- config from the metadata ----------------------------------------------------------------


def architecture(file: GgufFile) -> tuple[str, str]:
    """(GGUF architecture, attncli model type), or one clear error naming what is supported."""
    arch = file.value("general.architecture")
    if not isinstance(arch, str):
        raise file.fail(f"found {arch!r}", key="general.architecture", expected="the model's architecture name")
    if arch not in ARCHITECTURES:
        raise file.fail(f"the architecture {arch!r} is not supported", key="general.architecture", expected="one of " + ", ".join(ARCHITECTURES))
    return arch, ARCHITECTURES[arch]


def read_config(file: GgufFile) -> tuple[str, ModelConfig]:
    """The GGUF architecture and a ModelConfig from the metadata under `{arch}.…`."""
    arch, model_type = architecture(file)
    a = arch + "."
    if model_type in CONFIG_FAMILIES:
        return arch, _family_config(file, arch, model_type)
    layers = file.count(a + "block_count")
    hidden = file.count(a + "embedding_length")
    heads = file.count(a + "attention.head_count")
    positions = file.count(a + "context_length")
    inter = file.count(a + "feed_forward_length")
    common: dict[str, Any] = {"layers": layers, "hidden_size": hidden, "heads": heads, "intermediate_size": inter, "max_positions": positions, "dtype": None}
    if model_type in ("gpt2", "bert"):
        if hidden % heads:
            raise file.fail(f"{heads} heads do not divide the hidden size {hidden}", key=a + "attention.head_count")
        bias = f"blk.0.attn_{'qkv' if model_type == 'gpt2' else 'q'}.bias" in file.tensors
        if model_type == "gpt2":
            return arch, ModelConfig(
                model_type="gpt2", kv_heads=heads, head_dim=hidden // heads, norm_eps=file.number(a + "attention.layer_norm_epsilon", default=1e-5),
                activation="gelu_new", rope=None, windows=(None,) * layers, causal=True, qkv_bias=bias, output_bias=bias, mlp_bias=bias, **common,
            )  # fmt: skip
        types = file.tensors.get("token_types.weight")
        return arch, ModelConfig(
            model_type="bert", kv_heads=heads, head_dim=hidden // heads, norm_eps=file.number(a + "attention.layer_norm_epsilon", default=1e-12),
            activation="gelu", rope=None, windows=(None,) * layers, causal=bool(file.value(a + "attention.causal") or False),
            qkv_bias=True, output_bias=True, mlp_bias=True, type_vocab_size=types.shape[0] if types else 0, **common,
        )  # fmt: skip
    kv_heads = file.count(a + "attention.head_count_kv", default=heads)
    if heads % kv_heads:
        raise file.fail(f"{kv_heads} key/value heads do not divide {heads} heads", key=a + "attention.head_count_kv")
    if not file.has_key(a + "attention.key_length") and hidden % heads:
        raise file.fail(f"{heads} heads do not divide the hidden size {hidden}", key=a + "attention.head_count")
    head_dim = file.count(a + "attention.key_length", default=hidden // heads)
    value_dim = file.count(a + "attention.value_length", default=head_dim)
    if value_dim != head_dim:
        raise file.fail(f"values of {value_dim} numbers beside keys of {head_dim}", key=a + "attention.value_length", expected="d_v = d_k")
    rotary = file.count(a + "rope.dimension_count", default=head_dim)
    if rotary != head_dim:
        raise file.fail(f"RoPE turns {rotary} of the {head_dim} numbers of each head", key=a + "rope.dimension_count", expected="RoPE on the whole head")
    if head_dim % 2:
        raise file.fail(f"the head size {head_dim} is odd", key=a + "attention.key_length", expected="an even head size (RoPE turns pairs)")
    return arch, ModelConfig(
        model_type=model_type, kv_heads=kv_heads, head_dim=head_dim,
        norm_eps=file.number(a + "attention.layer_norm_rms_epsilon", default=1e-6 if model_type == "qwen2" else 1e-5),
        activation="silu", rope=_rope(file, a), windows=(None,) * layers, causal=True,
        qkv_bias="blk.0.attn_q.bias" in file.tensors, output_bias="blk.0.attn_output.bias" in file.tensors,
        mlp_bias="blk.0.ffn_up.bias" in file.tensors, **common,
    )  # fmt: skip


CONFIG_FAMILIES = ("qwen3", "olmo2", "phi3", "gpt_neox", "gemma3_text", "gemma2", "gpt_oss", "deepseek_v3")  # read as config.json keys (families.config_from_raw)


def _family_config(file: GgufFile, arch: str, model_type: str) -> ModelConfig:
    """The config of a family, from the metadata spelled as its config.json (imported here: only GGUF files of these families need every family module)."""
    from attncli.sources.checkpoints.families import config_from_raw

    cfg = config_from_raw(config_keys(file), f"{file.where} (metadata under '{arch}.…')")
    return dataclasses.replace(cfg, dtype=None)


def config_keys(file: GgufFile) -> dict[str, Any]:
    """The metadata of a Qwen3, OLMo 2, Phi-3 or GPT-NeoX file as config.json's keys (the converter's set_gguf_parameters undone)."""
    arch, model_type = architecture(file)
    a = arch + "."
    heads = file.count(a + "attention.head_count")
    hidden = file.count(a + "embedding_length")
    if not file.has_key(a + "attention.key_length") and hidden % heads:
        raise file.fail(f"{heads} heads do not divide the hidden size {hidden}", key=a + "attention.head_count")
    head_dim = file.count(a + "attention.key_length", default=hidden // heads)
    rotary = file.count(a + "rope.dimension_count", default=head_dim)
    if rotary > head_dim or rotary % 2:
        raise file.fail(f"RoPE turns {rotary} of the {head_dim} numbers of each head", key=a + "rope.dimension_count", expected="an even number up to the head size")
    kind = file.value(a + "rope.scaling.type")
    if kind not in (None, "none") or "rope_factors_long.weight" in file.tensors:
        raise file.fail(f"the RoPE scaling {kind or 'longrope'!r} is not supported in {arch} files", key=a + "rope.scaling.type", expected="no RoPE scaling")
    raw: dict[str, Any] = {
        "model_type": model_type,
        "num_hidden_layers": file.count(a + "block_count"),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "intermediate_size": file.count(a + "feed_forward_length"),
        "max_position_embeddings": file.count(a + "context_length"),
        "rope_parameters": {"rope_type": "default", "rope_theta": file.number(a + "rope.freq_base", default=10_000.0), "partial_rotary_factor": rotary / head_dim},
    }
    if model_type == "gemma3_text":  # llama.cpp's own rules where the converter stores nothing (llama-model.cpp, LLM_ARCH_GEMMA3)
        layers = raw["num_hidden_layers"]
        sliding = sliding_layers(file, a, layers, 6)
        theta = raw["rope_parameters"]["rope_theta"]
        raw |= {
            "num_key_value_heads": file.count(a + "attention.head_count_kv", default=heads),
            "head_dim": head_dim,
            "rms_norm_eps": file.number(a + "attention.layer_norm_rms_epsilon", default=1e-6),
            "hidden_activation": "gelu_pytorch_tanh",
            "sliding_window": file.count(a + "attention.sliding_window", default=4096),
            "layer_types": ["sliding_attention" if s else "full_attention" for s in sliding],
            "rope_parameters": {
                "full_attention": {"rope_type": "default", "rope_theta": theta},
                "sliding_attention": {"rope_type": "default", "rope_theta": file.number(a + "rope.freq_base_swa", default=10_000.0)},
            },
            "query_pre_attn_scalar": hidden // heads if layers == 62 else head_dim,  # llama.cpp: 1/√(d/H) for the 27B (62 layers), else 1/√d_k
            "attention_bias": False,
        }
        return raw
    if model_type == "gemma2":
        return raw | _gemma2_keys(file, a, raw, head_dim)
    if model_type == "gpt_oss":
        return raw | _gpt_oss_keys(file, a, raw, head_dim)
    if model_type == "deepseek_v3":
        return raw | _deepseek_keys(file, a, raw)
    if model_type == "gpt_neox":
        raw |= {
            "layer_norm_eps": file.number(a + "attention.layer_norm_epsilon", default=1e-5),
            "use_parallel_residual": bool(file.value(a + "use_parallel_residual") if file.has_key(a + "use_parallel_residual") else True),
            "attention_bias": "blk.0.attn_qkv.bias" in file.tensors,
            "hidden_act": "gelu",  # GGUF stores no activation; Pythia's is GELU (llama.cpp computes it with tanh's approximation)
        }
    else:
        raw |= {
            "num_key_value_heads": file.count(a + "attention.head_count_kv", default=heads),
            "head_dim": head_dim,
            "rms_norm_eps": file.number(a + "attention.layer_norm_rms_epsilon", default=1e-6),
            "attention_bias": "blk.0.attn_q.bias" in file.tensors,
        }
        window = file.value(a + "attention.sliding_window")
        if model_type == "phi3" and window:
            raw["sliding_window"] = window
    return raw


def sliding_layers(file: GgufFile, a: str, layers: int, period: int) -> list[bool]:
    """Which layers slide, as llama.cpp's set_swa_pattern decides: the file's per-layer list, or a period p (the key, else
    the architecture's): layer i (from 0) slides unless i % p == p − 1."""
    pattern = file.value(a + "attention.sliding_window_pattern")
    if isinstance(pattern, list):
        if len(pattern) != layers:
            raise file.fail(f"{len(pattern)} layer kinds for {layers} layers", key=a + "attention.sliding_window_pattern")
        return [bool(x) for x in pattern]
    if pattern is not None:
        period = file.count(a + "attention.sliding_window_pattern")
    return [i % period < period - 1 for i in range(layers)]


def gemma2_scalar(file: GgufFile) -> tuple[int, str]:
    """(query_pre_attn_scalar, why) as llama.cpp derives it for gemma2: n_embd / n_head for the 27B (46 layers), else key_length.

    The converter stores no query_pre_attn_scalar; llama.cpp (llama-model.cpp, LLM_ARCH_GEMMA2) sets the attention scale
    from the model's size, after gemma_pytorch's config: 1/√(n_embd / n_head) when the file has 46 layers (LLM_TYPE_27B),
    1/√(n_embd_head_k) otherwise. It gives the published configs' values: 256 for Gemma 2 2B and 9B (head_dim 256),
    144 = 4608 / 32 for the 27B (head_dim 128).
    """
    a = "gemma2."
    layers = file.count(a + "block_count")
    hidden, heads = file.count(a + "embedding_length"), file.count(a + "attention.head_count")
    head_dim = file.count(a + "attention.key_length", default=hidden // heads)
    if layers == GEMMA2_27B_LAYERS:
        return hidden // heads, f"n_embd / n_head = {hidden} / {heads}, llama.cpp's rule for the 27B ({GEMMA2_27B_LAYERS} layers)"
    return head_dim, f"the head size (key_length), llama.cpp's rule for every Gemma 2 but the 27B ({GEMMA2_27B_LAYERS} layers; this file has {layers})"


def gemma2_scale_note(file: GgufFile) -> str:
    scalar, why = gemma2_scalar(file)
    return (f"the GGUF file stores no query_pre_attn_scalar: the scale is derived as llama.cpp derives it, "
            f"query_pre_attn_scalar = {scalar}, {why}")  # fmt: skip


def _gemma2_keys(file: GgufFile, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """Gemma 2's config.json keys from the metadata, with llama.cpp's rules where the converter stores nothing."""
    layers = raw["num_hidden_layers"]
    heads = raw["num_attention_heads"]
    caps = {key: file.number(a + key, default=default) for key, default in (("attn_logit_softcapping", 50.0), ("final_logit_softcapping", 30.0))}
    return {
        "num_key_value_heads": file.count(a + "attention.head_count_kv", default=heads),
        "head_dim": head_dim,
        "rms_norm_eps": file.number(a + "attention.layer_norm_rms_epsilon", default=1e-6),
        "hidden_activation": "gelu_pytorch_tanh",
        "sliding_window": file.count(a + "attention.sliding_window", default=4096),  # llama.cpp's default for gemma2
        "layer_types": ["sliding_attention" if s else "full_attention" for s in sliding_layers(file, a, layers, 2)],
        "query_pre_attn_scalar": gemma2_scalar(file)[0],
        "attention_bias": "blk.0.attn_q.bias" in file.tensors,
        **caps,
    }


def _gpt_oss_keys(file: GgufFile, a: str, raw: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """gpt-oss's config.json keys from the metadata; the SwiGLU clamp and α are llama.cpp's constants (7 and 1.702)."""
    layers = raw["num_hidden_layers"]
    experts = file.count(a + "expert_count")
    return {
        "num_key_value_heads": file.count(a + "attention.head_count_kv", default=raw["num_attention_heads"]),
        "head_dim": head_dim,
        "rms_norm_eps": file.number(a + "attention.layer_norm_rms_epsilon", default=1e-5),
        "intermediate_size": file.count(a + "expert_feed_forward_length", default=raw["intermediate_size"]),
        "num_local_experts": experts,
        "num_experts_per_tok": file.count(a + "expert_used_count"),
        "sliding_window": file.count(a + "attention.sliding_window"),
        "layer_types": ["sliding_attention" if s else "full_attention" for s in sliding_layers(file, a, layers, 2)],
        "attention_bias": "blk.0.attn_q.bias" in file.tensors,
        "swiglu_limit": 7.0,
        "swiglu_alpha": 1.702,
        "hidden_act": "silu",
    }


def _deepseek_keys(file: GgufFile, a: str, raw: dict[str, Any]) -> dict[str, Any]:
    """DeepSeek V3's config.json keys from the metadata under deepseek2.… (the converter's set_gguf_parameters undone).

    The converter writes MLA as multi-query attention over the latent: key_length = kv_lora_rank + rope, value_length =
    kv_lora_rank, and the per-head sizes as key_length_mla / value_length_mla (older files: key_length = nope + rope and
    value_length = v_head_dim). llama.cpp applies RoPE to interleaved pairs (the checkpoint's own order: nothing permuted).
    A file whose router is not the sigmoid (DeepSeek V2's softmax, or no gating key, which llama.cpp reads as V2) is refused:
    attncli reads V3's files only (V2's, with their softmax router, have no fixture yet).
    """
    gating = file.value(a + "expert_gating_func")
    if gating != 2:
        said = EXPERT_GATING.get(gating, repr(gating)) if gating is not None else "not stored (llama.cpp then routes as DeepSeek V2, by softmax)"
        raise file.fail(f"the expert router is {said}: attncli reads DeepSeek V3 (sigmoid router) only", key=a + "expert_gating_func",
                        expected="2 (sigmoid), as DeepSeek V3 files have it")  # fmt: skip
    rope = file.count(a + "rope.dimension_count")
    kv_lora = file.count(a + "attention.kv_lora_rank")
    if file.has_key(a + "attention.key_length_mla"):
        qk, v = file.count(a + "attention.key_length_mla"), file.count(a + "attention.value_length_mla")
    else:
        qk, v = file.count(a + "attention.key_length"), file.count(a + "attention.value_length")
    if qk <= rope:
        raise file.fail(f"a query/key head of {qk} numbers with {rope} rotary ones", key=a + "attention.key_length_mla", expected="more than the rotary part")
    experts = file.count(a + "expert_count")
    groups = file.count(a + "expert_group_count", default=1)
    q_lora = file.count(a + "attention.q_lora_rank") if file.has_key(a + "attention.q_lora_rank") else None
    return {
        "num_key_value_heads": raw["num_attention_heads"],  # the converter's head_count_kv = 1 is MLA seen as MQA
        "head_dim": rope,
        "rms_norm_eps": file.number(a + "attention.layer_norm_rms_epsilon", default=1e-6),
        "rope_parameters": {"rope_type": "default", "rope_theta": raw["rope_parameters"]["rope_theta"]},
        "q_lora_rank": q_lora,
        "kv_lora_rank": kv_lora,
        "qk_nope_head_dim": qk - rope,
        "qk_rope_head_dim": rope,
        "v_head_dim": v,
        "rope_interleave": True,
        "n_routed_experts": experts,
        "num_experts_per_tok": file.count(a + "expert_used_count"),
        "n_shared_experts": file.count(a + "expert_shared_count", default=0, minimum=0),
        "n_group": groups,
        "topk_group": file.count(a + "expert_group_used_count", default=groups),
        "first_k_dense_replace": file.count(a + "leading_dense_block_count", default=0, minimum=0),
        "moe_intermediate_size": file.count(a + "expert_feed_forward_length"),
        "routed_scaling_factor": file.number(a + "expert_weights_scale", default=1.0),
        "norm_topk_prob": bool(file.value(a + "expert_weights_norm") or False),
        "attention_bias": False,
    }


def _rope(file: GgufFile, a: str) -> RopeConfig:
    theta = file.number(a + "rope.freq_base", default=10_000.0)
    kind = file.value(a + "rope.scaling.type")
    if kind in (None, "none"):
        return RopeConfig(theta=theta, kind="default")
    if kind == "linear":
        return RopeConfig(theta=theta, kind="linear", factor=file.number(a + "rope.scaling.factor"))
    raise file.fail(f"the RoPE scaling {kind!r} is not supported", key=a + "rope.scaling.type", expected="none or linear (llama3 scaling comes as rope_freqs)")


def rope_factors(file: GgufFile, head_dim: int) -> np.ndarray | None:
    """(d_k/2,) llama.cpp's per-frequency divisors (`rope_freqs.weight`, how its converter stores llama3 scaling), or None."""
    if "rope_freqs.weight" not in file.tensors:
        return None
    factors = file.read("rope_freqs.weight").reshape(-1)
    if factors.shape != (head_dim // 2,) or not np.all(factors > 0):
        raise file.fail(f"rope_freqs.weight has {factors.size} numbers", expected=f"{head_dim // 2} positive factors, one per frequency")
    return factors


@dataclass(frozen=True, eq=False)
class GgufModel:
    """A GGUF file opened for attncli: its architecture, config and tensors under Hugging Face's names."""

    file: GgufFile
    arch: str
    cfg: ModelConfig
    checkpoint: GgufCheckpoint


def open_model(path: Path) -> GgufModel:
    """The checked file, its config from the metadata, and its tensors; any flaw is one AttnError."""
    file = GgufFile(path)
    arch, cfg = read_config(file)
    return GgufModel(file, arch, cfg, GgufCheckpoint(file, arch, cfg))
