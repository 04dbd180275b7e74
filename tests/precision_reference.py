"""A deliberately naive head in bfloat16, float16 and float32, written with loops and the math module, to check core.precision against.

It shares nothing with attncli.core.precision: no NumPy, no ml_dtypes. A number is rounded to a
format by math.frexp and Python's round (ties to even) on its significand, in the format's exponent
range (subnormals, overflow to ±∞); every float32 step rounds after each operation, as the kernels do.
"""

from __future__ import annotations

import math

BITS = {"bf16": (8, -125, 127), "fp16": (11, -13, 15), "fp32": (24, -125, 127)}  # significand bits, lowest and highest frexp exponent


def rounded(x: float, fmt: str) -> float:
    """x rounded to the nearest number of `fmt`, ties to even; ±∞ beyond its largest number."""
    if x == 0 or math.isinf(x) or math.isnan(x):
        return x
    bits, lowest, highest = BITS[fmt]
    _, e = math.frexp(x)
    e = max(e, lowest)  # below the normal range the spacing stays that of the smallest normal numbers
    r = math.ldexp(round(math.ldexp(x, bits - e)), e - bits)
    largest = math.ldexp(1 - 2.0**-bits, highest + 1)
    return math.copysign(math.inf, x) if abs(r) > largest else r


def f32(x: float) -> float:
    return rounded(x, "fp32")


def dot32(a: list[float], b: list[float]) -> float:
    """Σ a_t·b_t in float32, one term after the other."""
    total = 0.0
    for x, y in zip(a, b):
        total = f32(total + f32(x * y))
    return total


def softmax32(row: list[float], seen: list[bool]) -> tuple[list[float], float, list[float]]:
    """e^(x − max) (0 where hidden), their float32 sum and the float32 quotients, each step in float32."""
    top = max(x for x, s in zip(row, seen) if s)
    e = [f32(math.exp(f32(x - top))) if s else 0.0 for x, s in zip(row, seen)]
    total = 0.0
    for x in e:
        total = f32(total + x)
    return e, total, [f32(x / total) for x in e]


def eager(q: list[list[float]], k: list[list[float]], v: list[list[float]], visible: list[list[bool]], divisor: float, fmt: str) -> dict[str, list]:
    """torch's eager attention in `fmt` on a CPU: the steps core.precision's eager kernel keeps."""
    r = lambda x: rounded(x, fmt)  # noqa: E731
    qf, kf, vf = ([[r(x) for x in row] for row in m] for m in (q, k, v))
    scale = f32(1.0 / divisor)
    scores = [[r(dot32(qi, kj)) for kj in kf] for qi in qf]
    scaled = [[r(f32(s * scale)) for s in row] for row in scores]
    rows = [softmax32(row, seen) for row, seen in zip(scaled, visible)]
    weights = [[r(w) for w in ws] for _, _, ws in rows]
    output = [[r(dot32(w, [vj[c] for vj in vf])) for c in range(len(vf[0]))] for w in weights]
    return {"q": qf, "k": kf, "v": vf, "scores": scores, "scaled": scaled, "exp": [e for e, _, _ in rows],
            "exp_sum": [t for _, t, _ in rows], "weights": weights, "output": output}  # fmt: skip


def naive(q: list[list[float]], k: list[list[float]], v: list[list[float]], visible: list[list[bool]], divisor: float, fmt: str) -> dict[str, list]:
    """Every product, sum, exponential and division rounded to `fmt`, the sums one term after the other: core.precision's naive kernel."""
    r = lambda x: rounded(x, fmt)  # noqa: E731

    def dot(a: list[float], b: list[float]) -> float:
        total = 0.0
        for x, y in zip(a, b):
            total = r(total + r(x * y))
        return total

    qf, kf, vf = ([[r(x) for x in row] for row in m] for m in (q, k, v))
    scale = r(1.0 / divisor)
    scores = [[dot(qi, kj) for kj in kf] for qi in qf]
    scaled = [[r(s * scale) for s in row] for row in scores]
    exp, sums, weights = [], [], []
    for row, seen in zip(scaled, visible):
        top = max(x for x, s in zip(row, seen) if s)
        e = [r(math.exp(r(x - top))) if s else 0.0 for x, s in zip(row, seen)]
        total = 0.0
        for x in e:
            total = r(total + x)
        exp.append(e)
        sums.append(total)
        weights.append([r(x / total) for x in e])
    output = [[dot(w, [vj[c] for vj in vf]) for c in range(len(vf[0]))] for w in weights]
    return {"q": qf, "k": kf, "v": vf, "scores": scores, "scaled": scaled, "exp": exp, "exp_sum": sums, "weights": weights, "output": output}


def flash(q: list[list[float]], k: list[list[float]], v: list[list[float]], visible: list[list[bool]], divisor: float, fmt: str,
          block: int) -> dict[str, list]:  # fmt: skip
    """FlashAttention's float32 accumulators, one query at a time: core.precision's flash kernel (P rounded to `fmt` before ·v)."""
    r = lambda x: rounded(x, fmt)  # noqa: E731
    qf, kf, vf = ([[r(x) for x in row] for row in m] for m in (q, k, v))
    scale = f32(1.0 / divisor)
    scaled = [[f32(dot32(qi, kj) * scale) for kj in kf] for qi in qf]
    ps, sums, output = [], [], []
    for row, seen in zip(scaled, visible):
        top, total, acc, p_row = -math.inf, 0.0, [0.0] * len(vf[0]), [0.0] * len(kf)
        for start in range(0, len(kf), block):
            keys = [j for j in range(start, min(start + block, len(kf))) if seen[j]]
            if not keys:
                continue
            new_top = max(top, *(row[j] for j in keys))
            alpha = f32(math.exp(f32(top - new_top))) if top != -math.inf else 0.0
            e = {j: f32(math.exp(f32(row[j] - new_top))) for j in keys}
            block_sum = 0.0
            for j in range(start, min(start + block, len(kf))):
                block_sum = f32(block_sum + e.get(j, 0.0))
            total = f32(f32(total * alpha) + block_sum)
            for c in range(len(acc)):
                acc[c] = f32(f32(acc[c] * alpha) + dot32([r(e.get(j, 0.0)) for j in range(start, min(start + block, len(kf)))],
                                                         [vf[j][c] for j in range(start, min(start + block, len(kf)))]))  # fmt: skip
            for j in keys:
                p_row[j] = r(e[j])
            top = new_top
        ps.append(p_row)
        sums.append(total)
        output.append([r(f32(a / total)) for a in acc])
    return {"q": qf, "k": kf, "v": vf, "scaled": scaled, "exp": ps, "exp_sum": sums, "output": output}
