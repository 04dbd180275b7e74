"""The real tools readers use, for tests of the publication formats: pdflatex, KaTeX, MathJax, markdown-it-py, parsers.

Helpers, not tests. Each runs a tool and returns what it made of the input, or raises with
the tool's own message; the tests decide what to skip when a tool is absent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import unicodedata
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, NamedTuple

from attncli.document import escape

HERE = Path(__file__).parent

# -- node: KaTeX and MathJax ---------------------------------------------------------------------


# scripts/install-test-tools.sh installs these npm packages into NODE_TOOLS before the tests run;
# the tests never install anything themselves. ATTNCLI_NODE_TOOLS names another folder.
NODE_PACKAGES = {"katex": "katex@0.16", "mathjax-full": "mathjax-full@3"}
NODE_TOOLS = Path(os.environ.get("ATTNCLI_NODE_TOOLS") or HERE.parent / ".test-tools" / "node")


def node_modules(module: str) -> Path:
    """The node_modules folder holding `module` (a key of NODE_PACKAGES); RuntimeError saying what is missing and how to install it."""
    if shutil.which("node") is None:
        raise RuntimeError(f"node is not installed, so {module} cannot render TeX here")
    modules = NODE_TOOLS / "node_modules"
    if not (modules / module / "package.json").is_file():
        raise RuntimeError(f"{NODE_PACKAGES[module]} is not installed in {NODE_TOOLS}: scripts/install-test-tools.sh installs it with npm")
    return modules


class Rendered(NamedTuple):
    """What a TeX engine made of one block: its error message, or the text its MathML shows."""

    error: str | None
    text: str


def run_node(script: str, node_modules: Path, payload: Any) -> Any:
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not installed")
    env = {"NODE_PATH": str(node_modules), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([node, str(HERE / script)], input=json.dumps(payload), capture_output=True, text=True, env=env,
                          timeout=300, check=True)  # fmt: skip
    return json.loads(done.stdout)


def katex(node_modules: Path, blocks: list[str]) -> list[Rendered]:
    """Each block rendered by KaTeX in strict mode (tests/katex_mathml.js)."""
    return _rendered(run_node("katex_mathml.js", node_modules, blocks))


def mathjax(node_modules: Path, blocks: list[str]) -> list[Rendered]:
    """Each block rendered by MathJax 3 with a default page's TeX packages (tests/mathjax_render.js)."""
    return _rendered(run_node("mathjax_render.js", node_modules, blocks))


def _rendered(answer: dict[str, Any]) -> list[Rendered]:
    return [Rendered(r["error"], mathml_text(r["mathml"]) if r["mathml"] else "") for r in answer["results"]]


def mathml_text(mathml: str) -> str:
    """The characters a MathML tree shows, in order (the TeX source annotation left out)."""

    class Leaves(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.parts: list[str] = []
            self.skip = 0

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.skip += tag == "annotation"

        def handle_endtag(self, tag: str) -> None:
            self.skip -= tag == "annotation"

        def handle_data(self, data: str) -> None:
            if not self.skip and data.strip():  # not the indentation between tags
                self.parts.append(data)

    parser = Leaves()
    parser.feed(mathml)
    return "".join(parser.parts)


# -- pdflatex -------------------------------------------------------------------------------------


class LatexError(Exception):
    """pdflatex stopped; the message holds its error lines."""


def pdflatex(source: str, folder: Path, name: str = "doc") -> Path:
    """Compile `source` with pdflatex in `folder` (halting on the first error); the PDF."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.tex").write_text(source, encoding="utf-8")
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", f"{name}.tex"],
                          cwd=folder, capture_output=True, timeout=300)  # fmt: skip
    log = (folder / f"{name}.log").read_text(encoding="utf-8", errors="replace")
    if done.returncode != 0:
        errors = [line for line in log.splitlines() if line.startswith("!") or line.startswith("l.")]
        raise LatexError("\n".join(errors[:10]) or log[-2000:])
    return folder / f"{name}.pdf"


def pdf_text(pdf: Path) -> str:
    """The text pdftotext (poppler) reads from a PDF, in reading order."""
    return subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"], capture_output=True, text=True, check=True).stdout


def pdf_fonts(pdf: Path) -> str:
    """pdffonts' table of the fonts a PDF embeds (a bitmap font shows as Type 3)."""
    return subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout


_INLINE_MATH = re.compile(r"(?<!\\)\$(.+?)(?<!\\)\$")


def latex_prose_math(line: str) -> list[str]:
    r"""The inline `$…$` pieces of one text paragraph of explain's LaTeX; fails on anything a paragraph must not hold.

    Outside its math a paragraph holds text and the escapes `\_ \% \& \# \{ \}` only (which
    CommonMark reads too), never a TeX command, never `$$`; its `$` pair up.
    """
    # a paragraph may begin with one of those escapes (a title that is a sentence "&"), never with a command or a comment
    assert "$$" not in line and not line.startswith("%") and not re.match(r"\\[^_%&#{}]", line), line
    outside = _INLINE_MATH.sub("", line)
    assert "$" not in outside, line
    assert re.sub(r"\\[_%&#{}]", "", outside).count("\\") == 0, line
    return _INLINE_MATH.findall(line)


def latex_display_blocks(text: str) -> list[str]:
    """The `$$ … $$` blocks of a LaTeX fragment; fails unless every other line is blank, a % comment or a one-line paragraph.

    A block or a paragraph has a blank line (or the start or end) on each side, so a Markdown post
    reads each block as display math and each paragraph as text.
    """
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if not line.strip() or line.startswith("%"):
            continue
        if line.startswith("$$"):
            assert line.startswith("$$ ") and line.endswith(" $$") and "$$" not in line[2:-2], line
            blocks.append(line[3:-3])
        else:
            latex_prose_math(line)
            assert all(not lines[j].strip() for j in (i - 1, i + 1) if 0 <= j < len(lines)), line
    return blocks


# -- what TeX should print ----------------------------------------------------------------------

_GLYPHS = str.maketrans({
    "’": "'", "‘": "`", "“": '"', "”": '"', "∼": "~", "∖": "\\", "∣": "|", "−": "-", "…": "...",
    "^": None, "ˆ": None,  # a caret is \hat{\ }, which poppler reads as ˆ, sometimes as the accent of the letter before it
    "ı": "i", "ȷ": "j", "\u00a0": " ", "∆": "Δ",  # poppler reads \Delta as the increment sign
})  # fmt: skip


GREEK_IN_MATH = frozenset("αβγδεζηθικλμνξπρστυφχψωΓΔΘΛΞΠΣΥΦΨΩ")  # printed as math symbols (\alpha …), as themselves


def printed(s: str) -> str:
    """What `escape.latex(s)` should print: visible(s), ␣ as ⊔ (a leading space's mark), each other character TeX cannot print written U+XXXX."""
    text = unicodedata.normalize("NFC", escape.visible(s))
    return "".join(c if c.isascii() or c in escape.LATEX_TEXT_CHARACTERS or c in GREEK_IN_MATH or c == "\u00a0" else "⊔" if c == "␣"
                   else f"U+{ord(c):04X}" for c in text)  # fmt: skip


_SPLIT_ACCENT = re.compile(r"(?<=[^\W\d_])[\u02dc\u02ca\u02cb\u02c7\u02d8\u02d9\u02da\u02dd\u00a8\u00af\u00b4\u00b8\u02db]")


def fold(text: str) -> str:
    """The form in which printed and extracted text are compared: glyph variants merged, accents and spaces dropped.

    TeX prints ' as ’ and ~ as ∼, KaTeX and poppler split é into e and an accent, and spaces
    depend on the tool; these differences are typography, not wrong characters.
    """
    text = _SPLIT_ACCENT.sub("", text)  # an accent after a letter belongs to it ("Aˆ" is KaTeX's Â)
    text = unicodedata.normalize("NFKD", text.translate(_GLYPHS)).translate(_GLYPHS)
    text = "".join(c for c in text if not unicodedata.combining(c) and not 0x2B0 <= ord(c) <= 0x2FF and c not in "´¨¯¸˛")
    return re.sub(r"\s+", "", text)


# -- Markdown, HTML, XML ------------------------------------------------------------------------


def markdown_html(text: str) -> str:
    """GFM-like HTML of Markdown text from markdown-it-py (CommonMark with tables)."""
    from markdown_it import MarkdownIt

    return str(MarkdownIt("commonmark").enable("table").render(text))


class Element(NamedTuple):
    tag: str
    attrs: dict[str, str | None]
    text: str  # the text directly and deeply inside it


def html_elements(document: str) -> list[Element]:
    """Every element of an HTML document with its attributes and text, in document order (html.parser, entities decoded)."""

    class Collect(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.elements: list[Element] = []
            self.open: list[int] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.elements.append(Element(tag, dict(attrs), ""))
            if tag not in VOID:
                self.open.append(len(self.elements) - 1)

        def handle_endtag(self, tag: str) -> None:
            while self.open:
                index = self.open.pop()
                if self.elements[index].tag == tag:
                    break

        def handle_data(self, data: str) -> None:
            for index in self.open:
                element = self.elements[index]
                self.elements[index] = element._replace(text=element.text + data)

    parser = Collect()
    parser.feed(document)
    parser.close()
    return parser.elements


VOID = {"meta", "br", "hr", "img", "link", "input", "col", "wbr", "source"}


# -- Chromium: an independent rasteriser of SVG -----------------------------------------------------


def chromium_screenshot(svg: str, size: tuple[int, int], *, scale: int, fonts: Path, folder: Path) -> bytes:
    """The SVG inline in a blank page, drawn by headless Chromium at `scale` device pixels per CSS pixel: PNG bytes.

    Chromium sees only the fonts in `fonts` (a fontconfig file of its own), the ones attncli's PNG is drawn with, so the
    two drawings differ only by their rasterisers. Skips (pytest) without Playwright or Chromium.
    """
    import pytest

    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright drives the browser: pip install playwright (.ci/run does)")
    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser_path is None:
        pytest.skip("no Chromium to draw the SVG with (apt-get install chromium; scripts/install-test-tools.sh does)")
    config = folder / "fonts.conf"
    config.write_text(f'<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig><dir>{fonts}</dir>'
                      f"<cachedir>{folder / 'fontcache'}</cachedir>"
                      "<alias><family>monospace</family><prefer><family>DejaVu Sans Mono</family></prefer></alias>"
                      "<alias><family>sans-serif</family><prefer><family>DejaVu Sans</family></prefer></alias>"
                      "</fontconfig>\n", encoding="utf-8")  # fmt: skip  # the generic families as resvg is told them
    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    width, height = size
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=args, env={**os.environ, "FONTCONFIG_FILE": str(config)})
        try:
            page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=scale)
            page.set_content(f'<!DOCTYPE html><html><body style="margin:0">{svg}</body></html>')
            return page.screenshot()
        finally:
            browser.close()
