"""The tokenizer a GGUF file describes in its metadata, rebuilt with the `tokenizers` library.

A GGUF file has no tokenizer.json; llama.cpp's converter stores the vocabulary
(`tokenizer.ggml.tokens`), the BPE merges, each token's type (1 normal, 2 unknown, 3 control,
4 user-defined, 5 unused, 6 byte), the pre-tokenizer's name (`tokenizer.ggml.pre`), the special
token ids and whether a BOS/EOS token is added. This rebuilds the tokenizer transformers builds
from the same file (its GGUF loading, transformers/integrations/gguf), so the ids are the same:
- `gpt2` (byte-level BPE: GPT-2, Llama 3, Qwen2, SmolLM): the vocabulary and merges, split by
  the pre-tokenizer's regular expression where the name is one transformers knows, else GPT-2's;
- `llama` (SentencePiece BPE: Llama 2, Mistral): byte fallback, "▁" for spaces, a prefix space
  on the first word, BOS added unless the file says not;
- `bert` (WordPiece as llama.cpp stores it: "▁" marks a word's start, continuations bare);
- `t5` (SentencePiece unigram: T5, Flan-T5): each token's score, the unknown token by its type, the
  normalizer's precompiled character map, split on whitespace (`remove_extra_whitespaces`), "▁" for spaces
  and before the first word (`add_space_prefix`), as transformers' T5 tokenizer builds it from spiece.model.
Control tokens become special tokens (never split); user-defined ones are added whole.

Bounded: everything here is linear in the vocabulary's characters. The merges a SentencePiece file leaves
out are found by cutting each token only where both parts have a length some token has, and the
characters those cuts compare are counted against `MERGE_WORK` per character of the vocabulary (real
vocabularies use a few), so a 1 MB token costs a few cuts, not a million. Whatever the tokenizers library
would refuse (a merge of a token not in the vocabulary, or whose product is not, as a duplicated token
leaves) is checked first and refused as one line naming the metadata key.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from attncli.errors import AttnError
from attncli.sources.checkpoints import token_cache
from attncli.sources.checkpoints.tokens import CheckpointTokenizer

if TYPE_CHECKING:
    from attncli.sources.checkpoints.gguf import GgufFile

UNKNOWN, CONTROL, USER_DEFINED, BYTE = 2, 3, 4, 6
MERGE_WORK = 64  # characters compared per character of the vocabulary, at most, to find the merges of a file without them

_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# tokenizer.ggml.pre -> the split transformers applies before byte-level BPE (others: GPT-2's own)
SPLITS = {
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "falcon3", "smaug-bpe", "dbrx", "pixtral"), _LLAMA3_SPLIT),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "megrez"), _QWEN2_SPLIT),
}


def _byte_alphabet() -> dict[int, str]:
    """GPT-2's spelling of each byte as one printable character."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = iter(range(256, 512))
    return {b: chr(b if b in printable else next(extra)) for b in range(256)}


def cached_tokenizer(path: Path) -> CheckpointTokenizer:
    """The tokenizer of the GGUF file at `path`, from attncli's cache while the file is unchanged (token_cache.py),
    else built from its metadata (the file opened once for the command: gguf.open_file) and cached."""
    from attncli.sources.checkpoints.gguf import open_file

    def build() -> token_cache.Built:
        file = open_file(path)
        return token_cache.Built(gguf_tokenizer(file), file.header.data_start)

    return token_cache.tokenizer(path, build)


def gguf_tokenizer(file: GgufFile) -> CheckpointTokenizer:
    """The file's tokenizer, or one clear error (missing library, missing or malformed metadata)."""
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        raise AttnError("reading a model's tokenizer needs the tokenizers library", expected='pip install "attncli[models]"') from None
    model = file.value("tokenizer.ggml.model")
    tokens = file.value("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise file.fail("no vocabulary", key="tokenizer.ggml.tokens", expected="the list of the model's tokens")
    types = file.value("tokenizer.ggml.token_type")
    if types is not None and (not isinstance(types, list) or len(types) != len(tokens)):
        raise file.fail(f"{len(types) if isinstance(types, list) else types!r} token types for {len(tokens)} tokens", key="tokenizer.ggml.token_type")
    types = types or [1] * len(tokens)
    if model == "gpt2":
        tokenizer = _byte_level(file, tokens)
        default_bos = False
    elif model == "llama":
        tokenizer = _sentencepiece(file, tokens)
        default_bos = True
    elif model == "bert":
        tokenizer = _wordpiece(file, tokens, types)
        default_bos = True
    elif model == "t5":
        tokenizer = _unigram(file, tokens, types)
        default_bos = False
    else:
        raise file.fail(f"the tokenizer model {model!r} is not supported", key="tokenizer.ggml.model", expected="gpt2, llama, bert or t5")
    try:
        _add_special(tokenizer, tokens, types, byte_level=model == "gpt2")
        _post_processor(file, tokenizer, tokens, default_bos=default_bos, bert=model == "bert")
    except Exception as error:  # the library's plain Exception: whatever it refuses that the checks above did not foresee
        raise _refused(file, error) from None
    return CheckpointTokenizer(tokenizer, None)


def _refused(file: GgufFile, error: BaseException) -> AttnError:
    said = str(error).strip().splitlines()
    return file.fail(f"the tokenizers library refuses the vocabulary: {said[0] if said else type(error).__name__}", key="tokenizer.ggml.tokens")


def _bpe(file: GgufFile, vocab: dict[str, int], merges: list[tuple[str, str]], **settings: Any) -> Any:
    """tokenizers' BPE model, its merges checked first: the library raises on a part missing and panics on a product missing."""
    from tokenizers import models

    for n, (left, right) in enumerate(merges, 1):
        missing = next((t for t in (left, right, left + right) if t not in vocab), None)
        if missing is not None:
            shown = missing if len(missing) <= 40 else missing[:39] + "…"
            raise file.fail(
                f"merge {n:,} ({_shown_merge(left, right)}) needs {shown!r}, which is not in the vocabulary"
                + (" (the vocabulary lists a token twice)" if len(vocab) < len(file.value("tokenizer.ggml.tokens")) else ""),
                key="tokenizer.ggml.merges",
                expected="merges of two tokens of the vocabulary into a third",
            )
    try:
        return models.BPE(vocab, merges, **settings)
    except Exception as error:
        raise _refused(file, error) from None


def _shown_merge(left: str, right: str) -> str:
    text = f"{left} {right}"
    return repr(text if len(text) <= 40 else text[:39] + "…")


def _merges(file: GgufFile, tokens: list[str]) -> list[tuple[str, str]]:
    merges = file.value("tokenizer.ggml.merges")
    if merges is None:
        return _merges_from_scores(file, tokens)
    if not isinstance(merges, list) or not all(isinstance(m, str) and m.count(" ") == 1 for m in merges):
        raise file.fail("the merges are not pairs of tokens", key="tokenizer.ggml.merges", expected='strings "left right"')
    pairs = [m.split(" ") for m in merges]
    return [(left, right) for left, right in pairs]


def _merges_from_scores(file: GgufFile, tokens: list[str]) -> list[tuple[str, str]]:
    """SentencePiece files list no merges: every split of a token into two tokens is one, best token score first."""
    scores = file.value("tokenizer.ggml.scores")
    if not isinstance(scores, list) or len(scores) != len(tokens):
        raise file.fail("neither merges nor one score per token", key="tokenizer.ggml.merges", expected="the BPE merges or the token scores")
    if not all(isinstance(s, int | float) and not isinstance(s, bool) and s == s for s in scores):
        raise file.fail("a score that is not a number", key="tokenizer.ggml.scores", expected="one number per token")
    vocab = {token: i for i, token in enumerate(tokens)}
    lengths = sorted({len(t) for t in tokens})
    have = set(lengths)
    budget = MERGE_WORK * sum(len(t) for t in tokens)
    found = []
    for n, (token, score) in enumerate(zip(tokens, scores)):
        size = len(token)
        for cut in lengths:  # at most min(len(token), distinct lengths) steps: linear in the vocabulary's characters
            if cut >= size:
                break
            if size - cut not in have:
                continue
            budget -= size
            if budget < 0:
                raise file.fail(
                    f"at token {n + 1:,} ({size:,} characters), finding the merges costs over {MERGE_WORK}× the vocabulary's characters",
                    key="tokenizer.ggml.tokens",
                    expected="tokenizer.ggml.merges, or a real vocabulary",
                )
            left = token[:cut]
            if left in vocab:
                right = token[cut:]
                if right in vocab:
                    found.append((score, vocab[left], vocab[right], left, right))
    found.sort(key=lambda m: (-m[0], m[1], m[2]))
    return [(left, right) for _, _, _, left, right in found]


def _byte_level(file: GgufFile, tokens: list[str]) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, pre_tokenizers

    alphabet = _byte_alphabet()
    spelled = set(alphabet.values())
    vocab = {(t if set(t) <= spelled else "".join(alphabet[b] for b in t.encode("utf-8"))): i for i, t in enumerate(tokens)}
    tokenizer = Tokenizer(_bpe(file, vocab, _merges(file, tokens), continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False))
    split = SPLITS.get(str(file.value("tokenizer.ggml.pre")))
    if split is None:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(split), behavior="isolated"), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def _sentencepiece(file: GgufFile, tokens: list[str]) -> Any:
    from tokenizers import Tokenizer, decoders, pre_tokenizers

    vocab = {t: i for i, t in enumerate(tokens)}
    unk = file.value("tokenizer.ggml.unknown_token_id")
    bpe = _bpe(file, vocab, _merges(file, tokens), fuse_unk=True, byte_fallback=True,
               unk_token=tokens[unk] if isinstance(unk, int) and 0 <= unk < len(tokens) else None)  # fmt: skip
    tokenizer = Tokenizer(bpe)
    prefix = file.value("tokenizer.ggml.add_space_prefix")
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first" if prefix is not False else "never", split=False)
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(content=" ", left=1)])
    return tokenizer


def _unigram(file: GgufFile, tokens: list[str], types: list[int]) -> Any:
    """SentencePiece unigram as T5Model writes it (spiece.model's pieces, scores and types, its normalizer's flags and
    precompiled character map), rebuilt as transformers' T5 tokenizer: Precompiled, WhitespaceSplit, Metaspace."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    scores = file.value("tokenizer.ggml.scores")
    if not isinstance(scores, list) or len(scores) != len(tokens) or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in scores):
        raise file.fail(f"{len(scores) if isinstance(scores, list) else scores!r} scores for {len(tokens)} tokens", key="tokenizer.ggml.scores",
                        expected="one score per token")  # fmt: skip
    unknown = [i for i, kind in enumerate(types) if kind == UNKNOWN]
    given = file.value("tokenizer.ggml.unknown_token_id")
    unk = unknown[0] if unknown else given if isinstance(given, int) and not isinstance(given, bool) and 0 <= given < len(tokens) else None
    try:
        tokenizer = Tokenizer(models.Unigram([(t, float(x)) for t, x in zip(tokens, scores)], unk_id=unk, byte_fallback=BYTE in types))
    except Exception as error:
        raise _refused(file, error) from None
    charsmap = file.value("tokenizer.ggml.precompiled_charsmap")
    if charsmap:
        if not isinstance(charsmap, list | bytes) or not all(isinstance(b, int) and 0 <= b < 256 for b in charsmap):
            raise file.fail("the precompiled character map is not bytes", key="tokenizer.ggml.precompiled_charsmap", expected="spiece.model's map, as bytes")
        try:
            tokenizer.normalizer = normalizers.Precompiled(bytes(charsmap))
        except Exception as error:
            raise file.fail(f"the tokenizers library refuses the precompiled character map: {error}", key="tokenizer.ggml.precompiled_charsmap") from None
    prefix = file.value("tokenizer.ggml.add_space_prefix") is not False
    metaspace = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always" if prefix else "never", split=True)
    split = file.value("tokenizer.ggml.remove_extra_whitespaces") is not False  # runs of whitespace count once
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), metaspace]) if split else metaspace
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always" if prefix else "never", split=True)
    return tokenizer


def _wordpiece(file: GgufFile, tokens: list[str], types: list[int]) -> Any:
    """llama.cpp writes BERT's "##ing" as "ing" and "cat" as "▁cat"; specials ([CLS]) as they are."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    vocab: dict[str, int] = {}
    for i, (t, kind) in enumerate(zip(tokens, types)):
        piece = t if kind == CONTROL or (t.startswith("[") and t.endswith("]")) else t[1:] if t.startswith("▁") else "##" + t
        vocab.setdefault(piece, i)
    unk = file.value("tokenizer.ggml.unknown_token_id")
    unk_token = tokens[unk] if isinstance(unk, int) and 0 <= unk < len(tokens) else "[UNK]"
    try:
        tokenizer = Tokenizer(models.WordPiece(vocab, unk_token=unk_token))
    except Exception as error:
        raise _refused(file, error) from None
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    return tokenizer


def _add_special(tokenizer: Any, tokens: list[str], types: list[int], *, byte_level: bool) -> None:
    from tokenizers import AddedToken

    spelled = set(_byte_alphabet().values()) if byte_level else None
    control = [
        AddedToken(t, normalized=False, special=True)
        for t, kind in zip(tokens, types)
        if kind == CONTROL and (spelled is None or set(t) <= spelled)
    ]
    if control:
        tokenizer.add_special_tokens(control)
    vocab = tokenizer.get_vocab()
    user = [AddedToken(t, normalized=False, special=False) for t, kind in zip(tokens, types) if kind == USER_DEFINED and t in vocab]
    if user:
        tokenizer.add_tokens(user)


def _post_processor(file: GgufFile, tokenizer: Any, tokens: list[str], *, default_bos: bool, bert: bool) -> None:
    """BOS/EOS as `tokenizer.ggml.add_bos_token` / `add_eos_token` say ([CLS] … [SEP] for BERT)."""
    from tokenizers import processors

    def special(key: str) -> tuple[str, int] | None:
        token_id = file.value(f"tokenizer.ggml.{key}")
        if isinstance(token_id, int) and not isinstance(token_id, bool) and 0 <= token_id < len(tokens):
            return tokens[token_id], token_id
        return None

    if bert:
        cls, sep = special("cls_token_id") or special("bos_token_id"), special("seperator_token_id") or special("eos_token_id")
        if cls and sep:
            tokenizer.post_processor = processors.TemplateProcessing(
                single=f"{cls[0]} $A {sep[0]}", pair=f"{cls[0]} $A {sep[0]} $B:1 {sep[0]}:1", special_tokens=[cls, sep]
            )
        return
    add_bos = file.value("tokenizer.ggml.add_bos_token")
    add_eos = file.value("tokenizer.ggml.add_eos_token")
    bos = special("bos_token_id") if (default_bos if add_bos is None else bool(add_bos)) else None
    eos = special("eos_token_id") if add_eos else None
    single = " ".join([*([f"{bos[0]}:0"] if bos else []), "$A:0", *([f"{eos[0]}:0"] if eos else [])])
    pair = single + " " + " ".join([*([f"{bos[0]}:1"] if bos else []), "$B:1", *([f"{eos[0]}:1"] if eos else [])])
    tokenizer.post_processor = processors.TemplateProcessing(single=single, pair=pair, special_tokens=[t for t in (bos, eos) if t])
