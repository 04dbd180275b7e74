"""GGML's tensor types and their dequantisation to float64, written out in NumPy from the block layouts.

Every quantised type stores a tensor's rows in blocks of 32 or 256 weights. Each block holds
fp16 scale factors and packed integer codes; each weight is rebuilt as

    weight = step · code + base

where `step` is the block's scale d times the weight's sub-block scale (K-quants), `code` the
unpacked integer (signed where the format centres it) and `base` minus the sub-block minimum
(types with a minimum) or 0. All three are exact: fp16 widens exactly, and step · code needs at
most 11 + 7 + 6 = 24 significant bits. In float64 the sum is exact too (no fp16 value needs more
than 44 bits of span), so attncli's weights are the format's exact numbers. The reference
(gguf-py's `gguf.quants.dequantize`, and llama.cpp) computes in float32 and so rounds the final
sum once for the types with a minimum (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K): their float32 value is
this float64 value rounded to float32. The others (Q4_0, Q5_0, Q8_0, Q3_K, Q6_K, IQ4_NL, IQ4_XS,
TQ2_0, MXFP4, F16, BF16, F32) are exact in both (MXFP4 short of float32's overflow: 12·2^(e−128) past 2^128).

Dimension names: n blocks, E weights per block, S sub-blocks per block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

QK = 32  # weights per block of the simple types
QK_K = 256  # weights per block of the K-quants (a "super-block")


@dataclass(frozen=True)
class GgmlType:
    """One of GGML's tensor types: its number in the file, block size in weights and in bytes."""

    number: int
    name: str
    block: int  # weights per block
    bytes: int  # bytes per block

    @property
    def bits_per_weight(self) -> float:
        return self.bytes * 8 / self.block


# every type llama.cpp's ggml.h numbers (gaps are types it removed), so that a file's type is either known or clearly unknown
TYPES = {
    t.number: t
    for t in (
        GgmlType(0, "F32", 1, 4), GgmlType(1, "F16", 1, 2), GgmlType(2, "Q4_0", 32, 18), GgmlType(3, "Q4_1", 32, 20),
        GgmlType(6, "Q5_0", 32, 22), GgmlType(7, "Q5_1", 32, 24), GgmlType(8, "Q8_0", 32, 34), GgmlType(9, "Q8_1", 32, 40),
        GgmlType(10, "Q2_K", 256, 84), GgmlType(11, "Q3_K", 256, 110), GgmlType(12, "Q4_K", 256, 144),
        GgmlType(13, "Q5_K", 256, 176), GgmlType(14, "Q6_K", 256, 210), GgmlType(15, "Q8_K", 256, 292),
        GgmlType(16, "IQ2_XXS", 256, 66), GgmlType(17, "IQ2_XS", 256, 74), GgmlType(18, "IQ3_XXS", 256, 98),
        GgmlType(19, "IQ1_S", 256, 50), GgmlType(20, "IQ4_NL", 32, 18), GgmlType(21, "IQ3_S", 256, 110),
        GgmlType(22, "IQ2_S", 256, 82), GgmlType(23, "IQ4_XS", 256, 136), GgmlType(24, "I8", 1, 1), GgmlType(25, "I16", 1, 2),
        GgmlType(26, "I32", 1, 4), GgmlType(27, "I64", 1, 8), GgmlType(28, "F64", 1, 8), GgmlType(29, "IQ1_M", 256, 56),
        GgmlType(30, "BF16", 1, 2), GgmlType(34, "TQ1_0", 256, 54), GgmlType(35, "TQ2_0", 256, 66),
        GgmlType(39, "MXFP4", 32, 17),
    )
}  # fmt: skip
BY_NAME = {t.name: t for t in TYPES.values()}
FLOAT_TYPES = ("F32", "F16", "BF16", "F64")
# the 16 levels an IQ4_NL code picks (ggml's kvalues_iq4nl)
IQ4_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.int8)


@dataclass(frozen=True, eq=False)
class Decoded:
    """Blocks taken apart: weight = step · code + base, with the stored fields for a walk-through."""

    step: np.ndarray  # (n, S) float64, per sub-block: d, or d · scale
    base: np.ndarray | None  # (n, S) float64, per sub-block: m, or −dmin · min; None when 0
    codes: np.ndarray  # (n, E) int8: the unpacked integers, already centred where the format centres them
    fields: dict[str, np.ndarray]  # what the block stores: "d", "m", "dmin" (n,) float64; "scales", "mins" (n, S) int

    @property
    def sub_block(self) -> int:
        return int(self.codes.shape[1] // self.step.shape[1])

    def values(self) -> np.ndarray:
        """(n, E) float64 weights: exact."""
        out = np.empty(self.codes.shape)
        self.values_into(out)
        return out

    def values_into(self, out: np.ndarray) -> None:
        """Write the (n, E) float64 weights into `out`: the codes widened, times their step, plus their base, in place.

        Each sub-block's step (and base) is broadcast, never repeated per weight, and no temporary is made;
        code · step is exact in float64, and so is the sum (see the module's docstring).
        """
        n, S = self.step.shape
        out[...] = self.codes  # widening a small integer is exact
        by_sub = out.reshape(n, S, -1)  # (n, S, E/S)
        by_sub *= self.step[:, :, None]
        if self.base is not None:
            by_sub += self.base[:, :, None]


def _half(blocks: np.ndarray, at: int) -> np.ndarray:
    """(n,) the fp16 at byte `at` of each block, widened exactly to float64."""
    return blocks[:, at : at + 2].copy().view("<f2")[:, 0].astype(np.float64)


def _fields(packed: np.ndarray, count: int, width: int, groups: int = 1) -> np.ndarray:
    """(n, groups·count·k) uint8 fields of `width` bits from (n, groups·k) bytes: within each group of k bytes, all
    bytes' lowest field first, then the next field, … (ggml's order: low nibbles, then high nibbles, of a run of bytes).

    One broadcast shift and one mask over the whole array, whatever the count and groups.
    """
    n = packed.shape[0]
    shifts = (np.arange(count, dtype=np.uint8) * width).reshape(1, 1, count, 1)
    out: np.ndarray = np.right_shift(packed.reshape(n, groups, 1, -1), shifts)  # (n, groups, count, k)
    out &= (1 << width) - 1
    fields: np.ndarray = out.reshape(n, -1)
    return fields


def _nibbles(packed: np.ndarray, groups: int = 1) -> np.ndarray:
    """(n, 2·k) int8: in each group of bytes their low nibbles, then their high nibbles."""
    return _fields(packed, 2, 4, groups).view(np.int8)


def _q4_0(b: np.ndarray) -> Decoded:
    d = _half(b, 0)
    return Decoded(d[:, None], None, _nibbles(b[:, 2:18]) - 8, {"d": d})


def _q4_1(b: np.ndarray) -> Decoded:
    d, m = _half(b, 0), _half(b, 2)
    return Decoded(d[:, None], m[:, None], _nibbles(b[:, 4:20]), {"d": d, "m": m})


def _high_bit(qh: np.ndarray) -> np.ndarray:
    """(n, 32) int8: bit j of the little-endian 32-bit word qh, as 16: the fifth bit of weight j."""
    return (np.unpackbits(qh, axis=1, bitorder="little") << 4).view(np.int8)


def _q5_0(b: np.ndarray) -> Decoded:
    d = _half(b, 0)
    return Decoded(d[:, None], None, (_nibbles(b[:, 6:22]) | _high_bit(b[:, 2:6])) - 16, {"d": d})


def _q5_1(b: np.ndarray) -> Decoded:
    d, m = _half(b, 0), _half(b, 2)
    return Decoded(d[:, None], m[:, None], _nibbles(b[:, 8:24]) | _high_bit(b[:, 4:8]), {"d": d, "m": m})


def _q8_0(b: np.ndarray) -> Decoded:
    d = _half(b, 0)
    return Decoded(d[:, None], None, b[:, 2:34].view(np.int8), {"d": d})


def _iq4_nl(b: np.ndarray) -> Decoded:
    d = _half(b, 0)
    return Decoded(d[:, None], None, IQ4_LEVELS[_fields(b[:, 2:18], 2, 4)], {"d": d})


def _q2_k(b: np.ndarray) -> Decoded:
    scales = b[:, 0:16]
    d, dmin = _half(b, 80), _half(b, 82)
    codes = _fields(b[:, 16:80], 4, 2, groups=2).view(np.int8)  # (n, 256)
    sc, mn = (scales & 0x0F).astype(np.int16), (scales >> 4).astype(np.int16)
    return Decoded(d[:, None] * sc, -(dmin[:, None] * mn), codes, {"d": d, "dmin": dmin, "scales": sc, "mins": mn})


def _q3_k(b: np.ndarray) -> Decoded:
    hmask, qs, packed = b[:, 0:32], b[:, 32:96], b[:, 96:108]
    d = _half(b, 108)
    low = np.concatenate([packed[:, 0:8] & 0x0F, packed[:, 0:8] >> 4], axis=1)  # (n, 16) the low 4 bits of each scale
    high = _fields(packed[:, 8:12], 4, 2).astype(np.int16)  # (n, 16) the top 2 bits
    sc = (low.astype(np.int16) | (high << 4)) - 32
    codes = _fields(qs, 4, 2, groups=2)  # (n, 256) the low 2 bits
    codes |= _fields(hmask, 8, 1) << 2  # the high bit; 0 means "subtract 4"
    return Decoded(d[:, None] * sc, None, codes.view(np.int8) - 4, {"d": d, "scales": sc})


def _k_scales(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, 8) six-bit scales and (n, 8) six-bit minimums of Q4_K and Q5_K, from their 12 bytes."""
    a, m, lo = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    sc = np.concatenate([a & 0x3F, (lo & 0x0F) | ((a >> 6) << 4)], axis=1).astype(np.int16)
    mn = np.concatenate([m & 0x3F, (lo >> 4) | ((m >> 6) << 4)], axis=1).astype(np.int16)
    return sc, mn


def _q4_k(b: np.ndarray) -> Decoded:
    d, dmin = _half(b, 0), _half(b, 2)
    sc, mn = _k_scales(b[:, 4:16])
    codes = _nibbles(b[:, 16:144], groups=4)  # (n, 256)
    return Decoded(d[:, None] * sc, -(dmin[:, None] * mn), codes, {"d": d, "dmin": dmin, "scales": sc, "mins": mn})


def _q5_k(b: np.ndarray) -> Decoded:
    d, dmin = _half(b, 0), _half(b, 2)
    sc, mn = _k_scales(b[:, 4:16])
    codes = _fields(b[:, 48:176], 2, 4, groups=4)  # (n, 256) the low four bits
    codes |= _fields(b[:, 16:48], 8, 1) << 4
    return Decoded(d[:, None] * sc, -(dmin[:, None] * mn), codes.view(np.int8), {"d": d, "dmin": dmin, "scales": sc, "mins": mn})


def _q6_k(b: np.ndarray) -> Decoded:
    sc = b[:, 192:208].view(np.int8).astype(np.int16)
    d = _half(b, 208)
    codes = _fields(b[:, 0:128], 2, 4, groups=2)  # (n, 256) the low four bits
    codes |= _fields(b[:, 128:192], 4, 2, groups=2) << 4  # the top two
    return Decoded(d[:, None] * sc, None, codes.view(np.int8) - 32, {"d": d, "scales": sc})


def _tq2_0(b: np.ndarray) -> Decoded:
    d = _half(b, 64)
    codes = _fields(b[:, 0:64], 4, 2, groups=2).view(np.int8) - 1  # (n, 256): −1, 0, 1
    return Decoded(d[:, None], None, codes, {"d": d})


def _iq4_xs(b: np.ndarray) -> Decoded:
    d = _half(b, 0)
    high = _fields(b[:, 2:4].copy().view("<u2").astype(np.uint16), 8, 2).astype(np.int16)  # (n, 8) two bits of each scale
    low = np.stack([b[:, 4:8] & 0x0F, b[:, 4:8] >> 4], axis=2).reshape(-1, 8).astype(np.int16)  # (n, 8) sub-block 2j, 2j+1
    sc = (low | (high << 4)) - 32
    codes = IQ4_LEVELS[_fields(b[:, 8:136], 2, 4, groups=8)]  # (n, 256)
    return Decoded(d[:, None] * sc, None, codes, {"d": d, "scales": sc})


# MXFP4's e2m1 levels as ggml stores them, doubled (kvalues_mxfp4): 0, 0.5, 1, … 6 and their negatives, times 2
MXFP4_LEVELS = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.int8)


def _mxfp4(b: np.ndarray) -> Decoded:
    """OCP MXFP4 as ggml stores it (gpt-oss's experts): one e8m0 byte e, then 32 four-bit e2m1 codes (low nibbles first).

    ggml's e8m0-to-half gives 2^(e − 128) for every byte, subnormal float32 ones included; the levels are
    doubled, so w = 2^(e − 128) · level = e2m1 · 2^(e − 127), the OCP value, exact in float64.
    """
    e = b[:, 0].astype(np.int64)
    step = np.ldexp(1.0, e - 128)  # (n,) exact powers of two
    return Decoded(step[:, None], None, MXFP4_LEVELS[_fields(b[:, 1:17], 2, 4)], {"e": e.astype(np.float64)})


DECODERS = {
    "Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_0": _q5_0, "Q5_1": _q5_1, "Q8_0": _q8_0, "IQ4_NL": _iq4_nl,
    "Q2_K": _q2_k, "Q3_K": _q3_k, "Q4_K": _q4_k, "Q5_K": _q5_k, "Q6_K": _q6_k, "IQ4_XS": _iq4_xs, "TQ2_0": _tq2_0,
    "MXFP4": _mxfp4,
}  # fmt: skip
READABLE = (*FLOAT_TYPES, *DECODERS)
CHUNK_WEIGHTS = 1 << 16  # weights decoded at once: every temporary of a chunk (64 KiB of codes) stays under malloc's mmap threshold


def decode(kind: str, blocks: np.ndarray) -> Decoded:
    """(n, bytes) uint8 blocks of a quantised type, taken apart."""
    return DECODERS[kind](np.ascontiguousarray(blocks, dtype=np.uint8))


def dequantize(kind: str, raw: np.ndarray, count: int) -> np.ndarray:
    """(count,) float64 weights from the raw bytes of `count` weights stored as `kind`, exactly.

    Quantised types are decoded a chunk of blocks at a time straight into the result: the temporary codes
    (a byte per weight) stay small and in cache, and each float64 weight is written by one product (and one sum).
    """
    raw = np.asarray(raw, dtype=np.uint8).reshape(-1)
    if kind == "F32":
        return raw.view("<f4").astype(np.float64)
    if kind == "F16":
        return raw.view("<f2").astype(np.float64)
    if kind == "F64":
        return raw.view("<f8").astype(np.float64)
    if kind == "BF16":  # the top half of a float32: widening by a 16-bit shift is exact
        return (raw.view("<u2").astype(np.uint32) << 16).view("<f4").astype(np.float64)
    t = BY_NAME[kind]
    blocks = raw.reshape(-1, t.bytes)  # (n, bytes)
    out = np.empty((blocks.shape[0], t.block), dtype=np.float64)  # (n, E)
    step = max(1, CHUNK_WEIGHTS // t.block)
    for start in range(0, blocks.shape[0], step):
        decode(kind, blocks[start : start + step]).values_into(out[start : start + step])
    return out.reshape(count)
