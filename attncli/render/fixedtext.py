"""Numbers with fixed decimals as UTF-8 bytes, a block of a matrix at once, the text `numbers.fixed` writes.

Markdown and LaTeX print millions of numbers at 1,024 tokens; Python formats about five
million floats a second, NumPy's integer arithmetic a hundred million. `cells` writes each
number's digits into a byte array (zeros pad the unused places) and `joined` drops the
zeros and cuts the text into rows. Numbers whose rounding is too close to call in float64
(x·10^p within a few ulps of a half), or too large for fixed notation, are written by the
caller's `write`, one at a time, and so are ±∞ and NaN (once each).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from attncli.numbers import HUGE

_LIMIT = 2.0**49  # beyond this x·10^p has too few bits after the point to judge a rounding
_TIE = 2.0**-48  # |x·10^p − (n + ½)| below |x·10^p|·_TIE: too close to a half to trust float64's product
_ZERO, _MINUS, _POINT = ord("0"), ord("-"), ord(".")


def cells(data: npt.NDArray[np.float64], precision: int, write: Callable[[float, int], str], lead: bytes = b"") -> npt.NDArray[np.uint8]:
    """Each number of `data` (rows, cols) as `write(x, precision)` gives it, after `lead`, in (rows, cols, width) bytes.

    The number is right-aligned in its place; zero bytes, which no text contains, fill the rest.
    `write` must agree with `numbers.fixed` on finite numbers; it writes the others itself.
    """
    x = np.asarray(data, dtype=np.float64)  # (R, C)
    finite = np.isfinite(x)  # (R, C)
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.where(finite, x, 0.0) * 10.0**precision  # (R, C) correctly rounded: 10^p is exact for p <= 22
        by_hand = ~finite | (np.abs(x) >= HUGE) | (np.abs(y) >= _LIMIT) | (np.abs(y - np.floor(y) - 0.5) <= np.abs(y) * _TIE)
    y[by_hand] = 0.0
    n = np.abs(np.rint(y))  # (R, C) the digits as one whole number, rounded half to even as printf rounds
    negative = (y < 0) & (n > 0)  # a number that rounds to zero loses its sign, as in numbers.fixed
    top = int(n.max()) if n.size else 0
    whole: npt.NDArray[np.unsignedinteger[Any]] = n.astype(np.uint32 if top < 2**32 else np.uint64)  # 32-bit divides fastest

    texts = {(int(r), int(c)): write(float(x[r, c]), precision).encode() for r, c in zip(*np.nonzero(by_hand & finite))}
    special = []  # ±∞ and NaN, each written once, and where they are
    if not finite.all():
        for value, kind in ((-math.inf, x == -math.inf), (math.inf, x == math.inf), (math.nan, np.isnan(x))):
            if kind.any():
                special.append((write(value, precision).encode(), kind))
    digits = max(precision + 1, len(str(top)))
    point = 1 if precision > 0 else 0
    width = len(lead) + max([digits + point + 1, *map(len, texts.values()), *(len(text) for text, _ in special)])

    out = np.zeros((*x.shape, width), dtype=np.uint8)  # (R, C, W)
    for i, byte in enumerate(lead):
        out[..., i] = byte
    minus = np.where(negative, _MINUS, 0).astype(np.uint8)  # (R, C) the sign, until it is placed
    rest = whole
    for k in range(digits + 1):  # the k-th digit from the right (the point goes left of the last decimal), then room for a sign
        shorter = rest // 10
        digit = (rest - shorter * 10).astype(np.uint8) + np.uint8(_ZERO)
        if k > precision:  # left of the units: a digit while the number lasts, then its sign, then nothing
            digit = np.where(rest > 0, digit, minus)
            minus = np.where(rest > 0, minus, np.uint8(0))
        out[..., width - 1 - k - (point if k >= precision else 0)] = digit
        rest = shorter
    if point:
        out[..., width - 1 - precision] = _POINT
    for text, kind in special:
        out[kind, len(lead) :] = 0
        out[kind, width - len(text) :] = np.frombuffer(text, dtype=np.uint8)
    for (r, c), text in texts.items():
        out[r, c, len(lead) :] = 0
        out[r, c, width - len(text) :] = np.frombuffer(text, dtype=np.uint8)
    return out


def rows(out: npt.NDArray[np.uint8]) -> list[bytes]:
    """Each row of `cells` as one text: its cells one after another, the empty places dropped."""
    return [row.tobytes().translate(None, b"\0") for row in out]
