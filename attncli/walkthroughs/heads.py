"""The head map turned into what people read: one row per head, a reading in words for the notable ones, and the command that explains each.

Input: a `HeadMap` (attncli.core.heads) and where it came from. Output: plain data (dicts,
strings, NumPy thumbnails) that attncli.formats.headgrid draws and JSON carries as it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from attncli.core.heads import PATTERNS, STATISTICS, HeadMap
from attncli.core.lens import HeadLens
from attncli.document.numbers import percent
from attncli.errors import AttnError, did_you_mean, option
from attncli.walkthroughs.lens import lens_json, promotes

SCHEMA = "attncli.heads/1"
FORMULAS = {
    "entropy": "mean over rows i of −Σ_j a_ij ln a_ij (nats)",
    "entropy_ratio": "mean over rows i with ≥ 2 visible keys of that entropy ÷ ln(visible keys): 1 = uniform",
    "max_weight": "mean over rows i of max_j a_ij",
    "first_token": "mean over rows i of a_i1",
    "previous_token": "mean over rows i ≥ 2 of a_i,i−1",
    "self": "mean over rows i of a_ii",
    "mean_distance": "mean over rows i of Σ_j a_ij·|i − j| (tokens)",
    "induction_score": "on n random tokens repeated twice: Σ a_ij over keys j just after an earlier copy of token i, ÷ Σ a_ij",
    "previous_token_score": "on the repeated random tokens: Σ_i a_i,i−1 ÷ Σ a_ij",
    "duplicate_token_score": "on the repeated random tokens: Σ a_ij over earlier copies j of token i, ÷ Σ a_ij",
}
SORTABLE = (*STATISTICS, *PATTERNS)
# When a head is notable: the share of the weight a behaviour must reach, and by how much it must beat uniform weights
SINK, PREVIOUS, SELF, INDUCTION, DUPLICATE = 0.5, 0.4, 0.4, 0.3, 0.3
ABOVE_UNIFORM = 0.2
NOTABLE = 10  # the heads listed with a reading, unless --top says otherwise


class Source(NamedTuple):
    """Where the map came from, to name it and to write the explain commands."""

    kind: str  # "model" or "scenario"
    name: str  # the folder, or the scenario's file or built-in name
    sentence: str | None  # the text given with --model
    model_type: str | None
    token_ids: tuple[int, ...] | None
    special_tokens: str = "auto"
    induction_tokens: tuple[int, ...] | None = None
    seed: int | None = None


class HeadRow(NamedTuple):
    layer: int
    head: int
    kv_head: int | None  # only when key/value heads are shared
    values: dict[str, float]  # every statistic (and pattern score when computed)
    reading: str | None  # the one-line reading in words, for a notable head
    strength: float  # how strongly the reading holds (for ordering the notable heads)
    explain: ExplainCall | None  # how to explain it
    behaviour: str | None = None  # what the reading names: first_token (a sink), previous_token, self, induction_score …
    row: int | None = None  # the query row (from 0) its explain call shows, for a notable head
    sentence_induction: float | None = None  # induction on the sentence itself, when its tokens repeat (core.heads.sentence_induction)
    lens: HeadLens | None = None  # direct logit attribution at that row, when the model's whole pass was kept


def rows(heads: HeadMap, source: Source) -> list[HeadRow]:
    """One row per layer and head, layers and heads from 1."""
    names = [*STATISTICS, *(PATTERNS if heads.patterns else ())]
    tables = {name: heads.table(name) for name in names}
    shared = heads.kv_heads != heads.heads
    out = []
    for li in range(heads.layers):
        layer = heads.first_layer + li
        for hi in range(heads.heads):
            head = hi + 1
            values = {name: float(tables[name][li, hi]) for name in names}
            induction = float(heads.induction[li][hi]) if heads.induction else None
            reading, strength, behaviour = _reading(values, heads, layer, head, induction)
            row = _row(heads, layer, head, behaviour) if reading is not None else None
            command = _explain(source, heads, layer, head, behaviour) if reading is not None else None
            lens = heads.lens.get((layer, head))
            if reading is not None and lens is not None:
                reading += f"; {promotes(lens, _quoted(heads.tokens[lens.position - 1]))}"
            out.append(HeadRow(layer, head, heads.kv_head(head) if shared else None, values, reading, strength, command, behaviour or None,
                               row, induction, lens))  # fmt: skip
    return out


def sorted_rows(all_rows: list[HeadRow], sort: str | None, top: int | None) -> list[HeadRow]:
    """Largest first by `sort` (layer and head order when None), the first `top` of them."""
    if sort is not None:
        if sort not in all_rows[0].values:
            hint = f" (computed with {option('induction')} N)" if sort in PATTERNS else did_you_mean(sort, all_rows[0].values)
            raise AttnError(f"found {sort!r}{hint}", key=option("sort"), expected=f"one of {', '.join(all_rows[0].values)}")
        all_rows = sorted(all_rows, key=lambda r: -_sortable(r.values[sort]))
    return all_rows[:top] if top is not None else all_rows


def notable(all_rows: list[HeadRow], limit: int | None = None, sort: str | None = None) -> list[HeadRow]:
    """The heads that do something beyond a sink, strongest first (or largest `sort` first), `limit` of them (10 by default).

    A head whose only reading is a sink is not listed: `sinks` sums them up in one line.
    """
    key = (lambda r: -_sortable(r.values[sort])) if sort is not None and sort in all_rows[0].values else (lambda r: -r.strength)
    return sorted((r for r in all_rows if r.reading is not None and r.behaviour != "first_token"), key=key)[: limit or NOTABLE]


def sinks(all_rows: list[HeadRow], tokens: Sequence[str]) -> str | None:
    """One line for the heads whose reading is a sink: how many of all, on which token, and the strongest; None without any."""
    sunk = sorted((r for r in all_rows if r.behaviour == "first_token"), key=lambda r: -r.strength)
    if not sunk:
        return None
    first = _quoted(tokens[0])
    if len(sunk) == 1:
        r, of = sunk[0], "its one head" if len(all_rows) == 1 else f"1 of {len(all_rows)} heads"
        return (f"Layer {r.layer} head {r.head}, {of}, puts most of its weight on the first token {first} "
                f"({percent(r.values['first_token'])}): a sink, not meaning (the softmax must put a row's weight somewhere).")  # fmt: skip
    strongest = ", ".join(f"layer {r.layer} head {r.head} ({percent(r.values['first_token'])})" for r in sunk[:3])
    return (f"{len(sunk)} of {len(all_rows)} heads put most of their weight on the first token {first}: sinks, not "
            f"meaning (the softmax must put a row's weight somewhere); the strongest: {strongest}.")  # fmt: skip


def _sortable(x: float) -> float:
    return -math.inf if math.isnan(x) else x


def _reading(values: dict[str, float], heads: HeadMap, layer: int, head: int, sentence: float | None = None) -> tuple[str | None, float, str]:
    """'layer 3 head 5: 62% of the weight on the previous token', how strong, and which behaviour."""
    tokens = heads.tokens
    candidates: list[tuple[float, str, str]] = []

    def beats(name: str, threshold: float) -> bool:
        value = values[name]
        return value >= threshold and value >= heads.uniform[name][layer - heads.first_layer] + ABOVE_UNIFORM

    def beats_even(value: float, even: float) -> bool:
        return value >= INDUCTION and value >= even + ABOVE_UNIFORM

    first = values["first_token"]
    if beats("first_token", SINK):
        candidates.append((first, "first_token", f"{percent(first)} of the weight on the first token {_quoted(tokens[0])}: a sink, not meaning"))
    previous = values["previous_token"]
    if beats("previous_token", PREVIOUS):
        candidates.append((previous, "previous_token", f"{percent(previous)} of the weight on the previous token"))
    itself = values["self"]
    if beats("self", SELF):
        candidates.append((itself, "self", f"{percent(itself)} of the weight on the token itself"))
    induction = values.get("induction_score")
    if induction is not None and induction >= INDUCTION:
        candidates.append((induction, "induction_score", f"induction: {percent(induction)} of the weight on the token after an earlier copy of the current one (repeated random tokens)"))  # fmt: skip
    if sentence is not None and beats_even(sentence, heads.uniform["sentence_induction"][layer - heads.first_layer]):
        candidates.append((sentence, "sentence_induction", f"induction on the sentence: {percent(sentence)} of the weight of a repeated token's row on the token "
                           "after its earlier copy"))  # fmt: skip
    duplicate = values.get("duplicate_token_score")
    if duplicate is not None and duplicate >= DUPLICATE:
        candidates.append((duplicate, "duplicate_token_score", f"{percent(duplicate)} of the weight on earlier copies of the same token (repeated random tokens)"))  # fmt: skip
    if not candidates:
        return None, 0.0, ""
    meaningful = [c for c in candidates if c[1] != "first_token"]  # a head that also sinks is read by what else it does
    strength, behaviour, text = max(meaningful or candidates)
    if heads.kv_heads != heads.heads:
        text += f" (reads key/value head {heads.kv_head(head)})"
    return f"layer {layer} head {head}: {text}", strength, behaviour


def _quoted(label: str) -> str:
    """A token in a reading: quoted as explain's prose quotes it, text in every format (a Markdown code span showed its
    backticks in HTML, Typst and the terminal)."""
    return f"'{label}'"



def row_readings(
    weights: Sequence[float], tokens: Sequence[str], labels: Sequence[str], position: int, visible: Sequence[bool], *, quote: Callable[[str], str] | None = None
) -> list[str]:
    """What one query row's weights show, in words: a sink, the previous token, itself, an induction step.

    `weights`, `tokens`, `labels` and `visible` are per key (keys 1 … L of a self-attention row),
    `position` the query's (from 1). A behaviour is named under the map's rule: its share of the
    row reaches the threshold (SINK, PREVIOUS, SELF, INDUCTION) and beats an even spread over the
    visible keys by ABOVE_UNIFORM; nothing is said of a row that sees a single key. `quote` writes
    a token in prose (default `like this`).
    """
    q = quote or _quoted
    n = sum(1 for seen in visible if seen)
    if n < 2:
        return []
    even = 1.0 / n
    i = position - 1  # from 0

    def beats(share: float, threshold: float, keys: int = 1) -> bool:
        return share >= threshold and share >= keys * even + ABOVE_UNIFORM

    out = []
    first = weights[0]
    if i == 1 and beats(first, min(SINK, PREVIOUS)):  # key 1 is both the first and the previous token: one row cannot tell them apart
        out.append(f"{percent(first)} of this row goes to {q(labels[0])}, the first token and the previous one: "
                   "from one row, a sink and a previous-token head look the same.")  # fmt: skip
    else:
        if i > 0 and beats(first, SINK):
            out.append(f"{percent(first)} of this row goes to {q(labels[0])}, the first token: a sink, not meaning "
                       "(the softmax must give the whole row's weight somewhere, and many heads put what they do not use on the first token).")  # fmt: skip
        if i > 1 and beats(weights[i - 1], PREVIOUS):
            out.append(f"{percent(weights[i - 1])} of this row goes to the previous token, {q(labels[i - 1])}: what a previous-token head does.")
    if beats(weights[i], SELF):
        out.append(f"{percent(weights[i])} of this row goes to {q(labels[i])} itself: the head attends to the token itself.")
    targets = [j for j in range(1, i + 1) if tokens[j - 1] == tokens[i] and j - 1 < i and visible[j]]  # keys just after an earlier copy
    share = sum(weights[j] for j in targets)
    if targets and beats(share, INDUCTION, len(targets)):
        after = _list_and([q(labels[j]) + ("" if labels[j].endswith(f"({j + 1})") else f" (position {j + 1})") for j in targets])
        copies = _list_and([str(j) for j in targets])
        out.append(f"{percent(share)} of this row goes to {after}, the token{'s' * (len(targets) > 1)} just after an earlier "
                   f"{q(tokens[i])} (position{'s' * (len(targets) > 1)} {copies}): what an induction head does, "
                   "predicting that what followed the token last time follows it again.")  # fmt: skip
    return out


def _list_and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


class ExplainCall(NamedTuple):
    """What `explain` needs to show a head's arithmetic; the command line and the Python API each spell it their own way."""

    model: str | None  # the checkpoint folder, or None for a scenario
    scenario: str | None  # the scenario's file or built-in name
    layer: int | None  # with a model
    head: int
    sentence: str | None
    special_tokens: str
    word: str | None  # the query token as a word, when it is one
    position: int | None  # from 1, when the word alone does not say which token


def _row(heads: HeadMap, layer: int, head: int, behaviour: str) -> int:
    """The query row (from 0) where the behaviour is strongest (induction on random tokens: the sentence's last token)."""
    return heads.strongest_row(behaviour, layer, head) if behaviour in heads.rows else len(heads.tokens) - 1


def _explain(source: Source, heads: HeadMap, layer: int, head: int, behaviour: str) -> ExplainCall:
    """The explain call at the query row where the behaviour is strongest."""
    return explain_call(source, heads, layer, head, _row(heads, layer, head, behaviour))


def explain_call(source: Source, heads: HeadMap, layer: int, head: int, row: int) -> ExplainCall:
    """The explain call of head `head` of `layer` at query `row` (from 0): by its word, with its position when the word repeats
    or is no word."""
    word: str | None = heads.tokens[row].lstrip("␣Ġ▁")
    assert word is not None
    repeated = sum(1 for t in heads.tokens if t.lstrip("␣Ġ▁").lower() == word.lower()) > 1
    position = row + 1 if repeated or not word.isalnum() else None
    if not word.isalnum():
        word = None
    if source.kind == "model":
        return ExplainCall(source.name, None, layer, head, source.sentence, source.special_tokens, word, position)
    return ExplainCall(None, source.name, None, head, None, "auto", word, position)


def python_call(call: ExplainCall) -> str:
    """The call in the Python API: attn.explain(attn.load_model(…), "cat", head=3)."""
    where = (
        f"attn.load_model({call.model!r}, layer={call.layer}, sentence={call.sentence!r}"
        + (f", special_tokens={call.special_tokens!r}" if call.special_tokens != "auto" else "")
        + ")"
        if call.model is not None
        else repr(call.scenario)
    )
    word = f", {call.word!r}" if call.word is not None else ""
    position = f", position={call.position}" if call.position is not None else ""
    return f"attn.explain({where}{word}{position}, head={call.head})"


def document(
    heads: HeadMap, source: Source, shown: list[HeadRow], all_rows: list[HeadRow], spell: Callable[[ExplainCall], str] = python_call
) -> dict[str, Any]:
    """The attncli.heads/1 JSON document: every head's statistics, the notable heads' readings and commands."""
    return {
        "schema": SCHEMA,
        "source": source_json(source),
        "tokens": tokens_json(heads.tokens, source),
        "layers": heads.layers,
        "heads_per_layer": heads.heads,
        "kv_heads": heads.kv_heads,
        "statistics": {name: FORMULAS[name] for name in all_rows[0].values},
        "induction": None
        if source.induction_tokens is None
        else {"tokens": list(source.induction_tokens), "seed": source.seed,
              "source": "Olsson et al. 2022, In-context Learning and Induction Heads; TransformerLens head_detector (error_measure mul)"},  # fmt: skip
        "heads": [_head_json(row, spell) for row in shown],
        "notable": [{"layer": r.layer, "head": r.head, "reading": r.reading, "explain": _call(r, spell), "promotes": lens_json(r.lens)}
                    for r in notable(all_rows)],
        "sinks": {"summary": sinks(all_rows, heads.tokens),
                  "heads": [{"layer": r.layer, "head": r.head, "first_token": r.values["first_token"]}
                            for r in all_rows if r.behaviour == "first_token"]},  # fmt: skip
    }


def source_json(source: Source) -> dict[str, Any]:
    """Where a map came from, as every heads document (the map, the shaded sentence, the link) writes it."""
    return {"kind": source.kind, "name": source.name, "sentence": source.sentence, "model_type": source.model_type,
            "special_tokens": source.special_tokens if source.kind == "model" else None}  # fmt: skip


def tokens_json(tokens: Sequence[str], source: Source) -> list[dict[str, Any]]:
    """The sentence's tokens from 1, with their ids when the map came from a checkpoint."""
    return [{"position": n, "label": label} | ({"id": source.token_ids[n - 1]} if source.token_ids else {}) for n, label in enumerate(tokens, 1)]


def _call(row: HeadRow, spell: Callable[[ExplainCall], str]) -> str | None:
    return None if row.explain is None else spell(row.explain)


def _head_json(row: HeadRow, spell: Callable[[ExplainCall], str]) -> dict[str, Any]:
    out: dict[str, Any] = {"layer": row.layer, "head": row.head}
    if row.kv_head is not None:
        out["kv_head"] = row.kv_head
    out.update({name: None if math.isnan(x) else x for name, x in row.values.items()})
    out["reading"] = row.reading
    out["explain"] = _call(row, spell)
    out["sentence_induction"] = row.sentence_induction
    out["promotes"] = lens_json(row.lens)
    return out


def thumbnails(heads: HeadMap) -> np.ndarray:
    """(layers, H, s, s) the small weight grids of every head, for the figure."""
    return np.stack(heads.thumbnails)


def seen(heads: HeadMap) -> np.ndarray:
    """(layers, s, s) bool: which of the thumbnails' cells the mask lets a query see, layer by layer."""
    return np.stack(heads.seen)


def title(source: Source, heads: HeadMap) -> str:
    return f"Every head of {named(source)}: {heads.layers} layer{'s' * (heads.layers != 1)} × {heads.heads} head{'s' * (heads.heads != 1)}, {len(heads.tokens)} token{'s' * (len(heads.tokens) != 1)}"


def named(source: Source) -> str:
    """'gpt2 checkpoint gpt2' or 'scenario cat': the folder's or file's own name (a full path would run off a figure)."""
    from pathlib import PurePath

    short = PurePath(source.name).name or source.name
    return f"{source.model_type} checkpoint {short}" if source.kind == "model" else f"scenario {short}"
