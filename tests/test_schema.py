"""The scenario JSON Schema: every built-in passes it; the corpus's key and type errors fail it."""

import json
import math
import re
from pathlib import Path

import jsonschema
import pytest

from attncli.sources import builtin
from attncli.sources.yamltree import Map, Scalar, Seq, Value, parse

SCHEMA = json.loads((Path(__file__).parent.parent / "attncli" / "scenario.schema.json").read_text())
BAD = Path(__file__).parent / "bad"

# YAML 1.2 core schema, as editors' YAML language server reads a file
_INT = re.compile(r"[-+]?[0-9]+$")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")


def as_editor_sees_it(value: Value):
    if isinstance(value, Map):
        return {key: as_editor_sees_it(item) for key, item in value.items.items()}
    if isinstance(value, Seq):
        return [as_editor_sees_it(item) for item in value.items]
    assert isinstance(value, Scalar)
    text = value.text
    if not value.plain:
        return text
    if text in ("null", "Null", "NULL", "~", ""):
        return None
    if text in ("true", "True", "TRUE", "false", "False", "FALSE"):
        return text.lower() == "true"
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    if text.lower() in (".inf", "+.inf", "-.inf", ".nan"):
        return math.nan
    return text


def test_the_schema_is_valid_draft_2020_12():
    """The schema itself passes the draft 2020-12 meta-schema."""
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_schema_command_prints_the_shipped_schema(cli):
    """`attncli schema` prints the same schema."""
    assert json.loads(cli("schema").stdout) == SCHEMA


@pytest.mark.parametrize("name", builtin.names())
def test_every_builtin_scenario_passes_the_schema(name):
    """Built-in scenarios validate as an editor would read them."""
    data = as_editor_sees_it(parse(builtin.path(name).read_text()))
    jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)


KEY_AND_TYPE_ERRORS = [
    "unknown-key.yaml", "missing-embeddings.yaml", "tokens-and-sentence.yaml", "no-tokens.yaml",
    "string-for-number.yaml", "quoted-number.yaml", "boolean-for-number.yaml", "nested-list-for-number.yaml",
    "empty-vector.yaml", "empty-tokens.yaml", "heads-zero.yaml", "heads-text.yaml", "precision-too-big.yaml",
    "scale-zero.yaml", "scale-word.yaml", "mask-unknown.yaml",
    "model-with-embeddings.yaml", "model-without-layer.yaml", "layer-without-model.yaml", "model-layer-zero.yaml",
    "model-special-tokens.yaml",
]  # fmt: skip


@pytest.mark.parametrize("name", KEY_AND_TYPE_ERRORS)
def test_key_and_type_errors_of_the_corpus_fail_the_schema(name):
    """What attncli refuses for a key or a type, the schema flags too, so editors show it while typing."""
    data = as_editor_sees_it(parse((BAD / name).read_text()))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)


def test_the_shipped_schema_is_generated_from_the_table_of_keys():
    """attncli/scenario.schema.json is exactly what scripts/make_schema.py writes from attncli/sources/fields.py."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_schema", Path(__file__).parent.parent / "scripts" / "make_schema.py")
    assert spec is not None and spec.loader is not None
    make_schema = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_schema)
    shipped = (Path(__file__).parent.parent / "attncli" / "scenario.schema.json").read_text(encoding="utf-8")
    assert shipped == make_schema.text(), "run: python scripts/make_schema.py"


def test_the_reader_knows_exactly_the_schemas_keys():
    """The YAML reader's key lists are the schema's: a key in one is a key in the other."""
    from attncli.sources import yaml_scenario

    assert list(yaml_scenario.KEYS) == list(SCHEMA["properties"])
    from attncli.core.variants import REGISTRY

    for kind in REGISTRY:  # each variant reads its own key with its own schema, which is the shipped schema's row
        assert SCHEMA["properties"][kind.key] == kind.schema, kind.key
    model_only_excluded = {key["required"][0] for key in SCHEMA["dependentSchemas"]["model"]["not"]["anyOf"]}
    assert set(yaml_scenario.MODEL_KEYS) == set(SCHEMA["properties"]) - model_only_excluded


WITH_BOGUS = {  # each variant's mapping with a key its schema does not list (and what else the mapping needs first)
    "mask": "{bogus: 1}", "rope": "{bogus: 1}", "qk_norm": "{bogus: 1}", "qk_layernorm": "{bogus: 1}", "relative_buckets": "{table: [[1, 2, 3, 4]], bogus: 1}", "alibi": "{bogus: 1}", "linear_attention": "{bogus: 1}",
    "retention": "{gamma: 0.5, bogus: 1}", "cache": "{tokens: [x], K: [[1, 0]], V: [[1, 0]], bogus: 1}", "mla": "{bogus: 1}",
    "scores": "{S: [[1, 0], [0, 1]], bogus: 1}",
    "delta_rule": "{beta: 0.5, bogus: 1}",
    "qk_norm_after_rope": "{bogus: 1}", "query_temperature": "{bogus: 1}",
}  # fmt: skip
BESIDE = {"scores": "V: [[1], [0]]"}  # line 2 of the file: what the variant needs instead of the embeddings


def test_every_variant_refuses_a_key_its_own_schema_does_not_list():
    """A variant reads its mapping with the keys of its own schema row: an unknown key is one error that lists them."""
    from attncli.core.variants import REGISTRY
    from attncli.core.variants.keys import mapping_keys
    from attncli.errors import AttnError
    from attncli.sources.yaml_scenario import from_text

    with_mapping = [kind for kind in REGISTRY if any(form.get("type") == "object" for form in [kind.schema, *kind.schema.get("anyOf", ())])]
    assert sorted(kind.key for kind in with_mapping) == sorted(WITH_BOGUS)
    for kind in with_mapping:
        with pytest.raises(AttnError) as caught:
            from_text(f"tokens: [a, b]\n{BESIDE.get(kind.key, 'embeddings: [[1, 0], [0, 1]]')}\n{kind.key}: {WITH_BOGUS[kind.key]}\n")
        assert (caught.value.key, caught.value.line) == (f"{kind.key}.bogus", 3), kind.key
        assert caught.value.expected == "one of: " + ", ".join(mapping_keys(kind.schema))


def test_every_variant_key_is_read_by_someone():
    """A key in the schema is never silently ignored: each variant reads its own, MLA and the KV cache too (which change
    the scenario's sizes: sources/yaml_scenario.py reads them first, by their stage, and asks each for its `sized`)."""
    from attncli.core.variants import REGISTRY

    assert all(hasattr(kind, "from_yaml") for kind in REGISTRY)
    assert all(hasattr(kind, "sized") for kind in REGISTRY if kind.stage in ("heads", "cache"))
