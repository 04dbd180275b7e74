"""`attncli scenarios new`: a valid, readable scenario with random weights, to run and then edit.

Numbers have two decimals so the file reads like a hand-made example; the same seed gives
the same file.
"""

from __future__ import annotations

import json

import numpy as np

from attncli.errors import AttnError, option
from attncli.sources.yaml_scenario import split_sentence


def new_scenario(
    sentence: str, *, d_model: int, heads: int = 1, kv_heads: int | None = None, causal: bool = False, rope: bool = False, seed: int = 0
) -> str:
    """The YAML text of a new scenario."""
    tokens = split_sentence(sentence)
    if not tokens:
        raise AttnError("the sentence has no words", key="SENTENCE", expected="a sentence such as 'The cat sat.'")
    G = heads if kv_heads is None else kv_heads
    if d_model % heads:
        raise AttnError(f"d_model = {d_model} does not split into {heads} heads", key=option("d_model"), expected=f"a multiple of {heads}")
    if heads % G:
        raise AttnError(f"{option('kv_heads')} {G} does not divide {option('heads')} {heads}", key=option("kv_heads"), expected=f"a divisor of {heads}")
    d_k = d_model // heads
    if rope and d_k % 2:
        raise AttnError(f"RoPE needs an even d_k, but d_model / heads = {d_k}", key=option("rope"), expected="d_model a multiple of 2·heads")
    rng = np.random.default_rng(seed)

    def rows(n: int, m: int, scale: float) -> list[str]:
        values = np.round(rng.standard_normal((n, m)) * scale, 2) + 0.0  # (n, m), no -0.0
        return ["  - [" + ", ".join(f"{x:.2f}" for x in row) + "]" for row in values]

    lines = [
        f"name: {json.dumps(sentence[:40])}",
        f"description: random weights (seed {seed}), d_model = {d_model}, {heads} head(s)" + (f", {G} key/value head(s)" if heads != G else ""),
        f"sentence: {json.dumps(sentence)}",
        f"heads: {heads}",
    ]
    if heads != G:
        lines.append(f"kv_heads: {G}")
    lines.append("embeddings:  # one row per token: " + ", ".join(tokens)[:60])
    lines += rows(len(tokens), d_model, 1.0)
    weight_scale = 1 / np.sqrt(d_model)
    for name, columns in (("W_Q", heads * d_k), ("W_K", G * d_k), ("W_V", G * d_k)):
        lines.append(f"{name}:  # d_model × {columns}")
        lines += rows(d_model, columns, weight_scale)
    lines.append("scale: sqrt_dk")
    lines.append(f"mask: {'causal' if causal else 'none'}")
    if rope:
        lines.append("rope: true")
    lines.append("precision: 3")
    return "\n".join(lines) + "\n"
