"""The bodies of the real-model commands: `--model` on run and explain, `attncli model dequant`, and how `model info` spells a run.

The CLI only parses options and hands them here; nothing here touches the network.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attncli.core.scenario import Scenario
from attncli.errors import AttnError
from attncli.sources.arguments import text_argument
from attncli.sources.limits import Limits

if TYPE_CHECKING:
    from attncli.walkthroughs.heads import ExplainCall

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
    head_only: bool = False,
) -> Scenario:
    """A scenario file or built-in name, or a checkpoint's layer (`--model DIR --layer N --sentence TEXT`): exactly one.

    `head_only`: the command holds only `head`'s tokens × tokens stages, and a checkpoint's limits count that head's cells.
    """
    if model is None:
        from attncli.sources.yaml_scenario import load  # not for a checkpoint's layer: it needs neither YAML nor the reader

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
        return load_scenario(model, layer=layer, sentence=sentence, special_tokens=special_tokens, head=head, limits=limits, target=target, attention=attention,
                             head_only=head_only)  # fmt: skip
    except AttnError as error:
        if error.file is None and error.key in _CLI_KEYS:
            error.key = _CLI_KEYS[error.key]
        raise


def explain_command(call: ExplainCall) -> str:
    """`attncli heads`' pointer to one head: the `attncli explain` command line that shows its arithmetic."""
    pick = ([f"--word {shell_word(call.word)}"] if call.word is not None else []) + (
        [f"--position {call.position}"] if call.position is not None else []
    )
    if call.model is not None:
        special = ["--special-tokens none"] if call.special_tokens == "none" else []
        where = [f"--model {shell_word(call.model)}", f"--layer {call.layer}", f"--head {call.head}",
                 f"--sentence {shell_word(call.sentence or '')}", *special]  # fmt: skip
    else:
        where = [f"-s {shell_word(call.scenario or '')}", f"--head {call.head}"]
    return " ".join(["attncli explain", *where, *pick])


def shell_word(text: str) -> str:
    """`text` as one shell word a person reads at a glance: bare, in single quotes, or in double quotes when it holds a '
    ("The animal didn't cross"; shlex would write 'didn'"'"'t'), with a backslash before each " $ ` and \\ the shell would
    read inside them; with a ! (history expansion in an interactive bash, which no backslash stops) as shlex writes it.
    A text with a control or invisible character (a tab, ESC, U+202E) is written in ANSI-C quotes, $'The\\tcat', with the
    escapes every output shows it by (errors.visible), which bash and zsh read back as the text itself: in plain quotes
    the escape, printed as text, would be pasted as a backslash and letters."""
    import re
    import shlex

    from attncli.errors import visible

    if visible(text) != text:
        return "$'" + "".join("\\" + c if c in "\\'" else visible(c) for c in text) + "'"
    if "'" in text and "!" not in text:
        return '"' + re.sub(r'(["$`\\])', r"\\\1", text) + '"'
    return shlex.quote(text)


# -- attncli model info and attncli model tokens ----------------------------------------------


def run_usage(info: dict[str, Any]) -> str:
    """How the command line reads a layer of a supported checkpoint: its `attncli run` call (`model info`'s last line)."""
    if info.get("encoder") is not None:
        return f"attncli run --model {info['folder']} --layer 1..{info['layers']} --sentence SOURCE --target 'TARGET SO FAR' [--attention encoder|decoder|cross]"
    if info.get("softmax_layers") is not None and len(info["softmax_layers"]) != info["layers"]:  # the others have no softmax to show
        return f"attncli run --model {info['folder']} --layer {'|'.join(map(str, info['softmax_layers']))} --sentence TEXT"
    return f"attncli run --model {info['folder']} --layer 1..{info['layers']} --sentence TEXT"


def _json(doc: dict[str, Any]) -> Iterator[bytes]:
    from attncli.formats import jsonout

    return jsonout.document(doc)


# -- attncli model dequant ------------------------------------------------------------------


def dequant_document(model: Path, tensor: str, *, block: int, fmt: str, to_file: bool) -> str | Iterator[bytes] | bytes:
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
    if fmt == "png":  # the SVG's text, drawn
        from attncli.formats.pngout import rasterised

        return rasterised(render_document(dequant_report(doc), "svg", to_file=to_file))
    return render_document(dequant_report(doc), fmt, to_file=to_file)
