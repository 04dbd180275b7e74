"""What `model info` says of a model's config, whether it came from config.json or from a GGUF file's metadata.

Besides the sizes: each attention mechanism the model uses, in words (`mechanisms`), and what its
key/value cache costs per token in the checkpoint's dtype (`kv_cache`). Both read a `Facts`
record, built from attncli's normalised config where attncli reads the family, else from the raw
config.json as far as it can be trusted, so a family attncli does not compute yet is still described.

Extending: a mechanism is one more function in DETECTORS (Facts -> Mechanism | None); a cache
layout (what one layer keeps per token) is one more function in LAYOUTS (Facts -> layers | None),
tried in order before plain multi-head / grouped-query keys and values. What one family alone does (Gemma 2's
default soft-cap, gpt-oss's sinks, a QK-norm in its own words, …) is its module's `DESCRIPTION`
(`config.Description`, through `families.description`): no model type is named here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from attncli.sources.checkpoints.blocks import compact
from attncli.sources.checkpoints.config import LlamaSettings, ModelConfig, whole
from attncli.sources.checkpoints.families import ARCHITECTURES, description
from attncli.sources.checkpoints.rope import rope_spec

# bytes per number of a cache kept in the checkpoint's dtype
BYTES = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}


class Facts(NamedTuple):
    """What the descriptions need, whatever the config's source."""

    model_type: str
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    windows: tuple[int | None, ...]  # per layer, transformers' sliding_window W (the last W tokens), None = every token
    causal: bool
    raw: Mapping[str, Any]  # config.json ({} for a GGUF file)
    cfg: ModelConfig | None  # attncli's reading, when it reads the family


class Mechanism(NamedTuple):
    key: str  # "gqa", "local_global", "softcap", "sinks", "qk_norm", "partial_rotary", "mla", "moe", …
    text: str


class CacheLayer(NamedTuple):
    """What one layer keeps in the cache for each token it holds."""

    layer: int  # from 1
    numbers: int  # per token
    window: int | None  # it holds at most this many tokens (a sliding layer), None = all


# -- reading what can be trusted ------------------------------------------------------------------------------------------


def _positive(raw: Mapping[str, Any], key: str) -> float | None:
    value = raw.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1e30:
        return float(value)
    return None


def facts_from_config(cfg: ModelConfig, raw: Mapping[str, Any] | None = None) -> Facts:
    return Facts(cfg.model_type, cfg.layers, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.windows, cfg.causal, raw or {}, cfg)


def facts_from_raw(raw: Mapping[str, Any]) -> Facts | None:
    """A best reading of a config.json attncli does not compute (yet): None without layers and heads."""
    decoder = raw.get("is_encoder_decoder") is True  # BART, T5: the decoder is what generates, and caches
    layers = whole(raw, *(("decoder_layers", "num_decoder_layers") if decoder else ()), "num_hidden_layers", "n_layer", "num_layers", most=10_000)
    heads = whole(raw, *(("decoder_attention_heads",) if decoder else ()), "num_attention_heads", "n_head", most=1 << 16)
    if layers is None or heads is None:
        return None
    kv = whole(raw, "num_key_value_heads", "n_head_kv", most=heads) or heads
    hidden = whole(raw, "hidden_size", "n_embd", "d_model")
    head_dim = whole(raw, "head_dim") or (hidden // heads if hidden else 0)
    model_type = str(raw.get("model_type"))
    return Facts(model_type, layers, heads, kv, head_dim, _raw_windows(raw, model_type, layers), True, raw, None)


def _raw_windows(raw: Mapping[str, Any], model_type: str, layers: int) -> tuple[int | None, ...]:
    size = whole(raw, "sliding_window", most=1 << 31)
    kinds = raw.get("layer_types")
    if size is None or raw.get("use_sliding_window") is False:
        return (None,) * layers
    if isinstance(kinds, list) and len(kinds) == layers:
        return tuple(size if kind == "sliding_attention" else None for kind in kinds)
    family = description(model_type).windows  # a family's own default pattern (Gemma 2's alternation, …)
    return (family(raw, layers, size) if family is not None else None) or (size,) * layers


# -- layers listed compactly ----------------------------------------------------------------------------------------------


def _layers(numbers: Sequence[int]) -> str:
    return ("layer " if len(numbers) == 1 else "layers ") + compact(numbers)


# -- mechanisms -----------------------------------------------------------------------------------------------------------


def _mla(f: Facts) -> Mechanism | None:
    rank = whole(f.raw, "kv_lora_rank")
    if rank is None:
        return None
    rope = whole(f.raw, "qk_rope_head_dim") or 0
    q_rank = whole(f.raw, "q_lora_rank")
    queries = f"queries through a rank-{q_rank} latent (q_lora_rank)" if q_rank else "queries by one q_proj"
    return Mechanism(
        "mla",
        f"multi-head latent attention (MLA): keys and values of all {f.heads} heads are expanded from one {rank}-number latent "
        f"per token (kv_lora_rank), and a {rope}-number RoPE key (qk_rope_head_dim) is shared by every head; {queries}",
    )


def _sharing(f: Facts) -> Mechanism | None:
    if whole(f.raw, "kv_lora_rank") is not None:
        return None
    if f.kv_heads == f.heads:
        return Mechanism("mha", f"multi-head attention: {f.heads} heads, each with its own keys and values")
    if f.kv_heads == 1:
        return Mechanism("mqa", f"multi-query attention: all {f.heads} query heads read one key/value head")
    return Mechanism(
        "gqa",
        f"grouped-query attention: {f.heads} query heads share {f.kv_heads} key/value heads, {f.heads // f.kv_heads} each",
    )


def _local_global(f: Facts) -> Mechanism | None:
    sliding = [i + 1 for i, w in enumerate(f.windows) if w is not None]
    if not sliding:
        return None
    sizes = sorted({w for w in f.windows if w is not None})
    size = " / ".join(f"{w:,}" for w in sizes)
    window = f"a sliding window of the last {size} tokens (sliding_window = {size})"
    if not f.causal:  # an encoder's local layers (ModernBERT): the window reaches both ways
        window = f"a window of the tokens at most {size} positions away on either side (sliding_window = {size})"
    if len(sliding) == f.layers:
        return Mechanism("local_global", f"{window} on every layer")
    full = [i + 1 for i, w in enumerate(f.windows) if w is None]
    everything = "full causal attention" if f.causal else "full bidirectional attention"
    return Mechanism(
        "local_global",
        f"local and global layers: {window} on {_layers(sliding)}, the local ones; {everything} on {_layers(full)}, the global ones",
    )


def _nope(f: Facts) -> Mechanism | None:
    """Layers without RoPE (NoPE): a declared family's per-layer RoPE, else config.json's no_rope_layers (1: RoPE, 0: none)."""
    family = getattr(f.cfg, "family", None)
    rope_layers = getattr(family, "rope_layers", None)
    if rope_layers is None:
        given = f.raw.get("no_rope_layers")
        if not (isinstance(given, list) and len(given) == f.layers and all(v in (0, 1) and not isinstance(v, bool | float) for v in given)):
            return None
        rope_layers = tuple(bool(v) for v in given)
    without = [i + 1 for i, on in enumerate(rope_layers) if not on]
    if not without:
        return None
    turned = [i + 1 for i, on in enumerate(rope_layers) if on]
    order = "the causal mask alone orders the tokens"
    if getattr(family, "temperature", None) is not None:  # Llama 4's query temperature: the position reaches the query there too
        order = "the causal mask and the query's temperature (a factor of its position) order the tokens"
    return Mechanism(
        "nope",
        f"no RoPE (NoPE) on {_layers(without)}: q and k meet as projected there, {order}; "
        + (f"RoPE on {_layers(turned)}" if turned else "no layer has RoPE"),
    )


def _softcap(f: Facts) -> Mechanism | None:
    family = getattr(f.cfg, "family", None)
    cap = getattr(family, "attn_cap", None) if family is not None else None
    if cap is None and f.cfg is None:
        cap = _positive(f.raw, "attn_logit_softcapping") or (description(f.model_type).softcap if "attn_logit_softcapping" not in f.raw else None)
    if cap is None:
        return None
    return Mechanism("softcap", f"logit soft-capping: every scaled score s becomes {cap:g}·tanh(s / {cap:g}) before the mask (attn_logit_softcapping)")


def _query_scale(f: Facts) -> Mechanism | None:
    family = getattr(f.cfg, "family", None)
    scalar = getattr(family, "query_pre_attn_scalar", None) if family is not None else _positive(f.raw, "query_pre_attn_scalar")
    if scalar is None:
        return None
    same = " (= head_dim)" if scalar == f.head_dim else f" instead of √head_dim = √{f.head_dim}"
    return Mechanism("query_scale", f"scores divided by √query_pre_attn_scalar = √{scalar:g}{same}")


def _sinks(f: Facts) -> Mechanism | None:
    if not description(f.model_type).sinks:
        return None
    return Mechanism(
        "sinks",
        "learned attention sinks: one logit per head joins the softmax's denominator with no key and no value, "
        "so each row's weights sum to less than 1 (nothing is cached for it)",
    )


def _qk_norm(f: Facts) -> Mechanism | None:
    declared = description(f.model_type)
    how = declared.qk_norm(f.raw) if callable(declared.qk_norm) else declared.qk_norm
    kind = declared.qk_norm_kind
    if how is None and not callable(declared.qk_norm):
        if f.raw.get("qk_layernorm") is True:  # StableLM, Persimmon, Phi: a LayerNorm, never an RMSNorm
            how, kind = "as the config's qk_layernorm asks", "normalised by LayerNorm"
        elif f.raw.get("use_qk_norm") is True:  # its kind differs by family (RMSNorm, LayerNorm, weightless L2)
            how, kind = "as the config's use_qk_norm asks", "normalised"
    if how is None:
        return None
    where = "" if "RoPE" in how else ", before RoPE"  # a family that normalises elsewhere says where in its words
    return Mechanism("qk_norm", f"QK-norm: q and k are {kind} {how}{where}")


def _partial_rotary(f: Facts) -> Mechanism | None:
    parameters = f.raw.get("rope_parameters")
    nested = parameters if isinstance(parameters, dict) else {}
    factor = nested.get("partial_rotary_factor", f.raw.get("partial_rotary_factor", f.raw.get("rotary_pct")))
    if not isinstance(factor, int | float) or isinstance(factor, bool) or not 0 < factor < 1:
        return None
    rotated = int(f.head_dim * factor)
    return Mechanism(
        "partial_rotary",
        f"partial rotary: RoPE turns only the first {rotated} of each head's {f.head_dim} dimensions (factor {factor:g}); the rest carry no position",
    )


def _rope_scaling(f: Facts) -> Mechanism | None:
    if f.cfg is not None and f.cfg.rope is not None and f.cfg.rope.kind != "default":
        return None  # the rope row says it
    chosen = f.raw.get("rope_scaling") or f.raw.get("rope_parameters")
    kind = chosen.get("rope_type", chosen.get("type")) if isinstance(chosen, dict) else None
    if not isinstance(kind, str) or kind == "default":
        return None
    factor = chosen.get("factor") if isinstance(chosen, dict) else None
    return Mechanism("rope_scaling", f"RoPE scaling: {kind}" + (f" (factor {factor:g})" if isinstance(factor, int | float) else ""))


def _moe(f: Facts) -> Mechanism | None:
    experts = whole(f.raw, "num_local_experts", "n_routed_experts", "num_experts")
    if experts is None and f.cfg is not None:
        experts = getattr(f.cfg.family, "experts", None)
    if experts is None:
        return None
    per_token = whole(f.raw, "num_experts_per_tok", "moe_top_k")
    shared = whole(f.raw, "n_shared_experts")
    dense = whole(f.raw, "first_k_dense_replace", most=10_000)
    text = f"mixture-of-experts MLP: {per_token or 'some'} of {experts} experts per token"
    if shared:
        text += f", plus {shared} shared expert{'s' * (shared > 1)} on every token"
    if dense:
        text += "; the first layer keeps a dense MLP" if dense == 1 else f"; the first {dense} layers keep a dense MLP"
    router = description(f.model_type).router  # how the family's router picks, where it says
    if router is not None:
        text += "; " + router(f.raw)
    return Mechanism("moe", text)


def _parallel(f: Facts) -> Mechanism | None:
    if f.raw.get("use_parallel_residual") is not True:
        return None
    return Mechanism("parallel_residual", "parallel attention and MLP: both read the same layer input and add to the residual together")


def _biases(f: Facts) -> Mechanism | None:
    if f.cfg is None or not f.cfg.qkv_bias or description(f.model_type).own_biases:
        return None
    return Mechanism("attention_bias", "q, k, v" + (" and o" if f.cfg.output_bias else "") + " projections have biases")


def _bidirectional(f: Facts) -> Mechanism | None:
    if f.causal:
        return None
    if any(w is not None for w in f.windows):  # local layers see a window (ModernBERT): said by _local_global
        return Mechanism("bidirectional", "bidirectional: no causal mask, keys after a token are seen too (an encoder: no key/value cache)")
    return Mechanism("bidirectional", "bidirectional: every token sees every token (an encoder: no key/value cache)")


def _encoder_decoder(f: Facts) -> Mechanism | None:
    if f.raw.get("is_encoder_decoder") is not True:
        return None
    return Mechanism(
        "cross_attention",
        "encoder–decoder: the decoder's causal self-attention, then cross-attention whose keys and values are the encoder's "
        "output (the cache below is the decoder's self-attention; cross-attention caches the source's keys and values once, "
        "as many numbers per source token)",
    )


DETECTORS: list[Callable[[Facts], Mechanism | None]] = [
    _mla, _sharing, _bidirectional, _encoder_decoder, _nope, _local_global, _query_scale, _softcap, _sinks, _qk_norm, _partial_rotary, _rope_scaling,
    _biases, _parallel, _moe,
]  # fmt: skip


def mechanisms(f: Facts) -> list[Mechanism]:
    return [found for detect in DETECTORS if (found := detect(f)) is not None]


# -- the key/value cache ---------------------------------------------------------------------------------------------------


def _mla_cache(f: Facts) -> list[CacheLayer] | None:
    """MLA keeps the latent and the shared RoPE key: kv_lora_rank + qk_rope_head_dim numbers per layer and token."""
    rank = whole(f.raw, "kv_lora_rank")
    if rank is None:
        return None
    rope = whole(f.raw, "qk_rope_head_dim") or 0
    return [CacheLayer(i + 1, rank + rope, f.windows[i]) for i in range(f.layers)]


def _linear_layers_cache(f: Facts) -> list[CacheLayer] | None:
    """Layers of linear attention (layer_types "linear_attention": Qwen3-Next's Gated DeltaNet) keep a state of fixed size, no
    keys and values per token; the others keep K and V."""
    kinds = f.raw.get("layer_types")
    if not (isinstance(kinds, list) and len(kinds) == f.layers and "linear_attention" in kinds):
        return None
    return [CacheLayer(i + 1, 0 if kind == "linear_attention" else 2 * f.kv_heads * f.head_dim, f.windows[i]) for i, kind in enumerate(kinds)]


def _shared_kv_cache(f: Facts) -> list[CacheLayer] | None:
    """Layers that reuse an earlier layer's keys and values (Gemma 3n's num_kv_shared_layers, as attncli read them) cache none."""
    sources = getattr(f.cfg.family, "sources", None) if f.cfg is not None and f.cfg.model_type == "gemma3n_text" else None
    if sources is None or all(source == i for i, source in enumerate(sources)):
        return None
    return [CacheLayer(i + 1, 2 * f.kv_heads * f.head_dim if source == i else 0, f.windows[i]) for i, source in enumerate(sources)]


def _chunked_cache(f: Facts) -> list[CacheLayer] | None:
    """A family's chunked layers (Llama 4's attention_chunk_size) keep at most a chunk of tokens, as a sliding layer its window."""
    chunks = getattr(getattr(f.cfg, "family", None), "chunks", None)
    if chunks is None or all(chunk is None for chunk in chunks):
        return None
    return [CacheLayer(i + 1, 2 * f.kv_heads * f.head_dim, chunk if chunk is not None else f.windows[i]) for i, chunk in enumerate(chunks)]


LAYOUTS: list[Callable[[Facts], list[CacheLayer] | None]] = [_mla_cache, _linear_layers_cache, _shared_kv_cache, _chunked_cache]


def cache_layers(f: Facts) -> list[CacheLayer]:
    """Per layer, the numbers cached per token: the first layout that applies, else K and V of every key/value head (2·G·d_k)."""
    for layout in LAYOUTS:
        found = layout(f)
        if found is not None:
            return found
    return [CacheLayer(i + 1, 2 * f.kv_heads * f.head_dim, f.windows[i]) for i in range(f.layers)]


def cache_bytes(layers: Sequence[CacheLayer], tokens: int, bytes_per_number: int) -> int:
    """The whole cache for `tokens` tokens: each layer keeps min(tokens, its window) tokens."""
    return sum(layer.numbers * (tokens if layer.window is None else min(tokens, layer.window)) for layer in layers) * bytes_per_number


def kv_cache(f: Facts, dtype: str | None, *, dtype_from: str, max_positions: int | None = None) -> dict[str, Any] | None:
    """What the cache costs: per layer and token, per token over all layers, beyond the windows, at the full context."""
    size = BYTES.get(dtype or "")
    if size is None or f.head_dim <= 0 or not f.causal:  # an encoder reads its text at once: it keeps no cache
        return None
    layers = cache_layers(f)
    mla = whole(f.raw, "kv_lora_rank") is not None
    per_token = sum(layer.numbers for layer in layers) * size
    beyond = sum(layer.numbers for layer in layers if layer.window is None) * size
    windows = sorted({layer.window for layer in layers if layer.window is not None})
    bound = sum(layer.numbers * layer.window for layer in layers if layer.window is not None) * size
    if mla:
        rank, rope = whole(f.raw, "kv_lora_rank") or 0, whole(f.raw, "qk_rope_head_dim") or 0
        nope, v = whole(f.raw, "qk_nope_head_dim") or 0, whole(f.raw, "v_head_dim") or 0
        formula = f"kv_lora_rank + qk_rope_head_dim = {rank} + {rope} = {rank + rope} numbers (expanded per head it would be {f.heads} · ({nope} + {rope} + {v}) = {f.heads * (nope + rope + v):,})"
    else:
        formula = f"K and V: 2 · {f.kv_heads} key/value head{'s' * (f.kv_heads > 1)} · {f.head_dim} = {2 * f.kv_heads * f.head_dim:,} numbers"
    return {
        "layout": "mla" if mla else "mha" if f.kv_heads == f.heads else "mqa" if f.kv_heads == 1 else "gqa",
        "dtype": dtype,
        "dtype_from": dtype_from,
        "bytes_per_number": size,
        "numbers_per_layer": [layer.numbers for layer in layers],
        "shared": _shared_kv_cache(f) is not None,  # some layers reuse an earlier layer's keys and values (Gemma 3n)
        "per_layer": formula,
        "bytes_per_token": per_token,
        "windows": windows,
        "bytes_per_token_beyond_windows": beyond if windows else per_token,
        "sliding_bound_bytes": bound if windows else None,
        "bounded_layers": None if not windows else "chunked" if _chunked_cache(f) is not None else "sliding",  # what bounds their tokens
        "max_positions": max_positions,
        "bytes_at_max_positions": None if max_positions is None else cache_bytes(layers, max_positions, size),
    }


def describe_cache(cache: Mapping[str, Any], layers: int) -> list[str]:
    """`model info`'s lines about the cache."""
    size = cache["bytes_per_number"]
    caching = [n for n in cache["numbers_per_layer"] if n]  # a layer of linear attention keeps a state of fixed size instead
    first = caching[0] if len(set(caching)) == 1 else None
    others = "reuse an earlier layer's" if cache.get("shared") else "keep a state of fixed size"  # KV sharing, or linear attention
    over = f"{layers} layer{'s' * (layers > 1)}" if len(caching) == layers else (
        f"the {len(caching)} of {layers} layers that keep keys and values (the others {others})")  # fmt: skip
    lines = [
        (f"{cache['per_layer']} per layer and token" if first is not None else "numbers per layer and token differ by layer")
        + f", × {size} bytes ({cache['dtype']}, {cache['dtype_from']})"
        + f" = {_bytes(cache['bytes_per_token'])} per token over {over}"
    ]
    if cache["windows"]:
        window = " / ".join(f"{w:,}" for w in cache["windows"])
        lines.append(
            f"the {cache.get('bounded_layers', 'sliding')} layers keep at most {window} tokens, {_bytes(cache['sliding_bound_bytes'])} in all; beyond that, "
            f"each new token costs {_bytes(cache['bytes_per_token_beyond_windows'])} (the global layers only)"
        )
    if cache["bytes_at_max_positions"] is not None:
        lines.append(f"a full context of {cache['max_positions']:,} tokens: {_bytes(cache['bytes_at_max_positions'])}")
    return lines


def _bytes(n: int) -> str:
    """'384 bytes', '1,536 bytes (1.5 KiB)', '131,072 bytes (128 KiB)'."""
    text = f"{n:,} bytes"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{text} ({n / scale:.3g} {unit})"
    return text


# -- model info ------------------------------------------------------------------------------------------------------------


def describe_config(cfg: ModelConfig, raw: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`model info`'s description of a config (a folder's config.json or a GGUF file's metadata)."""
    rope = None
    if cfg.rope is not None:
        spec = rope_spec(cfg.rope, cfg.head_dim)
        style = cfg.family.declared.rope_style if isinstance(cfg.family, LlamaSettings) else spec.style  # a declaration says its pairs
        interleaved = description(cfg.model_type).interleaved_rope
        if interleaved is not None and interleaved(raw or {}):
            style = "interleaved"  # the family turns interleaved pairs (DeepSeek's MLA rope part)
        rope = {"theta": spec.theta, "scaling": spec.scaling, "style": style, "inv_freq": spec.frequencies(cfg.head_dim).tolist(),
                "rotary_dim": spec.width(cfg.head_dim), "partial_rotary_factor": cfg.rope.partial}  # fmt: skip
    windows = sorted({w for w in cfg.windows if w is not None})
    facts = facts_from_config(cfg, raw)
    return {
        "layers": cfg.layers,
        "hidden_size": cfg.hidden_size,
        "heads": cfg.heads,
        "kv_heads": cfg.kv_heads,
        "head_dim": cfg.head_dim,
        "max_positions": cfg.max_positions,
        "causal": cfg.causal,
        "activation": cfg.activation,
        "dtype": cfg.dtype,
        "rope": rope,
        "sliding_window": windows[0] if windows else None,  # transformers' spelling: keys i − w + 1 … i
        "sliding_layers": [i + 1 for i, w in enumerate(cfg.windows) if w is not None],
        "supported_types": list(ARCHITECTURES),
        # an encoder–decoder: the fields above describe the decoder; this, the encoder (None for one stack)
        "encoder": None if not cfg.encoder_layers else {"layers": cfg.encoder_layers, "heads": cfg.encoder_heads, "head_dim": cfg.hidden_size // cfg.encoder_heads},
        "mechanisms": [m._asdict() for m in mechanisms(facts)],
        "global_layers": [i + 1 for i, w in enumerate(cfg.windows) if w is None],
        "kv_cache": config_cache(cfg, raw, cfg.dtype, "as config.json declares it"),
    }


def config_cache(cfg: ModelConfig, raw: Mapping[str, Any] | None, dtype: str | None, dtype_from: str) -> dict[str, Any] | None:
    """The cache of a config attncli reads, in `dtype` (float16 when none is known: llama.cpp's default cache type)."""
    if dtype is None:
        dtype, dtype_from = "float16", "no dtype declared: float16 assumed, llama.cpp's default cache type"
    return kv_cache(facts_from_config(cfg, raw), dtype, dtype_from=dtype_from, max_positions=cfg.max_positions)


def describe_raw(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The mechanisms and cache of a config attncli does not read (an unsupported family), as far as its keys tell."""
    facts = facts_from_raw(raw)
    if facts is None:
        return {}
    dtype = raw.get("dtype", raw.get("torch_dtype"))
    positions = whole(raw, "max_position_embeddings", "n_positions", most=1 << 31)
    return {
        "mechanisms": [m._asdict() for m in mechanisms(facts)],
        "kv_cache": kv_cache(facts, dtype if isinstance(dtype, str) else None, dtype_from="as config.json declares it", max_positions=positions),
    }
