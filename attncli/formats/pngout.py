"""PNG figures, for the newsletters and platforms that take no SVG: the very SVG `svg.py` writes, rasterised by resvg.

Not a second drawing: each function takes the SVG of its page (a run's heatmaps, an explanation's row, a
report's figures or text, the head map, the shaded sentence) and hands it to resvg (the `resvg-py` wheel,
`pip install "attncli[png]"`), so the PNG shows what the SVG shows, pixel for pixel up to anti-aliasing. It
is drawn at twice the SVG's size, for high-density screens (a post shows it at the SVG's width). Its text is
set in the DejaVu Sans (and, where the SVG asks for a monospace font, DejaVu Sans Mono) shipped in `fonts/`
and no system font, so a PNG is the same on every machine. Only a figure with a character those fonts lack
(CJK, emoji: their cmap tables say which) lets resvg read the machine's fonts too, for those characters:
such a PNG depends on the fonts installed, and where none has the character it shows an empty box (SVG
leaves the reader's fonts to draw it). The SVG's dark-mode colours (a CSS media query) are not applied:
a PNG is light.
"""

from __future__ import annotations

import functools
import math
import re
from typing import TYPE_CHECKING

from attncli.errors import AttnError, option
from attncli.formats.fontmetrics import FONTS

if TYPE_CHECKING:
    from attncli.document.pages import ExplainPage, HeadsPage, ReportPage, RunPage, ShadePage
    from attncli.formats import Options

ZOOM = 2  # PNG pixels per SVG pixel, each way
MAX_PIXELS = 64_000_000  # 256 MB of RGBA while drawing: a bigger figure is refused before resvg allocates it
FONT_FILES = ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf", "DejaVuSansMono.ttf")
INSTALL = 'pip install "attncli[png]"'


def run(page: RunPage, options: Options) -> bytes:
    """The run's heatmaps (svg.run), as one PNG."""
    from attncli.formats import svg

    return rasterised(svg.run(page, options))


def explain(page: ExplainPage, options: Options) -> bytes:
    """The query's weights as a one-row heatmap (svg.explain), as a PNG."""
    from attncli.formats import svg

    return rasterised(svg.explain(page, options))


def report(page: ReportPage, options: Options) -> bytes:
    """The report's figures, or its text as the terminal's lines (svg.report), as a PNG."""
    from attncli.formats import svg

    return rasterised(svg.report(page, options))


def heads(page: HeadsPage, options: Options) -> bytes:
    """The head map's grid (svg.heads), as a PNG."""
    from attncli.formats import svg

    return rasterised(svg.heads(page, options))


def shade(page: ShadePage, options: Options) -> bytes:
    """The shaded sentence (svg.shade), as a PNG."""
    from attncli.formats import svg

    return rasterised(svg.shade(page, options))


def rasterised(svg_text: str) -> bytes:
    """`svg_text` (one of attncli's SVG figures) drawn by resvg at ZOOM× its size, with the bundled fonts (and the machine's
    for the characters they lack, if any)."""
    width, height = svg_size(svg_text)
    pixels = width * ZOOM * height * ZOOM
    if pixels > MAX_PIXELS:
        raise AttnError(
            f"the figure would be {width * ZOOM:,} × {height * ZOOM:,} pixels, more than a PNG of {MAX_PIXELS:,} may have",
            key=option("format"), expected="svg for a figure this big",
        )  # fmt: skip
    try:
        import resvg_py
    except ImportError:
        raise AttnError("PNG needs the resvg rasteriser, which is not installed", key=option("format"), expected=f"{INSTALL}, or svg") from None
    drawn = bundled_characters()
    missing = any(ord(c) not in drawn for c in set(svg_text) if c > "~")  # the markup is ASCII, which the fonts draw
    try:
        png: bytes = resvg_py.svg_to_bytes(
            svg_string=svg_text, zoom=ZOOM, skip_system_fonts=not missing, font_files=[str(FONTS / name) for name in FONT_FILES],
            font_family="DejaVu Sans", sans_serif_family="DejaVu Sans", monospace_family="DejaVu Sans Mono",
        )  # fmt: skip
    except (ValueError, RuntimeError) as error:  # resvg refused the figure: one line, not a traceback
        raise AttnError(f"resvg could not draw the figure: {error}", key=option("format"), expected="svg") from None
    return png


def svg_size(svg_text: str) -> tuple[int, int]:
    """The width and height in pixels that the figure's root element states (every attncli SVG states both)."""
    root = re.search(r'<svg [^>]*?width="([0-9.]+)" height="([0-9.]+)"', svg_text)
    if root is None:
        raise ValueError("an attncli SVG states its width and height on its <svg> element")
    return math.ceil(float(root[1])), math.ceil(float(root[2]))


@functools.cache
def bundled_characters() -> frozenset[int]:
    """The code points the bundled fonts draw, from their cmap tables."""
    return frozenset().union(*(cmap_code_points((FONTS / name).read_bytes()) for name in FONT_FILES))


def cmap_code_points(font: bytes) -> set[int]:
    """The code points a TrueType font maps to a glyph other than .notdef (fontmetrics.cmap reads its cmap table)."""
    from attncli.formats.fontmetrics import cmap

    return set(cmap(font))
