"""Read a checkpoint's config.json into one small normalised record, across the spellings of transformers 4 and 5.

What the families share: the record, the typed reader, RoPE's settings and the keys Llama's
descendants have in common (`llama_like`). Each family's module reads its own keys with transformers'
defaults for its model type, so that a config.json that leaves a key out means what it means to transformers.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, cast

from attncli.errors import AttnError
from attncli.sources.bounded import JsonLimits

CONFIG_LIMITS = JsonLimits(max_bytes=4 * 1024 * 1024)  # config.json and the shard index: a few kB in real checkpoints

ROPE_KINDS = ("default", "linear", "llama3", "yarn", "longrope")
ACTIVATIONS = (
    "gelu", "gelu_python", "gelu_new", "gelu_pytorch_tanh", "gelu_python_tanh", "gelu_fast", "quick_gelu",
    "relu", "silu", "swish", "tanh", "sigmoid", "linear",
)  # fmt: skip

# The largest value of each size attncli reads: far beyond any released model (Llama 3.1 405B: 126 layers,
# d_model 16,384, 128 heads, intermediate 53,248; Llama 4: 10M positions), small enough that nothing
# allocated from one can exhaust memory before the weights' shapes are compared with it.
MOST = {
    "layers": 10_000,
    "hidden": 1 << 20,
    "heads": 1 << 16,
    "head_dim": 1 << 16,
    "inner": 1 << 24,
    "positions": 1 << 31,
    "vocabulary": 1 << 24,
}

LEAST_NUMBER = 1e-30  # the smallest positive number read (θ, ε, a scaling factor): no real config comes near it


def positive_number(most: float = 1e30) -> str:
    """What a positive number of a config (or a GGUF file's metadata) must be, in words."""
    return f"a positive number from {LEAST_NUMBER:g} to {most:g}"


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's 0.1·mscale·ln(factor) + 1 (1 when the factor does not stretch), transformers' get_mscale."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


@dataclass(frozen=True)
class RopeConfig:
    """Rotary position settings: θ and the scaling of the inverse frequencies."""

    theta: float
    kind: str  # "default", "linear", "llama3" or "yarn"
    factor: float = 1.0
    low_freq_factor: float | None = None  # llama3 only
    high_freq_factor: float | None = None  # llama3 only
    original_positions: int | None = None  # llama3 and yarn
    partial: float = 1.0  # the fraction of each head rotated (partial_rotary_factor; GPT-NeoX's rotary_pct)
    # yarn only (transformers' _compute_yarn_parameters): the ramp's rotation counts, whether its ends are rounded
    # outwards, the explicit attention_factor if given, and DeepSeek's mscale / mscale_all_dim (0 when absent)
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    truncate: bool = True
    attention_factor: float | None = None
    mscale: float = 0.0
    mscale_all_dim: float = 0.0
    # longrope only (Phi-3-128k, Phi-4-mini): per-pair divisors up to original_positions tokens and beyond
    short_factor: tuple[float, ...] = ()
    long_factor: tuple[float, ...] = ()

    @property
    def yarn_attention_factor(self) -> float:
        """YaRN's factor on cos and sin, as transformers' _compute_yarn_parameters: the given attention_factor, else
        mscale(factor, mscale)/mscale(factor, mscale_all_dim) when both are set (1 for DeepSeek-V3), else mscale(factor)."""
        if self.attention_factor is not None:
            return self.attention_factor
        if self.mscale and self.mscale_all_dim:
            return yarn_mscale(self.factor, self.mscale) / yarn_mscale(self.factor, self.mscale_all_dim)
        return yarn_mscale(self.factor)

    @property
    def longrope_attention_factor(self) -> float:
        """longrope's factor on cos and sin (transformers' _compute_longrope_parameters): the given attention_factor,
        else √(1 + ln(factor) / ln(original positions)) when the factor stretches, else 1."""
        if self.attention_factor is not None:
            return self.attention_factor
        assert self.original_positions is not None
        return 1.0 if self.factor <= 1 else math.sqrt(1 + math.log(self.factor) / math.log(self.original_positions))

    def describe(self) -> str | None:
        """'linear (factor 2)', 'llama3 (factor 8, original 8192 positions)', or None without scaling."""
        if self.kind == "linear":
            return f"linear (factor {self.factor:g})"
        if self.kind == "llama3":
            return (
                f"llama3 (factor {self.factor:g}, low/high frequency factors {self.low_freq_factor:g}/"
                f"{self.high_freq_factor:g}, original {self.original_positions} positions)"
            )
        if self.kind == "longrope":
            return (
                f"longrope (per-pair short factors up to {self.original_positions} positions, long factors beyond; "
                f"factor {self.factor:g}; cos and sin × {self.longrope_attention_factor:.6g})"
            )
        if self.kind == "yarn":
            extra = f", mscale {self.mscale:g}/{self.mscale_all_dim:g}" if self.mscale or self.mscale_all_dim else ""
            return (
                f"yarn (factor {self.factor:g}, original {self.original_positions} positions, beta fast/slow "
                f"{self.beta_fast:g}/{self.beta_slow:g}{extra}{'' if self.truncate else ', not truncated'}; "
                f"cos and sin × {self.yarn_attention_factor:.6g})"
            )
        return None


if TYPE_CHECKING:  # a family's own settings (the type of ModelConfig.family); a bare ModelConfig is ModelConfig[Any]
    from typing_extensions import TypeVar

    F = TypeVar("F", default=Any)
else:  # typing's TypeVar takes a default from Python 3.13 on; the checker alone needs it
    from typing import TypeVar

    F = TypeVar("F")
G = TypeVar("G")


@dataclass(frozen=True)
class ModelConfig(Generic[F]):
    """What attncli needs to know of a model, whatever its config spelling; `family` holds what only its family reads, typed
    by it (ModelConfig[gemma2.Gemma2Settings], ModelConfig[LlamaSettings] for a declared Llama-like family)."""

    model_type: str
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    max_positions: int
    norm_eps: float
    activation: str
    dtype: str | None  # as config.json declares it (`dtype` or `torch_dtype`), not necessarily as stored
    rope: RopeConfig | None
    windows: tuple[int | None, ...]  # per layer, transformers' sliding_window (query i sees keys i−w+1 … i), None = all
    causal: bool
    qkv_bias: bool
    output_bias: bool
    mlp_bias: bool
    scale_attn_weights: bool = True  # gpt2
    scale_attn_by_inverse_layer_idx: bool = False  # gpt2
    type_vocab_size: int = 0  # bert
    # an encoder–decoder (bart): the fields above describe the decoder, these the encoder and how the decoder starts
    encoder_layers: int = 0
    encoder_heads: int = 0
    encoder_inner: int = 0
    scale_embedding: bool = False  # token rows × √d_model
    decoder_start_token_id: int = 0
    eos_token_id: int | None = None
    family: F = cast(F, None)  # a family module's own settings (neox.NeoxSettings, gemma2.Gemma2Settings, LlamaSettings, …); None without


def with_family(cfg: ModelConfig[Any], settings: G) -> ModelConfig[G]:
    """`cfg` with its family's own settings, typed: the record a family's read_config returns (ModelConfig[its settings])."""
    return ModelConfig(**{f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name != "family"}, family=settings)


# the steps transformers runs in float32 inside a float64 model that several families share (docs/families.md,
# "Float32 inside a float64 model"); a family with a step of its own writes its sentence in its module
FLOAT32_RMSNORM = "RMSNorm casts the hidden state to float32 and normalises it there"
FLOAT32_QK_NORM = "RMSNorm casts the hidden state to float32 and normalises it there (the q and k norms too)"
FLOAT32_ROPE = "the rotary embedding computes its inverse frequencies, angles, cos and sin in float32"
FLOAT32_SOFTMAX = "eager attention's softmax runs with dtype=float32"
# Llama's name of the output projection in transformers' model, kept by every family that followed it; group 1 is the layer from 0
O_PROJ = r"(?:^|\.)layers\.(\d+)\.self_attn\.o_proj$"


class Verification(NamedTuple):
    """What `attncli model verify` (cli/verify.py) needs to know of a family to run transformers beside attncli.

    `output_projection` names the module whose input is the heads' outputs side by side (L, H·d_v), as a regex of its
    name in transformers' model whose group 1 is the layer from 0; an encoder–decoder gives one per attention
    ("encoder", "decoder", "cross"). `float32_steps` are the sentences that say which steps transformers runs in
    float32 even in a float64 model (none: float64 throughout); the bound follows from them.
    """

    output_projection: str | Mapping[str, str]
    float32_steps: tuple[str, ...] = ()
    eager_experts: bool = False  # MoE experts transformers runs in float64 only one by one (its grouped_mm kernel refuses double)


class Tensors(NamedTuple):
    """Where a family's tensors are in its checkpoint: the embedding table's name, found under the first of `prefixes` that has it."""

    probe: str
    prefixes: tuple[str, ...]


# the text stack inside a multimodal folder: model.language_model.* as transformers 5 (and 4.52 on) saves Gemma 3 and Mistral 3,
# language_model.model.* as transformers 4 saved them and both save Llama 4; a text-only checkpoint never has those names
MULTIMODAL_PREFIXES = ("model.language_model.", "language_model.model.")
LLAMA_TENSORS = Tensors("embed_tokens.weight", ("model.", "", *MULTIMODAL_PREFIXES))  # Llama's and its descendants': a family that declares no TENSORS


class Description(NamedTuple):
    """What `model info` says of a family beyond what describe.py reads from every config (a family that declares none: nothing).

    Functions receive config.json's keys (a GGUF file's metadata spelled as them), untrusted when attncli could not read them.
    """

    # how q and k are RMS-normalised, in words (a function of config.json's keys when a switch turns it on: None when off);
    # None: as the config's use_qk_norm / qk_layernorm say
    qk_norm: str | Callable[[Mapping[str, Any]], str | None] | None = None
    qk_norm_kind: str = "RMS-normalised"  # what the norm does to q and k, in words (StableLM's LayerNorm: "centred and divided …")
    learned_positions: bool = False  # a learned position table instead of RoPE (`model info`'s rope row says so)
    sinks: bool = False  # learned attention sinks: one logit per head joins the softmax's denominator
    own_biases: bool = False  # q, k and v biases are the architecture itself (GPT-2, BERT), not a mechanism to list
    softcap: float | None = None  # transformers' attn_logit_softcapping when config.json names none (read where attncli does not)
    interleaved_rope: Callable[[Mapping[str, Any]], bool] | None = None  # RoPE turns interleaved pairs, not halves
    windows: Callable[[Mapping[str, Any], int, int], tuple[int | None, ...] | None] | None = None  # (raw, layers, sliding_window)
    router: Callable[[Mapping[str, Any]], str] | None = None  # how a mixture-of-experts router picks, after the experts' count


def whole(raw: Mapping[str, Any], *keys: str, most: int = 1 << 24) -> int | None:
    """The first of `keys` holding a whole number from 1 to `most`, else None (a raw config is untrusted)."""
    for key in keys:
        value = raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= most:
            return value
    return None


def alternating(raw: Mapping[str, Any], layers: int, size: int) -> tuple[int | None, ...]:
    """transformers' default layer kinds of Gemma 2 and gpt-oss when config.json lists none: sliding first, then global, in turn."""
    return tuple(size if i % 2 == 0 else None for i in range(layers))


class _Reader:
    """Typed look-ups in the raw JSON, each failing with the key and what was expected."""

    def __init__(self, raw: dict[str, Any], where: str) -> None:
        self.raw = raw
        self.where = where

    def fail(self, key: str, message: str, expected: str | None = None) -> AttnError:
        return AttnError(message, file=self.where, key=key, expected=expected)

    def count(self, *keys: str, default: int | None, minimum: int = 1, most: int) -> int:
        """A whole number from `minimum` to `most` under the first key present (aliases: 'n_layer', 'num_hidden_layers')."""
        key = next((k for k in keys if self.raw.get(k) is not None), keys[0])
        value = self.raw.get(key, default)
        expected = f"a whole number from {minimum} to {most:,}"
        if value is None:
            raise self.fail(key, "the key is missing", expected)
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= most:
            raise self.fail(key, f"found {_shown(value)}", expected)
        return value

    def number(self, key: str, default: float | None, *, source: dict[str, Any] | None = None, most: float = 1e30) -> float:
        """A positive finite number from LEAST_NUMBER to `most` (a factor of 1e-320 would make θ's frequencies overflow)."""
        value = (self.raw if source is None else source).get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not LEAST_NUMBER <= value <= most:
            raise self.fail(key, f"found {_shown(value)}", positive_number(most))
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, f"found {_shown(value)}", "true or false")
        return value

    def word(self, *keys: str, default: str) -> str:
        key = next((k for k in keys if k in self.raw), keys[0])
        value = self.raw.get(key, default)
        if not isinstance(value, str):
            raise self.fail(key, f"found {_shown(value)}", "a name")
        return value


def _shown(value: object) -> str:
    """A config value as it appears in a message: its repr, cut short (a value may be a 4 MB list)."""
    text = repr(value[:20] if isinstance(value, list | str) else value)  # never the repr of a whole list
    return text if len(text) <= 60 else text[:59] + "…"


shown_value = _shown  # a GGUF file's metadata value in a message (gguf.py), in the same words


# multimodal model types whose config.json holds the text model's keys under text_config, and the text model's type
MULTIMODAL = {"llama4": "llama4_text", "gemma3": "gemma3_text", "mistral3": "mistral"}


def text_stack(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """The config.json keys of the model's text stack: a multimodal model's text_config (its model_type, else the text model's
    type transformers gives it), else config.json's own keys."""
    kind = raw.get("model_type")
    if not isinstance(kind, str) or kind not in MULTIMODAL:
        return raw
    text = raw.get("text_config")
    if not isinstance(text, dict):
        raise AttnError(f"a {kind} config.json {'has no text_config' if text is None else 'whose text_config is not a mapping'}",
                        file=where, key="text_config", expected="the text model's keys under text_config, as transformers saves them")  # fmt: skip
    dtype = {key: raw[key] for key in ("dtype", "torch_dtype") if key in raw and "dtype" not in text and "torch_dtype" not in text}
    return {**dtype, **text, "model_type": text.get("model_type") or MULTIMODAL[kind]}


def not_a_folder(folder: Path, expected: str) -> AttnError:
    """The error for a --model that is no folder and no regular file: missing, or a device, a pipe or a socket (never read)."""
    if folder.exists():  # /dev/null, a FIFO
        return AttnError("neither a checkpoint folder nor a GGUF file: a device, a pipe or a socket", file=str(folder),
                         expected="a Hugging Face checkpoint folder or a .gguf file")  # fmt: skip
    return AttnError("the checkpoint folder does not exist", file=str(folder), expected=expected)


def read_raw(folder: Path, *, whole: bool = False) -> tuple[dict[str, Any], str]:
    """The keys of config.json as a dict, with the path for messages: the text stack's (`text_stack`; `whole`: config.json's
    own even for a multimodal model); read through the bounded reader (a regular file, JSON within limits)."""
    from attncli.sources.bounded import read_json

    path = folder / "config.json"
    where = str(path)
    if folder.is_file():
        raise AttnError(
            "a file that is neither a checkpoint folder nor a GGUF file", file=str(folder), expected="a Hugging Face checkpoint folder or a .gguf file"
        )
    if not folder.is_dir():
        raise not_a_folder(folder, "a folder with config.json")
    if not os.path.lexists(path):
        raise AttnError("no config.json in the checkpoint folder", file=str(folder), expected="a Hugging Face checkpoint folder")
    raw = read_json(path, where, what="the model's config as a JSON object", limits=CONFIG_LIMITS)
    if not isinstance(raw, dict):
        raise AttnError(f"config.json holds a JSON {type(raw).__name__}", file=where, expected="a JSON object")
    return (raw if whole else text_stack(raw, where)), where


def _activation(read: _Reader, *keys: str, default: str) -> str:
    name = read.word(*keys, default=default)
    if name not in ACTIVATIONS:
        raise read.fail(keys[0], f"the activation {name!r} is not supported", "one of " + ", ".join(ACTIVATIONS))
    return name


def _dtype(read: _Reader) -> str | None:
    value = read.raw.get("dtype", read.raw.get("torch_dtype"))
    return value if isinstance(value, str) else None


def _heads_divide(read: _Reader, hidden: int, heads: int, key: str) -> int:
    if hidden % heads:
        raise read.fail(key, f"{heads} heads do not divide the hidden size {hidden}", "a divisor of the hidden size")
    return hidden // heads


Windows = Callable[["_Reader", int], tuple[int | None, ...]]  # (read, layers) -> per layer, the sliding window or None


def llama_like(
    read: _Reader,
    model_type: str,
    d: dict[str, Any],
    *,
    windows: Windows | None = None,
    attention_bias: bool = False,
    qkv_bias: bool = False,
    mlp_bias: bool = False,
    rope_per_type: str | None = None,
    longrope: bool = False,
) -> ModelConfig:
    """The keys Llama's descendants share, with the family's defaults `d` (transformers' configuration_<type>.py).

    The family says what it adds: its `windows` rule (else `sliding_layers`, Qwen2's), whether config.json's
    `attention_bias` (q, k, v and o) and `mlp_bias` are read, whether q, k and v always have biases (Qwen2),
    the layer type whose RoPE settings apply (Gemma 3) and whether longrope's per-length factors are read (Phi-3).
    """
    layers = read.count("num_hidden_layers", default=d["layers"], most=MOST["layers"])
    hidden = read.count("hidden_size", default=d["hidden"], most=MOST["hidden"])
    heads = read.count("num_attention_heads", default=d["heads"], most=MOST["heads"])
    kv_heads = read.count("num_key_value_heads", default=d["kv"] if d["kv"] is not None else heads, most=heads)
    if heads % kv_heads:
        raise read.fail(
            "num_key_value_heads", f"{kv_heads} key/value heads do not divide {heads} heads", "a divisor of num_attention_heads"
        )
    if read.raw.get("head_dim") is not None or "head_dim" in d:
        head_dim = read.count("head_dim", default=d.get("head_dim"), most=MOST["head_dim"])
    else:
        head_dim = _heads_divide(read, hidden, heads, "num_attention_heads")
    if head_dim % 2:
        raise read.fail("head_dim", f"the head size {head_dim} is odd", "an even head size (RoPE turns pairs)")
    max_positions = read.count("max_position_embeddings", default=d["positions"], most=MOST["positions"])
    rope = _rope(read, max_positions, per_type=rope_per_type, theta=d.get("theta", 10_000.0))
    if rope.kind == "longrope" and not longrope:  # its frequencies depend on the sentence's length, which only phi3 hands RoPE
        raise read.fail("rope_scaling", f"the RoPE scaling 'longrope' is read for phi3 only, not {model_type}", "phi3, or another scaling")
    biased = attention_bias and read.flag("attention_bias", False)
    return ModelConfig(
        model_type=model_type,
        layers=layers,
        hidden_size=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=read.count("intermediate_size", default=d["inter"], most=MOST["inner"]),
        max_positions=max_positions,
        norm_eps=read.number("rms_norm_eps", d.get("eps", 1e-6)),
        activation=_activation(read, "hidden_act", "hidden_activation", default=d.get("act", "silu")),
        dtype=_dtype(read),
        rope=rope,
        windows=(windows or sliding_layers)(read, layers),
        causal=True,
        qkv_bias=qkv_bias or biased,
        output_bias=biased,
        mlp_bias=mlp_bias and read.flag("mlp_bias", False),
    )


def _rope(read: _Reader, max_positions: int, *, per_type: str | None = None, theta: float = 10_000.0) -> RopeConfig:
    """RoPE as transformers 5 reads it: `rope_scaling` wins over `rope_parameters`; θ from either, else top level.

    With `per_type` (Gemma 3: "full_attention"), settings given per layer type are read for that type; the
    family module reads the others.
    """
    scaling = read.raw.get("rope_scaling")
    parameters = read.raw.get("rope_parameters")
    key = "rope_scaling" if scaling else "rope_parameters"
    chosen = scaling or parameters or {}
    if not isinstance(chosen, dict):
        raise read.fail(key, f"found {_shown(chosen)}", "a mapping of RoPE settings")
    if per_type is not None and isinstance(chosen.get(per_type), dict):
        chosen, key = chosen[per_type], f"{key}.{per_type}"
    if any(isinstance(v, dict) for v in chosen.values()):
        raise read.fail(key, "RoPE settings differ per layer type", "one set of RoPE settings for all layers")
    kind = chosen.get("rope_type", chosen.get("type", "default"))
    if kind not in ROPE_KINDS:
        raise read.fail(key, f"the RoPE scaling {_shown(kind)} is not supported", "one of " + ", ".join(ROPE_KINDS))
    partial = _partial(read, key, chosen.get("partial_rotary_factor", read.raw.get("partial_rotary_factor", 1.0)))
    theta = read.number("rope_theta", read.raw.get("rope_theta", theta), source=chosen)
    if kind == "default":
        return RopeConfig(theta=theta, kind=kind, partial=partial)
    if kind == "longrope":
        return _longrope(read, key, chosen, theta, partial, max_positions)
    factor = read.number("factor", None, source=chosen)
    if kind == "linear":
        return RopeConfig(theta=theta, kind=kind, factor=factor, partial=partial)
    # transformers takes a top-level original_max_position_embeddings first (Phi-3 keeps it there)
    original = read.raw.get("original_max_position_embeddings", chosen.get("original_max_position_embeddings", max_positions))
    if isinstance(original, bool) or not isinstance(original, int) or not 1 <= original <= MOST["positions"]:
        raise read.fail("original_max_position_embeddings", f"found {_shown(original)}", f"a whole number from 1 to {MOST['positions']:,}")
    if kind == "yarn":
        return _yarn(read, key, chosen, RopeConfig(theta, kind, factor, None, None, original, partial))
    low = read.number("low_freq_factor", None, source=chosen)
    high = read.number("high_freq_factor", None, source=chosen)
    if high <= low:
        raise read.fail(
            key, f"high_freq_factor {high:g} is not above low_freq_factor {low:g}", "high_freq_factor > low_freq_factor"
        )
    return RopeConfig(theta, kind, factor, low, high, original, partial)


def _longrope(read: _Reader, key: str, chosen: dict[str, Any], theta: float, partial: float, max_positions: int) -> RopeConfig:
    """longrope as transformers 5 reads it: original_max_position_embeddings top level first (Phi-3), then in the
    settings, else max_position_embeddings; factor given, else max / original; short and long per-pair factors."""
    original = read.raw.get("original_max_position_embeddings", chosen.get("original_max_position_embeddings", max_positions))
    if isinstance(original, bool) or not isinstance(original, int) or not 2 <= original <= MOST["positions"]:
        raise read.fail("original_max_position_embeddings", f"found {_shown(original)}", f"a whole number from 2 to {MOST['positions']:,}")
    given = chosen.get("factor")
    factor = max_positions / original if given is None else read.number("factor", given, source={})
    lists = []
    for name in ("short_factor", "long_factor"):
        value = chosen.get(name)
        if not isinstance(value, list) or not value or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 1e30 for v in value
        ):
            raise read.fail(f"{key}.{name}", f"found {_shown(value)}", "a list of positive numbers, one per rotary pair")
        lists.append(tuple(float(v) for v in value))
    attention = chosen.get("attention_factor")
    return RopeConfig(
        theta, "longrope", factor, None, None, original, partial,
        attention_factor=None if attention is None else read.number("attention_factor", attention, source={}),
        short_factor=lists[0], long_factor=lists[1],
    )  # fmt: skip


def _yarn(read: _Reader, key: str, chosen: dict[str, Any], base: RopeConfig) -> RopeConfig:
    """YaRN's optional keys, with transformers' defaults: beta_fast 32, beta_slow 1 (a 0 or null counts as absent, as
    transformers' `or` has it), truncate true, mscale and mscale_all_dim absent, attention_factor from the factor."""
    beta_fast = read.number("beta_fast", chosen.get("beta_fast") or 32, source={})
    beta_slow = read.number("beta_slow", chosen.get("beta_slow") or 1, source={})
    truncate = chosen.get("truncate", True)
    if not isinstance(truncate, bool):
        raise read.fail(f"{key}.truncate", f"found {_shown(truncate)}", "true or false")
    given = chosen.get("attention_factor")
    attention = None if given is None else read.number("attention_factor", given, source={})
    mscales = [chosen.get(name) or 0 for name in ("mscale", "mscale_all_dim")]
    for name, value in zip(("mscale", "mscale_all_dim"), mscales, strict=True):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1e6:
            raise read.fail(f"{key}.{name}", f"found {_shown(value)}", "a number from 0 to 1e6, or absent")
    return replace(base, beta_fast=beta_fast, beta_slow=beta_slow, truncate=truncate, attention_factor=attention,
                   mscale=float(mscales[0]), mscale_all_dim=float(mscales[1]))  # fmt: skip


def _partial(read: _Reader, key: str, value: object) -> float:
    """partial_rotary_factor (or GPT-NeoX's rotary_pct): the fraction of each head RoPE turns, in (0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise read.fail(key, f"partial_rotary_factor {_shown(value)}", "a fraction of each head above 0 and at most 1")
    return float(value)


def _window(read: _Reader, key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MOST["positions"]:
        raise read.fail(key, f"found {_shown(value)}", f"a whole number from 1 to {MOST['positions']:,}, or null")
    return value


def no_windows(read: _Reader, layers: int) -> tuple[int | None, ...]:
    """Every layer global (Llama)."""
    return (None,) * layers


def every_layer(default: int | None) -> Windows:
    """One `sliding_window` on every layer when it is set (Mistral: 4096 when left out; Phi-3: none)."""

    def windows(read: _Reader, layers: int) -> tuple[int | None, ...]:
        value = read.raw.get("sliding_window", default)
        return (None if value is None else _window(read, "sliding_window", value),) * layers

    return windows


def sliding_layers(read: _Reader, layers: int) -> tuple[int | None, ...]:
    """Qwen2's rule, transformers' default for its descendants: a window only with use_sliding_window, on the layers
    that layer_types (or max_window_layers) marks."""
    if not read.flag("use_sliding_window", False) or read.raw.get("sliding_window", 4096) is None:
        return (None,) * layers
    size = _window(read, "sliding_window", read.raw.get("sliding_window", 4096))
    kinds = read.raw.get("layer_types")
    if kinds is None:
        first = read.count("max_window_layers", default=28, minimum=0, most=MOST["layers"])
        return tuple(size if i >= first else None for i in range(layers))
    if not isinstance(kinds, list) or len(kinds) != layers:
        raise read.fail("layer_types", f"found {_shown(kinds)}", f"a list of {layers} layer kinds")
    return tuple(size if kind == "sliding_attention" else None for kind in kinds)


# -- a Llama-like family as a declaration ------------------------------------------------------------------------------

RopeLayers = Callable[["_Reader", int], tuple[bool, ...]]  # (read, layers) -> per layer, whether RoPE turns q and k (False: NoPE)
Divisor = Callable[["_Reader", int], float]  # (read, head_dim) -> what the scores are divided by


class QkNormKind(NamedTuple):
    """A Llama-like family's QK-norm: RMSNorm of q and k (weights `q_norm`, `k_norm` under self_attn), before RoPE."""

    over: str = "head"  # "head": each head's d_k numbers, one weight of d_k shared by the heads (Qwen3); "whole": the whole
    #                     projection, H·d_k and G·d_k weights (OLMo 2)
    offset: float = 0.0  # the weight's offset: 1.0 for Gemma's (1 + w)

    def words(self) -> str:
        """How `model info` says it (config.Description.qk_norm)."""
        if self.over == "whole":
            return "over the whole q and k projections (all heads at once)"
        return "per head (one RMSNorm weight of head_dim, shared by the heads)" if not self.offset else "per head, Gemma's (1 + w) RMSNorm"


@dataclass(frozen=True)
class LlamaLike:
    """How a Llama-like family differs from Llama 3: the one record its module declares (`LLAMA_LIKE`), which llama.py computes.

    Llama 3 is: RMSNorm before attention and before the MLP (input_layernorm, post_attention_layernorm), q, k, v and o
    projections (q_proj … o_proj under self_attn), RoPE rotate-half on every layer, grouped-query attention, scores ÷ √d_k,
    a causal mask, SwiGLU (gate_proj, up_proj, down_proj). A declaration says only what differs; a family whose difference
    no field says (a fused q/k/v projection, Gemma's (1 + w) norms, an MoE whose choices the header reports) keeps its own
    read_config and layer_inputs (phi3.py, gemma3.py, qwen3_moe.py, glm4_moe.py).
    """

    model_type: str
    name: str  # the family as people write it, for the header's notes ("OLMo 2")
    defaults: dict[str, Any]  # transformers' configuration_<type>.py defaults: layers, hidden, heads, kv, positions, inter;
    #                           optional head_dim, eps, act, theta (the RoPE base when config.json gives none)
    windows: Windows | None = None  # per layer, the sliding window (config.Windows); None: Qwen2's use_sliding_window rule
    rope_layers: RopeLayers | None = None  # per layer, RoPE or none (NoPE: SmolLM3's no_rope_layers); None: RoPE on every layer
    qk_norm: QkNormKind | None = None  # q_norm and k_norm before RoPE; None: no QK-norm
    norms: str = "pre"  # "pre": RMSNorm before attention and MLP (Llama); "post": after each, the residual unnormalised (OLMo 2)
    divisor: Divisor | None = None  # the scores' divisor, read from config.json; None: √d_k
    attention_bias: bool = False  # config.json's attention_bias read (q, k, v and o biases)
    qkv_bias: bool = False  # q, k and v always biased (Qwen2)
    mlp_bias: bool = False  # config.json's mlp_bias read
    rope_per_type: str | None = None  # the layer type whose RoPE settings apply, when they are given per type
    longrope: bool = False  # longrope's per-length factors read (Phi-3)
    # -- what issue 30's families added (each shared by two or more of them, or by a family with code of its own)
    rope_style: str = "half"  # "interleaved": RoPE turns pairs (2i, 2i + 1) (Cohere2, GLM-4, ERNIE 4.5; rope.py's Rope.style)
    partial_rotary: float | None = None  # the fraction of each head turned when config.json names none (GLM-4, GLM-4.5)
    rope_default: Mapping[str, Any] | None = None  # rope_parameters when config.json names none (Apertus's llama3, Ministral 3's YaRN)
    sliding_rope: str | None = None  # the layer type whose own RoPE settings the sliding layers take (OLMo 3; Gemma 3's local base)
    biases: Biases | None = None  # which keys switch q/k/v, o and MLP biases, when not Llama's attention_bias (Seed-OSS, ERNIE 4.5, GLM)
    score_multiplier: str | None = None  # the key whose number multiplies the scores in place of 1/√d_k (Granite's attention_multiplier)
    embedding_multiplier: str | None = None  # the key whose number multiplies the token embeddings (Granite)
    residual_multiplier: str | None = None  # the key whose number multiplies each block's output before the residual (Granite)
    layer_norms: LayerNorms | None = None  # the norms by name, where `norms` says too little (GLM-4's four, Apertus's names, Cohere2's)
    mlp: Mlp | None = None  # the MLP of layer `index`, (cfg, w, index, x) -> (L, d); None: Llama's SwiGLU (gate_proj, up_proj, down_proj)
    own_activation: str | None = None  # a hidden_act only its `mlp` computes (Apertus's xIELU), not one of ACTIVATIONS
    eps_key: str = "rms_norm_eps"  # the key of the norms' ε (Cohere2: layer_norm_eps)
    query_temperature: Temperatures | None = None  # per layer, the query's temperature by position (Ministral 3; Llama 4's NoPE layers)


class Temperature(NamedTuple):
    """A query temperature by position: the query at position p × 1 + β·ln(1 + ⌊(p + shift) / n₀⌋) (core.variants.QueryTemperature)."""

    beta: float  # β
    original: int  # n₀
    shift: int  # Llama 4: 1
    source: str  # the config.json key β comes from, for the notes


Temperatures = Callable[["_Reader", int], tuple[Temperature | None, ...]]  # (read, layers) -> per layer, its temperature or None


Mlp = Callable[[Any, Any, int, Any], Any]  # (cfg, llama.py's Weights, layer index from 0, (L, d) x) -> (L, d): a family's own MLP


class Biases(NamedTuple):
    """Which config.json keys switch a declared family's biases on, each (key, transformers' default); None: never biased."""

    qkv: tuple[str, bool] | None  # q_proj, k_proj, v_proj
    output: tuple[str, bool] | None  # o_proj
    mlp: tuple[str, bool] | None = None  # gate, up and down projections


class LayerNorms(NamedTuple):
    """A declared family's norms by weight name under layers.<i>. (None: absent), and their kind."""

    before_attention: str | None = "input_layernorm"
    after_attention: str | None = None  # on the attention's output, before it joins the residual (GLM-4, OLMo 2)
    before_mlp: str | None = "post_attention_layernorm"  # None with `parallel`: the MLP reads before_attention's output
    after_mlp: str | None = None
    kind: str = "RMSNorm"  # or "LayerNorm, no bias" (Cohere's: mean removed, divided by the standard deviation, × w)
    parallel: bool = False  # attention and MLP both read one norm of the layer input and both add to the residual (Cohere2)


PRE_NORMS = LayerNorms()  # Llama's
POST_NORMS = LayerNorms(None, "post_attention_layernorm", None, "post_feedforward_layernorm")  # OLMo 2's


def layer_norms(declared: LlamaLike) -> LayerNorms:
    """A declared family's norms: its `layer_norms`, else Llama's ("pre") or OLMo 2's ("post")."""
    return declared.layer_norms or (POST_NORMS if declared.norms == "post" else PRE_NORMS)


class LlamaSettings(NamedTuple):
    """What a declared Llama-like family's config holds beyond the shared keys (ModelConfig[LlamaSettings].family)."""

    declared: LlamaLike
    rope_layers: tuple[bool, ...]  # per layer, whether RoPE turns q and k
    divisor: float | None  # the scores' divisor when the family declares one; None: √d_k
    sliding_rope: RopeConfig | None = None  # the sliding layers' own RoPE (LlamaLike.sliding_rope)
    embedding: float = 1.0  # the token embeddings' multiplier (LlamaLike.embedding_multiplier)
    residual: float = 1.0  # each block's output's multiplier (LlamaLike.residual_multiplier)
    temperatures: tuple[Temperature | None, ...] = ()  # per layer, its query temperature (LlamaLike.query_temperature); () without


def declared_config(declared: LlamaLike, read: _Reader) -> ModelConfig[LlamaSettings]:
    """A declared Llama-like family's config: the shared keys with its defaults and rules, and its per-layer settings."""
    if declared.rope_default is not None and not read.raw.get("rope_parameters") and not read.raw.get("rope_scaling"):
        read = _Reader({**read.raw, "rope_parameters": dict(declared.rope_default)}, read.where)
    own = declared.own_activation is not None and read.raw.get("hidden_act", declared.defaults.get("act")) == declared.own_activation
    if own:  # checked by the family's own MLP, not against ACTIVATIONS
        read = _Reader({**read.raw, "hidden_act": "silu"}, read.where)
    cfg = llama_like(
        read, declared.model_type, declared.defaults, windows=declared.windows, attention_bias=declared.attention_bias,
        qkv_bias=declared.qkv_bias, mlp_bias=declared.mlp_bias, rope_per_type=declared.rope_per_type, longrope=declared.longrope,
    )  # fmt: skip
    if own:
        cfg = replace(cfg, activation=str(declared.own_activation))
    if declared.eps_key != "rms_norm_eps":
        cfg = replace(cfg, norm_eps=read.number(declared.eps_key, declared.defaults.get("eps", 1e-5)))
    if (b := declared.biases) is not None:
        qkv, output, mlp = (switch is not None and read.flag(*switch) for switch in (b.qkv, b.output, b.mlp))
        cfg = replace(cfg, qkv_bias=qkv, output_bias=output, mlp_bias=mlp)
    if declared.partial_rotary is not None and cfg.rope is not None and not names_partial(read):
        cfg = replace(cfg, rope=replace(cfg.rope, partial=declared.partial_rotary))
    rope_layers = (True,) * cfg.layers if declared.rope_layers is None else declared.rope_layers(read, cfg.layers)
    divisor = None if declared.divisor is None else declared.divisor(read, cfg.head_dim)
    if declared.score_multiplier is not None:
        divisor = 1.0 / read.number(declared.score_multiplier, 1.0)
    sliding = None if declared.sliding_rope is None else _rope(
        read, cfg.max_positions, per_type=declared.sliding_rope, theta=declared.defaults.get("theta", 10_000.0))
    embedding, residual = (1.0 if key is None else read.number(key, 1.0) for key in (declared.embedding_multiplier, declared.residual_multiplier))
    temperatures = () if declared.query_temperature is None else declared.query_temperature(read, cfg.layers)
    return with_family(cfg, LlamaSettings(declared, rope_layers, divisor, sliding, embedding, residual, temperatures))


def names_partial(read: _Reader) -> bool:
    """Whether config.json names a partial_rotary_factor, at the top level or among the RoPE settings (GLM-4's and GLM-4.5's
    default of 0.5 applies only when it does not)."""
    parameters = read.raw.get("rope_parameters") or read.raw.get("rope_scaling") or {}
    return "partial_rotary_factor" in read.raw or (isinstance(parameters, dict) and "partial_rotary_factor" in parameters)


def every_nth_full(pattern_key: str | None = "sliding_window_pattern", every: int = 4, *, nullable: bool = False) -> Windows:
    """`layer_types` with one sliding_window (4096 when left out), else every `every`-th layer (`pattern_key`'s number when
    given) full and the others sliding (Cohere2, EXAONE 4, OLMo 3); with `nullable`, a null window: every layer full (EXAONE 4)."""

    def windows(read: _Reader, layers: int) -> tuple[int | None, ...]:
        size = read.raw.get("sliding_window", 4096)
        if nullable and size is None:
            return (None,) * layers
        window = _window(read, "sliding_window", size)
        kinds = read.raw.get("layer_types")
        if kinds is None:
            n = every if pattern_key is None else read.count(pattern_key, default=every, most=MOST["layers"])
            kinds = ["full_attention" if (i + 1) % n == 0 else "sliding_attention" for i in range(layers)]
        if not isinstance(kinds, list) or len(kinds) != layers:
            raise read.fail("layer_types", f"found {_shown(kinds)}", f"a list of {layers} layer kinds")
        return tuple(window if kind == "sliding_attention" else None for kind in kinds)

    return windows


def sliding_only(windows: Windows) -> RopeLayers:
    """RoPE on the layers `windows` gives a window, none on the global ones (NoPE: Cohere2, EXAONE 4)."""
    return lambda read, layers: tuple(window is not None for window in windows(read, layers))


def every_nth_without_rope(key: str = "no_rope_layers", interval_key: str = "no_rope_layer_interval", interval: int = 4) -> RopeLayers:
    """RoPE per layer from `no_rope_layers` (1: RoPE, 0: none; SmolLM3, Llama 4), else every `interval`-th layer without it."""

    def rope_layers(read: _Reader, layers: int) -> tuple[bool, ...]:
        given = read.raw.get(key)
        if given is None:
            every = read.count(interval_key, default=interval, most=MOST["layers"])
            return tuple((i + 1) % every != 0 for i in range(layers))
        if not isinstance(given, list) or len(given) != layers or any(v not in (0, 1) or isinstance(v, float) for v in given):
            raise read.fail(key, f"found {_shown(given)}", f"a list of {layers} numbers, 1 (RoPE) or 0 (none)")
        return tuple(bool(v) for v in given)

    return rope_layers
