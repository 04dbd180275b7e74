"""A variant owns itself: one defined only here, added to the registry, works end to end without touching attncli.

`Temperature` divides the scaled scores by T (stage "scaled", like soft-capping). Added to REGISTRY (with
monkeypatch here, and in a child process for the command line, as its one line in core/variants/__init__.py
would), its YAML key is read and checked, it is a row of the generated schema, `run` shows its stage-table
row and writes its JSON, and `explain` narrates its step.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from attncli.core import engine, variants
from attncli.core.variants import Narrated, Say, StageRow
from attncli.core.variants.keys import Read, Schema, Sizes
from attncli.errors import AttnError

ROOT = Path(__file__).parent.parent
DOC = "tokens: [a, b, c]\nembeddings: [[2, 0], [0, 2], [2, 2]]\ntemperature: 2\n"


@dataclass(frozen=True, eq=False)
class Temperature:
    """Every scaled score s becomes s / T: T above 1 flattens the weights, below 1 sharpens them."""

    key: ClassVar[str] = "temperature"
    stage: ClassVar[str] = "scaled"
    json_key: ClassVar[str] = "temperature"
    json_slot: ClassVar[int] = 12
    json_absent: ClassVar[None] = None
    schema: ClassVar[Schema] = {"type": "number", "exclusiveMinimum": 0, "description": "A temperature T: each scaled score s becomes s / T."}
    rows: ClassVar[tuple[StageRow, ...]]

    T: float

    def apply(self, scaled: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """(L_q, L_k) scaled / T."""
        return np.divide(scaled, self.T, out=out)

    def describe(self) -> str:
        return f"temperature: the scaled scores divided by T = {self.T:g}"

    def as_json(self) -> dict[str, object]:
        return {"T": self.T}

    def narrate(self, expl: Any, say: Say) -> Narrated:
        w, p = say.w, say.p
        tempered = expl.head.reshaped[self.key][expl.row]  # (L_k,)
        lines: list[tuple[str, ...]] = []
        for key in say.shown_keys():
            value = float(tempered[key.position - 1])
            relation = say.relation(say.shown(key.scaled) / say.shown(self.T), value, name=f"the tempered score of {key.label}")
            lines.append((w.label(key.label), f"{w.frac(w.num(key.scaled, p), w.num(self.T, p))} {relation} {w.num(value, p)}", ":"))
        return Narrated("Dividing by the temperature", f"tempered = scaled / T, T = {self.T:g}", lines, ["T above 1 flattens the weights."])

    @classmethod
    def from_yaml(cls, read: Read, sizes: Sizes) -> Temperature:
        expected = POSITIVE
        if read.form != "plain" or read.kind == "bool":
            raise read.error(read.found(), expected)
        T = read.number()
        if not T > 0:
            raise read.error(f"found {read.text}", expected)
        return cls(T)


Temperature.rows = (
    StageRow("temperature", "temperature", "Tempered scores", lambda n, s, h: f"{n('S')} / T", lambda h: h.reshaped.get("temperature"),
             "queries", "keys", after="scaled", main=True),
)  # fmt: skip


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setattr(variants, "REGISTRY", (*variants.REGISTRY, Temperature))


def attncli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command line in a child process whose REGISTRY has Temperature added before anything reads it."""
    (tmp_path / "toy.yaml").write_text(DOC, encoding="utf-8")
    (tmp_path / "bad.yaml").write_text(DOC.replace("temperature: 2", "temperature: hot"), encoding="utf-8")
    code = (
        "import sys\nfrom attncli.core import variants\nfrom tests.test_own_variant import Temperature\n"
        "variants.REGISTRY = (*variants.REGISTRY, Temperature)\nfrom attncli.__main__ import main\n"
        f"sys.argv = ['attncli', *{list(args)!r}]\nmain()\n"
    )
    env = {"PYTHONPATH": str(ROOT), "TERM": "dumb", "NO_COLOR": "1", "COLUMNS": "200", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)


def test_its_key_is_read_and_the_engine_divides_by_it(registered):
    """temperature: 2 is read into the scenario, and the weights are the softmax of the scaled scores over 2."""
    from attncli.sources.yaml_scenario import from_text

    s = from_text(DOC)
    assert s.variant(Temperature).T == 2.0
    head = engine.run(s).head(1)
    expected = np.exp(head.scaled / 2.0) / np.exp(head.scaled / 2.0).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(head.weights, expected, rtol=1e-14)
    assert head.weights.tobytes() != engine.run(s.without(Temperature)).head(1).weights.tobytes()


POSITIVE = "a positive number T, such as 2"


@pytest.mark.parametrize(("written", "found", "expected"), [("hot", "found 'hot'", "a number"), ("-1", "found -1", POSITIVE), ("[1, 2]", "found a list", POSITIVE)])
def test_a_bad_value_is_one_error_naming_file_line_and_key(registered, written, found, expected):
    """The reader's own checks (a number) and the variant's (positive, a scalar) each give one error at temperature's line."""
    from attncli.sources.yaml_scenario import from_text

    with pytest.raises(AttnError) as caught:
        from_text(DOC.replace("temperature: 2", f"temperature: {written}"), path="toy.yaml")
    error = caught.value
    assert (error.line, error.key, error.expected) == (3, "temperature", expected)
    assert str(error.args[0]).startswith(found)


def test_it_is_a_row_of_the_generated_schema(registered):
    """After the other variants, before the keys of a real model; the reader's key list follows the schema."""
    from attncli.sources import fields

    schema = fields.json_schema()
    assert schema["properties"]["temperature"] == Temperature.schema
    names = list(schema["properties"])
    assert names.index("query_temperature") + 1 == names.index("temperature") == names.index("model") - 1  # the query temperature: the last one before it
    assert {"required": ["temperature"]} in schema["dependentSchemas"]["model"]["not"]["anyOf"]
    assert fields.keys() == tuple(names)


def test_run_shows_its_row_and_writes_its_json_and_explain_narrates_it(tmp_path):
    table = attncli(tmp_path, "run", "toy.yaml", "--stages", "scaled,temperature,weights")
    assert table.returncode == 0, table.stderr
    assert "Tempered scores" in table.stdout and "temperature: the scaled scores divided by T = 2" in table.stdout
    doc = json.loads(attncli(tmp_path, "run", "toy.yaml", "--format", "json").stdout)
    assert doc["scenario"]["temperature"] == {"T": 2.0}
    head = doc["heads"][0]
    np.testing.assert_allclose(np.array(head["temperature"]), np.array(head["scaled"]) / 2.0, rtol=1e-15)
    told = attncli(tmp_path, "explain", "toy.yaml", "--word", "b")
    assert told.returncode == 0, told.stderr
    assert "Dividing by the temperature" in told.stdout and "b: 2.8284 / 2 = 1.4142" in told.stdout


def test_the_command_line_prints_one_line_for_a_bad_value(tmp_path):
    done = attncli(tmp_path, "run", "bad.yaml")
    assert done.returncode != 0 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "bad.yaml" in lines[0] and ":3" in lines[0] and "temperature" in lines[0], done.stderr
    assert "a number" in lines[0]
