"""Every format draws the pages it names, and `formats.render` finds them by the page's kind alone.

A new format is its module and its line in `Format`: these tests hold every format's module to
the page kinds (run, explain and report for all; the map and the shaded sentence where drawn),
and hold `render` to the one error that names the formats that can draw a kind.
"""

from __future__ import annotations

import types

import pytest

import attncli.api as attn
from attncli.document.pages import KINDS
from attncli.errors import AttnError
from attncli.formats import Format, Options, render

EVERY_FORMAT_DRAWS = ("run", "explain", "report")


@pytest.mark.parametrize("fmt", list(Format))
def test_each_format_module_draws_run_explain_and_report(fmt: Format) -> None:
    module = fmt.module()
    for kind in EVERY_FORMAT_DRAWS:
        assert callable(getattr(module, kind, None)), f"{module.__name__} has no {kind}(page, options)"


def test_the_map_is_drawn_by_the_formats_that_say_so() -> None:
    drawing = {kind: [f.value for f in Format if hasattr(f.module(), kind)] for kind in KINDS}
    assert drawing["heads"] == drawing["shade"] == ["table", "json", "markdown", "csv", "html", "svg", "typst", "png"]


def test_a_kind_a_format_cannot_draw_is_one_error_naming_those_that_can() -> None:
    page = attn.heads("multihead").page(Options(Format.latex))
    with pytest.raises(AttnError) as error:
        render(page, Options(Format.latex))
    assert "heads prints table, json, markdown, csv, html, svg, typst or png, not latex" in str(error.value)


def test_render_asks_the_module_of_the_format_and_nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    """A format module written in the test draws `run` and `explain` through the API, which names no format's functions."""
    seen: list[str] = []

    def run(page, options):  # type: ignore[no-untyped-def]
        seen.append("run")
        document = page.document()
        return f"{document.summary.name}: {len(document.matrices)} matrices at {page.precision} decimals\n"

    def explain(page, options):  # type: ignore[no-untyped-def]
        from attncli.document.notation import Writer

        seen.append("explain")
        article = page.article(Writer())
        return f"{article.token}: {len(article.steps.steps)} steps\n"

    toy = types.SimpleNamespace(run=run, explain=explain, __name__="toy")
    monkeypatch.setattr(Format, "module", lambda self: toy)
    assert attn.run("cat").render("table") == "cat: 11 matrices at 3 decimals\n"
    assert attn.explain("cat", "cat").render("table").startswith("cat: ")
    assert seen == ["run", "explain"]


# -- variance: a report page, so every format draws it -------------------------------------------------------------


@pytest.fixture(scope="module")
def varied() -> attn.Varied:
    return attn.variance([1, 64], samples=400, keys=8, seed=3)


def test_variance_as_csv_holds_every_number_whole(varied: attn.Varied) -> None:
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(varied.render("csv"))))
    assert [int(r["d"]) for r in rows] == [1, 64]
    for row, measured in zip(rows, varied.rows):
        assert float(row["var_qk"]) == measured.var_raw and float(row["max_weight_scaled"]) == measured.max_weight_scaled


def test_variance_in_markdown_html_and_svg_is_read_by_their_parsers(varied: attn.Varied) -> None:
    import xml.etree.ElementTree as ET

    from tests import renderers

    table = renderers.markdown_html(varied.render("markdown"))
    assert "<table>" in table and ">max α scaled</th>" in table and "<h1>q·k for q, k ~ N(0, I_d)" in table
    cells = [e.text for e in renderers.html_elements(varied.render("html")) if e.tag == "td"]
    assert f"{varied.rows[1].var_raw:.2f} (64)" in cells
    svg = ET.fromstring(varied.render("svg"))
    assert "max α scaled" in "".join(svg.itertext())


def test_variance_in_latex_renders_in_katex_with_its_greek(varied: attn.Varied, katex_modules) -> None:  # type: ignore[no-untyped-def]
    from tests import renderers

    blocks = renderers.latex_display_blocks(varied.render("latex"))
    rendered = renderers.katex(katex_modules, blocks)
    assert [r.error for r in rendered] == [None] * len(blocks)
    assert "maxα" in renderers.fold(" ".join(r.text for r in rendered)) and "U+" not in " ".join(r.text for r in rendered)


def test_variance_keeps_its_framed_terminal_table_and_its_json(varied: attn.Varied) -> None:
    import json

    table = varied.render("table")
    assert table.startswith("q·k for q, k ~ N(0, I_d): 400 samples per d") and table.count("q·k for q, k") == 1 and "┃" in table
    doc = json.loads(varied.render("json"))
    assert doc["schema"] == "attncli.variance/1" and doc["seed"] == 3


# -- the map in Markdown: the statistics and readings a post can paste --------------------------------------------------


def test_the_map_in_markdown_is_a_table_a_renderer_reads_with_every_head() -> None:
    from tests import renderers

    mapped = attn.heads("multihead")
    html = renderers.markdown_html(mapped.render("markdown"))
    cells = [e.text for e in renderers.html_elements(html) if e.tag == "td"]
    rows = mapped.rows()
    assert len(cells) == len(rows) * len(rows[0].values) + 2 * len(rows)  # L, H and the statistics of every head
    assert f"{rows[1].values['entropy']:.3f}" in cells and "<h2>Statistics</h2>" in html


def test_the_shaded_sentence_in_markdown_keeps_its_tokens_as_text() -> None:
    """Tokens that Markdown would read as emphasis, code or HTML show as written in the rendered table's header."""
    from tests import renderers

    s = attn.load("cat")
    tokens = ("*x*", "`a`", "<b>", "the", "a_b_c", "|")
    import dataclasses

    odd = dataclasses.replace(s, tokens=tokens)
    html = renderers.markdown_html(attn.heads(odd, position=4).render("markdown"))
    headers = [e.text for e in renderers.html_elements(html) if e.tag == "th"]
    assert headers[1:] == list(tokens)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (Options(format="bogus"), "format: found 'bogus' (expected one of table, json"),  # type: ignore[arg-type]
        (Options(heading_level=99), "heading_level: found 99 (expected a heading level from 0 (none) to 6)"),
        (Options(heading_level=1.5), "heading_level: found 1.5"),  # type: ignore[arg-type]
        (Options(stages=("bogus",)), "stages: unknown stage 'bogus'"),
    ],
)
def test_options_built_by_hand_are_checked_by_render(options: Options, message: str) -> None:
    """A script may build Options without render_options: a bad one is one AttnError, not a TypeError or an empty page."""
    with pytest.raises(AttnError) as error:
        attn.text_of(attn.run("cat").document(options))
    assert message in str(error.value)


def test_a_format_given_by_name_in_hand_built_options_renders() -> None:
    assert attn.text_of(attn.run("cat").document(Options(format="typst", to_file=True))).startswith('= #"cat — The cat sat on the mat"')  # type: ignore[arg-type]


def test_variance_writes_a_mean_that_rounds_to_zero_without_a_minus_sign() -> None:
    """The number writer's rule: -0.0003 at 3 decimals is 0.000 (the table wrote "-0.000 (0)", seen in the HTML page)."""
    from attncli.core.variance import VarianceRow
    from attncli.walkthroughs.variance import variance_document

    table = variance_document([VarianceRow(1, 10, -0.0003, 1.0, 1.0, 0.5, 0.5)], keys=4).blocks[1]
    assert table.rows[0][1] == "0.000 (0)"  # type: ignore[union-attr]
