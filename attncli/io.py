"""Where output goes: stdout, or a file that is never lost, and the one place errors are printed.

Everything is rendered first and written at the end, so an error never leaves half a result
in a file. How `--output PATH` is written depends on what PATH is:

- a regular file, or nothing yet: a temporary file in the same folder, flushed to disk, then
  renamed over it: the old file is whole until the new one is; it keeps its mode and owner,
  a new file gets the mode the umask gives;
- a symbolic link: written through to the file it leads to (the link stays a link);
- `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`: written into that open descriptor;
- a FIFO, a character device (`/dev/null`, a terminal) or a Unix socket: written into, never replaced;
- a folder, a block device, a read-only file (unless forced) or an input of the command: refused.

One rule says what an input is, for every command: a file the command opened to read (a scenario, a
checkpoint's config.json, tokenizer.json and safetensors files with every shard its index names, a GGUF
file), by whatever name (a hard link, a symbolic link, another path): each reader notes the file's
device and inode when it opens it (sources/reading.note_read), and no output may replace one of them.

Every failed or short write is one AttnError and the old file stays as it was; SIGTERM or
SIGHUP during a write removes the temporary file and ends with status 128 + the signal.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import FrameType

from attncli.errors import AttnError, keyword, option, shorten, visible

Content = str | bytes | Iterable[bytes]  # text, a binary file (PNG), or UTF-8 chunks (formats.Document)


def emit(
    document: Content,
    output: Path | None = None,
    *,
    force: bool = False,
) -> None:
    """Write a finished document (text, a binary file, or UTF-8 chunks) to stdout, or to `output` (see the module's docstring).

    `output` may be no input of the command (the files it opened, reading.files_read). `force` replaces a read-only file.
    """
    if output is not None:
        write_file(output, document, force=force)
    else:
        write_stdout(document)


def write_stdout(document: Content) -> None:
    """The document on stdout; a full disk or a closed stdout is an AttnError, a reader gone is BrokenPipeError."""
    stream = sys.stdout
    if stream is None:  # started with stdout closed (`>&-`)
        raise AttnError("stdout is closed, so there is nowhere to print the result", expected=f"an open stdout, or {option('output')} FILE")
    binary = getattr(stream, "buffer", None)
    fd = _descriptor_of(stream)
    if fd is not None:
        _refuse_binary_on_terminal(document, fd)
    try:
        stream.flush()
        if fd is not None:  # straight to the descriptor, every byte or an error: Python's buffered writer drops the rest of a short write silently (`ulimit -f`)
            _write_all(fd, _chunks(document))
            return
        for chunk in _chunks(document):
            if binary is not None:
                binary.write(chunk)
            else:  # a text-only stdout, e.g. one swapped in by a test
                stream.write(chunk.decode("utf-8"))
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        silence_stdout()  # what is still buffered would fail again when Python exits
        raise AttnError(f"cannot write to stdout: {_reason(error)}; the output is incomplete") from None


def _refuse_binary_on_terminal(document: Content, fd: int) -> None:
    """A binary document (a PNG) written to a terminal is one AttnError: its bytes would garble the screen."""
    if isinstance(document, bytes) and os.isatty(fd):
        raise AttnError("a PNG is binary and is not printed on a terminal", key=option("format"),
                        expected=f"{option('output')} FILE.png, or a pipe or redirection (> FILE.png)")  # fmt: skip


def check_binary_target(path: Path | None) -> None:
    """Refuse at once a binary document bound for a terminal's stdout, as write_stdout would after the work (see check_target)."""
    fd = _descriptor_of(sys.stdout) if path is None and sys.stdout is not None else None
    if fd is not None:
        _refuse_binary_on_terminal(b"", fd)


def _descriptor_of(stream: object) -> int | None:
    """The file descriptor under a standard stream, or None when it has none (a test's in-memory stream)."""
    try:
        fileno = stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None
    return fileno if isinstance(fileno, int) else None


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that what is left in its buffer is flushed quietly at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _chunks(document: Content) -> Iterator[bytes]:
    if isinstance(document, str):
        yield document.encode("utf-8")
    elif isinstance(document, bytes):
        yield document
    else:
        yield from document


def write_file(
    path: Path,
    document: Content,
    *,
    force: bool = False,
    key: str = option("output"),
) -> None:
    """Write `document` to `path` without ever losing what was there (see the module's docstring), or raise AttnError."""
    descriptor = _descriptor_number(path)
    if descriptor is not None:
        with _stopped_by_signals(path, replaced=False):
            _write_descriptor(descriptor, path, document, key)
        return
    target = _resolve(path, key)
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise _write_error(path, error, key, kept=False) from None
    if info is None or stat.S_ISREG(info.st_mode):
        if info is not None:
            _check_replaceable(path, target, info, force=force, key=key)
        with _stopped_by_signals(path, replaced=True):
            _replace(path, target, info, document, key)
    elif stat.S_ISDIR(info.st_mode):
        raise AttnError(f"cannot write {_named(path)}: it is a folder", key=key, expected="a file name")
    elif stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode) or stat.S_ISSOCK(info.st_mode):
        with _stopped_by_signals(path, replaced=False):
            _write_into(path, target, info, document, key)
    else:
        raise AttnError(f"cannot write {_named(path)}: it is a block device", key=key, expected="a file; attncli does not write onto disks")


write_atomic = write_file  # the name `export` knows it by


# -- what the path is ------------------------------------------------------------------------

_DESCRIPTOR = re.compile(r"/(?:dev/fd|proc/self/fd|proc/thread-self/fd)/(\d+)")
_STANDARD = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def _descriptor_number(path: Path) -> int | None:
    """N when `path` is, or links to, /dev/stdout, /dev/stderr, /dev/fd/N or /proc/self/fd/N."""
    where = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        match = _DESCRIPTOR.fullmatch(where)
        if match or where in _STANDARD:
            return int(match.group(1)) if match else _STANDARD[where]
        try:
            link = os.readlink(where)
        except OSError:
            return None
        where = os.path.normpath(os.path.join(os.path.dirname(where), link))
    return None


def check_target(path: Path | None, key: str = option("output")) -> None:
    """Refuse at once an output path that write_file would refuse whatever is written (a folder, a missing folder).

    For commands that work long before they write, so that a typo costs nothing.
    """
    if path is None or _descriptor_number(path) is not None:
        return
    target = _resolve(path, key)
    if target.is_dir():
        raise AttnError(f"cannot write {_named(path)}: it is a folder", key=key, expected="a file name")


def _resolve(path: Path, key: str) -> Path:
    """The file `path` names once every symbolic link is followed (it may not exist yet)."""
    try:
        target = Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:
        target = Path(os.path.realpath(path))
    except OSError as error:
        raise _write_error(path, error, key, kept=False) from None
    folder = target.parent
    if not folder.is_dir():
        shown = str(path.parent) if target == path.absolute() else str(folder)
        raise AttnError(
            f"cannot write {_named(path)}: the folder {shown or '.'!r} does not exist",
            key=key,
            expected="an existing folder; create it first",
        )
    return target


def _check_replaceable(path: Path, target: Path, info: os.stat_result, *, force: bool, key: str) -> None:
    """Refuse to replace an input of this command (a file it opened, by any name), or a read-only file unless `force`."""
    from attncli.sources import reading

    if (info.st_dev, info.st_ino) in reading.files_read():
        raise AttnError(
            f"cannot write {_named(path)}: it is an input of this command, which would be lost",
            key=key,
            expected="another file name for the output",
        )
    effective = os.access in os.supports_effective_ids
    if not force and (info.st_mode & 0o222 == 0 or not os.access(target, os.W_OK, effective_ids=effective)):
        raise AttnError(
            f"cannot write {_named(path)}: the file is read-only",
            key=key,
            expected=f"a writable file: make it writable (chmod u+w), or pass {option('force')} to replace it",
        )


# -- writing ---------------------------------------------------------------------------------


def _replace(path: Path, target: Path, info: os.stat_result | None, document: Content, key: str) -> None:
    """Write a temporary file beside `target`, flush it to disk, then rename it over `target`."""
    import tempfile

    temporary: str | None = None
    fd = -1
    try:
        with _signals_held():  # a signal now would find the temporary file made but not yet named
            try:
                fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            except OSError as error:
                raise AttnError(
                    f"cannot write {_named(path)}: no temporary file can be made in {str(target.parent)!r}: {_reason(error)}",
                    key=key,
                    expected="a folder attncli may write in: the new file is written beside the old one, then renamed over it",
                ) from None
        _take_over_attributes(fd, info)
        _write_all(fd, _chunks(document))
        os.fsync(fd)
        os.close(fd)
        fd = -1
        with _signals_held():
            os.replace(temporary, target)
            temporary = None
        _sync_folder(target.parent)
    except OSError as error:
        raise _write_error(path, error, key, kept=info is not None) from None
    finally:
        if fd >= 0:
            os.close(fd)
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def _take_over_attributes(fd: int, info: os.stat_result | None) -> None:
    """The old file's owner and mode; for a new file, the mode the umask gives (mkstemp makes 0600)."""
    if info is None:
        umask = os.umask(0o022)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        return
    mine = os.fstat(fd)
    if (mine.st_uid, mine.st_gid) != (info.st_uid, info.st_gid):
        try:
            os.fchown(fd, info.st_uid, info.st_gid)
        except PermissionError:  # only root gives files away; the group may still be ours to set
            with contextlib.suppress(OSError):
                os.fchown(fd, -1, info.st_gid)
    os.fchmod(fd, stat.S_IMODE(info.st_mode))  # after chown, which clears set-user-ID bits


def _sync_folder(folder: Path) -> None:
    """Flush the rename to disk too (best effort: not every file system can sync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_into(path: Path, target: Path, info: os.stat_result, document: Content, key: str) -> None:
    """Write into a FIFO, a character device or a socket as they are: nothing is replaced."""
    try:
        if stat.S_ISSOCK(info.st_mode):
            import socket

            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.connect(str(target))
                for chunk in _chunks(document):
                    connection.sendall(chunk)
            return
        fd = os.open(target, os.O_WRONLY | os.O_CLOEXEC | os.O_NOCTTY)  # a FIFO waits here for its reader
        try:
            _refuse_binary_on_terminal(document, fd)  # -o /dev/tty
            _write_all(fd, _chunks(document))
        finally:
            os.close(fd)
    except OSError as error:
        raise _write_error(path, error, key, kept=False, into=True) from None


def _write_descriptor(descriptor: int, path: Path, document: Content, key: str) -> None:
    """Write into an open descriptor of this process (`-o /dev/stderr`)."""
    try:
        os.fstat(descriptor)
    except OSError:
        raise AttnError(f"cannot write {_named(path)}: descriptor {descriptor} is not open", key=key) from None
    if descriptor == 1 and sys.stdout is not None:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
    _refuse_binary_on_terminal(document, descriptor)  # -o /dev/stdout on a terminal
    try:
        _write_all(descriptor, _chunks(document))
    except OSError as error:
        raise _write_error(path, error, key, kept=False, into=True) from None


def _write_all(fd: int, chunks: Iterable[bytes]) -> None:
    """Every byte, or OSError: a short write is retried, and one that writes nothing is a full disk."""
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            written = os.write(fd, view)
            if written == 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            view = view[written:]


def _named(path: Path | str) -> str:
    """A path in a write error, its end kept when long: the 300-character error line would otherwise end inside the name."""
    return shorten(str(path), 120, keep_end=True)


def _reason(error: OSError) -> str:
    """The system's reason in lower case, with a hint where one helps."""
    hints = {
        errno.EFBIG: " (the file size limit, `ulimit -f`, is reached)",
        errno.EPIPE: " (the reader went away)",
        errno.EROFS: " (the file system is mounted read-only)",
    }
    reason = (error.strerror or str(error)).lower() + hints.get(error.errno or 0, "")
    if error.errno == errno.ENAMETOOLONG:
        reason = "the file name is too long"
    elif error.errno == errno.ELOOP:
        reason = "the symbolic links of this path go round in a loop"
    elif error.errno == errno.ENOTDIR:
        reason = "a part of the path before the name is a file, not a folder"
    return reason


def _write_error(path: Path, error: OSError, key: str, *, kept: bool, into: bool = False) -> AttnError:
    if kept:
        outcome = f"; {path} is as it was"
    elif into:
        outcome = ""
    else:
        outcome = "; nothing was written"
    return AttnError(f"cannot write {_named(path)}: {_reason(error)}{outcome}", key=key)


# -- signals ---------------------------------------------------------------------------------


class _Stopped(BaseException):
    """SIGTERM or SIGHUP arrived during a write: unwinds through the clean-up, then ends the process."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_STOPPING = (signal.SIGTERM, signal.SIGHUP)


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise _Stopped(signum)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def _stopped_by_signals(path: Path, *, replaced: bool) -> Iterator[None]:
    """Around a write: SIGTERM or SIGHUP removes the temporary file, says so and exits with 128 + the signal."""
    if not _main_thread():  # only the main thread may set handlers
        yield
        return
    previous = {signum: signal.signal(signum, _raise_stopped) for signum in _STOPPING}
    try:
        yield
    except _Stopped as stopped:
        name = signal.Signals(stopped.signum).name
        outcome = f"{path} is as it was" if replaced else f"{path} may hold part of the output"
        print_line(f"attncli: stopped by {name}: {outcome}")
        raise SystemExit(128 + stopped.signum) from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold back SIGINT, SIGTERM and SIGHUP for a moment; they are handled as soon as it is over."""
    if not _main_thread():
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, *_STOPPING})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


# -- errors ----------------------------------------------------------------------------------


def print_error(error: AttnError | str, names: Callable[[str], str] = keyword) -> None:
    """One line on stderr: `attncli: error: FILE:LINE: key: what is wrong (what was expected)`.

    Control characters are made visible and the line is kept short (see AttnError.one_line);
    options are named as `names` says (the command line passes its flags).
    """
    if isinstance(error, str):
        error = AttnError(error)
    print_line(f"attncli: error: {error.one_line(names=names)}")


def print_internal_error(error: BaseException, names: Callable[[str], str] = keyword) -> None:
    """A bug of attncli: one line that names it, instead of a traceback."""
    from attncli.errors import shorten

    what = shorten(visible(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__), 200)
    print_line(f"attncli: internal error: {what} (run with {names('traceback')} to see where)")


def print_line(text: str) -> None:
    """`text` and a newline on stderr, if there is a stderr to write to."""
    if sys.stderr is None:
        return
    try:
        sys.stderr.write(visible(text) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
