"""`record`: a frozen dataclass for mypy and the reader, at about a third of its cost to create at start-up.

A `@dataclass(frozen=True, eq=False)` compiles four methods from source text when its class is
created: `__init__` (each field set through `object.__setattr__`), `__repr__`, `__setattr__` and
`__delattr__`. That was 0.2–1.3 ms a class, and `attncli run cat` created twenty of them before
printing anything (docs/performance.md, row 2). A `record` is the same dataclass with only
`__init__` compiled: its fields, defaults, `dataclasses.fields` and `dataclasses.replace` are a
dataclass's, and mypy reads it as frozen (`dataclass_transform`). `__repr__`, `__setattr__` and
`__delattr__` are three functions shared by every record: a field is set once, by `__init__`, and
after that neither a field nor any other attribute can be set or deleted (FrozenInstanceError, as a
frozen dataclass says). Equality and hashing are by identity (eq=False), as before.

For a class created often, where a frozen dataclass's `__init__` would be cheaper per instance, or one
whose instances are compared by value, keep `@dataclass`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")


def _set_once(self: Any, name: str, value: Any) -> None:
    """Only `__init__` sets attributes: each field once."""
    if name not in type(self).__record_fields__ or name in self.__dict__:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _refuse_delete(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def _repr(self: Any) -> str:
    """What a dataclass's `__repr__` writes: `Rope(base=10000.0, …)`, its fields in order."""
    shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self) if f.repr)
    return f"{type(self).__qualname__}({shown})"


@dataclass_transform(frozen_default=True, eq_default=False, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[T]) -> type[T]:
    """`cls` as a frozen dataclass compared by identity, `__init__` its only compiled method (see the module's note)."""
    made: Any = dataclasses.dataclass(cls, eq=False, repr=False)
    made.__record_fields__ = frozenset(f.name for f in dataclasses.fields(made))
    made.__setattr__, made.__delattr__ = _set_once, _refuse_delete
    if cls.__repr__ is object.__repr__:  # a repr of its own or inherited (api's results, a subclass of a record) is kept
        made.__repr__ = _repr
    return cls
