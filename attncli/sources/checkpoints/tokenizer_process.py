"""A checkpoint's tokenizer.json run in a child process with a memory and CPU limit: whatever the file does, one clear line.

tokenizer.json is a program as much as data: its normalizers, pre-tokenizer regexes and model
run inside the Rust `tokenizers` library, which cannot be bounded from Python. A normalizer
that doubles the text forty times aborts the process on a failed allocation (SIGABRT, no
Python exception); an empty-matching Replace regex panics (pyo3_runtime.PanicException,
a BaseException); a word-level vocabulary without its unknown token raises a plain Exception.
So attncli never runs it in its own process. A child process:

- limits itself first (RLIMIT_AS: `memory_limit()` of address space, RLIMIT_CPU: `CPU_SECONDS`,
  no core file), so an expanding normalizer or a regex that backtracks forever ends the child,
  not the machine;
- reads tokenizer.json through the bounded reader (a regular file of at most `MAX_BYTES`, JSON
  within the nesting and number limits), then loads and runs it;
- sends back JSON: the ids, labels and pieces, or the error as one line; a text that gives
  more than `max_tokens` tokens sends back only the count.

The parent turns a failure, a panic, an abort or a limit hit into an AttnError naming
tokenizer.json. Anything else the child meets (a bug of attncli) stays an internal error.
Start-up costs about 35 ms.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from attncli.errors import AttnError
from attncli.sources import reading

BASE_MEMORY = 512 * 1024**2  # address space of the child, plus MEMORY_PER_BYTE for each byte of tokenizer.json:
MEMORY_PER_BYTE = 12  # a 35 MB tokenizer.json of 262,144 tokens peaks at 350 MB (measured), so 930 MB leaves room
CPU_SECONDS = 60
WALL_SECONDS = 180
MAX_BYTES = 256 * 1024 * 1024  # tokenizer.json itself (Gemma 3's is 33 MB)
MAX_TEXT_CHARACTERS = 1_000_000  # the text to tokenize (a command-line argument is at most 128 KiB anyway)
PROBE_TEXT = "The cat sat on the mat."


class Tokenized(NamedTuple):
    """A text's tokens from a checkpoint's tokenizer, and what tokenizer.json asked for that was not applied."""

    ids: tuple[int, ...]
    labels: tuple[str, ...]
    pieces: tuple[str, ...]  # the tokenizer's own spelling of each token
    not_applied: str | None
    vocabulary: int = 0  # tokens in the model's vocabulary, added tokens left out
    special_ids: tuple[int, ...] = ()  # the ids of the special tokens ([CLS], <s>, …)

    def as_json(self) -> dict[str, Any]:
        """The tokens as JSON values, for the token cache; `from_json` reads them back."""
        return {"ids": list(self.ids), "labels": list(self.labels), "pieces": list(self.pieces), "not_applied": self.not_applied,
                "vocabulary": self.vocabulary, "special_ids": list(self.special_ids)}  # fmt: skip

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Tokenized | None:
        """`as_json`'s values back as Tokenized, or None when any is not what it wrote (a damaged cache entry)."""
        ids, labels, pieces, special = doc.get("ids"), doc.get("labels"), doc.get("pieces"), doc.get("special_ids")
        not_applied, vocabulary = doc.get("not_applied"), doc.get("vocabulary")

        def whole(xs: object) -> bool:
            return isinstance(xs, list) and all(type(x) is int and x >= 0 for x in xs)

        def texts(xs: object) -> bool:
            return isinstance(xs, list) and isinstance(ids, list) and len(xs) == len(ids) and all(isinstance(x, str) for x in xs)

        if not (whole(ids) and whole(special) and texts(labels) and texts(pieces) and type(vocabulary) is int):
            return None
        if not_applied is not None and not isinstance(not_applied, str):
            return None
        return cls(tuple(ids), tuple(labels), tuple(pieces), not_applied, vocabulary, tuple(special))  # type: ignore[arg-type]


def tokenize(
    folder: Path, text: str, *, special_tokens: bool, max_tokens: int, too_many: Callable[[int], AttnError] | None = None
) -> Tokenized:
    """The tokens of `text` from `folder`/tokenizer.json, run in a bounded child process.

    More than `max_tokens` tokens is `too_many(count)` (an AttnError) raised, or, without it, a plain one.
    """
    from attncli.sources.checkpoints import token_cache

    check_text(text)
    path = tokenizer_path(folder)

    def name() -> str | None:  # the file by its bytes: the tokens of a text this very file gave before are remembered
        found = None if _library_missing() else token_cache.tokenizer_file_id(path)
        if found is not None:
            reading.note_read(path)  # read on this command's behalf, as the child reads it: no output may replace it
        return found

    def tokenized() -> Tokenized:
        reply = _run(folder, {"text": text, "special_tokens": special_tokens, "max_tokens": max_tokens})
        if "count" in reply:
            raise too_many_tokens(int(reply["count"]), max_tokens, too_many)
        return Tokenized(tuple(reply["ids"]), tuple(reply["labels"]), tuple(reply["pieces"]), reply["not_applied"], reply["vocabulary"],
                         tuple(reply["special_ids"]))  # fmt: skip

    return through_cache(name, text, special_tokens, max_tokens, too_many, tokenized)


def through_cache(name: Callable[[], str | None], text: str, special_tokens: bool, max_tokens: int,
                  too_many: Callable[[int], AttnError] | None, tokenize: Callable[[], Tokenized]) -> Tokenized:  # fmt: skip
    """The tokens of `text` by the tokenizer `name()` names (token_cache: a GGUF file's header, a tokenizer.json's bytes; None:
    unnamed): remembered in the token cache, else `tokenize()`, remembered when the name is the same after it (the file it
    read unchanged meanwhile). More than `max_tokens` tokens is `too_many_tokens`."""
    from attncli.sources.checkpoints import token_cache

    known = name()
    tokens = remembered(known, text, special_tokens)
    if tokens is None:
        tokens = tokenize()
        if known is not None and name() == known:
            token_cache.remember(known, text, special_tokens, tokens.as_json())
    if len(tokens.ids) > max_tokens:
        raise too_many_tokens(len(tokens.ids), max_tokens, too_many)
    return tokens


def check_text(text: str) -> None:
    """Refuse a text longer than attncli tokenizes, before any tokenizer is asked."""
    if len(text) > MAX_TEXT_CHARACTERS:
        raise AttnError(f"the text is {len(text):,} characters long, more than the {MAX_TEXT_CHARACTERS:,} attncli tokenizes", key="sentence",
                        expected="a shorter text")  # fmt: skip


def too_many_tokens(count: int, max_tokens: int, too_many: Callable[[int], AttnError] | None) -> AttnError:
    """The error for a text of `count` tokens, more than `max_tokens`: the caller's `too_many(count)`, else a plain one."""
    if too_many is not None:
        return too_many(count)
    return AttnError(f"the text gives {count:,} tokens, more than {max_tokens:,}", key="sentence", expected="a shorter text")


def remembered(tokenizer: str | None, text: str, special_tokens: bool) -> Tokenized | None:
    """The tokens the tokenizer named `tokenizer` (token_cache: a GGUF file's, or a tokenizer.json's) gave `text` before, from
    the token cache; None when there are none (or no name)."""
    from attncli.sources.checkpoints import token_cache

    found = None if tokenizer is None else token_cache.remembered(tokenizer, text, special_tokens)
    return None if found is None else Tokenized.from_json(found)


def written_out(tokenizer: Any, token_id: int) -> str:
    """One vocabulary id as the tokenizer writes it out (' on'); a piece of a character (one byte of '—', which alone
    decodes to U+FFFD) as the vocabulary spells it instead ('<0xE2>', 'âĢ'), so that no two such pieces read alike."""
    text = str(tokenizer.decode([token_id], skip_special_tokens=False))
    if "\ufffd" in text:
        spelled = tokenizer.id_to_token(token_id)
        return str(spelled) if spelled is not None else text
    return text


def decode_ids(folder: Path, ids: Sequence[int]) -> tuple[str, ...]:
    """Each of `ids` written out by `folder`/tokenizer.json on its own (' on'), in the bounded child process."""
    reply = _run(folder, {"decode": [int(i) for i in ids]})
    return tuple(reply["texts"])


def check(folder: Path) -> None:
    """Raise the AttnError that tokenizing a short English sentence with `folder`/tokenizer.json would raise, if any."""
    tokenize(folder, PROBE_TEXT, special_tokens=True, max_tokens=10_000)


def tokenizer_path(folder: Path) -> Path:
    """`folder`/tokenizer.json, or the AttnError that says the folder or the file is missing."""
    if not folder.is_dir():
        raise AttnError("the checkpoint folder does not exist", file=str(folder), expected="a folder with tokenizer.json")
    path = folder / "tokenizer.json"
    if not os.path.lexists(path):
        raise AttnError("no tokenizer.json in the checkpoint folder", file=str(folder), expected="the tokenizer saved with the model")
    return path


def _library_missing() -> bool:
    if "tokenizers" in sys.modules:
        return sys.modules["tokenizers"] is None  # a test's monkeypatch, or an import that failed
    return importlib.util.find_spec("tokenizers") is None


_answers: dict[tuple[object, ...], dict[str, Any]] = {}  # the same request of the same unchanged file, answered once per process


def _run(folder: Path, request: dict[str, Any]) -> dict[str, Any]:
    path = tokenizer_path(folder)
    if _library_missing():
        raise AttnError("reading a checkpoint's tokenizer needs the tokenizers library", expected='pip install "attncli[models]"')
    shown = str(path)
    try:
        info = os.stat(path)
        key: tuple[object, ...] | None = (shown, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, json.dumps(request))
    except OSError:
        key = None  # the child says why
    reading.note_read(path)  # read by the child, on this command's behalf: no output may replace it
    if key is not None and key in _answers:
        return _answers[key]
    reply = _ask_child(path, shown, {**request, "size": info.st_size if key is not None else 0})
    if key is not None:
        if len(_answers) >= 64:
            _answers.pop(next(iter(_answers)))
        _answers[key] = reply
    return reply


def _ask_child(path: Path, shown: str, request: dict[str, Any]) -> dict[str, Any]:
    import attncli

    root = str(Path(attncli.__file__).resolve().parents[1])  # the folder that holds the attncli package, wherever this module moves
    program = f"import sys; sys.path.insert(0, {root!r}); from {__name__} import child; child()"
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "RAYON_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2"}
    message = json.dumps({**request, "path": str(path), "shown": shown}).encode("utf-8", "surrogatepass")
    try:
        done = subprocess.run(
            [sys.executable, "-c", program], input=message, capture_output=True, timeout=WALL_SECONDS, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise AttnError(f"the tokenizer ran longer than {WALL_SECONDS} s", file=shown, expected="a tokenizer that finishes") from None
    if done.returncode == 0:
        reply: dict[str, Any] = json.loads(done.stdout)
        if "error" in reply:
            raise AttnError(**reply["error"])
        return reply
    raise _failure(done.returncode, done.stderr, shown, memory_limit(request["size"]))


def _failure(status: int, stderr: bytes, shown: str, limit: int) -> Exception:
    """What a child that did not answer died of: a limit or a crash of the library is the file's fault; anything else is a bug."""
    said = stderr.decode("utf-8", "replace")
    if status == -signal.SIGXCPU or (status == -signal.SIGKILL and "CPU" in said):
        return AttnError(f"the tokenizer ran longer than {CPU_SECONDS} s of CPU", file=shown, expected="a tokenizer that finishes")
    if "memory allocation of" in said or "MemoryError" in said or status in (-signal.SIGABRT, -signal.SIGKILL, -signal.SIGSEGV):
        reason = f"needed more than its memory limit ({limit / 1024**2:,.0f} MiB)" if status != -signal.SIGSEGV else "crashed (segmentation fault)"
        return AttnError(
            f"the tokenizer {reason} for this text: a normalizer or pre-tokenizer that keeps expanding it?",
            file=shown,
            expected="a tokenizer.json whose normalizers keep the text about its size",
        )
    if status < 0:
        return AttnError(f"the tokenizer library crashed (signal {-status})", file=shown, expected="a tokenizer.json the library can run")
    last = said.strip().splitlines()[-1] if said.strip() else f"exit status {status}"
    return RuntimeError(f"the tokenizer process failed: {last}")


# -- the child ---------------------------------------------------------------------------------


def memory_limit(size: int) -> int:
    """The child's address-space limit for a tokenizer.json of `size` bytes."""
    return BASE_MEMORY + MEMORY_PER_BYTE * size


def _limit_self(size: int) -> None:
    try:
        import resource
    except ImportError:  # not a POSIX system: no limits to set, the library's failures are still caught
        return

    for which, most in ((resource.RLIMIT_AS, memory_limit(size)), (resource.RLIMIT_CPU, CPU_SECONDS), (resource.RLIMIT_CORE, 0)):
        _, hard = resource.getrlimit(which)
        soft = most if hard == resource.RLIM_INFINITY else min(most, hard)
        resource.setrlimit(which, (soft, hard))


def child() -> None:
    """The child's whole life: limit itself, read the request on stdin, answer on stdout (always exit 0 when it answers)."""
    request = json.loads(sys.stdin.buffer.read())
    _limit_self(request["size"])
    try:
        reply = _answer(request)
    except AttnError as error:
        reply = {"error": {"message": error.message, "file": error.file, "line": error.line, "key": error.key, "expected": error.expected}}
    sys.stdout.buffer.write(json.dumps(reply).encode("utf-8", "surrogatepass"))
    sys.stdout.flush()


def _is_panic(error: BaseException) -> bool:
    """A Rust panic inside the library, as pyo3 raises it: pyo3_runtime.PanicException (a BaseException)."""
    return type(error).__module__ == "pyo3_runtime" and type(error).__name__ == "PanicException"


def _library_failure(error: BaseException, shown: str, doing: str) -> AttnError:
    said = str(error).strip()
    first = said.splitlines()[0] if said else type(error).__name__
    what = "the tokenizer library panicked" if _is_panic(error) else "the tokenizer"
    return AttnError(f"{what} {doing}: {first}", file=shown, expected="a tokenizer.json the tokenizers library can run")


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    from tokenizers import Tokenizer

    from attncli.sources.bounded import JsonLimits, parse_json, read_bytes
    from attncli.sources.checkpoints.tokens import settings_left_out, tokenize_text

    path, shown = Path(request["path"]), request["shown"]
    data = read_bytes(path, shown, max_bytes=MAX_BYTES, what="the tokenizer saved with the model")
    parse_json(data, shown, what="the tokenizer saved with the model", limits=JsonLimits(max_bytes=MAX_BYTES))  # nesting and numbers
    try:
        tokenizer = Tokenizer.from_str(data.decode("utf-8-sig"))
    except BaseException as error:
        if not (_is_panic(error) or type(error) is Exception):  # the library raises plain Exceptions; anything else is ours
            raise
        raise _library_failure(error, shown, "cannot read it") from None
    if "decode" in request:  # ids written out one at a time (the tokens the lens names)
        try:
            return {"texts": [written_out(tokenizer, i) for i in request["decode"]]}
        except BaseException as error:
            if not (_is_panic(error) or type(error) is Exception):
                raise
            raise _library_failure(error, shown, "cannot write out a token") from None
    not_applied = settings_left_out(tokenizer)
    try:
        encoding = tokenizer.encode(request["text"], add_special_tokens=request["special_tokens"])
        special = {token_id for token_id, added in tokenizer.get_added_tokens_decoder().items() if added.special}
    except BaseException as error:
        if not (_is_panic(error) or type(error) is Exception):
            raise
        raise _library_failure(error, shown, "cannot encode the text") from None
    if len(encoding.ids) > request["max_tokens"]:
        return {"count": len(encoding.ids)}
    ids, labels = tokenize_text(encoding, request["text"], special)
    vocabulary = tokenizer.get_vocab_size(with_added_tokens=False)
    return {"ids": list(ids), "labels": list(labels), "pieces": list(encoding.tokens), "not_applied": not_applied,
            "vocabulary": vocabulary, "special_ids": sorted(special)}  # fmt: skip
