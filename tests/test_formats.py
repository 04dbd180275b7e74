"""Markdown, LaTeX, CSV, HTML and SVG, each checked with a real parser or renderer."""

import csv
import io
import json
import os
import xml.etree.ElementTree as ElementTree
from html.parser import HTMLParser

import numpy as np
import pytest
from markdown_it import MarkdownIt

from attncli.core import engine
from attncli.sources import builtin
from attncli.sources.yaml_scenario import load
from tests import renderers

# -- Markdown ---------------------------------------------------------------------------------


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Every table as a list of rows of cell texts as a reader sees them (header first), parsed by markdown-it-py (GFM tables).

    Escapes and entities are resolved and emphasis markers dropped: `cat &amp; The` reads "cat & The", `**cat**` reads "cat".
    """
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    tables, rows, cells, inside = [], [], [], False
    for token in tokens:
        if token.type == "table_open":
            rows = []
        elif token.type == "tr_open":
            cells = []
        elif token.type in ("th_open", "td_open"):
            inside = True
        elif token.type == "inline" and inside:
            cells.append("".join(child.content for child in token.children or [] if child.type in ("text", "code_inline")))
            inside = False
        elif token.type == "tr_close":
            rows.append(cells)
        elif token.type == "table_close":
            tables.append(rows)
    return tables


@pytest.mark.parametrize("name", builtin.names())
def test_run_markdown_tables_parse_with_consistent_columns(cli, name):
    """Each stage is a real GFM table whose every row has as many cells as its header."""
    text = cli("run", name, "--format", "markdown").stdout
    tables = markdown_tables(text)
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert len(tables) == len(headings) >= 8
    for table in tables:
        assert len({len(row) for row in table}) == 1, table


def test_run_markdown_has_the_terminal_labels_and_minus_infinity(cli):
    """Headings carry the same stage labels as the terminal; masked cells read −∞ and 0."""
    text = cli("run", "journey-causal", "--format", "markdown").stdout
    assert "## Masked scores: `mask(S / √d_k), −∞ above the diagonal` (6 × 6)" in text
    masked = markdown_tables(text)[[l for l in text.splitlines() if l.startswith("## ")].index(
        next(l for l in text.splitlines() if l.startswith("## Masked")))]
    assert masked[1][2:] == ["−∞"] * 5
    weights = markdown_tables(text)[-2]
    assert weights[1][1:] == ["1.0000", "0.0000", "0.0000", "0.0000", "0.0000", "0.0000"]


def test_explain_markdown_round_steps_3_has_the_articles_tables(cli):
    """`explain --word cat --format markdown --round-steps 3`: seed 001's tables and numbers."""
    text = cli("explain", "--word", "cat", "--format", "markdown", "--round-steps", "3").stdout
    tables = markdown_tables(text)
    embeddings, scores, weights, weighted = tables
    assert embeddings[0] == ["Word", "Embedding (E)"]
    assert embeddings[1:] == [["The", "[1, 0]"], ["cat", "[0, 1]"], ["sat", "[1, 1]"], ["on", "[0, -1]"], ["the", "[1, 0]"], ["mat", "[0, 1]"]]
    assert scores[0] == ["Pair", "Score", "Exponential"]
    assert scores[1:] == [
        ["cat & The", "1", "2.718"], ["cat & cat", "0", "1"], ["cat & sat", "1", "2.718"],
        ["cat & on", "0", "1"], ["cat & the", "1", "2.718"], ["cat & mat", "0", "1"],
    ]  # fmt: skip
    assert weights[0] == ["Pair", "Weight (α)"]
    assert [row[1] for row in weights[1:]] == ["0.244", "0.090", "0.244", "0.090", "0.244", "0.090"]
    assert [row[3] for row in weighted[1:]] == [
        "[0.244, 0.244]", "[0.090, -0.090]", "[0.488, 0.000]", "[-0.090, 0.090]", "[0.244, 0.244]", "[0.090, -0.090]",
    ]  # fmt: skip
    assert "Sum of the exponentials: 11.154" in text
    assert "Output(cat) = [1.066, 0.398]" in text
    assert "Exact arithmetic gives [1.0644, 0.3977]" in text
    assert "\nα(The) = 2.718 / 11.154 = 0.244\n" in text  # the steps' arithmetic, in a code block


def test_explain_markdown_masked_pairs(cli):
    """A causal explanation: hidden pairs read −∞ in scores and 0 in weights."""
    text = cli("explain", "-s", "journey-causal", "--word", "journey", "--format", "markdown").stdout
    _, scores, weights, _ = markdown_tables(text)
    assert scores[3][1] == "−∞ (masked)" and weights[3][1] == "0.0000"


# -- LaTeX --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def katex(katex_modules):
    """A function that renders TeX strings with KaTeX in strict mode: [(index, message)] of those that fail."""

    def render(blocks: list[str]) -> list[tuple[int, str]]:
        return [(i, r.error) for i, r in enumerate(renderers.katex(katex_modules, blocks)) if r.error is not None]

    return render


def latex_blocks(text: str) -> list[str]:
    """The $$ … $$ blocks; fails if anything but comments, blank lines and one-line text paragraphs stands between them."""
    return renderers.latex_display_blocks(text)


def latex_outputs(cli) -> dict[str, str]:
    outputs = {}
    for name in builtin.names():
        outputs[f"run {name}"] = cli("run", name, "--format", "latex", "--stages", ",".join(
            ["embeddings", "q", "k", "v", "scores", "scaled", "masked", "exp", "weights", "output"])).stdout
        scenario = load(name)
        outputs[f"explain {name}"] = cli("explain", "-s", name, "--position", str(scenario.L), "--head", str(scenario.heads),
                                         "--format", "latex").stdout
    outputs["explain cat rounded"] = cli("explain", "--word", "cat", "--format", "latex", "--round-steps", "3").stdout
    outputs["run cat rounded"] = cli("run", "cat", "--format", "latex", "--round-steps", "3").stdout
    outputs["explain causal middle"] = cli("explain", "-s", "journey-causal", "--word", "starts", "--format", "latex").stdout
    return outputs


def test_every_latex_block_renders_with_katex(cli, katex):
    """Every display block of every built-in scenario, run and explain, renders with KaTeX in strict mode."""
    outputs = latex_outputs(cli)
    blocks = [(label, block) for label, text in outputs.items() for block in latex_blocks(text)]
    errors = katex([block for _, block in blocks])
    assert errors == [], [(blocks[i][0], blocks[i][1][:200], message) for i, message in errors]


def test_latex_is_plain_ascii_latex(cli):
    """No raw Unicode symbols: it also compiles in a real LaTeX document. The prose's – — ‘ ’ … are UTF-8 text that pdflatex
    prints in OT1 and T1 (escape.LATEX_TEXT_CHARACTERS, checked in test_publish) and a Markdown post shows as they are."""
    from attncli.document.escape import LATEX_TEXT_CHARACTERS

    for label, text in latex_outputs(cli).items():
        assert not [c for c in text if not c.isascii() and c not in LATEX_TEXT_CHARACTERS], label
        blocks = "".join(latex_blocks(text))
        assert blocks.isascii(), (label, [c for c in blocks if not c.isascii()][:5])  # math is ASCII TeX


def test_latex_explain_has_the_query_as_matrices_and_aligned_steps(cli):
    """The query step shows e, W_Q and q as bmatrix; the chain uses aligned; the article's numbers appear."""
    text = cli("explain", "--word", "cat", "--format", "latex", "--round-steps", "3").stdout
    query = latex_blocks(text)[0]
    assert query.count(r"\begin{bmatrix}") == 3 and query.count(r"\begin{array}") == 1  # e, W_Q (an array), e·W_Q = q
    assert r"\begin{aligned}" in text
    assert r"\frac{2.718}{11.154} = 0.244" in text
    assert r"\begin{bmatrix} 1.066 & 0.398 \end{bmatrix}" in text


def test_latex_escapes_special_characters_in_words(cli, tmp_path):
    """Tokens with LaTeX specials (& _ % $ #) are written through the one TeX escape (which pdflatex, KaTeX and MathJax check)."""
    path = tmp_path / "odd.yaml"
    path.write_text("tokens: ['R&D', 'x_1', '50%', '$5', '#1']\nembeddings: [[1], [2], [3], [4], [5]]\n")
    text = cli("explain", "-s", str(path), "--word", "R&D", "--format", "latex").stdout
    from attncli.document.escape import latex

    assert all(latex(token) in text for token in ("R&D", "x_1", "50%", "$5", "#1"))
    assert all(line.startswith("%") or "$5" not in line.replace("${\\$}$", "").replace("{\\$}", "") for line in text.splitlines())


# -- CSV ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["embeddings", "q", "scores", "masked", "exp", "weights", "output"])
def test_csv_round_trips_to_the_engines_numbers(cli, stage):
    """The csv module reads back exactly the engine's float64 numbers, labels included."""
    text = cli("run", "journey-causal", "--format", "csv", "--stages", stage).stdout
    rows = list(csv.reader(io.StringIO(text)))
    head = engine.run(load("journey-causal")).head(1)
    expected = {"embeddings": engine.run(load("journey-causal")).X, "q": head.Q, "scores": head.scores, "masked": head.masked,
                "exp": head.exp, "weights": head.weights, "output": head.output}[stage]  # fmt: skip
    assert [row[0] for row in rows[1:]] == ["Your", "journey", "starts", "with", "one", "step"]
    np.testing.assert_array_equal(np.array([[float(x) for x in row[1:]] for row in rows[1:]]), expected)


def test_csv_default_is_the_weights_of_head_1_and_head_picks_another(cli):
    """Without --stages, CSV holds the weights; --head 2 gives head 2's."""
    rows = list(csv.reader(io.StringIO(cli("run", "multihead", "--format", "csv", "--head", "2").stdout)))
    np.testing.assert_array_equal([[float(x) for x in row[1:]] for row in rows[1:]], engine.run(load("multihead")).head(2).weights)
    assert rows[0] == ["token", "the", "cat", "sat", "down"]


def test_csv_precision_option(cli):
    """--precision rounds CSV numbers when asked."""
    rows = list(csv.reader(io.StringIO(cli("run", "cat", "--format", "csv", "--precision", "3").stdout)))
    assert rows[2][1:] == ["0.244", "0.090", "0.244", "0.090", "0.244", "0.090"]


def test_csv_with_two_stages_is_a_clear_error(cli):
    """CSV holds one matrix."""
    result = cli("run", "cat", "--format", "csv", "--stages", "scores,weights")
    assert result.exit_code == 1 and result.stdout == "" and "CSV holds one matrix" in result.stderr


def test_explain_csv_has_one_row_per_key(cli):
    """explain --format csv: position, token, score … weighted values, readable by csv.DictReader."""
    rows = list(csv.DictReader(io.StringIO(cli("explain", "--word", "cat", "--format", "csv", "--round-steps", "3").stdout)))
    assert [row["token"] for row in rows] == ["The", "cat", "sat", "on", "the", "mat"]
    assert [float(row["weight"]) for row in rows] == [0.244, 0.09, 0.244, 0.09, 0.244, 0.09]


# -- HTML and SVG ---------------------------------------------------------------------------------


class BalancedHTML(HTMLParser):
    """Checks that every opened element is closed in order (void elements aside)."""

    VOID = {"meta", "br", "hr", "img", "link", "input"}

    def __init__(self):
        super().__init__()
        self.stack, self.seen = [], set()

    def handle_starttag(self, tag, attrs):
        self.seen.add(tag)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack.pop() == tag, (tag, self.stack)


@pytest.mark.parametrize("command", [["run", "cat"], ["explain", "--word", "cat"]])
def test_html_parses_and_holds_the_numbers(cli, command):
    """A self-contained HTML page: balanced elements, styles inline, the numbers inside."""
    text = cli(*command, "--format", "html").stdout
    parser = BalancedHTML()
    parser.feed(text)
    parser.close()
    assert parser.stack == [] and {"html", "head", "style", "body", "table", "th", "td"} <= parser.seen
    assert "<script" not in text and "0.244" in text


@pytest.mark.parametrize("command", [["run", "cat"], ["explain", "--word", "cat"]])
def test_svg_is_well_formed_xml(cli, command):
    """The SVG parses as XML with an <svg> root."""
    root = ElementTree.fromstring(cli(*command, "--format", "svg").stdout)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"


# -- --output and export --------------------------------------------------------------------------


def test_output_writes_the_file_and_nothing_to_stdout(cli, tmp_path):
    """--output FILE: the result in the file, stdout empty."""
    target = tmp_path / "cat.md"
    result = cli("run", "cat", "--format", "markdown", "--output", str(target))
    assert result.exit_code == 0 and result.stdout == ""
    assert target.read_text() == cli("run", "cat", "--format", "markdown").stdout


def test_output_is_atomic_when_the_write_is_interrupted(cli, tmp_path, monkeypatch):
    """Interrupted at the final rename: the old file stands, no temporary file is left."""
    target = tmp_path / "out.json"
    target.write_text("old")

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    result = cli("run", "cat", "--format", "json", "--output", str(target))
    assert result.exit_code == 130
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_export_folder_writes_one_file_per_scenario_byte_identically(cli, tmp_path):
    """Every built-in to DIR/<stem>.md; a rerun gives byte-identical files."""
    out = tmp_path / "out"
    out.mkdir()
    result = cli("export", str(builtin.folder()), "--format", "markdown", "--out-dir", str(out))
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{name}.md" for name in builtin.names())
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert f"Exported {len(first)} of {len(first)} scenarios" in result.stderr and result.stdout == ""
    for fmt in ("markdown",):
        cli("export", str(builtin.folder()), "--format", fmt, "--out-dir", str(out))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first


def test_export_of_a_folder_reads_its_regular_files_only(cli, tmp_path):
    """A FIFO named x.yaml in the folder is left alone: exporting the folder waited for a writer forever."""
    import os

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.yaml").write_text("tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\n", encoding="utf-8")
    os.mkfifo(folder / "fifo.yaml")
    out = tmp_path / "out"
    out.mkdir()
    result = cli("export", str(folder), "--format", "markdown", "--out-dir", str(out))
    assert result.exit_code == 0 and [p.name for p in out.iterdir()] == ["a.md"] and "Exported 1 of 1 scenario " in result.stderr


@pytest.mark.parametrize(("fmt", "ext"), [("latex", "tex"), ("csv", "csv"), ("html", "html"), ("svg", "svg"), ("json", "json")])
def test_export_is_byte_identical_in_every_format(cli, tmp_path, fmt, ext):
    """No timestamps, no random ids: two exports of the same input are the same bytes."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    cli("export", "cat", "multihead", "--format", fmt, "--out-dir", str(a))
    cli("export", "cat", "multihead", "--format", fmt, "--out-dir", str(b))
    assert sorted(p.name for p in a.iterdir()) == [f"cat.{ext}", f"multihead.{ext}"]
    for p in a.iterdir():
        assert p.read_bytes() == (b / p.name).read_bytes()


def test_export_reports_a_failure_and_writes_the_others(cli, tmp_path):
    """One bad scenario: reported with its error, the others written, exit 3, its old file untouched."""
    folder = tmp_path / "posts"
    folder.mkdir()
    (folder / "good.yaml").write_text(builtin.path("cat").read_text())
    (folder / "bad.yaml").write_text("tokens: [a]\nembeddings: [[.nan]]\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "bad.md").write_text("old table")
    result = cli("export", str(folder), "--format", "markdown", "--out-dir", str(out))
    assert result.exit_code == 3
    assert f"{folder / 'bad.yaml'}:2: embeddings[1][1]: .nan is not a finite number" in result.stderr
    assert "Exported 1 of 2 scenarios" in result.stderr and "(1 failed)" in result.stderr
    assert (out / "good.md").exists() and (out / "bad.md").read_text() == "old table"


def test_export_explain_skips_scenarios_without_the_word(cli, tmp_path):
    """--explain WORD: scenarios without the word are skipped with a note, not failures."""
    result = cli("export", "cat", "journey", "--explain", "cat", "--format", "markdown", "--out-dir", str(tmp_path))
    assert result.exit_code == 0
    assert "skipped journey: it has no token 'cat'" in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["cat.md"]
    assert "# Attention for “cat”" in (tmp_path / "cat.md").read_text()


def test_export_that_writes_nothing_has_status_1(cli, tmp_path):
    """Every scenario skipped (no such word), or skipped and failed: nothing written is status 1, as the help says (it was 0 and 3)."""
    skipped = cli("export", "cat", "--explain", "zzz", "--format", "markdown", "--out-dir", str(tmp_path))
    assert skipped.exit_code == 1 and "(1 skipped)" in skipped.stderr and list(tmp_path.iterdir()) == []
    (tmp_path / "cat.md").write_text("old")
    (tmp_path / "cat.md").chmod(0o444)
    both = cli("export", "cat", "journey", "--explain", "the", "--format", "markdown", "--out-dir", str(tmp_path))
    assert both.exit_code == 1 and "(1 skipped, 1 failed)" in both.stderr


def test_export_replaces_a_read_only_file_with_force_as_its_error_says(cli, tmp_path):
    """The read-only file's error says 'pass --force', and export takes --force (it was a usage error); the mode is kept."""
    (tmp_path / "cat.md").write_text("old")
    (tmp_path / "cat.md").chmod(0o444)
    refused = cli("export", "cat", "--format", "markdown", "--out-dir", str(tmp_path))
    assert refused.exit_code == 1 and "cat: --out-dir: cannot write" in refused.stderr and "pass --force to replace it" in refused.stderr
    assert (tmp_path / "cat.md").read_text() == "old"
    forced = cli("export", "cat", "--format", "markdown", "--out-dir", str(tmp_path), "--force")
    assert forced.exit_code == 0 and (tmp_path / "cat.md").read_text().startswith("# ")
    assert (tmp_path / "cat.md").stat().st_mode & 0o777 == 0o444


def test_export_refuses_a_missing_out_dir(cli, tmp_path):
    """The output folder must exist: a clear error, nothing written."""
    result = cli("export", "cat", "--format", "json", "--out-dir", str(tmp_path / "missing"))
    assert result.exit_code == 1 and "does not exist (expected an existing folder; create it first)" in result.stderr


@pytest.mark.parametrize("fmt", ["table", "markdown", "latex", "html", "svg"])
def test_one_quantity_prints_the_same_in_every_format(cli, fmt):
    """The hand-rounded output of 'cat' reads 1.066 and 0.398 in every format: one rule decides the decimals."""
    text = cli("run", "cat", "--round-steps", "3", "--stages", "output", "--precision", "2", "--format", fmt).stdout
    assert "1.066" in text and "0.398" in text
    assert "1.07" not in text.replace("1.066", "")


HOSTILE = ["<eos>", "*x*", "a|b", "R&D", "=1+1", "[bold]x[/]", "a_b"]


def test_hostile_tokens_read_as_written_in_markdown_and_csv(cli, tmp_path):
    """Tokens that are markup somewhere render literally in GFM and read back from CSV (a formula guard on =1+1)."""
    path = tmp_path / "hostile.yaml"
    path.write_text(json.dumps({"tokens": HOSTILE, "embeddings": [[i, 1] for i in range(len(HOSTILE))]}))
    tables = markdown_tables(cli("run", str(path), "--format", "markdown", "--stages", "weights").stdout)
    assert tables[0][0][1:] == HOSTILE and [row[0] for row in tables[0][1:]] == HOSTILE
    rows = list(csv.reader(io.StringIO(cli("run", str(path), "--format", "csv").stdout)))
    assert rows[0][1:] == [("'" + t if t.startswith("=") else t) for t in HOSTILE]


def test_hostile_tokens_are_text_in_the_terminal(cli, tmp_path):
    """Rich markup in a token is shown as written and an escape sequence is made visible, in run and explain."""
    path = tmp_path / "hostile.yaml"
    tokens = ["[bold]x[/]", "[/]", "red\x1b[31m"]
    path.write_text(json.dumps({"tokens": tokens, "embeddings": [[1, 0], [0, 1], [1, 1]]}))
    for args in (["run", str(path)], ["explain", "-s", str(path), "--position", "3"]):
        result = cli(*args)
        assert result.exit_code == 0, result.stderr
        assert "[bold]x[/]" in result.stdout and "red\\x1b[31m" in result.stdout and "\x1b" not in result.stdout


NEGATIVE_ZEROS = """name: negzero
sentence: a b
embeddings:
  a: [-0.001, 0.5]
  b: [0.002, -0.0004]
W_Q: [[1, 0], [0, 1]]
W_K: [[1, 0], [0, 1]]
W_V: [[1, 0], [0, -1]]
scale: none
mask: none
"""


def test_a_number_rounding_to_zero_is_written_without_a_sign_in_every_format(cli, tmp_path):
    """CSV with --precision once wrote -0.00 where Markdown and the terminal write 0.00 (fixed on purpose)."""
    path = tmp_path / "negzero.yaml"
    path.write_text(NEGATIVE_ZEROS)
    csv_text = cli("run", str(path), "--format", "csv", "--stages", "embeddings", "--precision", "2").stdout
    markdown_text = cli("run", str(path), "--format", "markdown", "--stages", "embeddings", "--precision", "2").stdout
    table_text = cli("run", str(path), "--stages", "embeddings", "--precision", "2").stdout
    assert list(csv.reader(io.StringIO(csv_text)))[1:] == [["a", "0.00", "0.50"], ["b", "0.00", "0.00"]]
    for text in (csv_text, markdown_text, table_text):
        assert "-0.00" not in text and "0.00" in text
    explained = cli("explain", "-s", str(path), "--word", "b", "--format", "csv", "--precision", "3").stdout
    assert "-0.000" not in explained and "0.000" in explained

