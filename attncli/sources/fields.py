"""The one table of scenario keys: each key's JSON Schema, and whether it goes with `model:`.

The YAML reader's key lists (`KEYS`, `MODEL_KEYS`, the keys of `context`, `mask` and `rope`)
and the shipped JSON Schema (`attncli/scenario.schema.json`, written by
`scripts/make_schema.py`; a test fails when they differ) both come from here, so a new key
is one row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

Schema = Mapping[str, Any]

VECTOR: Schema = {"$ref": "#/$defs/vector"}
MATRIX: Schema = {"$ref": "#/$defs/matrix"}
MATRICES: Schema = {"type": "array", "minItems": 1, "items": MATRIX}  # one per head
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
TOKENS: Schema = {
    "type": "array",
    "minItems": 1,
    "items": {"type": ["string", "number", "boolean", "null"]},
    "description": "The words, in order. Every item is read as the word written: on, yes, null and 2024 stay words.",
}
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


FIELDS: tuple[Field, ...] = (
    Field("name", {"type": "string", "description": "Free text; defaults to the file name without .yaml."}, with_model=True),
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
    Field(
        "mask",
        {
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
                        "padding": {
                            "type": "array",
                            "items": {"type": "integer", "minimum": 1},
                            "description": "key positions (from 1) hidden from every query",
                        },
                    },
                },
                {"type": "array", "minItems": 1, "items": {"type": "array", "minItems": 1, "items": {"enum": [0, 1]}}},
            ],
        },
    ),
    Field("bias", {"description": "An additive L_q x L_k matrix added to the scaled scores, or a list of H of them.", "anyOf": [MATRIX, MATRICES]}),
    Field(
        "alibi",
        {
            "description": "true for the ALiBi paper's slopes, or {slopes: [m_1 ... m_H]}: head h adds -m_h*(i - j).",
            "anyOf": [
                {"type": "boolean"},
                {"type": "object", "additionalProperties": False, "required": ["slopes"], "properties": {"slopes": VECTOR}},
            ],
        },
    ),
    Field(
        "rope",
        {
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
        },
    ),
    Field("precision", {"type": "integer", "minimum": 0, "maximum": 15, "default": 4, "description": "Decimals shown in tables."}, with_model=True),
    Field(
        "softcap",
        {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "Logit soft-capping (Gemma 2): each scaled score s becomes softcap·tanh(s / softcap) before the mask.",
        },
    ),
    Field(
        "sink_logits",
        {
            "description": "Learned attention sinks (gpt-oss): one logit per head (or one for all) whose e^sink joins each row's "
            "softmax denominator without a value, so the weights sum to less than 1. Not the sink tokens of mask.sinks.",
            "anyOf": [{"type": "number"}, VECTOR],
        },
    ),
    Field(
        "qk_norm",
        {
            "description": "QK-norm (Qwen3, Gemma 3, OLMo 2): q and k divided by their root mean square and times a weight, "
            "before RoPE. true: per head, weights 1, eps 1e-6; or {over: head | whole, q_weight, k_weight, eps, form: w | 1+w}. "
            "over: head normalises each head's d_k numbers (one weight of d_k shared by the heads); whole, the whole projection "
            "(weights of H*d_k and G*d_k numbers, OLMo 2). form 1+w multiplies by (1 + w), Gemma's RMSNorm.",
            "anyOf": [
                {"type": "boolean"},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "over": {"enum": ["head", "whole"]},
                        "q_weight": VECTOR,
                        "k_weight": VECTOR,
                        "eps": {"type": "number", "minimum": 0},
                        "form": {"enum": ["w", "1+w"]},
                    },
                },
            ],
        },
    ),
    Field(
        "mla",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["W_DKV", "W_KR", "W_UK", "W_UV", "W_UQ", "W_QR"],
            "description": "Multi-head latent attention (DeepSeek-V2/V3): keys and values expanded per head from one cached latent "
            "c_KV = RMSNorm(X·W_DKV), position on a separate decoupled part (one shared RoPE key X·W_KR); the scenario's `rope` "
            "turns only that part. Instead of W_Q, W_K and W_V.",
            "properties": {
                "W_DKV": {**MATRIX, "description": "d_model x d_c: down-projection to the key/value latent."},
                "kv_norm": {"$ref": "#/$defs/rms_norm", "description": "RMSNorm of the latent (DeepSeek's kv_a_layernorm)."},
                "W_UK": {"anyOf": [MATRIX, MATRICES], "description": "d_c x (H*d_n), or H per-head d_c x d_n: the keys' up-projection."},
                "W_UV": {"anyOf": [MATRIX, MATRICES], "description": "d_c x (H*d_v), or H per-head d_c x d_v: the values' up-projection."},
                "W_KR": {**MATRIX, "description": "d_model x d_r: the decoupled key part, one per token shared by all heads."},
                "W_DQ": {**MATRIX, "description": "d_model x d_cq: the queries' own latent (optional; without it queries come from X)."},
                "q_norm": {"$ref": "#/$defs/rms_norm", "description": "RMSNorm of the query latent (q_a_layernorm)."},
                "W_UQ": {"anyOf": [MATRIX, MATRICES], "description": "(d_cq or d_model) x (H*d_n): the queries' part without position."},
                "W_QR": {"anyOf": [MATRIX, MATRICES], "description": "(d_cq or d_model) x (H*d_r): the queries' decoupled RoPE part."},
            },
        },
    ),
    Field(
        "cache",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["tokens", "K", "V"],
            "description": "Keys and values already cached before the sentence (prefix caching, paged attention): the sentence's "
            "tokens come after them, its queries at positions c+1 … c+L read the cached keys and then their own, the causal rule "
            "counts absolute positions (so does ALiBi) and RoPE turns the new tokens from position c on. Not with `context` or `mla`.",
            "properties": {
                "tokens": {**TOKENS, "description": "The c cached tokens, in order."},
                "K": {"anyOf": [MATRIX, MATRICES], "description": "c x (G*d_k), or G per-head c x d_k: the cached keys as a KV cache holds "
                      "them, i.e. already turned by RoPE at their positions (0 … c−1 plus any rope offset) and normalised by any "
                      "qk_norm; shown and used as given."},
                "V": {"anyOf": [MATRIX, MATRICES], "description": "c x (G*d_v), or G per-head c x d_v: the cached values."},
            },
        },
    ),
    Field(
        "linear_attention",
        {
            "type": "object",
            "additionalProperties": False,
            "description": "Attention without softmax (Katharopoulos et al. 2020): out_i = Σ_j φ(q_i)·φ(k_j) v_j / Σ_j φ(q_i)·φ(k_j) over "
            "the keys the mask lets query i see (causal with mask: causal). The scale cancels in the ratio. Not with retention, "
            "soft-capping, a bias, ALiBi, learned sinks or MLA.",
            "properties": {"feature_map": {"enum": ["elu+1", "relu", "identity"], "default": "elu+1", "description": "φ, elementwise."}},
        },
    ),
    Field(
        "retention",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["gamma"],
            "description": "Retention (RetNet, Sun et al. 2023), parallel form: out = (Q·Kᵀ / scale ⊙ D)·V, D_ij = γ^(i−j) for j ≤ i, "
            "0 above the diagonal; no softmax, no normaliser. Not with linear_attention, soft-capping, a bias, ALiBi, sinks or MLA.",
            "properties": {
                "gamma": {"anyOf": [{"type": "number", "exclusiveMinimum": 0, "maximum": 1}, VECTOR],
                          "description": "The decay γ in (0, 1]: one for every head, or one per head."},
            },
        },
    ),
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

BY_NAME = {field.name: field for field in FIELDS}
KEYS = tuple(BY_NAME)
MODEL_KEYS = tuple(field.name for field in FIELDS if field.with_model)  # what a checkpoint's layer may have


def mapping_keys(name: str) -> tuple[str, ...]:
    """The keys of the mapping form of field `name` (`context`, `mask`, `rope`, `mla`, `cache`), as its schema lists them."""
    schema = BY_NAME[name].schema
    forms = [schema, *schema.get("anyOf", ())]
    return next(tuple(form["properties"]) for form in forms if form.get("type") == "object")


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of scenario files, built from FIELDS."""
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
        "properties": {field.name: field.schema for field in FIELDS},
        "$defs": DEFS,
        "anyOf": [{"required": ["embeddings"]}, {"required": ["Q", "K", "V"]}, {"required": ["model"]}],
        "dependentSchemas": {
            "model": {
                "required": ["layer", "sentence"],
                "not": {"anyOf": [{"required": [field.name]} for field in FIELDS if not field.with_model]},
            },
            **{field.name: {"required": ["model"]} for field in FIELDS if field.needs_model},
        },
    }
