"""Shading a matrix by value: background colours in colour terminals, a Unicode block ramp without colour."""

from __future__ import annotations

import numpy as np
from rich.text import Text

from attncli.numbers import fixed

RAMP = "▁▂▃▄▅▆▇█"
# ColorBrewer's "Blues", light to dark. Each shade sets its own text colour too (black on the
# lighter shades, white on the three darkest), so cells read the same on dark and light terminals.
PALETTE = ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#084594"]


class Heat:
    """Maps a view's values to shades: weights on their own scale 0..1, other stages from their min to max."""

    def __init__(self, data: np.ndarray, hidden: np.ndarray | None, *, probabilities: bool, colour: bool) -> None:
        self.colour = colour
        if probabilities:
            self.low, self.high = 0.0, 1.0
        else:
            shown = data[np.isfinite(data) & (True if hidden is None else ~hidden)]
            self.low, self.high = (float(shown.min()), float(shown.max())) if shown.size else (0.0, 1.0)

    def level(self, x: float) -> int:
        """0 .. 7: which shade x gets."""
        span = self.high - self.low
        share = 0.0 if span <= 0 else (x - self.low) / span
        return min(len(PALETTE) - 1, max(0, int(share * len(PALETTE))))

    def cell(self, text: str, x: float) -> Text:
        level = self.level(x)
        if self.colour:
            ink = "black" if level <= 4 else "white"  # white only on the three darkest blues
            return Text(text, style=f"{ink} on {PALETTE[level]}")
        return Text(f"{text} {RAMP[level]}")

    def legend(self, precision: int) -> Text:
        legend = Text("shade: ", style="dim")
        legend.append(fixed(self.low, precision) + " ")
        for level, shade in enumerate(PALETTE):
            legend.append("  " if self.colour else RAMP[level], style=f"on {shade}" if self.colour else "")
        legend.append(" " + fixed(self.high, precision))
        return legend
