"""attncli's own bounded reader of a GGUF file's header: the walk, the metadata read on demand, the tensors checked.

The format (little-endian): "GGUF", a uint32 version (2 or 3), a uint64 tensor count, a uint64
metadata count; the metadata entries (a string key, a uint32 value type, the value; strings are a
uint64 length and UTF-8 bytes; arrays a uint32 item type, a uint64 count and the items); the tensor
infos (a string name, a uint32 dimension count, that many uint64 dimensions innermost first, a
uint32 GGML type and a uint64 offset); padding to `general.alignment` (default 32); the data.

Why a reader of our own: gguf-py's GGUFReader trusts every count and builds every value. An array
that claims 2⁴⁰ items makes it loop (and allocate) 2⁴⁰ times, a truncated file surfaces as an
IndexError or a silently short tensor, an unknown type as a ValueError deep inside, and 1.9 million
short strings in a key nobody reads cost it a minute of CPU and gigabytes. This walk, over the file
mapped read-only, checks every count and length against the bytes left in the file before anything
is allocated, caps the number of metadata items, and checks that each tensor's data lies inside the
file. It builds no value: it notes where each one lies (`Field`), and `value` builds one only when
attncli asks for it, so reading a file's metadata costs what attncli reads of it (a step over the
rest). It needs no import beyond the standard library and NumPy. A file seen before is not walked again:
token_cache keeps its walk, used while the file's header bytes and this code are the same.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attncli.errors import AttnError
from attncli.sources.checkpoints.gguf_quants import TYPES, GgmlType

MAGIC = b"GGUF"
VERSIONS = (2, 3)
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_METADATA_ITEMS = 2_000_000  # values over all entries; the largest vocabularies need under 1,000,000
MAX_NAME_BYTES = 65_535  # the longest key or tensor name the format allows
MAX_NESTING = 3  # arrays of arrays, deeper than any real file
DEFAULT_ALIGNMENT = 32
MAX_TEXT_BYTES = 1 << 20  # one string value attncli reads (a name, a pre-tokenizer's): real ones are a few bytes
SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
SCALAR_FORMATS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY, UINT32, BOOL = 8, 9, 4, 7
_U64 = struct.Struct("<Q")
VALUE_TYPES = "0–12 (uint8 … float64, bool, string, array)"
Buffer = bytes | mmap.mmap  # the file mapped read-only (an empty file: b"")


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the header describes it, checked: its type is known and its bytes lie in the file."""

    name: str
    dims: tuple[int, ...]  # innermost first, as stored
    kind: GgmlType
    begin: int  # absolute offset of its data in the file
    nbytes: int

    @property
    def shape(self) -> tuple[int, ...]:
        """NumPy's order: outermost first (a matrix of ne = [in, out] is (out, in), as nn.Linear keeps it)."""
        return tuple(reversed(self.dims))

    @property
    def count(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n


@dataclass(frozen=True)
class Field:
    """Where one metadata value lies, checked; its value is built only when asked for (`value`)."""

    kind: int  # the value type: 0–12
    item: int | None  # an array's item type
    count: int  # an array's items (1 for a scalar or a string)
    at: int  # the value's first byte (an array's: its first item's)


@dataclass(frozen=True)
class Header:
    version: int
    fields: dict[str, Field]
    tensors: dict[str, TensorInfo]
    alignment: int
    data_start: int
    size: int
    sha256: str  # of the header's bytes (everything before data_start: the metadata, the tokenizer's among it, and the tensor list)


class _Walk:
    """A cursor over the mapped file that refuses to read past its end."""

    def __init__(self, data: Buffer, size: int, where: str) -> None:
        self.data, self.size, self.where = data, size, where
        self.pos = 0
        self.items = 0

    def fail(self, message: str, expected: str | None = None) -> AttnError:
        return AttnError(message, file=self.where, expected=expected)

    @property
    def left(self) -> int:
        return self.size - self.pos

    def _short(self, n: int, what: str) -> AttnError:
        return self.fail(
            f"the file ends inside the header ({what} needs {n:,} bytes at byte {self.pos:,}, {self.left:,} left)",
            "a complete GGUF file; was the download cut short?",
        )

    def take(self, n: int, what: str) -> bytes:
        if n > self.left:
            raise self._short(n, what)
        data = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        if n > self.left:
            raise self._short(n, what)
        self.pos += n

    def u32(self, what: str) -> int:
        value: int = struct.unpack("<I", self.take(4, what))[0]
        return value

    def u64(self, what: str) -> int:
        if self.left < 8:
            raise self._short(8, what)
        value: int = _U64.unpack_from(self.data, self.pos)[0]
        self.pos += 8
        return value

    def string(self, what: str, *, keep: bool, limit: int | None = None) -> str:
        n = self.u64(f"the length of {what}")
        if limit is not None and n > limit:
            raise self.fail(f"{what} claims {n:,} bytes, more than the {limit:,} the format allows")
        if n > self.left:
            raise self.fail(
                f"{what} claims {n:,} bytes at byte {self.pos:,}, but only {self.left:,} are left in the file",
                "a complete GGUF file",
            )
        if not keep:
            self.pos += n
            return ""
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8 text", "UTF-8 names") from None

    def strings(self, n: int, key: str) -> None:
        """Step over `n` strings: each length checked, nothing built (1.9 million short strings: about a second)."""
        data, pos, size, unpack = self.data, self.pos, self.size, _U64.unpack_from
        for _ in range(n):
            if pos + 8 > size:
                self.pos = pos
                raise self._short(8, f"the length of an item of '{key}'")
            pos += 8 + unpack(data, pos)[0]
            if pos > size:
                raise self.fail(f"an item of '{key}' runs past the end of the file ({size:,} bytes)", "a complete GGUF file")
        self.pos = pos

    def count_items(self, n: int, key: str) -> None:
        self.items += n
        if self.items > MAX_METADATA_ITEMS:
            raise self.fail(
                f"the metadata holds more than {MAX_METADATA_ITEMS:,} values (at '{key}')",
                "metadata of a real model (under 1,000,000 values); the file is damaged or hostile",
            )

    def value(self, kind: int, key: str, depth: int = 0) -> Field:
        """Step over one value of type `kind`, checking every length first; where it lies."""
        if kind in SCALAR_BYTES:
            at = self.pos
            self.skip(SCALAR_BYTES[kind], f"the value of '{key}'")
            return Field(kind, None, 1, at)
        if kind == STRING:
            at = self.pos
            self.string(f"the text of '{key}'", keep=False)
            return Field(kind, None, 1, at)
        if kind != ARRAY:
            raise self.fail(f"the metadata key '{key}' has the unknown value type {kind}", VALUE_TYPES)
        if depth >= MAX_NESTING:
            raise self.fail(f"the metadata key '{key}' nests arrays more than {MAX_NESTING} deep")
        item = self.u32(f"the item type of '{key}'")
        n = self.u64(f"the length of '{key}'")
        smallest = SCALAR_BYTES.get(item, 8 if item == STRING else 12)
        if item not in SCALAR_BYTES and item not in (STRING, ARRAY):
            raise self.fail(f"the metadata array '{key}' has the unknown item type {item}", VALUE_TYPES)
        if n * smallest > self.left:
            raise self.fail(
                f"the metadata array '{key}' claims {n:,} items, more than the {self.left:,} bytes left in the file can hold",
                "a complete GGUF file",
            )
        self.count_items(n, key)
        at = self.pos
        if item in SCALAR_BYTES:
            self.skip(n * smallest, f"the items of '{key}'")
        elif item == STRING:
            self.strings(n, key)
        else:
            for _ in range(n):
                self.value(item, key, depth + 1)
        return Field(kind, item, n, at)



def open_header(path: Path) -> tuple[Header, Buffer]:
    """The checked header of a GGUF file and the file mapped read-only; any flaw is one AttnError naming the file and what is wrong."""
    where = str(path)
    try:
        with path.open("rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            data: Buffer = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or error
        raise AttnError(f"cannot read the file: {reason}", file=where) from None
    from attncli.sources.checkpoints import token_cache

    kept = token_cache.walked_header(path, data) if size else None  # the walk of a file seen before, while its header bytes are the same
    header = None if kept is None else _from_json(kept[0], size, kept[1])
    if header is None:
        header = _walk(_Walk(data, size, where))
        if size:
            token_cache.keep_header(path, _as_json(header), header.sha256)
    return header, data


def _as_json(header: Header) -> dict[str, Any]:
    """The walk as JSON values, for the cache; `_from_json` reads them back."""
    return {
        "version": header.version, "alignment": header.alignment, "data_start": header.data_start,
        "fields": {key: [f.kind, f.item, f.count, f.at] for key, f in header.fields.items()},
        "tensors": [[t.name, list(t.dims), t.kind.number, t.begin, t.nbytes] for t in header.tensors.values()],
    }  # fmt: skip


def _from_json(doc: dict[str, Any], size: int, sha256: str) -> Header | None:
    """`_as_json`'s values back as the Header of a file of `size` bytes whose header bytes have that SHA-256, or None when any
    is not what it wrote."""

    def whole(*xs: object) -> bool:
        return all(type(x) is int and x >= 0 for x in xs)

    try:
        fields = {key: Field(kind, item, count, at) for key, (kind, item, count, at) in doc["fields"].items()
                  if isinstance(key, str) and whole(kind, count, at) and at <= size and (item is None or whole(item))}  # fmt: skip
        tensors = {name: TensorInfo(name, tuple(dims), TYPES[number], begin, nbytes) for name, dims, number, begin, nbytes in doc["tensors"]
                   if isinstance(name, str) and whole(*dims, begin, nbytes) and begin + nbytes <= size}  # fmt: skip
        header = Header(doc["version"], fields, tensors, doc["alignment"], doc["data_start"], size, sha256)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if len(fields) != len(doc["fields"]) or len(tensors) != len(doc["tensors"]) or not whole(header.version, header.alignment, header.data_start):
        return None
    return header


def read_header(path: Path) -> Header:
    """The checked header of a GGUF file (see open_header)."""
    return open_header(path)[0]


def value(data: Buffer, field: Field, key: str, where: str) -> Any:
    """A metadata value as Python (int, float, bool, str, or a list of them), built from the bytes the walk checked."""
    if field.kind == STRING:
        return _text(data, field.at, key, where, limit=MAX_TEXT_BYTES)
    if field.kind in SCALAR_FORMATS:
        return struct.unpack_from("<" + SCALAR_FORMATS[field.kind], data, field.at)[0]
    if field.item in SCALAR_FORMATS:
        import numpy as np

        items = np.frombuffer(data, dtype="<" + SCALAR_FORMATS[field.item], count=field.count, offset=field.at)
        return items.astype(bool).tolist() if field.item == BOOL else items.tolist()
    if field.item == STRING:
        out, at, unpack = [], field.at, _U64.unpack_from
        for _ in range(field.count):
            n = unpack(data, at)[0]
            try:
                out.append(str(data[at + 8 : at + 8 + n], "utf-8"))
            except UnicodeDecodeError:
                raise AttnError(f"item {len(out) + 1} is not UTF-8 text", file=where, key=key, expected="UTF-8 text") from None
            at += 8 + n
        return out
    raise AttnError("an array of arrays, which attncli does not read", file=where, key=key, expected="a value or a flat array")


def _text(data: Buffer, at: int, key: str, where: str, *, limit: int) -> str:
    n = _U64.unpack_from(data, at)[0]
    if n > limit:
        raise AttnError(f"a text of {n:,} bytes, more than the {limit:,} attncli reads of one value", file=where, key=key)
    try:
        return str(data[at + 8 : at + 8 + n], "utf-8")
    except UnicodeDecodeError:
        raise AttnError("the text is not UTF-8", file=where, key=key, expected="UTF-8 text") from None


def _walk(w: _Walk) -> Header:
    magic = w.take(4, "the magic number") if w.size >= 4 else bytes(w.data[:4])
    if magic != MAGIC:
        shown = magic[:4].decode("latin-1").encode("unicode_escape").decode("ascii") if magic else "nothing"
        raise w.fail(f"not a GGUF file: it starts with {shown!r}, not 'GGUF'", "a GGUF file (llama.cpp, Ollama, LM Studio)")
    version = w.u32("the version")
    if version not in VERSIONS:
        big_endian = version & 0xFFFF == 0 and version >> 16 in VERSIONS
        why = "a big-endian GGUF file, which attncli does not read" if big_endian else f"GGUF version {version}"
        raise w.fail(f"{why}", "GGUF version 2 or 3, little-endian")
    tensor_count = w.u64("the tensor count")
    kv_count = w.u64("the metadata count")
    if kv_count * 13 > w.left:  # a key length (8), a value type (4) and at least one byte of value
        raise w.fail(f"the header claims {kv_count:,} metadata entries, more than the file's {w.size:,} bytes can hold")
    if tensor_count * 32 > w.left:  # name length, dimension count, one dimension, type, offset
        raise w.fail(f"the header claims {tensor_count:,} tensors, more than the file's {w.size:,} bytes can hold")
    fields: dict[str, Field] = {}
    alignment = DEFAULT_ALIGNMENT
    for _ in range(kv_count):
        key = w.string("a metadata key", keep=True, limit=MAX_NAME_BYTES)
        if key in fields:
            raise w.fail(f"the metadata key '{key}' appears twice")
        kind = w.u32(f"the value type of '{key}'")
        w.count_items(1, key)
        if key == "general.alignment":
            if kind != UINT32:
                raise w.fail(f"general.alignment has value type {kind}", "a uint32 power of two")
            fields[key] = Field(kind, None, 1, w.pos)
            alignment = w.u32("general.alignment")
            if alignment == 0 or alignment & (alignment - 1):
                raise w.fail(f"general.alignment is {alignment}", "a power of two")
            continue
        fields[key] = w.value(kind, key)
    infos = []
    for _ in range(tensor_count):
        name = w.string("a tensor name", keep=True, limit=MAX_NAME_BYTES)
        n_dims = w.u32(f"the dimension count of tensor '{name}'")
        if not 1 <= n_dims <= MAX_DIMS:
            raise w.fail(f"tensor '{name}' has {n_dims} dimensions", f"1 to {MAX_DIMS}")
        dims = tuple(w.u64(f"the dimensions of tensor '{name}'") for _ in range(n_dims))
        number = w.u32(f"the type of tensor '{name}'")
        offset = w.u64(f"the offset of tensor '{name}'")
        infos.append((name, dims, number, offset))
    data_start = -(-w.pos // alignment) * alignment
    if data_start > w.size:
        raise w.fail(f"the data area would start at byte {data_start:,}, past the end of the file ({w.size:,} bytes)")
    data_bytes = w.size - data_start
    tensors: dict[str, TensorInfo] = {}
    for name, dims, number, offset in infos:
        tensors[name] = _tensor(w, name, dims, number, offset, data_start, data_bytes, alignment, tensors)
    return Header(version, fields, tensors, alignment, data_start, w.size, hashlib.sha256(w.data[:data_start]).hexdigest())


def _tensor(
    w: _Walk, name: str, dims: tuple[int, ...], number: int, offset: int, data_start: int, data_bytes: int, alignment: int,
    seen: dict[str, TensorInfo],
) -> TensorInfo:  # fmt: skip
    label = f"tensor '{name}'"
    if name in seen:
        raise w.fail(f"{label} appears twice")
    kind = TYPES.get(number)
    if kind is None:
        known = ", ".join(t.name for t in TYPES.values())
        raise w.fail(f"{label} has the unknown quantisation type {number}", f"one of GGML's types: {known}")
    if any(d < 1 for d in dims):
        raise w.fail(f"{label} has the dimensions {list(dims)}", "whole numbers 1 or more")
    count = 1
    for d in dims:
        count *= d
        if count > data_bytes * kind.block:  # even at one byte per block it could not fit: stop before the product grows
            raise w.fail(
                f"{label} claims dimensions {list(dims)}, more weights than the file's {data_bytes:,} bytes of data can hold",
                "dimensions that fit the file",
            )
    if dims[0] % kind.block:
        raise w.fail(f"{label} has rows of {dims[0]} weights, not a whole number of {kind.name} blocks of {kind.block}")
    nbytes = count // kind.block * kind.bytes
    if offset % alignment:
        raise w.fail(f"{label} starts at offset {offset:,}, not a multiple of the alignment {alignment}")
    if offset + nbytes > data_bytes:
        raise w.fail(
            f"{label} ({kind.name}, {list(dims)}) lies at bytes {offset:,}–{offset + nbytes:,} of the data area, "
            f"outside the {data_bytes:,} bytes the file holds",
            "tensor data inside the file; is it complete?",
        )
    return TensorInfo(name, dims, kind, data_start + offset, nbytes)
