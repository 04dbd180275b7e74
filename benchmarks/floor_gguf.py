"""The floor of bench row 22: layer 1 of a llama-architecture GGUF file (Q8_0 embeddings, Q4_1 matrices, as the
real SmolLM2-135M file stores them) in a minimal NumPy float64 script, given the token ids.

    python benchmarks/floor_gguf.py FILE.gguf [--head H] ID [ID …]
    python benchmarks/floor_gguf.py FILE.gguf [--head H] --tokenizer tokenizer.json SENTENCE

Walks the header (the metadata values skipped but the few numbers it needs, the tensor list read), maps the
file, dequantises the tokens' embedding rows and layer 1's norm and four attention matrices, and computes
RMSNorm, Q, K, V, RoPE (on llama.cpp's interleaved pairs, as the file stores the rows), the causal softmax of
every head and the output projection, then writes what `attncli run --format json` writes (each head's
weight blocks and every stage, the concatenation, W_O, the output) as JSON with orjson, an array at a time. With `--head H`, as
`run --head H`: head H's blocks and stages only, every other head computed for its output alone (the
concatenation and the output need it). With `--tokenizer`, the sentence is turned into its ids first by
the `tokenizers` library from that tokenizer.json (what a script given a sentence cannot skip). Handles
only what the benchmark gives it: no validation, no other type.
"""

import struct
import sys

import numpy as np
import orjson

SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
BLOCKS = {0: (1, 4), 8: (32, 34), 3: (32, 20)}  # F32, Q8_0, Q4_1: weights and bytes per block


def header(data: memoryview) -> tuple[dict, dict, int]:
    """(the numeric metadata values, {tensor: (type, dims, offset)}, the data's start)."""
    at = 4 + 4
    n_tensors, n_kv = struct.unpack_from("<QQ", data, at)
    at += 16
    values: dict = {}

    def string(at: int) -> tuple[int, int]:
        (n,) = struct.unpack_from("<Q", data, at)
        return at + 8, n

    def skip(kind: int, at: int) -> int:
        if kind in SCALARS:
            return at + SCALARS[kind]
        if kind == 8:
            at, n = string(at)
            return at + n
        item, count = struct.unpack_from("<IQ", data, at)
        at += 12
        if item in SCALARS:
            return at + count * SCALARS[item]
        for _ in range(count):
            at = skip(item, at)
        return at

    for _ in range(n_kv):
        at, n = string(at)
        key = bytes(data[at : at + n]).decode()
        at += n
        (kind,) = struct.unpack_from("<I", data, at)
        at += 4
        if kind in (4, 6, 10):  # the uint32, float32 and uint64 values: the sizes and constants
            values[key] = struct.unpack_from({4: "<I", 6: "<f", 10: "<Q"}[kind], data, at)[0]
        at = skip(kind, at)
    tensors = {}
    for _ in range(n_tensors):
        at, n = string(at)
        name = bytes(data[at : at + n]).decode()
        at += n
        (dims,) = struct.unpack_from("<I", data, at)
        shape = struct.unpack_from(f"<{dims}Q", data, at + 4)
        kind, offset = struct.unpack_from("<IQ", data, at + 4 + 8 * dims)
        at += 4 + 8 * dims + 12
        tensors[name] = (kind, shape, offset)
    align = values.get("general.alignment", 32)
    return values, tensors, -(-at // align) * align


def rows(raw: np.ndarray, kind: int, width: int) -> np.ndarray:
    """(n, width) float64 from the rows' bytes."""
    if kind == 0:
        return raw.view("<f4").astype(np.float64).reshape(-1, width)
    blocks = raw.reshape(-1, BLOCKS[kind][1])
    d = blocks[:, 0:2].copy().view("<f2").astype(np.float64)  # (n, 1)
    if kind == 8:
        return (d * blocks[:, 2:].view(np.int8)).reshape(-1, width)
    m = blocks[:, 2:4].copy().view("<f2").astype(np.float64)
    q = np.concatenate([blocks[:, 4:] & 0x0F, blocks[:, 4:] >> 4], axis=1)
    return (d * q + m).reshape(-1, width)


def main() -> None:
    path, rest = sys.argv[1], sys.argv[2:]
    shown = None
    if rest[0] == "--head":
        shown, rest = int(rest[1]), rest[2:]
    if rest[0] == "--tokenizer":
        from tokenizers import Tokenizer

        ids = Tokenizer.from_file(rest[1]).encode(rest[2]).ids
    else:
        ids = [int(i) for i in rest]
    data = np.memmap(path, dtype=np.uint8, mode="r")
    values, tensors, start = header(memoryview(data))

    def tensor(name: str, picked: list[int] | None = None) -> np.ndarray:
        kind, shape, offset = tensors[name]
        width, per = shape[0], shape[0] // BLOCKS[kind][0] * BLOCKS[kind][1]
        table = data[start + offset : start + offset + per * int(np.prod(shape[1:]))].reshape(-1, per)
        return rows(np.ascontiguousarray(table if picked is None else table[picked]), kind, width)

    a = "llama."
    H, G = values[a + "attention.head_count"], values[a + "attention.head_count_kv"]
    X = tensor("token_embd.weight", ids)  # (L, d)
    L, d = X.shape
    d_k = d // H
    Xn = X / np.sqrt(np.mean(X * X, axis=1, keepdims=True) + values[a + "attention.layer_norm_rms_epsilon"]) * tensor("blk.0.attn_norm.weight")[0]
    W = {role: tensor(f"blk.0.attn_{role}.weight") for role in ("q", "k", "v", "output")}  # (out, in)
    theta = values[a + "rope.freq_base"] ** (-np.arange(0, d_k, 2) / d_k)
    angle = np.arange(L)[:, None] * theta[None, :]
    cos, sin = np.cos(angle), np.sin(angle)

    def rope(x: np.ndarray) -> np.ndarray:
        even, odd = x[:, 0::2], x[:, 1::2]
        out = np.empty_like(x)
        out[:, 0::2], out[:, 1::2] = even * cos - odd * sin, even * sin + odd * cos
        return out

    causal = np.tril(np.ones((L, L), dtype=bool))
    heads, outputs = [], []
    for h in range(H):
        g = h * G // H
        wq, wk, wv = (np.ascontiguousarray(W[r][i * d_k : (i + 1) * d_k].T) for r, i in (("q", h), ("k", g), ("v", g)))
        Q, K, V = Xn @ wq, Xn @ wk, Xn @ wv
        Qr, Kr = rope(Q), rope(K)
        scores = Qr @ Kr.T
        scaled = scores / np.sqrt(d_k)
        masked = np.where(causal, scaled, -np.inf)
        shift = masked.max(axis=1, keepdims=True)
        exp = np.exp(masked - shift)
        total = exp.sum(axis=1, keepdims=True)
        weights = exp / total
        out = weights @ V
        outputs.append(out)
        if shown is not None and h + 1 != shown:
            continue
        heads.append({"head": h + 1, "W_Q": wq, "Q": Q, "W_K": wk, "K": K, "W_V": wv, "V": V, "Q_rope": Qr, "K_rope": Kr,
                      "scores": scores, "scaled": scaled, "masked": masked, "shift": shift[:, 0],
                      "exp": exp, "exp_sum": total[:, 0], "weights": weights, "output": out})  # fmt: skip
    concat = np.hstack(outputs)
    doc = {"embeddings": X, "heads": heads, "concat": concat, "W_O": np.ascontiguousarray(W["output"].T), "output": concat @ W["output"].T}
    write(doc, sys.stdout.buffer)


def write(value: object, out) -> None:
    """`value` as JSON, one array at a time (orjson writes ±∞ as null, as attncli does): no whole document's text is held."""
    if isinstance(value, dict):
        out.write(b"{")
        for n, (key, item) in enumerate(value.items()):
            out.write(b"," * (n > 0) + orjson.dumps(key) + b":")
            write(item, out)
        out.write(b"}")
    elif isinstance(value, list):
        out.write(b"[")
        for n, item in enumerate(value):
            out.write(b"," * (n > 0))
            write(item, out)
        out.write(b"]")
    else:
        out.write(orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY))


if __name__ == "__main__":
    main()
