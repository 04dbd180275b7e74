"""GGUF files mutated for the hostile corpus (tests/test_hostile_gguf.py), written with llama.cpp's own writer (the `gguf` package).

`rewrite` copies a fixture of tests/checkpoints/gguf key by key and tensor by tensor through GGUFWriter, with
keys set, added or dropped; `bomb` adds one key nobody reads holding many short strings; `split` writes a
fixture as llama.cpp's gguf-split writes its parts. Everything is written in a temporary folder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

FIXTURES = Path(__file__).parent / "checkpoints" / "gguf"

Value = tuple[Any, str] | tuple[Any, str, str]  # (value, GGUF value type name) or (list, "ARRAY", item type name)


def _types() -> Any:
    from gguf import GGUFValueType

    return GGUFValueType


def _copy_fields(reader: Any, writer: Any, skip: set[str]) -> None:
    T = _types()
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in skip:
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == T.ARRAY else None
        writer.add_key_value(key, field.contents(), kind, sub_type=sub)


def rewrite(
    out: Path,
    source: str = "llama.gguf",
    *,
    set_keys: Mapping[str, Value] | None = None,
    drop: Sequence[str] = (),
    tensors: Callable[[str, np.ndarray], np.ndarray | None] | None = None,
    arch: str | None = None,
) -> Path:
    """`source` rewritten to `out` with `set_keys` (added or replaced, each as (value, type) or (items, "ARRAY", item type)),
    without the keys in `drop`; `tensors(name, data)` may replace a tensor's stored data (same bytes) or drop it (None)."""
    from gguf import GGUFReader, GGUFWriter

    T = _types()
    reader = GGUFReader(FIXTURES / source)
    architecture = arch or reader.fields["general.architecture"].contents()
    writer = GGUFWriter(out, architecture)
    set_keys = dict(set_keys or {})
    _copy_fields(reader, writer, {*drop, *set_keys})
    for key, spec in set_keys.items():
        if spec[1] == "ARRAY":
            writer.add_key_value(key, list(spec[0]), T.ARRAY, sub_type=T[spec[2]])  # type: ignore[misc]
        else:
            writer.add_key_value(key, spec[0], T[spec[1]])
    for tensor in reader.tensors:
        data = np.array(tensor.data)
        if tensors is not None:
            replaced = tensors(tensor.name, data)
            if replaced is None:
                continue
            if replaced.shape != data.shape:  # a tensor of another size: its own shape, stored as its NumPy type
                writer.add_tensor(tensor.name, replaced)
                continue
            data = replaced
        writer.add_tensor(tensor.name, data, raw_shape=list(reversed([int(n) for n in tensor.shape])), raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def sentencepiece(out: Path, words: Sequence[str], *, scores: Sequence[float] | None = None, extra: Mapping[str, Value] | None = None) -> Path:
    """A one-layer llama file whose tokenizer is SentencePiece BPE (scores, no merges) over byte tokens and `words`."""
    from gguf import GGUFWriter

    T = _types()
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    writer = GGUFWriter(out, "llama")
    for add, value in ((writer.add_block_count, 1), (writer.add_context_length, 64), (writer.add_embedding_length, 8),
                       (writer.add_feed_forward_length, 16), (writer.add_head_count, 2)):  # fmt: skip
        add(value)
    writer.add_tokenizer_model("llama")
    writer.add_token_list([*pieces, *words])
    writer.add_token_types([2, 3, 3] + [6] * 256 + [1] * len(words))
    writer.add_token_scores([0.0] * len(pieces) + list(scores if scores is not None else [-float(i) for i in range(len(words))]))
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    for key, spec in (extra or {}).items():
        writer.add_key_value(key, list(spec[0]) if spec[1] == "ARRAY" else spec[0], T[spec[1]], sub_type=T[spec[2]] if spec[1] == "ARRAY" else None)  # type: ignore[misc]
    writer.add_tensor("token_embd.weight", np.zeros((len(pieces) + len(words), 8), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def bomb(out: Path, strings: int, source: str = "llama.gguf") -> Path:
    """`source` with one more key, read by nobody, holding `strings` strings of one to four characters."""
    words = [format(i % 9973, "x") for i in range(strings)]
    return rewrite(out, source, set_keys={"general.junk": (words, "ARRAY", "STRING")})


def split(folder: Path, parts: int = 3, source: str = "llama.gguf") -> list[Path]:
    """`source` written as llama.cpp's gguf-split writes it: NAME-00001-of-0000N.gguf, … with split.no and split.count."""
    from gguf import GGUFReader, GGUFWriter

    reader = GGUFReader(FIXTURES / source)
    per = -(-len(reader.tensors) // parts)
    writer = GGUFWriter(folder / "model.gguf", reader.fields["general.architecture"].contents(), split_max_tensors=per)
    _copy_fields(reader, writer, set())
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, np.array(tensor.data), raw_shape=list(reversed([int(n) for n in tensor.shape])), raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return sorted(folder.glob("model-*-of-*.gguf"))
