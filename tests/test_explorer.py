"""`heads --format html --interactive`: one self-contained page to explore the map, checked as a parser and a real browser read it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import attncli.api as attn
from attncli.document.numbers import HALF_TOLERANCES, fixed, fixed_many

ROOT = Path(__file__).resolve().parent.parent
GPT2 = str(ROOT / "tests/checkpoints/gpt2")
HOSTILE = "The cat </script><b>sat</b> on {{x}} & the mat"


class _Links(HTMLParser):
    """Every src and href of a page, and the text of its data script."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.data = ""
        self._in_data = False

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        self.urls += [v for k, v in attrs if k in ("src", "href") and v]
        self._in_data = tag == "script" and found.get("id") == "attncli-data"

    def handle_endtag(self, tag):
        self._in_data = False

    def handle_data(self, data):
        if self._in_data:
            self.data += data


def _page(tmp_path: Path, cli, sentence: str = HOSTILE) -> Path:
    path = tmp_path / "explore.html"
    result = cli("heads", "--model", GPT2, "--sentence", sentence, "--format", "html", "--interactive", "-o", str(path))
    assert result.exit_code == 0, result.stderr
    return path


def test_the_page_needs_no_network_and_carries_tokens_as_text(cli, tmp_path):
    """No URL to fetch; the data parse back with every token as written, a </script> in the sentence included."""
    page = _page(tmp_path, cli).read_text(encoding="utf-8")
    parsed = _Links()
    parsed.feed(page)
    assert parsed.urls == [] and not re.search(r"https?://", page)
    data = json.loads(parsed.data)
    assert "".join(data["tokens"]).replace("␣", " ") == HOSTILE
    L = len(data["tokens"])
    assert np.array(data["weights"]).shape == (3, 4, L, L) and data["exact"]
    assert (np.array(data["seen"]) == np.tril(np.ones((L, L), dtype=int))).all()  # GPT-2's causal mask, in every layer


def test_a_token_s_control_characters_are_written_as_every_format_writes_them(cli, tmp_path):
    """A token holding ESC, BEL or U+202E (which would reverse what follows it) travels as `\\x1b`, `\\x07`, `\\u202e`,
    as the tables write it: two different tokens never look the same on the page."""
    from attncli.document.escape import visible

    scenario = tmp_path / "rlo.yaml"
    tokens = ["x\u202e", "x", "bell\x07", "\x1b[31mred"]
    scenario.write_text("name: rlo\ntokens: [" + ", ".join(json.dumps(token) for token in tokens) + "]\nembeddings:\n"
                        + "".join(f"  {json.dumps(token)}: [{i}, 1]\n" for i, token in enumerate(tokens))
                        + "W_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n", encoding="utf-8")  # fmt: skip
    result = cli("heads", str(scenario), "--format", "html", "--interactive")
    assert result.exit_code == 0, result.stderr
    parsed = _Links()
    parsed.feed(result.stdout)
    data = json.loads(parsed.data)
    assert data["tokens"] == [visible(token) for token in tokens] == ["x\\u202e", "x", "bell\\x07", "\\x1b[31mred"]
    assert not any(c in result.stdout for c in "\u202e\x07\x1b")


def test_interactive_is_html_only(cli):
    """--interactive with another format is one line naming the option."""
    result = cli("heads", "multihead", "--format", "svg", "--interactive")
    assert result.exit_code == 1 and "--interactive: found svg: the page to explore is HTML" in result.stderr


def test_interactive_is_a_whole_page_never_a_fragment(cli):
    """--interactive --fragment is one line (the page came out whole, the --fragment ignored); --standalone is the page."""
    result = cli("heads", "multihead", "--format", "html", "--interactive", "--fragment")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.strip() == ("attncli: error: --interactive: found a fragment: the page to explore is one whole page "
                                     "(expected a page (the default), or a fragment without --interactive)")  # fmt: skip
    assert cli("heads", "multihead", "--format", "html", "--interactive", "--standalone").stdout.startswith("<!DOCTYPE html>")


def test_the_page_rounds_a_weight_as_every_table_does():
    """The script's formatter (explorer.js, run by node) gives numbers.fixed's text for decimal halves, the floats a few ulps
    either side of them (0.285 is 0.28499… in binary: toFixed alone would show 0.28, the tables 0.29) and random weights."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node runs the page's script here (apt-get install nodejs; scripts/install-test-tools.sh does)")
    rng = np.random.default_rng(7)
    cases: list[tuple[float, int]] = []
    for precision in range(0, 8):
        halves = (rng.integers(0, 10**precision, 40) + 0.5) / 10**precision
        for half in [*halves.tolist(), 0.125, 0.285, 0.5, 0.0005, 1.5]:
            cases += [(float(x), precision) for x in (half, *np.nextafter(half, [0.0, 2.0]), half * (1 + 3e-16), half * (1 - 3e-16))]
        cases += [(float(x), precision) for x in rng.random(60)]
        cases += [(-0.0004, precision), (-0.285, precision), (0.0, precision), (1.0, precision)]
    script = (ROOT / "attncli/formats/explorer.js").read_text(encoding="utf-8")
    formatter = script[: script.index("(function () {")]
    program = formatter + (f"const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
                           f"console.log(JSON.stringify(cases.map(([x, p]) => attncliFixed(x, p, {HALF_TOLERANCES['tie']!r}, {HALF_TOLERANCES['tie_most']!r}))));")  # fmt: skip
    done = subprocess.run([node, "-e", program], input=json.dumps(cases), capture_output=True, text=True, timeout=60, check=True)
    shown = json.loads(done.stdout)
    wrong = [(x, p, s, fixed(x, p)) for (x, p), s in zip(cases, shown, strict=True) if s != fixed(x, p)]
    assert wrong == []


@pytest.mark.parametrize("extra", [["--word", "sat"], ["--word", "sat", "--to", "cat"], ["--compare-sentence", "A cat sat"]])
def test_interactive_is_the_map_only(cli, extra):
    """A shaded sentence, a link between two words or a comparison has no page to explore: one line, not a page of 1 × 1
    matrices headed "block 1", nor --interactive ignored."""
    result = cli("heads", "--model", GPT2, "--sentence", "The cat sat", *extra, "--format", "html", "--interactive")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("attncli: error: --interactive: found a ") and "the page to explore is the map" in result.stderr


@pytest.mark.parametrize(("level", "headings"), [(1, ["h1", "h2"]), (3, ["h3", "h4"]), (0, ["h2"])])
def test_the_page_to_explore_places_its_headings_by_heading_level(cli, level, headings):
    page = cli("heads", "multihead", "--format", "html", "--interactive", "--heading-level", str(level)).stdout
    assert re.findall(r"<(h[1-6])\b", page) == headings
    parsed = _Links()
    parsed.feed(page)
    assert json.loads(parsed.data)["readings"][0]["text"].startswith("No head stands out (")  # under Readings, as the static page says


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
def test_a_browser_clicks_a_head_hovers_a_row_and_switches_the_theme(cli, tmp_path):
    """In Chromium: clicking L2 H3 shows its labelled weights as the engine computes them; hovering a row shades the sentence."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright drives the browser: pip install playwright (.ci/run does)")
    browser_path = _chromium()
    if browser_path is None:
        pytest.skip("no Chromium to drive (apt-get install chromium; scripts/install-test-tools.sh does)")
    sentence = "The cat sat on the mat"
    path = _page(tmp_path, cli, sentence)
    weights = attn.run(attn.load_model(GPT2, layer=2, sentence=sentence)).head(3).weights  # (L, L)
    parsed = _Links()
    parsed.feed(path.read_text(encoding="utf-8"))
    precision = json.loads(parsed.data)["precision"]
    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=args)
        try:
            page = browser.new_page()
            page.goto(path.as_uri())
            page.click('button.head[data-layer="2"][data-head="3"]')
            assert page.inner_text("#matrix caption") == "Layer 2, head 3: rows are queries, columns keys"
            rows = page.locator("#matrix tr")
            headers = rows.nth(0).locator("th").all_inner_texts()[1:]
            assert [h.replace("␣", " ").strip() for h in headers] == sentence.split()
            cells = [row.locator("td").all_inner_texts() for row in rows.all()[1:]]
            causal = [[text if j <= i else "–" for j, text in enumerate(fixed_many(row, precision))] for i, row in enumerate(weights)]
            assert cells == causal  # the digits every table shows, and its – where GPT-2's mask hides a later key
            rows.nth(4).locator("th").hover()  # query row 4, 'on'
            shaded = page.locator("#sentence span").evaluate_all("spans => spans.map(s => s.dataset.weight)")
            assert shaded == causal[3]
            assert page.locator("#sentence span.query").inner_text().strip() in ("on", "␣on")
            page.select_option("#layer", "3")
            assert page.inner_text("#matrix caption").startswith("Layer 3, head 3")
            before = page.evaluate("document.documentElement.dataset.theme || ''")
            page.click("#theme")
            after = page.evaluate("document.documentElement.dataset.theme")
            assert after in ("light", "dark") and after != before
        finally:
            browser.close()


def test_the_map_is_a_whole_typst_document_or_an_html_fragment_on_request(cli):
    """heads takes --standalone and --fragment as run does: Typst with its page set compiles; HTML becomes a <div> to paste."""
    from tests.test_typst import compiled

    typst_doc = cli("heads", "multihead", "--format", "typst", "--standalone")
    assert typst_doc.exit_code == 0, typst_doc.stderr
    assert typst_doc.stdout.startswith("#set document(") and compiled(typst_doc.stdout).startswith(b"%PDF")
    fragment = cli("heads", "multihead", "--format", "html", "--fragment").stdout
    assert fragment.startswith('<div class="attncli">') and "<html" not in fragment.lower()
    assert cli("heads", "multihead", "--format", "html").stdout.startswith("<!DOCTYPE html>")
