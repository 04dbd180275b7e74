import os

import pytest

# Rich: no colour, no terminal tricks, a fixed width, so output is byte-stable.
os.environ["TERM"] = "dumb"
os.environ["NO_COLOR"] = "1"
os.environ["COLUMNS"] = "120"
os.environ["LINES"] = "60"
os.environ.pop("ATTNCLI_TRACEBACK", None)


@pytest.fixture
def cli():
    """Invoke the attncli app in-process with Typer's CliRunner; returns the Result."""
    from typer.testing import CliRunner

    from attncli.cli.app import app

    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(app, list(args), input=input, catch_exceptions=False)

    return invoke
