"""A scenario: the sentence, its embeddings and the attention weights, read and checked.

`load()` turns a YAML file (or a built-in scenario's name) into one immutable `Scenario`,
or raises an AttnError that names the file, line and key. Everything after this module
may assume the shapes fit.
"""

from __future__ import annotations

import collections
import difflib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from attncli import builtin
from attncli.errors import AttnError
from attncli.limits import Limits
from attncli.yamltree import Map, Scalar, Seq, Value, describe, parse, to_number, to_word

KEYS = (
    "name", "description", "source",
    "tokens", "sentence", "case_sensitive", "embeddings",
    "heads", "W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V", "W_O", "b_O",
    "scale", "mask", "precision",
)  # fmt: skip
MAX_PRECISION = 15  # float64 carries 15-17 significant digits; more decimals would be noise
_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" + "“”‘’«»…—–"  # string.punctuation and typographic marks


class Scale(NamedTuple):
    mode: str  # "sqrt_dk", "none" or "value"
    divisor: float  # what the scores are divided by


@dataclass(frozen=True, eq=False)
class Scenario:
    """A validated scenario. Matrices use the row-vector convention: Q = X·W_Q + b_Q."""

    name: str
    description: str
    source: str
    tokens: tuple[str, ...]
    case_sensitive: bool
    X: np.ndarray  # (L, d_model) one embedding row per token
    heads: int  # H
    W_Q: np.ndarray  # (d_model, H*d_k); head h uses columns h*d_k .. (h+1)*d_k
    W_K: np.ndarray  # (d_model, H*d_k)
    W_V: np.ndarray  # (d_model, H*d_v)
    b_Q: np.ndarray | None  # (H*d_k,)
    b_K: np.ndarray | None  # (H*d_k,)
    b_V: np.ndarray | None  # (H*d_v,)
    W_O: np.ndarray | None  # (H*d_v, d_out)
    b_O: np.ndarray | None  # (d_out,)
    scale: Scale
    mask: str  # "none" or "causal"
    precision: int  # decimals shown to people
    path: str | None = None  # the file it was read from; None when built in code

    @property
    def L(self) -> int:
        return len(self.tokens)

    @property
    def d_model(self) -> int:
        return self.X.shape[1]

    @property
    def d_k(self) -> int:
        return self.W_Q.shape[1] // self.heads

    @property
    def d_v(self) -> int:
        return self.W_V.shape[1] // self.heads

    @property
    def d_out(self) -> int:
        return self.W_O.shape[1] if self.W_O is not None else self.heads * self.d_v

    def head_numbers(self, head: int | None = None) -> list[int]:
        """The heads to show, counted from 1: all of them, or `head` after checking that it exists."""
        if head is None:
            return list(range(1, self.heads + 1))
        if not 1 <= head <= self.heads:
            raise AttnError(
                f"head {head} does not exist: the scenario has {self.heads} head{'s' if self.heads > 1 else ''}",
                key="--head",
                expected=f"a head from 1 to {self.heads}",
            )
        return [head]

    def fold(self, word: str) -> str:
        """The form under which words are compared ("The" == "the" unless case-sensitive)."""
        return word if self.case_sensitive else word.casefold()

    def labels(self) -> list[str]:
        """Token labels for rows and columns; a token that repeats gets its position: "the (4)"."""
        counts = collections.Counter(self.tokens)
        return [f"{t} ({i})" if counts[t] > 1 else t for i, t in enumerate(self.tokens, 1)]


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
        return from_text(text, stem=path.stem, limits=limits, path=shown)
    except AttnError as error:
        raise error.located(file=shown) from None


def read_text(path: Path, shown: str, *, max_bytes: int = Limits().max_bytes) -> str:
    """The file's text, or an AttnError that says why it cannot be had."""
    from attncli import reading

    return reading.read_text(path, shown, max_bytes=max_bytes)


def from_text(text: str, *, stem: str = "scenario", limits: Limits = Limits(), path: str | None = None) -> Scenario:
    """Parse and validate a scenario from YAML text."""
    tree = parse(text, limits=limits)
    if tree is None:  # nothing but blank lines and comments
        raise AttnError("the file is empty", expected="a YAML mapping with `tokens:` (or `sentence:`) and `embeddings:`")
    if not isinstance(tree, Map):
        raise AttnError(
            f"the document is {describe(tree)}",
            line=tree.line,
            expected="a mapping of scenario keys such as `tokens:` and `embeddings:`",
        )
    return _Validator(tree, stem, limits, path).scenario()


class _Validator:
    """Reads each key of the mapping in turn; raises AttnError at the first problem."""

    def __init__(self, tree: Map, stem: str, limits: Limits, path: str | None) -> None:
        self.tree = tree
        self.stem = stem
        self.limits = limits
        self.path = path

    def scenario(self) -> Scenario:
        self._check_keys()
        tokens = self._tokens()
        case_sensitive = self._bool("case_sensitive", default=False)
        X = self._embeddings(tokens, case_sensitive)
        d_model = X.shape[1]
        heads = self._int("heads", default=1, minimum=1)
        self._check_size(len(tokens), heads)
        W_Q = self._projection("W_Q", d_model, heads)
        W_K = self._projection("W_K", d_model, heads)
        W_V = self._projection("W_V", d_model, heads)
        if W_K.shape[1] != W_Q.shape[1]:
            raise self._error(
                f"W_K has {W_K.shape[1]} columns but W_Q has {W_Q.shape[1]}",
                "W_K",
                "the same number of columns (H·d_k): each query is compared with each key",
            )
        b_Q = self._bias("b_Q", W_Q.shape[1], "H·d_k, the columns of W_Q")
        b_K = self._bias("b_K", W_K.shape[1], "H·d_k, the columns of W_K")
        b_V = self._bias("b_V", W_V.shape[1], "H·d_v, the columns of W_V")
        W_O = self._output_projection(W_V.shape[1])
        d_out = W_O.shape[1] if W_O is not None else W_V.shape[1]
        b_O = self._bias("b_O", d_out, "d_out, the columns of W_O" if W_O is not None else "H·d_v (no W_O given)")
        return Scenario(
            name=self._text("name", default=self.stem),
            description=self._text("description", default=""),
            source=self._text("source", default=""),
            tokens=tuple(tokens),
            case_sensitive=case_sensitive,
            X=_frozen(X),
            heads=heads,
            W_Q=_frozen(W_Q),
            W_K=_frozen(W_K),
            W_V=_frozen(W_V),
            b_Q=_frozen(b_Q),
            b_K=_frozen(b_K),
            b_V=_frozen(b_V),
            W_O=_frozen(W_O),
            b_O=_frozen(b_O),
            scale=self._scale(W_Q.shape[1] // heads),
            mask=self._choice("mask", ("none", "causal"), default="none"),
            precision=self._int("precision", default=4, minimum=0, maximum=MAX_PRECISION),
            path=self.path,
        )

    # -- helpers -----------------------------------------------------------------------------

    def _error(self, message: str, key: str, expected: str | None = None, value: Value | None = None) -> AttnError:
        line = value.line if value is not None else self.tree.key_lines.get(key.split(".")[0].split("[")[0])
        return AttnError(message, line=line, key=key, expected=expected)

    def _get(self, key: str) -> Value | None:
        return self.tree.items.get(key)

    def _check_keys(self) -> None:
        for key in self.tree.items:
            if key not in KEYS:
                same_but_case = [k for k in KEYS if k.lower() == key.lower()]
                close = same_but_case or difflib.get_close_matches(key, KEYS, n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise self._error(f"unknown key {key!r}{hint}", key, "one of: " + ", ".join(KEYS))

    def _check_size(self, L: int, heads: int) -> None:
        cells = heads * L * L
        if cells > self.limits.max_cells:
            raise self._error(
                f"{L:,} tokens × {L:,} × {heads} head(s) = {cells:,} attention cells, "
                f"more than the limit of {self.limits.max_cells:,}",
                "tokens" if "tokens" in self.tree.items else "sentence",
                "a smaller scenario, or raise the limit with --max-cells",
            )

    def _text(self, key: str, default: str) -> str:
        value = self._get(key)
        return default if value is None else to_word(value, key)

    def _bool(self, key: str, default: bool) -> bool:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, Scalar) and value.plain and value.kind == "bool":
            return value.text.lower() in ("true", "yes", "on", "y")
        raise self._error(f"found {describe(value)}", key, "true or false", value)

    def _int(self, key: str, default: int, minimum: int, maximum: int | None = None) -> int:
        value = self._get(key)
        if value is None:
            return default
        bounds = f"from {minimum} to {maximum}" if maximum is not None else f"{minimum} or more"
        try:
            number = to_number(value, key)
        except AttnError as error:
            error.expected = f"a whole number {bounds}"
            raise
        if number != int(number):
            raise self._error(f"{number:g} is not a whole number", key, "a whole number", value)
        if number < minimum or (maximum is not None and number > maximum):
            why = " (float64 carries no more)" if key == "precision" else ""
            raise self._error(f"{int(number)} is out of range", key, f"a whole number {bounds}{why}", value)
        return int(number)

    def _choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        value = self._get(key)
        if value is None:
            return default
        word = to_word(value, key)
        if word not in choices:
            raise self._error(f"found {word!r}", key, " or ".join(choices), value)
        return word

    def _tokens(self) -> list[str]:
        tokens_value, sentence_value = self._get("tokens"), self._get("sentence")
        if tokens_value is not None and sentence_value is not None:
            raise self._error("both `tokens` and `sentence` are given", "sentence", "one of them", sentence_value)
        if tokens_value is None and sentence_value is None:
            raise AttnError(
                "neither `tokens` nor `sentence` is given",
                line=self.tree.line,
                expected="`tokens: [The, cat, sat]` or `sentence: The cat sat.`",
            )
        if sentence_value is not None:
            sentence = to_word(sentence_value, "sentence")
            tokens = [word.strip(_PUNCTUATION) for word in sentence.split()]
            tokens = [t for t in tokens if t]
            if not tokens:
                raise self._error("the sentence has no words", "sentence", "a sentence such as `The cat sat.`", sentence_value)
            return tokens
        assert tokens_value is not None
        if not isinstance(tokens_value, Seq):
            raise self._error(f"found {describe(tokens_value)}", "tokens", "a list of words, e.g. [The, cat, sat]", tokens_value)
        if not tokens_value.items:
            raise self._error("the token list is empty", "tokens", "at least one word", tokens_value)
        tokens = [to_word(item, f"tokens[{i}]") for i, item in enumerate(tokens_value.items, 1)]
        for i, (token, item) in enumerate(zip(tokens, tokens_value.items), 1):
            if not token.strip():
                raise AttnError("an empty word", line=item.line, key=f"tokens[{i}]", expected="a word")
        return tokens

    def _embeddings(self, tokens: list[str], case_sensitive: bool) -> np.ndarray:
        value = self._get("embeddings")
        if value is None:
            raise AttnError(
                "the required key `embeddings` is missing",
                line=self.tree.line,
                expected="a mapping word → vector, or a list of rows, one per token",
            )
        if isinstance(value, Seq):
            X = to_matrix(value, "embeddings")
            if X.shape[0] != len(tokens):
                raise self._error(
                    f"{X.shape[0]} embedding rows for {len(tokens)} tokens",
                    "embeddings",
                    "one row per token, in token order",
                    value,
                )
            return X
        if not isinstance(value, Map):
            raise self._error(f"found {describe(value)}", "embeddings", "a mapping word → vector, or a list of rows", value)
        fold = (lambda w: w) if case_sensitive else str.casefold
        vectors: dict[str, tuple[str, np.ndarray]] = {}
        for word, vector_value in value.items.items():
            vector = to_vector(vector_value, f"embeddings.{word}")
            earlier = vectors.get(fold(word))
            if earlier is not None and not np.array_equal(earlier[1], vector):
                raise AttnError(
                    f"{earlier[0]!r} and {word!r} are the same word when case is ignored, but their vectors differ",
                    line=value.key_lines[word],
                    key=f"embeddings.{word}",
                    expected="one vector per word, or `case_sensitive: true`",
                )
            vectors[fold(word)] = (word, vector)
        missing = list(dict.fromkeys(t for t in tokens if fold(t) not in vectors))
        if missing:
            known = [original for original, _ in vectors.values()]
            hints = []
            for word in missing:
                close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
                hints.append(f"{word!r} (did you mean {close[0]!r}?)" if close else repr(word))
            raise self._error(
                f"no embedding for {', '.join(hints)}",
                "embeddings",
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
                    key=f"embeddings.{word}",
                    expected="every embedding of the same length d_model",
                )
        return np.array([vectors[fold(t)][1] for t in tokens], dtype=np.float64)

    def _projection(self, key: str, d_model: int, heads: int) -> np.ndarray:
        value = self._get(key)
        if value is None or (isinstance(value, Scalar) and value.text == "identity"):
            if d_model % heads:
                raise self._error(
                    f"an identity {key} needs d_model = {d_model} to split evenly into {heads} heads",
                    key if value is not None else "heads",
                    "heads dividing d_model, or explicit weight matrices",
                    value,
                )
            return np.eye(d_model)
        if isinstance(value, Seq) and value.items and all(
            isinstance(m, Seq) and m.items and isinstance(m.items[0], Seq) for m in value.items
        ):
            blocks = [to_matrix(m, f"{key}[{h}]") for h, m in enumerate(value.items, 1)]
            if len(blocks) != heads:
                raise self._error(
                    f"{len(blocks)} per-head matrices for heads = {heads}",
                    key,
                    f"{heads} matrices of d_model × d_k, one per head",
                    value,
                )
            for h, (block, item) in enumerate(zip(blocks, value.items), 1):
                if block.shape != blocks[0].shape:
                    raise AttnError(
                        f"head {h}'s matrix is {block.shape[0]} × {block.shape[1]} but head 1's is "
                        f"{blocks[0].shape[0]} × {blocks[0].shape[1]}",
                        line=item.line,
                        key=f"{key}[{h}]",
                        expected="the same shape for every head",
                    )
            matrix = np.hstack(blocks)
        elif isinstance(value, Seq):
            matrix = to_matrix(value, key)
        else:
            raise self._error(
                f"found {describe(value)}", key, "a d_model × (H·d_k) matrix, a list of per-head matrices, or `identity`", value
            )
        if matrix.shape[0] != d_model:
            raise self._error(
                f"{key} has {matrix.shape[0]} rows but the embeddings have d_model = {d_model} numbers",
                key,
                f"{d_model} rows: X·{key} multiplies each embedding by {key}",
                value,
            )
        if matrix.shape[1] % heads:
            raise self._error(
                f"{key} has {matrix.shape[1]} columns, which do not split evenly into heads = {heads}",
                key,
                f"a multiple of {heads} columns (H·d_k)",
                value,
            )
        return matrix

    def _output_projection(self, concat_width: int) -> np.ndarray | None:
        value = self._get("W_O")
        if value is None:
            return None
        if isinstance(value, Scalar) and value.text == "identity":
            return np.eye(concat_width)
        matrix = to_matrix(value, "W_O")
        if matrix.shape[0] != concat_width:
            raise self._error(
                f"W_O has {matrix.shape[0]} rows but the heads' concatenated output has H·d_v = {concat_width} columns",
                "W_O",
                f"{concat_width} rows",
                value,
            )
        return matrix

    def _bias(self, key: str, length: int, what: str) -> np.ndarray | None:
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
            raise self._error(f"found {describe(value)}", "scale", expected, value) from None
        if divisor <= 0:
            raise self._error(f"{value.text} is not positive", "scale", expected, value)
        return Scale("value", divisor)


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
    try:  # the common case at full speed: plain numbers; anything else takes the careful path below
        vector = np.array([float(item.text) for item in value.items if item.plain], dtype=np.float64)  # type: ignore[union-attr]
        if len(vector) == len(value.items) and np.isfinite(vector).all():
            return vector
    except (AttributeError, ValueError):
        pass
    return np.array([to_number(item, f"{path}[{i}]") for i, item in enumerate(value.items, 1)], dtype=np.float64)


def to_matrix(value: Value, path: str) -> np.ndarray:
    """A non-empty, rectangular list of rows of finite numbers."""
    if not isinstance(value, Seq) or not value.items:
        what = "an empty list" if isinstance(value, Seq) else describe(value)
        raise AttnError(f"found {what}", line=value.line, key=path, expected="a matrix: a list of rows like [[1, 0], [0, 1]]")
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
