"""The command line: thin commands that load a scenario, run the engine and hand the result to a renderer.

Heavy modules (numpy, yaml, the renderers) are imported inside the commands that use them,
so `attncli --help`, `--version` and `attncli scenarios` start instantly.
"""

# No `from __future__ import annotations` here: Typer would then eval() every option's
# annotation string on each run; evaluated once at import they cost nothing more.
import contextlib
import functools
import io
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from typer._types import TyperChoice  # the Choice Typer makes of an Enum (typer is pinned below 0.29)

from attncli import __version__
from attncli.errors import AttnError, ExitStatus, did_you_mean, visible
from attncli.formats import Format, Options
from attncli.io import check_binary_target, check_target, emit, print_error, print_internal_error, print_line, silence_stdout
from attncli.sources import builtin

if TYPE_CHECKING:
    from attncli.sources.limits import Limits

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
model_app = typer.Typer(
    help="Look into a local model (a Hugging Face checkpoint folder, a GGUF file, or ollama:NAME): its architecture, how it tokenizes a text, how its quantised weights become numbers, and whether attncli matches transformers on it.",
    no_args_is_help=True,
)
app.add_typer(model_app, name="model")


def _complete_scenario(incomplete: str) -> list[str]:
    return [name for name in builtin.names() if name.startswith(incomplete)]


# Options shared by the commands that print data, declared once.
PrecisionOption = Annotated[
    int | None,
    typer.Option(min=0, max=15, metavar="N", help="Decimals shown in tables and narration [default: the scenario's `precision`, else 4]. JSON always carries full precision."),
]
HeadsPrecisionOption = Annotated[  # the map's own defaults: it shows statistics and weights, not a scenario's arithmetic
    int | None,
    typer.Option("--precision", min=0, max=15, metavar="N", help="Decimals shown in the tables [default: 3; 2 with --word]; the readings and tooltips say percentages and two decimals. JSON always carries full precision."),
]
HeadOption = Annotated[int | None, typer.Option(min=1, metavar="N", help="Show only this head, counted from 1.")]
RoundOption = Annotated[
    int | None,
    typer.Option(
        "--round-steps",
        min=0,
        max=15,
        metavar="N",
        help="Round every intermediate value to N decimals before the next step uses it, as a hand calculation does; the exact result is shown beside it.",
    ),
]
FORMATS = ", ".join(f.value for f in list(Format)[:-1]) + " or " + list(Format)[-1].value  # every format, as `--help` names them


class ChoiceWithHint(TyperChoice[str]):
    """Typer's choice of a closed set, whose refusal ends with attncli's "did you mean" (errors.did_you_mean), as every other closed choice's."""

    def get_invalid_choice_message(self, value: Any, ctx: Any) -> str:
        message = super().get_invalid_choice_message(value, ctx)
        hint = did_you_mean(value, map(str, self.choices)) if isinstance(value, str) else ""
        return message.removesuffix(".") + hint if hint else message


FORMAT_CHOICE = ChoiceWithHint([f.value for f in Format])  # --format of every command: Typer turns the value into a Format
FormatOption = Annotated[Format, typer.Option("--format", "-f", metavar="FORMAT", click_type=FORMAT_CHOICE, help=f"Output format: {FORMATS}.")]
OutputOption = Annotated[
    Path | None,
    typer.Option("--output", "-o", metavar="FILE", help="Write to this file (atomically) instead of stdout."),
]  # not dir_okay=False: Click would refuse a folder with its usage status 2; output.write_file refuses it with status 1
ForceOption = Annotated[bool, typer.Option("--force", help="With --output: replace the file even if it is read-only.")]
MaxCellsOption = Annotated[
    int | None,
    typer.Option("--max-cells", min=1, metavar="N", help="Refuse scenarios with more attention cells (heads × tokens²), or a weight matrix attncli builds (an identity: d_model²) with more numbers, than this [default: 16,777,216]."),
]
MaxValuesOption = Annotated[
    int | None,
    typer.Option("--max-values", min=1, metavar="N", help="Refuse YAML files with more values than this, aliases expanded [default: 2,000,000]."),
]

StandaloneOption = Annotated[
    bool | None,
    typer.Option(
        "--standalone/--fragment",
        help="HTML, LaTeX and Typst: a complete document (an HTML page, a LaTeX article that compiles, a Typst document with its page set) or a fragment to paste into a post or #include [default: HTML a page, LaTeX and Typst a fragment].",
        show_default=False,
    ),
]
HeadingOption = Annotated[
    int,
    typer.Option("--heading-level", min=0, max=6, metavar="N", help="Markdown, HTML and Typst: the level of the top heading; 0 leaves it out."),
]
FullOption = Annotated[bool, typer.Option("--full", help="Show every row and column, however large.")]
ShowPathOption = Annotated[
    bool,
    typer.Option("--show-path", help="With a model: name the folder or file it was read from in the header (a post names the model only, by its GGUF general.name or its folder's name)."),
]
LongNotesOption = Annotated[
    bool,
    typer.Option("--long-notes", help="With a model: every note on how its layer was read in the header (norms, RoPE, storage, token ids); without it the header says how many are left out."),
]
# Real models: one layer of a local Hugging Face checkpoint instead of a scenario file (run, explain).
ModelOption = Annotated[
    Path | None,
    typer.Option(
        "--model",
        metavar="MODEL",
        help="A local model instead of a scenario: a Hugging Face checkpoint folder (config.json, *.safetensors, tokenizer.json), a GGUF file or a folder holding one, or ollama:NAME[:TAG] from Ollama's store; never downloads.",
    ),
]
LayerOption = Annotated[int | None, typer.Option("--layer", metavar="N", help="With --model: the layer to show, counted from 1.")]
SentenceOption = Annotated[str | None, typer.Option("--sentence", metavar="TEXT", help="With --model: the text, tokenized by the checkpoint's own tokenizer.json.")]
SpecialTokensOption = Annotated[
    str, typer.Option("--special-tokens", metavar="MODE", help="With --model: auto (as the tokenizer adds them, e.g. [CLS] … [SEP]) or none.")
]
TargetOption = Annotated[
    str | None,
    typer.Option(
        "--target", metavar="TEXT",
        help="With --model of an encoder–decoder (BART): the text the decoder has produced so far; --sentence is then the source.",
    ),
]  # fmt: skip
AttentionOption = Annotated[
    str | None,
    typer.Option(
        "--attention", metavar="WHICH",
        help="With --model of an encoder–decoder: encoder, decoder (its causal self-attention) or cross (the decoder reading the encoder's output) [default: cross with --target, else encoder].",
    ),
]  # fmt: skip
BlockOption = Annotated[
    int | None,
    typer.Option("--block-size", min=1, metavar="B", help="FlashAttention's online softmax: take the keys B at a time, with a running maximum, sum and output."),
]

DtypeOption = Annotated[
    str | None,
    typer.Option(
        "--dtype",
        metavar="bf16|fp16|fp32",
        help="Compute the heads in bfloat16, float16 or float32 as a real kernel does (--kernel), each step beside the exact value with its "
        "error and where it comes from (the inputs' rounding, the step's own, overflow, underflow).",
    ),
]
KernelOption = Annotated[
    str | None,
    typer.Option(
        "--kernel",
        metavar="eager|sdpa|flash|naive",
        help="With --dtype, whose order of operations and roundings: torch's eager attention (default), SDPA's math backend, "
        "FlashAttention's float32 accumulators (the default with --block-size, its keys a block), as torch runs them on a CPU; or naive: "
        "every product, sum, exponential and division in the format, no float32.",
    ),
]

def _check_dtype(dtype: str | None, round_steps: int | None) -> str:
    """The --dtype given; --kernel without it, or it beside --round-steps: one error each."""
    if dtype is None:
        raise AttnError("--kernel says how a --dtype run computes, and no --dtype is given", key="--kernel", expected="--dtype bf16, fp16 or fp32 beside it")
    if round_steps is not None:
        raise AttnError("--round-steps rounds to decimals, --dtype to a number format", key="--round-steps", expected="one of them")
    return dtype


F = TypeVar("F", bound=Callable[..., Any])


def flag(name: str) -> str:
    """The command line's name of the option `name` (a Python keyword): Typer's own rule, round_steps → --round-steps."""
    return "--" + name.replace("_", "-")


def show_error(error: AttnError | str) -> None:
    """The one error line on stderr, options named as flags."""
    print_error(error, flag)


def guard(command: F) -> F:
    """The one error path: a domain error becomes one line on stderr and a non-zero exit; so does anything else, with no traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from attncli.sources import reading

        reading.forget_files_read()  # a new command: no output path is an input yet
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except AttnError as error:
            if _traceback_wanted():
                raise
            show_error(error)
            raise typer.Exit(ExitStatus.ERROR) from None
        except KeyboardInterrupt:
            print_line("attncli: interrupted")
            raise typer.Exit(ExitStatus.INTERRUPTED) from None
        except BrokenPipeError:
            _silence_stdout()
            raise typer.Exit(ExitStatus.BROKEN_PIPE) from None
        except (OSError, MemoryError) as error:  # the system refused: a file, a name, memory; not a bug of attncli
            if _traceback_wanted():
                raise
            problem = reading.os_error(error) if isinstance(error, OSError) else AttnError("out of memory", expected="a smaller scenario")
            show_error(problem)
            raise typer.Exit(ExitStatus.ERROR) from None
        except Exception as error:
            if _traceback_wanted():
                raise
            print_internal_error(error, flag)
            raise typer.Exit(ExitStatus.INTERNAL) from None

    return wrapper  # type: ignore[return-value]


_traceback_asked = False  # --traceback of the command line being run: set by its callback on every run, never left in os.environ


def _traceback_wanted() -> bool:
    """--traceback on this command line or ATTNCLI_TRACEBACK=1 (the flag once went into os.environ, where it outlived the command)."""
    return _traceback_asked or os.environ.get("ATTNCLI_TRACEBACK", "") not in ("", "0")


def _silence_stdout() -> None:
    """After the reader of a pipe went away, send what is left to /dev/null so Python exits quietly."""
    silence_stdout()


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
    global _traceback_asked
    _traceback_asked = traceback


@app.command()
@guard
def run(
    ctx: typer.Context,
    scenario: Annotated[
        str | None,
        typer.Argument(
            metavar="[SCENARIO]",
            help="A scenario file, or the name of a built-in scenario (see `attncli scenarios`); or give --model instead.",
            autocompletion=_complete_scenario,
            show_default=False,
        ),
    ] = None,
    model: ModelOption = None,
    layer: LayerOption = None,
    sentence: SentenceOption = None,
    special_tokens: SpecialTokensOption = "auto",
    target: TargetOption = None,
    attention: AttentionOption = None,
    stages: Annotated[
        str | None,
        typer.Option(metavar="LIST", help="Comma list of stages to show: embeddings, q, k, v, scores, scaled, exp, weights, output, and each mechanism's own (masked, rope, bias, softcap, …; a wrong name lists every one) [default: those that change something]."),
    ] = None,
    head: HeadOption = None,
    precision: PrecisionOption = None,
    format: FormatOption = Format.table,
    round_steps: RoundOption = None,
    full: FullOption = False,
    heatmap: Annotated[
        bool, typer.Option("--heatmap", help="Shade every tokens × tokens table by value (the weights are shaded anyway in a terminal and in Typst).")
    ] = False,
    standalone: StandaloneOption = None,
    heading_level: HeadingOption = 1,
    show_path: ShowPathOption = False,
    long_notes: LongNotesOption = False,
    block_size: Annotated[
        int | None,
        typer.Option("--block-size", min=1, metavar="B", help="Show FlashAttention's tiled computation instead: queries and keys B at a time, each tile's running maxima and sums, and the memory it needs."),
    ] = None,
    dtype: DtypeOption = None,
    kernel: KernelOption = None,
    output: OutputOption = None,
    force: ForceOption = False,
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
      attncli run --model models/gpt2 --layer 5 --sentence "When Mary and John went to the store" --head 3
      attncli run journey-causal --block-size 2
      attncli run journey-causal --dtype fp16      # each step as torch computes it in float16, beside the exact value
    """
    from attncli import api
    from attncli.cli.model import choose_scenario
    from attncli.document import stages as stage_table

    if scenario is None and model is None:  # a malformed command line: Click's usage error, status 2
        ctx.fail("Missing argument 'SCENARIO' (or --model DIR --layer N --sentence TEXT).")
    loaded = choose_scenario(
        scenario, model=model, layer=layer, sentence=sentence, special_tokens=special_tokens, head=head, limits=_limits(max_cells, max_values),
        target=target, attention=attention, head_only=block_size is None,
    )  # fmt: skip
    options = Options(
        format=format,
        stages=stage_table.parse(stages),
        heads=loaded.head_numbers(head),
        precision=precision,
        full=full,
        to_file=output is not None,
        heatmap=heatmap,
        standalone=standalone,
        heading_level=heading_level,
        show_path=show_path,
        long_notes=long_notes,
        names=flag,
    )
    if dtype is not None or kernel is not None:
        emit(api.in_dtype(loaded, _check_dtype(dtype, round_steps), kernel=kernel, block_size=block_size, head=head).document(options), output, force=force)
        return
    if block_size is None:  # --head: the other heads are computed for the output alone, their tokens × tokens stages not kept
        shown: api.Ran | api.Tiled = api.run(loaded, round_steps=round_steps, heads=None if head is None else [head])
    else:
        shown = api.tiles(loaded, block_size, round_steps=round_steps)
    emit(shown.document(options), output, force=force)


@app.command()
@guard
def explain(
    scenario_argument: Annotated[
        str | None,
        typer.Argument(
            metavar="[SCENARIO]",
            help="The scenario, as for `run` (the same as --scenario).",
            autocompletion=_complete_scenario,
            show_default=False,
        ),
    ] = None,
    word: Annotated[str | None, typer.Option("--word", "-w", metavar="WORD", help="The query word to follow (case is ignored unless the scenario is case-sensitive).")] = None,
    scenario: Annotated[
        str | None,
        typer.Option("--scenario", "-s", metavar="SCENARIO", help="A scenario file or built-in name [default: cat].", autocompletion=_complete_scenario),
    ] = None,
    model: ModelOption = None,
    layer: LayerOption = None,
    sentence: SentenceOption = None,
    special_tokens: SpecialTokensOption = "auto",
    target: TargetOption = None,
    attention: AttentionOption = None,
    position: Annotated[int | None, typer.Option(min=1, metavar="N", help="Which occurrence: the word's position, counted from 1 as the tables count it (after a given KV cache's keys).")] = None,
    head: Annotated[int, typer.Option(min=1, metavar="N", help="The head to explain, counted from 1.")] = 1,
    precision: PrecisionOption = None,
    round_steps: RoundOption = None,
    block_size: BlockOption = None,
    dtype: DtypeOption = None,
    kernel: KernelOption = None,
    format: FormatOption = Format.table,
    full: Annotated[bool, typer.Option("--full", help="Show every term of every sum, every key and every matrix, however long.")] = False,
    lens: Annotated[
        bool,
        typer.Option("--lens/--no-lens", help="With --model (a Llama-like decoder): what the head's output promotes (direct logit attribution) "
                     "and the logit lens at the word; one more pass through every layer and the unembedding."),
    ] = True,
    standalone: StandaloneOption = None,
    heading_level: HeadingOption = 1,
    output: OutputOption = None,
    force: ForceOption = False,
    max_cells: MaxCellsOption = None,
    max_values: MaxValuesOption = None,
) -> None:
    """Follow one word through the arithmetic, step by step, like a hand calculation.

    \b
    Examples:
      attncli explain --word cat                   # the Q, K, V guide's walk-through, exact
      attncli explain --word cat --round-steps 3   # ... with the guide's hand rounding: [1.066, 0.398]
      attncli explain journey-causal --word starts   # the scenario as for run, or with -s
      attncli explain -s multihead --word sat --head 2
      attncli explain -s my.yaml --word the --position 5 --format json
      attncli explain --model models/gpt2 --layer 5 --sentence "When Mary and John went to the store" --word Mary --head 3
      attncli explain --word cat --block-size 2    # ... and FlashAttention's online softmax, 2 keys at a time
      attncli explain journey --word starts --dtype bf16   # ... as torch computes it in bfloat16, step by step, beside the exact value
    """
    from attncli import api
    from attncli.cli.model import choose_scenario

    if scenario_argument is not None and scenario is not None:
        raise AttnError(f"both SCENARIO ({scenario_argument!r}) and --scenario ({scenario!r}) are given", key="--scenario", expected="one of them")
    scenario = scenario or scenario_argument
    loaded = choose_scenario(
        scenario, model=model, layer=layer, sentence=sentence, special_tokens=special_tokens, head=head,
        limits=_limits(max_cells, max_values), scenario_key="--scenario", default="cat", target=target, attention=attention,
    )  # fmt: skip
    if word is not None:
        from attncli.sources.arguments import text_argument

        word = text_argument(word, "--word")
    options = Options(format=format, precision=precision, full=full, to_file=output is not None, standalone=standalone,
                      heading_level=heading_level, names=flag)  # fmt: skip
    if dtype is not None or kernel is not None:
        computed = api.in_dtype(loaded, _check_dtype(dtype, round_steps), kernel=kernel, block_size=block_size, word=word, position=position, head=head)
        emit(computed.document(options), output, force=force)
        return
    explained = api.explain(loaded, word, position=position, head=head, round_steps=round_steps, block_size=block_size, lens=lens)
    emit(explained.document(options), output, force=force)


@app.command()
@guard
def export(
    inputs: Annotated[
        list[str],
        typer.Argument(help="Scenario files, built-in names or folders (each *.yaml and *.yml in them).", metavar="SCENARIO_OR_FOLDER..."),
    ],
    format: Annotated[Format, typer.Option("--format", "-f", metavar="FORMAT", click_type=FORMAT_CHOICE, help=f"Output format of every file: {FORMATS}.")],
    out_dir: Annotated[str, typer.Option("--out-dir", "-d", metavar="DIR", help="The existing folder to write <scenario-stem>.<ext> into.")],  # a str: Click's Path would read "" as "."
    explain_word: Annotated[
        str | None, typer.Option("--explain", metavar="WORD", help="Render the `explain` walk-through of WORD instead of `run`; scenarios without it are skipped.")
    ] = None,
    block_size: Annotated[
        int | None,
        typer.Option("--block-size", min=1, metavar="B", help="As `run --block-size`: FlashAttention's tiling report (with --explain: the online softmax of the word)."),
    ] = None,
    decode: Annotated[bool, typer.Option("--decode", help="As `decode`: generation step by step with a KV cache (of --head, default 1).")] = False,
    stages: Annotated[str | None, typer.Option(metavar="LIST", help="As for `run`: the stages to include (CSV: exactly one).")] = None,
    head: HeadOption = None,
    precision: PrecisionOption = None,
    round_steps: RoundOption = None,
    full: FullOption = False,
    heatmap: Annotated[bool, typer.Option("--heatmap", help="Shade every tokens × tokens table by value (HTML, Typst; tables).")] = False,
    standalone: StandaloneOption = None,
    heading_level: HeadingOption = 1,
    show_path: ShowPathOption = False,
    long_notes: LongNotesOption = False,
    max_cells: MaxCellsOption = None,
    max_values: MaxValuesOption = None,
    force: Annotated[bool, typer.Option("--force", help="Replace files in OUT_DIR even if they are read-only.")] = False,
) -> None:
    """Render many scenarios to files at once: regenerate a blog post's tables after changing a number.

    Writes OUT_DIR/<scenario-file-stem>.<ext> (.md, .tex, .csv, .html, .svg, .json, .txt) for
    each scenario, atomically. The same inputs give byte-identical files. A scenario that fails
    is reported and the others are still written; the exit status is then 3, and 1 if none was written (also when
    every scenario was skipped for lacking the --explain word).

    \b
    Examples:
      attncli export posts/attention/*.yaml --format markdown --out-dir posts/attention/tables
      attncli export scenarios/ --format latex --out-dir build/tex
      attncli export cat journey --explain the --format markdown --out-dir out
      attncli export journey-causal --block-size 2 --format svg --out-dir figures
      attncli export sliding-window --decode --format latex --standalone --out-dir tex
    """
    from attncli.cli.export import export as export_all
    from attncli.cli.export import sources
    from attncli.document import stages as stage_table

    options = Options(format=format, stages=stage_table.parse(stages), precision=precision, full=full, to_file=True, heatmap=heatmap,
                      standalone=standalone, heading_level=heading_level, show_path=show_path, long_notes=long_notes, names=flag)  # fmt: skip
    if not out_dir:
        raise AttnError("the folder name is empty", key="--out-dir", expected="an existing folder, e.g. --out-dir . for this one")
    folder = Path(out_dir)
    names = list(sources(inputs))
    with _progress(len(names), label="Exporting", show=sys.stderr.isatty() and len(names) > 5) as advance:
        report = export_all(
            names,
            out_dir=folder,
            options=options,
            head=head,
            round_steps=round_steps,
            explain_word=explain_word,
            limits=_limits(max_cells, max_values),
            report_error=show_error,
            note=_note,
            advance=lambda: advance(1),
            block_size=block_size,
            decode=decode,
            force=force,
        )
    sys.stderr.write(report.summary(folder, format.value) + "\n")
    if not report.written and (report.failed or report.skipped):  # nothing written: a failure, whatever the reasons
        raise typer.Exit(ExitStatus.ERROR)
    if report.failed:
        raise typer.Exit(ExitStatus.PARTIAL)


@app.command()
@guard
def decode(
    ctx: typer.Context,
    scenario: Annotated[
        str | None,
        typer.Argument(metavar="[SCENARIO]", help="A scenario file or built-in name; or give --model instead.", autocompletion=_complete_scenario, show_default=False),
    ] = None,
    model: ModelOption = None,
    layer: LayerOption = None,
    sentence: SentenceOption = None,
    special_tokens: SpecialTokensOption = "auto",
    target: TargetOption = None,
    attention: AttentionOption = None,
    head: Annotated[int, typer.Option(min=1, metavar="N", help="The head to decode, counted from 1.")] = 1,
    precision: PrecisionOption = None,
    round_steps: RoundOption = None,
    format: FormatOption = Format.table,
    full: Annotated[bool, typer.Option("--full", help="Show every step, cached key and number, however many.")] = False,
    standalone: StandaloneOption = None,
    heading_level: HeadingOption = 1,
    output: OutputOption = None,
    force: ForceOption = False,
    max_cells: MaxCellsOption = None,
    max_values: MaxValuesOption = None,
) -> None:
    """Generate the sentence token by token with a KV cache: each step's q, k and v, the cache, the weights and the output.

    Decoding is causal: a scenario without a causal mask gets one (the output says so).
    Every step's output is row t of the full causal run, to the last digit.

    \b
    Examples:
      attncli decode journey-causal
      attncli decode llama-style --head 3          # RoPE and a shared key/value cache
      attncli decode sliding-window                # keys leave the cache outside the window
      attncli decode cat --format json | jq '.steps[-1].cache.K'
      attncli decode --model models/gpt2 --layer 5 --sentence "When Mary and John went" --head 3
    """
    from attncli import api
    from attncli.cli.model import choose_scenario

    if scenario is None and model is None:  # a malformed command line: Click's usage error, status 2
        ctx.fail("Missing argument 'SCENARIO' (or --model DIR --layer N --sentence TEXT).")
    loaded = choose_scenario(
        scenario, model=model, layer=layer, sentence=sentence, special_tokens=special_tokens, head=head, limits=_limits(max_cells, max_values),
        target=target, attention=attention,
    )  # fmt: skip
    options = Options(format=format, precision=precision, full=full, to_file=output is not None, standalone=standalone,
                      heading_level=heading_level, names=flag)  # fmt: skip
    emit(api.decode(loaded, head=head, round_steps=round_steps).document(options), output, force=force)  # a longrope checkpoint switches itself


@app.command()
@guard
def heads(
    scenario: Annotated[
        str | None,
        typer.Argument(
            metavar="[SCENARIO]",
            help="A scenario file (one with `model:` maps that model) or built-in name; or give --model and --sentence instead.",
            autocompletion=_complete_scenario,
            show_default=False,
        ),
    ] = None,
    model: ModelOption = None,
    sentence: SentenceOption = None,
    special_tokens: SpecialTokensOption = "auto",
    sort: Annotated[
        str | None,
        typer.Option(metavar="STAT", help="Order the heads by this statistic, largest first: entropy, entropy_ratio, max_weight, first_token, previous_token, self, mean_distance (and with --induction: induction_score, previous_token_score, duplicate_token_score)."),
    ] = None,
    top: Annotated[int | None, typer.Option(min=1, metavar="N", help="Show only the first N heads (after --sort).")] = None,
    induction: Annotated[
        int | None,
        typer.Option(min=1, metavar="N", help="With --model: also score every head on N random tokens repeated twice (induction, previous- and duplicate-token scores)."),
    ] = None,
    seed: Annotated[int, typer.Option(min=0, metavar="S", help="With --induction: the random seed of the tokens.")] = 0,
    word: Annotated[str | None, typer.Option("--word", "-w", metavar="WORD", help="Instead of the map: the sentence shaded by the weights this query token gives each token (case is ignored).")] = None,
    position: Annotated[int | None, typer.Option(min=1, metavar="N", help="The query token by its position, counted from 1 (with --word: which occurrence).")] = None,
    layer: Annotated[int | None, typer.Option("--layer", min=1, metavar="N", help="With --word: each head of layer N and their mean [default: every layer's mean].")] = None,
    head: Annotated[int | None, typer.Option(min=1, metavar="N", help="With --word: head N alone (of --layer, or of every layer).")] = None,
    to: Annotated[str | None, typer.Option("--to", metavar="WORD", help="With --word: which heads link it to WORD: every layer and head ranked by the weight the query gives WORD (every occurrence of it), the grid shaded by that weight; --top N names N (default 10).")] = None,
    to_position: Annotated[int | None, typer.Option("--to-position", min=1, metavar="N", help="With --word: the key by its position, counted from 1 (with --to: which occurrence).")] = None,
    compare_model: Annotated[Path | None, typer.Option("--compare-model", metavar="DIR", help="Compare every head with the same heads of this checkpoint (same architecture) on the same sentence, or on --compare-sentence.")] = None,
    compare_sentence: Annotated[str | None, typer.Option("--compare-sentence", metavar="TEXT", help="Compare every head with the same heads on this sentence (as many tokens as --sentence).")] = None,
    precision: HeadsPrecisionOption = None,
    format: Annotated[Format, typer.Option("--format", "-f", metavar="FORMAT", click_type=FORMAT_CHOICE, help="Output format: table (the grid and the statistics), json, markdown (the statistics and readings), csv, svg (the grid), png (the svg drawn), html (a page with both) or typst.")] = Format.table,
    standalone: StandaloneOption = None,
    heading_level: HeadingOption = 1,
    interactive: Annotated[bool, typer.Option("--interactive", help="With --format html: a page to explore, one self-contained file: click a head for its labelled weights, hover over a query's row to shade the sentence, choose a layer and head, light or dark.")] = False,
    output: OutputOption = None,
    force: ForceOption = False,
    max_cells: MaxCellsOption = None,
    max_values: MaxValuesOption = None,
) -> None:
    """The map: every layer and head at a glance, with per-head statistics and the heads worth explaining.

    One forward pass computes every layer's attention. Each head gets its entropy, largest
    weight, weight on the first token (the sink), on the previous token and on itself, and
    its mean attended distance; notable heads get a reading in words and the `explain`
    command that shows their arithmetic. A scenario has one layer: its heads are mapped.
    With --word (or --position), the sentence shaded by what that token attends to instead;
    with --compare-model or --compare-sentence, how much each head's weights change; with
    --word A --to B, which heads link A to B, every layer and head ranked by that weight.

    \b
    Examples:
      attncli heads --model models/gpt2 --sentence "When Mary and John went to the store"
      attncli heads --model models/gpt2 --sentence "The cat sat" --sort previous_token --top 10
      attncli heads --model models/gpt2 --sentence "The cat sat" --induction 20 --sort induction_score
      attncli heads --model models/gpt2 --sentence "The cat sat" --format svg -o heads.svg
      attncli heads --model models/gpt2 --sentence "The cat sat" --format html --interactive -o explore.html
      attncli heads multihead --format json
      attncli heads --model models/gpt2 --sentence "The cat sat" --word sat --layer 5
      attncli heads --model models/gpt2 --sentence "The animal didn't cross the street because it was too tired." --word it --to animal
      attncli heads --model models/gpt2 --sentence "Mary gave John" --compare-sentence "John gave Mary"
    """
    import dataclasses

    from attncli import api
    from attncli.cli.model import explain_command
    from attncli.sources.arguments import text_argument

    check_target(output)  # before the forward pass
    if format is Format.png:
        check_binary_target(output)  # a terminal refuses a PNG: say so before the forward pass
    # bytes that are not UTF-8 are one line here, as for run and explain (the tokenizer's child process failed on them: exit 70)
    sentence, word, compare_sentence, to = (None if text is None else text_argument(text, name)
                                            for text, name in ((sentence, "--sentence"), (word, "--word"), (compare_sentence, "--compare-sentence"), (to, "--to")))  # fmt: skip
    options = Options(format=format, precision=precision, to_file=output is not None, names=flag, interactive=interactive,
                      standalone=standalone, heading_level=heading_level)
    if compare_model is not None or compare_sentence is not None:
        from attncli.errors import AttnError, option

        key = option("compare_model" if compare_model is not None else "compare_sentence")
        if model is None or sentence is None:
            raise AttnError("a comparison needs a model and a sentence", key=key, expected=f"{option('model')} DIR {option('sentence')} TEXT beside it")
        for name, given in (("word", word), ("position", position), ("induction", induction), ("scenario", scenario), ("to", to),
                            ("to_position", to_position)):
            if given is not None:
                raise AttnError(f"{name} cannot be compared", key=key, expected=f"{option('model')}, {option('sentence')}, {option('sort')}, {option('top')} beside it")
        compared = api.compare_heads(model, sentence=sentence, compare_model=compare_model, compare_sentence=compare_sentence,
                                     special_tokens=special_tokens, sort=sort, top=top, limits=_limits(max_cells, max_values))  # fmt: skip
        emit(compared.document(options), output, force=force)
        return
    mapped = api.heads(
        scenario, model=model, sentence=sentence, special_tokens=special_tokens, induction=induction, seed=seed,
        sort=sort, top=top, limits=_limits(max_cells, max_values), word=word, position=position, layer=layer, head=head, to=to,
        to_position=to_position,
    )  # fmt: skip
    emit(dataclasses.replace(mapped, spell=explain_command).document(options), output, force=force)


@app.command()
@guard
def variance(
    dims: Annotated[str, typer.Option(metavar="LIST", help="Comma list of widths d to try.")] = "1,2,8,64,512",
    samples: Annotated[int, typer.Option(min=2, max=10_000_000, metavar="N", help="Random draws per width.")] = 10_000,
    keys: Annotated[int, typer.Option(min=2, max=4096, metavar="L", help="Keys each query is compared with for the largest softmax weight.")] = 16,
    seed: Annotated[int, typer.Option(min=0, metavar="S", help="Random seed: the same seed gives the same numbers.")] = 0,
    format: FormatOption = Format.table,
    standalone: StandaloneOption = None,
    output: OutputOption = None,
    force: ForceOption = False,
) -> None:
    """Why scores are divided by √d_k: the variance of q·k grows with d, and the softmax saturates without scaling.

    For each d, draws q, k ~ N(0, I_d) and reports the mean and variance of q·k and of q·k/√d
    beside the theory (0, d, 1), and the mean largest softmax weight of a query over L random
    keys with and without the scaling.

    \b
    Examples:
      attncli variance
      attncli variance --dims 4,16,256,4096 --samples 50000 --seed 7 --format json
      attncli variance --format markdown -o variance.md
    """
    from attncli import api

    widths = _whole_numbers(dims, "--dims", low=1, high=65_536)
    check_target(output)  # before seconds of sampling
    total = samples * len(widths)
    with _progress(total, label="Sampling", show=sys.stderr.isatty() and samples * keys * sum(widths) > 50_000_000) as advance:
        varied = api.variance(widths, samples=samples, keys=keys, seed=seed, advance=advance)
    emit(varied.document(Options(format, to_file=output is not None, standalone=standalone, names=flag)), output, force=force)


def _note(line: str) -> None:
    """A line of information on stderr (not an error)."""
    sys.stderr.write(line + "\n")


def _whole_numbers(text: str, key: str, *, low: int, high: int) -> list[int]:
    try:
        numbers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        numbers = []
    if not numbers or any(not low <= n <= high for n in numbers):
        raise AttnError(f"found {text!r}", key=key, expected=f"a comma list of whole numbers from {low} to {high}, e.g. 1,2,8,64")
    return numbers


@contextlib.contextmanager
def _progress(total: int, *, label: str, show: bool) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr when `show` (long work, stderr a terminal); yields the function that advances it by n."""
    if not show:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(label, total=total)
        yield lambda n: progress.advance(task, n)


@app.command()
@guard
def schema() -> None:
    """Print the JSON Schema (draft 2020-12) of scenario files, for editors' completion and checking.

    \b
    Save it beside your scenarios and point the YAML language server at it:
      attncli schema > attncli.schema.json
      # first line of a scenario file:
      # yaml-language-server: $schema=./attncli.schema.json
    """
    emit((Path(__file__).parent.parent / "scenario.schema.json").read_text(encoding="utf-8"))


@scenarios_app.callback(invoke_without_command=True)
def scenarios(ctx: typer.Context) -> None:
    """List the built-in scenarios. Any of them can be used by name: `attncli run cat`."""
    if ctx.invoked_subcommand is not None:
        return
    from attncli.formats.wrap import columns, hanging

    listed = builtin.listing()
    width = max(len(name) for name, _ in listed)
    lines = [line for name, description in listed for line in hanging(description, columns(), f"{name:<{width}}  ", " " * (width + 2))]
    lines += ["", *hanging("Print one with `attncli scenarios show NAME`, e.g. to copy and edit it.", columns(), "", "")]
    emit("\n".join(lines) + "\n")


@scenarios_app.command("show")
@guard
def scenarios_show(
    name: Annotated[str, typer.Argument(metavar="NAME", help="A built-in scenario's name.", autocompletion=_complete_scenario)],
) -> None:
    """Print a built-in scenario's YAML to start your own from: attncli scenarios show cat > my.yaml"""
    if not builtin.exists(name):
        close = builtin.closest(name)
        hint = f"; did you mean {close!r}?" if close else ""
        raise AttnError(f"no built-in scenario {name!r}{hint}", expected="one of: " + ", ".join(builtin.names()))
    emit(builtin.path(name).read_text(encoding="utf-8"))


@scenarios_app.command("new")
@guard
def scenarios_new(
    sentence: Annotated[str, typer.Argument(metavar="SENTENCE", help="The sentence; its words become the tokens.")],
    d_model: Annotated[int, typer.Option("--d-model", min=1, max=512, metavar="N", help="Width of each embedding.")] = 4,
    heads: Annotated[int, typer.Option(min=1, max=64, metavar="H", help="Query heads (must divide d_model).")] = 1,
    kv_heads: Annotated[int | None, typer.Option("--kv-heads", min=1, metavar="G", help="Key/value heads for grouped-query attention (must divide H) [default: H].")] = None,
    d_k: Annotated[int | None, typer.Option("--d-k", min=1, max=512, metavar="N", help="Width of each head's queries, keys and values [default: d_model / H].")] = None,
    mask: Annotated[str, typer.Option(metavar="MASK", help="none or causal.")] = "none",
    window: Annotated[int | None, typer.Option(min=0, metavar="N", help="A sliding window: query i sees key j only when |i − j| ≤ N.")] = None,
    sink_tokens: Annotated[int | None, typer.Option("--sink-tokens", min=0, metavar="N", help="With --window: the first N keys stay seen beyond the window (StreamingLLM).")] = None,
    padding: Annotated[str | None, typer.Option(metavar="POSITIONS", help="Key positions hidden from every query, from 1, comma-separated: 5,6.")] = None,
    rope: Annotated[bool, typer.Option("--rope", help="Rotary position embeddings (θ = 10000, rotate-half).")] = False,
    rotary_fraction: Annotated[float | None, typer.Option("--rotary-fraction", metavar="F", help="Partial rotary: RoPE on the first F of each head's coordinates (Pythia 0.25, Phi 0.5); turns RoPE on.")] = None,
    rope_offset: Annotated[int | None, typer.Option("--rope-offset", min=0, metavar="P", help="RoPE position of the first token (as after a prefix of P tokens); turns RoPE on.")] = None,
    qk_norm: Annotated[bool, typer.Option("--qk-norm", help="QK-norm: RMSNorm of each head's q and k before RoPE (Qwen3, Gemma 3), weights about √S.")] = False,
    softcap: Annotated[float | None, typer.Option("--softcap", min=0, metavar="CAP", help="Logit soft-capping: each scaled score s becomes CAP·tanh(s / CAP) (Gemma 2: 50).")] = None,
    sink_logits: Annotated[bool, typer.Option("--sink-logits", help="Learned attention sinks: one random logit per head joins each softmax's sum (gpt-oss).")] = False,
    mla: Annotated[bool, typer.Option("--mla", help="Multi-head latent attention (DeepSeek) instead of W_Q, W_K, W_V: keys and values from one latent per token, position on a shared rotary key part of d_r = d_k / 2 (even, at least 2), which --rope turns.")] = False,
    latent: Annotated[int | None, typer.Option("--latent", min=1, max=512, metavar="N", help="MLA's latent width d_c (kv_lora_rank) [default: d_model / 2]; turns --mla on.")] = None,
    sharpness: Annotated[
        float,
        typer.Option(
            min=0.01, max=100, metavar="S",
            help="Typical size of the scaled scores: 1 gives soft rows near uniform, 3–5 a pattern seen at once (weights drawn with spread √(S / d_model)).",
        ),
    ] = 1.0,  # fmt: skip
    seed: Annotated[int, typer.Option(min=0, metavar="S", help="Random seed: the same seed gives the same file.")] = 0,
) -> None:
    """Print a new scenario with random weights (two decimals, reproducible by seed) to run and edit.

    \b
    Examples:
      attncli scenarios new "The cat sat on the mat" --d-model 4 > mine.yaml
      attncli scenarios new "Llamas like grass" --d-model 8 --heads 4 --kv-heads 2 --mask causal --rope --seed 7
      attncli scenarios new "one two three four five six" --d-model 8 --mask causal --window 2 --sink-tokens 1 --sharpness 4
      attncli scenarios new "a b c d" --d-model 8 --heads 2 --mask causal --qk-norm --softcap 5 --sink-logits --rotary-fraction 0.5 --rope-offset 100
      attncli scenarios new "the cat sat down" --d-model 4 --heads 2 --mask causal --mla --rope
    """
    from attncli.sources.arguments import text_argument
    from attncli.sources.generator import new_scenario

    sentence = text_argument(sentence, "SENTENCE")
    if mask not in ("none", "causal"):
        raise AttnError(f"found {mask!r}{did_you_mean(mask, ('none', 'causal'))}", key="--mask", expected="none or causal, with --window, --sink-tokens and --padding for the rest")
    emit(
        new_scenario(
            sentence, d_model=d_model, heads=heads, kv_heads=kv_heads, d_k=d_k, causal=mask == "causal", window=window,
            sink_tokens=sink_tokens, padding=_positions(padding), rope=rope, rotary_fraction=rotary_fraction, rope_offset=rope_offset,
            qk_norm=qk_norm, softcap=softcap, sink_logits=sink_logits, mla=mla, latent=latent, sharpness=sharpness, seed=seed,
        )
    )  # fmt: skip


def _positions(text: str | None) -> tuple[int, ...]:
    """--padding's "5,6" as positions from 1."""
    if text is None:
        return ()
    try:
        parts = [part.strip() for part in text.split(",")]
        if not all(part.isascii() and part.isdigit() for part in parts):  # int() also takes '٣' and '1_0'
            raise ValueError(text)
        positions = tuple(int(part) for part in parts)
    except ValueError:
        raise AttnError(f"found {visible(text)!r}", key="--padding", expected="positions from 1, comma-separated, such as 5,6") from None
    if min(positions) < 1:
        raise AttnError(f"found position {min(positions)}", key="--padding", expected="positions counted from 1")
    return positions


@model_app.command("info")
@guard
def model_info(
    folder: Annotated[Path, typer.Argument(metavar="MODEL", help="A Hugging Face checkpoint folder, a GGUF file, or ollama:NAME[:TAG].")],
    format: FormatOption = Format.table,
) -> None:
    """What a checkpoint holds: architecture, layers, heads and key/value heads, sizes, positions, RoPE, dtype, and whether attncli reads it.

    \b
    Example:
      attncli model info models/gpt2
      attncli model info smollm2-135m-instruct-q4_1.gguf
    """
    import dataclasses

    import attncli.api as attn
    from attncli.cli.model import run_usage

    emit(dataclasses.replace(attn.model_info(folder), usage=run_usage).document(Options(format, names=flag)))


@model_app.command("tokens")
@guard
def model_tokens(
    folder: Annotated[Path, typer.Argument(metavar="MODEL", help="A Hugging Face checkpoint folder, a GGUF file, or ollama:NAME[:TAG].")],
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The text to tokenize.")],
    special_tokens: SpecialTokensOption = "auto",
    format: FormatOption = Format.table,
) -> None:
    """How the checkpoint's tokenizer.json splits TEXT: each token's position (from 1), id, label and piece.

    \b
    Example:
      attncli model tokens models/gpt2 "When Mary and John went to the store"
    """
    import attncli.api as attn
    from attncli.sources.arguments import text_argument

    text = text_argument(text, "TEXT")  # the positional argument by its name: the API would name its keyword, shown as --text
    emit(attn.model_tokens(folder, text, special_tokens=special_tokens).document(Options(format, names=flag)))


@model_app.command("dequant")
@guard
def model_dequant(
    model: Annotated[Path, typer.Argument(metavar="MODEL", help="A GGUF file, a folder holding one, or ollama:NAME[:TAG].")],
    tensor: Annotated[str, typer.Argument(metavar="TENSOR", help="A tensor as the file names it, e.g. blk.0.attn_q.weight (see `attncli model info`).")],
    block: Annotated[int, typer.Option("--block", min=1, metavar="N", help="The block to take apart, counted from 1 along the stored rows.")] = 1,
    format: FormatOption = Format.table,
    output: OutputOption = None,
    force: ForceOption = False,
) -> None:
    """How one block of a quantised tensor becomes numbers: the stored scales and minimums, the packed codes, each weight rebuilt exactly.

    \b
    Examples:
      attncli model dequant model.gguf blk.0.attn_q.weight
      attncli model dequant model.gguf blk.5.ffn_down.weight --block 3 --format markdown
    """
    from attncli.cli.model import dequant_document

    emit(dequant_document(model, tensor, block=block, fmt=format.value, to_file=output is not None), output, force=force)


@model_app.command("cache")
@guard
def model_cache(
    clear: Annotated[bool, typer.Option("--clear", help="Remove everything cached (each is read again from its file when next needed).")] = False,
) -> None:
    """Where attncli caches what it reads from checkpoints (GGUF tokenizers and headers, sentences' tokens), and how much; --clear empties it.

    A GGUF file's tokenizer is built from its metadata once and kept, checked against the file at every use (its size,
    modification time and a hash of its header): a changed file is read again. Kept and checked the same way: each GGUF
    file's walked header, and the tokens of the last 512 sentences tokenized (by a GGUF file, or by a folder's
    tokenizer.json, named by a hash of its bytes), so that running a sentence again needs no tokenizer. The folder is
    $ATTNCLI_CACHE_DIR, else $XDG_CACHE_HOME/attncli, else ~/.cache/attncli; deleting it is as good as --clear.

    \b
    Examples:
      attncli model cache
      attncli model cache --clear
    """
    from attncli.sources.checkpoints import token_cache

    folder = token_cache.cache_dir()

    def counted(tokenizers: int, sentences: int, headers: int) -> str:
        return (f"{tokenizers} cached tokenizer{'' if tokenizers == 1 else 's'}, the tokens of {sentences} sentence{'' if sentences == 1 else 's'} "
                f"and {headers} file header{'' if headers == 1 else 's'}")  # fmt: skip

    if clear:
        *removed, freed = token_cache.clear()
        print_line(f"{folder}: removed {counted(*removed)} ({freed:,} bytes)")
        return
    found, sentences, headers = token_cache.entries(), token_cache.sentence_entries(), token_cache.header_entries()
    size = sum(p.stat().st_size for p in [*found, *sentences, *headers] if p.exists())
    print_line(f"{folder}: {counted(len(found), len(sentences), len(headers))} ({size:,} bytes)")


@model_app.command("verify")
@guard
def model_verify(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="A local Hugging Face checkpoint folder (a GGUF file is not verified: transformers' GGUF reader is no reference for it; verify the folder it was converted from).")],
    sentence: Annotated[str, typer.Option("--sentence", metavar="TEXT", help="The text both run on.")],
    layer: Annotated[int | None, typer.Option("--layer", metavar="N", help="Only layer N (from 1) [default: every layer].")] = None,
    special_tokens: SpecialTokensOption = "auto",
    format: Annotated[Format, typer.Option("--format", "-f", metavar="FORMAT", click_type=FORMAT_CHOICE, help="table or json.")] = Format.table,
    target: Annotated[
        str | None,
        typer.Option("--target", metavar="TEXT", help="For an encoder–decoder (BART), needed: the text the decoder has produced so far; --sentence is the source. Its encoder, decoder and cross attentions are all compared."),
    ] = None,
) -> None:
    """Run transformers (eager attention, float64) beside attncli: per layer and head, the largest difference of the weights and of the head's output, and the bound expected.

    Needs torch and transformers (pip install torch==2.13.0 transformers); exits 1 when a head is outside its bound.

    \b
    Example:
      attncli model verify models/gpt2 --sentence "When Mary and John went to the store" --layer 5
    """
    from attncli.cli.verify import verify_document
    from attncli.sources.arguments import text_argument

    document, within = verify_document(
        folder, sentence=sentence, layer=layer, special_tokens=special_tokens, as_json=_table_or_json(format),
        target=None if target is None else text_argument(target, "--target"),
    )  # fmt: skip
    emit(document)
    if not within:
        print_line("attncli: some heads differ from transformers by more than the bound (see the table)")
        raise typer.Exit(ExitStatus.ERROR)


def _table_or_json(format: Format) -> bool:
    """True for json; table is False; any other format is refused."""
    if format not in (Format.table, Format.json):
        raise AttnError(f"this command prints a table or JSON, not {format.value}", key="--format", expected="table or json")
    return format is Format.json


def _limits(max_cells: int | None, max_values: int | None) -> "Limits":
    from attncli.sources.limits import Limits

    given = {"max_cells": max_cells, "max_values": max_values}
    return Limits(**{name: value for name, value in given.items() if value is not None})


class _ClosedStdout(io.TextIOBase):
    """Stands in for a stdout that was closed at start: printing anything into it is the one clear error."""

    def write(self, text: str) -> int:
        raise AttnError("stdout is closed, so there is nowhere to print the result", expected="an open stdout, or --output FILE")


def main() -> None:
    """Entry point of the `attncli` command and of `python -m attncli` (through attncli.__main__): never a traceback."""
    for stream in (sys.stdout, sys.stderr):  # a terminal or PYTHONIOENCODING that cannot show "√" gets "\\u221a"
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    if sys.stdout is None:  # started with stdout closed (`>&-`): Click would print --help into nothing, with status 0
        sys.stdout = _ClosedStdout()
    global _traceback_asked
    _traceback_asked = False
    try:
        with _only_the_command_asked(sys.argv[1:2]):
            status = app(prog_name="attncli", standalone_mode=False)
    except typer.TyperException as error:  # Click's usage errors
        status = _usage_error(error)
    except AttnError as error:  # from a command or callback without @guard (`scenarios`)
        show_error(error)
        status = ExitStatus.ERROR
    except typer.Abort:
        print_line("attncli: aborted")
        status = ExitStatus.ERROR
    except BrokenPipeError:
        _silence_stdout()
        status = ExitStatus.BROKEN_PIPE
    except OSError as error:  # Click printing --help or --version into a full disk (`> /dev/full`)
        _silence_stdout()
        show_error(f"cannot write to stdout: {(error.strerror or str(error)).lower()}; the output is incomplete")
        status = ExitStatus.ERROR
    except SystemExit:
        if type(sys.stdout).__name__ != "PacifyFlushWrapper":
            raise
        # Click met EPIPE (printing --help, --version) and exits 1; the README promises 141, as `cat` reports it
        _silence_stdout()
        status = ExitStatus.BROKEN_PIPE
    except KeyboardInterrupt:
        print_line("attncli: interrupted")
        status = ExitStatus.INTERRUPTED
    except Exception as error:
        if _traceback_wanted():
            raise
        print_internal_error(error, flag)
        status = ExitStatus.INTERNAL
    sys.exit(status if isinstance(status, int) else ExitStatus.OK)


@contextlib.contextmanager
def _only_the_command_asked(first: list[str]) -> Iterator[None]:
    """While `app` runs, only the command (or group) named by the first argument is registered.

    Typer turns every command and each of its options into Click objects on each run, which
    took about a tenth of `run cat`'s own time; the one asked for is all that runs. With no
    such name (an option, `--help`, a typo that Click answers with its suggestions) nothing
    changes. The registrations are put back afterwards: tests and callers reuse `app`.
    """
    name = first[0] if first else ""
    commands = [info for info in app.registered_commands if (info.name or _command_name(info.callback)) == name]
    groups = [info for info in app.registered_groups if info.name == name]
    if not commands and not groups:
        yield
        return
    kept = app.registered_commands, app.registered_groups
    app.registered_commands, app.registered_groups = commands, groups
    try:
        yield
    finally:
        app.registered_commands, app.registered_groups = kept


def _command_name(callback: Callable[..., Any] | None) -> str:
    """Typer's name of a command registered without one: its function's name, lower case, "_" as "-"."""
    return "" if callback is None else callback.__name__.lower().replace("_", "-")


def _usage_error(error: Exception) -> int:
    """Click's usage error, shown as Click shows it (status 2); a bad output path is one line and status 1."""
    from attncli.errors import shorten, visible

    param = getattr(error, "param", None)
    message = shorten(visible(getattr(error, "message", str(error))), 200)
    missing = type(error).__name__ == "MissingParameter"  # `export` without --out-dir: a usage error, status 2
    if isinstance(error, typer.BadParameter) and not missing and param is not None and param.name in ("output", "out_dir"):
        show_error(AttnError(message, key=param.opts[0] if param.opts else None))
        return ExitStatus.ERROR
    if type(error).__name__ != "NoArgsIsHelpError":  # that one's message is the whole --help
        error.message = message  # type: ignore[attr-defined]
    error.show()  # type: ignore[attr-defined]
    return getattr(error, "exit_code", ExitStatus.USAGE)
