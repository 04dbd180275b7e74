"""`model info` and `model tokens` as documents: what a checkpoint holds, and how its tokenizer splits a text.

Model info is one record (`Values(record=True)`: aligned `name  value` lines in the terminal, a
list elsewhere); the tokens are a listing (`Table(listing=True)`: the terminal draws it at the
margin without a rule) and a line that counts them. CSV gets each as its tidy table; JSON is the
data itself (`info_json`, `tokens_json`), as these commands wrote it before they were documents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from attncli.document.blocks import Block, Document, Paragraph, Table, Values

INFO_SCHEMA = "attncli.model-info/1"
TOKENS_SCHEMA = "attncli.model-tokens/1"
TOKEN_COLUMNS = ("position", "id", "label", "piece")
MAX_TOKENS_SHOWN = 1_000_000  # a text of more tokens is refused, not listed

Usage = Callable[[dict[str, Any]], str]  # how to run a supported checkpoint, in the caller's words (a command line, a Python call)


def python_usage(info: dict[str, Any]) -> str:
    """How the Python API reads a layer of the checkpoint: attn.load_model('models/gpt2', layer=N, sentence=TEXT), N from 1 to 12."""
    where = repr(info["folder"])
    if info.get("encoder") is not None:
        call = f"attn.load_model({where}, layer=N, sentence=SOURCE, target='TARGET SO FAR', attention='encoder'|'decoder'|'cross')"
    else:
        call = f"attn.load_model({where}, layer=N, sentence=TEXT)"
    return f"{call}, N from 1 to {info['layers']}"


# -- model info -----------------------------------------------------------------------------------


def info_json(info: dict[str, Any]) -> dict[str, Any]:
    """The attncli.model-info/1 JSON document."""
    return {"schema": INFO_SCHEMA, **info}


def info_document(info: dict[str, Any], usage: Usage = python_usage) -> Document:
    """What a checkpoint holds, as one record; its tidy table has a row per line, the field's name on each."""
    rows = info_rows(info, usage)
    named: list[list[str]] = []
    for name, value in rows:
        named.append([name or named[-1][0], value])
    where = info.get("file") if info.get("format") == "gguf" else info.get("folder")
    return Document(f"Model info: {where}", [Values(rows, record=True)], tidy=Table(("field", "value"), named, (False, False)))


def info_rows(info: dict[str, Any], usage: Usage = python_usage) -> list[tuple[str, str]]:
    """The record's lines: a field's name and its text, a blank name continuing the field above."""
    architectures = info.get("architectures")
    kind = str(info["model_type"]) + (f" ({', '.join(map(str, architectures))})" if isinstance(architectures, list) and architectures else "")
    rows = [("folder", str(info["folder"])), ("architecture", kind)]
    if info.get("multimodal"):  # a multimodal folder: its text stack is what is read
        rows.append(("multimodal", str(info["multimodal"])))
    if info.get("format") == "gguf":
        rows = [("file", str(info["file"])), ("architecture", f"{info['model_type']} (GGUF architecture {info['gguf_architecture']!r})")]
    if "layers" in info:
        heads, kv_heads = info["heads"], info["kv_heads"]
        sharing = (
            "" if kv_heads == heads else " (multi-query attention)" if kv_heads == 1 else f" (grouped-query attention, {heads // kv_heads} query heads each)"
        )
        rope = info["rope"]
        from attncli.sources.checkpoints.families import description  # on this path only, as model_info

        rope_text = "none (learned positions)" if description(info.get("text_model_type", info["model_type"])).learned_positions else "none"
        if rope is not None:
            pairs = "interleaved pairs" if rope["style"] == "interleaved" else "rotate-half"
            rope_text = f"θ = {rope['theta']:g}, {pairs}" + (f", {rope['scaling']} scaling" if rope["scaling"] else "")
            if rope.get("rotary_dim", info["head_dim"]) < info["head_dim"]:  # partial rotary (GPT-NeoX's rotary_pct, Phi's partial_rotary_factor)
                rope_text += (f"; partial rotary: the first {rope['rotary_dim']} of each head's {info['head_dim']} coordinates turn "
                              f"(factor {rope['partial_rotary_factor']:g}), the other {info['head_dim'] - rope['rotary_dim']} pass through unrotated")  # fmt: skip
        mask = "causal" if info["causal"] else "bidirectional (every token sees every token)"
        if info["sliding_window"] is not None:
            layers = ", ".join(map(str, info["sliding_layers"]))
            on = f"layer{'s' * (len(info['sliding_layers']) > 1)} {layers}"
            if info["causal"]:
                mask += f"; sliding window of {info['sliding_window']} on {on}"
            else:  # ModernBERT's local layers: a window on either side of each token
                mask = f"bidirectional; on {on} each token sees the tokens at most {info['sliding_window']} positions away on either side"
        encoder = info.get("encoder")
        if encoder is not None:  # an encoder–decoder: both stacks, and the decoder's three attentions
            rows += [
                ("encoder", f"{encoder['layers']} layers of {encoder['heads']} heads (head_dim {encoder['head_dim']}), bidirectional self-attention"),
                ("decoder", f"{info['layers']} layers of {heads} heads (head_dim {info['head_dim']}), each a causal self-attention and a cross-attention over the encoder's output"),
            ]
        rows += [
            ("layers", str(info["layers"])),
            ("heads", f"{heads} query heads, {kv_heads} key/value head{'s' * (kv_heads > 1)}{sharing}"),
            ("d_model", str(info["hidden_size"])),
            ("head_dim", str(info["head_dim"])),
            ("positions", f"{info['max_positions']:,}"),
            ("rope", rope_text),
            ("mask", mask),
            ("activation", str(info["activation"])),
        ]
    if "stored_dtype" in info:
        declared = f" (config.json says {info['dtype']})" if info.get("dtype") and info["dtype"] != info["stored_dtype"] else ""
        rows += [("dtype", f"{info['stored_dtype']}{declared}; arithmetic in float64"), ("weights", str(info["weights"]))]
    if info.get("format") == "gguf":
        from attncli.walkthroughs.dequant import info_rows as gguf_rows

        rows += gguf_rows(info)
    rows += _continued("attention", [str(m["text"]) for m in info.get("mechanisms") or []])
    cache = info.get("kv_cache")
    if cache:
        from attncli.sources.checkpoints.describe import describe_cache

        rows += _continued("kv cache", describe_cache(cache, len(cache["numbers_per_layer"])))
    rows.append(("supported", f"yes: {usage(info)}" if info["supported"] else f"no: {info['reason']}"))
    return rows


def _continued(key: str, lines: list[str]) -> list[tuple[str, str]]:
    """Rows of one key: the key on the first, blank on the rest."""
    return [(key if n == 0 else "", line) for n, line in enumerate(lines)]


# -- model tokens ---------------------------------------------------------------------------------


def token_rows(ids: Sequence[int], labels: Sequence[str], pieces: Sequence[str]) -> list[dict[str, Any]]:
    """A row per token: its position (from 1), id, label (the text it covers) and the tokenizer's own piece."""
    return [{"position": n, "id": token_id, "label": label, "piece": piece} for n, (token_id, label, piece) in enumerate(zip(ids, labels, pieces), 1)]


def tokens_json(folder: str, text: str, rows: list[dict[str, Any]], not_applied: str | None) -> dict[str, Any]:
    """The attncli.model-tokens/1 JSON document."""
    return {"schema": TOKENS_SCHEMA, "folder": folder, "text": text, "tokens": rows, "not_applied": not_applied}


def tokens_document(folder: str, text: str, rows: list[dict[str, Any]], not_applied: str | None) -> Document:
    """The tokens as a listing, then how many there are (and what ␣ means) and any tokenizer setting left out; CSV: the listing."""
    from attncli.sources.checkpoints.tokens import not_applied_note

    cells = [[str(row["position"]), str(row["id"]), str(row["label"]), str(row["piece"])] for row in rows]
    numeric = (True, True, False, False)
    marked = "; ␣ marks a leading space" if any(str(row["label"]).startswith("␣") for row in rows) else ""
    blocks: list[Block] = [Table(TOKEN_COLUMNS, cells, numeric, listing=True), Paragraph(f"{len(rows)} token{'s' * (len(rows) != 1)}{marked}")]
    blocks += [Paragraph(note) for note in not_applied_note(not_applied)]
    return Document(f"Tokens of {folder}", blocks, tidy=Table(TOKEN_COLUMNS, cells, numeric))
