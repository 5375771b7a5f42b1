"""Caches whose size no client can grow: bounded in entries and in bytes.

Everything cached here is keyed by what clients send (envelopes, profile URLs) or by
objects made from it, so an unbounded dict would be a memory leak any client could
drive. A bound in entries alone is not enough either: one envelope may carry
megabytes within the per-string and per-node limits, and a thousand of them would
hold gigabytes. So each entry is weighed when it is put (an estimate of the bytes it
keeps alive, see `frozen_json.footprint`), an entry over `MAX_ENTRY_BYTES` is never
kept (what it holds is made again when next needed), and the oldest entries go when
either bound would be passed. First-in-first-out keeps eviction O(1) and needs no
bookkeeping on hits, which sit on every request's path.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Final, TypeVar

from .errors import PolicyError

__all__ = ["MAX_CACHE_BYTES", "MAX_ENTRY_BYTES", "BoundedCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

MAX_ENTRY_BYTES: Final = 65_536
"""The largest entry a cache keeps (estimated bytes); a larger one is used once and dropped."""
MAX_CACHE_BYTES: Final = 8 * 1024 * 1024
"""What one cache holds at most (estimated bytes), whatever its limit in entries."""


class BoundedCache(dict[K, V]):
    """A dict of at most `limit` entries and `max_bytes` bytes; `put` evicts the oldest.

    Safe to share between threads: `put` is the only writer and takes a lock; reads are
    plain dict lookups, which never see a half-made entry.
    """

    def __init__(self, limit: int, max_bytes: int = MAX_CACHE_BYTES) -> None:
        super().__init__()
        if limit < 1:
            raise PolicyError(f"limit must be at least 1; got {limit}")
        if max_bytes < 1:
            raise PolicyError(f"max_bytes must be at least 1; got {max_bytes}")
        self.limit = limit
        self.max_bytes = max_bytes
        self.bytes = 0
        """The sizes of the entries held, as `put` was told them."""
        self._sizes: dict[K, int] = {}
        self._lock = threading.Lock()

    def put(self, key: K, value: V, size: int = 0) -> bool:
        """Keep `value` under `key`, weighing `size` bytes; False, and nothing kept, for an
        entry over `MAX_ENTRY_BYTES` (or the whole cache's `max_bytes`)."""
        with self._lock:
            if key in self:
                del self[key]
                self.bytes -= self._sizes.pop(key, 0)
            if size > min(MAX_ENTRY_BYTES, self.max_bytes):
                return False
            while self and (len(self) >= self.limit or self.bytes + size > self.max_bytes):
                oldest = next(iter(self))
                del self[oldest]
                self.bytes -= self._sizes.pop(oldest, 0)
            self[key] = value
            self._sizes[key] = size
            self.bytes += size
            return True
