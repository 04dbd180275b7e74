"""HTML writes a matrix's cells a block of rows at a time, the same bytes as written one cell at a time."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.document import escape
from attncli.document.blocks import Matrix
from attncli.document.numbers import fixed
from attncli.formats import htmltable, palette


def reference_rows(view, *, precision, shaded, inline):
    """The body's rows as matrix_table wrote them before, a Python f-string per cell (each number `numbers.fixed`, each shade `palette.level`)."""
    low, high = palette.bounds(view.data, view.hidden, probabilities=view.key == "weights") if shaded else (0.0, 1.0)
    rows = []
    for r, label in enumerate(view.rows):
        cells = [f'<th scope="row">{escape.html(label)}</th>']
        for c, x in enumerate(view.data[r].tolist()):
            masked = view.hidden is not None and bool(view.hidden[r, c])
            text = fixed(x, precision)
            if masked and shaded:
                cells.append(f'<td class="attn-masked"{htmltable._style(palette.LIGHT.masked, inline)}>{text}</td>')
            elif shaded:
                level = palette.level(x, low, high)
                cells.append(f'<td class="attn-l{level}"{htmltable._style(palette.LIGHT.shades[level], inline)}>{text}</td>')
            elif masked:
                cells.append(f'<td class="attn-hidden">{text}</td>' if not inline else f'<td style="{htmltable.HIDDEN_STYLE}">{text}</td>')
            else:
                cells.append(f"<td>{text}</td>" if not inline else f'<td style="text-align:right">{text}</td>')
        cells += [f'<td class="attn-extra">{fixed(float(vector[r]), precision)}</td>' for _, vector in view.extra]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(rows)


def body(table):
    """The rows between <tbody> and </tbody>."""
    return table.split("<tbody>\n", 1)[1].rsplit("\n</tbody>", 1)[0]


SPECIAL = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, 0.125, -0.00004, 0.00005, 0.99995, -0.99995, 1e15, -1e15, 1e300, -1e300, 5e-324, 2.0**53, 123456789.987654321,
           float("inf"), float("-inf"), float("nan")]  # fmt: skip
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-2, 2), st.sampled_from(SPECIAL))


def view_of(data, *, hidden=None, extra=(), key="scores", rows=None):
    n_rows, n_cols = data.shape
    return Matrix(key=key, stage="scores", head=2, title="Scores", formula="S = Q·Kᵀ", tex="", data=data, hidden=hidden,
                  rows=rows if rows is not None else [f"r<{i}>&" for i in range(n_rows)], cols=[f"c{i}" for i in range(n_cols)],
                  extra=list(extra), square=True)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    shape=st.tuples(st.integers(0, 6), st.integers(0, 6)),
    data=st.data(),
    precision=st.integers(0, 9),
    masked=st.booleans(),
    extras=st.integers(0, 2),
    shaded=st.booleans(),
    inline=st.booleans(),
    weights=st.booleans(),
)
def test_block_rows_are_the_cells_written_one_at_a_time(shape, data, precision, masked, extras, shaded, inline, weights):
    """Every kind of cell (plain, hidden, each shade, masked), every kind of number (NaN, ±∞, −0, halves, huge), extras, empty tables."""
    n_rows, n_cols = shape
    values = np.array(data.draw(st.lists(numbers, min_size=n_rows * n_cols, max_size=n_rows * n_cols)), dtype=np.float64).reshape(shape)
    hidden = np.array(data.draw(st.lists(st.booleans(), min_size=n_rows * n_cols, max_size=n_rows * n_cols)), dtype=bool).reshape(shape) if masked else None
    extra = [(f"Σ{k}", np.array(data.draw(st.lists(numbers, min_size=n_rows, max_size=n_rows)), dtype=np.float64)) for k in range(extras)]
    view = view_of(values, hidden=hidden, extra=extra, key="weights" if weights else "scores")
    table = htmltable.matrix_table(view, precision=precision, shaded=shaded, inline=inline)
    assert body(table) == reference_rows(view, precision=precision, shaded=shaded, inline=inline)


@pytest.mark.parametrize("shaded", [False, True])
@pytest.mark.parametrize("inline", [False, True])
def test_tables_larger_than_a_block_join_to_the_same_bytes(monkeypatch, shaded, inline):
    """A causal matrix of 40 rows written 64 cells at a time (several blocks, each its own widths) is the table written at once."""
    rng = np.random.default_rng(5)
    data = rng.standard_normal((40, 37)) * np.logspace(-6, 6, 37)
    hidden = np.triu(np.ones((40, 37), dtype=bool), 1)
    data[hidden] = -np.inf
    view = view_of(data, hidden=hidden, extra=[("Σ", rng.standard_normal(40))], rows=[f"tok{i}" * (i % 3) for i in range(40)])
    whole = htmltable.matrix_table(view, precision=4, shaded=shaded, inline=inline)
    monkeypatch.setattr(htmltable, "BLOCK_CELLS", 64)
    blocks = htmltable.matrix_table(view, precision=4, shaded=shaded, inline=inline)
    assert blocks == whole
    assert body(blocks) == reference_rows(view, precision=4, shaded=shaded, inline=inline)


@given(values=st.lists(numbers, max_size=30), low=numbers, high=numbers)
def test_the_shades_of_a_block_are_palette_level_of_each_number(values, low, high):
    """The levels computed at once are the terminal's cut (`palette.level`), NaN, ±inf and odd bounds included."""
    assert palette.levels(np.array(values, dtype=np.float64), low, high).tolist() == [palette.level(x, low, high) for x in values]
