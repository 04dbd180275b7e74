"""An explanation's matrices: the query's row of weights and a table of its keys, as blocks any format draws."""

from __future__ import annotations

import numpy as np

from attncli.core.explain import Explanation
from attncli.document.blocks import ExplainArticle, KeyRow, Matrix, Steps
from attncli.document.notation import head_mark


def query_weights(expl: Explanation) -> Matrix:
    """The query's row of the attention weights as a 1 × L_k view."""
    s = expl.scenario
    n = head_mark(expl.head.head) if s.heads > 1 else ""
    hidden = np.array([[key.masked for key in expl.keys]]) if any(key.masked for key in expl.keys) else None
    return Matrix(
        key="weights", stage="weights", head=expl.head.head if s.heads > 1 else None, title=f"Attention weights of “{expl.token}”",
        formula=f"α{n} = softmax(q·Kᵀ{'/√d_k' if s.scale.mode == 'sqrt_dk' else ''})", tex="", data=np.array([[k.weight for k in expl.keys]]),
        rows=[expl.label], cols=[key.label for key in expl.keys], hidden=hidden, square=True,
    )  # fmt: skip


def key_table(expl: Explanation) -> Matrix:
    """One row per key: score, scaled score, exponential and weight."""
    s = expl.scenario
    columns = ["score"] + (["scaled"] if s.scale.mode != "none" else []) + (["biased"] if s.has_bias else []) + ["e^x", "weight"]
    rows = []
    for key in expl.keys:
        row = [key.score] + ([key.scaled] if s.scale.mode != "none" else []) + ([key.logit] if s.has_bias else [])
        rows.append(row + [key.exp, key.weight])
    return Matrix(key="explain", stage="explain", head=None, title=f"“{expl.token}” and each key", formula="",
                      tex="", data=np.array(rows, dtype=np.float64), rows=[key.label for key in expl.keys], cols=columns)  # fmt: skip


def article(expl: Explanation, intro: list[str], steps: Steps) -> ExplainArticle:
    """explain's article (Markdown): the query word's inputs, each key's numbers and the output, before `steps`."""
    s = expl.scenario
    inputs = None
    if expl.result.X is not None:
        # a checkpoint's X is a layer's normed hidden states (word_marks: a real tokenizer's), a scenario's its embeddings
        section, column = ("Hidden states", "Hidden state (X)") if s.word_marks else ("Embeddings", "Embedding (E)")
        inputs = (section, column, list(s.query_labels), expl.result.X)
    keys = [KeyRow(k.label, k.masked, k.score, k.scaled, k.logit, k.exp, k.weight, k.v, k.weighted_v) for k in expl.keys]
    return ExplainArticle(expl.token, intro, inputs, s.scale.mode != "none", s.has_bias, keys, expl.exp_sum, expl.output,
                          expl.exact_output, steps)  # fmt: skip
