"""One attention layer of a real checkpoint as a `Scenario`: the engine, every renderer and `explain` then work unchanged.

Only the chosen layer's inputs are kept: the layers before it run once, in float64, and are dropped.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from attncli import reading
from attncli.checkpoints.layer import LayerCase, load_layer
from attncli.checkpoints.tokens import SPACE_MARK
from attncli.errors import AttnError
from attncli.limits import Limits
from attncli.model import Scale, Scenario
from attncli.variants import Mask, Rope

SPECIAL_TOKENS = ("auto", "none")  # as the tokenizer's post-processor adds them, or left out
WORD_MARKS = (SPACE_MARK, "Ġ", "▁")  # a leading space as labels show it, and as byte-level BPE and SentencePiece spell it


def load_scenario(
    folder: Path,
    *,
    layer: int,
    sentence: str,
    special_tokens: str = "auto",
    head: int | None = None,
    name: str | None = None,
    limits: Limits = Limits(),
) -> Scenario:
    """The scenario of layer `layer` (from 1) of the checkpoint in `folder`, for `sentence`."""
    if special_tokens not in SPECIAL_TOKENS:
        raise AttnError(f"found {special_tokens!r}", key="special_tokens", expected="auto (as the tokenizer adds them) or none")
    case = load_layer(folder, layer=layer, text=sentence, special_tokens=special_tokens == "auto")
    cells = case.heads * len(case.labels) ** 2
    if cells > limits.max_cells:
        raise AttnError(
            f"{len(case.labels):,} tokens × {len(case.labels):,} × {case.heads} heads = {cells:,} attention cells, "
            f"more than the limit of {limits.max_cells:,}",
            key="sentence",
            expected="a shorter sentence, or raise the limit with --max-cells",
        )
    for path in folder.iterdir():  # no --output may replace a file of the checkpoint
        if path.name in ("config.json", "tokenizer.json") or path.name.endswith((".safetensors", ".safetensors.index.json")):
            reading.note_read(path)
    return layer_scenario(case, head=head, name=name)


def layer_scenario(case: LayerCase, *, head: int | None = None, name: str | None = None) -> Scenario:
    """`case` as a Scenario: X, the heads' blocks, biases, RoPE, key/value heads, mask, divisor, W_O and the header's notes."""
    folder = Path(case.folder)
    divisor = case.divisor
    scale = Scale("sqrt_dk", divisor) if divisor == math.sqrt(case.head_dim) else Scale("value", divisor)
    rope = None
    if case.rope is not None:
        rope = Rope(theta=case.rope.theta, style=case.rope.style, inv_freq=_frozen(case.rope.inv_freq), scaling=case.rope.scaling)
    notes = [f"{case.model_type} checkpoint {folder}: layer {case.layer} of {case.layers}, {_tokens_note(case)}", *case.notes]
    if head is not None and 1 <= head <= case.heads:
        first, last = (head - 1) * case.head_dim + 1, head * case.head_dim
        if case.kv_heads != case.heads:
            kv_head = (head - 1) * case.kv_heads // case.heads + 1
            notes.append(f"head {head} reads key/value head {kv_head} of {case.kv_heads}")
        notes.append(f"head {head}'s output meets rows {first}–{last} of W_O")
    return Scenario(
        name=name or f"{folder.name} layer {case.layer}",
        description=f"layer {case.layer} of the {case.model_type} checkpoint in {folder}",
        source=str(folder),
        tokens=case.labels,
        heads=case.heads,
        kv_heads=None if case.kv_heads == case.heads else case.kv_heads,
        scale=scale,
        X=_frozen(case.X),
        W_Q=_frozen(case.W_Q),
        W_K=_frozen(case.W_K),
        W_V=_frozen(case.W_V),
        b_Q=_frozen(case.b_Q),
        b_K=_frozen(case.b_K),
        b_V=_frozen(case.b_V),
        W_O=_frozen(case.W_O),
        b_O=_frozen(case.b_O),
        mask=Mask(causal=case.causal, window=case.window),
        rope=rope,
        word_marks=WORD_MARKS,
        notes=tuple(notes),
    )


def _tokens_note(case: LayerCase) -> str:
    """'12 tokens from its tokenizer.json (ids 464, 3797, …)'."""
    ids = ", ".join(map(str, case.token_ids[:8])) + (", …" if len(case.token_ids) > 8 else "")
    return f"{len(case.token_ids)} tokens from its tokenizer.json (ids {ids})"


def _frozen(array: np.ndarray | None) -> np.ndarray | None:
    """A read-only float64 view; a transposed matrix (nn.Linear's W stored as out × in) stays a view, not a second copy.

    An 8B-class layer's W_Q, W_K, W_V and W_O are 336 MB in float64: copying them into row order
    would double the memory of the shown layer (the engine copies each head's block anyway).
    """
    if array is None:
        return None
    frozen = np.asarray(array, dtype=np.float64)
    if not (frozen.flags.c_contiguous or frozen.flags.f_contiguous):
        frozen = np.ascontiguousarray(frozen)
    frozen = frozen.view()
    frozen.setflags(write=False)
    return frozen
