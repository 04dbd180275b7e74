"""`attncli scenarios new`: a valid, readable scenario with random weights, to run and then edit.

Numbers have two decimals so the file reads like a hand-made example; the same seed gives
the same file.
"""

from __future__ import annotations

import re

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
        f"name: {yaml_quoted(sentence[:40])}",
        f"description: random weights (seed {seed}), d_model = {d_model}, {heads} head(s)" + (f", {G} key/value head(s)" if heads != G else ""),
        f"sentence: {yaml_quoted(sentence)}",
        f"heads: {heads}",
    ]
    if heads != G:
        lines.append(f"kv_heads: {G}")
    lines.append("embeddings:  # one row per token: " + _yaml_inner(", ".join(tokens)[:60]))
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


# Characters a YAML reader takes as they are inside a double-quoted scalar: the printable set of
# YAML 1.1 (what PyYAML reads) less NEL, U+2028 and U+2029 (line breaks to it) and U+FEFF.
_SAFE = re.compile("[\t\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
_NAMED = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _yaml_inner(text: str) -> str:
    """The body of a YAML double-quoted scalar that reads back as `text`, for any Unicode (astral characters as they are)."""
    out = []
    for c in text:
        if c in _NAMED:
            out.append(_NAMED[c])
        elif _SAFE.fullmatch(c):
            out.append(c)
        elif ord(c) <= 0xFF:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(f"\\u{ord(c):04x}")  # BMP only here: astral characters are printable and written as they are
    return "".join(out)


def yaml_quoted(text: str) -> str:
    """`text` as a YAML double-quoted scalar: UTF-8 as it is, controls and line breaks escaped (no JSON surrogate pairs)."""
    return '"' + _yaml_inner(text) + '"'
