"""Build the tiny random checkpoints of tests/checkpoints/ and transformers' golden attention weights for each.

    pip install torch==2.13.0 transformers     # never torch without the pin: the CPU build, offline here
    python scripts/make_checkpoints.py         # every fixture, and the corpus of broken ones
    python scripts/make_checkpoints.py --bad   # only tests/checkpoints/bad/ (needs neither torch nor transformers)

Each fixture is saved by transformers' own `save_pretrained` (safetensors) with a tokenizer.json
trained offline with the `tokenizers` library, then loaded back from disk in float64 with eager
attention; `golden.npz` holds the sentence, its token ids and every layer's and head's attention
weights (layers, heads, L, L). The fixtures of issue 20's families (qwen3 … bart) also hold, for each layer,
the input of its attention block (`attention_inputs`, after the block's own norm), the cos/sin table
transformers handed that block (`cos`, `sin`), and every layer's output (`hidden_states`); BART holds its
encoder, decoder and cross attentions and their inputs apart (see `golden_encoder_decoder`). Weights are redrawn with a standard deviation of 0.3 (norm scales
around 1) so that attention is far from uniform, which transformers' small default initialisation hides.
The tests read only these files; they never need torch. With deepseek_v2 it also writes lite_deepseek_v2.npz, that
fixture run with DeepSeek-V2-Lite's greedy router and YaRN (`make_deepseek_v2_lite`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "checkpoints"
SENTENCE = "The cat sat on the mat, then the cat slept."
CORPUS = [SENTENCE] * 20 + [
    "A dog ran to the park and sat down.",
    "When Mary and John went to the store, John gave a drink to Mary.",
] * 5
STD = 0.3


# ---------------------------------------------------------------- tokenizers


def byte_level_tokenizer(*, bos: bool, special: list[str], trim_offsets: bool) -> Any:
    """Byte-level BPE as GPT-2, Llama 3 and Qwen2 use it; with `bos`, the post-processor puts <s> first."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=290, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    byte_level = processors.ByteLevel(trim_offsets=trim_offsets)
    if bos:
        template = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tokenizer.token_to_id("<s>"))]
        )
        tokenizer.post_processor = processors.Sequence([byte_level, template])
    else:
        tokenizer.post_processor = byte_level
    return tokenizer


def bart_tokenizer() -> Any:
    """BART's: byte-level BPE with <s> (0), <pad> (1), </s> (2), and <s> $A </s> around a sentence."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=290, special_tokens=["<s>", "<pad>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )  # fmt: skip
    tokenizer.train_from_iterator(CORPUS, trainer)
    tokenizer.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]),
        ]
    )
    return tokenizer


def t5_tokenizer() -> Any:
    """T5's specials: <pad> (0, also the decoder's start), </s> (1) closing every text, <unk> (2); byte-level BPE here
    (T5's own is SentencePiece: the attention does not depend on how the words were cut)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=290, special_tokens=["<pad>", "</s>", "<unk>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )  # fmt: skip
    tokenizer.train_from_iterator(CORPUS, trainer)
    tokenizer.post_processor = processors.Sequence(
        [processors.ByteLevel(trim_offsets=False), processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)])]
    )
    return tokenizer


def wordpiece_tokenizer() -> Any:
    """BERT's: lower-cased WordPiece, [CLS] sentence [SEP]; the vocabulary written out (WordPiece training is not
    deterministic): specials, every character alone and as a ##continuation, every word of the corpus."""
    import re

    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    text = " ".join(CORPUS).lower()
    chars = sorted(set(text) - {" "})
    words = sorted(set(re.findall(r"\w+", text)) - set(chars))
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars if c.isalnum()), *words]
    tokenizer = Tokenizer(models.WordPiece({piece: i for i, piece in enumerate(pieces)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    for special in pieces[:5]:
        tokenizer.add_special_tokens([special])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return tokenizer


# ---------------------------------------------------------------- models


NORM_SCALES = ("ln_1.weight", "ln_2.weight", "ln_f.weight", "LayerNorm.weight", "norm.weight", "layer_norm.weight")


def redraw(model: Any, seed: int, *, norm_centre: float = 1.0, norms: tuple[str, ...] = ()) -> None:
    """Every parameter anew: N(0, 0.3²), norm scales N(norm_centre, 0.3²) (0 for Gemma's (1 + w) norms); `norms` names
    more scales by a part of their name (StableLM's per-head q_layernorm.norms.<h>.weight)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * STD
            scale = name.endswith(NORM_SCALES) or any(part in name and name.endswith(".weight") for part in norms)
            parameter.copy_(noise + norm_centre if scale else noise)


def gpt2(*, prefixed: bool, **options: Any) -> Callable[[int], Any]:
    def build(vocab: int) -> Any:
        from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

        config = GPT2Config(
            vocab_size=vocab, n_positions=32, n_embd=16, n_layer=3, n_head=4, bos_token_id=0, eos_token_id=0, **options
        )  # <|endoftext|> is token 0 of the tiny tokenizer
        return (GPT2LMHeadModel if prefixed else GPT2Model)(config)

    return build


def bert(vocab: int) -> Any:
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=vocab, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=32, type_vocab_size=2,
    )  # fmt: skip
    return BertForMaskedLM(config)


def llama_family(kind: str, *, bare: bool = False, **options: Any) -> Callable[[int], Any]:
    def build(vocab: int) -> Any:
        import transformers

        config_class, model_class = {
            "llama": (transformers.LlamaConfig, transformers.LlamaModel if bare else transformers.LlamaForCausalLM),
            "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
            "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
        }[kind]
        return model_class(config_class(vocab_size=vocab, tie_word_embeddings=True, **options))

    return build


FIXTURES: dict[str, dict[str, Any]] = {
    # GPT2LMHeadModel: keys start with `transformer.`
    "gpt2": {"build": gpt2(prefixed=True), "dtype": "float32", "tokenizer": "gpt2"},
    # GPT2Model: bare keys; scores also divided by the layer number; exact GELU; its own MLP width
    "gpt2-bare": {
        "build": gpt2(prefixed=False, scale_attn_by_inverse_layer_idx=True, activation_function="gelu", n_inner=40),
        "dtype": "float16",
        "tokenizer": "gpt2",
    },
    # BertForMaskedLM: keys start with `bert.`; [CLS] … [SEP]
    "bert": {"build": bert, "dtype": "float32", "tokenizer": "bert"},
    # grouped-query (4 heads, 2 kv heads), head_dim 8 ≠ 24 / 4, llama3 RoPE whose three frequency bands all occur
    # with d_k = 8 and 64 original positions, bfloat16, sharded with an index file
    "llama": {
        "build": llama_family(
            "llama",
            hidden_size=24,
            intermediate_size=48,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            max_position_embeddings=128,
            bos_token_id=0,
            eos_token_id=1,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 10000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
        ),  # fmt: skip
        "dtype": "bfloat16",
        "shard": "12KB",
        "tokenizer": "llama",
    },
    # q/k/v biases, θ = 1000, one kv head for 4 heads; a 5-token sliding window on layers 2 and 3
    "qwen2": {
        "build": llama_family(
            "qwen2",
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=1,
            max_position_embeddings=64,
            rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
            use_sliding_window=True,
            sliding_window=5,
            max_window_layers=1,
        ),  # fmt: skip
        "dtype": "float32",
        "tokenizer": "qwen2",
    },
    # a 4-token sliding window on every layer, float16
    "mistral": {
        "build": llama_family(
            "mistral",
            hidden_size=24,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            sliding_window=4,
            bos_token_id=0,
            eos_token_id=1,
        ),  # fmt: skip
        "dtype": "float16",
        "tokenizer": "llama",
    },
    # LlamaModel (bare keys) with every bias; config.json rewritten in transformers 4's spelling below
    "llama-old": {
        "build": llama_family(
            "llama",
            bare=True,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=64,
            attention_bias=True,
            mlp_bias=True,
            bos_token_id=0,
            eos_token_id=1,
            rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 5000.0},
        ),  # fmt: skip
        "dtype": "float32",
        "tokenizer": "llama",
        "old_spelling": True,
    },
}


def family(config_name: str, model_name: str, **options: Any) -> Callable[[int], Any]:
    """Any transformers family by its class names: config_name(vocab_size=…, **options) → model_name."""

    def build(vocab: int) -> Any:
        import transformers

        return getattr(transformers, model_name)(getattr(transformers, config_name)(vocab_size=vocab, **options))

    return build


# Issue 20's families. Each is as small as transformers allows and sets the mechanism's parameters away from
# their defaults where a default would hide a mistake (a cap low enough to bend logits, a window shorter than
# the sentence, query_pre_attn_scalar ≠ head_dim, a partial rotary fraction ≠ 1). Every one is float32 on disk.
FAMILIES: dict[str, dict[str, Any]] = {
    # QK-norm per head (q_norm, k_norm over head_dim), GQA 4:2, head_dim 8 ≠ 16 / 4, θ = 1e6, tied embeddings
    "qwen3": {
        "build": family(
            "Qwen3Config", "Qwen3ForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64, rms_norm_eps=1e-6,
            tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        ),  # fmt: skip
        "tokenizer": "qwen2",
    },
    # QK-norm over the whole projection (q_norm of size H·d, k_norm of size G·d), post-norms only (no input norm)
    "olmo2": {
        "build": family(
            "Olmo2Config", "Olmo2ForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6,
            bos_token_id=0, eos_token_id=0, pad_token_id=0, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "qwen2",
    },
    # soft-cap 5 (50 in the real model: too high to bend random logits), query_pre_attn_scalar 12 ≠ head_dim 8,
    # layers sliding (window 4) / full / sliding, (1 + w) RMSNorm, √d embedding scale, pre- and post-norms
    "gemma2": {
        "build": family(
            "Gemma2Config", "Gemma2ForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
            query_pre_attn_scalar=12, attn_logit_softcapping=5.0, final_logit_softcapping=30.0, sliding_window=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            bos_token_id=0, eos_token_id=1, pad_token_id=1,
        ),  # fmt: skip
        "tokenizer": "llama",
        "norm_centre": 0.0,
    },
    # QK-norm per head ((1 + w) form), 5 sliding layers (window 4, θ = 10 000) then 1 full layer (θ = 1e6)
    "gemma3": {
        "build": family(
            "Gemma3TextConfig", "Gemma3ForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=6,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
            query_pre_attn_scalar=8, sliding_window=4, layer_types=["sliding_attention"] * 5 + ["full_attention"],
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
            },
            bos_token_id=0, eos_token_id=1, pad_token_id=1,
        ),  # fmt: skip
        "tokenizer": "llama",
        "norm_centre": 0.0,
    },
    # fused qkv_proj [q | k | v] (GQA 4:2), fused gate_up_proj, partial rotary 0.5 (Phi-4-mini's is 0.75; Phi-3's 1)
    "phi3": {
        "build": family(
            "Phi3Config", "Phi3ForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, original_max_position_embeddings=64,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
            bos_token_id=0, eos_token_id=1, pad_token_id=1, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
    },
    # Pythia-style: fused query_key_value laid out per head [q | k | v], rotary_pct 0.25, parallel residual, biases
    "gpt_neox": {
        "build": family(
            "GPTNeoXConfig", "GPTNeoXForCausalLM", hidden_size=16, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=2, max_position_embeddings=64, rotary_pct=0.25, use_parallel_residual=True,
            bos_token_id=0, eos_token_id=0, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "gpt2",
    },
    # learned sinks, sliding (window 4) / full, q/k/v/o biases, MoE (4 experts, top 2) in every layer; default RoPE
    # here, YaRN (factor 32) in the real model
    "gpt_oss": {
        "build": family(
            "GptOssConfig", "GptOssForCausalLM", hidden_size=16, intermediate_size=16, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=4, max_position_embeddings=64, sliding_window=4,
            layer_types=["sliding_attention", "full_attention"], num_local_experts=4, num_experts_per_tok=2,
            rope_parameters={"rope_type": "default", "rope_theta": 150000.0},
            bos_token_id=0, eos_token_id=0, pad_token_id=0, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "qwen2",
        "moe": True,
    },
    # MLA: q through q_a (rank 8) → RMSNorm → q_b; kv latent rank 6 + one shared RoPE part of 4 per token; nope 4,
    # v 4; a dense MLP in layer 1, then MoE (4 routed experts in 2 groups, top 2, one shared expert); default RoPE
    # here, YaRN with mscale in the real model
    "deepseek_v3": {
        "build": family(
            "DeepseekV3Config", "DeepseekV3ForCausalLM", hidden_size=16, intermediate_size=32, moe_intermediate_size=8,
            num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=8, kv_lora_rank=6,
            qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=4, n_routed_experts=4, num_experts_per_tok=2,
            n_shared_experts=1, n_group=2, topk_group=1, first_k_dense_replace=1, max_position_embeddings=64,
            bos_token_id=0, eos_token_id=1, pad_token_id=1, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
        "moe": True,
    },
    # encoder–decoder: bidirectional encoder, causal decoder self-attention, cross-attention on the encoder's output;
    # learned positions offset by 2, post-norms, biases everywhere
    "bart": {
        "build": family(
            "BartConfig", "BartForConditionalGeneration", d_model=16, encoder_layers=2, decoder_layers=2,
            encoder_attention_heads=2, decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32,
            max_position_embeddings=64, bos_token_id=0, pad_token_id=1, eos_token_id=2, decoder_start_token_id=2,
            forced_eos_token_id=None,
        ),  # fmt: skip
        "tokenizer": "bart",
        "encoder_decoder": True,
    },
    # DeepSeek V2-Lite's MLA: no query latent (q_lora_rank null: one q_proj), kv latent rank 6 + one shared RoPE part of
    # 4 (always interleaved pairs), nope 4, v 4; a dense MLP in layer 1, then MoE: a softmax router (float32),
    # group-limited greedy top 2 of 4 experts in 2 groups (one group kept, groups scored by their best expert), weights
    # × routed_scaling_factor 2 (1 in V2-Lite, 16 in V2), two shared experts; last here so the others keep their seeds
    "deepseek_v2": {
        "build": family(
            "DeepseekV2Config", "DeepseekV2ForCausalLM", hidden_size=16, intermediate_size=32, moe_intermediate_size=8,
            num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=None, kv_lora_rank=6,
            qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=4, n_routed_experts=4, num_experts_per_tok=2,
            n_shared_experts=2, n_group=2, topk_group=1, topk_method="group_limited_greedy", routed_scaling_factor=2.0,
            first_k_dense_replace=1, max_position_embeddings=64, bos_token_id=0, eos_token_id=1, pad_token_id=1,
            tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
        "moe": True,
    },
    # Falcon 40B/180B's new decoder architecture: query_key_value laid out per key/value group [q … q | k | v] (4 heads in 2
    # groups), ln_attn and ln_mlp both of the layer's input, attention and MLP added together, RoPE θ = 1000, no biases
    "falcon": {
        "build": family(
            "FalconConfig", "FalconForCausalLM", hidden_size=16, num_hidden_layers=2, num_attention_heads=4, num_kv_heads=2,
            new_decoder_architecture=True, parallel_attn=True, bias=False, max_position_embeddings=64,
            rope_parameters={"rope_type": "default", "rope_theta": 1000.0}, bos_token_id=0, eos_token_id=0,
            tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "gpt2",
    },
    # Falcon-RW's: multi-query (4 query heads read one key/value head: query_key_value is [q_1 … q_4 | k | v]), ALiBi in
    # transformers' Falcon convention, one input_layernorm for attention and MLP in parallel, biases everywhere
    "falcon-alibi": {
        "build": family(
            "FalconConfig", "FalconForCausalLM", hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
            multi_query=True, alibi=True, parallel_attn=True, bias=True, max_position_embeddings=64,
            bos_token_id=0, eos_token_id=0, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "gpt2",
    },
    # neither multi-query nor parallel: query_key_value laid out per head [q | k | v] (as GPT-NeoX), attention then the MLP
    # of the updated stream (post_attention_layernorm), RoPE θ = 10 000 (Falcon's default)
    "falcon-sequential": {
        "build": family(
            "FalconConfig", "FalconForCausalLM", hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            multi_query=False, parallel_attn=False, bias=False, max_position_embeddings=64, ffn_hidden_size=40,
            bos_token_id=0, eos_token_id=0, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "gpt2",
    },
    # ALiBi with 6 heads (not a power of two: the slopes of 4 heads, then every other slope of 8), query_key_value per head
    # [q | k | v], word_embeddings_layernorm, BLOOM's own tanh GELU, biases everywhere
    "bloom": {
        "build": family(
            "BloomConfig", "BloomForCausalLM", hidden_size=24, n_layer=2, n_head=6, bos_token_id=0, eos_token_id=0,
            tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "gpt2",
    },
    # StableLM 2: per-head QK LayerNorm (each head its own weight, no bias), GQA 4:2, head_dim 8, partial rotary 0.25 (2 of
    # 8 coordinates turned), q/k/v biases, LayerNorm (with bias) before attention and MLP, sequential residual
    "stablelm": {
        "build": family(
            "StableLmConfig", "StableLmForCausalLM", hidden_size=32, intermediate_size=48, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, qk_layernorm=True, use_qkv_bias=True,
            use_parallel_residual=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
            bos_token_id=0, eos_token_id=0, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "gpt2",
        "norms": ("q_layernorm.norms.", "k_layernorm.norms."),
    },
    # the parallel residual (x + attention(ln(x)) + mlp(ln(x)), one input_layernorm), QK LayerNorm, rotary 0.5, θ = 1000
    "stablelm-parallel": {
        "build": family(
            "StableLmConfig", "StableLmForCausalLM", hidden_size=32, intermediate_size=48, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, qk_layernorm=True,
            use_parallel_residual=True, rope_parameters={"rope_type": "default", "rope_theta": 1000.0, "partial_rotary_factor": 0.5},
            bos_token_id=0, eos_token_id=0, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "gpt2",
        "norms": ("q_layernorm.norms.", "k_layernorm.norms."),
    },
    # T5 (v1.1's gated-GELU MLP): relative-position buckets (8 buckets, max distance 8, so that the 12-token sentence meets
    # exact, logarithmic and last buckets), no scaling of the scores, RMSNorm without mean, no biases; the encoder's buckets
    # both ways, the decoder's backwards only, none in the cross-attention; encoder 2 layers of 4 heads, decoder 3
    "t5": {
        "build": family(
            "T5Config", "T5ForConditionalGeneration", d_model=16, d_kv=4, d_ff=32, num_layers=2, num_decoder_layers=3,
            num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=8, feed_forward_proj="gated-gelu",
            pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "t5",
        "encoder_decoder": True,
        "decoder_start": "alone",  # the start token, then the target's tokens (BART's: </s> <s> …)
    },
    # ModernBERT: bidirectional, global attention on layer 1 (θ = 160 000) and local on layers 2 and 3 (±2 tokens:
    # local_attention 4; θ = 10 000), fused Wqkv [q | k | v], GeGLU MLP, LayerNorms without bias, no norm before layer 1
    "modernbert": {
        "build": family(
            "ModernBertConfig", "ModernBertForMaskedLM", hidden_size=16, intermediate_size=24, num_hidden_layers=3,
            num_attention_heads=4, max_position_embeddings=64, local_attention=4,
            layer_types=["full_attention", "sliding_attention", "sliding_attention"],
            rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 160000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            },
            pad_token_id=0, bos_token_id=2, cls_token_id=2, eos_token_id=3, sep_token_id=3,
        ),  # fmt: skip
        "tokenizer": "bert",
    },
    # Group-limited routing that matters, past the MoE layers: 4 layers (1 dense, then 3 MoE), 8 routed experts in 4
    # groups, top 3 within 2 groups; a correction bias drawn from U(−1, 0.3), so that some kept experts' corrected
    # scores are below 0 (a group outside topk_group must stay out even then), norm_topk_prob, × 2.5. `check_routing`
    # asserts that the groups, the bias and both together change experts transformers picks, in every MoE layer.
    "deepseek_v3_groups": {
        "seed": 111,  # as its branch made it, beside Falcon's, which took the seeds after deepseek_v2 too
        "build": family(
            "DeepseekV3Config", "DeepseekV3ForCausalLM", hidden_size=16, intermediate_size=32, moe_intermediate_size=8,
            num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=8, kv_lora_rank=6,
            qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=4, n_routed_experts=8, num_experts_per_tok=3,
            n_shared_experts=1, n_group=4, topk_group=2, first_k_dense_replace=1, routed_scaling_factor=2.5,
            norm_topk_prob=True, max_position_embeddings=64, bos_token_id=0, eos_token_id=1, pad_token_id=1,
            tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
        "moe": True,
        "correction_bias": (-1.0, 0.3),
        "router": "sigmoid",
    },
    # DeepSeek V2's group-limited greedy router past the MoE layers: 4 layers (1 dense, then 3 MoE), 8 experts in 4
    # groups scored by their best expert, top 3 within 2 groups, × 2; `check_routing` asserts the groups change the
    # choice in every MoE layer. With it, greedy.npz: the same folder run with topk_method greedy (no groups).
    "deepseek_v2_groups": {
        "seed": 112,  # as its branch made it, beside Falcon's, which took the seeds after deepseek_v2 too
        "build": family(
            "DeepseekV2Config", "DeepseekV2ForCausalLM", hidden_size=16, intermediate_size=32, moe_intermediate_size=8,
            num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=None, kv_lora_rank=6,
            qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=4, n_routed_experts=8, num_experts_per_tok=3,
            n_shared_experts=1, n_group=4, topk_group=2, topk_method="group_limited_greedy", routed_scaling_factor=2.0,
            first_k_dense_replace=1, max_position_embeddings=64, bos_token_id=0, eos_token_id=1, pad_token_id=1,
            tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
        "moe": True,
        "router": "softmax",
    },
    # NoPE on every 2nd layer (no_rope_layer_interval 2, 4 in the real model: layers 2 and 4 here) and a 4-token window on
    # those layers (transformers' default layer_types with use_sliding_window), q, k, v and o biases, θ = 5e4
    "smollm3": {
        "seed": 111,  # as its branch made it: the families merged before it took the places after deepseek_v2
        "build": family(
            "SmolLM3Config", "SmolLM3ForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, no_rope_layer_interval=2,
            use_sliding_window=True, sliding_window=4, attention_bias=True, bos_token_id=0, eos_token_id=0, pad_token_id=0,
            tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 50000.0},
        ),  # fmt: skip
        "tokenizer": "qwen2",
    },
    # gated attention (q_proj twice as wide: [query | gate] per head) on layers 2 and 4, Gated DeltaNet on layers 1 and 3
    # (full_attention_interval 2; 4 in the real model), (1 + w) RMSNorm and QK-norm, partial rotary 0.25 of head_dim 8,
    # a mixture of 4 experts (2 per token, a shared expert behind a sigmoid gate) on layers 1 and 2, dense MLPs on 3 and 4
    "qwen3_next": {
        "seed": 112,  # as its branch made it: the families merged before it took the places after deepseek_v2
        "build": family(
            "Qwen3NextConfig", "Qwen3NextForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64, full_attention_interval=2,
            linear_conv_kernel_dim=3, linear_key_head_dim=4, linear_value_head_dim=6, linear_num_key_heads=2,
            linear_num_value_heads=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=8,
            shared_expert_intermediate_size=12, mlp_only_layers=[2, 3], bos_token_id=0, eos_token_id=0, pad_token_id=0,
            tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        ),  # fmt: skip
        "tokenizer": "qwen2",
        "norm_centre": 0.0,
        "moe": True,
    },
}


def correction_bias(model: Any, seed: int) -> None:
    """Every router's e_score_correction_bias N(0, 0.5²): large beside sigmoid scores in (0, 1), so it changes choices."""
    import torch

    generator = torch.Generator().manual_seed(seed + 1000)
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                buffer.copy_(torch.randn(buffer.shape, generator=generator, dtype=torch.float64) * 0.5)


# Issue 30's Llama-like families (branch families-a), seeded from 301 so that issue 20's keep theirs. Each sets its
# mechanism away from the default where a default would hide a mistake.
FAMILIES_2026: dict[str, dict[str, Any]] = {
    # Qwen3's attention (QK-norm per head, GQA 4:2, head_dim 8 ≠ 16 / 4); 4 experts, top 2, renormalised (norm_topk_prob,
    # as Qwen3-30B-A3B); layer 2 keeps a dense MLP (mlp_only_layers), so layer 3 reads both kinds
    "qwen3_moe": {
        "build": family(
            "Qwen3MoeConfig", "Qwen3MoeForCausalLM", hidden_size=16, intermediate_size=32, moe_intermediate_size=8,
            num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_experts=4,
            num_experts_per_tok=2, norm_topk_prob=True, mlp_only_layers=[1], max_position_embeddings=64,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "qwen2",
        "moe": True,
    },
    # scores × attention_multiplier 0.2 (not 1/√8), embeddings × 3, each block's output × residual_multiplier 0.4
    "granite": {
        "build": family(
            "GraniteConfig", "GraniteForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=3,
            num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64, attention_multiplier=0.2,
            embedding_multiplier=3.0, residual_multiplier=0.4, logits_scaling=2.0, bos_token_id=0, eos_token_id=1,
            pad_token_id=1, tie_word_embeddings=True,
        ),  # fmt: skip
        "tokenizer": "llama",
    },
    # Command R7B: sliding (window 4, interleaved RoPE) / global (no RoPE) / sliding; attention and MLP in parallel from one
    # LayerNorm (no bias)
    "cohere2": {
        "build": family(
            "Cohere2Config", "Cohere2ForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, sliding_window=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"], logit_scale=0.5,
            rope_parameters={"rope_type": "default", "rope_theta": 50000.0}, bos_token_id=0, eos_token_id=1, pad_token_id=1,
        ),  # fmt: skip
        "tokenizer": "llama",
    },
    # GLM-4: partial rotary 0.5 in interleaved pairs, q/k/v biases (o none), four norms around attention and MLP, fused
    # gate_up_proj
    "glm4": {
        "build": family(
            "Glm4Config", "Glm4ForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64, attention_bias=True,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
            bos_token_id=0, eos_token_id=1, pad_token_id=1, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
    },
    # GLM-4.5: partial rotary 0.5 on the two halves, QK-norm per head, q/k/v biases; layer 1 dense, then DeepSeek V3's MoE
    # (4 experts, top 2, one group as GLM-4.5 has it, one shared expert, × 2.5) with a correction bias that changes choices
    "glm4_moe": {
        "build": family(
            "Glm4MoeConfig", "Glm4MoeForCausalLM", hidden_size=16, intermediate_size=32, moe_intermediate_size=8,
            num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
            attention_bias=True, use_qk_norm=True, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, n_group=1,
            topk_group=1, first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True, num_mtp_layers=0,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
            bos_token_id=0, eos_token_id=1, pad_token_id=1, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
        "moe": True,
        "prepare": correction_bias,
    },
    # Ministral 8B: windows by layer_types, sliding (4) / full / sliding (head_dim given: transformers 5.24's Ministral
    # cannot derive it)
    "ministral": {
        "build": family(
            "MinistralConfig", "MinistralForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=4, max_position_embeddings=64, sliding_window=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            bos_token_id=0, eos_token_id=1, pad_token_id=1, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
    },
    # Seed-OSS: q, k, v biased (attention_bias) but not o (attention_out_bias false, its default); GQA 4:1
    "seed_oss": {
        "build": family(
            "SeedOssConfig", "SeedOssForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=1, head_dim=8, max_position_embeddings=64, attention_bias=True,
            attention_out_bias=False, rope_parameters={"rope_type": "default", "rope_theta": 10000000.0},
            bos_token_id=0, eos_token_id=1, pad_token_id=1, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
    },
    # ERNIE 4.5: RoPE on interleaved pairs of the whole head, every projection biased (use_bias), tied embeddings
    "ernie4_5": {
        "build": family(
            "Ernie4_5Config", "Ernie4_5ForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64, use_bias=True,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
            bos_token_id=0, eos_token_id=1, pad_token_id=1, tie_word_embeddings=True,
        ),  # fmt: skip
        "tokenizer": "llama",
    },
    # EXAONE 4.0: post-norms only, QK-norm per head; sliding (4, RoPE) / global (no RoPE) / sliding
    "exaone4": {
        "build": family(
            "Exaone4Config", "Exaone4ForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            bos_token_id=0, eos_token_id=1, pad_token_id=1, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
    },
    # OLMo 3: OLMo 2's post-norms and whole-projection QK-norm; sliding (4) / full / sliding; θ 10 000 on the sliding layers,
    # YaRN (factor 4 over 16 positions, θ 500 000) on the full one, as OLMo 3's long-context checkpoints scale only those
    "olmo3": {
        "build": family(
            "Olmo3Config", "Olmo3ForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, sliding_window=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "yarn", "rope_theta": 500000.0, "factor": 4.0, "original_max_position_embeddings": 16},
            },
            bos_token_id=0, eos_token_id=0, pad_token_id=0, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "qwen2",
    },
    # Apertus: QK-norm per head, llama3 RoPE (its default, θ 12e6, here over 32 original positions so that all three bands
    # occur), an MLP of up → xIELU → down whose alpha_p, alpha_n are redrawn with the rest
    "apertus": {
        "build": family(
            "ApertusConfig", "ApertusForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            rope_parameters={"rope_type": "llama3", "rope_theta": 12000000.0, "factor": 8.0, "original_max_position_embeddings": 32,
                             "low_freq_factor": 1.0, "high_freq_factor": 4.0},
            bos_token_id=0, eos_token_id=1, pad_token_id=1, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
    },
    # Ministral 3 (text): YaRN (factor 4 over 16 original positions, mscale 1/1) and Llama 4's query temperature β = 0.1, which
    # is 1 below 16 positions (the fixture's sentence has 13 tokens: attncli refuses longer ones); a window of 4 on every layer
    "ministral3": {
        "build": family(
            "Ministral3Config", "Ministral3ForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=4,
            rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0, "original_max_position_embeddings": 16,
                             "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1},
            bos_token_id=0, eos_token_id=1, pad_token_id=1, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
    },
    # Ministral 3 beyond its original length: n₀ = 4 original positions (YaRN factor 4) under a sentence of 13 tokens, so
    # that the query temperature 1 + 0.1·ln(1 + ⌊p / 4⌋) is 1, ln 2, ln 3 and ln 4 steps up along it; no window, three layers
    "ministral3-long": {
        "build": family(
            "Ministral3Config", "Ministral3ForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=None,
            rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0, "original_max_position_embeddings": 4,
                             "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1},
            bos_token_id=0, eos_token_id=1, pad_token_id=1, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
        "seed": 441,
    },
    # Gemma 3n (text): AltUp (4 streams), Laurel (rank 4), per-layer inputs (4 per layer; ids past 267 read row 0 of the
    # per-layer table), sliding (4) / sliding / full twice with θ 10 000 / 1 000 000, the last 3 layers sharing keys and values
    # (layers 4, 5 reuse layer 2's, layer 6 layer 3's), activation sparsity 0.95 and 0.8 on layers 1 and 2; norm scales around 1
    # (Gemma 3n multiplies by w, not 1 + w). Its golden also holds the same run with transformers' float32 steps in float64.
    "gemma3n": {
        "build": family(
            "Gemma3nTextConfig", "Gemma3nForCausalLM", hidden_size=16, intermediate_size=[32, 32, 24, 32, 32, 32], num_hidden_layers=6,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=4,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2, num_kv_shared_layers=3,
            activation_sparsity_pattern=[0.95, 0.8, 0.0, 0.0, 0.0, 0.0], hidden_size_per_layer_input=4, vocab_size_per_layer_input=268,
            laurel_rank=4, altup_num_inputs=4, final_logit_softcapping=30.0,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
            },
            bos_token_id=0, eos_token_id=1, pad_token_id=1,
        ),  # fmt: skip
        "tokenizer": "llama",
        "seed": 421,
        "float64_steps": "gemma3n",
    },
    # Llama 4 (text): RoPE (llama3-scaled, interleaved pairs) with the weightless QK-norm after it and 4-token chunks on layers
    # 1 and 3; NoPE on layers 2 and 4 with attention temperature tuning (floor_scale 2, attn_scale 0.5, so the factor grows
    # within the sentence); MoE on layers 2 and 4 (interleave_moe_layer_step 2: 4 experts, sigmoid top 2, a shared expert)
    "llama4_text": {
        "build": family(
            "Llama4TextConfig", "Llama4ForCausalLM", hidden_size=16, intermediate_size=8, intermediate_size_mlp=32,
            num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
            num_local_experts=4, num_experts_per_tok=2, interleave_moe_layer_step=2, use_qk_norm=True,
            no_rope_layer_interval=2, attention_chunk_size=4, attn_temperature_tuning=True, floor_scale=2, attn_scale=0.5,
            rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "original_max_position_embeddings": 16,
                             "low_freq_factor": 1.0, "high_freq_factor": 4.0},
            bos_token_id=0, eos_token_id=1, pad_token_id=1, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
        "moe": True,
        "seed": 401,
    },
    # Hunyuan dense: QK-norm after RoPE with weights (query_layernorm, key_layernorm of head_dim), RoPE's base stretched by
    # NTK alpha (rope_type dynamic with alpha 1000, as Hunyuan-7B: θ × alpha^(d/(d − 2)), fixed), q, k, v and o biases
    "hunyuan_v1_dense": {
        "build": family(
            "HunYuanDenseV1Config", "HunYuanDenseV1ForCausalLM", hidden_size=16, intermediate_size=32, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64, attention_bias=True,
            rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "alpha": 1000.0, "factor": 1.0},
            bos_token_id=0, eos_token_id=1, pad_token_id=1, tie_word_embeddings=False,
        ),  # fmt: skip
        "tokenizer": "llama",
        "seed": 402,
    },
}
# Multimodal folders whose text stack is a text fixture's: the model built by transformers with a one-layer vision tower, its
# language model given the text fixture's weights, saved by save_pretrained (transformers 5.24 writes all three's text stack
# under language_model.model.*, as transformers 4 did), the text fixture's tokenizer and golden.npz beside: attncli reads the
# text stack and must give the same numbers.
MULTIMODAL: dict[str, dict[str, Any]] = {
    "gemma3-multimodal": {
        "text": "gemma3", "config": "Gemma3Config", "model": "Gemma3ForConditionalGeneration", "mm_tokens_per_image": 4,
        "vision": ("SiglipVisionConfig", {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                                          "image_size": 28, "patch_size": 14}),
    },
    "mistral3-multimodal": {
        "text": "mistral", "config": "Mistral3Config", "model": "Mistral3ForConditionalGeneration",
        "vision": ("PixtralVisionConfig", {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                                           "head_dim": 4, "image_size": 28, "patch_size": 14}),
    },
    "llama4-multimodal": {
        "text": "llama4_text", "config": "Llama4Config", "model": "Llama4ForConditionalGeneration",
        "vision": ("Llama4VisionConfig", {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                                          "vision_output_dim": 8, "projector_input_dim": 8, "projector_output_dim": 8,
                                          "image_size": 28, "patch_size": 14}),
    },
}  # fmt: skip


def make_multimodal_fixture(name: str, spec: dict[str, Any]) -> None:
    """A multimodal folder around a text fixture (see MULTIMODAL): its language model holds the text fixture's weights."""
    import transformers

    folder, text = OUT / name, OUT / spec["text"]
    shutil.rmtree(folder, ignore_errors=True)
    text_model = transformers.AutoModelForCausalLM.from_pretrained(text, dtype="auto")  # as the text fixture is stored
    vision_class, vision_options = spec["vision"]
    options = {key: value for key, value in spec.items() if key not in ("text", "config", "model", "vision")}
    config = getattr(transformers, spec["config"])(
        text_config=text_model.config.to_dict(), vision_config=getattr(transformers, vision_class)(**vision_options).to_dict(), **options
    )
    model = getattr(transformers, spec["model"])(config)
    decoder = model.model.language_model if hasattr(getattr(model, "model", None), "language_model") else model.language_model.model
    decoder.load_state_dict(text_model.model.state_dict())
    model.to(text_model.dtype).save_pretrained(folder)
    (folder / "generation_config.json").unlink(missing_ok=True)
    shutil.copy(text / "tokenizer.json", folder / "tokenizer.json")
    shutil.copy(text / "golden.npz", folder / "golden.npz")  # the same numbers: tests/test_multimodal.py's live test runs transformers on it
    names = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"] if (folder / "model.safetensors.index.json").exists() else None
    size = sum(p.stat().st_size for p in folder.iterdir())
    print(f"{name:20} around {spec['text']}  {size / 1024:.1f} KB  {'sharded' if names else 'one file'}")


def multimodal_text_golden(folder: Path, ids: list[int]) -> np.ndarray:
    """(layers, heads, L, L) the attention weights of a multimodal folder's language model for text alone, loaded by transformers
    from the folder in float64 with eager attention (the text fixture's golden, when its weights are the text fixture's)."""
    import torch
    import transformers

    config = transformers.AutoConfig.from_pretrained(folder)
    model_class = getattr(transformers, config.architectures[0])
    model = model_class.from_pretrained(folder, attn_implementation="eager", dtype=torch.float64).double().eval()
    language = model.model.language_model if hasattr(getattr(model, "model", None), "language_model") else model.language_model.model
    with torch.no_grad():
        out = language(input_ids=torch.tensor([ids]), output_attentions=True)
    return np.stack([a[0].numpy() for a in out.attentions])


TARGET_PREFIX = "The cat"  # BART's decoder input after its start token: cross-attention from these to the sentence


def to_transformers4_spelling(folder: Path) -> None:
    """config.json as transformers 4 wrote it: rope_theta + rope_scaling {type: ...}, torch_dtype."""
    path = folder / "config.json"
    config = json.loads(path.read_text())
    rope = config.pop("rope_parameters")
    config["rope_theta"] = rope.pop("rope_theta")
    config["rope_scaling"] = {"type": rope.pop("rope_type"), **rope}
    config["torch_dtype"] = config.pop("dtype")
    config["transformers_version"] = "4.44.2"
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def make_tokenizer(kind: str) -> Any:
    if kind == "bert":
        return wordpiece_tokenizer()
    if kind == "llama":
        return byte_level_tokenizer(bos=True, special=["<s>", "</s>"], trim_offsets=False)
    if kind == "qwen2":
        return byte_level_tokenizer(bos=False, special=["<|endoftext|>"], trim_offsets=False)
    if kind == "bart":
        return bart_tokenizer()
    if kind == "t5":
        return t5_tokenizer()
    return byte_level_tokenizer(bos=False, special=["<|endoftext|>"], trim_offsets=True)  # gpt2: offsets without the space


def golden(folder: Path, ids: list[int]) -> np.ndarray:
    """(layers, heads, L, L) transformers' eager attention weights, the checkpoint loaded from disk in float64."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(folder, attn_implementation="eager", dtype=torch.float64).double().eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_attentions=True)
    return np.stack([a[0].numpy() for a in out.attentions])


def attention_modules(model: Any) -> dict[str, Any]:
    """Each attention block of a model by its module path, in layer order (self_attn, self_attention, attention, attn,
    encoder_attn; T5's SelfAttention and EncDecAttention)."""
    return {
        name: module
        for name, module in model.named_modules()
        if name.rsplit(".", 1)[-1] in ("self_attn", "self_attention", "attention", "attn", "encoder_attn", "SelfAttention", "EncDecAttention") and type(module).__name__.endswith("Attention")
    }


def recording(model: Any) -> tuple[dict[str, dict[str, np.ndarray]], list[Any]]:
    """Forward pre-hooks that keep each attention block's input hidden states (and the cos/sin it was given)."""
    seen: dict[str, dict[str, np.ndarray]] = {}
    handles = []
    for name, module in attention_modules(model).items():

        def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str = name) -> None:
            hidden = args[0] if args else kwargs["hidden_states"]
            record = {"input": hidden[0].detach().numpy().copy()}
            table = kwargs.get("position_embeddings")
            if table is not None and not isinstance(table, tuple) and table.is_complex():  # DeepSeek V2: e^(iθ) per pair
                cos, sin = table.real, table.imag  # (1, L, d_r / 2), one angle per interleaved pair
                record["cos"], record["sin"] = cos[0].detach().numpy().copy(), sin[0].detach().numpy().copy()
            elif table is not None:
                cos, sin = table
                record["cos"], record["sin"] = cos[0].detach().numpy().copy(), sin[0].detach().numpy().copy()
            seen[name] = record

        handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
    return seen, handles


def golden_with_inputs(folder: Path, ids: list[int], *, moe: bool = False) -> dict[str, np.ndarray]:
    """golden() and, per layer, the attention block's input and cos/sin table, and every layer's output. Experts
    run one by one (experts_implementation="eager"): the default grouped_mm kernel refuses float64."""
    import torch
    from transformers import AutoModel

    options = {"experts_implementation": "eager"} if moe else {}
    model = AutoModel.from_pretrained(folder, attn_implementation="eager", dtype=torch.float64, **options).double().eval()
    seen, handles = recording(model)
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    for handle in handles:
        handle.remove()
    records = list(seen.values())
    arrays = {
        "attentions": np.stack([a[0].numpy() for a in out.attentions]),
        "attention_inputs": np.stack([r["input"] for r in records]),
        "hidden_states": np.stack([h[0].numpy() for h in out.hidden_states]),
    }
    if all("cos" in r for r in records):
        arrays["cos"] = np.stack([r["cos"] for r in records])
        arrays["sin"] = np.stack([r["sin"] for r in records])
    return arrays


def float64_steps(family_name: str) -> Callable[[], None]:
    """Patch transformers' `family_name` model so that the steps it runs in float32 inside a float64 model run in float64;
    returns the undo. Gemma 3n: RMSNorm's cast, the RoPE angles, AltUp's router tanh, the Gaussian top-k's Φ⁻¹, the softmax."""
    import torch
    from transformers.models.gemma3n import modeling_gemma3n as g

    assert family_name == "gemma3n"
    saved = (g.Gemma3nRMSNorm.forward, g.Gemma3nRotaryEmbedding.forward, g.Gemma3nTextAltUp.compute_router_modalities,
             g.Gemma3nTextMLP._gaussian_topk, g.nn.functional.softmax)  # fmt: skip

    def rms_norm(self: Any, x: Any) -> Any:  # as Gemma3nRMSNorm, without the cast to float32
        normed = x * torch.pow(x.pow(2).mean(-1, keepdim=True) + self.eps, -0.5)
        return normed * self.weight if self.with_scale else normed

    def rotary(self: Any, x: Any, position_ids: Any, layer_type: Any) -> Any:  # default RoPE, angles in float64
        theta = self.config.rope_parameters[layer_type]["rope_theta"]
        d = getattr(self, f"{layer_type}_inv_freq").shape[0] * 2
        inv_freq = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        both = torch.cat([position_ids[..., None].to(torch.float64) * inv_freq] * 2, dim=-1)
        return both.cos().to(x.dtype), both.sin().to(x.dtype)

    def router(self: Any, x: Any) -> Any:  # tanh in the model's dtype
        return torch.tanh(self.modality_router(self.router_norm(x) * self.router_input_scale))

    def top_k(self: Any, inputs: Any) -> Any:  # Φ⁻¹(sparsity) in float64
        multiplier = torch.distributions.normal.Normal(0, 1).icdf(torch.tensor(self.activation_sparsity, dtype=torch.float64))
        cutoff = inputs.mean(-1, keepdim=True) + inputs.std(-1, keepdim=True, unbiased=False) * multiplier
        return torch.nn.functional.relu(inputs - cutoff)

    softmax = g.nn.functional.softmax

    def softmax64(x: Any, dim: Any = None, dtype: Any = None) -> Any:
        return softmax(x, dim=dim, dtype=torch.float64)

    g.Gemma3nRMSNorm.forward, g.Gemma3nRotaryEmbedding.forward = rms_norm, rotary
    g.Gemma3nTextAltUp.compute_router_modalities, g.Gemma3nTextMLP._gaussian_topk, g.nn.functional.softmax = router, top_k, softmax64

    def undo() -> None:
        (g.Gemma3nRMSNorm.forward, g.Gemma3nRotaryEmbedding.forward, g.Gemma3nTextAltUp.compute_router_modalities,
         g.Gemma3nTextMLP._gaussian_topk, g.nn.functional.softmax) = saved  # fmt: skip

    return undo


def golden_float64(folder: Path, ids: list[int], family_name: str) -> dict[str, np.ndarray]:
    """golden_with_inputs() with the family's float32 steps run in float64 (`float64_steps`), patched for this run only."""
    undo = float64_steps(family_name)
    try:
        return golden_with_inputs(folder, ids)
    finally:
        undo()


def golden_encoder_decoder(folder: Path, ids: list[int], decoder_ids: list[int]) -> dict[str, np.ndarray]:
    """An encoder–decoder's three attentions: encoder self-attention (layers, heads, L, L), the decoder's causal
    self-attention (layers, heads, T, T) and its cross-attention (layers, heads, T, L) over the encoder's output,
    with each block's input and the encoder's output (the cross-attention's keys and values come from it)."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(folder, attn_implementation="eager", dtype=torch.float64).double().eval()
    seen, handles = recording(model)
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor([ids]), decoder_input_ids=torch.tensor([decoder_ids]), output_attentions=True,
            output_hidden_states=True,
        )  # fmt: skip
    for handle in handles:
        handle.remove()

    def inputs(part: str, *kinds: str) -> np.ndarray:
        return np.stack([r["input"] for name, r in seen.items() if name.startswith(part) and name.endswith(kinds)])

    return {
        "encoder_attentions": np.stack([a[0].numpy() for a in out.encoder_attentions]),
        "decoder_attentions": np.stack([a[0].numpy() for a in out.decoder_attentions]),
        "cross_attentions": np.stack([a[0].numpy() for a in out.cross_attentions]),
        "encoder_attention_inputs": inputs("encoder.", "self_attn", "SelfAttention"),
        "decoder_attention_inputs": inputs("decoder.", "self_attn", "SelfAttention"),
        "cross_attention_inputs": inputs("decoder.", "encoder_attn", "EncDecAttention"),
        "encoder_output": out.encoder_last_hidden_state[0].numpy(),
        "encoder_hidden_states": np.stack([h[0].numpy() for h in out.encoder_hidden_states]),
        "decoder_hidden_states": np.stack([h[0].numpy() for h in out.decoder_hidden_states]),
    }


def make_family_fixture(name: str, spec: dict[str, Any], seed: int) -> None:
    """One of issue 20's families: float32 on disk, golden.npz with every layer's inputs (see the module's doc)."""
    import torch

    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    tokenizer = make_tokenizer(spec["tokenizer"])
    torch.manual_seed(seed)
    model = spec["build"](tokenizer.get_vocab_size())
    redraw(model, seed, norm_centre=spec.get("norm_centre", 1.0), norms=spec.get("norms", ()))
    if "prepare" in spec:  # buffers redraw() does not touch (a router's correction bias)
        spec["prepare"](model, seed)
    if "correction_bias" in spec:
        draw_correction_bias(model, seed, *spec["correction_bias"])
    model.to(torch.float32).save_pretrained(folder)
    (folder / "generation_config.json").unlink(missing_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    ids = tokenizer.encode(SENTENCE).ids
    extra: dict[str, np.ndarray] = {}
    if spec.get("encoder_decoder"):
        prefix = tokenizer.encode(TARGET_PREFIX, add_special_tokens=False).ids
        start = [model.config.decoder_start_token_id] if spec.get("decoder_start") == "alone" else [model.config.decoder_start_token_id, 0]
        decoder_ids = [*start, *prefix]  # </s> <s> The cat as BART's shift makes it; T5's <pad> The cat
        arrays = golden_encoder_decoder(folder, ids, decoder_ids)
        extra = {"decoder_text": np.array(TARGET_PREFIX), "decoder_ids": np.array(decoder_ids, dtype=np.int64)}
        shape = arrays["cross_attentions"].shape
    else:
        arrays = golden_with_inputs(folder, ids, moe=spec.get("moe", False))
        shape = arrays["attentions"].shape
        if "float64_steps" in spec:  # the same run with transformers' float32 steps computed in float64: attncli's arithmetic
            arrays.update({f"{key}_float64": value for key, value in golden_float64(folder, ids, spec["float64_steps"]).items()})
    if "router" in spec:
        extra["experts"] = check_routing(folder, ids, spec["router"])
    np.savez_compressed(folder / "golden.npz", text=np.array(SENTENCE), ids=np.array(ids, dtype=np.int64), **extra, **arrays)
    size = sum(p.stat().st_size for p in folder.iterdir())
    print(f"{name:12} {len(ids):3} tokens  {shape}  {size / 1024:.1f} KB")
    if spec.get("router") == "softmax":
        make_deepseek_v2_greedy(folder, ids)


def draw_correction_bias(model: Any, seed: int, low: float, high: float) -> None:
    """Every e_score_correction_bias (a buffer, which `redraw` leaves at 0) drawn from U(low, high)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                buffer.copy_(torch.rand(buffer.shape, generator=generator, dtype=torch.float64) * (high - low) + low)


def router_choices(folder: Path, ids: list[int]) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray | None], Any]:
    """Each MoE layer's router: (L, E) float32 logits, (L, k) the experts transformers picks (sorted), the correction
    bias (None in V2), and the config; recorded by forward hooks on every `mlp.gate` of the float64 model."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(folder, attn_implementation="eager", dtype=torch.float64, experts_implementation="eager")
    model = model.double().eval()
    logits, chosen, biases = [], [], []
    handles = []
    for layer in model.layers:
        gate = getattr(layer.mlp, "gate", None)
        if gate is None:
            continue

        def hook(module: Any, args: tuple[Any, ...], out: tuple[Any, ...]) -> None:
            router_logits, _, indices = out
            logits.append(router_logits.detach().float().numpy().copy())
            chosen.append(np.sort(indices.detach().numpy(), axis=-1))
            bias = getattr(module, "e_score_correction_bias", None)
            biases.append(None if bias is None else bias.detach().float().numpy().copy())

        handles.append(gate.register_forward_hook(hook))
    with torch.no_grad():
        model(input_ids=torch.tensor([ids]))
    for handle in handles:
        handle.remove()
    return logits, chosen, biases, model.config


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    return np.sort(np.argsort(-scores, axis=-1, kind="stable")[:, :k], axis=-1)


def _within_groups(choice: np.ndarray, groups: int, kept: int, k: int, group_score: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Top-k of `choice` (L, E) among the `kept` groups that score highest (the others out)."""
    per_group = choice.reshape(len(choice), groups, -1)
    best = np.argsort(-group_score(per_group), axis=1, kind="stable")[:, :kept]
    keep = np.zeros((len(choice), groups), dtype=bool)
    np.put_along_axis(keep, best, True, axis=1)
    return _top(np.where(np.repeat(keep, choice.shape[1] // groups, axis=1), choice, -np.inf), k)


def check_routing(folder: Path, ids: list[int], router: str) -> np.ndarray:
    """(MoE layers, L, k) the experts transformers picks, sorted; asserts in every MoE layer that the naive top-k (no
    groups, no bias) picks other experts for some token, and for V3 that the groups alone and the bias alone do too."""
    logits, chosen, biases, config = router_choices(folder, ids)
    k, groups, kept = config.num_experts_per_tok, config.n_group, config.topk_group
    for layer, (z, picked, bias) in enumerate(zip(logits, chosen, biases), start=config.first_k_dense_replace + 1):
        if router == "sigmoid":
            assert bias is not None
            scores = 1 / (1 + np.exp(-z.astype(np.float64)))
            top2 = lambda g: np.sort(g, axis=2)[:, :, -2:].sum(axis=2)  # noqa: E731
            naive = {"naive top-k": _top(scores, k), "top-k with the bias, no groups": _top(scores + bias, k),
                     "top-k within groups, no bias": _within_groups(scores, groups, kept, k, top2)}  # fmt: skip
            assert (_within_groups(scores + bias, groups, kept, k, top2) == picked).all(), f"layer {layer}: not transformers' rule"
        else:
            e = np.exp(z - z.max(axis=1, keepdims=True))
            scores = e / e.sum(axis=1, keepdims=True)
            naive = {"naive top-k": _top(scores, k)}
            assert (_within_groups(scores, groups, kept, k, lambda g: g.max(axis=2)) == picked).all(), f"layer {layer}"
        for what, other in naive.items():
            differ = int((other != picked).any(axis=1).sum())
            assert differ, f"{folder.name} layer {layer}: {what} picks transformers' experts for every token"
            print(f"{folder.name} layer {layer}: {what} differs from transformers for {differ} of {len(ids)} tokens")
    return np.stack(chosen)


def make_deepseek_v2_greedy(folder: Path, ids: list[int]) -> None:
    """<folder>/greedy.npz: the V2 fixture run with topk_method greedy (top-k over all experts, no groups): every
    layer's attention weights, inputs and hidden states, and the experts transformers picks."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        greedy = Path(tmp) / folder.name
        shutil.copytree(folder, greedy)
        config = json.loads((greedy / "config.json").read_text())
        (greedy / "config.json").write_text(json.dumps({**config, "topk_method": "greedy"}, indent=2))
        arrays = golden_with_inputs(greedy, ids, moe=True)
        _, chosen, _, _ = router_choices(greedy, ids)
    keep = {k: arrays[k] for k in ("attentions", "attention_inputs", "hidden_states")}
    np.savez_compressed(folder / "greedy.npz", experts=np.stack(chosen), **keep)
    print(f"{folder.name}/greedy.npz: attentions {keep['attentions'].shape}")


# DeepSeek-V2-Lite's router and RoPE (its config.json): greedy top-k over all experts, YaRN with mscale = mscale_all_dim
V2_LITE = {
    "topk_method": "greedy",
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "original_max_position_embeddings": 4096,
                        "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707},
}  # fmt: skip


def make_deepseek_v2_lite() -> None:
    """tests/checkpoints/lite_deepseek_v2.npz: the tiny deepseek_v2 fixture run with V2_LITE's greedy router and YaRN
    in place of its group-limited router and default RoPE: every layer's attention weights, inputs and hidden states."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "deepseek_v2"
        shutil.copytree(OUT / "deepseek_v2", folder)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, **V2_LITE}, indent=2))
        with np.load(OUT / "deepseek_v2" / "golden.npz") as data:
            ids, text = data["ids"], data["text"]
        arrays = golden_with_inputs(folder, ids.tolist(), moe=True)
    keep = {k: arrays[k] for k in ("attentions", "attention_inputs", "hidden_states")}
    np.savez_compressed(OUT / "lite_deepseek_v2.npz", text=text, ids=ids, **keep)
    print(f"tests/checkpoints/lite_deepseek_v2.npz: attentions {keep['attentions'].shape}")


def make_fixture(name: str, spec: dict[str, Any], seed: int) -> None:
    import torch

    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    tokenizer = make_tokenizer(spec["tokenizer"])
    torch.manual_seed(seed)
    model = spec["build"](tokenizer.get_vocab_size())
    redraw(model, seed)
    model.to(getattr(torch, spec["dtype"])).save_pretrained(folder, max_shard_size=spec.get("shard", "50GB"))
    (folder / "generation_config.json").unlink(missing_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    if spec.get("old_spelling"):
        to_transformers4_spelling(folder)
    ids = tokenizer.encode(SENTENCE).ids
    attentions = golden(folder, ids)
    np.savez_compressed(folder / "golden.npz", text=np.array(SENTENCE), ids=np.array(ids, dtype=np.int64), attentions=attentions)
    size = sum(p.stat().st_size for p in folder.iterdir())
    print(f"{name:10} {len(ids):3} tokens  attentions {attentions.shape}  {size / 1024:.1f} KB")


# ---------------------------------------------------------------- the corpus of broken checkpoints
# A tiny GPT-2 written by hand (no torch): 1 layer, d = 4, 2 heads, a word-level tokenizer of six words.

TINY_CONFIG = {"model_type": "gpt2", "n_layer": 1, "n_embd": 4, "n_head": 2, "n_positions": 8, "vocab_size": 6}
TINY_WORDS = ["the", "cat", "sat", "on", "mat", "[UNK]"]


def tiny_tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    d = 4
    shapes = {
        "wte.weight": (6, d), "wpe.weight": (8, d), "h.0.ln_1.weight": (d,), "h.0.ln_1.bias": (d,),
        "h.0.attn.c_attn.weight": (d, 3 * d), "h.0.attn.c_attn.bias": (3 * d,),
        "h.0.attn.c_proj.weight": (d, d), "h.0.attn.c_proj.bias": (d,),
        "h.0.ln_2.weight": (d,), "h.0.ln_2.bias": (d,), "h.0.mlp.c_fc.weight": (d, 4 * d), "h.0.mlp.c_fc.bias": (4 * d,),
        "h.0.mlp.c_proj.weight": (4 * d, d), "h.0.mlp.c_proj.bias": (d,), "ln_f.weight": (d,), "ln_f.bias": (d,),
    }  # fmt: skip
    return {name: rng.normal(0, STD, shape).astype(np.float32) for name, shape in shapes.items()}


def safetensors_bytes(tensors: dict[str, np.ndarray], *, edit: Callable[[dict[str, Any]], None] | None = None) -> bytes:
    """The file format by hand: 8-byte length, JSON header, data; `edit` may spoil the header first."""
    header: dict[str, Any] = {}
    data = b""
    for name, array in tensors.items():
        raw = array.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if edit is not None:
        edit(header)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def word_tokenizer_json() -> str:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(TINY_WORDS)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return str(tokenizer.to_str())


def _set(name: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(header: dict[str, Any]) -> None:
        header[name][key] = value

    return edit


def make_bad_corpus() -> None:
    """tests/checkpoints/bad/<case>/: one broken thing each (the test names the message each must give)."""
    bad = OUT / "bad"
    shutil.rmtree(bad, ignore_errors=True)
    tensors = tiny_tensors()
    good = safetensors_bytes(tensors)
    header_length = struct.unpack("<Q", good[:8])[0]
    header = json.loads(good[8 : 8 + header_length])
    c_attn = header["h.0.attn.c_attn.weight"]["data_offsets"][0]  # 16 bytes earlier lies ln_1.bias
    without_c_proj = {k: v for k, v in tensors.items() if k != "h.0.attn.c_proj.weight"}
    cases: dict[str, dict[str, Any]] = {
        "truncated": {"weights": good[: len(good) - 40]},
        "short-file": {"weights": good[:5]},
        "header-length-too-big": {"weights": struct.pack("<Q", 10**12) + good[8:]},
        "header-past-end": {"weights": struct.pack("<Q", len(good)) + good[8:]},
        "header-not-json": {"weights": struct.pack("<Q", 12) + b"not json at all" + good[8 + header_length :]},
        "unknown-dtype": {"weights": safetensors_bytes(tensors, edit=_set("wpe.weight", "dtype", "F42"))},
        "integer-weights": {"weights": safetensors_bytes(tensors, edit=_set("h.0.ln_1.weight", "dtype", "I32"))},
        "shape-vs-bytes": {"weights": safetensors_bytes(tensors, edit=_set("wte.weight", "shape", [6, 5]))},
        "overlapping": {"weights": safetensors_bytes(tensors, edit=_set("h.0.attn.c_attn.weight", "data_offsets", [c_attn - 16, c_attn + 176]))},
        "offsets-outside": {"weights": safetensors_bytes(tensors, edit=_set("ln_f.bias", "data_offsets", [10_000, 10_016]))},
        "missing-tensor": {"weights": safetensors_bytes(without_c_proj)},
        "wrong-shape": {"weights": safetensors_bytes({**tensors, "h.0.attn.c_proj.weight": tensors["h.0.mlp.c_fc.weight"]})},
        "unsupported-model-type": {"config": {**TINY_CONFIG, "model_type": "mamba"}},  # a model_type attncli does not read
        "missing-tokenizer": {"tokenizer": None},
        "no-weights": {"weights": None},
        "missing-shard": {"weights": None, "index": {"weight_map": {name: "model-00001-of-00002.safetensors" for name in tensors}}},
        "config-not-json": {"config": "{'n_layer': 1}"},
        "rope-longrope": {  # Phi-3-128k's scaling, read for phi3 only: a llama with it is refused in one line
            "config": {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 4, "num_attention_heads": 2,
                       "rope_scaling": {"rope_type": "longrope", "long_factor": [1.0], "short_factor": [1.0]}},
        },  # fmt: skip
    }  # fmt: skip
    tokenizer = word_tokenizer_json()
    for case, parts in cases.items():
        folder = bad / case
        folder.mkdir(parents=True)
        config = parts.get("config", TINY_CONFIG)
        (folder / "config.json").write_text(config if isinstance(config, str) else json.dumps(config, indent=2) + "\n")
        weights = parts.get("weights", good)
        if weights is not None:
            (folder / "model.safetensors").write_bytes(weights)
        if "index" in parts:
            (folder / "model.safetensors.index.json").write_text(json.dumps(parts["index"], indent=2) + "\n")
        if parts.get("tokenizer", tokenizer) is not None:
            (folder / "tokenizer.json").write_text(tokenizer)
    print(f"bad corpus: {len(cases)} cases in {bad}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bad", action="store_true", help="only the corpus of broken checkpoints")
    parser.add_argument("--only", help="only this fixture")
    args = parser.parse_args()
    make_bad_corpus()
    if args.bad:
        return
    for seed, (name, spec) in enumerate(FIXTURES.items(), start=1):
        if args.only in (None, name):
            make_fixture(name, spec, seed)
    for seed, (name, spec) in enumerate(FAMILIES.items(), start=101):
        if args.only in (None, name):
            make_family_fixture(name, spec, spec.get("seed", seed))
    for seed, (name, spec) in enumerate(FAMILIES_2026.items(), start=301):
        if args.only in (None, name):
            make_family_fixture(name, spec, spec.get("seed", seed))
    if args.only in (None, "deepseek_v2"):
        make_deepseek_v2_lite()
    for name, spec in MULTIMODAL.items():  # after the text fixtures they wrap
        if args.only in (None, name):
            make_multimodal_fixture(name, spec)


if __name__ == "__main__":
    main()
