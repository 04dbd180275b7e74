"""Rotary position embeddings as Hugging Face's Llama applies them: inverse frequencies after scaling, rotate-half."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attncli.sources.checkpoints.config import RopeConfig


@dataclass(frozen=True, eq=False)
class RopeSpec:
    """How q and k are rotated: the pair i of a head turns by position·inv_freq[i]."""

    theta: float
    inv_freq: np.ndarray  # (d_k/2,) after any scaling, float64
    style: str  # "half": dimension i pairs with i + d_k/2 (rotate-half, as HF llama)
    scaling: str | None  # e.g. "llama3 (factor 8, original 8192 positions)"
    attention_scaling: float  # multiplies cos and sin; 1.0 unless the scaling type says otherwise


def inverse_frequencies(rope: RopeConfig, head_dim: int) -> np.ndarray:
    """(head_dim/2,) θ^(−2i/d), then the linear or llama3 scaling, in float64."""
    inv_freq = 1.0 / rope.theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)  # (d/2,)
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
    return inv_freq


def rope_spec(rope: RopeConfig, head_dim: int) -> RopeSpec:
    """The RoPE of a config for heads of size head_dim."""
    return RopeSpec(
        theta=rope.theta,
        inv_freq=inverse_frequencies(rope, head_dim),
        style="half",
        scaling=rope.describe(),
        attention_scaling=1.0,  # only yarn and longrope change it, and attncli refuses those
    )


def rotate(x: np.ndarray, spec: RopeSpec) -> np.ndarray:
    """(..., L, d_k) rotated by positions 0 … L−1: x·cos + rotate_half(x)·sin."""
    L, d_k = x.shape[-2], x.shape[-1]
    angles = np.arange(L, dtype=np.float64)[:, None] * spec.inv_freq[None, :]  # (L, d_k/2)
    angles = np.concatenate([angles, angles], axis=-1)  # (L, d_k)
    cos, sin = np.cos(angles) * spec.attention_scaling, np.sin(angles) * spec.attention_scaling
    half = d_k // 2
    rotated_half = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)  # (..., L, d_k)
    rotated: np.ndarray = x * cos + rotated_half * sin
    return rotated
