"""Read YAML into a small tree that remembers the line of every value.

Words stay words: a plain `on`, `yes`, `null` or `2024` is kept as the text that was
written, and only a place that wants a number turns text into one. Nothing is ever
constructed from a tag. The tree is built from libyaml's event stream (PyYAML's safe C
parser) with an explicit stack, so nesting depth, alias expansion ("billion laughs") and
extra documents are refused as they arrive, before anything large is built, and deep
nesting cannot exhaust the C stack.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import yaml

from attncli.errors import AttnError, option, shorten
from attncli.sources.limits import Limits

_STANDARD_TAG = "tag:yaml.org,2002:"
_ALLOWED_TAGS = {
    _STANDARD_TAG + name
    for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")
}
_NON_FINITE = {".inf", "+.inf", "-.inf", ".nan"}
_RESOLVER = yaml.resolver.Resolver()


class Scalar:
    """A word or number as written. A plain class with slots: big matrices hold tens of thousands."""

    __slots__ = ("text", "plain", "line", "explicit_tag")

    def __init__(self, text: str, plain: bool, line: int, explicit_tag: str | None = None) -> None:
        self.text = text
        self.plain = plain  # written without quotes (and without an explicit tag)
        self.line = line  # 1-based
        self.explicit_tag = explicit_tag

    @property
    def kind(self) -> str:
        """What YAML 1.1 would make of it: "str", "int", "float", "bool", "null"...; used to explain mistakes."""
        tag: str = self.explicit_tag or _RESOLVER.resolve(yaml.ScalarNode, self.text, (self.plain, False))  # type: ignore[no-untyped-call]  # PyYAML's stubs leave it untyped
        return tag.removeprefix(_STANDARD_TAG)


class Seq:
    """A list. While it holds only plain scalars (numbers, mostly) it keeps just their texts and lines,
    and builds their Scalars the first time `items` is read: a big matrix is read without them."""

    __slots__ = ("_items", "line", "_texts", "_lines")

    def __init__(self, items: list[Value], line: int, *, packed: bool = False) -> None:
        self._items = items
        self.line = line
        self._texts: list[str] | None = [] if packed else None  # the plain scalars' texts, while packed
        self._lines: list[int] = []  # and their lines, 1-based

    @property
    def items(self) -> list[Value]:
        if self._texts is not None:  # unpack: from now on the items are Scalars
            self._items = [Scalar(text, True, line) for text, line in zip(self._texts, self._lines)]
            self._texts, self._lines = None, []
        return self._items

    @property
    def plain_texts(self) -> list[str] | None:
        """The items' texts when every item is a plain scalar, read without building a Scalar; else None."""
        return self._texts


class Map:
    __slots__ = ("items", "line", "key_lines")

    def __init__(self, items: dict[str, Value], line: int) -> None:
        self.items = items
        self.line = line
        self.key_lines: dict[str, int] = {}


Value = Scalar | Seq | Map


def parse(text: str, *, limits: Limits = Limits(), on_top_level: Callable[[str, Value], None] | None = None) -> Value | None:
    """Parse one YAML document into a tree of Scalar/Seq/Map (None for an empty document), or raise AttnError.

    `on_top_level(key, value)` is called as each value of the top-level mapping is complete,
    while the rest of the file is still unread: it may raise AttnError to stop early (see
    reading.size_guard: a file too large to compute is refused before its matrices are parsed).
    """
    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_class(text)
    try:
        tree = _Builder(limits, on_top_level).build(loader)
    except yaml.MarkedYAMLError as error:
        raise _syntax_error(error, text) from None
    except yaml.YAMLError as error:  # e.g. a reader error with no mark
        raise AttnError(f"not valid YAML: {error}") from None
    finally:
        loader.dispose()
    if tree is not None and _has_suspect_comma(text):
        _refuse_decimal_commas(text, tree)
    return tree


def _has_suspect_comma(text: str) -> bool:
    """`_SUSPECT_COMMA.search(text)`, found faster: a search for `,` and a digit skips ahead; `\\d,\\d` tries every place."""
    return any(found.start() and _SUSPECT_COMMA.match(text, found.start() - 1) for found in _COMMA_DIGIT.finditer(text))


def _syntax_error(error: yaml.MarkedYAMLError, text: str) -> AttnError:
    """libyaml's complaint, or, for the mistakes newcomers make most, what the mistake is and where."""
    mark = error.problem_mark or error.context_mark
    problem = error.problem or "invalid YAML"
    began = error.context_mark
    if mark is not None:
        known = _known_mistake(problem, mark, began, text.splitlines())
        if known is not None:
            return known
    column = f", column {mark.column + 1}" if mark else ""
    context = f" {error.context}" if error.context else ""
    if began is not None and mark is not None and (began.line, began.column) != (mark.line, mark.column):
        context += f" that begins at line {began.line + 1}, column {began.column + 1}"
    return AttnError(f"YAML syntax error{column}: {problem}{context}", line=mark.line + 1 if mark else None)


def _known_mistake(problem: str, mark: yaml.Mark, began: yaml.Mark | None, lines: list[str]) -> AttnError | None:
    """A tab, a missing colon or a colon inside a value, reported on the line that holds it."""
    line = lines[mark.line] if mark.line < len(lines) else ""
    if problem.startswith("found character that cannot start any token") and line[mark.column : mark.column + 1] == "\t":
        number = mark.line + 1
        if not line[: mark.column].strip(" \t-"):  # only spaces, tabs and list dashes before it
            return AttnError(f"a tab character indents line {number}: YAML indents with spaces", line=number, expected="spaces, not tabs")
        return AttnError(
            f"a tab character at column {mark.column + 1} of line {number}: YAML separates with spaces", line=number, expected="spaces, not tabs"
        )
    if problem.startswith("could not find expected ':'") and began is not None:
        key_line = lines[began.line] if began.line < len(lines) else ""
        return AttnError(
            f"YAML syntax error, column {began.column + 1}: the ':' after the key is missing in {shorten(key_line.strip(), 60)!r}",
            line=began.line + 1,
            expected="`key: value`, a colon and a space after each key",
        )
    if problem.startswith("mapping values are not allowed"):
        return AttnError(
            f"YAML syntax error, column {mark.column + 1}: a second ': ' on the line",
            line=mark.line + 1,
            expected="one `key: value` per line; put a value that holds ': ' in quotes",
        )
    return None


# A comma between two digits, with no space: `0,5`. Compact lists such as [1,0,0] are written
# that way on purpose; but a list of numbers that separates its other items with ", " and
# has one such comma is a decimal comma: [1, 0,5] means [1, 0.5], not three numbers.
_SUSPECT_COMMA = re.compile(r"\d,\d")
_COMMA_DIGIT = re.compile(r",\d")
_NUMBER_LIST = re.compile(r"\[([-+0-9.eE, \t]*)\]")
_DECIMAL_COMMA = re.compile(r"(?<![\d.])[-+]?\d+,\d+(?![\d.])")
_KEY_WITHOUT_SPACE = re.compile(r"[A-Za-z_][\w ]*:[^\s:]")  # `a:[1, 0]`: one word, not a key and its value
_NUMBERS_WITHOUT_COMMAS = re.compile(r"[-+]?[0-9.]+(?:[eE][-+]?\d+)?(?:\s+[-+]?[0-9.]+(?:[eE][-+]?\d+)?)+")


def _refuse_decimal_commas(text: str, tree: Value) -> None:
    for number, line in enumerate(text.splitlines(), 1):
        if not _SUSPECT_COMMA.search(line):
            continue
        for found in _NUMBER_LIST.finditer(line.split("#", 1)[0]):
            items = found.group(1)
            if ", " not in items and ",\t" not in items:
                continue  # a compact list, [1,0,0]
            written = _DECIMAL_COMMA.search(items)
            if written is None:
                continue
            decimal = written.group().replace(",", ".")
            raise AttnError(
                f"`{written.group()}` in {found.group()} has a decimal comma: YAML reads it as two numbers",
                line=number,
                key=_path_to_line(tree, number),
                expected=f"a decimal point, {decimal}; or a space after the comma if these are two numbers",
            )


def _path_to_line(tree: Value, line: int) -> str | None:
    """The key path of the first list on `line` (for messages; positions from 1)."""
    pending: list[tuple[Value, str]] = [(tree, "")]
    while pending:
        value, path = pending.pop()
        if isinstance(value, Seq):
            if value.line == line:
                return path or None
            pending.extend((item, f"{path}[{i}]") for i, item in reversed(list(enumerate(value.items, 1))))
        elif isinstance(value, Map):
            pending.extend((item, f"{path}.{key}" if path else key) for key, item in reversed(list(value.items.items())))
    return None


class _Frame:
    """A collection being built, and where its next item goes."""

    __slots__ = ("value", "seq", "start_count", "anchor", "key")

    def __init__(self, value: Seq | Map, start_count: int, anchor: str | None) -> None:
        self.value = value
        self.seq = value if isinstance(value, Seq) else None  # the same, typed for the hot loop
        self.start_count = start_count  # values counted before this collection began (for its anchor's size)
        self.anchor = anchor
        self.key: str | None = None  # a mapping's key waiting for its value


class _Builder:
    def __init__(self, limits: Limits, on_top_level: Callable[[str, Value], None] | None = None) -> None:
        self.limits = limits
        self.on_top_level = on_top_level
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Value, int]] = {}  # anchor -> (value, expanded size)
        self.count = 0  # values so far, counting each alias as the size of what it repeats
        self.aliased = False
        self.root: Value | None = None

    def build(self, loader: yaml.SafeLoader) -> Value | None:
        documents = 0
        get_event, stack, scalar_event = loader.get_event, self.stack, yaml.ScalarEvent
        most = self.limits.max_values
        while (event := get_event()) is not None:  # type: ignore[no-untyped-call]  # PyYAML's stubs leave it untyped
            # plain numbers in a list are by far the most common event: handle them first, inline, as text and line
            if type(event) is scalar_event and stack:
                seq = stack[-1].seq
                if seq is not None and (texts := seq._texts) is not None and event.tag is None and event.anchor is None and event.implicit[0] and not event.style:
                    line = event.start_mark.line + 1  # type: ignore[union-attr]  # the C parser marks every event
                    self.count += 1
                    if self.count > most:
                        self._count(0, line)
                    texts.append(event.value)
                    seq._lines.append(line)
                    continue
            line = event.start_mark.line + 1
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise AttnError(
                        "the file holds several YAML documents",
                        line=line,
                        expected="one scenario per file: remove the `---` line or split the file",
                    )
            elif type(event) is scalar_event:
                if event.tag is not None:
                    self._check_tag(event.tag, line)
                self._count(1, line)
                scalar = Scalar(event.value, event.implicit[0] and not event.style, line, event.tag)
                if event.anchor is not None:
                    self._anchor(event.anchor, scalar, 1)
                self._add(scalar, line)
            elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                self._check_tag(event.tag, line)
                if len(self.stack) >= self.limits.max_depth:
                    top_key = (self._path() or "").partition("[")[0] or None  # the whole path would be as deep as the nesting
                    raise AttnError(
                        "nested too deep", line=line, key=top_key, expected=f"at most {self.limits.max_depth} levels of lists and mappings"
                    )
                self._count(1, line)
                collection: Seq | Map = Seq([], line, packed=True) if isinstance(event, yaml.SequenceStartEvent) else Map({}, line)
                self.stack.append(_Frame(collection, self.count - 1, event.anchor))
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                frame = self.stack.pop()
                self._anchor(frame.anchor, frame.value, self.count - frame.start_count)
                self._add(frame.value, line)
            elif isinstance(event, yaml.AliasEvent):
                if event.anchor not in self.anchors:
                    raise AttnError(f"the alias *{event.anchor} refers to no anchor before it", line=line, key=self._path())
                repeated, size = self.anchors[event.anchor]
                self.aliased = True
                self._count(size, line)
                self._add(repeated, line)
        return self.root

    def _count(self, n: int, line: int) -> None:
        self.count += n
        if self.count > self.limits.max_values:
            raise AttnError(
                "the document expands" + (" through anchors and aliases" if self.aliased else "")
                + f" to more than {self.limits.max_values:,} value{'s' * (self.limits.max_values != 1)}",
                line=line,
                key=self._path(),
                expected=f"a teaching-sized scenario; raise the limit with {option('max_values')} if it is meant",
            )

    def _check_tag(self, tag: str | None, line: int) -> None:
        if tag is not None and tag not in _ALLOWED_TAGS and tag != "!":
            raise AttnError(
                f"the YAML tag {tag.replace(_STANDARD_TAG, '!!')!r} is not allowed",
                line=line,
                key=self._path(),
                expected="plain numbers, words, lists and mappings; attncli never builds objects from tags",
            )

    def _anchor(self, anchor: str | None, value: Value, size: int) -> None:
        if anchor is not None:
            self.anchors[anchor] = (value, size)

    def _add(self, value: Value, line: int) -> None:
        if not self.stack:
            self.root = value
            return
        frame = self.stack[-1]
        if isinstance(frame.value, Seq):
            frame.value.items.append(value)
        elif frame.key is None:
            if not isinstance(value, Scalar):
                raise AttnError("a key must be a word, not a list or mapping", line=line, key=self._path())
            if value.text == "<<" and value.plain:
                raise AttnError(
                    "merge keys (<<) are not supported: write the keys out",
                    line=line,
                    key=self._path(),
                    expected="the keys themselves; an alias of a whole value (*name) is fine",
                )
            if value.text in frame.value.key_lines:
                raise AttnError(
                    f"the key {value.text!r} appears twice (lines {frame.value.key_lines[value.text]} and {line})",
                    line=line,
                    key=self._path(),
                    expected="each key once",
                )
            frame.key = value.text
            frame.value.key_lines[value.text] = line
        else:
            frame.value.items[frame.key] = value
            if self.on_top_level is not None and len(self.stack) == 1:
                self.on_top_level(frame.key, value)
            frame.key = None

    def _path(self) -> str | None:
        """The key path of what is being read, e.g. `W_Q[2][1]` (positions from 1)."""
        path = ""
        for frame in self.stack:
            if isinstance(frame.value, Seq):
                path += f"[{len(frame.value.items) + 1}]"
            elif frame.key is not None:
                path += f".{frame.key}" if path else frame.key
        return path or None


# -- reading values out of the tree ---------------------------------------------------------


def describe(value: Value) -> str:
    """What a value is, in words, for messages."""
    if isinstance(value, Map):
        return "a mapping"
    if isinstance(value, Seq):
        return "a list" if value.items else "an empty list"
    if not value.plain:
        return f"the text {value.text!r}"
    if _KEY_WITHOUT_SPACE.match(value.text):
        return f"{value.text!r} (a space is missing after the ':'?)"
    if _NUMBERS_WITHOUT_COMMAS.fullmatch(value.text):
        return f"{value.text!r} (separate the numbers of a list with commas: [{', '.join(value.text.split())}])"
    if _DECIMAL_COMMA.fullmatch(value.text):
        return f"{value.text!r} (a decimal comma? write {value.text.replace(',', '.')})"
    kind = value.kind
    if kind == "null":
        return "nothing (null)" if value.text in ("", "~", "null", "Null", "NULL") else f"{value.text!r}"
    if kind == "bool":
        return f"the word {value.text!r} (read as a boolean)"
    return repr(value.text)


def to_number(value: Value, path: str) -> float:
    """A finite float from a plain scalar, or an AttnError that says what was found instead."""
    if isinstance(value, Scalar) and value.plain:
        try:
            number = float(value.text)  # the common case first: big matrices are all numbers
        except ValueError:
            number = None
        if number is not None and math.isfinite(number):
            return number
        if number is not None or value.text.lower() in _NON_FINITE:
            too_large = number is not None and value.text.lower().lstrip("+-") not in ("inf", "infinity", "nan")
            what = "is too large for float64" if too_large else "is not a finite number"
            raise AttnError(f"{shortened(value.text)} {what}", line=value.line, key=path, expected="a finite number")
    hint = ""
    if isinstance(value, Scalar) and not value.plain:
        try:
            float(value.text)
            hint = " (remove the quotes)"
        except ValueError:
            pass
    raise AttnError(f"found {describe(value)}{hint}", line=value.line, key=path, expected="a number")


def shortened(text: str, keep: int = 24) -> str:
    """A number as written, its start and its length when long: a 400-digit integer echoed whole would push the reason off the line."""
    return text if len(text) <= keep else f"{text[:keep]}… ({len(text):,} characters)"


def to_word(value: Value, path: str) -> str:
    """The text exactly as written, whatever YAML 1.1 would have made of it."""
    if isinstance(value, Scalar):
        return value.text
    raise AttnError(f"found {describe(value)}", line=value.line, key=path, expected="a word")
