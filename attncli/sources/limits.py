"""Size limits, checked before anything large is read or allocated."""

from __future__ import annotations

from typing import NamedTuple


class Limits(NamedTuple):
    """How big a scenario may be. Teaching sizes (hundreds of tokens, d_model in the hundreds) fit easily."""

    max_bytes: int = 32 * 1024 * 1024  # the YAML file itself
    max_values: int = 2_000_000  # YAML values, counting each expansion of an alias ("billion laughs")
    max_cells: int = 16 * 1024 * 1024  # H·L·L attention cells: each stage is one float64 per cell
    max_depth: int = 32  # nesting of YAML lists and mappings
