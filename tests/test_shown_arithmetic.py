"""What explain shows checks by hand: the RoPE step's angles and rotations, and the online softmax's story, follow from the numbers shown.

The sums get this check in tests/test_publish.py (`_checked_sums`); this is the same idea for the
lines of step "Rotating the query and the keys (RoPE)":

    pair 1 (1, 2): φ = 2 × 1 = 2, (0.595, 0.806) turns to (-0.980, 0.206)
    k′(like) = RoPE([-0.458, 0.137], 1) = [-0.362, -0.311]

The position must be the word's own (counted from 0), ω_i must be θ^(−2i/d_k) for the θ the
step names, φ must be position × ω, and turning the shown pair by the shown φ (by the key's
position, for a key) must give the shown result, to the rounding of the shown decimals.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli.core import engine, explain
from attncli.document import blocks
from attncli.document.numbers import decimals
from attncli.sources.yaml_scenario import load
from attncli.walkthroughs import narration
from tests.strategies import sentences

_NUMBER = r"-?\d+(?:\.\d+)?"
_PAIR = re.compile(
    rf"pair (\d+) \((\d+), (\d+)\): φ = ({_NUMBER}) × ({_NUMBER}) [=≈] ({_NUMBER}), "
    rf"\(({_NUMBER}), ({_NUMBER})\) turns to \(({_NUMBER}), ({_NUMBER})\)$"
)
_KEY = re.compile(r"k′\((.*)\) = RoPE\(\[(.*)\], (\d+)\) = \[(.*)\]$")
_THETA = re.compile(r"RoPE, θ = ([0-9.e+]+),")
_QUERY_AT = re.compile(r"the query at position (\d+) \(counted from 0\)")


def _vector(text: str) -> list[float]:
    return [float(x) for x in text.replace("−", "-").split(", ")]


def _turned(a: float, b: float, angle: float) -> tuple[float, float]:
    return a * math.cos(angle) - b * math.sin(angle), b * math.cos(angle) + a * math.sin(angle)


def checked_rotation(expl: explain.Explanation, p: int) -> int:
    """Checks the RoPE step of `expl` at `p` decimals against what it shows; returns how many lines it checked."""
    step = next(s for s in narration.steps(expl, p) if s.title.startswith("Rotating the query"))
    lines = blocks.step_lines(step, p)
    h = 0.5 * 10.0**-p  # half a unit in the last shown decimal
    h_omega = 0.5 * 10.0 ** -(p + 2)  # ω is shown with two more decimals
    position = expl.position - 1  # RoPE counts from 0; the explained word's position is counted from 1
    theta = _THETA.search(step.notes[0])
    stated = _QUERY_AT.search(step.notes[0])
    assert stated and int(stated.group(1)) == position, step.notes[0]
    d_k = len(expl.q)
    omegas: dict[tuple[int, int], float] = {}
    checked = 0
    for line in lines:
        if match := _PAIR.match(line):
            i, a, b = (int(match.group(n)) for n in (1, 2, 3))
            shown_position, omega, phi, x, y, x2, y2 = (float(match.group(n)) for n in range(4, 11))
            assert shown_position == position, line
            if theta:  # the plain formula (a checkpoint's scaled frequencies are given, not computed)
                assert abs(omega - float(theta.group(1)) ** (-2 * (i - 1) / d_k)) <= h_omega * 1.001, line
            assert abs(phi - shown_position * omega) <= shown_position * h_omega + h * 1.001, line
            rx, ry = _turned(x, y, phi)
            tolerance = h * (3 + abs(x) + abs(y)) + 1e-12
            assert abs(rx - x2) <= tolerance and abs(ry - y2) <= tolerance, (line, rx, ry)
            omegas[(a - 1, b - 1)] = omega
            checked += 1
        elif (match := _KEY.match(line)) and "…" not in line:
            k, j, k2 = _vector(match.group(2)), int(match.group(3)), _vector(match.group(4))
            key = next(key for key in expl.keys if key.label == match.group(1) or key.token == match.group(1))
            assert j == key.position - 1, line
            for (a, b), omega in omegas.items():
                rx, ry = _turned(k[a], k[b], j * omega)
                tolerance = h * 3 + (abs(k[a]) + abs(k[b])) * j * h_omega + 1e-12
                assert abs(rx - k2[a]) <= tolerance and abs(ry - k2[b]) <= tolerance, (line, rx, ry)
            checked += 1
    assert omegas, lines  # every pair line was read
    return checked


def test_llama_style_rotations_add_up_for_every_word_and_head():
    result = engine.run(load("llama-style"))
    for position in range(1, result.scenario.L + 1):
        for head in range(1, result.scenario.heads + 1):
            expl = explain.explain(result, position=position, head=head)
            assert checked_rotation(expl, 3) == 1 + result.scenario.L  # one pair (d_k = 2), every key


def test_checkpoint_rotations_add_up():
    """The Llama fixture: llama3-scaled frequencies given by the checkpoint (ω not recomputed), d_k = 8: four pairs."""
    from attncli.sources.checkpoints.scenario import load_scenario

    scenario = load_scenario(Path(__file__).parent / "checkpoints" / "llama", layer=2, sentence="The cat sat on the mat")
    result = engine.run(scenario)
    for head in (1, scenario.heads):
        checked = checked_rotation(explain.explain(result, position=scenario.L, head=head), 4)
        assert checked == scenario.d_k // 2 + scenario.L  # four pairs, seven keys


@settings(max_examples=30, deadline=None)
@given(
    words=sentences(max_words=12),
    heads=st.sampled_from([1, 2]),
    d_k=st.sampled_from([2, 4, 6]),
    theta=st.sampled_from([10000, 500, 10]),
    style=st.sampled_from(["half", "interleaved"]),
    seed=st.integers(0, 10_000),
    precision=st.integers(2, 5),
    data=st.data(),
)
def test_random_rotations_add_up(words, heads, d_k, theta, style, seed, precision, data):
    """On random RoPE scenarios (θ, pairing, d_k, position), the shown angles and rotations follow from the shown numbers."""
    from attncli.sources.generator import new_scenario

    text = new_scenario(" ".join(words), d_model=heads * d_k, heads=heads, rope=True, seed=seed)
    text = text.replace("rope: true", f"rope: {{theta: {theta}, style: {style}}}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.yaml"
        path.write_text(text, encoding="utf-8")
        scenario = load(str(path))
    result = engine.run(scenario)
    position = data.draw(st.integers(1, scenario.L), label="position")
    head = data.draw(st.integers(1, heads), label="head")
    p = decimals(precision, scenario.precision, None)
    assert checked_rotation(explain.explain(result, position=position, head=head), p) >= d_k // 2


@pytest.mark.parametrize("wrong", ["position", "angle", "turn"])
def test_the_check_fails_on_a_wrong_line(wrong, monkeypatch):
    """The check itself can fail: a line with the wrong position, angle or rotated pair is refused."""
    real = blocks.step_lines

    def planted(step, p):
        lines = real(step, p)
        if not step.title.startswith("Rotating the query"):
            return lines
        first = lines[0]
        if wrong == "position":
            first = first.replace("φ = 2 ×", "φ = 3 ×")
        elif wrong == "angle":
            first = first.replace("= 2, (", "= 2.5, (")
        else:
            first = first.replace("(-0.980, 0.206)", "(-0.980, -0.206)")
        assert first != lines[0]
        return [first, *lines[1:]]

    monkeypatch.setattr(blocks, "step_lines", planted)
    expl = explain.explain(engine.run(load("llama-style")), position=3, head=3)
    with pytest.raises(AssertionError):
        checked_rotation(expl, 3)


# -- the one rule for = and ≈ ------------------------------------------------------------------------------


def test_relation_says_equals_only_within_half_a_unit_of_the_shown_result():
    """0.8459 shows as 0.846 at 3 decimals: a worked-out 0.8455 rounds to it (a tie counts), 0.84549 and 0.8454 do not."""
    from decimal import Decimal

    from attncli.document.numbers import relation

    assert relation(Decimal("0.8455"), 0.8459, 3) == "="
    assert relation(Decimal("0.8465"), 0.8459, 3) == "="
    assert relation(Decimal("0.84549"), 0.8459, 3) == "≈"
    assert relation(Decimal("0.8454"), 0.8459, 3, approx=r"\approx") == r"\approx"
    assert relation([Decimal("1.000"), Decimal("2.001")], np.array([1.0, 2.0]), 3) == "≈"  # one cell off is enough
    assert relation([Decimal(7), Decimal("1.000")], [-math.inf, 1.0], 3) == "="  # a masked −∞ is not checked


@settings(max_examples=300, deadline=None)
@given(result=st.floats(min_value=-1000, max_value=1000), p=st.integers(0, 5), hundredths=st.integers(-80, 80))
def test_relation_is_equals_exactly_when_rounding_the_worked_out_value_gives_the_shown_one(result, p, hundredths):
    """Against a reader with a pencil: "=" when rounding the worked-out value (either way at a tie) gives the number shown.
    The worked-out value lies within 0.8 of a unit of the shown result, so ties and near misses come up often."""
    from decimal import ROUND_HALF_DOWN, ROUND_HALF_UP, Decimal

    from attncli.document.numbers import fixed, relation

    unit = Decimal(1).scaleb(-p)
    reader = Decimal(fixed(result, p)) + hundredths * unit / 100
    pencil = {reader.quantize(unit, rounding=ROUND_HALF_UP), reader.quantize(unit, rounding=ROUND_HALF_DOWN)}
    assert (relation(reader, result, p) == "=") == (Decimal(fixed(result, p)) in pencil)


# -- the online softmax's story --------------------------------------------------------------------------

_LITERAL = re.compile(rf"^(?:{_NUMBER}|\[{_NUMBER}(?:, {_NUMBER})*\])$")
_SCIENTIFIC = re.compile(r"\d(?:\.\d+)?e-?\d+")


def _value(expression: str):
    """The value of a shown expression of numbers (+, −, ×, /, e^(…), max(…), [vectors]); None when it names a symbol."""
    text = expression.replace("−", "-").replace("×", "*").replace("e^(", "exp(").strip().rstrip(".")
    if "∞" in text or re.search(r"[^\W\d_]", _SCIENTIFIC.sub("0", text.replace("exp(", "(").replace("max(", "("))):
        return None
    text = re.sub(r"\[([^\]]*)\]", r"vector([\1])", text)
    return eval(text, {"__builtins__": {}}, {"exp": math.exp, "max": max, "vector": np.array})  # noqa: S307 (digits and operators only)


def checked_relations(lines: list[str], p: int, *, unit: int | None = None) -> int:
    """Every `expression = shown result` whose expression is all numbers holds at p decimals (|difference| ≤ half a unit);
    `≈` may stand anywhere. `unit`: the decimals a result is rounded to, if fewer than the p shown. Returns how many `=` it checked."""
    half = 0.5 * 10.0 ** -(p if unit is None else unit) * (1 + 1e-9) + 1e-12
    checked = 0
    for line in lines:
        body = line.split(": ", 1)[1] if re.match(r"^[^=≈]*: ", line) else line
        parts = re.split(r" (=|≈) ", body)
        for k in range(0, len(parts) - 2, 2):
            left, relation, right = parts[k], parts[k + 1], parts[k + 2].rstrip(".")
            if relation != "=" or not _LITERAL.match(right.replace("−", "-")):
                continue
            value = _value(left)
            if value is None:
                continue
            shown_result = _value(right)
            assert np.shape(value) == np.shape(shown_result), line
            assert np.all(np.abs(np.asarray(value) - np.asarray(shown_result)) <= half), (line, value)
            checked += 1
    return checked


def online_lines(expl: explain.Explanation, p: int, *, notes: bool = False) -> list[str]:
    """The lines of the online softmax's steps (l, rescale, o, o / l, each e^…), and with `notes` their notes."""
    steps = narration.steps(expl, p)
    online = [s for s in steps if s.title.startswith(("Online softmax", "Block ", "The online result"))]
    assert online, [s.title for s in steps]
    return [line for s in online for line in [*blocks.step_lines(s, p), *(s.notes if notes else [])]]


def test_cat_online_story_checks_by_hand():
    """The seed example in blocks of 2: the sums, rescales and the running output add up, and o / l says ≈ where it must."""
    expl = explain.explain(engine.run(load("cat")), position=2, head=1, block_size=2)
    lines = online_lines(expl, 3)
    assert checked_relations(lines, 3) >= 8
    assert "output = o / l = [4.368, 1.632] / 4.104 = [1.064, 0.398]" in lines


def test_online_exponentials_add_up_or_say_approximately():
    """w2's score and the running maximum both show as 0.00 at 2 decimals, but e^(s − m) shows 0.99: written with '≈'."""
    from attncli.sources.generator import new_scenario

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.yaml"
        path.write_text(new_scenario("w0 w1 w2", d_model=1, seed=0), encoding="utf-8")
        scenario = load(str(path))
    expl = explain.explain(engine.run(scenario), position=1, head=1, block_size=1)
    lines = online_lines(expl, 2)
    assert checked_relations(lines, 2) >= 8
    assert "w2: e^(0.00 − 0.00) ≈ 0.99" in lines


def test_online_weighted_values_note_adds_up_or_says_approximately():
    """At 1 decimal: 'Σ e·v = 0.9 × [0.7] ≈ [0.7]', where 0.9 × 0.7 = 0.63 shows as 0.6."""
    from attncli.sources.generator import new_scenario

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.yaml"
        path.write_text(new_scenario("w0 w1", d_model=1, seed=1), encoding="utf-8")
        scenario = load(str(path))
    expl = explain.explain(engine.run(scenario), position=1, head=1, block_size=1)
    lines = online_lines(expl, 1, notes=True)
    assert checked_relations(lines, 1) >= 8
    assert "This block's weighted values: Σ e·v = 0.9 × [0.7] ≈ [0.7]." in lines


@settings(max_examples=40, deadline=None)
@given(
    words=sentences(max_words=9),
    d_model=st.sampled_from([1, 2, 3, 4]),
    seed=st.integers(0, 10_000),
    precision=st.integers(1, 4),
    block_size=st.integers(1, 4),
    round_steps=st.sampled_from([None, 2, 3]),
    causal=st.booleans(),
    data=st.data(),
)
def test_online_story_adds_up_or_says_approximately(words, d_model, seed, precision, block_size, round_steps, causal, data):
    """On random scenarios, every `=` of the online softmax's story (l, rescale, o, o / l, each e^…) holds at the shown decimals."""
    from attncli.errors import AttnError
    from attncli.sources.generator import new_scenario

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.yaml"
        path.write_text(new_scenario(" ".join(words), d_model=d_model, causal=causal, seed=seed), encoding="utf-8")
        scenario = load(str(path))
    try:
        result = engine.run(scenario, round_steps=round_steps)
    except AttnError:  # a hand-rounded row whose exponentials all round to 0: refused, rightly
        return
    position = data.draw(st.integers(1, scenario.L), label="position")
    p = decimals(precision, scenario.precision, round_steps)
    expl = explain.explain(result, position=position, head=1, block_size=block_size)
    # by hand every result is rounded to round_steps decimals, which may be fewer than those shown
    checked_relations(online_lines(expl, p), p, unit=p if round_steps is None else min(p, round_steps))


def test_the_approximation_note_names_a_product_as_its_line_writes_it():
    """Under RoPE the dot products are q′·k′: the ≈ note said q′·k(on), dropping the key's prime."""
    import attncli.api as attn

    text = " ".join(attn.explain("tests/scenarios/cache-rope.yaml", "on", head=2).render("table").split())
    assert "q′·k′(on) = (0.160 × 0.376) + (0.129 × 0.615) ≈ 0.140" in text
    assert "(q′·k′(on) is 0.14 to ten of them)" in text and "q′·k(" not in text
