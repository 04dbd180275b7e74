"""`attncli run` as a document: the scenario's header, the matrices of the shown stages, and the hand-rounded output beside the exact one."""

from __future__ import annotations

from collections.abc import Sequence

from attncli.core.engine import RunResult
from attncli.document.blocks import Comparison, Matrix, RunDocument, Summary
from attncli.document.summary import describe


def summary(result: RunResult) -> Summary:
    s = result.scenario
    return Summary(s.name, s.tokens, s.context, s.description, describe(s), result.round_steps, s.heads)


def run_document(result: RunResult, matrices: Sequence[Matrix]) -> RunDocument:
    """The document of `matrices` (views.views of the result); the comparison only when rounded by hand and the output is shown."""
    comparison = None
    if result.exact is not None and result.round_steps is not None and any(m.key in ("output", "final") for m in matrices):
        comparison = Comparison(result.round_steps, result.scenario.query_labels, result.output, result.exact.output)
    return RunDocument(summary(result), matrices, comparison)
