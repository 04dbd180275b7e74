"""`attncli explain` in the terminal: the numbered steps of the hand calculation."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from attncli import narration
from attncli.explain import Explanation
from attncli.numbers import smart


def explain_renderables(expl: Explanation, *, precision: int) -> list[RenderableType]:
    intro = narration.intro(expl)
    parts: list[RenderableType] = [Text(intro[0], style="bold")]
    parts += [Text(line, style="yellow" if "rounded" in line else "") for line in intro[1:]]
    for number, step in enumerate(narration.steps(expl, precision), 1):
        parts.append(Text(""))
        heading = Text(f"Step {number} · {step.title}", style="bold")
        heading.append(f"   {step.formula}", style="cyan")
        parts.append(heading)
        body = [Text(line) for line in step.lines]
        if step.matrix is not None:
            body.insert(1, _small_matrix(*step.matrix, precision=narration.display_precision(expl, precision)))
        body += [Text(note, style="italic") for note in step.notes]
        parts += [Padding(part, (0, 0, 0, 2), expand=False) for part in body]
    return parts


def _small_matrix(name: str, matrix, *, precision: int) -> Group:
    table = Table(show_header=False, box=None, padding=(0, 0, 0, 2))
    for _ in range(matrix.shape[1]):
        table.add_column(justify="right")
    for row in matrix:
        table.add_row(*(smart(float(x), precision) for x in row))
    return Group(Text(f"{name} ="), table)
