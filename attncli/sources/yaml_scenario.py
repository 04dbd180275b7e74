"""Scenario files: YAML read and checked into one immutable `attncli.core.scenario.Scenario`.

`load()` turns a YAML file (or a built-in scenario's name) into a `Scenario`, or raises an
AttnError that names the file, line and key. Everything after this module may assume the
shapes fit.
"""

from __future__ import annotations

import difflib
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from attncli.core.scenario import Scale, Scenario, held
from attncli.core.variants import Alibi, KvCache, LearnedSink, Mask, QkNorm, Rope, ScoreBias, SoftCap, alibi_slopes
from attncli.core.variants.linear import FEATURE_MAPS, LinearAttention, Retention
from attncli.core.variants.mla import Mla, Norm
from attncli.errors import AttnError, option
from attncli.sources import builtin, fields, reading
from attncli.sources.limits import Limits
from attncli.sources.words import split_sentence
from attncli.sources.yamltree import Map, Scalar, Seq, Value, describe, parse, to_number, to_word

KEYS, MODEL_KEYS = fields.KEYS, fields.MODEL_KEYS  # every key, and those a real checkpoint's layer may have
CONTEXT_KEYS, MASK_KEYS, ROPE_KEYS, QK_NORM_KEYS = (fields.mapping_keys(name) for name in ("context", "mask", "rope", "qk_norm"))
MLA_KEYS = fields.mapping_keys("mla")
CACHE_KEYS = fields.mapping_keys("cache")
MAX_PRECISION = 15  # float64 carries 15-17 significant digits; more decimals would be noise


_WHOLE = re.compile(r"[-+]?[0-9]+")


# -- loading ---------------------------------------------------------------------------------


def load(name_or_path: str, *, limits: Limits = Limits()) -> Scenario:
    """Load a scenario file, or a built-in scenario by name."""
    path = Path(name_or_path)
    if not path.exists() and builtin.exists(name_or_path):
        path = builtin.path(name_or_path)
        shown = f"{name_or_path} (built-in)"
    else:
        shown = name_or_path
    try:
        text = read_text(path, shown, max_bytes=limits.max_bytes)
        return from_text(text, stem=path.stem, limits=limits, path=shown, base=path.parent)
    except AttnError as error:
        raise error.located(file=shown) from None


def read_text(path: Path, shown: str, *, max_bytes: int = Limits().max_bytes) -> str:
    """The file's text, or an AttnError that says why it cannot be had."""
    from attncli.sources import reading

    return reading.read_text(path, shown, max_bytes=max_bytes)


def from_text(
    text: str, *, stem: str = "scenario", limits: Limits = Limits(), path: str | None = None, base: Path | None = None
) -> Scenario:
    """Parse and validate a scenario from YAML text; `model:` folders are relative to `base` (default: the current folder)."""
    tree = parse(text, limits=limits, on_top_level=reading.size_guard(text, limits))  # refuses an oversized file early
    if tree is None:  # nothing but blank lines and comments
        raise AttnError("the file is empty", expected="a YAML mapping with `tokens:` (or `sentence:`) and `embeddings:`")
    if not isinstance(tree, Map):
        raise AttnError(
            f"the document is {describe(tree)}",
            line=tree.line,
            expected="a mapping of scenario keys such as `tokens:` and `embeddings:`",
        )
    return _Validator(tree, stem, limits, path, base).scenario()


class _Validator:
    """Reads each key of the mapping in turn; raises AttnError at the first problem."""

    def __init__(self, tree: Map, stem: str, limits: Limits, path: str | None, base: Path | None = None) -> None:
        self.tree = tree
        self.stem = stem
        self.limits = limits
        self.path = path
        self.base = Path() if base is None else base

    def scenario(self) -> Scenario:
        _check_keys(self.tree, KEYS, "")
        if "model" in self.tree.items:
            return self._checkpoint()
        for key in ("layer", "special_tokens"):
            if key in self.tree.items:
                raise self._error(f"`{key}` is for a real model, but no `model` is given", key, f"`model: FOLDER` beside it, or no `{key}`")
        tokens = self._tokens(self.tree, "")
        case_sensitive = self._bool("case_sensitive", default=False)
        heads = self._int("heads", default=1, minimum=1)
        kv_heads = self._kv_heads(heads)
        context = self._context()
        context_tokens = None if context is None else self._tokens(context, "context.")
        cache_value = self._cache_value(context is not None)
        cache_tokens = None if cache_value is None else self._tokens(cache_value, "cache.")
        c = 0 if cache_tokens is None else len(cache_tokens)
        L_q = len(tokens)
        L_k = L_q + c if context_tokens is None else len(context_tokens)
        self._check_size(L_q, L_k, heads)
        given = [key for key in ("Q", "K", "V") if key in self.tree.items]
        mla = None
        if "mla" in self.tree.items:  # multi-head latent attention: q, k and v come from the latents
            X = self._embeddings(tokens, case_sensitive, self._get("embeddings"), "embeddings")
            mla = self._mla(X.shape[1], heads, kv_heads, context is not None)
            weights: dict[str, np.ndarray | None] = {"X": X}
            d_k, concat_width = mla.d_k, heads * mla.d_v
        elif given:
            weights = self._direct(given, heads, kv_heads, L_q, L_k - c, context_tokens is not None)
        else:
            X = self._embeddings(tokens, case_sensitive, self._get("embeddings"), "embeddings")
            X_kv = None if context is None else self._context_embeddings(context, context_tokens or [], case_sensitive, X.shape[1])
            weights = self._weights(X, X_kv, heads, kv_heads)
        if mla is None:
            queries, values = _first(weights, "W_Q", "Q"), _first(weights, "W_V", "V")
            d_k = queries.shape[1] // heads
            concat_width = heads * (values.shape[1] // kv_heads)
        W_O = self._output_projection(concat_width)
        d_out = W_O.shape[1] if W_O is not None else concat_width
        b_O = self._vector("b_O", d_out, "d_out, the columns of W_O" if W_O is not None else "H·d_v (no W_O given)")
        cache = None
        if cache_value is not None and cache_tokens is not None:
            cache = self._cache(cache_value, tuple(cache_tokens), kv_heads, d_k, concat_width // heads)
        mask = self._mask(L_q, L_k, c)
        self._check_rows_see_a_key(mask, L_q, L_k, tokens)
        rope = self._rope(d_k if mla is None else mla.d_r, L_q if cache is not None else max(L_q, L_k))
        if rope is not None and cache is not None:  # the new tokens continue after the cached ones: rows from position offset + c
            rope = replace(rope, offset=rope.offset + c)
        return Scenario(
            name=self._text("name", default=self.stem),
            description=self._text("description", default=""),
            source=self._text("source", default=""),
            tokens=tuple(tokens),
            context=None if context_tokens is None else tuple(context_tokens),
            case_sensitive=case_sensitive,
            heads=heads,
            kv_heads=None if kv_heads == heads else kv_heads,
            **{key: _frozen(array) for key, array in weights.items()},  # type: ignore[arg-type]  # X, X_kv, W_* and b_*, or Q, K, V
            W_O=_frozen(W_O),
            b_O=_frozen(b_O),
            scale=self._scale(d_k),
            mask=mask,
            variants=held(
                rope, self._score_bias(heads, L_q, L_k), self._alibi(heads), self._softcap(), self._sink_logits(heads),
                self._qk_norm(heads, kv_heads, d_k), mla, cache, *self._without_softmax(heads, mla is not None).values(),
            ),
            precision=self._int("precision", default=4, minimum=0, maximum=MAX_PRECISION),
            path=self.path,
        )

    def _cache_value(self, cross: bool) -> Map | None:
        """The `cache` mapping, refused beside what it cannot go with."""
        value = self._get("cache")
        if value is None:
            return None
        if not isinstance(value, Map):
            raise self._error(f"found {describe(value)}", "cache", "a mapping {tokens, K, V}: the cached tokens, keys and values", value)
        _check_keys(value, CACHE_KEYS, "cache.")
        if cross:
            raise self._error("a KV cache holds earlier tokens of the same sequence, so it has no use in cross-attention", "cache",
                              "no `cache` beside `context`", value)  # fmt: skip
        for key, why in (("mla", "multi-head latent attention caches its latent, not k and v"),
                         ("qk_norm", "a cache with QK-norm is not supported yet"), ("alibi", "a cache with ALiBi is not supported yet")):  # fmt: skip
            if key in self.tree.items:
                raise self._error(f"`cache` with `{key}`: {why}", "cache", f"no `cache` beside `{key}`", value)
        for key in ("K", "V"):
            if key not in value.items:
                raise self._error(f"the cache has no `{key}`", "cache", "`tokens`, `K` and `V`: the cached tokens, their keys and values", value)
        return value

    def _cache(self, value: Map, tokens: tuple[str, ...], kv_heads: int, d_k: int, d_v: int) -> KvCache:
        """The cached keys and values: c rows each, G·d_k and G·d_v columns like the sentence's own K and V."""
        c = len(tokens)
        arrays = []
        for key, width, what in (("K", d_k, "d_k"), ("V", d_v, "d_v")):
            matrix = self._projection(f"cache.{key}", c, kv_heads, rows_are="cached tokens", value=value.items[key])
            if matrix.shape[1] != kv_heads * width:
                raise self._error(f"cache.{key} has {matrix.shape[1]} columns, but the sentence's {key[0].lower()} rows have {kv_heads} × {what} = "
                                  f"{kv_heads * width}", f"cache.{key}", f"{kv_heads * width} columns, as wide as the new tokens' {key}",
                                  value.items[key])  # fmt: skip
            arrays.append(_frozen(matrix))
        return KvCache(tokens=tokens, K=arrays[0], V=arrays[1])  # type: ignore[arg-type]

    def _mla(self, d_model: int, heads: int, kv_heads: int, cross: bool) -> Mla:
        """`mla:` its latent projections, shapes checked against d_model and the heads; no W_Q, W_K, W_V, Q/K/V or context beside it."""
        value = self._get("mla")
        if not isinstance(value, Map):
            assert value is not None  # the caller saw the key
            raise self._error(f"found {describe(value)}", "mla", "a mapping of W_DKV, W_KR, W_UK, W_UV, W_UQ, W_QR (and W_DQ, kv_norm, q_norm)", value)
        _check_keys(value, MLA_KEYS, "mla.")
        beside = [key for key in ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V", "Q", "K", "V") if key in self.tree.items]
        if beside or cross or kv_heads != heads:
            key = beside[0] if beside else "context" if cross else "kv_heads"
            raise self._error(f"`{key}` has no use with `mla`: every head's q, k and v come from the latents", key, "`mla:` without it")
        if "qk_norm" in self.tree.items:  # the expanded and the absorbed form would differ: RMSNorm of k does not commute with W_UK
            raise self._error(
                "`qk_norm` has no use with `mla`: MLA normalises its latents (`kv_norm`, `q_norm`), not each head's q and k",
                "qk_norm",
                "`mla:` without `qk_norm` (its `kv_norm` and `q_norm` are the RMSNorms DeepSeek applies)",
            )

        def matrix(key: str, rows: int, what: str, per_head: bool = False) -> np.ndarray:
            item = value.items.get(key)
            if item is None:
                raise AttnError(f"`mla` needs `{key}`", line=value.line, key=f"mla.{key}", expected=f"a matrix of {rows} rows ({what})")
            if per_head and isinstance(item, Seq) and item.items and all(isinstance(m, Seq) and m.items and isinstance(m.items[0], Seq) for m in item.items):
                blocks = [to_matrix(m, f"mla.{key}[{h}]") for h, m in enumerate(item.items, 1)]
                if len(blocks) != heads or any(b.shape != blocks[0].shape for b in blocks):
                    raise self._error(f"{len(blocks)} per-head matrices", f"mla.{key}", f"{heads} matrices of one shape, one per head", item)
                found = np.hstack(blocks)
            else:
                found = to_matrix(item, f"mla.{key}")
            if found.shape[0] != rows or (per_head and found.shape[1] % heads):
                columns = f" and a multiple of {heads} columns" if per_head else ""
                raise self._error(f"mla.{key} is {found.shape[0]} × {found.shape[1]}", f"mla.{key}", f"{rows} rows ({what}){columns}", item)
            return found

        def norm(key: str, size: int) -> Norm | None:
            item = value.items.get(key)
            if item is None:
                return None
            expected = f"{{weight: [{size} numbers], eps: 1e-6}}"
            if not isinstance(item, Map):
                raise self._error(f"found {describe(item)}", f"mla.{key}", expected, item)
            _check_keys(item, ("weight", "eps"), f"mla.{key}.")
            weight = np.ones(size) if "weight" not in item.items else to_vector(item.items["weight"], f"mla.{key}.weight")
            eps = 1e-6 if "eps" not in item.items else to_number(item.items["eps"], f"mla.{key}.eps")
            if weight.shape != (size,) or not eps >= 0:
                raise self._error(f"{weight.shape[0]} weights, eps = {eps:g}", f"mla.{key}", expected, item)
            return Norm(_frozen(weight), float(eps))  # type: ignore[arg-type]

        W_DKV = matrix("W_DKV", d_model, "d_model × d_c")
        d_c = W_DKV.shape[1]
        W_DQ = None if "W_DQ" not in value.items else matrix("W_DQ", d_model, "d_model × d_cq")
        if W_DQ is None and "q_norm" in value.items:
            raise self._error("`q_norm` normalises the query latent, but no `W_DQ` makes one", "mla.q_norm", "`W_DQ` beside it, or no `q_norm`")
        q_rows = d_model if W_DQ is None else W_DQ.shape[1]
        q_what = "d_model" if W_DQ is None else "d_cq, the columns of W_DQ"
        W_UK = matrix("W_UK", d_c, "d_c, the columns of W_DKV", per_head=True)
        W_UQ = matrix("W_UQ", q_rows, q_what, per_head=True)
        if W_UQ.shape[1] != W_UK.shape[1]:
            raise self._error(
                f"W_UQ has {W_UQ.shape[1]} columns but W_UK has {W_UK.shape[1]}", "mla.W_UQ", f"{W_UK.shape[1]} columns: H·d_n, as W_UK",
                value.items["W_UQ"],
            )
        W_KR = matrix("W_KR", d_model, "d_model × d_r")
        W_QR = matrix("W_QR", q_rows, q_what, per_head=True)
        if W_QR.shape[1] != heads * W_KR.shape[1]:
            raise self._error(
                f"W_QR has {W_QR.shape[1]} columns", "mla.W_QR", f"H·d_r = {heads} × {W_KR.shape[1]} columns: each head's part meets k_R",
                value.items["W_QR"],
            )
        mla = Mla(
            heads=heads,
            W_DKV=W_DKV,
            W_KR=W_KR,
            W_UK=W_UK,
            W_UV=matrix("W_UV", d_c, "d_c, the columns of W_DKV", per_head=True),
            W_UQ=W_UQ,
            W_QR=W_QR,
            W_DQ=W_DQ,
            kv_norm=norm("kv_norm", d_c),
            q_norm=None if W_DQ is None else norm("q_norm", W_DQ.shape[1]),
        )
        for array in (mla.W_DKV, mla.W_KR, mla.W_UK, mla.W_UV, mla.W_UQ, mla.W_QR, mla.W_DQ):
            _frozen(array)
        return mla

    def _checkpoint(self) -> Scenario:
        """`model: FOLDER`, `layer: N` and `sentence: TEXT`: one layer of a local Hugging Face checkpoint."""
        import dataclasses

        from attncli.sources.checkpoints.scenario import SPECIAL_TOKENS, load_scenario

        for key in self.tree.items:
            if key not in MODEL_KEYS:
                given = "its tokenizer makes the tokens from `sentence`" if key == "tokens" else "it gives X, the weights and the settings"
                raise self._error(f"`{key}` has no use with `model`: {given}", key, "one of: " + ", ".join(MODEL_KEYS))
        for key, what in (("layer", "`layer: 5`, counted from 1"), ("sentence", "`sentence: The cat sat on the mat.`")):
            if key not in self.tree.items:
                raise AttnError(f"`model` needs `{key}`", line=self.tree.line, key=key, expected=what)
        model_value = self._get("model")
        assert model_value is not None
        written = to_word(model_value, "model")
        folder = Path(written).expanduser()
        if not folder.is_absolute():
            folder = self.base / folder
        special_tokens = self._text("special_tokens", default="auto")
        if special_tokens not in SPECIAL_TOKENS:
            raise self._error(f"found {special_tokens!r}", "special_tokens", "auto (as the tokenizer adds them) or none", self._get("special_tokens"))
        layer = self._int("layer", default=1, minimum=1, what="a layer number")
        precision = self._int("precision", default=4, minimum=0, maximum=MAX_PRECISION)
        try:
            scenario = load_scenario(
                folder,
                layer=layer,
                sentence=self._text("sentence", default=""),
                special_tokens=special_tokens,
                name=self._text("name", default=self.stem),
                limits=self.limits,
                shown=written,
                target=self._text("target", default="") if "target" in self.tree.items else None,
                attention=self._text("attention", default="") if "attention" in self.tree.items else None,
            )
        except AttnError as error:
            if error.file is not None:  # a file of the checkpoint: the scenario's `model:` line in front, then that file
                raise error.behind(line=model_value.line, key="model") from None
            if error.key in MODEL_KEYS:
                error.line = self.tree.key_lines.get(error.key)
            raise
        return dataclasses.replace(
            scenario,
            precision=precision,
            path=self.path,
            description=self._text("description", default=scenario.description),
            source=self._text("source", default=scenario.source),
        )

    # -- helpers -----------------------------------------------------------------------------

    def _error(self, message: str, key: str, expected: str | None = None, value: Value | None = None) -> AttnError:
        line = value.line if value is not None else self.tree.key_lines.get(key.split(".")[0].split("[")[0])
        return AttnError(message, line=line, key=key, expected=expected)

    def _get(self, key: str) -> Value | None:
        return self.tree.items.get(key)

    def _check_size(self, L_q: int, L_k: int, heads: int) -> None:
        cells = heads * L_q * L_k
        if cells > self.limits.max_cells:
            raise self._error(
                f"{L_q:,} tokens × {L_k:,} × {heads} head(s) = {cells:,} attention cells, "
                f"more than the limit of {self.limits.max_cells:,}",
                "tokens" if "tokens" in self.tree.items else "sentence",
                f"a smaller scenario, or raise the limit with {option('max_cells')}",
            )

    def _identity(self, key: str, size: int, value: Value | None) -> np.ndarray:
        """np.eye(size), refused like too many tokens when it would hold more than `max_cells` numbers (d_model²)."""
        if size * size > self.limits.max_cells:
            raise self._error(
                f"an identity {key} for d_model = {size:,} would hold {size * size:,} numbers, more than the limit of {self.limits.max_cells:,}",
                key if value is not None else "embeddings",
                f"a smaller d_model, explicit weight matrices, or a higher {option('max_cells')}",
                value,
            )
        return np.eye(size)

    def _text(self, key: str, default: str) -> str:
        value = self._get(key)
        return default if value is None else to_word(value, key)

    def _bool(self, key: str, default: bool, value: Value | None = None) -> bool:
        value = self._get(key) if value is None else value
        if value is None:
            return default
        if isinstance(value, Scalar) and value.plain and value.kind == "bool":
            return value.text.lower() in ("true", "yes", "on", "y")
        raise self._error(f"found {describe(value)}", key, "true or false", value)

    def _int(
        self, key: str, default: int, minimum: int, maximum: int | None = None, value: Value | None = None, what: str = "a whole number"
    ) -> int:
        value = self._get(key) if value is None else value
        if value is None:
            return default
        bounds = f"{what} from {minimum} to {maximum}" if maximum is not None else f"{what} {minimum} or more"
        try:
            number = to_number(value, key)
        except AttnError as error:
            error.expected = bounds
            raise
        if abs(number) >= 2**53 and isinstance(value, Scalar) and _WHOLE.fullmatch(value.text):
            number = int(value.text)  # exactly as written: a float would echo 123456789012345678901 as …677877…
        if number != int(number):
            raise self._error(f"{number:g} is not a whole number", key, "a whole number", value)
        if number < minimum or (maximum is not None and number > maximum):
            why = " (float64 carries no more)" if key == "precision" else ""
            raise self._error(f"{int(number)} is out of range", key, f"{bounds}{why}", value)
        return int(number)

    def _tokens(self, tree: Map, prefix: str) -> list[str]:
        tokens_value, sentence_value = tree.items.get("tokens"), tree.items.get("sentence")
        if tokens_value is not None and sentence_value is not None:
            raise self._error("both `tokens` and `sentence` are given", f"{prefix}sentence", "one of them", sentence_value)
        if tokens_value is None and sentence_value is None:
            raise AttnError(
                f"neither `{prefix}tokens` nor `{prefix}sentence` is given",
                line=tree.line,
                key=prefix.rstrip(".") or None,
                expected="`tokens: [The, cat, sat]` or `sentence: The cat sat.`",
            )
        if sentence_value is not None:
            sentence = to_word(sentence_value, f"{prefix}sentence")
            tokens = split_sentence(sentence)
            if not tokens:
                raise self._error("the sentence has no words", f"{prefix}sentence", "a sentence such as `The cat sat.`", sentence_value)
            return tokens
        assert tokens_value is not None
        key = f"{prefix}tokens"
        if not isinstance(tokens_value, Seq):
            raise self._error(f"found {describe(tokens_value)}", key, "a list of words, e.g. [The, cat, sat]", tokens_value)
        if not tokens_value.items:
            raise self._error("the token list is empty", key, "at least one word", tokens_value)
        tokens = [to_word(item, f"{key}[{i}]") for i, item in enumerate(tokens_value.items, 1)]
        for i, (token, item) in enumerate(zip(tokens, tokens_value.items), 1):
            if not token.strip():
                raise AttnError("an empty word", line=item.line, key=f"{key}[{i}]", expected="a word")
        return tokens

    def _kv_heads(self, heads: int) -> int:
        kv_heads = self._int("kv_heads", default=heads, minimum=1)
        if heads % kv_heads:
            raise self._error(
                f"kv_heads = {kv_heads} does not divide heads = {heads}",
                "kv_heads",
                f"a divisor of {heads}: each key/value head serves the same number of query heads",
                self._get("kv_heads"),
            )
        return kv_heads

    def _context(self) -> Map | None:
        value = self._get("context")
        if value is None:
            return None
        if not isinstance(value, Map):
            raise self._error(f"found {describe(value)}", "context", "a mapping with `tokens:` or `sentence:` (and `embeddings:`)", value)
        _check_keys(value, CONTEXT_KEYS, "context.")
        return value

    def _context_embeddings(self, context: Map, tokens: list[str], case_sensitive: bool, d_model: int) -> np.ndarray:
        value = context.items.get("embeddings")
        key = "context.embeddings"
        if value is None:
            value, key = self._get("embeddings"), "embeddings"
            if not isinstance(value, Map):
                raise AttnError(
                    "the context has no `embeddings` and the top-level embeddings are rows, not a word map",
                    line=context.line,
                    key="context",
                    expected="`context.embeddings`, or top-level embeddings as a mapping word → vector",
                )
        X_kv = self._embeddings(tokens, case_sensitive, value, key)
        if X_kv.shape[1] != d_model:
            raise self._error(
                f"the context's embeddings have {X_kv.shape[1]} numbers but the queries' have d_model = {d_model}",
                key,
                "embeddings of the same width for both sequences",
                value,
            )
        return X_kv

    def _embeddings(self, tokens: list[str], case_sensitive: bool, value: Value | None, key: str) -> np.ndarray:
        if value is None:
            raise AttnError(
                "the required key `embeddings` is missing",
                line=self.tree.line,
                expected="a mapping word → vector, or a list of rows, one per token (or Q, K and V given directly)",
            )
        if isinstance(value, Seq):
            X = to_matrix(value, key)
            if X.shape[0] != len(tokens):
                raise self._error(f"{X.shape[0]} embedding rows for {len(tokens)} tokens", key, "one row per token, in token order", value)
            return X
        if not isinstance(value, Map):
            raise self._error(f"found {describe(value)}", key, "a mapping word → vector, or a list of rows", value)
        fold = (lambda w: w) if case_sensitive else str.casefold
        vectors: dict[str, tuple[str, np.ndarray]] = {}
        for word, vector_value in value.items.items():
            vector = to_vector(vector_value, f"{key}.{word}")
            earlier = vectors.get(fold(word))
            if earlier is not None and not np.array_equal(earlier[1], vector):
                raise AttnError(
                    f"{earlier[0]!r} and {word!r} are the same word when case is ignored, but their vectors differ",
                    line=value.key_lines[word],
                    key=f"{key}.{word}",
                    expected="one vector per word, or `case_sensitive: true`",
                )
            vectors[fold(word)] = (word, vector)
        missing = list(dict.fromkeys(t for t in tokens if fold(t) not in vectors))
        if missing:
            known = [original for original, _ in vectors.values()]
            hints = []
            for word in missing[:MAX_LISTED]:
                close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
                hints.append(f"{word!r} (did you mean {close[0]!r}?)" if close else repr(word))
            more = f" and {len(missing) - MAX_LISTED:,} more" if len(missing) > MAX_LISTED else ""
            raise self._error(
                f"no embedding for {', '.join(hints)}{more}",
                key,
                "one entry per distinct word" + ("" if case_sensitive else " (case is ignored)"),
                value,
            )
        lengths = {word: vec.shape[0] for word, vec in vectors.values()}
        first_word, first_len = next(iter(lengths.items()))
        for word, length in lengths.items():
            if length != first_len:
                raise AttnError(
                    f"the vector of {word!r} has {length} numbers but that of {first_word!r} has {first_len}",
                    line=value.items[word].line,
                    key=f"{key}.{word}",
                    expected="every embedding of the same length d_model",
                )
        return np.array([vectors[fold(t)][1] for t in tokens], dtype=np.float64)

    def _weights(self, X: np.ndarray, X_kv: np.ndarray | None, heads: int, kv_heads: int) -> dict[str, np.ndarray | None]:
        d_model = X.shape[1]
        W_Q = self._projection("W_Q", d_model, heads)
        W_K = self._projection("W_K", d_model, kv_heads)
        W_V = self._projection("W_V", d_model, kv_heads)
        d_k = W_Q.shape[1] // heads
        if W_K.shape[1] != kv_heads * d_k:
            need = "H·d_k" if kv_heads == heads else f"G·d_k = {kv_heads} × {d_k}"
            raise self._error(
                f"W_K has {W_K.shape[1]} columns but W_Q has {W_Q.shape[1]}" + ("" if kv_heads == heads else f" for {heads} heads"),
                "W_K",
                f"{kv_heads * d_k} columns ({need}): each query is compared with each key",
            )
        return {
            "X": X,
            "X_kv": X_kv,
            "W_Q": W_Q,
            "W_K": W_K,
            "W_V": W_V,
            "b_Q": self._vector("b_Q", W_Q.shape[1], "H·d_k, the columns of W_Q"),
            "b_K": self._vector("b_K", W_K.shape[1], "the columns of W_K"),
            "b_V": self._vector("b_V", W_V.shape[1], "the columns of W_V"),
        }

    def _direct(self, given: Sequence[str], heads: int, kv_heads: int, L_q: int, L_k: int, cross: bool) -> dict[str, np.ndarray | None]:
        mixed = [key for key in ("embeddings", "W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V") if key in self.tree.items]
        if mixed:
            raise self._error(
                f"Q, K and V are given directly, so `{mixed[0]}` has no use",
                mixed[0],
                "either Q, K and V, or embeddings with W_Q, W_K and W_V, not both",
            )
        missing = [key for key in ("Q", "K", "V") if key not in given]
        if missing:
            raise self._error(
                f"{' and '.join(given)} given but not {' and '.join(missing)}",
                given[0],
                "all three of Q, K and V",
            )
        Q = self._projection("Q", L_q, heads, rows_are="tokens")
        K = self._projection("K", L_k, kv_heads, rows_are="context tokens" if cross else "tokens")
        V = self._projection("V", L_k, kv_heads, rows_are="context tokens" if cross else "tokens")
        d_k = Q.shape[1] // heads
        if K.shape[1] != kv_heads * d_k:
            raise self._error(
                f"K has {K.shape[1]} columns but Q has {Q.shape[1]} for {heads} head(s)",
                "K",
                f"{kv_heads * d_k} columns: each query is compared with each key",
            )
        return {"Q": Q, "K": K, "V": V}

    def _projection(self, key: str, rows: int, heads: int, rows_are: str = "", value: Value | None = None) -> np.ndarray:
        """A weight matrix (rows = d_model) or, with `rows_are`, Q/K/V given directly (rows = tokens); `value` instead of the key's own."""
        value = self._get(key) if value is None else value
        if not rows_are and (value is None or (isinstance(value, Scalar) and value.text == "identity")):
            if rows % heads:
                raise self._error(
                    f"an identity {key} needs d_model = {rows} to split evenly into {heads} heads",
                    key if value is not None else "heads",
                    "heads dividing d_model, or explicit weight matrices",
                    value,
                )
            return self._identity(key, rows, value)
        shape = f"{'L' if rows_are else 'd_model'} × d" if rows_are else "d_model × d_k"
        assert value is not None
        if isinstance(value, Seq) and value.items and all(
            isinstance(m, Seq) and m.items and isinstance(m.items[0], Seq) for m in value.items
        ):
            blocks = [to_matrix(m, f"{key}[{h}]") for h, m in enumerate(value.items, 1)]
            if len(blocks) != heads:
                who = "heads" if key in ("W_Q", "Q") or heads == 1 else "kv_heads"
                raise self._error(f"{len(blocks)} per-head matrices for {who} = {heads}", key, f"{heads} matrices of {shape}, one per head", value)
            for h, (part, item) in enumerate(zip(blocks, value.items), 1):
                if part.shape != blocks[0].shape:
                    raise AttnError(
                        f"head {h}'s matrix is {part.shape[0]} × {part.shape[1]} but head 1's is {blocks[0].shape[0]} × {blocks[0].shape[1]}",
                        line=item.line,
                        key=f"{key}[{h}]",
                        expected="the same shape for every head",
                    )
            matrix = np.hstack(blocks)
        elif isinstance(value, Seq):
            matrix = to_matrix(value, key)
        else:
            expected = "a matrix with one row per token" if rows_are else "a d_model × (H·d_k) matrix, a list of per-head matrices, or `identity`"
            raise self._error(f"found {describe(value)}", key, expected, value)
        if matrix.shape[0] != rows:
            if rows_are:
                hint = "; give `context:` with their tokens for cross-attention" if rows_are == "tokens" and key != "Q" else ""
                raise self._error(f"{key} has {matrix.shape[0]} rows but there are {rows} {rows_are}{hint}", key, f"{rows} rows, one per {rows_are[:-1]}", value)
            raise self._error(
                f"{key} has {matrix.shape[0]} rows but the embeddings have d_model = {rows} numbers",
                key,
                f"{rows} rows: X·{key} multiplies each embedding by {key}",
                value,
            )
        if matrix.shape[1] % heads:
            who = "heads" if key in ("W_Q", "Q") or heads == 1 else "kv_heads"
            raise self._error(f"{key} has {matrix.shape[1]} columns, which do not split evenly into {who} = {heads}", key, f"a multiple of {heads} columns", value)
        return matrix

    def _output_projection(self, concat_width: int) -> np.ndarray | None:
        value = self._get("W_O")
        if value is None:
            return None
        if isinstance(value, Scalar) and value.text == "identity":
            return self._identity("W_O", concat_width, value)
        matrix = to_matrix(value, "W_O")
        if matrix.shape[0] != concat_width:
            raise self._error(
                f"W_O has {matrix.shape[0]} rows but the heads' concatenated output has H·d_v = {concat_width} columns",
                "W_O",
                f"{concat_width} rows",
                value,
            )
        return matrix

    def _vector(self, key: str, length: int, what: str) -> np.ndarray | None:
        value = self._get(key)
        if value is None:
            return None
        vector = to_vector(value, key)
        if vector.shape[0] != length:
            raise self._error(f"{key} has {vector.shape[0]} numbers", key, f"{length} = {what}", value)
        return vector

    def _scale(self, d_k: int) -> Scale:
        value = self._get("scale")
        if value is None or (isinstance(value, Scalar) and value.text == "sqrt_dk"):
            return Scale("sqrt_dk", math.sqrt(d_k))
        if isinstance(value, Scalar) and value.text == "none":
            return Scale("none", 1.0)
        expected = "`sqrt_dk`, `none` or a positive number to divide the scores by"
        if not (isinstance(value, Scalar) and value.plain):
            raise self._error(f"found {describe(value)}", "scale", expected, value)
        try:
            divisor = to_number(value, "scale")
        except AttnError:
            close = difflib.get_close_matches(value.text, ["sqrt_dk", "none"], n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise self._error(f"found {describe(value)}{hint}", "scale", expected, value) from None
        if divisor <= 0:
            raise self._error(f"{value.text} is not positive", "scale", expected, value)
        return Scale("value", divisor)

    # -- variants --------------------------------------------------------------------------

    def _mask(self, L_q: int, L_k: int, cached: int = 0) -> Mask:
        """The mask; after `cached` keys of a given KV cache, its rules count the queries from position cached + 1."""
        mask = self._mask_given(L_q, L_k, cached)
        return mask if not cached else replace(mask, first=cached)

    def _mask_given(self, L_q: int, L_k: int, cached: int) -> Mask:
        value = self._get("mask")
        expected = "`none`, `causal`, a mapping {causal, window, sinks, padding}, or an L_q × L_k matrix of 0/1"
        if value is None:
            return Mask()
        if isinstance(value, Scalar):
            word = to_word(value, "mask")
            if word in ("none", "causal"):
                mask = Mask(causal=word == "causal")
            else:
                close = difflib.get_close_matches(word, ["none", "causal"], n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise self._error(f"found {word!r}{hint}", "mask", expected, value)
        elif isinstance(value, Seq):
            matrix = to_matrix(value, "mask")
            if matrix.shape != (L_q, L_k):
                raise self._error(f"the mask matrix is {matrix.shape[0]} × {matrix.shape[1]}", "mask", f"{L_q} × {L_k}: one row per query, one column per key", value)
            if not np.isin(matrix, (0.0, 1.0)).all():
                raise self._error("the mask matrix holds numbers other than 0 and 1", "mask", "1 where the query sees the key, 0 where it is hidden", value)
            matrix_bool = matrix.astype(bool)
            matrix_bool.setflags(write=False)
            mask = Mask(matrix=matrix_bool)
        else:
            mask = self._mask_rules(value, L_q, L_k)
        if mask.causal and L_q + cached != L_k:
            raise self._error(
                f"a causal mask needs as many queries as keys, but there are {L_q} and {L_k}",
                "mask",
                "no causal mask in cross-attention between sequences of different lengths",
                value,
            )
        return mask

    def _mask_rules(self, value: Map, L_q: int, L_k: int) -> Mask:
        _check_keys(value, MASK_KEYS, "mask.")
        items = value.items
        causal = self._bool("mask.causal", False, items.get("causal")) if "causal" in items else False
        window = None
        if "window" in items:
            window = self._int("mask.window", 0, minimum=0, value=items["window"])
        sinks = 0
        if "sinks" in items:
            sinks = self._int("mask.sinks", 0, minimum=0, maximum=L_k, value=items["sinks"], what="a number of sink keys")
        padding: tuple[int, ...] = ()
        if "padding" in items:
            padding_value = items["padding"]
            if not isinstance(padding_value, Seq):
                raise self._error(f"found {describe(padding_value)}", "mask.padding", "a list of key positions, from 1", padding_value)
            padding = tuple(
                self._int(f"mask.padding[{n}]", 1, minimum=1, maximum=L_k, value=item, what="a key position")
                for n, item in enumerate(padding_value.items, 1)
            )
        return Mask(causal=causal, window=window, sinks=sinks, padding=tuple(sorted(set(padding))))

    def _check_rows_see_a_key(self, mask: Mask, L_q: int, L_k: int, tokens: list[str]) -> None:
        blind = np.flatnonzero(~mask.visible(L_q, L_k).any(axis=1))  # queries (from 0) that see nothing
        if blind.size:
            i = int(blind[0]) + 1
            raise self._error(
                f"query {i} ({tokens[i - 1]!r}) would see no key at all: its softmax has nothing to weigh",
                "mask",
                "a mask that leaves every query at least one key",
            )

    def _rope(self, d_k: int, L: int) -> Rope | None:
        """RoPE from `rope`: true, or a mapping (θ, style, partial rotary, offset, or given angles or a cos/sin table); L rows for a given one."""
        value = self._get("rope")
        if value is None:
            return None
        if isinstance(value, Scalar) and value.plain and value.kind == "bool":
            rope = Rope() if self._bool("rope", False) else None
        elif isinstance(value, Map):
            rope = self._rope_mapping(value, d_k, L)
        else:
            raise self._error(f"found {describe(value)}", "rope", "`true`, or {theta: 10000, style: half | interleaved}", value)
        if rope is not None and rope.width(d_k) % 2:
            raise self._error(f"RoPE turns pairs of coordinates, but d_k = {d_k} is odd", "rope", "an even d_k", value)
        return rope

    def _rope_mapping(self, value: Map, d_k: int, L: int) -> Rope:
        _check_keys(value, ROPE_KEYS, "rope.")
        items = value.items
        theta = 10000.0
        if "theta" in items:
            theta = to_number(items["theta"], "rope.theta")
            if theta <= 1:
                raise self._error(f"θ = {theta:g}", "rope.theta", "a base above 1, such as 10000", items["theta"])
        style = "half"
        if "style" in items:
            style = to_word(items["style"], "rope.style")
            if style not in ("half", "interleaved"):
                raise self._error(f"found {style!r}", "rope.style", "`half` (Llama, GPT-NeoX) or `interleaved` (RoFormer)", items["style"])
        for one, other in (("fraction", "rotary_dim"), ("angles", "cos"), ("angles", "sin"), ("theta", "angles"), ("theta", "cos")):
            if one in items and other in items:
                raise self._error(f"both `{one}` and `{other}` are given", f"rope.{other}", f"one of `{one}` and `{other}`", items[other])
        rotary_dim = d_k
        if "fraction" in items:
            fraction = to_number(items["fraction"], "rope.fraction")
            r = d_k * fraction
            if not 0 < fraction <= 1 or r != int(r) or int(r) % 2:
                raise self._error(f"fraction {fraction:g} of d_k = {d_k} is {r:g} coordinates", "rope.fraction",
                                  f"a fraction that leaves an even number of coordinates, e.g. 0.25 or 0.5 of {d_k}", items["fraction"])  # fmt: skip
            rotary_dim = int(r)
        if "rotary_dim" in items:
            rotary_dim = self._int("rope.rotary_dim", 0, 2, d_k, items["rotary_dim"], "an even number of coordinates")
            if rotary_dim % 2:
                raise self._error(f"rotary_dim {rotary_dim} is odd", "rope.rotary_dim", f"an even number from 2 to d_k = {d_k}", items["rotary_dim"])
        offset = self._int("rope.offset", 0, 0, 2**31, items.get("offset"), "a position") if "offset" in items else 0
        angles = cos = sin = None
        if "angles" in items:
            angles = self._rope_rows(items["angles"], "rope.angles", L)
            rotary_dim = self._rope_width(2 * angles.shape[1], rotary_dim, d_k, items, "angles", "one angle per pair")
        if "cos" in items or "sin" in items:
            for key, other in (("cos", "sin"), ("sin", "cos")):
                if key not in items:
                    raise self._error(f"`{other}` is given without `{key}`", f"rope.{key}", "both `cos` and `sin`, tables of one shape", items[other])
            cos, sin = self._rope_rows(items["cos"], "rope.cos", L), self._rope_rows(items["sin"], "rope.sin", L)
            if cos.shape != sin.shape:
                raise self._error(f"sin is {sin.shape[0]} × {sin.shape[1]} but cos is {cos.shape[0]} × {cos.shape[1]}", "rope.sin",
                                  "a sin table of the cos table's shape", items["sin"])  # fmt: skip
            rotary_dim = self._rope_width(cos.shape[1], rotary_dim, d_k, items, "cos", "one column per rotated coordinate")
        return Rope(
            theta=theta, style=style, rotary_dim=rotary_dim if rotary_dim < d_k else None, offset=offset,
            given_angles=_frozen(angles), given_cos=_frozen(cos), given_sin=_frozen(sin),
        )  # fmt: skip

    def _rope_rows(self, value: Value, key: str, L: int) -> np.ndarray:
        """A given angle or cos/sin table: one row per token (L of them), the first at position `offset`."""
        table = to_matrix(value, key)
        if table.shape[0] != L:
            raise self._error(f"{table.shape[0]} rows for {L} tokens", key, f"{L} rows, one per token (row 1 is the first token's)", value)
        return table

    def _rope_width(self, width: int, rotary_dim: int, d_k: int, items: dict[str, Value], key: str, columns: str) -> int:
        """The rotated width a given table implies, checked against d_k and any fraction or rotary_dim beside it."""
        said = next((k for k in ("fraction", "rotary_dim") if k in items), None)
        if width > d_k or width % 2 or (said is not None and width != rotary_dim):
            wanted = f"{rotary_dim // 2 if key == 'angles' else rotary_dim} columns ({columns}, r = {rotary_dim} as `{said}` says)" if said else (
                f"{columns}, for an even r of at most d_k = {d_k}")  # fmt: skip
            raise self._error(f"the table implies r = {width} rotated coordinates", f"rope.{key}", wanted, items[key])
        return width

    def _score_bias(self, heads: int, L_q: int, L_k: int) -> ScoreBias | None:
        value = self._get("bias")
        if value is None:
            return None
        if isinstance(value, Seq) and value.items and all(isinstance(m, Seq) and m.items and isinstance(m.items[0], Seq) for m in value.items):
            matrices = [to_matrix(m, f"bias[{h}]") for h, m in enumerate(value.items, 1)]
            if len(matrices) != heads:
                raise self._error(f"{len(matrices)} bias matrices for heads = {heads}", "bias", f"one matrix for all heads, or {heads}", value)
        else:
            matrices = [to_matrix(value, "bias")]
        for h, matrix in enumerate(matrices, 1):
            if matrix.shape != (L_q, L_k):
                where = f"bias[{h}]" if len(matrices) > 1 else "bias"
                raise self._error(f"the bias is {matrix.shape[0]} × {matrix.shape[1]}", where, f"{L_q} × {L_k}: one row per query, one column per key", value)
        stacked = np.array(matrices, dtype=np.float64)  # (1 or H, L_q, L_k)
        stacked.setflags(write=False)
        return ScoreBias(stacked)

    def _softcap(self) -> SoftCap | None:
        value = self._get("softcap")
        if value is None:
            return None
        expected = "a positive number, the cap of cap·tanh(s / cap) (Gemma 2 uses 50.0)"
        if not (isinstance(value, Scalar) and value.plain):
            raise self._error(f"found {describe(value)}", "softcap", expected, value)
        cap = to_number(value, "softcap")
        if not (math.isfinite(cap) and cap > 0):
            raise self._error(f"found {value.text}", "softcap", expected, value)
        return SoftCap(cap)

    def _sink_logits(self, heads: int) -> LearnedSink | None:
        value = self._get("sink_logits")
        if value is None:
            return None
        expected = f"{heads} finite numbers, one logit per head (gpt-oss's learned sinks), or one number for every head"
        if isinstance(value, Scalar) and value.plain and value.kind != "bool":
            logits = [to_number(value, "sink_logits")] * heads
        elif isinstance(value, Seq) and all(isinstance(item, Scalar) and item.plain and item.kind != "bool" for item in value.items):
            logits = [to_number(item, f"sink_logits[{n}]") for n, item in enumerate(value.items, 1)]
            if len(logits) != heads:
                raise self._error(f"{len(logits)} sink logits for heads = {heads}", "sink_logits", expected, value)
        else:
            raise self._error(f"found {describe(value)}", "sink_logits", expected, value)
        return LearnedSink(tuple(float(logit) for logit in logits))

    def _without_softmax(self, heads: int, mla: bool) -> dict[str, LinearAttention | Retention]:
        """`linear_attention:` or `retention:` (one of them), refused beside what only a softmax has."""
        given = [key for key in ("linear_attention", "retention") if self._get(key) is not None]
        if not given:
            return {}
        key, value = given[0], self._get(given[0])
        assert value is not None
        beside = [other for other in ("linear_attention", "retention", "softcap", "sink_logits", "bias", "alibi") if other != key and self._get(other) is not None]
        if mla:
            beside.append("mla")
        if beside:
            raise self._error(f"{key} beside {beside[0]}", key, f"{key} alone: {beside[0]} changes a softmax, and {key} has none", value)
        if key == "linear_attention":
            expected = "{feature_map: elu+1 | relu | identity}"
            if not isinstance(value, Map):
                raise self._error(f"found {describe(value)}", key, expected, value)
            _check_keys(value, ("feature_map",), "linear_attention.")
            name = "elu+1"
            if "feature_map" in value.items:
                item = value.items["feature_map"]
                name = item.text if isinstance(item, Scalar) else ""
                if name not in FEATURE_MAPS:
                    raise self._error(f"found {describe(item)}", "linear_attention.feature_map", "elu+1, relu or identity", item)
            return {key: LinearAttention(name)}
        expected = f"{{gamma: γ}}, γ in (0, 1]: one number for every head, or {heads}, one per head"
        if not isinstance(value, Map) or "gamma" not in value.items:
            raise self._error(f"found {describe(value)}", key, expected, value)
        _check_keys(value, ("gamma",), "retention.")
        item = value.items["gamma"]
        if isinstance(item, Scalar) and item.plain and item.kind != "bool":
            gammas = [to_number(item, "retention.gamma")] * heads
        elif isinstance(item, Seq) and all(isinstance(x, Scalar) and x.plain and x.kind != "bool" for x in item.items):
            gammas = [to_number(x, f"retention.gamma[{n}]") for n, x in enumerate(item.items, 1)]
            if len(gammas) != heads:
                raise self._error(f"{len(gammas)} decays for heads = {heads}", "retention.gamma", expected, item)
        else:
            raise self._error(f"found {describe(item)}", "retention.gamma", expected, item)
        if not all(0 < gamma <= 1 for gamma in gammas):
            raise self._error(f"found {', '.join(f'{g:g}' for g in gammas)}", "retention.gamma", expected, item)
        return {key: Retention(tuple(float(gamma) for gamma in gammas))}

    def _qk_norm(self, heads: int, kv_heads: int, d_k: int) -> QkNorm | None:
        value = self._get("qk_norm")
        if value is None:
            return None
        if isinstance(value, Scalar) and value.plain and value.kind == "bool":
            if not self._bool("qk_norm", False):
                return None
            return QkNorm(_frozen(np.ones(d_k)), _frozen(np.ones(d_k)))  # type: ignore[arg-type]
        if not isinstance(value, Map):
            raise self._error(f"found {describe(value)}", "qk_norm", "`true`, or {over: head | whole, q_weight, k_weight, eps, form: w | 1+w}", value)
        _check_keys(value, QK_NORM_KEYS, "qk_norm.")
        items = value.items
        over = "head"
        if "over" in items:
            over = to_word(items["over"], "qk_norm.over")
            if over not in ("head", "whole"):
                raise self._error(f"found {over!r}", "qk_norm.over", "`head` (each head's d_k numbers: Qwen3, Gemma 3) or `whole` (OLMo 2)", items["over"])
        form = "w"
        if "form" in items:
            form = to_word(items["form"], "qk_norm.form")
            if form not in ("w", "1+w"):
                raise self._error(f"found {form!r}", "qk_norm.form", "`w` (x / rms · w) or `1+w` (Gemma's x / rms · (1 + w))", items["form"])
        eps = 1e-6
        if "eps" in items:
            eps = to_number(items["eps"], "qk_norm.eps")
            if not (math.isfinite(eps) and eps >= 0):
                raise self._error(f"found {items['eps'].text}", "qk_norm.eps", "a number ≥ 0, such as 1e-6", items["eps"])  # type: ignore[union-attr]
        weights = []
        for role, count in (("q", heads), ("k", kv_heads)):
            length = d_k * count if over == "whole" else d_k
            key = f"{role}_weight"
            if key not in items:
                weights.append(np.zeros(length) if form == "1+w" else np.ones(length))
                continue
            vector = to_vector(items[key], f"qk_norm.{key}")
            if len(vector) != length:
                what = f"{count}·d_k = {length}, the whole {role} projection" if over == "whole" else f"d_k = {d_k}, shared by every head"
                raise self._error(f"{len(vector)} numbers", f"qk_norm.{key}", f"{length} numbers ({what})", items[key])
            weights.append(vector)
        return QkNorm(_frozen(weights[0]), _frozen(weights[1]), eps=eps, over=over, offset=1.0 if form == "1+w" else 0.0)  # type: ignore[arg-type]

    def _alibi(self, heads: int) -> Alibi | None:
        value = self._get("alibi")
        if value is None:
            return None
        if isinstance(value, Scalar) and value.plain and value.kind == "bool":
            return Alibi(alibi_slopes(heads)) if self._bool("alibi", False) else None
        if isinstance(value, Map):
            _check_keys(value, ("slopes",), "alibi.")
            slopes_value = value.items.get("slopes")
            if slopes_value is None:
                raise self._error("`slopes` is missing", "alibi", "{slopes: [m_1, …, m_H]}", value)
            slopes = to_vector(slopes_value, "alibi.slopes")
            if len(slopes) != heads:
                few = "too few" if len(slopes) < heads else "too many"
                raise self._error(f"{len(slopes)} slopes for {heads} heads ({few})", "alibi.slopes", f"{heads} slopes, one per head", slopes_value)
            return Alibi(tuple(float(m) for m in slopes), given=True)
        raise self._error(f"found {describe(value)}", "alibi", "`true` for the paper's slopes, or {slopes: [m_1, …, m_H]}", value)


def _first(arrays: dict[str, np.ndarray | None], *keys: str) -> np.ndarray:
    """The first of `keys` that holds an array (weights, or Q/K/V given directly)."""
    return next(array for key in keys if (array := arrays.get(key)) is not None)


MAX_LISTED = 10  # missing words named in one error message


def _check_keys(tree: Map, keys: tuple[str, ...], prefix: str) -> None:
    for key in tree.items:
        if key not in keys:
            same_but_case = [k for k in keys if k.lower() == key.lower()]
            close = same_but_case or difflib.get_close_matches(key, keys, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise AttnError(f"unknown key {key!r}{hint}", line=tree.key_lines.get(key), key=prefix + key, expected="one of: " + ", ".join(keys))


def _frozen(array: np.ndarray | None) -> np.ndarray | None:
    if array is not None:
        array.setflags(write=False)
    return array


def to_vector(value: Value, path: str) -> np.ndarray:
    """A non-empty list of finite numbers."""
    if not isinstance(value, Seq):
        raise AttnError(f"found {describe(value)}", line=value.line, key=path, expected="a list of numbers, e.g. [1, 0]")
    if not value.items:
        raise AttnError("the vector is empty", line=value.line, key=path, expected="at least one number")
    texts = value.plain_texts
    if texts is None and all(isinstance(item, Scalar) and item.plain for item in value.items):  # its Scalars were built already
        texts = [item.text for item in value.items]  # type: ignore[union-attr]  # Scalars, as checked
    if texts is not None:  # the common case at full speed: plain numbers; anything else takes the careful path below
        try:
            vector = np.array(list(map(float, texts)), dtype=np.float64)
            if np.isfinite(vector).all():
                return vector
        except ValueError:
            pass
    return np.array([to_number(item, f"{path}[{i}]") for i, item in enumerate(value.items, 1)], dtype=np.float64)


def to_matrix(value: Value, path: str) -> np.ndarray:
    """A non-empty, rectangular list of rows of finite numbers."""
    if not isinstance(value, Seq) or not value.items:
        what = "an empty list" if isinstance(value, Seq) else describe(value)
        raise AttnError(f"found {what}", line=value.line, key=path, expected="a matrix: a list of rows like [[1, 0], [0, 1]]")
    fast = _plain_matrix(value.items)
    if fast is not None:
        return fast
    rows = []
    for i, row in enumerate(value.items, 1):
        if not isinstance(row, Seq):
            raise AttnError(
                f"row {i} is {describe(row)}", line=row.line, key=f"{path}[{i}]", expected="a row: a list of numbers"
            )
        rows.append(to_vector(row, f"{path}[{i}]"))
        if rows[-1].shape != rows[0].shape:
            raise AttnError(
                f"row {i} has {rows[-1].shape[0]} numbers but row 1 has {rows[0].shape[0]} (ragged rows)",
                line=row.line,
                key=f"{path}[{i}]",
                expected="every row of the same length",
            )
    return np.array(rows, dtype=np.float64)


def _plain_matrix(rows: list[Value]) -> np.ndarray | None:
    """(rows, width) at full speed when every row is a list of plain finite numbers, all of one width; else None."""
    texts = [row.plain_texts if isinstance(row, Seq) else None for row in rows]
    width = len(texts[0] or ())
    if not width or any(row is None or len(row) != width for row in texts):
        return None
    try:
        flat = np.array(list(map(float, itertools.chain.from_iterable(texts))), dtype=np.float64)  # type: ignore[arg-type]  # no None is left
    except ValueError:
        return None
    return flat.reshape(len(rows), width) if np.isfinite(flat).all() else None
