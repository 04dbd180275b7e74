"""The built-in scenarios as a listing (`api.scenarios()`): a table of names and descriptions, and its JSON."""

from __future__ import annotations

from typing import Any

from attncli.document.blocks import Document, Paragraph, Table

SCENARIOS_SCHEMA = "attncli.scenarios/1"
COLUMNS = ("name", "description")


def scenarios_document(listed: list[tuple[str, str]]) -> Document:
    """One row per built-in scenario, then how to use one."""
    rows = [[name, description] for name, description in listed]
    return Document(
        "Built-in scenarios",
        [Table(COLUMNS, rows, (False, False), listing=True), Paragraph("Any of them is a scenario by its name: attn.load(NAME), attn.run(NAME) …")],
        tidy=Table(COLUMNS, rows, (False, False)),
    )


def scenarios_json(listed: list[tuple[str, str]]) -> dict[str, Any]:
    """The attncli.scenarios/1 JSON document."""
    return {"schema": SCENARIOS_SCHEMA, "scenarios": [{"name": name, "description": description} for name, description in listed]}
