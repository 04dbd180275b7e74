"""Print transformers' own YaRN numbers for three published rope configs, the goldens of tests/test_yarn.py.

Needs torch (`pip install torch==2.13.0`) and transformers; attncli's tests do not. For each config: the inverse
frequencies and attention factor of `modeling_rope_utils.ROPE_INIT_FUNCTIONS["yarn"]` (float32 tensors, as
transformers computes them), and for DeepSeek-V3 the softmax scale of `yarn_apply_mscale`; then `convert_moe_packed_tensors` of one seeded
random MXFP4 tensor (float32 holds every value exactly), the golden of tests/test_mxfp4.py.
Run: python scripts/make_yarn_goldens.py > /tmp/goldens.py, then paste into tests/test_yarn.py; with --tiny it
writes tests/checkpoints/yarn_gpt_oss.npz, yarn_deepseek_v3.npz and longrope_phi3.npz, the whole-layer goldens of
the tiny fixtures; with --decode, tests/checkpoints/longrope_phi3_decode.npz, longrope's decoding step by step.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import transformers  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.deepseek_v3.modeling_deepseek_v3 import yarn_apply_mscale  # noqa: E402
from yarn_configs import CONFIGS, LONGROPE, SHORT_SENTENCE, TINY, generated_rows, with_longrope, with_yarn  # noqa: E402

HERE = Path(__file__).resolve().parents[1] / "tests" / "checkpoints"


def mxfp4_block() -> tuple[list[int], list[int]]:
    """The random MXFP4 input of tests/test_mxfp4.py: blocks (1, 2, 2, 16) and scales (1, 2, 2), flattened."""
    import numpy as np

    rng = np.random.default_rng(20)
    return rng.integers(0, 256, size=64).tolist(), rng.integers(112, 143, size=4).tolist()


def main() -> None:
    print(f"# transformers {transformers.__version__}")
    for name, raw in CONFIGS.items():
        config = transformers.AutoConfig.for_model(**raw)
        inv_freq, attention_factor = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
        out = {"inv_freq": [float(x) for x in inv_freq.tolist()], "attention_factor": float(attention_factor)}
        if raw["model_type"] == "deepseek_v3":
            out["softmax_scale"] = float(yarn_apply_mscale(config.rope_parameters, config.qk_head_dim ** (-0.5)))
        print(f"{name!r}: {json.dumps(out)},")
    config = transformers.AutoConfig.for_model(**LONGROPE)
    out = {}
    for which, seq_len in (("short", None), ("long", 4097)):
        inv_freq, attention_factor = ROPE_INIT_FUNCTIONS["longrope"](config, "cpu", seq_len=seq_len)
        out[which] = [float(x) for x in inv_freq.tolist()]
    out["attention_factor"] = float(attention_factor)
    print(f"'longrope': {json.dumps(out)},")
    import torch
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    blocks, scales = mxfp4_block()
    dense = convert_moe_packed_tensors(
        torch.tensor(blocks, dtype=torch.uint8).reshape(1, 2, 2, 16),
        torch.tensor(scales, dtype=torch.uint8).reshape(1, 2, 2),
        dtype=torch.float32,
    )
    print(f"MXFP4 {list(dense.shape)}: {json.dumps([float(x) for x in dense.flatten().tolist()])}")


def tiny() -> None:
    """tests/checkpoints/yarn_<family>.npz: transformers' eager float64 attention weights of every layer of the tiny
    gpt-oss and DeepSeek-V3 fixtures run with YaRN (tests/yarn_configs.py's TINY), on their golden sentence."""
    import shutil
    import tempfile

    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from make_checkpoints import golden_with_inputs

    for family in TINY:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / family
            shutil.copytree(HERE / family, folder)
            config = json.loads((folder / "config.json").read_text())
            (folder / "config.json").write_text(json.dumps(with_yarn(config, family)))
            with np.load(HERE / family / "golden.npz") as data:
                ids, text = data["ids"], data["text"]
            arrays = golden_with_inputs(folder, ids.tolist(), moe=True)
        keep = {k: arrays[k] for k in ("attentions", "attention_inputs")}
        np.savez_compressed(HERE / f"yarn_{family}.npz", text=text, ids=ids, **keep)
        print(f"tests/checkpoints/yarn_{family}.npz: attentions {keep['attentions'].shape}")
    from tokenizers import Tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "phi3"
        shutil.copytree(HERE / "phi3", folder)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(with_longrope(config)))
        with np.load(HERE / "phi3" / "golden.npz") as data:
            ids, text = data["ids"], data["text"]
        short = np.array(Tokenizer.from_file(str(folder / "tokenizer.json")).encode(SHORT_SENTENCE).ids, dtype=np.int64)
        long_arrays = golden_with_inputs(folder, ids.tolist())
        short_arrays = golden_with_inputs(folder, short.tolist())
    np.savez_compressed(
        HERE / "longrope_phi3.npz", text=text, ids=ids, short_ids=short,
        long_attentions=long_arrays["attentions"], short_attentions=short_arrays["attentions"],
    )  # fmt: skip
    print("tests/checkpoints/longrope_phi3.npz", long_arrays["attentions"].shape, short_arrays["attentions"].shape)


def decode() -> None:
    """tests/checkpoints/longrope_phi3_decode.npz: the tiny longrope phi3 (8 original positions) generating its 13-token
    golden sentence token by token through `generate` (each next token forced to the sentence's, greedy), as
    transformers decodes with a KV cache: every step's attention row of every layer and head. At the step whose input
    reaches 9 tokens Phi3ForCausalLM.prepare_inputs_for_generation drops the cache and the whole sequence runs again
    with the long factors (longrope_frequency_update); the steps before it used the short ones."""
    import shutil
    import tempfile

    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "phi3"
        shutil.copytree(HERE / "phi3", folder)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(with_longrope(config)))
        with np.load(HERE / "phi3" / "golden.npz") as data:
            ids, text = data["ids"], data["text"]
        rows, query_lengths = generated_rows(folder, ids.tolist())
    np.savez_compressed(HERE / "longrope_phi3_decode.npz", text=text, ids=ids, step_rows=rows, query_lengths=np.array(query_lengths))
    print("tests/checkpoints/longrope_phi3_decode.npz", rows.shape, "query lengths", query_lengths)


if __name__ == "__main__":
    if sys.argv[1:] == ["--tiny"]:
        tiny()
        sys.exit()
    if sys.argv[1:] == ["--decode"]:
        decode()
        sys.exit()
    main()
