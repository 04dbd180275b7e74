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

In Jupyter each result shows itself as tables (`_repr_html_`, `_repr_markdown_`). Every
function raises `attncli.errors.AttnError` for a bad input, with the same one-line message
the command prints. Heads and positions count from 1, as everywhere in attncli.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attncli.formats import Document, Format, Options

if TYPE_CHECKING:
    from attncli.core.decode import Decode
    from attncli.core.engine import HeadResult, RunResult
    from attncli.core.explain import Explanation
    from attncli.core.scenario import Scenario
    from attncli.sources.limits import Limits

__all__ = [
    "Decoded", "Explained", "Ran", "Tiled",
    "decode", "explain", "load", "load_model", "render_options", "run", "text_of", "tiles",
]  # fmt: skip


def load(source: str | Path, *, limits: Limits | None = None) -> Scenario:
    """A scenario from a built-in name (`"cat"`) or a YAML file; a file with `model:` loads that checkpoint's layer."""
    from attncli.sources.limits import Limits
    from attncli.sources.yaml_scenario import load as load_yaml

    return load_yaml(str(source), limits=limits or Limits())


def load_model(
    path: str | Path,
    *,
    layer: int,
    sentence: str,
    special_tokens: str = "auto",
    head: int | None = None,
    limits: Limits | None = None,
) -> Scenario:
    """Layer `layer` (from 1) of the local checkpoint at `path`, for `sentence`, as a Scenario (nothing is downloaded).

    `special_tokens` is "auto" (as the tokenizer's post-processor adds them) or "none"; `head`
    only adds notes about that head to the header.
    """
    from attncli.sources.checkpoints.scenario import load_scenario
    from attncli.sources.limits import Limits

    return load_scenario(Path(path), layer=layer, sentence=sentence, special_tokens=special_tokens, head=head, limits=limits or Limits())


def _scenario(scenario: Scenario | str | Path) -> Scenario:
    return load(scenario) if isinstance(scenario, str | Path) else scenario


def render_options(format: Format | str = Format.markdown, **options: Any) -> Options:
    """`Options` from keywords: stages (a list or "a,b"), heads, precision, full, heatmap, standalone, heading_level, to_file."""
    from attncli.document import stages as stage_table

    fmt = Format(format)
    stages = options.pop("stages", None)
    listed = stages if isinstance(stages, str) or stages is None else ",".join(stages)
    options.setdefault("to_file", True)  # plain text: no terminal colour codes in a string
    return Options(format=fmt, stages=stage_table.parse(listed), **options)


def text_of(document: Document) -> str:
    """A rendered document as one string (JSON and the other streamed formats arrive as UTF-8 chunks)."""
    if isinstance(document, str):
        return document
    return b"".join(document).decode("utf-8")


class _Shown:
    """What every result shares: `document(options)` for streaming, `render(format, …)` for a string, notebook display."""

    def document(self, options: Options) -> Document:
        raise NotImplementedError

    def render(self, format: Format | str = Format.markdown, **options: Any) -> str:
        """The result as text in `format` (table, json, markdown, latex, csv, html, svg), as the command prints it."""
        return text_of(self.document(render_options(format, **options)))

    def _repr_markdown_(self) -> str:
        return self.render(Format.markdown)

    def _repr_html_(self) -> str:
        return self.render(Format.html, standalone=False)


@dataclass(frozen=True, eq=False)
class Ran(_Shown):
    """Every stage of every head: `result` is the engine's RunResult (read-only NumPy arrays)."""

    result: RunResult

    @property
    def scenario(self) -> Scenario:
        return self.result.scenario

    def head(self, number: int) -> HeadResult:
        """Head `number`, counted from 1: its Q, K, V, scores, weights, output …"""
        self.scenario.head_numbers(number)  # one clear error for a head that does not exist
        return self.result.head(number)

    def document(self, options: Options) -> Document:
        from attncli.formats import render_run

        heads = options.heads or self.scenario.head_numbers(None)
        return render_run(self.result, options._replace(heads=heads))


@dataclass(frozen=True, eq=False)
class Tiled(_Shown):
    """FlashAttention's tiled computation of every head, `block_size` queries and keys at a time."""

    result: RunResult
    block_size: int

    def document(self, options: Options) -> Document:
        from attncli.walkthroughs.online_report import tiling_document

        return tiling_document(self.result, options, self.block_size)


@dataclass(frozen=True, eq=False)
class Explained(_Shown):
    """One query followed through the arithmetic: `explanation` holds every number of the walk-through."""

    explanation: Explanation

    def document(self, options: Options) -> Document:
        from attncli.formats import render_explain

        return render_explain(self.explanation, options)


@dataclass(frozen=True, eq=False)
class Decoded(_Shown):
    """Causal generation with a KV cache, step by step; `made_causal` when the scenario had no causal mask of its own."""

    decoded: Decode
    made_causal: bool

    def document(self, options: Options) -> Document:
        from attncli.walkthroughs.online_report import decode_document

        return decode_document(self.decoded, options, made_causal=self.made_causal)


def run(scenario: Scenario | str | Path, *, round_steps: int | None = None) -> Ran:
    """Every stage of attention; with round_steps, each intermediate rounded as by hand (the exact run kept beside it)."""
    from attncli.core import engine

    return Ran(engine.run(_scenario(scenario), round_steps=round_steps))


def tiles(scenario: Scenario | str | Path, block_size: int, *, round_steps: int | None = None) -> Tiled:
    """FlashAttention's tiles of `block_size` for every head (render it; JSON adds each head's "tiling")."""
    from attncli.core import engine

    return Tiled(engine.run(_scenario(scenario), round_steps=round_steps), block_size)


def explain(
    scenario: Scenario | str | Path,
    word: str | None = None,
    *,
    position: int | None = None,
    head: int = 1,
    round_steps: int | None = None,
    block_size: int | None = None,
) -> Explained:
    """Follow `word` (or the token at `position`, from 1) through head `head`; only that row is computed."""
    from attncli.core.explain import explain_scenario, find_word

    loaded = _scenario(scenario)
    loaded.head_numbers(head)  # a head that does not exist is an error before any work
    where, others = find_word(loaded, word, position)
    return Explained(explain_scenario(loaded, position=where, head=head, round_steps=round_steps, others=others, block_size=block_size))


def decode(scenario: Scenario | str | Path, *, head: int = 1, round_steps: int | None = None) -> Decoded:
    """Generate the sentence token by token with a KV cache (a scenario without a causal mask is given one)."""
    from attncli.core import engine
    from attncli.core.decode import causal_version
    from attncli.core.decode import decode as decode_head

    loaded = _scenario(scenario)
    loaded.head_numbers(head)
    causal, made_causal = causal_version(loaded)
    return Decoded(decode_head(engine.run(causal, round_steps=round_steps), head), made_causal)

