"""The built-in scenarios shipped with attncli (the `scenarios/` folder)."""

from __future__ import annotations

from pathlib import Path


def folder() -> Path:
    """Where the built-in scenario files are: inside the installed package, or the source checkout."""
    package = Path(__file__).parent.parent
    installed = package / "scenarios"  # the wheel puts scenarios/ here
    return installed if installed.is_dir() else package.parent / "scenarios"


def names() -> list[str]:
    return sorted(p.stem for p in folder().glob("*.yaml"))


def exists(name: str) -> bool:
    return "/" not in name and "\\" not in name and (folder() / f"{name}.yaml").is_file()


def path(name: str) -> Path:
    return folder() / f"{name}.yaml"


def description(name: str) -> str:
    """The `description:` line of a built-in scenario, read without a YAML parser (start-up stays fast)."""
    for line in path(name).read_text(encoding="utf-8").splitlines():
        if line.startswith("description:"):
            return line.partition(":")[2].strip().strip("\"'")
    return ""


def listing() -> list[tuple[str, str]]:
    """Every built-in scenario's name and description, in name order: what `attncli scenarios` and `api.scenarios()` list."""
    return [(name, description(name)) for name in names()]


def closest(name: str) -> str | None:
    """The built-in scenario whose name is closest to a misspelt `name` ("catt" → "cat"), or None."""
    from attncli.errors import closest as closest_choice

    return closest_choice(name.removesuffix(".yaml").removesuffix(".yml"), names())
