"""The naive baseline of benchmark 3: what a notebook would do with the same file.

Loads the scenario with PyYAML's C loader, computes the same stages with NumPy and writes
them with .tolist() and the standard json module (indented, as attncli's JSON is).
Only handles what bench.py generates: one head, a causal mask, sqrt_dk scaling.
"""

import json
import sys

import numpy as np
import yaml

with open(sys.argv[1], encoding="utf-8") as handle:
    doc = yaml.load(handle, Loader=yaml.CSafeLoader)
X = np.array(doc["embeddings"], dtype=np.float64)
W_Q, W_K, W_V = (np.array(doc[k], dtype=np.float64) for k in ("W_Q", "W_K", "W_V"))
Q, K, V = X @ W_Q, X @ W_K, X @ W_V
scores = Q @ K.T
scaled = scores / np.sqrt(K.shape[1])
visible = np.tri(len(X), dtype=bool)
masked = np.where(visible, scaled, -np.inf)
shift = masked.max(axis=1)
exp = np.exp(masked - shift[:, None])
exp_sum = exp.sum(axis=1)
weights = exp / exp_sum[:, None]
output = weights @ V
masked_json = [[x if x != -np.inf else None for x in row] for row in masked.tolist()]
result = {
    "embeddings": X.tolist(),
    "heads": [{"head": 1, "W_Q": W_Q.tolist(), "W_K": W_K.tolist(), "W_V": W_V.tolist(), "Q": Q.tolist(), "K": K.tolist(),
               "V": V.tolist(), "scores": scores.tolist(), "scaled": scaled.tolist(), "masked": masked_json,
               "shift": shift.tolist(), "exp": exp.tolist(), "exp_sum": exp_sum.tolist(), "weights": weights.tolist(),
               "output": output.tolist()}],
    "output": output.tolist(),
}
json.dump(result, sys.stdout, indent=2)
