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
    assert drawing["heads"] == drawing["shade"] == ["table", "json", "csv", "html", "svg", "typst"]


def test_a_kind_a_format_cannot_draw_is_one_error_naming_those_that_can() -> None:
    page = attn.heads("multihead").page(Options(Format.markdown))
    with pytest.raises(AttnError) as error:
        render(page, Options(Format.markdown))
    assert "heads prints table, json, csv, html, svg or typst, not markdown" in str(error.value)


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
