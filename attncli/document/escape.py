r"""Input text (tokens, names, keys) made safe to show: one function per place it is shown.

Every function starts from `visible`, which writes characters that would act instead of
print (control characters, escape sequences, line and paragraph separators, bidi
overrides, lone surrogates, the noncharacters U+FFFE and U+FFFF) as text such as `\x1b`,
`\n` or `\u202e`. A backslash itself is left as it is: shown text is for reading, not for
reading back. Then each format escapes its own specials:

- `rich`: Rich console markup;
- `markdown`: GitHub-flavoured Markdown inline text (paragraphs, headings, table cells);
- `html`, `xml`: HTML and XML text and attribute values;
- `latex`: math-mode TeX for pdflatex (OT1 or T1), KaTeX (strict) and MathJax 3;
- `latex_text`: text-mode TeX for prose, which a Markdown post also shows as text;
- `latex_prose`: `latex_text` for attncli's own narration, its notation's names (`W_K`, `d_k`) as math;
- `csv_cell`: a text cell of a CSV file, with the spreadsheet formula guard.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

# -- visible -------------------------------------------------------------------------------------
from attncli.errors import visible as visible  # the one rule (errors are shown with it too)

# -- Rich ------------------------------------------------------------------------------------------

_BACKSLASHED_BRACKET = re.compile(r"(\\+)\[(?![a-z#/@][^[]*?\])")  # backslashes, then a "[" that opens no tag
_EMOJI_CODE_START = re.compile(r":(?=[^\s:]*:)")  # a colon that could open an :emoji: code


def rich(s: str) -> str:
    """Rich console markup that prints `visible(s)`: no tags, no :emoji: codes, whatever follows it."""
    from rich.markup import escape

    text = visible(s)
    trailing = len(text) - len(text.rstrip("\\"))
    # Rich's escape doubles a lone trailing backslash, which then prints twice unless a tag follows;
    # instead, 2k backslashes before an empty tag print k backslashes in every context.
    body = escape(text[: len(text) - trailing]) if trailing else escape(text)
    # Rich prints "\\[" as "[" when no tag follows, and its escape leaves that alone: one more backslash keeps them all
    body = _BACKSLASHED_BRACKET.sub(lambda m: m.group(1) + "\\[", body)
    body = _EMOJI_CODE_START.sub(":[b][/b]", body)  # an empty tag splits ":smile:" so it stays text
    return body + "\\" * (2 * trailing) + "[b][/b]" if trailing else body


# -- Markdown ------------------------------------------------------------------------------------

_MARKDOWN = {
    "\\": "\\\\", "`": "\\`", "*": "\\*", "_": "\\_", "[": "\\[", "]": "\\]", "~": "\\~", "$": "\\$",
    "&": "&amp;", "<": "&lt;", ">": "&gt;",
    "|": "&#124;",  # an entity, not \|: GFM splits table rows on pipes before it reads backslashes
    "{": "&#123;", "}": "&#125;",  # Jekyll's Liquid and Hugo's shortcodes read {{ and {% before Markdown does
}  # fmt: skip
_MARKDOWN_TRIMMED = " \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000\ufeff"


@functools.cache
def _line_start() -> re.Pattern[str]:
    """What would open a list or a setext underline at a line's start (compiled on first need, as the patterns below)."""
    return re.compile(r"^(?:[+=-]|\d{1,9}(?=[.)]))")


def markdown(s: str) -> str:
    """GFM inline text that renders as `visible(s)`, literally: usable in a paragraph, heading or table cell."""
    text = visible(s)
    out = []
    for i, c in enumerate(text):
        if c == "#" and (i == 0 or text[i - 1] in " #"):  # would open a heading, or close one ("## x ##")
            out.append("\\#")
        else:
            out.append(_MARKDOWN.get(c, c))
    escaped = "".join(out)
    match = _line_start().match(escaped)
    if match:  # "- x", "+ x", "1. x" at the start of a line
        end = match.end()
        escaped = escaped[:end] + "\\" + escaped[end:] if escaped[:end].isdigit() else "\\" + escaped
    # Paragraphs, headings and table cells drop outer whitespace (markdown-it even Unicode's), and
    # ** next to whitespace is no longer bold: outer whitespace goes in as numeric entities.
    stripped = escaped.strip(_MARKDOWN_TRIMMED)
    if stripped != escaped:
        lead = escaped[: len(escaped) - len(escaped.lstrip(_MARKDOWN_TRIMMED))]
        trail = escaped[len(lead) + len(stripped) :]
        escaped = "".join(f"&#{ord(c)};" for c in lead) + stripped + "".join(f"&#{ord(c)};" for c in trail)
    return escaped


# -- HTML and XML ------------------------------------------------------------------------------

_XML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"})


def xml(s: str) -> str:
    """XML 1.0 text or attribute value showing `visible(s)`; characters XML forbids are written as `\\x00`, `\\ufffe`."""
    return visible(s).translate(_XML)  # one pass in C: an HTML page calls this once per cell


def html(s: str) -> str:
    """HTML text or attribute value showing `visible(s)` (the same escaping as `xml`)."""
    return xml(s)


# -- LaTeX ----------------------------------------------------------------------------------------

# The characters besides ASCII that pdflatex prints with its default UTF-8 input both in the default
# OT1 encoding (with Computer Modern's Type 1 fonts, no bitmap fallback) and in T1 (with lmodern),
# found by compiling each character of U+00A0-U+04FF and common punctuation in TeX Live 2022,
# less ¡ ¸ ¿, which KaTeX's strict mode refuses in \text; tests/test_publish.py checks them all again. Greek, Cyrillic, CJK, «», þ, ą and the like need
# packages a plain article lacks (T1 only, LGR, T2A, CJK) and are written as U+XXXX instead.
LATEX_TEXT_CHARACTERS = frozenset(
    "ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÑÒÓÔÕÖØÙÚÛÜÝßàáâãäåæçèéêëìíîïñòóôõöøùúûüýÿĀāĂăĆćĈĉĊċČčĎďĒēĔĕĖėĚěĜĝĞğĠġĢģĤĥ"
    "ĨĩĪīĬĭİıĲĳĴĵĶķĹĺĻļĽľŁłŃńŅņŇňŌōŎŏŐőŒœŔŕŖŗŘřŚśŜŝŞşŠšŢţŤťŨũŪūŬŭŮůŰűŴŵŶŷŸŹźŻżŽžǄǅǆǇǈǉǊǋǌǍǎǏǐǑǒǓǔǢǣǦǧǨ"
    "ǩǰǴǵȘșȚțȲȳȷ–—‘’“”…"
)
_LATEX_SYMBOLS = {
    "\\": r"{\backslash}", "{": r"{\{}", "}": r"{\}}", "$": r"{\$}", "&": r"{\&}", "%": r"{\%}", "#": r"{\#}",
    "_": r"{\_}", "^": r"{\hat{\ }}", "~": r"{\sim}",
    "<": "{<}", ">": "{>}", "|": "{|}",  # in text, OT1 prints these as ¡ ¿ —
    "␣": r"{\sqcup}",  # a real tokenizer's leading space (GPT-2's Ġ, Llama's ▁): \textvisiblespace is neither KaTeX's nor MathJax's
    **{  # Greek letters that math mode has, in all three (ο and the capitals that look Latin it does not: those stay U+XXXX)
        c: "{\\" + name + "}"
        for c, name in zip("αβγδεζηθικλμνξπρστυφχψωΓΔΘΛΞΠΣΥΦΨΩ",
                           ["alpha", "beta", "gamma", "delta", "varepsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu", "xi", "pi", "rho", "sigma", "tau", "upsilon", "varphi", "chi", "psi", "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi", "Omega"])
    },
}  # fmt: skip
_LIGATURES = {"--", "''", "``", ",,", "!`", "?`",  # pairs that TeX or KaTeX would join into one glyph
              "'’", "’'", "’’", "‘‘", "`‘", "‘`", "!‘", "?‘"}  # ’ and ‘ are the fonts' own ' and `: they join with them too
_TEXT_ASCII = frozenset(chr(c) for c in range(0x21, 0x7F)) - set(_LATEX_SYMBOLS)


def latex(s: str) -> str:
    r"""Math-mode TeX that prints `visible(s)` as written: put it where `\text{s}` would go (it brings its own `\text{…}`).

    Letters, digits and punctuation go in `\text{…}` runs; TeX's specials and `< > |` are math
    symbols (`{\_}`, `{<}`), since MathJax shows `\text{\_}` literally; outer and repeated
    spaces are `\text{ }` each; characters a plain
    pdflatex document cannot print are written `\mathtt{U{+}4E2D}`; a tokenizer's ␣ (a leading space) is
    `{\sqcup}`, which all three print. Runs are split where TeX
    would make a ligature (`--`, `''`). A dollar is `{\$}`, so no `$$` that a page's math finder
    would take for a delimiter ever appears.
    """
    text = _nfc(visible(s)).replace("\u00a0", " ")
    if not text:
        return "{}"
    pieces: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            pieces.append(r"\text{" + "".join(run) + "}")
            run.clear()

    for i, c in enumerate(text):
        if c == " ":
            inner = 0 < i < len(text) - 1 and run and text[i + 1] != " " and _in_text(text[i + 1])
            if inner:
                run.append(c)
            else:  # outer or repeated spaces: a run of \text would lose them. Not "\ ": MathJax
                flush()  # expands that macro into the rest of the block, overflowing its 5 KB buffer
                pieces.append(r"\text{ }")
        elif _in_text(c):
            if run and run[-1] + c in _LIGATURES:
                flush()
            run.append(c)
        else:
            flush()
            if c in _LATEX_SYMBOLS:
                pieces.append(_LATEX_SYMBOLS[c])
            else:
                pieces.append(r"\,\mathtt{U{+}" + f"{ord(c):04X}" + r"}\,")
    flush()
    return "".join(pieces)


def _in_text(c: str) -> bool:
    return c in _TEXT_ASCII or c.isascii() and c.isalnum() or c in LATEX_TEXT_CHARACTERS


# Symbols of the narration that text mode lacks: each prints as inline math in pdflatex and in a post's KaTeX or MathJax.
_PROSE_MATH = {
    "≈": r"\approx", "×": r"\times", "·": r"\cdot", "−": "-", "√": r"\surd", "∞": r"\infty", "→": r"\to",
    "←": r"\leftarrow", "ᵀ": r"^{\top}", "′": "'", "″": "''", "≤": r"\le", "≥": r"\ge", "≠": r"\ne", "±": r"\pm",
    "÷": r"\div", "∑": r"\sum", "⊙": r"\odot", "∈": r"\in", "⋯": r"\cdots", "°": r"^{\circ}",
    "\\": r"\backslash", "^": r"\hat{\ }", "~": r"\sim", "<": "<", ">": ">", "|": "|",
    "$": r"{\$}",  # not \$ in text: before inline math that would read `\$$`, which a page's math finder takes for `$$`
    "Σ": r"\Sigma", "Δ": r"\Delta", "Θ": r"\Theta", "Λ": r"\Lambda", "Π": r"\Pi", "Φ": r"\Phi", "Ω": r"\Omega",
    "α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "δ": r"\delta", "ε": r"\varepsilon", "η": r"\eta", "θ": r"\theta",
    "λ": r"\lambda", "μ": r"\mu", "π": r"\pi", "ρ": r"\rho", "σ": r"\sigma", "τ": r"\tau", "φ": r"\varphi",
    "ω": r"\omega", "␣": r"\sqcup", "⌊": r"\lfloor", "⌋": r"\rfloor", "⌈": r"\lceil", "⌉": r"\rceil",
}  # fmt: skip
_SUPERSCRIPTS = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁽⁾⁺⁻ⁱⁿ", "0123456789()+-in"))
_SUBSCRIPTS = dict(zip("₀₁₂₃₄₅₆₇₈₉₍₎₊₋", "0123456789()+-"))
_PROSE_ESCAPED = {"_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#", "{": r"\{", "}": r"\}"}  # CommonMark reads these too


def latex_text(s: str) -> str:
    r"""Text-mode TeX for a paragraph that prints `visible(s)`: in pdflatex (T1 or OT1) and, pasted into a Markdown post, as text.

    Letters, digits, punctuation and the accented letters of LATEX_TEXT_CHARACTERS stay as they
    are; `_ % & # { }` get a backslash (which CommonMark also reads as an escape); mathematical
    symbols (≈ × · − Σ α ᵀ √ ∞ …) and `$` become inline math `$\approx$`, adjacent ones one `$…$`, so no
    `$$` can appear; dashes (– —), curly quotes and … stay UTF-8 characters, which pdflatex prints and a Markdown post
    shows as they are (TeX's `--` would show as two hyphens there); other characters are `$\mathtt{U{+}4E2D}$` as in `latex`.
    Pairs TeX would join (`--`, `''`) are kept apart with `{}`.
    """
    return _prose(_nfc(visible(s)).replace("\u00a0", " "), names=False)


@functools.cache
def _notation() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """The patterns `latex_prose` reads attncli's notation by, compiled on its first call (a millisecond of every start-up before)."""
    return (
        # A name of attncli's notation in narration: one letter, "_", its subscript (W_K, d_k, c_KV, W_DKV, m_old, ω_i, A_ij,
        # B_q), a whole word; the letters and subscripts are the notation's own, so a token such as a_b or my_file stays text.
        re.compile(r"(?<![\w'’])([WdqkvcmexωθbhwABELI]|Σ)_([A-Z]{1,4}|[ijkqvrncthd0-9]|ij|model|head|old|new|max|out)(?!['’]|(?!ᵀ)\w)"),
        re.compile(r"(?<![\w'’])[b-zB-HJ-Z](?= [=≈] )"),  # the k of "k = …": a symbol (not the words a, A, I)
        re.compile(r"(?<=[eθ0-9])\^(?:\(([^()'’\"]{1,40})\)|(−?∞|−?[0-9]+(?:\.[0-9]+)?|[a-z]{2,8}\b))"),  # e^(m_old − m_new), e^−∞, e^sink: a power
        re.compile(r"(?<![\w'’])'(?=[^\s'])"),  # the first quote of 'cat': ‘, which pdflatex and a post print (TeX's ` shows as `)
        re.compile(r"(?<=\S)'(?![\w'’])"),  # the last: ’, as pdflatex prints ' (a post would show it straight, beside a curly ‘)
        re.compile(r"√(?:([0-9]+(?:\.[0-9]+)?)|([a-z])(?![\w'’]))"),  # √8, √d: a root over its number or one-letter symbol
    )


def _nfc(text: str) -> str:
    from unicodedata import normalize  # imported where TeX needs it: the terminal's tables never do

    return normalize("NFC", text)


_IN_POWER = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/+.,")


def latex_prose(s: str) -> str:
    r"""`latex_text` for attncli's own narration: names of its notation (`W_K`, `d_k`, `c_KV`, `m_old`) as inline math with
    subscripts, `e^(…)` and `e^−∞` as powers, quotes as ‘ and ’ (the narration quotes words as 'cat'), and a one-letter word written against a formula (the `e` of `e·W_K`, the `k` of
    `q·k`) inside it: `$e\cdot{}W_{K}$`.

    Only names of the notation are read so (see `_notation`): user text inside the narration, a token such as `a_b` or
    `x^2`, prints as written, as `latex_text` prints it.
    """
    return _prose(_nfc(visible(s)).replace("\u00a0", " "), names=True)


def _name(base: str, sub: str) -> str:
    piece = _PROSE_MATH.get(base, base)
    return piece + "_{" + (r"\text{" + sub + "}" if len(sub) > 2 and sub.islower() else sub) + "}"


def _alone(text: str, i: int) -> bool:
    """Whether text[i] is a one-letter word (an ASCII letter between no letters, digits or apostrophes)."""
    def word(j: int) -> bool:
        return 0 <= j < len(text) and (text[j].isalnum() or text[j] in "_'’")

    return text[i].isascii() and text[i].isalpha() and not word(i - 1) and not word(i + 1)


def _prose(text: str, *, names: bool, in_power: bool = False) -> str:
    """`latex_text`'s writing; with `names`, `latex_prose`'s (`in_power`: all of `text` is a superscript's math)."""
    out: list[str] = []
    math: list[str] = []
    name_at, equated_at, power_at, opening_at, closing_at, root_at = (pattern.match for pattern in _notation())

    def inline(body: str) -> None:
        """`$body$`, joined to a math span just before it: two spans side by side would read `$$`, a display's delimiter."""
        if out and out[-1].endswith("$"):
            out[-1] = out[-1][:-1] + body + "$"
        else:
            out.append("$" + body + "$")

    def flush() -> None:
        if math:
            inline("".join(math))
            math.clear()

    def symbol(piece: str, i: int) -> None:
        """`piece` joins the formula; a one-letter word just before it (no space) comes in with it: the e of e·W_K."""
        if names and not math and i > 0 and _alone(text, i - 1) and out and out[-1] == text[i - 1]:
            out.pop()
            math.append(text[i - 1])
        math.append(piece)

    previous = ""
    quoted = False  # a quote opened by ‘ and not yet closed
    i = 0
    while i < len(text):
        c = text[i]
        if names and (found := name_at(text, i)):
            symbol(_name(found.group(1), found.group(2)), i)
            i, previous = found.end(), ""
            continue
        if names and c == "√" and ((under := name_at(text, i + 1)) or (under := root_at(text, i))):  # √d_k, √8, √d: a root over it
            inside = _name(under.group(1), under.group(2)) if under.re is _notation()[0] else under.group(1) or under.group(2)
            symbol(r"\sqrt{" + inside + "}", i)
            i, previous = under.end(), ""
            continue
        if names and c == "'" and (opening_at(text, i) or closing_at(text, i)):
            flush()
            opening = opening_at(text, i) is not None and not (quoted and closing_at(text, i))  # the ' of '[', closes the one before
            out.append("‘" if opening else "’")
            quoted = opening
            i, previous = i + 1, ""
            continue
        if (names and c == "^" and (found := power_at(text, i))
                and _is_math(power := _prose((found.group(1) or found.group(2)).replace(" ", ""), names=True, in_power=True))):  # fmt: skip
            word = found.group(2) or ""
            symbol("^{" + (r"\text{" + word + "}" if word.isalpha() else power[1:-1]) + "}", i)
            i, previous = found.end(), ""
            continue
        if names and equated_at(text, i):
            if math:  # written against the formula before it: q·k = …
                math.append(c)
            else:
                inline(c)
            i, previous = i + 1, ""
            continue
        if names and text.startswith("--", i) and (i == 0 or text[i - 1] in " ("):  # an option, --full: two hyphens in TeX and a post
            flush()
            inline(r"\text{-}\text{-}")
            i, previous = i + 2, ""
            continue
        i += 1
        if in_power and c in _IN_POWER:
            math.append(c)
            continue
        if c in _SUPERSCRIPTS or c in _SUBSCRIPTS:  # ⁽²⁾: one group, ^{(2)}
            mark, plain = ("^", _SUPERSCRIPTS[c]) if c in _SUPERSCRIPTS else ("_", _SUBSCRIPTS[c])
            if math and math[-1].startswith(mark + "{"):
                math[-1] = math[-1][:-1] + plain + "}"
            else:
                math.append(mark + "{" + plain + "}")
            previous = ""
            continue
        if c in _PROSE_MATH or not (c == " " or c in _PROSE_ESCAPED or _in_text(c)):
            piece = _PROSE_MATH.get(c) or latex(c)
            symbol(piece + ("{}" if piece[-1].isalpha() else ""), i - 1)  # `\surd{}d`: no space before a closing $
            previous = ""
            continue
        if names and math and _alone(text, i - 1) and text[i - 2] != " ":
            math.append(c)  # a one-letter word written against a formula: the k of q·k
            continue
        flush()
        if previous + c in _LIGATURES:
            out.append("{}")
        out.append(_PROSE_ESCAPED.get(c, c))
        previous = c
    flush()
    return "".join(out)


class Name(NamedTuple):
    """A name of attncli's notation inside its narration: d_k is Name("d", "k"), √d_k Name("d", "k", rooted=True), √8 Name("8", "", True)."""

    base: str
    sub: str = ""
    rooted: bool = False


def notation(text: str) -> list[str | Name]:
    """attncli's own sentence `text` cut into plain text and the names of its notation (W_K, d_k, L_q, m_old, √d_k, √8), as
    `latex_prose` reads them, for a format that writes those as math its own way (Typst). User text is never read so."""
    name_at, root_at = _notation()[0].match, _notation()[5].match
    pieces: list[str | Name] = []
    plain: list[str] = []
    i = 0
    while i < len(text):
        rooted = text[i] == "√"
        if (found := name_at(text, i + rooted)) and (rooted or text[i] != "√"):
            name: Name | None = Name(found.group(1), found.group(2), rooted)
        elif rooted and (found := root_at(text, i)):
            name = Name(found.group(1) or found.group(2), "", True)
        else:
            name = None
        if name is None or found is None:
            plain.append(text[i])
            i += 1
            continue
        if plain:
            pieces.append("".join(plain))
            plain.clear()
        pieces.append(name)
        i = found.end()
    if plain:
        pieces.append("".join(plain))
    return pieces


def _is_math(written: str) -> bool:
    return written.startswith("$") and written.endswith("$") and written.count("$") == 2


# -- CSV -------------------------------------------------------------------------------------------


@functools.cache
def _number() -> re.Pattern[str]:
    """A plain decimal number, as a spreadsheet reads one."""
    return re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(s: str) -> str:
    """A text cell (token, name, header) for CSV: `visible(s)`, with a leading `'` if a spreadsheet could run it as a formula.

    The guard is for text cells only: write numbers as numbers, without this function. Text
    that is itself a plain decimal number ("-1", "+0.5") is left alone, since a spreadsheet
    reads it as that number and never as a formula.
    """
    text = visible(s)
    if text.startswith(_FORMULA_START) and not _number().fullmatch(text):
        return "'" + text
    return text
