"""A profile cache the replicas of a fleet share, on Redis (or Valkey, which speaks the same).

    pip install 'mcp-negotiation[redis]'

    resolver = HttpsProfileResolver(shared_cache=RedisProfileCache("redis://cache:6379/0"))

Without it, each replica keeps its own cache: a fleet of N replicas fetches each
platform's profile N times per TTL, keeps N backoffs for a failing host, and may hold N
versions of one profile at once, so two calls of one checkout could be negotiated
differently. With it, the fleet fetches each profile once per TTL (the first replica to
miss takes a short lock, `SET NX PX` in one transaction with a second look at the entry;
the others wait for what it stores), remembers a failure once for everyone, and every
replica serves the document that replica validated.

What the store holds and how it is trusted:

- Keys are a hash of the validated URL under a fixed prefix: nothing a client sends
  becomes part of a key, so no request can name, overwrite or enumerate other keys.
- An entry is the fetched body (a failure: its code, phrase and attempts), expiring with
  the profile's TTL (the failure's backoff): Redis's own clock, so replicas' clocks need
  not agree. Entries are bounded in bytes on write and read (`GETRANGE`), a stored body
  is validated again by every replica that reads it, and an entry naming another URL or
  not parsing is a miss.
- The store is an optimisation, never a dependency: every call is bounded by `timeout`;
  when the store fails, the replica logs it once (no traceback), fetches on its own, and
  leaves the store alone for `retry_after` seconds. Clients see no difference.

The resolver's own cache answers first: a profile a replica holds fresh costs no round
trip to the store (benchmarks/shared_cache.py counts them).

This module imports `redis`; nothing imports it but the code that asks for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar, get_args

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from .errors import UcpError, UcpErrorCode
from .profile import Profile
from .resolver import MAX_FAILURE_BACKOFF, MAX_TTL, FetchBody, Fetched, FetchFailed, fetch_outcome

__all__ = ["DEFAULT_MAX_ENTRY_BYTES", "DEFAULT_PREFIX", "RedisProfileCache"]

logger = logging.getLogger("mcp_negotiation")

DEFAULT_PREFIX: Final = "mcp-negotiation:ucp:"
DEFAULT_MAX_ENTRY_BYTES: Final = 512 * 1024
"""Twice the resolver's default body cap: room for a raised cap and the entry's header."""
_MAX_MESSAGE: Final = 512
_RELEASE: Final = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
)
"""Deletes the lock only while it is still ours: a fetch that outlived its lock must not
release the lock another replica took since."""

T = TypeVar("T")


class _StoreFailed(Exception):
    """The store failed or did not answer in time; the replica carries on without it."""


class RedisProfileCache:
    """Profile fetch outcomes shared through Redis; give it to `HttpsProfileResolver(shared_cache=...)`.

    `store` is a `redis://` URL or a `redis.asyncio.Redis` (bound to the event loop that
    serves requests). `timeout` bounds each round trip to the store (the event loop's own
    delays included, so not much below a second on a busy replica), `lock_seconds` how long
    one replica's fetch holds the fleet's lock (and how long the others wait for it: at
    least the resolver's `total_timeout`), `retry_after` how long a failed store is left
    alone. `prefix` namespaces the keys, e.g. per deployment.
    """

    def __init__(
        self,
        store: str | aioredis.Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        timeout: float = 1.0,
        lock_seconds: float = 15.0,
        retry_after: float = 10.0,
        poll_interval: float = 0.05,
        max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if timeout <= 0 or lock_seconds <= 0 or poll_interval <= 0 or retry_after < 0:
            raise ValueError(
                "timeout, lock_seconds and poll_interval must be positive; retry_after not negative"
            )
        if max_entry_bytes < 1024:
            raise ValueError("max_entry_bytes must be at least 1024")
        self._redis = (
            aioredis.Redis.from_url(store, socket_connect_timeout=timeout, socket_timeout=timeout)
            if isinstance(store, str)
            else store
        )
        self._owned = isinstance(store, str)
        self._release = self._redis.register_script(_RELEASE)
        self._prefix = prefix
        self._timeout = timeout
        self._lock_ms = int(lock_seconds * 1000)
        self._retry_after = retry_after
        self._poll_interval = poll_interval
        self._max_entry_bytes = max_entry_bytes
        self._clock = clock
        self._left_alone_until = float("-inf")
        self._reported = False

    async def aclose(self) -> None:
        """Close the connections this cache opened (a client passed in is the caller's)."""
        if self._owned:
            await self._redis.aclose()

    async def fetch(self, url: str, fetch: FetchBody, attempts: int) -> Fetched | FetchFailed:
        if self._clock() < self._left_alone_until:
            return await fetch_outcome(fetch, attempts)
        digest = hashlib.sha256(url.encode()).hexdigest()
        key, lock = f"{self._prefix}profile:{digest}", f"{self._prefix}lock:{digest}"
        failures = f"{self._prefix}failures:{digest}"
        token = secrets.token_hex(16)
        locked = False
        try:
            stored, failed_before, _ = await self._read(key, failures, url)
            deadline = self._clock() + self._lock_ms / 1000
            while stored is None and not locked:
                # The lock is asked for in one transaction with a second look at the entry:
                # between a miss and the lock, another replica may have fetched, stored and
                # released, and the profile must not be fetched again. A holder that gives
                # up or dies leaves no entry, and the next of those waiting takes the lock.
                stored, failed_before, locked = await self._read(key, failures, url, claim=(lock, token))
                if stored is None and not locked:
                    if self._clock() >= deadline:
                        break  # no one stored it within lock_seconds: fetch on our own
                    await asyncio.sleep(self._poll_interval)
        except _StoreFailed:
            return await fetch_outcome(fetch, attempts)
        try:
            if stored is not None:
                return stored
            outcome = await fetch_outcome(fetch, max(attempts, failed_before))
            await self._write(key, failures, url, outcome)
        finally:
            if locked:
                await self._quietly(self._release(keys=[lock], args=[token]))
        return outcome

    async def _store(self, call: Awaitable[T]) -> T:
        """One round trip, bounded; a failure is logged once per outage and leaves the store alone."""
        try:
            async with asyncio.timeout(self._timeout):
                result = await call
        except (RedisError, OSError, TimeoutError) as exc:
            self._left_alone_until = self._clock() + self._retry_after
            if not self._reported:
                self._reported = True
                logger.warning(
                    "the shared profile cache failed (%s); each replica fetches "
                    "profiles on its own for %s s, then tries it again",
                    type(exc).__name__,
                    self._retry_after,
                )
            raise _StoreFailed from None
        if self._reported:
            self._reported = False
            logger.info("the shared profile cache answers again")
        return result

    async def _quietly(self, call: Awaitable[Any]) -> None:
        with contextlib.suppress(_StoreFailed):  # logged; a lock left behind expires by itself
            await self._store(call)

    async def _read(
        self, key: str, failures: str, url: str, *, claim: tuple[str, str] | None = None
    ) -> tuple[Fetched | FetchFailed | None, int, bool]:
        """The stored outcome; how many times in a row the fleet failed to fetch `url`
        (counted apart from the outcome, which expires with the backoff it set, so that the
        next backoff still grows); and whether the lock `claim` names (key, token) was taken,
        atomically with the look at the entry."""
        async with self._redis.pipeline(transaction=claim is not None) as pipe:
            pipe.getrange(key, 0, self._max_entry_bytes)  # one byte over the cap tells an entry too large
            pipe.pttl(key)
            pipe.get(failures)
            if claim is not None:
                pipe.set(claim[0], claim[1], nx=True, px=self._lock_ms)
            value, pttl, failed, *taken = await self._store(pipe.execute())
        count = int(failed) if isinstance(failed, bytes) and failed.isdigit() else 0
        return self._parse(value, pttl, url), min(count, 32), bool(taken and taken[0])

    async def _write(self, key: str, failures: str, url: str, outcome: Fetched | FetchFailed) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            if isinstance(outcome, Fetched):
                head: dict[str, Any] = {"url": url, "kind": "profile"}
                body, seconds = outcome.body, outcome.ttl
                pipe.delete(failures)
            else:
                head = {"url": url, "kind": "failed", "code": outcome.code, "message": outcome.message}
                head["attempts"] = outcome.attempts
                body, seconds = b"", outcome.backoff
                pipe.set(failures, outcome.attempts, px=int((seconds + MAX_FAILURE_BACKOFF) * 1000))
            value = json.dumps(head).encode() + b"\n" + body
            if len(value) <= self._max_entry_bytes:
                pipe.set(key, value, px=max(int(seconds * 1000), 1))
            await self._quietly(pipe.execute())

    def _parse(self, value: bytes, pttl: int, url: str) -> Fetched | FetchFailed | None:
        """The stored outcome for `url`, or None for a miss: nothing, too large, expiring
        with no TTL, another URL's, or not what `_write` writes."""
        if not value or pttl <= 0 or len(value) > self._max_entry_bytes:
            return None
        head_bytes, _, body = value.partition(b"\n")
        try:
            head = json.loads(head_bytes)
            if not isinstance(head, dict) or head.get("url") != url:
                return None
            if head.get("kind") == "profile":
                return Fetched(Profile.from_bytes(body), body, min(pttl / 1000, MAX_TTL))
            code: Any = head.get("code")
            message, attempts = head.get("message"), head.get("attempts")
            if (
                head.get("kind") == "failed"
                and code in get_args(UcpErrorCode)
                and isinstance(message, str)
                and len(message) <= _MAX_MESSAGE
                and type(attempts) is int
                and 1 <= attempts <= 32
            ):
                return FetchFailed(code, message, min(pttl / 1000, MAX_FAILURE_BACKOFF), attempts)
        except (ValueError, UcpError):
            pass
        return None
