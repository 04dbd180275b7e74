"""Reviewed byte snapshots of what attncli shows, in every format, for a few scenarios and one checkpoint.

The numbers have their own tests (the naive reference, published values, transformers' goldens);
these catch changes in the words, formulas, labels and layout around them, which no number test
sees: a head counted from 0, a mask left out of an equation, "=" where "≈" belongs, a column with
one decimal too few. Each case's stdout is compared byte for byte with its file under
tests/snapshots/<source>/<command>.<extension>; a failure prints a unified diff.

When an output changes on purpose, regenerate the snapshots, review the diff, commit both:

    ATTNCLI_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_snapshots.py
    git diff tests/snapshots/

What people read is the same on every CPU: a number on a decimal half rounds away from zero
whatever its last bits, and a difference that is float64's round-off is said as a bound, never as
its bits (attncli.core.rounding). So every format people read (table, Markdown, LaTeX, HTML, SVG,
Typst) must match byte for byte, on any machine and any BLAS kernel; .ci/run runs these tests
again with OpenBLAS and NumPy forced onto older kernels and one or two threads to prove it. Only
the machine formats, JSON and CSV, carry full-precision numbers, whose last bit comes from BLAS:
there two outputs also match when they differ only in numbers of 12 or more significant digits
that agree to 1e-12. To demand identical bytes there too, on one machine (say, before and after a
refactoring), set ATTNCLI_SNAPSHOTS_EXACT=1.

The terminal is fixed by tests/conftest.py (no colour, 120 columns), and the tests run from the
repository's root so that the file paths shown (tests/scenarios/…, tests/checkpoints/gpt2) are
the same everywhere.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
UPDATE = os.environ.get("ATTNCLI_UPDATE_SNAPSHOTS") == "1"
EXACT = os.environ.get("ATTNCLI_SNAPSHOTS_EXACT") == "1"

FORMATS = {"table": "txt", "markdown": "md", "latex": "tex", "html": "html", "svg": "svg", "csv": "csv", "json": "json"}

# source name: (how to name it to `run`/`decode`, how to name it to `explain`, the word, the head)
SOURCES: dict[str, tuple[list[str], list[str], list[str]]] = {
    # The seed article's example: one head, d_model = 2, no mask.
    "cat": (["cat"], ["-s", "cat"], ["--word", "cat"]),
    # Two heads with d_k = 2 and d_v = 3: a swapped d_k and d_v shows; head 2 so that a head off by one shows.
    "two-heads-dv3": (["tests/scenarios/two-heads-dv3.yaml"], ["-s", "tests/scenarios/two-heads-dv3.yaml"],
                      ["--word", "ran", "--head", "2"]),
    # RoPE, grouped-query heads (4 heads read 2 key/value heads), causal mask.
    "llama-style": (["llama-style"], ["-s", "llama-style"], ["--word", "fresh", "--head", "3"]),
    # Partial rotary (2 of d_k = 8 coordinates turn) from position 100: the pass-through and the absolute positions show.
    "pythia-style": (["pythia-style"], ["-s", "pythia-style"], ["--word", "pile"]),
    # ALiBi slopes per head and a causal mask; the word "the" occurs twice.
    "alibi": (["alibi"], ["-s", "alibi"], ["--word", "on", "--head", "2"]),
    # The variants that show themselves (core.variants.shown): QK-norm over the whole projection, soft-capping, a learned sink.
    "qk-softcap-sink": (["tests/scenarios/qk-softcap-sink.yaml"], ["-s", "tests/scenarios/qk-softcap-sink.yaml"],
                        ["--word", "sat", "--head", "2"]),
    # Multi-head latent attention (DeepSeek): the latents, the decoupled RoPE part and the absorbed form.
    "mla": (["mla"], ["-s", "mla"], ["--word", "sat", "--head", "2"]),
    # A given KV cache before the sentence: its own rows (stage cache), K = [K_cache; X·W_K], RoPE from an offset, two heads on one key/value head.
    "cache-rope": (["tests/scenarios/cache-rope.yaml"], ["-s", "tests/scenarios/cache-rope.yaml"], ["--word", "on", "--head", "2"]),
    # A real checkpoint folder: GPT-2's tokenizer, biases, W_O, layer 2 of 3.
    "gpt2": (["--model", "tests/checkpoints/gpt2", "--layer", "2", "--sentence", "The cat sat", "--head", "2"],
             ["--model", "tests/checkpoints/gpt2", "--layer", "2", "--sentence", "The cat sat"],
             ["--word", "cat", "--head", "2"]),
}  # fmt: skip


def _commands(source: str) -> dict[str, list[str]]:
    """The command lines of one source, by the snapshot's file stem."""
    runs, explains, word = SOURCES[source]
    head = [] if "--head" in runs else word[word.index("--head") :] if "--head" in word else []
    return {
        "run": ["run", *runs],
        "run-round-steps": ["run", *runs, "--round-steps", "2"],
        "run-block-size": ["run", *runs, "--block-size", "2", *head],
        "explain": ["explain", *explains, *word],
        "explain-round-steps": ["explain", *explains, *word, "--round-steps", "2"],
        "explain-block-size": ["explain", *explains, *word, "--block-size", "2"],
        "decode": ["decode", *runs, *head],
        "decode-round-steps": ["decode", *runs, *head, "--round-steps", "2"],
        **(MODEL_COMMANDS if source == "gpt2" else {}),
    }


# the checkpoint's own commands, documents of blocks too: its facts, and its tokens of a text with markup of every format in it
MODEL_COMMANDS = {"model-info": ["model", "info", "tests/checkpoints/gpt2"],
                  "model-tokens": ["model", "tokens", "tests/checkpoints/gpt2", "When Mary <eos> *x* | $y$ \\ #"]}  # fmt: skip


CASES = [(source, stem, fmt) for source in SOURCES for stem in _commands(source) for fmt in FORMATS]
# Formats added later are pinned on a few cases each: a run with a mask, shading and RoPE, an explain of head 2 of
# two heads with d_k ≠ d_v, and a decode report.
FEW = {"typst": "typ"}
CASES += [("llama-style", "run", "typst"), ("two-heads-dv3", "explain", "typst"), ("llama-style", "decode", "typst"),
          ("gpt2", "model-info", "typst"), ("gpt2", "model-tokens", "typst")]  # fmt: skip
EXTENSIONS = {**FORMATS, **FEW}
FULL_PRECISION = ("json", "csv")  # data for machines: the only formats whose numbers carry float64's last bits


def snapshot_path(source: str, stem: str, fmt: str) -> Path:
    return SNAPSHOTS / source / f"{stem}.{EXTENSIONS[fmt]}"


def shown(cli, source: str, stem: str, fmt: str) -> bytes:
    """What the command prints: its stdout, or for a refusal the exit code and its stderr."""
    result = cli(*_commands(source)[stem], "--format", fmt)
    if result.exit_code != 0:
        return f"exit code {result.exit_code}\nstderr:\n{result.stderr}".encode()
    assert result.stderr == "", result.stderr
    return result.stdout_bytes


def unified_diff(expected: bytes, actual: bytes, name: str, limit: int = 120) -> str:
    """A unified diff of two outputs, at most `limit` lines of it."""
    before = expected.decode("utf-8", errors="backslashreplace").splitlines(keepends=True)
    after = actual.decode("utf-8", errors="backslashreplace").splitlines(keepends=True)
    lines = list(difflib.unified_diff(before, after, f"{name} (snapshot)", f"{name} (now)", n=2))
    if not lines:  # the same text but different bytes (line endings, invalid UTF-8)
        return f"{name}: the same lines but different bytes"
    more = f"\n… {len(lines) - limit} more diff lines" if len(lines) > limit else ""
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines[:limit]) + more


_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _digits(number: bytes) -> int:
    return len(re.sub(rb"[eE].*|\D", b"", number).lstrip(b"0"))


def same_but_last_bits(expected: bytes, actual: bytes) -> bool:
    """The same bytes, except numbers of 12 or more significant digits that agree to 1e-12 (BLAS's last bit)."""
    if _NUMBER.split(expected) != _NUMBER.split(actual):
        return False
    for a, b in zip(_NUMBER.findall(expected), _NUMBER.findall(actual)):
        if a == b:
            continue
        if max(_digits(a), _digits(b)) < 12:
            return False
        x, y = float(a), float(b)
        if abs(x - y) > 1e-12 * max(abs(x), abs(y)) + 1e-15:
            return False
    return True


@pytest.fixture
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize(("source", "stem", "fmt"), CASES, ids=[f"{s}/{c}.{EXTENSIONS[f]}" for s, c, f in CASES])
def test_output_matches_its_reviewed_snapshot(cli, at_root, source, stem, fmt):
    path = snapshot_path(source, stem, fmt)
    actual = shown(cli, source, stem, fmt)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_bytes() != actual:
            path.write_bytes(actual)
        return
    if not path.is_file():
        pytest.fail(
            f"no snapshot {path.relative_to(ROOT)}: make it with ATTNCLI_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_snapshots.py"
        )
    expected = path.read_bytes()
    if actual != expected and (EXACT or fmt not in FULL_PRECISION or not same_but_last_bits(expected, actual)):
        pytest.fail(f"{path.relative_to(ROOT)} differs from what attncli shows now "
                    f"(ATTNCLI_UPDATE_SNAPSHOTS=1 rewrites it, on purpose):\n" + unified_diff(expected, actual, path.name),
                    pytrace=False)  # fmt: skip


def test_every_snapshot_file_belongs_to_a_case():
    """A snapshot left over from a removed case would be reviewed but never compared."""
    expected = {snapshot_path(*case) for case in CASES}
    stray = sorted(str(p.relative_to(ROOT)) for p in SNAPSHOTS.rglob("*") if p.is_file() and p not in expected)
    assert stray == [], "snapshot files that no case compares (delete them): " + ", ".join(stray)


def test_the_snapshots_stay_small():
    """About half a MB per source at most: a case that suddenly prints a megabyte belongs elsewhere."""
    total = sum(p.stat().st_size for p in SNAPSHOTS.rglob("*") if p.is_file())
    assert total < 550_000 * len(SOURCES), total


def test_only_the_last_bits_of_long_numbers_may_differ():
    """The tolerance for BLAS's last bit covers numbers of 12+ digits only, never words or the shown decimals."""
    assert same_but_last_bits(b"x = 0.30000000000000004 (exact)", b"x = 0.30000000000000010 (exact)")
    assert same_but_last_bits(b'{"w": [1.2345678901234567]}', b'{"w": [1.2345678901234565]}')
    assert not same_but_last_bits(b"x = 0.30000000000000004", b"x = 0.30000000000100004")  # beyond 1e-12
    assert not same_but_last_bits(b"x = 0.300", b"x = 0.301")  # a shown decimal
    assert not same_but_last_bits(b"d_k = 2 \xc2\xb7 d_v = 3", b"d_k = 3 \xc2\xb7 d_v = 2")
    assert not same_but_last_bits(b"x = 0.30000000000000004 =", b"x = 0.30000000000000004 \xe2\x89\x88")  # = against ≈
    assert "-x = 1\n+x = 2\n" in unified_diff(b"x = 1\n", b"x = 2\n", "f")
