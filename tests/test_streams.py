"""stdout, stderr and the error path: a full or closed stdout, a reader gone, Ctrl-C at start-up, odd encodings, bugs: one line and the README's status, never a traceback."""

import os
import subprocess
import sys

import pytest

from attncli.errors import MAX_LINE, AttnError, visible


def attncli(*args: str, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    """The real command in a child process, with extra environment variables."""
    environment = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "attncli", *args], capture_output=True, timeout=60, env=environment, **kwargs)


def in_shell(script: str) -> subprocess.CompletedProcess:
    """`script` in bash, where `attncli` is this Python's `-m attncli` (for redirections like `>&-`)."""
    prelude = f'attncli() {{ "{sys.executable}" -m attncli "$@"; }}\n'
    return subprocess.run(["bash", "-c", prelude + script], capture_output=True, timeout=60)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_full_stdout_is_one_line_and_status_1(fmt):
    """`attncli run cat > /dev/full`: no silent truncation with status 0, and no traceback."""
    done = in_shell(f"attncli run cat --format {fmt} > /dev/full")
    assert done.returncode == 1
    assert done.stderr.decode() == "attncli: error: cannot write to stdout: no space left on device; the output is incomplete\n"


@pytest.mark.parametrize("fmt", ["json", "table", "markdown"])
def test_a_size_limit_on_stdout_is_one_line_and_status_1(tmp_path, fmt):
    """`ulimit -f 1; attncli run cat --format json > out` (7 KB into 1 KiB): status 1, not a truncated file and 0. The tables
    are one piece smaller than Python's write buffer, whose short write used to end silently with status 0."""
    done = in_shell(f'ulimit -f 1; attncli run cat --format {fmt} > "{tmp_path / "out"}"')
    assert done.returncode == 1
    assert done.stderr.decode().startswith("attncli: error: cannot write to stdout: file too large")
    assert done.stderr.count(b"\n") == 1


@pytest.mark.parametrize("command", ["run cat", "scenarios"])
def test_a_closed_stdout_is_one_line_and_status_1(command):
    """`attncli run cat >&-`: one line, status 1, no AttributeError traceback (`scenarios` has no @guard: main catches it)."""
    done = in_shell(f"attncli {command} >&-")
    assert done.returncode == 1
    assert done.stderr.decode() == (
        "attncli: error: stdout is closed, so there is nowhere to print the result (expected an open stdout, or --output FILE)\n"
    )


def test_a_closed_stderr_still_gives_the_status():
    """An error with stderr closed: nothing to print it on, but status 1 and no crash."""
    done = in_shell("attncli run no-such-scenario 2>&-; echo status=$?")
    assert done.stdout.decode().strip() == "status=1"


@pytest.mark.parametrize(
    "args", [["--help"], ["--version"], ["scenarios"], ["scenarios", "show", "cat"], ["run", "cat"]]
)
def test_a_closed_reader_is_141_and_silent(args):
    """`attncli … | head` after head has gone: status 141 as `cat` reports it, nothing on stderr (Click alone says 1)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before attncli writes: its first write fails with EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "attncli", *args], stdout=write_end, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, b"")


@pytest.mark.parametrize(
    ("encoding", "args"), [("latin-1", ["--help"]), ("latin-1", ["run", "no-such-scenario-é"]), ("ascii", ["run", "--help"])]
)
def test_a_stdout_that_cannot_show_every_character_still_works(encoding, args):
    """PYTHONIOENCODING=latin-1 (or a non-UTF-8 locale): help and errors print, with \\u escapes where needed."""
    done = attncli(*args, env={"PYTHONIOENCODING": encoding})
    assert b"Traceback" not in done.stderr
    if args[-1] == "--help":
        assert done.returncode == 0 and done.stdout.startswith(b"Usage: attncli")
    else:
        assert done.returncode == 1 and done.stderr.count(b"\n") == 1


SIGINT_WHILE_IMPORTING = """
import os, signal, sys

class InterruptTheImportOfTyper:
    '''Send this process SIGINT as it starts importing Typer, as Ctrl-C during start-up would.'''
    def find_spec(self, name, path=None, target=None):
        if name == "typer":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, InterruptTheImportOfTyper())
"""


def test_ctrl_c_during_start_up_is_130_and_one_line(tmp_path):
    """SIGINT while the command line is still importing: status 130, `attncli: interrupted`, no KeyboardInterrupt traceback."""
    (tmp_path / "sitecustomize.py").write_text(SIGINT_WHILE_IMPORTING)
    done = attncli("run", "cat", env={"PYTHONPATH": str(tmp_path)}, preexec_fn=_ctrl_c_as_in_a_terminal)
    assert (done.returncode, done.stderr, done.stdout) == (130, b"attncli: interrupted\n", b"")


def _ctrl_c_as_in_a_terminal() -> None:
    """In the child: SIGINT does what it does in a terminal, even when the tests run as a background job (which ignores SIGINT:
    attncli then rightly leaves it ignored, as under nohup, and this test failed whenever the suite ran in the background)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_bug_is_one_line_and_status_70(cli, monkeypatch):
    """An unexpected exception: `attncli: internal error: …`, status 70, no traceback."""
    from attncli.core import engine

    def broken(*args, **kwargs):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(engine, "run", broken)
    result = cli("run", "cat")
    assert result.exit_code == 70 and result.stdout == ""
    assert result.stderr == "attncli: internal error: ZeroDivisionError: float division by zero (run with --traceback to see where)\n"


def test_a_bug_shows_its_traceback_on_request(cli, monkeypatch):
    """With ATTNCLI_TRACEBACK=1 (or --traceback) the exception itself goes through."""
    from attncli.core import engine

    monkeypatch.setattr(engine, "run", lambda *args, **kwargs: 1 / 0)
    monkeypatch.setenv("ATTNCLI_TRACEBACK", "1")
    with pytest.raises(ZeroDivisionError):
        cli("run", "cat")


def test_an_os_error_no_command_expected_is_one_line(cli, monkeypatch):
    """An OSError escaping a command (the system refused something): one line, status 1, not a bug report."""
    from attncli.core import engine

    def refused(*args, **kwargs):
        raise OSError(5, "Input/output error", "somewhere.yaml")

    monkeypatch.setattr(engine, "run", refused)
    result = cli("run", "cat")
    assert result.exit_code == 1 and result.stderr == "attncli: error: somewhere.yaml: cannot be read: input/output error\n"


def test_error_lines_show_control_characters_and_stay_one_line(cli, tmp_path):
    """A file name with an escape sequence and a newline cannot clear the screen or split the message."""
    name = tmp_path / "x\x1b[2J\x1b]0;pwned\x07\n\u202eevil.yaml"
    name.write_text("tokens: [a]\n")
    result = cli("run", str(name))
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "\x1b" not in result.stderr and "\u202e" not in result.stderr
    assert "x\\x1b[2J\\x1b]0;pwned\\x07\\n\\u202eevil.yaml" in result.stderr


def test_error_lines_are_bounded():
    """However long the parts, the line stays near MAX_LINE characters, keeping the file name's end."""
    error = AttnError("m" * 5000, file="/deep" * 400 + "/name.yaml", line=3, key="k" * 500, expected="e" * 5000)
    line = error.one_line()
    assert len(line) <= MAX_LINE and "\n" not in line
    assert "/name.yaml:3: " in line and line.startswith("…") and "(expected e" in line


def test_an_error_behind_a_long_path_keeps_its_message():
    """A checkpoint's error behind a scenario's `model:` line: both file names give way before the message does."""
    inner = AttnError("model_type 'mamba' is not supported", file="/ci" * 60 + "/config.json", expected="one of " + ", ".join(["family"] * 30))
    line = inner.behind(line=1, key="model").located(file="/check" * 30 + "/s.yaml").one_line()
    assert len(line) <= MAX_LINE
    assert "/s.yaml:1: model: …" in line and "/config.json: model_type 'mamba' is not supported (expected one of family" in line


def test_short_error_lines_are_unchanged():
    """A message that fits is printed exactly as before."""
    error = AttnError("found 'one'", file="my.yaml", line=4, key="embeddings.b[2]", expected="a number")
    assert error.one_line() == str(error) == "my.yaml:4: embeddings.b[2]: found 'one' (expected a number)"


def test_visible_writes_out_every_control_character():
    """C0, DEL, C1, line separators and bidi overrides become escapes; ordinary text stays."""
    assert visible("a\tb\nc\rd\x1b[0m\x7f\x85\u2028\u202e é ü 猫") == "a\\tb\\nc\\rd\\x1b[0m\\x7f\\x85\\u2028\\u202e é ü 猫"


def test_visible_passes_printable_text_by_its_shortcut():
    """`visible` returns printable text as it is without its table: sound only while every character the table writes out is unprintable."""
    from attncli.errors import _shown_as_code

    assert not any(chr(code).isprintable() for code in _shown_as_code())
    assert visible("L = 6 tokens · d_model = 2 · é") == "L = 6 tokens · d_model = 2 · é"


def test_usage_errors_keep_status_2_and_show_control_characters():
    """A malformed command line is still Click's usage error (status 2), with an option's escape sequence made visible."""
    done = attncli("run", "cat", "--format", "x\x1b[2Jy")
    assert done.returncode == 2 and b"\x1b" not in done.stderr and b"x\\x1b[2Jy" in done.stderr


@pytest.mark.parametrize("args", ["--help", "--version", "run --help"])
def test_help_into_a_closed_stdout_is_one_line_and_status_1(args):
    """`attncli --help >&-`: Click would print into nothing and report success; attncli says so, status 1."""
    done = in_shell(f"attncli {args} >&-")
    assert done.returncode == 1
    assert done.stderr.decode() == (
        "attncli: error: stdout is closed, so there is nowhere to print the result (expected an open stdout, or --output FILE)\n"
    )


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", ["--help", "--version", "scenarios", "run --help"])
def test_help_into_a_full_stdout_is_one_line_and_status_1(args):
    """`attncli --help > /dev/full`: a write error (status 1), not an internal error (70)."""
    done = in_shell(f"attncli {args} > /dev/full")
    assert done.returncode == 1
    assert done.stderr.decode() == "attncli: error: cannot write to stdout: no space left on device; the output is incomplete\n"


def test_a_negative_seed_is_a_usage_error():
    """`variance --seed -1`: Click's range check (status 2, its usage lines), no traceback from NumPy."""
    done = attncli("variance", "--seed", "-1")
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().endswith("Error: Invalid value for '--seed': -1 is not in the range x>=0.\n")
    assert b"Traceback" not in done.stderr


def test_a_missing_out_dir_is_a_usage_error(cli):
    """`export` without --out-dir is a malformed command line (status 2), not an output-path problem with an empty message."""
    result = cli("export", "cat", "--format", "json")
    assert result.exit_code == 2 and "Missing option '--out-dir'" in result.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["run", "cat", "--output", "."], "--output: cannot write .: it is a folder"),
        (["variance", "--dims", "1", "--samples", "2", "--output", "."], "--output: cannot write .: it is a folder"),
        (["export", "cat", "--format", "json", "--out-dir", "no/such/folder"], "--out-dir: the folder 'no/such/folder' does not exist"),
        (["export", "cat", "--format", "json", "--out-dir", __file__], "--out-dir: "),
    ],
)
def test_an_output_path_problem_is_status_1(args, fragment):
    """The README's table: a bad output path is a bad input (status 1, one line), never Click's usage status 2."""
    done = attncli(*args)
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr.decode().startswith("attncli: error: " + fragment) and done.stderr.count(b"\n") == 1


def test_traceback_asked_once_does_not_outlive_its_command(cli):
    """--traceback in one in-process run left ATTNCLI_TRACEBACK=1 in os.environ, so every later command (and child) showed tracebacks."""
    assert cli("--traceback", "run", "cat").exit_code == 0
    assert "ATTNCLI_TRACEBACK" not in os.environ
    result = cli("run", "no-such-scenario")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
