"""The floor of the JSON benchmark: only the work no JSON writer can skip, for the files bench.py generates.

Reads the file's libyaml events (PyYAML's C parser, no tree), turns the matrices' scalars
into float64 arrays, computes the stages with NumPy (the five L × L ones: scores, scaled,
masked, exp, weights), encodes every matrix with orjson one row at a time and writes the
bytes to stdout. Handles only what bench.py generates: one head, a causal mask, sqrt_dk.
"""

import sys

import numpy as np
import orjson
import yaml


def matrices(path: str) -> dict[str, list[list[float]]]:
    """Every top-level key whose value is a list of lists of numbers, from the event stream."""
    out: dict[str, list[list[float]]] = {}
    key, depth, rows, row = None, 0, [], []
    with open(path, "rb") as handle:
        for event in yaml.parse(handle, Loader=yaml.CSafeLoader):
            kind = type(event)
            if kind is yaml.ScalarEvent:
                if depth == 0:
                    key = event.value
                elif depth == 2:
                    row.append(float(event.value))
            elif kind is yaml.SequenceStartEvent:
                depth += 1
                row = []
            elif kind is yaml.SequenceEndEvent:
                depth -= 1
                if depth == 1:
                    rows.append(row)
                elif depth == 0:
                    if rows:
                        out[key] = rows
                    rows = []
    return out


def main() -> None:
    given = matrices(sys.argv[1])
    X = np.array(given["embeddings"])  # (L, d_model)
    W_Q, W_K, W_V = (np.array(given[k]) for k in ("W_Q", "W_K", "W_V"))
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (L, d_k)
    scores = Q @ K.T  # (L, L)
    scaled = scores / np.sqrt(K.shape[1])
    visible = np.tri(len(X), dtype=bool)
    masked = np.where(visible, scaled, -np.inf)
    shift = masked.max(axis=1)  # (L,)
    exp = np.exp(masked - shift[:, None])
    exp_sum = exp.sum(axis=1)
    weights = exp / exp_sum[:, None]
    output = weights @ V  # (L, d_v)
    out = sys.stdout.buffer
    option = orjson.OPT_SERIALIZE_NUMPY
    for matrix in (X, W_Q, W_K, W_V, Q, K, V, scores, scaled, masked, exp, weights, output):
        out.write(b"[\n")
        for row in matrix:
            out.write(orjson.dumps(row, option=option) + b",\n")
        out.write(b"]\n")
    out.write(orjson.dumps(shift, option=option) + orjson.dumps(exp_sum, option=option))


if __name__ == "__main__":
    main()
