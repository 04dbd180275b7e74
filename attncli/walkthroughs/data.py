"""Results as JSON trees: the documented contracts (`schema` key) of run, explain, variance, tiling and decode.

Keys are added in later versions, never renamed or removed. A masked cell is `null`;
positions, heads and layers count from 1. The trees hold the engine's NumPy arrays as they
are; `attncli.formats.jsonout` writes them out in full float64 precision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from attncli.core import variants
from attncli.core.engine import HeadResult, RunResult
from attncli.core.scenario import Scenario

if TYPE_CHECKING:  # run's JSON imports none of explain, decode, the online softmax, the variance experiment or the blocks
    from attncli.core.decode import Decode
    from attncli.core.explain import Explanation
    from attncli.core.online import OnlineRow, Tiling
    from attncli.core.variance import VarianceRow
    from attncli.document.blocks import Table
from attncli.document import stages
from attncli.document.escape import csv_cell
from attncli.document.numbers import plain

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
        variant = s.variant(kind)
        doc[kind.json_key] = kind.json_absent if variant is None else variant.as_json()
    doc["notes"] = [*s.details, *s.notes]  # data: every note, the long ones (how the layer was read) first, as before
    return doc


def rounding_json(result: RunResult) -> dict[str, Any] | None:
    if result.exact is None:
        return None
    return {"decimals": result.round_steps, "exact_output": result.exact.output}


def run_json(result: RunResult, wanted: tuple[str, ...], heads: list[int]) -> dict[str, Any]:
    """The attncli.run/1 document; stages left out are simply absent, and so are matrices a scenario does not have."""
    doc: dict[str, Any] = {"schema": RUN_SCHEMA, "scenario": scenario_json(result.scenario)}
    first_per_head = next(i for i, row in enumerate(stages.ROWS) if row.per_head)  # shared rows before the heads: X, a cache, MLA's latents
    leading = [row for i, row in enumerate(stages.ROWS) if not row.per_head and i < first_per_head]
    trailing = [row for i, row in enumerate(stages.ROWS) if not row.per_head and i > first_per_head]
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
        if data is None or stages.replaced(row, result.scenario):
            continue
        for key in row.json or (row.key,):  # a head's row may name other arrays to write beside its own (exp: shift, exp_sum)
            doc[key] = getattr(head, key) if head is not None and key != row.key else data


def _head_json(result: RunResult, head: HeadResult, wanted: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"head": head.head}
    _add_rows(out, [row for row in stages.ROWS if row.per_head], wanted, result, head)
    if head.sink_weight is not None and "weights" in wanted:  # a learned sink: its term of each row's sum, and the weight it took
        out["sink_exp"], out["sink_weight"] = head.sink_exp, head.sink_weight
    out["kv_head"] = head.kv_head
    return out


def explain_json(expl: Explanation) -> dict[str, Any]:
    """The attncli.explain/1 document. A masked key keeps its score and scaled score; exp and weight are 0."""
    doc = _explain_json(expl)
    if expl.sink_exp is not None:  # a learned sink: its term of exp_sum and the weight it took (keys only added)
        doc["sink_exp"], doc["sink_weight"] = expl.sink_exp, expl.sink_weight
    if expl.head.normed:  # QK-norm: the query and each key as RoPE meets them, after the norm (keys only added)
        doc["query"]["q_normed"] = expl.head.normed_q[expl.position - 1]
        for key, step in zip(doc["keys"], expl.keys):
            key["k_normed"] = expl.head.normed_k[step.position - 1]
    if expl.head.turned:  # after RoPE (QK-norm there): the query and each key as RoPE left them (keys only added)
        doc["query"]["q_rotated"] = expl.head.rotated_q[expl.position - 1]
        for key, step in zip(doc["keys"], expl.keys):
            key["k_rotated"] = expl.head.rotated_k[step.position - 1]
    if expl.lens is not None:  # a checkpoint whose whole pass attncli computes: what the head's output promotes (keys only added)
        from attncli.walkthroughs.lens import lens_json, logit_lens_json

        doc["promotes"], doc["logit_lens"] = lens_json(expl.lens), logit_lens_json(expl.logit_lens)
    return doc


def _explain_json(expl: Explanation) -> dict[str, Any]:
    s = expl.scenario
    return {
        "schema": EXPLAIN_SCHEMA,
        "scenario": scenario_json(s),
        "head": expl.head.head,
        "query": {"position": expl.sequence_position, "token": expl.token, "q": expl.q, "label": expl.label, "q_projected": expl.q_raw},
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
    assert expl.online is not None
    return online_json(expl.online, expl.output)


def explain_table(expl: Explanation, *, precision: int | None) -> Table:
    """One row per key, for CSV: its score, scaled score, exponential, weight, value and weighted value (and, with block_size, its block's running state)."""
    from attncli.document.blocks import Table

    number = plain
    d_v = len(expl.output)
    biased = expl.scenario.has_bias
    header = ["position", "token", "score", "scaled"] + ["bias", "logit"] * biased + ["masked", "exp", "weight"]
    header += [f"v{i}" for i in range(1, d_v + 1)] + [f"weighted_v{i}" for i in range(1, d_v + 1)]
    numeric = [True, False, True, True] + [True, True] * biased + [False, True, True] + [True] * (2 * d_v)
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
        numeric += [True] * (4 + d_v)
        for number_, block in enumerate(expl.online.blocks, 1):
            for j in block.keys:
                rows[int(j)] += [str(number_), number(block.max, precision), number(block.rescale, precision),
                                 number(block.sum, precision)] + [number(x, precision) for x in block.output]  # fmt: skip
    return Table(rows[0], rows[1:], numeric)


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


DECODE_SCHEMA = "attncli.decode/1"


def online_json(row: OnlineRow, ordinary: np.ndarray) -> dict[str, Any]:
    """`explain`'s "online" object: the row's key blocks in order and the final output beside the ordinary one."""
    return {
        "block_size": row.block_size,
        "blocks": [
            {
                "keys": block.keys,
                "max": block.max,
                "rescale": block.rescale,
                "sum": block.sum,
                "output": block.output,
                "skipped": block.skipped,
                "block_max": None if block.skipped else block.block_max,
                "exp": block.exp,
            }
            for block in row.blocks
        ],
        "output": row.output,
        "difference": row.output - ordinary,  # (d_v,) online − ordinary: 0 or a few ulps
    }


def tiling_json(tiling: Tiling, ordinary: np.ndarray) -> dict[str, Any]:
    """`run --block-size`'s "tiling" object of one head: every tile's rows, the output and the memory both ways need."""
    return {
        "query_block_size": tiling.query_block_size,
        "block_size": tiling.block_size,
        "tiles": [
            {
                "query_block": tile.query_block,
                "key_block": tile.key_block,
                "queries": tile.queries,
                "keys": tile.keys,
                "skipped": tile.skipped,
                "rescale": tile.rescale,
                "max": tile.max,
                "sum": tile.sum,
            }
            for tile in tiling.tiles
        ],
        "output": tiling.output,
        "max_difference": float(np.abs(tiling.output - ordinary).max()),
        "memory": {
            "tiled_numbers": tiling.memory.tiled,
            "ordinary_numbers": tiling.memory.ordinary,
            "tiled_bytes": tiling.memory.tiled_bytes,
            "ordinary_bytes": tiling.memory.ordinary_bytes,
        },
    }


def decode_json(dec: Decode) -> dict[str, Any]:
    """The attncli.decode/1 document: one object per generation step (with a learned sink, each step's "sink_weight")."""
    doc = _decode_json(dec)
    sink_weight = dec.result.head(dec.head).sink_weight  # (L,) whole; None without a learned sink
    if sink_weight is not None:
        for t, out in enumerate(doc["steps"]):  # step t is query row t (its position is c + t + 1 after a given cache of c)
            out["sink_weight"] = float(sink_weight[t])
    if dec.switched is not None:  # longrope: the step where RoPE takes the long factors and the cache is computed again (keys only added)
        doc["rope_switch"] = dec.switched
    if dec.recurrent is not None:  # attention without softmax: the state carried instead of a cache (keys only added)
        for t, out in enumerate(doc["steps"]):
            out["state"] = dec.recurrent.states[t]
            out["recurrent_output"] = dec.recurrent.outputs[t]
            if dec.recurrent.normalisers is not None:
                out["normaliser"] = dec.recurrent.normalisers[t]
    return doc


def _decode_json(dec: Decode) -> dict[str, Any]:
    return {
        "schema": DECODE_SCHEMA,
        "scenario": scenario_json(dec.scenario),
        "head": dec.head,
        "kv_head": dec.kv_head,
        "steps": [
            {
                "token": step.token,
                "position": step.position,
                "q": step.q,
                "k": step.k,
                "v": step.v,
                "cache": {"K": step.K, "V": step.V, "positions": step.cache, "dropped": step.dropped},
                "scores": step.scores,
                "weights": step.weights,
                "output": step.output,
                "label": step.label,
                "logits": np.where(step.visible, step.logits, -np.inf),
            }
            for step in dec.steps
        ],
    }
