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
