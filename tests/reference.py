"""A deliberately naive attention, written with loops and the math module, to check the engine against.

It shares nothing with attncli.core.engine: no NumPy, no shift rule (it always subtracts the row
maximum, the textbook way), no matrix products.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from attncli.core.variants import Alibi, Mla, Rope, ScoreBias


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


def rope_rows(rows: list[list[float]], rope: tuple[float, str] | dict) -> list[list[float]]:
    """Row p (from 0) of one head rotated: `rope` is (theta, style) for the whole row, or a scenario's rope mapping with
    fraction or rotary_dim (partial), offset, or given angles or cos/sin rows (rope_angles, rotate_by_angles, rotate_by_table)."""
    if isinstance(rope, tuple):
        return [rotate(row, p, *rope) for p, row in enumerate(rows)]
    style, out = rope.get("style", "half"), []
    for p, row in enumerate(rows):
        if "cos" in rope:
            out.append(rotate_by_table(row, rope["cos"][p], rope["sin"][p], style))
            continue
        r = rope.get("rotary_dim") or round(len(row) * rope.get("fraction", 1))
        angles = rope["angles"][p] if "angles" in rope else rope_angles(p, r, rope.get("theta", 10000), offset=rope.get("offset", 0))
        out.append(rotate_by_angles(row, angles, style))
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
    rope: tuple[float, str] | dict | None = None,
    bias: list[list[list[float]]] | None = None,
    slopes: list[float] | None = None,
) -> dict:
    """Every variant, from projected Q (L_q × H·d_k), K and V (L_k × G·d).

    Returns {"weights", "logits", "head_outputs", "Q", "K", "V"}, each a list over the heads (logits: what the softmax
    sees, −inf where hidden); Q and K as the head's dot products see them (normed and rotated), K and V those of the
    head's key/value head.
    """
    L_q, L_k = len(Q_all), len(K_all)
    d_k = len(Q_all[0]) // heads
    d_v = len(V_all[0]) // kv_heads
    all_weights, all_logits, outputs, queries, keys, values = [], [], [], [], [], []
    for h in range(heads):
        g = h * kv_heads // heads
        Q = columns(Q_all, h * d_k, (h + 1) * d_k)
        K = columns(K_all, g * d_k, (g + 1) * d_k)
        V = columns(V_all, g * d_v, (g + 1) * d_v)
        if rope is not None:
            Q, K = rope_rows(Q, rope), rope_rows(K, rope)
        weights, head_logits = [], []
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
            head_logits.append([logits.get(j, -math.inf) for j in range(L_k)])
        all_weights.append(weights)
        all_logits.append(head_logits)
        outputs.append([[sum(weights[i][j] * V[j][t] for j in range(L_k)) for t in range(d_v)] for i in range(L_q)])
        queries.append(Q)
        keys.append(K)
        values.append(V)
    return {"weights": all_weights, "logits": all_logits, "head_outputs": outputs, "Q": queries, "K": keys, "V": values}

# ---------------------------------------------------------------- the mechanisms of 2024–26 models (issue 20)
# Each function below is one mechanism, by hand, with loops and the math module; a row is a list of floats,
# a matrix a list of rows. Positions count from 0 here, as in the papers' formulas.


def rms_norm(vector: list[float], weight: list[float], eps: float, *, offset: float = 0.0) -> list[float]:
    """RMSNorm, x / √(mean(x²) + ε) · (offset + w): Zhang & Sennrich, "Root Mean Square Layer Normalization"
    (NeurIPS 2019), eq. 4; offset = 1 is Gemma's (1 + w) form (transformers' Gemma2RMSNorm, Gemma3RMSNorm)."""
    mean_square = sum(x * x for x in vector) / len(vector)
    inverse = 1.0 / math.sqrt(mean_square + eps)
    return [x * inverse * (offset + w) for x, w in zip(vector, weight)]


def qk_norm_per_head(rows: list[list[float]], heads: int, weight: list[float], eps: float, *, offset: float = 0.0) -> list[list[float]]:
    """QK-norm as Qwen3 and Gemma 3 do it: RMSNorm of each head's slice (d_k) of each projected row (H·d_k),
    one weight of length d_k shared by all heads, before RoPE. Sources: Qwen3 Technical Report (arXiv:2505.09388)
    §2 "QK-Norm"; transformers' Qwen3Attention (q_norm, k_norm applied to the (…, heads, head_dim) view)."""
    d_k = len(rows[0]) // heads
    out = []
    for row in rows:
        normed: list[float] = []
        for h in range(heads):
            normed += rms_norm(row[h * d_k : (h + 1) * d_k], weight, eps, offset=offset)
        out.append(normed)
    return out


def qk_norm_whole(rows: list[list[float]], weight: list[float], eps: float) -> list[list[float]]:
    """QK-norm as OLMo 2 does it: one RMSNorm over the whole projection (H·d_k, or G·d_k for keys) before the
    split into heads. Sources: OLMo et al., "2 OLMo 2 Furious" (arXiv:2501.00656) §3.1; transformers'
    Olmo2Attention (q_norm, k_norm sized num_heads·head_dim, applied to q_proj(x) and k_proj(x))."""
    return [rms_norm(row, weight, eps) for row in rows]


def soft_cap(score: float, cap: float) -> float:
    """Logit soft-capping, cap · tanh(score / cap): Gemma Team, "Gemma 2" (arXiv:2408.00118) §2, attention
    logits capped at 50; transformers' Gemma2 eager_attention_forward (after scaling, before the mask)."""
    return cap * math.tanh(score / cap)


def rope_angles(position: int, rotary_dim: int, theta: float, *, offset: int = 0) -> list[float]:
    """The angle of each of the rotary_dim / 2 pairs at a position: (offset + position) · θ^(−2i / rotary_dim).
    Su et al., "RoFormer" (arXiv:2104.09864) eq. 15; with a partial rotary the exponent's denominator is the
    rotated width, as in transformers' default RoPE init (dim = head_dim · partial_rotary_factor)."""
    return [(offset + position) * theta ** (-2 * i / rotary_dim) for i in range(rotary_dim // 2)]


def rotate_by_angles(vector: list[float], angles: list[float], style: str) -> list[float]:
    """RoPE on the first 2·len(angles) dimensions only, the rest passed through (partial rotary: GPT-NeoX
    rotary_pct, Phi partial_rotary_factor, DeepSeek's decoupled part). Pairs (i, i + r/2) for "half"
    (GPT-NeoX's rotate_half) or (2i, 2i + 1) for "interleaved" (RoFormer, GPT-J), r the rotated width."""
    r = 2 * len(angles)
    out = list(vector)
    for i, angle in enumerate(angles):
        a, b = (i, i + r // 2) if style == "half" else (2 * i, 2 * i + 1)
        out[a] = vector[a] * math.cos(angle) - vector[b] * math.sin(angle)
        out[b] = vector[b] * math.cos(angle) + vector[a] * math.sin(angle)
    return out


def rotate_by_table(vector: list[float], cos: list[float], sin: list[float], style: str = "half") -> list[float]:
    """RoPE from a given cos/sin table row, one entry per rotated dimension (length r ≤ d), as transformers
    applies it: x·cos + rotate_half(x)·sin on the first r dimensions (style "half"), or the same with the
    pairs (2i, 2i + 1) ("interleaved"); dimensions past r pass through."""
    r = len(cos)
    out = list(vector)
    for t in range(r):
        if style == "half":
            partner = vector[t + r // 2] * -1.0 if t < r // 2 else vector[t - r // 2]
        else:
            partner = -vector[t + 1] if t % 2 == 0 else vector[t - 1]
        out[t] = vector[t] * cos[t] + partner * sin[t]
    return out


def softmax_with_sink(logits: dict[int, float], sink: float | None) -> tuple[dict[int, float], float]:
    """Softmax over the seen keys' logits with an optional learned sink logit in the denominator only:
    w_j = e^{s_j} / (Σ_k e^{s_k} + e^{sink}); returns (weights, weight the sink took). Source: OpenAI,
    "gpt-oss-120b & gpt-oss-20b Model Card" (arXiv:2508.10925) §2.1 "learned bias in the denominator";
    transformers' GptOss eager_attention_forward (sinks concatenated as one more column, dropped after softmax)."""
    terms = list(logits.values()) + ([] if sink is None else [sink])
    biggest = max(terms)
    exps = {j: math.exp(s - biggest) for j, s in logits.items()}
    sink_exp = 0.0 if sink is None else math.exp(sink - biggest)
    total = sum(exps.values()) + sink_exp
    return {j: e / total for j, e in exps.items()}, sink_exp / total


def head_attention(
    Q: list[list[float]],
    K: list[list[float]],
    V: list[list[float]],
    *,
    scale: float,
    sees: Callable[[int, int], bool] | None = None,
    cap: float | None = None,
    sink: float | None = None,
) -> dict:
    """One head from its own q, k, v rows (already normed and rotated): logit = scale · q·k, soft-capped
    (before the mask, as Gemma 2), masked by sees(i, j) (0-based; None sees everything), softmax with the
    optional sink. Returns {"logits", "weights", "sink_weights", "output"}."""
    L_q, L_k, d_v = len(Q), len(K), len(V[0])
    all_logits, weights, sink_weights = [], [], []
    for i in range(L_q):
        row = [scale * sum(a * b for a, b in zip(Q[i], K[j])) for j in range(L_k)]
        if cap is not None:
            row = [soft_cap(s, cap) for s in row]
        all_logits.append(row)
        seen = {j: row[j] for j in range(L_k) if sees is None or sees(i, j)}
        w, taken = softmax_with_sink(seen, sink)
        weights.append([w.get(j, 0.0) for j in range(L_k)])
        sink_weights.append(taken)
    output = [[sum(weights[i][j] * V[j][t] for j in range(L_k)) for t in range(d_v)] for i in range(L_q)]
    return {"logits": all_logits, "weights": weights, "sink_weights": sink_weights, "output": output}


def causal_window(window: int | None) -> Callable[[int, int], bool]:
    """Causal mask with an optional window counted as transformers counts `sliding_window`: query i sees key j
    when j ≤ i and i − j < window (the query itself included, so window keys at most)."""
    return lambda i, j: j <= i and (window is None or i - j < window)


def layer_windows(layer_types: list[str], sliding_window: int) -> list[int | None]:
    """Local and global layers: the window of each layer from a config's layer_types ("sliding_attention" or
    "full_attention"), None for full. Gemma 2 alternates 1:1 (Gemma 2 report §2), Gemma 3 has five local
    layers per global one (Gemma 3 report, arXiv:2503.19786, §2), gpt-oss alternates banded and dense."""
    return [sliding_window if kind == "sliding_attention" else None for kind in layer_types]


def decode_from_cache(
    q_rows: list[list[float]],
    K_cache: list[list[float]],
    V_cache: list[list[float]],
    K_new: list[list[float]],
    V_new: list[list[float]],
    *,
    scale: float,
) -> dict:
    """Decoding with keys and values already cached: new query n (0-based) sits at position len(cache) + n and
    sees every cached key and the new keys up to itself (prefix caching, vLLM's paged attention: Kwon et al.,
    SOSP 2023, §4.1). Returns head_attention's dict over the concatenated keys."""
    P = len(K_cache)
    return head_attention(q_rows, K_cache + K_new, V_cache + V_new, scale=scale, sees=lambda i, j: j <= P + i)


def mla(
    X: list[list[float]],
    *,
    heads: int,
    W_q: list[list[float]],
    W_dkv: list[list[float]],
    kv_norm: tuple[list[float], float],
    W_ukv: list[list[float]],
    nope: int,
    rope_dim: int,
    v_dim: int,
    theta: float,
    style: str,
    scale: float,
    absorbed: bool,
) -> dict:
    """Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434, §2.1, eqs. 9–19), causal, both ways.

    q_h = (X W_q)_h = [q_nope | q_rope] per head (nope + rope_dim); the down-projection X W_dkv gives the
    latent c (kv_lora_rank, then RMSNorm with kv_norm's weight and ε, as DeepSeek's kv_a_layernorm) and one
    shared k_rope (rope_dim) per token; W_ukv expands c into [k_nope | v] per head (nope + v_dim).
    expanded: k_h = [W_uk,h c | RoPE(k_rope)], scores q_h·k_h, output Σ w v_h.
    absorbed (§2.1.3 "absorb W^UK into W^Q and W^UV into W^O"): scores (W_uk,hᵀ q_nope)·c + RoPE(q_rope)·RoPE(k_rope),
    output W_uv,h (Σ w c): only c and k_rope are cached. Returns {"weights", "head_outputs", "cache_per_token"}.
    """
    L = len(X)
    q_all = matmul(X, W_q)
    down = matmul(X, W_dkv)
    rank = len(down[0]) - rope_dim
    latent = [rms_norm(row[:rank], kv_norm[0], kv_norm[1]) for row in down]
    k_rope = [rotate_by_angles(row[rank:], rope_angles(p, rope_dim, theta), style) for p, row in enumerate(down)]
    width = nope + v_dim
    all_weights, outputs = [], []
    for h in range(heads):
        q_h = [row[h * (nope + rope_dim) : (h + 1) * (nope + rope_dim)] for row in q_all]
        q_nope = [row[:nope] for row in q_h]
        q_rope = [rotate_by_angles(row[nope:], rope_angles(p, rope_dim, theta), style) for p, row in enumerate(q_h)]
        W_uk = [row[h * width : h * width + nope] for row in W_ukv]  # (rank, nope)
        W_uv = [row[h * width + nope : (h + 1) * width] for row in W_ukv]  # (rank, v_dim)
        if not absorbed:
            k_nope = matmul(latent, W_uk)
            v = matmul(latent, W_uv)
            result = head_attention(
                [a + b for a, b in zip(q_nope, q_rope)], [a + b for a, b in zip(k_nope, k_rope)], v,
                scale=scale, sees=causal_window(None),
            )  # fmt: skip
            all_weights.append(result["weights"])
            outputs.append(result["output"])
            continue
        q_latent = [[sum(W_uk[r][t] * q[t] for t in range(nope)) for r in range(rank)] for q in q_nope]  # W_ukᵀ q
        weights = []
        for i in range(L):
            logits = {
                j: scale * (sum(a * b for a, b in zip(q_latent[i], latent[j])) + sum(a * b for a, b in zip(q_rope[i], k_rope[j])))
                for j in range(i + 1)
            }
            w, _ = softmax_with_sink(logits, None)
            weights.append([w.get(j, 0.0) for j in range(L)])
        mixed = [[sum(weights[i][j] * latent[j][r] for j in range(L)) for r in range(rank)] for i in range(L)]  # Σ w c
        all_weights.append(weights)
        outputs.append(matmul(mixed, W_uv))
    return {"weights": all_weights, "head_outputs": outputs, "cache_per_token": rank + rope_dim if absorbed else heads * (nope + rope_dim + v_dim)}


def elu_plus_one(x: float) -> float:
    """φ(x) = elu(x) + 1: Katharopoulos et al., "Transformers are RNNs" (ICML 2020), eq. 7."""
    return x + 1.0 if x > 0 else math.exp(x)


def linear_attention(
    Q: list[list[float]], K: list[list[float]], V: list[list[float]], *, causal: bool, feature: Callable[[float], float] = elu_plus_one
) -> list[list[float]]:
    """Attention without softmax (Katharopoulos et al. 2020, eq. 4 and, causal, eq. 9):
    out_i = Σ_j (φ(q_i)·φ(k_j)) v_j / Σ_j φ(q_i)·φ(k_j), j over all keys or j ≤ i."""
    phi_q = [[feature(x) for x in row] for row in Q]
    phi_k = [[feature(x) for x in row] for row in K]
    out = []
    for i, q in enumerate(phi_q):
        keys = range(i + 1) if causal else range(len(K))
        sims = {j: sum(a * b for a, b in zip(q, phi_k[j])) for j in keys}
        total = sum(sims.values())
        out.append([sum(sims[j] * V[j][t] for j in keys) / total for t in range(len(V[0]))])
    return out


def retention(Q: list[list[float]], K: list[list[float]], V: list[list[float]], gamma: float) -> dict:
    """Retention's parallel form (Sun et al., "Retentive Network", arXiv:2307.08621, eq. 5, without xPos and
    GroupNorm): out = (Q Kᵀ ⊙ D) V with the decay mask D_ij = γ^(i−j) for j ≤ i, 0 above the diagonal.
    Returns {"mask": D, "scores": QKᵀ ⊙ D, "output"}."""
    L = len(Q)
    decay = [[gamma ** (i - j) if j <= i else 0.0 for j in range(L)] for i in range(L)]
    scores = [[decay[i][j] * sum(a * b for a, b in zip(Q[i], K[j])) for j in range(L)] for i in range(L)]
    output = [[sum(scores[i][j] * V[j][t] for j in range(L)) for t in range(len(V[0]))] for i in range(L)]
    return {"mask": decay, "scores": scores, "output": output}


def retention_recurrent(Q: list[list[float]], K: list[list[float]], V: list[list[float]], gamma: float) -> list[list[float]]:
    """Retention's recurrent form (Sun et al. 2023, eq. 6): S_n = γ S_{n−1} + k_nᵀ v_n, out_n = q_n S_n."""
    d_k, d_v = len(K[0]), len(V[0])
    state = [[0.0] * d_v for _ in range(d_k)]
    out = []
    for q, k, v in zip(Q, K, V):
        state = [[gamma * state[a][b] + k[a] * v[b] for b in range(d_v)] for a in range(d_k)]
        out.append([sum(q[a] * state[a][b] for a in range(d_k)) for b in range(d_v)])
    return out

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
    if document.get("qk_norm"):  # before RoPE: each head's slice (Qwen3, Gemma 3) or the whole projection (OLMo 2)
        Q, K = document_qk_norm(document["qk_norm"], Q, K, heads, document.get("kv_heads", heads), d_k)
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
        rope=None if rope is None else rope if set(rope) - {"theta", "style"} else (rope.get("theta", 10000), rope.get("style", "half")),
        bias=bias, slopes=slopes,
    )  # fmt: skip


def document_qk_norm(norm: dict | bool, Q: list[list[float]], K: list[list[float]], heads: int, kv_heads: int, d_k: int) -> tuple[list, list]:
    """A document's `qk_norm` (true, or {over, form, eps, q_weight, k_weight}) applied to its projected Q and K, by hand."""
    norm = {} if norm is True else dict(norm)  # type: ignore[arg-type]
    over, offset, eps = norm.get("over", "head"), 1.0 if norm.get("form") == "1+w" else 0.0, norm.get("eps", 1e-6)
    out = []
    for rows, count, key in ((Q, heads, "q_weight"), (K, kv_heads, "k_weight")):
        length = d_k * (count if over == "whole" else 1)
        weight = norm.get(key, [0.0 if offset else 1.0] * length)
        if over == "whole":
            out.append([rms_norm(row, weight, eps, offset=offset) for row in rows])
        else:
            out.append(qk_norm_per_head(rows, count, weight, eps, offset=offset))
    return out[0], out[1]


def scenario_document(scenario, *, causal: bool = False) -> dict:
    """A loaded scenario's inputs (embeddings and weights or Q, K, V; the divisor; the mask's rules; RoPE; ALiBi) as a
    document `document_attention` reads, with the causal rule added when `causal` (what `decode` computes).
    Inputs only: nothing attncli computed."""
    s = scenario
    document: dict = {"tokens": list(s.tokens), "heads": s.heads, "kv_heads": s.G, "scale": s.scale.divisor}
    if s.variant(Mla) is not None:  # latent attention: each head's q, k, v by hand (RoPE on the decoupled part done here)
        document.update(zip("QKV", mla_qkv(s)))
    elif s.X is None:
        document.update(Q=s.Q.tolist(), K=s.K.tolist(), V=s.V.tolist())
    else:
        document["embeddings"] = s.X.tolist()
        if s.X_kv is not None:
            document["context"] = {"embeddings": s.X_kv.tolist()}
        document.update(W_Q=s.W_Q.tolist(), W_K=s.W_K.tolist(), W_V=s.W_V.tolist())
    assert s.b_Q is None and s.b_K is None and s.b_V is None and s.variant(ScoreBias) is None  # no built-in has them
    if s.mask.matrix is not None:
        assert not causal
        document["mask"] = s.mask.matrix.astype(int).tolist()
    else:
        document["mask"] = {"causal": causal or s.mask.causal, "sinks": s.mask.sinks, "padding": list(s.mask.padding)}
        if s.mask.window is not None:
            document["mask"]["window"] = s.mask.window
    rope = s.variant(Rope)
    if rope is not None and s.variant(Mla) is None:
        document["rope"] = {"theta": rope.theta, "style": rope.style}
        given = {"rotary_dim": rope.rotary_dim, "offset": rope.offset or None, "angles": rope.given_angles,
                 "cos": rope.given_cos, "sin": rope.given_sin}  # fmt: skip
        document["rope"].update({key: value if key in ("rotary_dim", "offset") else value.tolist() for key, value in given.items() if value is not None})
    if s.variant(Alibi) is not None:
        document["alibi"] = {"slopes": list(s.variant(Alibi).slopes)}
    return document


def mla_qkv(s) -> tuple[list[list[float]], list[list[float]], list[list[float]]]:
    """A loaded MLA scenario's Q, K, V (heads side by side), the decoupled part rotated, from its weights by hand:
    q_h = [c·W_UQ,h | RoPE(c·W_QR,h)] with c = X or RMSNorm(X·W_DQ); k_h = [c_KV·W_UK,h | RoPE(X·W_KR)], v_h = c_KV·W_UV,h,
    c_KV = RMSNorm(X·W_DKV) (DeepSeek-V2 §2.1.2–2.1.3, eqs. 9–19)."""
    m, X = s.variant(Mla), s.X.tolist()
    H, d_n, d_r = s.heads, m.d_n, m.d_r
    rope = s.variant(Rope)
    rot = (lambda row, p: row) if rope is None else (lambda row, p: rotate_by_angles(row, rope_angles(p, d_r, rope.theta), rope.style))
    source = X
    if m.W_DQ is not None:
        source = matmul(X, m.W_DQ.tolist())
        if m.q_norm is not None:
            source = [rms_norm(row, m.q_norm.weight.tolist(), m.q_norm.eps) for row in source]
    latent = matmul(X, m.W_DKV.tolist())
    if m.kv_norm is not None:
        latent = [rms_norm(row, m.kv_norm.weight.tolist(), m.kv_norm.eps) for row in latent]
    k_R = [rot(row, p) for p, row in enumerate(matmul(X, m.W_KR.tolist()))]
    q_C, q_R = matmul(source, m.W_UQ.tolist()), matmul(source, m.W_QR.tolist())
    k_C, V = matmul(latent, m.W_UK.tolist()), matmul(latent, m.W_UV.tolist())
    Q = [sum((row[h * d_n : (h + 1) * d_n] + rot(q_R[p][h * d_r : (h + 1) * d_r], p) for h in range(H)), []) for p, row in enumerate(q_C)]
    K = [sum((row[h * d_n : (h + 1) * d_n] + k_R[p] for h in range(H)), []) for p, row in enumerate(k_C)]
    return Q, K, V


def kda(Q: list[list[float]], K: list[list[float]], V: list[list[float]], beta: float, decay: list[list[float]], divisor: float) -> list[list[float]]:
    """Kimi Delta Attention token by token, the paper's form: q and k divided by their length, then
    S_t = (I − β k_t k_tᵀ)·Diag(α_t)·S_{t−1} + β k_t v_tᵀ and o_t = S_tᵀ q_t / divisor, from S = 0 (d_k × d_v lists).
    With every α 1 it is the delta rule (DeltaNet)."""
    d_k, d_v = len(K[0]), len(V[0])
    S = [[0.0] * d_v for _ in range(d_k)]
    out = []
    for t in range(len(K)):
        k = [x / math.sqrt(sum(y * y for y in K[t])) for x in K[t]]
        q = [x / math.sqrt(sum(y * y for y in Q[t])) for x in Q[t]]
        decayed = [[decay[t][a] * S[a][b] for b in range(d_v)] for a in range(d_k)]  # Diag(α_t)·S
        k_dot = [sum(k[a] * decayed[a][b] for a in range(d_k)) for b in range(d_v)]  # kᵀ·Diag(α_t)·S
        S = [[decayed[a][b] - beta * k[a] * k_dot[b] + beta * k[a] * V[t][b] for b in range(d_v)] for a in range(d_k)]
        out.append([sum(S[a][b] * q[a] for a in range(d_k)) / divisor for b in range(d_v)])
    return out
