"""Numbers with fixed decimals as UTF-8 bytes, a block of a matrix at once, the text `numbers.fixed` writes.

Markdown and LaTeX print millions of numbers at 1,024 tokens; Python formats about five
million floats a second, NumPy's integer arithmetic a hundred million. `cells` writes each
number's digits into a byte array (zero bytes fill the unused places, or a `fill` byte such
as a space where the format does not print it) and `rows` drops the zeros, a row at a time.
A number on a decimal half (core.rounding's rule: a half rounds away
from zero whatever its last bits) is rounded here, with the rest; one so large that x·10^p's
rounding could hide which side of a half it lies on, or too large for fixed notation, is written
by the caller's `write`, one at a time, and so are ±∞ and NaN (once each).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from attncli.core.rounding import TIE_MOST, halves

_LIMIT = 2.0**49  # from here x·10^p has too few bits after the point to judge a rounding; numbers.HUGE is beyond it
_EXACT = 2.0**41  # below this, two ulps of x·10^p are within core.rounding's tie tolerance (2^-10 from 2^20 on)
_ZERO, _MINUS, _POINT = ord("0"), ord("-"), ord(".")


# _in_place: a block's float64 arrays are half a megabyte, above the size from which the C library
# maps fresh pages for each new array and returns them when it is freed; a new array per step cost
# more in page faults than the step itself (|y − rounded| took 0.33 ms of a block's 0.84), so the
# steps write into arrays already made.


def cells(
    data: npt.NDArray[np.float64], precision: int, write: Callable[[float, int], str], lead: bytes = b"", fill: int = 0
) -> npt.NDArray[np.uint8]:
    """Each number of `data` (rows, cols) as `write(x, precision)` gives it, after `lead`, in (rows, cols, width) bytes.

    The number is right-aligned in its place; `fill` fills the rest: zero bytes, which no text contains (`rows` drops them),
    or a byte the format does not print where it stands (a space in TeX math), so that the cells are the text as they are.
    `write` must agree with `numbers.fixed` on finite numbers; it writes the others itself.
    """
    x = np.asarray(data, dtype=np.float64)  # (R, C)
    with np.errstate(over="ignore", invalid="ignore"):
        y = x * 10.0**precision  # (R, C) correctly rounded: 10^p is exact for p <= 22
        rounded = np.rint(y)  # half to even, as printf rounds an exact half
        size = np.abs(y)
        # NaN, ±∞, |x| >= 1e15 (numbers.HUGE), and numbers near a decimal half that are not one by core.rounding's rule:
        # ~(size < _LIMIT) | (|y − rounded| >= 0.5 − TIE_MOST, not a half), in place (see _in_place)
        by_hand = ~(size < _LIMIT)
        gap = np.abs(np.subtract(y, rounded, out=y), out=y)
        near = (gap >= 0.5 - TIE_MOST) & ~by_hand
        if near.any():  # a half rounds away from zero, as numbers.fixed rounds it (written here, not by hand: hand-written inputs make many)
            candidates = x[near] * 10.0**precision  # (n,) the same products as y's
            on_half = halves(candidates)
            rounded[near] = np.where(on_half, np.copysign(np.floor(np.abs(candidates)) + 1.0, candidates), rounded[near])
            # Within a hair of a half but not one: y = x·10^p is x·10^p correctly rounded, off by at most an ulp of y, and the
            # rule's tolerance (at least size·2^-30, or 2^-10) is wider than two ulps below _EXACT: rint(y) rounds as printf
            # rounds x itself. Beyond it, by hand.
            by_hand[near] = ~on_half & ~(size[near] < _EXACT)
    if by_hand.any():
        rounded[by_hand] = 0.0
    negative = rounded < 0  # a number that rounds to zero (-0.0 here) loses its sign, as in numbers.fixed
    np.abs(rounded, out=rounded)
    top = int(rounded.max()) if rounded.size else 0
    whole: npt.NDArray[np.unsignedinteger[Any]] = rounded.astype(np.uint32 if top < 2**32 else np.uint64)  # 32-bit divides fastest

    texts: dict[tuple[int, int], bytes] = {}  # finite numbers written by hand
    special: list[tuple[bytes, npt.NDArray[np.bool_]]] = []  # ±∞ and NaN, each written once, and where they are
    if by_hand.any():
        finite = np.isfinite(x)
        texts = {(int(r), int(c)): write(float(x[r, c]), precision).encode() for r, c in zip(*np.nonzero(by_hand & finite))}
        for value, kind in ((-math.inf, x == -math.inf), (math.inf, x == math.inf), (math.nan, np.isnan(x))):
            if kind.any():
                special.append((write(value, precision).encode(), kind))
    digits = max(precision + 1, len(str(top)))
    point = 1 if precision > 0 else 0
    sign = 1 if negative.any() else 0  # a place for "-" only where some number has one: all alike, a row has no zero byte to drop
    width = len(lead) + max([digits + point + sign, *map(len, texts.values()), *(len(text) for text, _ in special)])

    out = np.empty((*x.shape, width), dtype=np.uint8)  # (R, C, W): every byte is written below (a full array cost a pass)
    for i, byte in enumerate(lead):
        out[..., i] = byte
    out[..., len(lead) : width - (digits + point + sign)] = fill  # room only a wider text by hand, ±∞ or NaN needs

    minus = negative.view(np.uint8) * np.uint8((_MINUS - fill) % 256)  # (R, C) the sign, until it is placed, less `fill` (mod 256)
    rest, spare = whole, np.empty_like(whole)  # two buffers, taking turns (see _in_place)
    low = rest.astype(np.uint8)  # the number mod 256: its last digit is that of the number
    for k in range(digits + sign):  # the k-th digit from the right (the point goes left of the last decimal), then room for a sign
        shorter = np.floor_divide(rest, 10, out=spare)  # NumPy divides by a constant fast; a table of digit pairs is slower to look up
        shorter_low = shorter.astype(np.uint8)
        digit = low - shorter_low * np.uint8(10)  # rest - 10·shorter, exact mod 256 and below 10
        digit += np.uint8(_ZERO)
        if k > precision:  # left of the units: a digit while the number lasts, then its sign, then nothing
            going = rest > 0
            digit = np.where(going, digit, minus + np.uint8(fill) if fill else minus)
            minus *= going  # placed: no sign further left, `fill` there
        out[..., width - 1 - k - (point if k >= precision else 0)] = digit
        rest, spare, low = shorter, rest, shorter_low
    if point:
        out[..., width - 1 - precision] = _POINT
    whole_cells = out.view(f"V{width}")[..., 0]  # (R, C): each cell's bytes as one item, copied by one memcpy
    for written, kind in special:  # ±∞ and NaN: their own text, right-aligned, over the zero written for them
        cell = np.full(width, fill, dtype=np.uint8)
        cell[: len(lead)] = np.frombuffer(lead, dtype=np.uint8)
        cell[width - len(written) :] = np.frombuffer(written, dtype=np.uint8)
        whole_cells[kind] = cell.view(f"V{width}")[0]  # a masked causal matrix is half ∞: byte planes by a mask took 5x longer
    for (r, c), text in texts.items():
        out[r, c, len(lead) :] = fill
        out[r, c, width - len(text) :] = np.frombuffer(text, dtype=np.uint8)
    return out


def rows(out: npt.NDArray[np.uint8]) -> list[bytes]:
    """Each row of `cells` as one text: its cells one after another, the empty places dropped."""
    texts = [row.tobytes() for row in out]
    return [text if b"\0" not in text else text.translate(None, b"\0") for text in texts]  # `in`: one memchr, 20x a translate
