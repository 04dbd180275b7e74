import atexit
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

# Rich: no colour, no terminal tricks, a fixed width, so output is byte-stable.
os.environ["TERM"] = "dumb"
os.environ["NO_COLOR"] = "1"
os.environ["COLUMNS"] = "120"
os.environ["LINES"] = "60"
os.environ.pop("ATTNCLI_TRACEBACK", None)
# The tokenizer cache (token_cache.py) in a folder of this session's own, never the user's ~/.cache/attncli.
os.environ["ATTNCLI_CACHE_DIR"] = tempfile.mkdtemp(prefix="attncli-test-cache-")
atexit.register(shutil.rmtree, os.environ["ATTNCLI_CACHE_DIR"], True)


# Tests that run a TeX engine (pdflatex, KaTeX, MathJax) join the heavy tier: .ci/run runs them with `-m slow`, after
# installing the tools; the README's test line stays within its CPU budget (they took 38 s of it on 2 cores).
COMPILER_FIXTURES = {"katex_modules", "mathjax_modules", "latex_tools"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a TeX engine's fixture `slow`, before `-m` selects the tier."""
    for item in items:
        if COMPILER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)

@pytest.fixture
def cli():
    """Invoke the attncli app in-process with Typer's CliRunner; returns the Result."""
    from typer.testing import CliRunner

    from attncli.cli.app import app

    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(app, list(args), input=input, catch_exceptions=False)

    return invoke


def _node_modules(module: str) -> Path:
    from tests import renderers

    try:
        return renderers.node_modules(module)
    except RuntimeError as missing:
        pytest.skip(str(missing))


@pytest.fixture(scope="session")
def katex_modules() -> Path:
    """node_modules holding KaTeX, as scripts/install-test-tools.sh installs it; skips, saying so, when it is absent."""
    return _node_modules("katex")


@pytest.fixture(scope="session")
def mathjax_modules() -> Path:
    """node_modules holding MathJax 3 (mathjax-full), as scripts/install-test-tools.sh installs it; skips when absent."""
    return _node_modules("mathjax-full")


@pytest.fixture(scope="session")
def latex_tools() -> None:
    """Skips unless pdflatex, lmodern and poppler's pdftotext are installed (scripts/install-test-tools.sh installs them)."""
    missing = [tool for tool in ("pdflatex", "kpsewhich", "pdftotext", "pdffonts") if not shutil.which(tool)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: scripts/install-test-tools.sh installs TeX Live and poppler")
    found = subprocess.run(["kpsewhich", "lmodern.sty"], capture_output=True, text=True).stdout.strip()
    if not found:
        pytest.skip("the LaTeX package lmodern is not installed: scripts/install-test-tools.sh installs it")
