"""The pieces that change attention beyond the textbook: masks, positions (RoPE) and score biases (ALiBi).

Each is a small frozen object that knows what it does to the numbers and how to say it in
words; the engine asks it for arrays, the walk-through and the renderers for sentences.
"""

from attncli.core.variants.biases import Alibi, ScoreBias, alibi_slopes
from attncli.core.variants.masks import Mask
from attncli.core.variants.positions import Rope

__all__ = ["Alibi", "Mask", "Rope", "ScoreBias", "alibi_slopes"]
