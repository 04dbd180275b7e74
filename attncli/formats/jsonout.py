"""JSON output: a documented contract (`schema` key), standard JSON only, full float64 precision.

Keys are added in later versions, never renamed or removed. A masked cell is `null`.
Documents are built with the engine's NumPy arrays in them and encoded by orjson, which
writes each float64 as the shortest text that reads back to the same number (and -inf as
null) some 20 times faster than Python's own float formatting. The text is produced one
matrix row block at a time (one row per line), so a document of
hundreds of megabytes is never held whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import orjson

from attncli.core import variants
from attncli.core.engine import HeadResult, RunResult
from attncli.core.explain import Explanation
from attncli.core.scenario import Scenario
from attncli.core.variance import VarianceRow
from attncli.document import stages

RUN_SCHEMA = "attncli.run/1"
EXPLAIN_SCHEMA = "attncli.explain/1"
VARIANCE_SCHEMA = "attncli.variance/1"


def scenario_json(s: Scenario) -> dict[str, Any]:
    """The scenario's sizes and settings; the first version's keys first, in their order."""
    doc: dict[str, Any] = {
        "name": s.name,
        "tokens": list(s.tokens),
        "d_model": s.d_model,
        "heads": s.heads,
        "d_k": s.d_k,
        "d_v": s.d_v,
        "d_out": s.d_out,
        "scale": {"mode": s.scale.mode, "divisor": s.scale.divisor},
        "mask": s.mask.name,
        "labels": list(s.query_labels),
        "kv_heads": s.G,
        "context": None if s.context is None else {"tokens": list(s.context), "labels": list(s.key_labels)},
    }
    for kind in variants.in_json_order():  # masking, rope, alibi, bias, then any variant added later
        variant = getattr(s, kind.key)
        doc[kind.json_key] = kind.json_absent if variant is None else variant.as_json()
    doc["notes"] = list(s.notes)
    return doc


def rounding_json(result: RunResult) -> dict[str, Any] | None:
    if result.exact is None:
        return None
    return {"decimals": result.round_steps, "exact_output": result.exact.output}


def run_json(result: RunResult, wanted: tuple[str, ...], heads: list[int]) -> dict[str, Any]:
    """The attncli.run/1 document; stages left out are simply absent, and so are matrices a scenario does not have."""
    doc: dict[str, Any] = {"schema": RUN_SCHEMA, "scenario": scenario_json(result.scenario)}
    leading = [row for row in stages.ROWS if not row.per_head and row.stage == "embeddings"]
    trailing = [row for row in stages.ROWS if not row.per_head and row.stage != "embeddings"]
    _add_rows(doc, leading, wanted, result, None)
    doc["heads"] = [_head_json(result, result.head(h), wanted) for h in heads]
    if "output" in wanted:
        doc["concat"] = result.concat
        doc["output"] = result.output
        _add_rows(doc, [row for row in trailing if row.key in ("W_O", "b_O")], wanted, result, None)
    doc["rounding"] = rounding_json(result)
    return doc


def _add_rows(doc: dict[str, Any], rows: list[stages.Row], wanted: tuple[str, ...], result: RunResult, head: HeadResult | None) -> None:
    for row in rows:
        if row.stage not in wanted:
            continue
        data = row.get(result, head)
        if data is None:
            continue
        for key in row.json or (row.key,):  # a head's row may name other arrays to write beside its own (exp: shift, exp_sum)
            doc[key] = getattr(head, key) if head is not None and key != row.key else data


def _head_json(result: RunResult, head: HeadResult, wanted: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"head": head.head}
    _add_rows(out, [row for row in stages.ROWS if row.per_head], wanted, result, head)
    out["kv_head"] = head.kv_head
    return out


def explain_json(expl: Explanation) -> dict[str, Any]:
    """The attncli.explain/1 document. A masked key keeps its score and scaled score; exp and weight are 0."""
    s = expl.scenario
    return {
        "schema": EXPLAIN_SCHEMA,
        "scenario": scenario_json(s),
        "head": expl.head.head,
        "query": {"position": expl.position, "token": expl.token, "q": expl.q, "label": expl.label, "q_projected": expl.q_raw},
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
                "label": key.label,
                "k_projected": key.k_raw,
                "bias": key.bias,
                "logit": key.logit,
                "why": key.why,
            }
            for key in expl.keys
        ],
        "shift": expl.shift,
        "exp_sum": expl.exp_sum,
        "output": expl.output,
        "rounding": None if expl.exact_output is None else {"decimals": expl.result.round_steps, "exact_output": expl.exact_output},
        "kv_head": expl.head.kv_head,
        "final_output": expl.result.output[expl.position - 1] if s.has_output_stage else None,
        "online": None if expl.online is None else _online(expl),
    }


def _online(expl: Explanation) -> dict[str, Any]:
    from attncli.formats.onlinejson import online_json

    assert expl.online is not None
    return online_json(expl.online, expl.output)


def variance_json(rows: list[VarianceRow], *, keys: int, seed: int) -> dict[str, Any]:
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
        yield b"[\n" + pad + b"  "
        yield from _matrix_rows(value, b",\n" + pad + b"  ")
        yield b"\n" + pad + b"]"
    else:
        yield _dumps(value)


CHUNK_VALUES = 1 << 16  # numbers per chunk of a matrix's text: about 1.5 MB, whatever the matrix's shape


def _matrix_rows(matrix: np.ndarray, separator: bytes) -> Iterator[bytes]:
    """The rows of `matrix` as JSON arrays joined by `separator`, a block of rows at a time (never the whole text at once)."""
    matrix = np.ascontiguousarray(matrix)
    dumps, option = orjson.dumps, orjson.OPT_SERIALIZE_NUMPY
    step = max(1, CHUNK_VALUES // max(1, matrix.shape[1]))
    for start in range(0, matrix.shape[0], step):
        text = separator.join([dumps(row, option=option) for row in matrix[start : start + step]])  # one orjson call per row
        yield separator + text if start else text


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
