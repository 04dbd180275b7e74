"""`attncli model verify`: the checkpoint's own reference (transformers, eager attention) run beside attncli, head by head.

A certificate of exactness for one sentence: per layer and head, the largest difference of the
attention weights and of the head's output (weights·V, the head's slice of what enters the
output projection), and the bound expected for the architecture. torch and transformers are
imported only here, and only when the command runs; attncli never needs them otherwise.

Where transformers' numbers come from: the model loaded from the folder in float64 with
`attn_implementation="eager"`, given attncli's token ids; the weights are its `output_attentions`;
each head's output is read by a forward pre-hook on the output projection (o_proj, c_proj,
attention.output.dense, attention.dense, BART's out_proj), whose input is the heads' outputs side
by side, before the projection. An encoder–decoder (BART) runs on the sentence (the encoder's source)
and a target text (the decoder's input behind its start token, as attncli builds it): its encoder,
decoder and cross attentions are compared layer by layer.

A GGUF file (or ollama:NAME) is not verified, and says so in one line: transformers' own GGUF reader
(`from_pretrained(folder, gguf_file=…)`) is no reference for it. Measured on tests/checkpoints/gguf
(transformers 5.24.0, one file per family and quantised.gguf): it reads 6 of the 14 (none of gpt2's, qwen3's, phi3's, gpt_neox's,
olmo2's, bert's, deepseek2's or gpt_oss's files), and of those 6 it gives other weights than the folder
the file came from on 3 (by 0.1 to 0.5 at layer 1: llama with llama.cpp's rope_freqs, gemma2, gemma3),
while attncli's reading of each file meets transformers on that folder (tests/test_gguf.py). What to verify
instead is that folder.

What differs by architecture is declared by its family module (`VERIFY`, a config.Verification, read
through families.verification): the output projection's name, the steps transformers runs in float32
(the bound follows from them), whether its MoE experts must run eagerly. This module names no model type.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attncli.errors import AttnError, visible
from attncli.sources.checkpoints.config import FLOAT32_RMSNORM, FLOAT32_ROPE, FLOAT32_SOFTMAX, ModelConfig, Verification
from attncli.sources.checkpoints.families import ARCHITECTURES, ENCODER_DECODERS, read_config, verification

SCHEMA = "attncli.model-verify/1"
INSTALL = "pip install torch==2.13.0 transformers"

# transformers' names of the weights of each attention of an encoder–decoder ("self": a model of one stack)
_ATTENTION_OUTPUTS = {"self": "attentions", "encoder": "encoder_attentions", "decoder": "decoder_attentions", "cross": "cross_attentions"}


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


@functools.cache
def _float32_inside(*named: str) -> Bound:
    """The bound of an architecture of which transformers runs the steps `named` (each a family's sentence) in float32."""
    listed = ", ".join(named[:-1]) + ", and " + named[-1] if len(named) > 1 else named[0]
    return Bound(
        1e-5,
        1e-5,
        f"transformers computes part of this architecture in float32 even in a float64 model: {listed}; its numbers carry "
        "float32 rounding (6e-8 relative) that grows through the layers, while attncli is float64 throughout",
    )


FLOAT32_INSIDE = _float32_inside(FLOAT32_RMSNORM, FLOAT32_ROPE, FLOAT32_SOFTMAX)  # Llama, Qwen2, Mistral, Phi-3


def _declared(model_type: str) -> Verification:
    """What the model type's family declares for model verify (families.verification), or one line saying it declares nothing."""
    declared = verification(model_type) if model_type in ARCHITECTURES else None
    if declared is None:
        compared = [kind for kind in ARCHITECTURES if verification(kind) is not None]
        raise AttnError(f"model verify does not compare {model_type} models yet", key="MODEL", expected="one of " + ", ".join(compared))
    return declared


def bound_for(model_type: str) -> Bound:
    """The bound of a model type: float64 throughout, or the float32 steps its family declares."""
    steps = _declared(model_type).float32_steps
    return _float32_inside(*steps) if steps else FLOAT64_THROUGHOUT


def output_projections(model_type: str) -> dict[str, re.Pattern[str]]:
    """Per attention ("self", or an encoder–decoder's "encoder", "decoder", "cross"), the module whose input is the heads'
    outputs side by side (L, H·d_v); group 1 of each pattern is the layer index from 0."""
    declared = _declared(model_type).output_projection
    patterns = {"self": declared} if isinstance(declared, str) else declared
    return {attention: re.compile(pattern) for attention, pattern in patterns.items()}


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


def verify(
    folder: Path, *, sentence: str, layer: int | None = None, special_tokens: str = "auto", target: str | None = None
) -> dict[str, Any]:
    """Run transformers and attncli on `sentence` (and, for BART, `target`); the attncli.model-verify/1 document (without its schema key)."""
    from attncli.sources.checkpoints.gguf import gguf_path
    from attncli.sources.checkpoints.scenario import check_special_tokens

    check_special_tokens(special_tokens)
    if gguf_path(folder) is not None:  # a .gguf file, a folder holding one, ollama:NAME
        raise AttnError(
            "model verify compares with transformers on a checkpoint folder; a GGUF file is not verified, as transformers' "
            "GGUF reader drops parts of it (llama.cpp's rope_freqs)",
            file=str(folder), expected="the checkpoint folder it was converted from",
        )  # fmt: skip
    if not folder.is_dir():
        what = "a file that is neither a checkpoint folder nor a GGUF file" if folder.exists() else "the checkpoint folder does not exist"
        raise AttnError(what, file=str(folder), expected="a Hugging Face checkpoint folder")
    cfg = read_config(folder)
    units = _units(cfg, layer, target)
    torch, transformers = _reference_libraries()
    ours = _attncli_heads(folder, sentence, units, special_tokens, target)
    ids, target_ids = ours["ids"], ours["target_ids"]
    theirs = _transformers_heads(torch, transformers, folder, cfg, ids, units, target_ids)
    bound = bound_for(cfg.model_type)
    rows: list[dict[str, Any]] = []
    for unit in units:
        attention, n = unit
        heads = []
        for h, ((w_ours, out_ours), (w_theirs, out_theirs)) in enumerate(zip(ours["heads"][unit], theirs[unit], strict=True), start=1):
            output_bound = bound.output * max(1.0, float(np.abs(out_theirs).max()))
            weights_diff = float(np.abs(w_ours - w_theirs).max())
            output_diff = float(np.abs(out_ours - out_theirs).max())
            within = weights_diff <= bound.weights and output_diff <= output_bound
            heads.append({"head": h, "weights_diff": weights_diff, "output_diff": output_diff, "output_bound": output_bound, "within": within})
        rows.append({"layer": n, "attention": attention, "heads": heads})
    return {
        "folder": str(folder),
        "model_type": cfg.model_type,
        "sentence": sentence,
        "target": target,
        "token_ids": list(ids),
        "target_ids": None if target is None else list(target_ids),
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


def _units(cfg: ModelConfig, layer: int | None, target: str | None) -> list[tuple[str, int]]:
    """The (attention, layer) pairs to compare: "self" for a model of one stack; BART's encoder, decoder and cross attentions."""
    _declared(cfg.model_type)
    if cfg.model_type not in ENCODER_DECODERS:
        if target is not None:
            raise AttnError(f"a {cfg.model_type} model reads one text: a target text is for an encoder–decoder ({', '.join(ENCODER_DECODERS)})", key="--target", expected="no --target")
        if layer is not None and not 1 <= layer <= cfg.layers:
            raise AttnError(f"layer {layer} is out of range: the model has {cfg.layers} layers", key="--layer", expected=f"1 to {cfg.layers}")
        softmax = _softmax_layers(cfg)
        if layer is not None and layer not in softmax:  # a layer without softmax weights (Gated DeltaNet): nothing to compare
            raise AttnError(f"layer {layer} has no softmax attention weights: the model's softmax layers are {', '.join(map(str, softmax))}",
                            key="--layer", expected="one of them, or no --layer")  # fmt: skip
        return [("self", n) for n in ([layer] if layer is not None else softmax)]
    if target is None:
        raise AttnError(
            f"a {cfg.model_type} model's decoder and cross-attention read the text the decoder has produced so far, and no target text was given",
            key="--target", expected="--target TEXT beside --sentence (the source), e.g. the start of a summary or translation",
        )  # fmt: skip
    most = max(cfg.encoder_layers, cfg.layers)
    if layer is not None and not 1 <= layer <= most:
        raise AttnError(f"layer {layer} is out of range: the model has {cfg.encoder_layers} encoder and {cfg.layers} decoder layers", key="--layer", expected=f"1 to {most}")
    counts = {"encoder": cfg.encoder_layers, "decoder": cfg.layers, "cross": cfg.layers}
    return [(attention, n) for attention, count in counts.items() for n in range(1, count + 1) if layer is None or n == layer]


def _softmax_layers(cfg: ModelConfig) -> list[int]:
    """The layers (from 1) with softmax attention: every layer, unless the family's settings say which (`softmax_layers()`)."""
    declared = getattr(cfg.family, "softmax_layers", None)
    return list(declared()) if declared is not None else list(range(1, cfg.layers + 1))


def _attncli_heads(folder: Path, sentence: str, units: list[tuple[str, int]], special_tokens: str, target: str | None) -> dict[str, Any]:
    """attncli's own path, as `run --model` takes it: the layer's scenario through the engine; per head (weights, output)."""
    from attncli.core.engine import run
    from attncli.sources.checkpoints.scenario import load_scenario
    from attncli.sources.limits import Limits

    heads: dict[tuple[str, int], list[tuple[np.ndarray, np.ndarray]]] = {}
    limits = Limits(max_cells=2**62)  # a certificate checks every cell the model computes
    for attention, n in units:
        chosen = None if attention == "self" else attention
        used = None if chosen == "encoder" else target  # the encoder reads the source alone (a target beside it is refused)
        scenario = load_scenario(folder, layer=n, sentence=sentence, special_tokens=special_tokens, limits=limits, target=used, attention=chosen)
        heads[(attention, n)] = [(head.weights, head.final) for head in run(scenario).heads]  # (L, L), (L, d_v) as W_O reads it (gated, if so)
    from attncli.sources.checkpoints.layer import checkpoint_tokens
    from attncli.sources.checkpoints.tokenizer_process import MAX_TEXT_CHARACTERS

    def tokens(text: str) -> tuple[int, ...]:
        return checkpoint_tokens(folder, text, special_tokens=special_tokens == "auto", max_tokens=MAX_TEXT_CHARACTERS).ids

    target_ids: tuple[int, ...] = ()
    if target is not None:
        cfg = read_config(folder)
        target_ids = ARCHITECTURES[cfg.model_type].decoder_ids(cfg, tokens(target))  # the decoder's input, as attncli builds it
    return {"ids": tokens(sentence), "target_ids": target_ids, "heads": heads}


def _transformers_heads(
    torch: Any, transformers: Any, folder: Path, cfg: ModelConfig, ids: tuple[int, ...], units: list[tuple[str, int]], target_ids: tuple[int, ...]
) -> dict[tuple[str, int], list[tuple[np.ndarray, np.ndarray]]]:
    """transformers' eager attention in float64 on the same ids; per head (weights (L, L), output (L, d_v))."""
    options = {"experts_implementation": "eager"} if _declared(cfg.model_type).eager_experts else {}
    try:
        model = transformers.AutoModel.from_pretrained(folder, attn_implementation="eager", dtype=torch.float64, **options).eval()
    except Exception as error:  # transformers raises many kinds for a folder it cannot load
        problem = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise AttnError(f"transformers cannot load the checkpoint: {problem}", file=str(folder)) from None
    model = _text_stack(model)
    patterns = output_projections(cfg.model_type)
    captured: dict[tuple[str, int], np.ndarray] = {}
    hooks = []
    for name, module in model.named_modules():
        for attention, pattern in patterns.items():
            match = pattern.search(name)
            if match:

                def keep(_module: Any, args: tuple[Any, ...], unit: tuple[str, int] = (attention, int(match.group(1)) + 1)) -> None:
                    captured[unit] = args[0][0].detach().numpy().copy()  # (L, H·d_v) of the one sentence

                hooks.append(module.register_forward_pre_hook(keep))
    inputs = {"input_ids": torch.tensor([list(ids)])}
    if cfg.model_type in ENCODER_DECODERS:
        inputs["decoder_input_ids"] = torch.tensor([list(target_ids)])
    try:
        with torch.no_grad():
            out = model(**inputs, output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    heads: dict[tuple[str, int], list[tuple[np.ndarray, np.ndarray]]] = {}
    for unit in units:
        attention, n = unit
        position = n - 1 if attention != "self" else _softmax_layers(cfg).index(n)  # transformers returns the softmax layers' weights only
        weights = getattr(out, _ATTENTION_OUTPUTS[attention])[position][0].numpy()  # (H, L, L)
        concat = captured[unit]  # (L, H·d_v)
        d_v = concat.shape[1] // weights.shape[0]
        heads[unit] = [(weights[h], concat[:, h * d_v : (h + 1) * d_v]) for h in range(weights.shape[0])]
    return heads


def _text_stack(model: Any) -> Any:
    """A multimodal model's language model without its head (the text stack attncli reads: no vision layer is hooked or run),
    else the model itself."""
    language = getattr(model, "language_model", None)
    if language is None:
        return model
    return getattr(language, "model", None) if type(language).__name__.endswith("ForCausalLM") else language


def _tokens_match(transformers: Any, folder: Path, sentence: str, ids: tuple[int, ...], add_special: bool) -> bool | None:
    """Whether transformers' own tokenizer call (its defaults) gives attncli's ids; None when it cannot load the folder's tokenizer."""
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        theirs = tokenizer(sentence, add_special_tokens=add_special)["input_ids"]
    except Exception:  # a folder with a tokenizer.json but no tokenizer_config.json transformers may not load
        return None
    return list(theirs) == list(ids)


# -- the document ---------------------------------------------------------------------------


def verify_document(
    folder: Path, *, sentence: str, layer: int | None, special_tokens: str, as_json: bool, target: str | None = None
) -> tuple[str | Iterator[bytes], bool]:
    """The certificate as aligned text or attncli.model-verify/1 JSON, and whether every head is within its bound."""
    doc = verify(folder, sentence=sentence, layer=layer, special_tokens=special_tokens, target=target)
    if as_json:
        from attncli.formats import jsonout

        return jsonout.document({"schema": SCHEMA, **doc}), doc["within"]
    return _text(doc), doc["within"]


def _text(doc: dict[str, Any]) -> str:
    ref, bound = doc["reference"], doc["bound"]
    ids = doc["token_ids"]
    width = max(5, *(len(_layer_label(row)) for row in doc["layers"]))
    tokens = {True: "equal transformers' tokenizer's", False: "DIFFER from transformers' tokenizer's", None: "not compared (transformers cannot load the tokenizer alone)"}
    lines = [
        f"model verify {doc['folder']}: {doc['model_type']}, {len(ids)} tokens"
        + ("" if doc["target_ids"] is None else f", {len(doc['target_ids'])} decoder tokens (the target behind its start token)"),
        f"reference: transformers {ref['transformers']} (torch {ref['torch']}), eager attention, loaded in float64, given attncli's ids",
        "head output: weights·V of each head, read from transformers by a forward pre-hook on the output projection (its input)",
        f"tokens: attncli's ids {tokens[doc['tokens_match']]}",
        f"bound: {bound['weights']:g} on weights; {bound['output_relative']:g} × max(1, largest |output|) on a head's output",
        f"why: {bound['why']}",
        "",
        f"{'layer':>{width}}  {'head':>4}  {'weights Δ':>9}  {'output Δ':>9}  {'bound':>9}",
    ]
    for row in doc["layers"]:
        for head in row["heads"]:
            mark = "" if head["within"] else "  OUTSIDE THE BOUND"
            lines.append(
                f"{_layer_label(row):>{width}}  {head['head']:>4}  {head['weights_diff']:>9.1e}  {head['output_diff']:>9.1e}  {head['output_bound']:>9.1e}{mark}"
            )
    count = sum(len(row["heads"]) for row in doc["layers"])
    worst_w = max(head["weights_diff"] for row in doc["layers"] for head in row["heads"])
    worst_o = max(head["output_diff"] for row in doc["layers"] for head in row["heads"])
    verdict = "within the bound" if doc["within"] else "NOT all within the bound"
    what = "attention layer" if doc["target_ids"] is not None else "layer"  # BART: the encoder's, decoder's and cross layers, counted apart
    lines.append(f"{count} heads of {len(doc['layers'])} {what}{'s' * (len(doc['layers']) > 1)}: {verdict} (largest weights Δ {worst_w:.1e}, output Δ {worst_o:.1e})")
    return "".join(visible(line) + "\n" for line in lines)


def _layer_label(row: dict[str, Any]) -> str:
    """The layer, and for BART which of its three attentions: "2", "cross 2"."""
    return str(row["layer"]) if row["attention"] == "self" else f"{row['attention']} {row['layer']}"
