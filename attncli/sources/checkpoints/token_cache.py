"""A cache of the tokenizers attncli builds from GGUF files' metadata: built once per file, not once per command.

Where: `$ATTNCLI_CACHE_DIR`, else `$XDG_CACHE_HOME/attncli`, else `~/.cache/attncli`; the entries are
`tokenizers/*.json`, one per GGUF file (named by a hash of its resolved path). `attncli model cache` shows
them and `attncli model cache --clear` removes them; deleting the folder does the same.

Never trusted over the file: an entry is used only when the file still has the size and modification
time it had, and the SHA-256 of its header (the metadata, where the vocabulary, merges and special tokens
are, and the tensor list: every byte before the tensor data) is the one the entry was built from. The
header is hashed again at every use, a few MB. An entry that is unreadable, truncated or altered (it
carries a SHA-256 of its own tokenizer), or that was written by another version of the code that checks
the file and builds its tokenizer (`BUILT_BY`) or of the tokenizers library, is ignored and rebuilt. Entries are written atomically (a temporary
file renamed over the entry), so a command stopped mid-write leaves no half entry for the next.

A sentence's tokens are kept too (`tokenizers/sentences/*.json`, named by a hash of what the tokenizer is built from, the
special-tokens setting and the text, and holding all three): a command that runs a sentence this file's tokenizer has
already tokenized skips building the tokenizer (the library reads a 49,152-token vocabulary and its merges in about
0.1 s). What a GGUF file's tokenizer is built from is its header, named by the SHA-256 of its bytes (the header walk
hashes them at every use, below), so a changed file forgets its sentences with it; the entries are checked against the
same code and library versions as a tokenizer's. The `MOST_SENTENCES` written last are kept.

A folder's tokenizer.json runs in a child process (tokenizer_process.py), which costs more than building a GGUF file's
tokenizer; the tokens it gave are remembered the same way, named by the SHA-256 of the tokenizer.json's bytes.

A GGUF file's walked header is kept as well (`headers/*.json`: where each metadata value lies and each tensor's type, shape
and bytes, as gguf_header's walk found them), checked the same way: the file's identity, the SHA-256 of its header bytes and
a hash of the walk's own code. Stepping over a 49,152-token vocabulary and its merges, string by string, is most of the
walk (about 25 ms of a command's CPU on SmolLM2, and more in proportion to a larger vocabulary).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from attncli.sources.checkpoints.tokens import CheckpointTokenizer

SCHEMA = "attncli.tokenizer-cache/1"
ENV = "ATTNCLI_CACHE_DIR"
FOLDER = "tokenizers"
MOST_BYTES = 1 << 30  # an entry larger than any real vocabulary's tokenizer is not read
SENTENCES = "sentences"  # the tokens of sentences, in a folder inside FOLDER
SENTENCE_SCHEMA = "attncli.sentence-tokens/1"
MOST_SENTENCES = 512  # sentences remembered; past it the oldest written are removed
MOST_SENTENCE_BYTES = 64 << 20  # a remembered sentence larger than the longest text's tokens is not read
_HASH_BLOCK = 1 << 22
HEADERS = "headers"  # walked GGUF headers, a folder beside FOLDER
HEADER_SCHEMA = "attncli.gguf-header/1"
WALKED_BY = ("gguf_header.py", "gguf_quants.py")  # the code that walks and checks a header
MOST_HEADER_BYTES = 64 << 20  # a walked header larger than any real file's (tens of thousands of tensors) is not read


class Built(NamedTuple):
    """A tokenizer just built from a file, and where that file's header ends (the bytes the entry is checked against)."""

    tokenizer: CheckpointTokenizer
    header_bytes: int


def cache_dir() -> Path:
    """$ATTNCLI_CACHE_DIR, else $XDG_CACHE_HOME/attncli, else ~/.cache/attncli."""
    configured = os.environ.get(ENV)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg and Path(xdg).is_absolute() else Path.home() / ".cache") / "attncli"


def entries() -> list[Path]:
    """The cached tokenizers' files, oldest name first."""
    folder = cache_dir() / FOLDER
    try:
        return sorted(p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith(".") and p.is_file())
    except OSError:
        return []


def sentence_entries() -> list[Path]:
    """The remembered sentences' files."""
    return _files(cache_dir() / FOLDER / SENTENCES)


def header_entries() -> list[Path]:
    """The walked headers' files."""
    return _files(cache_dir() / HEADERS)


def _files(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith(".") and p.is_file()]
    except OSError:
        return []


def clear() -> tuple[int, int, int, int]:
    """Remove every cached tokenizer, remembered sentence and walked header (and any temporary file a stopped command left);
    (tokenizers, sentences and headers removed, bytes freed)."""
    counts = [0, 0, 0]
    freed = 0
    for kind, folder in enumerate((cache_dir() / FOLDER, cache_dir() / FOLDER / SENTENCES, cache_dir() / HEADERS)):
        with contextlib.suppress(OSError):
            for path in folder.iterdir():
                temporary = path.name.startswith(".tmp")
                if path.is_file() and (path.suffix == ".json" or temporary):
                    with contextlib.suppress(OSError):
                        size = path.stat().st_size
                        path.unlink()
                        counts[kind] += not temporary
                        freed += size
    for folder in (cache_dir() / FOLDER / SENTENCES, cache_dir() / HEADERS):
        with contextlib.suppress(OSError):
            folder.rmdir()  # once empty
    return counts[0], counts[1], counts[2], freed


def tokenizer(path: Path, build: Callable[[], Built]) -> CheckpointTokenizer:
    """The tokenizer of the GGUF file at `path`: from its cache entry when that still matches the file, else `build()`, then cached."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return build().tokenizer  # which says what to install
    identity = _identity(path)
    entry = _entry_path(identity[0]) if identity is not None else None
    if identity is not None and entry is not None:
        found = _load(entry, identity, Tokenizer)
        if found is not None:
            return found
    built = build()
    if identity is not None and entry is not None:
        _store(entry, identity, built)
    return built.tokenizer


BUILT_BY = ("gguf_tokens.py", "tokens.py", "gguf.py", "gguf_header.py", "tokenizer_process.py")  # the code that builds and runs a tokenizer


def walked_header(path: Path, data: Any) -> tuple[dict[str, Any], str] | None:
    """The walk `keep_header` kept for the GGUF file at `path` (mapped as `data`) while the file still has its identity and
    header bytes and the walk's code is the same, and the SHA-256 of those bytes; None (a miss) for anything else, never an error."""
    identity = _identity(path)
    if identity is None:
        return None
    doc, walker = _read(_header_path(identity[0]), MOST_HEADER_BYTES), _code(WALKED_BY)
    if doc is None or walker is None or doc.get("schema") != HEADER_SCHEMA or doc.get("walker") != walker:
        return None
    resolved, size, mtime_ns = identity
    if doc.get("file") != resolved or doc.get("size") != size or doc.get("mtime_ns") != mtime_ns:
        return None
    header = doc.get("header")
    if not isinstance(header, dict) or not isinstance(header.get("data_start"), int) or not 0 < header["data_start"] <= size:
        return None
    digest = hashlib.sha256(data[: header["data_start"]]).hexdigest()
    return (header, digest) if digest == doc.get("header_sha256") else None


def keep_header(path: Path, header: dict[str, Any], sha256: str) -> None:
    """Keep the walk `header` (JSON values, with its data_start) of the GGUF file at `path`, whose header bytes have that
    SHA-256; atomically, no error when it cannot be."""
    identity, walker = _identity(path), _code(WALKED_BY)
    if identity is None or walker is None:
        return
    resolved, size, mtime_ns = identity
    doc = {"schema": HEADER_SCHEMA, "walker": walker, "file": resolved, "size": size, "mtime_ns": mtime_ns, "header_sha256": sha256, "header": header}
    _write(_header_path(resolved), doc)


def _header_path(resolved: str) -> Path:
    return cache_dir() / HEADERS / (hashlib.sha256(resolved.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ".json")


@functools.cache
def _code(names: tuple[str, ...]) -> str | None:
    """attncli's version and a hash of these modules of this folder (read, not imported); None when one cannot be read."""
    from attncli import __version__

    digest = hashlib.sha256()
    try:
        for name in names:
            digest.update(Path(__file__).with_name(name).read_bytes())
    except OSError:
        return None
    return f"attncli {__version__}, code {digest.hexdigest()[:16]}"


@functools.cache
def _builder() -> str:
    """What built an entry: attncli's version, the tokenizers library's, and a hash of the code that checks a GGUF file and
    rebuilds its tokenizer (read, not imported: gguf_tokens imports this module), so that a change to either is a miss."""
    return f"{_code(BUILT_BY) or 'code unknown'}, tokenizers {_library_version()}"


def _library_version() -> str:
    """The installed tokenizers library's version, from the name of its one distribution folder beside it (found without
    importing the library, which costs a short command a twentieth of its time); else as the library says when imported;
    "missing" without it (no entry matches: the tokenizer is built, and says what to install)."""
    import importlib.util

    spec = importlib.util.find_spec("tokenizers")
    if spec is not None and spec.origin is not None:
        site = os.path.dirname(os.path.dirname(spec.origin))
        with contextlib.suppress(OSError):
            found = [name for name in os.listdir(site) if name.startswith("tokenizers-") and name.endswith(".dist-info")]
            if len(found) == 1:
                return found[0].removeprefix("tokenizers-").removesuffix(".dist-info")
    try:
        import tokenizers
    except ImportError:
        return "missing"
    return str(tokenizers.__version__)


def _identity(path: Path) -> tuple[str, int, int] | None:
    """(resolved path, size, modification time in ns) of a regular file, else None (nothing is cached for it)."""
    try:
        info = path.stat()
        resolved = os.path.realpath(path)
    except OSError:
        return None
    if not path.is_file():
        return None
    return resolved, info.st_size, info.st_mtime_ns


def _entry_path(resolved: str) -> Path:
    return cache_dir() / FOLDER / (hashlib.sha256(resolved.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ".json")


def prefix_sha256(path: Path, n: int) -> str | None:
    """SHA-256 of the file's first `n` bytes (a GGUF file's header: everything before the tensor data), or None when it
    has fewer or cannot be read."""
    digest = hashlib.sha256()
    left = n
    try:
        with path.open("rb") as stream:
            while left > 0:
                chunk = stream.read(min(_HASH_BLOCK, left))
                if not chunk:
                    return None
                digest.update(chunk)
                left -= len(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def tokenizer_file_id(path: Path) -> str | None:
    """A folder's tokenizer.json named by its bytes (their SHA-256, hashed at every use), for `remembered` and `remember`;
    None when it cannot be read or is larger than a tokenizer is."""
    digest = hashlib.sha256(b"tokenizer.json ")
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MOST_BYTES:  # a FIFO or a device would block or never end
            return None
        with path.open("rb") as stream:
            while chunk := stream.read(_HASH_BLOCK):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _sentence_path(tokenizer: str, text: str, special_tokens: bool) -> Path:
    key = json.dumps([tokenizer, special_tokens, text], ensure_ascii=False).encode("utf-8", "surrogatepass")
    return cache_dir() / FOLDER / SENTENCES / (hashlib.sha256(key).hexdigest()[:32] + ".json")


def remembered(tokenizer: str, text: str, special_tokens: bool) -> dict[str, Any] | None:
    """The tokens remembered for `text` from the tokenizer named `tokenizer` (the SHA-256 of what it is built from: a GGUF
    file's header bytes, a folder's tokenizer.json bytes), as `remember` was given them; None (a miss) for anything else,
    never an error."""
    doc = _read(_sentence_path(tokenizer, text, special_tokens), MOST_SENTENCE_BYTES)
    if doc is None or doc.get("schema") != SENTENCE_SCHEMA or doc.get("builder") != _builder():
        return None
    if doc.get("tokenizer") != tokenizer or doc.get("special_tokens") is not special_tokens or doc.get("text") != text:
        return None
    tokens = doc.get("tokens")
    return tokens if isinstance(tokens, dict) else None


def remember(tokenizer: str, text: str, special_tokens: bool, tokens: dict[str, Any]) -> None:
    """Keep `tokens` (JSON values) for `text`, atomically, and drop the oldest sentences past MOST_SENTENCES; a cache that
    cannot be written is no error."""
    doc = {"schema": SENTENCE_SCHEMA, "builder": _builder(), "tokenizer": tokenizer, "special_tokens": special_tokens, "text": text, "tokens": tokens}
    _write(_sentence_path(tokenizer, text, special_tokens), doc)
    kept = sentence_entries()
    if len(kept) > MOST_SENTENCES:
        with contextlib.suppress(OSError):
            kept.sort(key=lambda p: p.stat().st_mtime_ns)
        for old in kept[: len(kept) - MOST_SENTENCES]:
            with contextlib.suppress(OSError):
                old.unlink()


def _load(entry: Path, identity: tuple[str, int, int], tokenizer_class: Any) -> CheckpointTokenizer | None:
    """The entry's tokenizer when every check passes; None (a miss) for anything else, never an error."""
    doc = _checked(entry, identity)
    if doc is None:
        return None
    not_applied = doc.get("not_applied")
    try:
        built = tokenizer_class.from_str(doc["tokenizer"])
    except Exception:  # the tokenizers library's own error for a file it cannot read
        return None
    return CheckpointTokenizer(built, not_applied if isinstance(not_applied, str) else None)


def _checked(entry: Path, identity: tuple[str, int, int]) -> dict[str, Any] | None:
    """The entry's document when every check against the file passes (all but building its tokenizer); None otherwise."""
    doc = _read(entry, MOST_BYTES)
    if doc is None or doc.get("schema") != SCHEMA or doc.get("builder") != _builder():
        return None
    resolved, size, mtime_ns = identity
    if doc.get("file") != resolved or doc.get("size") != size or doc.get("mtime_ns") != mtime_ns:
        return None
    text, header_bytes = doc.get("tokenizer"), doc.get("header_bytes")
    if (
        not isinstance(text, str)
        or not isinstance(header_bytes, int)
        or isinstance(header_bytes, bool)
        or not 0 < header_bytes <= size
    ):
        return None
    if hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() != doc.get("tokenizer_sha256"):
        return None
    if prefix_sha256(Path(resolved), header_bytes) != doc.get("header_sha256"):
        return None
    return doc


def _store(entry: Path, identity: tuple[str, int, int], built: Built) -> None:
    """Write the entry atomically; a cache that cannot be written is no error (the next command builds again)."""
    resolved, size, mtime_ns = identity
    header_hash = prefix_sha256(Path(resolved), built.header_bytes)
    if header_hash is None:
        return
    text = built.tokenizer.tokenizer.to_str()
    doc = {
        "schema": SCHEMA,
        "builder": _builder(),
        "file": resolved,
        "size": size,
        "mtime_ns": mtime_ns,
        "header_bytes": built.header_bytes,
        "header_sha256": header_hash,
        "not_applied": built.tokenizer.not_applied,
        "tokenizer_sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        "tokenizer": text,
    }
    _write(entry, doc)


def _read(entry: Path, most: int) -> dict[str, Any] | None:
    """The JSON object at `entry` when it can be read and is at most `most` bytes; None (a miss) otherwise, never an error."""
    try:
        info = entry.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > most:  # a FIFO or a device would block or never end
            return None
        doc = json.loads(entry.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def _write(entry: Path, doc: dict[str, Any]) -> None:
    """`doc` as JSON at `entry`, atomically (a temporary file renamed over it); nothing when the folder cannot be written."""
    import tempfile  # only on a miss: a remembered sentence never writes

    try:
        entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, temporary = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as stream:
                json.dump(doc, stream, ensure_ascii=False)
            os.replace(temporary, entry)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except (OSError, ValueError):  # ValueError: text UTF-8 cannot hold (a lone surrogate from an undecodable argument)
        return
