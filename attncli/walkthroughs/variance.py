"""The √d experiment (`attncli variance`) as a document: each measurement beside its theory, and a note on saturation; in CSV every number whole."""

from __future__ import annotations

from attncli.core.variance import VarianceRow
from attncli.document.blocks import Document, Heading, Note, Table
from attncli.document.numbers import fixed, plain


def variance_document(rows: list[VarianceRow], *, keys: int) -> Document:
    samples = f"{rows[0].samples:,} samples per d; " if rows else ""
    table = Table(
        ["d", "mean q·k", "var q·k", "var scaled", "max α", "max α scaled"],
        [[str(r.d), f"{fixed(r.mean_raw, 3)} (0)", f"{fixed(r.var_raw, 2)} ({r.d})", f"{fixed(r.var_scaled, 3)} (1)",
          fixed(r.max_weight_raw, 3), fixed(r.max_weight_scaled, 3)] for r in rows],
        [True] * 6,
    )  # fmt: skip
    note = Note(
        f"max α: the mean largest softmax weight of a query over {keys} random keys (1/{keys} = {1 / keys:.3f} would be "
        "uniform). Without scaling the variance of q·k grows like d and the softmax heads for one-hot; dividing by √d "
        "keeps the variance at 1 and the weights spread."
    )
    tidy = Table(  # CSV: every number whole, one column each, the theory left to the reader (0, d, 1)
        ["d", "samples", "mean_qk", "var_qk", "var_scaled", "max_weight", "max_weight_scaled"],
        [[str(r.d), str(r.samples), *(plain(x, None) for x in (r.mean_raw, r.var_raw, r.var_scaled, r.max_weight_raw, r.max_weight_scaled))]
         for r in rows],
        [True] * 7,
    )  # fmt: skip
    title = f"q·k for q, k ~ N(0, I_d): {samples}scaled = q·k/√d; theory in brackets"
    return Document(title, [Heading(title), table, note], tidy=tidy)
