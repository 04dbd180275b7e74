"""The naive reference, assembled as each of issue 20's families computes attention, reproduces transformers'
golden weights on the family's fixture, every layer and head, without torch.

Each fixture's golden.npz holds the input of every attention block and the cos/sin table transformers gave it
(scripts/make_checkpoints.py); the weights come from the fixture's model.safetensors (float32, read here by
hand). These tests pin the fixtures and docs/families.md's account of each family: the order of norms,
projections, QK-norm, RoPE, scale, soft-cap, sinks and windows. Bounds: 1e-12 where transformers computes in
float64 throughout (gpt-oss, BART); 1e-6 where its eager softmax and its RMSNorm cast to float32.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests import reference as ref
from tests.live import fixture_script

CHECKPOINTS = Path(__file__).parent / "checkpoints"
FLOAT32 = 1e-6


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """A float32 safetensors file by hand: 8-byte header length, JSON header, little-endian data."""
    raw = path.read_bytes()
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + size])
    data = raw[8 + size :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32", (name, entry["dtype"])
        start, stop = entry["data_offsets"]
        tensors[name] = np.frombuffer(data[start:stop], dtype="<f4").reshape(entry["shape"]).astype(np.float64)
    return tensors


def load(family: str) -> tuple[dict[str, Any], dict[str, np.ndarray], Any]:
    folder = CHECKPOINTS / family
    return json.loads((folder / "config.json").read_text()), read_safetensors(folder / "model.safetensors"), np.load(folder / "golden.npz")


def linear(X: list[list[float]], tensors: dict[str, np.ndarray], name: str) -> list[list[float]]:
    """X Wᵀ + b for an nn.Linear saved as name.weight (out, in) and, if present, name.bias."""
    bias = tensors.get(f"{name}.bias")
    return ref.add_bias(ref.matmul(X, tensors[f"{name}.weight"].T.tolist()), None if bias is None else bias.tolist())


def split_heads(rows: list[list[float]], heads: int) -> list[list[list[float]]]:
    d = len(rows[0]) // heads
    return [[row[h * d : (h + 1) * d] for row in rows] for h in range(heads)]


def rotate(rows: list[list[float]], cos: np.ndarray, sin: np.ndarray, heads: int = 1, *, per_pair: bool = False) -> list[list[float]]:
    """RoPE of each head's slice from the table transformers used (rotate-half on the slice's first columns);
    gpt-oss's table has one column per pair."""
    if per_pair:
        cos, sin = np.concatenate([cos, cos], axis=-1), np.concatenate([sin, sin], axis=-1)
    d = len(rows[0]) // heads
    return [
        sum((ref.rotate_by_table(row[h * d : (h + 1) * d], cos[p].tolist(), sin[p].tolist()) for h in range(heads)), [])
        for p, row in enumerate(rows)
    ]


def gqa(Q, K, V, heads: int, kv_heads: int, **head_options: Any) -> list[list[list[float]]]:
    """Every query head's weights, each with its group's keys and values; head_options may give per-head `sink`."""
    qs, ks, vs = split_heads(Q, heads), split_heads(K, kv_heads), split_heads(V, kv_heads)
    sinks = head_options.pop("sinks", None)
    return [
        ref.head_attention(
            qs[h], ks[h * kv_heads // heads], vs[h * kv_heads // heads], sink=None if sinks is None else sinks[h], **head_options
        )["weights"]
        for h in range(heads)
    ]


def window_of(config: dict[str, Any], layer: int) -> int | None:
    return ref.layer_windows(config["layer_types"], config["sliding_window"])[layer]


def llama_like(family: str, layer: int, config, tensors, golden) -> list:
    """Qwen3, OLMo 2, Gemma 2, Gemma 3, gpt-oss, SmolLM3: separate q/k/v projections, then each family's own steps."""
    prefix = f"model.layers.{layer}.self_attn"
    X = golden["attention_inputs"][layer].tolist()
    cos, sin = golden["cos"][layer], golden["sin"][layer]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    eps = config.get("rms_norm_eps", 1e-6)
    Q, K, V = (linear(X, tensors, f"{prefix}.{n}_proj") for n in "qkv")
    options: dict[str, Any] = {"scale": head_dim**-0.5, "sees": ref.causal_window(None)}
    per_pair = False
    if family == "qwen3":
        Q = ref.qk_norm_per_head(Q, heads, tensors[f"{prefix}.q_norm.weight"].tolist(), eps)
        K = ref.qk_norm_per_head(K, kv_heads, tensors[f"{prefix}.k_norm.weight"].tolist(), eps)
    elif family == "olmo2":
        Q = ref.qk_norm_whole(Q, tensors[f"{prefix}.q_norm.weight"].tolist(), eps)
        K = ref.qk_norm_whole(K, tensors[f"{prefix}.k_norm.weight"].tolist(), eps)
    elif family == "gemma3":
        Q = ref.qk_norm_per_head(Q, heads, tensors[f"{prefix}.q_norm.weight"].tolist(), eps, offset=1.0)
        K = ref.qk_norm_per_head(K, kv_heads, tensors[f"{prefix}.k_norm.weight"].tolist(), eps, offset=1.0)
    if family in ("gemma2", "gemma3"):
        options["scale"] = config["query_pre_attn_scalar"] ** -0.5
        options["cap"] = config.get("attn_logit_softcapping")
        options["sees"] = ref.causal_window(window_of(config, layer))
    if family == "gpt_oss":
        options["sinks"] = tensors[f"{prefix}.sinks"].tolist()
        options["sees"] = ref.causal_window(window_of(config, layer))
        per_pair = True
    if family == "smollm3":  # a window on the sliding layers; no RoPE where no_rope_layers says 0 (NoPE)
        options["sees"] = ref.causal_window(window_of(config, layer))
        if not config["no_rope_layers"][layer]:
            return gqa(Q, K, V, heads, kv_heads, **options)
    Q, K = rotate(Q, cos, sin, heads, per_pair=per_pair), rotate(K, cos, sin, kv_heads, per_pair=per_pair)
    return gqa(Q, K, V, heads, kv_heads, **options)


def phi3(layer: int, config, tensors, golden) -> list:
    """Phi-3: one fused qkv_proj, rows [q (H·d) | k (G·d) | v (G·d)]; partial rotary from the table's width."""
    X = golden["attention_inputs"][layer].tolist()
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    d = config["hidden_size"] // heads
    qkv = linear(X, tensors, f"model.layers.{layer}.self_attn.qkv_proj")
    Q = [row[: heads * d] for row in qkv]
    K = [row[heads * d : (heads + kv_heads) * d] for row in qkv]
    V = [row[(heads + kv_heads) * d :] for row in qkv]
    cos, sin = golden["cos"][layer], golden["sin"][layer]
    Q, K = rotate(Q, cos, sin, heads), rotate(K, cos, sin, kv_heads)
    return gqa(Q, K, V, heads, kv_heads, scale=d**-0.5, sees=ref.causal_window(None))


def gpt_neox(layer: int, config, tensors, golden) -> list:
    """GPT-NeoX / Pythia: fused query_key_value laid out per head, [q | k | v] for head 1, then head 2, …"""
    X = golden["attention_inputs"][layer].tolist()
    heads = config["num_attention_heads"]
    d = config["hidden_size"] // heads
    qkv = linear(X, tensors, f"gpt_neox.layers.{layer}.attention.query_key_value")
    cos, sin = golden["cos"][layer], golden["sin"][layer]
    weights = []
    for h in range(heads):
        block = [row[h * 3 * d : (h + 1) * 3 * d] for row in qkv]
        q, k, v = [r[:d] for r in block], [r[d : 2 * d] for r in block], [r[2 * d :] for r in block]
        weights.append(
            ref.head_attention(rotate(q, cos, sin), rotate(k, cos, sin), v, scale=d**-0.5, sees=ref.causal_window(None))["weights"]
        )
    return weights


def deepseek_v3(layer: int, config, tensors, golden) -> list:
    """DeepSeek V3's MLA, both ways: q_a → RMSNorm → q_b for queries, kv_a → [latent | k_rope], latent RMSNorm → kv_b.
    Angles from θ (interleaved pairs); the fixture's table is transformers' float32 one, hence the bound."""
    prefix = f"model.layers.{layer}.self_attn"
    X = golden["attention_inputs"][layer].tolist()
    eps = config["rms_norm_eps"]
    q_latent = [ref.rms_norm(row, tensors[f"{prefix}.q_a_layernorm.weight"].tolist(), eps) for row in linear(X, tensors, f"{prefix}.q_a_proj")]
    rank_q, d = len(q_latent[0]), len(X[0])
    W_q = tensors[f"{prefix}.q_b_proj.weight"].T
    W_dkv = tensors[f"{prefix}.kv_a_proj_with_mqa.weight"].T
    joined = [a + b for a, b in zip(q_latent, X)]  # one input for ref.mla: each path reads its own part
    results = []
    for absorbed in (False, True):
        results.append(
            ref.mla(
                joined, heads=config["num_attention_heads"],
                W_q=np.vstack([W_q, np.zeros((d, W_q.shape[1]))]).tolist(),
                W_dkv=np.vstack([np.zeros((rank_q, W_dkv.shape[1])), W_dkv]).tolist(),
                kv_norm=(tensors[f"{prefix}.kv_a_layernorm.weight"].tolist(), eps),
                W_ukv=tensors[f"{prefix}.kv_b_proj.weight"].T.tolist(), nope=config["qk_nope_head_dim"],
                rope_dim=config["qk_rope_head_dim"], v_dim=config["v_head_dim"], theta=config["rope_parameters"]["rope_theta"],
                style="interleaved", scale=(config["qk_nope_head_dim"] + config["qk_rope_head_dim"]) ** -0.5, absorbed=absorbed,
            )["weights"]  # fmt: skip
        )
    np.testing.assert_allclose(results[1], results[0], rtol=0, atol=1e-12)
    return results[0]


def deepseek_v2(layer: int, config, tensors, golden) -> list:
    """DeepSeek V2's MLA without a query latent (q_lora_rank null): q = q_proj(X); kv as V3's; interleaved pairs always.
    Both ways, expanded and absorbed; the bound is transformers' float32 RMSNorm, angles and complex rotation."""
    prefix = f"model.layers.{layer}.self_attn"
    X = golden["attention_inputs"][layer].tolist()
    assert f"{prefix}.q_a_proj.weight" not in tensors
    results = []
    for absorbed in (False, True):
        results.append(
            ref.mla(
                X, heads=config["num_attention_heads"], W_q=tensors[f"{prefix}.q_proj.weight"].T.tolist(),
                W_dkv=tensors[f"{prefix}.kv_a_proj_with_mqa.weight"].T.tolist(),
                kv_norm=(tensors[f"{prefix}.kv_a_layernorm.weight"].tolist(), config["rms_norm_eps"]),
                W_ukv=tensors[f"{prefix}.kv_b_proj.weight"].T.tolist(), nope=config["qk_nope_head_dim"],
                rope_dim=config["qk_rope_head_dim"], v_dim=config["v_head_dim"], theta=config["rope_parameters"]["rope_theta"],
                style="interleaved", scale=(config["qk_nope_head_dim"] + config["qk_rope_head_dim"]) ** -0.5, absorbed=absorbed,
            )["weights"]  # fmt: skip
        )
    np.testing.assert_allclose(results[1], results[0], rtol=0, atol=1e-12)
    return results[0]


DECODER_ONLY = {
    "qwen3": FLOAT32, "olmo2": FLOAT32, "gemma2": FLOAT32, "gemma3": FLOAT32, "gpt_oss": 1e-12,
    "phi3": FLOAT32, "gpt_neox": FLOAT32, "deepseek_v3": FLOAT32,
    "deepseek_v2": FLOAT32, "smollm3": FLOAT32,
}  # fmt: skip


@pytest.mark.parametrize("family", sorted(DECODER_ONLY))
def test_reference_reproduces_the_family_fixture(family):
    """Every layer and head of the family's golden attention weights, from the saved block inputs and weights."""
    config, tensors, golden = load(family)
    for layer in range(config["num_hidden_layers"]):
        if family == "phi3":
            weights = phi3(layer, config, tensors, golden)
        elif family == "gpt_neox":
            weights = gpt_neox(layer, config, tensors, golden)
        elif family == "deepseek_v3":
            weights = deepseek_v3(layer, config, tensors, golden)
        elif family == "deepseek_v2":
            weights = deepseek_v2(layer, config, tensors, golden)
        else:
            weights = llama_like(family, layer, config, tensors, golden)
        np.testing.assert_allclose(weights, golden["attentions"][layer], rtol=0, atol=DECODER_ONLY[family], err_msg=f"layer {layer + 1}")


def test_fixtures_exercise_their_mechanism():
    """The fixtures are set so each mechanism changes the numbers: Gemma 2's cap bends logits, windows are shorter
    than the sentence, gpt-oss's sinks take real weight, Gemma 3's two θ give two tables, Phi-3 and GPT-NeoX
    rotate only part of each head."""
    config, _, golden = load("gemma2")
    assert config["sliding_window"] < len(golden["ids"]) and config["query_pre_attn_scalar"] != config["head_dim"]
    _, _, golden = load("gpt_oss")
    assert (golden["attentions"].sum(-1) < 1 - 1e-3).any()  # rows short of 1: the sink's share
    config, _, golden = load("gemma3")
    kinds = config["layer_types"]
    assert kinds == ["sliding_attention"] * 5 + ["full_attention"]
    assert np.abs(golden["cos"][kinds.index("full_attention")] - golden["cos"][0]).max() > 1e-3
    for family, head_dim in (("phi3", 4), ("gpt_neox", 8)):
        _, _, golden = load(family)
        assert golden["cos"].shape[-1] < head_dim


@pytest.mark.parametrize("part", ["encoder", "decoder", "cross"])
def test_reference_reproduces_the_bart_fixture(part):
    """BART: the encoder's bidirectional self-attention, the decoder's causal self-attention, and the decoder's
    cross-attention whose keys and values are the encoder's output; biases on q, k, v; scale head_dim^−½."""
    config, tensors, golden = load("bart")
    heads = config["encoder_attention_heads" if part == "encoder" else "decoder_attention_heads"]
    d = config["d_model"] // heads
    for layer in range(config["encoder_layers" if part == "encoder" else "decoder_layers"]):
        X = golden[f"{part}_attention_inputs"][layer].tolist()
        prefix = {
            "encoder": f"model.encoder.layers.{layer}.self_attn",
            "decoder": f"model.decoder.layers.{layer}.self_attn",
            "cross": f"model.decoder.layers.{layer}.encoder_attn",
        }[part]
        source = golden["encoder_output"].tolist() if part == "cross" else X
        Q, K, V = linear(X, tensors, f"{prefix}.q_proj"), linear(source, tensors, f"{prefix}.k_proj"), linear(source, tensors, f"{prefix}.v_proj")
        sees = ref.causal_window(None) if part == "decoder" else None
        weights = gqa(Q, K, V, heads, heads, scale=d**-0.5, sees=sees)
        np.testing.assert_allclose(weights, golden[f"{part}_attentions"][layer], rtol=0, atol=1e-12, err_msg=f"layer {layer + 1}")


def differs(family: str, layers: range, *, config_change: dict[str, Any] | None = None, tensor_change: dict[str, Any] | None = None) -> float:
    config, tensors, golden = load(family)
    config = {**config, **(config_change or {})}
    tensors = {**tensors, **(tensor_change or {})}
    return max(float(np.abs(np.asarray(llama_like(family, l, config, tensors, golden)) - golden["attentions"][l]).max()) for l in layers)


def test_leaving_out_a_mechanism_breaks_the_agreement():
    """Without Gemma 2's cap, window or query_pre_attn_scalar, or gpt-oss's sinks, or with OLMo 2's QK-norm ε wrong,
    the reference misses the fixture by far more than the bound: the fixtures can catch each."""
    assert differs("gemma2", range(3), config_change={"attn_logit_softcapping": None}) > 1e-2
    assert differs("gemma2", range(3), config_change={"sliding_window": 100}) > 1e-2
    assert differs("gemma2", range(3), config_change={"query_pre_attn_scalar": 8}) > 1e-2
    assert differs("gpt_oss", range(1), tensor_change={"model.layers.0.self_attn.sinks": np.full(4, -1e9)}) > 1e-2
    assert differs("olmo2", range(2), config_change={"rms_norm_eps": 1.0}) > 1e-3


@pytest.mark.parametrize("family", [*sorted(DECODER_ONLY), "bart"])
def test_fixture_tokenizer_gives_the_golden_ids(family):
    """The fixture's tokenizer.json turns the golden text into the golden ids (BART: and the decoder prefix)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(CHECKPOINTS / family / "tokenizer.json"))
    golden = np.load(CHECKPOINTS / family / "golden.npz")
    assert tokenizer.encode(str(golden["text"])).ids == golden["ids"].tolist()
    if family == "bart":
        prefix = tokenizer.encode(str(golden["decoder_text"]), add_special_tokens=False).ids
        assert golden["decoder_ids"].tolist() == [2, 0, *prefix]


@pytest.mark.parametrize("family", [*sorted(DECODER_ONLY), "bart"])
def test_live_transformers_still_gives_the_goldens(family):
    """transformers, run now on the fixture by the fixture script's own code, gives every committed golden array to
    1e-12 (skips without torch): a transformers upgrade that changes a family shows here first."""
    script = fixture_script()
    golden = np.load(CHECKPOINTS / family / "golden.npz")
    if family == "bart":
        live = script.golden_encoder_decoder(CHECKPOINTS / family, golden["ids"].tolist(), golden["decoder_ids"].tolist())
    else:
        live = script.golden_with_inputs(CHECKPOINTS / family, golden["ids"].tolist(), moe=script.FAMILIES[family].get("moe", False))
    assert set(live) <= set(golden.files)
    for name, array in live.items():
        np.testing.assert_allclose(array, golden[name], rtol=0, atol=1e-12, err_msg=name)
