"""One attention layer of a real checkpoint as a `Scenario`: the engine, every renderer and `explain` then work unchanged.

Only the chosen layer's inputs are kept: the layers before it run once, in float64, and are dropped.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from attncli.core.scenario import Origin, Scale, Scenario, held, kv_head
from attncli.core.variants import Mask
from attncli.errors import AttnError, did_you_mean, option
from attncli.sources.checkpoints.layer import LayerCase, load_layer
from attncli.sources.checkpoints.tokens import SPACE_MARK
from attncli.sources.limits import Limits

SPECIAL_TOKENS = ("auto", "none")  # as the tokenizer's post-processor adds them, or left out
SPECIAL_TOKENS_EXPECTED = "auto (as the tokenizer adds them) or none"


def check_special_tokens(special_tokens: str) -> None:
    """The one check of the special-tokens mode every command and function taking it makes: "auto" or "none", else one error."""
    if special_tokens not in SPECIAL_TOKENS:
        hint = did_you_mean(special_tokens, SPECIAL_TOKENS) if isinstance(special_tokens, str) else ""
        raise AttnError(f"found {special_tokens!r}{hint}", key=option("special_tokens"), expected=SPECIAL_TOKENS_EXPECTED)


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
    shown: str | None = None,
    target: str | None = None,
    attention: str | None = None,
    first: int | None = None,
    head_only: bool = False,
) -> Scenario:
    """The scenario of layer `layer` (from 1) of the checkpoint in `folder`, for `sentence`.

    `shown` is the folder as the person wrote it (a scenario's `model: ~/models/gpt2`), which the
    header and JSON name instead of the path it expands to: a published post shows no home folder.
    An encoder–decoder also takes the decoder's `target` text and which `attention` to show; `first` keeps only the
    sentence's first tokens (decode's run before a longrope switch). With `head_only`, the command holds only `head`'s
    tokens × tokens stages (`run --head`: api.run(…, heads=[head])), and the limits count that head's cells alone.
    """
    check_special_tokens(special_tokens)
    case = load_layer(
        folder, layer=layer, text=sentence, special_tokens=special_tokens == "auto", max_cells=limits.max_cells, target=target, attention=attention,
        first=first, held=1 if head_only and head is not None else None,
    )
    scenario = layer_scenario(case, head=head, name=name, shown=shown)
    origin = Origin(str(folder), layer, sentence, special_tokens, target, case.attention, shown=shown or case.folder)
    return dataclasses.replace(scenario, origin=origin)


def layer_scenario(case: LayerCase, *, head: int | None = None, name: str | None = None, shown: str | None = None) -> Scenario:
    """`case` as a Scenario: X, the heads' blocks, biases, RoPE, key/value heads, mask, divisor, W_O and the header's notes.

    The header names the model (`case.name`), never the folder or file it was read from: a post shows no local path
    (`source` keeps it, for the API and for a header that asks for it). The head's notes are short; how the layer was
    read (its norms, RoPE, storage, the tokens' ids) is in `details`, shown when asked for.
    """
    folder = Path(shown or case.folder)
    model = case.name or f"the {case.model_type} model"
    divisor = case.divisor
    scale = Scale("sqrt_dk", divisor) if divisor == math.sqrt(case.head_dim) else Scale("value", divisor)
    details = [_tokens_note(case), *case.notes]
    notes: list[str] = []
    if head is not None and 1 <= head <= case.heads:
        first, last = (head - 1) * case.head_dim + 1, head * case.head_dim
        if case.kv_heads != case.heads:
            notes.append(f"head {head} reads key/value head {kv_head(head, case.heads, case.kv_heads)} of {case.kv_heads}")
        if case.mla is not None:  # the heads' outputs are d_v wide under multi-head latent attention
            first, last = (head - 1) * case.mla.d_v + 1, head * case.mla.d_v
        notes.append(f"head {head}'s output meets rows {first}–{last} of W_O")
    if case.kv_from is not None:
        notes.append(f"keys and values reused from layer {case.kv_from} (KV sharing): Z is layer {case.kv_from}'s input, projected by its "
                     "W_K and W_V; this layer makes only its queries")  # fmt: skip
    return Scenario(
        name=name or f"{model} {_which(case)}" + (f" ({case.layer_kind})" if case.layer_kind else ""),
        description=f"{case.model_type} architecture, {case.layers} {'' if case.attention is None else _stack(case) + ' '}layers",
        source=str(folder),
        tokens=case.labels,
        context=case.context_labels,
        X_kv=_frozen(case.X_kv),
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
        mask=Mask(causal=case.causal, window=case.window, chunk=case.chunk),
        variants=held(case.rope, case.qk_norm, case.softcap, case.sink, case.mla, *case.variants),
        word_marks=WORD_MARKS,
        notes=tuple(notes),
        details=tuple(details),
        encoder=None if case.causal or case.attention == "cross" else case.model_type + ("'s encoder" if case.attention else ""),
    )


def _which(case: LayerCase) -> str:
    """'layer 3', or for an encoder–decoder 'decoder layer 2 (cross-attention)'."""
    if case.attention is None:
        return f"layer {case.layer}"
    kind = {"encoder": "self-attention", "decoder": "self-attention", "cross": "cross-attention"}[case.attention]
    return f"{_stack(case)} layer {case.layer} ({kind})"


def _stack(case: LayerCase) -> str:
    """An encoder–decoder's stack of the layer: 'encoder' or 'decoder' (cross-attention is the decoder's)."""
    return "encoder" if case.attention == "encoder" else "decoder"


def _tokens_note(case: LayerCase) -> str:
    """'12 tokens from its tokenizer.json (ids 464, 3797, …)'."""
    ids = ", ".join(map(str, case.token_ids[:8])) + (", …" if len(case.token_ids) > 8 else "")
    said = f"{len(case.token_ids)} tokens from {case.tokens_from} (ids {ids})"
    if case.context_ids is not None:
        source = ", ".join(map(str, case.context_ids[:8])) + (", …" if len(case.context_ids) > 8 else "")
        said = f"{len(case.token_ids)} target tokens (ids {ids}) reading {len(case.context_ids)} source tokens (ids {source}) from {case.tokens_from}"
    return said


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
