"""GitHub-flavoured Markdown: tables a blog post can paste as they are; `run`, `explain` and every block of a document.

Every input text goes through `escape.markdown`, so `<eos>`, `*x*` or `a_b` render literally.
The top heading's level is chosen by `heading_level` (0 leaves it out). A run is streamed:
a block of table rows at a time, its numbers written at once by `fixedtext`, as UTF-8.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from attncli.document import escape
from attncli.document.blocks import (
    Document,
    ExplainArticle,
    Heading,
    Note,
    Paragraph,
    RunDocument,
    Steps,
    Summary,
    Table,
    Values,
    fields,
    step_lines,
)
from attncli.document.blocks import Matrix as MatrixView
from attncli.document.numbers import exact_decimals, fixed, short_vector, smart, vector
from attncli.document.summary import hand_rounded_title, rounded_every_step

if TYPE_CHECKING:
    from attncli.document.pages import ExplainPage, HeadsPage, ReportPage, RunPage, ShadePage
    from attncli.formats import Options

md = escape.markdown  # every input text (token, name, sentence) goes through it


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, align: Sequence[str] | None = None, blank: str = " ") -> list[str]:
    """A GFM table; align holds "l" or "r" per column (default: first left, others right).

    Cells arrive escaped (`escape.markdown`). An empty cell is written as `blank`: a space for run's and
    explain's tables ("|   |"), nothing for a document's (`document_markdown`: "|  |"); GFM shows both alike.
    """
    align = align or ["l"] + ["r"] * (len(header) - 1)
    lines = ["| " + " | ".join(h or blank for h in header) + " |"]
    lines.append("|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|")
    lines += ["| " + " | ".join(c or blank for c in row) + " |" for row in rows]
    return lines


def _cell(text: str) -> str:
    return text or " "  # input text arrives escaped by `attncli.document.escape.markdown`


def code_span(text: str) -> str:
    """`text` (one line) as a code span that shows it as written, backticks included: fenced by one backtick more than its
    longest run of them, with a space inside the fences where it starts or ends with one (CommonMark strips one each side)."""
    fence = "`" * (1 + max((len(run) for run in re.findall("`+", text)), default=0))
    pad = " " if text[:1] == "`" or text[-1:] == "`" or (text[:1] == text[-1:] == " " and text.strip()) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def heading(level: int, text: str) -> list[str]:
    """A heading at `level` (1-6), followed by a blank line; nothing at level 0."""
    return [f"{'#' * min(level, 6)} {text}", ""] if level > 0 else []


def _levels(level: int) -> tuple[int, int]:
    """The top heading's level (0: none) and the level of the sections under it."""
    return level, min(6, max(level, 1) + 1) if level else 2


def run_markdown(page: RunDocument, *, precision: int, heading_level: int = 1) -> Iterator[bytes]:
    """The scenario's header, then a heading and a table per view, streamed."""
    top, section = _levels(heading_level)
    yield ("\n".join(_run_header(page.summary, top)) + "\n").encode()
    for view in page.matrices:
        prefix = f"Head {view.head} · " if page.summary.heads > 1 and view.head is not None else ""
        yield ("\n" + "#" * section + f" {prefix}{md(view.title)}: `{view.formula}` ({view.shape})\n\n").encode()
        yield from matrix_table(view, precision)
    if (c := page.comparison) is not None:
        lines = ["", "#" * section + " " + hand_rounded_title(c.decimals), ""]
        rows = [
            [md(label), vector(r, precision, whole=False), vector(e, exact_decimals(precision), whole=False), vector(r - e, exact_decimals(precision), whole=False)]
            for label, r, e in zip(c.labels, c.rounded, c.exact)
        ]
        lines += table(["", "hand-rounded", "exact", "difference"], rows)
        yield ("\n".join(lines) + "\n").encode()


def _run_header(s: Summary, top: int) -> list[str]:
    """The title line (as the top heading; without one, the sentence), the description, the settings and notes."""
    lines = heading(top, md(s.title)) if top else [md(" ".join(s.tokens)), ""]
    if s.description:
        lines += [md(s.description), ""]
    lines.append(md("; ".join(s.settings) + "."))
    if s.round_steps is not None:
        lines += ["", rounded_every_step(s.round_steps)]
    return lines


BLOCK_VALUES = 1 << 16  # numbers formatted at once: about 1 MB of text


def matrix_table(view: MatrixView, precision: int) -> Iterator[bytes]:
    """A view as GFM table lines in UTF-8, a block of rows at a time: labels in bold, numbers right-aligned, −∞ where masked."""
    import numpy as np

    from attncli.document import fixedtext

    header = [""] + [md(col) for col in view.cols] + [name for name, _ in view.extra]
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|:---|" + "---:|" * (len(header) - 1)]
    yield ("\n".join(lines) + "\n").encode()
    width = view.data.shape[1] + len(view.extra)
    step = max(1, BLOCK_VALUES // max(1, width))
    end = b" |\n" if width else b" |  |\n"
    for start in range(0, len(view.rows), step):
        block = view.data[start : start + step]  # (rows, cols), then the extra columns beside it
        if view.extra:
            block = np.column_stack([block, *(vec[start : start + step] for _, vec in view.extra)])
        numbers = fixedtext.rows(fixedtext.cells(block, precision, fixed, b" | "))
        labels = view.rows[start : start + step]
        yield b"".join([b"| **" + md(label).encode() + b"**" + row + end for label, row in zip(labels, numbers)])


def explain_markdown(page: ExplainArticle, *, precision: int, heading_level: int = 1, full: bool = False) -> str:
    """The article's tables (embeddings; pair, score, exponential; pair, weight; weighted values; output), then the steps.

    Long vectors are shortened as in the terminal (first four, last two, how many), unless `full`.
    """
    p = precision

    def vec(values: Any, *, whole: bool = True) -> str:
        return short_vector(values, p, whole=whole, full=full)

    word = md(page.token)
    top, h2 = _levels(heading_level)
    h3 = "#" * min(6, h2 + 1)
    lines = heading(top, f"Attention for “{word}”")
    for sentence in page.intro:
        lines += [md(sentence), ""]

    if page.inputs is not None:
        section, column, labels, X = page.inputs
        lines += ["#" * h2 + f" {section}", ""]
        lines += table(["Word", column], [[md(label), vec(X[i])] for i, label in enumerate(labels)],
                       align=["l", "l"])  # fmt: skip
        lines.append("")

    scaled = page.scaled
    lines += ["#" * h2 + " Scores and exponentials", ""]
    header = ["Pair", "Score"] + (["Scaled"] if scaled else []) + (["Biased"] if page.biased else []) + ["Exponential"]
    rows = []
    for key in page.keys:
        row = [f"{word} &amp; {md(key.label)}", "−∞ (masked)" if key.masked else smart(key.score, p)]
        row += [("−∞" if key.masked else smart(key.scaled, p))] if scaled else []
        row += [("−∞" if key.masked else smart(key.logit, p))] if page.biased else []
        rows.append(row + [smart(key.exp, p)])
    lines += table(header, rows)
    lines += ["", f"Sum of the exponentials: {fixed(page.exp_sum, p)}"]

    lines += ["", "#" * h2 + " Attention weights", ""]
    lines += table(["Pair", "Weight (α)"], [[f"{word} &amp; {md(k.label)}", fixed(k.weight, p)] for k in page.keys])

    lines += ["", "#" * h2 + " Weighted values", ""]
    rows = [[f"{word} &amp; {md(k.label)}", fixed(k.weight, p), vec(k.v), vec(k.weighted_v, whole=False)] for k in page.visible]
    lines += table(["Pair", "Weight (α)", "Value (V)", "Weighted value (α·V)"], rows, align=["l", "r", "l", "l"])

    lines += ["", "#" * h2 + " Output", "", f"Output({word}) = {vec(page.output, whole=False)}"]
    if page.exact_output is not None:
        difference = page.output - page.exact_output
        exact = exact_decimals(p)
        lines += ["", f"Exact arithmetic gives {short_vector(page.exact_output, exact, whole=False, full=full)} "
                      f"(difference {short_vector(difference, exact, whole=False, full=full)})."]

    lines += ["", "#" * h2 + " Step by step"]
    lines += steps_markdown(page.steps, h3)
    return "\n".join(lines) + "\n"


def steps_markdown(steps: Steps, h3: str) -> list[str]:
    """Each step: a heading `h3` with its formula, its arithmetic in a fenced block, its notes; every step begins with a blank line."""
    lines: list[str] = []
    for number, step in enumerate(steps.steps, 1):
        lines += ["", f"{h3} Step {number}: {md(step.title)} ({md(step.formula)})", ""]
        body = [escape.visible(line) for line in step_lines(step, steps.precision)]
        if body:
            fence = "`" * max(3, 1 + max((len(run) for run in re.findall("`+", "".join(body))), default=0))
            lines += [fence + "text", *body, fence]
        for note in step.notes:
            lines += ["", md(note)]
    return lines


def document_markdown(document: Document, *, level: int = 1) -> str:
    """GFM: the top heading at `level` (0 leaves it out, the sections then at 2), values as a list, a pipe table, paragraphs and notes as paragraphs."""
    out: list[str] = []
    for block in document.blocks:
        if isinstance(block, Heading):
            if block.level == 1 and level == 0:
                continue
            out += heading(min(6, max(level, 1) + block.level - 1), md(block.text))
        elif isinstance(block, Paragraph | Note):
            out += [md(block.text), ""]
        elif isinstance(block, Values) and block.record:  # a field per item, one of several lines a list of its own
            for name, values in fields(block):
                out += [f"- {md(name)}: {md(values[0])}"] if len(values) == 1 else [f"- {md(name)}:", *(f"  - {md(value)}" for value in values)]
            out += [""] * bool(block.pairs)
        elif isinstance(block, Values):
            if block.pairs:
                out += [f"- {md(name)} = {md(value)}" for name, value in block.pairs] + [""]
        elif isinstance(block, Steps):
            out += steps_markdown(block, "#" * min(6, max(level, 1) + 1))[1:] + [""]
        elif isinstance(block, Table):
            align = ["r" if right else "l" for right in block.numeric]
            out += table([md(cell) for cell in block.header], [[md(cell) for cell in row] for row in block.rows], align=align, blank="")
            out.append("")
        else:
            raise TypeError(f"Markdown has no drawing for {type(block).__name__}")
    return "\n".join(out).rstrip("\n") + "\n"


# -- the pages (attncli.document.pages) ------------------------------------------------------------


def run(page: RunPage, options: Options) -> Iterator[bytes]:
    return run_markdown(page.document(), precision=page.precision, heading_level=options.heading_level)


def explain(page: ExplainPage, options: Options) -> str:
    from attncli.document.notation import Writer

    return explain_markdown(page.article(Writer()), precision=page.precision, heading_level=options.heading_level, full=options.full)


def report(page: ReportPage, options: Options) -> str:
    return document_markdown(page.document(), level=options.heading_level)


def heads(page: HeadsPage, options: Options) -> str:
    """The map or a comparison for a post: its title, the notable heads with the calls that explain them, and the statistics as a
    table (the grid of thumbnails is a figure: SVG or HTML)."""
    from attncli.document.maps import SHORT
    from attncli.formats.headgrid import statistic

    stats = page.table()
    top, section = _levels(options.heading_level)
    lines = heading(top, md(page.grid().title)) + heading(section, md(stats.heading))
    # the call as text: a file named with a control character or a line break would put an ESC in the post or split the code span
    calls = [escape.visible(command) if command else "" for _, command in stats.readings]
    readings = [f"- {md(text)}" + (f" {code_span(call)}" if call else "") for (text, _), call in zip(stats.readings, calls)]
    lines += [*readings, ""] if readings else [md(stats.none), ""]
    lines += heading(section, "Statistics") + [md(stats.legend), ""]
    rows = [[statistic(value, page.precision, stats.general) for value in row] for row in stats.rows]  # attncli's numbers: nothing to escape
    lines += table([md(SHORT.get(column, column)) for column in stats.columns], rows, align=["r"] * len(stats.columns))
    return "\n".join(lines) + "\n"


def shade(page: ShadePage, options: Options) -> str:
    """The sentence shaded by one token's weights, as a post's table: a row per head (or layer) and their mean, a column per token."""
    shaded = page.shaded()
    top, section = _levels(options.heading_level)
    lines = heading(top, md(shaded.title))
    readings = [f"- {md(f'{row.name}: {text}')}" for row in shaded.rows for text in row.readings]
    if readings:
        lines += heading(section, "What the rows show") + readings + [""]
    query = shaded.tokens[shaded.query]
    quoted = md(f"'{query}'")  # quoted as the readings quote a token
    lines += [f"The weight {quoted} (position {shaded.query + 1}) gives each token; – marks a token it cannot see.", ""]
    rows = [[md(row.name), *(fixed(w, page.precision) if seen else "–" for w, seen in zip(row.weights, row.visible))] for row in shaded.rows]
    lines += table(["", *map(md, shaded.tokens)], rows)
    return "\n".join(lines) + "\n"
