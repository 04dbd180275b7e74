"""The one error type of attncli, the exit statuses it maps to, and how a message is kept to one safe line."""

from __future__ import annotations

import enum
import functools
import os
import re
from collections.abc import Callable, Iterable


class ExitStatus(enum.IntEnum):
    """Exit statuses, named (after httpie/status.py)."""

    OK = 0
    ERROR = 1  # bad input: scenario, option value, output path; a failed write
    USAGE = 2  # Click's own status for a malformed command line
    PARTIAL = 3  # `export`: some scenarios failed, the others were written
    INTERNAL = 70  # a bug in attncli (EX_SOFTWARE of sysexits.h)
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
    BROKEN_PIPE = 141  # the reader of stdout went away (128 + SIGPIPE), as `cat` reports it


MAX_LINE = 300  # characters of an error line after "attncli: error: "

# -- visible: the one rule for every text shown, errors included (document/escape.py builds on it) --

_NAMED = {"\t": r"\t", "\n": r"\n", "\r": r"\r"}
_BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]  # marks, embeddings, overrides, isolates


def _code(c: str) -> str:
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, in a file name from the command line (Python's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return _NAMED.get(c) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(s: str) -> str:
    """s with each lone surrogate written as `visible` writes it (`\\xff` for a file name's undecodable byte): text that
    UTF-8, and so JSON, can hold; every other character kept as it is."""
    return _SURROGATE.sub(lambda found: _code(found.group()), s)


@functools.cache
def _shown_as_code() -> dict[int, str]:
    """The table `visible` translates with, built on first need: its 2,200 entries took a millisecond of every start-up."""
    codes = [*range(0x00, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *_BIDI, *range(0xD800, 0xE000), 0xFFFE, 0xFFFF]
    return {code: _code(chr(code)) for code in codes}


def visible(s: str) -> str:
    r"""s with control characters and invisible direction or line controls written as `\x1b`, `\n`, `\u202e`.

    C0 and C1 controls, DEL, the line and paragraph separators, bidi marks, embeddings, overrides
    and isolates ("Trojan Source"), lone surrogates and the noncharacters U+FFFE and U+FFFF.
    """
    if s.isprintable():  # every character of the table is unprintable (Cc, Cf, Cs, Cn, Zl, Zp): "·" or "é" need no table
        return s
    return s.translate(_shown_as_code())


# What `option()` writes into a message: a mark no input can forge (an unguessable nonce of this process between two
# control characters), so a scenario name or a token holding "\x1e_\x1f" stays that text instead of becoming an option.
_NONCE = os.urandom(8).hex()
_OPTION = re.compile(f"\x1e{_NONCE}([a-z_]+)\x1f")


def option(name: str) -> str:
    """A mention of the option `name` (its Python keyword, "round_steps") inside a message.

    Below the command line nothing knows flag names: the CLI shows the mention as its flag
    (`--round-steps`), the Python API as the keyword itself.
    """
    return f"\x1e{_NONCE}{name}\x1f"


def keyword(name: str) -> str:
    """How the Python API names an option: by its keyword."""
    return name


def named(text: str, names: Callable[[str], str] = keyword) -> str:
    """`text` with each `option()` mention written as `names` says."""
    return _OPTION.sub(lambda match: names(match.group(1)), text) if "\x1e" in text else text


def shorten(text: str, width: int, *, keep_end: bool = False) -> str:
    """`text` cut to `width` characters with "…" where it was cut (at the start if `keep_end`, as for file names)."""
    if len(text) <= width:
        return text
    if width < 2:
        return "…"[:width]
    return "…" + text[-(width - 1) :] if keep_end else text[: width - 1] + "…"


# -- "did you mean": the one way every closed choice (a format, a stage, a statistic, a token, a key …) answers a misspelling --


def closest(
    word: str, choices: Iterable[str], *, cutoff: float = 0.6, fold: Callable[[str], str] = str.casefold, shortenings: bool = True
) -> str | None:
    """The choice a misspelt `word` most likely meant, or None when none is close.

    Compared as `fold` writes both (case ignored by default). In order: the same word ("Cat" → "cat");
    a choice it begins or abbreviates, its first letter and the rest in order ("weight" → "weights",
    "md" → "markdown"; unless not `shortenings`); else the most similar by difflib's ratio, at least `cutoff`. Ties go to the
    earlier choice, so "kat" among the tokens "The cat sat" is "cat" (difflib's own get_close_matches
    breaks ties by the later string in alphabetical order: "sat").
    """
    import difflib

    unique = list(dict.fromkeys(choices))
    folded = fold(word)
    forms = [fold(choice) for choice in unique]
    if folded in forms:
        return unique[forms.index(folded)]
    if not folded:
        return None
    matcher = difflib.SequenceMatcher(b=folded, autojunk=False)

    def ratio(form: str) -> float:
        matcher.set_seq1(form)
        return matcher.ratio()

    abbreviated = [i for i, form in enumerate(forms) if shortenings and len(folded) >= 2 and _abbreviates(folded, form)]
    candidates = abbreviated or [i for i, form in enumerate(forms) if ratio(form) >= cutoff]
    if not candidates:
        return None
    best = max(candidates, key=lambda i: (ratio(forms[i]), -i))  # the most similar; of equals, the earliest
    return unique[best]


def _abbreviates(word: str, choice: str) -> bool:
    """Whether `word` is a shortening of `choice`: the same first letter, and its other letters in `choice` in order."""
    if len(word) >= len(choice) or word[0] != choice[0]:
        return False
    rest = iter(choice[1:])
    return all(letter in rest for letter in word[1:])


def did_you_mean(
    word: str, choices: Iterable[str], *, cutoff: float = 0.6, fold: Callable[[str], str] = str.casefold, shortenings: bool = True
) -> str:
    """"; did you mean 'cat'?" to end a message about the misspelt `word` (`closest`'s choice), or "" when none is close."""
    close = closest(word, choices, cutoff=cutoff, fold=fold, shortenings=shortenings)
    return f"; did you mean {close!r}?" if close is not None else ""


def same_name(word: str) -> str:
    """A name as `closest` compares names that differ only in how they are written ("GPT-NeoX" is "gpt_neox"): for a model
    type, where a near spelling ("mamba", "qwen2_vl") is another architecture, not a typo."""
    return word.casefold().replace("-", "").replace("_", "").replace(" ", "")


def misspelt(word: str, choices: Iterable[str], *, cutoff: float = 0.6, fold: Callable[[str], str] = str.casefold) -> str:
    """`word` quoted, with "(did you mean 'cat'?)" after it when a choice is close: one of several wrong words in a message."""
    close = closest(word, choices, cutoff=cutoff, fold=fold)
    return f"{word!r} (did you mean {close!r}?)" if close is not None else repr(word)


class AttnError(Exception):
    """A problem the person can fix: says where (file, line, key path) and what was expected."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
        expected: str | None = None,
        about: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line  # 1-based, as editors number lines
        self.key = key
        self.expected = expected
        self.about = about  # the file the message is about, when another file named it (a checkpoint behind `model:`)

    def behind(self, *, line: int | None, key: str) -> AttnError:
        """This error of a file that another file names at `line`, `key`: where it is said, then what it is about."""
        about = self.file if self.file is not None else self.about
        if about is not None and self.line is not None:
            about += f":{self.line}"
        if about is not None and self.key:
            about += f": {self.key}"
        return AttnError(self.message, line=line, key=key, expected=self.expected, about=about)

    def located(self, *, file: str | None = None) -> AttnError:
        """Return this error with `file` filled in where it was not known yet."""
        if self.file is None and file is not None:
            self.file = file
        return self

    def __str__(self) -> str:
        return self.text()

    def text(self, names: Callable[[str], str] = keyword) -> str:
        """FILE:LINE: key: message (expected …), options named as `names` says (the API's keywords by default)."""
        where = ""
        if self.file is not None:
            where = self.file + (f":{self.line}" if self.line is not None else "") + ": "
        key = f"{named(self.key, names)}: " if self.key else ""
        about = f"{self.about}: " if self.about else ""
        expected = f" (expected {named(self.expected, names)})" if self.expected else ""
        return f"{where}{key}{about}{named(self.message, names)}{expected}"

    def one_line(self, width: int = MAX_LINE, names: Callable[[str], str] = keyword) -> str:
        """`self.text(names)` made safe to print: control characters visible, at most about `width` characters.

        When it is too long, the longest parts are shortened first: a file name keeps its end,
        a message and an expectation keep their start.
        """
        file = visible(self.file) if self.file is not None else None
        texts = (self.key, visible(self.about) if self.about else None, self.message, self.expected)
        parts = [file or "", *(visible(named(part or "", names)) for part in texts)]
        lengths = _fit([len(part) for part in parts], width - 22)  # 22: room for ":LINE: ", ": ", ": " and " (expected )"
        file_part, key, about, message, expected = (
            shorten(part, length, keep_end=index in (0, 2)) for index, (part, length) in enumerate(zip(parts, lengths))
        )
        where = ""
        if file is not None:
            where = file_part + (f":{self.line}" if self.line is not None else "") + ": "
        return (
            where + (f"{key}: " if key else "") + (f"{about}: " if about else "") + message + (f" (expected {expected})" if expected else "")
        )


def _fit(lengths: list[int], budget: int, smallest: int = 24) -> list[int]:
    """Lengths that sum to at most `budget`: every part longer than a common level is cut to it (never below `smallest`)."""
    if sum(lengths) <= budget:
        return lengths
    level = budget
    while level > smallest and sum(min(length, level) for length in lengths) > budget:
        level -= 1
    return [min(length, level) for length in lengths]
