"""The lens's golden: transformers' own numbers for the Llama fixture (tests/checkpoints/llama, tied embeddings), in float64.

Writes tests/checkpoints/lens-llama.npz: the sentence, its ids, the model's logits (L, V), the residual stream entering
each layer and after the last (N + 1, L, d, the last one captured from the last decoder layer's output, before the
final norm), each head's output through its columns of o_proj (N, H, L, d: o_proj's input, cut per head, times those
columns), what each attention block adds to the residual stream (N, L, d: o_proj's output, or OLMo 2's
post_attention_layernorm of it) and the logit lens lm_head(norm(stream)) (N + 1, L, V). tests/test_lens.py compares attncli with it, and
runs `golden` again live when torch is there.

    PYTHONPATH=. python scripts/make_lens_golden.py     (torch==2.13.0 and transformers; never at test time)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent.parent / "tests" / "checkpoints"
SENTENCE = "The cat sat on the mat. The cat sat on the mat."


def golden(folder: Path, ids: list[int], gguf_file: str | None = None) -> dict[str, np.ndarray]:
    """transformers' logits, residual streams, per-head parts and logit lens for `ids`, the model (or `gguf_file` in
    `folder`, as transformers loads a GGUF file) in float64."""
    import torch
    from transformers import AutoModelForCausalLM

    given = {"gguf_file": gguf_file} if gguf_file is not None else {}
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64, attn_implementation="eager", **given).eval()
    layers = model.model.layers
    inputs: list[Any] = []
    streams: list[Any] = []
    hooks = [layer.self_attn.o_proj.register_forward_pre_hook(lambda _, args: inputs.append(args[0][0].detach())) for layer in layers]
    hooks += [layer.register_forward_pre_hook(lambda _, args: streams.append(args[0][0].detach())) for layer in layers]
    hooks.append(layers[-1].register_forward_hook(lambda _, args, out: streams.append((out[0] if isinstance(out, tuple) else out)[0].detach())))
    attentions: list[Any] = []  # each attention block's output, as the residual stream receives it (after OLMo 2's post-norm)
    post = model.config.model_type == "olmo2"
    for layer in layers:
        after = layer.post_attention_layernorm if post else layer.self_attn
        hooks.append(after.register_forward_hook(lambda _, args, out: attentions.append((out[0] if isinstance(out, tuple) else out)[0].detach())))
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_hidden_states=True)
        logits = out.logits[0]  # (L, V)
        stream = torch.stack(streams)  # (N + 1, L, d)
        for l, hidden in enumerate(out.hidden_states[: len(layers)]):  # hidden_states[l] for l < N: the stream entering layer l + 1
            assert torch.equal(hidden[0], stream[l]), l
        lens = model.lm_head(model.model.norm(stream))  # (N + 1, L, V)
    for hook in hooks:
        hook.remove()
    cfg = model.config
    H, d_v = cfg.num_attention_heads, getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    parts = []
    with torch.no_grad():
        for layer, given in zip(layers, inputs):  # given: (L, H·d_v), o_proj's input
            W = layer.self_attn.o_proj.weight  # (d, H·d_v)
            parts.append(torch.stack([given[:, h * d_v : (h + 1) * d_v] @ W[:, h * d_v : (h + 1) * d_v].T for h in range(H)]))  # (H, L, d)
    return {"logits": logits.numpy(), "stream": stream.numpy(), "parts": torch.stack(parts).numpy(), "lens": lens.numpy(),
            "received": torch.stack(attentions).numpy()}  # fmt: skip


def main() -> None:
    from attncli.sources.checkpoints.layer import tokenize

    folder = HERE / "llama"
    ids = list(tokenize(folder, SENTENCE).ids)
    np.savez_compressed(HERE / "lens-llama.npz", text=np.array(SENTENCE), ids=np.array(ids), **golden(folder, ids))


if __name__ == "__main__":
    main()
