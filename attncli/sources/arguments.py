"""Command-line arguments as the bytes they are: text must be UTF-8, whatever the locale; paths work in any locale.

Python decodes argv with the locale's encoding and `surrogateescape`, so under `LC_ALL=C` with
UTF-8 mode off "é" arrives as two lone surrogates, and a byte that is not UTF-8 (0xff) as
one. A text argument (a sentence, a word) is turned back into its bytes and decoded as UTF-8:
right in any locale, and one clear line when the bytes are not UTF-8. A path keeps its
surrogates for the operating system and is shown decoded as UTF-8.
"""

from __future__ import annotations

import os

from attncli.errors import AttnError


def _escaped(value: str) -> bool:
    return any("\udc80" <= c <= "\udcff" for c in value)


def text_argument(value: str, key: str) -> str:
    """The text the bytes of an argument spell in UTF-8, or an AttnError naming the first byte that is not UTF-8."""
    if not _escaped(value):
        return value
    raw = os.fsencode(value)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise AttnError(
            f"byte {error.start + 1} (0x{raw[error.start]:02x}) is not UTF-8",
            key=key,
            expected="UTF-8 text: check the encoding of the terminal or script that passes it",
        ) from None


def shown_path(path: os.PathLike[str] | str) -> str:
    """A path as text to show: its bytes decoded as UTF-8 (any locale), a byte that is not UTF-8 as `\\xff`."""
    text = os.fspath(path)
    if not _escaped(text):
        return text
    return os.fsencode(text).decode("utf-8", "backslashreplace")
