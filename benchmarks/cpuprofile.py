"""Where one attncli command spends its CPU time: a sampling profile, as shares of the whole.

    python benchmarks/cpuprofile.py [--runs N] [--interval MS] [--top N] run FILE --format html

Runs `attncli ARGS` in this process with its output thrown away, samples the Python stack
every INTERVAL ms of CPU time (the process's user + system time, ITIMER_PROF), and prints to
stderr each function's share of the samples: inclusive (the function and what it calls) and
self (the function itself, with the C calls it makes, numpy's included). CPU time, not wall
time, so the shares hold on a loaded machine; a sample is weighted by the CPU time since the
one before it, so a long C call that swallows several timer ticks still counts in full.
The kernel's timer ticks every few ms, so one run of a short command gives a hundred-odd
samples: `--runs N` (default 5) profiles the command in N fresh processes, one after the
other, and adds their samples. Shares, not seconds: read them as ratios. Each process gets
OPENBLAS_NUM_THREADS=1 (and OpenMP's, MKL's), as bench.py's children do.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from types import CodeType, FrameType


def where(code: CodeType) -> str:
    """module:function, with attncli's files by their path in the package and others by their file name."""
    path = code.co_filename
    if path.startswith("<frozen importlib"):
        return "(import machinery)"
    marker = os.sep + "attncli" + os.sep
    short = "attncli/" + path.rsplit(marker, 1)[1] if marker in path else "/".join(path.split(os.sep)[-2:])
    return f"{short}:{code.co_name}"


PHASES = (  # the first that a sample's stack shows names its phase
    ("imports", ("(import machinery)",)),
    ("reading", ("attncli/cli/model.py:choose_scenario", "attncli/sources/yaml_scenario.py:load")),
    ("engine", ("attncli/core/engine.py:run", "attncli/core/explain.py:explain_scenario")),
    ("writing", ("attncli/io.py:emit", "attncli/api.py:render_run", "attncli/api.py:render_explain")),
)


def phase(names: list[str]) -> str:
    """imports, reading, engine, writing or other: where one sample's stack was."""
    for name, marks in PHASES:
        if any(mark in names for mark in marks):
            return name
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="fresh processes to profile and add up (default 5)")
    parser.add_argument("--interval", type=float, default=1.0, help="ms of CPU time between samples (default 1)")
    parser.add_argument("--top", type=int, default=25, help="rows of each list (default 25)")
    parser.add_argument("--raw", help=argparse.SUPPRESS)  # one profiled process: write its counts as JSON to this file
    parser.add_argument("args", nargs=argparse.REMAINDER, help="attncli's arguments")
    options = parser.parse_args()
    if options.raw:
        profile_here(options.args, options.interval / 1000, options.raw)
        return

    env = dict(os.environ) | {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    phases: Counter[str] = Counter()
    total, count = 0.0, 0
    with tempfile.TemporaryDirectory() as folder:
        raw = os.path.join(folder, "counts.json")
        for _ in range(max(1, options.runs)):
            command = [sys.executable, __file__, "--interval", str(options.interval), "--raw", raw, *options.args]
            subprocess.run(command, env=env, check=True)
            with open(raw, encoding="utf-8") as stream:
                counts = json.load(stream)
            inclusive.update(counts["inclusive"]), own.update(counts["self"]), phases.update(counts["phases"])
            total, count = total + counts["total"], count + counts["samples"]
    out = sys.stderr
    out.write(f"attncli {' '.join(options.args)}\n{count} samples in {options.runs} runs; shares of all the CPU time sampled\n")
    shares = ", ".join(f"{name} {100 * phases[name] / (total or 1.0):.0f}%" for name in [*(name for name, _ in PHASES), "other"])
    out.write(f"phases (each sample counted once, in the first of these its stack shows): {shares}\n")
    for title, counter in (("inclusive", inclusive), ("self", own)):
        out.write(f"\n{title}:\n")
        for name, weight in counter.most_common(options.top):
            out.write(f"  {100 * weight / (total or 1.0):5.1f}%  {name}\n")


def profile_here(args: list[str], seconds: float, raw: str) -> None:
    """Run `attncli ARGS` in this process under the sampling timer; write the counts to `raw`."""
    samples: list[tuple[float, tuple[CodeType, ...]]] = []
    last = [time.process_time()]

    def sample(signum: int, frame: FrameType | None) -> None:
        now = time.process_time()
        stack = []
        while frame is not None:
            stack.append(frame.f_code)
            frame = frame.f_back
        samples.append((now - last[0], tuple(stack)))
        last[0] = now

    signal.signal(signal.SIGPROF, sample)
    sys.argv = ["attncli", *args]
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the command's output, written by whatever means, goes nowhere
    signal.setitimer(signal.ITIMER_PROF, seconds, seconds)
    try:
        runpy.run_module("attncli", run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        sys.stdout.flush()
        os.dup2(saved, 1)

    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for weight, stack in samples:
        names = [where(code) for code in stack if code.co_filename != __file__ and "runpy" not in code.co_filename]
        if not names:
            continue
        own[names[0]] += weight
        for name in set(names):
            inclusive[name] += weight
    phases: Counter[str] = Counter()
    for weight, stack in samples:
        phases[phase([where(code) for code in stack])] += weight
    counts = {"inclusive": inclusive, "self": own, "phases": phases, "total": sum(weight for weight, _ in samples), "samples": len(samples)}
    with open(raw, "w", encoding="utf-8") as stream:
        json.dump(counts, stream)


if __name__ == "__main__":
    main()
