"""The Typst format, checked by its readers' tool: the real Typst compiler (the `typst` wheel bundles it).

Every output here is compiled, and any error fails the test with Typst's own diagnostic. Text is read back
from the compiled document's content (a `metadata` element holding the whole document, found by
`typst.query`): headings, table cells and paragraphs come back as the characters attncli meant to show,
so a token that became markup (a strong `*x*`, a label `<eos>`, a math `$`) would show as a different tree.
"""

from __future__ import annotations

import glob
import json
import re
from typing import Any

import numpy as np
import pytest
import typst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attncli.api as attn
from attncli.api import render_explain, render_run, run_page
from attncli.core import engine
from attncli.core.explain import explain
from attncli.document import escape, stages
from attncli.document.blocks import Document, Heading, Paragraph, Step, Steps, Summary, Table, Values
from attncli.formats import Format, Options, render_document
from attncli.formats import typst as typ
from attncli.sources import builtin
from tests.test_blocks import every_block, one_of_each
from tests.test_hostile_text import NAMES, TOKENS, scenario

READ_BACK = "#show: doc => [#metadata(doc) <attncli-document>#doc]\n"  # the whole document as data, for typst.query


def compiled(source: str) -> bytes:
    """The PDF Typst makes of `source`; a compile error fails the test with Typst's diagnostic."""
    try:
        return typst.compile(source.encode("utf-8"), format="pdf")  # type: ignore[no-any-return]
    except typst.TypstError as error:
        pytest.fail(f"Typst cannot compile the output:\n{error.diagnostic}\n--- source ---\n{source[:3000]}", pytrace=False)


def tree(source: str) -> dict[str, Any]:
    """The content of a fragment as Typst reads it (every element, its fields and its text), after compiling it."""
    compiled(READ_BACK + source)
    return json.loads(typst.query((READ_BACK + source).encode("utf-8"), "<attncli-document>", field="value", one=True))  # type: ignore[no-any-return]


def plain(node: Any) -> str:
    """The text a node shows: its text, symbols and spaces, its body and children in order."""
    if isinstance(node, list):
        return "".join(plain(child) for child in node)
    if not isinstance(node, dict):
        return ""
    if node.get("func") == "space":
        return " "
    if node.get("func") == "parbreak":
        return "\n"
    text = node.get("text")
    if isinstance(text, str):
        return text
    return plain(text) + plain(node.get("body")) + plain(node.get("child")) + plain(node.get("children"))


def elements(node: Any, func: str) -> list[dict[str, Any]]:
    """Every element of kind `func`, in document order."""
    if isinstance(node, list):
        return [found for child in node for found in elements(child, func)]
    if not isinstance(node, dict):
        return []
    own = [node] if node.get("func") == func else []
    return own + [found for key, value in node.items() if key != "func" for found in elements(value, func)]


def kinds(node: Any) -> set[str]:
    """The kinds of element a document holds."""
    if isinstance(node, list):
        return set().union(*map(kinds, node)) if node else set()
    if not isinstance(node, dict):
        return set()
    return {node.get("func", "")}.union(*(kinds(value) for key, value in node.items() if key != "func"))


def table_rows(table: dict[str, Any]) -> list[list[str]]:
    """A table's rows of cell texts, its header first."""
    columns = len(table["columns"]) if isinstance(table["columns"], list) else int(table["columns"])
    header = [plain(cell) for part in table["children"] if part["func"] == "header" for cell in part["children"]]
    cells = [plain(cell) for cell in table["children"] if cell["func"] == "cell"]
    return [header, *(cells[i : i + columns] for i in range(0, len(cells), columns))]


def headings(node: Any) -> list[tuple[int, str]]:
    return [(h["depth"], plain(h["body"])) for h in elements(node, "heading")]


# -- every block type --------------------------------------------------------------------------------


@pytest.mark.parametrize("way", [{}, {"standalone": True}, {"heading_level": 0}, {"heading_level": 3}], ids=str)
def test_every_block_type_compiles_and_reads_back(way):
    """A document of every block type (and each block alone) compiles, in every way of writing it; its words are its text."""
    text = render_document(every_block(), "typst", to_file=True, **way)
    compiled(text)
    for block, words in one_of_each().values():
        alone = render_document(Document("The title", [Heading("The title"), block]), "typst", to_file=True, **way)
        compiled(alone)
        if not way.get("standalone"):
            shown = plain(tree(alone))
            assert [word for word in words if word not in shown] == []
    if not way.get("standalone"):
        content = tree(text)
        assert {"heading", "table", "raw", "list"} <= kinds(content) or {"heading", "table", "raw", "item"} <= kinds(content)
        assert table_rows(elements(content, "table")[0]) == [["query", "number", "vector"], ["cell-a", "1.25", "[0.5, 0.25]"]]
        levels = [depth for depth, _ in headings(content)]
        top = way.get("heading_level", 1)
        assert levels[0] == (top if top else 2)  # level 0 leaves the title out: the section leads


def test_a_block_typst_cannot_draw_is_an_error():
    class Unknown(tuple):  # a NamedTuple-like stranger
        pass

    with pytest.raises(TypeError, match="Typst has no drawing for Unknown"):
        typ.document_typst(Document("t", [Unknown()]))  # type: ignore[list-item]


def test_standalone_sets_the_page_and_a_fragment_sets_nothing_outside_itself(tmp_path):
    """A fragment can be #included anywhere (here inside a paper's section): no page, document or text set rule; the
    standalone document has them."""
    fragment = attn.run("cat").render("typst", heading_level=2)
    whole = attn.run("cat").render("typst", standalone=True)
    assert "#set" not in fragment
    assert whole.startswith('#set document(title: "cat")\n#set page(paper: "a4"')
    compiled(whole)
    (tmp_path / "attention.typ").write_text(fragment, encoding="utf-8")
    (tmp_path / "paper.typ").write_text('#set document(title: "A paper")\n= My paper\n#include "attention.typ"\n', encoding="utf-8")
    typst.compile(str(tmp_path / "paper.typ"), format="pdf")
    included = json.loads(typst.query(str(tmp_path / "paper.typ"), "heading", field="depth"))
    assert included[:3] == [1, 2, 3]  # the paper's title, the run, its first stage


# -- the built-ins -----------------------------------------------------------------------------------

COMMANDS = [
    ["run", "cat"],
    ["run", "llama-style", "--round-steps", "2"],
    ["run", "tests/scenarios/qk-softcap-sink.yaml", "--heatmap", "--standalone"],
    ["run", "mla", "--stages", "embeddings,q,k,v,rope,scores,latent,absorbed,weights,output"],
    ["run", "journey-causal", "--block-size", "2"],
    ["explain", "--word", "cat", "--standalone"],
    ["explain", "-s", "llama-style", "--word", "fresh", "--head", "3", "--round-steps", "2"],
    ["explain", "-s", "journey-causal", "--word", "starts", "--block-size", "2"],
    ["explain", "-s", "mla", "--word", "sat", "--head", "2", "--heading-level", "0"],
    ["decode", "journey-causal"],
    ["decode", "sliding-window", "--round-steps", "2", "--standalone"],
    ["run", "--model", "tests/checkpoints/gpt2", "--layer", "2", "--sentence", "The cat sat", "--head", "2"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_built_ins_compile(cli, command, monkeypatch):
    monkeypatch.chdir(typ.__file__.rsplit("/attncli/", 1)[0])
    result = cli(*command, "--format", "typst")
    assert result.exit_code == 0, result.stderr
    compiled(result.stdout)


@pytest.mark.parametrize("word", [None, "sat"])
def test_the_map_and_the_shaded_sentence_compile_with_their_figure_and_tables(cli, monkeypatch, word):
    """heads (the grid's SVG as an image, the readings, the statistics) and heads --word (the shaded sentence, its weights)."""
    monkeypatch.chdir(typ.__file__.rsplit("/attncli/", 1)[0])
    sentence = 'The cat sat $x$ #let <eos> "q" \\'
    where = ["--word", word] if word else []
    result = cli("heads", "--model", "tests/checkpoints/gpt2", "--sentence", sentence, *where, "--format", "typst")
    assert result.exit_code == 0, result.stderr
    content = tree(result.stdout)
    assert len(elements(content, "image")) == 1 and headings(content)[0][0] == 1
    drawn = json.loads(cli("heads", "--model", "tests/checkpoints/gpt2", "--sentence", sentence, *where, "--format", "json").stdout)
    rows = table_rows(elements(content, "table")[-1])
    if word:  # the weights: a row per layer, a column per token, as written
        assert rows[0][1:] == [escape.visible(token["label"]) for token in drawn["tokens"]] and len(rows) == 1 + 3
    else:  # a row per head of 3 layers × 4 heads
        assert len(rows) == 1 + 12 and [row[:2] for row in rows[1:3]] == [["1", "1"], ["1", "2"]]


def test_the_snapshots_compile():
    """The reviewed Typst snapshots (tests/test_snapshots.py pins their bytes) are documents Typst compiles."""
    snapshots = sorted(glob.glob(typ.__file__.rsplit("/attncli/", 1)[0] + "/tests/snapshots/*/*.typ"))
    assert len(snapshots) >= 3
    for path in snapshots:
        with open(path, encoding="utf-8") as file:
            compiled(file.read())


def test_a_run_reads_back_as_headed_tables_of_its_numbers():
    """run: a section per stage with its formula as math, the tokens as header cells and row labels, masked cells as −∞."""
    ran = attn.run("journey-causal")
    content = tree(ran.render("typst", stages="masked,weights"))
    assert headings(content)[0] == (1, "journey-causal — Your journey starts with one step")
    sections = [text for depth, text in headings(content) if depth == 2]
    assert sections[0].startswith("Masked scores: ") and sections[1].startswith("Attention weights: ")
    assert sum(len(elements(h, "equation")) for h in elements(content, "heading") if h["depth"] == 2) == 2  # each formula is Typst math
    masked, weights = (table_rows(t) for t in elements(content, "table"))
    tokens = list(ran.scenario.tokens)
    assert masked[0] == ["", *tokens] and [row[0] for row in masked[1:]] == tokens
    assert masked[1][2] == "−∞" and weights[1][2] == "0.0000" and weights[1][1] == "1.0000"
    assert [float(cell.replace("−", "-")) for cell in weights[2][1:]] == pytest.approx(ran.head(1).weights[1], abs=5e-5)


def test_every_stage_formula_of_the_built_ins_is_typst_math():
    """The TeX of every stage of every built-in and test scenario translates (no fallback to text) and compiles."""
    formulas: dict[str, str] = {}
    for name in [*builtin.names(), *sorted(glob.glob("tests/scenarios/*.yaml"))]:
        page = run_page(attn.run(name).result, Options(Format.typst, stages=tuple(stages.STAGE_NAMES)))
        formulas.update((view.tex, view.formula) for view in page.document().matrices)
    untranslated = []
    for tex in formulas:
        try:
            typ.typst_math(tex)
        except typ.Untranslatable as error:
            untranslated.append((tex, str(error)))
    assert untranslated == []
    compiled("\n\n".join(typ.formula(tex, unicode) for tex, unicode in formulas.items()))


@pytest.mark.parametrize(
    ("tex", "math"),
    [
        (r"S = Q K^{\top}", "S = Q K^top"),
        (r"\frac{S^{(1)}}{\sqrt{d_k}}", "(S^((1)))/(sqrt(d_k))"),
        (r"\operatorname{mask}(S) \quad (-\infty \text{ above the diagonal})", 'op("mask") (S) quad (- infinity " above the diagonal")'),
        (r"K_{R}' = \text{RoPE}(K_{R})", "K'_R = \"RoPE\"(K_R)"),
        (r"W_{DKV}", "W_(D K V)"),
        (r"C = \begin{bmatrix} O^{(1)} & O^{(2)} \end{bmatrix}", 'C = mat(delim: "[", O^((1)), O^((2)))'),
        (r'\text{a \_ b \textbackslash{} "}', r'"a _ b \\ \""'),
    ],
)
def test_tex_becomes_typst_math(tex, math):
    assert typ.typst_math(tex) == math


@pytest.mark.parametrize("tex", [r"\unknown{x}", r"\begin{array}{rr} 1 \end{array}", "a # b", r"\text{\emph{x}}", "{x", "é"])
def test_tex_the_translator_does_not_know_is_shown_as_text(tex):
    with pytest.raises(typ.Untranslatable):
        typ.typst_math(tex)
    assert typ.formula(tex, "S = Q·Kᵀ") == '#raw("S = Q·Kᵀ")'


TEX_PIECES = [r"\frac", r"\sqrt", r"\hat", r"\text", r"\operatorname", "{", "}", "^", "_", "'", "(", ")", "[", "]", "|", "a", "B",
              "12", "0.5", " ", r"\top", r"\quad", r"\,", r"\left", r"\right", r"\begin{bmatrix}", r"\end{bmatrix}", "&", r"\\",
              "+", "-", "=", "/", ",", r"\cdot", r"\Sigma", r"\exp", r"\_", r"\{", "<", ">", ".", r"\text{a\_b}", "{(1)}", r"\|"]  # fmt: skip


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TEX_PIECES), min_size=1, max_size=14).map("".join))
def test_whatever_the_translator_writes_compiles(tex):
    """Any string of the TeX pieces attncli's formulas use: translated, it is math Typst compiles; or it is refused (text)."""
    try:
        math = typ.typst_math(tex)
    except typ.Untranslatable:
        return
    compiled(f"${math}$")


# -- hostile text ----------------------------------------------------------------------------------


def documents(tokens: list[str], name: str) -> tuple[Any, str, str]:
    s = scenario(tokens, name)
    result = engine.run(s)
    ran = render_run(result, Options(format=Format.typst, to_file=True, stages=("embeddings", "weights")))
    explained = render_explain(explain(result, position=s.L, head=1), Options(format=Format.typst, to_file=True))
    return s, b"".join(ran).decode() if not isinstance(ran, str) else ran, explained  # type: ignore[arg-type]


OWN_KINDS: set[str] = set()


def own_kinds() -> set[str]:
    """The elements attncli writes itself, for a plain scenario: hostile text may add none."""
    if not OWN_KINDS:
        _, ran, explained = documents(["The", "cat", "The"], "plain")
        OWN_KINDS.update(kinds(tree(ran)) | kinds(tree(explained)))
        OWN_KINDS.add("raw")  # a step whose TeX Typst's math cannot say (a control character's code) keeps its raw lines
    return OWN_KINDS


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TOKENS, NAMES)
def test_hostile_text_compiles_and_reads_back_as_the_same_text(tokens, name):
    """Any tokens and name (markup, math, comments, labels, quotes, backslashes, controls, bidi): the documents compile, the
    heading is the name and the tables' labels are the tokens, as `escape.visible` writes them, and no element is the input's."""
    s, ran, explained = documents(tokens, name)
    content = tree(ran)
    assert headings(content)[0] == (1, escape.visible(Summary(s.name, s.tokens, None, "", [], None, 1).title))
    embeddings, weights = (table_rows(t) for t in elements(content, "table"))
    assert [row[0] for row in embeddings[1:]] == [escape.visible(label) for label in s.query_labels]
    assert weights[0] == ["", *(escape.visible(label) for label in s.key_labels)]
    told = tree(explained)
    word = escape.visible(s.tokens[-1])
    assert headings(told)[0] == (1, f"Attention for “{word}”")
    pairs = [row[0] for row in table_rows(elements(told, "table")[-1])[1:]]  # weighted values: "word & key", the keys it sees
    assert pairs == [f"{word} & {escape.visible(label)}" for label in s.key_labels]
    assert kinds(content) | kinds(told) <= own_kinds(), "an element the input made"


@pytest.mark.parametrize("text", ["<eos>", "*x*", "a_b", "$", "#let x = 1", "]", "[", "\\", '"', "\\\"", "// c", "/* c", "@ref",
                                  "= h", "- l", "+ l", "1. l", "~", "--", "...", "'q'", "`r`", "\u202eevil", "a\nb", "\x1b[31m",
                                  "  padded  ", "#{", "}"])  # fmt: skip
def test_each_special_reads_back_as_written(text):
    """The characters Typst's markup, math and code give a meaning to, one at a time, in a heading, a paragraph and a table."""
    document = Document(text, [Heading(text), Paragraph(text), Table([text], [[text]], [False]), Values([(text, text)]),
                               Steps([Step(text, text, notes=[text])], 2)])  # fmt: skip
    content = tree(typ.document_typst(document))
    shown = escape.visible(text)
    assert headings(content)[0] == (1, shown)
    assert table_rows(elements(content, "table")[0]) == [[shown], [shown]]
    assert shown in [plain(node) for node in content["children"] if node.get("func") == "text"]
    assert plain(elements(content, "item")[0]) == f"{shown} = {shown}"
    assert headings(content)[1] == (2, f"Step 1: {shown} ({shown})")


ODD_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1.0, 0.125, 0.875, 1e308, -1e308]))


@given(values=st.lists(ODD_VALUES, min_size=1, max_size=40), low=ODD_VALUES, high=ODD_VALUES)
@settings(max_examples=300, deadline=None)
def test_the_shades_of_a_whole_matrix_are_palette_level_of_each_number(values, low, high):
    """The shade levels computed at once with NumPy are the terminal's cut (`palette.level`), NaN, ±inf and odd bounds included."""
    import numpy as np

    from attncli.formats import palette

    expected = [palette.level(x, low, high) for x in values]
    assert palette.levels(np.array(values), low, high).tolist() == expected


def _reference_tables(view: Any, precision: int, *, shaded: bool) -> str:
    """A matrix's tables written cell by cell, the plain way: each number by `numbers.fixed`, each hidden or shaded cell the call of its
    function, the functions a table uses defined in its code block (what `matrix_tables` writes a block of rows at a time)."""
    from attncli.document.numbers import fixed
    from attncli.formats import palette

    names, lets = typ._kinds()
    low, high = palette.bounds(view.data, view.hidden, probabilities=view.key == "weights") if shaded else (0.0, 1.0)
    blocks = typ._column_blocks(view.data.shape[1])
    lines: list[str] = []
    for number, cols in enumerate(blocks):
        last = number == len(blocks) - 1
        if len(blocks) > 1:
            lines += [typ.words(f"Columns {cols.start + 1}–{cols.stop} of {view.data.shape[1]}:"), ""]
        extra = view.extra if last else []
        rows, used = [], set()
        for r, label in enumerate(view.rows):
            cells = [typ._label(label)]
            for c in cols:
                x = float(view.data[r, c])
                hidden = view.hidden is not None and bool(view.hidden[r, c])
                kind = (2 + palette.LEVELS if hidden else 2 + palette.level(x, low, high)) if shaded else int(hidden)
                used.add(kind)
                text = '"' + fixed(x, precision).replace("-", "−") + '"'
                cells.append(f"{names[kind]}({text})" if kind else text)
            cells += ['"' + fixed(float(values[r]), precision).replace("-", "−") + '"' for _, values in extra]
            rows.append(cells)
        header = ["[]", *(typ._label(view.cols[c]) for c in cols), *(typ._label(name) for name, _ in extra)]
        table = typ.table(header, rows, ["left", *["right"] * (len(cols) + len(extra))])
        if used - {0}:
            table = ["#{", *("  " + lets[k] for k in sorted(used - {0})), table[0][1:], *table[1:-1], "}", ""]
        lines += table
    if shaded:
        masked = "; grey: hidden by the mask" if view.hidden is not None and bool(view.hidden.any()) else ""
        lines += [typ.words(f"Shaded from {fixed(low, precision)} (lightest) to {fixed(high, precision)} (darkest){masked}."), ""]
    return "\n".join(lines)


@given(
    shape=st.tuples(st.integers(0, 7), st.integers(0, 30)),
    seed=st.integers(0, 2**32 - 1),
    shaded=st.booleans(),
    masked=st.booleans(),
    sums=st.booleans(),
    dashed=st.booleans(),
    precision=st.integers(0, 6),
)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # the same small blocks each time
def test_a_matrix_written_a_block_at_a_time_is_the_matrix_written_cell_by_cell(shape, seed, shaded, masked, sums, dashed, precision, monkeypatch):
    """`matrix_tables` (NumPy, a block of rows at a time, small blocks here) writes what a plain cell-by-cell writer writes: odd
    numbers (NaN, ±inf, huge, -0, halves), hidden cells, extra columns, row labels with a "-" (then the signs are made apart)."""
    import numpy as np

    from attncli.document.blocks import Matrix

    monkeypatch.setattr(typ, "BLOCK_VALUES", 16)  # a few rows at a time
    monkeypatch.setattr(typ, "BAND_VALUES", 64)  # the numbers of one table or of several at once
    rng = np.random.default_rng(seed)
    rows, cols = shape
    odd = np.array([np.nan, np.inf, -np.inf, 1e20, -3e17, -0.0, 0.5, -0.00005, 2.5e-5, -1e-9, 123.456])
    data = np.where(rng.random((rows, cols)) < 0.2, rng.choice(odd, (rows, cols)), rng.normal(0, 3, (rows, cols)))
    hidden = rng.random((rows, cols)) < 0.4 if masked else None
    extra = [("Σ", rng.normal(0, 5, rows)), ("m", -rng.random(rows))] if sums else []
    labels = [f"t-{i}" if dashed else f"t{i}" for i in range(rows)]
    view = Matrix("scores", "scores", None, "Scores", "S", "S", data, labels, [f"k{j}" for j in range(cols)], hidden, extra, square=True)
    written = b"".join(typ.matrix_tables(view, precision, shaded=shaded)).decode()
    assert written == _reference_tables(view, precision, shaded=shaded)


@pytest.mark.parametrize("kind", range(1, 11))
def test_each_cell_function_draws_what_its_whole_markup_draws(kind):
    """A hidden or shaded cell written as the call of its table's function (`s7("0.9")`) looks exactly as the cell written out
    (`table.cell(fill: rgb("#084594"), text(fill: white, "0.9"))`): the two documents render to the same pixels."""
    from attncli.formats import palette

    names, lets = typ._kinds()
    fill = None if kind == 1 else [*palette.LIGHT.shades, palette.LIGHT.masked][kind - 2]
    whole = typ._cell("0.9", fill=fill, hidden=kind in (1, 2 + palette.LEVELS))
    short = f'#{{\n  {lets[kind]}\ntable(columns: 2, strong("t1"), {names[kind]}("0.9"), "1", "2")\n}}\n'
    written_out = f'#table(columns: 2, strong("t1"), {whole}, "1", "2")\n'
    assert typst.compile(short.encode(), format="png", ppi=144.0) == typst.compile(written_out.encode(), format="png", ppi=144.0)


def test_explain_steps_are_math_not_raw_code():
    """explain's steps: each formula in its heading and its arithmetic as Typst math (block equations), no raw code block left."""
    content = tree(attn.explain("journey-causal", "starts").render("typst"))
    assert not [raw for raw in elements(content, "raw") if raw.get("block")]
    blocks = [e for e in elements(content, "equation") if e.get("block")]
    assert len(blocks) >= 8  # the query, keys and values, dot products, scaling … the output
    steps = [h for h in elements(content, "heading") if re.match(r"Step \d", plain(h["body"]))]
    assert len(steps) >= 8 and all(elements(h, "equation") for h in steps)
    assert '"1.2544"' in json.dumps(blocks) and '"0.3395"' in json.dumps(blocks)  # the dot product of Your, the output's first number


def test_a_step_too_big_for_math_keeps_its_raw_lines():
    """A step whose matrix is larger than a page holds as math (a real model's W_Q) keeps its Unicode lines as a raw block."""
    from attncli.document.blocks import Line, Step, Steps
    from attncli.formats.typst import steps_typst

    wide = np.ones((3, 40))
    unicode = Steps([Step("The query", "q = e·W_Q", [Line("q", "[1, 1]")], matrix=("W_Q", wide))], 2)
    tex = Steps([Step("The query", "q = e W_Q", [Line("q", r"\\begin{bmatrix} 1 & 1 \\end{bmatrix}")], matrix=("W_Q", wide))], 2, "tex")
    written = "\n".join(steps_typst(unicode, 2, tex))
    assert "#raw(block: true" in written and "$q = e W_Q$" in written
    compiled(written)


def test_prose_writes_the_notation_as_math():
    """Typst prose: L_q × L_k and √d_k are math (no literal underscore in the text a reader sees); tokens stay text."""
    content = tree(attn.tiles("journey-causal", 2).render("typst"))
    shown = plain(content)
    assert "L_q" not in shown and "d_k" not in shown and "B_q" not in shown
    names = [json.dumps(e) for e in elements(content, "equation")]
    assert any('"text": "L"' in name and '"text": "q"' in name for name in names)  # L_q as math: L with the subscript q
    header = tree(attn.run("journey-causal").render("typst", stages="weights"))
    assert any(e["body"].get("func") == "root" for e in elements(header, "equation"))  # √d_k as a root over d_k
    token = tree(attn.run(attn.load("cat")).render("typst", stages="weights"))  # a token is never read as notation
    assert "The cat sat on the mat" in plain(token)
