"""JSON output: a documented contract (`schema` key), standard JSON only, full float64 precision.

Keys are added in later versions, never renamed or removed. A masked cell is `null`.
Documents are built with the engine's NumPy arrays in them and encoded by orjson, which
writes each float64 as the shortest text that reads back to the same number (and -inf as
null) some 20 times faster than Python's own float formatting. The text is produced one
matrix at a time, one row per line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import orjson

from attncli.engine import HeadResult, RunResult
from attncli.explain import Explanation
from attncli.scenario import Scenario

RUN_SCHEMA = "attncli.run/1"
EXPLAIN_SCHEMA = "attncli.explain/1"
VARIANCE_SCHEMA = "attncli.variance/1"


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
    return {"decimals": result.round_steps, "exact_output": result.exact.output}


def run_json(result: RunResult, stages: tuple[str, ...], heads: list[int]) -> dict[str, Any]:
    """The attncli.run/1 document; stages left out are simply absent."""
    doc: dict[str, Any] = {"schema": RUN_SCHEMA, "scenario": scenario_json(result.scenario)}
    if "embeddings" in stages:
        doc["embeddings"] = result.X
    doc["heads"] = [_head_json(result.head(h), stages) for h in heads]
    if "output" in stages:
        doc["concat"] = result.concat
        doc["output"] = result.output
    doc["rounding"] = rounding_json(result)
    return doc


_HEAD_STAGES = {
    "q": ("W_Q", "b_Q", "Q"),
    "k": ("W_K", "b_K", "K"),
    "v": ("W_V", "b_V", "V"),
    "scores": ("scores",),
    "scaled": ("scaled",),
    "masked": ("masked",),
    "exp": ("shift", "exp", "exp_sum"),
    "weights": ("weights",),
    "output": ("output",),
}


def _head_json(head: HeadResult, stages: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"head": head.head}
    for stage, keys in _HEAD_STAGES.items():
        if stage in stages:
            out.update({key: getattr(head, key) for key in keys if getattr(head, key) is not None})
    return out


def explain_json(expl: Explanation) -> dict[str, Any]:
    """The attncli.explain/1 document. A masked key keeps its score and scaled score; exp and weight are 0."""
    return {
        "schema": EXPLAIN_SCHEMA,
        "scenario": scenario_json(expl.scenario),
        "head": expl.head.head,
        "query": {"position": expl.position, "token": expl.token, "q": expl.q},
        "keys": [
            {
                "position": key.position,
                "token": key.token,
                "k": key.k,
                "v": key.v,
                "score": key.score,
                "scaled": key.scaled,
                "masked": key.masked,
                "exp": key.exp,
                "weight": key.weight,
                "weighted_v": key.weighted_v,
            }
            for key in expl.keys
        ],
        "shift": expl.shift,
        "exp_sum": expl.exp_sum,
        "output": expl.output,
        "rounding": None if expl.exact_output is None else {"decimals": expl.result.round_steps, "exact_output": expl.exact_output},
    }


def variance_json(rows: list, *, keys: int, seed: int) -> dict[str, Any]:
    """The attncli.variance/1 document: one row per width d."""
    return {
        "schema": VARIANCE_SCHEMA,
        "keys": keys,
        "seed": seed,
        "rows": [
            {"d": r.d, "samples": r.samples, "mean_raw": r.mean_raw, "var_raw": r.var_raw, "var_scaled": r.var_scaled,
             "max_weight_raw": r.max_weight_raw, "max_weight_scaled": r.max_weight_scaled}
            for r in rows
        ],
    }  # fmt: skip


def encode(value: Any, depth: int = 0) -> Iterator[bytes]:
    """The JSON text of `value` in chunks: objects indented by two spaces, a matrix one row per line."""
    pad = b"  " * depth
    if isinstance(value, dict):
        yield b"{\n"
        for i, (key, item) in enumerate(value.items()):
            yield pad + b"  " + orjson.dumps(key) + b": "
            yield from encode(item, depth + 1)
            yield b",\n" if i < len(value) - 1 else b"\n"
        yield pad + b"}"
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        yield b"[\n"
        for i, item in enumerate(value):
            yield pad + b"  "
            yield from encode(item, depth + 1)
            yield b",\n" if i < len(value) - 1 else b"\n"
        yield pad + b"]"
    elif isinstance(value, np.ndarray) and value.ndim == 2:
        rows = [_dumps(row) for row in value]  # one orjson call per row: faster than splitting one big text
        yield b"[\n" + pad + b"  " + (b",\n" + pad + b"  ").join(rows) + b"\n" + pad + b"]"
    else:
        yield _dumps(value)


def _dumps(value: Any) -> bytes:
    if isinstance(value, np.ndarray):
        value = np.ascontiguousarray(value)
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)


def document(doc: dict[str, Any]) -> Iterator[bytes]:
    """The whole document, ending with a newline."""
    yield from encode(doc)
    yield b"\n"


def dumps(doc: dict[str, Any]) -> str:
    """The document as one string (for tests and small documents)."""
    return b"".join(document(doc)).decode("utf-8")
