"""A safetensors reader in NumPy: checked headers, memory-mapped data, only the tensors asked for, widened to float64.

The format: an 8-byte little-endian header length N, N bytes of JSON mapping each tensor name to
{"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data area that follows
the header; an optional "__metadata__" maps strings to strings), then the data area.
A sharded checkpoint adds model.safetensors.index.json, whose "weight_map" names each tensor's file.
"""

from __future__ import annotations

import math
import mmap
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attncli.errors import AttnError
from attncli.sources import reading
from attncli.sources.bounded import JsonLimits, open_regular, parse_json, read_bytes, read_json

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
MAX_HEADER_BYTES = 100_000_000  # the limit of the reference implementation (safetensors' MAX_HEADER_SIZE)
HEADER_LIMITS = JsonLimits(max_bytes=MAX_HEADER_BYTES, max_depth=8)  # {name: {"shape": [...]}}: 3 deep
INDEX_LIMITS = JsonLimits(max_bytes=64 * 1024 * 1024, max_depth=8)  # the largest real indexes (DeepSeek-V3) are ~9 MB
MAX_RANK = 16  # dimensions of one tensor
MAX_ITEMS = 2**53  # numbers in one tensor: far beyond any file, and still exact as a float64 count

# every dtype of the format with its item size in bytes; only the floating ones can be read
ITEM_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8, "C64": 8,
}  # fmt: skip
FLOAT_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}
_NUMPY_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}  # BF16 read as raw bits, widened below


@dataclass(frozen=True)
class TensorEntry:
    """Where one tensor lies in its file: dtype, shape and absolute byte span."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int  # absolute offset in the file
    end: int


WIDEN_BLOCK = 1 << 18  # numbers widened at a time: the only scratch besides the float64 result is 1 MiB


ROW_BLOCK = 1 << 21  # numbers per block of rows in row_blocks: 16 MiB of float64, reused block after block


def widen(raw: np.ndarray, dtype: str, out: np.ndarray | None = None) -> np.ndarray:
    """Float64 copy of stored values (into `out` when given); bfloat16 bits become float32 bits by a 16-bit shift, which is exact.

    Done a block at a time into the result, so that widening an 8B model's 14336 × 4096 bfloat16
    matrix holds its 470 MB of float64 and 1 MiB of scratch, not a float32 copy beside it as well.
    """
    stored = np.ascontiguousarray(raw).reshape(-1)  # (n,) a view when the stored values are contiguous
    value = np.empty(stored.shape, dtype=np.float64) if out is None else out.reshape(-1)  # (n,)
    bits = np.empty(min(WIDEN_BLOCK, stored.size), dtype="<u4") if dtype == "BF16" else None  # one scratch block, reused
    for start in range(0, stored.size, WIDEN_BLOCK):
        part = stored[start : start + WIDEN_BLOCK]
        if bits is None:
            value[start : start + WIDEN_BLOCK] = part
        else:  # the 16 stored bits shifted into a float32's high half, written straight into the reused block
            shifted = np.left_shift(part, 16, out=bits[: part.size], dtype="<u4")
            value[start : start + part.size] = shifted.view("<f4")
    return value.reshape(raw.shape)


class SafetensorsFile:
    """One .safetensors file: the header is read and checked at once, each tensor's bytes are mapped when read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._where = str(path)
        self.entries = self._read_header()

    def _fail(self, message: str, expected: str | None = None) -> AttnError:
        return AttnError(message, file=self._where, expected=expected)

    def _read_header(self) -> dict[str, TensorEntry]:
        what = "a safetensors file"
        fd, info = open_regular(self.path, self._where, what=what)
        os.close(fd)
        size = info.st_size
        if size < 8:
            raise self._fail(
                f"the file is {size} bytes long, too short for a safetensors header",
                "an 8-byte little-endian header length first",
            )
        prefix = read_bytes(self.path, self._where, max_bytes=8, what=what, length=8)
        header_bytes = int.from_bytes(prefix, "little")
        if header_bytes > MAX_HEADER_BYTES:
            raise self._fail(
                f"the header length {header_bytes:,} is larger than the {MAX_HEADER_BYTES:,}-byte limit",
                "a safetensors file",
            )
        if 8 + header_bytes > size:
            raise self._fail(
                f"the header length {header_bytes:,} runs past the end of the file ({size:,} bytes)",
                "a complete safetensors file",
            )
        text = read_bytes(self.path, self._where, max_bytes=MAX_HEADER_BYTES, what=what, offset=8, length=header_bytes)
        header = parse_json(text, self._where, what="a JSON object after the 8-byte length", limits=HEADER_LIMITS)
        if not isinstance(header, dict):
            raise self._fail(f"the header is a JSON {type(header).__name__}", "a JSON object of tensors")
        data_start = 8 + header_bytes
        data_bytes = size - data_start
        entries = {
            name: self._entry(name, value, data_start, data_bytes) for name, value in header.items() if name != "__metadata__"
        }
        self._check_no_overlaps(entries, data_start)
        return entries

    def _entry(self, name: str, value: object, data_start: int, data_bytes: int) -> TensorEntry:
        label = f"tensor '{name}'"
        if not isinstance(value, dict) or not {"dtype", "shape", "data_offsets"} <= value.keys():
            raise self._fail(f"{label} is not described by dtype, shape and data_offsets", "a JSON object with those three keys")
        dtype, shape, offsets = value["dtype"], value["shape"], value["data_offsets"]
        if not isinstance(dtype, str) or dtype not in ITEM_BYTES:
            raise self._fail(f"{label} has the unknown dtype {dtype!r}", "one of " + ", ".join(ITEM_BYTES))
        if not isinstance(shape, list) or not all(_is_count(n) for n in shape):
            raise self._fail(f"{label} has the shape {shape!r}", "a list of whole numbers ≥ 0")
        if len(shape) > MAX_RANK or math.prod(n for n in shape if n) > MAX_ITEMS:
            raise self._fail(
                f"{label} has the shape {shape!r}, beyond what any array can hold",
                f"at most {MAX_RANK} dimensions and {MAX_ITEMS:,} numbers",
            )
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(n) for n in offsets)):
            raise self._fail(f"{label} has the data_offsets {offsets!r}", "[begin, end], two whole numbers ≥ 0")
        begin, end = offsets
        if begin > end:
            raise self._fail(f"{label} has data_offsets [{begin}, {end}] that end before they begin")
        if end > data_bytes:
            raise self._fail(
                f"{label} has data_offsets [{begin}, {end}] outside the data area of {data_bytes:,} bytes",
                "offsets inside the file; is it complete?",
            )
        needed = math.prod(shape) * ITEM_BYTES[dtype]
        if needed != end - begin:
            raise self._fail(
                f"{label} of shape {shape} and dtype {dtype} needs {needed:,} bytes but its data_offsets span {end - begin:,}",
                "shape × item size = end − begin",
            )
        return TensorEntry(name, dtype, tuple(shape), data_start + begin, data_start + end)

    def _check_no_overlaps(self, entries: dict[str, TensorEntry], data_start: int) -> None:
        spans = sorted((e for e in entries.values() if e.end > e.begin), key=lambda e: (e.begin, e.end))
        for before, after in zip(spans, spans[1:]):
            if after.begin < before.end:
                raise self._fail(
                    f"tensors '{before.name}' and '{after.name}' overlap (bytes {before.begin - data_start:,}–"
                    f"{before.end - data_start:,} and {after.begin - data_start:,}–{after.end - data_start:,} of the data area)",
                    "each tensor in its own bytes",
                )

    def _entry_to_read(self, name: str) -> TensorEntry:
        entry = self.entries.get(name)
        if entry is None:
            raise self._fail(f"no tensor '{name}' in the file")
        if entry.dtype not in FLOAT_NAMES:
            raise self._fail(f"tensor '{name}' is stored as {entry.dtype}", "F64, F32, F16 or BF16")
        return entry

    def _copy(self, entry: TensorEntry, pick: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """float64 of pick(tensor as stored), read through a mapping of its bytes only, unmapped at once.

        One mapping per tensor keeps the resident memory to one layer's weights, however deep the layer.
        """
        if entry.end == entry.begin:
            return pick(np.zeros(entry.shape, dtype=_NUMPY_DTYPES[entry.dtype])).astype(np.float64)
        start = entry.begin - entry.begin % mmap.ALLOCATIONGRANULARITY  # mappings start on a granularity boundary
        fd, _ = open_regular(self.path, self._where, what="a safetensors file")
        with (
            open(fd, "rb") as stream,
            mmap.mmap(stream.fileno(), entry.end - start, offset=start, access=mmap.ACCESS_READ) as mapped,
        ):
            raw = np.frombuffer(
                mapped, dtype=_NUMPY_DTYPES[entry.dtype], count=math.prod(entry.shape), offset=entry.begin - start
            )
            value = widen(pick(raw.reshape(entry.shape)), entry.dtype)
            del raw  # the mapping closes only once no array looks into it
        return value

    def read(self, name: str) -> np.ndarray:
        """The whole tensor in float64."""
        return self._copy(self._entry_to_read(name), lambda stored: stored)

    def row_blocks(self, name: str) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, float64 rows) of a tensor, ROW_BLOCK numbers at a time, through one mapping.

        The block is one buffer, refilled for the next: use it before asking for the next. A
        product with a matrix read so holds 16 MiB of float64 instead of the whole matrix.
        """
        entry = self._entry_to_read(name)
        rows, width = entry.shape[0], math.prod(entry.shape[1:])
        if entry.end == entry.begin:
            yield 0, np.zeros(entry.shape, dtype=np.float64)
            return
        step = max(1, ROW_BLOCK // max(1, width))
        buffer = np.empty(min(step, rows) * width, dtype=np.float64)
        start = entry.begin - entry.begin % mmap.ALLOCATIONGRANULARITY
        with (
            self.path.open("rb") as stream,
            mmap.mmap(stream.fileno(), entry.end - start, offset=start, access=mmap.ACCESS_READ) as mapped,
        ):
            raw = np.frombuffer(mapped, dtype=_NUMPY_DTYPES[entry.dtype], count=math.prod(entry.shape), offset=entry.begin - start)
            try:
                stored = raw.reshape(entry.shape)
                for first in range(0, rows, step):
                    last = min(rows, first + step)
                    block = buffer[: (last - first) * width].reshape((last - first, *entry.shape[1:]))
                    yield first, widen(stored[first:last], entry.dtype, out=block)
            finally:
                del raw, stored  # the mapping closes only once no array looks into it

    def read_rows(self, name: str, rows: Sequence[int]) -> np.ndarray:
        """Rows of a 2-d tensor (an embedding table) in float64; only those rows are copied."""
        entry = self._entry_to_read(name)
        if len(entry.shape) != 2:
            raise self._fail(f"tensor '{name}' has shape {list(entry.shape)}", "a 2-d table")
        bad = [r for r in rows if not 0 <= r < entry.shape[0]]
        if bad:
            raise self._fail(f"row {bad[0]} of tensor '{name}' does not exist: it has {entry.shape[0]:,} rows")
        picked = np.asarray(rows, dtype=np.int64)
        return self._copy(entry, lambda stored: stored[picked])


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class Checkpoint:
    """The weights of a checkpoint folder: model.safetensors, or the shards named by model.safetensors.index.json."""

    config_source = "config.json"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._files: dict[str, SafetensorsFile] = {}
        single, index = folder / SINGLE_FILE, folder / INDEX_FILE
        if os.path.lexists(single):  # a FIFO or a link to a device is refused by the reader, by name
            self._where: dict[str, str] = {name: SINGLE_FILE for name in self._file(SINGLE_FILE).entries}
            self.described_by = SINGLE_FILE
        elif os.path.lexists(index):
            self._where = self._read_index(index)
            self.described_by = INDEX_FILE
        else:
            found = sorted(p.name for p in folder.glob("*.bin")) if folder.is_dir() else []
            hint = f" (found {', '.join(found)}: attncli reads only safetensors)" if found else ""
            raise AttnError(
                f"no {SINGLE_FILE} or {INDEX_FILE} in the folder{hint}",
                file=str(folder),
                expected="a Hugging Face checkpoint folder",
            )

    def _read_index(self, index: Path) -> dict[str, str]:
        data = read_json(index, str(index), what="JSON with a weight_map", limits=INDEX_LIMITS)
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise AttnError("no weight_map of tensor names to file names", file=str(index), expected='{"weight_map": {...}}')
        for shard in set(weight_map.values()):
            if Path(shard).name != shard or shard in {"", ".", ".."}:
                raise AttnError(f"the shard name {shard!r} is not a file name in the folder", file=str(index))
            reading.note_read(self.folder / shard)  # every shard is an input of the command, opened or not yet
        return dict(weight_map)

    def _file(self, name: str) -> SafetensorsFile:
        if name not in self._files:
            path = self.folder / name
            if not os.path.lexists(path):
                raise AttnError(f"the shard {name} named by {INDEX_FILE} is missing", file=str(path))
            self._files[name] = SafetensorsFile(path)
        return self._files[name]

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._where)

    def has(self, name: str) -> bool:
        return name in self._where

    def _locate(self, name: str) -> SafetensorsFile:
        shard = self._where.get(name)
        if shard is None:
            raise AttnError(f"the checkpoint has no tensor '{name}'", file=str(self.folder / self.described_by))
        file = self._file(shard)
        if name not in file.entries:
            raise AttnError(f"no tensor '{name}' in the file, though {INDEX_FILE} puts it there", file=str(file.path))
        return file

    def file_of(self, name: str) -> Path:
        """The file that holds a tensor."""
        return self._locate(name).path

    def shape(self, name: str) -> tuple[int, ...]:
        """The tensor's shape as its header states it; nothing is read."""
        return tuple(self.entry(name).shape)

    def entry(self, name: str) -> TensorEntry:
        return self._locate(name).entries[name]

    def read(self, name: str) -> np.ndarray:
        """One tensor in float64."""
        return self._locate(name).read(name)

    def row_blocks(self, name: str) -> Iterator[tuple[int, np.ndarray]]:
        """One tensor in float64, a block of rows at a time (see SafetensorsFile.row_blocks)."""
        return self._locate(name).row_blocks(name)

    def read_rows(self, name: str, rows: Sequence[int]) -> np.ndarray:
        """Chosen rows of one 2-d tensor in float64."""
        return self._locate(name).read_rows(name, rows)

    def stored_dtypes(self) -> dict[str, int]:
        """How many tensors each dtype holds, over every file (headers only)."""
        counts: dict[str, int] = {}
        for file_name in sorted(set(self._where.values())):
            for entry in self._file(file_name).entries.values():
                counts[entry.dtype] = counts.get(entry.dtype, 0) + 1
        return counts

    def stored_dtype(self, name: str) -> str:
        """How a tensor is stored, as people name it: 'bfloat16', 'float32', ..."""
        dtype = self.entry(name).dtype
        return FLOAT_NAMES.get(dtype, dtype)
