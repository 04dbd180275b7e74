r"""LaTeX: a sequence of `$$ … $$` display blocks that KaTeX, MathJax and pdflatex all render, or a whole article.

Only blank lines and text paragraphs (titles, settings, remarks, explain's narration) stand between the blocks, no `%`
comment, so a fragment pasted into a Markdown post shows text where text belongs. Each block is an equation
with its symbol on the left and its matrix on the right, the matrix labelled with the tokens
(rows and columns) by `texmatrix`, at any width. Tokens go through `escape.latex`, so `<eos>`,
`a_b`, `50%` or `café` print as written. A fragment needs amsmath (pdflatex) and nothing in
KaTeX or MathJax; `standalone=True` writes a complete article (see `texmatrix.PREAMBLE`).

The output is streamed: a matrix is written a band of MAX_ROWS rows at a time (see `texmatrix.iter_blocks`), as UTF-8.
A document (`document_latex`: the tiled head, decode) is text paragraphs and `$$` blocks too: its values an `aligned`
block, its tables `array`s, its steps as explain's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from attncli.document import escape, stages
from attncli.document.blocks import (
    Document,
    Heading,
    Line,
    Note,
    Paragraph,
    RunDocument,
    Step,
    Steps,
    Table,
    Values,
    Vector,
    fields,
)
from attncli.document.blocks import Matrix as MatrixView
from attncli.document.numbers import exact_decimals
from attncli.document.summary import rounded_every_step
from attncli.formats import texmatrix

if TYPE_CHECKING:
    from attncli.document.pages import ExplainPage, ReportPage, RunPage
    from attncli.formats import Options

MAX_COLS = 16  # a wider matrix is split into blocks of columns
MAX_ROWS = 48  # a taller one into blocks of rows


def text(words: str) -> str:
    r"""Words inside math, printed exactly as written in pdflatex, KaTeX and MathJax (see `attncli.document.escape.latex`)."""
    return escape.latex(words)


def block(body: str) -> str:
    return f"$$ {body} $$"


def _token_axes(view: MatrixView) -> tuple[bool, bool]:
    """Whether the rows and the columns are tokens (queries or keys), which get labels."""
    row = next((row for row in stages.ROWS if row.key == view.key), None)
    if row is None:
        return True, True
    return row.rows in ("queries", "keys"), row.cols in ("queries", "keys")


def view_lines(view: MatrixView, *, precision: int, standalone: bool = False) -> Iterator[str | bytes]:
    r"""A view's title and remarks as text (`\subsection*` in the article), then its equation's display blocks of at most MAX_ROWS × MAX_COLS.

    The blocks come as finished UTF-8 lines (as `_document` would write them), the text as str. No
    `%` comment: pasted into a Markdown post, a comment line would show as a paragraph.
    """
    title = prose((f"Head {view.head}: " if view.head is not None else "") + f"{view.title} ({view.shape})")
    yield ""
    yield r"\subsection*{" + title + "}" if standalone else title
    for remark in view.remarks:
        yield ""
        yield prose(remark[:1].upper() + remark[1:] + ".")
    yield ""
    extra = [("m" if name == "shift" else name, vector) for name, vector in view.extra]
    labelled_rows, labelled_cols = _token_axes(view)
    around = (rb"\[ \attnclifit{", b"} \\]\n") if standalone else (b"$$ ", b" $$\n")  # texmatrix.document_line, or block()
    yield from texmatrix.iter_blocks(
        view.equation, view.data, precision=precision, rows=view.rows if labelled_rows else None, cols=view.cols if labelled_cols else None,
        extra=extra, max_rows=MAX_ROWS, max_cols=MAX_COLS, before=around[0], after=around[1], bands=True,
    )  # fmt: skip


def _document(lines: Iterator[str | bytes], *, standalone: bool, title: str, landscape: bool) -> Iterator[bytes]:
    """The lines as UTF-8 chunks, wrapped into an article when `standalone`; bytes are lines written already."""
    if standalone:
        yield (texmatrix.document_start(title=title, landscape=landscape) + "\n").encode()
    for line in lines:
        yield line if isinstance(line, bytes) else ((texmatrix.document_line(line) if standalone else line) + "\n").encode()
    if standalone:
        yield (texmatrix.DOCUMENT_END + "\n").encode()


def run_latex(page: RunDocument, *, precision: int, standalone: bool = False) -> Iterator[bytes]:
    """Every view as an equation with its labelled matrix, its title and remarks as text between them; a whole article when `standalone`.

    A fragment holds text paragraphs and `$$` blocks only (no `%` comment, which a Markdown post
    would print): the scenario and its settings first, as the other formats' headers say them.
    """
    s, views = page.summary, page.matrices

    def lines() -> Iterator[str | bytes]:
        yield escape.latex_text(s.title)  # the name and the sentence are the writer's text: no notation is read in them
        yield ""
        if s.description:
            yield escape.latex_text(s.description)
            yield ""
        yield prose("; ".join(s.settings) + ".")
        if s.round_steps is not None:
            yield ""
            yield prose(rounded_every_step(s.round_steps))
        for view in views:
            yield from view_lines(view, precision=precision, standalone=standalone)
        if (c := page.comparison) is not None:
            yield ""
            yield prose("Exact output, without rounding:")
            yield ""
            exact = texmatrix.labelled_matrix(c.exact, precision=exact_decimals(precision), rows=list(c.labels))
            yield block(r"Y_{\text{exact}} = " + exact)

    wide = any(min(view.data.shape[1], MAX_COLS) > texmatrix.PORTRAIT_COLUMNS for view in views)
    return _document(lines(), standalone=standalone, title=s.name, landscape=wide)


def _aligned_row(line: Line) -> str:
    """One line of arithmetic as a row of `aligned`, aligned at its first relation."""
    if line.sep == ":":
        rhs = line.rhs
        for relation in (" = ", r" \approx "):
            if relation in rhs:
                before, _, after = rhs.partition(relation)
                return rf"{line.lhs}: \quad {before} &{relation.strip()} {after}"
        return rf"{line.lhs}: \quad & {rhs}"
    if line.lhs:
        return f"{line.lhs} &= {line.rhs}"
    for relation in ("= ", r"\approx "):
        if line.rhs.startswith(relation):
            return f"&{relation.strip()} {line.rhs[len(relation):]}"
    return rf"&\quad {line.rhs}"


def aligned_rows(step: Step) -> list[str]:
    """A step's lines of arithmetic (written by `TexWriter`) as the rows of an `aligned` block, each aligned at its first relation;
    Typst translates the same rows into its math."""
    return [_SPACED_WORDS.sub(r"\\text{ \1 }", _aligned_row(line)) for line in step.lines]


_SPACED_WORDS = re.compile(r"(?<= )\\text\{([A-Za-z][A-Za-z ]*)\}(?= )")  # `(a, b) \text{turns to} (c, d)`


_WIDE = 95  # characters of a row, less its TeX commands, that an A4 page holds (a real model's rows reach 190)
_WIDE_TERMS = 80  # a part of a broken row longer than this is broken at its + too (bracketed numbers are wider than letters)
_WEIGHTLESS = re.compile(r"\\(?:begin|end)\{[a-z]+\}|\\[a-zA-Z]+|[{}&]|\s+(?=\s)")


def _width(row: str) -> int:
    return len(_WEIGHTLESS.sub("", row))


def top_level_split(row: str, separators: tuple[str, ...]) -> list[tuple[str, str]]:
    """`row` cut before each separator outside braces and environments: [("", first), (separator, rest), …]."""
    pieces: list[tuple[str, str]] = []
    depth, start, mark, i = 0, 0, "", 0
    while i < len(row):
        if row.startswith(("\\begin{", "\\end{"), i):
            depth += 1 if row[i + 1] == "b" else -1
            i = row.index("}", i) + 1
            continue
        if row[i] == "\\":  # \{ \& \\: escaped, never a separator
            i += 2
            continue
        depth += {"{": 1, "}": -1}.get(row[i], 0)
        found = next((sep for sep in separators if depth == 0 and row.startswith(sep, i)), None) if i > 0 else None
        if found is not None:
            pieces.append((mark, row[start:i]))
            mark, start, i = found.strip(), i + len(found), i + len(found)
            continue
        i += 1
    return [*pieces, (mark, row[start:])]


def fitted_rows(rows: list[str]) -> list[str]:
    """Rows too wide for a page broken into more aligned rows: a left side holding a vector on a row of its own (in every
    row alike, or the columns would still add up too wide), then at each later `=` or `≈`, then at each `+`."""
    if all(_width(row) <= _WIDE for row in rows):
        return rows
    fitted: list[str] = []
    for row in rows:
        aligned = top_level_split(row, ("&",))
        if len(aligned) != 2:
            fitted.append(row)
            continue
        head, rest = aligned[0][1], aligned[1][1]
        relation = next((r for r in ("=", r"\approx") if rest.startswith(r)), "")
        parts = top_level_split(rest[len(relation) :], (" = ", r" \approx ")) if _width(row) > _WIDE else [("", rest[len(relation) :])]
        if _width(head) > _WIDE // 3:  # `cat: 0.3 × [a vector] ≈ [a vector]`
            fitted.append("&" + head.rstrip())
            head = ""
        for number, (mark, part) in enumerate(parts):
            start = f"{head}&{relation}" if number == 0 else f"&{mark} "
            terms = top_level_split(part, (" + ",)) if _width(part) > _WIDE_TERMS else [("", part)]
            fitted.append(start + terms[0][1])
            fitted += [rf"&\quad + {term.strip()}" for _, term in terms[1:]]
    return fitted


def prose(words: str) -> str:
    """A paragraph of text (after a blank line): pdflatex prints it, and a Markdown post shows it as text, the notation's names
    (W_K, d_k) with their subscripts (see `escape.latex_prose`)."""
    return escape.latex_prose(words)


def explain_steps(steps: Steps, *, standalone: bool) -> Iterator[str]:
    r"""Each step as a worked example: its heading and its notes as text paragraphs, its arithmetic as one `aligned` block.

    The article heads each step with `\subsection*`; a fragment (for a LaTeX document or a Markdown
    post's `$$` blocks alike) with a plain paragraph, since a post would print a TeX command as it is.
    Every step is there, a step of words only (the causal mask) too.
    """
    for number, step in enumerate(steps.steps, 1):
        heading = prose(f"Step {number}: {step.title}")
        yield ""
        yield r"\subsection*{" + heading + "}" if standalone else heading
        rows = aligned_rows(step)
        if step.matrix is not None:
            name, matrix = step.matrix
            rows.insert(1, f"{name} &= {texmatrix.labelled_matrix(np.atleast_2d(matrix), precision=steps.precision)}")
        rows = fitted_rows(rows)
        if rows:
            yield ""
            yield block(r"\begin{aligned} " + r" \\ ".join(rows) + r" \end{aligned}")
        for note in step.notes:
            yield ""
            yield prose(note)


def explain_latex(
    token: str, intro: list[str], steps: Steps, exact_output: np.ndarray | None, *, precision: int, standalone: bool = False
) -> Iterator[bytes]:
    """The explain chain of `token` as a worked example: the intro and each step's heading and notes as text, its arithmetic as aligned equations.

    The same steps as the terminal's, and the exact output when rounded by hand. Text paragraphs and
    `$$` blocks alternate, a blank line between them: each block renders on its own in KaTeX and MathJax.
    """

    def lines() -> Iterator[str]:
        for number, line in enumerate(intro):
            if number:
                yield ""
            yield prose(line)
        yield from explain_steps(steps, standalone=standalone)
        if exact_output is not None:
            yield ""
            yield prose("Exact arithmetic, without rounding each step:")
            yield ""
            yield block(r"\text{output}_{" + text(token) + r"}^{\text{exact}} = "
                        + texmatrix.labelled_matrix(np.atleast_2d(exact_output), precision=exact_decimals(precision)))  # fmt: skip

    return _document(lines(), standalone=standalone, title=f"Attention for {token}", landscape=False)


# -- documents (attncli.document.blocks) ------------------------------------------------------------


def document_latex(document: Document, *, standalone: bool = False) -> str:
    r"""Text paragraphs and `$$` display blocks, a blank line between them; an article when `standalone`.

    A fragment pastes into a LaTeX document and into a Markdown post alike (each `$$` block renders on
    its own in KaTeX and MathJax, each paragraph is text): headings are paragraphs of their own,
    `name = value` lines paragraphs, tables `array`s in `$$` blocks. The article has the title, a
    `\subsection*` per section, and each block fitted to the page width.
    """
    out: list[str] = []
    for part in document.blocks:
        if isinstance(part, Heading):
            if part.level == 1 and standalone:
                continue  # the article's \maketitle
            out += ["", r"\subsection*{" + prose(part.text) + "}" if standalone and part.level > 1 else prose(part.text)]
        elif isinstance(part, Paragraph | Note):
            out += ["", prose(part.text)]
        elif isinstance(part, Values) and part.record:  # a paragraph per field, its lines joined
            out += [line for name, values in fields(part) for line in ("", prose(f"{name}: {'; '.join(values)}"))]
        elif isinstance(part, Values):
            vectors = [(name, value) for name, value in part.pairs if _math_vector(value)]
            if vectors:
                rows = [f"{_symbol(name)} &= {_table_cell(value, first=False)}" for name, value in vectors]
                out += ["", block(r"\begin{aligned} " + r" \\ ".join(rows) + r" \end{aligned}")]
            out += [line for name, value in part.pairs if not _math_vector(value) for line in ("", prose(f"{name} = {value}"))]
        elif isinstance(part, Steps):
            out += list(explain_steps(part, standalone=standalone))
        elif isinstance(part, Table):
            columns = "".join("r" if right else "l" for right in part.numeric)
            header = " & ".join(map(_mixed, part.header))
            text = [c == 0 or (part.listing and not right) for c, right in enumerate(part.numeric)]  # a listing's words are words, "-1" too
            rows = [" & ".join(_table_cell(cell, first=text[c]) for c, cell in enumerate(row)) for row in part.rows]
            body = header + r" \\ \hline " + r" \\ ".join(rows)
            out += ["", block(r"\begin{array}{" + columns + "} " + body + r" \end{array}")]
        else:
            raise TypeError(f"LaTeX has no drawing for {type(part).__name__}")
    while out and not out[0]:
        out.pop(0)
    if standalone:
        title = [r"\title{" + prose(document.title) + "}", r"\date{}", r"\maketitle"]  # prose: breaks across lines, symbols as math
        lines = [texmatrix.document_start(), *title, *map(texmatrix.document_line, out), texmatrix.DOCUMENT_END]
        return "\n".join(lines) + "\n"
    return "\n".join(out) + "\n"


_MATH = {"−": "-", "×": r"\times", "·": r"\cdot", "Σ": r"\Sigma", "∞": r"\infty", "…": r"\ldots", "≈": r"\approx", "→": r"\to",
         "–": r"\text{--}"}  # fmt: skip
_NUMERIC = frozenset("0123456789.,[]()+- −…∞")


_COUNT = re.compile(r" \((\d+)( numbers)?\)$")  # "[0.1, …, 0.9] (64 numbers)": how many a shortened vector has


def _table_cell(cell: str, *, first: bool) -> str:
    """A table cell in math mode: the row's name (the first cell) as written, numbers and vectors as math, words as text."""
    if not cell:
        return ""
    count = _COUNT.search(cell)
    numbers = cell[: count.start()] if count else cell
    if first or not set(numbers) <= _NUMERIC:
        return _mixed(cell)
    math = "".join(_MATH.get(c, c) for c in numbers.replace(", ", ",\\,"))
    return math + (r"\;\text{(" + count.group(1) + (count.group(2) or "") + ")}" if count else "")


MAX_MATH_VECTOR = 8  # numbers of a vector set as math in an `aligned` row; a longer one (--full) is a paragraph, which breaks across lines


def _math_vector(value: str) -> bool:
    return isinstance(value, Vector) and (not value.fixed or value.size <= MAX_MATH_VECTOR)


def _symbol(name: str) -> str:
    """A value's name in math: a single letter as a variable (q, k, v), anything else as text."""
    return name if len(name) == 1 and name.isascii() and name.isalpha() else _mixed(name)


def _mixed(text: str) -> str:
    """Words as written (`escape.latex`) with the symbols of `_MATH` as math."""
    out: list[str] = []
    run: list[str] = []
    for c in text:
        if c in _MATH:
            if run:
                out.append(escape.latex("".join(run)))
                run.clear()
            out.append(_MATH[c])
        else:
            run.append(c)
    if run:
        out.append(escape.latex("".join(run)))
    return "".join(out)


# -- the pages (attncli.document.pages) ------------------------------------------------------------


def run(page: RunPage, options: Options) -> Iterator[bytes]:
    return run_latex(page.document(), precision=page.precision, standalone=bool(options.standalone))


def explain(page: ExplainPage, options: Options) -> Iterator[bytes]:
    """The walk-through's steps written in TeX (`TexWriter`), as a fragment or an article."""
    from attncli.document.notation import TexWriter

    article = page.article(TexWriter())
    return explain_latex(article.token, list(article.intro), article.steps, article.exact_output, precision=page.precision,
                         standalone=bool(options.standalone))  # fmt: skip


def report(page: ReportPage, options: Options) -> str:
    return document_latex(page.document(), standalone=bool(options.standalone))
