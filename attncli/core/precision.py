"""One head computed as bfloat16, float16 or float32 arithmetic computes it, each step beside its exact float64 value.

The engine stays exact; this is a second computation beside it. It starts where an attention kernel
starts: the head's q, k and V as the engine made them (after any QK-norm, RoPE and value norm), rounded to the
format, as a model running in that format holds them. Every rounding is a cast with ml_dtypes
(bfloat16) or NumPy (float16, float32): round to nearest, ties to even, as the hardware does, and a
float32 operation is NumPy's float32 operation, rounded once. Where each result is rounded, and in
which order the sums run, follows a named kernel as torch 2.13 runs it on a CPU (checked against
torch in tests/test_precision.py's live tier):

* ``eager``: ``softmax(q @ k.T * scale + mask) @ v`` in the format. A matrix product sums its
  products in float32 and rounds the sum to the format once (a product of two bfloat16 or float16
  numbers is exact in float32); ``* scale`` multiplies in float32 and rounds; softmax works in float32
  inside (the row's maximum, e^(x − max), the sum, the division) and rounds each weight once.
* ``sdpa``: ``scaled_dot_product_attention``'s math backend, which turns bfloat16 and float16 inputs
  into float32, multiplies q and k each by √scale, computes everything in float32 and rounds only
  the output to the format.
* ``flash``: FlashAttention's float32 accumulators (torch's CPU flash kernel, SDPA's default there):
  float32 scores, the keys in blocks (512 unless a block size is given) with a running maximum;
  e^(s − m) rounded to the format before it multiplies V (as FlashAttention-2 does with P), the
  running sum and output in float32, and the output divided and rounded once at the end.
* ``naive``: no float32 anywhere: each product, sum, exponential and division rounded to the format,
  the sums one term after the other (a kernel written without float32 accumulators; torch runs none
  like it). Beside the others it shows why attention keeps its sums in float32: a bfloat16 running
  sum stops growing once each new term is below half its spacing (at 256, terms below 1).

Each `Step` holds what the kernel holds (`value`), the exact value (`exact`: the same formula in
float64 on the exact inputs, the maximum subtracted as the kernel subtracts it) and the step's own
operation done exactly on the kernel's own inputs (`ideal`). So a step's error splits into what it
carried in (ideal − exact: the rounding of its inputs and of every earlier step) and what the step
itself added (value − ideal: its rounding, its float32 sums, an overflow or an underflow).

Dimension names used in the shape comments:
    L_q  query tokens    L_k  key tokens    d_k  width of q and k    d_v  width of a value
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from attncli.errors import AttnError, option

FORMATS = ("bf16", "fp16", "fp32")
KERNELS = ("eager", "sdpa", "flash", "naive")
TORCH_KV_BLOCK = 512  # torch's CPU flash kernel takes keys 512 at a time (kv_split_size)


class Format(NamedTuple):
    """A number format: its short name (`bf16`), its name (`bfloat16`) and the NumPy dtype that rounds to it."""

    key: str
    name: str
    dtype: Any

    def round(self, a: np.ndarray | float) -> np.ndarray:
        """`a` rounded to the format (nearest, ties to even), returned as float64: a cast there and back."""
        return np.asarray(np.asarray(a, dtype=np.float64).astype(self.dtype), dtype=np.float64)

    @property
    def largest(self) -> float:
        """The largest finite number of the format: 65504 in float16, about 3.39e38 in bfloat16."""
        return float(_finfo(self.dtype).max)

    @property
    def smallest_normal(self) -> float:
        return float(_finfo(self.dtype).tiny)

    @property
    def smallest(self) -> float:
        """The smallest positive number of the format (a subnormal): 5.96e-08 in float16; half of it and less rounds to 0."""
        return float(_finfo(self.dtype).smallest_subnormal)

    @property
    def epsilon(self) -> float:
        """The spacing of the format's numbers at 1: 2⁻⁷ in bfloat16, 2⁻¹⁰ in float16, 2⁻²³ in float32."""
        return float(_finfo(self.dtype).eps)

    @property
    def exp_limit(self) -> float:
        """ln(largest): e^x overflows the format for x beyond it (11.09 in float16, 88.72 in bfloat16 and float32)."""
        return math.log(self.largest)


def _finfo(dtype: Any) -> Any:
    import ml_dtypes

    return ml_dtypes.finfo(dtype)  # type: ignore[no-untyped-call]


def number_format(key: str) -> Format:
    """The format named `key` (bf16, fp16 or fp32), or an AttnError listing them."""
    if key == "bf16":
        import ml_dtypes  # bfloat16 has no NumPy dtype of its own

        return Format("bf16", "bfloat16", ml_dtypes.bfloat16)
    if key == "fp16":
        return Format("fp16", "float16", np.float16)
    if key == "fp32":
        return Format("fp32", "float32", np.float32)
    raise AttnError(f"found {key!r}", key=option("dtype"), expected="bf16, fp16 or fp32")


FLOAT32 = Format("fp32", "float32", np.float32)


class Step(NamedTuple):
    """One step of the kernel: what it holds beside the exact value, and the exact value of its own operation on its own inputs.

    Made by `step()`, which works out the three errors once: error = carried + own at every cell (up to float64's rounding).
    """

    key: str  # "q", "k", "v", "scores", "scaled", "exp", "exp_sum", "weights", "output"
    formula: str  # "q·kᵀ", in Unicode
    held_in: str  # the format its result is held in: "bfloat16", "float32"
    how: str  # how the kernel computes it: "float32 sums of the products, rounded to bfloat16"
    value: np.ndarray  # what the kernel holds, as float64 ((L_q, L_k), (L_q,) or (L, d))
    exact: np.ndarray  # the same step in float64 from the exact inputs
    ideal: np.ndarray  # the step's operation in float64 on the kernel's own (rounded) inputs
    visible: np.ndarray | None  # (L_q, L_k) bool for tokens × tokens steps: where the mask lets a key through; None otherwise
    error: np.ndarray  # value − exact; 0 where both are the same infinity and where the mask hides the cell
    carried: np.ndarray  # ideal − exact: what this step's inputs brought in (the rounding of the inputs and of every earlier step)
    own: np.ndarray  # value − ideal: what this step added (its rounding, its float32 sums, an overflow)

    @property
    def overflowed(self) -> np.ndarray:
        """Where the kernel holds ±∞ but the exact value is finite."""
        return np.asarray(np.isinf(self.value) & np.isfinite(self.exact))

    @property
    def underflowed(self) -> np.ndarray:
        """Where the kernel holds 0 but the exact value is not (a visible cell)."""
        shown = np.ones(self.value.shape, dtype=bool) if self.visible is None else self.visible
        return np.asarray(shown & (self.value == 0) & (self.exact != 0))

    @property
    def invalid(self) -> np.ndarray:
        """Where the kernel holds NaN but the exact value is a number (∞ − ∞ after an overflow)."""
        return np.asarray(np.isnan(self.value) & ~np.isnan(self.exact))

    def worst(self) -> tuple[int, ...]:
        """The index of the largest |error| (an overflow first, then a NaN)."""
        for flagged in (self.overflowed, self.invalid):
            if flagged.any():
                return tuple(int(i) for i in np.argwhere(flagged)[0])
        return tuple(int(i) for i in np.unravel_index(int(np.argmax(np.abs(self.error))), self.value.shape))


def _difference(a: np.ndarray, b: np.ndarray, visible: np.ndarray | None) -> np.ndarray:
    """a − b, 0 where both are the same infinity (a hidden key's −∞) or both NaN, and where the mask hides the cell; NaN where a alone is."""
    with np.errstate(invalid="ignore"):
        d = np.where(np.isinf(b) & (b == a), 0.0, a - b)
        d = np.where(np.isnan(a) & np.isnan(b), 0.0, d)
    return d if visible is None else np.where(visible, d, 0.0)


def step(key: str, formula: str, held_in: str, how: str, value: np.ndarray, exact: np.ndarray, ideal: np.ndarray,
         visible: np.ndarray | None = None) -> Step:  # fmt: skip
    """A Step with its errors worked out: value − exact, ideal − exact (carried in), value − ideal (added here)."""
    return Step(key, formula, held_in, how, value, exact, ideal, visible,
                _difference(value, exact, visible), _difference(ideal, exact, visible), _difference(value, ideal, visible))  # fmt: skip


class Lab(NamedTuple):
    """A head computed in a number format by a kernel: its steps in order, and what the exact scores say about overflow."""

    format: Format
    kernel: str  # "eager", "sdpa", "flash", "naive"
    block: int | None  # keys a block (flash); None otherwise
    steps: tuple[Step, ...]
    logits: np.ndarray  # (L_q, L_k) the exact scaled scores, −∞ where hidden: what a naive e^(score) would exponentiate
    visible: np.ndarray  # (L_q, L_k) bool
    inputs_output: np.ndarray  # (L_q, d_v) the exact output of the rounded q, k, v: the output's error splits at it into the inputs' and the kernel's

    @property
    def output_split(self) -> tuple[np.ndarray, np.ndarray]:
        """(L_q, d_v) twice: the output's error from rounding q, k and v (inputs_output − exact) and from the kernel's own arithmetic (value − inputs_output)."""
        output = self.steps[-1]
        return _difference(self.inputs_output, output.exact, None), _difference(output.value, self.inputs_output, None)

    def step(self, key: str) -> Step | None:
        return next((s for s in self.steps if s.key == key), None)

    @property
    def weight_sums(self) -> np.ndarray | None:
        """(L_q,) each row's weights as the kernel holds them, added exactly; None when the kernel never forms the weights (flash)."""
        weights = self.step("weights")
        return None if weights is None else np.sum(weights.value, axis=1)


def sums32(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """(m, n) float32 A·B, the products added one after the other in float32 (A (m, t), B (t, n), both float32-representable)."""
    A32, B32 = np.asarray(A, dtype=np.float32), np.asarray(B, dtype=np.float32)
    total = np.zeros((A32.shape[0], B32.shape[1]), dtype=np.float32)  # (m, n)
    for t in range(A32.shape[1]):
        total += A32[:, t, None] * B32[None, t, :]  # each product rounded to float32, then the sum
    return total


def exp32(x: np.ndarray) -> np.ndarray:
    """float32 e^x of float32 x, rounded once from float64 (torch's vectorised float32 exp is within a few units of the last place of it)."""
    with np.errstate(over="ignore"):
        return np.exp(np.asarray(x, dtype=np.float64)).astype(np.float32)


def row_sums32(e: np.ndarray) -> np.ndarray:
    """(L_q,) float32 sums of each row, the keys added one after the other."""
    total = np.zeros(e.shape[0], dtype=np.float32)
    for j in range(e.shape[1]):
        total += e[:, j]
    return total


def exact_softmax(logits: np.ndarray, visible: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Row maxima (L_q,), e^(x − max) (L_q, L_k), their sums (L_q,) and the weights (L_q, L_k), in float64; 0 where hidden."""
    masked = np.where(visible, logits, -np.inf)
    top = masked.max(axis=1)  # (L_q,)
    e = np.where(visible, np.exp(masked - top[:, None]), 0.0)  # (L_q, L_k)
    total = e.sum(axis=1)  # (L_q,)
    return top, e, total, e / total[:, None]


def compute(q: np.ndarray, k: np.ndarray, v: np.ndarray, visible: np.ndarray, divisor: float, fmt: Format, kernel: str,
            block: int | None = None) -> Lab:  # fmt: skip
    """The head softmax(mask(q·kᵀ / divisor))·v in `fmt` as `kernel` computes it, beside the exact values.

    q (L_q, d_k), k (L_k, d_k), v (L_k, d_v) exact; visible (L_q, L_k); every row sees at least one key.
    """
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    with np.errstate(over="ignore", invalid="ignore"):
        exact_scaled = (q @ k.T) / divisor  # (L_q, L_k)
        inputs = tuple(step(name, name, fmt.name, f"rounded to {fmt.name}", fmt.round(a), a, a) for name, a in (("q", q), ("k", k), ("v", v)))
        qf, kf, vf = (made.value for made in inputs)
        if kernel == "eager":
            steps = _eager(qf, kf, vf, q, k, v, visible, divisor, fmt)
        elif kernel == "sdpa":
            steps = _sdpa(qf, kf, vf, q, k, v, visible, divisor, fmt)
        elif kernel == "naive":
            steps = _naive(qf, kf, vf, q, k, v, visible, divisor, fmt)
        elif kernel == "flash":
            block = TORCH_KV_BLOCK if block is None else block
            steps = _flash(qf, kf, vf, q, k, v, visible, divisor, fmt, block)
        else:
            raise AttnError(f"found {kernel!r}", key=option("kernel"), expected="eager, sdpa, flash or naive")
        inputs_output = exact_softmax((qf @ kf.T) / divisor, visible)[3] @ vf  # (L_q, L_k) @ (L_k, d_v) -> (L_q, d_v)
    return Lab(fmt, kernel, block if kernel == "flash" else None, (*inputs, *steps), np.where(visible, exact_scaled, -np.inf), visible,
               inputs_output)  # fmt: skip


def _softmax32(x: np.ndarray, visible: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """float32 softmax of float32 logits x as torch's CPU kernel runs it: max, e^(x − max), the sum, the division (each float32)."""
    x32 = np.where(visible, np.asarray(x, dtype=np.float32), np.float32(-np.inf))  # (L_q, L_k)
    top = x32.max(axis=1)  # (L_q,) float32
    e = np.where(visible, exp32(x32 - top[:, None]), np.float32(0))  # (L_q, L_k) float32
    total = row_sums32(e)  # (L_q,) float32
    return top, e, total, e / total[:, None]  # the division in float32


def _eager(qf: np.ndarray, kf: np.ndarray, vf: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, visible: np.ndarray,
           divisor: float, fmt: Format) -> list[Step]:  # fmt: skip
    f = fmt.name
    scores = fmt.round(sums32(qf, kf.T))  # (L_q, L_k)
    scale32 = np.float32(1.0 / divisor)
    scaled = fmt.round(scores.astype(np.float32) * scale32)  # (L_q, L_k) float32 product, rounded to the format
    top, e, total, w32 = _softmax32(scaled, visible)
    weights = fmt.round(w32)  # (L_q, L_k)
    output = fmt.round(sums32(weights, vf))  # (L_q, d_v)
    exact_scores = q @ k.T
    x_top, x_e, x_total, x_weights = exact_softmax(exact_scores / divisor, visible)
    ideal_e = exact_softmax(scaled, visible)[1]  # against the kernel's own maximum, exact already (a maximum rounds nothing)
    e64, total64 = e.astype(np.float64), total.astype(np.float64)
    return [
        step("scores", "q·kᵀ", f, f"float32 sums of the products, rounded to {f}", scores, exact_scores, qf @ kf.T),
        step("scaled", "q·kᵀ · scale", f, f"times the scale {float(scale32):.6g} in float32, rounded to {f}", scaled, exact_scores / divisor,
             scores / divisor, visible),  # fmt: skip
        step("exp", "e^(x − max)", "float32", "in float32 inside softmax: the row's maximum subtracted, e^x", e64, x_e, ideal_e, visible),
        step("exp_sum", "Σ e^(x − max)", "float32", "float32 sum of the row, key after key", total64, x_total, e64.sum(axis=1)),
        step("weights", "e / Σ", f, f"divided in float32, rounded to {f}", weights, x_weights, e64 / total64[:, None], visible),
        step("output", "weights·V", f, f"float32 sums of the products, rounded to {f}", output, x_weights @ v, weights @ vf),
    ]


def _sdpa(qf: np.ndarray, kf: np.ndarray, vf: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, visible: np.ndarray,
          divisor: float, fmt: Format) -> list[Step]:  # fmt: skip
    root = math.sqrt(1.0 / divisor)  # √scale, as the math backend multiplies q and k each by it
    root32 = np.float32(root)
    q_scaled = (qf.astype(np.float32) * root32).astype(np.float64)  # (L_q, d_k) float32
    k_scaled = (kf.astype(np.float32) * root32).astype(np.float64)  # (L_k, d_k)
    scaled = sums32(q_scaled, k_scaled.T).astype(np.float64)  # (L_q, L_k) float32
    top, e, total, w32 = _softmax32(scaled, visible)
    weights = w32.astype(np.float64)  # float32: the math backend never rounds them to the format
    output = fmt.round(sums32(weights, vf))  # (L_q, d_v)
    x_top, x_e, x_total, x_weights = exact_softmax((q @ k.T) / divisor, visible)
    ideal_e = exact_softmax(scaled, visible)[1]  # e^(x − max) of the kernel's own scores, exactly
    e64, total64 = e.astype(np.float64), total.astype(np.float64)
    how = f"from {fmt.name} to float32, times √scale = {float(root32):.6g} in float32"
    return [
        step("q_scaled", "q·√scale", "float32", how, q_scaled, q * root, qf * root),
        step("k_scaled", "k·√scale", "float32", how, k_scaled, k * root, kf * root),
        step("scaled", "(q·√scale)·(k·√scale)ᵀ", "float32", "float32 sums of the products", scaled, (q @ k.T) / divisor, q_scaled @ k_scaled.T, visible),
        step("exp", "e^(x − max)", "float32", "the row's maximum subtracted, e^x in float32", e64, x_e, ideal_e, visible),
        step("exp_sum", "Σ e^(x − max)", "float32", "float32 sum of the row, key after key", total64, x_total, e64.sum(axis=1)),
        step("weights", "e / Σ", "float32", "divided in float32 (never rounded to the format)", weights, x_weights, e64 / total64[:, None], visible),
        step("output", "weights·V", fmt.name, f"float32 sums of the products, rounded to {fmt.name}", output, x_weights @ v, weights @ vf),
    ]


def sums_in(fmt: Format, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """(m, n) A·B with each product and each running sum rounded to `fmt`, one term after the other (A (m, t), B (t, n))."""
    total = np.zeros((A.shape[0], B.shape[1]))  # (m, n)
    for t in range(A.shape[1]):
        total = fmt.round(total + fmt.round(A[:, t, None] * B[None, t, :]))
    return total


def _naive(qf: np.ndarray, kf: np.ndarray, vf: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, visible: np.ndarray,
           divisor: float, fmt: Format) -> list[Step]:  # fmt: skip
    f = fmt.name
    scores = sums_in(fmt, qf, kf.T)  # (L_q, L_k)
    scale = fmt.round(1.0 / divisor)
    scaled = fmt.round(scores * scale)  # (L_q, L_k)
    x = np.where(visible, scaled, -np.inf)
    top = x.max(axis=1)  # (L_q,) a maximum rounds nothing
    e = np.where(visible, fmt.round(np.exp(fmt.round(x - top[:, None]))), 0.0)  # (L_q, L_k)
    total = np.zeros(e.shape[0])  # (L_q,)
    for j in range(e.shape[1]):
        total = fmt.round(total + e[:, j])
    weights = fmt.round(e / total[:, None])  # (L_q, L_k)
    output = sums_in(fmt, weights, vf)  # (L_q, d_v)
    exact_scores = q @ k.T
    x_top, x_e, x_total, x_weights = exact_softmax(exact_scores / divisor, visible)
    ideal_e = np.where(visible, np.exp(x - top[:, None]), 0.0)
    return [
        step("scores", "q·kᵀ", f, f"each product and each running sum rounded to {f}", scores, exact_scores, qf @ kf.T),
        step("scaled", "q·kᵀ · scale", f, f"times the scale {float(scale):.6g} ({f}), rounded to {f}", scaled, exact_scores / divisor,
             scores / divisor, visible),  # fmt: skip
        step("exp", "e^(x − max)", f, f"the row's maximum subtracted, e^x rounded to {f}", e, x_e, ideal_e, visible),
        step("exp_sum", "Σ e^(x − max)", f, f"a running sum in {f}, key after key, each sum rounded", total, x_total, e.sum(axis=1)),
        step("weights", "e / Σ", f, f"divided, rounded to {f}", weights, x_weights, e / total[:, None], visible),
        step("output", "weights·V", f, f"each product and each running sum rounded to {f}", output, x_weights @ v, weights @ vf),
    ]


def _flash(qf: np.ndarray, kf: np.ndarray, vf: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, visible: np.ndarray,
           divisor: float, fmt: Format, block: int) -> list[Step]:  # fmt: skip
    L_q, L_k = visible.shape
    scale32 = np.float32(1.0 / divisor)
    scaled32 = sums32(qf, kf.T) * scale32  # (L_q, L_k) float32
    scaled = scaled32.astype(np.float64)
    exact_scaled = (q @ k.T) / divisor
    top = np.full(L_q, -np.inf, dtype=np.float32)  # (L_q,) the running maximum m
    total = np.zeros(L_q, dtype=np.float32)  # (L_q,) the running sum l
    acc = np.zeros((L_q, vf.shape[1]), dtype=np.float32)  # (L_q, d_v) the running output o
    p = np.zeros((L_q, L_k))  # (L_q, L_k) e^(s − m) as the kernel multiplies V by it (in the format), against its block's m
    ideal_p, exact_p = np.zeros((L_q, L_k)), np.zeros((L_q, L_k))
    x_top = np.full(L_q, -np.inf)  # (L_q,) the exact running maximum
    for start in range(0, L_k, block):
        cols = slice(start, min(start + block, L_k))
        seen = visible[:, cols]  # (L_q, b)
        s = np.where(seen, scaled32[:, cols], np.float32(-np.inf))  # (L_q, b)
        new_top = np.maximum(top, s.max(axis=1))  # (L_q,)
        live = np.isfinite(new_top)  # rows that have seen a key so far
        safe_top = np.where(live, new_top, np.float32(0))
        alpha = np.where(np.isfinite(top), exp32(top - safe_top), np.float32(0))  # (L_q,) e^(m_old − m_new)
        block_e = np.where(seen, exp32(s - safe_top[:, None]), np.float32(0))  # (L_q, b) float32
        block_p = fmt.round(block_e)  # P in the format, as it meets V
        total = total * alpha + row_sums32(block_e)
        acc = acc * alpha[:, None] + sums32(block_p, vf[cols])
        top = np.where(live, new_top, top)
        p[:, cols] = block_p
        ideal_p[:, cols] = np.where(seen, np.exp(np.where(seen, scaled[:, cols], -np.inf) - np.where(live, new_top, 0.0)[:, None]), 0.0)
        x_s = np.where(seen, exact_scaled[:, cols], -np.inf)
        x_top = np.maximum(x_top, x_s.max(axis=1))
        exact_p[:, cols] = np.where(seen, np.exp(x_s - np.where(np.isfinite(x_top), x_top, 0.0)[:, None]), 0.0)
    output = fmt.round(acc / total[:, None])  # (L_q, d_v)
    x_final, x_e, x_total, x_weights = exact_softmax(exact_scaled, visible)
    ideal_e = exact_softmax(scaled, visible)[1]  # (L_q, L_k) against the final maximum
    f = fmt.name
    return [
        step("scaled", "q·kᵀ · scale", "float32", f"float32 sums of the products, times the scale {float(scale32):.6g} in float32", scaled,
             exact_scaled, (qf @ kf.T) / divisor, visible),  # fmt: skip
        step("exp", "P = e^(s − m)", f, f"e^(s − m) in float32 against the running maximum of its block, rounded to {f} before ·V", p, exact_p,
             ideal_p, visible),  # fmt: skip
        step("exp_sum", "l = Σ e^(s − m)", "float32", "float32 running sum, rescaled by e^(m_old − m_new) at each block", total.astype(np.float64),
             x_total, ideal_e.sum(axis=1)),  # fmt: skip
        step("output", "o / l", f, f"float32 running P·V, divided by l in float32, rounded to {f}", output, x_weights @ v,
             (ideal_e / ideal_e.sum(axis=1)[:, None]) @ vf),  # fmt: skip
    ]


def head_lab(head: Any, visible: np.ndarray, divisor: float, fmt: Format, kernel: str, block: int | None = None) -> Lab:
    """`compute` on a HeadResult's q, k and values (after its QK-norm, RoPE and value norm), or an AttnError for a head the kernels here do not compute.

    The kernels compute softmax(mask(q·kᵀ / divisor))·V; a head with anything else on its scores (a bias, ALiBi,
    soft-capping, a query temperature, a learned sink, given scores, a kernel other than softmax) is refused in one line.
    """
    if head.kernel is not None or head.reshaped or head.bias is not None or head.sink_exp is not None or head.q.shape[1] == 0:
        raise AttnError(
            f"head {head.head} has more than softmax(mask(q·kᵀ / divisor))·V (a bias, ALiBi, soft-capping, a query temperature, a sink, given scores or no softmax)",
            key=option("dtype"),
            expected="a scenario whose heads add nothing to the scaled scores (RoPE, QK-norm, grouped-query heads and masks are fine)",
        )
    return compute(head.q, head.k, head.values, visible, divisor, fmt, kernel, block)  # the values the weights meet (after v_norm)
