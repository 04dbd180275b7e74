"""The scenario's sizes and settings in a few plain lines, the same in every format's header."""

from __future__ import annotations

from attncli.core import variants
from attncli.core.scenario import Scenario


def describe(s: Scenario, *, long_notes: bool = False) -> list[str]:
    """'L = 6 tokens · d_model = 2 · …', then the settings: scale, mask, and any variant; then its notes (`long_notes`: its details too)."""
    heads = f"{s.heads} head" + ("s" if s.heads > 1 else "")
    if s.heads != s.G:
        heads += f" sharing {s.G} key/value head" + ("s" if s.G > 1 else "")
    size = f"L = {s.L} token{'s' * (s.L != 1)}"
    if s.cross:
        shared = s.origin is not None and s.origin.attention is None  # a model of one stack: an earlier layer's keys (KV sharing)
        which = "an earlier layer's, KV sharing" if shared else "cross-attention"
        size = f"L_q = {s.L} quer{'ies' if s.L != 1 else 'y'} × L_k = {s.L_k} key{'s' * (s.L_k != 1)} ({which})"
    width = "Q, K, V given" if s.direct else "V given" if s.X is None else f"d_model = {s.d_model}"  # V alone: the scores given
    d_k = f" · d_k = {s.d_k}" if s.d_k else ""  # none given beside given scores
    lines = [f"{size} · {width} · {heads}{d_k} · d_v = {s.d_v} · d_out = {s.d_out}"]
    scale = {"sqrt_dk": f"÷ √d_k = {s.scale.divisor:.4g}", "none": "none", "value": f"÷ {s.scale.divisor:g}"}[s.scale.mode]
    settings = [f"scale: {scale}", f"mask: {s.mask.describe()}"]
    settings += [variant.describe() for variant in variants.active(s) if variant.stage != "visibility"]  # the mask is said above
    lines.append(" · ".join(settings))
    lines += list(s.notes) + (list(s.details) if long_notes else [])
    return lines


def told(description: str, sentence: str) -> str:
    """`description` without the sentence it repeats at its start ("The cat sat on the mat — 2-d embeddings, …" under a title that
    gives the sentence: "2-d embeddings, …"); "" when it says nothing more."""
    if not sentence or not description.casefold().startswith(sentence.casefold()):
        return description
    rest = description[len(sentence) :]
    if rest[:1].isalnum():  # the sentence ended inside a word of the description
        return description
    return rest.lstrip(" .,;:—–-")


def rounded_every_step(decimals: int) -> str:
    """The note over a hand-rounded run (--round-steps), in every format."""
    return f"Every intermediate is rounded to {decimals} decimal{'s' * (decimals != 1)} before the next step, as by hand."


def hand_rounded_title(decimals: int) -> str:
    """The heading of the table that sets a hand-rounded output beside the exact one, in every format."""
    return f"Hand-rounded ({decimals} decimal{'s' * (decimals != 1)}) vs exact output"
