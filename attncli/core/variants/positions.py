"""Rotary position embeddings (RoPE): each pair of a head's q and k coordinates turned by an angle p·ω_i.

Dimension names: L positions, d_k the head's width, r the rotated width (even, r ≤ d_k: all of d_k
unless the rotary is partial), r/2 pairs. Positions p start at 0, as the RoFormer paper and every
implementation count them; an `offset` makes the first token sit at position `offset` (a worked
example at position 100, a prefix already cached). Two pairings exist, both within the first r
coordinates: "half" pairs coordinate i with i + r/2 (rotate-half: Llama, GPT-NeoX, Hugging Face);
"interleaved" pairs 2i with 2i + 1 (RoFormer, Meta's original Llama code). Coordinates r … d_k − 1
pass through unrotated (partial rotary: GPT-NeoX/Pythia's rotary_pct, Phi's partial_rotary_factor).

The angles come from θ (ω_i = θ^(−2i/r), angle (offset + p)·ω_i), from given frequencies (a
checkpoint's, after its scaling), from a given angle per position and pair, or from a given cos/sin
table as transformers hands it to the attention (one column per rotated coordinate). Given rows are
the tokens' rows: row 1 is the first token's, at position `offset`.

The module also holds how RoPE is shown (core.variants.shown): its stage-table rows and its step of `explain`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, NamedTuple

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import MATRIX, Read, Schema, Sizes, frozen, mapping_keys
from attncli.core.variants.shown import Narrated, Say, StageRow
from attncli.errors import did_you_mean

MOST_OFFSET = 2**31  # the first token's position at most (rope.offset): JSON carries it, and orjson writes no integer past 64 bits


class Turned(NamedTuple):
    """q and k as a "rotated" variant leaves them (one that acts after RoPE: QK-norm there), and what it
    measured of each row: mean(x²) under QK-norm, the factor under a temperature (NaN for a cached key, given as it is)."""

    q: np.ndarray  # (L_q, d_k)
    k: np.ndarray  # (L_k, d_k)
    q_measure: np.ndarray  # (L_q,)
    k_measure: np.ndarray  # (L_k,)


@record
class Rope:
    key: ClassVar[str] = "rope"
    stage: ClassVar[str] = "qk"
    json_key: ClassVar[str] = "rope"
    json_slot: ClassVar[int] = 1
    json_absent: ClassVar[None] = None
    symbol: ClassVar[str] = "RoPE"  # how a formula names it: RoPE(Q)
    rows: ClassVar[tuple[StageRow, ...]]  # its stage-table rows, below the class

    theta: float = 10000.0
    style: str = "half"  # "half" or "interleaved"
    inv_freq: np.ndarray | None = None  # (r/2,) given frequencies (a checkpoint's, after its scaling)
    scaling: str | None = None  # how a checkpoint scaled its frequencies, in words
    rotary_dim: int | None = None  # r, the rotated width; None: the whole head
    offset: int = 0  # the position of the first token
    given_angles: np.ndarray | None = None  # (L, r/2) the angle of each pair at each token's position
    given_cos: np.ndarray | None = None  # (L, r) a cos table, one column per rotated coordinate (transformers' layout)
    given_sin: np.ndarray | None = None  # (L, r)
    attention_factor: float = 1.0  # computed cos and sin × this (a checkpoint's YaRN), as transformers' attention_scaling

    def width(self, d_k: int) -> int:
        """r: how many of a head's d_k coordinates are rotated."""
        if self.rotary_dim is not None:
            return self.rotary_dim
        if self.given_cos is not None:
            return int(self.given_cos.shape[1])
        if self.given_angles is not None:
            return 2 * int(self.given_angles.shape[1])
        return d_k

    @property
    def partial(self) -> bool:
        """Whether only the first r coordinates of each head are rotated (rotary_dim given, below d_k)."""
        return self.rotary_dim is not None

    @property
    def given(self) -> str | None:
        """'angles' or 'table' when the rotation is given rather than computed from θ; None otherwise."""
        return "table" if self.given_cos is not None else "angles" if self.given_angles is not None else None

    def frequencies(self, d_k: int) -> np.ndarray:
        """(r/2,) ω_i = θ^(−2i/r) (the rotated width r in the exponent, as transformers' partial rotary has it)."""
        if self.inv_freq is not None:
            return self.inv_freq
        r = self.width(d_k)
        return np.asarray(self.theta ** (-np.arange(0, r, 2, dtype=np.float64) / r))  # (r/2,)

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """(L,) the absolute positions of token rows 0, 1, …: offset + row."""
        return np.asarray(rows, dtype=np.int64) + self.offset

    def angles(self, rows: np.ndarray, d_k: int) -> np.ndarray:
        """(L, r/2) the angle of each pair at each token row: (offset + row)·ω_i, or the given angles' row."""
        if self.given_angles is not None:
            return np.asarray(self.given_angles[np.asarray(rows)])  # (L, r/2)
        return np.asarray(self.positions(rows).astype(np.float64)[:, None] * self.frequencies(d_k)[None, :])  # (L, r/2)

    def table(self, rows: np.ndarray, d_k: int) -> tuple[np.ndarray, np.ndarray]:
        """(L, r) cos and (L, r) sin for each rotated coordinate, in the layout transformers hands the attention."""
        if self.given_cos is not None and self.given_sin is not None:
            return np.asarray(self.given_cos[np.asarray(rows)]), np.asarray(self.given_sin[np.asarray(rows)])  # (L, r) each
        angles = self.angles(rows, d_k)  # (L, r/2)
        first, second = self.pairs(d_k)
        r = self.width(d_k)
        cos, sin = np.empty((angles.shape[0], r)), np.empty((angles.shape[0], r))  # (L, r) each
        c, s = self._cos_sin(angles)  # (L, r/2) each
        cos[:, first], cos[:, second] = c, c
        sin[:, first], sin[:, second] = s, s
        return cos, sin

    def _cos_sin(self, angles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """cos and sin of the angles, each × attention_factor when it is not 1."""
        if self.attention_factor == 1.0:
            return np.cos(angles), np.sin(angles)
        return np.cos(angles) * self.attention_factor, np.sin(angles) * self.attention_factor

    def pairs(self, d_k: int) -> tuple[np.ndarray, np.ndarray]:
        """The coordinates paired for rotation: (first, second), each (r/2,) indexes from 0, all below r."""
        r = self.width(d_k)
        if self.style == "interleaved":
            return np.arange(0, r, 2), np.arange(1, r, 2)
        return np.arange(r // 2), np.arange(r // 2, r)

    def rotate(self, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(L, d_k) each row turned by its position: (a, b) → (a·cos − b·sin, b·cos + a·sin); coordinates past r unchanged."""
        d_k = x.shape[1]
        first, second = self.pairs(d_k)
        a, b = x[:, first], x[:, second]  # (L, r/2) each
        out = x.copy()  # (L, d_k): the coordinates past r pass through
        if self.given_cos is None:
            angles = self.angles(rows, d_k)  # (L, r/2)
            cos, sin = self._cos_sin(angles)  # (L, r/2)
            out[:, first] = a * cos - b * sin
            out[:, second] = b * cos + a * sin
            return out
        cos_r, sin_r = self.table(rows, d_k)  # (L, r): each coordinate has its own entry, as x·cos + rotate_half(x)·sin
        out[:, first] = a * cos_r[:, first] - b * sin_r[:, first]
        out[:, second] = b * cos_r[:, second] + a * sin_r[:, second]
        return out

    def apply(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """(L, d_k) the rows of q or k as the scores meet them: rotated (the registry's "qk" stage); `positions` are token rows 0, 1, …"""
        return self.rotate(x, positions)

    def describe(self) -> str:
        r = "r" if self.partial else "d_k"
        style = f"rotate-half pairs (i, i + {r}/2)" if self.style == "half" else "interleaved pairs (2i, 2i+1)"
        given = self.given
        base = ("given cos/sin table" if given == "table" else "given angles" if given == "angles"
                else "given frequencies" if self.inv_freq is not None else f"θ = {self.theta:g}")  # fmt: skip
        scaled = f", {self.scaling}" if self.scaling else ""
        part = f", the first r = {self.rotary_dim} coordinates of each head (the rest pass through unrotated)" if self.rotary_dim is not None else ""
        start = f", positions from {self.offset}" if self.offset else ""
        return f"RoPE, {base}{scaled}, {style}{part}{start}"

    def as_json(self) -> dict[str, object]:
        return {
            "theta": self.theta, "style": self.style, "scaling": self.scaling,
            "rotary_dim": self.rotary_dim, "offset": self.offset, "given": self.given,
            "angles": None if self.given_angles is None else self.given_angles.tolist(),
            "cos": None if self.given_cos is None else self.given_cos.tolist(),
            "sin": None if self.given_sin is None else self.given_sin.tolist(),
            "attention_factor": self.attention_factor,  # cos and sin × this: 1.0 unless a checkpoint's YaRN or longrope sets it
        }  # fmt: skip

    def narrate(self, expl: Any, say: Say) -> Narrated:
        """Each pair of the query's coordinates turned by its angle, then each key turned at its own position."""
        w, p = say.w, say.p
        s = expl.scenario
        d_k, r, row = s.d_k, self.width(s.d_k), expl.position - 1
        position = int(self.positions(np.array([row]))[0])  # RoPE counts positions from 0, the first token at the offset
        first, second = self.pairs(d_k)
        q_in = expl.head.normed_q[row]  # (d_k,) q as RoPE meets it: after QK-norm when the model has one
        q_out = expl.head.rotated_q[row]  # (d_k,) q as RoPE leaves it (a "rotated" variant may act after it)
        lines: list[tuple[str, ...]] = []
        if self.given_cos is not None:
            cos, sin = (table[0] for table in self.table(np.array([row]), d_k))  # (r,) each
            for i, (a, b) in enumerate(zip(first, second)):
                lines.append((
                    f"{w.text('pair')}\\ {i + 1} \\ ({a + 1}, {b + 1})" if w.tex else f"pair {i + 1} ({a + 1}, {b + 1})",
                    f"{w.text('cos')} {w.num(float(cos[a]), p)}, {w.text('sin')} {w.num(float(sin[a]), p)}: "
                    f"({w.num(float(q_in[a]), p)}, {w.num(float(q_in[b]), p)}) {w.text('turns to')} "
                    f"({w.num(float(q_out[a]), p)}, {w.num(float(q_out[b]), p)})",
                ))  # fmt: skip
        else:
            angles = self.angles(np.array([row]), d_k)[0]  # (r/2,)
            for i, (a, b, angle) in enumerate(zip(first, second, angles)):
                omega = float(self.frequencies(d_k)[i])  # shown with two more decimals: the product needs them
                said = say.relation(position * say.shown(omega, p + 2), float(angle), name=f"the angle of pair {i + 1}")
                how = (f"{w.num(float(angle), p)} ({w.text('given')})" if self.given_angles is not None
                       else f"{position} {w.times} {w.num(omega, p + 2)} {said} {w.num(float(angle), p)}")  # fmt: skip
                lines.append((
                    f"{w.text('pair')}\\ {i + 1} \\ ({a + 1}, {b + 1}): {w.phi}" if w.tex else f"pair {i + 1} ({a + 1}, {b + 1}): φ",
                    f"{how}, ({w.num(float(q_in[a]), p)}, {w.num(float(q_in[b]), p)}) {w.text('turns to')} "
                    f"({w.num(float(q_out[a]), p)}, {w.num(float(q_out[b]), p)})",
                ))  # fmt: skip
        if self.attention_factor != 1.0:  # a checkpoint's YaRN: cos and sin × the factor, so each turned pair grows by it
            lines.append((
                f"{w.text('cos')}, {w.text('sin')}", f"{w.times} {w.num(self.attention_factor, p)}"
                f"{w.text(' (YaRN attention factor): each turned pair is that much longer')}", ":",
            ))  # fmt: skip
        if r < d_k:
            rest = range(r, d_k)
            lines.append((
                f"{w.text('coordinates')}\\ {r + 1}{w.text('-')}{d_k}" if w.tex else f"coordinates {r + 1}–{d_k}",
                f"{say.vec(q_in[r:])}{w.text(' pass through unrotated')}" if len(rest) > 1
                else f"{w.num(float(q_in[r]), p)}{w.text(' passes through unrotated')}", ":",
            ))  # fmt: skip
        lines.append((w.prime("q"), w.vec(q_out, p)))
        keys = expl.keys if len(expl.keys) <= say.long else expl.keys[:5] + expl.keys[-2:]
        for key in keys:
            at = int(self.positions(np.array([key.position - 1]))[0]) - s.cached  # a given KV cache's keys come first, from offset − c
            if key.position <= s.cached:  # given as cached: already turned
                lines.append((w.of(w.prime("k"), w.label(key.label)), f"{w.vec(expl.head.rotated_k[key.position - 1], p)}{w.text(f' (cached: already turned at position {at})')}"))
                continue
            lines.append((w.of(w.prime("k"), w.label(key.label)), f"{w.text('RoPE')}({w.vec(expl.head.normed_k[key.position - 1], p)}, {at}) = {w.vec(expl.head.rotated_k[key.position - 1], p)}"))
        counted = (f"counted from 0, the first token at position {self.offset}" if self.offset else "counted from 0")
        if self.given is not None:
            what = "the given cos and sin of its row" if self.given == "table" else "the given angle of its row"
            notes = [f"{self.describe()}: the query at position {position} ({counted}) turns its pair i by {what}; "
                     "each key turns by its own row's the same way."]  # fmt: skip
        else:
            notes = [
                f"{self.describe()}: the query at position {position} ({counted}) turns its pair i by the angle "
                f"{position}·ω_i, with ω_i = θ^(−2i/{'r' if r < d_k else 'd_k'}); each key turns by its own position the same way.",
                "Turning both by their positions makes q′·k′ depend on the positions only through their distance i − j: "
                "rotations compose, so rotating q by i and k by j is, for the dot product, rotating k by j − i.",
            ]
        if r < d_k:
            notes.append(f"Partial rotary: only the first r = {r} of the d_k = {d_k} coordinates turn (GPT-NeoX/Pythia's rotary_pct, "
                         f"Phi's partial_rotary_factor); coordinates {r + 1}–{d_k} pass through unrotated and meet the keys' as they are, "
                         "carrying no position.")  # fmt: skip
        if len(keys) < len(expl.keys):
            notes.append(f"{len(expl.keys) - len(keys)} of the {len(expl.keys)} rotated keys are left out here.")
        turned = "q" if not expl.head.normed else (r"\hat{q}" if w.tex else "q\u0302")  # q̂ after QK-norm
        return Narrated("Rotating the query and the keys (RoPE)", f"{w.prime('q')} = {w.text('RoPE')}({turned}, i)", lines, notes)


    def words(self, d_k: int, L: int, dash: str) -> str:
        """'at positions 100–103; columns 3–4 unchanged': a position offset and a partial rotary, in words ('' for neither)."""
        words = []
        if self.offset:
            words.append(f"at position {self.offset}" if L == 1 else f"at positions {self.offset}{dash}{self.offset + L - 1}")
        r = self.width(d_k)
        if r < d_k:
            words.append(f"column {d_k} unchanged" if r + 1 == d_k else f"columns {r + 1}{dash}{d_k} unchanged")
        return "; ".join(words)

    # -- its scenario key (core.variants.keys) ----------------------------------------------------

    schema: ClassVar[Schema] = {
        "description": "true for RoPE with theta = 10000, rotate-half; or {theta, style: half | interleaved}, with "
        "fraction or rotary_dim (partial rotary: only the first r coordinates of each head turn), offset (the first "
        "token's position), or the rotation given as angles (one row per token, one angle per pair) or a cos/sin table "
        "(one row per token, one column per rotated coordinate) instead of theta.",
        "anyOf": [
            {"type": "boolean"},
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "theta": {"type": "number", "exclusiveMinimum": 1},
                    "style": {"enum": ["half", "interleaved"]},
                    "fraction": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                    "rotary_dim": {"type": "integer", "minimum": 2, "multipleOf": 2},
                    "offset": {"type": "integer", "minimum": 0},
                    "angles": MATRIX,
                    "cos": MATRIX,
                    "sin": MATRIX,
                },
                "dependentRequired": {"cos": ["sin"], "sin": ["cos"]},
                "not": {"anyOf": [{"required": ["fraction", "rotary_dim"]}, {"required": ["angles", "cos"]}]},
            },
        ],
    }
    schema_after: ClassVar[str] = "alibi"

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> Rope | None:
        """`rope: true`, or a mapping (θ, style, partial rotary, offset, or given angles or a cos/sin table, one row per token).

        After a KV cache of c tokens the sentence's rows continue from position offset + c.
        """
        d_k = sizes.d_rope
        L = sizes.L_q if sizes.cached else max(sizes.L_q, sizes.L_k)  # the rows a given table holds
        if read.form == "plain" and read.kind == "bool":
            rope = cls() if read.boolean() else None
        elif read.form == "mapping":
            rope = cls._from_mapping(read, d_k, L)
        else:
            raise read.error(read.found(), "`true`, or {theta: 10000, style: half | interleaved}")
        if rope is not None and rope.width(d_k) % 2:
            raise read.error(f"RoPE turns pairs of coordinates, but d_k = {d_k} is odd", "an even d_k")
        return rope if rope is None or not sizes.cached else replace(rope, offset=rope.offset + sizes.cached)

    @classmethod
    def _from_mapping(cls, read: Read, d_k: int, L: int) -> Rope:
        items = read.mapping(mapping_keys(cls.schema))
        theta = 10000.0
        if "theta" in items:
            theta = items["theta"].number()
            if theta <= 1:
                raise items["theta"].error(f"θ = {theta:g}", "a base above 1, such as 10000")
        style = "half"
        if "style" in items:
            style = items["style"].word()
            if style not in ("half", "interleaved"):
                raise items["style"].error(f"found {style!r}{did_you_mean(style, ('half', 'interleaved'))}", "`half` (Llama, GPT-NeoX) or `interleaved` (RoFormer)")
        for one, other in (("fraction", "rotary_dim"), ("angles", "cos"), ("angles", "sin"), ("theta", "angles"), ("theta", "cos")):
            if one in items and other in items:
                raise items[other].error(f"both `{one}` and `{other}` are given", f"one of `{one}` and `{other}`")
        rotary_dim = d_k
        if "fraction" in items:
            fraction = items["fraction"].number()
            r = d_k * fraction
            if not 0 < fraction <= 1 or r != int(r) or int(r) % 2:
                raise items["fraction"].error(f"fraction {fraction:g} of d_k = {d_k} is {r:g} coordinates",
                                              f"a fraction that leaves an even number of coordinates, e.g. 0.25 or 0.5 of {d_k}")  # fmt: skip
            rotary_dim = int(r)
        if "rotary_dim" in items:
            rotary_dim = items["rotary_dim"].whole(2, d_k, "an even number of coordinates")
            if rotary_dim % 2:
                raise items["rotary_dim"].error(f"rotary_dim {rotary_dim} is odd", f"an even number from 2 to d_k = {d_k}")
        offset = items["offset"].whole(0, MOST_OFFSET, "a position") if "offset" in items else 0
        angles = cos = sin = None
        if "angles" in items:
            angles = _given_rows(items["angles"], L)
            rotary_dim = _given_width(2 * angles.shape[1], rotary_dim, d_k, items, "angles", "one angle per pair")
        if "cos" in items or "sin" in items:
            for key, other in (("cos", "sin"), ("sin", "cos")):
                if key not in items:
                    raise items[other].error(f"`{other}` is given without `{key}`", "both `cos` and `sin`, tables of one shape",
                                             key=f"{read.path}.{key}")  # fmt: skip
            cos, sin = _given_rows(items["cos"], L), _given_rows(items["sin"], L)
            if cos.shape != sin.shape:
                raise items["sin"].error(f"sin is {sin.shape[0]} × {sin.shape[1]} but cos is {cos.shape[0]} × {cos.shape[1]}",
                                         "a sin table of the cos table's shape")  # fmt: skip
            rotary_dim = _given_width(cos.shape[1], rotary_dim, d_k, items, "cos", "one column per rotated coordinate")
        return cls(
            theta=theta, style=style, rotary_dim=rotary_dim if rotary_dim < d_k else None, offset=offset,
            given_angles=None if angles is None else frozen(angles), given_cos=None if cos is None else frozen(cos),
            given_sin=None if sin is None else frozen(sin),
        )  # fmt: skip


def _given_rows(read: Read, L: int) -> np.ndarray:
    """(L, columns) a given angle or cos/sin table: one row per token, the first at position `offset`."""
    table = read.matrix()
    if table.shape[0] != L:
        raise read.error(f"{table.shape[0]} rows for {L} tokens", f"{L} rows, one per token (row 1 is the first token's)")
    return table


def _given_width(width: int, rotary_dim: int, d_k: int, items: dict[str, Read], key: str, columns: str) -> int:
    """The rotated width a given table implies, checked against d_k and any fraction or rotary_dim beside it."""
    said = next((k for k in ("fraction", "rotary_dim") if k in items), None)
    if width > d_k or width % 2 or (said is not None and width != rotary_dim):
        wanted = f"{rotary_dim // 2 if key == 'angles' else rotary_dim} columns ({columns}, r = {rotary_dim} as `{said}` says)" if said else (
            f"{columns}, for an even r of at most d_k = {d_k}")  # fmt: skip
        raise items[key].error(f"the table implies r = {width} rotated coordinates", wanted)
    return width


def _rotated(letter: str) -> Any:
    """Q′ = RoPE(Q̂) (at positions 100–103; columns 3–4 unchanged): `met` is Q or K as RoPE meets it (stages.py writes it)."""

    def formula(n: Any, s: Any, h: Any, met: str) -> str:
        mla = next((v for v in s.variants if v.stage == "heads"), None)  # the variant that makes each head's q, k, v (MLA)
        if mla is not None:  # multi-head latent attention: RoPE turns only the decoupled part of each head
            rotated: str = f"{n(letter, prime=True)} = " + n.text("RoPE") + f"({n(letter)})"
            return rotated + (rf" \quad \text{{(last {mla.d_r} columns only)}}" if n.tex else f", its last d_r = {mla.d_r} columns only")
        text: str = f"{n(letter, prime=True)} = " + n.text("RoPE") + f"({met})"
        rope = s.variant(Rope)
        c = s.cached if letter == "K" else 0  # a KV cache's first c keys are given turned already: RoPE turns the sentence's L
        words = "" if rope is None else rope.words(s.d_k, s.L if letter == "Q" or c else s.L_k, "-" if n.tex else "–")
        if c:
            words += ("; " if words else "") + ("row 1 as cached" if c == 1 else f"rows 1{'-' if n.tex else '–'}{c} as cached")
        return text + (n.text(f" ({words})") if words else "")

    return formula


Rope.rows = (
    StageRow("rope", "Q_rope", "Rotated queries", _rotated("Q"), lambda h: h.Q_rope, "queries", "q", main=True, before="scores", of="Q"),
    StageRow("rope", "K_rope", "Rotated keys", _rotated("K"), lambda h: h.K_rope, "keys", "k", after="Q_rope", kv=True, of="K"),
)  # fmt: skip
