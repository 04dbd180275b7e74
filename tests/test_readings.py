"""The map's readings lead to heads worth explaining: sinks summed up in one line, the heads that do something listed."""

from __future__ import annotations

import numpy as np

from attncli.core.heads import HeadMap
from attncli.walkthroughs import heads as walk

TOKENS = ("[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]")


def _weights(kind: str, L: int = len(TOKENS)) -> np.ndarray:
    """(L, L) causal rows: all on the first token (sink), on the previous token, or 60% previous and 40% first (both)."""
    w = np.zeros((L, L))
    for i in range(L):
        if kind == "sink" or i == 0:
            w[i, 0] = 1.0
        elif kind == "previous":
            w[i, i - 1] = 1.0
        else:  # both: a head that sinks what it does not use, and reads the previous token
            w[i, i - 1] += 0.6
            w[i, 0] += 0.4 if i > 1 else 0.4
    return w


def _rows(kinds: list[str]) -> list[walk.HeadRow]:
    heads = HeadMap(heads=len(kinds), kv_heads=len(kinds), tokens=TOKENS)
    visible = np.tril(np.ones((len(TOKENS), len(TOKENS)), dtype=bool))
    heads.add(np.stack([_weights(k) for k in kinds]), visible)
    return walk.rows(heads, walk.Source("scenario", "s.yaml", None, None, None))


def test_sinks_are_one_line_and_the_readings_name_what_heads_do():
    """Five sinks and a previous-token head: one summary line for the five, and the previous-token head as the notable one."""
    rows = _rows(["sink"] * 5 + ["previous"])
    summary = walk.sinks(rows, TOKENS)
    assert summary is not None and summary.startswith("5 of 6 heads put most of their weight on the first token '[CLS]': sinks")
    assert [(r.head, r.behaviour) for r in walk.notable(rows)] == [(6, "previous_token")]


def test_a_head_that_also_sinks_is_read_by_what_else_it_does():
    """A head with 40% on the first token and 60% on the previous one is a previous-token head, not a sink."""
    rows = _rows(["both", "sink"])
    assert rows[0].behaviour == "previous_token" and "previous token" in (rows[0].reading or "")
    assert walk.sinks(rows, TOKENS) is not None and "1 of 2 heads" in (walk.sinks(rows, TOKENS) or "")


def test_top_and_sort_act_on_the_readings():
    """--top N keeps N readings, --sort orders them by that statistic instead of by strength."""
    rows = _rows(["previous", "both", "previous", "sink"])
    assert len(walk.notable(rows, 2)) == 2
    by_first = walk.notable(rows, None, "first_token")
    assert by_first[0].head == 2  # 'both' puts the most weight on the first token among the heads that do something


def test_no_sink_says_nothing():
    """A map without sinks has no summary line."""
    assert walk.sinks(_rows(["previous", "previous"]), TOKENS) is None
