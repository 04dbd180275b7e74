"""`attncli model dequant` and the GGUF part of `model info` as reports: the data comes from sources.checkpoints.gguf_data."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attncli.document.blocks import Block, Document, Heading, Note, Paragraph, Table, Values


def info_rows(info: dict[str, Any]) -> list[tuple[str, str]]:
    """Extra lines of `model info` for a GGUF file: its size and, per kind of tensor, how it is stored."""
    rows = [("format", f"GGUF, {info['file_bytes']:,} bytes, {info['parameters']:,} weights")]
    if info.get("name"):
        rows.append(("name", str(info["name"])))
    for kind in info["tensors"]:
        role = f" ({kind['role']})" if kind["role"] else ""
        count = f"{kind['tensors']} tensor{'s' * (kind['tensors'] > 1)}"
        rows.append((kind["kind"], f"{kind['type']}, {kind['bits_per_weight']:g} bits per weight{role}, {count}"))
    rows.append(("numbers", "types from the file's header; bits per weight = block bytes × 8 / block weights; every type is dequantised exactly to float64"))
    return rows


_WIDENS = {  # why a block's numbers are exact in float64, by what the block stores (fp16 scales, for the other types)
    "MXFP4": "a power of two times an e2m1 level is exact",
    "BF16": "bf16 widens exactly",
    "F32": "float32 widens exactly",
    "F64": "it is float64",
}


def _weights(n: int) -> str:
    return f"{n} weight{'s' * (n != 1)}"


def _columns(first: int, last: int) -> str:
    """'columns 33–64', or 'column 7' for a block of one weight (F32, F16, BF16)."""
    return f"columns {first}–{last}" if last != first else f"column {first}"


def dequant_report(doc: dict[str, Any]) -> Document:
    """The walk-through as a document, for every format but JSON."""
    kind = doc["type"]
    role = f" ({doc['role']})" if doc.get("role") else ""
    title = f"Dequantising block {doc['block']} of {doc['tensor']}{role}: {kind}"
    intro = [
        f"{doc['tensor']} has shape {doc['shape']} (stored innermost first as {doc['dims_stored']}), in {doc['blocks']:,} blocks "
        f"of {_weights(doc['weights_per_block'])}; block {doc['block']} holds row {doc['row']}, {_columns(*doc['columns'])}.",
        f"{kind}: {doc['bytes']} bytes per {_weights(doc['weights_per_block']).removeprefix('1 ')} = {doc['bits_per_weight']:g} bits per weight; "
        f"the block starts at byte {doc['file_offset']:,} of the file.",
        f"Formula: {doc['formula']}. Every number below is exact in float64 ({_WIDENS.get(kind, 'fp16 widens exactly')}).",
    ]
    sections: list[Block] = []
    if "fields" in doc:
        lines = []
        for name, field in doc["fields"].items():
            value = f" = {field['value']!r}" if "value" in field else ""
            lines.append((name, f"bytes {field['bytes'][0]}–{field['bytes'][1]}, {field['meaning']}: {field['hex']}{value}"))
        sections += _section("What the block stores", lines)
    if "sub_blocks" in doc:
        has_min = doc["sub_blocks"][0]["min"] is not None
        header = ["sub-block", "weights", "scale", "packed in"] + (["min", "packed in"] if has_min else []) + ["step = d·scale"]
        header += ["base = −dmin·min"] if has_min else []
        rows = [
            [str(s["sub_block"]), f"{s['weights'][0]}–{s['weights'][1]}", str(s["scale"]), s["scale_bits"]]
            + ([str(s["min"]), str(s["min_bits"])] if has_min else [])
            + [repr(s["step"])]
            + ([repr(s["base"])] if has_min else [])
            for s in doc["sub_blocks"]
        ]
        numeric = [True, True, True, False] + ([True, False] if has_min else []) + [True] + ([True] if has_min else [])
        sections += _section("Sub-block scales", table=Table(header, rows, numeric))
    header = ["weight", "column", "packed in", "code", "step", "base", "value"]
    rows = [
        [str(w["index"]), str(w["column"]), w["bits"], "" if w["code"] is None else str(w["code"]),
         "" if w["code"] is None else repr(w["step"]), "" if w["code"] is None else repr(w["base"]), repr(w["value"])]
        for w in doc["weights"]
    ]  # fmt: skip
    notes = [doc["reference_rounding"]] if "reference_rounding" in doc else []
    if all(w["code"] is None for w in doc["weights"]):  # F32, F16, BF16: each weight is its own number, with no code to scale
        table = Table(["weight", "column", "packed in", "value"], [[r[0], r[1], r[2], r[6]] for r in rows], [True, True, False, True])
        sections += _section("Each weight", table=table, notes=notes)
    else:
        sections += _section("Each weight: value = step · code + base", table=Table(header, rows, [True, True, False, True, True, True, True]), notes=notes)
    csv = Table(
        ["tensor", "type", "block", "weight", "column", "code", "step", "base", "value"],
        [[doc["tensor"], kind, str(doc["block"]), *r[:2], *r[3:]] for r in rows],
        [False, False, True, True, True, True, True, True, True],
    )
    return Document(title, [Heading(title), *map(Paragraph, intro), *sections], csv)


def _section(title: str, lines: Sequence[tuple[str, str]] = (), table: Table | None = None, notes: Sequence[str] = ()) -> list[Block]:
    """A section's blocks: its heading, its `name = value` lines, its table, its notes."""
    return [Heading(title, level=2), Values(lines), *([table] if table is not None else []), *map(Note, notes)]
