"""attncli as a Python library: load a scenario, run it, explain a word, decode, tile, and render any of them.

The command line is a thin shell over these functions, so a script or a notebook gets exactly
the numbers and documents the commands print::

    import attncli.api as attn

    run = attn.run("cat")                      # a built-in name, a scenario file, or a Scenario
    run.head(1).weights                        # (L, L) float64 NumPy array, read-only
    print(run.render("markdown", stages="weights", precision=3))

    cat = attn.explain("cat", "cat", round_steps=3)
    cat.explanation.output                     # the row the walk-through arrives at

    gpt2 = attn.load_model("models/gpt2", layer=5, sentence="When Mary and John went to the store")
    attn.decode(gpt2, head=3).render("json")

In Jupyter each result shows itself as tables (`_repr_html_`, `_repr_markdown_`): a run, a head
of it (`run.head(1)`), a loaded scenario (its card: the header and its inputs), the map, the
built-in scenarios (`attn.scenarios()`) …; `repr()` of each is one short line. Every
function raises `attncli.errors.AttnError` for a bad input, with the same one-line message
the command prints; an argument of the wrong type or value is one too, named by its keyword,
checked here at the boundary (`_text`, `_path`, `_whole` …) before any work. Heads and
positions count from 1, as everywhere in attncli.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attncli.core.engine import HeadResult  # subclassed below: every path that imports the API loads numpy anyway (measured)
from attncli.core.records import record
from attncli.core.scenario import Scenario
from attncli.document.numbers import checked_precision, decimals, fixed, percent, significant
from attncli.errors import AttnError, did_you_mean, named, option
from attncli.formats import Document, Format, Options

if TYPE_CHECKING:
    from attncli.core.compare import Comparison
    from attncli.core.decode import Decode
    from attncli.core.engine import RunResult
    from attncli.core.explain import Explanation
    from attncli.core.heads import HeadMap
    from attncli.core.precision import Lab
    from attncli.core.variance import VarianceRow
    from attncli.document import blocks
    from attncli.document.blocks import ExplainArticle, RunDocument, Table
    from attncli.document.blocks import Matrix as MatrixView
    from attncli.document.maps import HeadGrid, HeadTable
    from attncli.document.notation import Writer
    from attncli.document.pages import ExplainPage, HeadsPage, RunPage, ShadePage
    from attncli.sources.checkpoints.lens import Stream
    from attncli.sources.limits import Limits
    from attncli.walkthroughs.compare import DiffRow, Run
    from attncli.walkthroughs.heads import ExplainCall, HeadRow, Source
    from attncli.walkthroughs.links import Link
    from attncli.walkthroughs.shade import Shading

__all__ = [
    "BuiltIns", "ComparedHeads", "Decoded", "Explained", "Head", "LoadedScenario", "Mapped", "ModelInfo", "ModelTokens", "Ran", "Tiled",
    "Varied", "compare_heads", "decode", "explain", "explain_page", "heads", "load", "load_model", "longrope_prefix", "model_info",
    "model_tokens", "render_options", "run", "run_page", "scenarios", "text_of", "tiles", "variance",
]  # fmt: skip


# -- the boundary: every argument's type and value, checked before any work --------------------
# An error names its argument as option() does, so the command line shows the flag; the arguments only a script passes
# (limits, options, document, advance) are named as the keyword itself, there being no flag to show.


def _found(value: object) -> str:
    """A value as a message shows it: its repr cut short, whatever the value (a repr that fails or runs to megabytes)."""
    try:
        text = repr(value[:40] if isinstance(value, str | bytes | list | tuple) else value)
    except Exception:  # a hostile __repr__
        text = f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:59] + "…"


def _text(value: object, key: str) -> str:
    """`value` as text UTF-8 can spell (a str; a lone surrogate is not text), or an AttnError naming `key`."""
    from attncli.sources.arguments import text_argument

    if not isinstance(value, str):
        raise AttnError(f"found {_found(value)}", key=option(key), expected="text (a str)")
    try:
        value = text_argument(value, option(key))  # the bytes a command line passes as surrogates, decoded as UTF-8
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        where = error.start
        raise AttnError(f"character {where + 1} is a lone surrogate (U+{ord(value[where]):04X}), not text", key=option(key),
                        expected="text that UTF-8 can spell") from None  # fmt: skip
    return value


def _optional_text(value: object, key: str) -> str | None:
    return None if value is None else _text(value, key)


def _path(value: object, key: str) -> Path:
    """`value` as a path (a str or an os.PathLike of str), or an AttnError naming `key`."""
    import os

    try:
        text = os.fspath(value)  # type: ignore[call-overload]
    except TypeError:
        text = None
    if not isinstance(text, str) or not text:
        raise AttnError(f"found {_found(value)}", key=option(key), expected="a path or a name (a non-empty str or pathlib.Path)")
    if "\0" in text:
        raise AttnError("a path with a NUL character", key=option(key), expected="a path the operating system can open")
    try:
        os.fsencode(text)
    except UnicodeEncodeError as error:
        raise AttnError(f"character {error.start + 1} is a lone surrogate (U+{ord(text[error.start]):04X})", key=option(key),
                        expected="a path the operating system can spell") from None  # fmt: skip
    return Path(text)


def _optional_whole(value: object, key: str) -> int | None:
    return None if value is None else _whole(value, key)


def _flag(value: object, key: str) -> bool:
    if not isinstance(value, bool):
        raise AttnError(f"found {_found(value)}", key=option(key), expected="True or False")
    return value


def _choice(value: object, key: str, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise AttnError(f"found {_found(value)}", key=option(key), expected=" or ".join(choices))
    return value


def _round_steps(value: object) -> int | None:
    """round_steps: None or 0 to 15 decimals, as the command line's --round-steps."""
    steps = _optional_whole(value, "round_steps")
    if steps is not None and not 0 <= steps <= 15:
        raise AttnError(f"found {_whole_number(steps)}", key=option("round_steps"), expected="a number of decimals from 0 to 15")
    return steps


def _limits(value: object) -> Limits:
    from attncli.sources.limits import Limits

    if value is None:
        return Limits()
    if not isinstance(value, Limits):
        raise AttnError(f"found {_found(value)}", key="limits", expected="an attncli.sources.limits.Limits, or None")
    return value


def _options(value: object) -> Options:
    if not isinstance(value, Options):
        raise AttnError(f"found {_found(value)}", key="options", expected="attncli.formats.Options (api.render_options builds them)")
    return value


def _result(value: object, kind: type, key: str) -> None:
    if not isinstance(value, kind):
        raise AttnError(f"found {_found(value)}", key=option(key), expected=f"a {kind.__name__}")


def load(source: str | Path, *, limits: Limits | None = None) -> LoadedScenario:
    """A scenario from a built-in name (`"cat"`) or a YAML file; a file with `model:` loads that checkpoint's layer."""
    from attncli.sources.yaml_scenario import load as load_yaml

    return LoadedScenario.of(load_yaml(str(_path(source, "source")), limits=_limits(limits)))


def load_model(
    path: str | Path,
    *,
    layer: int,
    sentence: str,
    special_tokens: str = "auto",
    head: int | None = None,
    limits: Limits | None = None,
    target: str | None = None,
    attention: str | None = None,
) -> LoadedScenario:
    """Layer `layer` (from 1) of the local checkpoint at `path`, for `sentence`, as a Scenario (nothing is downloaded).

    `special_tokens` is "auto" (as the tokenizer's post-processor adds them) or "none"; `head`
    only adds notes about that head to the header. For an encoder–decoder (BART), `sentence` is
    the source, `target` the text the decoder has produced so far, and `attention` one of
    "encoder", "decoder" or "cross" (default: "cross" with a target, else "encoder"); `layer`
    counts in that attention's stack.
    """
    from attncli.sources.checkpoints.scenario import SPECIAL_TOKENS, load_scenario

    return LoadedScenario.of(load_scenario(
        _path(path, "path"), layer=_whole(layer, "layer"), sentence=_text(sentence, "sentence"),
        special_tokens=_choice(special_tokens, "special_tokens", SPECIAL_TOKENS), head=_optional_whole(head, "head"), limits=_limits(limits),
        target=_optional_text(target, "target"), attention=_optional_text(attention, "attention"),
    ))  # fmt: skip


def _scenario(scenario: object, key: str = "scenario") -> Scenario:
    """A Scenario, or one loaded from a built-in name or a file; anything else is an AttnError naming `key`."""
    from attncli.core.scenario import Scenario

    if isinstance(scenario, Scenario):
        return scenario
    import os

    if isinstance(scenario, str | os.PathLike):
        _path(scenario, key)
        return load(scenario)  # type: ignore[arg-type]
    raise AttnError(f"found {_found(scenario)}", key=option(key), expected="a Scenario, a built-in scenario's name or a scenario file")


def render_options(format: Format | str = Format.markdown, **options: Any) -> Options:
    """`Options` from keywords: stages (a list or "a,b"), heads, precision, full, heatmap, standalone, heading_level, to_file,
    show_path and long_notes (a checkpoint's header: where it was read from, every note on how)."""
    from attncli.document import stages as stage_table
    from attncli.formats import format_named

    fmt = format_named(format)
    unknown = sorted(set(options) - {*Options._fields, "stages"} - {"format", "names"})
    if unknown:
        raise AttnError(f"found the keyword {unknown[0]!r}", key=option(unknown[0]),
                        expected="stages, heads, precision, full, heatmap, standalone, heading_level or to_file")  # fmt: skip
    stages = options.pop("stages", None)
    if not (stages is None or isinstance(stages, str) or (isinstance(stages, list | tuple) and all(isinstance(s, str) for s in stages))):
        raise AttnError(f"found {_found(stages)}", key=option("stages"), expected='stage names, as a list or as "a,b"')
    listed = stages if isinstance(stages, str) or stages is None else ",".join(stages)
    heads = options.get("heads")
    if heads is not None:
        if isinstance(heads, str | bytes) or not isinstance(heads, Iterable):
            raise AttnError(f"found {_found(heads)}", key=option("heads"), expected="a list of head numbers, from 1")
        options["heads"] = [_whole(h, "heads") for h in heads]
    for name in ("full", "heatmap", "to_file"):
        if name in options:
            _flag(options[name], name)
    if options.get("standalone") is not None:
        _flag(options["standalone"], "standalone")
    if options.get("precision") is not None:
        options["precision"] = checked_precision(options["precision"])
    options.setdefault("to_file", True)  # plain text: no terminal colour codes in a string
    return Options(format=fmt, stages=stage_table.parse(listed), **options)


def text_of(document: Document) -> str:
    """A rendered document as one string (JSON and the other streamed formats arrive as UTF-8 chunks)."""
    if isinstance(document, str):
        return document
    if isinstance(document, bytes | bytearray) or not isinstance(document, Iterable):
        raise AttnError(f"found {_found(document)}", key="document", expected="a rendered document: a str or an iterable of UTF-8 chunks")
    chunks = list(document)
    if not all(isinstance(c, bytes) for c in chunks):
        raise AttnError("a chunk that is not bytes", key="document", expected="a rendered document: a str or an iterable of UTF-8 chunks")
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise AttnError("chunks that are not UTF-8", key="document", expected="a rendered document: UTF-8 chunks") from None


class _Shown:
    """What every result shares: `document(options)` for streaming, `render(format, …)` for a string, notebook display."""

    def document(self, options: Options) -> Document:
        raise NotImplementedError

    def render(self, format: Format | str = Format.markdown, **options: Any) -> str:
        """The result as text in `format` (any `attncli.formats.Format`: table, json, markdown, latex, typst …), as the command prints it."""
        chosen = render_options(format, **options)
        if chosen.format is Format.png:
            raise AttnError("a PNG is binary, not text", key=option("format"), expected="result.png() for its bytes, or svg")
        return text_of(self.document(chosen))

    def png(self, **options: Any) -> bytes:
        """The result's figure as the bytes of a PNG file: its SVG drawn by resvg (`pip install "attncli[png]"`), as `--format png`."""
        document = self.document(render_options(Format.png, **options))
        assert isinstance(document, bytes)
        return document

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each result's `document(options)` checks that `options` are Options before drawing (a dict was an AttributeError)."""
        super().__init_subclass__(**kwargs)
        drawn = cls.__dict__.get("document")
        if drawn is not None:

            def document(self: Any, options: Options, _drawn: Any = drawn) -> Document:
                return _drawn(self, _options(options))  # type: ignore[no-any-return]

            document.__doc__, document.__name__, document.__qualname__ = drawn.__doc__, "document", f"{cls.__qualname__}.document"
            cls.document = document  # type: ignore[method-assign]

    def _repr_markdown_(self) -> str:
        return self.render(Format.markdown)

    def _repr_html_(self) -> str:
        return self.render(Format.html, standalone=False)

    def __repr__(self) -> str:
        """One short line, `<Ran of 'cat': 6 tokens, 1 head>`: what the result is, not its numbers (Jupyter shows its tables)."""
        about = self._about()
        return f"<{type(self).__name__}{' ' * bool(about)}{about}>"

    def _about(self) -> str:
        """What `repr` says after the class's name."""
        return ""


def _count(n: int, what: str) -> str:
    """'1 head', '4 heads'."""
    return f"{n:,} {what}{'s' * (n != 1)}"


@record
class LoadedScenario(Scenario, _Shown):
    """A Scenario (`attn.load`, `attn.load_model`) that shows itself as a card: its header (sizes, scale, mask, mechanisms)
    and its inputs (the embeddings, or Q, K and V given directly); `render(format)` writes the same."""

    @classmethod
    def of(cls, scenario: Scenario) -> LoadedScenario:
        """`scenario`'s fields as a LoadedScenario (the arrays are shared, not copied)."""
        import dataclasses

        return cls(**{f.name: getattr(scenario, f.name) for f in dataclasses.fields(scenario)})

    def document(self, options: Options) -> Document:
        inputs = ("q", "k", "v") if self.direct else ("embeddings",)
        return run(self).document(options._replace(stages=options.stages or inputs))


@record
class Head(HeadResult, _Shown):
    """One head of a run (`run.head(h)`): every stage, as HeadResult holds it; shown as the run's tables of this head alone."""

    ran: Ran | None = None  # the run it belongs to (its scenario labels the tables); None only when built by hand

    def document(self, options: Options) -> Document:
        if self.ran is None:
            raise AttnError("a head built by hand has no run to show it with", expected="run.head(h) of attncli.api.run(…)")
        return self.ran.document(options._replace(heads=options.heads or [self.head]))


@record
class Ran(_Shown):
    """Every stage of every head: `result` is the engine's RunResult (read-only NumPy arrays)."""

    result: RunResult

    @property
    def scenario(self) -> Scenario:
        return self.result.scenario

    def head(self, number: int) -> Head:
        """Head `number`, counted from 1: its Q, K, V, scores, weights, output … (a HeadResult that shows its tables in Jupyter)."""
        import dataclasses

        number = _whole(number, "number")
        self.scenario.head_numbers(number)  # one clear error for a head that does not exist
        _held(self.result, number)
        found = self.result.head(number)
        return Head(**{f.name: getattr(found, f.name) for f in dataclasses.fields(found)}, ran=self)

    def document(self, options: Options) -> Document:
        heads = options.heads or self.scenario.head_numbers(None)
        return render_run(self.result, options._replace(heads=heads))

    def _about(self) -> str:
        return repr(self.result).removeprefix("<RunResult ").removesuffix(">")


@record
class Tiled(_Shown):
    """FlashAttention's tiled computation of every head, `block_size` queries and keys at a time."""

    result: RunResult
    block_size: int

    def document(self, options: Options) -> Document:
        return render_tiling(self.result, options, self.block_size)

    def _about(self) -> str:
        return f"of {self.result.scenario.name!r}: {self.block_size} keys a tile, {_count(len(self.result.heads), 'head')}"


@record
class Explained(_Shown):
    """One query followed through the arithmetic: `explanation` holds every number of the walk-through."""

    explanation: Explanation

    def document(self, options: Options) -> Document:
        return render_explain(self.explanation, options)

    def _about(self) -> str:
        e = self.explanation
        return f"{e.token!r} at position {e.sequence_position} of {e.scenario.name!r}, head {e.head.head}"


@record
class Decoded(_Shown):
    """Causal generation with a KV cache, step by step; `made_causal` when the scenario had no causal mask of its own."""

    decoded: Decode
    made_causal: bool

    def document(self, options: Options) -> Document:
        return render_decode(self.decoded, options, made_causal=self.made_causal)

    def _about(self) -> str:
        d = self.decoded
        return f"of {d.result.scenario.name!r}: head {d.head}, {_count(len(d.steps), 'step')}"


@record
class Varied(_Shown):
    """The √d experiment: `rows` holds, per width d, the mean and variance of q·k and of q·k/√d and the mean largest weight."""

    rows: list[VarianceRow]
    keys: int
    seed: int

    def _about(self) -> str:
        return f"{_count(len(self.rows), 'width')}, {self.keys} keys, seed {self.seed}"

    def document(self, options: Options) -> Document:
        from attncli.document.pages import ReportPage
        from attncli.formats import render
        from attncli.walkthroughs.data import variance_json
        from attncli.walkthroughs.variance import variance_document

        return render(ReportPage(lambda: variance_document(self.rows, keys=self.keys), lambda: [],
                                 lambda: variance_json(self.rows, keys=self.keys, seed=self.seed), _precision(options, 3), boxed=True),
                      options)  # fmt: skip


@record
class BuiltIns(_Shown):
    """The built-in scenarios: `scenarios` holds each one's name and description; `attn.load(name)` loads one."""

    scenarios: list[tuple[str, str]]

    def document(self, options: Options) -> Document:
        from attncli.document.pages import ReportPage
        from attncli.formats import render
        from attncli.walkthroughs.listing import scenarios_document, scenarios_json

        return render(ReportPage(lambda: scenarios_document(self.scenarios), lambda: [], lambda: scenarios_json(self.scenarios), 3), options)

    def _about(self) -> str:
        names = [name for name, _ in self.scenarios]
        return _count(len(names), "scenario") + (f": {names[0]} … {names[-1]}" if len(names) > 2 else f": {', '.join(names)}" if names else "")


def scenarios() -> BuiltIns:
    """The built-in scenarios, each with its description, as `attncli scenarios` lists them (usable by name anywhere)."""
    from attncli.sources import builtin

    return BuiltIns(builtin.listing())


def variance(
    dims: Sequence[int] = (1, 2, 8, 64, 512), *, samples: int = 10_000, keys: int = 16, seed: int = 0, advance: Callable[[int], None] | None = None
) -> Varied:
    """Why scores are divided by √d_k: for each width d, `samples` draws of q, k ~ N(0, I_d), and the largest softmax weight of a
    query over `keys` random keys with and without the scaling (seeded: the same seed gives the same numbers).
    `advance(n)` is told of every n draws done, for a progress bar."""
    from attncli.core.variance import experiment

    samples, keys, seed = _whole(samples, "samples"), _whole(keys, "keys"), _whole(seed, "seed")
    if advance is not None and not callable(advance):
        raise AttnError(f"found {_found(advance)}", key="advance", expected="a function of the number of draws done, or None")
    check_seed(seed)  # the JSON carries it
    if isinstance(dims, str | bytes) or not isinstance(dims, Iterable):
        raise AttnError(f"found {dims!r}", key=option("dims"), expected="a sequence of widths d, e.g. [1, 2, 8, 64]")
    widths = [_whole(d, "dims") for d in dims]
    if not widths or any(not 1 <= d <= 65_536 for d in widths):
        raise AttnError(f"found {widths}", key=option("dims"), expected="widths d from 1 to 65536")
    if not 2 <= keys <= 4096:
        raise AttnError(f"found {keys}", key=option("keys"), expected="2 to 4096 keys")
    if not 2 <= samples <= 10_000_000:
        raise AttnError(f"found {samples}", key=option("samples"), expected="2 to 10,000,000 samples")
    if samples * keys * sum(widths) > 2_000_000_000:
        raise AttnError(f"{samples:,} samples × {keys} keys × Σd = {sum(widths):,} is more than 2·10⁹ random numbers", key=option("samples"),
                        expected="fewer samples, keys or dimensions")  # fmt: skip
    rows = experiment(widths, samples=samples, keys=keys, seed=seed, advance=advance or (lambda n: None))
    return Varied(rows, keys, seed)


def run(scenario: Scenario | str | Path, *, round_steps: int | None = None, heads: Sequence[int] | None = None) -> Ran:
    """Every stage of attention; with round_steps, each intermediate rounded as by hand (the exact run kept beside it).

    With `heads` (from 1), only those heads keep their tokens × tokens stages (scores … weights); the others are computed
    for their outputs alone (the concatenation and the output are whole), so a long sentence holds one head's cells, not H.
    """
    from attncli.core import engine

    round_steps = _round_steps(round_steps)
    loaded = _scenario(scenario)
    if heads is not None:
        if isinstance(heads, str | bytes) or not isinstance(heads, Iterable):
            raise AttnError(f"found {_found(heads)}", key=option("heads"), expected="a sequence of heads from 1, e.g. [1], or None for all")
        heads = [n for h in heads for n in loaded.head_numbers(_whole(h, "heads"))]
    return Ran(engine.run(loaded, round_steps=round_steps, heads=heads))


def tiles(scenario: Scenario | str | Path, block_size: int, *, round_steps: int | None = None) -> Tiled:
    """FlashAttention's tiles of `block_size` for every head (render it; JSON adds each head's "tiling")."""
    from attncli.core import engine
    from attncli.core.variants.linear import refuse_softmax_only

    block_size, round_steps = _whole(block_size, "block_size"), _round_steps(round_steps)
    check_block_size(block_size)
    loaded = _scenario(scenario)
    refuse_softmax_only(loaded, "block_size", "FlashAttention's online softmax")
    return Tiled(engine.run(loaded, round_steps=round_steps), block_size)


@record
class InDtype(_Shown):
    """A scenario's heads computed in a number format by a kernel (core.precision), beside the exact run; `labs` by head, from 1.

    With `row` (a query row, from 0, and `explanation`, explain's), the document follows that query; else every head's every step.
    """

    result: RunResult
    labs: dict[int, Lab]
    row: int | None = None
    explanation: Explanation | None = None

    def document(self, options: Options) -> Document:
        from attncli.document.blocks import mentioned
        from attncli.document.pages import ReportPage
        from attncli.formats import render
        from attncli.walkthroughs import data as json_data
        from attncli.walkthroughs import precision as walk

        s = self.result.scenario
        p = decimals(options.precision, s.precision, None)
        if self.row is None or self.explanation is None:
            heads = options.heads or list(self.labs)
            for head in heads:
                s.head_numbers(_whole(head, "heads"))
            labs = {h: self.labs[h] for h in heads}

            def run_data() -> dict[str, Any]:
                from attncli.document import stages

                doc = json_data.run_json(self.result, stages.STAGE_NAMES, heads)
                for entry, head in zip(doc["heads"], heads):
                    entry["precision"] = walk.lab_json(labs[head])
                return doc

            tidied = options.format is Format.csv

            def run_report() -> blocks.Document:
                return mentioned(walk.run_document(self.result, labs, p, full=options.full, tidied=tidied), options.names)

            return render(ReportPage(run_report, lambda: [], run_data, p), options)
        expl, row = self.explanation, self.row
        lab = self.labs[expl.head.head]

        def explain_data() -> dict[str, Any]:
            doc = json_data.explain_json(expl)
            doc["precision"] = walk.lab_json(lab, [row])
            return doc

        def explain_report() -> blocks.Document:
            made = walk.explain_document(self.result, lab, expl.head.head, row, p, full=options.full, tidied=options.format is Format.csv)
            return mentioned(made, options.names)

        return render(ReportPage(explain_report, lambda: [], explain_data, p), options)

    def _about(self) -> str:
        lab = next(iter(self.labs.values()))
        return f"of {self.result.scenario.name!r} in {lab.format.name}, kernel {lab.kernel}"


def in_dtype(
    scenario: Scenario | str | Path,
    dtype: str,
    *,
    kernel: str | None = None,
    block_size: int | None = None,
    word: str | None = None,
    position: int | None = None,
    head: int | None = None,
) -> InDtype:
    """Every head (or, with `word` or `position`, that query of head `head`) computed in `dtype` (bf16, fp16, fp32) as `kernel` computes it.

    `kernel`: "eager" (torch's eager attention; the default), "sdpa" (its math backend), "flash" (float32 accumulators, the
    default with `block_size`, which is the flash kernel's keys a block) or "naive" (every operation in the format, no float32). Each step is kept beside the exact float64 value.
    """
    from attncli.core import engine
    from attncli.core import precision as lab

    dtype = _choice(dtype, "dtype", lab.FORMATS)
    kernel = None if kernel is None else _choice(kernel, "kernel", lab.KERNELS)
    block_size = None if block_size is None else _whole(block_size, "block_size")
    check_block_size(block_size)
    if block_size is not None and kernel not in (None, "flash"):
        raise AttnError(f"{option('block_size')} {block_size} is the flash kernel's keys a block, and the kernel is {kernel}", key=option("kernel"),
                        expected=f"{option('kernel')} flash, or no {option('block_size')}")  # fmt: skip
    kernel = kernel or ("flash" if block_size is not None else "eager")
    fmt = lab.number_format(dtype)
    loaded = _scenario(scenario)
    explanation, row = None, None
    if word is not None or position is not None:
        from attncli.core.explain import explain_scenario, find_word

        head = 1 if head is None else _whole(head, "head")
        loaded.head_numbers(head)
        where, others = find_word(loaded, _optional_text(word, "word"), None if position is None else _whole(position, "position"))
        explanation, row = explain_scenario(loaded, position=where, head=head, others=others), where - 1
    result = engine.run(loaded)
    numbers = [head] if head is not None else list(range(1, loaded.heads + 1))
    divisor = loaded.scale.divisor
    labs = {h: lab.head_lab(result.head(h), result.head(h).visible, divisor, fmt, kernel, block_size) for h in numbers}
    return InDtype(result, labs, row, explanation)


def _whole_number(n: int) -> str:
    """An option's whole number as an error shows it: with thousands separators, or by its length when it is huge."""
    return f"{n:,}" if abs(n) < 10**30 else f"a number of {len(str(abs(n))):,} digits"


def _whole(value: object, key: str) -> int:
    """`value` as an int, or an AttnError naming `key` (1.5, "10" or None from a script was a TypeError deep inside)."""
    import operator

    try:
        whole = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise AttnError(f"found {value!r}", key=option(key), expected="a whole number") from None
    if isinstance(value, bool):
        raise AttnError(f"found {value!r}", key=option(key), expected="a whole number, not True or False")
    return int(whole)


def check_seed(seed: int) -> None:
    """An AttnError for a seed that JSON cannot carry (orjson writes integers up to 2⁶⁴ − 1; 10**23 was exit 70)."""
    if not 0 <= seed < 2**64:
        raise AttnError(f"found {_whole_number(seed)}", key=option("seed"), expected=f"a seed from 0 to {2**64 - 1:,}")


_MAX_BLOCK = 2**31  # far beyond any sequence attncli computes; orjson writes no integer past 64 bits (10**20 was exit 70)


def check_block_size(block_size: int | None) -> None:
    """An AttnError for a block size below 1 or beyond 2³¹ (run, explain and export check it before any work)."""
    if block_size is not None and not 1 <= block_size <= _MAX_BLOCK:
        raise AttnError(f"found {_whole_number(block_size)}", key=option("block_size"), expected=f"a block size from 1 to {_MAX_BLOCK:,} (a block of every key is one tile)")


def explain(
    scenario: Scenario | str | Path,
    word: str | None = None,
    *,
    position: int | None = None,
    head: int = 1,
    round_steps: int | None = None,
    block_size: int | None = None,
    lens: bool = True,
) -> Explained:
    """Follow `word` (or the token at `position`, from 1) through head `head`; only that row is computed.

    A head of a checkpoint whose whole forward pass attncli computes (a Llama-like decoder) also gets, unless `lens` is
    False, what its output promotes (direct logit attribution, the final norm's scale frozen at the final residual's) and
    the logit lens at that position: one more pass through every layer and the unembedding.

    `position` counts as the tables and the keys do: after a given KV cache of c keys, the sentence's tokens are c + 1 … c + L.
    """
    from attncli.core.explain import explain_scenario, find_word

    head, position = _whole(head, "head"), None if position is None else _whole(position, "position")
    block_size, lens = None if block_size is None else _whole(block_size, "block_size"), _flag(lens, "lens")
    round_steps = _round_steps(round_steps)
    if word is not None and not isinstance(word, str):
        raise AttnError(f"found {_found(word)}", key=option("word"), expected="a word of the sentence, as a string")
    word = _optional_text(word, "word")
    check_block_size(block_size)
    loaded = _scenario(scenario)
    loaded.head_numbers(head)  # a head that does not exist is an error before any work
    if block_size is not None:
        from attncli.core.variants.linear import refuse_softmax_only

        refuse_softmax_only(loaded, "block_size", "FlashAttention's online softmax")
    where, others = find_word(loaded, word, position)
    expl = explain_scenario(loaded, position=where, head=head, round_steps=round_steps, others=others, block_size=block_size)
    if lens and loaded.origin is not None and not loaded.cached:  # a checkpoint's head: what its output promotes, and the logit lens
        import dataclasses

        from attncli.sources.checkpoints.lens import explained

        read = explained(loaded.origin, head, expl.position)
        if read is not None:
            expl = dataclasses.replace(expl, lens=read[0], logit_lens=read[1])
    return Explained(expl)


def decode(
    scenario: Scenario | str | Path, *, head: int = 1, round_steps: int | None = None, before: Scenario | None = None, switch: bool = True
) -> Decoded:
    """Generate the sentence token by token with a KV cache (a scenario without a causal mask is given one).

    `before` is the scenario of the first s − 1 tokens as the model computes them while the sequence is that short
    (a longrope checkpoint up to original_max_position_embeddings: `longrope_prefix`): steps 1 … s − 1 are its rows,
    and at step s RoPE changes its factors and every cached key is computed again. A checkpoint's scenario finds it
    itself (from its `origin`) unless `switch` is False, which keeps the factors of the whole sentence's length.
    """
    from attncli.core import engine
    from attncli.core.decode import causal_version
    from attncli.core.decode import decode as decode_head
    from attncli.core.variants.positions import Rope

    head, round_steps, switch = _whole(head, "head"), _round_steps(round_steps), _flag(switch, "switch")
    if before is not None:
        before = _scenario(before, "before")
    loaded = _scenario(scenario)
    loaded.head_numbers(head)
    if before is None and switch and (origin := loaded.origin) is not None and loaded.variant(Rope) is not None:  # no RoPE: no longrope
        before = longrope_prefix(origin.folder, layer=origin.layer, sentence=origin.sentence, special_tokens=origin.special_tokens)
    causal, made_causal = causal_version(loaded)
    if before is not None and before.L >= loaded.L:  # the sentence never outgrows the first tokens' factors: no switch
        before = None
    early = None if before is None else engine.run(causal_version(before)[0], round_steps=round_steps)
    with _about_its_file(loaded):
        return Decoded(decode_head(engine.run(causal, round_steps=round_steps), head, before=early), made_causal)


@contextlib.contextmanager
def _about_its_file(scenario: Scenario) -> Iterator[None]:
    """A scenario refused for one of its keys after it was read (decode of cross-attention, the map of a cache) is named by its
    file; an error about an option (`position`) is not the file's."""
    try:
        yield
    except AttnError as error:
        if error.file is None and scenario.path is not None and error.key and named(error.key) == error.key:
            error.file = scenario.path
        raise


def longrope_prefix(folder: str | Path, *, layer: int, sentence: str, special_tokens: str = "auto") -> Scenario | None:
    """The scenario `decode` needs as `before` for a longrope checkpoint (Phi-3-128k, Phi-4-mini) whose sentence is longer
    than original_max_position_embeddings: its first that many tokens, which turn by the short factors; else None."""
    from attncli.sources.checkpoints.families import read_config
    from attncli.sources.checkpoints.gguf import gguf_path
    from attncli.sources.checkpoints.scenario import SPECIAL_TOKENS, load_scenario

    folder, layer, sentence = _path(folder, "folder"), _whole(layer, "layer"), _text(sentence, "sentence")
    special_tokens = _choice(special_tokens, "special_tokens", SPECIAL_TOKENS)
    if gguf_path(Path(folder)) is not None or not Path(folder).is_dir():  # a GGUF file carries no longrope (refused when read)
        return None
    rope = read_config(Path(folder)).rope  # once a sequence is longer than original_max_position_embeddings, transformers turns
    if rope is None or rope.kind != "longrope":  # q and k by the long factors (longrope_frequency_update), and in generation
        return None  # Phi3ForCausalLM.prepare_inputs_for_generation drops the cache at that step: every key is computed again
    original = rope.original_positions
    assert original is not None
    early = load_scenario(Path(folder), layer=layer, sentence=sentence, special_tokens=special_tokens, first=original)
    return early  # its first `original` tokens (all of them when the sentence is no longer: decode then has no switch)



@record
class Mapped(_Shown):
    """Every head of every layer: `map` holds the statistics (`map.table("first_token")` is (layers, H)) and the thumbnails.

    Renders as the terminal grid and table (table), attncli.heads/1 (json), the notable heads and the table
    (markdown), one row per head (csv), the grid figure (svg), a page with grid, notable heads and table (html), or typst.
    """

    map: HeadMap
    source: Source
    sort: str | None = None
    top: int | None = None
    spell: Callable[[ExplainCall], str] | None = None  # how a notable head's explain call is written (default: this API's call)
    layer: int | None = None  # with a query token (map.focus): the layer whose heads shade the sentence; None: every layer
    head: int | None = None  # with a query token: this head alone; None: each head and their mean
    to_keys: tuple[int, ...] | None = None  # with a query token: the key rows (from 0) whose link to it ranks the heads

    def _about(self) -> str:
        what = f" ({self.source.sentence!r})" if self.source.sentence is not None else ""
        shading = f", shading position {self.map.focus + 1}" if self.map.focus is not None else ""
        return f"of {self.source.name}{what}: {_count(self.map.layers, 'layer')} × {_count(self.map.heads, 'head')}{shading}"

    def rows(self) -> list[HeadRow]:
        """One row per head (layer and head from 1), sorted and cut as asked."""
        from attncli.walkthroughs import heads as walk

        return walk.sorted_rows(walk.rows(self.map, self.source), self.sort, self.top)

    def notable(self) -> list[HeadRow]:
        """The heads with a reading in words, strongest first."""
        from attncli.walkthroughs import heads as walk

        return walk.notable(walk.rows(self.map, self.source), self.top, self.sort)

    def shading(self) -> Shading:
        """With a query token: the weights it gives every token, per head of `layer` and their mean, or per layer."""
        from attncli.walkthroughs.shade import shading

        return shading(self.map, layer=self.layer, head=self.head)

    def document(self, options: Options) -> Document:
        from attncli.formats import render

        return render(self.page(options), options)

    def page(self, options: Options) -> HeadsPage | ShadePage:
        """The map's page (the grid and the table), or with a query token the shaded sentence's."""
        from attncli.document import maps
        from attncli.document.maps import HeadGrid
        from attncli.document.pages import HeadsPage
        from attncli.walkthroughs import heads as walk

        if self.map.focus is not None and self.to_keys is not None:
            return self._link_page(self.to_keys, options)
        if self.map.focus is not None:
            return _shade_page(self.shading(), self.source, options)
        every = walk.rows(self.map, self.source)
        shown = walk.sorted_rows(every, self.sort, self.top)
        spell = self.spell or walk.python_call

        def table() -> HeadTable:
            return _head_table(
                shown, list(every[0].values), shared=self.map.kv_heads != self.map.heads,
                readings=[*(((summary, ""),) if (summary := walk.sinks(every, self.map.tokens)) else ()),
                          *((r.reading or "", spell(r.explain) if r.explain else "") for r in walk.notable(every, self.top, self.sort))],
                legend=maps.LEGEND + (maps.PATTERN_LEGEND if self.map.patterns else ""),
            )  # fmt: skip

        def grid() -> HeadGrid:
            H = self.map.heads
            tips = [[r.reading or _tip(r) for r in every[li * H : (li + 1) * H]] for li in range(self.map.layers)]
            return HeadGrid(walk.title(self.source, self.map), walk.thumbnails(self.map), self.map.first_layer, self.map.tokens, tips,
                            seen=walk.seen(self.map))  # fmt: skip

        return HeadsPage(table, grid, lambda: walk.document(self.map, self.source, shown, every, spell), _precision(options, 3), explorable=True)


    def links(self) -> list[Link]:
        """With a query token and `to`: every layer × head ranked by the weight the query gives those keys (best first)."""
        from attncli.walkthroughs import links

        if self.map.focus is None or self.to_keys is None:
            raise AttnError("no link was asked for", key=option("to"), expected=f"{option('word')} WORD {option('to')} WORD")
        return links.links(self.map, self.to_keys, self.source)

    def _link_page(self, keys: tuple[int, ...], options: Options) -> HeadsPage:
        """Which heads link the query to `keys`: the grid shaded by that weight, the heads ranked, the best with their explain calls."""
        from attncli.document.maps import HeadGrid, HeadTable
        from attncli.document.pages import HeadsPage
        from attncli.walkthroughs import heads as walk
        from attncli.walkthroughs import links as walk_links

        ranked = self.links()
        spell = self.spell or walk.python_call
        query, key = walk_links.describe(self.map, keys)
        named = ranked[: self.top or walk_links.TOP]
        shared = self.map.kv_heads != self.map.heads

        def table() -> HeadTable:
            return HeadTable(
                columns=("rank", "layer", "head", *(("kv_head",) if shared else ()), "weight"),
                rows=[(r.rank, r.layer, r.head, *((r.kv_head,) if shared else ()), r.weight) for r in named],
                readings=[(f"layer {r.layer} head {r.head}: {percent(r.weight)} of {query}'s weight goes to {key}", spell(r.explain)) for r in named],
                legend=f"weight: what the query {query} gives the key {key} in each head, after the softmax (summed over the key's positions)",
                heading=f"The heads that link {query} to {key}, strongest first",
            )

        def grid() -> HeadGrid:
            H = self.map.heads
            tips = [[f"L{r.layer} H{r.head}: {fixed(r.weight, 3)} to {key} (rank {r.rank})" for r in sorted(ranked, key=lambda r: (r.layer, r.head))[li * H : (li + 1) * H]]
                    for li in range(self.map.layers)]  # fmt: skip
            return HeadGrid(walk_links.title(self.source, self.map, keys), walk_links.grid(self.map, ranked), self.map.first_layer, self.map.tokens,
                            tips, subtitle=f"shade: the weight {query} gives {key}, 0 to 1, one cell per head",
                            hover="Hover over a head: its weight and its rank.")  # fmt: skip

        return HeadsPage(table, grid, lambda: walk_links.document(self.map, keys, self.source, ranked, spell), _precision(options, 3))


def _precision(options: Options, default: int) -> int:
    return default if options.precision is None else checked_precision(options.precision)


def _head_table(shown: Sequence[HeadRow] | Sequence[DiffRow], names: list[str], *, shared: bool, **labels: Any) -> HeadTable:
    """One row per head shown (layer, head, its key/value head when heads share them, the statistics `names`), for the map and
    the comparison alike; `labels` are the rest of the HeadTable (readings, legend, heading …)."""
    from attncli.document.maps import HeadTable

    return HeadTable(
        columns=("layer", "head", *(("kv_head",) if shared else ()), *names),
        rows=[(r.layer, r.head, *((r.kv_head,) if shared else ()), *(r.values[n] for n in names)) for r in shown],
        **labels,
    )


def _shade_page(shaded: Shading, source: Source, options: Options) -> ShadePage:
    """The shaded sentence: the weights the query token gives every token, per head or per layer."""
    from attncli.document.maps import Shaded, ShadedRow
    from attncli.document.pages import ShadePage
    from attncli.walkthroughs.shade import document

    def drawn() -> Shaded:
        return Shaded(shaded.title, shaded.tokens, shaded.position - 1,
                      [ShadedRow(r.name, r.weights.tolist(), r.visible.tolist(), r.readings) for r in shaded.rows])  # fmt: skip

    return ShadePage(drawn, lambda: document(shaded, source), _precision(options, 2))


@record
class ComparedHeads(_Shown):
    """The same heads of two runs: `comparison.table("js_divergence")` is (layers, H); renders as the map does."""

    comparison: Comparison
    first: Run
    second: Run
    sort: str | None = None
    top: int | None = None

    def _about(self) -> str:
        c = self.comparison
        return f"of {self.first.name} ({self.first.sentence!r}) and {self.second.name} ({self.second.sentence!r}): {_count(c.layers, 'layer')} × {_count(c.heads, 'head')}"

    def rows(self) -> list[DiffRow]:
        """One row per head, most changed first (by `sort`, default js_divergence), cut to `top`."""
        from attncli.walkthroughs import compare as walk

        return walk.sorted_rows(walk.rows(self.comparison), self.sort, self.top)

    def document(self, options: Options) -> Document:
        from attncli.formats import render

        return render(self.page(options), options)

    def page(self, options: Options) -> HeadsPage:
        """The comparison's grid (each head's largest change per block) and its table, most changed heads first."""
        from attncli.document import maps
        from attncli.document.maps import HeadGrid
        from attncli.document.pages import HeadsPage
        from attncli.walkthroughs import compare as walk

        every = walk.rows(self.comparison)
        shown = walk.sorted_rows(every, self.sort, self.top)

        def table() -> HeadTable:
            return _head_table(
                shown, list(every[0].values), shared=self.comparison.kv_heads != self.comparison.heads,
                readings=[(text, "") for text in walk.most_changed(every)],
                legend=maps.COMPARE_LEGEND,
                heading="Most changed heads",
                general=True,
                none="No head changed: the two runs give the same weights.",
            )  # fmt: skip

        def grid() -> HeadGrid:
            H = self.comparison.heads
            tips = [[f"layer {r.layer} head {r.head}: Jensen–Shannon {significant(r.values['js_divergence'], 3)} nats, largest change "
                     f"{significant(r.values['max_abs_diff'], 3)}" for r in every[li * H : (li + 1) * H]] for li in range(self.comparison.layers)]  # fmt: skip
            return HeadGrid(walk.title(self.first, self.second), walk.thumbnails(self.comparison), 1, self.comparison.tokens, tips,
                            subtitle=maps.COMPARE_SUBTITLE,
                            hover="Hover over a thumbnail's row: its query tokens and the keys whose weight changed most.")  # fmt: skip

        def data() -> dict[str, Any]:
            return walk.document(self.comparison, self.first, self.second, shown, every)

        return HeadsPage(table, grid, data, _precision(options, 3))


def _tip(row: HeadRow) -> str:
    v = row.values
    return (f"layer {row.layer} head {row.head}: first token {percent(v['first_token'])}, previous {percent(v['previous_token'])}, "
            f"self {percent(v['self'])}, entropy {fixed(v['entropy'], 2)} nats")  # fmt: skip


def heads(
    scenario: Scenario | str | Path | None = None,
    *,
    model: str | Path | None = None,
    sentence: str | None = None,
    special_tokens: str = "auto",
    induction: int | None = None,
    seed: int = 0,
    sort: str | None = None,
    top: int | None = None,
    limits: Limits | None = None,
    word: str | None = None,
    position: int | None = None,
    layer: int | None = None,
    head: int | None = None,
    to: str | None = None,
    to_position: int | None = None,
) -> Mapped:
    """Every head of every layer of a checkpoint for `sentence` (one forward pass), or of a scenario's one layer.

    A scenario file with `model:` maps that checkpoint for its `sentence`. `induction` = n adds
    the induction, previous- and duplicate-token scores on n random tokens repeated twice (seeded).
    `sort` orders the rows by a statistic, largest first; `top` keeps that many. A query token
    (`word` and/or `position`, from 1) renders instead the sentence shaded by the weights it
    gives: each head of `layer` and their mean, or every layer's mean; `head` picks one head.
    With a query token and `to` (a word; every occurrence counts) or `to_position` (from 1): which heads link the two, every
    layer × head ranked by the weight the query gives that key, the grid shaded by it; `top` names that many with their
    explain calls (default 10).
    """
    from attncli.core.heads import PATTERNS, scenario_map
    from attncli.sources.checkpoints.headmap import model_map, model_of_file
    from attncli.sources.checkpoints.scenario import SPECIAL_TOKENS
    from attncli.walkthroughs.heads import SORTABLE, Source

    seed, induction, top = _whole(seed, "seed"), _optional_whole(induction, "induction"), _optional_whole(top, "top")
    position, layer, head = _optional_whole(position, "position"), _optional_whole(layer, "layer"), _optional_whole(head, "head")
    sentence, word = _optional_text(sentence, "sentence"), _optional_text(word, "word")
    special_tokens = _choice(special_tokens, "special_tokens", SPECIAL_TOKENS)
    if sort is not None:
        sort = _text(sort, "sort")
    if model is not None:
        model = _path(model, "model")
    if scenario is not None and not isinstance(scenario, str | Path):
        scenario = _scenario(scenario)
    elif scenario is not None:
        _path(scenario, "scenario")
    check_seed(seed)
    limits = _limits(limits)
    if sort is not None and sort not in SORTABLE:
        raise AttnError(f"found {sort!r}{did_you_mean(sort, SORTABLE)}", key=option("sort"), expected=f"one of {', '.join(SORTABLE)}")
    if sort in PATTERNS and induction is None:
        raise AttnError(f"found {sort!r} (computed with {option('induction')} N)", key=option("sort"), expected=f"{option('induction')} N beside it")
    if top is not None and top < 1:
        raise AttnError(f"found {top}", key=option("top"), expected="a number of heads, at least 1")
    focus = None
    if word is not None or position is not None:
        from attncli.core.heads import find_token

        linking = to is not None or to_position is not None
        for name, given in (("sort", sort), ("top", None if linking else top), ("induction", induction)):
            if given is not None:
                raise AttnError(f"found {given} beside a query token", key=option(name),
                                expected=f"the map's options without {option('word')} or {option('position')}")  # fmt: skip
        for name, given in (("layer", layer), ("head", head)):
            if linking and given is not None:
                raise AttnError(f"found {given} beside {option('to')}: the link ranks every layer and head", key=option(name),
                                expected=f"{option('word')} and {option('to')} alone, or {option('top')} N")  # fmt: skip

        def focus(tokens: tuple[str, ...]) -> int:
            return find_token(tokens, word, position)
    else:
        for name, given in (("layer", layer), ("head", head), ("to", to), ("to_position", to_position)):
            if given is not None:
                raise AttnError(f"found {given!r} without a query token (it picks whose weights {'link' if name.startswith('to') else 'shade'} "
                                "the sentence)", key=option(name), expected=f"{option('word')} WORD or {option('position')} N beside it")  # fmt: skip
    if model is None and isinstance(scenario, str | Path):
        found = model_of_file(Path(scenario), limits=limits)
        if found is not None:
            model, sentence, special_tokens = found.folder, found.sentence, found.special_tokens
            scenario = None
    if model is not None:
        if scenario is not None:
            raise AttnError("both a scenario and a model are given", key=option("model"), expected="either a scenario or a model folder")
        if sentence is None:
            raise AttnError("a model needs a sentence", key=option("sentence"), expected="the text to run through the model")
        mapped = model_map(Path(model), sentence=sentence, special_tokens=special_tokens, induction=induction, seed=seed, limits=limits,
                           focus=focus, lens=focus is None)  # fmt: skip
        source = Source("model", str(model), sentence, mapped.model_type, mapped.token_ids, special_tokens, mapped.induction_tokens, seed)
        if mapped.stream is not None:
            _read_heads(mapped.map, source, mapped.stream)
        result = Mapped(mapped.map, source, sort, top, layer=layer, head=head)
        return _focused(result, to, to_position)
    if induction is not None:
        raise AttnError("the induction score needs a model", key=option("induction"), expected=f"{option('model')} DIR beside it")
    if sentence is not None:
        raise AttnError("a sentence needs a model", key=option("sentence"), expected=f"{option('model')} DIR beside it")
    loaded = scenario if scenario is not None and not isinstance(scenario, str | Path) else load(scenario or "cat", limits=limits)
    name = str(scenario) if isinstance(scenario, str | Path) else loaded.name
    with _about_its_file(loaded):
        one_layer = scenario_map(loaded, focus=focus)
    result = Mapped(one_layer, Source("scenario", name, None, None, None), sort, top, layer=layer, head=head)
    result = _focused(result, to, to_position)
    return result


def _read_heads(heads: HeadMap, source: Source, stream: Stream) -> None:
    """Each notable head's direct logit attribution at the row its explain call shows, all read through the unembedding at once."""
    from attncli.core.lens import TOP
    from attncli.sources.checkpoints.lens import named
    from attncli.walkthroughs.heads import rows

    wanted = [(r.layer, r.head, r.row + 1) for r in rows(heads, source) if r.row is not None and r.behaviour != "first_token"]
    lenses, _ = named(Path(source.name), *stream.read(wanted, TOP))
    heads.lens.update(((lens.layer, lens.head), lens) for lens in lenses)


def _focused(result: Mapped, to: str | None, to_position: int | None) -> Mapped:
    """`result` with the keys `to` names (which heads link the query to them), checked now, not when drawn; else its shading checked."""
    if result.map.focus is None:
        return result
    if to is None and to_position is None:
        result.shading()  # a --layer or --head out of range is an error now, not when drawn
        return result
    import dataclasses

    from attncli.walkthroughs.links import key_positions

    keys = key_positions(result.map.tokens, to, to_position)
    return dataclasses.replace(result, to_keys=keys)


def compare_heads(
    model: str | Path,
    *,
    sentence: str,
    compare_model: str | Path | None = None,
    compare_sentence: str | None = None,
    special_tokens: str = "auto",
    sort: str | None = None,
    top: int | None = None,
    limits: Limits | None = None,
) -> ComparedHeads:
    """Every head of `model` on `sentence` against the same heads of `compare_model` (default: the same model) on `compare_sentence`
    (default: the same sentence): per head the largest and mean absolute difference of the weights and the rows' Jensen–Shannon
    divergence. The two runs must give as many tokens, and the two models the same layers and heads.
    """
    from attncli.sources.checkpoints.headcompare import compare_models
    from attncli.sources.checkpoints.scenario import SPECIAL_TOKENS
    from attncli.walkthroughs.compare import Run, sorted_rows

    model, sentence = _path(model, "model"), _text(sentence, "sentence")
    compare_model = None if compare_model is None else _path(compare_model, "compare_model")
    compare_sentence = _optional_text(compare_sentence, "compare_sentence")
    special_tokens = _choice(special_tokens, "special_tokens", SPECIAL_TOKENS)
    sort = None if sort is None else _text(sort, "sort")
    top, limits = _optional_whole(top, "top"), _limits(limits)
    if top is not None and top < 1:
        raise AttnError(f"found {top}", key=option("top"), expected="a number of heads, at least 1")

    if compare_model is None and compare_sentence is None:
        raise AttnError("nothing to compare with", key=option("compare_model"),
                        expected=f"{option('compare_model')} DIR and/or {option('compare_sentence')} TEXT")  # fmt: skip
    sorted_rows([], sort, None)  # a --sort that is not a measure: refused before the forward passes
    other = Path(compare_model) if compare_model is not None else Path(model)
    found = compare_models(Path(model), other, sentence=sentence, other_sentence=compare_sentence if compare_sentence is not None else sentence,
                           special_tokens=special_tokens, limits=limits)  # fmt: skip
    a, b = found.first, found.second
    first = Run(str(model), sentence, a.model_type, a.token_ids, a.map.tokens)
    second = Run(str(other), compare_sentence if compare_sentence is not None else sentence, b.model_type, b.token_ids, b.map.tokens)
    return ComparedHeads(found.comparison, first, second, sort, top)


# -- rendering: a result's walk-through (attncli.walkthroughs) as a page (attncli.document.pages), drawn by a format (attncli.formats)


def render_run(result: RunResult, options: Options) -> Document:
    """The whole `attncli run` output in `options.format`."""
    from attncli.formats import render

    return render(run_page(result, _options(options)), options)


def _held(result: RunResult, head: int) -> None:
    """An AttnError for a head whose tokens × tokens stages the run did not keep (run(…, heads=[…]) without it)."""
    if not result.holds(head):
        kept = ", ".join(map(str, result.kept or ()))
        raise AttnError(f"head {head}'s stages were not kept: the run kept head{'s' * (len(result.kept or ()) > 1)} {kept}", key=option("heads"),
                        expected=f"run(…, heads=[…, {head}]), or heads=None for every head")  # fmt: skip


def run_page(result: RunResult, options: Options) -> RunPage:
    """`run`'s page: the shown stages (`options.stages`, the format's default otherwise) of the shown heads."""
    from attncli.core.engine import RunResult
    from attncli.document import stages
    from attncli.document.pages import RunPage

    _result(result, RunResult, "result")
    options = _options(options)
    heads = options.heads or list(range(1, result.scenario.heads + 1))
    for head in heads:  # a head the scenario lacks is one error, not an IndexError (0 and -1 drew the last head)
        result.scenario.head_numbers(_whole(head, "heads"))
        _held(result, head)

    def document() -> RunDocument:  # the views and blocks are imported by the pages that draw them: JSON needs neither
        from attncli.document import views
        from attncli.document.blocks import mentioned
        from attncli.walkthroughs.run import run_document

        shown = views.views(result, options.stages or stages.default(result.scenario), heads)
        return mentioned(run_document(result, shown, show_path=options.show_path, long_notes=options.long_notes), options.names)

    def figures() -> list[MatrixView]:
        from attncli.document import views

        return views.views(result, options.stages or ("weights",), heads)

    def matrix() -> MatrixView:
        from attncli.document import views

        stage = _one_stage(options.stages)
        view = views.view_of(result, stages.main_row(stage, result.scenario).key, heads[0])
        if view is None:
            raise AttnError(f"this scenario has no {stage!r} stage", key=option("stages"), expected="a stage it has, e.g. weights")
        return view

    def data() -> dict[str, Any]:
        from attncli.walkthroughs.data import run_json

        return run_json(result, options.stages or stages.STAGE_NAMES, heads)

    return RunPage(document, figures, matrix, data, decimals(options.precision, result.scenario.precision, result.round_steps))


def render_explain(expl: Explanation, options: Options) -> Document:
    """The whole `attncli explain` output in `options.format`."""
    from attncli.formats import render

    return render(explain_page(expl, options), options)


def explain_page(expl: Explanation, options: Options) -> ExplainPage:
    """`explain`'s page: the article (its steps in the notation of the format's writer), the keys' table and the query's weights."""
    from attncli.core.explain import Explanation
    from attncli.document.blocks import Steps, mentioned
    from attncli.document.pages import ExplainPage
    from attncli.walkthroughs import explain as walk

    _result(expl, Explanation, "expl")
    options = _options(options)
    precision = decimals(options.precision, expl.scenario.precision, expl.result.round_steps)

    def article(writer: Writer) -> ExplainArticle:
        from attncli.walkthroughs import narration

        intro = mentioned(narration.intro(expl), options.names)
        steps = mentioned(Steps(narration.steps(expl, precision, writer, full=options.full), precision, writer.notation), options.names)
        return walk.article(expl, intro, steps)

    def tidy() -> Table:
        from attncli.walkthroughs.data import explain_table

        return explain_table(expl, precision=options.precision)

    def data() -> dict[str, Any]:
        from attncli.walkthroughs.data import explain_json

        return explain_json(expl)

    return ExplainPage(article, lambda: walk.key_table(expl), lambda: walk.query_weights(expl), tidy, data, precision)


def _one_stage(stages: tuple[str, ...] | None) -> str:
    if stages is None:
        return "weights"
    if len(stages) > 1:
        raise AttnError(
            f"CSV holds one matrix, but {len(stages)} stages were asked for ({', '.join(stages)})",
            key=option("stages"),
            expected=f"a single stage, e.g. {option('stages')} scores",
        )
    return stages[0]


def render_tiling(result: RunResult, options: Options, block_size: int) -> Document:
    """`run --block-size`: the run's JSON with each head's "tiling" added, or the tiling report in any other format.

    The report shows tiles, not stages: `stages` is refused there (JSON keeps it). SVG draws each head's tiles over its scores.
    """
    options = _options(options)
    block_size = _whole(block_size, "block_size")
    check_block_size(block_size)
    from attncli.document import stages
    from attncli.document.blocks import mentioned
    from attncli.document.pages import ReportPage
    from attncli.formats import render
    from attncli.walkthroughs.online_report import tiling_grid, tiling_report, tilings

    s = result.scenario
    heads = options.heads or list(range(1, s.heads + 1))
    for head in heads:  # as run_page: one error, not an IndexError
        s.head_numbers(_whole(head, "heads"))
    if options.format is not Format.json and options.stages is not None:
        raise AttnError(f"the tiling report shows tiles, not stages ({', '.join(options.stages)})", key=option("stages"),
                        expected=f"no {option('stages')} with {option('block_size')}, or {option('format')} json")  # fmt: skip
    tiled = tilings(result, heads, block_size)

    def data() -> dict[str, Any]:
        from attncli.walkthroughs import data

        doc = data.run_json(result, options.stages or stages.STAGE_NAMES, heads)
        for entry, head in zip(doc["heads"], heads):
            entry["tiling"] = data.tiling_json(tiled[head], result.head(head).output)
        return doc

    p = decimals(options.precision, s.precision, result.round_steps)

    def report() -> blocks.Document:
        return mentioned(tiling_report(result, tiled, precision=p, full=options.full), options.names)

    return render(ReportPage(report, lambda: [tiling_grid(result, head, tiled[head], precision=p) for head in heads], data, p), options)


def render_decode(dec: Decode, options: Options, *, made_causal: bool) -> Document:
    """`attncli decode`: the attncli.decode/1 JSON, or the step-by-step report in any other format (SVG: the step × cached-key figure)."""
    from attncli.document.blocks import mentioned
    from attncli.document.pages import ReportPage
    from attncli.formats import render
    from attncli.walkthroughs.online_report import decode_grid, decode_report

    options = _options(options)
    if options.stages is not None:
        raise AttnError(f"decode shows steps, not stages ({', '.join(options.stages)})", key=option("stages"), expected="no stages")

    def data() -> dict[str, Any]:
        from attncli.walkthroughs.data import decode_json

        return decode_json(dec)

    p = decimals(options.precision, dec.scenario.precision, dec.result.round_steps)

    def report() -> blocks.Document:
        return mentioned(decode_report(dec, precision=p, full=options.full, made_causal=made_causal), options.names)

    return render(ReportPage(report, lambda: [decode_grid(dec)], data, p), options)


@record
class ModelInfo(_Shown):
    """What a checkpoint folder or GGUF file holds (`info`: the attncli.model-info/1 JSON without its schema key).

    `usage` spells how to read a supported checkpoint's layer (default: this API's `load_model` call; the command line: its `run`)."""

    info: dict[str, Any]
    usage: Callable[[dict[str, Any]], str] | None = None

    def _about(self) -> str:
        where = self.info.get("file") if self.info.get("format") == "gguf" else self.info.get("folder")
        return f"of {where}: {self.info.get('model_type')}"

    def document(self, options: Options) -> Document:
        from attncli.document.pages import ReportPage
        from attncli.formats import render
        from attncli.walkthroughs import model as walk

        usage = self.usage or walk.python_usage
        return render(ReportPage(lambda: walk.info_document(self.info, usage), lambda: [], lambda: walk.info_json(self.info), 3), options)


def model_info(path: str | Path) -> ModelInfo:
    """What the local checkpoint folder or GGUF file at `path` holds: architecture, layers, heads, sizes, RoPE, dtype, whether attncli reads it."""
    from attncli.sources.checkpoints.layer import model_info as read_info

    return ModelInfo(read_info(_path(path, "path")))


@record
class ModelTokens(_Shown):
    """How a checkpoint's tokenizer splits `text`: `tokens` has a row per token (position from 1, id, label, piece)."""

    folder: str
    text: str
    tokens: list[dict[str, Any]]
    not_applied: str | None  # tokenizer.json settings left out (padding, truncation), as the model's forward pass leaves them

    def _about(self) -> str:
        return f"of {self.text!r} by {self.folder}: {_count(len(self.tokens), 'token')}"

    def document(self, options: Options) -> Document:
        from attncli.document.pages import ReportPage
        from attncli.formats import render
        from attncli.walkthroughs import model as walk

        shown = (self.folder, self.text, self.tokens, self.not_applied)
        return render(ReportPage(lambda: walk.tokens_document(*shown), lambda: [], lambda: walk.tokens_json(*shown), 3), options)


def model_tokens(path: str | Path, text: str, *, special_tokens: str = "auto") -> ModelTokens:
    """The tokens of `text` as the checkpoint's forward pass receives them; `special_tokens` "auto" (as the tokenizer adds them) or "none"."""
    from attncli.sources.arguments import shown_path
    from attncli.sources.checkpoints.layer import checkpoint_tokens
    from attncli.sources.checkpoints.scenario import check_special_tokens
    from attncli.walkthroughs.model import MAX_TOKENS_SHOWN, token_rows

    text = _text(text, "text")
    check_special_tokens(special_tokens)
    folder = _path(path, "path")
    if not folder.is_dir() and not folder.is_file() and not str(folder).startswith("ollama:"):
        from attncli.sources.checkpoints.config import not_a_folder

        raise not_a_folder(folder, "a folder with tokenizer.json, or a GGUF file")
    tokenized = checkpoint_tokens(folder, text, special_tokens=special_tokens == "auto", max_tokens=MAX_TOKENS_SHOWN)
    return ModelTokens(shown_path(folder), text, token_rows(tokenized.ids, tokenized.labels, tokenized.pieces), tokenized.not_applied)
