"""One notation for symbols, in Unicode for people and in TeX for LaTeX, KaTeX and MathJax.

A head's symbols carry its number as a superscript in parentheses, Q⁽²⁾ and Q^{(2)}, and only
when the scenario has several heads; a transposed symbol puts ᵀ after it, K⁽²⁾ᵀ and K^{(2)\\top}.
"""

from __future__ import annotations

from typing import NamedTuple

_SUPERSCRIPTS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
_TEX_SYMBOLS = {"Σ": r"\Sigma", "−∞": r"-\infty", "×": r"\times", "·": r"\,", "…": r"\dots", "′": "'", "−": "-"}


class Notation(NamedTuple):
    """How to write symbols for one head (None: no head mark) in Unicode or in TeX."""

    head: int | None = None
    tex: bool = False

    def __call__(self, symbol: str, *, prime: bool = False, transpose: bool = False) -> str:
        """'Q' → 'Q⁽²⁾' or 'Q^{(2)}'; prime: Q′; transpose: Kᵀ."""
        mark = "′" if prime else ""
        if self.tex:
            upper = [f"({self.head})"] if self.head is not None else []
            upper += [r"\top"] if transpose else []
            return symbol + ("'" if prime else "") + ("^{" + "".join(upper) + "}" if upper else "")
        head = head_mark(self.head) if self.head is not None else ""
        return symbol + mark + head + ("ᵀ" if transpose else "")

    def times(self) -> str:
        """The product of two matrices: Q·Kᵀ, or QK^\\top."""
        return " " if self.tex else "·"

    def sqrt(self, inner: str) -> str:
        return rf"\sqrt{{{inner}}}" if self.tex else f"√{inner}"

    def symbol(self, unicode: str) -> str:
        """A Unicode symbol (Σ, −∞, ×, ·, …) as this notation writes it."""
        return _TEX_SYMBOLS.get(unicode, unicode) if self.tex else unicode

    def text(self, words: str) -> str:
        r"""Words inside a formula: \text{…} in TeX (words must be plain ASCII prose)."""
        return rf"\text{{{words}}}" if self.tex else words


def head_mark(head: int) -> str:
    """'⁽²⁾': a head's number as people read it beside a symbol."""
    return f"⁽{str(head).translate(_SUPERSCRIPTS)}⁾"


class Writer:
    """Numbers and small formulas in Unicode, as people read them in a terminal or a Markdown post.

    `TexWriter` writes the same things for LaTeX, KaTeX and MathJax: the walk-through is
    built once with a writer, so both notations always say the same.
    """

    tex = False
    notation = "unicode"  # Steps.notation of the steps it writes
    times = "×"
    dot = "·"
    minus = "−"
    ellipsis = "…"
    sigma = "Σ"
    alpha = "α"
    minus_infinity = "−∞"
    approx = "≈"
    phi = "φ"

    def prime(self, symbol: str) -> str:
        """q′: a symbol after rotation."""
        return symbol + "′"

    def num(self, x: float, precision: int, *, whole: bool = True) -> str:
        from attncli.document.numbers import fixed, smart

        return (smart if whole else fixed)(x, precision)

    def vec(self, values: object, precision: int, *, whole: bool = True) -> str:
        import numpy as np

        from attncli.document.numbers import vector

        return vector(np.ravel(np.asarray(values)), precision, whole=whole)

    def mat(self, matrix: object, precision: int) -> str:
        import numpy as np

        rows = np.atleast_2d(np.asarray(matrix))
        return "[" + ", ".join(self.vec(row, precision) for row in rows) + "]"

    def label(self, words: str) -> str:
        """A token as written."""
        return words

    def text(self, words: str) -> str:
        return words

    def of(self, symbol: str, label: str) -> str:
        """A symbol belonging to a token: q(cat)."""
        return f"{symbol}({label})"

    def frac(self, top: str, bottom: str) -> str:
        return f"{top} / {bottom}"

    def exp(self, exponent: str, *, grouped: bool = False) -> str:
        """e^x, or e^(a − b) when the exponent is an expression."""
        return f"e^({exponent})" if grouped else f"e^{exponent}"

    def sqrt(self, inner: str) -> str:
        return f"√{inner}"

    def cos(self, angle: str) -> str:
        return f"cos {angle}"

    def sin(self, angle: str) -> str:
        return f"sin {angle}"


class TexWriter(Writer):
    """The same numbers and formulas in TeX (inside a display block)."""

    tex = True
    notation = "tex"
    times = r"\times"
    dot = r"\cdot "
    minus = "-"
    ellipsis = r"\cdots"
    sigma = r"\Sigma"
    alpha = r"\alpha"
    minus_infinity = r"-\infty"
    approx = r"\approx"
    phi = r"\varphi"

    def prime(self, symbol: str) -> str:
        return symbol + "'"

    def num(self, x: float, precision: int, *, whole: bool = True) -> str:
        import math

        if math.isinf(x):
            return r"-\infty" if x < 0 else r"\infty"
        return super().num(x, precision, whole=whole)

    def vec(self, values: object, precision: int, *, whole: bool = True) -> str:
        import numpy as np

        values = np.ravel(np.asarray(values))
        cells = " & ".join(self.num(float(v), precision, whole=whole) for v in values)
        return _matrix(cells, len(values))

    def mat(self, matrix: object, precision: int) -> str:
        import numpy as np

        rows = np.atleast_2d(np.asarray(matrix))
        body = r" \\ ".join(" & ".join(self.num(float(x), precision) for x in row) for row in rows)
        return _matrix(body, rows.shape[1])

    def label(self, words: str) -> str:
        from attncli.document.escape import latex

        return latex(words)

    def text(self, words: str) -> str:
        from attncli.document.escape import latex

        return latex(words)

    def of(self, symbol: str, label: str) -> str:
        return f"{symbol}_{{{label}}}"

    def frac(self, top: str, bottom: str) -> str:
        return rf"\frac{{{top}}}{{{bottom}}}"

    def exp(self, exponent: str, *, grouped: bool = False) -> str:
        return f"e^{{{exponent}}}"

    def sqrt(self, inner: str) -> str:
        return rf"\sqrt{{{inner}}}"

    def cos(self, angle: str) -> str:
        return rf"\cos {angle}"

    def sin(self, angle: str) -> str:
        return rf"\sin {angle}"


def _matrix(body: str, columns: int) -> str:
    r"""A bracketed matrix: bmatrix up to amsmath's 10 columns, an array (no limit) beyond."""
    if columns <= 10:
        return r"\begin{bmatrix} " + body + r" \end{bmatrix}"
    return r"\left[\begin{array}{" + "r" * columns + "} " + body + r" \end{array}\right]"
