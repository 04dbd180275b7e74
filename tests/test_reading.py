"""Reading a scenario: never more than the limit from any source, and one clear line for every way a file cannot be had."""

import errno
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from attncli.cli.app import flag
from attncli.errors import AttnError
from attncli.sources import builtin, reading
from attncli.sources.reading import read_text

CAT = builtin.path("cat").read_text(encoding="utf-8")


def in_shell(script: str) -> subprocess.CompletedProcess:
    """`script` in bash, where `attncli` is this Python's `-m attncli`."""
    prelude = f'attncli() {{ "{sys.executable}" -m attncli "$@"; }}\n'
    return subprocess.run(["bash", "-c", prelude + script], capture_output=True, timeout=60)


def refusal(path: Path | str, max_bytes: int = 1 << 20) -> str:
    """The one line read_text gives for `path`."""
    with pytest.raises(AttnError) as caught:
        read_text(Path(path), str(path), max_bytes=max_bytes)
    return str(caught.value)


def test_dev_zero_is_refused_at_the_first_block():
    """`attncli run /dev/zero`: a binary source, refused after one block, not a MemoryError."""
    assert refusal("/dev/zero") == "/dev/zero:1: this is a binary file, not YAML text (expected a UTF-8 text file)"


def test_an_endless_pipe_is_refused_at_the_limit():
    """A pipe that never ends (`yes |`) is read only up to the limit, then refused in one line."""
    read_end, write_end = os.pipe()

    def endless():
        try:
            while True:
                os.write(write_end, b"y\n" * 4096)
        except OSError:  # the reader closed its end: EPIPE
            pass
        finally:
            os.close(write_end)

    writer = threading.Thread(target=endless)
    writer.start()
    try:
        message = refusal(f"/dev/fd/{read_end}", max_bytes=100_000)
    finally:
        os.close(read_end)
        writer.join(timeout=30)
    assert message.endswith("more than the 100,000 bytes a scenario may be came from it (expected a teaching-sized scenario)")


def test_dev_zero_from_the_command_line_is_one_line(cli):
    """`attncli run /dev/zero`: status 1 and one line, not a MemoryError."""
    result = cli("run", "/dev/zero")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == "attncli: error: /dev/zero:1: this is a binary file, not YAML text (expected a UTF-8 text file)\n"


def test_yes_into_dev_stdin_is_one_line_and_status_1():
    """`yes | attncli run /dev/stdin`: the 32 MiB limit holds for a pipe too; one line, status 1."""
    done = in_shell("yes | attncli run /dev/stdin")
    assert done.returncode == 1
    assert done.stderr.decode() == (
        "attncli: error: /dev/stdin: more than the 33,554,432 bytes a scenario may be came from it (expected a teaching-sized scenario)\n"
    )


def test_a_scenario_piped_into_dev_stdin_is_read():
    """`attncli scenarios show cat | attncli run /dev/stdin` works: pipes are read, just not without bound."""
    done = in_shell("attncli scenarios show cat | attncli run /dev/stdin --format json --stages output")
    assert done.returncode == 0, done.stderr
    assert b'"output"' in done.stdout


def test_a_fifo_is_read(tmp_path):
    """A FIFO (named pipe) as the scenario: read like any file."""
    fifo = tmp_path / "scenario.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(CAT))
    writer.start()
    text = read_text(fifo, str(fifo), max_bytes=1 << 20)
    writer.join(timeout=30)
    assert text == CAT


def test_a_name_too_long_for_the_file_system_is_one_line(cli, tmp_path):
    """A 300-character file name: says which limit it passes, status 1, no OSError traceback."""
    name = str(tmp_path / ("a" * 300 + ".yaml"))
    result = cli("run", name)
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "a name in the path is 305 characters long, more than the 255 a file name may have" in result.stderr
    assert "ENAMETOOLONG" not in result.stderr and len(result.stderr) < 400


def test_a_path_through_a_file_is_one_line(cli, tmp_path):
    """`file.yaml/x.yaml` (ENOTDIR): a part of the path is a file, not a folder."""
    (tmp_path / "file.yaml").write_text(CAT)
    result = cli("run", str(tmp_path / "file.yaml" / "x.yaml"))
    assert result.exit_code == 1
    assert "a part of the path before the name is a file, not a folder" in result.stderr


def test_a_symlink_loop_is_named(cli, tmp_path):
    """Links that lead round in a circle (ELOOP) are named for what they are."""
    (tmp_path / "a.yaml").symlink_to("b.yaml")
    (tmp_path / "b.yaml").symlink_to("a.yaml")
    result = cli("run", str(tmp_path / "a.yaml"))
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "the symbolic links of this path go round in a loop" in result.stderr


def test_a_folder_is_named():
    """A folder given as the scenario file."""
    assert "this is a folder (expected a scenario file (export takes folders))" in refusal(Path(__file__).parent)


def test_a_socket_is_named(tmp_path):
    """A Unix socket cannot be opened as a file: said so, not `No such device or address`."""
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(path))
        assert "this is a socket" in refusal(path)


UNREADABLE = """
import os, sys
from pathlib import Path
from attncli.errors import AttnError
from attncli.sources.reading import read_text

if os.geteuid() == 0:
    os.seteuid(65534)  # root reads everything; as `nobody` the closed folder is closed
try:
    read_text(Path(sys.argv[1]), sys.argv[1], max_bytes=1 << 20)
except AttnError as error:
    print(error)
"""


def test_a_folder_that_cannot_be_entered_is_named():
    """A scenario inside a folder we may not enter (EACCES on a path component): permission denied, and which folder.

    Tests run as root here, who may enter anything, so the check runs in a child that gives
    up root (seteuid to nobody) after its imports; the folders above are opened to everyone
    (pytest's own tmp_path is private to its user).
    """
    with tempfile.TemporaryDirectory() as base:
        os.chmod(base, 0o755)
        closed = Path(base) / "closed"
        closed.mkdir(mode=0o700)
        (closed / "s.yaml").write_text(CAT)
        done = subprocess.run([sys.executable, "-c", UNREADABLE, str(closed / "s.yaml")], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == f"{closed / 's.yaml'}: cannot be read: permission denied: the folder {str(closed)!r} cannot be entered"


@pytest.mark.parametrize(
    ("encoding", "named"),
    [("utf-16", "UTF-16"), ("utf-16-le", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32")],
)
def test_utf16_and_utf32_files_are_named(tmp_path, encoding, named):
    """A file saved as UTF-16 or UTF-32 (with or without a byte-order mark) says so and how to fix it."""
    path = tmp_path / "s.yaml"
    path.write_bytes("tokens: [a]\nembeddings: [[1]]\n".encode(encoding))
    assert refusal(path) == f"{path}:1: {named} text: save it as UTF-8"


def test_a_utf8_byte_order_mark_is_fine(tmp_path):
    """UTF-8 with a byte-order mark (as some Windows editors save it) is read as UTF-8."""
    path = tmp_path / "s.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + CAT.encode())
    assert read_text(path, str(path), max_bytes=1 << 20) == CAT


def test_a_nul_byte_names_its_line(tmp_path):
    """Binary data is refused at the line of the first NUL byte, even beyond the first block."""
    path = tmp_path / "s.yaml"
    path.write_bytes(b"a: 1\n" * 300_000 + b"\x00")
    assert refusal(path, max_bytes=10 << 20) == f"{path}:300001: this is a binary file, not YAML text (expected a UTF-8 text file)"


def test_files_read_are_remembered_for_the_output_check(tmp_path):
    """Each regular file read is remembered by device and inode until the next command."""
    path = tmp_path / "s.yaml"
    path.write_text(CAT)
    reading.forget_files_read()
    read_text(path, str(path), max_bytes=1 << 20)
    info = path.stat()
    assert reading.files_read() == {(info.st_dev, info.st_ino)}
    reading.forget_files_read()
    assert reading.files_read() == set()


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        (errno.EIO, "cannot be read: input/output error"),
        (errno.EACCES, "cannot be read: permission denied"),
        (errno.ENAMETOOLONG, "the file name is too long"),
    ],
)
def test_os_errors_read_as_one_clear_line(code, fragment):
    """reading.os_error turns any OSError into a message a person can act on."""
    assert fragment in str(reading.os_error(OSError(code, os.strerror(code)), "x.yaml"))


# -- size_guard: an over-limit scenario refused before its matrices are parsed --------------

LATER_SYNTAX_ERROR = "embeddings:\n  a: [1, 0\n  b: ]]]\n"  # never reached when the guard refuses first


def guarded_parse(text: str, max_cells: int):
    """yamltree.parse with reading.size_guard, as from_text can call it."""
    from attncli.sources.limits import Limits
    from attncli.sources.yamltree import parse

    limits = Limits(max_cells=max_cells)
    return parse(text, limits=limits, on_top_level=reading.size_guard(text, limits))


def test_too_many_tokens_are_refused_before_the_rest_is_parsed():
    """4 tokens, max 10 cells: refused at the tokens line, before the broken YAML after it is even read."""
    with pytest.raises(AttnError) as caught:
        guarded_parse("tokens: [a, b, c, d]\n" + LATER_SYNTAX_ERROR, max_cells=10)
    assert caught.value.line == 1 and caught.value.text(flag) == (
        "tokens: 4 tokens × 4 × 1 head = 16 attention cells, more than the limit of 10 "
        "(expected a smaller scenario, or raise the limit with --max-cells)"
    )
    assert str(caught.value).endswith("raise the limit with max_cells)")  # the Python API names its keyword


@pytest.mark.parametrize("order", ["heads first", "heads after"])
def test_heads_count_once_they_are_read(order):
    """2 tokens × 2 × 3 heads = 12 cells > 10, whether `heads:` comes before or after the tokens."""
    text = "heads: 3\ntokens: [a, b]\n" if order == "heads first" else "tokens: [a, b]\nheads: 3\n"
    with pytest.raises(AttnError, match="2 tokens × 2 × 3 head"):
        guarded_parse(text + LATER_SYNTAX_ERROR, max_cells=10)


def test_sentence_words_are_counted_as_the_validator_counts_them():
    """Punctuation alone is no word: `a , b . c` is 3 tokens (9 cells, allowed), `a b c d` is 4 (16, refused)."""
    assert guarded_parse("sentence: a , b . c\n", max_cells=10) is not None
    with pytest.raises(AttnError, match="sentence: 4 tokens × 4"):
        guarded_parse("sentence: a b c d\n" + LATER_SYNTAX_ERROR, max_cells=10)


def test_cross_attention_waits_for_the_context():
    """With `context:` the keys are the context's tokens: 4 queries × 1 key is allowed though 4 × 4 would not be."""
    text = "tokens: [a, b, c, d]\ncontext:\n  tokens: [x]\n"
    assert guarded_parse(text, max_cells=10) is not None
    with pytest.raises(AttnError, match="4 tokens × 3 × 1 head"):
        guarded_parse("tokens: [a, b, c, d]\ncontext:\n  tokens: [x, y, z]\n", max_cells=10)


def test_a_scenario_within_the_limit_parses_as_before():
    """Under the limit the guard changes nothing: the same tree as without it."""
    from attncli.sources.yamltree import parse

    tree = guarded_parse(CAT, max_cells=1000)
    assert tree.items.keys() == parse(CAT).items.keys()


def test_heads_after_the_matrices_are_counted_before_the_matrices_are_parsed():
    """`heads: 3` on the last line still refuses 2 tokens × 2 × 3 at the tokens line: the broken matrices are never parsed."""
    with pytest.raises(AttnError, match="2 tokens × 2 × 3 head") as caught:
        guarded_parse("tokens: [a, b]\n" + LATER_SYNTAX_ERROR + "heads: 3\n", max_cells=10)
    assert caught.value.line == 1


@pytest.mark.parametrize(
    ("text", "heads"),
    [
        ("heads: 4\n", 4),
        ("tokens: [a]\n'heads': 2 # two\n", 2),
        ('name: x\n"heads" :  6\n', 6),
        ("description: |\n  heads: 9\n", 1),  # indented: not a top-level key
        ("context:\n  heads: 9\n", 1),
        ("headsup: 3\nxheads: 5\n", 1),
        ("heads: many\n", 1),  # not a count: the validator reports it
    ],
)
def test_heads_hint_reads_only_a_top_level_count(text, heads):
    """heads_hint finds `heads: N` only where it begins a line, quoted or not, and only a whole number."""
    assert reading.heads_hint(text) == heads
