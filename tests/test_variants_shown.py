"""Every variant can be shown, and the stage table and the engine's results cover each other.

A variant is shown by its own stage-table rows (`rows`) or its own step of `explain` (`narrate`),
core/variants/shown.py; the first test fails when one is registered without either. The second
pair checks the table against what the engine keeps: every array a result holds is drawn by a
row (or written beside one, a row's `json` keys), and every row, and every stage `run` shows,
has numbers in some result.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attncli.core import engine, explain, variants
from attncli.document import stages
from attncli.sources import builtin
from attncli.sources.yaml_scenario import from_text, load
from attncli.walkthroughs import narration

SHOWN_ELSEWHERE: dict[type, str] = {}  # variants shown by code written before variants owned themselves (none left)

# What a result holds that is no matrix of its own: `visible` is the mask the after-mask rows draw their hidden cells from;
# QK-norm's mean squares are numbers of its explain step (mean(q²), rms(q)), not a matrix of the table.
NOT_A_ROW = {"visible", "q_mean_square", "k_mean_square", "q_measure", "k_measure"}  # a norm's mean squares, a temperature's factors: narrated

GIVEN_BIAS = """name: given-bias
tokens: [the, cat, sat, down]
embeddings: [[1, 0, 2], [0, 1, 1], [2, 2, 0], [1, -1, 0]]
heads: 2
W_Q: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]]
W_K: [[1, 0, 0, 1], [0, 2, 1, 0], [1, 0, 0, 0]]
W_V: [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]]
mask: {window: 1, sinks: 1, padding: [3]}
bias: [[0.5, 0, 0, 1], [0, 0.25, -1, 0], [0, 0, 0, 0], [1, 1, 1, 1]]
alibi: true
rope: {offset: 100}
query_temperature: {beta: 0.5, original: 2}
softcap: 2.0
b_Q: [0.1, 0, -0.2, 0.3]
b_K: [0, 0.5, 0, -0.5]
b_V: [1, 0, 0, 1]
W_O: identity
b_O: [0.5, 0, 0, -0.5]
"""

QK_LAYERNORM = """name: qk-layernorm
tokens: [the, cat, sat]
embeddings: [[1, 0, 2], [0, 1, 1], [2, 2, 0]]
heads: 2
kv_heads: 1
W_Q: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]]
W_K: [[1, 0], [0, 2], [1, -1]]
W_V: [[1, 0], [0, 1], [1, 1]]
qk_layernorm: {q_weight: [[1, 0.5], [2, 1]], k_weight: [[0.5, 1]], eps: 1e-5}
mask: causal
"""

QUERY_LATENT = """  W_DQ: [[1, 0, 0.5, 0], [0, 1, 0, 0.5], [0.5, 0, 1, 0], [0, 0.5, 0, 1]]  # the queries' own latent (C_Q), d_cq = 4
"""


def _results() -> list[engine.RunResult]:
    scenarios = [load(name) for name in builtin.names()]
    scenarios += [load(str(path)) for path in sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))]
    scenarios.append(from_text(GIVEN_BIAS))
    scenarios.append(from_text(QK_LAYERNORM))
    mla = builtin.path("mla").read_text(encoding="utf-8").replace("\nmla:\n", "\nmla:\n" + QUERY_LATENT)
    scenarios.append(from_text(mla.replace("name: mla", "name: mla-query-latent")))
    return [engine.run(s) for s in scenarios]


@pytest.fixture(scope="module")
def results() -> list[engine.RunResult]:
    return _results()


def test_every_registered_variant_has_rows_or_a_step():
    for kind in variants.REGISTRY:
        if kind in SHOWN_ELSEWHERE:
            continue
        rows, narrate = getattr(kind, "rows", ()), getattr(kind, "narrate", None)
        assert rows or callable(narrate), f"{kind.__name__} has no stage-table rows and no step of explain: nothing would show it"
        for row in rows:
            assert row.stage in stages.STAGE_NAMES and any(r.key == row.key for r in stages.ROWS), (kind.__name__, row.key)


def test_the_check_of_a_shown_variant_can_fail(monkeypatch):
    """A variant registered with neither rows nor a step is refused."""

    class Unshown:
        key = "unshown"
        stage = "scaled"

    monkeypatch.setattr(variants, "REGISTRY", (*variants.REGISTRY, Unshown))
    with pytest.raises(AssertionError, match="Unshown has no stage-table rows"):
        test_every_registered_variant_has_rows_or_a_step()


def test_every_narrating_variant_gets_its_step(results):
    """Each variant with a `narrate` that a scenario holds (and that is worth showing) has its step in explain, once."""
    for result in results:
        s = result.scenario
        expl = explain.explain(result, position=s.L, head=s.heads)
        titles = [step.title for step in narration.steps(expl, 3)]
        assert len(titles) == len(set(titles)), (s.name, titles)
        for variant in variants.active(s):
            if hasattr(variant, "narrate") and getattr(variant, "shows", lambda: True)() and s.variant(variants.Mla) is None:
                told = variant.narrate(expl, narration.Say(expl, narration.Writer(), 3, narration.Arithmetic(narration.Writer(), 3), False))
                for one in told if isinstance(told, list) else [told]:  # a variant may tell several steps, or none (a plain KV cache)
                    assert one.title in titles, (s.name, one.title)


def _arrays(owner: object, prefix: str = "") -> dict[str, np.ndarray]:
    """Every array `owner` (a result, a head, or a record inside one) holds, by attribute name (dict entries by their key)."""
    found: dict[str, np.ndarray] = {}
    fields = owner._asdict() if hasattr(owner, "_asdict") else vars(owner)
    for name, value in fields.items():
        if isinstance(value, np.ndarray):
            found[prefix + name] = value
        elif isinstance(value, dict):
            for key, inner in value.items():
                found.update(_arrays(inner, f"{prefix}{name}[{key}].") if not isinstance(inner, np.ndarray) else {f"{prefix}{name}[{key}]": inner})
        elif hasattr(value, "_asdict"):
            found.update(_arrays(value, f"{prefix}{name}."))
    return found


def _drawn(result: engine.RunResult) -> list[np.ndarray]:
    """The numbers every row draws for the result: the shared rows', and each head's rows for each head."""
    got = [row.get(result, head) for head in [None, *result.heads] for row in stages.ROWS if row.per_head == (head is not None)]
    return [array for array in got if isinstance(array, np.ndarray)]


def _beside() -> set[str]:
    """Attribute names written beside a row's own array (its `json` keys)."""
    return {key for row in stages.ROWS for key in row.json}


def test_every_array_of_a_result_has_a_row(results):
    """Each array the engine keeps is a row's numbers (or a view of them), or written beside a row: none is computed and never shown."""
    beside = _beside()
    missing = set()
    for result in results:
        drawn = _drawn(result)
        for owner in [result, *result.heads]:
            for name, array in _arrays(owner).items():
                if name.split(".")[-1] in NOT_A_ROW | beside or array.size == 0:
                    continue
                if not any(np.shares_memory(array, shown) or (array.shape == shown.shape and np.array_equal(array, shown, equal_nan=True))
                           for shown in drawn):  # its own numbers, a view of them, or numbers a row already shows (one head's concat)
                    missing.add(name)
    assert not missing, f"arrays of a result no stage-table row draws: {sorted(missing)}"


def test_every_row_and_every_shown_stage_has_numbers(results):
    """Back: every row of the table draws numbers for some scenario, and every stage plain `run` shows has a row with numbers."""
    used = set()
    for result in results:
        s = result.scenario
        for head in [None, *result.heads]:
            for row in stages.ROWS:
                if row.per_head == (head is not None) and row.get(result, head) is not None:
                    used.add(row.key)
        for stage in stages.default(s):
            rows = [row for row in stages.ROWS if row.stage == stage and not stages.replaced(row, s)]
            if not rows or (stage == "embeddings" and s.X is None):  # shown the variant's way instead (no softmax); Q, K, V (or S, V) given
                continue
            assert any(row.get(result, result.heads[0] if row.per_head else None) is not None for row in rows), (s.name, stage)
    assert used == {row.key for row in stages.ROWS}, f"rows with numbers in no scenario: {sorted({row.key for row in stages.ROWS} - used)}"
