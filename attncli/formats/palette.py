"""The heatmap's colours, one home for the terminal, HTML and SVG: a light and a dark ramp, each shade with its text colour.

Both ramps are ColorBrewer's "Blues" in 8 shades. On a light background the lowest values
are the lightest shades (`LIGHT`); on a dark one they are the darkest (`DARK`), so the
lowest values never glare. Each shade's text colour is black or white, whichever contrasts
more; every pair meets WCAG AA for normal text (contrast ≥ 4.5, checked in the tests).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

BLACK, WHITE = "#000000", "#ffffff"
WCAG_AA = 4.5  # minimum contrast of normal text


def luminance(colour: str) -> float:
    """WCAG relative luminance of a "#rrggbb" colour, 0 (black) to 1 (white)."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two colours, 1 to 21."""
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


@cache  # a heatmap asks once per cell, about the same nine colours
def ink(fill: str) -> str:
    """Black or white, whichever reads better on `fill`."""
    return BLACK if contrast(fill, BLACK) >= contrast(fill, WHITE) else WHITE


class Ramp(NamedTuple):
    """A ramp of shades from the lowest value to the highest, with the page and masked-cell colours it goes with."""

    name: str
    shades: tuple[str, ...]  # lowest value first
    masked: str  # cells the mask hides
    background: str  # the page or terminal behind the cells
    text: str  # labels on the background


# Blues 8 as the terminal heatmap has it (attncli/render/heatmap.py PALETTE); white text only where it reaches 4.5.
LIGHT = Ramp("light", ("#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#084594"),
             masked="#d9d9d9", background=WHITE, text="#1a1a1a")  # fmt: skip
# Blues 9 without its near-white, darkest first: on a dark background the lowest values stay dim.
DARK = Ramp("dark", ("#08306b", "#08519c", "#2171b5", "#4292c6", "#6baed6", "#9ecae1", "#c6dbef", "#deebf7"),
            masked="#4a4a4a", background="#121212", text="#e6e6e6")  # fmt: skip
LEVELS = len(LIGHT.shades)


def bounds(data: npt.NDArray[np.float64], hidden: npt.NDArray[np.bool_] | None, *, probabilities: bool) -> tuple[float, float]:
    """The values the ramp spans: 0..1 for probabilities, else the smallest to the largest finite value the mask shows."""
    import numpy as np

    if probabilities:
        return 0.0, 1.0
    shown = data[np.isfinite(data) & (True if hidden is None else ~hidden)]
    return (float(shown.min()), float(shown.max())) if shown.size else (0.0, 1.0)


def level(x: float, low: float, high: float) -> int:
    """Which shade x gets, 0 .. LEVELS - 1 (the same cut as the terminal heatmap)."""
    span = high - low
    share = 0.0 if span <= 0 or x != x else min(1.0, max(0.0, (x - low) / span))  # NaN: the lowest shade; ±inf: the ends
    return min(LEVELS - 1, int(share * LEVELS))


def levels(data: npt.NDArray[np.float64], low: float, high: float) -> npt.NDArray[np.intp]:
    """`level` of every number of `data` at once, an integer array of its shape (NaN: the lowest shade; ±inf: the ends).

    The tables of HTML and Typst shade a whole matrix with it; tests hold it to `level` on NaN, ±inf and odd bounds."""
    import numpy as np

    span = high - low
    x = np.asarray(data, dtype=np.float64)
    if not span > 0:  # span <= 0, or NaN: every number gets the lowest shade
        return np.zeros(x.shape, dtype=np.intp)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        share = (x - low) / span
    share = np.where(np.isnan(share), 0.0, np.clip(share, 0.0, 1.0))  # max(0, NaN) is 0 in `level`
    return np.minimum((share * LEVELS).astype(np.intp), LEVELS - 1)
