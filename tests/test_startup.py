"""Start-up stays light: commands that need no numbers import neither numpy nor yaml."""

import subprocess
import sys

import pytest

PROBE = """
import runpy, sys
sys.argv = ["attncli", *sys.argv[1:]]
try:
    runpy.run_module("attncli", run_name="__main__")
except SystemExit:
    pass
heavy = sorted(m for m in ("numpy", "yaml", "orjson", "rich.table", "attncli.core.engine") if m in sys.modules)
sys.stderr.write("HEAVY=" + ",".join(heavy) + "\\n")
"""


def loaded_heavy_modules(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60)
    line = next(line for line in done.stderr.splitlines() if line.startswith("HEAVY="))
    return [m for m in line.removeprefix("HEAVY=").split(",") if m]


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["scenarios"], ["run", "--help"], ["schema"], ["scenarios", "show", "cat"]])
def test_light_commands_import_no_numpy_or_yaml(args):
    """--help, --version, scenarios and schema answer without importing numpy, yaml or the renderers."""
    assert loaded_heavy_modules(*args) == []


def test_the_probe_can_see_heavy_imports():
    """The check above can fail: a real run does import numpy and yaml."""
    assert {"numpy", "yaml", "attncli.core.engine"} <= set(loaded_heavy_modules("run", "cat"))
