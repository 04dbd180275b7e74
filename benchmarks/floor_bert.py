"""The floor of bench row 25: layer N of a BERT folder (all-MiniLM-L6-v2) in a minimal NumPy float64 script, given the token ids.

    python benchmarks/floor_bert.py FOLDER LAYER [--head H] ID [ID …]
    python benchmarks/floor_bert.py FOLDER LAYER [--head H] --tokenizer SENTENCE

Reads model.safetensors (its JSON header, then each tensor from the mapped file), and computes in float64 what
`attncli run --model FOLDER --layer N --format json` computes: the embeddings (word + position + token type 0,
LayerNorm), every earlier layer whole (attention, output projection, residual and LayerNorm, the GELU (erf) MLP,
residual and LayerNorm), then layer N's heads stage by stage. It writes what attncli writes (each head's
weights, biases, Q, K, V and every stage, the concatenation, W_O, b_O, the output) as JSON with orjson, an array
at a time. With `--head H`, as `run --head H`: head H's stages only, every other head computed for its output
alone. With `--tokenizer`, the sentence is turned into its ids by the `tokenizers` library from the folder's
tokenizer.json first (what a script given a sentence cannot skip). Handles only what the benchmark gives it:
float32 tensors, no validation.
"""

import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
from floor_gguf import write

_erf = np.frompyfunc(math.erf, 1, 1)  # NumPy has no erf: one exact erf per element, as attncli computes GELU


def tensors(path: Path) -> dict[str, np.ndarray]:
    """Every float32 tensor of a safetensors file, as a float32 view of the mapped file (nothing read until used)."""
    data = np.memmap(path, dtype=np.uint8, mode="r")
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(bytes(data[8 : 8 + n]))
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":  # position_ids (int64) is no weight
            continue
        begin, end = info["data_offsets"]
        out[name] = data[8 + n + begin : 8 + n + end].view("<f4").reshape(info["shape"])
    return out


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=1, keepdims=True)
    centred = x - mean
    return centred / np.sqrt((centred * centred).mean(axis=1, keepdims=True) + eps) * w + b


def main() -> None:
    folder, layer, rest = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    shown = None
    if rest[0] == "--head":
        shown, rest = int(rest[1]), rest[2:]
    if rest[0] == "--tokenizer":
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.no_truncation()  # MiniLM's tokenizer.json cuts at 128 tokens; attncli, like the model, reads up to its 512 positions
        tokenizer.no_padding()
        ids = tokenizer.encode(rest[1]).ids
    else:
        ids = [int(i) for i in rest]
    config = json.loads((folder / "config.json").read_text())
    stored = tensors(folder / "model.safetensors")

    class Weights(dict):  # a tensor in float64 when first used (an ndarray, not a memmap), the embedding table's rows as picked
        def __missing__(self, name: str) -> np.ndarray:
            self[name] = value = np.array(stored[name], dtype=np.float64)
            return value

    W = Weights()
    eps, H = config["layer_norm_eps"], config["num_attention_heads"]
    p = "embeddings."
    L = len(ids)
    words = np.array(stored[p + "word_embeddings.weight"][ids], dtype=np.float64)  # (L, d) the tokens' rows only
    x = words + np.array(stored[p + "position_embeddings.weight"][:L], dtype=np.float64) + W[p + "token_type_embeddings.weight"][0]
    x = layer_norm(x, W[p + "LayerNorm.weight"], W[p + "LayerNorm.bias"], eps)  # (L, d)
    d = x.shape[1]
    d_k = d // H

    def linear(x: np.ndarray, name: str) -> np.ndarray:
        return x @ W[name + ".weight"].T + W[name + ".bias"]

    for n in range(layer - 1):  # the earlier layers, whole
        a = f"encoder.layer.{n}."
        q, k, v = (linear(x, a + f"attention.self.{r}").reshape(L, H, d_k).transpose(1, 0, 2) for r in ("query", "key", "value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(d_k)  # (H, L, L)
        e = np.exp(scores - scores.max(axis=2, keepdims=True))
        context = (e / e.sum(axis=2, keepdims=True) @ v).transpose(1, 0, 2).reshape(L, d)
        x = layer_norm(linear(context, a + "attention.output.dense") + x, W[a + "attention.output.LayerNorm.weight"],
                       W[a + "attention.output.LayerNorm.bias"], eps)  # fmt: skip
        inner = linear(x, a + "intermediate.dense")
        inner = inner * 0.5 * (1.0 + np.asarray(_erf(inner / math.sqrt(2.0)), dtype=np.float64))
        x = layer_norm(linear(inner, a + "output.dense") + x, W[a + "output.LayerNorm.weight"], W[a + "output.LayerNorm.bias"], eps)

    a = f"encoder.layer.{layer - 1}.attention."
    heads, outputs = [], []
    for h in range(H):
        cut = slice(h * d_k, (h + 1) * d_k)
        (wq, bq), (wk, bk), (wv, bv) = ((np.ascontiguousarray(W[a + f"self.{r}.weight"][cut].T), W[a + f"self.{r}.bias"][cut])
                                        for r in ("query", "key", "value"))  # fmt: skip
        Q, K, V = x @ wq + bq, x @ wk + bk, x @ wv + bv
        scores = Q @ K.T
        scaled = scores / math.sqrt(d_k)
        masked = scaled.copy()  # no mask: every key seen
        # attncli's shift: 0 while e^x of every score is safe (the articles' e^x), else each row's maximum
        safe = masked.min() >= -700 and masked.max() <= 700 and masked.max() + math.log(L) < 708
        shift = np.zeros((L, 1)) if safe else masked.max(axis=1, keepdims=True)
        exp = np.exp(masked - shift)
        total = exp.sum(axis=1, keepdims=True)
        weights = exp / total
        out = weights @ V
        outputs.append(out)
        if shown is not None and h + 1 != shown:
            continue
        heads.append({"head": h + 1, "W_Q": wq, "b_Q": bq, "Q": Q, "W_K": wk, "b_K": bk, "K": K, "W_V": wv, "b_V": bv, "V": V,
                      "scores": scores, "scaled": scaled, "masked": masked, "shift": shift[:, 0], "exp": exp, "exp_sum": total[:, 0],
                      "weights": weights, "output": out})  # fmt: skip
    concat = np.hstack(outputs)
    w_o = np.ascontiguousarray(W[a + "output.dense.weight"].T)
    b_o = W[a + "output.dense.bias"]
    doc = {"embeddings": x, "heads": heads, "concat": concat, "W_O": w_o, "b_O": b_o, "output": concat @ w_o + b_o}
    write(doc, sys.stdout.buffer)


if __name__ == "__main__":
    main()
