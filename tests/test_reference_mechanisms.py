"""The naive reference's mechanisms of 2024–26 models (issue 20) against numbers other people published.

Each test names its source and the numbers it printed. Where nobody has published a worked example with
numbers (soft-capping, learned sinks, MLA, Gemma 2's scale, partial rotary inside a model, OLMo 2's QK-norm),
the oracle is transformers' own attention module on small random inputs, in float64: those tests need torch
and transformers (`pip install torch==2.13.0 transformers`) and skip without them, saying so. Two identities
need no oracle at all and are checked exactly: absorbed MLA equals expanded MLA, and retention's parallel form
equals its recurrent form.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from tests import reference as ref


def agrees(actual: object, printed: object, decimals: int) -> None:
    """Each exact number lies within half a unit of the printed number's last decimal (as test_published)."""
    exact = np.asarray(actual, dtype=np.float64)
    shown = np.asarray(printed, dtype=np.float64)
    assert exact.shape == shown.shape, (exact.shape, shown.shape)
    half_unit = 0.5 * 10.0**-decimals * (1 + 1e-9)
    assert not (np.abs(exact - shown) > half_unit).any(), f"{exact} does not round to {shown} at {decimals} decimals"


def heads_of(rows: list[list[float]], heads: int) -> list[list[list[float]]]:
    d = len(rows[0]) // heads
    return [[row[h * d : (h + 1) * d] for row in rows] for h in range(heads)]


# -- published worked examples ---------------------------------------------------------------------------------


def test_qk_norm_leetgpu_two_heads():
    """Per-head RMSNorm of q and k, then softmax(q·k/√d_head) v, as LeetGPU's "QK-Norm Attention" prints it.

    Source: LeetGPU challenge "QK-Norm Attention", repository AlphaGPU/leetgpu-challenges,
    challenges/medium/89_qk_norm_attention/challenge.html (commit 790cd696), "Example": N = 2, d_model = 4,
    h = 2, eps = 1e-6, q_weight = k_weight = [1, 1], Q = [[1, 0, 2, 3], [0.5, −1, 0, 2]],
    K = [[1, 1, 0, 1], [0, 1, 2, −1]], V = [[0.5, 1, 1.5, 2], [2.5, 3, 3.5, 4]], non-causal;
    Output ≈ [[1.0379, 1.5379, 2.0374, 2.5374], [1.1125, 1.6125, 1.7288, 2.2288]] (4 decimals).
    """
    Q = [[1.0, 0.0, 2.0, 3.0], [0.5, -1.0, 0.0, 2.0]]
    K = [[1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 2.0, -1.0]]
    V = [[0.5, 1.0, 1.5, 2.0], [2.5, 3.0, 3.5, 4.0]]
    Qn = ref.qk_norm_per_head(Q, 2, [1.0, 1.0], 1e-6)
    Kn = ref.qk_norm_per_head(K, 2, [1.0, 1.0], 1e-6)
    outputs = [
        ref.head_attention(q, k, v, scale=1 / math.sqrt(2))["output"]
        for q, k, v in zip(heads_of(Qn, 2), heads_of(Kn, 2), heads_of(V, 2))
    ]
    output = [outputs[0][i] + outputs[1][i] for i in range(2)]
    agrees(output, [[1.0379, 1.5379, 2.0374, 2.5374], [1.1125, 1.6125, 1.7288, 2.2288]], 4)


def test_rope_from_cos_sin_table_leetgpu():
    """RoPE from a given cos/sin table, x·cos + rotate_half(x)·sin, as LeetGPU's "RoPE Embedding" prints it.

    Source: LeetGPU challenge "Rotary Positional Embedding", repository AlphaGPU/leetgpu-challenges,
    challenges/medium/61_rope_embedding/challenge.html, "Example 1": Q = [[1, 2, 3, 4], [1, 1, 1, 1]],
    Cos = [[1, 1, 1, 1], [0, 0, 0, 0]], Sin = [[0, 0, 0, 0], [1, 1, 1, 1]];
    result = [[1, 2, 3, 4], [−1, −1, 1, 1]] (exact).
    """
    rows = [[1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0]]
    cos = [[1.0] * 4, [0.0] * 4]
    sin = [[0.0] * 4, [1.0] * 4]
    assert [ref.rotate_by_table(x, c, s) for x, c, s in zip(rows, cos, sin)] == [[1.0, 2.0, 3.0, 4.0], [-1.0, -1.0, 1.0, 1.0]]


def test_rope_from_angle_at_an_offset_position_leetgpu_fused_qkv():
    """RoPE of q and k at position 1 from the angle 1 rad, through the fused qkv projection, as LeetGPU prints it.

    Source: LeetGPU challenge "Fused QKV + RoPE + KV-Cache Update", repository AlphaGPU/leetgpu-challenges,
    challenges/medium/115_fused_qkv_rope_kv_cache_update/challenge.html (commit 7e48d44d), "Example":
    x = [1, 0], W_qkv = [[1, 0, 0, 1, 1, 1], [0, 1, 1, 0, 2, 2]], cos_sin_cache row 1 = [0.5403023, 0.8414710],
    positions = [1]; qkv = [1, 0, 0, 1, 1, 1], RoPE(q) = [0.5403023, 0.8414710], RoPE(k) = [−0.8414710, 0.5403023]
    (7 decimals). The angle comes three ways here: from θ at position 1, from θ at position 0 with an offset of 1,
    and from the printed table row (its D/2 cosines then D/2 sines, each used for both halves).
    """
    qkv = ref.matmul([[1.0, 0.0]], [[1.0, 0.0, 0.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0, 2.0, 2.0]])[0]
    assert qkv == [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    q, k = qkv[0:2], qkv[2:4]
    from_theta = ref.rope_angles(1, 2, 10000.0)
    from_offset = ref.rope_angles(0, 2, 10000.0, offset=1)
    assert from_theta == from_offset == [1.0]
    agrees([math.cos(1.0), math.sin(1.0)], [0.5403023, 0.8414710], 7)  # the printed table row
    for rotated_q, rotated_k in [
        (ref.rotate_by_angles(q, from_theta, "half"), ref.rotate_by_angles(k, from_theta, "half")),
        (ref.rotate_by_table(q, [0.5403023] * 2, [0.8414710] * 2), ref.rotate_by_table(k, [0.5403023] * 2, [0.8414710] * 2)),
    ]:
        agrees(rotated_q, [0.5403023, 0.8414710], 7)
        agrees(rotated_k, [-0.8414710, 0.5403023], 7)


def test_decode_from_a_paged_cache_leetgpu():
    """One decoding query against two cached keys gathered through a block table, as LeetGPU prints it.

    Source: LeetGPU challenge "Paged Attention", repository AlphaGPU/leetgpu-challenges,
    challenges/medium/86_paged_attention/challenge.html (commit bb42a8eb), "Example": head_dim = 4,
    block_size = 2, context_lens = [2], block_table = [[0]], Q = [1, 1, 0, 0], K_0 = [1, 0, 0, 0],
    K_1 = [0, 1, 0, 0], V_0 = [2, 0, 0, 0], V_1 = [0, 4, 0, 0]; scores 0.5 and 0.5, weights [0.5, 0.5],
    output [1, 2, 0, 0] (exact).
    """
    pool_K = [[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]]  # (blocks, block_size, head_dim)
    pool_V = [[[2.0, 0.0, 0.0, 0.0], [0.0, 4.0, 0.0, 0.0]]]
    block_table, block_size, length = [0], 2, 2
    K_cache = [pool_K[block_table[t // block_size]][t % block_size] for t in range(length)]
    V_cache = [pool_V[block_table[t // block_size]][t % block_size] for t in range(length)]
    result = ref.decode_from_cache([[1.0, 1.0, 0.0, 0.0]], K_cache, V_cache, [], [], scale=1 / math.sqrt(4))
    assert result["logits"] == [[0.5, 0.5]]
    assert result["weights"] == [[0.5, 0.5]]
    assert result["output"] == [[1.0, 2.0, 0.0, 0.0]]


@pytest.mark.parametrize(
    ("Q", "K", "V", "printed"),
    [
        (
            [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]],
            [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]],
            [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]],
            [[2.8461537, 3.8461537, 4.8461537, 5.8461537], [3.1538463, 4.1538463, 5.1538463, 6.1538463]],
        ),
        ([[0.0, 0.0], [1.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]], [[3.0, 4.0], [5.0, 6.0]], [[4.0, 5.0], [4.0, 5.0]]),
    ],
)
def test_linear_attention_elu_plus_one_leetgpu(Q, K, V, printed):
    """Linear attention with φ = elu + 1, non-causal, as LeetGPU's "Linear Attention" prints it (float32).

    Source: LeetGPU challenge "Linear Attention", repository AlphaGPU/leetgpu-challenges,
    challenges/hard/56_linear_attention/challenge.html (commit 07f01fa9), "Example 1" (output
    [[2.8461537, 3.8461537, 4.8461537, 5.8461537], [3.1538463, …]], 7 decimals of a float32 program: 37/13 …)
    and "Example 2" (output [[4, 5], [4, 5]]); the formula is Katharopoulos et al. 2020, eq. 4.
    """
    np.testing.assert_allclose(ref.linear_attention(Q, K, V, causal=False), printed, rtol=1e-6)


# -- identities that need no oracle ----------------------------------------------------------------------------


def random_matrix(rng: random.Random, rows: int, cols: int, scale: float = 1.0) -> list[list[float]]:
    return [[rng.gauss(0.0, scale) for _ in range(cols)] for _ in range(rows)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_absorbed_mla_equals_expanded_mla(seed):
    """MLA computed on the latent (W_uk absorbed into the query, W_uv applied after mixing) gives the expanded
    form's weights and head outputs, to rounding; and caches rank + rope_dim numbers a token, not H·(d_k + d_v).

    Source of the identity: DeepSeek-V2 (arXiv:2405.04434) §2.1.2, "we can absorb W^UK into W^Q, and W^UV into
    W^O"; no published numbers, the two forms check each other.
    """
    rng = random.Random(seed)
    heads, d, rank, nope, rope_dim, v_dim, L = 3, 8, 5, 4, 4, 3, 6
    X = random_matrix(rng, L, d)
    common: dict[str, Any] = {
        "heads": heads,
        "W_q": random_matrix(rng, d, heads * (nope + rope_dim), 0.5),
        "W_dkv": random_matrix(rng, d, rank + rope_dim, 0.5),
        "kv_norm": ([1.0 + rng.gauss(0, 0.2) for _ in range(rank)], 1e-6),
        "W_ukv": random_matrix(rng, rank, heads * (nope + v_dim), 0.5),
        "nope": nope, "rope_dim": rope_dim, "v_dim": v_dim, "theta": 10000.0, "style": "interleaved",
        "scale": (nope + rope_dim) ** -0.5,
    }  # fmt: skip
    expanded = ref.mla(X, absorbed=False, **common)
    absorbed = ref.mla(X, absorbed=True, **common)
    np.testing.assert_allclose(absorbed["weights"], expanded["weights"], rtol=0, atol=1e-13)
    np.testing.assert_allclose(absorbed["head_outputs"], expanded["head_outputs"], rtol=0, atol=1e-12)
    assert (absorbed["cache_per_token"], expanded["cache_per_token"]) == (rank + rope_dim, heads * (nope + rope_dim + v_dim))
    assert all(abs(sum(row) - 1) < 1e-12 for head in absorbed["weights"] for row in head)


@pytest.mark.parametrize("gamma", [0.5, 0.9, 1.0])
def test_retention_parallel_equals_recurrent(gamma):
    """Retention's parallel form (Q Kᵀ ⊙ D) V equals its recurrent form S_n = γ S_{n−1} + k_nᵀ v_n, out_n = q_n S_n.

    Source: Sun et al., "Retentive Network" (arXiv:2307.08621) eqs. 5 and 6; no published numbers, the two forms
    check each other, and D is γ^(i−j) on and below the diagonal (checked entry by entry against that formula).
    """
    rng = random.Random(7)
    Q, K, V = random_matrix(rng, 5, 3), random_matrix(rng, 5, 3), random_matrix(rng, 5, 2)
    parallel = ref.retention(Q, K, V, gamma)
    np.testing.assert_allclose(parallel["output"], ref.retention_recurrent(Q, K, V, gamma), rtol=1e-12, atol=1e-12)
    assert parallel["mask"][3][1] == gamma**2 and parallel["mask"][1][3] == 0.0 and parallel["mask"][2][2] == 1.0


def test_linear_attention_causal_is_a_running_sum():
    """Causal linear attention's row i equals the non-causal formula over the first i + 1 keys alone (eq. 9 of
    Katharopoulos et al. 2020 is eq. 4 on a prefix)."""
    rng = random.Random(3)
    Q, K, V = random_matrix(rng, 4, 3), random_matrix(rng, 4, 3), random_matrix(rng, 4, 2)
    causal = ref.linear_attention(Q, K, V, causal=True)
    for i in range(4):
        alone = ref.linear_attention([Q[i]], K[: i + 1], V[: i + 1], causal=False)
        np.testing.assert_allclose(causal[i], alone[0], rtol=1e-13)


def test_sink_takes_weight_and_leaves_the_ratios():
    """A learned sink lowers every real weight by the same factor Σe^s / (Σe^s + e^sink), leaves their ratios, and
    the weight it takes is e^sink / (Σe^s + e^sink): the gpt-oss model card's "learned bias in the denominator"."""
    logits = {0: 1.0, 1: -0.5, 2: 2.0}
    plain, none = ref.softmax_with_sink(logits, None)
    sunk, taken = ref.softmax_with_sink(logits, 0.7)
    total = sum(math.exp(s) for s in logits.values())
    assert none == 0.0
    assert taken == pytest.approx(math.exp(0.7) / (total + math.exp(0.7)), rel=1e-15)
    for j in logits:
        assert sunk[j] == pytest.approx(plain[j] * total / (total + math.exp(0.7)), rel=1e-14)


def test_layer_windows_from_layer_types():
    """Local and global layers are a per-layer window: Gemma 3's five sliding layers per full one, gpt-oss's
    alternation; None means full attention."""
    gemma3 = ["sliding_attention"] * 5 + ["full_attention"]
    assert ref.layer_windows(gemma3 * 2, 512) == [512] * 5 + [None] + [512] * 5 + [None]
    assert ref.layer_windows(["sliding_attention", "full_attention"], 128) == [128, None]


# -- transformers as the oracle (optional: needs torch and transformers) -----------------------------------------


def _torch() -> Any:
    try:
        import torch
    except Exception as error:  # not installed, or installed but unable to load
        pytest.skip(f"no published numbers, transformers is the oracle, and torch is not importable ({error})")
    return torch


def _transformers() -> Any:
    _torch()
    try:
        import transformers
    except Exception as error:
        pytest.skip(f"no published numbers, transformers is the oracle, and it is not importable ({error})")
    return transformers


def run_hf_attention(module: Any, rotary: Any, X: list[list[float]], window: int | None = None) -> dict[str, Any]:
    """transformers' attention module in float64, eager, causal (window counted as transformers counts it), its
    parameters redrawn N(0, 0.5²) (norm weights around 1): {"weights": (H, L, L), "cos", "sin": the rotary table
    (L, rotary_dim) it was given, "p": parameters by name}, all NumPy."""
    torch = _torch()
    generator = torch.Generator().manual_seed(11)
    module.double().eval()
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * 0.5
            parameter.copy_(noise + 1.0 if "norm" in name else noise)
    L = len(X)
    x = torch.tensor([X], dtype=torch.float64)
    cos, sin = rotary(x, torch.arange(L)[None])
    mask = torch.zeros(1, 1, L, L, dtype=torch.float64)
    for i in range(L):
        for j in range(L):
            if not ref.causal_window(window)(i, j):
                mask[0, 0, i, j] = float("-inf")
    with torch.no_grad():
        _, weights = module(x, position_embeddings=(cos, sin), attention_mask=mask)
    return {
        "weights": weights[0].numpy(),
        "cos": cos[0].numpy(),
        "sin": sin[0].numpy(),
        "p": {name: q.detach().numpy() for name, q in module.named_parameters()},
    }


def project(X: list[list[float]], weight: Any) -> list[list[float]]:
    """X Wᵀ for an nn.Linear weight (out, in)."""
    return ref.matmul(X, np.asarray(weight).T.tolist())


def gqa_heads(Q, K, V, heads: int, kv_heads: int):
    """Per query head: its q rows and its group's k and v rows."""
    qs, ks, vs = heads_of(Q, heads), heads_of(K, kv_heads), heads_of(V, kv_heads)
    return [(qs[h], ks[h * kv_heads // heads], vs[h * kv_heads // heads]) for h in range(heads)]


def rotate_rows(rows, hf: dict[str, Any], *, per_pair: bool = False):
    """Each row rotated by the cos/sin table transformers used at its position (RoPE from a given table); gpt-oss's
    table has one column per pair (`per_pair`), the others one per rotated dimension (both halves alike)."""
    table = {name: [row.tolist() * 2 if per_pair else row.tolist() for row in hf[name]] for name in ("cos", "sin")}
    return [ref.rotate_by_table(row, table["cos"][p], table["sin"][p]) for p, row in enumerate(rows)]


def check_table_is_theta(hf: dict[str, Any], theta: float) -> None:
    """transformers' table is the reference's angles from θ, to float32 (it computes them in float32)."""
    L, r = hf["cos"].shape
    angles = np.array([ref.rope_angles(p, r, theta) * 2 for p in range(L)])
    np.testing.assert_allclose(hf["cos"], np.cos(angles), rtol=0, atol=1e-6)
    np.testing.assert_allclose(hf["sin"], np.sin(angles), rtol=0, atol=1e-6)


# transformers' eager attention takes its softmax in float32 (softmax(…, dtype=torch.float32)) and its RMSNorm casts
# to float32 (`.to(torch.float32)`) even in a float64 model; gpt-oss alone keeps the model's dtype throughout.
FLOAT32 = 1e-6


def test_qk_norm_per_head_against_transformers_qwen3():
    """Qwen3's attention (per-head QK-norm before RoPE, GQA) equals transformers' Qwen3Attention's weights.

    No published Qwen3 numbers with weights exist, so transformers is the oracle (float64 module, random inputs).
    Bound 1e-6, not 1e-12: Qwen3RMSNorm casts its input to float32 and eager_attention_forward takes the softmax in
    float32 (modeling_qwen3.py).
    """
    transformers = _transformers()
    from transformers.models.qwen3 import modeling_qwen3 as m

    config = transformers.Qwen3Config(hidden_size=12, num_attention_heads=4, num_key_value_heads=2, head_dim=6, rms_norm_eps=1e-5)
    config._attn_implementation = "eager"
    X = random_matrix(random.Random(1), 5, 12)
    hf = run_hf_attention(m.Qwen3Attention(config, 0), m.Qwen3RotaryEmbedding(config).double(), X)
    check_table_is_theta(hf, config.rope_parameters["rope_theta"])
    p = hf["p"]
    Q = ref.qk_norm_per_head(project(X, p["q_proj.weight"]), 4, p["q_norm.weight"].tolist(), 1e-5)
    K = ref.qk_norm_per_head(project(X, p["k_proj.weight"]), 2, p["k_norm.weight"].tolist(), 1e-5)
    V = project(X, p["v_proj.weight"])
    for h, (q, k, v) in enumerate(gqa_heads(Q, K, V, 4, 2)):
        mine = ref.head_attention(rotate_rows(q, hf), rotate_rows(k, hf), v, scale=6**-0.5, sees=ref.causal_window(None))
        np.testing.assert_allclose(mine["weights"], hf["weights"][h], rtol=0, atol=FLOAT32)


def test_qk_norm_whole_projection_against_transformers_olmo2():
    """OLMo 2's attention (RMSNorm over the whole q and k projections, then heads, then RoPE) equals transformers'
    Olmo2Attention's weights; per-head norms instead would not (no published numbers; transformers is the
    oracle; bound 1e-6 for the float32 RMSNorm and softmax)."""
    transformers = _transformers()
    from transformers.models.olmo2 import modeling_olmo2 as m

    config = transformers.Olmo2Config(hidden_size=12, num_attention_heads=3, num_key_value_heads=3, rms_norm_eps=1e-6)
    config._attn_implementation = "eager"
    X = random_matrix(random.Random(2), 5, 12)
    hf = run_hf_attention(m.Olmo2Attention(config, 0), m.Olmo2RotaryEmbedding(config).double(), X)
    p = hf["p"]
    q_proj, k_proj = project(X, p["q_proj.weight"]), project(X, p["k_proj.weight"])
    V = project(X, p["v_proj.weight"])
    for whole in (True, False):
        if whole:
            Q = ref.qk_norm_whole(q_proj, p["q_norm.weight"].tolist(), 1e-6)
            K = ref.qk_norm_whole(k_proj, p["k_norm.weight"].tolist(), 1e-6)
        else:
            Q = ref.qk_norm_per_head(q_proj, 3, p["q_norm.weight"].tolist()[:4], 1e-6)
            K = ref.qk_norm_per_head(k_proj, 3, p["k_norm.weight"].tolist()[:4], 1e-6)
        mine = [
            ref.head_attention(rotate_rows(q, hf), rotate_rows(k, hf), v, scale=4**-0.5, sees=ref.causal_window(None))["weights"]
            for q, k, v in gqa_heads(Q, K, V, 3, 3)
        ]
        if whole:
            np.testing.assert_allclose(mine, hf["weights"], rtol=0, atol=FLOAT32)
        else:
            assert np.abs(np.asarray(mine) - hf["weights"]).max() > 1e-3


@pytest.mark.parametrize("sliding", [False, True])
def test_soft_cap_and_query_pre_attn_scalar_against_transformers_gemma2(sliding):
    """Gemma 2's attention (scale query_pre_attn_scalar^−½, cap·tanh(s/cap) before the mask, a window on sliding
    layers) equals transformers' Gemma2Attention's weights to 1e-6 (its softmax is float32). The cap is set low (2.0) so that tanh bends the logits; no published soft-capping
    numbers were found, so transformers is the oracle."""
    transformers = _transformers()
    from transformers.models.gemma2 import modeling_gemma2 as m

    config = transformers.Gemma2Config(
        hidden_size=12, num_attention_heads=2, num_key_value_heads=1, head_dim=8, query_pre_attn_scalar=5,
        attn_logit_softcapping=2.0, sliding_window=3, num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"],
    )  # fmt: skip
    config._attn_implementation = "eager"
    X = random_matrix(random.Random(3), 6, 12)
    window = 3 if sliding else None
    hf = run_hf_attention(m.Gemma2Attention(config, 0 if sliding else 1), m.Gemma2RotaryEmbedding(config).double(), X, window)
    Q, K, V = (project(X, hf["p"][f"{n}_proj.weight"]) for n in "qkv")
    for h, (q, k, v) in enumerate(gqa_heads(Q, K, V, 2, 1)):
        mine = ref.head_attention(rotate_rows(q, hf), rotate_rows(k, hf), v, scale=5**-0.5, cap=2.0, sees=ref.causal_window(window))
        np.testing.assert_allclose(mine["weights"], hf["weights"][h], rtol=0, atol=FLOAT32)
        assert max(abs(s) for row in mine["logits"] for s in row) < 2.0
        uncapped = ref.head_attention(rotate_rows(q, hf), rotate_rows(k, hf), v, scale=5**-0.5, sees=ref.causal_window(window))
        assert np.abs(np.asarray(uncapped["weights"]) - hf["weights"][h]).max() > 1e-3


def test_learned_sinks_against_transformers_gpt_oss():
    """gpt-oss's attention (a learned per-head sink logit in the denominator, a window on sliding layers, q/k/v
    biases) equals transformers' GptOssAttention's weights to 1e-12, and each row sums to 1 − the sink's share.
    The model card gives the formula, not numbers; transformers is the oracle."""
    transformers = _transformers()
    from transformers.models.gpt_oss import modeling_gpt_oss as m

    config = transformers.GptOssConfig(
        hidden_size=12, num_attention_heads=4, num_key_value_heads=2, head_dim=4, sliding_window=3, num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"], attention_bias=True,
        rope_parameters={"rope_type": "default", "rope_theta": 150000.0},
    )  # fmt: skip
    config._attn_implementation = "eager"
    X = random_matrix(random.Random(4), 6, 12)
    hf = run_hf_attention(m.GptOssAttention(config, 0), m.GptOssRotaryEmbedding(config).double(), X, 3)
    p = hf["p"]
    Q, K, V = (ref.add_bias(project(X, p[f"{n}_proj.weight"]), p[f"{n}_proj.bias"].tolist()) for n in "qkv")
    for h, (q, k, v) in enumerate(gqa_heads(Q, K, V, 4, 2)):
        mine = ref.head_attention(
            rotate_rows(q, hf, per_pair=True), rotate_rows(k, hf, per_pair=True), v, scale=0.5, sink=float(p["sinks"][h]), sees=ref.causal_window(3)
        )
        np.testing.assert_allclose(mine["weights"], hf["weights"][h], rtol=0, atol=1e-12)
        for row, taken in zip(mine["weights"], mine["sink_weights"]):
            assert sum(row) == pytest.approx(1 - taken, abs=1e-14) and 0 < taken < 1


def test_partial_rotary_fused_qkv_against_transformers_gpt_neox():
    """GPT-NeoX / Pythia (fused qkv laid out per head as [q | k | v], RoPE on the first rotary_pct of each head,
    rotate-half within that part) equals transformers' GPTNeoXAttention's weights to 1e-6 (float32 softmax); its table has
    rotary_pct · head_size columns and matches the angles from θ over that width (no published numbers)."""
    transformers = _transformers()
    from transformers.models.gpt_neox import modeling_gpt_neox as m

    config = transformers.GPTNeoXConfig(hidden_size=16, num_attention_heads=2, rotary_pct=0.25, attention_bias=True)
    config._attn_implementation = "eager"
    X = random_matrix(random.Random(5), 5, 16)
    hf = run_hf_attention(m.GPTNeoXAttention(config, 0), m.GPTNeoXRotaryEmbedding(config).double(), X)
    assert hf["cos"].shape == (5, 2)
    check_table_is_theta(hf, config.rope_parameters["rope_theta"])
    p = hf["p"]
    qkv = ref.add_bias(project(X, p["query_key_value.weight"]), p["query_key_value.bias"].tolist())
    for h in range(2):
        block = [row[h * 24 : (h + 1) * 24] for row in qkv]  # per head: q (8) | k (8) | v (8)
        q, k, v = [r[0:8] for r in block], [r[8:16] for r in block], [r[16:24] for r in block]
        mine = ref.head_attention(rotate_rows(q, hf), rotate_rows(k, hf), v, scale=8**-0.5, sees=ref.causal_window(None))
        np.testing.assert_allclose(mine["weights"], hf["weights"][h], rtol=0, atol=FLOAT32)


def test_mla_against_transformers_deepseek_v3():
    """DeepSeek V3's MLA (q through q_a → RMSNorm → q_b; latent kv_a → RMSNorm → kv_b; one shared RoPE key part,
    interleaved pairs): the reference's expanded and absorbed forms both equal transformers'
    DeepseekV3Attention's weights (no published numbers; transformers is the oracle). The reference takes its
    angles from θ here (transformers' table is float32), hence the float32 bound with the RMSNorms."""
    transformers = _transformers()
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as m

    config = transformers.DeepseekV3Config(
        hidden_size=12, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=6, kv_lora_rank=5,
        qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=3, rms_norm_eps=1e-6,
    )  # fmt: skip
    config._attn_implementation = "eager"
    X = random_matrix(random.Random(6), 5, 12)
    hf = run_hf_attention(m.DeepseekV3Attention(config, 0), m.DeepseekV3RotaryEmbedding(config).double(), X)
    p = hf["p"]
    q_latent = [ref.rms_norm(row, p["q_a_layernorm.weight"].tolist(), 1e-6) for row in project(X, p["q_a_proj.weight"])]
    # ref.mla projects one input for both paths: give it [q latent | X] and weights that each read their own part.
    joined = [a + b for a, b in zip(q_latent, X)]
    W_q = np.vstack([np.asarray(p["q_b_proj.weight"]).T, np.zeros((12, 16))]).tolist()
    W_dkv = np.vstack([np.zeros((6, 9)), np.asarray(p["kv_a_proj_with_mqa.weight"]).T]).tolist()
    for absorbed in (False, True):
        result = ref.mla(
            joined, heads=2, W_q=W_q, W_dkv=W_dkv, kv_norm=(p["kv_a_layernorm.weight"].tolist(), 1e-6),
            W_ukv=np.asarray(p["kv_b_proj.weight"]).T.tolist(), nope=4, rope_dim=4, v_dim=3,
            theta=config.rope_parameters["rope_theta"], style="interleaved", scale=8**-0.5, absorbed=absorbed,
        )  # fmt: skip
        np.testing.assert_allclose(result["weights"], hf["weights"], rtol=0, atol=FLOAT32)


@pytest.mark.parametrize("style", ["half", "interleaved"])
@pytest.mark.parametrize("rotated", [2, 4, 8])
def test_rope_table_angles_and_offset_agree(style, rotated):
    """The three ways to give RoPE agree on a head of 8 with the first `rotated` dimensions turned: angles from θ,
    a cos/sin table laid out as transformers lays it (halves alike for rotate-half, each angle twice in a row for
    interleaved), and a position offset (position 97 + 3 = position 100); the unrotated dimensions pass through."""
    rng = random.Random(rotated)
    vector = [rng.gauss(0, 1) for _ in range(8)]
    angles = ref.rope_angles(100, rotated, 500.0)
    assert angles == ref.rope_angles(3, rotated, 500.0, offset=97)
    if style == "half":
        cos, sin = [math.cos(a) for a in angles] * 2, [math.sin(a) for a in angles] * 2
    else:
        cos = [math.cos(a) for a in angles for _ in range(2)]
        sin = [math.sin(a) for a in angles for _ in range(2)]
    by_angles = ref.rotate_by_angles(vector, angles, style)
    np.testing.assert_allclose(ref.rotate_by_table(vector, cos, sin, style), by_angles, rtol=0, atol=1e-15)
    assert by_angles[rotated:] == vector[rotated:]
    if rotated == 8:  # the whole head: the engine's existing reference rotation, from position and θ
        np.testing.assert_allclose(by_angles, ref.rotate(vector, 100, 500.0, style), rtol=0, atol=1e-15)
    assert math.fsum(x * x for x in by_angles) == pytest.approx(math.fsum(x * x for x in vector), rel=1e-14)


def test_mla_cache_per_token_is_deepseek_v2_table_1():
    """MLA's cache holds c (d_c numbers) and the shared RoPE key (d_h^R) per token and layer: (d_c + d_h^R) = 9/2·d_h.

    Source: DeepSeek-AI, "DeepSeek-V2" (arXiv:2405.04434), §2.1.4 Table 1 ("KV Cache per Token": MHA 2·n_h·d_h·l,
    GQA 2·n_g·d_h·l, MQA 2·d_h·l, MLA (d_c + d_h^R)·l ≈ 9/2·d_h·l) with §3.1.2's sizes d_h = 128, d_c = 512
    (4·d_h), d_h^R = 64 (d_h / 2), n_h = 128: 576 numbers against MHA's 32 768. The reference runs one token
    through the absorbed form at those latent sizes (one head; the latent cache does not depend on heads).
    """
    rng = random.Random(9)
    d_h, d_c, rope_dim, d = 128, 512, 64, 4
    result = ref.mla(
        random_matrix(rng, 1, d), heads=1, W_q=random_matrix(rng, d, d_h + rope_dim, 0.1),
        W_dkv=random_matrix(rng, d, d_c + rope_dim, 0.1), kv_norm=([1.0] * d_c, 1e-6),
        W_ukv=random_matrix(rng, d_c, d_h + d_h, 0.1), nope=d_h, rope_dim=rope_dim, v_dim=d_h, theta=10000.0,
        style="interleaved", scale=(d_h + rope_dim) ** -0.5, absorbed=True,
    )  # fmt: skip
    assert result["cache_per_token"] == 576 == 9 * d_h // 2
    assert result["weights"] == [[[1.0]]]


def test_decoding_from_a_cache_gives_the_full_passs_last_rows():
    """Prefix caching changes nothing: the new queries' weights and outputs against (cached keys + new keys) equal
    rows P… of the full causal pass over all tokens; a new query never sees a later new key."""
    rng = random.Random(12)
    Q, K, V = random_matrix(rng, 6, 3), random_matrix(rng, 6, 3), random_matrix(rng, 6, 2)
    full = ref.head_attention(Q, K, V, scale=3**-0.5, sees=ref.causal_window(None))
    P = 4
    decoded = ref.decode_from_cache(Q[P:], K[:P], V[:P], K[P:], V[P:], scale=3**-0.5)
    np.testing.assert_allclose(decoded["weights"], full["weights"][P:], rtol=0, atol=1e-15)
    np.testing.assert_allclose(decoded["output"], full["output"][P:], rtol=0, atol=1e-15)
    assert decoded["weights"][0][P + 1] == 0.0
