"""JSON of the online softmax, the tiled head and the KV-cache decode (`--block-size`, `attncli decode`).

The same conventions as jsonout: positions from 1, full float64 precision, a hidden cell `null`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attncli.core.decode import Decode
from attncli.core.online import OnlineRow, Tiling
from attncli.formats.jsonout import scenario_json

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
    """The attncli.decode/1 document: one object per generation step."""
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
