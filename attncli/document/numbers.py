"""How numbers are written: fixed decimals, −∞ for masked cells, no "-0.000", in every format.

A number at a decimal half rounds away from zero, as a hand calculation does, even when float64 holds
it a hair below the half on this CPU and a hair above on another (core.rounding): what is shown is
the same on every machine.

For people: `fixed` (one number), `fixed_many` (a row at once), `smart`, `vector`; the
vectorised byte writer for huge tables is `attncli.document.fixedtext`. For machines (CSV):
`plain`, full precision unless decimals are asked for, then with the same "no -0.00" rule.
Whether a line of shown numbers may say "=" or must say "≈": `shown` and `relation`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from attncli.core.rounding import TIE, TIE_MOST, near_half, round_half_away

if TYPE_CHECKING:
    import numpy as np

MINUS_INFINITY = "−∞"
HUGE = 1e15  # from here on numbers are written in scientific notation
HALF_TOLERANCES = {"tie": TIE, "tie_most": TIE_MOST}  # `fixed`'s test for a decimal half, for a script that rounds as it does (explorer.js)


def fixed(x: float, precision: int) -> str:
    """x with exactly `precision` decimals; −∞ stays −∞, a rounded-away sign is dropped, and |x| ≥ 10¹⁵ is 1.0000e+100."""
    if math.isinf(x):
        return MINUS_INFINITY if x < 0 else "∞"
    if abs(x) >= HUGE:  # 1e100 would be a hundred digits, most of them noise
        return f"{x:.{precision}e}"
    text = _halves_away(x, precision) or f"{x:.{precision}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def _halves_away(x: float, precision: int) -> str | None:
    """x at `precision` decimals when it lies on a decimal half by core.rounding's rule (rounded away from zero), else None."""
    y = x * 10.0**precision
    if not near_half(y):
        return None
    whole = int(round_half_away(y))  # |whole| < 10^15 · 10^15 at most: exact as a Python int
    digits = f"{abs(whole):0{precision + 1}d}"
    text = digits if precision == 0 else f"{digits[:-precision]}.{digits[-precision:]}"
    return ("-" if whole < 0 else "") + text


def percent(x: float) -> str:
    """x as a whole percentage ("84%"), a half rounded away from zero as `fixed` rounds it (0.125 is 13%, as 0.125 is 0.13)."""
    return fixed(100.0 * x, 0) + "%"


def fixed_many(values: Sequence[float] | np.ndarray, precision: int) -> list[str]:
    """`fixed` of each value, formatted in one pass: −∞ for -inf, no "-0.000"."""
    import numpy as np

    array = np.asarray(values, dtype=np.float64)
    pattern = f"%.{precision}f"
    zero = pattern % 0.0
    special = {"-" + zero: zero, "-inf": MINUS_INFINITY, "inf": "∞"}
    texts = [special.get(t, t) for t in [pattern % x for x in array.tolist()]]
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.abs(array) * 10.0**precision
        gap = np.abs(y - np.rint(y))
    # rare: numbers too large for fixed notation, and those that may lie on a decimal half (core.rounding), written as fixed writes them
    huge = np.flatnonzero(np.isfinite(array) & ((np.abs(array) >= HUGE) | (gap >= 0.5 - TIE_MOST)))
    for i in huge.tolist():
        texts[i] = fixed(float(array.flat[i]), precision)
    return texts


def plain(x: float, precision: int | None) -> str:
    """A number for machines (CSV): the shortest text that reads back to the same float, or `precision` decimals without "-0.00"."""
    return repr(float(x)) if precision is None else plain_writer(precision)(float(x))


def plain_writer(precision: int | None) -> Callable[[float], str]:
    """`plain` as one function of a Python float, for writing a whole row through map()."""
    if precision is None:
        return repr
    pattern = f"%.{precision}f"
    zero = pattern % 0.0
    negative_zero = "-" + zero

    def write(x: float) -> str:
        text = _halves_away(x, precision) or pattern % x if math.isfinite(x) and abs(x) < HUGE else pattern % x
        return zero if text == negative_zero else text

    return write


_FIXED_LOW, _FIXED_HIGH = 1e-4, 1e15  # where orjson's shortest digits and repr's both read as plain decimals (repr: up to 1e16)


def plain_rows(block: np.ndarray) -> list[bytes]:
    """Each row of `block` as `plain(x, None)` of its numbers joined by commas: repr's text, written by orjson.

    orjson writes the same shortest round-trip digits as repr, a hundred times faster, and
    the same text for 0.0, -0.0 and every number from 1e-4 up to 1e15; elsewhere its forms
    differ (0.0000125 for 1.25e-05, 1e-9 for 1e-09, null for ±∞ and NaN), so those numbers,
    rare in a table of weights, are written by repr itself (tests/test_plain_rows.py compares).
    """
    import numpy as np
    import orjson

    x = np.ascontiguousarray(block, dtype=np.float64)
    if x.shape[0] == 0:
        return []
    text = orjson.dumps(x, option=orjson.OPT_SERIALIZE_NUMPY)  # [[a,b],[c,d]]
    rows = text[2:-2].split(b"],[")
    size = np.abs(x)
    with np.errstate(invalid="ignore"):
        other = ~((size >= _FIXED_LOW) & (size < _FIXED_HIGH)) & (x != 0)  # NaN lands here too
    for r in np.flatnonzero(other.any(axis=1)).tolist():
        fields = rows[r].split(b",")
        for c in np.flatnonzero(other[r]).tolist():
            fields[c] = repr(float(x[r, c])).encode()
        rows[r] = b",".join(fields)
    return rows


def smart(x: float, precision: int) -> str:
    """Whole numbers as whole numbers ("1", like the articles write e^1), others with decimals."""
    if math.isfinite(x) and x == round(x) and abs(x) < 1e15:
        return str(int(round(x)))
    return fixed(x, precision)


def vector(values: Iterable[float], precision: int, *, whole: bool = True) -> str:
    """[1, -1] or [0.244, 0.244]."""
    write = smart if whole else fixed
    return "[" + ", ".join(write(float(v), precision) for v in values) + "]"


SHORT_VECTOR = 12  # a longer vector shows its first 4 and last 2 numbers, as the narration's (walkthroughs.lengths: 2·LONG_TERMS)


def short_vector(values: Any, precision: int, *, whole: bool = True, full: bool = False) -> str:
    """[a, b, c, d, …, y, z] (384 numbers) for a long vector, unless full; a short one whole. The terminal's rule."""
    import numpy as np

    values = np.ravel(values)
    if full or len(values) <= SHORT_VECTOR:
        return vector(values, precision, whole=whole)
    write = smart if whole else fixed
    cells = [write(float(v), precision) for v in values[:4]] + ["…"] + [write(float(v), precision) for v in values[-2:]]
    return "[" + ", ".join(cells) + f"] ({len(values)} numbers)"


def significant(x: float, digits: int) -> str:
    """x to `digits` significant digits, its trailing zeros dropped, as `fixed` writes it (a decimal half rounds away from zero on
    every CPU): 3.025779137, 0.14."""
    if not math.isfinite(x) or x == 0:
        return fixed(x, 0)
    decimals = digits - 1 - math.floor(math.log10(abs(x)))
    if not 0 <= decimals <= MAX_PRECISION:
        return f"{x:.{digits}g}"
    text = fixed(x, decimals)
    return text.rstrip("0").rstrip(".") if "." in text else text


def exact_decimals(precision: int) -> int:
    """Decimals of an exact number shown beside hand-rounded ones: one more, so the difference shows."""
    return precision + 1


def decimals(option: int | None, scenario_precision: int, round_steps: int | None) -> int:
    """The one rule for how many decimals people see.

    The option when given, else the scenario's `precision`; under --round-steps N never
    fewer than N, since every hand-rounded number carries exactly N decimals and showing
    fewer would round it a second time. Exact numbers shown beside hand-rounded ones get one more.
    """
    shown = scenario_precision if option is None else checked_precision(option)
    return shown if round_steps is None else max(shown, round_steps)


MAX_PRECISION = 15  # as the command line's --precision: float64 holds no more, and far more overflows the number writer


def checked_precision(precision: object) -> int:
    """`precision` as an int of 0 to 15 decimals, or an AttnError (the Python API passes any value; -1 and 1.5 were a
    ValueError of a format string, 10,000 an OverflowError)."""
    import operator

    from attncli.errors import AttnError, option

    try:
        whole = operator.index(precision)  # type: ignore[arg-type]
    except TypeError:
        whole = None
    if whole is None or isinstance(precision, bool) or not 0 <= whole <= MAX_PRECISION:
        raise AttnError(f"found {precision!r}", key=option("precision"), expected=f"a whole number of decimals from 0 to {MAX_PRECISION}")
    return int(whole)


def shown(x: float, precision: int) -> Decimal:
    """The number a reader sees for x at `precision` decimals, as an exact decimal (what `fixed` and `smart` write)."""
    if math.isinf(x):
        return Decimal("-Infinity") if x < 0 else Decimal("Infinity")
    return Decimal(fixed(x, precision))


def relation(from_shown: Decimal | Sequence[Decimal], result: float | Sequence[float] | np.ndarray, precision: int, *, approx: str = "≈") -> str:
    """The one rule for "=" and "≈" between shown numbers.

    `from_shown` is worked out, exactly, from the numbers a line shows (see `shown`); `result` is the
    line's result, shown at `precision` decimals. "=" when each worked-out value lies within half a
    unit of the last shown decimal of its shown result (a reader who rounds gets what is shown),
    else `approx`. Results that are not finite (−∞ of a masked cell) are not checked.
    """
    import numpy as np

    readers = [from_shown] if isinstance(from_shown, Decimal) else list(from_shown)
    results = [float(x) for x in np.ravel(np.asarray(result, dtype=np.float64))]
    half = Decimal(5) * Decimal(10) ** -(precision + 1)
    if all(abs(r - shown(x, precision)) <= half for r, x in zip(readers, results, strict=True) if math.isfinite(x)):
        return "="
    return approx
