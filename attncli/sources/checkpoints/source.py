"""What the architecture modules read tensors from: a safetensors checkpoint folder or a GGUF file."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np


class TensorSource(Protocol):
    """Tensors under Hugging Face's names, in float64, with where they come from for messages."""

    folder: Path
    described_by: str  # the file named in messages about a missing tensor
    config_source: str  # what implies each tensor's shape: "config.json" or "the GGUF metadata"

    def has(self, name: str) -> bool: ...
    def shape(self, name: str) -> tuple[int, ...]: ...  # from the header alone, nothing read
    def read(self, name: str) -> np.ndarray: ...
    def read_rows(self, name: str, rows: Sequence[int]) -> np.ndarray: ...
    def row_blocks(self, name: str) -> Iterator[tuple[int, np.ndarray]]: ...  # (first row, rows) in float64, block by block
    def file_of(self, name: str) -> Path: ...
    def stored_dtype(self, name: str) -> str: ...
