"""The worked example as numbered steps, like a hand calculation, written once for every notation.

`steps(expl, precision, writer)` builds the steps with a `Writer` (Unicode for the terminal
and Markdown) or a `TexWriter` (LaTeX): the same function says the same thing in both. The steps
written here are the textbook's; each variant of the registry (QK-norm, RoPE, soft-capping, a bias and
ALiBi, the mask, a learned sink, …) narrates its own (`narrate`, core.variants.shown), asked for by its
stage at its place among them (`_variant_steps`).

Every `=` between shown numbers holds at the shown precision: a result that the shown terms do
not give exactly (they are rounded) is written with `≈`, and one note says why. Long sums show
their largest terms and add up the rest in one number; `full` shows every term.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import NamedTuple

import numpy as np

from attncli.core import variants
from attncli.core.explain import Explanation, KeyStep
from attncli.core.scenario import Scenario
from attncli.document import numbers, stages
from attncli.document.blocks import Line, Step
from attncli.document.notation import Notation, Writer
from attncli.document.numbers import exact_decimals, shown
from attncli.errors import option
from attncli.walkthroughs.lengths import BIG_MATRIX, LONG_KEYS, LONG_SUM, LONG_TERMS

UNROUNDED_DIGITS = 10  # the unrounded number quoted beside ≈: enough to see the rounding, no digit that float64's round-off could change


def quoted(text: str) -> str:
    """'text' in prose: quoted as written (not repr(), whose backslashes the escaping would double)."""
    return f"'{text}'"


def _keyed(w: Writer, key: KeyStep, rhs: str) -> Line:
    """A line about one key: `cat: e^1 = 2.718`."""
    return Line(w.label(key.label), rhs, ":")


def intro(expl: Explanation) -> list[str]:
    """Sentences before the steps: which word, where, which head, which rounding."""
    s = expl.scenario
    keys = "" if not s.cross else " → " + " ".join(s.key_tokens)
    where = f" in {s.name}" if s.origin is not None else ""  # a model's layer; a scenario's name is no text to quote
    lines = [f"Explaining {quoted(expl.token)}, position {expl.sequence_position} of {s.cached + s.L}{where}: " + " ".join(s.tokens) + keys]
    if expl.other_positions:
        others = [str(s.cached + row) for row in expl.other_positions]
        where = ", ".join(others)
        which = others[0] if len(others) == 1 else ", ".join(others[:-1]) + " or " + others[-1]  # the positions --position takes here
        lines.append(f"{quoted(expl.token)} also occurs at position{'s' * (len(others) > 1)} {where}; "
                     f"pick {'it' if len(others) == 1 else 'one'} with {option('position')} {which}.")  # fmt: skip
    if s.cross and s.origin is not None and s.origin.attention is None:  # a model of one stack: a layer reusing another's keys (KV sharing)
        lines.append(f"KV sharing: this layer makes only its query; the {s.L_k} keys and values are an earlier layer's, projected from "
                     "that layer's input (Z) by its W_K and W_V.")  # fmt: skip
    elif s.cross:
        lines.append(f"Cross-attention: the query comes from this sentence, the {s.L_k} keys and values from the context.")
    if makers := variants.active(s, "heads") or variants.active(s, "scores"):  # a variant that makes each head's q, k, v (MLA), or
        lines += makers[0].introduce(expl)  # gives its scores, says which of its numbers the head uses
    elif s.heads > 1:
        h, d_k, d_v = expl.head.head, s.d_k, s.d_v
        q, k, v = ("Q", "K", "V") if s.direct else ("W_Q", "W_K", "W_V")  # given directly, there are no weights
        given = "the given " if s.direct else ""
        lines.append(f"Head {h} of {s.heads}: it uses columns {(h - 1) * d_k + 1}–{h * d_k} of {given}{q}" + (
            f" and {k} and {(h - 1) * d_v + 1}–{h * d_v} of {v} (d_k = {d_k}, d_v = {d_v})." if s.heads == s.G else f" (d_k = {d_k})."))
    if s.heads != s.G and not variants.active(s, "scores"):  # given scores: no keys, and their `introduce` says the values' columns
        g = expl.head.kv_head
        share = s.heads // s.G
        lines.append(
            f"Grouped-query attention: head {expl.head.head} reads key/value head {g} of {s.G}, which {share} query heads share "
            f"(heads {(g - 1) * share + 1}–{g * share}); its keys and values are columns {(g - 1) * s.d_k + 1}–{g * s.d_k} of "
            f"{'the given K' if s.direct else 'W_K'} and {(g - 1) * s.d_v + 1}–{g * s.d_v} of {'V' if s.direct else 'W_V'}."
        )
    if kernels := variants.active(s, "kernel"):  # attention without softmax (linear attention, retention): say so before any step
        lines.append(kernels[0].describe().capitalize() + ".")
    elif s.scale.mode == "none":
        lines.append("This scenario does not scale the scores (scale: none): they go into the softmax as they are.")
    if expl.result.round_steps is not None:
        lines.append(
            f"Every intermediate number is rounded to {expl.result.round_steps} decimals before the next step "
            "uses it, as in a hand calculation; the exact result is given at the end."
        )
    return lines


def steps(expl: Explanation, p: int, w: Writer = Writer(), *, full: bool = False) -> list[Step]:
    """The steps at `p` decimals (decided once, by `numbers.decimals`), written by `w`; `full`: every term, key and matrix."""
    s = expl.scenario
    check = Arithmetic(w, p)
    say = Say(expl, w, p, check, full)
    given_scores = _variant_steps(expl, "scores", say)  # the scores given directly: their row replaces the query and the dot products
    out = _variant_steps(expl, "heads", say) or ([] if given_scores else [_query(expl, p, w, check, full)])  # MLA: its query, latent, keys and values
    if expl.e is not None and any(key.e is not None for key in expl.keys) and expl.head.W_K is not None:
        out.append(_keys_values(expl, p, w, check, full))
    out += _variant_steps(expl, "cache", say)  # an int8 KV cache: its codes times their scales, before any score uses them
    out += _variant_steps(expl, "norm", say)
    out += _variant_steps(expl, "value", say)  # a value norm (v_norm): each value row divided by its rms
    out += _variant_steps(expl, "qk", say)
    out += _variant_steps(expl, "rotated", say)  # after RoPE: QK-norm there
    without_softmax = _variant_steps(expl, "kernel", say)  # linear attention, retention: their step replaces the softmax's
    if not without_softmax:
        out += given_scores or [_dot_products(expl, p, w, check, full)]
        if s.scale.mode != "none":
            out.append(_scaling(expl, p, w, check, full))
        out += _variant_steps(expl, "scaled", say)
        out += _variant_steps(expl, "logits", say)
    out += _variant_steps(expl, "visibility", say)
    if without_softmax:
        out += without_softmax
    else:
        out += [_exponentials(expl, p, w, check, full), _sum(expl, p, w, check, full), _weights(expl, p, w, check, full)]
        out += _variant_steps(expl, "denominator", say)
    out += [_weighted(expl, p, w, check, full), _output(expl, p, w, check, full)]
    out += _variant_steps(expl, "output", say)  # a gate on the head's output
    out += _after_output(expl, say)  # MLA: the same row the absorbed way, and the cache it needs
    if s.W_O is not None or s.b_O is not None:
        out.append(_projection(expl, p, w, check, full))
    if expl.online is not None:
        from attncli.walkthroughs.online_steps import online_steps  # only with --block-size: core.online stays unimported

        out += online_steps(expl, p, w)
    if check.first is not None:  # one note, on the first step that needed ≈
        index = next(i for i, step in enumerate(out) if any(w.approx in line.rhs for line in step.lines))
        out[index] = out[index]._replace(notes=[*out[index].notes, check.note()])
    return out


# -- the variants' own steps (core.variants.shown) --------------------------------------------------------


class Say:
    """What a variant's `narrate` writes with (core.variants.shown.Say): the writer, the =/≈ rule, shortened vectors and sums."""

    long = LONG_SUM

    def __init__(self, expl: Explanation, w: Writer, p: int, check: Arithmetic, full: bool) -> None:
        self.expl, self.w, self.p, self.check, self.full = expl, w, p, check, full
        self.n = Notation(expl.head.head if expl.scenario.heads > 1 else None, w.tex)

    def shown(self, x: float, p: int | None = None) -> Decimal:
        return shown(x, self.p if p is None else p)

    def number(self, x: float, p: int | None = None) -> str:
        return numbers.fixed(x, self.p if p is None else p)

    def relation(self, reader: Decimal | Sequence[Decimal], result: float | np.ndarray, *, name: str) -> str:
        return self.check.relation(reader, result, name=name)

    def vec(self, values: np.ndarray) -> str:
        return _vec(self.w, values, self.p, self.full)

    def terms(self, texts: list[str]) -> str:
        if self.full or len(texts) <= LONG_SUM:
            return " + ".join(texts)
        return " + ".join([*texts[:LONG_TERMS], self.w.ellipsis, *texts[-2:]])

    def shown_keys(self) -> list[KeyStep]:
        return _keys_shown(self.expl, self.full)


def _variant_steps(expl: Explanation, stage: str, say: Say) -> list[Step]:
    """The steps the scenario's variants at `stage` narrate themselves, in registry order.

    A variant that says it is not worth showing (`shows()`: a mask that hides nothing) has no step; variants whose classes share
    one `narrate` (a given bias and ALiBi) share one step, told once for all of them.
    """
    out: list[Step] = []
    told_by = set()
    if any(stage in getattr(variant, "tells", ()) for variant in variants.active(expl.scenario)):
        return out  # another variant narrates this stage's step itself (MLA turns its decoupled part: RoPE's step)
    for variant in variants.active(expl.scenario, stage):
        narrate = getattr(type(variant), "narrate", None)
        if narrate is None or narrate in told_by or (hasattr(variant, "shows") and not variant.shows()):
            continue
        told_by.add(narrate)
        told = variant.narrate(expl, say)
        out += [_step(one) for one in (told if isinstance(told, list) else [told])]  # a variant may tell several steps (MLA)
    return out


def _after_output(expl: Explanation, say: Say) -> list[Step]:
    """The steps variants tell after the output (`narrate_output`: MLA's absorbed form), in registry order."""
    told = [variant.narrate_output(expl, say) for variant in variants.active(expl.scenario) if hasattr(variant, "narrate_output")]
    return [_step(one) for one in told if one is not None]


def _step(told: variants.Narrated) -> Step:
    return Step(told.title, told.formula, [Line(*line) for line in told.lines], told.notes)


# -- arithmetic a reader can check ------------------------------------------------------------------------


class Arithmetic:
    """Says = or ≈ by the one rule (`numbers.relation`) and remembers the first ≈, for the note that explains it."""

    def __init__(self, w: Writer, p: int) -> None:
        self.w, self.p = w, p
        self.first: tuple[str, float] | None = None  # the first result that needed ≈, for the note

    def relation(self, reader: Decimal | Sequence[Decimal], result: float | np.ndarray, *, name: str) -> str:
        """'=' when each of `reader` (worked out from the shown numbers) rounds to the shown `result`, else '≈'."""
        said = numbers.relation(reader, result, self.p, approx=self.w.approx)
        if said != "=" and self.first is None:
            self.first = (name, float(np.ravel(np.asarray(result, dtype=np.float64))[0]))
        return said

    def note(self) -> str:
        name, exact = self.first or ("", 0.0)
        return (
            f"≈ marks a result worked out from the unrounded numbers, which carry about 16 significant digits ({name} is "
            f"{numbers.significant(exact, UNROUNDED_DIGITS)} to ten of them); the numbers shown are rounded to {self.p} decimals, so "
            "adding them up can miss the last digit."
        )


def _dot(values: Sequence[Decimal], matrix: np.ndarray, p: int, bias: np.ndarray | None) -> list[Decimal]:
    """A row vector of shown numbers times a shown matrix (plus a shown bias), exactly."""
    out = []
    for j in range(matrix.shape[1]):
        total = sum((a * shown(float(matrix[i, j]), p) for i, a in enumerate(values)), Decimal(0))
        out.append(total + (shown(float(bias[j]), p) if bias is not None else 0))
    return out


def _vec(w: Writer, values: np.ndarray, p: int, full: bool, *, whole: bool = True) -> str:
    """A vector, its middle left out when it is long (unless full)."""
    values = np.ravel(values)
    if full or len(values) <= 2 * LONG_TERMS:
        return w.vec(values, p, whole=whole)
    cells = [w.num(float(v), p, whole=whole) for v in values[:4]] + [w.ellipsis] + [w.num(float(v), p, whole=whole) for v in values[-2:]]
    if w.tex:
        return r"\begin{bmatrix} " + " & ".join(cells) + r" \end{bmatrix}"
    return "[" + ", ".join(cells) + f"] ({len(values)} numbers)"


def _matrix_lines(w: Writer, name: str, matrix: np.ndarray, p: int) -> list[Line]:
    """`name = matrix`: one bracketed matrix in TeX; in text `name =` and its rows right-aligned below, as W_Q is shown."""
    if w.tex:
        return [Line(name, w.mat(matrix, p))]
    cells = [[w.num(float(x), p) for x in row] for row in np.atleast_2d(matrix)]
    width = max(len(cell) for row in cells for cell in row)
    return [Line("", f"{name} =")] + [Line("", "  " + "  ".join(cell.rjust(width) for cell in row)) for row in cells]


def _row_symbol(s: Scenario) -> str:
    """What a token's row of X is called: e, its embedding; x for a checkpoint, whose rows are hidden states entering a layer's attention."""
    return "x" if s.word_marks else "e"  # word_marks: a real tokenizer's, i.e. a checkpoint's layer


def _small(matrix: np.ndarray | None, full: bool) -> bool:
    return matrix is not None and (full or max(matrix.shape) <= BIG_MATRIX)


def _keys_shown(expl: Explanation, full: bool) -> list[KeyStep]:
    """Every key, or for a long sequence the LONG_KEYS keys with the largest weights, in order."""
    keys = list(expl.keys)
    if full or len(keys) <= LONG_SUM:
        return keys
    top = sorted(sorted(range(len(keys)), key=lambda j: -keys[j].weight)[:LONG_KEYS])
    return [keys[j] for j in top]


def _fewer_keys(expl: Explanation, keys: list[KeyStep]) -> list[str]:
    if len(keys) == len(expl.keys):
        return []
    return [f"{len(keys)} of the {len(expl.keys)} keys are shown, those with the largest weights; {option('full')} shows them all."]


class Terms(NamedTuple):
    text: str  # the terms joined by +, the rest as one number
    shown: list[int]  # indices of the terms written out
    rest: float | np.ndarray | None  # the sum of the others; None when all are written out


def _terms(w: Writer, sizes: list[float], texts: list[str], rest_of: Callable[[list[int]], float | np.ndarray], p: int, full: bool) -> Terms:
    """Terms joined by +; a long sum shows its LONG_TERMS largest (by `sizes`) in order and adds the others up in one number."""
    if full or len(texts) <= LONG_SUM:
        return Terms(" + ".join(texts), list(range(len(texts))), None)
    top = sorted(sorted(range(len(texts)), key=lambda j: -abs(sizes[j]))[:LONG_TERMS])
    others = sorted(set(range(len(texts))) - set(top))
    rest = rest_of(others)
    value = w.num(float(rest), p, whole=False) if np.ndim(rest) == 0 else w.vec(rest, p, whole=False)
    tail = rf"\underbrace{{{value}}}_{{\text{{{len(others)} more terms}}}}" if w.tex else f"[{len(others)} more terms: {value}]"
    return Terms(" + ".join([texts[j] for j in top] + [tail]), top, rest)


def _rest(terms: Terms, p: int) -> Decimal:
    return Decimal(0) if terms.rest is None else shown(float(terms.rest), p)


# -- the steps ---------------------------------------------------------------------------------------------


def _head(expl: Explanation, w: Writer) -> Notation:
    return Notation(expl.head.head if expl.scenario.heads > 1 else None, w.tex)


def _projected(
    w: Writer, check: Arithmetic, e: np.ndarray, matrix: np.ndarray | None, bias: np.ndarray | None, result: np.ndarray,
    p: int, full: bool, *, symbol: str, name: str,
) -> str:
    """'[e] · W + [b] = [result]', with = only when the shown numbers give the shown result."""
    product = f"{_vec(w, e, p, full)} {w.dot} {symbol}" + (f" + {_vec(w, bias, p, full)}" if bias is not None else "")
    relation = "="
    if _small(matrix, full) and len(e) <= 2 * LONG_TERMS or full:
        assert matrix is not None
        relation = check.relation(_dot([shown(float(x), p) for x in e], matrix, p, bias), result, name=name)
    return f"{product} {relation} {_vec(w, result, p, full)}"


def _query(expl: Explanation, p: int, w: Writer, check: Arithmetic, full: bool) -> Step:
    n = _head(expl, w)
    word = w.label(expl.token)
    if expl.e is None:
        return Step("The query", f"q = {w.text('row')} {expl.position} {w.text('of')} {n('Q')}",
                    [Line(w.of("q", word), _vec(w, expl.q_raw, p, full))], [f"Q is given directly: this is its row {expl.position}."])
    head = expl.head
    e = _row_symbol(expl.scenario)
    formula = f"q = {e}{w.dot}{n('W_Q')}" + (f" + {n('b_Q')}" if head.b_Q is not None else "")
    rhs = _projected(w, check, expl.e, head.W_Q, head.b_Q, expl.q_raw, p, full, symbol=n("W_Q"), name="q")
    lines = [Line(w.of(e, word), _vec(w, expl.e, p, full)), Line("q", rhs)]
    notes = []
    matrix = None
    if _small(head.W_Q, full):
        matrix = (n("W_Q"), head.W_Q)
    elif head.W_Q is not None:
        notes.append(f"W_Q ({head.W_Q.shape[0]} × {head.W_Q.shape[1]}) is too big to show here; {option('full')} shows it.")
    return Step("The query", formula, lines, notes, matrix=matrix)  # type: ignore[arg-type]


def _keys_values(expl: Explanation, p: int, w: Writer, check: Arithmetic, full: bool) -> Step:
    s = expl.scenario
    head = expl.head
    kv = Notation(head.kv_head if s.heads > 1 and s.heads != s.G else (head.head if s.heads > 1 else None), w.tex)
    keys = _keys_shown(expl, full)
    e = _row_symbol(s)
    lines = []
    for symbol, matrix in (("W_K", head.W_K), ("W_V", head.W_V)):
        if _small(matrix, full):
            assert matrix is not None
            lines += _matrix_lines(w, kv(symbol), matrix, p)
    for key in keys:
        label = w.label(key.label)
        if key.e is None:  # a given KV cache's key: k and v are given as cached, not projected
            lines += [Line(w.of("k", label), _vec(w, key.k_raw, p, full)), Line(w.of("v", label), _vec(w, key.v, p, full))]
            continue
        lines.append(Line(w.of(e, label), _vec(w, key.e, p, full)))
        lines.append(Line(w.of("k", label), _projected(w, check, key.e, head.W_K, head.b_K, key.k_raw, p, full, symbol=kv("W_K"),
                                                       name=f"k({key.label})")))  # fmt: skip
        v = key.v if key.v_raw is None else key.v_raw  # as projected: a value norm's step follows
        lines.append(Line(w.of("v", label), _projected(w, check, key.e, head.W_V, head.b_V, v, p, full, symbol=kv("W_V"),
                                                       name=f"v({key.label})")))  # fmt: skip
    row = "hidden state x (what enters this layer's attention)" if e == "x" else "embedding e"
    notes = [f"Each key word's {row} gives its key k = {e}·W_K{' + b_K' if head.b_K is not None else ''} and its value "
             f"v = {e}·W_V{' + b_V' if head.b_V is not None else ''}."]  # fmt: skip
    if not all(_small(m, full) for m in (head.W_K, head.W_V)):
        notes.append(f"W_K and W_V are too big to show here; {option('full')} shows them.")
    notes += _cached_note(s)
    return Step("The keys and the values", f"k = {e}{w.dot}{kv('W_K')}, \\quad v = {e}{w.dot}{kv('W_V')}" if w.tex
                else f"k = {e}·{kv('W_K')}, v = {e}·{kv('W_V')}", lines, notes + _fewer_keys(expl, keys))  # fmt: skip


def _cached_note(s: Scenario) -> list[str]:
    """What a given KV cache's keys are, for the steps that show them."""
    c = s.cached
    if not c:
        return []
    keys = "key 1" if c == 1 else f"keys 1–{c}"
    done = [what for what, on in (("normalised by QK-norm", bool(variants.active(s, "norm"))), ("turned by RoPE at their positions", _turned(s))) if on]
    rotated = f", the keys already {' and '.join(done)}" if done else ""  # a cache holds k as the queries meet it
    return [f"The {keys} ({', '.join(s.key_labels[:c])}) come from the given KV cache: their k and v are given as cached{rotated}, "
            f"not projected. The sentence's words follow them: word n sits at position {c} + n."]


def _dot_products(expl: Explanation, p: int, w: Writer, check: Arithmetic, full: bool) -> Step:
    q, k = _met(expl, w, "q"), _met(expl, w, "k")
    keys = _keys_shown(expl, full)
    lines = []
    q_shown = [shown(float(a), p) for a in expl.q]
    said = f"{_met(expl, Writer(), 'q')}·{_met(expl, Writer(), 'k')}"  # the note's name for a product, as its line writes it: q′·k′
    for key in keys:
        texts = [f"({w.num(float(a), p)} {w.times} {w.num(float(b), p)})" for a, b in zip(expl.q, key.k)]
        products = [float(a * b) for a, b in zip(expl.q, key.k)]
        terms = _terms(w, products, texts, functools.partial(_partial_dot, expl.q, key.k), p, full)
        reader = sum((q_shown[j] * shown(float(key.k[j]), p) for j in terms.shown), Decimal(0)) + _rest(terms, p)
        relation = check.relation(reader, key.score, name=f"{said}({key.label})")
        lines.append(Line(f"{q}{w.dot}{w.of(k, w.label(key.label))}", f"{terms.text} {relation} {w.num(key.score, p)}"))
    notes = []
    if len(expl.q) > LONG_SUM and not full:
        notes.append(f"The vectors have {len(expl.q)} numbers: each sum shows its {LONG_TERMS} largest terms and adds up the "
                     f"others in one number; {option('full')} shows every term.")  # fmt: skip
    if expl.e is None or expl.head.W_K is None:  # no keys-and-values step said it
        notes += _cached_note(expl.scenario)
    return Step("One dot product per key", f"{w.text('score')} = {q}{w.dot}{k}", lines, notes + _fewer_keys(expl, keys))


def _met(expl: Explanation, w: Writer, letter: str) -> str:
    """q or k as the scores meet it: q′ rotated by RoPE, q̂ after QK-norm alone, else q."""
    if _turned(expl.scenario):
        return w.prime(letter)
    if variants.active(expl.scenario, "norm"):
        return rf"\hat{{{letter}}}" if w.tex else letter + "\u0302"
    return letter


def _turned(s: Scenario) -> bool:
    """Whether q and k are turned before the scores (the registry's "qk" stage: RoPE), so the scores meet q′ and k′."""
    return bool(variants.active(s, "qk"))


def _partial_dot(q: np.ndarray, k: np.ndarray, others: list[int]) -> float:
    """The sum of the products q_j·k_j over `others`."""
    return float(q[others] @ k[others])


def _scaling(expl: Explanation, p: int, w: Writer, check: Arithmetic, full: bool) -> Step:
    scale = expl.scenario.scale
    sqrt = scale.mode == "sqrt_dk"
    keys = _keys_shown(expl, full)
    divisor = shown(scale.divisor, p)
    lines = []
    for key in keys:
        relation = check.relation(shown(key.score, p) / divisor, key.scaled, name=f"the scaled score of {key.label}")
        lines.append(_keyed(w, key, f"{w.frac(w.num(key.score, p), w.num(scale.divisor, p))} {relation} {w.num(key.scaled, p)}"))
    by = w.sqrt("d_k") if sqrt else w.num(scale.divisor, p)
    said = f"√d_k = √{expl.scenario.d_k} = {Writer().num(scale.divisor, p)}" if sqrt else Writer().num(scale.divisor, p)
    return Step("Scaling", f"{w.text('scaled')} = {w.frac(w.text('score'), by)}", lines,
                [f"Each score is divided by {said}, which keeps the softmax from saturating as d_k grows."] + _fewer_keys(expl, keys))


def _exponentials(expl: Explanation, p: int, w: Writer, check: Arithmetic, full: bool) -> Step:
    lines, notes = [], []
    shift = expl.shift
    keys = _keys_shown(expl, full)
    for key in keys:
        if key.masked:
            lines.append(_keyed(w, key, f"{w.exp(w.minus_infinity)} = 0" + (r" \quad \text{(hidden)}" if w.tex else " (hidden)")))
            continue
        exponent = shown(key.logit, p) - (shown(shift, p) if shift else 0)
        relation = check.relation(exponent.exp(), key.exp, name=f"e^{Writer().num(key.logit, p)}") if abs(exponent) < 700 else "="
        argument = w.exp(f"{w.num(key.logit, p)} {w.minus} {w.num(shift, p)}", grouped=True) if shift else w.exp(w.num(key.logit, p))
        lines.append(_keyed(w, key, f"{argument} {relation} {w.num(key.exp, p)}"))
    if shift:
        notes.append(
            f"Some scores lie beyond ±700, where e^x overflows float64, so each is first shifted by the row's "
            f"largest score m = {Writer().num(shift, p)}. The shift cancels in the next steps: e^(x − m) / Σ e^(x − m) = e^x / Σ e^x."
        )
    formula = w.exp(w.text("score")) if not shift else w.exp(f"{w.text('score')} {w.minus} m", grouped=True)
    return Step("Exponentials", formula, lines, notes + _fewer_keys(expl, keys))


def _sum(expl: Explanation, p: int, w: Writer, check: Arithmetic, full: bool) -> Step:
    visible = expl.visible
    exps = np.array([key.exp for key in visible])
    terms = _terms(w, list(exps), [w.num(float(x), p) for x in exps], lambda others: float(exps[others].sum()), p, full)
    reader = sum((shown(float(exps[j]), p) for j in terms.shown), Decimal(0)) + _rest(terms, p)
    text, formula, notes = terms.text, f"{w.sigma} = {w.sigma}_j {w.exp(w.text('score') + '_j')}", []
    if expl.sink_exp is not None:  # a learned sink (gpt-oss): one more term, with no value behind it
        reader += shown(expl.sink_exp, p)
        text += f" + {w.num(expl.sink_exp, p)}"
        formula += f" + {w.exp(w.text('sink'))}"
        notes.append("The last term is the head's learned sink (gpt-oss): a logit with no key and no value, so the weight it takes "
                     "goes to nothing and the keys' weights sum to less than 1.")
    relation = check.relation(reader, expl.exp_sum, name="Σ")
    return Step("The sum of the exponentials", formula, [Line(w.sigma, f"{text} {relation} {w.num(expl.exp_sum, p, whole=False)}")], notes)


def _weights(expl: Explanation, p: int, w: Writer, check: Arithmetic, full: bool) -> Step:
    lines = []
    keys = _keys_shown(expl, full)
    total = shown(expl.exp_sum, p)
    for key in keys:
        lhs = w.of(w.alpha, w.label(key.label))
        if key.masked:
            lines.append(Line(lhs, "0" + (r" \quad \text{(hidden)}" if w.tex else " (hidden)")))
        else:
            relation = check.relation(shown(key.exp, p) / total, key.weight, name=f"α({key.label})") if total else "="
            lines.append(Line(lhs, f"{w.frac(w.num(key.exp, p), w.num(expl.exp_sum, p, whole=False))} {relation} "
                                   f"{w.num(key.weight, p, whole=False)}"))  # fmt: skip
    weights = sum(key.weight for key in expl.keys)
    if expl.sink_weight is not None:  # a learned sink: the keys' weights and the sink's share make 1
        together = weights + expl.sink_weight
        off = expl.result.round_steps is not None and round(together, 12) != 1
        note = (f"The weights sum to {Writer().num(weights, p, whole=False)}; the learned sink took the rest, "
                f"{Writer().num(expl.sink_weight, p, whole=False)}" + (f" (together {Writer().num(together, p, whole=False)}, "
                "not exactly 1: that is the rounding)." if off else "."))  # fmt: skip
    elif expl.result.round_steps is not None and round(weights, 12) != 1:
        note = f"The rounded weights sum to {Writer().num(weights, p, whole=False)}, not exactly 1: that is the rounding."
    else:
        note = f"The weights sum to {Writer().num(weights, p, whole=False)}."
    return Step("The weights", f"{w.alpha} = {w.frac(w.exp(w.text('score')), w.sigma)}", lines, [note, *_shows(expl), *_fewer_keys(expl, keys)])


def _shows(expl: Explanation) -> list[str]:
    """What this row's weights show, in words (a sink, the previous token, itself, induction); self-attention only."""
    if expl.scenario.cross:
        return []
    from attncli.walkthroughs.heads import row_readings

    keys = expl.keys
    return row_readings([k.weight for k in keys], [k.token for k in keys], [k.label for k in keys], expl.sequence_position, [not k.masked for k in keys],
                        quote=quoted)


def _weighted(expl: Explanation, p: int, w: Writer, check: Arithmetic, full: bool) -> Step:
    lines = []
    keys = [key for key in _keys_shown(expl, full) if not key.masked]
    for key in keys:
        weight = shown(key.weight, p)
        reader = [weight * shown(float(x), p) for x in key.v]
        relation = check.relation(reader, key.weighted_v, name=f"α·v({key.label})")
        lines.append(_keyed(w, key, f"{w.num(key.weight, p, whole=False)} {w.times} {_vec(w, key.v, p, full)} {relation} "
                                    f"{_vec(w, key.weighted_v, p, full, whole=False)}"))  # fmt: skip
    return Step("The weighted values", f"{w.alpha} {w.times} v", lines, _fewer_keys(expl, _keys_shown(expl, full)))


def _output(expl: Explanation, p: int, w: Writer, check: Arithmetic, full: bool) -> Step:
    visible = expl.visible
    parts = np.array([key.weighted_v for key in visible])  # (visible keys, d_v)
    texts = [_vec(w, part, p, full, whole=False) for part in parts]
    terms = _terms(w, [key.weight for key in visible], texts, lambda others: parts[others].sum(axis=0), p, full)
    lhs = w.of(w.text("output"), w.label(expl.token))
    pieces = terms.text.split(" + ")
    rest = terms.rest
    reader = [
        sum((shown(float(parts[j, c]), p) for j in terms.shown), Decimal(0))
        + (shown(float(np.ravel(rest)[c]), p) if rest is not None else 0)
        for c in range(parts.shape[1])
    ]
    relation = check.relation(reader, expl.output, name=f"output({expl.token})")
    lines = [Line(lhs, pieces[0])] + [Line("", f"+ {piece}") for piece in pieces[1:]]
    lines.append(Line("", f"{relation} {_vec(w, expl.output, p, full, whole=False)}"))
    notes = [_reading(expl, p)]
    if expl.exact_output is not None:
        difference = expl.output - expl.exact_output
        plain = Writer()
        notes.append(
            f"Hand-rounded: {plain.vec(expl.output, p, whole=False)}; exact: {plain.vec(expl.exact_output, exact_decimals(p), whole=False)}; "
            f"difference: {plain.vec(difference, exact_decimals(p), whole=False)}."
        )
    s = expl.scenario
    if s.heads > 1 and s.W_O is None and s.b_O is None:
        h, d_v = expl.head.head, s.d_v
        final = expl.result.output[expl.position - 1]
        notes.append(f"This head's output fills columns {(h - 1) * d_v + 1}–{h * d_v} of the heads' concatenation; "
                     f"the final output for {quoted(expl.token)} is {Writer().vec(final, p, whole=False)}.")  # fmt: skip
    return Step("The output", f"{w.text('output')} = {w.sigma} {w.alpha}{w.dot}v", lines, notes)


def _projection(expl: Explanation, p: int, w: Writer, check: Arithmetic, full: bool) -> Step:
    """The final step after the heads: c (the heads side by side) through W_O and b_O."""
    s = expl.scenario
    i = expl.position - 1
    c = expl.result.concat[i]  # (H·d_v,)
    y = expl.result.output[i]  # (d_out,)
    word = w.label(expl.token)
    lines = []
    if s.heads > 1:
        h, d_v = expl.head.head, s.d_v
        parts = ", ".join(stages.handed(Notation(head, w.tex), s, lower=True) for head in range(1, s.heads + 1))
        lines.append(Line(w.of("c", word), f"[{parts}] = {_vec(w, c, p, full, whole=False)}"))
        where = f"This head's output fills columns {(h - 1) * d_v + 1}–{h * d_v} of the heads' concatenation c; the other heads fill the rest."
    else:
        lines.append(Line(w.of("c", word), f"{w.of(w.text('output'), word)} = {_vec(w, c, p, full, whole=False)}"))
        where = "With one head, c is that head's output."
    if s.W_O is not None:
        product = _projected(w, check, c, s.W_O, s.b_O, y, p, full, symbol="W_O", name=f"y({expl.token})")
        formula = "y = c" + w.dot + "W_O" + (" + b_O" if s.b_O is not None else "")
    else:
        assert s.b_O is not None
        reader = [shown(float(a), p) + shown(float(b), p) for a, b in zip(c, s.b_O)]
        product = f"{_vec(w, c, p, full, whole=False)} + {_vec(w, s.b_O, p, full)} {check.relation(reader, y, name='y')} {_vec(w, y, p, full)}"
        formula = "y = c + b_O"
    lines.append(Line(w.of("y", word), product))
    notes = [where]
    matrix = None
    if _small(s.W_O, full):
        matrix = ("W_O", s.W_O)
    elif s.W_O is not None:
        notes.append(f"W_O ({s.W_O.shape[0]} × {s.W_O.shape[1]}) is too big to show here; {option('full')} shows it.")
    if expl.lens is not None:  # a checkpoint's head: what its slice of y promotes, and the logit lens at this position
        from attncli.walkthroughs.lens import predicts

        notes.extend(predicts(expl.lens, f"{quoted(expl.token)} (position {expl.lens.position})", expl.logit_lens))
    return Step("The output projection", formula, lines, notes, matrix=matrix)  # type: ignore[arg-type]


def _reading(expl: Explanation, p: int) -> str:
    """One sentence: which keys got the most attention, and which the least."""
    visible = expl.visible
    weights = np.array([key.weight for key in visible])
    plain = Writer()
    if len(visible) == 1:
        return f"{quoted(expl.token)} sees only {visible[0].label if expl.scenario.cross else 'itself'}, so its output is that value vector."
    if np.ptp(weights) <= 1e-12:
        return f"{quoted(expl.token)} attends equally to all {len(visible)} words it sees."
    most = [k.label for k, x in zip(visible, weights) if x >= weights.max() - 1e-12]
    least = [k.label for k, x in zip(visible, weights) if x <= weights.min() + 1e-12]
    return (
        f"{quoted(expl.token)} attends most to {_and(most)} ({plain.num(float(weights.max()), p, whole=False)}{_each(most)}) "
        f"and least to {_and(least)} ({plain.num(float(weights.min()), p, whole=False)}{_each(least)})."
    )


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _each(names: list[str]) -> str:
    return " each" if len(names) > 1 else ""
