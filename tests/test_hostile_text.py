"""Hostile text: random tokens and names of any Unicode, control characters included, go through every output format
(through `render_run` and `render_explain`, as the CLI calls them) without breaking it or injecting anything into it."""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import re
import xml.etree.ElementTree as ElementTree

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from attncli.api import render_explain, render_run
from attncli.core import engine
from attncli.core.explain import explain
from attncli.core.scenario import Scenario
from attncli.document import escape
from attncli.formats import Format, Options
from attncli.sources.yaml_scenario import from_text
from tests import renderers
from tests.test_formats import markdown_tables

# Characters that are markup, escapes or controls somewhere, beside any character at all (lone surrogates
# excepted: no UTF-8 file, so no scenario, can hold one).
SPECIALS = list("\\{}$&%#^_~<>|`'\"*[]-:!?.,@=+() \t\n\r\x00\x07\x08\x1b\x7f\x85\x9b\u00a0\u200b\u200e\u202e\u2028\u2066\ufeff\ufffeé中😀")
CHARACTERS = st.one_of(st.sampled_from(SPECIALS), st.characters(exclude_categories=("Cs",)))
TOKENS = st.lists(st.text(CHARACTERS, min_size=1, max_size=10).filter(str.strip), min_size=1, max_size=3)  # a blank word is refused
NAMES = st.text(CHARACTERS, max_size=16)
EXAMPLES = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SGR = re.compile(r"\x1b\[[0-9;]*m")  # Select Graphic Rendition: the colours and styles attncli chooses


def quoted(s: str) -> str:
    """A YAML double-quoted scalar holding exactly `s`: printable ASCII as is, everything else as \\u or \\U escapes."""
    parts = [c if " " <= c <= "~" and c not in '"\\' else (f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}") for c in s]
    return '"' + "".join(parts) + '"'


def scenario(tokens: list[str], name: str) -> Scenario:
    """A causal scenario with these tokens and name, read from YAML text as a file would give it."""
    rows = ", ".join(f"[{i % 3}, {1 - i % 2}]" for i in range(len(tokens)))
    return from_text(f"name: {quoted(name)}\ntokens: [{', '.join(map(quoted, tokens))}]\nembeddings: [{rows}]\nmask: causal\n")


def documents(s: Scenario, fmt: Format, **options: object) -> tuple[str, str]:
    """The `run` and `explain` (of the last token) documents of one format, as text."""
    result = engine.run(s)
    ran = render_run(result, Options(format=fmt, to_file=True, **options))  # type: ignore[arg-type]
    explained = render_explain(explain(result, position=s.L, head=1), Options(format=fmt, to_file=True))
    return tuple(doc if isinstance(doc, str) else b"".join(doc).decode("utf-8") for doc in (ran, explained))  # type: ignore[return-value]


def title(s: Scenario) -> str:
    """The run's one title line, as the header writes it (the name and the sentence)."""
    from attncli.document.blocks import Summary

    return Summary(s.name, s.tokens, None, "", [], None, 1).title


def shown(labels: tuple[str, ...]) -> list[str]:
    """How a reader should see each label: its control characters written out."""
    return [escape.visible(label) for label in labels]


# -- Markdown -------------------------------------------------------------------------------------


def markdown_tags(text: str) -> set[str]:
    return {element.tag for element in renderers.html_elements(renderers.markdown_html(text))}


@functools.cache
def own_tags(fmt: Format) -> set[str]:
    """The elements attncli writes itself in `fmt`, for a plain scenario: hostile text may add none."""
    plain = scenario(["The", "cat", "The"], "plain")
    parse = markdown_tags if fmt is Format.markdown else tags
    return set().union(*map(parse, documents(plain, fmt)))


@EXAMPLES
@given(TOKENS, NAMES)
@example(["0"], "\x1e_\x1f")  # the control characters an option mention once was: shown as text, not resolved as an option
@example(["0"], "\x1eposition\x1f")
def test_markdown_parses_to_the_same_tables(tokens, name):
    """Markdown: the heading is the name, the tables have the tokens as labels, every row its header's width, no raw HTML."""
    s = scenario(tokens, name)
    ran, explained = documents(s, Format.markdown, stages=("embeddings", "weights"))
    embeddings, weights = markdown_tables(ran)
    assert [row[0] for row in embeddings[1:]] == shown(s.query_labels)
    assert weights[0][1:] == shown(s.key_labels) and [row[0] for row in weights[1:]] == shown(s.query_labels)
    for text in (ran, explained):
        assert all(len(row) == len(table[0]) for table in markdown_tables(text) for row in table)
        assert markdown_tags(text) <= own_tags(Format.markdown), "an element the input made"
    assert next(e.text for e in renderers.html_elements(renderers.markdown_html(ran)) if e.tag == "h1") == escape.visible(title(s))


# -- CSV ------------------------------------------------------------------------------------------


@EXAMPLES
@given(TOKENS, NAMES)
def test_csv_reads_back(tokens, name):
    """CSV: the labels read back as written (with the formula guard), every row as wide as the header, numbers as numbers."""
    s = scenario(tokens, name)
    ran, explained = documents(s, Format.csv)
    rows = list(csv.reader(io.StringIO(ran, newline="")))
    assert [row[1:] for row in rows[:1]] == [[escape.csv_cell(label) for label in s.key_labels]]
    assert [row[0] for row in rows[1:]] == [escape.csv_cell(label) for label in s.query_labels]
    assert all(float(cell) >= 0 or cell == "-inf" for row in rows[1:] for cell in row[1:])
    explained_rows = list(csv.reader(io.StringIO(explained, newline="")))
    assert len(explained_rows) == s.L_k + 1 and all(len(row) == len(explained_rows[0]) for row in explained_rows)
    for row in rows + explained_rows:
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@")) or re.fullmatch(r"[+-]?(?:[\d.]+(?:[eE][+-]?\d+)?|inf)", cell), cell


# -- JSON -----------------------------------------------------------------------------------------


@EXAMPLES
@given(TOKENS, NAMES)
def test_json_carries_the_text_exactly(tokens, name):
    """JSON is data: tokens and name come back exactly as given, control characters and all."""
    s = scenario(tokens, name)
    ran, explained = documents(s, Format.json)
    assert json.loads(ran)["scenario"]["tokens"] == tokens
    assert json.loads(ran)["scenario"]["name"] == json.loads(explained)["scenario"]["name"] == name


# -- HTML and SVG ---------------------------------------------------------------------------------


def tags(document: str) -> set[str]:
    return {element.tag for element in renderers.html_elements(document)}




@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TOKENS, NAMES)
def test_html_and_svg_parse_and_hold_no_element_of_the_input(tokens, name):
    """HTML parses with only the elements a plain scenario gives; SVG is well-formed XML with only its own elements."""
    s = scenario(tokens, name)
    for html in documents(s, Format.html):
        assert tags(html) <= own_tags(Format.html)
    for svg in documents(s, Format.svg):
        root = ElementTree.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert tags(svg) <= own_tags(Format.svg)


# -- the terminal ---------------------------------------------------------------------------------


@EXAMPLES
@given(TOKENS, NAMES)
def test_the_terminal_gets_no_escape_codes_but_attncli_colours(tokens, name):
    """In a colour terminal, once the colours attncli chose (SGR) are taken out, no escape code or control character is left."""
    s = scenario(tokens, name)
    result = engine.run(s)
    with pytest.MonkeyPatch.context() as env:
        env.delenv("NO_COLOR", raising=False)
        env.setenv("FORCE_COLOR", "1")
        env.setenv("TERM", "xterm-256color")
        outputs = [
            render_run(result, Options(format=Format.table, heatmap=True)),
            render_explain(explain(result, position=s.L, head=1), Options(format=Format.table)),
        ]
    assert SGR.search(outputs[0]), "no colour at all: the check below would prove nothing"
    for text in outputs:
        plain = SGR.sub("", text)  # type: ignore[arg-type]
        assert not [c for c in plain if c != "\n" and (not c.isprintable() and c not in " \u00a0" and ord(c) < 0xA0)], plain
        assert not set(plain) & {"\x1b", "\x9b", "\u2028", "\u2029", "\u202e", "\u2066"}


# -- LaTeX ----------------------------------------------------------------------------------------


def latex_blocks(text: str) -> list[str]:
    """The $$ … $$ blocks; fails if anything but comments, blank lines and one-line text paragraphs stands between them."""
    return renderers.latex_display_blocks(text)


def test_latex_stays_blocks_and_comments_and_renders_in_katex(katex_modules):
    """LaTeX of random tokens and names: only $$ blocks and % comments (no line escapes a comment), and every block renders
    in KaTeX (strict) showing each token; one KaTeX batch for all examples."""
    blocks: list[tuple[tuple[str, ...], str]] = []  # (the labels the block must show in order, the block)

    @EXAMPLES
    @given(TOKENS, NAMES)
    @example(["&"], "")  # no name: the title line is the sentence itself, and it begins with the escape \&
    def gather(tokens, name):
        s = scenario(tokens, name)
        ran, explained = documents(s, Format.latex, stages=("embeddings", "weights"))
        embeddings, *others = latex_blocks(ran)
        blocks.append((tuple(renderers.printed(label) for label in s.query_labels), embeddings))
        blocks.extend(((), block) for block in [*others, *latex_blocks(explained)])

    gather()
    rendered = renderers.katex(katex_modules, [block for _, block in blocks])
    errors = [(block[:200], r.error) for (_, block), r in zip(blocks, rendered) if r.error]
    assert errors == []
    missing = [(want, r.text) for (want, _), r in zip(blocks, rendered) if not in_order(want, renderers.fold(r.text))]
    assert missing == []


def in_order(labels: tuple[str, ...], text: str) -> bool:
    """Each label shows in the text, one after the other (a matrix puts its numbers between the row labels)."""
    at = 0
    for label in labels:
        found = text.find(renderers.fold(label), at)
        if found < 0:
            return False
        at = found + len(renderers.fold(label))
    return True


@pytest.mark.parametrize("command", [["run"], ["explain", "--word", "a"], ["decode"]])
def test_a_file_name_that_is_not_utf8_is_shown_as_its_byte_in_every_format(cli, tmp_path, command):
    """A scenario file named b'\\xff.yaml' (a byte that is not UTF-8, which Python holds as a lone surrogate): its JSON is
    valid UTF-8 with the name written `\\xff`, as every other format and an error show it; it was an internal error, exit 70,
    after half of the JSON."""
    import json

    name = os.fsdecode(b"\xff")
    path = tmp_path / f"{name}.yaml"
    path.write_text("tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\n", encoding="utf-8")
    done = cli(*command[:1], str(path), *command[1:], "--format", "json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["scenario"]["name"] == "\\xff"
    assert "\\\\xff" in cli("run", str(path), "--format", "markdown").stdout.splitlines()[0]  # Markdown doubles the backslash
    missing = cli("run", str(tmp_path / f"{name}-missing.yaml"))
    assert missing.exit_code == 1 and f"{tmp_path}/\\xff-missing.yaml: no such file" in missing.stderr
