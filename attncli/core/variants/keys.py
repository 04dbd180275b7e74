"""How a variant reads its own scenario key and describes it: the `Read` protocol and the JSON Schema pieces.

A variant class holds, beside what it does to the numbers:
    schema        its key's JSON Schema, with the description editors show (sources.fields puts it in the shipped schema)
    schema_after  the key it follows in the file's key table and the schema (none: after the other variants)
    from_yaml     a classmethod (read: Read, sizes: Sizes) -> the variant, or None (`rope: false`)
core may not import sources (the import contracts), so this is the protocol; `attncli.sources.yaml_scenario`
implements it over its YAML tree: numbers, per-head vectors, matrices, mappings with allowed keys, and every
error one line that names the file, the line and the key path, and what was expected. A rule between two
keys is the variant's too: `read.given_variants()` says which variant classes the file gives, so a variant
without softmax refuses every `softmax_only` one without naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from attncli.errors import AttnError

Schema = Mapping[str, Any]
VECTOR: Schema = {"$ref": "#/$defs/vector"}
MATRIX: Schema = {"$ref": "#/$defs/matrix"}
MATRICES: Schema = {"type": "array", "minItems": 1, "items": MATRIX}  # one per head
TOKENS: Schema = {
    "type": "array",
    "minItems": 1,
    "items": {"type": ["string", "number", "boolean", "null"]},
    "description": "The words, in order. Every item is read as the word written: on, yes, null and 2024 stay words.",
}


class Sizes(NamedTuple):
    """What a variant's key is checked against, read before the variants."""

    heads: int  # H
    kv_heads: int  # G
    d_k: int  # the width of a query/key in one head
    d_rope: int  # the width RoPE may turn in each head: d_k, or MLA's decoupled part d_r
    L_q: int  # query tokens
    L_k: int  # key/value tokens (c + L_q after a KV cache, the context's without)
    cached: int  # c, the keys of a given KV cache before the sentence (0 without)
    d_model: int = 0  # the width of an embedding (0: Q, K and V given directly)
    d_v: int = 0  # the width of a value in one head (0 while a variant of the "heads" stage has not made it: MLA)


class Read(Protocol):
    """One value of a scenario file as a variant reads it; every error names the file, the line and the key path."""

    path: str  # this value's key path: "softcap", "qk_norm.eps", "sink_logits[2]"

    @property
    def form(self) -> str: ...  # "mapping", "list", "plain" (an unquoted scalar: a number, a word, true) or "quoted"
    @property
    def kind(self) -> str: ...  # what YAML 1.1 makes of a plain scalar ("int", "float", "bool", "null", "str"); "" otherwise
    @property
    def text(self) -> str: ...  # a scalar as written ("" for a list or a mapping)

    def found(self) -> str: ...  # "found a mapping": what the value is, for a message
    def number(self) -> float: ...  # a finite number, or the error
    def word(self) -> str: ...  # the text as written, or the error
    def boolean(self) -> bool: ...  # true or false, or the error
    def whole(self, minimum: int, maximum: int | None = None, what: str = "a whole number") -> int: ...
    def vector(self) -> np.ndarray: ...  # (n,) a non-empty list of finite numbers
    def matrix(self) -> np.ndarray: ...  # (rows, columns) a non-empty rectangular list of rows
    def matrices(self) -> list[np.ndarray] | None: ...  # a list of matrices (one per head, paths `key[h]`); None when it is not one
    def items(self) -> list[Read]: ...  # a list's items, paths `key[1]`, `key[2]` …
    def keys_given(self) -> list[str]: ...  # a mapping's keys as written, none refused yet
    def mapping(self, keys: Sequence[str]) -> dict[str, Read]: ...  # a mapping's values, once no key is outside `keys`
    def given_variants(self) -> list[type[Any]]: ...  # the registry's classes whose keys the file has, in registry order
    def beside(self, key: str) -> Read | None: ...  # another top-level key of the file, when given; its errors name that key's line
    def error(self, message: str, expected: str, *, key: str | None = None) -> AttnError: ...  # at this value's line (key: another path)


def mapping_keys(schema: Schema) -> tuple[str, ...]:
    """The keys of a schema's mapping form (the schema itself, or one of its anyOf forms), as it lists them."""
    forms = [schema, *schema.get("anyOf", ())]
    return next(tuple(form["properties"]) for form in forms if form.get("type") == "object")


def frozen(array: np.ndarray) -> np.ndarray:
    """The array, made read-only: a Scenario's numbers never change."""
    array.setflags(write=False)
    return array
