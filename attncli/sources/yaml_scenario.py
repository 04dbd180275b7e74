"""Scenario files: YAML read and checked into one immutable `attncli.core.scenario.Scenario`.

`load()` turns a YAML file (or a built-in scenario's name) into a `Scenario`, or raises an
AttnError that names the file, line and key. Everything after this module may assume the
shapes fit.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attncli.core import variants
from attncli.core.scenario import Scale, Scenario, held
from attncli.core.variants import Mask
from attncli.core.variants.keys import Read, Sizes
from attncli.errors import AttnError, did_you_mean, misspelt, option
from attncli.sources import builtin, fields, reading
from attncli.sources.limits import Limits
from attncli.sources.words import split_sentence
from attncli.sources.yamltree import Map, Scalar, Seq, Value, describe, parse, shortened, to_number, to_word

KEYS, MODEL_KEYS = fields.KEYS, fields.MODEL_KEYS  # every key, and those a real checkpoint's layer may have
CONTEXT_KEYS = fields.mapping_keys("context")
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
        _check_keys(self.tree, fields.keys(), "")
        if "model" in self.tree.items:
            return self._checkpoint()
        for key in ("layer", "special_tokens"):
            if key in self.tree.items:
                raise self._error(f"`{key}` is for a real model, but no `model` is given", key, f"`model: FOLDER` beside it, or no `{key}`")
        tokens = self._tokens(self.tree, "")
        case_sensitive = self._bool("case_sensitive", default=False)
        heads = self._int("heads", default=1, minimum=1)
        kv_heads = self._kv_heads(heads)
        self._refusals()
        context = self._context()
        context_tokens = None if context is None else self._tokens(context, "context.")
        L_q = len(tokens)
        L_k = L_q if context_tokens is None else len(context_tokens)
        self._check_size(L_q, L_k, heads)
        given = [key for key in ("Q", "K", "V") if key in self.tree.items]
        found: list[Any] = []
        if (maker := self._given("heads")) is not None:  # a variant that makes each head's q, k and v (MLA: from the latents)
            X = self._embeddings(tokens, case_sensitive, self._get("embeddings"), "embeddings")
            weights: dict[str, np.ndarray | None] = {"X": X}
            sizes = Sizes(heads, kv_heads, 0, 0, L_q, L_k, 0, d_model=X.shape[1])  # d_k, d_rope and d_v are what it makes
            found.append(made := self._read(maker, sizes))
            sizes = made.sized(sizes)
        elif (scorer := self._given("scores")) is not None:  # the scores given instead of Q and K: only V is read beside them
            weights = self._direct(given, heads, kv_heads, L_q, L_k, context_tokens is not None, needs=("V",))
            values = _first(weights, "V")
            sizes = Sizes(heads, kv_heads, 0, 0, L_q, L_k, 0, d_v=values.shape[1] // kv_heads)
            found.append(made := self._read(scorer, sizes))
            sizes = made.sized(sizes)
        else:
            if given:
                weights = self._direct(given, heads, kv_heads, L_q, L_k, context_tokens is not None)
            else:
                X = self._embeddings(tokens, case_sensitive, self._get("embeddings"), "embeddings")
                X_kv = None if context is None else self._context_embeddings(context, context_tokens or [], case_sensitive, X.shape[1])
                weights = self._weights(X, X_kv, heads, kv_heads)
            queries, values = _first(weights, "W_Q", "Q"), _first(weights, "W_V", "V")
            d_k, d_model = queries.shape[1] // heads, 0 if (X_given := weights.get("X")) is None else X_given.shape[1]
            sizes = Sizes(heads, kv_heads, d_k, d_k, L_q, L_k, 0, d_model=d_model, d_v=values.shape[1] // kv_heads)
        concat_width = heads * sizes.d_v
        W_O = self._output_projection(concat_width)
        d_out = W_O.shape[1] if W_O is not None else concat_width
        b_O = self._vector("b_O", d_out, "d_out, the columns of W_O" if W_O is not None else "H·d_v (no W_O given)")
        if (cacher := self._given("cache")) is not None:  # keys and values given before the sentence's, as wide as its heads'
            cache = self._read(cacher, sizes)
            sizes = cache.sized(sizes)
            self._check_size(L_q, sizes.L_k, heads)
            found.append(cache)
        found = self._variants(sizes, found)
        L_k, c = sizes.L_k, sizes.cached
        mask = next((variant for variant in found if isinstance(variant, Mask)), Mask(first=c))
        self._check_rows_see_a_key(mask, L_q, L_k, tokens)
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
            scale=self._scale(sizes.d_k),
            mask=mask,
            variants=held(*(variant for variant in found if not isinstance(variant, Mask))),
            precision=self._int("precision", default=4, minimum=0, maximum=MAX_PRECISION),
            path=self.path,
        )

    def _variants(self, sizes: Sizes, found: list[Any]) -> list[Any]:
        """`found` and each variant the file gives that reads its own key (`from_yaml`), in the order of the key table."""
        order = {key: place for place, key in enumerate(fields.keys())}
        for kind in sorted(variants.REGISTRY, key=lambda kind: order.get(kind.key, len(order))):
            if kind.key in self.tree.items and hasattr(kind, "from_yaml") and not any(isinstance(variant, kind) for variant in found):
                variant = self._read(kind, sizes)
                if variant is not None:
                    found.append(variant)
        return found

    def _read(self, kind: Any, sizes: Sizes) -> Any:
        """Variant class `kind`'s key, read by the variant itself (`from_yaml`); the caller saw the key."""
        value = self._get(kind.key)
        assert value is not None
        read: Read = _Read(self, value, kind.key)  # mypy checks that _Read is a Read
        return kind.from_yaml(read, sizes)

    def _given(self, stage: str) -> Any:
        """The registry's class of `stage` whose key the file gives, or None.

        Two stages change the sizes the other variants are read with, so they are read first: a variant of the "heads"
        stage (MLA) instead of the weights, which makes d_k and d_v; one of the "cache" stage (a KV cache) once they
        are known, which puts c keys before the sentence's (L_k, the positions).
        """
        return next((kind for kind in variants.REGISTRY if kind.stage == stage and kind.key in self.tree.items), None)

    def _refusals(self) -> None:
        """The keys a given variant cannot stand beside (its `excludes`: why, and what to write instead), refused before any is read."""
        for kind in variants.REGISTRY:
            if kind.key in self.tree.items:
                for other, (why, instead) in getattr(kind, "excludes", {}).items():
                    if other in self.tree.items:
                        raise self._error(why, other, instead)

    def _checkpoint(self) -> Scenario:
        """`model: FOLDER`, `layer: N` and `sentence: TEXT`: one layer of a local Hugging Face checkpoint."""
        import dataclasses

        from attncli.sources.checkpoints.scenario import SPECIAL_TOKENS, SPECIAL_TOKENS_EXPECTED, load_scenario

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
            hint = did_you_mean(special_tokens, SPECIAL_TOKENS)
            raise self._error(f"found {special_tokens!r}{hint}", "special_tokens", SPECIAL_TOKENS_EXPECTED, self._get("special_tokens"))
        layer = self._int("layer", default=1, minimum=1, what="a layer number")
        precision = self._int("precision", default=4, minimum=0, maximum=MAX_PRECISION)
        try:
            scenario = load_scenario(
                folder,
                layer=layer,
                sentence=self._text("sentence", default=""),
                special_tokens=special_tokens,
                name=self._text("name", default="") or None,  # none given: the model's name and layer (a post names the model)
                limits=self.limits,
                shown=written,
                target=self._target(),
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
                f"{L_q:,} token{'s' * (L_q != 1)} × {L_k:,} × {heads} head{'s' * (heads != 1)} = {cells:,} attention cells, "
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

    def _target(self) -> str | None:
        """BART's `target:`, the text the decoder has produced so far; a bare null is not the word "null"."""
        if "target" not in self.tree.items:
            return None
        value = self.tree.items["target"]
        if isinstance(value, Scalar) and value.plain and value.kind == "null":
            raise self._error("found nothing (null)", "target", "the text the decoder has produced so far (leave the key out for the "
                              "encoder's attention; quote 'null' for the word)", value)  # fmt: skip
        return self._text("target", default="")

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
            written = shortened(value.text) if isinstance(value, Scalar) else str(int(number))  # 1e300 as written, not its float's 301 digits
            raise self._error(f"{written} is out of range", key, f"{bounds}{why}", value)
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
                hints.append(misspelt(word, known, fold=fold))
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
                    f"the vector of {word!r} has {length} number{'s' * (length != 1)} but that of {first_word!r} has {first_len}",
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

    def _direct(
        self, given: Sequence[str], heads: int, kv_heads: int, L_q: int, L_k: int, cross: bool, needs: tuple[str, ...] = ("Q", "K", "V")
    ) -> dict[str, np.ndarray | None]:
        """Q, K and V given directly; with `needs` ("V",), only V (the scores given instead of Q and K)."""
        mixed = [key for key in ("embeddings", "W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V") if key in self.tree.items]
        if mixed:
            raise self._error(
                f"Q, K and V are given directly, so `{mixed[0]}` has no use",
                mixed[0],
                "either Q, K and V, or embeddings with W_Q, W_K and W_V, not both",
            )
        missing = [key for key in needs if key not in given]
        if missing and not given:
            raise self._error("the scores are given but not V", "scores", "V: the values the weights average, one row per key")
        if missing:
            raise self._error(
                f"{' and '.join(given)} given but not {' and '.join(missing)}",
                given[0],
                "all three of Q, K and V",
            )
        if needs == ("V",):
            return {"V": self._projection("V", L_k, kv_heads, rows_are="context tokens" if cross else "tokens")}
        Q = self._projection("Q", L_q, heads, rows_are="tokens")
        K = self._projection("K", L_k, kv_heads, rows_are="context tokens" if cross else "tokens")
        V = self._projection("V", L_k, kv_heads, rows_are="context tokens" if cross else "tokens")
        d_k = Q.shape[1] // heads
        if K.shape[1] != kv_heads * d_k:
            raise self._error(
                f"K has {K.shape[1]} columns but Q has {Q.shape[1]} for {heads} head{'s' * (heads != 1)}",
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
            raise self._error(f"{key} has {vector.shape[0]} number{'s' * (vector.shape[0] != 1)}", key, f"{length} = {what}", value)
        return vector

    def _check_rows_see_a_key(self, mask: Mask, L_q: int, L_k: int, tokens: list[str]) -> None:
        blind = np.flatnonzero(~mask.visible(L_q, L_k).any(axis=1))  # queries (from 0) that see nothing
        if blind.size:
            i = int(blind[0]) + 1
            raise self._error(
                f"query {i} ({tokens[i - 1]!r}) would see no key at all: its softmax has nothing to weigh",
                "mask",
                "a mask that leaves every query at least one key",
            )

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
            hint = did_you_mean(value.text, ["sqrt_dk", "none"])
            raise self._error(f"found {describe(value)}{hint}", "scale", expected, value) from None
        if divisor <= 0:
            raise self._error(f"{value.text} is not positive", "scale", expected, value)
        return Scale("value", divisor)

class _Read:
    """One value of the file as a variant reads it (core.variants.keys.Read): its path, its form, its numbers, its errors."""

    __slots__ = ("_line", "_validator", "_value", "path")

    def __init__(self, validator: _Validator, value: Value, path: str, line: int | None = None) -> None:
        self._validator = validator
        self._value = value
        self.path = path
        self._line = value.line if line is None else line  # where its errors point: the value's line, or its key's (`beside`)

    @property
    def form(self) -> str:
        value = self._value
        if isinstance(value, Map):
            return "mapping"
        if isinstance(value, Seq):
            return "list"
        return "plain" if value.plain else "quoted"

    @property
    def kind(self) -> str:
        return self._value.kind if isinstance(self._value, Scalar) else ""

    @property
    def text(self) -> str:
        return self._value.text if isinstance(self._value, Scalar) else ""

    def found(self) -> str:
        return f"found {describe(self._value)}"

    def number(self) -> float:
        return to_number(self._value, self.path)

    def word(self) -> str:
        return to_word(self._value, self.path)

    def boolean(self) -> bool:
        return self._validator._bool(self.path, False, self._value)

    def whole(self, minimum: int, maximum: int | None = None, what: str = "a whole number") -> int:
        return self._validator._int(self.path, 0, minimum, maximum, self._value, what)

    def vector(self) -> np.ndarray:
        return to_vector(self._value, self.path)

    def matrix(self) -> np.ndarray:
        return to_matrix(self._value, self.path)

    def matrices(self) -> list[np.ndarray] | None:
        value = self._value
        if isinstance(value, Seq) and value.items and all(isinstance(m, Seq) and m.items and isinstance(m.items[0], Seq) for m in value.items):
            return [to_matrix(m, f"{self.path}[{h}]") for h, m in enumerate(value.items, 1)]
        return None

    def items(self) -> list[Read]:
        value = self._value
        listed = value.items if isinstance(value, Seq) else []
        return [_Read(self._validator, item, f"{self.path}[{n}]") for n, item in enumerate(listed, 1)]

    def keys_given(self) -> list[str]:
        return list(self._value.items) if isinstance(self._value, Map) else []

    def mapping(self, keys: Sequence[str]) -> dict[str, Read]:
        value = self._value
        assert isinstance(value, Map), "a variant asks for a mapping once its form says it is one"
        _check_keys(value, tuple(keys), f"{self.path}.")
        return {key: _Read(self._validator, item, f"{self.path}.{key}") for key, item in value.items.items()}

    def given_variants(self) -> list[type[Any]]:
        return [kind for kind in variants.REGISTRY if kind.key in self._validator.tree.items]

    def beside(self, key: str) -> Read | None:
        tree = self._validator.tree
        return None if key not in tree.items else _Read(self._validator, tree.items[key], key, tree.key_lines.get(key))

    def error(self, message: str, expected: str, *, key: str | None = None) -> AttnError:
        return AttnError(message, line=self._line, key=key or self.path, expected=expected)



def _first(arrays: dict[str, np.ndarray | None], *keys: str) -> np.ndarray:
    """The first of `keys` that holds an array (weights, or Q/K/V given directly)."""
    return next(array for key in keys if (array := arrays.get(key)) is not None)


MAX_LISTED = 10  # missing words named in one error message


def _check_keys(tree: Map, keys: tuple[str, ...], prefix: str) -> None:
    for key in tree.items:
        if key not in keys:
            hint = did_you_mean(key, keys, cutoff=0.5)
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
                f"row {i} has {rows[-1].shape[0]} number{'s' * (rows[-1].shape[0] != 1)} but row 1 has {rows[0].shape[0]} (ragged rows)",
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
