"""The architecture's rules that import-linter cannot see: flag names live only in the command line layer."""

import ast
import re
from pathlib import Path

import click
import pytest
import typer.main

from attncli.cli.app import app, flag

PACKAGE = Path(__file__).parent.parent / "attncli"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*")
FOREIGN = {"--merge"}  # other tools' flags an error advises (llama.cpp's llama-gguf-split --merge), not attncli's
OPTION = re.compile(r"""\boption\(\s*["']([a-z_]+)["']\s*\)""")

def below_cli() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "cli" not in p.relative_to(PACKAGE).parts[:1])


def shown_strings(path: Path) -> list[tuple[int, str]]:
    """Every string constant of the module that is not a docstring, with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docstrings.add(id(first.value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def flag_names(path: Path) -> list[str]:
    return [f"{path.relative_to(PACKAGE)}:{line}: {text!r}" for line, text in shown_strings(path) if set(FLAG.findall(text)) - FOREIGN]


@pytest.mark.parametrize("path", below_cli(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_flag_name_below_the_command_line(path):
    """Below cli/ an option is mentioned as option("round_steps"); only the CLI turns that into --round-steps."""
    found = flag_names(path)
    assert not found, "flag names below the CLI:\n" + "\n".join(found)


def test_every_option_mentioned_is_a_real_option():
    """Each option("name") below the CLI is, as `flag(name)`, an option of some attncli command."""
    command = typer.main.get_command(app)
    flags: set[str] = set()

    def collect(cmd: click.Command) -> None:
        for param in cmd.params:
            flags.update(param.opts)
        for sub in getattr(cmd, "commands", {}).values():
            collect(sub)

    collect(command)
    mentioned = {name for path in below_cli() for name in OPTION.findall(path.read_text(encoding="utf-8"))}
    assert mentioned, "no option() mentions found: the scan is broken"
    assert {flag(name) for name in mentioned} <= flags, sorted({flag(n) for n in mentioned} - flags)


def test_shown_text_names_options_as_its_caller_does():
    """A mention reaches the page resolved: `--position` from the command line, the keyword `position` from the API."""
    from typer.testing import CliRunner

    import attncli.api as attn

    api_text = attn.explain("alibi", "the").render("markdown")
    assert "pick it with position 5." in api_text and "\x1e" not in api_text
    cli_text = CliRunner().invoke(app, ["explain", "-s", "alibi", "--word", "the", "--format", "markdown"]).stdout
    assert "pick it with --position 5." in cli_text and "\x1e" not in cli_text
