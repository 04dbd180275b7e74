"""--output never loses a file: atomic replacement that keeps mode and owner, links written through, FIFOs and devices written into, read-only files and inputs refused, every write error one line."""

import errno
import os
import select
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from attncli.errors import AttnError
from attncli.io import write_file
from attncli.sources import builtin

CAT = builtin.path("cat").read_text(encoding="utf-8")


def attncli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """The real command in a child process (for what CliRunner cannot show: descriptors, signals, limits)."""
    return subprocess.run([sys.executable, "-m", "attncli", *args], capture_output=True, timeout=60, **kwargs)


def leftovers(folder: Path) -> list[str]:
    """Temporary files a write left in `folder`."""
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def umask():
    """Set the process umask for one test, then put the old one back."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_a_new_file_gets_the_mode_the_umask_gives(tmp_path, umask, mask, mode):
    """A new file is 0666 less the umask, as `>` would make it, not mkstemp's 0600."""
    umask(mask)
    write_file(tmp_path / "out.md", "table\n")
    assert stat.S_IMODE((tmp_path / "out.md").stat().st_mode) == mode


def test_a_replaced_file_keeps_its_mode(tmp_path):
    """Regenerating a 0664 table keeps it 0664, so a web server can still read it."""
    target = tmp_path / "out.md"
    target.write_text("old")
    target.chmod(0o664)
    write_file(target, "new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o664
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another owner")
def test_a_replaced_file_keeps_its_owner(tmp_path):
    """The new file belongs to whoever owned the old one, when we may set that."""
    target = tmp_path / "out.md"
    target.write_text("old")
    os.chown(target, 65534, 65534)
    write_file(target, "new")
    info = target.stat()
    assert (info.st_uid, info.st_gid) == (65534, 65534) and target.read_text() == "new"


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path):
    """--output LINK replaces the file the link leads to; the link itself is untouched."""
    (tmp_path / "real.md").write_text("old")
    link = tmp_path / "link.md"
    link.symlink_to("real.md")
    write_file(link, "new")
    assert link.is_symlink() and os.readlink(link) == "real.md"
    assert (tmp_path / "real.md").read_text() == "new" and leftovers(tmp_path) == []


def test_a_dangling_symlink_creates_its_target(tmp_path):
    """A link to a file that does not exist yet: the file is created where the link points."""
    link = tmp_path / "link.md"
    link.symlink_to("made.md")
    write_file(link, "new")
    assert link.is_symlink() and (tmp_path / "made.md").read_text() == "new"


def test_a_symlink_loop_is_one_error(tmp_path):
    """Links that lead round in a circle are named as such."""
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(AttnError, match="the symbolic links of this path go round in a loop"):
        write_file(tmp_path / "a", "x")


def test_a_fifo_is_written_into_and_stays_a_fifo(tmp_path):
    """A FIFO's reader gets the bytes; the FIFO is not replaced by a file."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    write_file(fifo, "through the pipe\n")
    reader.join(timeout=30)
    assert received == [b"through the pipe\n"] and stat.S_ISFIFO(fifo.lstat().st_mode)


def test_dev_null_is_written_into_not_replaced():
    """-o /dev/null works and /dev/null stays a character device."""
    write_file(Path("/dev/null"), "nothing\n")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_device_is_one_error():
    """-o /dev/full: the device's ENOSPC is one error line."""
    with pytest.raises(AttnError, match="cannot write /dev/full: no space left on device"):
        write_file(Path("/dev/full"), "x" * 10_000)


def test_dev_stderr_receives_the_output_and_survives():
    """-o /dev/stderr writes into this process's stderr; /dev/stderr is never replaced (as root it once was)."""
    before = os.lstat("/dev/stderr")
    done = attncli("run", "cat", "--format", "json", "--output", "/dev/stderr")
    assert done.returncode == 0 and done.stdout == b""
    assert done.stderr.startswith(b'{\n  "schema": "attncli.run/1"')
    after = os.lstat("/dev/stderr")
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)


def test_a_read_only_file_is_refused_unless_forced(tmp_path):
    """A 0444 file is left alone with a clear line; force=True (--force) replaces it and keeps 0444."""
    target = tmp_path / "out.md"
    target.write_text("old")
    target.chmod(0o444)
    with pytest.raises(AttnError, match="cannot write .*out.md: the file is read-only"):
        write_file(target, "new")
    assert target.read_text() == "old"
    write_file(target, "new", force=True)
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o444


def test_a_read_only_file_is_refused_by_the_cli(cli, tmp_path):
    """attncli run -o READ-ONLY: status 1, one line, the file as it was."""
    target = tmp_path / "out.md"
    target.write_text("old")
    target.chmod(0o444)
    result = cli("run", "cat", "--output", str(target))
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1
    assert "the file is read-only" in result.stderr and target.read_text() == "old"


def test_force_replaces_a_read_only_file_from_the_cli(cli, tmp_path):
    """attncli run -o READ-ONLY --force: written, and still read-only afterwards."""
    target = tmp_path / "out.md"
    target.write_text("old")
    target.chmod(0o444)
    result = cli("run", "cat", "--format", "markdown", "--output", str(target), "--force")
    assert result.exit_code == 0, result.stderr
    assert target.read_text().startswith("# cat") and target.stat().st_mode & 0o777 == 0o444


def test_an_oversized_file_is_refused_before_its_matrices_are_parsed(tmp_path):
    """4,097 tokens are refused as soon as `sentence:` is read: the broken matrix after it is never reached."""
    from attncli.errors import AttnError
    from attncli.sources.yaml_scenario import from_text

    words = " ".join(f"w{i}" for i in range(4097))
    with pytest.raises(AttnError, match="attention cells"):
        from_text(f"sentence: {words}\nembeddings: [[1, 0], [oops\n")


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link"])
def test_the_output_cannot_be_the_scenario_being_read(cli, tmp_path, how):
    """-o onto the scenario file (by any name) is refused and the scenario is kept."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(CAT)
    other = tmp_path / "other.yaml"
    if how == "symlink":
        other.symlink_to(scenario)
    elif how == "hard link":
        os.link(scenario, other)
    output = scenario if how == "same path" else other
    result = cli("run", str(scenario), "--output", str(output))
    assert result.exit_code == 1 and "it is an input of this command" in result.stderr
    assert scenario.read_text() == CAT


def test_a_file_a_reader_noted_is_refused_by_any_name(tmp_path):
    """One rule for every input: a file a reader noted as opened (reading.note_read) is refused by a hard link and a symbolic link too."""
    from attncli.sources import reading

    source = tmp_path / "notes.txt"
    source.write_text("keep")
    os.link(source, tmp_path / "hard.txt")
    (tmp_path / "soft.txt").symlink_to(source)
    reading.forget_files_read()
    reading.note_read(source)
    try:
        for name in ("notes.txt", "hard.txt", "soft.txt"):
            with pytest.raises(AttnError, match="it is an input of this command"):
                write_file(tmp_path / name, "new")
    finally:
        reading.forget_files_read()
    assert source.read_text() == "keep"


def test_a_folder_is_refused_with_status_1(cli, tmp_path):
    """-o FOLDER is an output-path problem: status 1 and one line (not Click's usage status 2)."""
    result = cli("run", "cat", "--output", str(tmp_path))
    assert result.exit_code == 1 and "it is a folder" in result.stderr


def test_export_into_a_file_instead_of_a_folder_is_status_1(tmp_path):
    """export --out-dir FILE: one line, status 1 (Click's own check would say 2)."""
    (tmp_path / "file").write_text("")
    done = attncli("export", "cat", "--format", "json", "--out-dir", str(tmp_path / "file"))
    assert done.returncode == 1 and done.stderr.decode().startswith("attncli: error: --out-dir: ")
    assert len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO, errno.EFBIG])
def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path, monkeypatch, code):
    """Disk full, I/O error, size limit: one AttnError, the old file whole, no temporary file left."""
    target = tmp_path / "out.json"
    target.write_text("old")

    def fail(fd, data):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "write", fail)
    with pytest.raises(AttnError, match=f"cannot write .*out.json: {os.strerror(code).lower()}.*; .*out.json is as it was"):
        write_file(target, "new")
    assert target.read_text() == "old" and leftovers(tmp_path) == []


def test_short_writes_are_continued(tmp_path, monkeypatch):
    """A write that takes only part of the bytes is continued until all are written."""
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data[:3])))
    write_file(tmp_path / "out.txt", "a longer text than three bytes\n")
    assert (tmp_path / "out.txt").read_text() == "a longer text than three bytes\n"


def test_a_write_that_writes_nothing_is_an_error(tmp_path, monkeypatch):
    """write() returning 0 for a non-empty buffer would loop for ever: it is a full disk."""
    monkeypatch.setattr(os, "write", lambda fd, data: 0)
    with pytest.raises(AttnError, match="no space left on device"):
        write_file(tmp_path / "out.txt", "x")
    assert leftovers(tmp_path) == []


def test_the_file_size_limit_is_one_line_and_keeps_the_old_file(tmp_path):
    """`ulimit -f 1` (1 KiB) and a 7 KB result: status 1, one line, the old file as it was."""
    target = tmp_path / "out.json"
    target.write_text("old")
    script = f'ulimit -f 1; exec "{sys.executable}" -m attncli run cat --format json --output "{target}"'
    done = subprocess.run(["bash", "-c", script], capture_output=True, timeout=60)
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "file too large (the file size limit, `ulimit -f`, is reached)" in lines[0]
    assert target.read_text() == "old" and leftovers(tmp_path) == []


BIG = "sentence: " + " ".join(f"w{i}" for i in range(64)) + "\nembeddings:\n" + "".join(f"  - [{i % 7}, {i % 5}]\n" for i in range(64))


def _writing_into_a_fifo(tmp_path: Path) -> tuple[subprocess.Popen, int]:
    """attncli writing ~330 KB of JSON into a FIFO (five times its buffer) whose reader took 1 byte: it now waits on a full pipe."""
    scenario = tmp_path / "big.yaml"
    scenario.write_text(BIG)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDWR)  # Linux: opens at once, and read() waits for data rather than seeing end-of-file
    process = subprocess.Popen(
        [sys.executable, "-m", "attncli", "run", str(scenario), "--format", "json", "--output", str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    ready, _, _ = select.select([reader], [], [], 60)  # a bound on a hung child, not a timing
    assert ready and os.read(reader, 1) == b"{"  # attncli is writing
    return process, reader


def test_a_fifo_whose_reader_leaves_is_one_error(tmp_path):
    """The reader of a FIFO goes away mid-write: one line (broken pipe), status 1, the FIFO still a FIFO."""
    process, reader = _writing_into_a_fifo(tmp_path)
    os.close(reader)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1 and stderr.decode().count("\n") == 1
    assert "broken pipe (the reader went away)" in stderr.decode()
    assert stat.S_ISFIFO((tmp_path / "pipe").lstat().st_mode)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_a_write_into_a_fifo_ends_with_one_line(tmp_path, signum):
    """SIGTERM or SIGHUP while the FIFO is full: status 128 + signal, one line, no traceback, no file made."""
    process, reader = _writing_into_a_fifo(tmp_path)
    try:
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
    finally:
        os.close(reader)
    assert process.returncode == 128 + signum
    assert stderr.decode() == f"attncli: stopped by {signal.Signals(signum).name}: {tmp_path / 'pipe'} may hold part of the output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.yaml", "pipe"]


SLOW_WRITER = """
import sys
from pathlib import Path
from attncli.io import write_file

def document():
    yield b"first part of the document\\n"
    print("writing", flush=True)
    sys.stdin.read()  # waits here, the temporary file half written, until the test sends its signal
    yield b"never written\\n"

write_file(Path(sys.argv[1]), document())
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_an_atomic_write_leaves_no_temporary_file(tmp_path, signum):
    """SIGTERM or SIGHUP mid-write: the temporary file is removed, the old file stands, status 128 + signal."""
    target = tmp_path / "out.json"
    target.write_text("old")
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITER, str(target)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )
    assert process.stdout.readline() == b"writing\n"
    assert len(leftovers(tmp_path)) == 1  # the test can fail: there is a temporary file to leave behind
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, stderr
    assert stderr.decode() == f"attncli: stopped by {signal.Signals(signum).name}: {target} is as it was\n"
    assert target.read_text() == "old" and leftovers(tmp_path) == []


def test_a_folder_without_room_for_the_temporary_file_is_named(tmp_path, monkeypatch):
    """The temporary file cannot be made (a folder we may not write in): said so, the old file as it was."""
    import tempfile

    target = tmp_path / "out.md"
    target.write_text("old")

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(AttnError, match="no temporary file can be made in .*: permission denied"):
        write_file(target, "new")
    assert target.read_text() == "old"


def test_a_unix_socket_gets_the_bytes_and_stays_a_socket(tmp_path):
    """`-o some.sock` with a listener behind it: the output goes down the connection; the socket is not replaced."""
    import socket

    path = tmp_path / "out.sock"
    received = bytearray()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listening:
        listening.bind(str(path))
        listening.listen(1)

        def receive() -> None:
            connection, _ = listening.accept()
            with connection:
                while chunk := connection.recv(65536):
                    received.extend(chunk)

        receiver = threading.Thread(target=receive)
        receiver.start()
        write_file(path, "through the socket\n")
        receiver.join(timeout=30)
    assert bytes(received) == b"through the socket\n" and stat.S_ISSOCK(path.stat().st_mode)


def test_ctrl_c_during_an_atomic_write_leaves_no_temporary_file(tmp_path):
    """SIGINT (Ctrl-C) mid-write: the temporary file is removed and the old file stands, as for SIGTERM and SIGHUP."""
    target = tmp_path / "out.json"
    target.write_text("old")
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITER, str(target)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )
    assert process.stdout.readline() == b"writing\n"
    assert len(leftovers(tmp_path)) == 1
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    assert process.returncode != 0
    assert target.read_text() == "old" and leftovers(tmp_path) == []


def test_an_empty_out_dir_or_a_file_as_out_dir_is_one_clear_line(cli, tmp_path, monkeypatch):
    """`export -d ""` is refused (Click would read it as "."), and so is a file given as the folder; nothing is written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("kept", encoding="utf-8")
    for folder, message in (("", "--out-dir: the folder name is empty"), ("file.txt", "'file.txt' is not a folder")):
        result = cli("export", "cat", "-f", "json", "-d", folder)
        assert result.exit_code == 1 and message in result.stderr and result.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


def test_variance_refuses_a_folder_as_output_before_sampling(cli, tmp_path):
    """`variance -o DIR` is refused at once, not after the experiment."""
    result = cli("variance", "--samples", "10000000", "--dims", "4096", "--keys", "2", "-o", str(tmp_path))
    assert result.exit_code == 1 and "it is a folder" in result.stderr


def _ctrl_c_as_in_a_terminal() -> None:
    """In the child: SIGINT does what it does in a terminal, even when these tests run as a background job (which ignores it)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
