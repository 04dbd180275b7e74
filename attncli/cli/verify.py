"""`attncli model verify`: the checkpoint's own reference (transformers, eager attention) run beside attncli, head by head.

A certificate of exactness for one sentence: per layer and head, the largest difference of the
attention weights and of the head's output (weights·V, the head's slice of what enters the
output projection), and the bound expected for the architecture. torch and transformers are
imported only here, and only when the command runs; attncli never needs them otherwise.

Where transformers' numbers come from: the model loaded from the folder in float64 with
`attn_implementation="eager"`, given attncli's token ids; the weights are its `output_attentions`;
each head's output is read by a forward pre-hook on the output projection (o_proj, c_proj or
attention.output.dense), whose input is the heads' outputs side by side, before the projection.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attncli.errors import AttnError, visible
from attncli.sources.checkpoints.config import LLAMA_FAMILY, ModelConfig
from attncli.sources.checkpoints.families import read_config

SCHEMA = "attncli.model-verify/1"
INSTALL = "pip install torch==2.13.0 transformers"

# the module whose input is the heads' outputs side by side (L, H·d_v), by architecture; group 1 is the layer index from 0
OUTPUT_PROJECTIONS = {
    "gpt2": re.compile(r"(?:^|\.)h\.(\d+)\.attn\.c_proj$"),
    "bert": re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.attention\.output\.dense$"),
    **{kind: re.compile(r"(?:^|\.)layers\.(\d+)\.self_attn\.o_proj$") for kind in LLAMA_FAMILY},
    "phi3": re.compile(r"(?:^|\.)layers\.(\d+)\.self_attn\.o_proj$"),
    "gpt_neox": re.compile(r"(?:^|\.)layers\.(\d+)\.attention\.dense$"),
}


@dataclass(frozen=True)
class Bound:
    """How close attncli and transformers are expected to be, and why."""

    weights: float  # absolute, on attention weights (which lie in [0, 1])
    output: float  # relative: times max(1, the largest |number| of the head's output)
    why: str


FLOAT64_THROUGHOUT = Bound(
    1e-12,
    1e-12,
    "transformers computes this architecture wholly in float64 when loaded in float64, as attncli does: both round only at "
    "float64's 1.1e-16, and the bound leaves room for different orders of summation",
)
FLOAT32_INSIDE = Bound(
    1e-5,
    1e-5,
    "transformers computes part of this architecture in float32 even in a float64 model: RMSNorm casts the hidden state to "
    "float32 and normalises it there, the rotary embedding computes its inverse frequencies, angles, cos and sin in float32, "
    "and eager attention's softmax runs with dtype=float32; its numbers carry float32 rounding (6e-8 relative) that grows "
    "through the layers, while attncli is float64 throughout",
)


def bound_for(model_type: str) -> Bound:
    return FLOAT32_INSIDE if model_type in (*LLAMA_FAMILY, "phi3", "gpt_neox") else FLOAT64_THROUGHOUT  # NeoX: float32 RoPE and softmax


def _reference_libraries() -> tuple[Any, Any]:
    """torch and transformers, or one line saying what to install."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder only: transformers must not reach for the hub
    try:  # import_module: mypy checks attncli where neither is installed, as in CI
        torch = importlib.import_module("torch")
        transformers = importlib.import_module("transformers")
    except Exception as error:  # not installed, or installed but unable to load (a broken build raises more than ImportError)
        problem = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise AttnError(
            f"model verify runs transformers beside attncli and needs torch and transformers ({problem})", expected=INSTALL
        ) from None
    transformers.utils.logging.set_verbosity_error()  # no load reports or progress bars on stderr: one line or nothing
    transformers.utils.logging.disable_progress_bar()
    return torch, transformers


def verify(folder: Path, *, sentence: str, layer: int | None = None, special_tokens: str = "auto") -> dict[str, Any]:
    """Run transformers and attncli on `sentence`; the attncli.model-verify/1 document (without its schema key)."""
    from attncli.sources.checkpoints.scenario import SPECIAL_TOKENS

    if special_tokens not in SPECIAL_TOKENS:
        raise AttnError(f"found {special_tokens!r}", key="--special-tokens", expected="auto (as the tokenizer adds them) or none")
    if not folder.is_dir():
        raise AttnError("the checkpoint folder does not exist", file=str(folder), expected="a Hugging Face checkpoint folder")
    cfg = read_config(folder)
    if cfg.model_type not in OUTPUT_PROJECTIONS:
        raise AttnError(
            f"model verify does not compare {cfg.model_type} models yet (its attentions need a target text beside the sentence)",
            key="MODEL",
            expected="a decoder or encoder model: " + ", ".join(OUTPUT_PROJECTIONS),
        )
    if layer is not None and not 1 <= layer <= cfg.layers:
        raise AttnError(f"layer {layer} is out of range: the model has {cfg.layers} layers", key="--layer", expected=f"1 to {cfg.layers}")
    torch, transformers = _reference_libraries()
    layers = [layer] if layer is not None else list(range(1, cfg.layers + 1))
    ours = _attncli_heads(folder, sentence, layers, special_tokens)
    ids = ours["ids"]
    theirs = _transformers_heads(torch, transformers, folder, cfg, ids, layers)
    bound = bound_for(cfg.model_type)
    rows: list[dict[str, Any]] = []
    for n in layers:
        heads = []
        for h, ((w_ours, out_ours), (w_theirs, out_theirs)) in enumerate(zip(ours["heads"][n], theirs[n]), start=1):
            output_bound = bound.output * max(1.0, float(np.abs(out_theirs).max()))
            weights_diff = float(np.abs(w_ours - w_theirs).max())
            output_diff = float(np.abs(out_ours - out_theirs).max())
            within = weights_diff <= bound.weights and output_diff <= output_bound
            heads.append({"head": h, "weights_diff": weights_diff, "output_diff": output_diff, "output_bound": output_bound, "within": within})
        rows.append({"layer": n, "heads": heads})
    return {
        "folder": str(folder),
        "model_type": cfg.model_type,
        "sentence": sentence,
        "token_ids": list(ids),
        "tokens_match": _tokens_match(transformers, folder, sentence, ids, special_tokens == "auto"),
        "reference": {
            "library": "transformers",
            "transformers": transformers.__version__,
            "torch": torch.__version__.split("+")[0],
            "attention": "eager",
            "dtype": "float64",
            "head_output": "forward pre-hook on the output projection: its input is the heads' outputs side by side",
        },
        "bound": {"weights": bound.weights, "output_relative": bound.output, "why": bound.why},
        "layers": rows,
        "within": all(head["within"] for row in rows for head in row["heads"]),
    }


def _attncli_heads(folder: Path, sentence: str, layers: list[int], special_tokens: str) -> dict[str, Any]:
    """attncli's own path, as `run --model` takes it: the layer's scenario through the engine; per head (weights, output)."""
    from attncli.core.engine import run
    from attncli.sources.checkpoints.scenario import load_scenario
    from attncli.sources.limits import Limits

    heads: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    limits = Limits(max_cells=2**62)  # a certificate checks every cell the model computes
    for n in layers:
        result = run(load_scenario(folder, layer=n, sentence=sentence, special_tokens=special_tokens, limits=limits))
        heads[n] = [(head.weights, head.output) for head in result.heads]  # (L, L), (L, d_v)
    from attncli.sources.checkpoints.layer import checkpoint_tokens
    from attncli.sources.checkpoints.tokenizer_process import MAX_TEXT_CHARACTERS

    ids = checkpoint_tokens(folder, sentence, special_tokens=special_tokens == "auto", max_tokens=MAX_TEXT_CHARACTERS).ids
    return {"ids": ids, "heads": heads}


def _transformers_heads(
    torch: Any, transformers: Any, folder: Path, cfg: ModelConfig, ids: tuple[int, ...], layers: list[int]
) -> dict[int, list[tuple[np.ndarray, np.ndarray]]]:
    """transformers' eager attention in float64 on the same ids; per head (weights (L, L), output (L, d_v))."""
    try:
        model = transformers.AutoModel.from_pretrained(folder, attn_implementation="eager", dtype=torch.float64).eval()
    except Exception as error:  # transformers raises many kinds for a folder it cannot load
        problem = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise AttnError(f"transformers cannot load the checkpoint: {problem}", file=str(folder)) from None
    pattern = OUTPUT_PROJECTIONS[cfg.model_type]
    captured: dict[int, np.ndarray] = {}
    hooks = []
    for name, module in model.named_modules():
        match = pattern.search(name)
        if match:
            index = int(match.group(1))

            def keep(_module: Any, args: tuple[Any, ...], index: int = index) -> None:
                captured[index] = args[0][0].detach().numpy().copy()  # (L, H·d_v) of the one sentence

            hooks.append(module.register_forward_pre_hook(keep))
    try:
        with torch.no_grad():
            out = model(input_ids=torch.tensor([list(ids)]), output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    heads: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for n in layers:
        weights = out.attentions[n - 1][0].numpy()  # (H, L, L)
        concat = captured[n - 1]  # (L, H·d_v)
        d_v = concat.shape[1] // cfg.heads
        heads[n] = [(weights[h], concat[:, h * d_v : (h + 1) * d_v]) for h in range(cfg.heads)]
    return heads


def _tokens_match(transformers: Any, folder: Path, sentence: str, ids: tuple[int, ...], add_special: bool) -> bool | None:
    """Whether transformers' own tokenizer call (its defaults) gives attncli's ids; None when it cannot load the folder's tokenizer."""
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        theirs = tokenizer(sentence, add_special_tokens=add_special)["input_ids"]
    except Exception:  # a folder with a tokenizer.json but no tokenizer_config.json transformers may not load
        return None
    return list(theirs) == list(ids)


# -- the document ---------------------------------------------------------------------------


def verify_document(folder: Path, *, sentence: str, layer: int | None, special_tokens: str, as_json: bool) -> tuple[str | Iterator[bytes], bool]:
    """The certificate as aligned text or attncli.model-verify/1 JSON, and whether every head is within its bound."""
    doc = verify(folder, sentence=sentence, layer=layer, special_tokens=special_tokens)
    if as_json:
        from attncli.formats import jsonout

        return jsonout.document({"schema": SCHEMA, **doc}), doc["within"]
    return _text(doc), doc["within"]


def _text(doc: dict[str, Any]) -> str:
    ref, bound = doc["reference"], doc["bound"]
    ids = doc["token_ids"]
    tokens = {True: "equal transformers' tokenizer's", False: "DIFFER from transformers' tokenizer's", None: "not compared (transformers cannot load the tokenizer alone)"}
    lines = [
        f"model verify {doc['folder']}: {doc['model_type']}, {len(ids)} tokens",
        f"reference: transformers {ref['transformers']} (torch {ref['torch']}), eager attention, loaded in float64, given attncli's ids",
        "head output: weights·V of each head, read from transformers by a forward pre-hook on the output projection (its input)",
        f"tokens: attncli's ids {tokens[doc['tokens_match']]}",
        f"bound: {bound['weights']:g} on weights; {bound['output_relative']:g} × max(1, largest |output|) on a head's output",
        f"why: {bound['why']}",
        "",
        f"{'layer':>5}  {'head':>4}  {'weights Δ':>9}  {'output Δ':>9}  {'bound':>9}",
    ]
    for row in doc["layers"]:
        for head in row["heads"]:
            mark = "" if head["within"] else "  OUTSIDE THE BOUND"
            lines.append(
                f"{row['layer']:>5}  {head['head']:>4}  {head['weights_diff']:>9.1e}  {head['output_diff']:>9.1e}  {head['output_bound']:>9.1e}{mark}"
            )
    count = sum(len(row["heads"]) for row in doc["layers"])
    worst_w = max(head["weights_diff"] for row in doc["layers"] for head in row["heads"])
    worst_o = max(head["output_diff"] for row in doc["layers"] for head in row["heads"])
    verdict = "within the bound" if doc["within"] else "NOT all within the bound"
    lines.append(f"{count} heads of {len(doc['layers'])} layer{'s' * (len(doc['layers']) > 1)}: {verdict} (largest weights Δ {worst_w:.1e}, output Δ {worst_o:.1e})")
    return "".join(visible(line) + "\n" for line in lines)
