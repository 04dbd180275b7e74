"""The README's "Using it" block runs as written, top to bottom, in an empty folder."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"


def using_it_block() -> list[str]:
    """The command lines of the first code block under "## Using it", comments left on (the shell ignores them)."""
    section = README.read_text(encoding="utf-8").split("## Using it", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S)
    assert block is not None, "no code block under ## Using it"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_using_it_block_runs_top_to_bottom_in_an_empty_folder(tmp_path):
    """Each line exits 0 in a fresh folder; the files it makes are there at the end."""
    attncli = shutil.which("attncli")
    if attncli is None:
        pytest.skip("the attncli command is not installed (pip install . puts it on PATH)")
    environment = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    lines = using_it_block()
    assert len(lines) >= 10
    for line in lines:
        result = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"{line}\n{result.stderr}"
    assert (tmp_path / "my-scenario.json").stat().st_size > 0
    assert (tmp_path / "tex" / "my-scenario.tex").is_file()
