"""A deliberately naive attention, written with loops and the math module, to check the engine against.

It shares nothing with attncli.core.engine: no NumPy, no shift rule (it always subtracts the row
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
    """Every variant, from projected Q (L_q × H·d_k), K and V (L_k × G·d): {"weights": per head, "head_outputs": per head}."""
    L_q, L_k = len(Q_all), len(K_all)
    d_k = len(Q_all[0]) // heads
    d_v = len(V_all[0]) // kv_heads
    all_weights, outputs = [], []
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
    return {"weights": all_weights, "head_outputs": outputs}
