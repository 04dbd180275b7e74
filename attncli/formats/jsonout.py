"""JSON output: standard JSON only, full float64 precision (the trees themselves: attncli.walkthroughs.data).

Documents are built with the engine's NumPy arrays in them and encoded by orjson, which
writes each float64 as the shortest text that reads back to the same number (and -inf as
null) some 20 times faster than Python's own float formatting. The text is produced one
matrix row block at a time (one row per line), so a document of
hundreds of megabytes is never held whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

if TYPE_CHECKING:
    from attncli.document.pages import Page
    from attncli.formats import Options


def encode(value: Any, depth: int = 0) -> Iterator[bytes]:
    """The JSON text of `value` in chunks: objects indented by two spaces, a matrix one row per line."""
    pad = b"  " * depth
    if isinstance(value, dict):
        yield b"{\n"
        for i, (key, item) in enumerate(value.items()):
            yield pad + b"  " + _dumps(key) + b": "
            yield from encode(item, depth + 1)
            yield b",\n" if i < len(value) - 1 else b"\n"
        yield pad + b"}"
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        yield b"[\n"
        for i, item in enumerate(value):
            yield pad + b"  "
            yield from encode(item, depth + 1)
            yield b",\n" if i < len(value) - 1 else b"\n"
        yield pad + b"]"
    elif isinstance(value, np.ndarray) and value.ndim == 2:
        yield b"[\n" + pad + b"  "
        yield from _matrix_rows(value, b",\n" + pad + b"  ")
        yield b"\n" + pad + b"]"
    else:
        yield _dumps(value)


CHUNK_VALUES = 1 << 16  # numbers per chunk of a matrix's text: about 1.5 MB, whatever the matrix's shape


def _matrix_rows(matrix: np.ndarray, separator: bytes) -> Iterator[bytes]:
    """The rows of `matrix` as JSON arrays joined by `separator`, a block of rows at a time (never the whole text at once)."""
    matrix = np.ascontiguousarray(matrix)
    dumps, option = orjson.dumps, orjson.OPT_SERIALIZE_NUMPY
    step = max(1, CHUNK_VALUES // max(1, matrix.shape[1]))
    for start in range(0, matrix.shape[0], step):
        text = separator.join([dumps(row, option=option) for row in matrix[start : start + step]])  # one orjson call per row
        yield separator + text if start else text


def _dumps(value: Any) -> bytes:
    if isinstance(value, np.ndarray):
        value = np.ascontiguousarray(value)
    try:
        return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)
    except orjson.JSONEncodeError:  # a lone surrogate, which UTF-8 cannot hold: a file name's byte that is not UTF-8
        return orjson.dumps(_utf8(value), option=orjson.OPT_SERIALIZE_NUMPY)


def _utf8(value: Any) -> Any:
    """`value` with every string's lone surrogates written as text (`\\xff`, errors.without_surrogates), at any depth."""
    from attncli.errors import without_surrogates

    if isinstance(value, str):
        return without_surrogates(value)
    if isinstance(value, dict):
        return {_utf8(k): _utf8(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_utf8(v) for v in value]
    return value


def document(doc: dict[str, Any]) -> Iterator[bytes]:
    """The whole document, ending with a newline."""
    yield from encode(doc)
    yield b"\n"


def dumps(doc: dict[str, Any]) -> str:
    """The document as one string (for tests and small documents)."""
    return b"".join(document(doc)).decode("utf-8")


# -- the pages (attncli.document.pages): each one's data, as attncli.walkthroughs.data builds it ------


def _data(page: Page, options: Options) -> Iterator[bytes]:
    return document(page.data())


run = explain = report = heads = shade = _data
