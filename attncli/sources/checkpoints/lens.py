"""A checkpoint's whole forward pass kept for the lens: the residual stream after every layer, each head's output, the final
norm and the unembedding (core/lens.py says what is computed and why the head contributions add up to the logits).

For the Llama-like families that declare themselves (llama.py's `_declared_layer`: Llama, Qwen2, Mistral, Qwen3, OLMo 2,
SmolLM3 …): their final norm is an RMSNorm (`norm.weight`), their unembedding `lm_head.weight` or, when the checkpoint has
none (tie_word_embeddings; a GGUF file without `output.weight`), the embedding table. Memory: the stream (N + 1, L, d) and
each layer's head outputs (H, L, d_v); each o_proj is read again only for the heads read, the unembedding a block of rows
at a time, once for all the vectors read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attncli.core.lens import TOP, HeadLens, Promoted, frozen, head_part, normed, top
from attncli.core.scenario import Origin
from attncli.errors import AttnError
from attncli.sources.checkpoints import llama
from attncli.sources.checkpoints.blocks import Weights, WeightsSeen, outputs_seen, weights_seen
from attncli.sources.checkpoints.config import ModelConfig
from attncli.sources.checkpoints.families import layer_reader
from attncli.sources.checkpoints.source import TensorSource

LM_HEAD = "lm_head.weight"
UNEMBED_ROWS = 4096  # rows of the unembedding in float64 at once: 4096 × d (18 MiB for d = 576)


# The declared Llama-like decoders whose final norm (an RMSNorm, norm.weight) and unembedding (lm_head, or the embedding table)
# are all there is between the last layer and the logits, each checked against transformers (tests/test_lens.py's live test).
# Others computed by llama.py are not (Granite divides the logits by logits_scaling, Cohere2 multiplies them by logit_scale
# after a LayerNorm): each joins here with its own check.
FAMILIES = ("llama", "qwen2", "mistral", "qwen3", "olmo2", "smollm3", "seed_oss", "ministral")


def supported(cfg: ModelConfig) -> bool:
    """Whether attncli computes this family's whole forward pass for the lens: a declared Llama-like decoder of FAMILIES."""
    return cfg.causal and cfg.model_type in FAMILIES and layer_reader(cfg.model_type) is llama.layer_inputs


def refuse(cfg: ModelConfig) -> AttnError:
    return AttnError(
        f"the logit lens and direct logit attribution of {cfg.model_type} are not built yet",
        key="model",
        expected="a Llama-like decoder that declares itself (Llama, SmolLM2, Qwen2, Mistral, Ministral, Qwen3, OLMo 2, SmolLM3, Seed-OSS)",
    )


@dataclass(frozen=True, eq=False)
class Stream:
    """One forward pass kept whole: the residual stream after each layer and each head's output, with where to read the rest."""

    cfg: ModelConfig
    weights: Weights
    residual: np.ndarray  # (N + 1, L, d): the embeddings, then the stream after layer 1 … N
    outputs: tuple[np.ndarray, ...]  # N × (L, H·d_v): the heads' outputs side by side, before W_O

    @property
    def final(self) -> np.ndarray:
        """(L, d) the residual stream after the last layer: what the final norm reads."""
        last: np.ndarray = self.residual[-1]
        return last

    def norm_weight(self) -> np.ndarray:
        return self.weights.get("norm.weight", (self.cfg.hidden_size,))

    @property
    def tied(self) -> bool:
        """The unembedding is the embedding table (no lm_head in the checkpoint)."""
        return not self.weights.checkpoint.has(LM_HEAD)

    @property
    def vocabulary(self) -> int:
        name = "embed_tokens.weight" if self.tied else LM_HEAD
        table = self.weights if self.tied else Weights(self.weights.checkpoint, probe=LM_HEAD, prefixes=("",))
        return int(table.checkpoint.shape(table.prefix + name)[0])

    def unembed(self, vectors: np.ndarray) -> np.ndarray:
        """(n, V) the logits of (n, d) normed vectors: x·W_Uᵀ, W_U read and widened UNEMBED_ROWS rows at a time (a quantised
        table too: 49,152 × 576 is 226 MB in float64, never whole)."""
        d, V = self.cfg.hidden_size, self.vocabulary
        table, name = (self.weights, "embed_tokens.weight") if self.tied else (Weights(self.weights.checkpoint, probe=LM_HEAD, prefixes=("",)), LM_HEAD)
        logits = np.empty((vectors.shape[0], V))  # (n, V)
        for first in range(0, V, UNEMBED_ROWS):
            rows = table.rows(name, range(first, min(V, first + UNEMBED_ROWS)), d)  # (r, d)
            logits[:, first : first + rows.shape[0]] = vectors @ rows.T  # (n, d) @ (d, r)
        return logits

    def head_part(self, layer: int, head: int, position: int) -> np.ndarray:
        """(d,) what head `head` of `layer` (both from 1) writes into the residual stream at `position` (from 1): its output
        through its rows of W_O; with norms after attention (OLMo 2), then through post_attention_layernorm with its scale
        frozen at the real attention output's rms, as the final norm's is (the heads' parts then add up to what the norm gives)."""
        d_v = self.cfg.head_dim
        W_O = self._o_proj(layer)
        return self._received(layer, position, head_part(self.outputs[layer - 1][position - 1, (head - 1) * d_v : head * d_v], W_O, head, d_v))

    def bias_part(self, layer: int, position: int) -> np.ndarray:
        """(d,) what o_proj's bias adds to the residual stream at `position` (zeros without one), as head_part reads a head."""
        cfg, d = self.cfg, self.cfg.hidden_size
        bias = self.weights.get(f"layers.{layer - 1}.self_attn.o_proj.bias", (d,)) if cfg.output_bias else np.zeros(d)
        return self._received(layer, position, bias)

    def _o_proj(self, layer: int) -> np.ndarray:
        cfg = self.cfg
        W_O: np.ndarray = self.weights.get(f"layers.{layer - 1}.self_attn.o_proj.weight", (cfg.hidden_size, cfg.heads * cfg.head_dim)).T
        return W_O  # (H·d_v, d)

    def _received(self, layer: int, position: int, part: np.ndarray) -> np.ndarray:
        """(d,) `part` of layer `layer`'s attention output as the residual stream receives it: as it is, or through OLMo 2's
        post_attention_layernorm with its scale frozen at the whole attention output's rms at `position`."""
        cfg = self.cfg
        if llama.declared(cfg).declared.norms != "post":
            return part
        d = cfg.hidden_size
        attention = self.outputs[layer - 1][position - 1] @ self._o_proj(layer)  # (d,) before the norm
        if cfg.output_bias:
            attention = attention + self.weights.get(f"layers.{layer - 1}.self_attn.o_proj.bias", (d,))
        weight = self.weights.get(f"layers.{layer - 1}.post_attention_layernorm.weight", (d,))
        received: np.ndarray = frozen(part[None], attention, weight, cfg.norm_eps)[0]
        return received

    def read(self, wanted: Sequence[tuple[int, int, int]], k: int, lens_at: int | None = None) -> tuple[list[HeadLens], list[Promoted]]:
        """Direct logit attribution of each (layer, head, position) (all from 1) and, at `lens_at`, the logit lens (the
        embeddings, then after each layer): every vector projected through the unembedding in one pass over it."""
        gamma, eps = self.norm_weight(), self.cfg.norm_eps
        d = self.cfg.hidden_size
        parts = [frozen(self.head_part(*at), self.final[at[2] - 1], gamma, eps) for at in wanted]  # n × (d,)
        streams = normed(self.residual[:, lens_at - 1], gamma, eps) if lens_at is not None else np.empty((0, d))  # (N + 1, d)
        if not parts and not len(streams):
            return [], []
        logits = self.unembed(np.concatenate([np.reshape(parts, (len(parts), d)), streams]))  # (n + N + 1, V)
        scales = np.sqrt((self.final * self.final).mean(axis=-1) + eps)  # (L,) rms of the final residual: the frozen scale
        lenses = [HeadLens(layer, head, position, top(row, k), float(scales[position - 1]), logits.shape[1], self.tied)
                  for (layer, head, position), row in zip(wanted, logits)]  # fmt: skip
        return lenses, [top(row, k) for row in logits[len(parts) :]]


def stream(cfg: ModelConfig, checkpoint: TensorSource, ids: tuple[int, ...], *, seen: WeightsSeen | None = None) -> Stream:
    """Every layer of a declared Llama-like family on `ids`, keeping the residual stream and each head's output; `seen` is
    handed each layer's (H, L, L) weights as the map's pass hands them."""
    if not supported(cfg):
        raise refuse(cfg)
    w, rope = llama.weights_and_rope(cfg, checkpoint)
    h = w.rows("embed_tokens.weight", ids, cfg.hidden_size)  # (L, d)
    residual, outputs = [h], []
    with contextlib.ExitStack() as hooks:
        hooks.enter_context(outputs_seen(lambda output, _: outputs.append(output)))
        if seen is not None:
            hooks.enter_context(weights_seen(seen))
        for index in range(cfg.layers):
            h = llama._declared_layer(cfg, w, index, h, rope)  # (L, d)
            residual.append(h)
    return Stream(cfg, w, np.stack(residual), tuple(outputs))


def token_texts(model: Path, ids: Sequence[int]) -> tuple[str, ...]:
    """Each vocabulary id as the checkpoint's own tokenizer writes it out (' on', '.'): a GGUF file's here, tokenizer.json's
    in its bounded child process."""
    from attncli.sources.checkpoints import tokenizer_process
    from attncli.sources.checkpoints.gguf import gguf_path

    gguf = gguf_path(model)
    if gguf is None:
        return tokenizer_process.decode_ids(model, ids)
    from attncli.sources.checkpoints.gguf_tokens import cached_tokenizer

    tokenizer, _ = cached_tokenizer(gguf)
    return tuple(tokenizer_process.written_out(tokenizer, int(i)) for i in ids)


def named(model: Path, lenses: Sequence[HeadLens], streams: Sequence[Promoted]) -> tuple[list[HeadLens], list[Promoted]]:
    """The lenses' tokens written out by the checkpoint's tokenizer, asked for all at once."""
    texts = iter(token_texts(model, [i for p in [*(lens.promoted for lens in lenses), *streams] for i in p.ids]))

    def spelled(p: Promoted) -> Promoted:
        return p._replace(texts=tuple(next(texts) for _ in p.ids))

    return [lens._replace(promoted=spelled(lens.promoted)) for lens in lenses], [spelled(p) for p in streams]


def explained(origin: Origin, head: int, position: int, k: int = TOP) -> tuple[HeadLens, tuple[Promoted, ...]] | None:
    """For explain of a checkpoint's head: its direct logit attribution at `position` (from 1) and the logit lens there
    (the embeddings, then after each layer); None for a model whose whole pass attncli does not compute, or an
    encoder–decoder's layer."""
    from attncli.sources.checkpoints.gguf import model_config, tensors_of
    from attncli.sources.checkpoints.layer import checkpoint_tokens
    from attncli.sources.checkpoints.tokenizer_process import MAX_TEXT_CHARACTERS

    if origin.target is not None:
        return None
    folder = Path(origin.folder)
    cfg, model = model_config(folder)
    if not supported(cfg):
        return None
    checkpoint = tensors_of(folder, model)
    ids = checkpoint_tokens(folder, origin.sentence, special_tokens=origin.special_tokens == "auto", max_tokens=MAX_TEXT_CHARACTERS).ids
    lenses, streams = named(folder, *stream(cfg, checkpoint, ids).read([(origin.layer, head, position)], k, lens_at=position))
    return lenses[0], tuple(streams)
