"""Which module computes each `model_type`: the one table the checkpoint readers consult.

A family is one module (gpt2.py, llama.py, qwen3.py, …) with `read_config(read)` (its config.json
keys, with transformers' defaults for its model type), `layer_inputs` and, where it has them,
`shapes(cfg)` (the tensors `model info` checks), `mechanisms(cfg, folder, raw)` (what `model info`
says of it beyond describe.py; `raw`: a GGUF file's metadata as config.json keys, else None),
`VERIFY` (what `model verify` needs: a `config.Verification`, or a dict of them by model type) and
`GGUF` (the GGUF architectures it reads: `gguf_family.GgufArchitecture`s), `TENSORS` (where its tensors are, a
`config.Tensors`; Llama's when it declares none, as `shapes` is llama.py's) and `DESCRIPTION` (what `model info` says
of it: a `config.Description`, or a dict of them by model type, which may name model types attncli describes from
config.json but does not compute). A multimodal model (llama4, gemma3, mistral3) is read as its text stack: config.py's
`text_stack` hands the families its text_config. Adding a family is its
module and one line here (two when it reads GGUF files: its architecture in GGUF_MODEL_TYPES, so that a file imports
its family alone); config.py holds what the families share (`llama_like` for Llama's
descendants), gguf_family.py the vocabulary of their GGUF readers.

A Llama-like family may be a declaration instead of code: its module's `LLAMA_LIKE` (a config.LlamaLike: how it differs
from Llama, per-layer RoPE or none, windows, QK-norm, norms, divisor, biases) stands in for `read_config` and
`layer_inputs`, which llama.py then computes (qwen3.py, olmo2.py, smollm3.py, and of issue 30's families granite.py,
cohere2.py, glm4.py, ministral.py, exaone4.py, olmo3.py, apertus.py with its own MLP, ernie4_5.py, seed_oss.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from types import ModuleType
from typing import Any

from attncli.errors import AttnError, did_you_mean, same_name
from attncli.sources.checkpoints.blocks import LayerInputs
from attncli.sources.checkpoints.config import (
    LLAMA_TENSORS,
    Description,
    ModelConfig,
    Tensors,
    Verification,
    _Reader,
    _shown,
    declared_config,
    read_raw,
)
from attncli.sources.checkpoints.gguf_family import GgufArchitecture
from attncli.sources.checkpoints.source import TensorSource


class Families(MutableMapping[str, ModuleType]):
    """model_type -> its family's module, imported the first time it is asked for: a command reads one family, where
    importing all of them cost a short command a twentieth of its time. A family may be registered as its module itself."""

    def __init__(self, modules: dict[str, str]) -> None:
        self._entries: dict[str, str | ModuleType] = dict(modules)  # a module's name in this package, or the module

    def __getitem__(self, model_type: str) -> ModuleType:
        entry = self._entries[model_type]
        if isinstance(entry, str):
            entry = self._entries[model_type] = importlib.import_module(f"{__package__}.{entry}")
        return entry

    def __setitem__(self, model_type: str, module: ModuleType) -> None:
        self._entries[model_type] = module

    def __delitem__(self, model_type: str) -> None:
        del self._entries[model_type]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, model_type: object) -> bool:
        return isinstance(model_type, str) and model_type in self._entries  # without importing it


ARCHITECTURES = Families({
    "gpt2": "gpt2", "bert": "bert", "llama": "llama", "qwen2": "llama", "mistral": "llama", "bart": "bart", "qwen3": "qwen3",
    "olmo2": "olmo2", "gemma3_text": "gemma3", "gpt_neox": "neox", "phi3": "phi3", "gemma2": "gemma2", "gpt_oss": "gpt_oss",
    "deepseek_v3": "deepseek", "deepseek_v2": "deepseek", "falcon": "falcon", "bloom": "bloom",
    "stablelm": "stablelm", "t5": "t5", "modernbert": "modernbert", "smollm3": "smollm3", "qwen3_next": "qwen3_next",
    # issue 30's Llama-like families, one line each
    "qwen3_moe": "qwen3_moe",
    "granite": "granite",
    "cohere2": "cohere2",
    "glm4": "glm4",
    "glm4_moe": "glm4_moe",
    "ministral": "ministral",
    "ministral3": "ministral3",
    "exaone4": "exaone4",
    "olmo3": "olmo3",
    "apertus": "apertus",
    "ernie4_5": "ernie4_5",
    "seed_oss": "seed_oss",
    "gemma3n_text": "gemma3n", "gemma3n": "gemma3n",  # gemma3n: the multimodal folder, its text stack (text_config)
    "llama4_text": "llama4",
    "hunyuan_v1_dense": "hunyuan_dense",
})  # fmt: skip
# the GGUF architecture names the families read, and the model type whose module declares how (its GGUF): a GGUF file
# imports its own family alone. tests/test_own_family.py holds this table equal to the modules' declarations.
GGUF_MODEL_TYPES = {
    "gpt2": "gpt2", "bert": "bert", "llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "olmo2": "olmo2", "gemma3": "gemma3_text",
    "gptneox": "gpt_neox", "phi3": "phi3", "gemma2": "gemma2", "gpt-oss": "gpt_oss", "deepseek2": "deepseek_v3", "falcon": "falcon",
    "bloom": "bloom", "stablelm": "stablelm", "t5": "t5", "modern-bert": "modernbert", "smollm3": "smollm3", "qwen3next": "qwen3_next",
    "qwen3moe": "qwen3_moe", "granite": "granite", "cohere2": "cohere2", "glm4": "glm4", "glm4moe": "glm4_moe", "mistral3": "ministral3",
    "exaone4": "exaone4", "apertus": "apertus", "ernie4_5": "ernie4_5", "seed_oss": "seed_oss", "gemma3n": "gemma3n_text",
    "llama4": "llama4_text", "hunyuan-dense": "hunyuan_v1_dense",
}  # fmt: skip
SUPPORTED = tuple(ARCHITECTURES)  # as imported; a family registered later is in ARCHITECTURES, which the readers consult
ENCODER_DECODERS = ("bart", "t5")  # read a source text and a target text; the layer counts in the stack `attention` names


def read_config(folder: Path) -> ModelConfig:
    """The normalised config of a checkpoint folder, read by its family's module; an unsupported model type is one clear error."""
    raw, where = read_raw(folder)
    return config_from_raw(raw, where)


def config_from_raw(raw: dict[str, Any], where: str) -> ModelConfig:
    """The normalised config of config.json's keys (or of a GGUF file's metadata spelled as them); `where` names the source in errors."""
    model_type = raw.get("model_type")
    if not isinstance(model_type, str) or model_type not in ARCHITECTURES:  # a list or a dict is no model type (and unhashable)
        found = f"model_type {_shown(model_type)} is not supported" if model_type is not None else "config.json has no model_type"
        found += did_you_mean(model_type, ARCHITECTURES, fold=same_name, shortenings=False, cutoff=1.0) if isinstance(model_type, str) else ""
        raise AttnError(found, file=where, expected="one of " + ", ".join(ARCHITECTURES))
    module, read = ARCHITECTURES[model_type], _Reader(raw, where)
    if hasattr(module, "read_config"):
        cfg: ModelConfig[Any] = module.read_config(read)
        return cfg
    return declared_config(module.LLAMA_LIKE, read)  # a declared Llama-like family


LayerReader = Callable[[ModelConfig[Any], TensorSource, tuple[int, ...], int], LayerInputs]  # (cfg, checkpoint, ids, layer from 1)


def layer_reader(model_type: str) -> LayerReader:
    """How a supported model type's layer inputs are read: its module's `layer_inputs`, else llama.py's for its declaration."""
    from attncli.sources.checkpoints import llama

    reader: LayerReader = getattr(ARCHITECTURES[model_type], "layer_inputs", llama.layer_inputs)
    return reader


def verification(model_type: str) -> Verification | None:
    """What `model verify` needs of a supported model type, or None when its family declares nothing (`VERIFY`)."""
    declared: Verification | dict[str, Verification] | None = getattr(ARCHITECTURES[model_type], "VERIFY", None)
    return declared.get(model_type) if isinstance(declared, dict) else declared


def gguf_architectures() -> dict[str, GgufArchitecture]:
    """GGUF architecture name -> what its family declares, for every family that reads GGUF files (`GGUF`)."""
    modules = dict.fromkeys(ARCHITECTURES.values())  # a module serves several model types: once each, in the table's order
    return {entry.arch: entry for module in modules for entry in getattr(module, "GGUF", ())}


def gguf_architecture(arch: str) -> GgufArchitecture | None:
    """What the family that reads GGUF architecture `arch` declares, its module alone imported (GGUF_MODEL_TYPES); None when
    no family reads it."""
    model_type = GGUF_MODEL_TYPES.get(arch)
    declared: tuple[GgufArchitecture, ...] = getattr(ARCHITECTURES[model_type], "GGUF", ()) if model_type is not None and model_type in ARCHITECTURES else ()
    for entry in declared:
        if entry.arch == arch:
            return entry
    return gguf_architectures().get(arch)  # a family registered since (its module put in ARCHITECTURES), among them all


def tensors(model_type: str) -> Tensors:
    """Where a supported model type's tensors are (`TENSORS`; Llama's `model.` layout when its family declares none)."""
    declared: Tensors = getattr(ARCHITECTURES[model_type], "TENSORS", LLAMA_TENSORS)
    return declared


def shapes(cfg: ModelConfig) -> dict[str, tuple[int | None, ...]]:
    """The tensors `model info` checks against the config, by name under the prefix (`shapes`; Llama's when its family has none)."""
    from attncli.sources.checkpoints import llama

    declared = getattr(ARCHITECTURES[cfg.model_type], "shapes", llama.shapes)
    found: dict[str, tuple[int | None, ...]] = declared(cfg)
    return found


def description(model_type: object) -> Description:
    """What `model info` says of a model type's family (`DESCRIPTION`): its own module's, else the module that names it in its dict
    (a model type attncli describes but does not compute); Description() when none declares it."""
    if not isinstance(model_type, str):  # config.json's model_type, untrusted
        return Description()
    own = model_type in ARCHITECTURES
    modules = [ARCHITECTURES[model_type]] if own else list(dict.fromkeys(ARCHITECTURES.values()))
    for module in modules:
        declared: Description | dict[str, Description] | None = getattr(module, "DESCRIPTION", None)
        if isinstance(declared, dict):
            if model_type in declared:
                return declared[model_type]
        elif declared is not None and own:
            return declared
    return Description()


def check_shapes(cfg: ModelConfig, checkpoint: TensorSource) -> None:
    """The embedding table and layer 1's projections have the shapes the config implies (config.json, or a GGUF file's metadata);
    from the headers: nothing is read."""
    from attncli.sources.checkpoints.blocks import Weights

    where = tensors(cfg.model_type)  # the family's layout and tensors (families.py: Llama's unless it declares its own)
    weights = Weights(checkpoint, probe=where.probe, prefixes=where.prefixes)
    for name, implied in shapes(cfg).items():
        full = weights.prefix + name
        stored = checkpoint.shape(full)
        if len(stored) != len(implied) or any(want is not None and have != want for have, want in zip(stored, implied)):
            shown = ["any" if want is None else want for want in implied]
            raise AttnError(f"tensor '{full}' has shape {list(stored)} but {checkpoint.config_source} implies {shown}",
                            file=str(checkpoint.file_of(full)))  # fmt: skip
