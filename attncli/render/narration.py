"""`attncli explain` in the terminal: the numbered steps of the hand calculation."""

from __future__ import annotations

from rich.console import RenderableType
from rich.padding import Padding
from rich.text import Text

from attncli import narration
from attncli.escape import visible
from attncli.explain import Explanation


def explain_renderables(expl: Explanation, *, precision: int, full: bool = False) -> list[RenderableType]:
    intro = narration.intro(expl)
    parts: list[RenderableType] = [Text(visible(intro[0]), style="bold")]
    parts += [Text(visible(line), style="yellow" if "rounded" in line else "") for line in intro[1:]]
    for number, step in enumerate(narration.steps(expl, precision, full=full), 1):
        heading = Text(f"\nStep {number} · {step.title}", style="bold")
        heading.append(f"   {step.formula}", style="cyan")
        parts.append(heading)
        lines = ["  " + line for line in narration.step_lines(step, precision)]
        if lines:
            parts.append(Text("\n".join(map(visible, lines)), no_wrap=True, overflow="ignore"))  # arithmetic: never wrapped
        parts += [Padding(Text(visible(note), style="italic"), (0, 0, 0, 2), expand=False) for note in step.notes]
    return parts
