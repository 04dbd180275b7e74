"""A checkpoint's RoPE read into core's Rope: inverse frequencies after the config's scaling, rotate-half as Hugging Face's Llama.

The rotation itself is core's (attncli.core.variants.positions), the same for a scenario and every layer of a checkpoint.
A partial rotary (GPT-NeoX/Pythia's rotary_pct, Phi's partial_rotary_factor, both read into RopeConfig.partial by
the config reader) turns the first r = int(head_dim · partial) coordinates of each head, with frequencies over r, as
transformers' `_compute_default_rope_parameters` has it (dim = head_dim · partial_rotary_factor).
"""

from __future__ import annotations

import math

import numpy as np

from attncli.core.variants import Rope
from attncli.errors import AttnError
from attncli.sources.checkpoints.config import RopeConfig


def rotary_dim(rope: RopeConfig, head_dim: int) -> int:
    """r = int(head_dim · partial): how many coordinates of each head RoPE turns (all of them unless the rotary is partial)."""
    r = int(head_dim * rope.partial)
    if r < 2 or r % 2:
        raise AttnError(
            f"partial_rotary_factor {rope.partial:g} of head_dim {head_dim} rotates {r} coordinates",
            key="partial_rotary_factor",
            expected="a fraction that leaves an even number of coordinates (RoPE turns pairs)",
        )
    return r


def inverse_frequencies(rope: RopeConfig, head_dim: int, length: int | None = None) -> np.ndarray:
    """(r/2,) θ^(−2i/r) over the rotated width r (head_dim unless partial), then the linear or llama3 scaling, in float64."""
    head_dim = rotary_dim(rope, head_dim)
    inv_freq = 1.0 / rope.theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)  # (r/2,)
    if rope.kind == "linear":
        return inv_freq / rope.factor
    if rope.kind == "llama3":
        assert rope.low_freq_factor is not None and rope.high_freq_factor is not None and rope.original_positions is not None
        low_wavelen = rope.original_positions / rope.low_freq_factor
        high_wavelen = rope.original_positions / rope.high_freq_factor
        wavelen = 2 * math.pi / inv_freq  # (d/2,)
        scaled = np.where(wavelen > low_wavelen, inv_freq / rope.factor, inv_freq)  # long waves slowed by the factor
        smooth = (rope.original_positions / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor)
        smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled  # between the two: a blend
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        return np.where(medium, smoothed, scaled)
    if rope.kind == "yarn":
        return _yarn(rope, inv_freq, head_dim)
    if rope.kind == "longrope":
        return np.asarray(inv_freq / _longrope_factors(rope, head_dim, length))
    return inv_freq


def _longrope_factors(rope: RopeConfig, r: int, length: int | None) -> np.ndarray:
    """(r/2,) longrope's divisors: the long factors once the sequence is longer than the original positions (as
    transformers' longrope_frequency_update switches on the last position + 1), the short ones otherwise."""
    assert rope.original_positions is not None
    long = length is not None and length > rope.original_positions
    factors = rope.long_factor if long else rope.short_factor
    if len(factors) != r // 2:
        raise AttnError(
            f"{'long' if long else 'short'}_factor has {len(factors)} numbers for {r // 2} rotary pairs",
            key="long_factor" if long else "short_factor",
            expected=f"{r // 2} numbers, one per rotary pair",
        )
    return np.asarray(factors, dtype=np.float64)


def _yarn(rope: RopeConfig, inv_freq: np.ndarray, dim: int) -> np.ndarray:
    """(r/2,) YaRN's blend, as transformers' _compute_yarn_parameters: pairs that turn more than beta_fast times over the
    original context keep their frequency, pairs turning fewer than beta_slow times are divided by the factor, and
    a linear ramp over the pair index blends the two between (ends rounded outwards unless truncate is false)."""
    assert rope.original_positions is not None

    def pair_turning(rotations: float) -> float:  # the pair index whose wave turns `rotations` times in the original context
        return dim * math.log(rope.original_positions / (rotations * 2 * math.pi)) / (2 * math.log(rope.theta))  # type: ignore[operator]

    low, high = pair_turning(rope.beta_fast), pair_turning(rope.beta_slow)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)  # (r/2,) 0: keep, 1: divide
    keep = 1.0 - ramp
    return np.asarray(inv_freq / rope.factor * (1.0 - keep) + inv_freq * keep)  # (r/2,)


def rope_spec(rope: RopeConfig, head_dim: int, length: int | None = None) -> Rope:
    """The RoPE of a config for heads of size head_dim; yarn and longrope also multiply cos and sin by their attention
    factor; longrope's frequencies depend on the sequence's `length` (without one: the short factors)."""
    inv_freq = np.ascontiguousarray(inverse_frequencies(rope, head_dim, length), dtype=np.float64)  # (d_k/2,)
    inv_freq.setflags(write=False)
    r = rotary_dim(rope, head_dim)
    return Rope(
        theta=rope.theta, style="half", inv_freq=inv_freq, scaling=rope.describe(), rotary_dim=r if r < head_dim else None,
        attention_factor=rope.yarn_attention_factor if rope.kind == "yarn"
        else rope.longrope_attention_factor if rope.kind == "longrope" else 1.0,
    )
