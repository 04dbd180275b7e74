"""A scenario's `sentence:` as tokens: its words, split on whitespace, surrounding punctuation stripped.

Apart from the YAML reader because the reader's early size check (`reading`) counts the tokens
before the rest of the file is parsed, and `scenarios new` writes them as comments.
"""

from __future__ import annotations

_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" + "“”‘’«»…—–"  # string.punctuation and typographic marks


def split_sentence(sentence: str) -> list[str]:
    """The words of a sentence: split on whitespace, surrounding punctuation stripped ("mat." → "mat")."""
    return [word for word in (part.strip(_PUNCTUATION) for part in sentence.split()) if word]
