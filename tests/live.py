"""The live tier's one door to transformers: skip without torch and transformers, else the fixture script as a module.

A live test runs transformers itself on a fixture, with the very code scripts/make_checkpoints.py made its golden with
(its float32 steps forced to float64 where the family needs it), so that a transformers release that changes a family
shows there first.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).parent.parent / "scripts" / "make_checkpoints.py"


def fixture_script() -> ModuleType:
    """scripts/make_checkpoints.py imported, after skipping the test (and saying how to install them) without torch and transformers."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except Exception as error:
        pytest.skip(f"torch and transformers are not importable ({error}); pip install torch==2.13.0 transformers")
    spec = importlib.util.spec_from_file_location("make_checkpoints", SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script
