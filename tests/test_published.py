"""Golden numbers from worked examples other people published, one test per example, each citing its source.

Every input below is printed in full by its source; every expected number is the source's own
print, compared at the source's own rounding (`agrees`): the exact float64 result, rounded as the
source rounded, is the printed number. Sources that print float32 results (LeetGPU's reference
implementations run in float32) are compared at float32 precision (`agrees_float32`).

Conventions the sources do not share with attncli, and how each test bridges them (the test
says so where it matters):
- window: attncli's `window: W` lets query i see keys with |i − j| ≤ W (with `causal`, keys
  i−W … i, that is W + 1 keys). Mistral-style sources count the query itself in the window
  ("window_size = 3" sees 3 keys), so their W is attncli's W + 1. PyTorch's attention-gym
  counts like attncli.
- sinks: attncli's sinks are seen by every query the causal rule allows, as in LeetGPU's and
  attention-gym's masks.
- ALiBi: attncli adds −m·(i − j) (the paper's sign); LeetGPU's "ALiBi" challenge adds +α·(i − j),
  which is attncli's `alibi: {slopes: [−α]}` (or an explicit `bias:`).
- positions: sources index from 0, attncli from 1; RoPE angles use p = 0, 1, … in both.
"""

import textwrap

import numpy as np
import pytest

from attncli.core import engine
from attncli.core.explain import explain
from attncli.core.scenario import Scenario
from attncli.core.variants import Alibi
from attncli.sources.yaml_scenario import from_text


def scenario(yaml_text: str) -> Scenario:
    """A scenario from indented YAML text."""
    return from_text(textwrap.dedent(yaml_text))


def run(yaml_text: str) -> engine.RunResult:
    """The engine's result for a scenario given as YAML text."""
    return engine.run(scenario(yaml_text))


def agrees(actual: object, printed: object, decimals: int) -> None:
    """Each exact number lies within half a unit of the printed number's last decimal."""
    exact = np.asarray(actual, dtype=np.float64)
    shown = np.asarray(printed, dtype=np.float64)
    assert exact.shape == shown.shape, (exact.shape, shown.shape)
    half_unit = 0.5 * 10.0**-decimals * (1 + 1e-9)  # the 1e-9 absorbs float64 noise at an exact tie
    off = np.abs(exact - shown) > half_unit
    assert not off.any(), f"exact {exact[off]} does not round to printed {shown[off]} at {decimals} decimals"


def agrees_float32(actual: object, printed: object) -> None:
    """The exact numbers match numbers a float32 program printed, to float32's precision."""
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), np.asarray(printed, dtype=np.float64), rtol=1e-6)


# -- cross-attention -----------------------------------------------------------------------


def test_cross_attention_godoy_one_decoder_query_three_encoder_keys():
    """A decoder query attends to three encoder keys, unscaled, as in Godoy's book, score by score.

    Source: Daniel Voigt Godoy, "Deep Learning with PyTorch Step-by-Step", chapter 9, section
    Attention → "Visualizing the Context Vector"; repository dvgodoy/PyTorchStepByStep,
    Chapter09.ipynb (commit 7474dc74). It prints q = [.55, .95] and the keys
    [[.65, .2], [.85, -.4], [-.95, -.75]] (values = keys), then
    prod = [0.5475, 0.0875, -1.2350], softmax = [0.5557, 0.3508, 0.0935] and
    context = [0.5706, -0.0993].
    """
    result = run(
        """
        tokens: [decoder]
        context: {tokens: [K0, K1, K2]}
        Q: [[0.55, 0.95]]
        K: [[0.65, 0.2], [0.85, -0.4], [-0.95, -0.75]]
        V: [[0.65, 0.2], [0.85, -0.4], [-0.95, -0.75]]
        scale: none
        """
    )
    head = result.head(1)
    assert head.scores.shape == (1, 3)  # L_q × L_k
    agrees(head.scores, [[0.5475, 0.0875, -1.2350]], 4)
    agrees(head.weights, [[0.5557, 0.3508, 0.0935]], 4)
    agrees(result.output, [[0.5706, -0.0993]], 4)
    walk = explain(result, position=1)
    agrees([key.score for key in walk.keys], [0.5475, 0.0875, -1.2350], 4)
    agrees([key.weight for key in walk.keys], [0.5557, 0.3508, 0.0935], 4)
    agrees(walk.output, [0.5706, -0.0993], 4)
    assert [key.token for key in walk.keys] == ["K0", "K1", "K2"]


def test_multi_head_cross_attention_leetgpu_two_heads():
    """Two decoder queries attend to three encoder positions in two heads, as in LeetGPU's challenge.

    Source: LeetGPU challenge "Multi-Head Cross-Attention", repository AlphaGPU/leetgpu-challenges,
    challenges/hard/26_multi_head_cross_attention/challenge.html (commit 119f7375), section
    "Example": M = 2, N = 3, H = 2, D = 2 with Q₀ = [[1,0],[0,1]], Q₁ = [[0,1],[1,0]],
    K₀ = [[1,0],[0,1],[1,1]], K₁ = [[0,1],[1,0],[1,1]], V₀ = [[1,2],[3,4],[5,6]],
    V₁ = [[7,8],[9,10],[11,12]]; it prints (4 decimals) output₀ = [[3.0000, 4.0000], [3.4067, 4.4067]]
    and output₁ = [[9.0000, 10.0000], [9.4067, 10.4067]].
    """
    result = run(
        """
        tokens: [q1, q2]
        context: {tokens: [e1, e2, e3]}
        heads: 2
        Q: [[[1, 0], [0, 1]], [[0, 1], [1, 0]]]
        K: [[[1, 0], [0, 1], [1, 1]], [[0, 1], [1, 0], [1, 1]]]
        V: [[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 10], [11, 12]]]
        """
    )
    agrees(result.head(1).output, [[3.0000, 4.0000], [3.4067, 4.4067]], 4)
    agrees(result.head(2).output, [[9.0000, 10.0000], [9.4067, 10.4067]], 4)
    agrees(result.output, [[3.0000, 4.0000, 9.0000, 10.0000], [3.4067, 4.4067, 9.4067, 10.4067]], 4)


# -- key padding ---------------------------------------------------------------------------

D2L_KEYS = "[" + ", ".join(["[1, 1]"] * 10) + "]"
D2L_VALUES = "[" + ", ".join(f"[{4 * r}, {4 * r + 1}, {4 * r + 2}, {4 * r + 3}]" for r in range(10)) + "]"


@pytest.mark.parametrize(
    ("valid_length", "printed"),
    [(2, [2.0, 3.0, 4.0, 5.0]), (6, [10.0, 11.0, 12.0, 13.0])],
)
def test_key_padding_d2l_valid_length(valid_length, printed):
    """Keys past a valid length are padding: d2l's dot-product attention toy example, one batch entry per case.

    Source: Dive into Deep Learning, section "Attention Mechanism" → "Dot Product Attention";
    repository d2l-ai/d2l-en, chapter_attention-mechanism/attention.md (commit 9b916695, 2019-11-05).
    Query np.ones((2,1,2)), keys np.ones((2,10,2)), values np.arange(40).reshape(1,10,4) for both
    batch entries, valid_length [2, 6] ("we will check the first 2 key-value pairs for the first
    batch and 6 for the second one"); it prints array([[[ 2., 3., 4., 5.]], [[10., 11., 12., 13.]]]).
    attncli: valid length n is `padding: [n+1 … 10]` (key positions from 1).
    """
    padding = list(range(valid_length + 1, 11))
    result = run(
        f"""
        tokens: [query]
        context: {{tokens: [k1, k2, k3, k4, k5, k6, k7, k8, k9, k10]}}
        Q: [[1, 1]]
        K: {D2L_KEYS}
        V: {D2L_VALUES}
        mask: {{padding: {padding}}}
        """
    )
    agrees(result.output, [printed], 0)
    np.testing.assert_allclose(result.output, [printed], rtol=1e-12)  # uniform weights: exact up to float noise
    assert result.head(1).visible.tolist() == [[j < valid_length for j in range(10)]]
    walk = explain(result, position=1)
    assert [key.why for key in walk.keys if key.masked] == ["padding"] * len(padding)


# -- sliding windows and sinks -------------------------------------------------------------


@pytest.mark.parametrize(
    ("Q", "K", "V", "printed"),
    [
        (
            "[[1, 0, 0, 0], [0, 1, 0, 0]]",
            "[[1, 0, 0, 0], [0, 1, 0, 0]]",
            "[[1, 2, 3, 4], [5, 6, 7, 8]]",
            [[2.5101628, 3.5101628, 4.510163, 5.510163], [3.4898374, 4.4898376, 5.4898376, 6.489837]],
        ),
        (
            "[[0, 0, 0], [0, 1, 0]]",
            "[[1, 0, 0], [0, 1, 0]]",
            "[[1, 2, 3], [5, 6, 7]]",
            [[3.0, 4.0, 5.0], [3.5618298, 4.56183, 5.5618296]],
        ),
    ],
    ids=["example-1", "example-2"],
)
def test_sliding_window_leetgpu_two_sided(Q, K, V, printed):
    """A two-sided window |i − j| ≤ 1, LeetGPU's sliding-window attention examples, to float32 precision.

    Source: LeetGPU challenge "Sliding Window Self-Attention", repository AlphaGPU/leetgpu-challenges,
    challenges/hard/59_sliding_window_attn/challenge.html (commit 5e8b1533), "Example 1" and
    "Example 2" (window_size: 1; keys in [i − window_size, i + window_size]); the printed outputs
    are float32 results, e.g. [[2.5101628, 3.5101628, 4.510163, 5.510163], …].
    """
    result = run(
        f"""
        tokens: [a, b]
        Q: {Q}
        K: {K}
        V: {V}
        mask: {{window: 1}}
        """
    )
    agrees_float32(result.output, printed)


def causal_window_mask(L: int, *, window: int, sinks: int = 0) -> list[list[int]]:
    """The 0/1 matrix of which keys each query sees, for a causal window (and sinks) over L tokens."""
    ones = [[1.0]] * L
    s = scenario(
        f"""
        tokens: {[f"t{i}" for i in range(L)]}
        Q: {ones}
        K: {ones}
        V: {ones}
        mask: {{causal: true, window: {window}, sinks: {sinks}}}
        """
    )
    return s.mask.visible(L, L).astype(int).tolist()


def test_sliding_window_mistral_style_mask_is_window_minus_one():
    """Crackedaicode's printed Mistral-style mask for W = 3 is attncli's causal window 2.

    Source: crackedaicode.com/problems/flax-mha-sliding-window, "Sliding-Window Attention
    (Mistral-style)", section "The mask": position i attends to j with i − W < j ≤ i; it prints, for
    T = 6, W = 3: [[1,0,0,0,0,0], [1,1,0,0,0,0], [1,1,1,0,0,0], [0,1,1,1,0,0], [0,0,1,1,1,0],
    [0,0,0,1,1,1]] ("Position 5 sees only {3, 4, 5}"). Their W counts the query itself; attncli's
    window W counts the keys before it, so W = 3 there is `window: 2` here.
    """
    printed = [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [0, 1, 1, 1, 0, 0],
        [0, 0, 1, 1, 1, 0],
        [0, 0, 0, 1, 1, 1],
    ]
    assert causal_window_mask(6, window=2) == printed
    assert causal_window_mask(6, window=3)[5] == [0, 0, 1, 1, 1, 1]  # the same number here sees one key more


def test_attention_sinks_leetgpu_one_sink_window_two():
    """One sink plus a causal window, LeetGPU's attention-with-sinks example, to float32 precision.

    Source: LeetGPU challenge "Attention with Sinks" (StreamingLLM), repository
    AlphaGPU/leetgpu-challenges, challenges/medium/112_attention_with_sinks/challenge.html
    (commit 93d2c18f), "Example 1": Q = K = the 4 × 4 identity, V = [[1..4], [5..8], [9..12],
    [13..16]], num_sinks 1, window_size 2 (allowed: j ≤ i and (j < num_sinks or j ≥ i − window_size + 1));
    it prints output rows [1, 2, 3, 4], [3.4898374, …], [5.7111764, …], [8.6149015, 9.6149015,
    10.6149025, 11.6149025] and "Query 3 attends to positions {0, 2, 3}". Their window_size counts
    the query itself: window_size 2 is attncli's `window: 1`.
    """
    result = run(
        """
        tokens: [a, b, c, d]
        Q: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
        K: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
        V: [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]]
        mask: {causal: true, window: 1, sinks: 1}
        """
    )
    agrees_float32(
        result.output,
        [
            [1.0, 2.0, 3.0, 4.0],
            [3.4898374, 4.4898372, 5.4898376, 6.4898376],
            [5.7111764, 6.7111769, 7.7111769, 8.7111759],
            [8.6149015, 9.6149015, 10.6149025, 11.6149025],
        ],
    )
    walk = explain(result, position=4)  # their query 3, from 0
    assert [key.position - 1 for key in walk.visible] == [0, 2, 3]
    assert [key.why for key in walk.keys] == ["a sink: always seen", "outside the window of 1", None, None]


def test_attention_sinks_leetgpu_figure_two_sinks_window_three():
    """LeetGPU's sink figure (2 sinks, window_size 3, 8 positions) lists each query's keys; attncli agrees.

    Source: as above, challenges/medium/112_attention_with_sinks/challenge.html, the figure
    "num_sinks = 2, window_size = 3", whose rows read (from 0): {0}, {0,1}, {0,1,2}, {0,1,2,3},
    {0,1,2,3,4}, {0,1,3,4,5} ("position 2 gap"), {0,1,4,5,6}, {0,1,5,6,7}. That is attncli's
    `sinks: 2, window: 2`.
    """
    printed = [{0}, {0, 1}, {0, 1, 2}, {0, 1, 2, 3}, {0, 1, 2, 3, 4}, {0, 1, 3, 4, 5}, {0, 1, 4, 5, 6}, {0, 1, 5, 6, 7}]
    mask = causal_window_mask(8, window=2, sinks=2)
    assert [{j for j, seen in enumerate(row) if seen} for row in mask] == printed


# -- additive biases and ALiBi -------------------------------------------------------------


def test_score_bias_leetgpu_linear_bias_example_1():
    """LeetGPU's "attention with linear biases" adds α·(i − j); as a `bias:` matrix and as slopes −α, the same numbers.

    Source: LeetGPU challenge "Attention with Linear Biases", repository AlphaGPU/leetgpu-challenges,
    challenges/medium/55_attn_w_linear_bias/challenge.html (commit 5f9ce803), "Example 1":
    Q = [[1,0,0,0],[0,1,0,0]], K = the first 3 rows of the 4 × 4 identity, V = [[1..4],[5..8],[9..12]],
    α = 0.5, softmax(QKᵀ/√d + α·(i − j))·V; it prints [[3.05, 4.05, 6.05, 7.05], [3.93, 4.93, 5.93, 6.93]].
    The printed 6.05 and 7.05 are a typo: every row of V rises by 1 per column, so every output row
    does too; the challenge's own reference_impl (challenge.py) gives 5.05 and 6.05, as does attncli.
    Their sign is the opposite of the ALiBi paper's −m·(i − j), so the slopes are −α here.
    """
    common = textwrap.dedent(
        """
        tokens: [q0, q1]
        context: {tokens: [k0, k1, k2]}
        Q: [[1, 0, 0, 0], [0, 1, 0, 0]]
        K: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]
        V: [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
        """
    )
    with_bias = run(common + "bias: [[0, -0.5, -1], [0.5, 0, -0.5]]\n")
    with_slopes = run(common + "alibi: {slopes: [-0.5]}\n")
    for result in (with_bias, with_slopes):
        agrees(result.output[1], [3.93, 4.93, 5.93, 6.93], 2)
        agrees(result.output[0, :2], [3.05, 4.05], 2)
        agrees(result.output[0, 2:], [5.05, 6.05], 2)  # printed 6.05, 7.05: see the docstring
    np.testing.assert_array_equal(with_slopes.head(1).bias, [[0, -0.5, -1], [0.5, 0, -0.5]])


def test_score_bias_leetgpu_linear_bias_example_2():
    """LeetGPU's second linear-bias example: one query, two keys, α = 0.8.

    Source: as above, "Example 2": Q = [[1, 2]], K = [[1, 0], [0, 1]], V = [[3, 4], [5, 6]], α = 0.8;
    it prints [[3.95, 4.95]].
    """
    result = run(
        """
        tokens: [q0]
        context: {tokens: [k0, k1]}
        Q: [[1, 2]]
        K: [[1, 0], [0, 1]]
        V: [[3, 4], [5, 6]]
        bias: [[0, -0.8]]
        """
    )
    agrees(result.output, [[3.95, 4.95]], 2)
    walk = explain(result, position=1)
    assert [key.bias for key in walk.keys] == [0.0, -0.8]


@pytest.mark.parametrize(
    ("heads", "printed"),
    [
        (8, [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]),
        (2, [1 / 16, 1 / 256]),
        (
            12,
            [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625,
             0.7071067811865476, 0.3535533905932738, 0.1767766952966369, 0.08838834764831845],
        ),
    ],
    ids=["8-heads", "2-heads", "12-heads"],
)  # fmt: skip
def test_alibi_slopes_match_published_lists(heads, printed):
    """`alibi: true` gives the ALiBi slopes published for 8, 2 and 12 heads.

    Sources: 8 heads, nn.labml.ai/transformers/alibi ("when the number of heads is 8 the slopes
    are 1/2^1, 1/2^2, …, 1/2^8", as in the paper, Press et al. 2022, §3); 2 heads,
    crackedaicode.com/problems/flax-alibi-bias, section "Slopes" ("H=2: m = [2^-4, 2^-8] =
    [1/16, 1/256]"); 12 heads, not a power of two, the crate candding's test
    the_twelve_head_slopes_are_the_interpolated_sequence
    (docs.rs/crate/candding/latest/source/src/models/jina_bert/alibi/tests.rs: the eight powers of
    two, then every second entry of the sixteen-head sequence, printed to 16 digits; Jina-BERT
    has 12 heads).
    """
    tokens = ", ".join(f"t{i}" for i in range(3))
    s = scenario(
        f"""
        tokens: [{tokens}]
        heads: {heads}
        Q: {[[1.0] * heads] * 3}
        K: {[[1.0] * heads] * 3}
        V: {[[1.0] * heads] * 3}
        alibi: true
        """
    )
    assert s.variant(Alibi) is not None
    np.testing.assert_allclose(s.variant(Alibi).slopes, printed, rtol=1e-12)


def test_alibi_bias_is_the_papers_figure():
    """Head h's ALiBi term on query i's keys 1 … i is m_h·[−(i−1), …, −2, −1, 0], the paper's figure.

    Source: Press, Smith & Lewis, "Train Short, Test Long" (ICLR 2022), Figure 3 and §3, quoted by
    nn.labml.ai/transformers/alibi: softmax(q_i Kᵀ + m·[−(i−1), …, −1, 0]); crackedaicode.com/
    problems/flax-alibi-bias prints the causal form bias[h, i, j] = −m_h·(i − j) for j ≤ i. The
    figure's 5 × 5 lower triangle is 0; −1 0; −2 −1 0; −3 −2 −1 0; −4 −3 −2 −1 0 (times m).
    Under a causal mask the keys after i are hidden, so their (positive) entries never count.
    """
    zeros, ones = [[0.0] * 8] * 5, [[1.0] * 8] * 5
    result = run(
        f"""
        tokens: [t1, t2, t3, t4, t5]
        heads: 8
        Q: {zeros}
        K: {zeros}
        V: {ones}
        mask: causal
        alibi: true
        """
    )
    figure = [[0], [-1, 0], [-2, -1, 0], [-3, -2, -1, 0], [-4, -3, -2, -1, 0]]
    for head, m in zip(result.heads, [2.0**-k for k in range(1, 9)]):
        for i, row in enumerate(figure):
            np.testing.assert_allclose(head.bias[i, : i + 1], m * np.array(row), rtol=0, atol=1e-15)
            assert not head.visible[i, i + 1 :].any()


# -- rotary position embeddings ------------------------------------------------------------


def test_rope_rotate_half_keras_hub_ones_at_position_3():
    """RoPE with θ = 10000 in the rotate-half pairing turns ones at position 3 into keras-hub's printed vector.

    Source: repository keras-team/keras-hub, keras_nlp/src/layers/modeling/rotary_embedding_test.py
    (commit 57a3d332), test_output_correct_values: RotaryEmbedding() (max_wavelength 10000, halves
    paired) on ones of shape (1, 4, 6); it prints expected_0 = [1, 1, 1, 1, 1, 1] for position 0 and
    expected_3 = [-1.1311, 0.8515, 0.9935, -0.8489, 1.1291, 1.0064] for position 3.
    """
    ones = "[" + ", ".join(["[1, 1, 1, 1, 1, 1]"] * 4) + "]"
    result = run(
        f"""
        tokens: [p0, p1, p2, p3]
        Q: {ones}
        K: {ones}
        V: [[1], [1], [1], [1]]
        rope: true
        """
    )
    head = result.head(1)
    agrees(head.Q_rope[0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0], 4)
    agrees(head.Q_rope[3], [-1.1311, 0.8515, 0.9935, -0.8489, 1.1291, 1.0064], 4)
    agrees(head.K_rope[3], [-1.1311, 0.8515, 0.9935, -0.8489, 1.1291, 1.0064], 4)


def test_rope_interleaved_lexailabs_hand_checked_rotation():
    """RoPE with θ = 10000 in the interleaved (RoFormer) pairing, Lexai Labs' hand-checked rotation.

    Source: prof.lexailabs.com/practice/rotary-embedding-apply, "Example 2 — hand-checked rotation":
    C = 4, pairs (2i, 2i+1) with frequencies 1 and 0.01 (θ^(−2i/C)); x at position t = 1 is
    [1.0, 0.0, 1.0, 0.0] and comes out "[cos(1), sin(1), cos(0.01), sin(0.01)] ≈ [0.5403, 0.8415,
    0.99995, 0.01]"; "Example 1": position 0 is the identity.
    """
    result = run(
        """
        tokens: [t0, t1]
        Q: [[1, 0, 1, 0], [1, 0, 1, 0]]
        K: [[1, 0, 1, 0], [1, 0, 1, 0]]
        V: [[1], [1]]
        rope: {theta: 10000, style: interleaved}
        """
    )
    rotated = result.head(1).Q_rope
    np.testing.assert_array_equal(rotated[0], [1.0, 0.0, 1.0, 0.0])
    for value, printed, decimals in zip(rotated[1], [0.5403, 0.8415, 0.99995, 0.01], [4, 4, 5, 2]):
        agrees(value, printed, decimals)


# -- grouped-query attention ---------------------------------------------------------------


def test_grouped_query_attention_leetgpu_four_heads_two_kv_heads():
    """Four query heads share two key/value heads in consecutive pairs, LeetGPU's example to 2 decimals.

    Source: LeetGPU challenge "Grouped Query Attention", repository AlphaGPU/leetgpu-challenges,
    challenges/medium/80_grouped_query_attention/challenge.html (commit 945983ae), "Example":
    num_q_heads 4, num_kv_heads 2, seq_len 3, head_dim 4, "Q₀, Q₁ → K₀, V₀; Q₂, Q₃ → K₁, V₁", no mask,
    scale 1/√head_dim; it prints output₀ … output₃ rounded to 2 decimals.
    """
    result = run(
        """
        tokens: [a, b, c]
        heads: 4
        kv_heads: 2
        Q:
          - [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]]
          - [[0, 1, 0, 1], [1, 0, 1, 0], [0, 0, 1, 1]]
          - [[-1, 0, 0.5, 0], [0, -1, 0, 0.5], [0.5, 0, -1, 0]]
          - [[0, 0.5, 0, -1], [0.5, 0, 0, -1], [0, 0, 0.5, 0.5]]
        K:
          - [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 1, 1]]
          - [[0, 1, 0, -1], [-1, 0, 1, 0], [0, -1, 0, 1]]
        V:
          - [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
          - [[-1, -2, -3, -4], [2, 3, 4, 5], [6, 7, 8, 9]]
        """
    )
    printed = [
        [[5.71, 6.71, 7.71, 8.71], [5.71, 6.71, 7.71, 8.71], [5.71, 6.71, 7.71, 8.71]],
        [[6.07, 7.07, 8.07, 9.07], [5.00, 6.00, 7.00, 8.00], [5.71, 6.71, 7.71, 8.71]],
        [[2.24, 2.76, 3.27, 3.79], [3.96, 4.70, 5.44, 6.17], [2.40, 2.60, 2.79, 2.98]],
        [[0.76, 0.58, 0.40, 0.22], [1.17, 1.08, 1.00, 0.91], [2.84, 3.37, 3.91, 4.44]],
    ]
    assert [head.kv_head for head in result.heads] == [1, 1, 2, 2]
    for head, shown in zip(result.heads, printed):
        agrees(head.output, shown, 2)


# -- torch as an independent oracle (optional) ---------------------------------------------


def test_torch_oracle_for_grouping_bias_masks_and_rope():
    """torch 2.13 agrees on GQA head grouping, an additive bias, a windowed mask and both RoPE pairings.

    Not a published example: an optional cross-check that skips without torch (install it only as
    `pip install torch==2.13.0`). torch's scaled_dot_product_attention with enable_gqa=True groups
    query heads onto key/value heads as repeat_interleave does; RoPE is written in RoFormer's complex
    form (each pair of coordinates a complex number times e^(i·p·θ^(−2k/d))), once for interleaved
    and once for rotate-half pairs.
    """
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(20240601)
    L, H, G, d = 5, 6, 2, 4
    Q, K, V = rng.normal(size=(L, H * d)), rng.normal(size=(L, G * d)), rng.normal(size=(L, G * d))
    bias = rng.normal(size=(L, L))
    result = run(
        f"""
        tokens: [t1, t2, t3, t4, t5]
        heads: {H}
        kv_heads: {G}
        Q: {Q.tolist()}
        K: {K.tolist()}
        V: {V.tolist()}
        bias: {bias.tolist()}
        mask: {{causal: true, window: 2, sinks: 1}}
        """
    )
    visible = torch.tensor(result.head(1).visible)
    q = torch.tensor(Q).reshape(L, H, d).transpose(0, 1)  # (H, L, d)
    k = torch.tensor(K).reshape(L, G, d).transpose(0, 1)  # (G, L, d)
    v = torch.tensor(V).reshape(L, G, d).transpose(0, 1)  # (G, L, d)
    logits_bias = torch.tensor(bias).masked_fill(~visible, float("-inf"))  # (L, L)
    out = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=logits_bias, enable_gqa=True)[0]  # (H, L, d)
    np.testing.assert_allclose(result.concat, out.transpose(0, 1).reshape(L, H * d).numpy(), rtol=1e-12, atol=1e-12)

    x = rng.normal(size=(L, 8))  # (L, d_k)
    for style in ("interleaved", "half"):
        result = run(
            f"""
            tokens: [t1, t2, t3, t4, t5]
            Q: {x.tolist()}
            K: {x.tolist()}
            V: {np.ones((L, 1)).tolist()}
            rope: {{style: {style}}}
            """
        )
        np.testing.assert_allclose(result.head(1).Q_rope, rope_as_complex(torch, x, style), rtol=1e-12, atol=1e-12)


def rope_as_complex(torch, x: np.ndarray, style: str) -> np.ndarray:
    """(L, d) x rotated by RoFormer's complex form: pair k of row p times e^(i·p·10000^(−2k/d))."""
    t = torch.tensor(x)  # (L, d)
    L, d = t.shape
    if style == "interleaved":  # pairs (2k, 2k+1)
        pairs = torch.stack([t[:, 0::2], t[:, 1::2]], dim=-1)  # (L, d/2, 2)
    else:  # rotate-half: pairs (k, k + d/2)
        pairs = torch.stack([t[:, : d // 2], t[:, d // 2 :]], dim=-1)  # (L, d/2, 2)
    frequencies = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    angles = torch.arange(L, dtype=torch.float64)[:, None] * frequencies[None, :]  # (L, d/2)
    turn = torch.polar(torch.ones_like(angles), angles)  # (L, d/2) e^(i·angle)
    turned = torch.view_as_real(torch.view_as_complex(pairs.contiguous()) * turn)  # (L, d/2, 2)
    if style == "interleaved":
        return turned.reshape(L, d).numpy()
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1).numpy()
