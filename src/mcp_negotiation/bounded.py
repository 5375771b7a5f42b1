"""Caches whose size no client can grow: the oldest entry goes when a new one arrives.

Everything cached here is keyed by what clients send (envelopes, profile URLs) or by
objects made from it, so an unbounded dict would be a memory leak any client could
drive. First-in-first-out keeps eviction O(1) and needs no bookkeeping on hits, which
sit on every request's path.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["BoundedCache", "IdentityCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(dict[K, V]):
    """A dict of at most `limit` entries; `put` evicts the oldest when full.

    Safe to share between threads: threads inserting at the same moment may each add one
    entry before they see each other's, and nothing a race does raises.
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        if limit < 1:
            raise ValueError(f"limit must be at least 1; got {limit}")
        self.limit = limit

    def put(self, key: K, value: V) -> None:
        if key not in self:
            while len(self) >= self.limit:
                try:
                    self.pop(next(iter(self)), None)
                except (RuntimeError, StopIteration):
                    # Another thread changed the dict between `iter` and `next` ("changed size
                    # during iteration"): look again. Never raise into a request for this.
                    continue
        self[key] = value


class IdentityCache(Generic[V]):
    """Values remembered for particular objects (by identity, not equality).

    Records hold read-only mappings and so cannot be hashed; their `id` can, but an id
    is reused once its object is freed. Each entry therefore keeps its objects alive:
    no two live objects share an id, so a hit is always about the very same objects.
    """

    def __init__(self, limit: int) -> None:
        self._entries: BoundedCache[tuple[int, ...], tuple[tuple[object, ...], V]] = BoundedCache(limit)

    def get(self, *objects: object) -> V | None:
        entry = self._entries.get(tuple(map(id, objects)))
        return None if entry is None else entry[1]

    def put(self, value: V, *objects: object) -> None:
        self._entries.put(tuple(map(id, objects)), (objects, value))

    def __len__(self) -> int:
        return len(self._entries)
