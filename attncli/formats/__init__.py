"""Output formats. `render_run` and `render_explain` turn a result into the finished document of one format.

A document is text, or (JSON, which can run to hundreds of megabytes) an iterator of
UTF-8 byte chunks. Each format's module is imported only when that format is asked for.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from attncli.document.numbers import decimals
from attncli.errors import AttnError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from attncli.core.engine import RunResult
    from attncli.core.explain import Explanation


Document = str | Iterator[bytes]  # text, or UTF-8 chunks


class Format(str, enum.Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    latex = "latex"
    csv = "csv"
    html = "html"
    svg = "svg"

    @property
    def extension(self) -> str:
        """The file extension `export` gives this format."""
        return {"table": "txt", "markdown": "md", "latex": "tex"}.get(self.value, self.value)


class Options(NamedTuple):
    """How to render: which format, stages and heads, how many decimals."""

    format: Format = Format.table
    stages: tuple[str, ...] | None = None  # None: the format's default
    heads: list[int] | None = None  # 1-based; None: every head
    precision: int | None = None  # None: the scenario's precision (full precision in JSON and CSV)
    full: bool = False  # tables: no shortening
    to_file: bool = False  # plain text, no terminal colours
    heatmap: bool = False  # tables: shade every L × L stage (the weights are shaded anyway in a terminal)
    standalone: bool | None = None  # a complete document (HTML page, LaTeX article); None: the format's default
    heading_level: int = 1  # Markdown and HTML: level of the top heading; 0 leaves it out (and the others start at 2)


def render_run(result: RunResult, options: Options) -> Document:
    """The whole `attncli run` output in `options.format`."""
    from attncli.document import stages, views

    fmt = options.format
    heads = options.heads or list(range(1, result.scenario.heads + 1))
    if fmt is Format.json:
        from attncli.formats import jsonout

        return jsonout.document(jsonout.run_json(result, options.stages or stages.STAGE_NAMES, heads))
    if fmt is Format.csv:
        from attncli.formats import csvout

        return csvout.run_csv(result, stage=_one_stage(options.stages), head=heads[0], precision=options.precision)
    precision = decimals(options.precision, result.scenario.precision, result.round_steps)
    shown = views.views(result, options.stages or stages.default(result.scenario), heads)
    if fmt is Format.markdown:
        from attncli.formats import markdown

        return markdown.run_markdown(result, shown, precision=precision, heading_level=options.heading_level)
    if fmt is Format.latex:
        from attncli.formats import latex

        return latex.run_latex(result, shown, precision=precision, standalone=bool(options.standalone))
    if fmt is Format.html:
        from attncli.formats import publish

        return publish.run_html(result, shown, precision=precision, options=options)
    if fmt is Format.svg:
        from attncli.formats import publish

        return publish.run_svg(result, heads, stages=options.stages, precision=precision)
    from attncli.formats.tables import run_tables

    def tables(console: Console) -> list[RenderableType]:
        on_screen = console.is_terminal
        return run_tables(result, shown, precision=precision, console=console, full=options.full,
                          shade_all=options.heatmap, shade_weights=on_screen)  # fmt: skip

    return _rich(tables, options)


def render_explain(expl: Explanation, options: Options) -> Document:
    """The whole `attncli explain` output in `options.format`."""
    fmt = options.format
    if fmt is Format.json:
        from attncli.formats import jsonout

        return jsonout.document(jsonout.explain_json(expl))
    if fmt is Format.csv:
        from attncli.formats import csvout

        return csvout.explain_csv(expl, precision=options.precision)
    precision = decimals(options.precision, expl.scenario.precision, expl.result.round_steps)
    if fmt is Format.markdown:
        from attncli.formats import markdown

        return markdown.explain_markdown(expl, precision=precision, heading_level=options.heading_level, full=options.full)
    if fmt is Format.latex:
        from attncli.formats import latex

        return latex.explain_latex(expl, precision=precision, standalone=bool(options.standalone), full=options.full)
    if fmt is Format.html:
        from attncli.formats import publish

        return publish.explain_html(expl, precision=precision, options=options)
    if fmt is Format.svg:
        from attncli.formats import publish

        return publish.explain_svg(expl, precision=precision)
    from attncli.formats.narration import explain_renderables

    return _rich(lambda console: explain_renderables(expl, precision=precision, full=options.full), options)


def _one_stage(stages: tuple[str, ...] | None) -> str:
    if stages is None:
        return "weights"
    if len(stages) > 1:
        raise AttnError(
            f"CSV holds one matrix, but {len(stages)} stages were asked for ({', '.join(stages)})",
            key="--stages",
            expected="a single stage, e.g. --stages scores",
        )
    return stages[0]


def _rich(build: Callable[[Console], list[RenderableType]], options: Options) -> str:
    """Render Rich renderables for the terminal (or plain text for a file)."""
    from attncli.formats import terminal

    console = terminal.console(to_file=options.to_file)
    return terminal.render(console, build(console))
