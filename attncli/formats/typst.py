"""Typst: `run`, `explain` and every block of a document as Typst markup, to `#include` in a paper or compile on its own.

A run is a heading per stage, its formula in Typst math (translated from the stage's TeX, `$S = Q K^top$`), and
its matrix as a `#table`: the tokens as header cells and bold row labels, numbers right-aligned, cells the mask
hides in grey; the weights are shaded by value (every tokens × tokens stage with `heatmap`). A table with such
cells is written in a code block of its own that first names their markup (`let s3 = table.cell.with(fill: …)`), so a
cell is `s3("0.4255")`: a run of 1,024 tokens is then about the size of its JSON, written a block of rows at a time with
NumPy (`matrix_tables`). `explain` has
the Markdown article's tables and its steps as Typst math (translated from the rows LaTeX writes); a document (tiling, decode,
dequant, variance) is drawn block by block.

Every text that is not attncli's own syntax (tokens, names, sentences, attncli's sentences too) is written as a
Typst string literal, `#"…"` in markup and `"…"` in code and math, after `escape.visible`: a string shows
exactly its characters, so no token can open markup, math, a comment or a label. In attncli's own sentences
(`prose`) the names of its notation (d_k, W_Q, √d_k) are math between those literals. A fragment (the default) sets
nothing outside itself; `standalone` adds the document's title, an A4 page (landscape for wide tables) and the
text size. The top heading's level follows `heading_level` (0 leaves it out).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from attncli.document.blocks import (
    Document,
    ExplainArticle,
    Heading,
    Note,
    Paragraph,
    RunDocument,
    Step,
    Steps,
    Table,
    Values,
    fields,
    step_lines,
)
from attncli.document.blocks import Matrix as MatrixView
from attncli.document.escape import Name, notation, visible
from attncli.document.numbers import exact_decimals, fixed, short_vector, smart, vector
from attncli.document.summary import hand_rounded_title, rounded_every_step
from attncli.formats import palette

if TYPE_CHECKING:
    from attncli.document.pages import ExplainPage, HeadsPage, ReportPage, RunPage, ShadePage
    from attncli.formats import Options

MAX_COLS = 12  # a wider matrix is split into tables of at most this many columns, each with the row labels
PORTRAIT_COLS = 8  # a standalone document with wider tables turns its pages
STROKE = "0.5pt + luma(180)"
HIDDEN_INK = "luma(150)"  # a cell the mask hides, as the terminal dims it


def string(text: str) -> str:
    """A Typst string literal showing `visible(text)`."""
    return literal(visible(text))


def literal(text: str) -> str:
    """A Typst string literal of `text` as it is: only `\\` and `"` need escaping inside one (a line break is one)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def words(text: str) -> str:
    """Text in markup: an embedded string literal. Nothing may follow it directly but a space, `:`, `]` or a line's end."""
    return "#" + string(text)


_GREEK = {"ω": "omega", "θ": "theta", "Σ": "Sigma"}


def _math_name(name: Name) -> str:
    """A name of the notation in Typst math: d_k, W_(K V), d_"model", sqrt(d_k), sqrt(8) (two letters side by side would be a variable)."""
    base = _GREEK.get(name.base, name.base)
    if not name.sub:
        written = base
    elif len(name.sub) == 1:
        written = f"{base}_{name.sub}"
    elif name.sub.islower() and len(name.sub) > 2:
        written = f"{base}_{literal(name.sub)}"  # a word (model, old, max): upright, as LaTeX's \text{model}
    else:
        written = f"{base}_({' '.join(name.sub)})"  # KV, ij, 10: one symbol each
    return f"sqrt({written})" if name.rooted else written


def prose(text: str) -> str:
    """attncli's own sentence in markup: the names of its notation (d_k, W_Q, L_q × L_k, m_old, √d_k) as inline math, the rest as
    string literals (`escape.notation` reads the names; user text such as tokens is written with `words`, never read so)."""
    pieces = [f"${_math_name(piece)}$" if isinstance(piece, Name) else "#" + literal(piece) for piece in notation(visible(text))]
    return "".join(pieces) or words(text)


def _levels(level: int) -> tuple[int, int]:
    """The top heading's level (0: none) and the level of the sections under it."""
    return level, max(level, 1) + 1 if level else 2


def heading(level: int, body: str) -> list[str]:
    """A heading at `level` (markup `body`), then a blank line; nothing at level 0."""
    return [f"{'=' * level} {body}", ""] if level > 0 else []


def _preamble(title: str, *, wide: bool) -> list[str]:
    """A standalone document's settings: its title, an A4 page (landscape for wide tables), 10-point text."""
    flipped = ", flipped: true" if wide else ""
    return [f"#set document(title: {string(title)})", f'#set page(paper: "a4"{flipped}, margin: 2cm)', "#set text(size: 10pt)", ""]


# -- formulas: TeX to Typst math --------------------------------------------------------------------------


class Untranslatable(ValueError):
    """TeX this translator does not know: the formula is shown as text instead."""


_TEX_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|[A-Za-z]|\d+(?:\.\d+)?|\s+|.", re.DOTALL)
_SYMBOLS = {
    "top": "top", "Sigma": "Sigma", "sum": "sum", "infty": "infinity", "dots": "dots", "ldots": "dots", "cdots": "dots.c",
    "cdot": "dot.op", "times": "times", "odot": "dot.o", "varphi": "phi.alt", "phi": "phi", "gamma": "gamma", "alpha": "alpha",
    "theta": "theta", "le": "<=", "leq": "<=", "ge": ">=", "geq": ">=", "approx": "approx", "to": "->", "quad": "quad",
    "qquad": "wide", "exp": "exp", "tanh": "tanh", "cos": "cos", "sin": "sin", "log": "log", "max": "max", "min": "min",
    ",": "thin", ";": "thick", ":": "med", " ": "space", "|": "||", "lVert": "bar.double", "rVert": "bar.double", "Vert": "bar.double",
    "beta": "beta", "sigma": "sigma", "ln": "ln", "lfloor": "floor.l", "rfloor": "floor.r", "tau": "tau", "in": "in",
    "leftarrow": "arrow.l",
}  # fmt: skip
_IGNORED = {"left", "right", "textstyle", "displaystyle", "!"}
_CHARACTERS = {"(": "(", ")": ")", "[": "[", "]": "]", "|": "|", "+": "+", "-": "-", "=": "=", ",": ",", "<": "<", ">": ">",
               "/": "\\/", ".": ".", ":": ":", "−": "-", "·": "dot.op", "×": "times", "∞": "infinity", "…": "dots",
               ";": '";"'}  # fmt: skip  # a string: in a call's arguments a bare ; would start a matrix's next row
_TEXT_ESCAPES = {"_": "_", "%": "%", "&": "&", "$": "$", "#": "#", "{": "{", "}": "}", " ": " ", ",": " "}
_TEXT_COMMANDS = {"textbackslash": "\\", "textasciitilde": "~", "textasciicircum": "^"}


class _Tex:
    """A small recursive-descent reader of the TeX attncli writes for its formulas, writing Typst math.

    It emits only what it knows: single letters, numbers, the symbols above, `op`/`sqrt`/`hat`/`tilde`/`mat` calls and string
    literals, arguments with balanced brackets; anything else raises `Untranslatable`, so whatever it returns is Typst that
    compiles (tests/test_typst.py checks that on random strings of TeX pieces).
    """

    def __init__(self, tex: str) -> None:
        self.tokens = _TEX_TOKEN.findall(tex)
        self.i = 0

    def peek(self) -> str:
        return self.tokens[self.i] if self.i < len(self.tokens) else ""

    def take(self) -> str:
        token = self.peek()
        if not token:
            raise Untranslatable("the formula ends too early")
        self.i += 1
        return token

    def expect(self, token: str) -> None:
        if self.take() != token:
            raise Untranslatable(f"expected {token}")

    def sequence(self, stops: tuple[str, ...] = ()) -> str:
        """Atoms up to (not including) one of `stops`, or the end; scripts and primes attach to the atom before them."""
        out: list[str] = []
        while self.peek() and self.peek() not in stops:
            token = self.peek()
            if token in ("^", "_"):
                self.take()
                if not out or out[-1] in ("(", "[", "|"):
                    raise Untranslatable("a script with nothing before it")
                out[-1] += token + self.script()
            elif token == "'":
                self.take()
                if not out:
                    raise Untranslatable("a prime with nothing before it")
                base = re.match(r"[A-Za-z]+(?=[_^])", out[-1])  # K_{R}' in TeX is K'_R in Typst, not K_(R')
                out[-1] = out[-1][: base.end()] + "'" + out[-1][base.end() :] if base else out[-1] + "'"
            else:
                atom = self.atom()
                if atom == "(" and out and out[-1].endswith('"'):
                    out[-1] += atom  # "RoPE"(Q): a space after a string would show
                elif atom:
                    out.append(atom)
        text = ""
        for piece in out:
            text += "" if not text or text.endswith("(") or piece.startswith((")", ",")) else " "
            text += piece
        return text

    def script(self) -> str:
        """A superscript's or subscript's argument: one letter, digit or symbol (`top`) as it is, anything longer in parentheses."""
        argument = self.balanced(self.argument())
        return argument if re.fullmatch(r"[A-Za-z0-9]|[a-z]{2,}(?:\.[a-z]+)*", argument) else f"({argument})"

    @staticmethod
    def balanced(argument: str) -> str:
        """An argument of a call or a script: not empty, its brackets (outside strings) balanced, or Typst could not read it."""
        depth = {"(": 0, "[": 0}
        for c in re.sub(r'"(?:[^"\\]|\\.)*"', "", argument):
            if c in "([":
                depth[c] += 1
            elif c in ")]":
                depth["(" if c == ")" else "["] -= 1
                if min(depth.values()) < 0:
                    raise Untranslatable("an unbalanced argument")
        if not argument.strip() or any(depth.values()):
            raise Untranslatable("an empty or unbalanced argument")
        return argument

    def argument(self) -> str:
        """A `{…}` group, or one token."""
        while self.peek().isspace():
            self.take()
        if self.peek() == "{":
            self.take()
            inner = self.sequence(("}",))
            self.expect("}")
            return inner
        return self.atom()

    def raw_group(self) -> str:
        """A `{…}` group of text mode (`\\text`, `\\operatorname`): its characters, TeX's text escapes undone."""
        self.expect("{")
        out: list[str] = []
        depth = 0
        while True:
            token = self.take()
            if token == "}" and depth == 0:
                return "".join(out)
            if token in ("{", "}"):
                depth += 1 if token == "{" else -1
            elif token.startswith("\\") and len(token) == 2 and token[1] in _TEXT_ESCAPES:
                out.append(_TEXT_ESCAPES[token[1]])
            elif token[1:] in _TEXT_COMMANDS and token.startswith("\\"):
                out.append(_TEXT_COMMANDS[token[1:]])
                if self.peek() == "{" and self.tokens[self.i + 1 : self.i + 2] == ["}"]:
                    self.i += 2  # \textbackslash{}
            elif token.startswith("\\"):
                raise Untranslatable(f"{token} in text")
            else:
                out.append(token)

    def atom(self) -> str:
        token = self.take()
        if token.isspace():
            return ""
        if re.fullmatch(r"[A-Za-z]|\d+(?:\.\d+)?", token):
            return token
        if token == "{":
            inner = self.sequence(("}",))
            self.expect("}")
            return inner
        if token.startswith("\\"):
            return self.command(token[1:])
        if token in _CHARACTERS:
            return _CHARACTERS[token]
        raise Untranslatable(f"the character {token!r}")

    def command(self, name: str) -> str:
        if name in _IGNORED:
            return ""
        if name in _SYMBOLS:
            return _SYMBOLS[name]
        if name == "frac":
            top = self.balanced(self.argument())
            return f"({top})/({self.balanced(self.argument())})"
        if name in ("sqrt", "hat", "tilde"):
            return f"{name}({self.balanced(self.argument())})"
        if name == "text":
            return string(self.raw_group())
        if name in ("operatorname", "mathrm"):  # an upright name (tril, softmax)
            return f"op({string(self.raw_group())})"
        if name == "begin":
            environment = self.raw_group()
            if environment not in ("bmatrix", "pmatrix"):
                raise Untranslatable(f"the environment {environment}")
            rows: list[list[str]] = [[]]
            while True:
                rows[-1].append(self.balanced(self.sequence(("&", "\\\\", "\\end"))))
                separator = self.take()
                if separator == "&":
                    continue
                if separator == "\\\\":
                    rows.append([])
                    continue
                self.raw_group()
                break
            delim = '"["' if environment == "bmatrix" else '"("'
            return f"mat(delim: {delim}, " + "; ".join(", ".join(row) for row in rows) + ")"
        raise Untranslatable(f"the command \\{name}")


def typst_math(tex: str) -> str:
    """A TeX formula as Typst math (without the dollars); `Untranslatable` where it holds TeX this reader does not know."""
    reader = _Tex(tex)
    body = reader.sequence()
    if reader.peek():
        raise Untranslatable(f"an unmatched {reader.peek()}")
    return body


def formula(tex: str, unicode: str) -> str:
    """The formula as inline Typst math, or (TeX the translator does not know) its Unicode form as raw text."""
    try:
        return f"${typst_math(tex)}$" if tex else "#raw(" + string(unicode) + ")"
    except Untranslatable:
        return "#raw(" + string(unicode) + ")"


# -- tables -----------------------------------------------------------------------------------------------


def table(header: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str]) -> list[str]:
    """A `#table`: `header` and `rows` hold finished cells (code: `"…"`, `strong("…")`, `table.cell(…)`), `align` one per column."""
    lines = ["#table(", f"  columns: {len(align)},", f"  align: ({', '.join(align)},),", f"  stroke: {STROKE},"]
    lines.append("  table.header(" + ", ".join(header) + "),")
    lines += ["  " + ", ".join(row) + "," for row in rows]
    return [*lines, ")", ""]


def _label(text: str) -> str:
    return f"strong({string(text)})" if text else "[]"


def _cell(text: str, *, fill: str | None = None, hidden: bool = False) -> str:
    """A number's cell: shaded with `fill` (its text black or white, whichever reads), or grey text where the mask hides it."""
    body = _number(text)
    if fill is not None:
        ink = palette.ink(fill)
        inner = body if ink == palette.BLACK else f"text(fill: white, {body})"
        return f'table.cell(fill: rgb("{fill}"), {inner})'
    return f"text(fill: {HIDDEN_INK}, {body})" if hidden else body


def _shade(weight: float, hidden: bool) -> str:
    """A weight's fill: its shade on 0 … 1, grey where the mask hides it."""
    return palette.LIGHT.masked if hidden else palette.LIGHT.shades[palette.level(weight, 0.0, 1.0)]


def _number(text: str) -> str:
    """A written number as a string literal (digits, sign, point, e, ∞: nothing to escape), its sign a minus as Typst's markup sets -1."""
    return '"' + text.replace("-", "−") + '"'  # a minus sign, as Typst's markup writes -1


def _column_blocks(n: int) -> list[range]:
    return [range(start, min(n, start + MAX_COLS)) for start in range(0, n, MAX_COLS)] or [range(0)]


BLOCK_VALUES = 1 << 15  # cells written at once (with their shade's markup, about 2 MB)
BAND_VALUES = 1 << 15  # numbers formatted at once: the columns of as many tables as fit (at least one table)
_MINUS = "−".encode()


def _kinds() -> tuple[list[str], list[str]]:
    """The kinds of a matrix's cell: 0 plain, 1 hidden (grey text), 2 + level a shade, 2 + LEVELS a hidden cell's grey fill.

    Each kind but the plain one is a function named once per table (`lets`, in the table's own code block, so a fragment
    still sets nothing outside itself): a cell is then `s3("0.4255")`, not the whole `table.cell(fill: …, …)`.
    """
    names = ["", "hidden", *(f"s{level}" for level in range(palette.LEVELS)), "masked"]
    lets = ["", f"let hidden = text.with(fill: {HIDDEN_INK})"]
    for name, fill in zip(names[2:], [*palette.LIGHT.shades, palette.LIGHT.masked]):
        if palette.ink(fill) == palette.BLACK:
            lets.append(f'let {name} = table.cell.with(fill: rgb("{fill}"))')
        else:
            lets.append(f'let {name}(body) = table.cell(fill: rgb("{fill}"), text(fill: white, body))')
    return names, lets


def _markup(names: list[str]) -> tuple[Any, Any, Any]:
    """Each kind's markup before and after its number, as zero-padded byte tables; the last has a row's end (",\\n") instead of ", "."""
    before = _padded([(name + ('("' if name else '"')).encode() for name in names])
    close = [('")' if name else '"').encode() for name in names]
    return before, _padded([text + b", " for text in close]), _padded([text + b",\n" for text in close])


def _padded(texts: list[bytes]) -> Any:
    """The texts as rows of a byte table, zeros after each."""
    import numpy as np

    out = np.zeros((len(texts), max(map(len, texts), default=1)), dtype=np.uint8)
    for k, text in enumerate(texts):
        out[k, : len(text)] = np.frombuffer(text, dtype=np.uint8)
    return out


def _void(table_: Any, width: int) -> Any:
    """The first `width` bytes of each row of a byte table as one NumPy item (`V{width}`): copied as one memcpy."""
    import numpy as np

    return np.ascontiguousarray(table_[:, :width]).view(f"V{width}")[:, 0]


def _minus_signs(numbers: Any) -> Any:
    """`fixedtext.cells` with each "-" a minus sign "−" (3 bytes in UTF-8), as `_number` writes it: two zero bytes more in front of each number.

    A cell's only "-" is its sign, its first byte (an exponent is written e+NN: only numbers.HUGE and above are).
    """
    import numpy as np

    out = np.zeros((*numbers.shape[:2], numbers.shape[2] + 2), dtype=np.uint8)
    out[..., 2:] = numbers
    sign = (out == ord("-")).view(np.uint8)  # (R, C, W + 2): 1 where a sign is
    first, second, third = _MINUS
    out += sign * np.uint8(third - ord("-"))  # the bytes before a sign are zeros: each becomes one of the minus sign's
    out[..., :-1] += sign[..., 1:] * np.uint8(second)
    out[..., :-2] += sign[..., 2:] * np.uint8(first)
    return out


def matrix_tables(view: MatrixView, precision: int, *, shaded: bool) -> Iterator[bytes]:
    """A view as tables of at most MAX_COLS columns (the extra columns, Σ or m, with the last): labels bold, numbers right.

    UTF-8, a block of rows at a time; every line ends with a line break (the blank line after the last table or the
    shading's note left out). Each cell's number is written by `fixedtext` and put between its kind's markup
    (plain, or the call of the table's function for a hidden or shaded cell), looked up for the whole block at once.
    """
    import numpy as np

    from attncli.document import fixedtext

    n_rows, n_cols = view.data.shape
    low, high = palette.bounds(view.data, view.hidden, probabilities=view.key == "weights") if shaded else (0.0, 1.0)
    names, lets = _kinds()
    before, after, row_end = _markup(names)
    before_width, after_width = (before != 0).sum(axis=1), (after != 0).sum(axis=1)
    labels = [("  " + _label(label) + ", ").encode() for label in view.rows]  # no zero byte: `visible` writes one as \x00
    plain_labels = not any(b"-" in label for label in labels)  # then every "-" is a number's sign, made "−" in one pass
    label_table = _void(_padded(labels), max(map(len, labels), default=1))
    blocks = _column_blocks(n_cols)
    band_cols = max(MAX_COLS, BAND_VALUES // max(1, n_rows) // MAX_COLS * MAX_COLS)  # whole tables' columns
    band = range(0)
    kind_band = numbers_band = np.zeros((n_rows, 0), dtype=np.uint8)
    for number, cols in enumerate(blocks):
        last = number == len(blocks) - 1
        names_ = [name for name, _ in view.extra] if last else []
        width = len(cols) + len(names_)
        if number == 0 or cols.start >= band.stop:  # the numbers and the kinds of cells of the next tables, at once
            band = range(cols.start, min(n_cols, cols.start + band_cols))
            data = view.data[:, band.start : band.stop]
            kind_band = palette.levels(data, low, high).astype(np.uint8) + np.uint8(2) if shaded else np.zeros(data.shape, dtype=np.uint8)
            if view.hidden is not None:
                kind_band[view.hidden[:, band.start : band.stop]] = 2 + palette.LEVELS if shaded else 1
            if band.stop == n_cols and view.extra:  # the extra columns go with the last table
                data = np.column_stack([data, *(np.asarray(values, dtype=np.float64) for _, values in view.extra)])
                kind_band = np.column_stack([kind_band, np.zeros((n_rows, len(view.extra)), dtype=np.uint8)])
            numbers_band = fixedtext.cells(data, precision, fixed) if data.size else np.zeros((*data.shape, 1), dtype=np.uint8)
            numbers_band = numbers_band if plain_labels else _minus_signs(numbers_band)
        here = slice(cols.start - band.start, cols.stop - band.start + len(names_))
        kind = kind_band[:, here]
        present = np.bincount(kind.ravel(), minlength=len(names)) > 0
        present[0] = True  # (a table without rows: only the plain markup's width)
        scoped = bool(present[1:].any())
        out = []
        if len(blocks) > 1:
            out += [words(f"Columns {cols.start + 1}–{cols.stop} of {n_cols}:"), ""]
        header = ["[]", *(_label(view.cols[c]) for c in cols), *(_label(name) for name in names_)]
        lines = table(header, [], ["left", *["right"] * width])[:-2]
        if scoped:  # the table's functions, in a code block of its own
            lines = ["#{", *("  " + let for k, let in enumerate(lets) if k and present[k]), lines[0][1:], *lines[1:]]
        yield ("\n".join(out + lines) + "\n").encode()
        cell = [_void(before, int(before_width[present].max())), _void(after, int(after_width[present].max()))]
        ending = _void(row_end, int(after_width[present].max()))
        numbers = numbers_band[:, here]
        number_type = f"V{numbers.shape[2]}"
        cell_type = np.dtype([("open", cell[0].dtype), ("number", number_type), ("close", cell[1].dtype)])
        step = max(1, BLOCK_VALUES // max(1, width))
        for start in range(0, n_rows, step):
            stop = min(n_rows, start + step)
            if not width:
                yield b"".join(label[:-1] + b"\n" for label in labels[start:stop])  # a row of its label only
                continue
            kinds = kind[start:stop]
            rows = np.empty(stop - start, dtype=[("label", label_table.dtype), ("cells", cell_type, (width,))])
            rows["label"] = label_table[start:stop]
            cells = rows["cells"]
            cells["open"] = cell[0].take(kinds)
            cells["number"] = numbers[start:stop].view(number_type)[..., 0]
            cells["close"] = cell[1].take(kinds)
            cells["close"][:, -1] = ending.take(kinds[:, -1])  # the row's last cell: ",\n" instead of ", "
            text = rows.tobytes().translate(None, b"\0")  # the zeros padding labels, markup and numbers dropped
            yield text.replace(b"-", _MINUS) if plain_labels else text
        closing = ")\n}\n" if scoped else ")\n"
        if shaded or not last:
            closing += "\n"
        yield closing.encode()
    if shaded:
        masked = "; grey: hidden by the mask" if view.hidden is not None and bool(view.hidden.any()) else ""
        yield (words(f"Shaded from {fixed(low, precision)} (lightest) to {fixed(high, precision)} (darkest){masked}.") + "\n").encode()


# -- run ----------------------------------------------------------------------------------------------------


def run_typst(page: RunDocument, *, precision: int, heading_level: int = 1, standalone: bool = False, heatmap: bool = False) -> Iterator[bytes]:
    """The scenario's header, then per view a heading with its formula, its remarks and its tables; streamed a view at a time."""
    s = page.summary
    top, section = _levels(heading_level)
    lines = _preamble(s.name, wide=any(min(v.data.shape[1], MAX_COLS) > PORTRAIT_COLS for v in page.matrices)) if standalone else []
    lines += heading(top, words(s.title)) if top else [words(" ".join(s.tokens)), ""]  # without a heading, the sentence
    if s.context is not None:
        lines += [words("Context: " + " ".join(s.context)), ""]
    if s.description:
        lines += [words(s.description), ""]
    lines += [prose("; ".join(s.settings) + "."), ""]
    if s.round_steps is not None:
        lines += [words(rounded_every_step(s.round_steps)), ""]
    yield "\n".join(lines).encode()
    for view in page.matrices:
        prefix = f"Head {view.head} · " if s.heads > 1 and view.head is not None else ""
        lines = ["", *heading(section, f"{words(prefix + view.title)}: {formula(view.tex, view.formula)} {words(f'({view.shape})')}")]
        for remark in view.remarks:
            lines += [prose(remark[:1].upper() + remark[1:] + "."), ""]
        yield ("\n".join(lines) + "\n").encode()
        yield from matrix_tables(view, precision, shaded=view.square and (heatmap or view.key == "weights"))
    if (c := page.comparison) is not None:
        exact = exact_decimals(precision)
        lines = ["", *heading(section, words(hand_rounded_title(c.decimals)))]
        rows = [[_label(label), _number(vector(r, precision, whole=False)), _number(vector(e, exact, whole=False)),
                 _number(vector(r - e, exact, whole=False))] for label, r, e in zip(c.labels, c.rounded, c.exact)]  # fmt: skip
        lines += table(["[]", *map(_label, ["hand-rounded", "exact", "difference"])], rows, ["left", "left", "left", "left"])
        yield "\n".join(lines).encode()


# -- explain --------------------------------------------------------------------------------------------


def explain_typst(
    page: ExplainArticle, *, precision: int, heading_level: int = 1, full: bool = False, standalone: bool = False, tex: Steps | None = None
) -> str:
    """The Markdown article as Typst: the embeddings, scores and exponentials, weights, weighted values and output as tables, then the
    steps (with `tex`, the same steps in TeX, their arithmetic as Typst math)."""
    p = precision

    def vec(values: Any, *, whole: bool = True) -> str:
        return _number(short_vector(values, p, whole=whole, full=full))

    word = page.token
    top, h2 = _levels(heading_level)
    lines = _preamble(f"Attention for “{word}”", wide=False) if standalone else []
    lines += heading(top, words(f"Attention for “{word}”"))
    for sentence in page.intro:
        lines += [prose(sentence), ""]

    if page.inputs is not None:
        section, column, labels, X = page.inputs
        lines += heading(h2, words(section))
        lines += table([_label("Word"), _label(column)], [[string(label), vec(X[i])] for i, label in enumerate(labels)], ["left", "left"])

    lines += heading(h2, words("Scores and exponentials"))
    header = ["Pair", "Score"] + (["Scaled"] if page.scaled else []) + (["Biased"] if page.biased else []) + ["Exponential"]
    rows = []
    for key in page.keys:
        row = [string(f"{word} & {key.label}"), _cell("−∞ (masked)", hidden=True) if key.masked else _number(smart(key.score, p))]
        row += [_cell("−∞", hidden=True) if key.masked else _number(smart(key.scaled, p))] if page.scaled else []
        row += [_cell("−∞", hidden=True) if key.masked else _number(smart(key.logit, p))] if page.biased else []
        rows.append(row + [_number(smart(key.exp, p))])
    lines += table(list(map(_label, header)), rows, ["left", *["right"] * (len(header) - 1)])
    lines += [words(f"Sum of the exponentials: {fixed(page.exp_sum, p)}"), ""]

    lines += heading(h2, words("Attention weights"))
    weights = [[string(f"{word} & {k.label}"), _cell(fixed(k.weight, p), fill=_shade(k.weight, k.masked))] for k in page.keys]
    lines += table([_label("Pair"), _label("Weight (α)")], weights, ["left", "right"])

    lines += heading(h2, words("Weighted values"))
    rows = [[string(f"{word} & {k.label}"), _number(fixed(k.weight, p)), vec(k.v), vec(k.weighted_v, whole=False)] for k in page.visible]
    lines += table(list(map(_label, ["Pair", "Weight (α)", "Value (V)", "Weighted value (α·V)"])), rows, ["left", "right", "left", "left"])

    lines += heading(h2, words("Output"))
    lines += [words(f"Output({word}) = {short_vector(page.output, p, whole=False, full=full)}"), ""]
    if page.exact_output is not None:
        difference = page.output - page.exact_output
        exact = exact_decimals(p)
        lines += [words(f"Exact arithmetic gives {short_vector(page.exact_output, exact, whole=False, full=full)} "
                        f"(difference {short_vector(difference, exact, whole=False, full=full)})."), ""]  # fmt: skip

    lines += heading(h2, words("Step by step"))
    lines += steps_typst(page.steps, h2 + 1, tex)
    return "\n".join(lines).rstrip("\n") + "\n"


def steps_typst(steps: Steps, level: int, tex: Steps | None = None) -> list[str]:
    """Each step: a heading at `level` with its formula, its arithmetic, its notes as paragraphs.

    With `tex` (the same steps written by `TexWriter`) a step's formula and arithmetic are Typst math, an equation aligned at
    each line's first relation (translated from the rows LaTeX writes); a step whose TeX the translator does not know, or whose
    matrix is too big for a page, keeps the Unicode lines as a raw block, as every step without `tex`.
    """
    lines: list[str] = []
    told = list(tex.steps) if tex is not None and len(tex.steps) == len(steps.steps) else [None] * len(steps.steps)
    for number, (step, math) in enumerate(zip(steps.steps, told), 1):
        equation = None if math is None else _step_math(math, steps.precision)
        title = words(f"Step {number}: {step.title} ({step.formula})")
        if math is not None and math.formula:
            with contextlib.suppress(Untranslatable):  # TeX it cannot say: the Unicode formula in words, as before
                title = words(f"Step {number}: {step.title}") + f" ${typst_math(math.formula)}$"
        lines += heading(level, title)
        body = step_lines(step, steps.precision)
        if equation is not None:
            lines += [equation, ""]
        elif body:
            lines += [f"#raw(block: true, {literal(chr(10).join(visible(line) for line in body))})", ""]
        for note in step.notes:
            lines += [prose(note), ""]
    return lines


MAX_STEP_MATRIX = (16, 12)  # rows and columns of a step's matrix written as math; a bigger one keeps the step's raw lines


def _step_math(step: Step, precision: int) -> str | None:
    """The step's arithmetic (TeX, from `TexWriter`) as a block equation, `$ lhs &= rhs \\ … $`; None where it cannot be."""
    import numpy as np

    from attncli.formats.latex import aligned_rows, fitted_rows, top_level_split

    rows = fitted_rows(aligned_rows(step))
    if not rows:
        return None
    try:
        written = [" & ".join(typst_math(part) if part.strip() else "" for part in _aligned_parts(row, top_level_split)) for row in rows]
        if step.matrix is not None:
            name, matrix = step.matrix
            grid = np.atleast_2d(matrix)
            if grid.shape[0] > MAX_STEP_MATRIX[0] or grid.shape[1] > MAX_STEP_MATRIX[1]:
                return None
            cells = "; ".join(", ".join(_math_number(smart(float(x), precision)) for x in row) for row in grid)
            written.insert(1, f'{typst_math(name)} & = mat(delim: "[", {cells})')
    except Untranslatable:
        return None
    return "$ " + " \\\n  ".join(written) + " $"


def _aligned_parts(row: str, split: Callable[[str, tuple[str, ...]], list[tuple[str, str]]]) -> list[str]:
    """A row of `aligned` cut at its `&`s (outside braces and matrices); a row that starts at the alignment (`&\\quad + …`) too."""
    if row.startswith("&"):
        return ["", *(part for _, part in split(row[1:], ("&",)))]
    return [part for _, part in split(row, ("&",))]


def _math_number(text: str) -> str:
    """A written number in math: digits as they are, −∞ as minus infinity, anything else as a string."""
    if re.fullmatch(r"-?\d+(?:\.\d+)?", text):
        return text
    return {"−∞": "-infinity", "-inf": "-infinity", "∞": "infinity"}.get(text, literal(text))


# -- documents (attncli.document.blocks) ------------------------------------------------------------


def document_typst(document: Document, *, level: int = 1, standalone: bool = False) -> str:
    """Each block: headings (the top one at `level`, 0 leaves it out), paragraphs, a list of values, a `#table`, the steps."""
    out = _preamble(document.title, wide=False) if standalone else []
    section = max(level, 1) + 1
    for block in document.blocks:
        if isinstance(block, Heading):
            if block.level == 1 and level == 0:
                continue
            out += heading(max(level, 1) + block.level - 1, words(block.text))
        elif isinstance(block, Paragraph | Note):
            out += [prose(block.text), ""]
        elif isinstance(block, Values) and block.record:  # a field per item, one of several lines a list of its own
            for name, values in fields(block):
                out += [f"- {words(f'{name}: {values[0]}')}"] if len(values) == 1 else [f"- {words(f'{name}:')}", *(f"  - {words(v)}" for v in values)]
            out += [""] * bool(block.pairs)
        elif isinstance(block, Values):
            if block.pairs:
                out += [f"- {prose(f'{name} = {value}')}" for name, value in block.pairs] + [""]
        elif isinstance(block, Steps):
            out += steps_typst(block, section)
        elif isinstance(block, Table):
            align = ["right" if right else "left" for right in block.numeric]
            draw = [_table_cell if right or not block.listing else string for right in block.numeric]  # a listing's words are words, "-1" too
            out += table([_label(cell) for cell in block.header], [[draw[c](text) for c, text in enumerate(row)] for row in block.rows], align)
        else:
            raise TypeError(f"Typst has no drawing for {type(block).__name__}")
    return "\n".join(out).rstrip("\n") + "\n"


_NUMBERS = re.compile(r"(?:[-+]?[\d.]+(?:e[-+]?\d+)?|\[[-+\d., …e]*\])(?: \([-+\d.]+( numbers)?\))?")  # -2.8e-17, -0.008 (0), [0.1, …, -0.9] (64)


def _table_cell(cell: str) -> str:
    """A document's table cell: a number or a vector with minus signs (as a run's numbers), any other text as written."""
    return _number(cell) if _NUMBERS.fullmatch(cell) else string(cell)


# -- the pages (attncli.document.pages) ------------------------------------------------------------


def run(page: RunPage, options: Options) -> Iterator[bytes]:
    return run_typst(page.document(), precision=page.precision, heading_level=options.heading_level, standalone=bool(options.standalone),
                     heatmap=options.heatmap)  # fmt: skip


def explain(page: ExplainPage, options: Options) -> str:
    from attncli.document.notation import TexWriter, Writer

    article = page.article(Writer())
    return explain_typst(article, precision=page.precision, heading_level=options.heading_level, full=options.full,
                         standalone=bool(options.standalone), tex=page.article(TexWriter()).steps)  # fmt: skip


def report(page: ReportPage, options: Options) -> str:
    return document_typst(page.document(), level=options.heading_level, standalone=bool(options.standalone))


def _figure(svg: str) -> list[str]:
    """An SVG drawing of attncli's (the map's grid, the shaded sentence) as a Typst image, at most the text's width."""
    return [f'#image(bytes({literal(svg)}), format: "svg", width: 100%)', ""]


def heads(page: HeadsPage, options: Options) -> str:
    """The map or a comparison: the grid of thumbnails (the SVG format's figure), the notable heads with their commands, the statistics."""
    from attncli.document.maps import SHORT
    from attncli.formats.headgrid import grid_svg, statistic

    grid, stats = page.grid(), page.table()
    top, section = _levels(options.heading_level)
    lines = _preamble(grid.title, wide=False) if options.standalone else []
    lines += heading(top, words(grid.title)) + _figure(grid_svg(grid))  # the figure has the title and what the shade means
    lines += heading(section, words(stats.heading))
    readings = [f"- {words(text)}" + (f" #raw({string(command)})" if command else "") for text, command in stats.readings]
    lines += [*readings, ""] if readings else [words(stats.none), ""]
    lines += heading(section, words("Statistics")) + [words(stats.legend), ""]

    def number(value: int | float | None) -> str:
        text = statistic(value, page.precision, stats.general)
        return string(text) if text == "–" else _number(text)

    rows = [[number(value) for value in row] for row in stats.rows]
    lines += table([_label(SHORT.get(column, column)) for column in stats.columns], rows, ["right"] * len(stats.columns))
    return "\n".join(lines).rstrip("\n") + "\n"


def shade(page: ShadePage, options: Options) -> str:
    """The sentence shaded by one token's weights (the SVG format's figure), what the rows show, and the weights as a table."""
    from attncli.formats.shade import svg

    shaded = page.shaded()
    top, section = _levels(options.heading_level)
    lines = _preamble(shaded.title, wide=False) if options.standalone else []
    lines += heading(top, words(shaded.title)) + _figure(svg(shaded, precision=page.precision))
    readings = [f"- {words(f'{row.name}: {text}')}" for row in shaded.rows for text in row.readings]
    if readings:
        lines += heading(section, words("What the rows show")) + readings + [""]
    lines += heading(section, words("The weights"))
    rows = [[_label(row.name), *(_cell(fixed(w, page.precision), fill=_shade(w, not seen)) if seen else _cell("–", hidden=True)
                                 for w, seen in zip(row.weights, row.visible))] for row in shaded.rows]  # fmt: skip
    lines += table(["[]", *map(_label, shaded.tokens)], rows, ["left", *["right"] * len(shaded.tokens)])
    return "\n".join(lines).rstrip("\n") + "\n"
