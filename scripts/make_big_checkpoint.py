"""A random-weight Llama checkpoint with an 8B-class layer shape, to measure attncli on a laptop-sized model.

    python scripts/make_big_checkpoint.py /tmp/llama-8b-shape            # 2 layers, about 0.9 GB
    python scripts/make_big_checkpoint.py /tmp/llama-8b-shape --layers 4 # deeper (0.44 GB a layer)

Each layer has Llama 3 8B's shapes: hidden 4096, 32 query heads and 8 key/value heads of 128,
MLP 14336, RMSNorm, RoPE θ = 500000, stored as bfloat16 safetensors in one shard per layer with
model.safetensors.index.json, as a downloaded 8B folder is. Only the depth (and the vocabulary:
the tokenizer.json of the tiny Llama fixture, 290 tokens) is smaller. Weights are N(0, 0.02²),
norm scales 1. Needs only NumPy; it writes one row block at a time, so it stays small in memory.
Never commit its output.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
TINY_LLAMA = ROOT / "tests" / "checkpoints" / "llama"
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INNER = 4096, 32, 8, 128, 14336
VOCAB, POSITIONS = 290, 8192
STD = 0.02
BLOCK_ROWS = 1024  # rows generated at once: 1024 × 14336 float32 = 56 MiB


def layer_shapes(index: int) -> dict[str, tuple[int, ...]]:
    p = f"model.layers.{index}."
    return {
        p + "input_layernorm.weight": (HIDDEN,),
        p + "self_attn.q_proj.weight": (HEADS * HEAD_DIM, HIDDEN),
        p + "self_attn.k_proj.weight": (KV_HEADS * HEAD_DIM, HIDDEN),
        p + "self_attn.v_proj.weight": (KV_HEADS * HEAD_DIM, HIDDEN),
        p + "self_attn.o_proj.weight": (HIDDEN, HEADS * HEAD_DIM),
        p + "post_attention_layernorm.weight": (HIDDEN,),
        p + "mlp.gate_proj.weight": (INNER, HIDDEN),
        p + "mlp.up_proj.weight": (INNER, HIDDEN),
        p + "mlp.down_proj.weight": (HIDDEN, INNER),
    }


def write_shard(path: Path, shapes: dict[str, tuple[int, ...]], rng: np.random.Generator) -> None:
    """One bfloat16 safetensors file: header, then each tensor a row block at a time (bfloat16 = float32's top 16 bits)."""
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 2 * int(np.prod(shape))
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    with path.open("wb") as stream:
        stream.write(len(encoded).to_bytes(8, "little") + encoded)
        for name, shape in shapes.items():
            if name.endswith("norm.weight"):
                stream.write((np.ones(shape, "<f4").view("<u4") >> 16).astype("<u2").tobytes())
                continue
            for start in range(0, shape[0], BLOCK_ROWS):
                rows = (min(shape[0], start + BLOCK_ROWS) - start, *shape[1:])
                block = rng.standard_normal(rows, dtype=np.float32) * np.float32(STD)
                stream.write((block.view("<u4") >> 16).astype("<u2").tobytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where to write the checkpoint (e.g. /tmp/llama-8b-shape)")
    parser.add_argument("--layers", type=int, default=2, help="depth (default 2; each layer is 0.44 GB on disk)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    folder: Path = args.folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rng = np.random.default_rng(args.seed)
    shards: list[dict[str, tuple[int, ...]]] = [{"model.embed_tokens.weight": (VOCAB, HIDDEN), "model.norm.weight": (HIDDEN,)}]
    shards += [layer_shapes(i) for i in range(args.layers)]
    weight_map = {}
    for n, shapes in enumerate(shards, start=1):
        name = f"model-{n:05d}-of-{len(shards):05d}.safetensors"
        write_shard(folder / name, shapes, rng)
        weight_map |= dict.fromkeys(shapes, name)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=2) + "\n")
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "dtype": "bfloat16",
        "hidden_size": HIDDEN, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
        "intermediate_size": INNER, "num_hidden_layers": args.layers, "max_position_embeddings": POSITIONS,
        "rms_norm_eps": 1e-5, "hidden_act": "silu", "vocab_size": VOCAB, "tie_word_embeddings": True,
        "attention_bias": False, "mlp_bias": False, "bos_token_id": 0, "eos_token_id": 1,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    shutil.copyfile(TINY_LLAMA / "tokenizer.json", folder / "tokenizer.json")
    size = sum(p.stat().st_size for p in folder.iterdir())
    print(f"{folder}: {args.layers} layers of an 8B-class shape, {size / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
