"""Float64 building blocks of the supported models: reading a layer's tensors, norms, activations, self-attention.

Dimension names: L tokens, d = d_model, H query heads, G key/value heads, d_k head size.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from attncli.core import engine
from attncli.core.scenario import Scale, Scenario, held
from attncli.core.variants import LearnedSink, Mask, QkNorm, Rope, SoftCap, Variant
from attncli.core.variants.mla import Mla
from attncli.errors import AttnError
from attncli.sources.checkpoints.source import TensorSource

_POOLED = 1 << 20  # numbers from which a read or a product goes into a pooled buffer (8 MiB of float64)


class Weights:
    """A checkpoint's tensors under one key prefix ('transformer.', 'model.', 'bert.' or none), checked for shape."""

    def __init__(self, checkpoint: TensorSource, *, probe: str, prefixes: Sequence[str]) -> None:
        self.checkpoint = checkpoint
        found = next((p for p in prefixes if checkpoint.has(p + probe)), None)
        if found is None:
            tried = " or ".join(f"'{p}{probe}'" for p in prefixes)
            raise AttnError(f"the checkpoint has no tensor {tried}", file=str(checkpoint.folder / checkpoint.described_by))
        self.prefix = found
        self._pool: list[np.ndarray] = []  # float64 buffers of earlier reads and products, reused once nothing holds them

    def _buffer(self, shape: tuple[int, ...]) -> np.ndarray:
        """An uninitialised float64 array of `shape`: a pooled one that nothing else holds any more, or a new one.

        Every earlier layer of an 8B model reads 0.3 GB of attention weights and makes 0.1 GB of
        products; in new arrays each time, the kernel's zeroing of fresh pages cost up to a tenth
        of the layer. A buffer is reused only when the pool alone refers to it: an array handed out
        and still held, or a view of it, keeps its reference count up.
        """
        for index in range(len(self._pool)):
            if self._pool[index].shape == shape and sys.getrefcount(self._pool[index]) == 2:  # the pool's and the call's
                return self._pool[index]
        fresh = np.empty(shape)
        if fresh.size >= _POOLED:
            self._pool.append(fresh)
        return fresh

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
        stored = self.checkpoint.shape(name)  # from the header: compared before a byte is read or allocated
        if stored != shape:
            raise AttnError(
                f"tensor '{name}' has shape {list(stored)} but {self.checkpoint.config_source} implies {list(shape)}",
                file=str(self.checkpoint.file_of(name)),
            )
        if len(shape) != 2 or math.prod(shape) < _POOLED:
            return self._finite(name, self.checkpoint.read(name))
        value = self._buffer(shape)
        for first, block in self.checkpoint.row_blocks(name):  # block: (rows, in), widened into a reused buffer
            value[first : first + block.shape[0]] = block
        return self._finite(name, value)

    def _finite(self, name: str, value: np.ndarray) -> np.ndarray:
        """`value`, refused when the tensor holds NaN or ±∞ (said as such, not as an overflow later)."""
        if not np.isfinite(value).all():
            what = "NaN" if np.isnan(value).any() else "∞" if np.isposinf(value).any() else "−∞"
            raise AttnError(f"tensor '{name}' holds {what}", file=str(self.checkpoint.file_of(name)), expected="finite weights")
        return value

    def linear(self, name: str, n_in: int, n_out: int, bias: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """An nn.Linear stored as (out, in): its weight as (in, out), for x·W, and its bias (None when `bias` is False)."""
        return self.get(name + ".weight", (n_out, n_in)).T, self.get(name + ".bias", (n_out,)) if bias else None

    def layer_norm(self, name: str, x: np.ndarray, eps: float) -> np.ndarray:
        """(L, d) x through the nn.LayerNorm `name`: its weight and bias, each (d,)."""
        d = x.shape[-1]
        return layer_norm(x, self.get(name + ".weight", (d,)), self.get(name + ".bias", (d,)), eps)

    def product(self, name: str, x: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
        """(L, out) x·Wᵀ for an nn.Linear weight W stored as `shape` = (out, in), widened a block of rows at a time.

        Only a 16 MiB block of W is ever in float64, used while it is warm: an earlier layer of an
        8B model costs its products and one pass over its stored bytes, not 1.7 GB of float64.
        """
        full = self._name(name)
        stored = self.checkpoint.shape(full)
        if stored != shape:
            raise AttnError(
                f"tensor '{full}' has shape {list(stored)} but {self.checkpoint.config_source} implies {list(shape)}",
                file=str(self.checkpoint.file_of(full)),
            )
        out_T = self._buffer((shape[0], x.shape[0]))  # (out, L)
        for first, block in self.checkpoint.row_blocks(full):  # block: (rows, in)
            np.matmul(block, x.T, out=out_T[first : first + block.shape[0]])  # (rows, in) @ (in, L)
        return out_T.T  # (L, out)

    def rows(self, name: str, rows: Sequence[int], width: int) -> np.ndarray:
        """(len(rows), width) chosen rows of an embedding table, without reading the rest."""
        full = self._name(name)
        stored = self.checkpoint.shape(full)
        if len(stored) == 2 and stored[1] != width:
            raise AttnError(
                f"tensor '{full}' has rows of {stored[1]} numbers but {self.checkpoint.config_source} says the hidden size is {width}",
                file=str(self.checkpoint.file_of(full)),
            )
        value = self._finite(full, self.checkpoint.read_rows(full, rows))
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

    W_Q: np.ndarray | None  # (d, H·d_k); None under multi-head latent attention (`mla` makes q, k, v)
    W_K: np.ndarray | None  # (d, G·d_k)
    W_V: np.ndarray | None  # (d, G·d_k)
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
    rope: Rope | None
    qk_norm: QkNorm | None = None  # Qwen3, OLMo 2: RMSNorm of q and k before RoPE
    softcap: SoftCap | None = None  # Gemma 2: scaled scores become cap·tanh(s / cap)
    sink: LearnedSink | None = None  # gpt-oss: one logit per head in the softmax's denominator
    mla: Mla | None = None  # DeepSeek's latent projections (the rope then turns only their decoupled part)
    variants: tuple[Variant, ...] = ()  # any other registry variant of the layer (an output gate), handed to its scenario as it is
    chunk: int | None = None  # Llama 4's chunked attention: query i sees keys of its own chunk of `chunk` positions only

    @property
    def mask(self) -> Mask:
        return Mask(causal=self.causal, window=self.window, chunk=self.chunk)


def self_attention(X: np.ndarray, w: AttentionWeights, X_kv: np.ndarray | None = None) -> np.ndarray:
    """(L, d) the attention block's output, before any residual: attncli's engine on this layer.

    The same engine, mask, RoPE and key/value-head map as the layer `run` shows, so what one
    layer prints is exactly what the next one reads. It keeps no stage unless `weights_seen`
    asks for every layer's weights (`attncli heads`). With `X_kv` (L, d), the keys and values project it
    instead of X, at the same positions and under the same mask (Gemma 3n's layers that reuse an earlier layer's).
    """
    tokens = tuple(f"token {i}" for i in range(1, X.shape[0] + 1))
    layer = Scenario(
        name="", tokens=tokens, heads=w.heads, context=None if X_kv is None else tokens, X_kv=X_kv,
        kv_heads=None if w.kv_heads == w.heads else w.kv_heads, scale=Scale("value", w.divisor),
        X=X, W_Q=w.W_Q, W_K=w.W_K, W_V=w.W_V, b_Q=w.b_Q, b_K=w.b_K, b_V=w.b_V, W_O=w.W_O, b_O=w.b_O, mask=w.mask,
        variants=held(w.rope, w.qk_norm, w.softcap, w.sink, w.mla, *w.variants),
    )  # fmt: skip
    seen, kept = _weights_seen.get(), _outputs_seen.get()
    result = engine.run(layer, rows=() if seen is None else None)  # every stage only when the weights are asked for
    if seen is not None:
        seen(np.stack([head.weights for head in result.heads]), w)  # (H, L, L)
    if kept is not None:
        kept(result.concat, w)  # (L, H·d_v) the heads' outputs side by side, as W_O reads them
    return result.output  # (L, d)


def cross_attention(X: np.ndarray, X_kv: np.ndarray, w: AttentionWeights) -> np.ndarray:
    """(L_q, d) the output of an encoder–decoder's cross-attention block: queries from X, keys and values from X_kv.

    The engine's cross-attention (a scenario with a context), as `run` shows it for that layer.
    """
    layer = Scenario(
        name="", tokens=tuple(f"token {i}" for i in range(1, X.shape[0] + 1)), heads=w.heads,
        context=tuple(f"source {j}" for j in range(1, X_kv.shape[0] + 1)), X_kv=X_kv,
        kv_heads=None if w.kv_heads == w.heads else w.kv_heads, scale=Scale("value", w.divisor),
        X=X, W_Q=w.W_Q, W_K=w.W_K, W_V=w.W_V, b_Q=w.b_Q, b_K=w.b_K, b_V=w.b_V, W_O=w.W_O, b_O=w.b_O, mask=w.mask,
    )  # fmt: skip
    return engine.run(layer, rows=()).output  # (L_q, d)


# -- the one-pass hook: every layer's weights, as the forward pass computes them ------------------

WeightsSeen = Callable[[np.ndarray, AttentionWeights], None]  # (H, L, L) weights and the layer they belong to
_weights_seen: ContextVar[WeightsSeen | None] = ContextVar("attncli_weights_seen", default=None)


@contextmanager
def weights_seen(callback: WeightsSeen) -> Iterator[None]:
    """Within the block, every self_attention call hands its weights to `callback`, layer after layer (`attncli heads`)."""
    token = _weights_seen.set(callback)
    try:
        yield
    finally:
        _weights_seen.reset(token)


OutputsSeen = Callable[[np.ndarray, AttentionWeights], None]  # (L, H·d_v) the heads' outputs, before W_O, and their layer
_outputs_seen: ContextVar[OutputsSeen | None] = ContextVar("attncli_outputs_seen", default=None)


@contextmanager
def outputs_seen(callback: OutputsSeen) -> Iterator[None]:
    """Within the block, every self_attention call hands each head's output to `callback`, layer after layer (the lens)."""
    token = _outputs_seen.set(callback)
    try:
        yield
    finally:
        _outputs_seen.reset(token)


@dataclass(frozen=True, eq=False)
class LayerInputs:
    """What an architecture module returns: the chosen layer's attention input, its weights, and where they came from."""

    X: np.ndarray  # (L, d) exactly what the layer's attention projects
    attention: AttentionWeights
    dtype: str  # how the attention weights are stored
    notes: tuple[str, ...]
    X_kv: np.ndarray | None = None  # (L_k, d) a cross-attention's keys' and values' input (an encoder's output); None: X
    kv_from: int | None = None  # the layer (from 1) whose input and weights make the keys and values (Gemma 3n's KV sharing); None: its own


def storage_note(dtype: str) -> str:
    return f"weights stored as {dtype}, arithmetic in float64"


def sharing_note(heads: int, kv_heads: int) -> str | None:
    """How the query heads share key/value heads, in the header's words; None when each has its own."""
    if 1 < kv_heads < heads:
        return (f"grouped-query attention: {heads} query heads share {kv_heads} key/value heads, {heads // kv_heads} each "
                "(head h reads key/value head ⌊(h−1)·G/H⌋ + 1)")  # fmt: skip
    if kv_heads == 1 and heads > 1:
        return f"multi-query attention: all {heads} query heads read one key/value head"
    return None


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


def compact(numbers: Sequence[int]) -> str:
    """'1–5, 7–11', or '6, 12, …, 36 (every 6th)' for an even stride, or '2' — layers as people count them."""
    if not numbers:
        return "none"
    if len(numbers) >= 4:
        step = numbers[1] - numbers[0]
        if step > 1 and all(b - a == step for a, b in zip(numbers, numbers[1:])):
            return f"{numbers[0]}, {numbers[1]}, …, {numbers[-1]} (every {_ordinal(step)})"
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
