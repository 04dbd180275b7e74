"""Regenerate the command reference (docs/reference.md) from the real `--help` of every command.

    python scripts/readme_reference.py          # rewrite docs/reference.md between the markers
    python scripts/readme_reference.py --check  # exit 1 if docs/reference.md has drifted

tests/test_docs.py runs the check, so the reference cannot fall behind the CLI.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "docs" / "reference.md"
START, END = "<!-- reference:start -->", "<!-- reference:end -->"
COMMANDS = [[], ["run"], ["explain"], ["export"], ["decode"], ["heads"], ["scenarios"], ["scenarios", "show"], ["scenarios", "new"], ["variance"], ["schema"], ["model"], ["model", "info"], ["model", "tokens"], ["model", "dequant"], ["model", "cache"], ["model", "verify"]]


def help_text(args: list[str]) -> str:
    from typer.testing import CliRunner

    from attncli.cli.app import app

    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"}, prog_name="attncli")
    assert result.exit_code == 0, result.output
    return result.stdout.rstrip() + "\n"


def render() -> str:
    parts = [START, ""]
    for args in COMMANDS:
        parts += [f"### `attncli {' '.join(args + ['--help'])}`", "", "```", help_text(args).rstrip(), "```", ""]
    parts.append(END)
    return "\n".join(parts)


def updated(readme: str) -> str:
    before, _, rest = readme.partition(START)
    _, _, after = rest.partition(END)
    return before + render() + after


def main() -> int:
    os.environ.setdefault("COLUMNS", "80")
    readme = README.read_text(encoding="utf-8")
    if START not in readme or END not in readme:
        print(f"docs/reference.md has no {START} ... {END} markers", file=sys.stderr)
        return 1
    new = updated(readme)
    if "--check" in sys.argv:
        if new != readme:
            print("docs/reference.md is out of date: run python scripts/readme_reference.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
