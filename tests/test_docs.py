"""The README stays true: its Quick start, its command reference, and shell completion."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_command_reference_matches_the_real_help():
    """README's reference is what `--help` prints today (regenerate: python scripts/readme_reference.py)."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_reference.py"), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_command_is_documented():
    """Each command and subcommand of the app has its section in the reference."""
    import typer

    from attncli.cli import app

    group = typer.main.get_command(app)
    names = []
    for name, command in group.commands.items():
        names.append(name)
        names += [f"{name} {sub}" for sub in getattr(command, "commands", {})]
    for name in names:
        assert f"### `attncli {name} --help`" in README, name


def test_quick_start_holds_exactly_two_command_lines():
    """The Quick start's code block: one line installs and runs attncli, one installs and runs the tests."""
    section = README.split("## Quick start", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    lines = [line for line in block.splitlines() if line.strip()]
    assert len(lines) == 2
    assert "pip install" in lines[0] and "attncli " in lines[0]
    assert "pip install" in lines[1] and "pytest" in lines[1]


def test_shell_completion_offers_builtin_scenario_names():
    """Typer's completion (bash here) completes `attncli run jo` to the built-in journey scenarios."""
    env = dict(os.environ, _ATTNCLI_COMPLETE="complete_bash", COMP_WORDS="attncli run jo", COMP_CWORD="2")
    done = subprocess.run([sys.executable, "-m", "attncli"], capture_output=True, text=True, env=env)
    assert done.stdout.split() == ["journey", "journey-causal", "journey-simple"], done.stdout + done.stderr
