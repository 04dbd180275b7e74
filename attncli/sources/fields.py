"""The one table of scenario keys: each key's JSON Schema, and whether it goes with `model:`.

The YAML reader's key lists (`keys()`, `MODEL_KEYS`, the keys of `context`) and the shipped JSON
Schema (`attncli/scenario.schema.json`, written by `scripts/make_schema.py`; a test fails when they
differ) both come from here. The rows here are the keys of the scenario itself; each variant of
attention in `core.variants.REGISTRY` brings its own row (its class's `key`, `schema` and
`schema_after`, core.variants.keys), so a new variant's key is its module's business, not this table's.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from attncli.core import variants
from attncli.core.variants.keys import MATRICES, MATRIX, TOKENS, VECTOR, Schema
from attncli.core.variants.keys import mapping_keys as schema_mapping_keys

DEFS: Schema = {
    "vector": {"type": "array", "minItems": 1, "items": {"type": "number"}},
    "matrix": {"type": "array", "minItems": 1, "items": VECTOR},
    "projection": {"anyOf": [{"const": "identity"}, MATRIX, MATRICES]},
    "rms_norm": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"weight": VECTOR, "eps": {"type": "number", "minimum": 0, "default": 1e-6}},
        "description": "x / sqrt(mean(x^2) + eps) * weight; weight defaults to ones.",
    },
}
ONE_OF_TOKENS_OR_SENTENCE = [
    {"required": ["tokens"], "not": {"required": ["sentence"]}},
    {"required": ["sentence"], "not": {"required": ["tokens"]}},
]
SENTENCE: Schema = {
    "type": "string",
    "minLength": 1,
    "description": 'Instead of tokens: split on whitespace, surrounding punctuation stripped ("mat." -> "mat").',
}
EMBEDDINGS: Schema = {
    "description": "A mapping word -> vector (one entry per distinct word), or a list of rows, one per token (the input matrix X).",
    "oneOf": [{"type": "object", "minProperties": 1, "additionalProperties": VECTOR}, MATRIX],
}


class Field(NamedTuple):
    """One top-level key of a scenario file."""

    name: str
    schema: Schema  # its JSON Schema, with the description editors show
    with_model: bool = False  # may stand beside `model:` (a checkpoint's layer)
    needs_model: bool = False  # means something only beside `model:`


_OWN: tuple[Field, ...] = (  # the scenario's own keys; the variants' rows join them in scenario_fields()
    Field("name", {"type": "string", "description": "Free text; defaults to the file name without .yaml (with model: the model's name and layer, e.g. SmolLM2 135M layer 19)."}, with_model=True),
    Field("description", {"type": "string", "description": "Free text, shown by `attncli scenarios`."}, with_model=True),
    Field("source", {"type": "string", "description": "Free text: where the example comes from."}, with_model=True),
    Field("tokens", TOKENS),
    Field("sentence", SENTENCE, with_model=True),
    Field(
        "case_sensitive",
        {"type": "boolean", "default": False, "description": 'Whether "The" and "the" are different words when embeddings are looked up by word.'},
    ),
    Field("embeddings", EMBEDDINGS),
    Field(
        "context",
        {
            "type": "object",
            "additionalProperties": False,
            "description": "Cross-attention: the keys' and values' sequence. Queries come from the top-level tokens.",
            "properties": {"tokens": TOKENS, "sentence": SENTENCE, "embeddings": EMBEDDINGS},
            "oneOf": ONE_OF_TOKENS_OR_SENTENCE,
        },
    ),
    Field("heads", {"type": "integer", "minimum": 1, "default": 1, "description": "Number of attention heads H."}),
    Field(
        "kv_heads",
        {"type": "integer", "minimum": 1, "description": "Key/value heads G for grouped-query attention (G divides H; 1: multi-query). Default: H."},
    ),
    Field("W_Q", {"$ref": "#/$defs/projection", "description": "d_model x (H*d_k), a list of H per-head d_model x d_k matrices, or identity."}),
    Field("W_K", {"$ref": "#/$defs/projection", "description": "d_model x (G*d_k), a list of G per-head d_model x d_k matrices, or identity."}),
    Field("W_V", {"$ref": "#/$defs/projection", "description": "d_model x (G*d_v), a list of G per-head d_model x d_v matrices, or identity."}),
    Field("b_Q", {**VECTOR, "description": "Query bias, length H*d_k."}),
    Field("b_K", {**VECTOR, "description": "Key bias, length H*d_k."}),
    Field("b_V", {**VECTOR, "description": "Value bias, length H*d_v."}),
    Field(
        "Q",
        {"anyOf": [MATRIX, MATRICES], "description": "Q given directly instead of embeddings and weights: L_q x (H*d_k), or a list of per-head matrices."},
    ),
    Field(
        "K",
        {"anyOf": [MATRIX, MATRICES], "description": "K given directly instead of embeddings and weights: L_k x (G*d_k), or a list of per-head matrices."},
    ),
    Field(
        "V",
        {"anyOf": [MATRIX, MATRICES], "description": "V given directly instead of embeddings and weights: L_k x (G*d_v), or a list of per-head matrices."},
    ),
    Field("W_O", {"anyOf": [{"const": "identity"}, MATRIX], "description": "Output projection (H*d_v) x d_out."}),
    Field("b_O", {**VECTOR, "description": "Output bias, length d_out."}),
    Field(
        "scale",
        {
            "anyOf": [{"enum": ["sqrt_dk", "none"]}, {"type": "number", "exclusiveMinimum": 0}],
            "default": "sqrt_dk",
            "description": "Divide the scores by sqrt(d_k), by nothing, or by this positive number.",
        },
    ),
    Field("precision", {"type": "integer", "minimum": 0, "maximum": 15, "default": 4, "description": "Decimals shown in tables."}, with_model=True),
    Field(
        "model",
        {
            "type": "string",
            "minLength": 1,
            "description": "A local Hugging Face checkpoint folder (config.json, *.safetensors, tokenizer.json), relative to this "
            "file's folder: the scenario is then one layer of that model, for `sentence`. Never downloads.",
        },
        with_model=True,
    ),
    Field("layer", {"type": "integer", "minimum": 1, "description": "With `model`: the layer to show, counted from 1."}, with_model=True, needs_model=True),
    Field(
        "target",
        {
            "type": "string",
            "description": "With `model` of an encoder–decoder (BART): the text the decoder has produced so far (the start of a translation "
            "or summary); `sentence` is then the source. Its tokens, shifted right behind the decoder's start token, are the queries "
            "of the decoder's attentions.",
        },
        with_model=True,
        needs_model=True,
    ),
    Field(
        "attention",
        {
            "enum": ["encoder", "decoder", "cross"],
            "description": "With `model` of an encoder–decoder: which attention `layer` means — the encoder's self-attention, the "
            "decoder's causal self-attention, or the decoder's cross-attention over the encoder's output [default: cross with a "
            "`target`, else encoder].",
        },
        with_model=True,
        needs_model=True,
    ),
    Field(
        "special_tokens",
        {
            "enum": ["auto", "none"],
            "default": "auto",
            "description": "With `model`: `auto` adds special tokens as the tokenizer's post-processor does ([CLS] … [SEP], <s>); "
            "`none` leaves them out.",
        },
        with_model=True,
        needs_model=True,
    ),
)



def scenario_fields() -> tuple[Field, ...]:
    """Every top-level key in the order of the file's key table: the scenario's own, each variant's after the key it names.

    A variant whose `schema_after` is not (yet) placed waits for it; one that names none goes after the other variants.
    Worked out once per registry (every load asks for it).
    """
    return _placed(variants.REGISTRY)


@functools.cache
def _placed(registry: tuple[type[variants.Variant], ...]) -> tuple[Field, ...]:
    placed = list(_OWN)
    waiting = list(registry)
    while waiting:
        names = [field.name for field in placed]
        ready = [kind for kind in waiting if getattr(kind, "schema_after", None) in names]
        for kind in ready:
            names = [field.name for field in placed]
            placed.insert(names.index(getattr(kind, "schema_after", "")) + 1, Field(kind.key, kind.schema))
        waiting = [kind for kind in waiting if kind not in ready]
        if not ready:  # no anchor (or one never placed): after the other variants, before the keys of a real model
            last = max(i for i, field in enumerate(placed) if not field.with_model)
            placed[last + 1 : last + 1] = [Field(kind.key, kind.schema) for kind in waiting]
            break
    return tuple(placed)


def keys() -> tuple[str, ...]:
    """Every top-level key, in the key table's order."""
    return _names(variants.REGISTRY)


@functools.cache
def _names(registry: tuple[type[variants.Variant], ...]) -> tuple[str, ...]:
    return tuple(field.name for field in _placed(registry))


FIELDS = scenario_fields()  # as the registry was when this module was imported
BY_NAME = {field.name: field for field in FIELDS}
KEYS = tuple(BY_NAME)
MODEL_KEYS = tuple(field.name for field in FIELDS if field.with_model)  # what a checkpoint's layer may have


def mapping_keys(name: str) -> tuple[str, ...]:
    """The keys of the mapping form of field `name` (`context`, `mask`, `rope`, `mla`, `cache`), as its schema lists them."""
    return schema_mapping_keys(BY_NAME[name].schema)


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of scenario files, built from every key's row (scenario_fields)."""
    fields = scenario_fields()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:attncli:scenario:1",
        "title": "attncli scenario",
        "description": "A worked example of transformer attention for attncli: tokens, embeddings and weights (or Q, K and V), "
        "and the variants of attention. Shapes are checked by attncli itself.",
        "type": "object",
        "additionalProperties": False,
        "required": [],
        "oneOf": ONE_OF_TOKENS_OR_SENTENCE,
        "properties": {field.name: field.schema for field in fields},
        "$defs": DEFS,
        "anyOf": [{"required": ["embeddings"]}, {"required": ["Q", "K", "V"]}, {"required": ["model"]}],
        "dependentSchemas": {
            "model": {
                "required": ["layer", "sentence"],
                "not": {"anyOf": [{"required": [field.name]} for field in fields if not field.with_model]},
            },
            **{field.name: {"required": ["model"]} for field in fields if field.needs_model},
        },
    }
