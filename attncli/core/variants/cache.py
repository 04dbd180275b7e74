"""A KV cache given before the sentence: keys and values of c earlier tokens (prefix caching, paged attention).

The sentence's tokens come after the cache: query i (from 1) sits at position c + i and reads the c
cached keys, then the new ones up to itself; the causal rule, a window, sinks and padding count
absolute positions 1 … c + L (the mask's `first`). The cached keys are given as a real KV cache holds
them: already turned by RoPE at their own positions, so they are used and shown as given; the new
tokens' q and k are turned from position c on (the scenario's Rope carries that offset).

A quantised cache (an int8 KV cache, as vLLM's and llama.cpp's) gives K or V as int8 codes with their scales:
one for the whole cache, one per row (token), or one per group of columns (a key/value head, or 32 numbers);
the cache is dequantised before use, K_cache = K_int8 ⊙ s_K (each code times the scale of its row or group),
and that step is shown (its rows before K_cache, its explain step before the scores). Dimension names:
c cached tokens, G key/value heads, d_k, d_v the widths of one head, n the groups of scales in a row.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, ClassVar

import numpy as np

from attncli.core.records import record
from attncli.core.variants.keys import MATRICES, MATRIX, TOKENS, VECTOR, Read, Schema, Sizes, frozen, mapping_keys
from attncli.core.variants.shown import Narrated, StageRow

INT8 = (-128, 127)  # the codes' range


@record
class Int8:
    """K or V of a cache stored as int8 codes and scales (symmetric: no zero point)."""

    codes: np.ndarray  # (c, G·d) whole numbers in −128 … 127, as float64
    scale: np.ndarray  # (c, n) the scale of each row's n groups of G·d / n columns (n = 1: per row)
    per: str  # "cache" (one scale for everything, repeated in each row), "row" or "group"

    @property
    def per_column(self) -> np.ndarray:
        """(c, G·d) each code's scale: its row's, or its group's."""
        return np.repeat(self.scale, self.codes.shape[1] // self.scale.shape[1], axis=1)

    def dequantised(self) -> np.ndarray:
        """(c, G·d) codes × scales: the cache as the heads use it."""
        return frozen(self.codes * self.per_column)

    def head_columns(self, g: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        """(c, width) key/value head g's (from 1) codes and the scale of each of them."""
        part = slice((g - 1) * width, g * width)
        return self.codes[:, part], self.per_column[:, part]

    def said(self) -> str:
        """'one scale per row', 'one scale per group of 4 columns', 'one scale for the whole cache'."""
        if self.per == "group":
            return f"one scale per group of {self.codes.shape[1] // self.scale.shape[1]} columns"
        return "one scale per row" if self.per == "row" else "one scale for the whole cache"


QUANTISED: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["int8", "scale"],
    "properties": {
        "int8": {"anyOf": [MATRIX, MATRICES], "description": "The codes: whole numbers from -128 to 127, one row per cached token "
                 "(one matrix, or one per key/value head)."},
        "scale": {"anyOf": [{"type": "number", "exclusiveMinimum": 0}, VECTOR, MATRIX], "description": "Positive scales: one number "
                  "for the whole cache, c numbers (one per row), or c rows of n (one per group of G*d/n columns, e.g. per head)."},
    },
}  # fmt: skip


@record
class KvCache:
    key: ClassVar[str] = "cache"
    stage: ClassVar[str] = "cache"  # prepended to each head's keys and values after RoPE: the engine reads it, no stage loop
    json_key: ClassVar[str] = "cache"
    json_slot: ClassVar[int] = 9
    json_absent: ClassVar[None] = None

    rows: ClassVar[tuple[StageRow, ...]]  # the cached keys and values as given, drawn once before the heads; below the class

    tokens: tuple[str, ...]  # (c,) the cached tokens, positions 1 … c
    K: np.ndarray  # (c, G·d_k) the cached keys, as stored: after RoPE
    V: np.ndarray  # (c, G·d_v) the cached values (dequantised when given as int8)
    K_int8: Int8 | None = None  # K as int8 codes and scales, when given so (K is then their product)
    V_int8: Int8 | None = None  # V as int8 codes and scales

    @property
    def quantised(self) -> tuple[tuple[str, Int8], ...]:
        """("K", its Int8), ("V", …): the parts given as int8 codes, K first."""
        return tuple((letter, part) for letter, part in (("K", self.K_int8), ("V", self.V_int8)) if part is not None)

    @property
    def length(self) -> int:
        """c, the number of cached tokens."""
        return len(self.tokens)

    def head_rows(self, g: int, d_k: int, d_v: int) -> tuple[np.ndarray, np.ndarray]:
        """(c, d_k) and (c, d_v): key/value head g's (from 1) cached keys and values."""
        return self.K[:, (g - 1) * d_k : g * d_k], self.V[:, (g - 1) * d_v : g * d_v]

    def stacked(self, n: Any, letter: str, made: str) -> str:
        """The formula of each head's K or V, whose first c rows are the cache's: `K = [K_cache; X·W_K]` (made: `K = X·W_K`)."""
        lhs, _, rhs = made.partition(" = ")
        if not rhs:  # given directly: `K (given)`
            lhs, rhs = n(letter), n.text("given")
        return f"{lhs} = [{n(cached(n, letter))}; {rhs}]"

    def describe(self) -> str:
        c = self.length
        stored = "".join(f"; {letter} stored as int8 codes × scales ({part.said()}), dequantised before use" for letter, part in self.quantised)
        return (f"a KV cache of {c} token{'s' if c > 1 else ''} given ({', '.join(self.tokens)}): their k and v as cached "
                f"(k already after RoPE), not projected; the sentence continues at position {c + 1}{stored}")  # fmt: skip

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {"tokens": list(self.tokens), "length": self.length, "keys_after_rope": True}
        if self.quantised:  # the codes and scales are the rows K_int8, s_K, V_int8, s_V
            out["int8"] = {letter: {"scales": part.per, "groups": int(part.scale.shape[1])} for letter, part in self.quantised}
        return out

    def narrate(self, expl: Any, say: Any) -> list[Narrated]:
        """Explain's step before the scores for an int8 cache: each cached key and value shown, codes ⊙ scales; none otherwise."""
        if not self.quantised:
            return []
        w, n, s = say.w, say.n, expl.scenario
        odot = r"\odot" if w.tex else "⊙"
        lines: list[tuple[str, ...]] = []
        cached_keys = [key for key in say.shown_keys() if key.position <= self.length]
        for letter, part in self.quantised:
            codes, scales = part.head_columns(expl.head.kv_head, s.d_k if letter == "K" else s.d_v)  # (c, d) each
            for key in cached_keys:
                row = key.position - 1
                value = key.k_raw if letter == "K" else key.v  # (d,) as the head uses it
                one = len(set(scales[row].tolist())) == 1  # a row's scale, or its group's when the head's columns share one
                reader = [Decimal(int(code)) * say.shown(float(scale)) for code, scale in zip(codes[row], scales[row])]
                times = f"{w.times} {w.num(float(scales[row][0]), say.p)}" if one else f"{odot} {say.vec(scales[row])}"
                relation = say.relation(reader, value, name=f"{letter.lower()}({key.label})")
                lines.append((w.of(letter.lower(), w.label(key.label)), f"{say.vec(codes[row])} {times} {relation} {say.vec(value)}"))
        said = "; ".join(f"{letter}, {part.said()}" for letter, part in self.quantised)
        notes = [f"The cache is stored as int8 codes (whole numbers from −128 to 127) with scales ({said}): each cached number is its "
                 "code times its scale, worked out before the scores use it."]  # fmt: skip
        formula = (r", \quad " if w.tex else ", ").join(f"{cached(n, letter)} = {codes_symbol(n, letter)} {odot} {scale_symbol(n, letter)}"
                                                         for letter, _ in self.quantised)  # fmt: skip
        return [Narrated("Dequantising the int8 cache", formula, lines, notes)]

    # -- its scenario key (core.variants.keys; read by sources.yaml_scenario, whose tokens and sizes it changes) --

    schema: ClassVar[Schema] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["tokens", "K", "V"],
        "description": "Keys and values already cached before the sentence (prefix caching, paged attention): the sentence's "
        "tokens come after them, its queries at positions c+1 … c+L read the cached keys and then their own, the causal rule "
        "counts absolute positions (so does ALiBi) and RoPE turns the new tokens from position c on. Not with `context` or `mla`.",
        "properties": {
            "tokens": {**TOKENS, "description": "The c cached tokens, in order."},
            "K": {"anyOf": [MATRIX, MATRICES, QUANTISED], "description": "c x (G*d_k), or G per-head c x d_k: the cached keys as a KV cache "
                  "holds them, i.e. already turned by RoPE at their positions (0 … c−1 plus any rope offset) and normalised by any "
                  "qk_norm; shown and used as given. Or {int8, scale}: an int8 cache, dequantised before use (K_cache = K_int8 ⊙ s_K)."},
            "V": {"anyOf": [MATRIX, MATRICES, QUANTISED], "description": "c x (G*d_v), or G per-head c x d_v: the cached values. Or "
                  "{int8, scale}: an int8 cache, dequantised before use."},
        },
    }  # fmt: skip
    schema_after: ClassVar[str] = "mla"
    excludes: ClassVar[dict[str, tuple[str, str]]] = {  # keys it cannot stand beside (yet): why, and what to write instead
        "context": ("a KV cache holds earlier tokens of the same sequence, so it has no use in cross-attention", "no `cache` beside `context`"),
        "mla": ("`cache` with `mla`: multi-head latent attention caches its latent, not k and v", "no `cache` beside `mla`"),
    }  # fmt: skip

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> KvCache:
        """The cached tokens, keys and values: c rows each, G·d_k and G·d_v columns like the sentence's own K and V.

        Read once the heads' widths are known (after the weights, or MLA); the scenario's sizes with it are `sized`.
        """
        if read.form != "mapping":
            raise read.error(read.found(), "a mapping {tokens, K, V}: the cached tokens, keys and values")
        items = read.mapping(mapping_keys(cls.schema))
        for key in ("tokens", "K", "V"):
            if key not in items:
                raise read.error(f"the cache has no `{key}`", "`tokens`, `K` and `V`: the cached tokens, their keys and values")
        tokens = _tokens(items["tokens"])
        c, G = len(tokens), sizes.kv_heads
        arrays, quantised = [], []
        for key, width, what in (("K", sizes.d_k, "d_k"), ("V", sizes.d_v, "d_v")):
            int8 = _int8(items[key], c, G) if items[key].form == "mapping" else None
            matrix = _heads_matrix(items[key], c, G) if int8 is None else int8.codes
            if matrix.shape[1] != G * width:
                where = items[key] if int8 is None else items[key].mapping(INT8_KEYS)["int8"]
                raise where.error(f"cache.{key} has {matrix.shape[1]} columns, but the sentence's {key.lower()} rows have {G} × {what} = "
                                  f"{G * width}", f"{G * width} columns, as wide as the new tokens' {key}")  # fmt: skip
            arrays.append(frozen(matrix) if int8 is None else int8.dequantised())
            quantised.append(int8)
        return cls(tokens=tuple(tokens), K=arrays[0], V=arrays[1], K_int8=quantised[0], V_int8=quantised[1])

    def sized(self, sizes: Sizes) -> Sizes:
        """The scenario's sizes with it: c more keys and values before the sentence's own."""
        return sizes._replace(L_k=sizes.L_k + self.length, cached=self.length)


def codes_symbol(n: Any, letter: str) -> str:
    """K_int8, or in TeX K_{\text{int8}}: the cached keys' (or values') int8 codes."""
    return f"{letter}_{{\\text{{int8}}}}" if n.tex else f"{letter}_int8"


def scale_symbol(n: Any, letter: str) -> str:
    """s_K, or in TeX s_{K}: the scales of the cached keys' (or values') codes."""
    return f"s_{{{letter}}}" if n.tex else f"s_{letter}"


def cached(n: Any, letter: str) -> str:
    """K_cache, or in TeX K_{\text{cache}}: the cached keys (letter K) or values (V), n a Notation."""
    return f"{letter}_{{\\text{{cache}}}}" if n.tex else f"{letter}_cache"


def _cache_of(s: Any) -> KvCache | None:
    """The scenario's KV cache, or None."""
    return next((variant for variant in s.variants if isinstance(variant, KvCache)), None)


def _given(letter: str) -> Any:
    def formula(n: Any, s: Any, h: Any) -> str:
        turned = letter == "K" and any(variant.stage == "qk" for variant in s.variants)  # a cache holds k after RoPE
        cache = _cache_of(s)
        if cache is not None and getattr(cache, letter + "_int8") is not None:  # dequantised: the codes times their scales
            odot = r"\odot" if n.tex else "⊙"
            return f"{cached(n, letter)} = {codes_symbol(n, letter)} {odot} {scale_symbol(n, letter)}" + (
                f" {n.text('(after RoPE)')}" if turned else "")
        return f"{cached(n, letter)} {n.text('(given, after RoPE)' if turned else '(given)')}"

    return formula


def _codes(letter: str) -> Any:
    def formula(n: Any, s: Any, h: Any) -> str:
        return f"{codes_symbol(n, letter)} {n.text('(given, int8)')}"

    return formula


def _scales(letter: str) -> Any:
    def formula(n: Any, s: Any, h: Any) -> str:
        cache = _cache_of(s)
        part = None if cache is None else getattr(cache, letter + "_int8")
        return f"{scale_symbol(n, letter)} {n.text('(given: ' + part.said() + ')' if part is not None else '(given)')}"

    return formula


def _part(letter: str, what: str = "") -> Any:
    """The cache's K or V (c, G·d), or with `what` its int8 codes or scales, from a RunResult; None without them."""

    def get(result: Any) -> np.ndarray | None:
        cache = _cache_of(result.scenario)
        if cache is None or not what:
            return None if cache is None else getattr(cache, letter)
        part = getattr(cache, letter + "_int8")
        return None if part is None else getattr(part, what)

    return get


KvCache.rows = (
    StageRow("cache", "K_int8", "Cached keys, int8 codes", _codes("K"), _part("K", "codes"), "keys", "k", after="X_kv", shared=True),
    StageRow("cache", "s_K", "Scales of the cached keys", _scales("K"), _part("K", "scale"), "keys", "g", after="K_int8", shared=True),
    StageRow("cache", "K_cache", "Cached keys", _given("K"), _part("K"), "keys", "k", after="s_K", main=True, shared=True),
    StageRow("cache", "V_int8", "Cached values, int8 codes", _codes("V"), _part("V", "codes"), "keys", "v", after="K_cache", shared=True),
    StageRow("cache", "s_V", "Scales of the cached values", _scales("V"), _part("V", "scale"), "keys", "g", after="V_int8", shared=True),
    StageRow("cache", "V_cache", "Cached values", _given("V"), _part("V"), "keys", "v", after="s_V", shared=True),
)


INT8_KEYS = ("int8", "scale")


def _int8(read: Read, c: int, G: int) -> Int8:
    """`cache.K` or `cache.V` as {int8: codes, scale: …}: c rows of whole numbers in −128 … 127 (one matrix, or G per-head
    ones side by side), and a positive scale for the whole cache, one per row (c numbers) or per group (c rows of n)."""
    items = read.mapping(INT8_KEYS)
    for key in INT8_KEYS:
        if key not in items:
            raise read.error(f"{read.path} has no `{key}`", "`int8` (the codes, one row per cached token) and `scale`")
    codes = _heads_matrix(items["int8"], c, G)
    low, high = INT8
    wrong = np.flatnonzero((codes != np.round(codes)) | (codes < low) | (codes > high))
    if wrong.size:
        row, column = divmod(int(wrong[0]), codes.shape[1])
        raise items["int8"].error(f"row {row + 1}, column {column + 1} is {codes[row, column]:g}", f"whole numbers from {low} to {high} (int8)")
    given = items["scale"]
    if given.form == "list":
        scale = given.vector() if all(item.form != "list" for item in given.items()) else given.matrix()
    else:
        scale = np.array([given.number()])
    per = "cache" if scale.ndim == 1 and len(scale) == 1 and given.form != "list" else "row" if scale.ndim == 1 else "group"
    scale = np.full((c, 1), scale[0]) if per == "cache" else scale.reshape(len(scale), -1)  # (c, n)
    if scale.shape[0] != c:
        raise given.error(f"{read.path}.scale has {scale.shape[0]} rows but there are {c} cached tokens",
                          f"one number (the whole cache), {c} numbers (one per row), or {c} rows of one per group")  # fmt: skip
    if codes.shape[1] % scale.shape[1]:
        raise given.error(f"{scale.shape[1]} scales per row do not split {codes.shape[1]} columns into equal groups",
                          f"a number of groups that divides {codes.shape[1]}")  # fmt: skip
    if not (scale > 0).all():
        raise given.error(f"a scale of {float(scale[scale <= 0][0]):g}", "positive scales")
    return Int8(frozen(codes), frozen(scale), per)


def _tokens(read: Read) -> list[str]:
    """`cache.tokens`: a non-empty list of words, each as written."""
    if read.form != "list":
        raise read.error(read.found(), "a list of words, e.g. [The, cat, sat]")
    items = read.items()
    if not items:
        raise read.error("the token list is empty", "at least one word")
    tokens = [item.word() for item in items]
    for token, item in zip(tokens, items):
        if not token.strip():
            raise item.error("an empty word", "a word")
    return tokens


def _heads_matrix(read: Read, c: int, G: int) -> np.ndarray:
    """(c, G·d) `cache.K` or `cache.V`: one matrix, or G per-head matrices side by side."""
    who = "heads" if G == 1 else "kv_heads"
    if read.form != "list":
        raise read.error(read.found(), "a matrix with one row per token")
    blocks = read.matrices()
    if blocks is None:
        matrix = read.matrix()
    else:
        if len(blocks) != G:
            raise read.error(f"{len(blocks)} per-head matrices for {who} = {G}", f"{G} matrices of L × d, one per head")
        for h, (part, item) in enumerate(zip(blocks, read.items()), 1):
            if part.shape != blocks[0].shape:
                raise item.error(f"head {h}'s matrix is {part.shape[0]} × {part.shape[1]} but head 1's is {blocks[0].shape[0]} × "
                                 f"{blocks[0].shape[1]}", "the same shape for every head")  # fmt: skip
        matrix = np.hstack(blocks)
    if matrix.shape[0] != c:
        raise read.error(f"{read.path} has {matrix.shape[0]} rows but there are {c} cached tokens", f"{c} rows, one per cached token")
    if matrix.shape[1] % G:
        raise read.error(f"{read.path} has {matrix.shape[1]} columns, which do not split evenly into {who} = {G}", f"a multiple of {G} columns")
    return matrix
