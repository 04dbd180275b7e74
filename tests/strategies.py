"""Hypothesis strategies the tests share: random scenario documents, matrices, logits and sentences.

One home, so that no test module imports another for its strategies, and a new variant joins
the random scenarios once. Each strategy draws exactly as it did in the module it came from
(tests/test_engine.py, test_variants.py, test_decode.py, test_online.py), so the examples
Hypothesis finds, and its database, stay the same.
"""

from __future__ import annotations

import json
import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays


def sentences(max_words: int = 12):
    """Lists of 1..max_words distinct plain words w0, w1, …: the tokens of a random scenario."""
    return st.integers(1, max_words).map(lambda n: [f"w{i}" for i in range(n)])


def matrix(rows: int, cols: int, bound: float = 3):
    """rows × cols nested lists of finite floats in [−bound, bound]."""
    finite = st.floats(min_value=-bound, max_value=bound, allow_nan=False, allow_infinity=False)
    return st.lists(st.lists(finite, min_size=cols, max_size=cols), min_size=rows, max_size=rows)


# -- scenario documents -------------------------------------------------------------------------


@st.composite
def scenarios(draw, max_tokens: int = 7):
    """A random scenario document (as a dict) and the parameters the reference needs."""
    L = draw(st.integers(1, max_tokens))
    d_model = draw(st.integers(1, 5))
    heads = draw(st.integers(1, 3))
    d_k = draw(st.integers(1, 3))
    d_v = draw(st.integers(1, 3))
    doc = {
        "tokens": [f"w{i}" for i in range(L)],
        "embeddings": draw(matrix(L, d_model, bound=4)),
        "heads": heads,
        "W_Q": draw(matrix(d_model, heads * d_k, bound=4)),
        "W_K": draw(matrix(d_model, heads * d_k, bound=4)),
        "W_V": draw(matrix(d_model, heads * d_v, bound=4)),
        "mask": draw(st.sampled_from(["none", "causal"])),
        "scale": draw(st.sampled_from(["sqrt_dk", "none", 0.5, 3.0])),
    }
    if draw(st.booleans()):
        doc["b_Q"] = draw(matrix(1, heads * d_k, bound=4))[0]
        doc["b_K"] = draw(matrix(1, heads * d_k, bound=4))[0]
        doc["b_V"] = draw(matrix(1, heads * d_v, bound=4))[0]
    if draw(st.booleans()):
        d_out = draw(st.integers(1, 4))
        doc["W_O"] = draw(matrix(heads * d_v, d_out, bound=4))
        if draw(st.booleans()):
            doc["b_O"] = draw(matrix(1, d_out, bound=4))[0]
    return doc


def divisor_of(doc) -> float:
    d_k = len(doc["W_Q"][0]) // doc["heads"]
    return {"sqrt_dk": math.sqrt(d_k), "none": 1.0}.get(doc["scale"], doc["scale"])


@st.composite
def variant_scenarios(draw):
    """A random scenario using any mix of cross-attention, direct Q/K/V, GQA, masks, bias, ALiBi and RoPE."""
    L_q = draw(st.integers(1, 6))
    cross = draw(st.booleans())
    L_k = draw(st.integers(1, 6)) if cross else L_q
    G = draw(st.integers(1, 2))
    heads = G * draw(st.integers(1, 2))
    d_k = 2 * draw(st.integers(1, 2))
    d_v = draw(st.integers(1, 3))
    doc: dict = {"tokens": [f"q{i}" for i in range(L_q)], "heads": heads, "kv_heads": G}
    if cross:
        doc["context"] = {"tokens": [f"k{i}" for i in range(L_k)]}
    if draw(st.booleans()):  # Q, K, V given directly
        doc["Q"], doc["K"], doc["V"] = draw(matrix(L_q, heads * d_k)), draw(matrix(L_k, G * d_k)), draw(matrix(L_k, G * d_v))
    else:
        d_model = draw(st.integers(1, 4))
        doc["embeddings"] = draw(matrix(L_q, d_model))
        if cross:
            doc["context"]["embeddings"] = draw(matrix(L_k, d_model))
        doc["W_Q"], doc["W_K"], doc["W_V"] = draw(matrix(d_model, heads * d_k)), draw(matrix(d_model, G * d_k)), draw(matrix(d_model, G * d_v))
    mask: dict = {}
    kind = draw(st.sampled_from(["none", "rules", "matrix"]))
    if kind == "rules":
        if L_q == L_k and draw(st.booleans()):
            mask["causal"] = True
        if draw(st.booleans()):
            mask["window"] = draw(st.integers(0, 3))
            mask["sinks"] = draw(st.integers(0, L_k))
        if draw(st.booleans()):
            mask["padding"] = draw(st.lists(st.integers(1, L_k), max_size=2, unique=True))
        doc["mask"] = mask
    elif kind == "matrix":
        mask["matrix"] = draw(st.lists(st.lists(st.integers(0, 1), min_size=L_k, max_size=L_k), min_size=L_q, max_size=L_q))
        doc["mask"] = mask["matrix"]
    if draw(st.booleans()):
        doc["bias"] = draw(matrix(L_q, L_k)) if draw(st.booleans()) else [draw(matrix(L_q, L_k)) for _ in range(heads)]
    if draw(st.booleans()):
        doc["alibi"] = True if draw(st.booleans()) else {"slopes": draw(st.lists(st.floats(0, 1), min_size=heads, max_size=heads))}
    if draw(st.booleans()):
        doc["rope"] = True if draw(st.booleans()) else {"theta": draw(st.sampled_from([100, 10000, 500000])), "style": draw(st.sampled_from(["half", "interleaved"]))}
        if doc["rope"] is not True and draw(st.booleans()):  # partial rotary (2 of d_k coordinates) and a position offset
            doc["rope"].update(rotary_dim=2, offset=draw(st.sampled_from([0, 1, 100])))
    doc["scale"] = draw(st.sampled_from(["sqrt_dk", "none", 2.0]))
    return doc, mask


@st.composite
def causal_documents(draw):
    """A random causal self-attention scenario with any mix of RoPE, GQA, window, sinks, padding, bias and ALiBi."""
    L = draw(st.integers(1, 7))
    G = draw(st.integers(1, 2))
    heads = G * draw(st.integers(1, 2))
    d_k, d_v = 2 * draw(st.integers(1, 2)), draw(st.integers(1, 3))
    doc: dict = {"tokens": [f"w{i}" for i in range(L)], "heads": heads, "kv_heads": G}
    if draw(st.booleans()):
        doc["Q"], doc["K"], doc["V"] = draw(matrix(L, heads * d_k)), draw(matrix(L, G * d_k)), draw(matrix(L, G * d_v))
    else:
        d_model = draw(st.integers(1, 4))
        doc["embeddings"] = draw(matrix(L, d_model))
        doc["W_Q"], doc["W_K"], doc["W_V"] = (
            draw(matrix(d_model, heads * d_k)),
            draw(matrix(d_model, G * d_k)),
            draw(matrix(d_model, G * d_v)),
        )
    if draw(st.booleans()):
        mask: object = {"causal": True}
        if draw(st.booleans()):
            mask["window"], mask["sinks"] = draw(st.integers(0, 3)), draw(st.integers(0, L))  # type: ignore[index]
        if draw(st.booleans()):
            mask["padding"] = draw(st.lists(st.integers(1, L), max_size=2, unique=True))  # type: ignore[index]
    else:  # an explicit lower-triangular matrix, with the diagonal
        rows = draw(st.lists(st.lists(st.integers(0, 1), min_size=L, max_size=L), min_size=L, max_size=L))
        mask = [[1 if j == i else (row[j] if j < i else 0) for j in range(L)] for i, row in enumerate(rows)]
    doc["mask"] = mask
    if draw(st.booleans()):
        doc["bias"] = draw(matrix(L, L))
    if draw(st.booleans()):
        doc["alibi"] = True
    if draw(st.booleans()):
        doc["rope"] = True if draw(st.booleans()) else {"theta": 100, "style": draw(st.sampled_from(["half", "interleaved"]))}
    doc["scale"] = draw(st.sampled_from(["sqrt_dk", "none", 2.0]))
    return json.dumps(doc)


@st.composite
def scenario_documents(draw):
    """A random scenario (none or causal mask, any scaling, biases) as a JSON document: the online softmax's inputs."""
    L, d_model = draw(st.integers(1, 7)), draw(st.integers(1, 4))
    heads, d_k, d_v = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    doc = {
        "tokens": [f"w{i}" for i in range(L)],
        "embeddings": draw(matrix(L, d_model)),
        "heads": heads,
        "W_Q": draw(matrix(d_model, heads * d_k)),
        "W_K": draw(matrix(d_model, heads * d_k)),
        "W_V": draw(matrix(d_model, heads * d_v)),
        "b_K": draw(matrix(1, heads * d_k))[0],
        "mask": draw(st.sampled_from(["none", "causal"])),
        "scale": draw(st.sampled_from(["sqrt_dk", "none", 0.25])),
    }
    return json.dumps(doc)


# -- the online softmax's inputs ----------------------------------------------------------------


@st.composite
def logits(draw, rows: int | None = None, spread: float = 30.0):
    """A (L_q, L_k) matrix of final logits (scores, a bias, an ALiBi term, −inf where hidden) and V (L_k, d_v)."""
    L_q = rows if rows is not None else draw(st.integers(1, 9))
    L_k = draw(st.integers(1, 24))
    d_v = draw(st.integers(1, 4))
    finite = st.floats(-spread, spread, allow_nan=False, allow_infinity=False)
    offset = draw(st.sampled_from([0.0, 1000.0, -1000.0]))  # ±1000: where e^x overflows or vanishes
    scores = offset + draw(arrays(np.float64, (L_q, L_k), elements=finite))
    if draw(st.booleans()):
        scores = scores + draw(arrays(np.float64, (L_q, L_k), elements=st.floats(-5, 5)))  # an additive bias
    if draw(st.booleans()):
        slope = draw(st.floats(0.01, 2.0))
        scores = scores - slope * np.abs(np.arange(L_q)[:, None] - np.arange(L_k)[None, :])  # ALiBi
    visible = draw(arrays(np.bool_, (L_q, L_k)))
    always = draw(arrays(np.int64, (L_q,), elements=st.integers(0, L_k - 1)))
    visible[np.arange(L_q), always] = True  # every query sees at least one key
    V = draw(arrays(np.float64, (L_k, d_v), elements=st.floats(-10, 10)))
    return np.where(visible, scores, -np.inf), V


# -- a quantised KV cache -----------------------------------------------------------------------


@st.composite
def int8_cache_documents(draw):
    """A causal scenario of Q, K and V given directly after an int8 KV cache: c cached tokens whose K and V are int8 codes
    (−128 … 127) with positive scales, one for the whole cache, one per row or one per group of columns (a group
    divides G·d), each as one matrix or one per key/value head."""
    H = draw(st.sampled_from([1, 2, 4]))
    G = draw(st.sampled_from([g for g in (1, 2, 4) if H % g == 0]))
    d_k, d_v = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    c, L = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    codes = lambda width: draw(st.lists(st.lists(st.integers(-128, 127), min_size=width, max_size=width), min_size=c, max_size=c))  # noqa: E731
    positive = st.floats(1e-4, 0.5, allow_nan=False, allow_infinity=False)

    def part(width: int) -> dict:
        stored = codes(G * width)
        per = draw(st.sampled_from(["cache", "row", "group"]))
        if per == "cache":
            scale: object = draw(positive)
        elif per == "row":
            scale = draw(st.lists(positive, min_size=c, max_size=c))
        else:
            n = draw(st.sampled_from([n for n in range(1, G * width + 1) if (G * width) % n == 0]))
            scale = draw(st.lists(st.lists(positive, min_size=n, max_size=n), min_size=c, max_size=c))
        if G > 1 and draw(st.booleans()):  # one matrix per key/value head
            stored = [[row[g * width : (g + 1) * width] for row in stored] for g in range(G)]
        return {"int8": stored, "scale": scale}

    return {
        "tokens": [f"w{i}" for i in range(L)],
        "heads": H,
        "kv_heads": G,
        "Q": draw(matrix(L, H * d_k)),
        "K": draw(matrix(L, G * d_k)),
        "V": draw(matrix(L, G * d_v)),
        "cache": {"tokens": [f"c{i}" for i in range(c)], "K": part(d_k), "V": part(d_v)},
        "mask": "causal",
        "scale": draw(st.sampled_from(["sqrt_dk", "none", 2.0])),
    }


# -- a score matrix given directly --------------------------------------------------------------


@st.composite
def given_score_documents(draw):
    """A scenario whose scores are given (one L × L matrix per head) with V: any scale (√d_k with d_k given beside them),
    mask none or causal, and sometimes soft-capping or a learned sink per head."""
    H = draw(st.sampled_from([1, 2, 3]))
    G = draw(st.sampled_from([g for g in (1, 2, 3) if H % g == 0]))
    L, d_v = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    scores = [draw(matrix(L, L, bound=6)) for _ in range(H)]
    scale = draw(st.sampled_from(["sqrt_dk", "none", 0.5, 3.0]))
    d_k = draw(st.integers(1, 64))
    doc = {
        "tokens": [f"w{i}" for i in range(L)],
        "heads": H,
        "kv_heads": G,
        "scores": {"S": scores, "d_k": d_k} if scale == "sqrt_dk" or draw(st.booleans()) else (scores if H > 1 or draw(st.booleans()) else scores[0]),
        "V": draw(matrix(L, G * d_v)),
        "mask": draw(st.sampled_from(["none", "causal"])),
        "scale": scale,
    }
    if draw(st.booleans()):
        doc["softcap"] = draw(st.sampled_from([1.0, 5.0, 30.0]))
    if draw(st.booleans()):
        doc["sink_logits"] = draw(st.lists(st.floats(-3, 3), min_size=H, max_size=H))
    return doc
