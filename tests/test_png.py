"""`--format png`: the very SVG attncli writes, drawn by resvg with the bundled fonts, decoded and compared with Chromium's drawing."""

from __future__ import annotations

import contextlib
import os
import pty
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import attncli.api as attn
from attncli.errors import AttnError
from attncli.formats import pngout
from tests import renderers

ROOT = Path(__file__).resolve().parent.parent
GPT2 = str(ROOT / "tests/checkpoints/gpt2")
SIGNATURE = b"\x89PNG\r\n\x1a\n"
# One command per kind of figure: a head's heatmap (run), a query's row (explain), the map, the shaded sentence, a report's
# figures and a report's text.
FIGURES = {
    "run": ("run", "cat"),
    "explain": ("explain", "cat", "--word", "sat"),
    "heads": ("heads", "--model", GPT2, "--sentence", "The cat sat on the mat"),
    "shade": ("heads", "--model", GPT2, "--sentence", "The cat sat on the mat", "--word", "sat", "--layer", "2"),
    "report": ("decode", "journey-causal"),
    "text": ("model", "info", GPT2),  # a report without figures: its text as the terminal's lines, in DejaVu Sans Mono
}

resvg_py = pytest.importorskip("resvg_py", reason="the PNG tests need resvg: pip install 'attncli[png]' (the test extra installs it)")
png = pytest.importorskip("png", reason="the PNG tests decode with pypng: pip install pypng (the test extra installs it)")


def pixels(data: bytes) -> np.ndarray:
    """The PNG decoded by pypng (a reader independent of resvg): (height, width, 4) RGBA bytes."""
    assert data.startswith(SIGNATURE)
    width, height, rows, _ = png.Reader(bytes=data).asRGBA8()
    return np.array([np.frombuffer(bytes(row), dtype=np.uint8) for row in rows]).reshape(height, width, 4)


def drawn(cli, args: tuple[str, ...], fmt: str) -> bytes:
    result = cli(*args, "--format", fmt)
    assert result.exit_code == 0, result.stderr
    return result.stdout_bytes


@pytest.mark.parametrize("kind", FIGURES)
def test_the_png_is_the_svg_drawn_at_twice_its_size_and_is_not_blank(cli, kind):
    """Each figure's PNG decodes to 2× the SVG's stated size, shows ink and colour, and is resvg's drawing of that very SVG."""
    svg = drawn(cli, FIGURES[kind], "svg").decode("utf-8")
    data = drawn(cli, FIGURES[kind], "png")
    image = pixels(data)
    width, height = pngout.svg_size(svg)
    assert image.shape == (2 * height, 2 * width, 4)
    rgb = image[..., :3].astype(int)
    assert (image[..., 3] == 255).mean() > 0.99  # the SVG's background rectangle covers it
    assert (rgb.sum(axis=2) < 150).mean() > 0.002  # dark text or cells: something is drawn on the white
    assert len({tuple(p) for p in rgb.reshape(-1, 3)[:: 7]}) > 20  # shades, not two colours
    assert data == pngout.rasterised(svg)  # not a second drawing: the SVG the command writes, rasterised


def test_text_is_drawn_with_the_bundled_fonts_and_no_system_font(cli):
    """The title's glyphs are drawn although resvg reads no system font: without the bundled DejaVu Sans the PNG has no text."""
    svg = drawn(cli, FIGURES["run"], "svg").decode("utf-8")
    with_fonts = pixels(pngout.rasterised(svg))
    bare = pixels(resvg_py.svg_to_bytes(svg_string=svg, zoom=2, skip_system_fonts=True))
    title = (slice(0, 80), slice(0, 400))  # "Attention weights" and its formula, at 2×
    assert (with_fonts[title][..., :3].sum(axis=2) < 200).sum() > 500
    assert (bare[title][..., :3].sum(axis=2) < 200).sum() == 0


def test_the_bundled_fonts_characters_are_those_fontconfig_reads_from_them():
    """pngout's cmap reader gives each bundled font's code points exactly as fontconfig's fc-query lists them."""
    import shutil

    if shutil.which("fc-query") is None:
        pytest.skip("fontconfig's fc-query is not installed (Debian: fontconfig)")
    for name in pngout.FONT_FILES:
        listed = subprocess.run(["fc-query", "--format", "%{charset}", str(pngout.FONTS / name)], capture_output=True, text=True, check=True)
        expected = {c for part in listed.stdout.split() for c in range(int(part.split("-")[0], 16), int(part.split("-")[-1], 16) + 1)}
        assert pngout.cmap_code_points((pngout.FONTS / name).read_bytes()) == expected, name
    assert {ord(c) for c in "×Σ√←…␣·–’"} <= pngout.bundled_characters() and ord("猫") not in pngout.bundled_characters()


@pytest.mark.parametrize(("text", "bold"), [("W" * 12, False), ("M" * 12, True), ("iiiiiiiiiiii", False), ("0.1250 −∞ WASHINGTON", False)])
def test_figures_measure_text_as_the_png_draws_it(text, bold):
    """fontmetrics.text_width is where resvg ends the text it draws in the bundled DejaVu Sans (within a pixel at 20 px), so
    a token of capitals fits its box; the 0.6 em every character used to count put 12 W's at 144 px, drawn 237 px wide."""
    from attncli.formats.fontmetrics import text_width

    width = text_width(text, 20, bold=bold)
    weight = ' font-weight="bold"' if bold else ""
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{int(width) + 40}" height="40"><rect width="100%" height="100%" fill="#fff"/>'
           f'<text x="10" y="28" font-family="DejaVu Sans" font-size="20"{weight}>{text}</text></svg>')  # fmt: skip
    ink = np.flatnonzero((pixels(pngout.rasterised(svg))[..., :3].sum(axis=2) < 600).any(axis=0)) / 2  # columns with ink, in SVG px
    assert 10 + width - 5 <= ink.max() <= 10 + width + 1  # short of the width by the last glyph's right side bearing (a quarter em at most)
    assert text_width("W", 2048) == 2025 and text_width("i", 2048) == 569  # DejaVu Sans's own advances, in its 2,048 units per em


def test_a_character_the_bundled_fonts_lack_is_drawn_from_the_machine_s_fonts(cli, tmp_path):
    """A token 猫 (no DejaVu glyph) takes the machine's font that has it, not an empty box; Latin-only figures never read them."""
    import shutil

    fc_list = shutil.which("fc-list")
    if fc_list is None or not subprocess.run([fc_list, ":charset=732b"], capture_output=True, text=True).stdout.strip():
        pytest.skip("no font here draws 猫 (Debian: fonts-droid-fallback; scripts/install-test-tools.sh installs it)")
    made = cli("scenarios", "new", "a b c", "--d-model", "2", "--seed", "1").stdout
    assert 'sentence: "a b c"' in made
    (tmp_path / "cjk.yaml").write_text(made.replace('sentence: "a b c"', 'tokens: ["猫", "b", "c"]'), encoding="utf-8")
    svg = drawn(cli, ("run", str(tmp_path / "cjk.yaml")), "svg").decode("utf-8")
    boxed = pixels(resvg_py.svg_to_bytes(svg_string=svg, zoom=2, skip_system_fonts=True, sans_serif_family="DejaVu Sans",
                                         font_files=[str(pngout.FONTS / name) for name in pngout.FONT_FILES]))  # fmt: skip
    ours = pixels(drawn(cli, ("run", str(tmp_path / "cjk.yaml")), "png"))
    assert ours.shape == boxed.shape and (np.abs(ours.astype(int) - boxed.astype(int)).max(axis=2) > 64).sum() > 50


def test_the_api_returns_the_png_bytes_and_render_refuses_binary():
    """result.png() is the command's PNG; render('png') is one AttnError pointing at png() (render returns text)."""
    ran = attn.run("cat")
    assert ran.png() == pngout.rasterised(ran.render("svg"))
    with pytest.raises(AttnError) as error:
        ran.render("png")
    assert "a PNG is binary, not text" in str(error.value) and "png()" in str(error.value)


def test_without_resvg_png_is_one_line_saying_how_to_install_it(cli, monkeypatch):
    """With resvg missing, --format png fails with one line naming the extra to install; the other formats are untouched."""
    monkeypatch.setitem(sys.modules, "resvg_py", None)  # import resvg_py raises ImportError
    result = cli("run", "cat", "--format", "png")
    assert result.exit_code == 1 and result.stdout_bytes == b""
    assert result.stderr.strip().splitlines() == [
        "attncli: error: --format: PNG needs the resvg rasteriser, which is not installed "
        '(expected pip install "attncli[png]", or svg)'
    ]
    assert cli("run", "cat", "--format", "svg").exit_code == 0


def test_a_figure_too_big_for_a_png_is_refused_before_it_is_drawn(cli, monkeypatch):
    """A figure over the pixel limit is one line naming its size, not a multi-gigabyte allocation."""
    monkeypatch.setattr(pngout, "MAX_PIXELS", 100_000)
    result = cli("run", "cat", "--format", "png")
    assert result.exit_code == 1
    assert "--format: the figure would be 850 × 518 pixels, more than a PNG of 100,000 may have" in result.stderr


def test_a_png_is_written_atomically_to_its_file_and_export_names_it_png(cli, tmp_path):
    """-o writes the PNG through io's atomic write (an old file is replaced whole); export gives each file the .png extension."""
    target = tmp_path / "cat.png"
    target.write_bytes(b"old")
    assert cli("run", "cat", "--format", "png", "-o", str(target)).exit_code == 0
    assert target.read_bytes() == attn.run("cat").png()
    folder = tmp_path / "posts"
    folder.mkdir()
    (folder / "mine.yaml").write_text((ROOT / "scenarios/cat.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    assert cli("export", str(folder), "--format", "png", "--out-dir", str(out)).exit_code == 0
    assert (out / "mine.png").read_bytes().startswith(SIGNATURE)


def test_a_png_is_refused_on_a_terminal_with_one_line():
    """Binary output to a terminal (stdout, or -o /dev/stdout) is one clear line and nothing on the screen; a pipe gets the PNG.

    heads says so before its forward pass: a sentence too long for the model, which the pass would refuse, is not reached."""
    too_long = ("heads", "--model", GPT2, "--sentence", " ".join(["cat"] * 40))
    for command in (("run", "cat"), ("run", "cat", "-o", "/dev/stdout"), too_long):
        leader, follower = pty.openpty()
        try:
            done = subprocess.run([sys.executable, "-m", "attncli", *command, "--format", "png"], stdout=follower,
                                  stderr=subprocess.PIPE, timeout=120)  # fmt: skip
            os.set_blocking(leader, False)
            shown = b""  # what reached the terminal: nothing
            with contextlib.suppress(BlockingIOError):
                shown = os.read(leader, 65536)
        finally:
            os.close(follower)
            os.close(leader)
        assert done.returncode == 1 and SIGNATURE not in shown
        assert done.stderr.decode().strip().splitlines() == [
            "attncli: error: --format: a PNG is binary and is not printed on a terminal (expected --output FILE.png, or a pipe or redirection (> FILE.png))"
        ]
    piped = subprocess.run([sys.executable, "-m", "attncli", "run", "cat", "--format", "png"], capture_output=True, timeout=120, check=True)
    assert piped.stdout.startswith(SIGNATURE)


@pytest.mark.slow
@pytest.mark.parametrize("kind", FIGURES)
def test_chromium_draws_the_same_svg_to_the_same_pixels(cli, kind, tmp_path):
    """Chromium's drawing of the SVG (same fonts, 2× device pixels) matches the PNG: mean difference ≤ 2/255, ≤ 3% of pixels off by more than 32."""
    svg = drawn(cli, FIGURES[kind], "svg").decode("utf-8")
    ours = pixels(drawn(cli, FIGURES[kind], "png"))[..., :3].astype(int)
    theirs = pixels(renderers.chromium_screenshot(svg, pngout.svg_size(svg), scale=2, fonts=pngout.FONTS, folder=tmp_path))[..., :3].astype(int)
    assert theirs.shape == ours.shape
    difference = np.abs(ours - theirs).max(axis=2)  # (H, W): the largest channel's difference at each pixel
    assert difference.mean() <= 2.0, difference.mean()
    assert (difference > 32).mean() <= 0.03, (difference > 32).mean()
