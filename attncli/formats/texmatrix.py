r"""A matrix in TeX with its row labels on the left and column labels above, for pdflatex, KaTeX and MathJax alike.

The numbers sit in `\left[\begin{array}{rr…r} … \end{array}\right]`, which has no column
limit (amsmath's bmatrix stops at 10). The labels are two more arrays: the column labels
above, the row labels to the left. Two arrays line up column by column only if their
columns are equally wide, so each header cell carries an invisible copy of its column's
widest number under it (`\hphantom`, with `\smash` so it adds no height) and each first-row
number is set flush right in a cell as wide as its label (`_first_row`); each row of numbers carries an
invisible copy of its label (`\vphantom`) so the rows line up with the labels too.

`standalone` wraps display blocks into a complete article that pdflatex compiles.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from attncli.document import escape
from attncli.document.numbers import fixed

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from attncli.document.blocks import Matrix as MatrixView


def number(x: float, precision: int) -> str:
    r"""x with `precision` decimals in TeX; masked cells are `-\infty`."""
    if math.isinf(x):
        return r"-\infty" if x < 0 else r"\infty"
    return fixed(x, precision)


def labelled_matrix(
    data: npt.NDArray[np.float64],
    *,
    precision: int,
    rows: Sequence[str] | None = None,
    cols: Sequence[str] | None = None,
    extra: Sequence[tuple[str, npt.NDArray[np.float64]]] = (),
) -> str:
    r"""The matrix (rows, cols) as math-mode TeX, labelled with `rows` on the left and `cols` above when given.

    `extra` columns (such as ("Σ", row sums)) follow a vertical rule. Labels are input text
    and go through `escape.latex`; "Σ" becomes `\Sigma`.
    """
    labels = _Labels(rows, None if cols is None else [*cols, *(name for name, _ in extra)])
    band = _Band(data, [vector for _, vector in extra], precision, labels, 0)
    return band.matrices(0, band.width, 1, extra=len(extra))[0].decode()


@functools.lru_cache(maxsize=1 << 16)
def _label(text: str) -> str:
    if text.isascii() and text.isalnum():  # a word or a number ("t1", "cat"): what escape.latex writes, without its character loop
        return r"\text{" + text + "}"
    return r"\Sigma" if text == "Σ" else escape.latex(text)


# The widths in em of what a number is made of in Computer Modern, which pdflatex, KaTeX and MathJax all set numbers in:
# every digit is 0.5em wide, so a number's width is known exactly from its text.
_TEX_WIDTHS = {"-": 0.7778, ".": 0.2778, "+": 0.7778, "e": 0.4661, r"\infty": 1.0}


@functools.cache
def _byte_widths() -> npt.NDArray[np.int64]:
    """(256,) what each byte of a number's text adds to its width, in 1/10,000 em (so that sums are exact): 0.5em each, the
    signs, the point and the e as _TEX_WIDTHS has them, nothing for a zero byte or a space (padding); \\infty's backslash carries the
    rest of the symbol's 1em beyond its other five characters' 0.5em each."""
    import numpy as np

    table = np.full(256, 5000, dtype=np.int64)
    table[0] = table[ord(" ")] = 0
    for character in "-.+e":
        table[ord(character)] = round(_TEX_WIDTHS[character] * 10_000)
    table[ord("\\")] = round(_TEX_WIDTHS[r"\infty"] * 10_000) - 5 * 5000
    return table


def _tex_widths(cells: npt.NDArray[np.uint8]) -> npt.NDArray[np.float64]:
    """(C,) the width in em of each row of a byte table of numbers (zero bytes pad), counted at once: 0.5em a character, but
    the signs, the point, the e and the \\infty (its six characters one symbol) as _TEX_WIDTHS has them."""
    widths: npt.NDArray[np.float64] = _tex_units(cells) / 10_000
    return widths


def _tex_units(cells: npt.NDArray[np.uint8]) -> npt.NDArray[np.int64]:
    """`_tex_widths` in 1/10,000 em, exactly."""
    units: npt.NDArray[np.int64] = _byte_widths()[cells].sum(axis=1)
    return units


def _first_row(labels: npt.NDArray[np.uint8], cells: npt.NDArray[np.uint8]) -> tuple[bytes, list[int]]:
    r"""The first row's numbers, each " & " then a cell as wide as its column's label or itself, whichever is wider, the number flush right.

    `\hphantom{\overset{label}{number}}` is the wider of the two; a kern back by the number's own
    width (known exactly: see _TEX_WIDTHS) puts the number at its right edge, as the `r` column
    sets the rows below. (An `\overset` alone would centre the number under a wider label, off its column.)
    """
    import numpy as np

    n = min(len(labels), len(cells))
    cells = cells[:n]
    # a band's numbers come in a few widths (0.5em a digit, a sign, a point): each written once, then one row per number
    distinct, which = np.unique(_tex_units(cells), return_inverse=True)
    widths = _table([f"{width // 10_000}.{width % 10_000:04d}" for width in distinct.tolist()])[which.reshape(-1)]  # (n, w) in em

    def text(piece: bytes) -> npt.NDArray[np.uint8]:
        return np.frombuffer(piece, dtype=np.uint8)

    return _joined(text(rb" & \hphantom{\overset{\textstyle "), labels[:n], text(b"}{"), cells, text(rb"}}\kern-"), widths,
                   text(b"em {"), cells, text(b"}"))  # fmt: skip


def _table(texts: list[str], fill: bytes = b"") -> npt.NDArray[np.uint8]:
    """Texts as the rows of a byte table, each padded with zero bytes (which `escape.latex` never writes), or with `fill`."""
    import numpy as np

    encoded = [text.encode() for text in texts]
    width = max(map(len, encoded), default=0) or 1
    if fill:
        encoded = [text.ljust(width, fill) for text in encoded]
    return np.array(encoded, dtype=f"S{width}").view(np.uint8).reshape(len(encoded), width)


def _joined(*parts: npt.NDArray[np.uint8]) -> tuple[bytes, list[int]]:
    """Row i of every part (each (N, width_i), or (width,) for every row), one after another, and where each row starts."""
    import numpy as np

    n = max(len(part) for part in parts if part.ndim == 2)
    table = np.concatenate([part if part.ndim == 2 else np.broadcast_to(part, (n, len(part))) for part in parts], axis=1)
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.count_nonzero(table, axis=1), out=starts[1:])
    return table.tobytes().translate(None, b"\0"), starts.tolist()


class _Labels:
    """A matrix's row and column labels in TeX, and the pieces of text around them, written once for all its bands."""

    def __init__(self, rows: Sequence[str] | None, cols: Sequence[str] | None) -> None:
        import numpy as np

        self.rows = None if rows is None else [_label(text) for text in rows]
        self.cols = None if cols is None else [_label(text) for text in cols]
        self.phantoms = self.phantom_widths = None
        if self.rows is not None:  # (R, P) padded with spaces, which TeX math does not print: a band is its cells as they are
            phantoms = [rf"\vphantom{{{head}}}" for head in self.rows]
            self.phantoms, self.phantom_widths = _table(phantoms, b" "), np.array([len(text.encode()) for text in phantoms])  # (R,)
        self.under = self.over = np.zeros((0, 0), dtype=np.uint8)
        if self.cols is not None:  # the widest numbers' widths under the labels (the labels' over the first row: `_first_row`)
            self.under = _table([rf"}}}}{{{head}}}}}" for head in self.cols])  # (C', B)
            self.over = _table(self.cols)  # (C', H) the labels as a byte table, for every band's first row


class _Band:
    r"""Some rows of a matrix (and of its extra columns) written at once, then cut into display blocks of columns.

    Every number is written into one NumPy byte table (`fixedtext.cells`), each after " & ",
    right-aligned among spaces (TeX math does not print them, and a table without empty places
    to drop is written as it is); the rows of a run of equally wide blocks are laid out, each
    block's first number followed by its row's `\vphantom`, each row by " \\ ".
    """

    def __init__(self, data: npt.NDArray[np.float64], extra: Sequence[npt.NDArray[np.float64]], precision: int, labels: _Labels, r0: int) -> None:
        import numpy as np

        from attncli.document import fixedtext

        self.values = np.column_stack([data, *extra]) if extra else np.asarray(data, dtype=np.float64)  # (R, C')
        self.cells = fixedtext.cells(self.values, precision, number, b" & ", ord(" "))  # (R, C', W)
        self.n_rows, self.width = int(self.values.shape[0]), int(self.values.shape[1])
        self.precision = precision
        self.labels = labels
        rows = labels.rows
        self.phantoms = None
        if labels.phantoms is not None and labels.phantom_widths is not None:  # as wide as this band's widest: t1 … t48 have no empty place
            self.phantoms = labels.phantoms[r0 : r0 + self.n_rows, : int(labels.phantom_widths[r0 : r0 + self.n_rows].max(initial=0))]  # (R, P)
        self.headed = labels.cols is not None and self.n_rows > 0  # the first row carries the labels' widths
        self.left = ""
        if rows is not None:
            tallest = r"\vphantom{0\infty}"  # numbers never make a row taller than these
            # \;: MathJax sets arrays without outer padding, which would put the labels against the "="
            self.left = r"\; \begin{array}{r} " + r" \\ ".join(tallest + head for head in rows[r0 : r0 + self.n_rows]) + r" \end{array}"
        self.header, self.header_at = b"", [0] * (self.width + 1)
        if labels.cols is not None:
            widest = self._widest() if self.n_rows else np.zeros((self.width, 1), dtype=np.uint8)
            before = np.frombuffer(rb" & \smash[b]{\underset{\hphantom{\textstyle ", dtype=np.uint8)
            self.header, self.header_at = _joined(before, widest, labels.under)
        self.first, self.first_at = b"", [0] * (self.width + 1)
        if self.headed and labels.cols is not None:
            self.first, self.first_at = _first_row(labels.over, self.cells[0, :, 3:])

    def _widest(self) -> npt.NDArray[np.uint8]:
        """Each column's widest number, (C', W) padded with zero bytes: its largest, its smallest or its first non-finite one.

        Their texts are `fixedtext.cells` of those values, as the band's own cells write them, measured exactly (`_tex_units`).
        """
        import numpy as np

        from attncli.document import fixedtext

        values = self.values  # (R, C')
        columns = np.arange(self.width)
        with np.errstate(invalid="ignore", over="ignore"):  # +∞ and −∞ sum to NaN: a warning on stderr otherwise
            every = bool(np.isfinite(values.sum()))  # a finite sum: no ±∞ or NaN anywhere (a sum that overflows takes the long way)
        if every:  # (2, C') each column's largest and smallest number, reduced along the rows as they lie in memory
            picks = np.stack([values.max(axis=0), values.min(axis=0)])
        else:  # (3, C') the largest and the smallest finite number, and the first non-finite one
            finite = np.isfinite(values)
            first = values[(~finite).argmax(axis=0), columns]
            picks = np.stack([np.where(finite, values, -np.inf).max(axis=0), np.where(finite, values, np.inf).min(axis=0), first])
        texts = fixedtext.cells(picks, self.precision, number)  # (m, C', W)
        widths = _tex_units(texts.reshape(-1, texts.shape[2])).reshape(len(picks), self.width)  # (m, C') in 1/10,000 em
        if not every:
            widths[0:2, ~finite.any(axis=0)] = -1  # a column with no finite number
            widths[2, finite.all(axis=0)] = -1  # or none that is not
        best = np.zeros(self.width, dtype=np.intp)  # max() keeps the first of equally wide candidates
        for k in range(1, len(picks)):
            best[widths[k] > widths[best, columns]] = k
        chosen: npt.NDArray[np.uint8] = texts[best, columns]  # (C', W)
        return chosen

    def matrices(self, c0: int, width: int, count: int, *, extra: int = 0, before: Sequence[bytes] = (), after: bytes = b"") -> list[bytes]:
        r"""`count` blocks of `width` columns from column c0, each a labelled matrix in UTF-8; the last `extra` of a block's columns follow a rule.

        Block k starts with `before[k]` (when given) and ends with `after`: each block is joined once, from its parts.
        """
        parts: list[bytes | memoryview] = []
        ends = self.parts(parts, c0, width, count, extra=extra, before=before, after=after)
        return [b"".join(parts[start:end]) for start, end in zip([0, *ends], ends)]

    def parts(self, blocks: list[bytes | memoryview], c0: int, width: int, count: int, *, extra: int, before: Sequence[bytes],
               after: bytes) -> list[int]:  # fmt: skip
        """The parts of `matrices`' blocks appended to `blocks`, and where in it each block ends."""
        import numpy as np

        skip = 1 if self.headed else 0
        body_rows = self.n_rows - skip
        cell = self.cells.shape[2]
        phantom = self.phantoms[skip:] if self.phantoms is not None and width else np.zeros((body_rows, 0), dtype=np.uint8)  # (R', P)
        gap = phantom.shape[1]
        grid = self.cells[skip:, c0 : c0 + count * width].reshape(body_rows, count, width * cell)  # (R', K, w·W)
        out = np.empty((count, body_rows, width * cell - 3 + gap + 4), dtype=np.uint8)  # (K, R', a row of a block), every byte written below
        out[:, :, : cell - 3] = grid[:, :, 3:cell].transpose(1, 0, 2)  # the first number, without " & "
        out[:, :, cell - 3 : cell - 3 + gap] = phantom
        out[:, :, cell - 3 + gap : width * cell - 3 + gap] = grid[:, :, cell:].transpose(1, 0, 2)
        out[:, :, -4:] = np.frombuffer(rb" \\ ", dtype=np.uint8)  # the last row's is cut off below

        labels = self.labels
        spec = ("r" * (width - extra) + ("|" + "r" * extra if extra else "")).encode()
        start = [rb"\left[\begin{array}{", spec, b"} "]
        end = [rb" \end{array}\right]"]
        if labels.cols is not None:
            start = [rb"\begin{array}{rc} & ", rb"\begin{array}{", spec.replace(b"|", b""), b"} ", b"", rb" \end{array}", rb" \\ ",
                     self.left.encode(), b" & ", *start]  # fmt: skip
            end.append(rb" \end{array}")
        else:
            start.insert(0, self.left.encode())
        at_header = 4 if labels.cols is not None else -1  # where the header's cells go in `start`
        phantom_top = self.phantoms[0].tobytes() if self.headed and self.phantoms is not None and width else b""
        ends = []
        for k in range(count):  # every part is joined once, into the block
            first, last = c0 + k * width, c0 + (k + 1) * width
            if at_header >= 0:
                start[at_header] = self.header[self.header_at[first] + 3 : self.header_at[last]]
            body = memoryview(out[k].tobytes())[:-4]  # the last row's " \\ " cut off
            body_parts: list[bytes | memoryview] = [body]
            if self.headed:
                at = self.first_at
                top = [self.first[at[first] + 3 : at[first + 1]], phantom_top, self.first[at[first + 1] : at[last]]]
                body_parts = [*top, rb" \\ ", body] if body_rows else top
            blocks += [before[k] if before else b"", *start, *body_parts, *end, after]
            ends.append(len(blocks))
        return ends


def matrix_blocks(
    symbol: str,
    data: npt.NDArray[np.float64],
    *,
    precision: int,
    rows: Sequence[str] | None = None,
    cols: Sequence[str] | None = None,
    extra: Sequence[tuple[str, npt.NDArray[np.float64]]] = (),
    max_rows: int | None = None,
    max_cols: int | None = None,
) -> list[str]:
    r"""Display-block bodies `symbol = matrix`, split into pieces of at most max_rows × max_cols, each saying which part it is.

    `symbol` is TeX ("S = QK^\top" gives "S = QK^\top = [matrix]"). Extra columns go with
    the last piece of columns.
    """
    blocks = iter_blocks(symbol, data, precision=precision, rows=rows, cols=cols, extra=extra, max_rows=max_rows, max_cols=max_cols)
    return [block.decode() for block in blocks]


def iter_blocks(
    symbol: str,
    data: npt.NDArray[np.float64],
    *,
    precision: int,
    rows: Sequence[str] | None = None,
    cols: Sequence[str] | None = None,
    extra: Sequence[tuple[str, npt.NDArray[np.float64]]] = (),
    max_rows: int | None = None,
    max_cols: int | None = None,
    before: bytes = b"",
    after: bytes = b"",
    bands: bool = False,
) -> Iterator[bytes]:
    """The blocks of `matrix_blocks` one at a time in UTF-8, each between `before` and `after`, each band of rows formatted at once.

    With `bands`, each band of rows comes as one text, its blocks one after another (for a writer: fewer, larger chunks).
    """
    n_rows, n_cols = int(data.shape[0]), int(data.shape[1])
    row_step = max_rows or max(n_rows, 1)
    col_step = max_cols or max(n_cols, 1)
    labels = _Labels(rows, None if cols is None else [*cols, *(name for name, _ in extra)])
    starts = list(range(0, max(n_cols, 1), col_step))
    # blocks of exactly col_step columns are laid out together; the last one, with the extra columns, alone
    alike = sum(1 for c0 in starts if c0 + col_step < n_cols or (c0 + col_step == n_cols and not extra))
    columns = [f"columns {c0 + 1} to {min(c0 + col_step, n_cols)}" if min(c0 + col_step, n_cols) - c0 < n_cols else "" for c0 in starts]
    for r0 in range(0, max(n_rows, 1), row_step):
        r1 = min(r0 + row_step, n_rows)
        band = _Band(data[r0:r1], [vector[r0:r1] for _, vector in extra], precision, labels, r0)
        rows_part = f"rows {r0 + 1} to {r1}" if r1 - r0 < n_rows else ""
        heads = []  # each block's `before` and its equation's left side
        for part in columns:
            note = ", ".join(filter(None, (rows_part, part)))
            heads.append(before + (symbol + (r" \quad \text{(" + note + ")}" if note else "") + " = ").encode())
        last = starts[alike] if alike < len(starts) else 0
        if bands:  # the band's blocks joined at once: one copy of its text (and one write of it) instead of one per block
            parts: list[bytes | memoryview] = []
            if alike:
                band.parts(parts, 0, col_step, alike, extra=0, before=heads[:alike], after=after)
            if alike < len(starts):
                band.parts(parts, last, band.width - last, 1, extra=len(extra), before=heads[alike:], after=after)
            yield b"".join(parts)
            continue
        if alike:
            yield from band.matrices(0, col_step, alike, before=heads[:alike], after=after)
        if alike < len(starts):
            yield from band.matrices(last, band.width - last, 1, extra=len(extra), before=heads[alike:], after=after)


def view_blocks(view: MatrixView, *, precision: int, max_rows: int | None = None, max_cols: int | None = None) -> list[str]:
    """A view's display-block bodies, `view.tex = [labelled matrix]`, split as `matrix_blocks` does."""
    return matrix_blocks(view.tex, view.data, precision=precision, rows=view.rows, cols=view.cols, extra=view.extra,
                         max_rows=max_rows, max_cols=max_cols)  # fmt: skip


# -- a complete document ---------------------------------------------------------------------------

PREAMBLE = r"""\documentclass{article}
\usepackage[T1]{fontenc}  % real < > | _ glyphs, accented letters as glyphs (lmodern below has them as Type 1 fonts)
\usepackage{lmodern}
\usepackage{amsmath}
\usepackage{graphicx}  % \resizebox: displays wider than the page are scaled down to fit
\usepackage[a4paper,margin=2cm]{geometry}
\allowdisplaybreaks  % long align* steps may break across pages
{\catcode`\/=\active \gdef/{\slash}}  % a slash in the text (a checkpoint's folder) is a place to break the line,
\AtBeginDocument{\catcode`\/=\active}  % so a long path does not run into the margin,
\setlength{\emergencystretch}{3em}  % and the line before it may stretch a little to let it break
\newsavebox{\attnclibox}
\newcommand{\attnclifit}[1]{%
  \sbox{\attnclibox}{$\displaystyle #1$}%
  \ifdim\wd\attnclibox>\linewidth\resizebox{\linewidth}{!}{\usebox{\attnclibox}}\else\usebox{\attnclibox}\fi}
"""

_BLOCK = re.compile(r"^\$\$ (.*) \$\$$")
_ARRAY_COLUMNS = re.compile(r"\\begin\{array\}\{([lcr|]+)\}")
PORTRAIT_COLUMNS = 9  # columns of 4-decimal numbers an A4 portrait page holds at full size, with labels
_ALIGNED = re.compile(r"^\\begin\{aligned\} (.*) \\end\{aligned\}$")


def standalone(body: str, *, title: str | None = None, landscape: bool | None = None) -> str:
    r"""A complete article holding `body`: lines of `$$ … $$` display blocks, `%` comments and blank lines.

    Each `$$ X $$` becomes `\[ X \]`, scaled down to the page width if wider; a block that is
    one `aligned` becomes `align*`, so its steps may break across pages. Other lines pass
    through unchanged. The page is A4, landscape when a matrix has more than PORTRAIT_COLUMNS
    columns (unless `landscape` says otherwise). Needs amsmath, graphicx, geometry and lmodern
    (in every TeX Live and MiKTeX; Debian: texlive-latex-recommended and lmodern).
    """
    if landscape is None:
        widest = max((len(spec.replace("|", "")) for spec in _ARRAY_COLUMNS.findall(body)), default=0)
        landscape = widest > PORTRAIT_COLUMNS
    lines = [document_start(title=title, landscape=landscape)]
    lines += [document_line(line) for line in body.splitlines()]
    lines.append(DOCUMENT_END)
    return "\n".join(lines) + "\n"


DOCUMENT_END = r"\end{document}"


def document_start(*, title: str | None = None, landscape: bool = False) -> str:
    r"""The preamble and `\begin{document}` (and the title) of a standalone article."""
    out = [PREAMBLE.replace("a4paper,", "a4paper,landscape,") if landscape else PREAMBLE]
    if title is not None:
        out.append(r"\title{" + _plain_title(title) + "}\n\\date{}")
    out.append(r"\begin{document}")
    if title is not None:
        out.append(r"\maketitle")
    return "\n".join(out)


def document_line(line: str) -> str:
    r"""One line of a `$$ … $$` body as the article writes it: `\[ … \]` fitted to the page, or `align*`."""
    block = _BLOCK.match(line)
    if not block:
        return line
    inner = block.group(1)
    aligned = _ALIGNED.match(inner)
    if aligned and r"\begin{aligned}" not in aligned.group(1):
        return r"\begin{align*} " + aligned.group(1) + r" \end{align*}"
    return r"\[ \attnclifit{" + inner + r"} \]"


def _plain_title(title: str) -> str:
    return "$" + escape.latex(title) + "$"
