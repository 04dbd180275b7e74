"""A GGUF file opened once per command, and its tokenizer built once and cached across commands (token_cache.py).

Correctness only: the cached tokenizer gives the same tokens as one built from the file, a changed file is read
again (even with its size and modification time put back), a damaged entry is ignored, and clearing works.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("gguf")

from attncli.sources.checkpoints import gguf as gguf_module  # noqa: E402
from attncli.sources.checkpoints import gguf_tokens, token_cache  # noqa: E402
from attncli.sources.checkpoints.gguf import GgufFile, open_file  # noqa: E402
from attncli.sources.checkpoints.layer import checkpoint_tokens, load_layer  # noqa: E402
from attncli.sources.checkpoints.tokens import encode  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "checkpoints" / "gguf"
TEXTS = ["The cat sat on the mat.", "  two spaces, a tab\tand é ü 日本", "<s> inside text </s>", "When MARY went [SEP] there"]


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty cache folder of the test's own; the process's last opened file forgotten."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("ATTNCLI_CACHE_DIR", str(folder))
    monkeypatch.setattr(gguf_module, "_opened", {})
    return folder


@pytest.fixture
def builds(monkeypatch) -> list[str]:
    """The files whose tokenizer was built from the metadata (not loaded from the cache), in order."""
    built: list[str] = []
    real = gguf_tokens.gguf_tokenizer

    def counting(file: GgufFile):
        built.append(file.where)
        return real(file)

    monkeypatch.setattr(gguf_tokens, "gguf_tokenizer", counting)
    return built


def tokens(path: Path, text: str, special: bool = True) -> tuple:
    t = checkpoint_tokens(path, text, special_tokens=special, max_tokens=1000)
    return t.ids, t.labels, t.pieces, t.special_ids, t.vocabulary


def copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / f"{name}.gguf"
    shutil.copyfile(FIXTURES / f"{name}.gguf", target)
    return target


@pytest.mark.parametrize("name", ["llama", "qwen2", "mistral", "gpt2", "bert"])
def test_the_cached_tokenizer_gives_the_built_one_s_tokens(name, cache, builds):
    """Every fixture's tokens, pieces, special ids and vocabulary size are the same from the cache as from the metadata."""
    path = FIXTURES / f"{name}.gguf"
    direct = gguf_tokens.gguf_tokenizer(GgufFile(path)).tokenizer
    builds.clear()
    first = [tokens(path, text, special) for text in TEXTS for special in (True, False)]
    assert len(builds) == 1 and len(token_cache.entries()) == 1
    again = [tokens(path, text, special) for text in TEXTS for special in (True, False)]
    assert len(builds) == 1  # the second round was served by the cache
    assert again == first
    for text in TEXTS:
        (ids, labels), _, _ = encode(direct, text, special_tokens=True)
        assert (ids, labels) == first[TEXTS.index(text) * 2][:2]


def test_a_command_opens_the_file_once(cache, monkeypatch):
    """`run --model x.gguf` (tokens, then the layer) opens the file once when its tokenizer is not cached yet, and again not at all for the tokens."""
    opened: list[str] = []
    real = GgufFile.__init__

    def counting(self, path):
        opened.append(str(path))
        real(self, path)

    monkeypatch.setattr(GgufFile, "__init__", counting)
    load_layer(FIXTURES / "llama.gguf", layer=2, text="The cat sat")
    assert len(opened) == 1
    assert len(token_cache.entries()) == 1


def test_open_file_keeps_one_file_while_it_is_unchanged(cache, tmp_path):
    """The same GgufFile while the file is unchanged; a new one once its header changes, even with its size and time put back."""
    path = copy("gpt2", tmp_path)
    first = open_file(path)
    assert open_file(path) is first
    _rewrite_a_token(path)
    assert open_file(path) is not first


def _rewrite_a_token(path: Path) -> None:
    """Turn the file's add_bos_token from false to true in place (one byte), then put back its modification time."""
    before = path.stat()
    data = bytearray(path.read_bytes())
    key = b"tokenizer.ggml.add_bos_token"
    at = data.index(key) + len(key) + 4  # after the key, its uint32 value type (7, a bool): the value
    assert data[at] == 0
    data[at] = 1
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns


def test_a_changed_file_is_read_again(cache, builds, tmp_path):
    """A file whose metadata changed (a BOS token now added) is tokenized anew, though its size and modification time are as before."""
    path = copy("gpt2", tmp_path)
    before = tokens(path, "the cat sat")
    _rewrite_a_token(path)
    after = tokens(path, "the cat sat")
    assert len(builds) == 2
    gguf_module._opened.clear()
    assert after == tokens(path, "the cat sat") and len(builds) == 2  # the new entry is used
    assert after != before
    os.utime(path, ns=(1, 1))  # only the time: the same header bytes, so a sentence tokenized before needs no tokenizer,
    assert tokens(path, "the cat sat") == after and len(builds) == 2
    tokens(path, "the dog sat")  # but the tokenizer's entry cannot be told from a changed file's: built again for a new one
    assert len(builds) == 3


@pytest.mark.parametrize("damage", ["truncated", "not json", "altered tokenizer", "other schema", "other code", "empty", "a folder"])
def test_a_damaged_entry_is_ignored_and_rebuilt(damage, cache, builds, tmp_path):
    """A cache entry cut short, not JSON, altered, of another schema or code, empty or not a file is a miss: the tokens come from the file."""
    path = copy("llama", tmp_path)
    want = tokens(path, "The cat sat on the mat.")
    (entry,) = token_cache.entries()
    text = entry.read_text(encoding="utf-8")
    if damage == "truncated":
        entry.write_text(text[: len(text) // 2], encoding="utf-8")
    elif damage == "not json":
        entry.write_bytes(b"\xff\x00 not json")
    elif damage == "altered tokenizer":
        doc = json.loads(text)
        doc["tokenizer"] = doc["tokenizer"].replace('"cat"', '"dog"')
        entry.write_text(json.dumps(doc), encoding="utf-8")
    elif damage == "other schema":
        entry.write_text(json.dumps(json.loads(text) | {"schema": "attncli.tokenizer-cache/0"}), encoding="utf-8")
    elif damage == "other code":
        entry.write_text(json.dumps(json.loads(text) | {"builder": "attncli 0.0.9, tokenizers 0.20.0, code 0123"}), encoding="utf-8")
    elif damage == "empty":
        entry.write_bytes(b"")
    else:
        entry.unlink()
        entry.mkdir()
    for sentence in token_cache.sentence_entries():  # the sentence's tokens forgotten: the tokenizer's entry is what is read
        sentence.unlink()
    gguf_module._opened.clear()
    assert tokens(path, "The cat sat on the mat.") == want
    assert len(builds) == 2
    if damage != "a folder":
        for sentence in token_cache.sentence_entries():
            sentence.unlink()
        gguf_module._opened.clear()
        assert tokens(path, "The cat sat on the mat.") == want and len(builds) == 2  # rewritten whole


def test_an_unwritable_cache_is_no_error(tmp_path, monkeypatch, builds):
    """A cache folder that cannot be made (a file stands in its way) costs a rebuild per command, never an error."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("ATTNCLI_CACHE_DIR", str(blocker))
    monkeypatch.setattr(gguf_module, "_opened", {})
    path = FIXTURES / "gpt2.gguf"
    assert tokens(path, "the cat") == tokens(path, "the cat")
    assert len(builds) == 2


def test_model_cache_shows_and_clears(cli, cache, builds, tmp_path):
    """`model cache` counts the entries, `model cache --clear` removes them (and a stopped write's temporary file), and the next command builds again."""
    path = copy("qwen2", tmp_path)
    tokens(path, "a cat")
    (cache / "tokenizers" / ".tmp-left-behind.json").write_text("{")
    shown = cli("model", "cache")
    assert shown.exit_code == 0 and "1 cached tokenizer, the tokens of 1 sentence and 1 file header (" in shown.output and str(cache) in shown.output
    cleared = cli("model", "cache", "--clear")
    assert cleared.exit_code == 0 and "removed 1 cached tokenizer, the tokens of 1 sentence and 1 file header (" in cleared.output
    assert list((cache / "tokenizers").iterdir()) == [] and not (cache / "headers").exists()
    gguf_module._opened.clear()
    tokens(path, "a cat")
    assert len(builds) == 2


def test_the_cache_folder_follows_the_environment(tmp_path, monkeypatch):
    """ATTNCLI_CACHE_DIR first, then $XDG_CACHE_HOME/attncli (when absolute), then ~/.cache/attncli."""
    monkeypatch.setenv("ATTNCLI_CACHE_DIR", str(tmp_path / "mine"))
    assert token_cache.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("ATTNCLI_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert token_cache.cache_dir() == tmp_path / "xdg" / "attncli"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert token_cache.cache_dir() == tmp_path / "home" / ".cache" / "attncli"


def test_too_many_cells_is_refused_before_any_tensor_is_read(cache, monkeypatch):
    """A sentence over --max-cells is refused once its tokens are counted: no tensor of the file is dequantised, and it is opened once."""
    from attncli.errors import AttnError

    opened: list[str] = []
    real = GgufFile.__init__

    def counting(self, path):
        opened.append(str(path))
        real(self, path)

    read = GgufFile.read

    def config_only(self, name, *args):
        assert name == "rope_freqs.weight", f"{name} was read before the refusal"  # llama3 RoPE's factors belong to the config
        return read(self, name, *args)

    def no_reading(self, *args, **kwargs):
        raise AssertionError("a tensor was read before the refusal")

    monkeypatch.setattr(GgufFile, "__init__", counting)
    monkeypatch.setattr(GgufFile, "read", config_only)
    for method in ("read_rows", "read_expert"):
        monkeypatch.setattr(GgufFile, method, no_reading)
    with pytest.raises(AttnError, match="attention cells"):
        load_layer(FIXTURES / "llama.gguf", layer=1, text="The cat sat on the mat. " * 4, max_cells=50)
    assert len(opened) == 1


def test_a_sentence_tokenized_before_needs_no_tokenizer_and_gives_the_same_tokens(cache, builds, monkeypatch):
    """The second run of a text (a new process: the open file forgotten) reads its tokens from the cache without building
    or loading the tokenizer; another text, or the other special-tokens setting, loads it."""
    path = FIXTURES / "llama.gguf"  # a BOS token, which special_tokens=False leaves out
    first = tokens(path, "The cat sat on the mat.")
    loads: list[Path] = []
    real = token_cache._load
    monkeypatch.setattr(token_cache, "_load", lambda entry, *rest: loads.append(entry) or real(entry, *rest))
    monkeypatch.setattr(gguf_module, "_opened", {})
    assert tokens(path, "The cat sat on the mat.") == first and loads == [] and len(builds) == 1
    assert tokens(path, "The cat sat on the mat.", special=False) != first and len(loads) == 1
    tokens(path, "The dog sat.")
    assert len(loads) == 2 and len(token_cache.sentence_entries()) == 3


def test_a_damaged_or_foreign_sentence_entry_is_tokenized_again(cache, builds):
    """A remembered sentence that is not JSON, holds another text or holds tokens of the wrong shape is a miss: the tokens come from the tokenizer, the same."""
    path = FIXTURES / "llama.gguf"
    text = "When MARY went there"
    expected = tokens(path, text)
    (entry,) = token_cache.sentence_entries()
    doc = json.loads(entry.read_text(encoding="utf-8"))
    for damaged in ("{", json.dumps(doc | {"text": "another"}), json.dumps(doc | {"tokens": doc["tokens"] | {"labels": ["x"]}}),
                    json.dumps(doc | {"tokens": doc["tokens"] | {"ids": [-1] * len(expected[0])}})):  # fmt: skip
        entry.write_text(damaged, encoding="utf-8")
        assert tokens(path, text) == expected
        assert json.loads(entry.read_text(encoding="utf-8")) == doc  # written again, whole


def test_only_the_last_sentences_are_kept(cache, builds, monkeypatch):
    """Past MOST_SENTENCES the oldest written are removed."""
    monkeypatch.setattr(token_cache, "MOST_SENTENCES", 3)
    path = FIXTURES / "gpt2.gguf"
    for n in range(5):
        tokens(path, f"sentence number {n}")
        os.utime(token_cache._sentence_path(gguf_module.open_file(path).header.sha256, f"sentence number {n}", True), ns=(n * 10**9, n * 10**9))
    kept = {json.loads(p.read_text(encoding="utf-8"))["text"] for p in token_cache.sentence_entries()}
    assert kept == {"sentence number 2", "sentence number 3", "sentence number 4"}


@pytest.mark.parametrize("name", ["llama", "gpt2", "bert", "quantised", "qwen3-q8_0"])
def test_a_files_walked_header_is_kept_and_is_the_walk(name, cache, monkeypatch):
    """The second open of a file reads its header's walk from the cache, equal to walking it, without walking it."""
    from attncli.sources.checkpoints import gguf_header

    path = FIXTURES / f"{name}.gguf"
    walked = gguf_header.read_header(path)
    walks: list[object] = []
    real = gguf_header._walk
    monkeypatch.setattr(gguf_header, "_walk", lambda w: walks.append(w) or real(w))
    assert gguf_header.read_header(path) == walked and walks == [] and len(token_cache.header_entries()) == 1
    assert walked.sha256 == hashlib.sha256(path.read_bytes()[: walked.data_start]).hexdigest()  # the bytes the sentences are named by


def test_a_sentence_seen_before_imports_no_tokenizers_library(cache, tmp_path):
    """A GGUF file's sentence tokenized before is read back in a new process without the tokenizers library imported (a
    twentieth of a short command), its version read from its distribution's folder: the one the library gives itself."""
    import tokenizers

    path = copy("llama", tmp_path)
    script = (
        "import json, pathlib, sys\n"
        "from attncli.sources.checkpoints import token_cache\n"
        "from attncli.sources.checkpoints.layer import checkpoint_tokens\n"
        "t = checkpoint_tokens(pathlib.Path(sys.argv[1]), 'The cat sat.', special_tokens=True, max_tokens=100)\n"
        "print(json.dumps([list(t.ids), 'tokenizers' in sys.modules, token_cache._library_version()]))\n"
    )
    env = dict(os.environ, ATTNCLI_CACHE_DIR=str(cache))
    first, second = (json.loads(subprocess.run([sys.executable, "-c", script, str(path)], env=env, capture_output=True, text=True, check=True).stdout)
                     for _ in range(2))  # fmt: skip
    assert first == [second[0], True, tokenizers.__version__]  # the first process built the tokenizer
    assert second == [first[0], False, tokenizers.__version__]


def test_a_changed_or_damaged_header_entry_is_walked_again(cache, tmp_path, monkeypatch):
    """A file whose header bytes changed (size and time put back), or a kept walk that is damaged, is walked again."""
    from attncli.sources.checkpoints import gguf_header

    path = copy("gpt2", tmp_path)
    gguf_header.read_header(path)
    walks: list[object] = []
    real = gguf_header._walk
    monkeypatch.setattr(gguf_header, "_walk", lambda w: walks.append(w) or real(w))
    _rewrite_a_token(path)
    changed = gguf_header.read_header(path)
    assert len(walks) == 1 and gguf_header.read_header(path) == changed and len(walks) == 1
    (entry,) = token_cache.header_entries()
    doc = json.loads(entry.read_text(encoding="utf-8"))
    for damaged in ("[", json.dumps(doc | {"header": doc["header"] | {"tensors": [["x", [1], 99, 0, 4]]}}),
                    json.dumps(doc | {"header": doc["header"] | {"fields": {"a": ["b", None, 1, 0]}}})):  # fmt: skip
        entry.write_text(damaged, encoding="utf-8")
        assert gguf_header.read_header(path) == changed
    assert len(walks) == 4


def test_a_folders_tokens_of_a_text_seen_before_need_no_tokenizer_process(cache, tmp_path, monkeypatch):
    """A checkpoint folder's tokens of a text come from the cache once its tokenizer.json gave them (no child process), the
    same; a changed tokenizer.json (size and time put back) runs the child again."""
    from attncli.sources.checkpoints import tokenizer_process

    folder = tmp_path / "llama"
    shutil.copytree(FIXTURES.parent / "llama", folder)
    first = tokens(folder, "The cat sat on the mat.")
    asked: list[object] = []
    real = tokenizer_process._ask_child
    monkeypatch.setattr(tokenizer_process, "_ask_child", lambda *a: asked.append(a) or real(*a))
    monkeypatch.setattr(tokenizer_process, "_answers", {})  # a new process
    assert tokens(folder, "The cat sat on the mat.") == first and asked == []
    with pytest.raises(Exception, match="more than 3"):
        checkpoint_tokens(folder, "The cat sat on the mat.", special_tokens=True, max_tokens=3)  # the limit holds on remembered tokens
    path = folder / "tokenizer.json"
    before = path.stat()
    text = path.read_text(encoding="utf-8")
    changed = text.replace('"version": ', '"version":\t', 1)  # the same tokenizer in other bytes: named by its bytes, it is another
    assert changed != text and len(changed) == len(text)
    path.write_text(changed, encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    tokens(folder, "The cat sat on the mat.")
    assert len(asked) == 1


def test_a_tokenizer_json_that_is_no_regular_file_is_not_read_for_the_cache(cache, tmp_path):
    """A FIFO where tokenizer.json should be is never opened to hash it (it would block): no name, and a FIFO cache entry is no entry."""
    fifo = tmp_path / "tokenizer.json"
    os.mkfifo(fifo)
    assert token_cache.tokenizer_file_id(fifo) is None
    assert token_cache._read(fifo, 1 << 20) is None
