"""Hostile inputs to what landed last (Typst everywhere, variance in every format, heads in Markdown, explain after a KV cache,
the Python API's variance and pages): each gives a right result or one clear error, never another exception type.

Each test names the defect it was written for."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import attncli.api as attn
from attncli.cli.app import app
from attncli.errors import AttnError
from attncli.formats import Format, Options


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("heads", [[9], [-1], [0], [1.0], "1"])
@pytest.mark.parametrize("fmt", ["table", "markdown", "typst", "csv", "json", "svg"])
def test_run_page_refuses_a_head_the_scenario_lacks(heads: object, fmt: str) -> None:
    """`run_page` (and the tiles' page) with heads=[9] of a 2-head scenario was an IndexError, and heads=[0] silently drew
    head 2 (index -1); heads=[1.0] was a TypeError."""
    result = attn.run("multihead").result
    if heads == "1" or heads == [1.0]:  # not a list of whole numbers: refused where the options are built
        with pytest.raises(AttnError, match="heads: found"):
            attn.render_options(fmt, heads=heads)
        options = attn.Options(format=attn.Format(fmt), heads=heads, to_file=True)  # type: ignore[arg-type]
    else:
        options = attn.render_options(fmt, heads=heads)
    with pytest.raises(AttnError, match="head"):
        attn.text_of(attn.render_run(result, options))
    with pytest.raises(AttnError, match="head"):
        attn.run("multihead").render(fmt, heads=heads)
    with pytest.raises(AttnError, match="head"):  # and the tiles' report (run --block-size)
        attn.tiles("multihead", 2).render(fmt, heads=heads)


@pytest.mark.parametrize("precision", [-1, 1.5, 10_000, True])
@pytest.mark.parametrize("fmt", ["table", "markdown", "latex", "typst", "svg", "html"])
def test_pages_refuse_a_precision_outside_0_to_15(precision: object, fmt: str) -> None:
    """precision=-1 or 1.5 in the Python API was a ValueError or TypeError from a format string, 10,000 an OverflowError, in
    run_page, explain_page and a report's page (variance); the command line allows 0 to 15."""
    options = Options(format=Format(fmt), precision=precision, to_file=True)  # type: ignore[arg-type]
    with pytest.raises(AttnError, match="precision"):
        attn.text_of(attn.render_run(attn.run("cat").result, options))
    with pytest.raises(AttnError, match="precision"):
        attn.text_of(attn.render_explain(attn.explain("cat", "cat").explanation, options))
    with pytest.raises(AttnError, match="precision"):
        attn.variance([2], samples=10).render(fmt, precision=precision)


def test_pages_take_a_numpy_integer_precision() -> None:
    """The precision check takes any integer type, as NumPy's, not only Python's int."""
    import numpy as np

    assert attn.run("cat").render("markdown", precision=np.int64(2)) == attn.run("cat").render("markdown", precision=2)


def test_render_refuses_an_unknown_format_with_one_error() -> None:
    """`attn.run("cat").render("bogus")` was a ValueError from the Format enum, not an AttnError naming the formats."""
    with pytest.raises(AttnError, match="format.*markdown"):
        attn.run("cat").render("bogus")


@pytest.mark.parametrize(
    ("keywords", "key"),
    [
        ({"dims": [1.5]}, "dims"),
        ({"dims": [True]}, "dims"),
        ({"dims": ["a"]}, "dims"),
        ({"dims": "1,2"}, "dims"),
        ({"dims": None}, "dims"),
        ({"dims": 4}, "dims"),
        ({"samples": 2.5}, "samples"),
        ({"samples": "10"}, "samples"),
        ({"samples": None}, "samples"),
        ({"keys": 2.5}, "keys"),
        ({"keys": None}, "keys"),
        ({"seed": 1.5}, "seed"),
        ({"seed": None}, "seed"),
        ({"seed": "x"}, "seed"),
    ],
)
def test_variance_refuses_what_is_not_a_whole_number(keywords: dict[str, object], key: str) -> None:
    """attncli.api.variance with dims=[1.5], samples=2.5, seed=None ... was a TypeError from a comparison or from NumPy."""
    arguments: dict[str, object] = {"dims": [2], "samples": 10, **keywords}
    dims = arguments.pop("dims")
    with pytest.raises(AttnError, match=key):
        attn.variance(dims, **arguments)  # type: ignore[arg-type]


def test_variance_takes_numpy_integers_and_a_generator() -> None:
    """What is a whole number still works: NumPy integers, any iterable of widths."""
    import numpy as np

    numpy_ints: dict[str, object] = {"samples": np.int64(10), "keys": np.int32(4), "seed": np.uint8(1)}
    a = attn.variance((d for d in [np.int64(2), 3]), **numpy_ints).render("json")  # type: ignore[arg-type]
    b = attn.variance([2, 3], samples=10, keys=4, seed=1).render("json")
    assert a == b



@pytest.mark.parametrize(
    ("keywords", "key"),
    [
        ({"position": 1.5}, "position"),
        ({"position": "2"}, "position"),
        ({"word": "cat", "head": 1.0}, "head"),
        ({"word": "cat", "head": "1"}, "head"),
        ({"word": 5}, "word"),
        ({"word": "cat", "block_size": 1.5}, "block_size"),
        ({"word": "cat", "block_size": "2"}, "block_size"),
    ],
)
def test_explain_refuses_what_is_not_a_whole_number_or_a_word(keywords: dict[str, object], key: str) -> None:
    """attncli.api.explain with position=1.5, head="1", word=5 or block_size=1.5 was a TypeError, AttributeError or ValueError."""
    with pytest.raises(AttnError, match=key):
        attn.explain("cat", **keywords)  # type: ignore[arg-type]


def test_heads_markdown_shows_an_explain_call_as_text_not_control_codes(tmp_path: Path) -> None:
    """heads --format markdown wrote a notable head's explain call as it was: a scenario file named with an escape sequence
    and a line break put a raw ESC into the post (a terminal showing it turned red) and split the code span over two lines."""
    sharp = cli("scenarios", "new", "x y", "--d-model", "4", "--heads", "4", "--mask", "causal", "--sharpness", "8", "--seed", "1")
    path = tmp_path / "we\x1b[31mird\nname.yaml"
    path.write_text(sharp[1], encoding="utf-8")
    code, out, err = cli("heads", str(path), "--format", "markdown")
    assert code == 0, err
    calls = [line for line in out.splitlines() if line.startswith("- ")]
    assert calls and all("attncli explain -s" in line and line.endswith("`") for line in calls)  # each call whole on its line
    assert not any(ord(c) < 32 and c != "\n" for c in out)
    assert "we\\x1b[31mird\\nname.yaml" in out


def test_variance_holds_a_bounded_number_of_keys_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """variance --dims 65536 --keys 4096 --samples 7 drew every trial's keys at once, about 15 GB (each trial 2 GB; the
    2·10⁹ cap allowed 16 GB), on a machine that has less: beyond its budget the keys are drawn in pieces."""
    import tracemalloc

    from attncli.core import variance

    tracemalloc.start()
    try:
        attn.variance([8192], samples=3, keys=4096)  # 3 × 4,096 × 8,192 floats: 805 MB at once before
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 120 * 2**20, f"{peak / 2**20:.0f} MB"
    whole = variance.experiment([64, 3], samples=50, keys=8, seed=4)
    monkeypatch.setattr(variance, "BUDGET", 10)  # the same experiment in pieces of one key row: the same numbers
    monkeypatch.setattr(variance, "PIECE", 1)
    pieces = variance.experiment([64, 3], samples=50, keys=8, seed=4)
    assert len(pieces) == len(whole) == 2
    for piece, row in zip(pieces, whole):
        assert list(piece) == pytest.approx(list(row), rel=1e-12, abs=1e-12)


def test_scenarios_new_writes_bidi_controls_as_escapes(tmp_path: Path) -> None:
    """scenarios new wrote a sentence's right-to-left override and mark (U+202E, U+200F) raw into the YAML, in the sentence
    and the embeddings' comment, where an editor or `cat` reorders the line around them ("Trojan Source"); escape.visible
    writes them as \\u202e everywhere else. YAML's double quotes read \\u202e back as the same character."""
    code, out, err = cli("scenarios", "new", "a \u202eb\u200f c\u2066", "--seed", "1")
    assert code == 0, err
    assert not any(c in out for c in "\u202e\u200f\u2066")
    assert "\\u202e" in out
    path = tmp_path / "bidi.yaml"
    path.write_text(out, encoding="utf-8")
    assert attn.load(path).tokens == ("a", "\u202eb\u200f", "c\u2066")


def test_explain_word_of_the_cache_says_it_is_a_cached_key() -> None:
    """explain --word the, where 'the' is a token of the given KV cache, said "'the' is not a token of the scenario", though
    the scenario shows it (K_cache's row 'the'); its position was already refused as "a key of the given cache"."""
    code, out, err = cli("explain", str(Path(__file__).parent / "scenarios" / "cache-rope.yaml"), "--word", "the")
    assert code == 1 and out == ""
    assert "'the' is a key of the given cache (position 1), not a query of the sentence" in err
    assert "sat on" in err and len(err.strip().splitlines()) == 1
