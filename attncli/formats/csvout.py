"""CSV: one stage of one head as a plain matrix, or the keys of an explanation, for spreadsheets and scripts.

Numbers carry full float64 precision (the shortest text that reads back to the same
float) unless --precision asks for fewer decimals (then a number that rounds to zero is
0.00, never -0.00, as in every other format); a masked cell is -inf.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

import numpy as np

from attncli.core.engine import RunResult
from attncli.core.explain import Explanation
from attncli.document import stages
from attncli.document.escape import csv_cell
from attncli.document.numbers import plain, plain_writer
from attncli.document.views import view_of
from attncli.errors import AttnError

number = plain  # CSV's numbers: full precision, or fixed decimals without "-0.00"


def _write(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def run_csv(result: RunResult, *, stage: str, head: int, precision: int | None) -> Iterator[bytes]:
    """The matrix of one stage of one head, with its labels, written a block of rows at a time."""
    view = view_of(result, stages.main_row(stage).key, head)
    if view is None:
        raise AttnError(f"this scenario has no {stage!r} stage", key="--stages", expected="a stage it has, e.g. weights")
    return _matrix_rows(view.data, view.rows, view.cols, precision)


BLOCK_VALUES = 1 << 16  # numbers per chunk: about 1.5 MB of text


def _matrix_rows(data: np.ndarray, rows: list[str], cols: list[str], precision: int | None) -> Iterator[bytes]:
    yield _write([["token", *map(csv_cell, cols)]]).encode("utf-8")
    write = plain_writer(precision)  # a whole row through one map() each
    step = max(1, BLOCK_VALUES // max(1, data.shape[1]))
    for start in range(0, data.shape[0], step):
        block = data[start : start + step].tolist()  # Python floats, formatted as number() does
        lines = [_field(csv_cell(label)) + "," + ",".join(map(write, values)) for label, values in zip(rows[start : start + step], block)]
        yield ("\n".join(lines) + "\n").encode("utf-8")


def _field(text: str) -> str:
    """One CSV field as csv.writer writes it (minimal quoting); `text` has no line breaks (csv_cell made them visible)."""
    return '"' + text.replace('"', '""') + '"' if "," in text or '"' in text else text


def explain_csv(expl: Explanation, *, precision: int | None) -> str:
    d_v = len(expl.output)
    biased = expl.scenario.has_bias
    header = ["position", "token", "score", "scaled"] + ["bias", "logit"] * biased + ["masked", "exp", "weight"]
    header += [f"v{i}" for i in range(1, d_v + 1)] + [f"weighted_v{i}" for i in range(1, d_v + 1)]
    rows = [header]
    for key in expl.keys:
        rows.append(
            [str(key.position), csv_cell(key.token), number(key.score, precision), number(key.scaled, precision)]
            + ([number(key.bias or 0.0, precision), number(key.logit, precision)] if biased else [])
            + ["true" if key.masked else "false", number(key.exp, precision), number(key.weight, precision)]
            + [number(x, precision) for x in key.v]
            + [number(x, precision) for x in key.weighted_v]
        )  # fmt: skip
    if expl.online is not None:  # each key's block and the running state after it (--block-size)
        rows[0] += ["block", "running_max", "rescale", "running_sum"] + [f"running_output{i}" for i in range(1, d_v + 1)]
        for number_, block in enumerate(expl.online.blocks, 1):
            for j in block.keys:
                rows[int(j)] += [str(number_), number(block.max, precision), number(block.rescale, precision),
                                 number(block.sum, precision)] + [number(x, precision) for x in block.output]  # fmt: skip
    return _write(rows)
