"""`attncli run` as a document: the scenario's header, the matrices of the shown stages, and the hand-rounded output beside the exact one."""

from __future__ import annotations

from collections.abc import Sequence

from attncli.core.engine import RunResult
from attncli.document.blocks import Comparison, Matrix, RunDocument, Summary
from attncli.document.summary import describe, told
from attncli.errors import option


def summary(result: RunResult, *, show_path: bool = False, long_notes: bool = False) -> Summary:
    """The header: one title line, the description without the sentence it may repeat, the settings and the notes.

    A checkpoint's header names its model, not where it was read from (`show_path` adds that); its notes on how the layer
    was read are left out unless `long_notes`, and `more` says so.
    """
    s = result.scenario
    description = told(s.description, " ".join(s.tokens))
    if show_path and s.origin is not None:
        description += f"{', ' if description else ''}read from {s.origin.shown or s.origin.folder}"
    more = ""
    if s.details and not long_notes:
        more = f"{len(s.details)} more note{'s' * (len(s.details) > 1)} on how the layer was read: {option('long_notes')} shows them."
    return Summary(s.name, s.tokens, s.context, description, describe(s, long_notes=long_notes), result.round_steps, s.heads, more)


def run_document(result: RunResult, matrices: Sequence[Matrix], *, show_path: bool = False, long_notes: bool = False) -> RunDocument:
    """The document of `matrices` (views.views of the result); the comparison only when rounded by hand and the output is shown."""
    comparison = None
    if result.exact is not None and result.round_steps is not None and any(m.key in ("output", "final") for m in matrices):
        comparison = Comparison(result.round_steps, result.scenario.query_labels, result.output, result.exact.output)
    return RunDocument(summary(result, show_path=show_path, long_notes=long_notes), matrices, comparison)
