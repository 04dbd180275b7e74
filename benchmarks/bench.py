"""attncli's benchmarks: every speed and memory target, as ratios against baselines run alternately.

    python benchmarks/bench.py [--pairs N] [--only 6,9] [--docs docs/performance.md]
    python benchmarks/bench.py --only 14,15     # an 8B-class layer: writes 0.8 GiB into the temporary folder

Builds its inputs in a temporary folder, runs each comparison as alternating pairs of
subprocesses (7 by default), and prints a Markdown table of medians and ratios; `--docs`
writes the same table into the performance document. Machines are noisy: read the ratios,
not the absolute times. Needs attncli installed in this Python.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PY = sys.executable
HERE = Path(__file__).parent


def scenario_yaml(L: int, d_model: int, d_k: int, *, seed: int) -> str:
    """A random causal one-head scenario as YAML text."""
    rng = np.random.default_rng(seed)

    def rows(matrix: np.ndarray) -> str:
        return "\n".join("  - [" + ", ".join(repr(float(x)) for x in row) + "]" for row in matrix)

    X = rng.standard_normal((L, d_model))
    weights = {name: rng.standard_normal((d_model, d_k)) / np.sqrt(d_model) for name in ("W_Q", "W_K", "W_V")}
    parts = ["name: big", "tokens: [" + ", ".join(f"t{i}" for i in range(1, L + 1)) + "]", "mask: causal", "scale: sqrt_dk",
             "embeddings:", rows(X)]  # fmt: skip
    for name, matrix in weights.items():
        parts += [f"{name}:", rows(matrix)]
    return "\n".join(parts) + "\n"


def timed(command: list[str], status: int = 0) -> tuple[float, int]:
    """Wall time and peak resident memory (KiB) of one run, its output thrown away."""
    env = dict(os.environ, COLUMNS="120", LINES="40")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its .pyc files; an editable one writes them on the warm-up run
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, exit_status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(exit_status) != status:
        raise SystemExit(f"failed: {' '.join(command)}\n{process.stderr.read().decode() if process.stderr else ''}")
    return elapsed, usage.ru_maxrss


def compare(ours: list[str], baseline: list[str], pairs: int, *, status: int = 0) -> dict:
    """Alternate the two commands `pairs` times; medians of time and of peak memory. `ours` must exit with `status`."""
    timed(ours, status), timed(baseline)  # warm the caches (pyc files, the OS's file cache)
    a_times, b_times, a_mem, b_mem = [], [], [], []
    for _ in range(pairs):
        t, m = timed(ours, status)
        a_times.append(t), a_mem.append(m)
        t, m = timed(baseline)
        b_times.append(t), b_mem.append(m)
    return {
        "ours": statistics.median(a_times), "baseline": statistics.median(b_times),
        "ratio": statistics.median(a_times) / statistics.median(b_times),
        "mem_ratio": statistics.median(a_mem) / statistics.median(b_mem),
        "ours_mem": statistics.median(a_mem), "baseline_mem": statistics.median(b_mem),
    }  # fmt: skip


def light_imports(args: list[str]) -> bool:
    """True when `attncli ARGS` imports neither numpy nor yaml."""
    check = (
        "import sys, runpy; sys.argv = ['attncli', *sys.argv[1:]]\n"
        "try:\n    runpy.run_module('attncli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(repr(sorted({'numpy', 'yaml'} & set(sys.modules))))"
    )
    done = subprocess.run([PY, "-c", check, *args], capture_output=True, text=True)
    return done.stderr.strip().endswith("[]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=7, help="alternating pairs per comparison (at least 3; 7 or more for the table in the docs)")
    parser.add_argument("--only", default="", help="run only the comparisons whose number is in this comma list, e.g. 6,9")
    parser.add_argument("--docs", type=Path, help="also write the table into this Markdown file, between its bench markers")
    args = parser.parse_args()
    pairs = max(3, args.pairs)
    only = {part.strip() for part in args.only.split(",") if part.strip()}
    rows: list[tuple[str, str, str, str, str]] = []
    with tempfile.TemporaryDirectory() as folder:
        for numbers, comparison in COMPARISONS:
            if not only or only & set(numbers.split(",")):
                rows += comparison(Path(folder), pairs)
        if not only or "5" in only:
            rows += real_model_rows(Path(folder), pairs)
        if not only or only & {"14", "15"}:
            from big_layer import big_layer_rows  # an 8B-class layer (benchmarks/big_layer.py)

            rows += big_layer_rows(Path(folder), pairs)

    table = markdown_table(rows)
    footer = (f"{pairs} alternating pairs each, medians; Python {sys.version.split()[0]}, numpy {np.__version__}, "
              f"{os.cpu_count()} CPUs, {os.uname().machine}")  # fmt: skip
    print(table + "\n\n" + footer)
    if args.docs is not None:
        write_docs(args.docs, table + "\n\n" + footer)


def markdown_table(rows: list[tuple[str, str, str, str, str]]) -> str:
    widths = [max(len(str(row[i])) for row in rows + [HEADER]) for i in range(5)]
    lines = ["| " + " | ".join(str(cell).ljust(w) for cell, w in zip(row, widths)) + " |" for row in [HEADER, tuple("-" * w for w in widths), *rows]]
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


def row(name: str, r: dict, target: str, *, digits: int = 2) -> tuple[str, str, str, str, str]:
    return (name, f"{r['ours']:.3f}", f"{r['baseline']:.3f}", f"{r['ratio']:.{digits}f}x", target)


def memory_row(r: dict, target: str) -> tuple[str, str, str, str, str]:
    return ("   ... peak memory (MiB)", f"{r['ours_mem'] / 1024:.0f}", f"{r['baseline_mem'] / 1024:.0f}", f"{r['mem_ratio']:.2f}x", target)


def scenario_file(folder: Path, L: int, *, heads: int = 1, d_model: int = 64, d_k: int = 64, seed: int = 1, heads_last: bool = False) -> Path:
    """A random causal scenario written once per run of the benchmark (see scenario_yaml)."""
    path = folder / f"L{L}-H{heads}-d{d_model}{'-late' if heads_last else ''}.yaml"
    if not path.exists():
        text = scenario_yaml(L, d_model, d_k, seed=seed)
        if heads > 1:
            text = text + f"heads: {heads}\n" if heads_last else text.replace("mask: causal", f"heads: {heads}\nmask: causal")
        path.write_text(text)
    return path


def startup(folder: Path, pairs: int) -> list[tuple[str, str, str, str, str]]:
    """1. --help imports nothing heavy; 2. explain --word cat and run cat against importing their libraries."""
    light = all(light_imports(args) for args in (["--help"], ["--version"], ["scenarios"]))
    rows = [("1. --help, --version, scenarios import no numpy/yaml", "-", "-", "yes" if light else "NO", "yes")]
    rows.append(row("2. explain --word cat vs importing its libraries", compare([*ATTNCLI, "explain", "--word", "cat"], IMPORT_FLOOR, pairs), "<= 1.25x"))
    rows.append(row("   run cat (tables) vs importing its libraries", compare([*ATTNCLI, "run", "cat"], IMPORT_FLOOR, pairs), "<= 1.15x"))
    return rows


def json_vs_naive(folder: Path, pairs: int) -> list[tuple[str, str, str, str, str]]:
    """3. JSON of 1,024 tokens against a naive notebook script."""
    big = scenario_file(folder, 1024)
    r = compare([*ATTNCLI, "run", str(big), "--format", "json"], [PY, str(HERE / "naive_reference.py"), str(big)], pairs)
    return [row("3. run L=1024 --format json vs naive script: time", r, "<= 0.1x", digits=3), memory_row(r, "<= 0.75x")]


def tall_tables(folder: Path, pairs: int) -> list[tuple[str, str, str, str, str]]:
    """4. Tables of 2,048 tokens (a screenful) against the JSON of the output alone."""
    tall = scenario_file(folder, 2048, seed=2)
    r = compare([*ATTNCLI, "run", str(tall)], [*ATTNCLI, "run", str(tall), "--format", "json", "--stages", "output"], pairs)
    return [row("4. run L=2048 tables vs --format json --stages output", r, "<= 2x")]


def many_heads(folder: Path, pairs: int) -> list[tuple[str, str, str, str, str]]:
    """6. Eight heads of 64 tokens: tables, HTML and SVG against the same run as JSON."""
    wide = scenario_file(folder, 64, heads=8, seed=3)
    json = [*ATTNCLI, "run", str(wide), "--format", "json"]
    rows = [row("6. run 8 heads x 64 tokens: tables vs --format json", compare([*ATTNCLI, "run", str(wide)], json, pairs), "<= 2x")]
    for fmt in ("html", "svg"):
        rows.append(row(f"   ... --format {fmt} vs --format json", compare([*ATTNCLI, "run", str(wide), "--format", fmt], json, pairs), "<= 3x"))
    return rows


def json_vs_floor(folder: Path, pairs: int) -> list[tuple[str, str, str, str, str]]:
    """7. JSON of 4,096 tokens against the irreducible work (floor_json.py)."""
    huge = scenario_file(folder, 4096, seed=4)
    r = compare([*ATTNCLI, "run", str(huge), "--format", "json"], [PY, str(HERE / "floor_json.py"), str(huge)], pairs)
    return [row("7. run L=4096 --format json vs floor script", r, "<= 1.5x"), memory_row(r, "-")]


def other_formats(folder: Path, pairs: int) -> list[tuple[str, str, str, str, str]]:
    """8. Markdown, LaTeX and CSV of 1,024 tokens against JSON."""
    big = scenario_file(folder, 1024)
    json = [*ATTNCLI, "run", str(big), "--format", "json"]
    rows = []
    for number, fmt in enumerate(("markdown", "latex", "csv")):
        r = compare([*ATTNCLI, "run", str(big), "--format", fmt], json, pairs)
        rows += [row(f"{'8.' if not number else '  '} run L=1024 --format {fmt} vs --format json", r, "<= 1.5x"), memory_row(r, "<= 1.2x")]
    return rows


def explain_rows(folder: Path, pairs: int) -> list[tuple[str, str, str, str, str]]:
    """9-11. Narrated explain against JSON explain, its memory against run's, and a wide scenario against cat."""
    tall = scenario_file(folder, 2048, seed=2)
    word = ["--word", "t2000"]
    r = compare([*ATTNCLI, "explain", "-s", str(tall), *word], [*ATTNCLI, "explain", "-s", str(tall), *word, "--format", "json"], pairs)
    rows = [row("9. explain L=2048 narrated vs --format json", r, "<= 3x")]
    huge = scenario_file(folder, 4096, seed=4)
    r = compare([*ATTNCLI, "explain", "-s", str(huge), "--word", "t4000", "--format", "json"], [*ATTNCLI, "run", str(huge), "--format", "json"], pairs)
    rows.append(("10. explain L=4096 peak memory vs run --format json (MiB)", f"{r['ours_mem'] / 1024:.0f}", f"{r['baseline_mem'] / 1024:.0f}",
                 f"{r['mem_ratio']:.2f}x", "<= 0.5x"))  # fmt: skip
    wide = scenario_file(folder, 2, d_model=2000, d_k=2, seed=5)
    r = compare([*ATTNCLI, "explain", "-s", str(wide), "--word", "t2"], [*ATTNCLI, "explain", "--word", "cat"], pairs)
    rows.append(row("11. explain 2 tokens, d_model 2000 vs explain --word cat", r, "<= 3x"))
    return rows


def rounding(folder: Path, pairs: int) -> list[tuple[str, str, str, str, str]]:
    """12. Tables with --round-steps 3 against plain tables, 1,024 tokens."""
    big = scenario_file(folder, 1024)
    r = compare([*ATTNCLI, "run", str(big), "--round-steps", "3"], [*ATTNCLI, "run", str(big)], pairs)
    return [row("12. run L=1024 --round-steps 3 tables vs plain tables", r, "<= 2x")]


def refusal(folder: Path, pairs: int) -> list[tuple[str, str, str, str, str]]:
    """13. Over-limit files refused before their matrices are parsed, against run cat."""
    rows = []
    for name, path in (
        ("13. refuse 4,097 tokens (5.7 MB) vs run cat", scenario_file(folder, 4097)),
        ("    refuse 8 heads x 2,048 tokens, heads: last, vs run cat", scenario_file(folder, 2048, heads=8, heads_last=True)),
    ):
        r = compare([*ATTNCLI, "run", str(path), "--format", "json"], [*ATTNCLI, "run", "cat", "--format", "json"], pairs, status=1)
        rows.append(row(name, r, "<= 2x"))
    return rows


COMPARISONS = [
    ("1,2", startup), ("3", json_vs_naive), ("4", tall_tables), ("6", many_heads), ("7", json_vs_floor),
    ("8", other_formats), ("9,10,11", explain_rows), ("12", rounding), ("13", refusal),
]  # fmt: skip


HEADER = ("comparison", "ours (s)", "baseline (s)", "ratio", "target")


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


def real_model_rows(folder: Path, pairs: int) -> list[tuple[str, str, str, str, str]]:
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
    return [
        (f"5. run --model GPT-2 124M ({size:.0f} MiB), {count} tokens, layer 6 vs run cat", f"{r['ours']:.3f}", f"{r['baseline']:.3f}",
         f"{r['ratio']:.2f}x", "a few seconds"),
        ("   ... peak memory (MiB)", f"{r['ours_mem'] / 1024:.0f}", f"{r['baseline_mem'] / 1024:.0f}", f"{r['mem_ratio']:.2f}x", "< 1024 MiB"),
    ]  # fmt: skip

if __name__ == "__main__":
    main()
