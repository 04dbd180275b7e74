"""core.precision: a head in bfloat16, float16 and float32 as torch's kernels compute it, beside the exact values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import attncli.api as attn
from attncli.core import precision
from attncli.errors import AttnError
from tests import precision_reference as reference

FORMATS = precision.FORMATS
SOFTMAX_BUILT_INS = ("cat", "journey-simple", "journey", "journey-causal", "multihead", "train-station", "translation", "llama-style",
                     "pythia-style", "sliding-window", "mla")  # fmt: skip


def lab_of(name: str, fmt: str, kernel: str, head: int = 1, block: int | None = None) -> precision.Lab:
    result = attn.run(name).result
    h = result.head(head)
    return precision.head_lab(h, h.visible, result.scenario.scale.divisor, precision.number_format(fmt), kernel, block)


numbers = st.floats(min_value=-4, max_value=4, allow_nan=False, width=64)


@st.composite
def heads(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    L, d = draw(st.integers(1, 6)), draw(st.integers(1, 5))
    q, k, v = (np.array(draw(st.lists(st.lists(numbers, min_size=d, max_size=d), min_size=L, max_size=L))) for _ in range(3))
    visible = np.tril(np.ones((L, L), dtype=bool)) if draw(st.booleans()) else np.ones((L, L), dtype=bool)
    return q, k, v, visible, draw(st.sampled_from([1.0, math.sqrt(d), 3.0]))


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=40, deadline=None)
@given(head=heads())
def test_eager_steps_equal_a_naive_reference_bit_for_bit(fmt: str, head: tuple) -> None:
    """Every step of the eager kernel equals a loop-and-math-module reference that rounds with frexp, in each format."""
    q, k, v, visible, divisor = head
    lab = precision.compute(q, k, v, visible, divisor, precision.number_format(fmt), "eager")
    expected = reference.eager(q.tolist(), k.tolist(), v.tolist(), visible.tolist(), divisor, fmt)
    for key, values in expected.items():
        step = lab.step(key)
        assert step is not None
        got = np.where(np.isneginf(step.value), -np.inf, step.value)
        np.testing.assert_array_equal(got, np.array(values, dtype=np.float64), err_msg=f"{fmt} {key}")


@pytest.mark.parametrize("kernel", precision.KERNELS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_each_error_is_what_the_step_carried_in_plus_what_it_added(fmt: str, kernel: str) -> None:
    """value − exact = (ideal − exact) + (value − ideal) at every cell of every step, and the carried part of the inputs is 0."""
    lab = lab_of("journey-causal", fmt, kernel)
    for step in lab.steps:
        np.testing.assert_allclose(step.error, step.carried + step.own, rtol=0, atol=1e-15)
    assert not np.any(lab.step("q").carried) and np.any(lab.step("q").own)


def test_the_formats_limits_are_the_textbook_ones() -> None:
    """float16's e^x overflows past ln 65504 = 11.09; bfloat16 and float32 past 88.72; the spacing at 1 is 2⁻⁷, 2⁻¹⁰, 2⁻²³."""
    bf16, fp16, fp32 = (precision.number_format(f) for f in FORMATS)
    assert f"{fp16.exp_limit:.2f}" == "11.09" and fp16.largest == 65504.0
    assert f"{bf16.exp_limit:.2f}" == f"{fp32.exp_limit:.2f}" == "88.72"
    assert (bf16.epsilon, fp16.epsilon, fp32.epsilon) == (2.0**-7, 2.0**-10, 2.0**-23)


def test_a_score_beyond_float16s_range_overflows_in_the_scores_step_and_the_shift_keeps_exp_finite() -> None:
    """q·k = 70,000 is +∞ in float16 (its scores step says so); scores of 12 and 0 overflow no exponential, since the maximum is subtracted."""
    q, k, v = np.array([[250.0, 280.0]]), np.array([[140.0, 125.0]]), np.array([[1.0]])
    lab = precision.compute(q, k, v, np.ones((1, 1), dtype=bool), 1.0, precision.number_format("fp16"), "eager")
    assert lab.step("scores").overflowed.all() and np.isposinf(lab.step("scores").value).all()
    big = precision.compute(np.array([[12.0]]), np.array([[1.0], [0.0]]), np.array([[1.0], [2.0]]), np.ones((1, 2), dtype=bool), 1.0,
                            precision.number_format("fp16"), "eager")  # fmt: skip
    assert lab.format.exp_limit < 12.0 and np.isfinite(big.step("exp").value).all() and not big.step("exp").overflowed.any()


def test_flash_with_one_block_is_sdpas_scores_and_rounds_p_before_v() -> None:
    """flash's scores equal eager's before rounding to bfloat16, and its P is a bfloat16 number; blocks of 2 change only the last bits."""
    whole, blocks = lab_of("journey-causal", "bf16", "flash"), lab_of("journey-causal", "bf16", "flash", block=2)
    p = whole.step("exp").value
    np.testing.assert_array_equal(p, precision.number_format("bf16").round(p))
    assert whole.block == 512 and blocks.block == 2
    np.testing.assert_allclose(whole.step("output").value, blocks.step("output").value, atol=2 * 2.0**-7)


def test_a_head_with_a_bias_is_refused_in_one_line() -> None:
    """ALiBi adds to the scores, which the kernels here do not: one AttnError naming the option."""
    with pytest.raises(AttnError, match="more than softmax"):
        lab_of("alibi", "bf16", "eager")


def test_an_unknown_format_or_kernel_is_one_error() -> None:
    """fp8 and a kernel called 'fast' are refused with the choices."""
    with pytest.raises(AttnError, match="bf16, fp16 or fp32"):
        precision.number_format("fp8")
    with pytest.raises(AttnError, match="eager, sdpa or flash"):
        precision.compute(np.ones((1, 1)), np.ones((1, 1)), np.ones((1, 1)), np.ones((1, 1), dtype=bool), 1.0, precision.FLOAT32, "fast")


# The live tier: torch's own kernels on the same rounded inputs. torch is not a dependency (the README's test line
# never needs it); .ci/run's live tier runs these with PYTHONPATH=<worktree> and the live environment's Python.

FLOAT32_UNITS = 8  # where torch's order differs (float32: FMA in its matrix products, its vectorised exp), the bound in float32 units


def _torch() -> object:
    return pytest.importorskip("torch", reason="torch is not installed: the live tier runs with the live environment's Python")


def _numbers(t: object) -> np.ndarray:
    return t.double().numpy()  # type: ignore[attr-defined,no-any-return]


def _bound(fmt: str, value: np.ndarray) -> float:
    """0 in bfloat16 and float16 (the same order of operations: bit for bit), else FLOAT32_UNITS units of float32 at the step's size."""
    return 0.0 if fmt != "fp32" else FLOAT32_UNITS * 2.0**-23 * float(np.max(np.abs(value), initial=1.0))


@pytest.mark.parametrize("name", SOFTMAX_BUILT_INS)
def test_live_torch_eager_sdpa_math_and_cpu_flash_equal_the_lab(name: str) -> None:
    """torch's eager attention, SDPA's math backend and its CPU flash kernel, in each dtype: bit for bit in bfloat16 and float16, within the bound in float32."""
    torch = _torch()
    from torch.nn import functional
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    result = attn.run(name).result
    scale = 1.0 / result.scenario.scale.divisor
    for h in result.heads:
        for fmt, dtype in dtypes.items():
            lab = lab_of(name, fmt, "eager", h.head)
            q, k, v = (torch.tensor(lab.step(key).value).to(dtype) for key in "qkv")
            seen = torch.tensor(h.visible)
            scores = q @ k.T
            scaled = scores * scale
            weights = torch.softmax(scaled.masked_fill(~seen, float("-inf")), -1)
            got = {"scores": scores, "scaled": scaled, "weights": weights, "output": weights @ v}
            for key, tensor in got.items():
                step = lab.step(key)
                assert np.max(np.abs(_numbers(tensor) - step.value), initial=0.0) <= _bound(fmt, step.value), (name, h.head, fmt, key)
            backends = [("sdpa", SDPBackend.MATH)] + [("flash", SDPBackend.FLASH_ATTENTION)] * (q.shape[1] == v.shape[1])  # flash: d_k = d_v only
            for kernel, backend in backends:
                with sdpa_kernel(backend):
                    out = functional.scaled_dot_product_attention(q[None, None], k[None, None], v[None, None], attn_mask=seen, scale=scale)[0, 0]
                step = lab_of(name, fmt, kernel, h.head).step("output")
                assert np.max(np.abs(_numbers(out) - step.value)) <= _bound(fmt, step.value), (name, h.head, fmt, kernel)
