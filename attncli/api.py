"""The documented Python API: load a scenario, run it, explain a word, decode, tile, render (filled in as the commands move onto it).

Rendering: a result of the engine becomes the finished document of one format. The
walk-throughs (attncli.walkthroughs) turn results into documents and data; the formats
(attncli.formats) write them; this module joins the two, so neither imports the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attncli.document.numbers import decimals
from attncli.errors import AttnError
from attncli.formats import Document, Format, Options

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from attncli.core.decode import Decode
    from attncli.core.engine import RunResult
    from attncli.core.explain import Explanation


def render_run(result: RunResult, options: Options) -> Document:
    """The whole `attncli run` output in `options.format`."""
    from attncli.document import stages, views

    fmt = options.format
    heads = options.heads or list(range(1, result.scenario.heads + 1))
    if fmt is Format.json:
        from attncli.formats import jsonout
        from attncli.walkthroughs import data

        return jsonout.document(data.run_json(result, options.stages or stages.STAGE_NAMES, heads))
    if fmt is Format.csv:
        from attncli.formats import csvout

        stage = _one_stage(options.stages)
        view = views.view_of(result, stages.main_row(stage).key, heads[0])
        if view is None:
            raise AttnError(f"this scenario has no {stage!r} stage", key="--stages", expected="a stage it has, e.g. weights")
        return csvout.run_csv(view, precision=options.precision)
    precision = decimals(options.precision, result.scenario.precision, result.round_steps)
    if fmt is Format.svg:
        from attncli.formats import publish

        return publish.run_svg(views.views(result, options.stages or ("weights",), heads), precision=precision)
    from attncli.walkthroughs.run import run_document

    shown = views.views(result, options.stages or stages.default(result.scenario), heads)
    if fmt is Format.markdown:
        from attncli.formats import markdown

        return markdown.run_markdown(run_document(result, shown), precision=precision, heading_level=options.heading_level)
    if fmt is Format.latex:
        from attncli.formats import latex

        return latex.run_latex(run_document(result, shown), precision=precision, standalone=bool(options.standalone))
    if fmt is Format.html:
        from attncli.formats import publish

        return publish.run_html(run_document(result, shown), precision=precision, options=options)
    from attncli.formats import terminal
    from attncli.formats.tables import run_tables

    def tables(console: Console) -> list[RenderableType]:
        on_screen = console.is_terminal
        return run_tables(run_document(result, shown), precision=precision, console=console, full=options.full,
                          shade_all=options.heatmap, shade_weights=on_screen)  # fmt: skip

    return terminal.text_of(tables, to_file=options.to_file)


def render_explain(expl: Explanation, options: Options) -> Document:
    """The whole `attncli explain` output in `options.format`."""
    fmt = options.format
    if fmt is Format.json:
        from attncli.formats import jsonout
        from attncli.walkthroughs import data

        return jsonout.document(data.explain_json(expl))
    if fmt is Format.csv:
        from attncli.document import blocks
        from attncli.formats import report
        from attncli.walkthroughs import data

        return report.csv(blocks.Document(expl.token, [], tidy=data.explain_table(expl, precision=options.precision)))
    from attncli.document.blocks import Steps
    from attncli.document.notation import TexWriter, Writer
    from attncli.walkthroughs import narration

    precision = decimals(options.precision, expl.scenario.precision, expl.result.round_steps)
    if fmt is Format.svg:
        from attncli.formats import publish
        from attncli.walkthroughs.explain import query_weights

        return publish.explain_svg(query_weights(expl), precision=precision)
    intro = narration.intro(expl)
    tex = fmt is Format.latex
    steps = Steps(narration.steps(expl, precision, TexWriter() if tex else Writer(), full=options.full), precision, "tex" if tex else "unicode")
    if fmt is Format.markdown:
        from attncli.formats import markdown

        return markdown.explain_markdown(expl, intro, steps, precision=precision, heading_level=options.heading_level)
    if fmt is Format.latex:
        from attncli.formats import latex

        return latex.explain_latex(expl.token, intro, steps, expl.exact_output, precision=precision, standalone=bool(options.standalone))
    if fmt is Format.html:
        from attncli.formats import publish
        from attncli.walkthroughs.explain import key_table, query_weights

        return publish.explain_html(expl.token, intro, [key_table(expl), query_weights(expl)], steps, precision=precision, options=options)
    from attncli.formats import terminal
    from attncli.formats.narration import explain_renderables

    return terminal.text_of(lambda console: explain_renderables(intro, steps, full=options.full), to_file=options.to_file)


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


def render_tiling(result: RunResult, options: Options, block_size: int) -> Document:
    """`run --block-size`: the run's JSON with each head's "tiling" added, or the tiling report in any other format."""
    from attncli.document import stages
    from attncli.walkthroughs.online_report import tiling_report, tilings

    s = result.scenario
    heads = options.heads or list(range(1, s.heads + 1))
    tiled = tilings(result, heads, block_size)
    if options.format is Format.json:
        from attncli.formats import jsonout
        from attncli.walkthroughs import data

        doc = data.run_json(result, options.stages or stages.STAGE_NAMES, heads)
        for entry, head in zip(doc["heads"], heads):
            entry["tiling"] = data.tiling_json(tiled[head], result.head(head).output)
        return jsonout.document(doc)
    from attncli.formats import report

    p = decimals(options.precision, s.precision, result.round_steps)
    return report.render(tiling_report(result, tiled, precision=p, full=options.full), options.format.value, to_file=options.to_file)


def render_decode(dec: Decode, options: Options, *, made_causal: bool) -> Document:
    """`attncli decode`: the attncli.decode/1 JSON, or the step-by-step report in any other format."""
    if options.format is Format.json:
        from attncli.formats import jsonout
        from attncli.walkthroughs import data

        return jsonout.document(data.decode_json(dec))
    from attncli.formats import report
    from attncli.walkthroughs.online_report import decode_report

    p = decimals(options.precision, dec.scenario.precision, dec.result.round_steps)
    rep = decode_report(dec, precision=p, full=options.full, made_causal=made_causal)
    return report.render(rep, options.format.value, to_file=options.to_file)
