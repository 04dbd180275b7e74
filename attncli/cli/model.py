"""The bodies of the real-model commands: `--model` on run and explain, `attncli model info` and `attncli model tokens`.

The CLI only parses options and hands them here; nothing here touches the network.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attncli.core.scenario import Scenario
from attncli.errors import AttnError, visible
from attncli.sources.arguments import shown_path, text_argument
from attncli.sources.limits import Limits

if TYPE_CHECKING:
    from attncli.walkthroughs.heads import ExplainCall

INFO_SCHEMA = "attncli.model-info/1"
TOKENS_SCHEMA = "attncli.model-tokens/1"
MAX_TOKENS_SHOWN = 1_000_000  # `model tokens`: a text of more tokens is refused, not printed
_CLI_KEYS = {"layer": "--layer", "sentence": "--sentence", "special_tokens": "--special-tokens", "target": "--target", "attention": "--attention"}


def choose_scenario(
    scenario: str | None,
    *,
    model: Path | None,
    layer: int | None,
    sentence: str | None,
    special_tokens: str,
    head: int | None,
    limits: Limits,
    scenario_key: str = "SCENARIO",
    default: str | None = None,
    target: str | None = None,
    attention: str | None = None,
) -> Scenario:
    """A scenario file or built-in name, or a checkpoint's layer (`--model DIR --layer N --sentence TEXT`): exactly one."""
    from attncli.sources.yaml_scenario import load

    if model is None:
        for key, given in (("--layer", layer), ("--sentence", sentence), ("--target", target), ("--attention", attention)):
            if given is not None:
                raise AttnError(f"{key} needs --model", key=key, expected="--model DIR beside it, or a scenario file instead")
        if special_tokens != "auto":
            raise AttnError("--special-tokens needs --model", key="--special-tokens", expected="--model DIR beside it")
        if scenario is None and default is None:
            raise AttnError("no scenario given", key=scenario_key, expected=f"a {scenario_key} file or built-in name, or --model DIR --layer N --sentence TEXT")
        return load(scenario or default or "", limits=limits)
    if scenario is not None:
        raise AttnError(f"both {scenario_key} and --model are given", key="--model", expected=f"either {scenario_key} or --model DIR, not both")
    for key, given in (("--layer", layer), ("--sentence", sentence)):
        if given is None:
            raise AttnError(f"--model needs {key}", key=key, expected="--model DIR --layer N --sentence TEXT (layers count from 1)")
    assert layer is not None and sentence is not None
    sentence = text_argument(sentence, "--sentence")
    target = None if target is None else text_argument(target, "--target")
    from attncli.sources.checkpoints.scenario import load_scenario

    try:
        return load_scenario(model, layer=layer, sentence=sentence, special_tokens=special_tokens, head=head, limits=limits, target=target, attention=attention)
    except AttnError as error:
        if error.file is None and error.key in _CLI_KEYS:
            error.key = _CLI_KEYS[error.key]
        raise


def explain_command(call: ExplainCall) -> str:
    """`attncli heads`' pointer to one head: the `attncli explain` command line that shows its arithmetic."""
    import shlex

    pick = ([f"--word {shlex.quote(call.word)}"] if call.word is not None else []) + (
        [f"--position {call.position}"] if call.position is not None else []
    )
    if call.model is not None:
        special = ["--special-tokens none"] if call.special_tokens == "none" else []
        where = [f"--model {shlex.quote(call.model)}", f"--layer {call.layer}", f"--head {call.head}",
                 f"--sentence {shlex.quote(call.sentence or '')}", *special]  # fmt: skip
    else:
        where = [f"-s {shlex.quote(call.scenario or '')}", f"--head {call.head}"]
    return " ".join(["attncli explain", *where, *pick])


# -- attncli model info ---------------------------------------------------------------------


def info_document(folder: Path, *, as_json: bool) -> str | Iterator[bytes]:
    """What a checkpoint folder holds, as aligned lines or an attncli.model-info/1 JSON document."""
    from attncli.sources.checkpoints.layer import model_info

    info = model_info(folder)
    if as_json:
        return _json({"schema": INFO_SCHEMA, **info})
    return _aligned(_info_rows(info))


def _info_rows(info: dict[str, Any]) -> list[tuple[str, str]]:
    architectures = info.get("architectures")
    kind = str(info["model_type"]) + (f" ({', '.join(map(str, architectures))})" if isinstance(architectures, list) and architectures else "")
    rows = [("folder", str(info["folder"])), ("architecture", kind)]
    if info.get("format") == "gguf":
        rows = [("file", str(info["file"])), ("architecture", f"{info['model_type']} (GGUF architecture {info['gguf_architecture']!r})")]
    if "layers" in info:
        heads, kv_heads = info["heads"], info["kv_heads"]
        sharing = (
            "" if kv_heads == heads else " (multi-query attention)" if kv_heads == 1 else f" (grouped-query attention, {heads // kv_heads} query heads each)"
        )
        rope = info["rope"]
        from attncli.sources.checkpoints.families import description  # on this path only, as model_info

        rope_text = "none (learned positions)" if description(info["model_type"]).learned_positions else "none"
        if rope is not None:
            pairs = "interleaved pairs" if rope["style"] == "interleaved" else "rotate-half"
            rope_text = f"θ = {rope['theta']:g}, {pairs}" + (f", {rope['scaling']} scaling" if rope["scaling"] else "")
            if rope.get("rotary_dim", info["head_dim"]) < info["head_dim"]:  # partial rotary (GPT-NeoX's rotary_pct, Phi's partial_rotary_factor)
                rope_text += (f"; partial rotary: the first {rope['rotary_dim']} of each head's {info['head_dim']} coordinates turn "
                              f"(factor {rope['partial_rotary_factor']:g}), the other {info['head_dim'] - rope['rotary_dim']} pass through unrotated")  # fmt: skip
        mask = "causal" if info["causal"] else "bidirectional (every token sees every token)"
        if info["sliding_window"] is not None:
            layers = ", ".join(map(str, info["sliding_layers"]))
            mask += f"; sliding window of {info['sliding_window']} on layer{'s' * (len(info['sliding_layers']) > 1)} {layers}"
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
        from attncli.walkthroughs.dequant import info_rows

        rows += info_rows(info)
    rows += _continued("attention", [str(m["text"]) for m in info.get("mechanisms") or []])
    cache = info.get("kv_cache")
    if cache:
        from attncli.sources.checkpoints.describe import describe_cache

        rows += _continued("kv cache", describe_cache(cache, len(cache["numbers_per_layer"])))
    if info["supported"] and info.get("encoder") is not None:
        rows.append(("supported", f"yes: attncli run --model {info['folder']} --layer 1..{info['layers']} --sentence SOURCE --target 'TARGET SO FAR' [--attention encoder|decoder|cross]"))
    elif info["supported"]:
        rows.append(("supported", f"yes: attncli run --model {info['folder']} --layer 1..{info['layers']} --sentence TEXT"))
    else:
        rows.append(("supported", f"no: {info['reason']}"))
    return rows


def _continued(key: str, lines: list[str]) -> list[tuple[str, str]]:
    """Rows of one key: the key on the first, blank on the rest."""
    return [(key if n == 0 else "", line) for n, line in enumerate(lines)]


# -- attncli model tokens -------------------------------------------------------------------


def tokens_document(folder: Path, text: str, *, special_tokens: str, as_json: bool) -> str | Iterator[bytes]:
    """The tokens of `text`: position (from 1), id, label (the text it covers) and the tokenizer's own piece."""
    from attncli.sources.checkpoints.scenario import SPECIAL_TOKENS
    from attncli.sources.checkpoints.tokens import not_applied_note

    text = text_argument(text, "TEXT")
    if special_tokens not in SPECIAL_TOKENS:
        raise AttnError(f"found {special_tokens!r}", key="--special-tokens", expected="auto (as the tokenizer adds them) or none")
    from attncli.sources.checkpoints.layer import checkpoint_tokens

    if not folder.is_dir() and not folder.is_file() and not str(folder).startswith("ollama:"):
        raise AttnError("the checkpoint folder does not exist", file=str(folder), expected="a folder with tokenizer.json, or a GGUF file")
    tokenized = checkpoint_tokens(folder, text, special_tokens=special_tokens == "auto", max_tokens=MAX_TOKENS_SHOWN)
    ids, labels, pieces, not_applied = tokenized.ids, tokenized.labels, tokenized.pieces, tokenized.not_applied
    rows = [{"position": n, "id": token_id, "label": label, "piece": piece} for n, (token_id, label, piece) in enumerate(zip(ids, labels, pieces), 1)]
    if as_json:
        return _json({"schema": TOKENS_SCHEMA, "folder": shown_path(folder), "text": text, "tokens": rows, "not_applied": not_applied})
    header = ("position", "id", "label", "piece")
    table = [header, *((str(r["position"]), str(r["id"]), visible(str(r["label"])), visible(str(r["piece"]))) for r in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    lines = ["  ".join(cell.rjust(w) if i < 2 else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in table]
    marked = "; ␣ marks a leading space" if any(label.startswith("␣") for label in labels) else ""
    notes = "".join(visible(note) + "\n" for note in not_applied_note(not_applied))
    return "\n".join(lines) + f"\n{len(rows)} token{'s' * (len(rows) != 1)}{marked}\n" + notes


def _aligned(rows: list[tuple[str, str]]) -> str:
    width = max(len(key) for key, _ in rows)
    return "".join(f"{key:<{width}}  {visible(value)}\n" for key, value in rows)


def _json(doc: dict[str, Any]) -> Iterator[bytes]:
    from attncli.formats import jsonout

    return jsonout.document(doc)


# -- attncli model dequant ------------------------------------------------------------------


def dequant_document(model: Path, tensor: str, *, block: int, fmt: str, to_file: bool) -> str | Iterator[bytes]:
    """One block of a GGUF tensor becoming numbers: an attncli.gguf-dequant/1 JSON document, or the walk-through in any other format."""
    from attncli.formats import render_document
    from attncli.sources.checkpoints.gguf import gguf_path
    from attncli.sources.checkpoints.gguf_data import dequant_data
    from attncli.walkthroughs.dequant import dequant_report

    path = gguf_path(model)
    if path is None:
        raise AttnError("not a GGUF file", file=str(model), expected="a .gguf file, a folder holding one, or ollama:NAME[:TAG]")
    doc = dequant_data(path, tensor, block)
    if fmt == "json":
        return _json(doc)
    return render_document(dequant_report(doc), fmt, to_file=to_file)
