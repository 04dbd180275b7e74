"""`attncli explain` in the terminal: the numbered steps of the hand calculation."""

from __future__ import annotations

from rich.console import RenderableType
from rich.padding import Padding
from rich.text import Text

from attncli import narration
from attncli.explain import Explanation
from attncli.numbers import smart


def explain_renderables(expl: Explanation, *, precision: int) -> list[RenderableType]:
    intro = narration.intro(expl)
    parts: list[RenderableType] = [Text(intro[0], style="bold")]
    parts += [Text(line, style="yellow" if "rounded" in line else "") for line in intro[1:]]
    for number, step in enumerate(narration.steps(expl, precision), 1):
        heading = Text(f"\nStep {number} · {step.title}", style="bold")
        heading.append(f"   {step.formula}", style="cyan")
        lines = ["  " + line for line in step.lines]
        if step.matrix is not None:
            name, matrix = step.matrix
            shown = narration.display_precision(expl, precision)
            cells = [[smart(float(x), shown) for x in row] for row in matrix]
            width = max(len(cell) for row in cells for cell in row)
            lines[1:1] = [f"  {name} ="] + ["    " + "  ".join(cell.rjust(width) for cell in row) for row in cells]
        parts.append(heading)
        if lines:
            parts.append(Text("\n".join(lines), no_wrap=True, overflow="ignore"))  # arithmetic: never wrapped
        parts += [Padding(Text(note, style="italic"), (0, 0, 0, 2), expand=False) for note in step.notes]
    return parts


