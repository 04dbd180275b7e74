"""attncli's benchmarks: the four comparisons of the speed targets, as ratios against baselines run alternately.

    python benchmarks/bench.py [--pairs N]

Builds its inputs in a temporary folder, runs each comparison as alternating pairs of
subprocesses (at least 7), and prints a table of medians and ratios. Machines are noisy:
read the ratios, not the absolute times. Needs attncli installed in this Python.
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


def timed(command: list[str]) -> tuple[float, int]:
    """Wall time and peak resident memory (KiB) of one run, its output thrown away."""
    env = dict(os.environ, COLUMNS="120", LINES="40")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its .pyc files; an editable one writes them on the warm-up run
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{process.stderr.read().decode() if process.stderr else ''}")
    return elapsed, usage.ru_maxrss


def compare(ours: list[str], baseline: list[str], pairs: int) -> dict:
    """Alternate the two commands `pairs` times; medians of time and of peak memory."""
    timed(ours), timed(baseline)  # warm the caches (pyc files, the OS's file cache)
    a_times, b_times, a_mem, b_mem = [], [], [], []
    for _ in range(pairs):
        t, m = timed(ours)
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
    parser.add_argument("--pairs", type=int, default=9, help="alternating pairs per comparison (at least 7)")
    pairs = max(7, parser.parse_args().pairs)
    attncli = [PY, "-m", "attncli"]
    with tempfile.TemporaryDirectory() as folder:
        big = Path(folder) / "big.yaml"
        big.write_text(scenario_yaml(1024, 64, 64, seed=1))
        tall = Path(folder) / "tall.yaml"
        tall.write_text(scenario_yaml(2048, 64, 64, seed=2))
        rows = []

        light = all(light_imports(args) for args in (["--help"], ["--version"], ["scenarios"]))
        rows.append(("1. --help, --version, scenarios import no numpy/yaml", "-", "-", "yes" if light else "NO", "yes"))

        floor = [PY, "-c", "import numpy, yaml, typer, rich.console, rich.table"]
        r = compare([*attncli, "explain", "--word", "cat"], floor, pairs)
        rows.append(("2. explain --word cat vs importing its libraries", f"{r['ours']:.3f}", f"{r['baseline']:.3f}", f"{r['ratio']:.2f}x", "<= 1.25x"))

        naive = [PY, str(HERE / "naive_reference.py"), str(big)]
        r = compare([*attncli, "run", str(big), "--format", "json"], naive, pairs)
        rows.append(("3. run L=1024 --format json vs naive script: time", f"{r['ours']:.3f}", f"{r['baseline']:.3f}", f"{r['ratio']:.3f}x", "<= 0.1x"))
        rows.append(("   ... peak memory (MiB)", f"{r['ours_mem'] / 1024:.0f}", f"{r['baseline_mem'] / 1024:.0f}", f"{r['mem_ratio']:.2f}x", "<= 0.75x"))

        r = compare([*attncli, "run", str(tall)], [*attncli, "run", str(tall), "--format", "json", "--stages", "output"], pairs)
        rows.append(("4. run L=2048 tables vs --format json --stages output", f"{r['ours']:.3f}", f"{r['baseline']:.3f}", f"{r['ratio']:.2f}x", "<= 2x"))

        rows += real_model_rows(Path(folder), pairs)

    widths = [max(len(str(row[i])) for row in rows + [HEADER]) for i in range(5)]
    for row in [HEADER, tuple("-" * w for w in widths), *rows]:
        print("| " + " | ".join(str(cell).ljust(w) for cell, w in zip(row, widths)) + " |")
    print(f"\n{pairs} alternating pairs each, medians; Python {sys.version.split()[0]}, numpy {np.__version__}, "
          f"{os.cpu_count()} CPUs, {os.uname().machine}")  # fmt: skip


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
