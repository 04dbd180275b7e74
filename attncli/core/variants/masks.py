"""Which keys each query may see: causal, a sliding window, chunks, attention sinks, padding, or an explicit matrix.

Positions are counted from 1, as people count them: query i, key j. After a given KV cache of c tokens
(`first` = c) the queries sit at positions c + 1 … c + L_q and the keys at 1 … c + L_q: every rule counts
those absolute positions, and a query row's i is c + its row.

The module also holds how the mask is shown (core.variants.shown): its stage-table row and its step of
`explain`, both only when it hides anything (`shows`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import Read, Schema, Sizes, frozen, mapping_keys
from attncli.core.variants.shown import Narrated, Say, StageRow
from attncli.errors import did_you_mean


@record
class Mask:
    """A mask is any combination of the rules below, or one explicit 0/1 matrix."""

    key: ClassVar[str] = "mask"
    stage: ClassVar[str] = "visibility"
    json_key: ClassVar[str] = "masking"
    json_slot: ClassVar[int] = 0
    json_absent: ClassVar[None] = None  # a scenario always has one (Mask() sees everything)
    rows: ClassVar[tuple[StageRow, ...]]  # its stage-table row, below the class

    causal: bool = False
    window: int | None = None  # query i sees key j only when |i − j| ≤ window
    sinks: int = 0  # keys 1..sinks are seen whatever the window (the causal rule still applies)
    chunk: int | None = None  # query i sees key j only within its chunk of positions: 1…c, c+1…2c, … (Llama 4's attention_chunk_size)
    padding: tuple[int, ...] = ()  # key positions hidden from every query
    matrix: np.ndarray | None = None  # (L_q, L_k) bool, True where the query sees the key
    first: int = 0  # c: positions before the first query (keys cached before the sentence); query row r is at c + r + 1

    @property
    def name(self) -> str:
        """"none", "causal" or "custom": the `mask` value of the JSON contract."""
        if self.matrix is None and self.window is None and self.chunk is None and not self.padding:
            return "causal" if self.causal else "none"
        return "custom"

    @property
    def hides_anything(self) -> bool:
        return self.name != "none"

    def visible(self, L_q: int, L_k: int) -> np.ndarray:
        """(L_q, L_k) bool: True where query i sees key j."""
        if self.matrix is not None:
            return self.matrix.copy()
        i = np.arange(self.first + 1, self.first + L_q + 1)[:, None]  # (L_q, 1) absolute positions
        j = np.arange(1, L_k + 1)[None, :]  # (1, L_k)
        seen = np.ones((L_q, L_k), dtype=bool)  # (L_q, L_k)
        if self.causal:
            seen &= j <= i
        if self.window is not None:
            seen &= (np.abs(i - j) <= self.window) | (j <= self.sinks)
        if self.chunk is not None:
            seen &= (i - 1) // self.chunk == (j - 1) // self.chunk  # the same chunk of positions
        if self.padding:
            seen[:, np.array(self.padding) - 1] = False
        return seen

    def why_hidden(self, i: int, j: int) -> str:
        """Why key j is hidden from query i (both from 1; i counts query rows, j key positions), in a few words."""
        i += self.first
        if self.matrix is not None:
            return "the mask matrix hides it"
        if j in self.padding:
            return "padding"
        if self.causal and j > i:
            return "after the query"
        if self.chunk is not None and (i - 1) // self.chunk != (j - 1) // self.chunk:
            return f"in another chunk of {self.chunk}"
        return f"outside the window of {self.window}"

    def why_seen(self, i: int, j: int) -> str | None:
        """A note for a key seen only because of a rule (a sink outside the window), else None (i a query row, j a key position)."""
        i += self.first
        if self.window is not None and j <= self.sinks and abs(i - j) > self.window:
            return "a sink: always seen"
        return None

    def describe(self) -> str:
        """'none', 'causal', 'causal, window 2, 1 sink, padding at 5', 'explicit matrix'."""
        if self.matrix is not None:
            return "explicit matrix"
        parts = ["causal"] if self.causal else []
        if self.window is not None:
            parts.append(f"window {self.window}")
        if self.chunk is not None:
            parts.append(f"chunks of {self.chunk}")
        if self.sinks:
            parts.append(f"{self.sinks} sink" + ("s" if self.sinks > 1 else ""))
        if self.padding:
            parts.append("padding at " + ", ".join(map(str, self.padding)))
        return ", ".join(parts) or "none"

    def rule(self) -> str:
        """The rule as a sentence about query i and key j."""
        if self.matrix is not None:
            return "query i sees key j where the mask matrix holds 1"
        parts = []
        if self.causal:
            parts.append("j ≤ i")
        if self.window is not None:
            near = f"|i − j| ≤ {self.window}"
            parts.append(f"({near} or j ≤ {self.sinks})" if self.sinks else near)
        if self.chunk is not None:
            parts.append(f"⌊(i − 1) / {self.chunk}⌋ = ⌊(j − 1) / {self.chunk}⌋ (the same chunk)")
        if self.padding:
            parts.append("j not padding (" + ", ".join(map(str, self.padding)) + ")")
        return "query i sees key j when " + " and ".join(parts) if parts else "every query sees every key"

    def as_json(self) -> dict[str, object]:
        return {
            "causal": self.causal,
            "window": self.window,
            "sinks": self.sinks,
            "padding": list(self.padding),
            "explicit": self.matrix is not None,
            "chunk": self.chunk,
        }

    def shows(self) -> bool:
        """Its row and its step are shown only when it hides anything."""
        return self.hides_anything

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """Which keys the query may not see, and why."""
        w = say.w
        hidden = [key for key in expl.keys if key.masked]
        sinks = [key for key in expl.keys if not key.masked and key.why]
        lines: list[tuple[str, ...]] = [] if self.name == "causal" else [
            (w.label(key.label), f"{w.minus_infinity} \\quad {w.text('(' + (key.why or '') + ')')}" if w.tex else f"−∞ ({key.why})", ":")
            for key in hidden
        ]  # fmt: skip
        rule = self.rule()
        token = f"'{expl.token}'"  # quoted as written
        at = expl.scenario.cached + expl.position  # the query's position among the keys: after a given KV cache of c keys, c + its row
        if not hidden:
            note = f"{token} at position {at} sees every key ({rule}): nothing is hidden."
        elif self.name == "causal":
            names = ", ".join(f"{key.token} ({key.position})" for key in hidden)
            note = (
                f"The mask is causal: {token} at position {at} may only look at positions "
                f"1–{at}, the words before it and itself. Hidden: {names}. Their scores become −∞, "
                "so their exponentials are e^−∞ = 0 and their weights 0."
            )
        else:
            names = ", ".join(f"{key.token} ({key.position})" for key in hidden)
            note = (
                f"The mask is {self.describe()}: {rule}. Hidden from {token} at position {at}: {names}. "
                "Their scores become −∞, so their exponentials are e^−∞ = 0 and their weights 0."
            )
        notes = [note] + [f"{key.token} ({key.position}) is {key.why}, although it lies outside the window." for key in sinks]
        title = "The causal mask" if self.name == "causal" else "The mask"
        formula = w.text("query i sees keys 1..i") if self.name == "causal" else w.text(rule.replace("query i sees key j when ", "seen when "))
        return Narrated(title, formula, lines, notes)

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        "default": "none",
        "description": "none, causal (query i sees keys 1..i), a mapping of rules, or an L_q x L_k matrix of 0/1 (1 = the query sees the key).",
        "anyOf": [
            {"enum": ["none", "causal"]},
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "causal": {"type": "boolean"},
                    "window": {"type": "integer", "minimum": 0, "description": "query i sees key j only when |i - j| <= window"},
                    "sinks": {"type": "integer", "minimum": 0, "description": "keys 1..sinks are seen whatever the window"},
                    "chunk": {"type": "integer", "minimum": 1, "description": "query i sees key j only in the same chunk of positions "
                              "1..c, c+1..2c, ... (Llama 4's chunked attention)"},
                    "padding": {
                        "type": "array",
                        "items": {"type": "integer", "minimum": 1},
                        "description": "key positions (from 1) hidden from every query",
                    },
                },
            },
            {"type": "array", "minItems": 1, "items": {"type": "array", "minItems": 1, "items": {"enum": [0, 1]}}},
        ],
    }
    schema_after: ClassVar[str] = "scale"

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> Mask:
        """`mask:` none, causal, a mapping of rules or an L_q × L_k matrix of 0/1; after a KV cache of c tokens its rules count from c + 1."""
        L_q, L_k = sizes.L_q, sizes.L_k
        expected = "`none`, `causal`, a mapping {causal, window, chunk, sinks, padding}, or an L_q × L_k matrix of 0/1"
        if read.form in ("plain", "quoted"):
            word = read.word()
            if word not in ("none", "causal"):
                raise read.error(f"found {word!r}{did_you_mean(word, ['none', 'causal'])}", expected)
            mask = cls(causal=word == "causal")
        elif read.form == "list":
            matrix = read.matrix()
            if matrix.shape != (L_q, L_k):
                raise read.error(f"the mask matrix is {matrix.shape[0]} × {matrix.shape[1]}", f"{L_q} × {L_k}: one row per query, one column per key")
            if not np.isin(matrix, (0.0, 1.0)).all():
                raise read.error("the mask matrix holds numbers other than 0 and 1", "1 where the query sees the key, 0 where it is hidden")
            mask = cls(matrix=frozen(matrix.astype(bool)))
        else:
            mask = cls._rules(read, L_k)
        if mask.causal and L_q + sizes.cached != L_k:
            raise read.error(f"a causal mask needs as many queries as keys, but there are {L_q} and {L_k}",
                             "no causal mask in cross-attention between sequences of different lengths")  # fmt: skip
        return mask if not sizes.cached else replace(mask, first=sizes.cached)

    @classmethod
    def _rules(cls, read: Read, L_k: int) -> Mask:
        items = read.mapping(mapping_keys(cls.schema))
        causal = items["causal"].boolean() if "causal" in items else False
        window = items["window"].whole(0, 2**31, "a window") if "window" in items else None  # JSON carries it: no integer past 64 bits
        sinks = items["sinks"].whole(0, L_k, "a number of sink keys") if "sinks" in items else 0
        chunk = items["chunk"].whole(1, 2**31, "a chunk length") if "chunk" in items else None
        padding: tuple[int, ...] = ()
        if "padding" in items:
            listed = items["padding"]
            if listed.form != "list":
                raise listed.error(listed.found(), "a list of key positions, from 1")
            padding = tuple(item.whole(1, L_k, "a key position") for item in listed.items())
        return cls(causal=causal, window=window, sinks=sinks, padding=tuple(sorted(set(padding))), chunk=chunk)


def _masked_formula(n: Any, s: Any, h: Any, logits: str) -> str:
    """mask(S / √d_k + B), −∞ above the diagonal."""
    mask = s.mask
    if n.tex:
        where = r"-\infty \text{ above the diagonal}" if mask.name == "causal" else r"-\infty \text{ where hidden}"
        if not mask.hides_anything:
            where = r"\text{nothing hidden}"
        return rf"\operatorname{{mask}}({logits}) \quad ({where})"
    if not mask.hides_anything:
        return f"mask({logits}), nothing hidden"
    if mask.name == "causal":
        return f"mask({logits}), −∞ above the diagonal"
    return f"mask({logits}), −∞ where hidden ({mask.describe()})"


Mask.rows = (
    StageRow("masked", "masked", "Masked scores", _masked_formula, lambda h: h.masked, "queries", "keys", before="exp", main=True,
             after_mask=True, of="logits"),
)  # fmt: skip
