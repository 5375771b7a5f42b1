"""Read-only copies of untrusted JSON, with limits on the work one document can cause.

Client capability maps and UCP profile configs are both kept as they were sent
(unknown keys included) but must never be mutable by a handler nor unbounded in cost.
Each caller turns `NotFreezable` into its own protocol's error.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, TypeGuard

__all__ = ["MARSHAL_VERSION", "Budget", "NotFreezable", "footprint", "freeze", "is_object", "thaw"]

MARSHAL_VERSION: Final = 2
"""For `marshal.dumps` of JSON values (cache keys, copies): the newest format without
back-references, so the same values always give the same bytes."""

_MAX_INT_BITS: Final = 1_024
"""Wider integers are refused: no peer sends one, and printing one can fail."""
_CONTAINER: Final = 64
"""What a container costs in CPython beyond its items: object header, hash table or array
(a read-only mapping is a proxy and its dict: more, which `_SLOT` per item covers)."""
_SLOT: Final = 24
"""What one item of a container costs in CPython: its pointers and hash-table slot."""
_SCALAR: Final = 32
"""A number, boolean or null: a small object (a shared one, for booleans and null)."""


def is_object(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """Whether a JSON value is an object (any `Mapping`, not only a parsed `dict`)."""
    return isinstance(value, Mapping)


class NotFreezable(ValueError):
    """The value is not JSON, or exceeds a limit; the message completes "<what> …"."""


class Budget:
    """How many more JSON values may be copied; shared by every call for one document."""

    __slots__ = ("left", "limit")

    def __init__(self, limit: int) -> None:
        self.left = self.limit = limit

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise NotFreezable(f"holds more than {self.limit} values")


def freeze(
    value: Any, budget: Budget, *, max_depth: int, max_string: int | None = None, depth: int = 0
) -> Any:
    """A deep copy where objects become read-only mappings and arrays become tuples."""
    if depth > max_depth:
        raise NotFreezable(f"is nested deeper than {max_depth} levels")
    budget.spend()
    if isinstance(value, str):
        if max_string is not None and len(value) > max_string:
            raise NotFreezable(f"holds a string longer than {max_string} characters")
        return value
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        # Not something JSON carries between peers, and past 4,300 digits Python cannot print it.
        raise NotFreezable(f"holds an integer wider than {_MAX_INT_BITS} bits")
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Mapping):
        frozen: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str) or (max_string is not None and len(key) > max_string):
                raise NotFreezable("has a key that is not a short string")
            frozen[key] = freeze(item, budget, max_depth=max_depth, max_string=max_string, depth=depth + 1)
        return MappingProxyType(frozen)
    if isinstance(value, list | tuple):
        return tuple(
            freeze(item, budget, max_depth=max_depth, max_string=max_string, depth=depth + 1)
            for item in value
        )
    raise NotFreezable(f"holds a {type(value).__name__}, which is not JSON")


def footprint(value: Any, cap: float = math.inf) -> int:
    """About how many bytes `value` (JSON values, as `freeze` makes them) holds in memory.

    Strings are weighed exactly (`sys.getsizeof`), other objects by typical sizes: an
    estimate, good enough to bound a cache in bytes. The count stops once it passes
    `cap`, so weighing a huge value costs no more than weighing `cap` bytes of it.
    """
    total = 0
    pending = [value]
    while pending and total <= cap:
        item = pending.pop()
        if isinstance(item, str):
            total += sys.getsizeof(item)
        elif isinstance(item, Mapping):
            total += _CONTAINER + _SLOT * len(item)
            pending += item.keys()
            pending += item.values()
        elif isinstance(item, tuple | list):
            total += _CONTAINER + _SLOT * len(item)
            pending += item
        else:
            total += _SCALAR
    return total


def thaw(value: Any) -> Any:
    """Plain, mutable JSON from what `freeze` made (or a copy of plain JSON), for logs,
    results and output: nothing in it is shared with `value`."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(item) for item in value]
    return value
