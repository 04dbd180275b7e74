"""JSON output: a documented contract (`schema` key), standard JSON only, full float64 precision.

Keys are added in later versions, never renamed or removed. A masked cell is `null`.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from attncli.engine import HeadResult, RunResult
from attncli.explain import Explanation
from attncli.scenario import Scenario

RUN_SCHEMA = "attncli.run/1"
EXPLAIN_SCHEMA = "attncli.explain/1"


def scenario_json(s: Scenario) -> dict[str, Any]:
    return {
        "name": s.name,
        "tokens": list(s.tokens),
        "d_model": s.d_model,
        "heads": s.heads,
        "d_k": s.d_k,
        "d_v": s.d_v,
        "d_out": s.d_out,
        "scale": {"mode": s.scale.mode, "divisor": s.scale.divisor},
        "mask": s.mask,
    }


def rounding_json(result: RunResult) -> dict[str, Any] | None:
    if result.exact is None:
        return None
    return {"decimals": result.round_steps, "exact_output": matrix(result.exact.output)}


def run_json(result: RunResult, stages: tuple[str, ...], heads: list[int]) -> dict[str, Any]:
    """The attncli.run/1 document; stages left out are simply absent."""
    doc: dict[str, Any] = {"schema": RUN_SCHEMA, "scenario": scenario_json(result.scenario)}
    if "embeddings" in stages:
        doc["embeddings"] = matrix(result.X)
    doc["heads"] = [_head_json(result.head(h), stages) for h in heads]
    if "output" in stages:
        doc["concat"] = matrix(result.concat)
        doc["output"] = matrix(result.output)
    doc["rounding"] = rounding_json(result)
    return doc


def _head_json(head: HeadResult, stages: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"head": head.head}
    for stage, letter in (("q", "Q"), ("k", "K"), ("v", "V")):
        if stage in stages:
            out[f"W_{letter}"] = matrix(getattr(head, f"W_{letter}"))
            bias = getattr(head, f"b_{letter}")
            if bias is not None:
                out[f"b_{letter}"] = bias.tolist()
            out[letter] = matrix(getattr(head, letter))
    if "scores" in stages:
        out["scores"] = matrix(head.scores)
    if "scaled" in stages:
        out["scaled"] = matrix(head.scaled)
    if "masked" in stages:
        out["masked"] = matrix(head.masked)
    if "exp" in stages:
        out["shift"] = head.shift.tolist()
        out["exp"] = matrix(head.exp)
        out["exp_sum"] = head.exp_sum.tolist()
    if "weights" in stages:
        out["weights"] = matrix(head.weights)
    if "output" in stages:
        out["output"] = matrix(head.output)
    return out


def explain_json(expl: Explanation) -> dict[str, Any]:
    """The attncli.explain/1 document. A masked key keeps its score and scaled score; exp and weight are 0."""
    return {
        "schema": EXPLAIN_SCHEMA,
        "scenario": scenario_json(expl.scenario),
        "head": expl.head.head,
        "query": {"position": expl.position, "token": expl.token, "q": expl.q.tolist()},
        "keys": [
            {
                "position": key.position,
                "token": key.token,
                "k": key.k.tolist(),
                "v": key.v.tolist(),
                "score": key.score,
                "scaled": key.scaled,
                "masked": key.masked,
                "exp": key.exp,
                "weight": key.weight,
                "weighted_v": key.weighted_v.tolist(),
            }
            for key in expl.keys
        ],
        "shift": expl.shift,
        "exp_sum": expl.exp_sum,
        "output": expl.output.tolist(),
        "rounding": None
        if expl.exact_output is None
        else {"decimals": expl.result.round_steps, "exact_output": expl.exact_output.tolist()},
    }


def matrix(array: np.ndarray) -> list[list[float | None]]:
    """Rows of floats; -inf (a masked cell) becomes null, as standard JSON has no infinity."""
    if np.isfinite(array).all():
        return array.tolist()
    return [[x if x != -np.inf else None for x in row] for row in array.tolist()]


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"
