"""MXFP4 (OCP microscaling FP4), as gpt-oss stores its experts: dequantised exactly to float64.

A tensor `NAME` is stored as `NAME_blocks` (uint8, (..., rows, G, 16): each byte two FP4 e2m1 codes, the low
nibble first) and `NAME_scales` (uint8, (..., rows, G): one e8m0 exponent per block of 32 numbers, biased by 127).
Number j of block g in row r is FP4[code] · 2^(scale − 127), where FP4 is e2m1's sixteen values
(0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives). The rows of the stored tensor are the columns of the dequantised
one: transformers' `convert_moe_packed_tensors` turns (E, rows, G·32) into (E, G·32, rows), the layout of an
unquantised gpt-oss save (gate_up_proj (E, d, 2·inner), down_proj (E, inner, d)). Every value is a small odd number
times a power of two within float64's range, so the float64 result is exact.
"""

from __future__ import annotations

import math
import mmap

import numpy as np

from attncli.errors import AttnError
from attncli.sources.bounded import open_regular
from attncli.sources.checkpoints.safetensors import Checkpoint, TensorEntry

FP4_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
BLOCK = 32  # numbers per scale
_RAW_DTYPES = {"U8": "u1", "F8_E8M0": "u1"}  # e8m0 scales: the biased exponent's byte, as transformers reads it


def dequantise(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """(..., rows, G·32) float64 from blocks (..., rows, G, 16) uint8 and scales (..., rows, G) uint8, rows as stored."""
    if blocks.shape[-1] != BLOCK // 2 or blocks.shape[:-1] != scales.shape:
        raise ValueError(f"blocks {blocks.shape} and scales {scales.shape} do not pair (blocks (..., G, 16), scales (..., G))")
    values = np.empty((*blocks.shape[:-1], BLOCK), dtype=np.float64)  # (..., G, 32)
    values[..., 0::2] = FP4_E2M1[blocks & 0x0F]  # the low nibble is the earlier number
    values[..., 1::2] = FP4_E2M1[blocks >> 4]
    values = np.ldexp(values, scales.astype(np.int64)[..., None] - 127)  # × 2^(scale − 127), exact
    return values.reshape(*blocks.shape[:-2], blocks.shape[-2] * BLOCK)  # (..., rows, G·32)


def has_mxfp4(checkpoint: object, name: str) -> bool:
    """Whether `name` is stored as MXFP4 (`name_blocks` and `name_scales`) in a safetensors checkpoint."""
    return isinstance(checkpoint, Checkpoint) and checkpoint.has(name + "_blocks") and checkpoint.has(name + "_scales")


def expert(checkpoint: Checkpoint, name: str, index: int, shape: tuple[int, int]) -> np.ndarray:
    """(shape) float64: expert `index` of the MXFP4 tensor `name`, transposed as transformers dequantises it."""
    blocks_entry, scales_entry = checkpoint.entry(name + "_blocks"), checkpoint.entry(name + "_scales")
    columns, rows = shape  # the dequantised (columns, rows) is the stored (rows, columns)ᵀ
    groups = math.ceil(columns / BLOCK)
    expected_blocks, expected_scales = (rows, groups, BLOCK // 2), (rows, groups)
    for entry, expected in ((blocks_entry, expected_blocks), (scales_entry, expected_scales)):
        if entry.dtype not in _RAW_DTYPES:
            raise AttnError(
                f"tensor '{entry.name}' is stored as {entry.dtype}",
                file=str(checkpoint.file_of(entry.name)),
                expected="U8 (MXFP4 blocks and scales)",
            )
        if len(entry.shape) != 1 + len(expected) or tuple(entry.shape[1:]) != expected or not 0 <= index < entry.shape[0]:
            raise AttnError(
                f"tensor '{entry.name}' has shape {list(entry.shape)}",
                file=str(checkpoint.file_of(entry.name)),
                expected=f"[experts, {', '.join(str(n) for n in expected)}] for a dequantised {list(shape)}",
            )
    blocks = _expert_bytes(checkpoint, blocks_entry, index)
    scales = _expert_bytes(checkpoint, scales_entry, index)
    dense = dequantise(blocks, scales)[:, :columns]  # (rows, columns)
    return np.ascontiguousarray(dense.T)  # (columns, rows)


def _expert_bytes(checkpoint: Checkpoint, entry: TensorEntry, index: int) -> np.ndarray:
    """The bytes of one expert (the first axis) of a uint8 tensor, copied out of a mapping of that expert only."""
    per = math.prod(entry.shape[1:])
    begin = entry.begin + index * per
    start = begin - begin % mmap.ALLOCATIONGRANULARITY
    path = checkpoint.file_of(entry.name)
    fd, _ = open_regular(path, str(path), what="a safetensors file")
    with (
        open(fd, "rb") as stream,
        mmap.mmap(stream.fileno(), begin + per - start, offset=start, access=mmap.ACCESS_READ) as mapped,
    ):
        raw = np.frombuffer(mapped, dtype=np.uint8, count=per, offset=begin - start)
        out = raw.reshape(entry.shape[1:]).copy()
        del raw  # the mapping closes only once no array looks into it
    return out
