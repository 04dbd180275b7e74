"""Shading a matrix by value: background colours in colour terminals, a Unicode block ramp without colour."""

from __future__ import annotations

import os

import numpy as np
from rich.text import Text

from attncli.document.numbers import fixed
from attncli.formats import palette

RAMP = "▁▂▃▄▅▆▇█"
# ColorBrewer's "Blues" from attncli.formats.palette: on a dark terminal (the default, and what
# COLORFGBG says in most) the lowest values are the darkest shades, on a light one the lightest,
# so the lowest values never glare. Each shade carries its own text colour (WCAG AA, palette.ink).
PALETTE = list(palette.LIGHT.shades)


def terminal_ramp() -> palette.Ramp:
    """The ramp for this terminal: light when COLORFGBG (or ATTNCLI_BACKGROUND=light) says the background is light, else dark."""
    wanted = os.environ.get("ATTNCLI_BACKGROUND", "").lower()
    if wanted in ("light", "dark"):
        return palette.LIGHT if wanted == "light" else palette.DARK
    background = os.environ.get("COLORFGBG", "").rpartition(";")[2]
    light = background.isdigit() and int(background) in (7, 15)  # rxvt's convention: 7 and 15 are white
    return palette.LIGHT if light else palette.DARK


class Heat:
    """Maps a view's values to shades: weights on their own scale 0..1, other stages from their min to max."""

    def __init__(self, data: np.ndarray, hidden: np.ndarray | None, *, probabilities: bool, colour: bool) -> None:
        self.colour = colour
        self.ramp = terminal_ramp()
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

    @property
    def masked_style(self) -> str:
        """A hidden cell: the ramp's own grey for masked cells, with readable text (WCAG AA, palette.ink)."""
        return f"{palette.ink(self.ramp.masked)} on {self.ramp.masked}"

    def cell(self, text: str, x: float) -> Text:
        level = self.level(x)
        if self.colour:
            fill = self.ramp.shades[level]
            return Text(text, style=f"{palette.ink(fill)} on {fill}")
        return Text(f"{text} {RAMP[level]}")

    def legend(self, precision: int) -> Text:
        legend = Text("shade: ", style="dim")
        legend.append(fixed(self.low, precision) + " ")
        for level, shade in enumerate(self.ramp.shades):
            legend.append("  " if self.colour else RAMP[level], style=f"on {shade}" if self.colour else "")
        legend.append(" " + fixed(self.high, precision))
        return legend
