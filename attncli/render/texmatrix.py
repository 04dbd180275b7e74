r"""A matrix in TeX with its row labels on the left and column labels above, for pdflatex, KaTeX and MathJax alike.

The numbers sit in `\left[\begin{array}{rr…r} … \end{array}\right]`, which has no column
limit (amsmath's bmatrix stops at 10). The labels are two more arrays: the column labels
above, the row labels to the left. Two arrays line up column by column only if their
columns are equally wide, so each header cell carries an invisible copy of its column's
widest number under it and each first-row number an invisible copy of its label over it
(`\hphantom`, with `\smash` so neither adds height); each row of numbers carries an
invisible copy of its label (`\vphantom`) so the rows line up with the labels too.

`standalone` wraps display blocks into a complete article that pdflatex compiles.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from attncli import escape
from attncli.numbers import HUGE, fixed

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from attncli.views import MatrixView

# Rough widths in em of what a number is made of, to pick a column's widest number.
_WIDTHS = {"-": 0.78, ".": 0.28, r"\infty": 1.0}


def number(x: float, precision: int) -> str:
    r"""x with `precision` decimals in TeX; masked cells are `-\infty`."""
    if math.isinf(x):
        return r"-\infty" if x < 0 else r"\infty"
    return fixed(x, precision)


def row_numbers(values: npt.NDArray[np.float64], precision: int, write: Callable[[float, int], str] | None = None) -> list[str]:
    """`write` (default `number`) of each value of a row: plain rows formatted at once, the same text a few times faster."""
    import numpy as np

    special = ~np.isfinite(values) | (np.abs(values) >= HUGE) | (np.signbit(values) & (values > -(10.0**-precision)))  # −∞, 1e+15, -0
    if special.any():
        return [(write or number)(x, precision) for x in values.tolist()]
    return [f"%.{precision}f" % x for x in values.tolist()]


def _widest(column: npt.NDArray[np.float64], precision: int) -> str:
    """The widest of a column's numbers: its largest, its smallest or -∞ (width grows with digits and the minus sign)."""
    import numpy as np

    finite = column[np.isfinite(column)]
    candidates = [number(float(x), precision) for x in (finite.max(), finite.min())] if finite.size else []
    candidates += [number(float(x), precision) for x in column[~np.isfinite(column)][:1]]
    return max(candidates, key=_width, default="")


def _width(tex: str) -> float:
    infinities = tex.count(r"\infty")
    rest = tex.replace(r"\infty", "")
    return infinities * _WIDTHS[r"\infty"] + sum(_WIDTHS.get(c, 0.5) for c in rest)


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
    n_rows, n_cols = int(data.shape[0]), int(data.shape[1])
    cells = [row_numbers(row, precision) for row in data]
    for _, vector in extra:
        for r in range(n_rows):
            cells[r].append(number(float(vector[r]), precision))
    heads = [_label(c) for c in cols] + [_label(name) for name, _ in extra] if cols is not None else None
    row_heads = [_label(r) for r in rows] if rows is not None else None
    spec = "r" * n_cols + ("|" + "r" * len(extra) if extra else "")

    body_rows = []
    for r, row in enumerate(cells):
        row = list(row)
        if heads is not None and r == 0:  # the labels' widths, invisibly, in the first row
            row = [rf"\smash[t]{{\overset{{\hphantom{{\textstyle {head}}}}}{{{{{cell}}}}}}}" for head, cell in zip(heads, row)]
        if row_heads is not None:  # the label's height and depth, after the number so that its minus stays unary
            row[0] += rf"\vphantom{{{row_heads[r]}}}"
        body_rows.append(" & ".join(row))
    matrix = r"\left[\begin{array}{" + spec + "} " + r" \\ ".join(body_rows) + r" \end{array}\right]"
    if heads is None and row_heads is None:
        return matrix

    top = ""
    if heads is not None:
        columns = [data[:, c] for c in range(n_cols)] + [vector for _, vector in extra]
        widest = [_widest(column, precision) if n_rows else "" for column in columns]
        header = [rf"\smash[b]{{\underset{{\hphantom{{\textstyle {w}}}}}{{{head}}}}}" for head, w in zip(heads, widest)]
        top = r"\begin{array}{" + spec.replace("|", "") + "} " + " & ".join(header) + r" \end{array}"
    left = ""
    if row_heads is not None:
        tallest = r"\vphantom{0\infty}"  # numbers never make a row taller than these
        # \;: MathJax sets arrays without outer padding, which would put the labels against the "="
        left = r"\; \begin{array}{r} " + r" \\ ".join(tallest + head for head in row_heads) + r" \end{array}"
    if not top:
        return left + matrix
    return r"\begin{array}{rc} & " + top + r" \\ " + left + " & " + matrix + r" \end{array}"


def _label(text: str) -> str:
    return r"\Sigma" if text == "Σ" else escape.latex(text)


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
    n_rows, n_cols = int(data.shape[0]), int(data.shape[1])
    row_step = max_rows or max(n_rows, 1)
    col_step = max_cols or max(n_cols, 1)
    blocks = []
    for r0 in range(0, max(n_rows, 1), row_step):
        for c0 in range(0, max(n_cols, 1), col_step):
            r1, c1 = min(r0 + row_step, n_rows), min(c0 + col_step, n_cols)
            part = []
            if r1 - r0 < n_rows:
                part.append(f"rows {r0 + 1} to {r1}")
            if c1 - c0 < n_cols:
                part.append(f"columns {c0 + 1} to {c1}")
            note = r" \quad \text{(" + ", ".join(part) + ")}" if part else ""
            matrix = labelled_matrix(
                data[r0:r1, c0:c1],
                precision=precision,
                rows=None if rows is None else rows[r0:r1],
                cols=None if cols is None else cols[c0:c1],
                extra=[(name, vector[r0:r1]) for name, vector in extra] if c1 == n_cols else (),
            )
            blocks.append(f"{symbol}{note} = {matrix}")
    return blocks


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
