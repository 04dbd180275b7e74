"""Rows 14-15 of the benchmark: an 8B-class layer (Llama 3 8B's shapes, random bfloat16 weights) on a laptop.

    python benchmarks/big_layer.py [--pairs N] [--tokens L]      # these rows alone
    python benchmarks/bench.py --only 14,15                       # the same, inside the full table

14. Time per layer: one whole layer as attncli computes an earlier layer (each matrix read from
    the memory map and widened to float64, RMSNorm, attention, SwiGLU MLP) against that layer's
    float64 GEMM floor: its FLOPs at the float64 GEMM rate measured in the same child process,
    alternately, on a (L × 4096)·(4096 × 14336) product of ready float64 arrays. One BLAS thread
    (--all-threads for every thread), so that the machine's load moves both alike; CPU time of
    the process (time.process_time), as the rest of the benchmark measures.
15. Peak anonymous resident memory (RssAnon, sampled every 2 ms: the process's own allocations,
    not the file pages the memory map reads) of `attncli run --model … --layer N --head 29` for the
    deepest layer and the first, against one layer's weights in float64 (1,664 MiB).

The checkpoint (2 layers, 0.81 GiB, scripts/make_big_checkpoint.py) is written into the bench's
temporary folder and removed with it.
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

PY = sys.executable
HERE = Path(__file__).parent
ROOT = HERE.parent
D, H, G, D_K, INNER = 4096, 32, 8, 128, 14336
LAYER_NUMBERS = D * H * D_K + 2 * D * G * D_K + H * D_K * D + 3 * D * INNER  # 218,103,808 weights
LAYER_F64_MIB = 8 * LAYER_NUMBERS / 2**20  # 1,664 MiB


def layer_flops(L: int) -> float:
    """Multiply-adds × 2 of one layer over L tokens: the seven projections and the two attention products."""
    return 2.0 * L * LAYER_NUMBERS + 2.0 * 2 * H * L * L * D_K


def make_checkpoint(folder: Path, layers: int = 2) -> Path:
    model = folder / "llama-8b-shape"
    if not (model / "config.json").is_file():
        subprocess.run([PY, str(ROOT / "scripts" / "make_big_checkpoint.py"), str(model), "--layers", str(layers)], check=True, capture_output=True)
    return model


def sentence_of(model: Path, tokens: int) -> str:
    """A sentence the checkpoint's tokenizer splits into exactly `tokens` tokens (<s> included)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
    words = ["The", "cat", "sat", "on", "the", "mat", ",", "then", "the", "cat", "slept", "."]
    text, n = "", 0
    while len(tokenizer.encode(text).ids) < tokens:
        longer = (text + " " + words[n % len(words)]).strip()
        if len(tokenizer.encode(longer).ids) > tokens:
            text += "a"  # one more token of one letter
        else:
            text = longer
        n += 1
    return text


# one child process measures both, alternately: the layer as attncli computes it, and the GEMM rate
_LAYER_TIMER = r"""
import json, statistics, sys, time
from pathlib import Path
import numpy as np
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import Weights
from attncli.sources.checkpoints.families import read_config
from attncli.sources.checkpoints.rope import rope_spec
from attncli.sources.checkpoints.safetensors import Checkpoint
from attncli.sources.checkpoints.layer import checkpoint_tokens

model, text, pairs = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
cfg = read_config(model)
ids = checkpoint_tokens(model, text, special_tokens=True, max_tokens=100_000).ids
w = Weights(Checkpoint(model), probe="embed_tokens.weight", prefixes=("model.", ""))
rope = rope_spec(cfg.rope, cfg.head_dim)
h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)
rng = np.random.default_rng(0)
A = rng.standard_normal((len(ids), cfg.hidden_size))
B = rng.standard_normal((cfg.hidden_size, cfg.intermediate_size))
llama._layer(cfg, w, 0, h, rope)  # warm: the file's pages, BLAS's threads
layer_times, gemm_times = [], []
for _ in range(pairs):
    start = time.process_time(); llama._layer(cfg, w, 0, h, rope); layer_times.append(time.process_time() - start)
    start = time.process_time(); A @ B; gemm_times.append(time.process_time() - start)
print(json.dumps({"tokens": len(ids), "layer": statistics.median(layer_times), "gemm": statistics.median(gemm_times),
                  "layer_spread": [min(layer_times), max(layer_times)]}))
"""


def time_per_layer(model: Path, tokens: int, pairs: int, *, one_thread: bool = True) -> dict[str, float]:
    """Median time of one layer and the float64 GEMM floor of its FLOPs, measured alternately in one child."""
    import json

    text = sentence_of(model, tokens)
    # one BLAS thread, as issue 24 measures: on a shared 2-core machine two threads make every product's speed depend on the
    # load (measured: 39 GFLOP/s and 1.15x with one thread, 16 GFLOP/s and 2.37x with two, minutes apart)
    threads = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")} if one_thread else {}
    done = subprocess.run(
        [PY, "-c", _LAYER_TIMER, str(model), text, str(pairs)], capture_output=True, text=True, check=True, env={**os.environ, **threads}
    )
    r = json.loads(done.stdout)
    L = r["tokens"]
    rate = 2.0 * L * D * INNER / r["gemm"]  # FLOP/s of float64 GEMM in this run
    floor = layer_flops(L) / rate
    return {"tokens": L, "layer": r["layer"], "floor": floor, "ratio": r["layer"] / floor, "gflops": rate / 1e9}


def peak_anon(command: list[str]) -> tuple[float, float, int]:
    """Wall time (s), peak RssAnon (MiB, sampled every 2 ms) and ru_maxrss (KiB) of one run, its output thrown away."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    status = Path(f"/proc/{process.pid}/status")
    peak = 0
    while True:
        pid, exit_status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        try:
            for line in status.read_text().splitlines():
                if line.startswith("RssAnon:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:  # gone between the wait and the read
            pass
        time.sleep(0.002)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(exit_status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{process.stderr.read().decode() if process.stderr else ''}")
    process.returncode = os.waitstatus_to_exitcode(exit_status)  # reaped here, not by Popen
    return elapsed, peak / 1024, usage.ru_maxrss


def attncli_peak(model: Path, layer: int, text: str, pairs: int) -> float:
    """Median peak RssAnon (MiB) of run --model … --layer `layer` --head 29 --stages weights --format json."""
    command = [PY, "-m", "attncli", "run", "--model", str(model), "--layer", str(layer), "--head", "29", "--stages", "weights",
               "--format", "json", "--sentence", text]  # fmt: skip
    return statistics.median(peak_anon(command)[1] for _ in range(pairs))


def big_layer_rows(folder: Path, pairs: int, tokens: int = 256, *, one_thread: bool = True) -> list[tuple[str, str, str, str, str]]:
    """14-15 as rows of bench.py's table: (comparison, ours, baseline, ratio, target)."""
    model = make_checkpoint(folder)
    pairs = max(3, min(pairs, 5))  # a layer takes seconds: 3-5 pairs
    t = time_per_layer(model, tokens, pairs, one_thread=one_thread)
    text = sentence_of(model, 64)
    deep, first = attncli_peak(model, 2, text, 3), attncli_peak(model, 1, text, 3)
    return [
        (f"14. 8B-class layer (Llama 3 8B shapes, bf16), {t['tokens']} tokens: time of a layer vs its float64 GEMM floor "
         f"({t['gflops']:.0f} GFLOP/s, {'1 BLAS thread' if one_thread else 'all BLAS threads'})", f"{t['layer']:.3f}", f"{t['floor']:.3f}", f"{t['ratio']:.2f}x", "<= 1.3x"),
        ("15. run --model 8B-class --layer 2 --head 29, 64 tokens: peak RssAnon vs one layer's float64 weights (MiB)",
         f"{deep:.0f}", f"{LAYER_F64_MIB:.0f}", f"{deep / LAYER_F64_MIB:.2f}x", "<= 1.5x"),
        ("    ... --layer 1 (the first: the peak does not grow with depth)", f"{first:.0f}", f"{LAYER_F64_MIB:.0f}",
         f"{first / LAYER_F64_MIB:.2f}x", "<= 1.5x"),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3, help="alternating measurements of the layer and of the GEMM (3 to 5)")
    parser.add_argument("--tokens", type=int, default=256, help="tokens of the sentence for row 14 (default 256)")
    parser.add_argument("--all-threads", action="store_true", help="row 14 with every BLAS thread instead of one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for row in big_layer_rows(Path(folder), args.pairs, args.tokens, one_thread=not args.all_threads):
            print(" | ".join(row))


if __name__ == "__main__":
    main()
