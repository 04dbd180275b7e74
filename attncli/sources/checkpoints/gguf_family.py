"""What a family declares of its GGUF files: the record gguf.py reads, and the small vocabulary its readers use.

gguf.py holds the machinery (the checked file, dequantisation, Hugging Face names answered with GGUF
tensors, the config from the metadata) and names no architecture: each family module lists the GGUF
architectures it reads in `GGUF`, a tuple of `GgufArchitecture`, and `families.gguf_architectures()`
collects them. A family's readers receive the file as `Metadata`, the protocol below, which
`gguf.GgufFile` implements; so no family module imports gguf.py, which imports the family table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

from attncli.errors import AttnError
from attncli.sources.checkpoints.config import ModelConfig, RopeConfig
from attncli.sources.checkpoints.gguf_header import TensorInfo


class Metadata(Protocol):
    """A GGUF file as a family's readers see it: its metadata, checked, and its tensors' headers."""

    where: str

    @property
    def tensors(self) -> Mapping[str, TensorInfo]: ...
    def fail(self, message: str, key: str | None = None, expected: str | None = None) -> AttnError: ...
    def has_key(self, key: str) -> bool: ...
    def value(self, key: str) -> Any: ...
    def count(self, key: str, *, default: int | None = None, minimum: int = 1) -> int: ...
    def number(self, key: str, *, default: float | None = None) -> float: ...
    def info(self, name: str) -> TensorInfo: ...


class Joined(NamedTuple):
    """A Hugging Face tensor llama.cpp's converter split or rearranged: its shape, and how to rebuild it from the file's tensors."""

    shape: tuple[int, ...]
    parts: tuple[str, ...]  # the GGUF tensors it is made of
    kind: str  # "kv_b" (attn_k_b + attn_v_b), "expert" (one matrix of a 3-d tensor: an expert, Gemma 3n's altup_proj), "gate_up" (interleaved), "gate_then_up", "down", "gate_up_bias",
    # "value" (a learned scalar the converter wrote as a per-layer list in the metadata: parts names the key),
    # "computed" (`compute` of the parts as read: a regrouping or an elementwise map the converter applied, undone)
    expert: int = 0  # the expert ("expert"), or the layer ("value")
    compute: Callable[..., Any] | None = None  # "computed": the parts' arrays -> the Hugging Face tensor


ConfigReader = Callable[[Metadata, str, dict[str, Any]], ModelConfig]  # (file, "arch.", the shared sizes) -> the config
KeysReader = Callable[[Metadata, str, dict[str, Any], int], dict[str, Any]]  # (file, "arch.", the shared keys, head size) -> more keys
JoinedReader = Callable[[Metadata, str, str], Joined | None]  # (file, "blk.N.", the name after "layers.N."; or "", a tensor of the model) -> what to rebuild


class GgufArchitecture(NamedTuple):
    """One GGUF architecture as llama.cpp's converter (convert_hf_to_gguf.py) wrote it, and what undoes that.

    The config comes one of two ways: `config` builds the ModelConfig from the metadata itself, or `keys`
    spells the metadata as the family's config.json keys (beside the ones every such file has: sizes, layers,
    θ and the rotary fraction), which the family's own read_config then reads, defaults and checks included.
    """

    arch: str  # general.architecture, llama.cpp's name
    model_type: str  # attncli's (transformers') model type
    names: tuple[tuple[str, str], ...]  # (a Hugging Face tensor name as a regex, the GGUF name as its replacement)
    config: ConfigReader | None = None
    keys: KeysReader | None = None
    interleaved_qk: bool = False  # W_Q's and W_K's rows permuted per head to llama.cpp's interleaved pairs (2i, 2i + 1): put back
    transposed: str | None = None  # a regex of the Hugging Face names stored transposed (Conv1D's (in, out) as nn.Linear's)
    qkv_by_kind: bool = False  # the fused attn_qkv, per head in the checkpoint, stored as all queries, all keys, all values
    shifted_norms: bool = False  # norms stored as 1 + w (ggml multiplies by the weight, transformers by 1 + w)
    kept_norms: str | None = None  # with shifted_norms, a regex of the GGUF norms stored as w all the same (Qwen3-Next's ssm_norm)
    joined: JoinedReader | None = None  # tensors the converter split or merged (experts, kv_b)
    notes: Callable[[Metadata], tuple[str, ...]] | None = None  # lines the provenance adds (a scale the file does not store)
    rope_scaling: tuple[str, ...] = ()  # the rope.scaling.type values `keys` spells as rope_parameters (another is refused)


def renamed(names: tuple[tuple[str, str], ...], *dropped: str) -> tuple[tuple[str, str], ...]:
    """`names` without the entries whose Hugging Face pattern contains any of `dropped`."""
    return tuple(entry for entry in names if not any(part in entry[0] for part in dropped))


def sliding_layers(file: Metadata, a: str, layers: int, period: int) -> list[bool]:
    """Which layers slide, as llama.cpp's set_swa_pattern decides: the file's per-layer list, or a period p (the key, else
    the architecture's): layer i (from 0) slides unless i % p == p − 1."""
    pattern = file.value(a + "attention.sliding_window_pattern")
    if isinstance(pattern, list):
        if len(pattern) != layers:
            raise file.fail(f"{len(pattern)} layer kinds for {layers} layers", key=a + "attention.sliding_window_pattern")
        return [bool(x) for x in pattern]
    if pattern is not None:
        period = file.count(a + "attention.sliding_window_pattern")
    return [i % period < period - 1 for i in range(layers)]


def layer_types(file: Metadata, a: str, layers: int, period: int) -> list[str]:
    """config.json's layer_types of the sliding pattern."""
    return ["sliding_attention" if s else "full_attention" for s in sliding_layers(file, a, layers, period)]


def rope(file: Metadata, a: str) -> RopeConfig:
    """RoPE's θ and linear scaling from the metadata (llama3's scaling comes as the rope_freqs tensor)."""
    theta = file.number(a + "rope.freq_base", default=10_000.0)
    kind = file.value(a + "rope.scaling.type")
    if kind in (None, "none"):
        return RopeConfig(theta=theta, kind="default")
    if kind == "linear":
        return RopeConfig(theta=theta, kind="linear", factor=file.number(a + "rope.scaling.factor"))
    raise file.fail(f"the RoPE scaling {kind!r} is not supported", key=a + "rope.scaling.type", expected="none or linear (llama3 scaling comes as rope_freqs)")


def outermost(file: Metadata, name: str) -> tuple[int, ...]:
    """A tensor's shape outermost first, from the header."""
    return tuple(reversed(file.info(name).dims))
