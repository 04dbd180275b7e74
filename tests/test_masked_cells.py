"""HTML says what the terminal says of a masked cell: hidden by the mask, in every stage's table, shaded or not."""

import numpy as np
import pytest


@pytest.mark.parametrize("fragment", [False, True])
def test_html_marks_exactly_the_masked_cells_as_the_terminal_dims_them(cli, fragment):
    """Every stage's masked cells (−∞ scores, 0 exponentials and weights) are marked hidden in HTML, shaded or not, and no
    other cell is: a masked cell reads as the mask's, not as a computed −∞ or 0, as in the terminal (dim, or the masked grey)."""
    from attncli.core import engine as core_engine
    from attncli.sources.yaml_scenario import load
    from tests.renderers import html_elements

    result = core_engine.run(load("journey-causal"))
    hidden = np.isneginf(result.heads[0].masked)  # (L, L): the keys each query cannot see
    args = ["run", "journey-causal", "--stages", "masked,exp,weights", "--format", "html", *(["--fragment"] if fragment else [])]
    elements = html_elements(cli(*args).stdout)
    tables = [i for i, e in enumerate(elements) if e.tag == "table"]
    assert len(tables) == 3
    for start, end in zip(tables, [*tables[1:], len(elements)]):
        cells = [e for e in elements[start:end] if e.tag == "td" and "attn-corner" not in e.attrs.get("class", "")]
        cells = [e for e in cells if "attn-extra" not in e.attrs.get("class", "")]  # Σ beside E
        marked = ["attn-hidden" in (c := e.attrs.get("class") or "") or "attn-masked" in c or "italic" in e.attrs.get("style", "")
                  for e in cells]  # fmt: skip
        assert np.array(marked).reshape(hidden.shape).tolist() == hidden.tolist()
