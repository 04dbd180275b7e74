"""How numbers are written for people: fixed decimals, −∞ for masked cells, no "-0.000"."""

from __future__ import annotations

import math
from collections.abc import Iterable

MINUS_INFINITY = "−∞"
HUGE = 1e15  # from here on numbers are written in scientific notation


def fixed(x: float, precision: int) -> str:
    """x with exactly `precision` decimals; −∞ stays −∞, a rounded-away sign is dropped, and |x| ≥ 10¹⁵ is 1.0000e+100."""
    if math.isinf(x):
        return MINUS_INFINITY if x < 0 else "∞"
    if abs(x) >= HUGE:  # 1e100 would be a hundred digits, most of them noise
        return f"{x:.{precision}e}"
    text = f"{x:.{precision}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def smart(x: float, precision: int) -> str:
    """Whole numbers as whole numbers ("1", like the articles write e^1), others with decimals."""
    if math.isfinite(x) and x == round(x) and abs(x) < 1e15:
        return str(int(round(x)))
    return fixed(x, precision)


def vector(values: Iterable[float], precision: int, *, whole: bool = True) -> str:
    """[1, -1] or [0.244, 0.244]."""
    write = smart if whole else fixed
    return "[" + ", ".join(write(float(v), precision) for v in values) + "]"


def decimals(option: int | None, scenario_precision: int, round_steps: int | None) -> int:
    """The one rule for how many decimals people see.

    The option when given, else the scenario's `precision`; under --round-steps N never
    fewer than N, since every hand-rounded number carries exactly N decimals and showing
    fewer would round it a second time. Exact numbers shown beside hand-rounded ones get one more.
    """
    shown = scenario_precision if option is None else option
    return shown if round_steps is None else max(shown, round_steps)
