"""Read YAML into a small tree that remembers the line of every value.

Words stay words: a plain `on`, `yes`, `null` or `2024` is kept as the text that was
written, and only a place that wants a number turns text into one. Nothing is ever
constructed from a tag: the text is composed (PyYAML's safe C parser where available),
never loaded, so `!!python/object` and friends cannot run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import yaml

from attncli.errors import AttnError
from attncli.limits import Limits

_STANDARD_TAG = "tag:yaml.org,2002:"
_ALLOWED_TAGS = {
    _STANDARD_TAG + name
    for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")
}
_NON_FINITE = {".inf", "+.inf", "-.inf", ".nan"}


@dataclass(slots=True)
class Scalar:
    text: str
    tag: str  # what YAML 1.1 would resolve it to; used only to explain mistakes
    plain: bool  # written without quotes
    line: int  # 1-based


@dataclass(slots=True)
class Seq:
    items: list[Value]
    line: int


@dataclass(slots=True)
class Map:
    items: dict[str, Value]
    line: int
    key_lines: dict[str, int] = field(default_factory=dict)


Value = Scalar | Seq | Map


def parse(text: str, *, limits: Limits = Limits()) -> Value:
    """Parse one YAML document into a tree of Scalar/Seq/Map, or raise AttnError."""
    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as error:
        raise _syntax_error(error) from None
    except yaml.YAMLError as error:  # e.g. a reader error with no mark
        raise AttnError(f"not valid YAML: {error}") from None
    finally:
        loader.dispose()
    if node is None:
        raise AttnError("the file is empty", expected="a YAML mapping of scenario keys such as `tokens:` and `embeddings:`")
    return _Builder(limits).build(node, "", 0)


def _syntax_error(error: yaml.MarkedYAMLError) -> AttnError:
    mark = error.problem_mark or error.context_mark
    problem = error.problem or "invalid YAML"
    if "expected a single document" in (error.context or ""):
        return AttnError(
            "the file holds several YAML documents",
            line=mark.line + 1 if mark else None,
            expected="one scenario per file: remove the `---` line or split the file",
        )
    column = f", column {mark.column + 1}" if mark else ""
    context = f" {error.context}" if error.context else ""
    return AttnError(
        f"YAML syntax error{column}: {problem}{context}",
        line=mark.line + 1 if mark else None,
    )


class _Builder:
    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._count = 0  # aliases are counted each time they are expanded ("billion laughs")

    def build(self, node: yaml.Node, path: str, depth: int) -> Value:
        line = node.start_mark.line + 1
        self._count += 1
        if self._count > self._limits.max_values:
            raise AttnError(
                f"the document expands to more than {self._limits.max_values:,} values "
                "(anchors and aliases repeated many times?)",
                line=line,
                key=path or None,
                expected="a scenario of teaching size; raise the limit with --max-values if it is meant",
            )
        if depth > self._limits.max_depth:
            raise AttnError("nested too deep", line=line, key=path or None, expected=f"at most {self._limits.max_depth} levels")
        if node.tag not in _ALLOWED_TAGS:
            raise AttnError(
                f"the YAML tag {node.tag.replace(_STANDARD_TAG, '!!')!r} is not allowed",
                line=line,
                key=path or None,
                expected="plain numbers, words, lists and mappings; attncli never builds objects from tags",
            )
        if isinstance(node, yaml.ScalarNode):
            return Scalar(node.value, node.tag, not node.style, line)  # C parser: "", Python: None
        if isinstance(node, yaml.SequenceNode):
            return Seq([self.build(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(node.value, 1)], line)
        assert isinstance(node, yaml.MappingNode)
        result = Map({}, line)
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise AttnError("a key must be a word, not a list or mapping", line=key_line, key=path or None)
            key = key_node.value
            if key in result.items:
                raise AttnError(
                    f"the key {key!r} appears twice (lines {result.key_lines[key]} and {key_line})",
                    line=key_line,
                    key=path or None,
                    expected="each key once",
                )
            result.key_lines[key] = key_line
            result.items[key] = self.build(value_node, f"{path}.{key}" if path else key, depth + 1)
        return result


# -- reading values out of the tree ---------------------------------------------------------


def describe(value: Value) -> str:
    """What a value is, in words, for messages."""
    if isinstance(value, Map):
        return "a mapping"
    if isinstance(value, Seq):
        return "a list" if value.items else "an empty list"
    if not value.plain:
        return f"the text {value.text!r}"
    kind = value.tag.removeprefix(_STANDARD_TAG)
    if kind == "null":
        return "nothing (null)" if value.text in ("", "~", "null", "Null", "NULL") else f"{value.text!r}"
    if kind == "bool":
        return f"the word {value.text!r} (read as a boolean)"
    return repr(value.text)


def to_number(value: Value, path: str) -> float:
    """A finite float from a plain scalar, or an AttnError that says what was found instead."""
    if isinstance(value, Scalar) and value.plain and value.tag.endswith((":int", ":float", ":str")):
        text = value.text
        if text.lower() in _NON_FINITE or text.lower().lstrip("+-") in ("inf", "nan", "infinity"):
            raise AttnError(f"{text} is not a finite number", line=value.line, key=path, expected="a finite number")
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            if not math.isfinite(number):
                raise AttnError(f"{text} is too large for float64", line=value.line, key=path, expected="a finite number")
            return number
    hint = ""
    if isinstance(value, Scalar) and not value.plain:
        try:
            float(value.text)
            hint = " (remove the quotes)"
        except ValueError:
            pass
    raise AttnError(
        f"found {describe(value)}{hint}",
        line=value.line,
        key=path,
        expected="a number",
    )


def to_word(value: Value, path: str) -> str:
    """The text exactly as written, whatever YAML 1.1 would have made of it."""
    if isinstance(value, Scalar):
        return value.text
    raise AttnError(f"found {describe(value)}", line=value.line, key=path, expected="a word")
