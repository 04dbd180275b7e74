"""`--dtype`: a head computed in bfloat16, float16 or float32 by a named kernel (core.precision), as documents and JSON.

`run` shows every step of every shown head: a table of each step's largest error split into what it carried
in and what it added, then each step's numbers in the format with their errors. `explain` follows one
query's row step by step, each key's number in the format beside the exact one, and narrates the
lesson: where e^x overflows the format and why the maximum is subtracted, what the weights sum to,
the first step whose error shows at the shown decimals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from attncli.core.engine import RunResult
from attncli.core.precision import FLOAT32, Format, Lab, Step
from attncli.document.blocks import Block, Document, Heading, Note, Paragraph, Table, Values
from attncli.document.numbers import fixed, plain, short_vector, significant

TITLES = {
    "q": "The queries q", "k": "The keys k", "v": "The values v", "q_scaled": "The queries times √scale", "k_scaled": "The keys times √scale",
    "scores": "The scores", "scaled": "The scaled scores", "exp": "The exponentials", "exp_sum": "Their sums", "weights": "The weights",
    "output": "The output",
}  # fmt: skip
KERNELS = {
    "eager": "torch's eager attention, softmax(q @ k.T * scale + mask) @ v, on a CPU: each matrix product sums in float32 and rounds "
    "once to {fmt}; softmax works in float32 and rounds each weight once",
    "sdpa": "torch's scaled_dot_product_attention, math backend, on a CPU: the {fmt} inputs turned into float32, q and k each "
    "times √scale, everything in float32, only the output rounded to {fmt}",
    "naive": "a kernel without float32: each product, sum, exponential and division rounded to {fmt}, every sum one term after the "
    "other (torch runs none like it: its kernels keep their sums in float32)",
    "flash": "FlashAttention's float32 accumulators (torch's CPU flash kernel), {block} keys a block: float32 scores and a running "
    "maximum, e^(s − m) rounded to {fmt} before it multiplies v, the running sum and output in float32, divided once at the end",
}


INPUTS = ("The kernel's inputs are the head's exact q, k and v (after any QK-norm, RoPE and value norm) rounded once to {fmt}; a model that runs "
          "in {fmt} has rounded inside its projections and earlier layers too.")
PAIRS = ("scores", "scaled", "exp", "weights")  # the steps of tokens × tokens: a row per query, a column per key
KEYS = ("k", "v", "k_scaled")  # the steps with a row per key


def kernel_words(lab: Lab) -> str:
    """What the kernel does, in one sentence."""
    return KERNELS[lab.kernel].format(fmt=lab.format.name, block=f"{lab.block:,}" if lab.block else "")


def error_text(x: float) -> str:
    """An error as people compare errors: 3 significant digits in scientific notation, a sign always, 0 as 0."""
    if x == 0:
        return "0"
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:+.2e}"


def _where(step: Step, index: tuple[int, ...], queries: Sequence[str], keys: Sequence[str]) -> str:
    """The cell of the step at `index`, in words: "'cat' → 'mat'", "'cat', number 2", "'cat'"."""
    if step.key in PAIRS:
        return f"{queries[index[0]]!r} → {keys[index[1]]!r}"
    rows = keys if step.key in KEYS else queries
    if len(index) == 1:
        return repr(rows[index[0]])
    return f"{rows[index[0]]!r}, number {index[1] + 1}"


def source(step: Step) -> str:
    """Where a step's own error comes from."""
    if step.key in ("q", "k", "v"):
        return f"the rounding of the input to {step.held_in}"
    return step.how


def _overflow(step: Step) -> str:
    over, under, nan = int(step.overflowed.sum()), int(step.underflowed.sum()), int(step.invalid.sum())
    parts = [f"{over} overflowed to ±∞"] * bool(over) + [f"{nan} became NaN"] * bool(nan) + [f"{under} underflowed to 0"] * bool(under)
    return "; ".join(parts)


def sentence(step: Step, queries: Sequence[str], keys: Sequence[str]) -> str:
    """A step's largest error in words: where, how much it carried in, how much it added and why."""
    index = step.worst()
    error, carried, own = (float(a[index]) for a in (step.error, step.carried, step.own))
    where = _where(step, index, queries, keys)
    if step.invalid[index]:
        return (f"{TITLES[step.key]} are NaN (not a number) at {where}, where the exact value is {significant(float(step.exact[index]), 4)}: "
                "a number overflowed to ∞ before this step, and ∞ − ∞ or ∞ / ∞ has no value.")  # fmt: skip
    if step.overflowed[index]:
        return f"{TITLES[step.key]} overflow {step.held_in} at {where}: the exact value {significant(float(step.exact[index]), 4)} is beyond its largest number."
    text = (f"{TITLES[step.key]}: largest error {error_text(error)} at {where}, of which {error_text(carried)} carried in and "
            f"{error_text(own)} added here ({source(step)}).")  # fmt: skip
    extra = _overflow(step)
    return f"{text} {extra[0].upper()}{extra[1:]}." if extra else text


def lessons(lab: Lab, rows: Sequence[int], precision: int, queries: Sequence[str], keys: Sequence[str]) -> list[str]:
    """What the computation teaches, for the query rows `rows` (from 0): e^x's limit and the shift, the weights' sums, the first error shown."""
    fmt = lab.format
    said = []
    logits = lab.logits[list(rows)]  # (R, L_k) exact, −∞ where hidden
    i, j = (int(x) for x in np.unravel_index(int(np.argmax(logits)), logits.shape))
    top = float(logits[i, j])
    limit = f"In {fmt.name}, e^(score) overflows at score > {fmt.exp_limit:.2f} (e^{fmt.exp_limit:.2f} = {significant(fmt.largest, 5)}, its largest number)"
    if top > fmt.exp_limit:
        said.append(f"{limit}: the largest score here, {fixed(top, precision)} ({queries[rows[i]]!r} → {keys[j]!r}), would give ∞. That is "
                    "why the maximum is subtracted first: every exponent is then ≤ 0 and the largest exponential is e^0 = 1.")  # fmt: skip
    else:
        said.append(f"{limit}; the largest score here is {fixed(top, precision)}, so e^(score) would fit, and the kernel subtracts each "
                    "row's maximum anyway, so that no score can overflow: its largest exponential is e^0 = 1.")  # fmt: skip
    for key, what in (("exp", "exponential"), ("weights", "weight")):
        made = lab.step(key)
        if made is not None and (under := int(made.underflowed[list(rows)].sum())):
            held = FLOAT32 if made.held_in == FLOAT32.name else fmt
            said.append(f"{under} {what}{'s' * (under > 1)} underflowed to 0 in {held.name} (below half its smallest number, "
                        f"{held.smallest:.3g}): {'those keys get' if under > 1 else 'that key gets'} no weight at all, "
                        "though the exact weight is not 0.")  # fmt: skip
    exp_sum = lab.step("exp_sum")
    if exp_sum is not None and lab.kernel == "naive":
        said.append(_accumulator(exp_sum, fmt, rows, queries))
    sums = lab.weight_sums
    weights = lab.step("weights")
    if sums is not None and weights is not None:
        part = sums[list(rows)]
        far = int(np.argmax(np.abs(part - 1.0)))  # a NaN first
        if np.isnan(part[far]):
            said.append(f"The weights of {queries[rows[far]]!r} are NaN in {weights.held_in}: a score overflowed to ∞ before the softmax, "
                        "so x − max was ∞ − ∞, which is not a number. Subtracting the maximum prevents overflow in e^x, not in the scores.")  # fmt: skip
        elif part[far] == 1.0:
            said.append(f"The weights sum to exactly 1 in {weights.held_in} here.")
        else:
            why = "they were divided by that running sum" if lab.kernel == "naive" else "each weight was rounded on its own"
            said.append(f"The weights of {queries[rows[far]]!r} sum to {significant(float(part[far]), 8)} in {weights.held_in}, not 1: {why}.")
    else:
        said.append("This kernel never holds the weights: it multiplies v by e^(s − m) and divides the output by the sum once at the end.")
    said.append(_output_split(lab, rows, queries))
    half = 0.5 * 10.0**-precision
    for step in lab.steps:
        per_query = step.key not in KEYS and step.error.shape[0] == lab.visible.shape[0]
        errors = (step.error[list(rows)] if per_query else step.error).ravel()
        worst = float(errors[int(np.argmax(np.abs(errors)))]) if errors.size else 0.0  # the largest error, with its sign
        if abs(worst) >= half or step.overflowed.any():
            before = "" if step is lab.steps[0] else "; every step before it agrees with the exact value to the digits shown"
            said.append(f"At {precision} decimals the first step whose error shows is {TITLES[step.key].lower()} ({step.formula}, largest "
                        f"error {error_text(worst)}){before}.")  # fmt: skip
            break
    else:
        said.append(f"No step's error shows at {precision} decimals: {fmt.name} agrees with the exact values to every digit shown.")
    return said


def _output_split(lab: Lab, rows: Sequence[int], queries: Sequence[str]) -> str:
    """Where the output's largest error (on `rows`) comes from: rounding q, k and v, or the kernel's own arithmetic."""
    output = lab.steps[-1]
    inputs, kernel = lab.output_split
    picked = list(rows)
    part = np.abs(output.error[picked])
    r, c = (int(x) for x in np.unravel_index(int(np.argmax(np.where(np.isnan(part), np.inf, part))), part.shape))
    i = picked[r]
    return (f"The output's largest error, {error_text(float(output.error[i, c]))} ({queries[i]!r}, number {c + 1}), is "
            f"{error_text(float(inputs[i, c]))} from rounding q, k and v to {lab.format.name} (the exact attention of the rounded inputs) "
            f"and {error_text(float(kernel[i, c]))} from the kernel's own arithmetic.")


def _accumulator(step: Step, fmt: Format, rows: Sequence[int], queries: Sequence[str]) -> str:
    """Why sums are kept in float32: how far the format's running sum of the exponentials ends from the exact sum, on the worst row."""
    picked = list(rows)
    relative = np.abs(step.error[picked]) / step.exact[picked]  # (R,)
    worst = int(np.argmax(relative))
    i = picked[worst]
    bits = round(1 - math.log2(fmt.epsilon))  # significant bits, the leading one included: 8 in bfloat16, 11 in float16
    end = float(step.value[i])
    gap = fmt.epsilon * 2.0 ** math.floor(math.log2(end)) if math.isfinite(end) and end > 0 else None  # the format's spacing at the sum
    there = ("" if gap is None else f" At {significant(end, 6)}, neighbouring {fmt.name} numbers are {significant(gap, 6)} apart: each "
             f"exponential below {significant(gap / 2, 6)} added there (each is at most 1) rounded back to the same sum.")  # fmt: skip
    return (f"The sum of the exponentials runs in {fmt.name}: for {queries[i]!r} it ends at {significant(end, 6)} where the "
            f"exact sum is {significant(float(step.exact[i]), 6)} ({significant(100 * float(relative[worst]), 3)}% off, "
            f"{error_text(float(step.own[i]))} of it added by the sum itself).{there} {fmt.name} keeps {bits} significant bits, so once a running sum "
            f"reaches {significant(2 / fmt.epsilon, 8)}, adding 1 no longer changes it: that is why attention kernels keep their sums in float32.")  # fmt: skip


MAX_ROWS = 12  # rows of a step's table shown unless --full (the first ten and the last)
MAX_COLUMNS = 8  # columns of a step's table shown unless --full (the first seven and the last)


def _kept(count: int, limit: int, full: bool) -> list[int | None]:
    """The indices shown of `count`: all of them, or the first limit − 1, None (for "…") and the last."""
    if full or count <= limit:
        return list(range(count))
    return [*range(limit - 2), None, count - 1]


def _cell(value: float, error: float, precision: int, hidden: bool) -> str:
    if hidden:
        return "masked"
    return f"{fixed(value, precision)} ({error_text(error)})"


def _labels(step: Step, queries: Sequence[str], keys: Sequence[str]) -> list[str]:
    return list(keys if step.key in KEYS else queries)


def step_table(step: Step, queries: Sequence[str], keys: Sequence[str], precision: int, *, full: bool) -> Table:
    """A step's numbers in the format, each with its error in brackets; the first and last rows and columns unless `full`."""
    labels = _labels(step, queries, keys)
    value, error, hidden = step.value, step.error, step.visible
    rows = _kept(value.shape[0], MAX_ROWS, full)
    if value.ndim == 1:
        return Table(["token", step.held_in + " (error)"],
                     [[labels[i], _cell(float(value[i]), float(error[i]), precision, False)] if i is not None else ["…", ""] for i in rows],
                     [False, True])  # fmt: skip
    columns = _kept(value.shape[1], MAX_COLUMNS, full)
    names = [("…" if c is None else keys[c] if step.key in PAIRS else str(c + 1)) for c in columns]
    body = [[labels[i], *("" if c is None else _cell(float(value[i, c]), float(error[i, c]), precision, hidden is not None and not hidden[i, c])
                          for c in columns)] if i is not None else ["…", *([""] * len(columns))] for i in rows]  # fmt: skip
    return Table(["", *names], body, [False, *([True] * len(columns))])


def summary_table(lab: Lab, queries: Sequence[str], keys: Sequence[str], precision: int) -> Table:
    """One row per step: its formula, the format it is held in, its largest error (where) split into carried in and added here."""
    body = []
    for step in lab.steps:
        index = step.worst()
        body.append([TITLES[step.key], step.formula, step.held_in, _where(step, index, queries, keys), fixed(float(step.value[index]), precision),
                     fixed(float(step.exact[index]), precision + 2), error_text(float(step.error[index])), error_text(float(step.carried[index])),
                     error_text(float(step.own[index]))])  # fmt: skip
    header = ["step", "formula", "held in", "largest error at", lab.format.name, "exact", "error", "carried in", "added here"]
    return Table(header, body, [False, False, False, False, True, True, True, True, True])


def _named(step: Step) -> str:
    """A step's heading: 'The scores  q·kᵀ  (bfloat16)'; an input's formula is its own name and is left out."""
    formula = "" if step.formula == step.key else f"  {step.formula}"
    return f"{TITLES[step.key]}{formula}  ({step.held_in})"


def tidy(labs: dict[int, Lab], queries: Sequence[str], keys: Sequence[str], row: int | None = None) -> Table:
    """CSV's table: one line per number of every step (of query `row` only, from 0, when given), every number whole."""
    body = []
    for h, lab in labs.items():
        L_q = lab.visible.shape[0]
        for made in lab.steps:
            one = row is not None and made.key not in KEYS and made.value.shape[0] == L_q
            rows = slice(row, None if row is None else row + 1) if one else slice(None)  # the query's row, or every row
            numbers = [a[rows] for a in (made.value, made.exact, made.error, made.carried, made.own)]
            seen = None if made.visible is None else made.visible[rows]
            labels = _labels(made, queries, keys)
            texts = [[plain(x, None) for x in a.ravel().tolist()] for a in numbers]  # each array's numbers, in order
            for n, index in enumerate(np.ndindex(*numbers[0].shape)):
                if seen is not None and not seen[index]:
                    continue
                label = labels[index[0] + (rows.start or 0)]
                column = keys[index[1]] if made.key in PAIRS else str(index[1] + 1) if len(index) > 1 else ""
                body.append([str(h), lab.format.key, lab.kernel, made.key, made.held_in, label, column, *(t[n] for t in texts)])
    header = ["head", "dtype", "kernel", "step", "held_in", "row", "column", "value", "exact", "error", "carried", "added"]
    return Table(header, body, [True, False, False, False, False, False, False, True, True, True, True, True])


def title(lab: Lab, name: str) -> str:
    block = f", {lab.block:,} keys a block" if lab.kernel == "flash" else ""
    return f"{name} in {lab.format.name}, kernel {lab.kernel}{block}, beside the exact values"


def run_document(result: RunResult, labs: dict[int, Lab], precision: int, *, full: bool, tidied: bool) -> Document:
    """`run --dtype`: per head, the summary table, the lesson, then each step's numbers with their errors; CSV's table when `tidied`."""
    s = result.scenario
    first = next(iter(labs.values()))
    heading = title(first, s.name or " ".join(s.tokens))
    blocks: list[Block] = [Heading(heading), Paragraph(f"As {kernel_words(first)}. {INPUTS.format(fmt=first.format.name)} Each number is the "
                                                       "kernel's, with its error (kernel − exact) in brackets.")]  # fmt: skip
    for h, lab in labs.items():
        if len(labs) > 1 or s.heads > 1:
            blocks.append(Heading(f"Head {h}", 2))
        blocks.append(summary_table(lab, s.tokens, s.key_tokens, precision))
        blocks.extend(Note(text) for text in lessons(lab, range(lab.visible.shape[0]), precision, s.tokens, s.key_tokens))
        for step in lab.steps:
            blocks.append(Heading(_named(step), 3))
            blocks.append(step_table(step, s.tokens, s.key_tokens, precision, full=full))
    return Document(heading, blocks, tidy=tidy(labs, s.tokens, s.key_tokens) if tidied else None)


def explain_document(result: RunResult, lab: Lab, head: int, row: int, precision: int, *, full: bool, tidied: bool) -> Document:
    """`explain --dtype`: query `row` (from 0) followed through the kernel's steps, each with its numbers, its error in words, and the lesson."""
    s = result.scenario
    token = s.tokens[row]
    heading = title(lab, f"{token!r}, head {head},")
    blocks: list[Block] = [Heading(heading), Paragraph(f"As {kernel_words(lab)}. {INPUTS.format(fmt=lab.format.name)}")]
    for n, step in enumerate(lab.steps, start=1):
        blocks.append(Heading(f"{n}. {_named(step)}", 2))
        blocks.append(Paragraph(sentence(_row_step(step, row, lab.visible.shape[0]), s.tokens[row : row + 1], s.key_tokens)))
        blocks.append(_row_table(step, row, lab.visible.shape[0], s.tokens, s.key_tokens, precision, full=full))
    blocks.append(Heading("What it shows", 2))
    blocks.extend(Paragraph(text) for text in lessons(lab, [row], precision, s.tokens, s.key_tokens))
    if (sums := lab.weight_sums) is not None:
        blocks.append(Values([("Σ weights", significant(float(sums[row]), 8))]))
    return Document(heading, blocks, tidy=tidy({head: lab}, s.tokens, s.key_tokens, row) if tidied else None)


def _row_step(step: Step, row: int, L_q: int) -> Step:
    """The step with only query `row` (steps of every key, k and v, stay whole)."""
    if step.key in KEYS or step.value.shape[0] != L_q:
        return step
    cut = slice(row, row + 1)
    return step._replace(value=step.value[cut], exact=step.exact[cut], ideal=step.ideal[cut], visible=None if step.visible is None else step.visible[cut],
                         error=step.error[cut], carried=step.carried[cut], own=step.own[cut])  # fmt: skip


def _row_table(step: Step, row: int, L_q: int, queries: Sequence[str], keys: Sequence[str], precision: int, *, full: bool) -> Table:
    """The query's numbers of the step: one row per key (tokens × tokens), per number (q, output), or per key's vector (k, v).

    Unless `full`, the first and last keys or numbers only.
    """
    fmt = step.held_in
    header = ["", fmt, "exact", "error", "carried in", "added here"]
    numeric = [False, True, True, True, True, True]
    gap = ["…", "", "", "", "", ""]

    def line(label: str, at: tuple[int, ...]) -> list[str]:
        return [label, fixed(float(step.value[at]), precision), fixed(float(step.exact[at]), precision + 2),
                *(error_text(float(a[at])) for a in (step.error, step.carried, step.own))]  # fmt: skip

    if step.key in PAIRS:
        seen = np.ones(step.value.shape[1], dtype=bool) if step.visible is None else step.visible[row]
        body = [gap if j is None else line(keys[j], (row, j)) if seen[j] else [keys[j], *(["masked"] * 5)]
                for j in _kept(step.value.shape[1], MAX_ROWS, full)]  # fmt: skip
        return Table(header, body, numeric)
    if step.value.ndim == 1:
        return Table(header, [line(queries[row], (row,))], numeric)
    if step.key in KEYS:
        largest = np.abs(step.error).argmax(axis=1)
        body = [gap[:5] if j is None else [keys[j], short_vector(step.value[j], precision, whole=False, full=full),
                                           *(error_text(float(a[j, largest[j]])) for a in (step.error, step.carried, step.own))]
                for j in _kept(step.value.shape[0], MAX_ROWS, full)]  # fmt: skip
        return Table(["", fmt, "largest error", "carried in", "added here"], body, [False, False, True, True, True])
    r = row if step.value.shape[0] == L_q else 0
    return Table(header, [gap if c is None else line(str(c + 1), (r, c)) for c in _kept(step.value.shape[1], MAX_ROWS, full)], numeric)


def lab_json(lab: Lab, rows: Sequence[int] | None = None) -> dict[str, Any]:
    """The "precision" object: the format and kernel, e^x's limit, and per step what the kernel holds, the exact value and the errors.

    With `rows` (query rows from 0, explain's), the tokens × tokens steps and the per-query vectors hold only those rows.
    """
    L_q = lab.visible.shape[0]

    def cut(step: Step, a: np.ndarray) -> np.ndarray:
        if rows is None or step.key in KEYS or a.shape[0] != L_q:
            return a
        return a[list(rows)]

    steps = []
    for step in lab.steps:
        hidden = None if step.visible is None else ~step.visible
        value = step.value if hidden is None else np.where(hidden, np.nan, step.value)  # JSON: null where the mask hides the cell
        exact = step.exact if hidden is None else np.where(hidden, np.nan, step.exact)
        steps.append({
            "step": step.key, "formula": step.formula, "held_in": step.held_in, "how": step.how,
            "value": cut(step, value), "exact": cut(step, exact), "error": cut(step, step.error), "carried": cut(step, step.carried),
            "added": cut(step, step.own), "overflowed": int(step.overflowed.sum()), "underflowed": int(step.underflowed.sum()),
        })  # fmt: skip
    sums = lab.weight_sums
    return {
        "dtype": lab.format.key, "format": lab.format.name, "kernel": lab.kernel, "block_size": lab.block, "exp_limit": lab.format.exp_limit,
        "largest": lab.format.largest, "epsilon": lab.format.epsilon, "steps": steps,
        "output_of_rounded_inputs": lab.inputs_output if rows is None else lab.inputs_output[list(rows)],
        "weight_sums": None if sums is None else (sums if rows is None else sums[list(rows)]),
    }  # fmt: skip
