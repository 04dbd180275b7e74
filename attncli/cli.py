"""The command line: thin commands that load a scenario, run the engine and hand the result to a renderer.

Heavy modules (numpy, yaml, the renderers) are imported inside the commands that use them,
so `attncli --help`, `--version` and `attncli scenarios` start instantly.
"""

from __future__ import annotations

import enum
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer

from attncli import __version__, builtin
from attncli.errors import AttnError, ExitStatus
from attncli.output import emit, print_error

app = typer.Typer(
    name="attncli",
    help="Worked examples of transformer self-attention: every stage of softmax(mask(Q·Kᵀ/√d_k))·V, with real numbers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
scenarios_app = typer.Typer(help="List the built-in scenarios, or print one to copy and edit.")
app.add_typer(scenarios_app, name="scenarios")


class Format(str, enum.Enum):
    table = "table"
    json = "json"


def _complete_scenario(incomplete: str) -> list[str]:
    return [name for name in builtin.names() if name.startswith(incomplete)]


# Options shared by the commands that print data, declared once.
PrecisionOption = Annotated[
    Optional[int],
    typer.Option(min=0, max=15, help="Decimals shown in tables and narration [default: the scenario's `precision`, else 4]. JSON always carries full precision."),
]
HeadOption = Annotated[Optional[int], typer.Option(min=1, help="Show only this head, counted from 1.")]
RoundOption = Annotated[
    Optional[int],
    typer.Option(
        "--round-steps",
        min=0,
        max=15,
        metavar="N",
        help="Round every intermediate value to N decimals before the next step uses it, as a hand calculation does; the exact result is shown beside it.",
    ),
]
FormatOption = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]
OutputOption = Annotated[
    Optional[Path],
    typer.Option("--output", "-o", help="Write to this file (atomically) instead of stdout.", dir_okay=False),
]
MaxCellsOption = Annotated[
    Optional[int],
    typer.Option("--max-cells", min=1, help="Refuse scenarios with more attention cells (heads × tokens²) than this [default: 16,777,216]."),
]
MaxValuesOption = Annotated[
    Optional[int],
    typer.Option("--max-values", min=1, help="Refuse YAML files with more values than this, aliases expanded [default: 2,000,000]."),
]

F = TypeVar("F", bound=Callable[..., Any])


def guard(command: F) -> F:
    """The one error path: a domain error becomes one line on stderr and a non-zero exit."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except AttnError as error:
            if _traceback_wanted():
                raise
            print_error(error)
            raise typer.Exit(ExitStatus.ERROR) from None
        except KeyboardInterrupt:
            sys.stderr.write("attncli: interrupted\n")
            raise typer.Exit(ExitStatus.INTERRUPTED) from None
        except BrokenPipeError:
            _silence_stdout()
            raise typer.Exit(ExitStatus.BROKEN_PIPE) from None

    return wrapper  # type: ignore[return-value]


def _traceback_wanted() -> bool:
    return os.environ.get("ATTNCLI_TRACEBACK", "") not in ("", "0")


def _silence_stdout() -> None:
    """After the reader of a pipe went away, send what is left to /dev/null so Python exits quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _version(value: bool) -> None:
    if value:
        typer.echo(f"attncli {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    traceback: Annotated[
        bool, typer.Option("--traceback", help="Show a Python traceback for errors (also ATTNCLI_TRACEBACK=1).")
    ] = False,
) -> None:
    if traceback:
        os.environ["ATTNCLI_TRACEBACK"] = "1"


@app.command()
@guard
def run(
    scenario: Annotated[
        str,
        typer.Argument(
            help="A scenario file, or the name of a built-in scenario (see `attncli scenarios`).",
            autocompletion=_complete_scenario,
        ),
    ],
    stages: Annotated[
        Optional[str],
        typer.Option(help="Comma list of stages to show: embeddings, q, k, v, scores, scaled, masked, exp, weights, output [default: all]."),
    ] = None,
    head: HeadOption = None,
    precision: PrecisionOption = None,
    format: FormatOption = Format.table,
    round_steps: RoundOption = None,
    full: Annotated[bool, typer.Option("--full", help="Show every row and column, however large.")] = False,
    output: OutputOption = None,
    max_cells: MaxCellsOption = None,
    max_values: MaxValuesOption = None,
) -> None:
    """Compute every stage of attention for a scenario and print it as tables or JSON.

    \b
    Examples:
      attncli run cat
      attncli run journey-causal --stages scores,masked,weights
      attncli run my-scenario.yaml --format json | jq '.heads[0].weights'
      attncli run cat --round-steps 3
    """
    from attncli import engine, views
    from attncli.scenario import load

    loaded = load(scenario, limits=_limits(max_cells, max_values))
    heads = _heads(loaded.heads, head)
    result = engine.run(loaded, round_steps=round_steps)
    chosen = views.parse_stages(stages)
    if format is Format.json:
        from attncli.render import jsonout

        emit(jsonout.dumps(jsonout.run_json(result, chosen or views.STAGES, heads)), output)
        return
    from attncli.output import console, render
    from attncli.render.tables import run_tables

    con = console(to_file=output is not None)
    shown = views.views(result, chosen or views.default_table_stages(result), heads)
    emit(render(con, run_tables(result, shown, precision=_precision(precision, loaded), console=con, full=full)), output)


@app.command()
@guard
def explain(
    word: Annotated[Optional[str], typer.Option("--word", "-w", help="The query word to follow (case is ignored unless the scenario is case-sensitive).")] = None,
    scenario: Annotated[
        str,
        typer.Option("--scenario", "-s", help="A scenario file or built-in name.", autocompletion=_complete_scenario),
    ] = "cat",
    position: Annotated[Optional[int], typer.Option(min=1, help="Which occurrence: the word's position, counted from 1.")] = None,
    head: Annotated[int, typer.Option(min=1, help="The head to explain, counted from 1.")] = 1,
    precision: PrecisionOption = None,
    round_steps: RoundOption = None,
    format: FormatOption = Format.table,
    output: OutputOption = None,
    max_cells: MaxCellsOption = None,
    max_values: MaxValuesOption = None,
) -> None:
    """Follow one word through the arithmetic, step by step, like a hand calculation.

    \b
    Examples:
      attncli explain --word cat                   # seed 001's walk-through, exact
      attncli explain --word cat --round-steps 3   # ... with the article's hand rounding: [1.066, 0.398]
      attncli explain -s journey-causal --word starts
      attncli explain -s multihead --word sat --head 2
      attncli explain -s my.yaml --word the --position 5 --format json
    """
    from attncli import engine
    from attncli.explain import explain as explain_word
    from attncli.explain import find_word
    from attncli.scenario import load

    loaded = load(scenario, limits=_limits(max_cells, max_values))
    _heads(loaded.heads, head)
    where, others = find_word(loaded, word, position)
    expl = explain_word(engine.run(loaded, round_steps=round_steps), position=where, head=head, others=others)
    if format is Format.json:
        from attncli.render import jsonout

        emit(jsonout.dumps(jsonout.explain_json(expl)), output)
        return
    from attncli.output import console, render
    from attncli.render.narration import explain_renderables

    con = console(to_file=output is not None)
    emit(render(con, explain_renderables(expl, precision=_precision(precision, loaded))), output)


@scenarios_app.callback(invoke_without_command=True)
def scenarios(ctx: typer.Context) -> None:
    """List the built-in scenarios. Any of them can be used by name: `attncli run cat`."""
    if ctx.invoked_subcommand is not None:
        return
    names = builtin.names()
    width = max(map(len, names))
    lines = [f"{name:<{width}}  {_description(name)}" for name in names]
    emit("\n".join(lines) + "\n\nPrint one with `attncli scenarios show NAME`, e.g. to copy and edit it.\n")


@scenarios_app.command("show")
@guard
def scenarios_show(
    name: Annotated[str, typer.Argument(help="A built-in scenario's name.", autocompletion=_complete_scenario)],
) -> None:
    """Print a built-in scenario's YAML, e.g. `attncli scenarios show cat > my.yaml` to start your own."""
    if not builtin.exists(name):
        raise AttnError(f"no built-in scenario {name!r}", expected="one of: " + ", ".join(builtin.names()))
    emit(builtin.path(name).read_text(encoding="utf-8"))


def _description(name: str) -> str:
    """The `description:` line of a built-in scenario, read without a YAML parser (start-up stays fast)."""
    for line in builtin.path(name).read_text(encoding="utf-8").splitlines():
        if line.startswith("description:"):
            return line.partition(":")[2].strip().strip("\"'")
    return ""


def _heads(count: int, head: int | None) -> list[int]:
    if head is None:
        return list(range(1, count + 1))
    if head > count:
        raise AttnError(
            f"head {head} does not exist: the scenario has {count} head{'s' if count > 1 else ''}",
            key="--head",
            expected=f"a head from 1 to {count}",
        )
    return [head]


def _precision(option: int | None, scenario: Any) -> int:
    return scenario.precision if option is None else option


def _limits(max_cells: int | None, max_values: int | None) -> Any:
    from attncli.limits import Limits

    given = {"max_cells": max_cells, "max_values": max_values}
    return Limits(**{name: value for name, value in given.items() if value is not None})


def main() -> None:
    """Entry point of the `attncli` command and of `python -m attncli`."""
    app(prog_name="attncli")
