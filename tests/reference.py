"""A deliberately naive attention, written with loops and the math module, to check the engine against.

It shares nothing with attncli.engine: no NumPy, no shift rule (it always subtracts the row
maximum, the textbook way), no matrix products.
"""

from __future__ import annotations

import math


def matmul(A: list[list[float]], B: list[list[float]]) -> list[list[float]]:
    return [[sum(A[i][t] * B[t][j] for t in range(len(B))) for j in range(len(B[0]))] for i in range(len(A))]


def add_bias(A: list[list[float]], b: list[float] | None) -> list[list[float]]:
    return A if b is None else [[a + c for a, c in zip(row, b)] for row in A]


def columns(A: list[list[float]], start: int, stop: int) -> list[list[float]]:
    return [row[start:stop] for row in A]


def attention(
    X: list[list[float]],
    W_Q: list[list[float]],
    W_K: list[list[float]],
    W_V: list[list[float]],
    *,
    heads: int = 1,
    divisor: float = 1.0,
    causal: bool = False,
    b_Q: list[float] | None = None,
    b_K: list[float] | None = None,
    b_V: list[float] | None = None,
    W_O: list[list[float]] | None = None,
    b_O: list[float] | None = None,
) -> dict:
    """Returns {"weights": [per head (L, L)], "head_outputs": [per head (L, d_v)], "output": (L, d_out)}."""
    L = len(X)
    Q_all = add_bias(matmul(X, W_Q), b_Q)
    K_all = add_bias(matmul(X, W_K), b_K)
    V_all = add_bias(matmul(X, W_V), b_V)
    d_k = len(W_Q[0]) // heads
    d_v = len(W_V[0]) // heads
    all_weights, head_outputs = [], []
    for h in range(heads):
        Q = columns(Q_all, h * d_k, (h + 1) * d_k)
        K = columns(K_all, h * d_k, (h + 1) * d_k)
        V = columns(V_all, h * d_v, (h + 1) * d_v)
        weights = []
        for i in range(L):
            seen = range(i + 1) if causal else range(L)
            scores = {j: sum(Q[i][t] * K[j][t] for t in range(d_k)) / divisor for j in seen}
            biggest = max(scores.values())
            exps = {j: math.exp(s - biggest) for j, s in scores.items()}
            total = sum(exps.values())
            weights.append([exps[j] / total if j in exps else 0.0 for j in range(L)])
        output = [[sum(weights[i][j] * V[j][t] for j in range(L)) for t in range(d_v)] for i in range(L)]
        all_weights.append(weights)
        head_outputs.append(output)
    concat = [sum((head_outputs[h][i] for h in range(heads)), []) for i in range(L)]
    final = concat if W_O is None else matmul(concat, W_O)
    final = add_bias(final, b_O)
    return {"weights": all_weights, "head_outputs": head_outputs, "output": final}


def rotate(vector: list[float], position: int, theta: float, style: str) -> list[float]:
    """RoPE by hand: pair (i, i + d/2) ("half") or (2i, 2i + 1) ("interleaved"), turned by position·theta^(-2i/d)."""
    d = len(vector)
    out = list(vector)
    for i in range(d // 2):
        a, b = (i, i + d // 2) if style == "half" else (2 * i, 2 * i + 1)
        angle = position * theta ** (-2 * i / d)
        out[a] = vector[a] * math.cos(angle) - vector[b] * math.sin(angle)
        out[b] = vector[b] * math.cos(angle) + vector[a] * math.sin(angle)
    return out


def sees(i: int, j: int, mask: dict) -> bool:
    """Whether query i sees key j (both from 1) under {causal, window, sinks, padding} or an explicit 0/1 matrix."""
    if "matrix" in mask:
        return mask["matrix"][i - 1][j - 1] == 1
    if j in mask.get("padding", ()):
        return False
    if mask.get("causal") and j > i:
        return False
    window = mask.get("window")
    return window is None or abs(i - j) <= window or j <= mask.get("sinks", 0)


def variant_attention(
    Q_all: list[list[float]],
    K_all: list[list[float]],
    V_all: list[list[float]],
    *,
    heads: int,
    kv_heads: int,
    divisor: float,
    mask: dict,
    rope: tuple[float, str] | None = None,
    bias: list[list[list[float]]] | None = None,
    slopes: list[float] | None = None,
) -> dict:
    """Every variant, from projected Q (L_q × H·d_k), K and V (L_k × G·d).

    Returns {"weights", "head_outputs", "Q", "K", "V"}, each a list over the heads; Q and K as the
    head's dot products see them (rotated under RoPE), K and V those of the head's key/value head.
    """
    L_q, L_k = len(Q_all), len(K_all)
    d_k = len(Q_all[0]) // heads
    d_v = len(V_all[0]) // kv_heads
    all_weights, outputs, queries, keys, values = [], [], [], [], []
    for h in range(heads):
        g = h * kv_heads // heads
        Q = columns(Q_all, h * d_k, (h + 1) * d_k)
        K = columns(K_all, g * d_k, (g + 1) * d_k)
        V = columns(V_all, g * d_v, (g + 1) * d_v)
        if rope is not None:
            Q = [rotate(row, p, *rope) for p, row in enumerate(Q)]
            K = [rotate(row, p, *rope) for p, row in enumerate(K)]
        weights = []
        for i in range(L_q):
            logits = {}
            for j in range(L_k):
                if not sees(i + 1, j + 1, mask):
                    continue
                logit = sum(Q[i][t] * K[j][t] for t in range(d_k)) / divisor
                if bias is not None:
                    logit += bias[h if len(bias) > 1 else 0][i][j]
                if slopes is not None:
                    logit -= slopes[h] * ((i + 1) - (j + 1))
                logits[j] = logit
            biggest = max(logits.values())
            exps = {j: math.exp(x - biggest) for j, x in logits.items()}
            total = sum(exps.values())
            weights.append([exps[j] / total if j in exps else 0.0 for j in range(L_k)])
        all_weights.append(weights)
        outputs.append([[sum(weights[i][j] * V[j][t] for j in range(L_k)) for t in range(d_v)] for i in range(L_q)])
        queries.append(Q)
        keys.append(K)
        values.append(V)
    return {"weights": all_weights, "head_outputs": outputs, "Q": queries, "K": keys, "V": values}


def alibi_slopes(heads: int) -> list[float]:
    """ALiBi's slopes as Press et al. give them: 2^(−8k/n) for the largest power of two n ≤ heads, then every other of 2n."""
    n = 2 ** int(math.log2(heads))
    slopes = [2.0 ** (-8 * k / n) for k in range(1, n + 1)]
    return slopes + [2.0 ** (-8 * k / (2 * n)) for k in range(1, 2 * n + 1, 2)][: heads - n]


def mask_of(document: dict) -> dict:
    """A scenario document's `mask` in the form `sees` reads."""
    mask = document.get("mask", "none")
    if isinstance(mask, list):
        return {"matrix": mask}
    if isinstance(mask, str):
        return {"causal": True} if mask == "causal" else {}
    return dict(mask)


def document_attention(document: dict, mask: dict | None = None) -> dict:
    """`variant_attention` of a scenario document (tokens, embeddings and W_* or Q/K/V, heads, kv_heads, mask, scale,
    bias, alibi, rope), read by hand from the document; `mask` overrides the document's (in the form `sees` reads)."""
    if "Q" in document:
        Q, K, V = document["Q"], document["K"], document["V"]
    else:
        keys_from = document.get("context", {}).get("embeddings", document["embeddings"])
        Q = matmul(document["embeddings"], document["W_Q"])
        K, V = matmul(keys_from, document["W_K"]), matmul(keys_from, document["W_V"])
    heads = document.get("heads", 1)
    d_k = len(Q[0]) // heads
    scale = document.get("scale", "sqrt_dk")
    divisor = {"sqrt_dk": math.sqrt(d_k), "none": 1.0}.get(scale, scale) if isinstance(scale, str) else float(scale)
    rope = document.get("rope")
    if rope is True:
        rope = {"theta": 10000, "style": "half"}
    alibi = document.get("alibi")
    slopes = alibi_slopes(heads) if alibi is True else (alibi or {}).get("slopes")
    bias = document.get("bias")
    if bias is not None and not isinstance(bias[0][0], list):
        bias = [bias]
    return variant_attention(
        Q, K, V, heads=heads, kv_heads=document.get("kv_heads", heads), divisor=divisor,
        mask=mask_of(document) if mask is None else mask,
        rope=None if rope is None else (rope.get("theta", 10000), rope.get("style", "half")), bias=bias, slopes=slopes,
    )  # fmt: skip


def scenario_document(scenario, *, causal: bool = False) -> dict:
    """A loaded scenario's inputs (embeddings and weights or Q, K, V; the divisor; the mask's rules; RoPE; ALiBi) as a
    document `document_attention` reads, with the causal rule added when `causal` (what `decode` computes).
    Inputs only: nothing attncli computed."""
    s = scenario
    document: dict = {"tokens": list(s.tokens), "heads": s.heads, "kv_heads": s.G, "scale": s.scale.divisor}
    if s.X is None:
        document.update(Q=s.Q.tolist(), K=s.K.tolist(), V=s.V.tolist())
    else:
        document["embeddings"] = s.X.tolist()
        if s.X_kv is not None:
            document["context"] = {"embeddings": s.X_kv.tolist()}
        document.update(W_Q=s.W_Q.tolist(), W_K=s.W_K.tolist(), W_V=s.W_V.tolist())
    assert s.b_Q is None and s.b_K is None and s.b_V is None and s.bias is None  # no built-in has them
    if s.mask.matrix is not None:
        assert not causal
        document["mask"] = s.mask.matrix.astype(int).tolist()
    else:
        document["mask"] = {"causal": causal or s.mask.causal, "sinks": s.mask.sinks, "padding": list(s.mask.padding)}
        if s.mask.window is not None:
            document["mask"]["window"] = s.mask.window
    if s.rope is not None:
        document["rope"] = {"theta": s.rope.theta, "style": s.rope.style}
    if s.alibi is not None:
        document["alibi"] = {"slopes": list(s.alibi.slopes)}
    return document
