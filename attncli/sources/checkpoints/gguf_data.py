"""What a GGUF file holds (`attncli model info FILE.gguf`) and how one block of a tensor becomes numbers, as data (`model dequant`).

The walk-through is built as data (a JSON document; walkthroughs/dequant.py makes the report) from the block's own
bytes: the fields the format stores, the sub-block scales and minimums, and for every weight the
bits its code is packed in, the code and the weight rebuilt as step · code + base, exactly.
Which bits feed which weight is found by flipping each bit of the block and watching the codes,
so the table is the decoder's own behaviour, not a second description of the layout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from attncli.errors import AttnError, did_you_mean, option
from attncli.sources.checkpoints.describe import describe_config
from attncli.sources.checkpoints.families import ARCHITECTURES, check_shapes
from attncli.sources.checkpoints.gguf import (
    ROLES,
    GgufCheckpoint,
    GgufFile,
    architecture,
    check_layers,
    config_keys,
    kind_of,
    open_file,
    read_config,
)
from attncli.sources.checkpoints.gguf_header import TensorInfo
from attncli.sources.checkpoints.gguf_quants import DECODERS, FLOAT_TYPES, READABLE, Decoded, decode, dequantize

DEQUANT_SCHEMA = "attncli.gguf-dequant/1"

# what each stored area of a block is, in order: (name, bytes, meaning)
LAYOUTS: dict[str, list[tuple[str, int, str]]] = {
    "Q4_0": [("d", 2, "fp16 scale"), ("qs", 16, "32 four-bit codes, stored +8")],
    "Q4_1": [("d", 2, "fp16 scale"), ("m", 2, "fp16 minimum"), ("qs", 16, "32 four-bit codes")],
    "Q5_0": [("d", 2, "fp16 scale"), ("qh", 4, "the fifth bit of each code"), ("qs", 16, "the low four bits, stored +16")],
    "Q5_1": [("d", 2, "fp16 scale"), ("m", 2, "fp16 minimum"), ("qh", 4, "the fifth bit of each code"), ("qs", 16, "the low four bits")],
    "Q8_0": [("d", 2, "fp16 scale"), ("qs", 32, "32 signed eight-bit codes")],
    "IQ4_NL": [("d", 2, "fp16 scale"), ("qs", 16, "32 four-bit indices into 16 fixed levels")],
    "Q2_K": [("scales", 16, "16 four-bit scales and 16 four-bit minimums"), ("qs", 64, "256 two-bit codes"),
             ("d", 2, "fp16 scale of the scales"), ("dmin", 2, "fp16 scale of the minimums")],
    "Q3_K": [("hmask", 32, "the third bit of each code (0 means −4)"), ("qs", 64, "the low two bits"),
             ("scales", 12, "16 six-bit scales, stored +32"), ("d", 2, "fp16 scale of the scales")],
    "Q4_K": [("d", 2, "fp16 scale of the scales"), ("dmin", 2, "fp16 scale of the minimums"),
             ("scales", 12, "8 six-bit scales and 8 six-bit minimums"), ("qs", 128, "256 four-bit codes")],
    "Q5_K": [("d", 2, "fp16 scale of the scales"), ("dmin", 2, "fp16 scale of the minimums"),
             ("scales", 12, "8 six-bit scales and 8 six-bit minimums"), ("qh", 32, "the fifth bit of each code"),
             ("qs", 128, "the low four bits")],
    "IQ4_XS": [("d", 2, "fp16 scale of the scales"), ("scales_h", 2, "the top two bits of 8 six-bit scales"),
               ("scales_l", 4, "their low four bits"), ("qs", 128, "256 four-bit indices into 16 fixed levels")],
    "TQ2_0": [("qs", 64, "256 two-bit codes, stored +1 (ternary −1, 0, 1)"), ("d", 2, "fp16 scale")],
    "Q6_K": [("ql", 128, "the low four bits of each code"), ("qh", 64, "the top two bits"),
             ("scales", 16, "16 signed eight-bit scales"), ("d", 2, "fp16 scale of the scales")],
    "MXFP4": [("e", 1, "e8m0 shared exponent: the step is 2^(e − 128)"),
              ("qs", 16, "32 four-bit e2m1 codes, indices into the doubled levels 0, ±1, ±2, ±3, ±4, ±6, ±8, ±12")],
}  # fmt: skip
FORMULAS = {
    "Q4_0": "w = d · (q − 8)", "Q4_1": "w = d · q + m", "Q5_0": "w = d · (q − 16)", "Q5_1": "w = d · q + m",
    "Q8_0": "w = d · q", "IQ4_NL": "w = d · level[q]", "Q2_K": "w = d·scale · q − dmin·min (per sub-block of 16)",
    "Q3_K": "w = d·(scale − 32) · q (per sub-block of 16; q = low bits − 4 when its high bit is 0)",
    "Q4_K": "w = d·scale · q − dmin·min (per sub-block of 32)", "Q5_K": "w = d·scale · q − dmin·min (per sub-block of 32)",
    "Q6_K": "w = d·scale · (q − 32) (per sub-block of 16)",
    "IQ4_XS": "w = d·(scale − 32) · level[q] (per sub-block of 32)", "TQ2_0": "w = d · (q − 1)",
    "MXFP4": "w = 2^(e − 128) · level[q]",
}  # fmt: skip
ROUNDED_BY_REFERENCE = ("Q4_1", "Q5_1", "Q2_K", "Q4_K", "Q5_K")  # llama.cpp's float32 rounds the final sum once


# -- model info ------------------------------------------------------------------------------


def gguf_info(path: Path, shown: str) -> dict[str, Any]:
    """What a GGUF file holds: architecture, config, and per kind of tensor its types and bits per weight."""
    file = open_file(path)
    info: dict[str, Any] = {
        "folder": shown,
        "file": str(path),
        "format": "gguf",
        "model_type": None,
        "architectures": None,
        "supported": False,
        "reason": None,
    }
    arch_name = file.value("general.architecture")
    info["gguf_architecture"] = arch_name
    info["name"] = file.value("general.name")
    info["tensors"] = tensor_kinds(file)
    total = sum(t.count for t in file.tensors.values())
    info["parameters"] = total
    info["file_bytes"] = file.header.size
    info["numbers_from"] = "each tensor's GGML type in the file's header; bits per weight = bytes per block × 8 / weights per block"
    try:
        _, model_type = architecture(file)
        info["model_type"] = model_type
        _, cfg = read_config(file)
        info["model_type"] = cfg.model_type  # the metadata may say more than the architecture (olmo2 files of OLMo 3)
    except AttnError as error:
        info["reason"] = str(error)
        return info
    keys = config_keys(file)
    info.update(describe_config(cfg, keys))
    words = getattr(ARCHITECTURES[cfg.model_type], "mechanisms", None)
    if words is not None and keys is not None:  # what the family module says of itself, as model info says it of a folder
        info["mechanisms"] = [*info.get("mechanisms", []), *({"key": cfg.model_type, "text": t} for t in words(cfg, path.parent, keys))]
    try:  # the sizes the metadata gives are the tensors' (a block count or a width of its own is no model attncli can run)
        check_layers(file, cfg.layers)
        check_shapes(cfg, GgufCheckpoint(file, *architecture(file)[:1], cfg))
    except AttnError as error:
        info["reason"] = str(error)
        return info
    unreadable = sorted({k["type"] for k in info["tensors"] if k["type"] not in READABLE})
    if unreadable:
        info["reason"] = f"{path}: tensors stored as {', '.join(unreadable)}, which attncli does not dequantise"
        return info
    if file.value("tokenizer.ggml.model") not in ("gpt2", "llama", "bert"):
        info["reason"] = f"{path}: tokenizer.ggml.model {file.value('tokenizer.ggml.model')!r} is not supported (gpt2, llama, bert)"
        return info
    info["supported"] = True
    return info


def tensor_kinds(file: GgufFile) -> list[dict[str, Any]]:
    """One entry per kind of tensor and type: 'attn_q.weight' stored as Q4_1 in 30 tensors, 5 bits per weight."""
    groups: dict[tuple[str, str], list[TensorInfo]] = {}
    for entry in file.tensors.values():
        groups.setdefault((kind_of(entry.name), entry.kind.name), []).append(entry)
    out = []
    for (kind, type_name), entries in groups.items():
        t = entries[0].kind
        out.append({
            "kind": kind,
            "role": ROLES.get(kind.rsplit(".", 1)[0]),
            "type": type_name,
            "bits_per_weight": t.bits_per_weight,
            "block": {"weights": t.block, "bytes": t.bytes},
            "tensors": len(entries),
            "weights": sum(e.count for e in entries),
            "example": entries[0].name,
        })  # fmt: skip
    return out


# -- model dequant ---------------------------------------------------------------------------


def _bit_sources(kind: str, block: np.ndarray) -> dict[str, list[list[tuple[int, int]]]]:
    """For each code, sub-block scale and minimum of the block: the (byte, bit) pairs, from 0, whose value changes it."""
    n_bytes = block.shape[0]
    flipped = np.repeat(block[None, :], n_bytes * 8, axis=0)  # (bits, bytes)
    index = np.arange(n_bytes * 8)
    flipped[index, index // 8] ^= (1 << (index % 8)).astype(np.uint8)
    changed_all = decode(kind, flipped)
    original = decode(kind, block[None, :])
    out = {}
    for name, now, then in (("codes", changed_all.codes, original.codes),
                            *((key, changed_all.fields[key], original.fields[key]) for key in ("scales", "mins") if key in original.fields)):  # fmt: skip
        changed = now != then  # (bits, count)
        out[name] = [[(int(b) // 8, int(b) % 8) for b in np.nonzero(changed[:, i])[0]] for i in range(then.shape[1])]
    return out


def _describe_bits(bits: list[tuple[int, int]]) -> str:
    """'byte 17 bits 0–3' or 'byte 5 bits 4–7 + byte 1 bit 2' (bytes counted from 1 within the block)."""
    by_byte: dict[int, list[int]] = {}
    for byte, bit in bits:
        by_byte.setdefault(byte, []).append(bit)
    parts = []
    for byte, bs in sorted(by_byte.items()):
        bs.sort()
        run = f"bit {bs[0]}" if len(bs) == 1 else f"bits {bs[0]}–{bs[-1]}" if bs == list(range(bs[0], bs[-1] + 1)) else "bits " + ",".join(map(str, bs))
        parts.append(f"byte {byte + 1} {run}")
    return " + ".join(parts) if parts else "—"


def _hex(data: np.ndarray) -> str:
    return " ".join(f"{int(x):02x}" for x in data)


def dequant_data(path: Path, tensor: str, block: int) -> dict[str, Any]:
    """Everything the walk-through shows, as data (the JSON document's body)."""
    file = open_file(path)
    entry = file.tensors.get(tensor)
    if entry is None:
        near = sorted(n for n in file.tensors if kind_of(n) == kind_of(tensor) or n.startswith(tensor))[:5]
        hint = did_you_mean(tensor, file.tensors, cutoff=0.8) or (
            f" (e.g. {', '.join(near)})" if near else f" ({len(file.tensors)} tensors; `attncli model info` lists their kinds)"
        )
        raise AttnError(f"no tensor '{tensor}' in the file{hint}", file=str(path), key="TENSOR", expected="a tensor name as the file spells it, e.g. blk.0.attn_q.weight")
    kind = entry.kind.name
    if kind not in DECODERS and kind not in FLOAT_TYPES:
        raise AttnError(f"tensor '{tensor}' is stored as {kind}, which attncli does not dequantise", file=str(path), expected="one of " + ", ".join(READABLE))
    t = entry.kind
    blocks = entry.count // t.block
    if not 1 <= block <= blocks:
        raise AttnError(f"block {block} does not exist: '{tensor}' has {blocks:,} blocks of {t.block}", key=option("block"), expected=f"1 to {blocks:,}")
    raw = np.array(file.raw(entry)[(block - 1) * t.bytes : block * t.bytes], dtype=np.uint8)  # (bytes,)
    row_blocks = entry.dims[0] // t.block
    row, first = (block - 1) // row_blocks, (block - 1) % row_blocks * t.block
    values = dequantize(kind, raw, t.block)  # (E,)
    doc: dict[str, Any] = {
        "schema": DEQUANT_SCHEMA,
        "file": str(path),
        "tensor": tensor,
        "role": ROLES.get(kind_of(tensor).rsplit(".", 1)[0]),
        "type": kind,
        "shape": list(entry.shape),
        "dims_stored": list(entry.dims),
        "block": block,
        "blocks": blocks,
        "row": row + 1,
        "columns": [first + 1, first + t.block],
        "file_offset": entry.begin + (block - 1) * t.bytes,
        "bytes": t.bytes,
        "weights_per_block": t.block,
        "bits_per_weight": t.bits_per_weight,
        "raw_hex": _hex(raw),
        "values": values.tolist(),
    }
    if kind in FLOAT_TYPES:
        doc["formula"] = f"w = the {kind} number itself, widened exactly to float64"
        doc["weights"] = [{"index": 1, "column": first + 1, "bits": _describe_bits([(0, b) for b in range(t.bytes * 8)]), "code": None, "value": float(values[0])}]
        return doc
    decoded: Decoded = decode(kind, raw[None, :])
    fields: dict[str, dict[str, Any]] = {}
    at = 0
    for name, size, meaning in LAYOUTS[kind]:
        fields[name] = {"bytes": [at + 1, at + size], "meaning": meaning, "hex": _hex(raw[at : at + size])}
        at += size
    for name in ("d", "m", "dmin"):
        if name in decoded.fields:
            fields[name]["value"] = float(decoded.fields[name][0])
    doc["fields"] = fields
    doc["formula"] = FORMULAS[kind]
    S = decoded.step.shape[1]
    sources = _bit_sources(kind, raw)
    if S > 1:
        doc["sub_blocks"] = [
            {
                "sub_block": s + 1,
                "weights": [s * decoded.sub_block + 1, (s + 1) * decoded.sub_block],
                "scale": int(decoded.fields["scales"][0, s]),
                "scale_bits": _describe_bits(sources["scales"][s]),
                "min": int(decoded.fields["mins"][0, s]) if "mins" in decoded.fields else None,
                "min_bits": _describe_bits(sources["mins"][s]) if "mins" in sources else None,
                "step": float(decoded.step[0, s]),
                "base": float(decoded.base[0, s]) if decoded.base is not None else 0.0,
            }
            for s in range(S)
        ]
    doc["weights"] = [
        {
            "index": w + 1,
            "column": first + w + 1,
            "bits": _describe_bits(sources["codes"][w]),
            "code": int(decoded.codes[0, w]),
            "step": float(decoded.step[0, w // decoded.sub_block]),
            "base": float(decoded.base[0, w // decoded.sub_block]) if decoded.base is not None else 0.0,
            "value": float(values[w]),
        }
        for w in range(t.block)
    ]
    doc["reference_rounding"] = (
        "llama.cpp and gguf-py compute this in float32 and round the sum step·code + base once; attncli's float64 value is exact"
        if kind in ROUNDED_BY_REFERENCE
        else "exact in llama.cpp's float32 too: step·code needs at most 24 significant bits"
    )
    return doc
