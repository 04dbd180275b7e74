"""`attncli scenarios new`: a valid, readable scenario with random weights, to run and then edit.

Numbers have two decimals so the file reads like a hand-made example; the same seed gives
the same file.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from attncli.core.variants import Mask
from attncli.core.variants.positions import MOST_OFFSET
from attncli.errors import AttnError, option, visible
from attncli.sources.limits import Limits
from attncli.sources.words import split_sentence


def new_scenario(
    sentence: str,
    *,
    d_model: int,
    heads: int = 1,
    kv_heads: int | None = None,
    d_k: int | None = None,
    causal: bool = False,
    window: int | None = None,
    sink_tokens: int | None = None,
    padding: tuple[int, ...] = (),
    rope: bool = False,
    rotary_fraction: float | None = None,
    rope_offset: int | None = None,
    qk_norm: bool = False,
    softcap: float | None = None,
    sink_logits: bool = False,
    mla: bool = False,
    latent: int | None = None,
    sharpness: float = 1.0,
    seed: int = 0,
) -> str:
    """The YAML text of a new scenario.

    The weights are drawn with standard deviation √(sharpness / d_model), so that with embeddings of
    unit spread a scaled score q·k/√d_k has a spread of about `sharpness`: 1 gives soft rows close to
    uniform, 3 to 5 a pattern a reader sees at once (a few keys take most of each row).

    The mechanisms of recent models, each written as its scenario key for the reader to edit:
    `rotary_fraction` and `rope_offset` (partial rotary, a first position; either turns RoPE on),
    `qk_norm` (RMSNorm of q and k with weights about √sharpness, since after the norm q and k have
    a root mean square of 1 and the weights alone set the scores' spread), `softcap` (Gemma 2's
    cap·tanh(s / cap)) and `sink_logits` (one learned sink logit per head, gpt-oss, drawn with the
    scaled scores' spread). Their numbers are drawn after the weights, so a seed's weights stay the same.

    `mla` (or a `latent` width d_c, which turns it on) writes multi-head latent attention (DeepSeek) instead of W_Q,
    W_K and W_V, at the built-in `mla` example's sizes by default: a latent of d_c = d_model / 2 numbers with its
    RMSNorm, each head's d_n = d_v = d_k (the head width without MLA) and a decoupled rotary part of d_r = d_k / 2
    (even, at least 2; DeepSeek-V3: 128 and 64), turned by RoPE in DeepSeek's interleaved pairs when RoPE is on.
    The weights reading X have spread √(sharpness / d_model), those reading the latent (rms 1 after its norm)
    √(sharpness / d_c), so the scores spread as without MLA.
    """
    tokens = split_sentence(sentence)
    if not tokens:
        raise AttnError("the sentence has no words", key="SENTENCE", expected="a sentence such as 'The cat sat.'")
    if not 0.01 <= sharpness <= 100:  # NaN fails this too (Click's range check lets it through): it would write nan weights
        raise AttnError(f"found {sharpness:g}", key=option("sharpness"), expected="a number from 0.01 to 100")
    G = heads if kv_heads is None else kv_heads
    if d_k is None and d_model % heads:
        raise AttnError(
            f"d_model = {d_model} does not split into {heads} heads", key=option("d_model"), expected=f"a multiple of {heads}, or a head width given with {option('d_k')}"
        )
    if heads % G:
        raise AttnError(f"{option('kv_heads')} {G} does not divide {option('heads')} {heads}", key=option("kv_heads"), expected=f"a divisor of {heads}")
    d_k = d_model // heads if d_k is None else d_k
    rope = rope or rotary_fraction is not None or rope_offset is not None
    mla = mla or latent is not None
    d_c, d_r = (d_model // 2 or 1) if latent is None else latent, max(2, 2 * (d_k // 4))  # MLA's latent and decoupled part
    if mla:
        refused = [(name, why) for name, given, why in (
            ("kv_heads", heads != G, "every head's keys and values come from the one latent"),
            ("qk_norm", qk_norm, "MLA normalises its latent, not each head's q and k"),
            ("rotary_fraction", rotary_fraction is not None, "RoPE turns MLA's decoupled part whole (its d_r numbers)"),
        ) if given]  # fmt: skip
        if refused:
            name, why = refused[0]
            raise AttnError(f"{option(name)} has no use with {option('mla')}: {why}", key=option(name), expected=f"{option('mla')} without it")
    if rope and d_k % 2 and not mla:  # (MLA's rotary part d_r is even whatever d_k is)
        raise AttnError(f"RoPE needs an even d_k, but d_k = {d_k}", key=option("rope"), expected=f"an even {option('d_k')}, or d_model a multiple of 2·heads")
    if rotary_fraction is not None:
        r = d_k * rotary_fraction
        if not 0 < rotary_fraction <= 1 or r != int(r) or int(r) % 2:  # NaN fails this too
            raise AttnError(f"{rotary_fraction:g} of d_k = {d_k} is {r:g} coordinate{'s' * (r != 1)}", key=option("rotary_fraction"),
                            expected=f"a fraction from 0 to 1 that leaves an even number of coordinates to turn, such as {2 / d_k:g}")  # fmt: skip
    if softcap is not None and not 0 < softcap < float("inf"):
        raise AttnError(f"found {softcap:g}", key=option("softcap"), expected="a positive number, the cap of cap·tanh(s / cap) (Gemma 2 uses 50)")
    if window is not None and window > 2**31:  # JSON carries the window: orjson writes no integer past 64 bits
        raise AttnError(f"found {window:,}", key=option("window"), expected=f"a window from 0 to {2**31:,} (one of the sentence's length or more sees every key)")
    if rope_offset is not None and rope_offset > MOST_OFFSET:  # the file would be written only for run to refuse it
        raise AttnError(f"found {rope_offset:,}", key=option("rope_offset"), expected=f"a position from 0 to {MOST_OFFSET:,}")
    if sink_tokens is not None and window is None:
        raise AttnError(f"{option('sink_tokens')} keeps the first keys seen beyond a window, but there is no window", key=option("sink_tokens"), expected=f"{option('window')} N as well")
    if sink_tokens is not None and sink_tokens > len(tokens):
        raise AttnError(f"{sink_tokens} sink keys, but the sentence has {len(tokens)} tokens", key=option("sink_tokens"), expected=f"from 0 to {len(tokens)}")
    outside = [p for p in padding if p > len(tokens)]
    if outside:
        raise AttnError(
            f"padding position {outside[0]} is beyond the sentence's {len(tokens)} tokens", key=option("padding"), expected=f"positions from 1 to {len(tokens)}"
        )
    if padding or window is not None:
        blind = np.flatnonzero(~Mask(causal=causal, window=window, sinks=sink_tokens or 0, padding=tuple(sorted(set(padding)))).visible(len(tokens), len(tokens)).any(axis=1))
        if blind.size:
            i = int(blind[0]) + 1
            raise AttnError(
                f"query {i} ({tokens[i - 1]!r}) would see no key: its window holds only padding",
                key=option("padding"),
                expected=f"padding that leaves every query at least one key (with {option('mask')} causal, never position 1)",
            )
    limits = Limits()  # what `run` reads by default: a file beyond them would be written only to be refused
    numbers = len(tokens) * d_model + d_model * (heads + 2 * G) * d_k  # embeddings, W_Q, W_K, W_V
    if mla:  # embeddings, W_DKV, W_KR, W_UK and W_UV, W_UQ and W_QR, the latent's norm
        numbers = len(tokens) * d_model + d_model * (d_c + d_r) + d_c * heads * 2 * d_k + d_model * heads * (d_k + d_r) + d_c
    if numbers + 32 > limits.max_values:  # 32: the file's other values (name, heads, mask, …)
        raise AttnError(
            f"the scenario would hold {numbers:,} numbers (embeddings and weights), more than the {limits.max_values:,} `run` reads",
            key=option("d_model"),
            expected=f"a smaller {option('d_model')}, {option('heads')} or {option('d_k')}, or a shorter sentence",
        )
    if heads * len(tokens) ** 2 > limits.max_cells:
        raise AttnError(
            f"{heads} head{'s' * (heads != 1)} × {len(tokens):,}² tokens is {heads * len(tokens) ** 2:,} attention cells, more than the {limits.max_cells:,} `run` computes",
            key="SENTENCE",
            expected="a shorter sentence or fewer heads",
        )
    rng = np.random.default_rng(seed)

    def rows(n: int, m: int, scale: float) -> list[str]:
        values = np.round(rng.standard_normal((n, m)) * scale, 2) + 0.0  # (n, m), no -0.0
        return ["  - [" + ", ".join(f"{x:.2f}" for x in row) + "]" for row in values]

    shape = f"d_model = {d_model}, {heads} head{'s' * (heads != 1)}" + (f" of width {d_k}" if d_k * heads != d_model else "")
    if mla:
        shape += f", multi-head latent attention (latent d_c = {d_c}, decoupled RoPE part d_r = {d_r})"
    lines = [
        f"name: {yaml_quoted(sentence[:40])}",
        f"description: random weights (seed {seed}{f', sharpness {sharpness:g}' if sharpness != 1 else ''}), {shape}"
        + (f", {G} key/value head{'s' * (G != 1)}" if heads != G else ""),
        f"sentence: {yaml_quoted(sentence)}",
        f"heads: {heads}",
    ]
    if heads != G:
        lines.append(f"kv_heads: {G}")
    lines.append("embeddings:  # one row per token: " + _yaml_inner(", ".join(tokens)[:60]))
    lines += rows(len(tokens), d_model, 1.0)
    weight_scale = float(np.sqrt(sharpness / d_model))
    if mla:
        lines += _mla_lines(rows, d_model, heads, d_k, d_c, d_r, weight_scale, float(np.sqrt(sharpness / d_c)))
    else:
        for name, columns in (("W_Q", heads * d_k), ("W_K", G * d_k), ("W_V", G * d_k)):
            lines.append(f"{name}:  # d_model × {columns}")
            lines += rows(d_model, columns, weight_scale)
    lines.append("scale: sqrt_dk")
    lines += _mask_lines(causal, window, sink_tokens, padding)
    if mla and rope:  # DeepSeek turns its decoupled part in interleaved pairs
        lines.append("rope:")
        lines.append("  style: interleaved  # DeepSeek's pairs (2i, 2i+1), on each head's last d_r numbers only")
        if rope_offset is not None:
            lines.append(f"  offset: {rope_offset}  # the first token's position (counted from 0), as after a prefix")
    elif rotary_fraction is not None or rope_offset is not None:
        lines.append("rope:")
        if rotary_fraction is not None:
            lines.append(f"  fraction: {rotary_fraction:g}  # partial rotary: only the first {int(d_k * rotary_fraction)} of each head's {d_k} coordinates turn")
        if rope_offset is not None:
            lines.append(f"  offset: {rope_offset}  # the first token's position (counted from 0), as after a prefix")
    elif rope:
        lines.append("rope: true")
    if qk_norm:  # weights about √sharpness: after the norm q and k have rms 1, so q̂·k̂/√d_k spreads by about w_q·w_k
        strength = float(np.sqrt(sharpness))
        lines += ["qk_norm:  # RMSNorm of each head's q and k before RoPE (Qwen3, Gemma 3): x / √(mean(x²) + eps) · w", "  eps: 1.0e-6"]
        for name in ("q_weight", "k_weight"):
            weight = np.round(strength * (1 + 0.1 * rng.standard_normal(d_k)), 2) + 0.0  # (d_k,)
            lines.append(f"  {name}: [" + ", ".join(f"{w:.2f}" for w in weight) + "]  # d_k numbers, shared by every head")
    if softcap is not None:
        lines.append(f"softcap: {softcap:g}  # Gemma 2: each scaled score s becomes cap·tanh(s / cap)")
    if sink_logits:
        logits = np.round(sharpness * rng.standard_normal(heads), 2) + 0.0  # (H,)
        lines.append("sink_logits: [" + ", ".join(f"{x:.2f}" for x in logits) + "]  # one learned logit per head joins each softmax's sum (gpt-oss)")
    lines.append("precision: 3")
    return "\n".join(lines) + "\n"


def _mla_lines(rows: Callable[[int, int, float], list[str]], d_model: int, heads: int, d_k: int, d_c: int, d_r: int, from_x: float,
               from_latent: float) -> list[str]:
    """`mla:` the built-in example's keys, drawn in its order: the latent and its norm, the up-projections, the shared rotary key, the queries."""
    lines = ["mla:  # multi-head latent attention (DeepSeek): keys and values from one latent per token, instead of W_Q, W_K, W_V",
             f"  W_DKV:  # d_model × d_c = {d_model} × {d_c}: down to the latent, the cache of a token with k_R"]  # fmt: skip
    lines += ["  " + row for row in rows(d_model, d_c, from_x)]
    lines.append("  kv_norm: {weight: [" + ", ".join(["1.00"] * d_c) + "], eps: 1.0e-6}  # RMSNorm of the latent")
    for name, columns, what in (("W_UK", heads * d_k, "d_n"), ("W_UV", heads * d_k, "d_v")):
        lines.append(f"  {name}:  # d_c × (H·{what}) = {d_c} × {columns}" + (": head 1's columns, then head 2's …" if heads > 1 else ""))
        lines += ["  " + row for row in rows(d_c, columns, from_latent)]
    lines.append(f"  W_KR:  # d_model × d_r = {d_model} × {d_r}: one rotary key per token, shared by every head")
    lines += ["  " + row for row in rows(d_model, d_r, from_x)]
    for name, columns, what in (("W_UQ", heads * d_k, "d_n"), ("W_QR", heads * d_r, "d_r")):
        lines.append(f"  {name}:  # d_model × (H·{what}) = {d_model} × {columns}")
        lines += ["  " + row for row in rows(d_model, columns, from_x)]
    return lines


def _mask_lines(causal: bool, window: int | None, sink_tokens: int | None, padding: tuple[int, ...]) -> list[str]:
    """`mask:` as a word when it is one, else as the mapping of rules the scenario reader takes."""
    if window is None and not padding:
        return [f"mask: {'causal' if causal else 'none'}"]
    rules = [f"  causal: {'true' if causal else 'false'}"]
    if window is not None:
        rules.append(f"  window: {window}  # query i sees key j only when |i - j| <= {window}")
    if sink_tokens is not None:
        rules.append(f"  sinks: {sink_tokens}  # " + ("key 1 is" if sink_tokens == 1 else f"keys 1..{sink_tokens} are") + " seen whatever the window")
    if padding:
        rules.append(f"  padding: [{', '.join(str(p) for p in sorted(set(padding)))}]  # hidden from every query")
    return ["mask:", *rules]


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
        elif _SAFE.fullmatch(c) and visible(c) == c:  # bidi controls too: an editor would reorder the line around them
            out.append(c)
        elif ord(c) <= 0xFF:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(f"\\u{ord(c):04x}")  # BMP only here: astral characters are printable and written as they are
    return "".join(out)


def yaml_quoted(text: str) -> str:
    """`text` as a YAML double-quoted scalar: UTF-8 as it is, controls and line breaks escaped (no JSON surrogate pairs)."""
    return '"' + _yaml_inner(text) + '"'
