"""core.records.record: a dataclass with fewer compiled methods, still frozen, compared by identity and written as a dataclass writes itself."""

import dataclasses

import numpy as np
import pytest

from attncli.core.records import record
from attncli.core.scenario import Scenario
from attncli.core.variants import Mask, Rope


@record
class Point:
    """Two numbers and a list made per instance."""

    x: float
    y: float = 0.0
    tags: list[str] = dataclasses.field(default_factory=list)


def test_a_record_is_a_dataclass_with_its_defaults():
    p = Point(1.0)
    assert dataclasses.is_dataclass(p) and [f.name for f in dataclasses.fields(p)] == ["x", "y", "tags"]
    assert (p.x, p.y, p.tags) == (1.0, 0.0, []) and Point(2.0).tags is not p.tags
    assert dataclasses.replace(p, y=3.0).y == 3.0 and p.y == 0.0


@pytest.mark.parametrize("name", ["x", "tags", "not_a_field"])
def test_a_record_cannot_be_changed_after_init(name):
    p = Point(1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(p, name, 2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(p, name)


def test_a_record_is_compared_by_identity_and_hashable():
    p, q = Point(1.0), Point(1.0)
    assert p == p and p != q and len({p, q}) == 2


@dataclasses.dataclass(frozen=True, eq=False)
class Twin:
    x: float
    y: float = 0.0
    tags: list[str] = dataclasses.field(default_factory=list)


def test_a_record_is_written_as_its_dataclass_would_be():
    assert repr(Point(1.0, 2.0, ["a"])) == repr(Twin(1.0, 2.0, ["a"])).replace("Twin", "Point") == "Point(x=1.0, y=2.0, tags=['a'])"


def test_the_core_records_are_frozen():
    """Scenario and the variants, as the engine and the readers rely on."""
    mask = Mask(causal=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        mask.causal = False  # type: ignore[misc]
    rope = Rope(theta=10000.0)
    assert dataclasses.replace(rope, offset=3).offset == 3 and rope.offset == 0
    s = Scenario(name="s", tokens=("a",), heads=1, scale=None, X=np.ones((1, 2)))  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.name = "t"  # type: ignore[misc]
    assert s.variant(Mask) is s.mask  # a cached_property still works on a record
