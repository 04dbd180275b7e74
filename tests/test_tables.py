"""Terminal tables: attncli's own box drawing looks as Rich's did, fits any width and never cuts a number."""

import io
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from attncli.core import engine
from attncli.document import views
from attncli.document.blocks import Hints, mentioned
from attncli.formats import grid, tables
from attncli.formats import terminal as output
from attncli.sources.yaml_scenario import from_text
from attncli.walkthroughs.run import run_document

HINTS = mentioned(Hints(), lambda name: f"--{name}")  # as the command line names options


def rich_plain(header: list[str], body: list[list[str]]) -> str:
    """The same table drawn by Rich's Table, without colour, as attncli drew it before."""
    table = Table()
    table.add_column(header[0], no_wrap=True)
    for name in header[1:]:
        table.add_column(name, justify="right", no_wrap=True)
    for row in body:
        table.add_row(*row)
    console = Console(file=io.StringIO(), width=1000, color_system=None, no_color=True, highlight=False, emoji=False)
    console.print(table)
    return "\n".join(line.rstrip() for line in console.file.getvalue().rstrip("\n").split("\n"))


cells = st.text(alphabet="abcxyz019.-−∞…⋮ ", max_size=8)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(st.lists(cells, min_size=n, max_size=n), st.lists(st.lists(cells, min_size=n, max_size=n), max_size=4))))
def test_plain_grid_is_rich_table_character_for_character(table):
    """A Grid's plain text is exactly what Rich's Table printed for the same cells (HEAVY_HEAD box, padding, justification)."""
    header, body = table
    header = [h.strip() or "h" for h in header]
    body = [[c.strip() for c in row] for row in body]
    drawn = grid.Grid(header, body).plain()
    assert "\n".join(line.rstrip() for line in drawn.split("\n")) == rich_plain(header, body)


def run_text(text: str, *args: str, columns: int, lines: int = 40) -> str:
    """`attncli run` of a scenario text as the terminal would show it at `columns` × `lines`, without colour."""
    result = engine.run(from_text(text))
    shown = views.views(result, ("scores", "weights", "exp", "output"), [1])
    console = Console(file=io.StringIO(), width=max(columns, output.MIN_WIDTH), height=lines, color_system=None, no_color=True)
    parts = tables.run_tables(run_document(result, shown), precision=4, console=console, full="--full" in args, shade_all=False, shade_weights=False)
    return output.render(console, parts)


def scenario(tokens: list[str], seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    rows = ", ".join("[" + ", ".join(f"{x:.3f}" for x in rng.standard_normal(2)) + "]" for _ in tokens)
    quoted = ", ".join('"' + t + '"' for t in tokens)
    return f"tokens: [{quoted}]\nembeddings: [{rows}]\nmask: causal\n"


@pytest.mark.parametrize("columns", [0, 1, 12, 20, 33, 80])
def test_tables_render_at_any_width(cli, monkeypatch, columns):
    """COLUMNS=0, 1, 12 ... give tables and notes, never an error; the columns shown are whole numbers."""
    monkeypatch.setenv("COLUMNS", str(columns))
    result = cli("run", "train-station")
    assert result.exit_code == 0, result.stderr
    assert "Attention weights" in result.stdout and "0.1865" in result.stdout


def test_a_long_token_is_shortened_with_a_note_and_full_shows_it_whole():
    """A 75-character token is abbreviated in the labels (with a note) unless --full, which prints it whole."""
    long = "x" * 75
    text = scenario(["a", long, "b"])
    short = run_text(text, columns=80)
    table = "\n".join(line for line in short.splitlines() if line.startswith(("│", "┃")))
    assert long not in table and "x" * 20 + "…" in table and "Labels longer than 26 characters are shortened" in short
    assert all(len(line) <= 80 for line in table.splitlines())
    full = run_text(text, "--full", columns=80)
    assert long in full and "shortened" not in full


def test_full_never_cuts_a_number_and_labels_each_block():
    """--full on a table wider than the screen stacks column blocks ("Columns 1–5 of 14"), every number whole."""
    tokens = [f"w{i}" for i in range(14)]
    text = scenario(tokens, seed=3)
    result = engine.run(from_text(text))
    out = run_text(text, "--full", columns=60)
    assert "…" not in out
    assert re.search(r"Columns 1–\d+ of 14", out)
    assert all(len(line) <= 60 for line in out.splitlines() if line.startswith(("│", "┃", "┏", "└")))
    weights = next(v for v in views.views(result, ("weights",), [1]))
    numbers = set(tables.formatted(weights.data.ravel(), 4))
    assert numbers <= set(re.findall(r"-?\d+\.\d{4}", out))


def test_a_table_that_fits_is_shown_whole(cli, monkeypatch):
    """train-station's 7-column tables take 77 characters: at COLUMNS=80 nothing is left out."""
    monkeypatch.setenv("COLUMNS", "80")
    out = cli("run", "train-station", "--stages", "weights").stdout
    assert "…" not in out and "Showing" not in out
    assert max(len(line) for line in out.splitlines() if line.startswith("│")) == 77


def test_shortened_tables_fit_the_width():
    """Without --full every table line fits the terminal, with an ellipsis column and a note."""
    text = scenario([f"w{i}" for i in range(30)], seed=5)
    out = run_text(text, columns=70, lines=20)
    assert all(len(line) <= 70 for line in out.splitlines())
    assert "Showing" in out and "⋮" in out


def test_rounding_table_is_shortened_like_the_others_unless_full():
    """--round-steps: the hand-rounded vs exact table keeps to the screen (rows and vector values), --full shows all."""
    text = scenario([f"w{i}" for i in range(40)], seed=2).replace("[", "[", 1)
    s = from_text(text.replace("mask: causal\n", "mask: causal\nW_V: [[1, 2, 3, 4, 5, 6, 7, 8], [8, 7, 6, 5, 4, 3, 2, 1]]\n"))
    result = engine.run(s, round_steps=2)
    console = Console(file=io.StringIO(), width=80, height=30, color_system=None, no_color=True)
    comparison = run_document(result, views.views(result, ("output",), [1])).comparison
    assert comparison is not None
    short = output.render(console, tables.rounding_table(comparison, precision=2, console=console, full=False, hints=HINTS))
    assert all(len(line) <= 80 for line in short.splitlines())
    assert "⋮" in short and "values of each vector" in short
    console = Console(file=io.StringIO(), width=80, height=30, color_system=None, no_color=True)
    full = output.render(console, tables.rounding_table(comparison, precision=2, console=console, full=True, hints=HINTS))
    assert "⋮" not in full and full.count("│ w") == 40


def test_formatted_matches_fixed():
    """The one-pass formatter writes every value as numbers.fixed does: −∞, no "-0.000"."""
    from attncli.document.numbers import fixed

    values = np.array([0.0, -0.0, -0.00001, 1.23456, -1.5, float("-inf"), float("inf"), 1e20, -2.00049])
    for precision in (0, 1, 3, 4):
        assert tables.formatted(values, precision) == [fixed(float(v), precision) for v in values]


def test_colour_tables_keep_their_styles():
    """In colour, a table is Rich segments: bold labels and the heatmap's shades, lines never cropped."""
    result = engine.run(from_text(scenario(["a", "b", "c"])))
    shown = views.views(result, ("weights",), [1])
    console = Console(file=io.StringIO(), width=30, height=40, force_terminal=True, color_system="truecolor", no_color=False)
    text = output.render(console, tables.run_tables(run_document(result, shown), precision=4, console=console, full=True, shade_all=False, shade_weights=True))
    assert "\x1b[1m" in text and "48;2;" in text  # bold, and a background colour
    assert "│ a │" in re.sub(r"\x1b\[[0-9;]*m", "", text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab ×·…-0.", max_size=120), st.integers(1, 40))
def test_wrapping_breaks_where_rich_breaks(text, width):
    """grid._breaks, the fast path for one-cell characters, cuts a line where Rich's own divide_line (fold=False) does."""
    from rich._wrap import divide_line

    assert grid._breaks(text, width) == divide_line(text, width, fold=False)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet="ab ×ü字-", max_size=60), max_size=5), st.integers(10, 50))
def test_wrapped_text_is_what_rich_printed(lines, width):
    """grid.Wrapped gives the text Rich printed for the same unstyled Text, for words that fit the width."""
    from rich.text import Text

    text = "\n".join(lines)
    if any(len(word) * 2 > width for word in text.split()):
        return  # Rich crops a word wider than the screen; attncli prints it whole
    console = Console(file=io.StringIO(), width=width, color_system=None, no_color=True, highlight=False, emoji=False)
    expected = output.render(console, [Text(text, no_wrap=True, overflow="ignore")])
    console = Console(file=io.StringIO(), width=width, color_system=None, no_color=True, highlight=False, emoji=False)
    assert output.render(console, [grid.Wrapped(text)]) == expected


def test_masked_cells_get_the_ramps_own_grey_in_colour():
    """In colour with a heatmap, a hidden cell is the ramp's masked grey with readable ink, not a dim shade of the ramp."""
    from attncli.formats import palette
    from attncli.formats.heatmap import Heat

    result = engine.run(from_text(scenario(["a", "b", "c"])))  # causal
    view = views.views(result, ("masked",), [1])[0]
    heat = Heat(view.data, view.hidden, probabilities=False, colour=True)
    cells = tables._column_cells(view, 2, [0, 1, 2], 4, heat)  # key 3: hidden from queries 1 and 2
    assert cells[0] == (cells[0][0], heat.masked_style) and cells[1][1] == heat.masked_style
    assert cells[2][1] != heat.masked_style
    grey = heat.ramp.masked
    assert heat.masked_style == f"{palette.ink(grey)} on {grey}" and palette.contrast(palette.ink(grey), grey) >= 4.5
