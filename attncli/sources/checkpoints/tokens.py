"""Labels of a checkpoint tokenizer's tokens; the tokenizer itself runs in a child process (tokenizer_process.py)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

SPACE_MARK = "␣"  # shown for a token's leading space
_SPACE_PIECES = ("Ġ", "▁")  # how byte-level BPE and SentencePiece spell a leading space in a token
_INVISIBLE = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")  # SentencePiece's byte fallback spells bytes so


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level BPE spelling: each byte as one printable character (bytes_to_unicode, inverted)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = iter(range(256, 512))
    return {chr(b if b in printable else next(extra)): b for b in range(256)}


_BYTE_LEVEL = _byte_level_alphabet()


class Tokens(NamedTuple):
    """Token ids and labels, in order; unpacks as (ids, labels)."""

    ids: tuple[int, ...]
    labels: tuple[str, ...]

    @property
    def positions(self) -> tuple[int, ...]:
        """Positions counted from 1."""
        return tuple(range(1, len(self.ids) + 1))


def settings_left_out(tokenizer: Tokenizer) -> str | None:
    """Switch off the padding and truncation a tokenizer.json may carry, and say what it asked for ("padding to 128 tokens"), or None.

    sentence-transformers folders save `"padding": {"strategy": {"Fixed": 128}}`. A model's
    forward pass on one sentence sees neither, and transformers' tokenizer call applies neither
    by default; padding would add unmasked [PAD] keys and truncation would cut the sentence
    silently. The header says what the file asked for.
    """
    asked = []
    if tokenizer.padding is not None:
        length = tokenizer.padding.get("length")
        asked.append(f"padding to {length} tokens" if length else "padding")
        tokenizer.no_padding()
    if tokenizer.truncation is not None:
        asked.append(f"truncation at {tokenizer.truncation.get('max_length')} tokens")
        tokenizer.no_truncation()
    return " and ".join(asked) or None


def not_applied_note(not_applied: str | None) -> tuple[str, ...]:
    """The header's line about tokenizer.json settings left out, or none."""
    if not_applied is None:
        return ()
    return (f"tokenizer.json asks for {not_applied}; not applied: the model sees the sentence's own tokens, as in its forward pass",)


def tokenize_text(encoding: Encoding, text: str, special: set[int]) -> Tokens:
    """Ids and labels of a sentence's encoding; `special` holds the ids of the tokenizer's special tokens."""
    offsets = encoding.offsets
    labels = []
    for n, (token_id, token, (start, end)) in enumerate(zip(encoding.ids, encoding.tokens, offsets)):
        shared = end > start and any(0 <= m < len(offsets) and offsets[m] == (start, end) for m in (n - 1, n + 1))
        if shared and token_id not in special:  # one of several tokens that spell a character byte by byte
            labels.append(byte_label(token) or label_of(text, token, start, end, False))
        else:
            labels.append(label_of(text, token, start, end, token_id in special))
    return Tokens(tuple(encoding.ids), tuple(labels))


def byte_label(token: str) -> str | None:
    """'<0xC3>' for a token that is part of a character's bytes, when its spelling shows them; else None."""
    if _BYTE_PIECE.fullmatch(token):
        return token.upper().replace("0X", "0x")
    if token and all(ch in _BYTE_LEVEL for ch in token):
        return "".join(f"<0x{_BYTE_LEVEL[ch]:02X}>" for ch in token)
    return None


def label_of(text: str, token: str, start: int, end: int, special: bool) -> str:
    """What a token covers in the text: '␣cat' for ' cat', a special token by its name, '\\n' for a newline."""
    if special:
        return token
    covered = text[start:end]
    if not covered:  # a token that covers no text (a prefix space piece): its own spelling
        covered = token.replace("Ġ", " ").replace("▁", " ")
    elif not covered[0].isspace() and start > 0 and text[start - 1] == " " and token.startswith(_SPACE_PIECES):
        covered = " " + covered  # the tokenizer trimmed the space from the offsets, but the token holds it
    if covered.startswith(" "):
        covered = SPACE_MARK + covered[1:]
    return "".join(_INVISIBLE.get(ch, ch) for ch in covered)


class CheckpointTokenizer(NamedTuple):
    """A tokenizer attncli built itself (from a GGUF file's metadata), run in this process."""

    tokenizer: Tokenizer
    not_applied: str | None  # what the file asked for and attncli left out, or None


def encode(tokenizer: Tokenizer, text: str, *, special_tokens: bool) -> tuple[Tokens, tuple[str, ...], tuple[int, ...]]:
    """The tokens of `text`, the tokenizer's own pieces and its special tokens' ids, in this process (only for a tokenizer attncli built)."""
    encoding = tokenizer.encode(text, add_special_tokens=special_tokens)
    special = {token_id for token_id, added in tokenizer.get_added_tokens_decoder().items() if added.special}
    return tokenize_text(encoding, text, special), tuple(encoding.tokens), tuple(sorted(special))
