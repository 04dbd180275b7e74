"""`attncli export`: render many scenarios to files in one go, e.g. to regenerate a blog post's tables.

Each scenario is written atomically to OUT_DIR/<stem>.<ext>; one that fails is reported
and the others are still written; an older file of a failed scenario is left untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from attncli.errors import AttnError, option
from attncli.formats import Document, Options
from attncli.io import write_atomic
from attncli.sources.limits import Limits


@dataclass
class Report:
    """What an export did, scenario by scenario."""

    written: list[Path] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (scenario, why)
    failed: list[AttnError] = field(default_factory=list)

    def summary(self, out_dir: Path, format_name: str) -> str:
        total = len(self.written) + len(self.skipped) + len(self.failed)
        extras = [f"{len(self.skipped)} skipped"] * bool(self.skipped) + [f"{len(self.failed)} failed"] * bool(self.failed)
        tail = f" ({', '.join(extras)})" if extras else ""
        return f"Exported {len(self.written)} of {total} scenario{'s' * (total != 1)} to {out_dir} as {format_name}{tail}."


def sources(inputs: list[str]) -> Iterator[str]:
    """Each input as it is, a folder as its *.yaml and *.yml files in name order (regular files: a FIFO named x.yaml would wait
    for a writer forever, a device would be read; named on its own, a pipe is read, as `run <(…)` reads one)."""
    for name in inputs:
        path = Path(name)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
            if not found:
                raise AttnError("the folder holds no .yaml or .yml files", file=name, expected="a folder of scenario files")
            yield from map(str, found)
        else:
            yield name


def export(
    names: list[str],
    *,
    out_dir: Path,
    options: Options,
    head: int | None,
    round_steps: int | None,
    explain_word: str | None,
    limits: Limits,
    report_error: Callable[[AttnError], None],
    note: Callable[[str], None],
    advance: Callable[[], None] = lambda: None,
    block_size: int | None = None,
    decode: bool = False,
    force: bool = False,
) -> Report:
    """Render every scenario of `names` (see `sources`) into `out_dir`; `advance()` after each.

    As `run` by default; `explain_word` as `explain` (with `block_size`, its online softmax too);
    `block_size` alone as `run --block-size` (the tiling report); `decode` as `decode`. `force` replaces read-only files.
    """
    if decode and (explain_word is not None or block_size is not None):
        other = option("explain") if explain_word is not None else option("block_size")
        raise AttnError(f"{option('decode')} and {other} are both given", key=option("decode"), expected=f"one of {option('decode')}, {other}")
    from attncli import api

    api.check_block_size(block_size)  # an option's error is one line, not one per scenario
    if not out_dir.is_dir():
        raise AttnError(
            f"the folder {str(out_dir)!r} does not exist" if not out_dir.exists() else f"{str(out_dir)!r} is not a folder",
            key="--out-dir",
            expected="an existing folder; create it first",
        )
    report = Report()
    written_from: dict[Path, str] = {}
    for source in names:
        try:
            target = out_dir / f"{Path(source).stem}.{options.format.extension}"
            if target in written_from:
                raise AttnError(
                    f"would overwrite {target}, already written from {written_from[target]}",
                    file=source,
                    expected="scenario files with different names",
                )
            document = _render(source, options=options, head=head, round_steps=round_steps, word=explain_word, limits=limits,
                               block_size=block_size, decode=decode)  # fmt: skip
            if document is None:
                report.skipped.append((source, f"it has no token {explain_word!r}"))
                note(f"attncli: skipped {source}: it has no token {explain_word!r}")
            else:
                write_atomic(target, document, force=force, key=option("out_dir"))
                written_from[target] = source
                report.written.append(target)
        except AttnError as error:
            error.located(file=source)
            report.failed.append(error)
            report_error(error)
        advance()
    return report


def _render(
    source: str, *, options: Options, head: int | None, round_steps: int | None, word: str | None, limits: Limits,
    block_size: int | None = None, decode: bool = False,
) -> Document | None:
    """The document of one scenario; None when it lacks the word to explain."""
    from attncli import api

    scenario = api.load(source, limits=limits)
    heads = scenario.head_numbers(head)
    if word is not None:
        try:
            explained = api.explain(scenario, word, head=head or 1, round_steps=round_steps, block_size=block_size)
        except AttnError as error:
            if error.key != option("word"):  # the scenario has no such token: skipped, not failed
                raise
            return None
        return explained.document(options._replace(to_file=True))
    if decode:
        return api.decode(scenario, head=head or 1, round_steps=round_steps).document(options._replace(to_file=True))
    if block_size is not None:
        return api.tiles(scenario, block_size, round_steps=round_steps).document(options._replace(heads=heads, to_file=True))
    return api.run(scenario, round_steps=round_steps).document(options._replace(heads=heads, to_file=True))
