"""How the model writes and reads its own records: JSON-able data that a class makes of itself
(`to_record`) and reads back exactly (`from_record`), as a profiler's session object saves and
loads itself. Record, the base of the model's dataclasses, does it generically over the class's
fields and their type hints, so a field added to a model class is in its record with no other
edit; a class whose fields are arrays (census.model.step_table.StepTable,
census.model.ranks.NcclRecord) writes its own, each array as `column` gives it.

The cache (census.store.codec) keeps the file format: its `column` writes an array as a
reference to raw bytes after the JSON, and reads it back in the order written.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from typing import Any, TypeVar

Column = Callable[[Any], Any]  # an array -> its record, or a record -> the array (as given)
T = TypeVar("T", bound="Record")


def listed(values: Any) -> Any:
    """An array's record by default: its values as a flat list (read back by int_array)."""
    return values.ravel().tolist()


def as_given(value: Any) -> Any:
    """An array read back by default: its record as it is (a list)."""
    return value


class Record:
    """The record codec of a dataclass, generic over its fields: each field's value written by
    its own `to_record` (a model object), as a list (a tuple, a NamedTuple) or as it is (int,
    float, str, bool, None), and read back by its type hint."""

    def to_record(self, column: Column = listed) -> dict[str, Any]:
        """The fields by name as JSON-able data; `column` writes each array."""
        return {f.name: encode(getattr(self, f.name), column) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_record(cls: type[T], data: dict[str, Any], column: Column = as_given) -> T:
        """The object to_record wrote `data` of, exactly; `column` reads each array back."""
        return cls(**{name: data[name] if read is None else read(data[name], column)
                      for name, read in _readers(cls)})  # fmt: skip


def encode(value: Any, column: Column = listed) -> Any:
    """A field's value as JSON-able data (Record.to_record's)."""
    if hasattr(type(value), "to_record"):  # a model object
        return value.to_record(column)
    if isinstance(value, tuple | list):
        return [encode(v, column) for v in value]
    return value


Reader = Callable[[Any, Column], Any]


@cache
def _readers(cls: type) -> tuple[tuple[str, Reader | None], ...]:
    """Each field's name and how its record is read back (None: as it is)."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, reader(hints[f.name])) for f in fields(cls))


def reader(hint: Any) -> Reader | None:
    """How a value of type `hint` is read back from its record; None where the record is the
    value (int, float, str, bool, Any)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"no record codec for {hint}: one type or None")
        read = reader(inner[0])
        return None if read is None else lambda v, col: None if v is None else read(v, col)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            each = reader(args[0]) or _plain
            return lambda v, col: tuple(each(x, col) for x in v)
        parts = [reader(a) or _plain for a in args]
        return lambda v, col: tuple(r(x, col) for r, x in zip(parts, v, strict=True))
    if isinstance(hint, type) and hasattr(hint, "from_record"):
        return hint.from_record
    if isinstance(hint, type) and issubclass(hint, tuple) and hasattr(hint, "_fields"):
        return _named_tuple(hint)
    if hint in (int, float, str, bool, Any, type(None)):
        return None
    raise TypeError(f"no record codec for {hint}")


def _plain(value: Any, column: Column) -> Any:
    return value


def _named_tuple(cls: type) -> Reader:
    """A NamedTuple read back from its list of values, each by its type hint."""
    hints = typing.get_type_hints(cls)
    parts = [reader(hints[name]) or _plain for name in cls._fields]  # type: ignore[attr-defined]
    return lambda v, col: cls(*(r(x, col) for r, x in zip(parts, v, strict=True)))
