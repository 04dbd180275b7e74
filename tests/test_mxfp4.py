"""MXFP4 experts (gpt-oss as published): blocks of 32 FP4 e2m1 numbers sharing one e8m0 exponent, dequantised
exactly to float64 (attncli.sources.checkpoints.mxfp4).

Checked three ways: a tensor built by hand; transformers' own `convert_moe_packed_tensors` on a seeded random
tensor (the golden printed by scripts/make_yarn_goldens.py with transformers 5.24, float32 output, which holds
every such value exactly; no torch here); and a whole gpt-oss layer read from an MXFP4 copy of the fixture, equal
to the same layer read from its float experts.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from attncli.errors import AttnError
from attncli.sources.checkpoints import mxfp4
from attncli.sources.checkpoints.layer import load_layer

HERE = Path(__file__).parent / "checkpoints"

# transformers' convert_moe_packed_tensors(blocks (1, 2, 2, 16), scales (1, 2, 2)) → (1, 64, 2), flattened
GOLDEN = [0.0078125, 0.0078125, -0.015625, -0.0625, 0.0234375, 0.0, 0.0078125, -0.046875, 0.00390625, -0.0234375, 0.0078125, -0.0625, 0.015625, 0.0078125, 0.0234375, 0.0, 0.01171875, 0.03125, -0.015625, -0.03125, -0.0234375, 0.03125, 0.001953125, 0.046875, -0.0234375, 0.046875, 0.005859375, -0.015625, 0.01171875, 0.0625, -0.0, 0.0078125, -0.01171875, -0.0, 0.005859375, 0.0234375, -0.0, 0.09375, 0.015625, 0.09375, -0.0, 0.03125, 0.01171875, 0.03125, 0.00390625, -0.0625, 0.001953125, -0.0078125, -0.0, 0.09375, 0.0, -0.0625, -0.001953125, -0.046875, 0.001953125, -0.0, -0.001953125, -0.09375, -0.00390625, -0.0625, -0.0078125, 0.015625, -0.0234375, 0.015625, -0.03125, 8.0, -0.03125, 96.0, 0.00390625, 24.0, -0.01171875, -24.0, -0.015625, 64.0, -0.03125, 16.0, 0.0078125, -32.0, 0.046875, -8.0, -0.015625, -0.0, -0.0, 64.0, 0.01171875, 96.0, -0.0078125, 96.0, 0.046875, 96.0, 0.03125, -0.0, 0.0234375, -32.0, 0.015625, 32.0, 0.01171875, 24.0, -0.01171875, -24.0, -0.0234375, -24.0, 0.015625, -64.0, -0.03125, 16.0, -0.0, 16.0, 0.0078125, 48.0, 0.00390625, 8.0, 0.03125, 16.0, 0.01171875, 32.0, -0.0234375, 48.0, 0.0, 16.0, -0.0234375, 64.0, -0.00390625, 64.0, -0.03125, 0.0, -0.015625, 64.0]


def _seeded() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(20)  # as scripts/make_yarn_goldens.py draws them
    blocks = rng.integers(0, 256, size=64).astype(np.uint8).reshape(1, 2, 2, 16)
    scales = rng.integers(112, 143, size=4).astype(np.uint8).reshape(1, 2, 2)
    return blocks, scales


def test_a_hand_built_block() -> None:
    """Byte 0x2F: low nibble 0xF = −6 first, high nibble 0x2 = 1 second; scale 128 doubles, 126 halves."""
    blocks = np.zeros((2, 1, 16), dtype=np.uint8)
    blocks[0, 0, 0] = 0x2F
    blocks[0, 0, 15] = 0x97  # 7 → 6 at number 30, 9 → −0.5 at number 31
    blocks[1, 0, 1] = 0x35  # 5 → 3 at number 2, 3 → 1.5 at number 3
    scales = np.array([[128], [126]], dtype=np.uint8)
    out = mxfp4.dequantise(blocks, scales)
    expected = np.zeros((2, 32))
    expected[0, [0, 1, 30, 31]] = [-12.0, 2.0, 12.0, -1.0]
    expected[1, [2, 3]] = [1.5, 0.75]
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, expected)
    assert np.signbit(mxfp4.dequantise(np.full((1, 1, 16), 0x88, np.uint8), np.array([[127]], np.uint8))).all()  # −0


def test_every_code_is_e2m1() -> None:
    codes = np.arange(16, dtype=np.uint8)
    values = mxfp4.dequantise(np.tile(codes | (codes << 4), 1).reshape(1, 1, 16), np.array([[127]], np.uint8))[0, 0::2]
    np.testing.assert_array_equal(values, [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def test_equals_transformers_on_a_random_tensor() -> None:
    blocks, scales = _seeded()
    ours = mxfp4.dequantise(blocks, scales)  # (1, 2, 64) rows as stored
    theirs = np.array(GOLDEN).reshape(1, 64, 2)  # transformers transposes the last two axes
    np.testing.assert_array_equal(ours.transpose(0, 2, 1), theirs)
    np.testing.assert_array_equal(np.signbit(ours.transpose(0, 2, 1)), np.signbit(theirs))


def _quantise(dense: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random MXFP4 tensors with the layout of `dense` (E, columns, rows), and their exact dequantised value."""
    E, columns, rows = dense.shape
    groups = -(-columns // 32)
    blocks = rng.integers(0, 256, size=(E, rows, groups, 16)).astype(np.uint8)
    scales = rng.integers(118, 128, size=(E, rows, groups)).astype(np.uint8)
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1).reshape(E, rows, groups * 32)  # number by number
    e2m1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
    naive = np.vectorize(lambda c: e2m1[c], otypes=[np.float64])(codes)
    naive = naive * 2.0 ** (np.repeat(scales.astype(np.int64), 32, axis=-1) - 127)
    return blocks, scales, naive[:, :, :columns].transpose(0, 2, 1)


def _rewrite(folder: Path, replace: dict[str, np.ndarray]) -> None:
    """The fixture's model.safetensors with some tensors replaced (float32, or uint8 for MXFP4) or removed (None)."""
    raw = (folder / "model.safetensors").read_bytes()
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + size])
    header.pop("__metadata__", None)
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        kind = "u1" if entry["dtype"] == "U8" else "<f4"
        tensors[name] = np.frombuffer(raw[8 + size + begin : 8 + size + end], dtype=kind).reshape(entry["shape"])
    tensors.update(replace)
    out_header, data = {}, b""
    for name, array in tensors.items():
        if array is None:
            continue
        dtype = "U8" if array.dtype == np.uint8 else "F32"
        blob = array.tobytes() if dtype == "U8" else array.astype("<f4").tobytes()
        out_header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(out_header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + data)


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of the gpt-oss fixture with the same experts: float32 in one, MXFP4 in the other."""
    rng = np.random.default_rng(7)
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    shutil.copytree(HERE / "gpt_oss", plain)
    shutil.copytree(HERE / "gpt_oss", packed)
    header = json.loads((plain / "model.safetensors").read_bytes()[8 : 8 + struct.unpack("<Q", (plain / "model.safetensors").read_bytes()[:8])[0]])
    floats: dict[str, np.ndarray] = {}
    quantised: dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            blocks, scales, dense = _quantise(np.zeros(entry["shape"]), rng)
            floats[name] = dense.astype(np.float32)  # exact: FP4 × 2^(−9 … 0)
            assert np.array_equal(floats[name], dense)
            quantised |= {name: None, name + "_blocks": blocks, name + "_scales": scales}  # type: ignore[dict-item]
    assert floats
    _rewrite(plain, floats)
    _rewrite(packed, quantised)
    return plain, packed


def test_a_layer_after_mxfp4_experts_equals_the_float_experts(tmp_path: Path) -> None:
    """Layer 2's input (the residual after layer 1's mixture of experts) is the same to the bit, and so is the routing."""
    plain, packed = _pair(tmp_path)
    a = load_layer(plain, layer=2, text="The cat sat on the mat")
    b = load_layer(packed, layer=2, text="The cat sat on the mat")
    np.testing.assert_array_equal(a.X, b.X)
    assert a.notes == b.notes and any("experts" in note for note in b.notes)
    assert not np.array_equal(a.X, load_layer(HERE / "gpt_oss", layer=2, text="The cat sat on the mat").X)  # the experts matter


def test_mxfp4_of_the_wrong_shape_is_one_line(tmp_path: Path) -> None:
    _, packed = _pair(tmp_path)
    raw = (packed / "model.safetensors").read_bytes()
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + size])
    name = "model.layers.0.mlp.experts.down_proj_scales"
    _rewrite(packed, {name: np.zeros([*header[name]["shape"][:-1], header[name]["shape"][-1] + 1], np.uint8)})
    with pytest.raises(AttnError, match="down_proj_scales' has shape"):
        load_layer(packed, layer=2, text="The cat")
