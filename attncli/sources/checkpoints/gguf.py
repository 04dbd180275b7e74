"""GGUF files (llama.cpp, Ollama, LM Studio) as another source of a model's tensors and config.

The file is mapped read-only and its header walked with bounds (gguf_header.py): every count and
length checked against the file before anything is allocated, each metadata value built only when
asked for, and every size attncli reads checked against the limits config.json's are held to
(`SIZES`, config.MOST). Only the tensors a layer needs are dequantised (gguf_quants.py), exactly,
to float64.

`GgufCheckpoint` answers to the Hugging Face tensor names the architecture modules ask for
(`layers.3.self_attn.q_proj.weight`) with the tensors llama.cpp's converter (convert_hf_to_gguf.py)
wrote (`blk.3.attn_q.weight`), undoing what the converter changed. This module is the machinery and
names no architecture: what each one's converter did is declared by its family module (`GGUF`, a
tuple of gguf_family.GgufArchitecture, collected by families.gguf_architectures()):
- its names: Hugging Face's, as regexes, and the GGUF names they become;
- shapes are stored innermost first; read outermost first they are nn.Linear's (out, in) again;
- `interleaved_qk`: the rows of W_Q and W_K permuted within each head, from Hugging Face's rotate-half
  pairing (i, i + d_k/2) to llama.cpp's interleaved pairs (2i, 2i + 1); the rows are put back, so the
  numbers equal the Hugging Face model's;
- `transposed`: Conv1D weights stored as nn.Linear's; they are transposed back;
- `qkv_by_kind`: a fused query_key_value laid out per head (q, k, v of head 1, then of head 2, …) stored
  as all queries, then all keys, then all values; the rows are put back per head;
- `shifted_norms`: norms stored as 1 + w (ggml multiplies by the weight, transformers by 1 + w); the 1 is
  taken off again (not from `kept_norms`);
- `joined`: tensors the converter split or merged (experts per expert or in one 3-d tensor, a split
  kv_b_proj), each put back as the Hugging Face tensor (GgufCheckpoint._rebuild);
- the config: either built from the metadata by the family (`config`), or the metadata spelled as
  config.json's keys (`keys`) and read by the family's own read_config.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attncli.errors import AttnError, did_you_mean, option, same_name
from attncli.sources import reading
from attncli.sources.checkpoints.config import LEAST_NUMBER, MOST, ModelConfig, positive_number, shown_value
from attncli.sources.checkpoints.families import config_from_raw, gguf_architecture, gguf_architectures
from attncli.sources.checkpoints.gguf_family import GgufArchitecture, Joined
from attncli.sources.checkpoints.gguf_header import Header, TensorInfo, open_header
from attncli.sources.checkpoints.gguf_header import value as field_value
from attncli.sources.checkpoints.gguf_quants import READABLE, dequantize
from attncli.sources.checkpoints.source import TensorSource
from attncli.sources.checkpoints.token_cache import prefix_sha256

SUFFIX = ".gguf"
OLLAMA_PREFIX = "ollama:"
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"


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


def _ollama_models(root: Path, most: int = 10_000) -> list[str]:
    """The models of an Ollama store as `ollama list` names them (smollm2:135m, user/model:tag, host/namespace/model:tag)."""
    names = []
    for manifest in itertools.islice((root / "manifests").glob("*/*/*/*"), most):
        host, namespace, model, tag = manifest.relative_to(root / "manifests").parts
        prefix = "" if host == "registry.ollama.ai" and namespace == "library" else (f"{namespace}/" if host == "registry.ollama.ai" else f"{host}/{namespace}/")
        names.append(f"{prefix}{model}:{tag}")
    return names


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
            f"Ollama has no model {name!r} here (no manifest {manifest}){did_you_mean(name, _ollama_models(root))}",
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

# The largest value of each size the metadata gives (the key after "{arch}."), as config.json's (config.MOST):
# checked before anything is built from it. Any other whole number: at most MOST["vocabulary"].
SIZES = {
    **dict.fromkeys(("block_count", "leading_dense_block_count", "attention.sliding_window_pattern"), MOST["layers"]),
    **dict.fromkeys(("embedding_length", "attention.q_lora_rank", "attention.kv_lora_rank"), MOST["hidden"]),
    **dict.fromkeys(("attention.head_count", "attention.head_count_kv", "expert_count", "expert_used_count", "expert_shared_count",
                     "expert_group_count", "expert_group_used_count"), MOST["heads"]),
    **dict.fromkeys(("attention.key_length", "attention.value_length", "attention.key_length_mla", "attention.value_length_mla",
                     "rope.dimension_count"), MOST["head_dim"]),
    **dict.fromkeys(("feed_forward_length", "expert_feed_forward_length"), MOST["inner"]),
    **dict.fromkeys(("context_length", "attention.sliding_window", "rope.scaling.original_context_length"), MOST["positions"]),
}  # fmt: skip
MOST_NUMBER = 1e30  # a positive number (θ, ε, a scaling factor, a soft cap): from config.LEAST_NUMBER to this, as config.json's


class GgufFile:
    """A checked GGUF file: its header, its metadata built on demand, its tensors mapped and dequantised on demand.

    The file counts among the command's inputs, which no output may replace (reading.note_read). One part of a
    split file (split.count above 1) is refused: its tensors are spread over the other parts.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)
        self.header: Header
        self.header, self._data = open_header(path)
        self._values: dict[str, Any] = {}
        reading.note_read(path)
        self._refuse_a_part()

    def _refuse_a_part(self) -> None:
        parts = self.value("split.count") if self.has_key("split.count") else None
        if parts is None or parts == 1:
            return
        number = self.value("split.no") if self.has_key("split.no") else None
        which = f"part {number + 1} of {parts}" if isinstance(number, int) and isinstance(parts, int) else f"a part ({parts!r} parts)"
        raise self.fail(
            f"{which} of a split GGUF file: its tensors are spread over the other parts, and attncli reads one whole file",
            key="split.count",
            expected="one file: join the parts with llama.cpp's `llama-gguf-split --merge FIRST-PART OUT.gguf`",
        )

    @property
    def tensors(self) -> dict[str, TensorInfo]:
        return self.header.tensors

    def fail(self, message: str, key: str | None = None, expected: str | None = None) -> AttnError:
        return AttnError(message, file=self.where, key=key, expected=expected)

    def has_key(self, key: str) -> bool:
        return key in self.header.fields

    def value(self, key: str) -> Any:
        """A metadata value as Python: int, float, bool, str, or a list; None when absent. Built once, when first asked for."""
        if key not in self._values:
            field = self.header.fields.get(key)
            self._values[key] = None if field is None else field_value(self._data, field, key, self.where)
        return self._values[key]

    def count(self, key: str, *, default: int | None = None, minimum: int = 1, most: int | None = None) -> int:
        """A whole number from `minimum` to `most` (else the key's limit in SIZES), with config.json's words."""
        if most is None:
            most = SIZES.get(key.split(".", 1)[-1], MOST["vocabulary"])
        expected = f"a whole number from {minimum} to {most:,}"
        value = self.value(key)
        if value is None:
            if default is not None:
                return default
            raise self.fail("the key is missing", key=key, expected=expected)
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= most:
            raise self.fail(f"found {shown_value(value)}", key=key, expected=expected)
        return value

    def number(self, key: str, *, default: float | None = None, most: float = MOST_NUMBER) -> float:
        """A positive finite number from LEAST_NUMBER to `most`, with config.json's words."""
        value = self.value(key)
        if value is None and default is not None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or not LEAST_NUMBER <= value <= most:
            raise self.fail(f"found {shown_value(value)}", key=key, expected=positive_number(most))
        return float(value)

    def info(self, name: str) -> TensorInfo:
        entry = self.tensors.get(name)
        if entry is None:
            raise self.fail(f"no tensor '{name}' in the file")
        return entry

    def raw(self, entry: TensorInfo) -> np.ndarray:
        """(nbytes,) uint8: the tensor's bytes, a view into the memory map (nothing copied)."""
        view: np.ndarray = np.frombuffer(self._data, dtype=np.uint8, count=entry.nbytes, offset=entry.begin)
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


# -- Hugging Face names -> GGUF names --------------------------------------------------------

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


def metadata_number(file: GgufFile, key: str, layer: int) -> float:
    """Layer `layer`'s number of a per-layer metadata list (`xielu.alpha_p`: a learned scalar the converter moved out of the tensors)."""
    values = file.value(key)
    layers = file.count(f"{file.value('general.architecture')}.block_count")
    if not isinstance(values, list) or len(values) != layers or not all(isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v) for v in values):
        raise file.fail(f"found {shown_value(values)}", key=key, expected=f"a list of {layers} numbers, one per layer")
    return float(values[layer])


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
    permute_heads: int | None  # W_Q's / W_K's rows in llama.cpp's interleaved order (`interleaved_qk`)
    transpose: bool  # Conv1D's (in, out) stored as nn.Linear's (`transposed`)
    neox_heads: int | None = None  # a fused query_key_value's rows stored by kind (`qkv_by_kind`)
    shift: float = 0.0  # norms stored as 1 + w (`shifted_norms`)


class GgufCheckpoint:
    """A GGUF file seen through Hugging Face's tensor names: the same interface as safetensors.Checkpoint."""

    config_source = "the GGUF metadata"

    def __init__(self, file: GgufFile, arch: str, cfg: ModelConfig) -> None:
        self.file = file
        self.arch = arch
        self.cfg = cfg
        self.folder = file.path.parent
        self.described_by = file.path.name
        self.family: GgufArchitecture = _family(arch)
        self.rope_factors = rope_factors(file, cfg.head_dim) if cfg.rope is not None else None
        self.config_keys = config_keys(file)  # what a family module reads of config.json, when its config is read from them

    def locate(self, name: str) -> Stored | None:
        family = self.family
        for pattern, target in family.names:
            if re.fullmatch(pattern, name):
                gguf_name = re.sub(pattern, target, name)
                heads = None
                if family.interleaved_qk and re.search(r"\.attn_[qk]\.", gguf_name):
                    heads = self.cfg.heads if ".attn_q." in gguf_name else self.cfg.kv_heads
                transpose = family.transposed is not None and re.fullmatch(family.transposed, name) is not None
                neox = self.cfg.heads if family.qkv_by_kind and ".attn_qkv." in gguf_name else None
                kept = family.kept_norms is not None and re.fullmatch(family.kept_norms, gguf_name) is not None
                shift = 1.0 if family.shifted_norms and gguf_name.endswith("norm.weight") and not kept else 0.0
                return Stored(gguf_name, heads, transpose, neox, shift)
        return None

    def _stored(self, name: str) -> Stored:
        stored = self.locate(name)
        if stored is None or stored.gguf_name not in self.file.tensors:
            wanted = f"'{stored.gguf_name}' (Hugging Face's '{name}')" if stored else f"for '{name}'"
            raise AttnError(f"the file has no tensor {wanted}", file=self.file.where)
        return stored

    def _joined(self, name: str) -> Joined | None:
        """What the converter split or rearranged, as the family declares it (`joined`), or None."""
        m = re.fullmatch(r"layers\.(\d+)\.(.+)", name)
        if self.family.joined is None:
            return None
        if m is None:  # a tensor of the model, not of a layer (Gemma 3n's altup_projections, stacked into one): prefix ""
            return self.family.joined(self.file, "", name)
        return self.family.joined(self.file, f"blk.{m.group(1)}.", m.group(2))

    def _rebuild(self, joined: Joined, expert: int | None = None) -> np.ndarray:
        """The Hugging Face tensor (or, for 3-d experts stored per expert, one expert of it) from the file's tensors, exactly."""
        f = self.file
        if joined.kind == "kv_b":
            k_b, v_b = f.read(joined.parts[0]), f.read(joined.parts[1])  # (H, d_c, d_n), (H, d_v, d_c)
            per_head = np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1)  # (H, d_n + d_v, d_c)
            return np.ascontiguousarray(per_head.reshape(joined.shape))
        if joined.kind == "expert":
            return f.read_expert(joined.parts[0], joined.expert)
        if joined.kind == "value":
            return np.full(joined.shape, metadata_number(f, joined.parts[0], joined.expert))
        if joined.kind == "computed":
            assert joined.compute is not None
            built: np.ndarray = joined.compute(*(f.read(part) for part in joined.parts))
            return np.ascontiguousarray(built.reshape(joined.shape))
        if joined.kind == "gate_up_bias":
            gate, up = (f.read(joined.parts[0]), f.read(joined.parts[1])) if len(joined.parts) == 2 else np.split(f.read(joined.parts[0]), 2, axis=1)
            out = np.empty(joined.shape)  # (E, 2·inner)
            out[:, 0::2], out[:, 1::2] = gate, up
            return out
        experts = range(joined.shape[0]) if expert is None else (expert,)
        blocks = [self._expert(joined, e) for e in experts]
        return np.stack(blocks) if expert is None else blocks[0]

    def _expert(self, joined: Joined, e: int) -> np.ndarray:
        """One expert of a gate_up_proj (d, 2·inner) or down_proj (inner, d) stored as x·W, from the file's per-expert rows."""
        f = self.file
        if joined.kind == "down":
            return np.ascontiguousarray(f.read_expert(joined.parts[0], e).T)  # (d, inner) → (inner, d)
        if len(joined.parts) == 2:
            gate, up = f.read_expert(joined.parts[0], e), f.read_expert(joined.parts[1], e)  # (inner, d) each
        else:
            gate, up = np.split(f.read_expert(joined.parts[0], e), 2, axis=0)
        out = np.empty(joined.shape[1:])  # (d, 2·inner)
        if joined.kind == "gate_then_up":  # Llama 4's: the gate's columns, then the up's
            out[:, : gate.shape[0]], out[:, gate.shape[0] :] = gate.T, up.T
            return out
        out[:, 0::2], out[:, 1::2] = gate.T, up.T  # gpt-oss's: interleaved
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
        3-d experts (`gate_up`, `down`) one expert at a time, so only one expert's matrix is in float64 at once."""
        joined = self._joined(name)
        if joined is not None and joined.kind in ("gate_up", "gate_then_up", "down"):
            for e in range(joined.shape[0]):
                yield e, self._rebuild(joined, e)[None]
            return
        yield 0, self.read(name)

    def stored_dtype(self, name: str) -> str:
        joined = self._joined(name)
        if joined is not None and joined.kind == "value":
            return "F32"  # a number of the metadata, stored as float32
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
        if self.family.notes is not None:
            lines.extend(self.family.notes(self.file))
        return tuple(lines)


# -- config from the metadata ----------------------------------------------------------------


def architecture(file: GgufFile) -> tuple[str, str]:
    """(GGUF architecture, attncli model type), or one clear error naming what is supported."""
    arch = file.value("general.architecture")
    if not isinstance(arch, str):
        raise file.fail(f"found {arch!r}", key="general.architecture", expected="the model's architecture name")
    family = gguf_architecture(arch)
    if family is None:
        known = gguf_architectures()
        raise file.fail(f"the architecture {arch!r} is not supported{did_you_mean(arch, known, fold=same_name, shortenings=False, cutoff=1.0)}", key="general.architecture", expected="one of " + ", ".join(known))
    return arch, family.model_type


def read_config(file: GgufFile) -> tuple[str, ModelConfig]:
    """The GGUF architecture and a ModelConfig from the metadata under `{arch}.…`."""
    arch, _ = architecture(file)
    family = _family(arch)
    if family.config is None:
        return arch, _family_config(file, arch)
    a = arch + "."
    layers = file.count(a + "block_count")
    hidden = file.count(a + "embedding_length")
    heads = file.count(a + "attention.head_count")
    positions = file.count(a + "context_length")
    inter = file.count(a + "feed_forward_length")
    common: dict[str, Any] = {"layers": layers, "hidden_size": hidden, "heads": heads, "intermediate_size": inter, "max_positions": positions, "dtype": None}
    return arch, family.config(file, a, common)


def _family(arch: str) -> GgufArchitecture:
    family = gguf_architecture(arch)
    assert family is not None  # `architecture` refused any other
    return family


def _family_config(file: GgufFile, arch: str) -> ModelConfig:
    """The config of a family, from the metadata spelled as its config.json, read by the family's own read_config."""
    keys = config_keys(file)
    assert keys is not None  # a family without a config reader has a keys reader
    cfg = config_from_raw(keys, f"{file.where} (metadata under '{arch}.…')")
    return dataclasses.replace(cfg, dtype=None)


def config_keys(file: GgufFile) -> dict[str, Any] | None:
    """The metadata as config.json's keys (the converter's set_gguf_parameters undone), or None for a family that builds its
    config from the metadata itself: the keys every such file has, then the family's own (`keys`)."""
    arch, model_type = architecture(file)
    family = _family(arch)
    if family.keys is None:
        return None
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
    if (kind not in (None, "none", *family.rope_scaling)) or "rope_factors_long.weight" in file.tensors:
        raise file.fail(f"the RoPE scaling {kind or 'longrope'!r} is not supported in {arch} files", key=a + "rope.scaling.type", expected="no RoPE scaling")
    raw: dict[str, Any] = {
        "model_type": model_type,
        "num_hidden_layers": file.count(a + "block_count"),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "intermediate_size": _feed_forward(file, a + "feed_forward_length"),
        "max_position_embeddings": file.count(a + "context_length"),
        "rope_parameters": {"rope_type": "default", "rope_theta": file.number(a + "rope.freq_base", default=10_000.0), "partial_rotary_factor": rotary / head_dim},
    }
    return raw | family.keys(file, a, raw, head_dim)


def _feed_forward(file: GgufFile, key: str) -> Any:
    """feed_forward_length: one width, or (Gemma 3n) a list of one per layer, which the family's read_config checks."""
    value = file.value(key)
    return value if isinstance(value, list) else file.count(key)


def rope_factors(file: GgufFile, head_dim: int) -> np.ndarray | None:
    """(d_k/2,) llama.cpp's per-frequency divisors (`rope_freqs.weight`, how its converter stores llama3 scaling), or None."""
    if "rope_freqs.weight" not in file.tensors:
        return None
    if file.info("rope_freqs.weight").count != head_dim // 2:  # checked from the header, before a tensor of any size is decoded
        count = file.info("rope_freqs.weight").count
        raise file.fail(f"rope_freqs.weight has {count:,} numbers", expected=f"{head_dim // 2} positive factors, one per frequency")
    factors = file.read("rope_freqs.weight").reshape(-1)
    if factors.shape != (head_dim // 2,) or not np.all(factors > 0):
        raise file.fail(f"rope_freqs.weight has {factors.size} numbers", expected=f"{head_dim // 2} positive factors, one per frequency")
    return factors


def check_layers(file: GgufFile, layers: int) -> None:
    """The file holds tensors of the last layer the metadata counts (`block_count` of 10,000 over 3 layers' tensors is refused)."""
    last = f"blk.{layers - 1}."
    if not any(name.startswith(last) or f".{last}" in name for name in file.tensors):  # T5's enc.blk.N. and dec.blk.N. too
        arch = file.value("general.architecture")
        raise file.fail(f"the metadata counts {layers:,} layers, but the file holds no tensor of layer {layers:,}", key=f"{arch}.block_count",
                        expected="as many layers as the file has blocks of tensors (blk.0 …)")  # fmt: skip


@dataclass(frozen=True, eq=False)
class GgufModel:
    """A GGUF file opened for attncli: its architecture, config and tensors under Hugging Face's names."""

    file: GgufFile
    arch: str
    cfg: ModelConfig
    checkpoint: GgufCheckpoint


_opened: dict[tuple[str, int, int, int, int], tuple[str | None, GgufFile]] = {}  # the last file opened: at most one


def open_file(path: Path) -> GgufFile:
    """The checked file, opened once per command: asked for again while unchanged, the same GgufFile (its header walked,
    its metadata values built and its map made once) serves the tokenizer, the config and the tensors alike.

    Unchanged means the same resolved path, device, inode, size and modification time, and the same SHA-256 of the
    header (every byte before the tensor data, a few MB; the tensors themselves are read through the live map): a
    file changed or replaced since is opened again. Only the last file is kept, so a process holds one map at most.
    """
    try:
        info = path.stat()
    except OSError:
        return GgufFile(path)  # which says why it cannot be read
    identity = (os.path.realpath(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    kept = _opened.get(identity)
    if kept is not None and kept[0] is not None and prefix_sha256(path, kept[1].header.data_start) == kept[0]:
        reading.note_read(path)  # an input of this command too (a script's second command), which no output may replace
        return kept[1]
    file = GgufFile(path)
    _opened.clear()
    _opened[identity] = (file.header.sha256, file)
    return file


def open_model(path: Path) -> GgufModel:
    """The checked file, its config from the metadata, and its tensors; any flaw is one AttnError."""
    file = open_file(path)
    arch, cfg = read_config(file)
    return GgufModel(file, arch, cfg, GgufCheckpoint(file, arch, cfg))


def model_config(model: Path) -> tuple[ModelConfig, GgufModel | None]:
    """What `--model` names, read as far as its config: a GGUF file opened (its config from the metadata, its tensors
    ready: the GgufModel) or a checkpoint folder's config.json (None: the caller opens its tensors when it needs them)."""
    from attncli.sources.checkpoints.families import read_config as folder_config

    gguf = gguf_path(model)
    if gguf is None:
        return folder_config(model), None
    opened = open_model(gguf)
    return opened.cfg, opened


def tensors_of(model: Path, opened: GgufModel | None) -> TensorSource:
    """The tensors of what `--model` names: the GGUF file's (`opened`, as model_config gives it) or the folder's safetensors."""
    if opened is not None:
        return opened.checkpoint
    from attncli.sources.checkpoints.safetensors import Checkpoint  # a GGUF file's command never reads safetensors

    return Checkpoint(model)
