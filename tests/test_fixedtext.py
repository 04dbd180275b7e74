"""Markdown and LaTeX write every number of a matrix as `numbers.fixed` does, whole rows at a time."""

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.document import fixedtext
from attncli.document.numbers import fixed
from attncli.formats import texmatrix


def tex_width(tex: str) -> float:
    """A number's width in em, a character at a time (texmatrix._tex_widths counts whole tables at once)."""
    infinities = tex.count(r"\infty")
    return infinities * texmatrix._TEX_WIDTHS[r"\infty"] + sum(texmatrix._TEX_WIDTHS.get(c, 0.5) for c in tex.replace(r"\infty", ""))


def math_read(tex: str) -> str:
    r"""TeX as math mode reads it: the spaces outside `\text{…}` dropped (texmatrix pads numbers and labels with them)."""
    return "".join(piece if piece.startswith(r"\text{") else piece.replace(" ", "") for piece in re.split(r"(\\text\{[^{}]*\})", tex))


def reference_matrix(data, *, precision, rows=None, cols=None, extra=()):
    """The labelled matrix written a number at a time, as texmatrix wrote it before it wrote blocks of rows at once."""

    def widest(column):
        finite = column[np.isfinite(column)]
        candidates = [texmatrix.number(float(x), precision) for x in (finite.max(), finite.min())] if finite.size else []
        candidates += [texmatrix.number(float(x), precision) for x in column[~np.isfinite(column)][:1]]
        return max(candidates, key=tex_width, default="")

    n_rows, n_cols = data.shape
    cells = [[texmatrix.number(float(x), precision) for x in row] for row in data]
    for _, vector in extra:
        for r in range(n_rows):
            cells[r].append(texmatrix.number(float(vector[r]), precision))
    heads = [texmatrix._label(c) for c in cols] + [texmatrix._label(name) for name, _ in extra] if cols is not None else None
    row_heads = [texmatrix._label(r) for r in rows] if rows is not None else None
    spec = "r" * n_cols + ("|" + "r" * len(extra) if extra else "")
    body_rows = []
    for r, row in enumerate(cells):
        if heads is not None and r == 0:
            # as wide as the label or the number, the number flush right: kerned back by its width (digits 0.5em, − 0.7778em)
            row = [rf"\hphantom{{\overset{{\textstyle {head}}}{{{cell}}}}}\kern-{tex_width(cell):.4f}em {{{cell}}}"
                   for head, cell in zip(heads, row)]  # fmt: skip
        if row_heads is not None:
            row[0] += rf"\vphantom{{{row_heads[r]}}}"
        body_rows.append(" & ".join(row))
    matrix = r"\left[\begin{array}{" + spec + "} " + r" \\ ".join(body_rows) + r" \end{array}\right]"
    if heads is None and row_heads is None:
        return matrix
    top = ""
    if heads is not None:
        columns = [data[:, c] for c in range(n_cols)] + [vector for _, vector in extra]
        header = [rf"\smash[b]{{\underset{{\hphantom{{\textstyle {widest(column) if n_rows else ''}}}}}{{{head}}}}}" for head, column in zip(heads, columns)]
        top = r"\begin{array}{" + spec.replace("|", "") + "} " + " & ".join(header) + r" \end{array}"
    left = ""
    if row_heads is not None:
        left = r"\; \begin{array}{r} " + r" \\ ".join(r"\vphantom{0\infty}" + head for head in row_heads) + r" \end{array}"
    if not top:
        return left + matrix
    return r"\begin{array}{rc} & " + top + r" \\ " + left + " & " + matrix + r" \end{array}"


def reference_blocks(symbol, data, *, precision, rows=None, cols=None, extra=(), max_rows=None, max_cols=None):
    """matrix_blocks as it was: each block a labelled matrix of its own."""
    n_rows, n_cols = data.shape
    row_step, col_step = max_rows or max(n_rows, 1), max_cols or max(n_cols, 1)
    blocks = []
    for r0 in range(0, max(n_rows, 1), row_step):
        for c0 in range(0, max(n_cols, 1), col_step):
            r1, c1 = min(r0 + row_step, n_rows), min(c0 + col_step, n_cols)
            part = ([f"rows {r0 + 1} to {r1}"] if r1 - r0 < n_rows else []) + ([f"columns {c0 + 1} to {c1}"] if c1 - c0 < n_cols else [])
            note = r" \quad \text{(" + ", ".join(part) + ")}" if part else ""
            matrix = reference_matrix(data[r0:r1, c0:c1], precision=precision, rows=None if rows is None else rows[r0:r1],
                                      cols=None if cols is None else cols[c0:c1],
                                      extra=[(n, v[r0:r1]) for n, v in extra] if c1 == n_cols else ())  # fmt: skip
            blocks.append(f"{symbol}{note} = {matrix}")
    return blocks


WORDS = ["<eos>", "a_b", "50%", "R&D", "café", "中文", "😀", " lead", "x^2", "{}", "Σ", "", "t1", "the"]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 9), st.integers(1, 9), st.integers(0, 2), st.integers(0, 6), st.sampled_from([None, 2, 4]), st.sampled_from([None, 1, 3, 16]),
    st.booleans(), st.booleans(), st.integers(0, 2**32 - 1), st.sampled_from([1e-3, 1.0, 1e4, 1e16]),
)
def test_matrix_blocks_match_the_matrix_written_a_number_at_a_time(n_rows, n_cols, extras, precision, max_rows, max_cols, labelled_rows, labelled_cols, seed, scale):
    """Blocks of any size, with or without labels and extra columns, masked cells, huge numbers and -0.0, read as before.

    Byte for byte but for the spaces that pad numbers and labels in math mode, which TeX does not print."""
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((n_rows, n_cols)) * scale
    data[rng.random((n_rows, n_cols)) < 0.2] = -np.inf
    data[rng.random((n_rows, n_cols)) < 0.1] = -0.0
    extra = [(["Σ", "m"][i], rng.standard_normal(n_rows)) for i in range(extras)]
    rows = [WORDS[i % len(WORDS)] for i in range(n_rows)] if labelled_rows else None
    cols = [WORDS[(i * 5) % len(WORDS)] for i in range(n_cols)] if labelled_cols else None
    kwargs = dict(precision=precision, rows=rows, cols=cols, extra=extra, max_rows=max_rows, max_cols=max_cols)
    assert list(map(math_read, texmatrix.matrix_blocks("S", data, **kwargs))) == list(map(math_read, reference_blocks("S", data, **kwargs)))


def written(data: np.ndarray, precision: int, write=fixed, lead: bytes = b"|") -> list[bytes]:
    """Each row of `data` as fixedtext writes it, every number after `lead`."""
    return fixedtext.rows(fixedtext.cells(data, precision, write, lead))


def one_by_one(data: np.ndarray, precision: int, write=fixed, lead: str = "|") -> list[bytes]:
    """Each row of `data` written a number at a time by `write`."""
    return ["".join(lead + write(float(x), precision) for x in row).encode() for row in data]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=24),
    st.integers(0, 15),
    st.sampled_from([fixed, texmatrix.number]),
)
def test_cells_write_every_float_as_write_does(values, precision, write):
    """Any float64 (±∞, NaN, -0.0, subnormal, 1e308) at any precision reads as numbers.fixed or texmatrix.number write it."""
    data = np.array(values, dtype=np.float64).reshape(1, -1)
    assert written(data, precision, write) == one_by_one(data, precision, write)


def test_cells_round_halves_and_near_halves_as_printf_does():
    """Numbers at, just above and just below a half of the last decimal round as Python's own formatting rounds them."""
    rng = np.random.default_rng(0)
    for precision in range(8):
        halves = (np.round(rng.standard_normal((20, 20)) * 10 ** (precision + 2)) + 0.5) / 10**precision
        for data in (halves, np.nextafter(halves, np.inf), np.nextafter(halves, -np.inf), np.array([[0.5, 1.5, 2.5, -0.5, 0.125, 1e-5]])):
            assert written(data, precision) == one_by_one(data, precision)


def test_cells_of_scaled_random_matrices_match_one_by_one():
    """Random matrices from 1e-6 to 1e17 in magnitude, with masked cells, read as numbers.fixed writes each number."""
    rng = np.random.default_rng(1)
    for scale in (1e-6, 1e-2, 1.0, 1e3, 1e9, 1e14, 1e17):
        data = rng.standard_normal((16, 16)) * scale
        data[np.triu_indices(16, 1)] = -np.inf
        for precision in (0, 3, 4, 9):
            assert written(data, precision, lead=b" | ") == one_by_one(data, precision, lead=" | ")


def test_cells_of_empty_matrices():
    """No rows, or rows without numbers, give empty texts."""
    assert written(np.zeros((0, 3)), 4) == []
    assert written(np.zeros((2, 0)), 4) == [b"", b""]


def test_markdown_blocks_join_to_the_same_bytes(monkeypatch):
    """A Markdown run cut into blocks of one row or a few numbers gives the same text as one block per table."""
    from attncli.core import engine
    from attncli.document import stages, views
    from attncli.formats import markdown
    from attncli.sources.yaml_scenario import load
    from attncli.walkthroughs.run import run_document

    result = engine.run(load("llama-style"))
    shown = views.views(result, stages.STAGE_NAMES, [1, 2, 3, 4])
    page = run_document(result, shown)
    whole = b"".join(markdown.run_markdown(page, precision=4))
    for values in (1, 7):
        monkeypatch.setattr(markdown, "BLOCK_VALUES", values)
        assert b"".join(markdown.run_markdown(page, precision=4)) == whole


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=False, width=64), st.sampled_from([float("inf"), float("-inf"), 0.0, -0.0, 1e300, -1e-300])),
                min_size=1, max_size=20), st.integers(0, 8))  # fmt: skip
def test_widths_of_a_table_are_each_number_s(values, precision):
    """_tex_widths of a byte table equals the width counted a character at a time, to the 4 decimals the kern writes."""
    texts = [texmatrix.number(v, precision) for v in values]
    widths = texmatrix._tex_widths(texmatrix._table(texts))
    assert [f"{w:.4f}" for w in widths.tolist()] == [f"{tex_width(t):.4f}" for t in texts]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=12) | st.sampled_from(WORDS))
def test_a_label_is_what_escape_latex_writes(text):
    """texmatrix._label's short way for ASCII words and numbers agrees with escape.latex (and Σ is \\Sigma)."""
    from attncli.document import escape

    texmatrix._label.cache_clear()
    assert texmatrix._label(text) == (r"\Sigma" if text == "Σ" else escape.latex(text))


def test_decimal_halves_are_written_with_the_block_not_one_at_a_time():
    """Products of 2- and 3-decimal inputs lie on decimal halves (0.25 · 1.95 = 0.4875): cells rounds them away from zero itself, as fixed does, and writes only ±∞, NaN and near-halves by hand."""
    rng = np.random.default_rng(4)
    data = (rng.integers(-300, 300, (40, 30)) / 100) @ (rng.integers(-900, 900, (30, 20)) / 1000)  # (40, 20) 5-decimal products
    data[0, :4] = [0.25 * 1.95, -0.25 * 1.95, 2.5e-4, -np.inf]
    by_hand = []

    def write(x, precision):
        by_hand.append(x)
        return fixed(x, precision)

    for precision in (2, 3, 4):
        by_hand.clear()
        out = fixedtext.cells(data, precision, write)
        texts = [text.decode() for text in fixedtext.rows(out)]
        assert texts == ["".join(fixed(float(x), precision) for x in row) for row in data]
        assert by_hand == [-np.inf]  # not the dozens of halves among 800 products
    assert fixed(0.25 * 1.95, 3) == "0.488" and fixed(-0.25 * 1.95, 3) == "-0.488"


@settings(max_examples=300, deadline=None)
@given(st.integers(-10**9, 10**9), st.integers(0, 6), st.sampled_from([0.0, 1e-13, -1e-13, 1e-9, 2.0**-11]))
def test_halves_agrees_with_near_half(digits, decimals, nudge):
    """rounding.halves, vectorised, says what near_half says of each number: on, a hair off and well off a half."""
    from attncli.core.rounding import halves, near_half

    y = (digits + 0.5) * (1 + nudge) / 10**decimals * 10**decimals
    assert bool(halves(np.array([y, -y]))[0]) == near_half(y) and bool(halves(np.array([-y]))[0]) == near_half(-y)


def test_numbers_a_hair_from_a_half_are_rounded_with_the_block():
    """Random floats within 2⁻¹⁰ of a half but not on one (one in 500) round by rint as printf rounds them, none by hand; their text is fixed's."""
    rng = np.random.default_rng(8)
    data = rng.standard_normal((200, 200))
    data[0, :50] = (np.arange(50) + 0.5) / 10**4 * (1 + 1e-9)  # near halves, not halves by the rule (off by 1e-9 of their size)
    by_hand = []

    def write(x, precision):
        by_hand.append(x)
        return fixed(x, precision)

    texts = [text.decode() for text in fixedtext.rows(fixedtext.cells(data, 4, write))]
    assert texts == ["".join(fixed(float(x), 4) for x in row) for row in data]
    assert by_hand == []
