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


FROZEN_AT_EXIT = """
import gc, runpy, sys
sys.argv = ["attncli", *sys.argv[1:]]
try:
    runpy.run_module("attncli", run_name="__main__")
except SystemExit as done:
    sys.stderr.write(f"STATUS={done.code} FROZEN={gc.get_freeze_count()}\\n")
"""


@pytest.mark.parametrize(("args", "status"), [(["run", "cat"], 0), (["run", "no-such-scenario"], 1)])
def test_objects_are_frozen_before_the_exit(args, status):
    """attncli's exit leaves the libraries' objects to reference counting, not to a last pass of the cycle collector: on success and on an error."""
    done = subprocess.run([sys.executable, "-c", FROZEN_AT_EXIT, *args], capture_output=True, text=True, timeout=60)
    line = next(line for line in done.stderr.splitlines() if line.startswith("STATUS="))
    code, frozen = (part.split("=")[1] for part in line.split())
    assert int(code) == status and int(frozen) > 10_000


LAZY = """
import runpy, sys
sys.argv = ["attncli", *sys.argv[1:]]
try:
    runpy.run_module("attncli", run_name="__main__")
except SystemExit:
    pass
from attncli.document import escape
loaded = [m for m in ("attncli.formats.heatmap", "attncli.formats.latex") if m in sys.modules]
loaded += ["TeX patterns"] if escape._notation.cache_info().currsize else []
sys.stderr.write("LOADED=" + ",".join(loaded) + "\\n")
"""


@pytest.mark.parametrize(
    ("args", "loaded"),
    [(["run", "cat"], ""), (["run", "cat", "--heatmap"], "attncli.formats.heatmap"), (["run", "cat", "--format", "latex"], "attncli.formats.latex,TeX patterns")],
)
def test_run_into_a_pipe_leaves_the_shading_and_tex_for_later(args, loaded):
    """`attncli run cat | …` imports no heatmap (nothing is shaded in a pipe) and compiles no TeX prose pattern; --heatmap and LaTeX do."""
    done = subprocess.run([sys.executable, "-c", LAZY, *args], capture_output=True, text=True, timeout=60)
    assert next(line for line in done.stderr.splitlines() if line.startswith("LOADED=")) == "LOADED=" + loaded


MODEL_PROBE = """
import runpy, sys
sys.argv = ["attncli", *sys.argv[1:]]
try:
    runpy.run_module("attncli", run_name="__main__")
except SystemExit:
    pass
wanted = ("yaml", "attncli.sources.yaml_scenario", "attncli.core.explain", "attncli.core.decode", "attncli.core.online", "attncli.core.engine",
          "attncli.document.blocks", "attncli.document.views", "attncli.sources.checkpoints.describe", "attncli.sources.checkpoints.safetensors")
sys.stderr.write("LOADED=" + ",".join(m for m in wanted if m in sys.modules) + "\\n")
"""


@pytest.mark.parametrize(("args", "loaded"), [
    (["run", "--model", "tests/checkpoints/gpt2", "--layer", "1", "--sentence", "hi", "--format", "json"],
     "attncli.core.engine,attncli.sources.checkpoints.safetensors"),
    (["run", "--model", "tests/checkpoints/gguf/qwen3-f16.gguf", "--layer", "1", "--sentence", "hi", "--format", "json"], "attncli.core.engine"),
    (["run", "cat", "--format", "json"], "yaml,attncli.sources.yaml_scenario,attncli.core.engine"),
    (["run", "--model", "tests/checkpoints/gpt2", "--layer", "1", "--sentence", "hi"],
     "attncli.core.engine,attncli.document.blocks,attncli.document.views,attncli.sources.checkpoints.safetensors"),
])  # fmt: skip
def test_a_checkpoints_run_imports_no_yaml_nor_the_other_walkthroughs(args, loaded):
    """`run --model … --format json` reads no YAML and writes run's JSON without importing explain, decode, the online softmax,
    the tables' blocks or model info's descriptions; a GGUF file's run reads no safetensors (the tables import their blocks)."""
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", MODEL_PROBE, *args], capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent.parent)
    assert next(line for line in done.stderr.splitlines() if line.startswith("LOADED=")) == "LOADED=" + loaded, done.stderr
