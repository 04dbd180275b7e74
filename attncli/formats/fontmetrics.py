"""How wide a text is when set in the bundled DejaVu Sans: the advance widths of its glyphs, from the font's own tables.

The SVG figures place boxes, labels and columns by these widths. A PNG is drawn in exactly these fonts
(pngout.py), so its text fits its boxes to the pixel; a browser draws the SVG in the reader's sans-serif,
which is seldom wider than DejaVu Sans (one of the widest), so there the text fits with room to spare.
Before, every character counted 0.6 em, and a token of capitals (WASHINGTON, or a run of W) ran out of
its box and over its neighbours. A character the fonts lack (CJK, emoji) counts 1 em when it is wide in
East Asian text, else 0.6 em; zero-width and combining characters count nothing.
"""

from __future__ import annotations

import functools
import re
import struct
import unicodedata
from pathlib import Path

FONTS = Path(__file__).parent / "fonts"
REGULAR, BOLD = "DejaVuSans.ttf", "DejaVuSans-Bold.ttf"
_ZERO_WIDTH = re.compile(r"[\u200b-\u200d\u2060\ufeff]")


def text_width(text: str, size: float, *, bold: bool = False) -> float:
    """How wide `text` is in px at `size` px, in DejaVu Sans (Bold for a bold title)."""
    em = _em_widths(BOLD if bold else REGULAR)
    width = 0.0
    for c in _ZERO_WIDTH.sub("", text):
        found = em.get(ord(c))
        if found is not None:
            width += found
        elif not unicodedata.combining(c):
            width += 1.0 if unicodedata.east_asian_width(c) in "WF" else 0.6
    return width * size


@functools.cache
def _em_widths(name: str) -> dict[int, float]:
    """{code point: its glyph's advance width in em} for every character the font draws."""
    font = (FONTS / name).read_bytes()
    tables = _tables(font)
    units_per_em = struct.unpack_from(">H", font, tables[b"head"] + 18)[0]
    metrics = struct.unpack_from(">H", font, tables[b"hhea"] + 34)[0]  # numberOfHMetrics: later glyphs take the last width
    advances = [struct.unpack_from(">H", font, tables[b"hmtx"] + 4 * n)[0] for n in range(metrics)]
    return {c: advances[min(glyph, metrics - 1)] / units_per_em for c, glyph in cmap(font).items()}


def cmap(font: bytes) -> dict[int, int]:
    """{code point: glyph} from a TrueType font's full-Unicode cmap subtable (platform 3, encoding 10, format 12), .notdef left out."""
    at_cmap = _tables(font)[b"cmap"]
    subtables = [struct.unpack_from(">HHI", font, at_cmap + 4 + 8 * n) for n in range(struct.unpack_from(">H", font, at_cmap + 2)[0])]
    at = next(at_cmap + offset for platform, encoding, offset in subtables
              if (platform, encoding) == (3, 10) and struct.unpack_from(">H", font, at_cmap + offset)[0] == 12)  # fmt: skip
    glyphs: dict[int, int] = {}
    for n in range(struct.unpack_from(">I", font, at + 12)[0]):
        start, end, glyph = struct.unpack_from(">III", font, at + 16 + 12 * n)  # start … end map to glyph, glyph + 1, …
        glyphs.update((c, glyph + c - start) for c in range(start, end + 1) if glyph + c - start)
    return glyphs


def _tables(font: bytes) -> dict[bytes, int]:
    """{table tag: its offset in the file}, from the font's table directory."""
    count = struct.unpack_from(">H", font, 4)[0]
    return {font[at : at + 4]: struct.unpack_from(">I", font, at + 8)[0] for at in range(12, 12 + 16 * count, 16)}
