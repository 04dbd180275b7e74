"""attncli: worked examples of transformer self-attention, computed exactly."""

__version__ = "0.1.0"
