"""Float64 building blocks of the supported models: reading a layer's tensors, norms, activations, self-attention.

Dimension names: L tokens, d = d_model, H query heads, G key/value heads, d_k head size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attncli.checkpoints.rope import RopeSpec, rotate
from attncli.checkpoints.safetensors import Checkpoint
from attncli.errors import AttnError


class Weights:
    """A checkpoint's tensors under one key prefix ('transformer.', 'model.', 'bert.' or none), checked for shape."""

    def __init__(self, checkpoint: Checkpoint, *, probe: str, prefixes: Sequence[str]) -> None:
        self.checkpoint = checkpoint
        found = next((p for p in prefixes if checkpoint.has(p + probe)), None)
        if found is None:
            tried = " or ".join(f"'{p}{probe}'" for p in prefixes)
            raise AttnError(f"the checkpoint has no tensor {tried}", file=str(checkpoint.folder / checkpoint.described_by))
        self.prefix = found

    def _name(self, names: str | Sequence[str]) -> str:
        """The first of the alternative names present (old BERT files say LayerNorm.gamma for .weight)."""
        options = [names] if isinstance(names, str) else list(names)
        for name in options:
            if self.checkpoint.has(self.prefix + name):
                return self.prefix + name
        return self.prefix + options[0]  # missing: reading it names it in the error

    def has(self, name: str) -> bool:
        return self.checkpoint.has(self.prefix + name)

    def get(self, names: str | Sequence[str], shape: tuple[int, ...]) -> np.ndarray:
        """One tensor in float64, refused unless it has the shape the config implies."""
        name = self._name(names)
        value = self.checkpoint.read(name)
        if value.shape != shape:
            raise AttnError(
                f"tensor '{name}' has shape {list(value.shape)} but config.json implies {list(shape)}",
                file=str(self.checkpoint.file_of(name)),
            )
        return value

    def product(self, name: str, x: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
        """(L, out) x·Wᵀ for an nn.Linear weight W stored as `shape` = (out, in), widened a block of rows at a time.

        Only a 16 MiB block of W is ever in float64, used while it is warm: an earlier layer of an
        8B model costs its products and one pass over its stored bytes, not 1.7 GB of float64.
        """
        full = self._name(name)
        stored = self.checkpoint.entry(full).shape
        if stored != shape:
            raise AttnError(
                f"tensor '{full}' has shape {list(stored)} but config.json implies {list(shape)}",
                file=str(self.checkpoint.file_of(full)),
            )
        out_T = np.empty((shape[0], x.shape[0]))  # (out, L)
        for first, block in self.checkpoint.row_blocks(full):  # block: (rows, in)
            np.matmul(block, x.T, out=out_T[first : first + block.shape[0]])  # (rows, in) @ (in, L)
        return out_T.T  # (L, out)

    def rows(self, name: str, rows: Sequence[int], width: int) -> np.ndarray:
        """(len(rows), width) chosen rows of an embedding table, without reading the rest."""
        full = self._name(name)
        value = self.checkpoint.read_rows(full, rows)
        if value.shape[1] != width:
            raise AttnError(
                f"tensor '{full}' has rows of {value.shape[1]} numbers but config.json says the hidden size is {width}",
                file=str(self.checkpoint.file_of(full)),
            )
        return value

    def dtype(self, name: str) -> str:
        return self.checkpoint.stored_dtype(self._name(name))


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """(L, d) normalised per row to mean 0 and variance 1, then scaled and shifted."""
    centred = x - x.mean(axis=-1, keepdims=True)  # (L, d)
    variance = (centred * centred).mean(axis=-1, keepdims=True)  # (L, 1)
    normed: np.ndarray = centred / np.sqrt(variance + eps) * weight + bias
    return normed


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """(L, d) divided per row by its root mean square, then scaled (RMSNorm)."""
    mean_square = (x * x).mean(axis=-1, keepdims=True)  # (L, 1)
    normed: np.ndarray = x / np.sqrt(mean_square + eps) * weight
    return normed


_erf = np.frompyfunc(math.erf, 1, 1)  # exact erf per element; numpy has none


def activate(name: str, x: np.ndarray) -> np.ndarray:
    """The activation function transformers names `name`, in float64."""
    y: np.ndarray
    if name in ("gelu", "gelu_python"):
        y = x * 0.5 * (1.0 + np.asarray(_erf(x / math.sqrt(2.0)), dtype=np.float64))
    elif name in ("gelu_new", "gelu_pytorch_tanh", "gelu_python_tanh"):
        y = 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    elif name == "gelu_fast":
        y = 0.5 * x * (1.0 + np.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))
    elif name == "quick_gelu":
        y = x / (1.0 + np.exp(-1.702 * x))
    elif name in ("silu", "swish"):
        y = x / (1.0 + np.exp(-x))
    elif name == "relu":
        y = np.maximum(x, 0.0)
    elif name == "tanh":
        y = np.tanh(x)
    elif name == "sigmoid":
        y = 1.0 / (1.0 + np.exp(-x))
    elif name == "linear":
        y = x
    else:
        raise AttnError(f"the activation {name!r} is not supported")
    return y


@dataclass(frozen=True, eq=False)
class AttentionWeights:
    """One layer's self-attention in the row-vector convention: Q = X·W_Q + b_Q, out = concat·W_O + b_O."""

    W_Q: np.ndarray  # (d, H·d_k)
    W_K: np.ndarray  # (d, G·d_k)
    W_V: np.ndarray  # (d, G·d_k)
    b_Q: np.ndarray | None  # (H·d_k,)
    b_K: np.ndarray | None  # (G·d_k,)
    b_V: np.ndarray | None  # (G·d_k,)
    W_O: np.ndarray  # (H·d_k, d)
    b_O: np.ndarray | None  # (d,)
    heads: int
    kv_heads: int
    head_dim: int
    divisor: float
    causal: bool
    window: int | None  # query i sees keys i − window … i (and … i + window without the causal rule)
    rope: RopeSpec | None


def visible(L: int, *, causal: bool, window: int | None) -> np.ndarray:
    """(L, L) bool: True where query i sees key j."""
    i = np.arange(L)[:, None]  # (L, 1)
    j = np.arange(L)[None, :]  # (1, L)
    seen = np.ones((L, L), dtype=bool)
    if causal:
        seen &= j <= i
    if window is not None:
        seen &= np.abs(i - j) <= window
    return seen


def split_heads(x: np.ndarray, heads: int, head_dim: int) -> np.ndarray:
    """(L, heads·d_k) → (heads, L, d_k): head h owns columns h·d_k … (h+1)·d_k − 1."""
    return x.reshape(x.shape[0], heads, head_dim).transpose(1, 0, 2)


@dataclass(frozen=True)
class AttentionShape:
    """What attention does with Q, K and V, apart from the weights that make them."""

    heads: int
    kv_heads: int
    head_dim: int
    divisor: float
    causal: bool
    window: int | None
    rope: RopeSpec | None


def self_attention(X: np.ndarray, w: AttentionWeights) -> np.ndarray:
    """(L, d) the attention block's output, before any residual: softmax(mask(rope(Q)·rope(K)ᵀ / divisor))·V·W_O + b_O."""
    Q = X @ w.W_Q + (0.0 if w.b_Q is None else w.b_Q)  # (L, H·d_k)
    K = X @ w.W_K + (0.0 if w.b_K is None else w.b_K)  # (L, G·d_k)
    V = X @ w.W_V + (0.0 if w.b_V is None else w.b_V)  # (L, G·d_k)
    heads_out = attend(Q, K, V, AttentionShape(w.heads, w.kv_heads, w.head_dim, w.divisor, w.causal, w.window, w.rope))
    out: np.ndarray = heads_out @ w.W_O + (0.0 if w.b_O is None else w.b_O)  # (L, d)
    return out


def attend(Q: np.ndarray, K: np.ndarray, V: np.ndarray, a: AttentionShape) -> np.ndarray:
    """(L, H·d_k) the heads' outputs side by side, softmax(mask(rope(Q)·rope(K)ᵀ / divisor))·V, from projected Q, K, V."""
    L = Q.shape[0]
    Q, K, V = split_heads(Q, a.heads, a.head_dim), split_heads(K, a.kv_heads, a.head_dim), split_heads(V, a.kv_heads, a.head_dim)
    if a.rope is not None:
        Q, K = rotate(Q, a.rope), rotate(K, a.rope)  # (H, L, d_k), (G, L, d_k)
    group = a.heads // a.kv_heads
    K, V = np.repeat(K, group, axis=0), np.repeat(V, group, axis=0)  # (H, L, d_k): head h reads kv head h // group
    scores = Q @ K.transpose(0, 2, 1) / a.divisor  # (H, L, L)
    scores = np.where(visible(L, causal=a.causal, window=a.window), scores, -np.inf)  # (H, L, L)
    exp = np.exp(scores - scores.max(axis=-1, keepdims=True))  # (H, L, L)
    weights = exp / exp.sum(axis=-1, keepdims=True)  # (H, L, L)
    heads_out: np.ndarray = (weights @ V).transpose(1, 0, 2).reshape(L, a.heads * a.head_dim)  # (L, H·d_k)
    return heads_out


@dataclass(frozen=True, eq=False)
class LayerInputs:
    """What an architecture module returns: the chosen layer's attention input, its weights, and where they came from."""

    X: np.ndarray  # (L, d) exactly what the layer's attention projects
    attention: AttentionWeights
    dtype: str  # how the attention weights are stored
    notes: tuple[str, ...]


def storage_note(dtype: str) -> str:
    return f"weights stored as {dtype}, arithmetic in float64"


def window_note(window: int | None) -> str | None:
    """'sliding window: query i sees keys i−3 … i (sliding_window = 4)' or None."""
    if window is None:
        return None
    return f"sliding window: query i sees keys i−{window} … i (sliding_window = {window + 1})"


def through(layer: int) -> str:
    """', then layers 1–4 (attention and MLP)' for the layers before `layer` (from 1)."""
    if layer == 1:
        return ""
    return ", then " + ("layer 1" if layer == 2 else f"layers 1–{layer - 1}") + " (attention and MLP)"
