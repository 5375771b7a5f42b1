"""A profile cache the replicas of a fleet share, on Redis (or Valkey, which speaks the same).

    pip install 'mcp-negotiation[redis]'

    resolver = HttpsProfileResolver(shared_cache=RedisProfileCache("redis://cache:6379/0"))

Without it, each replica keeps its own cache: a fleet of N replicas fetches each
platform's profile N times per TTL, keeps N backoffs for a failing host, and may hold N
versions of one profile at once, so two calls of one checkout could be negotiated
differently. With it, the fleet fetches each profile once per TTL (the first replica to
miss takes a short lock, `SET NX PX`, in the same atomic step as its look at the entry;
the others wait for what it stores), remembers a failure once for everyone, and every
replica serves the document that replica validated.

What the store holds and how it is trusted:

- Keys are a hash of the validated URL (its fragment dropped, see `validate_profile_url`)
  under a fixed prefix: nothing a client sends becomes part of a key, so no request can
  name, overwrite or enumerate other keys.
- An entry is the fetched body (a failure: its code, phrase and attempts), expiring with
  the profile's TTL (the failure's backoff): Redis's own clock, so replicas' clocks need
  not agree. Entries are bounded in bytes on write and read (`GETRANGE`), a stored body
  is validated again by every replica that reads it, and an entry naming another URL or
  not parsing is a miss.

What a call may cost (docs/deployment.md states the same figures):

- **`timeout` in all.** Beyond waiting for the replica that fetches (which its lock
  bounds), a call waits on Redis at most `timeout` seconds in all: its first look,
  queueing included, is taken from that budget, and each later look, made while it waits
  for another replica's fetch anyway, is bounded by what is left of it. With Redis slow,
  frozen or down, a call waits that long at most, then fetches on its own. The holder's
  write of what it fetched, with its release of the lock, is sent after its answer
  (bounded by a `timeout` of its own): no client waits for it. Moments this replica's
  own event loop ran late are not counted (`redis_batches.StoreClock`): a replica busy
  with a burst of TLS handshakes is not a slow store.
- **Back-pressure is not an outage.** The commands of every call waiting go out together,
  in one pipeline per free connection, on at most `max_connections` (`redis_batches`): a
  burst of calls costs a few round trips, never more connections than the pool has, and
  is not taken for Redis failing. A call that spent its budget anyway (waiting for a
  connection, or sent too late to be answered in time) fetches on its own, shares what it fetched, and
  says so in the log; the store stays in use. Only a round trip that fails, or that was
  sent and went unanswered for half the budget or more, is an outage: logged once (no
  traceback), and the store is left alone for `retry_after` seconds.
- **A dead holder costs one fetch.** A waiter follows the lock, not a clock of its own:
  it polls every `poll_interval` at first, less often as the wait grows (up to eight
  times that), and at the moment the lock expires, so when a holder dies mid-fetch the
  first waiter to poll takes the lock and fetches, and the others are served what it
  stores. A waiter gives up (and fetches itself) only after the lock it found and one
  successor's have both run out without an entry.

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
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, get_args

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from ..core.client_log import report
from ..core.errors import PolicyError
from .errors import UcpError, UcpErrorCode
from .profile import Profile
from .redis_batches import Batches, StoreClock
from .resolver import MAX_FAILURE_BACKOFF, MAX_TTL, FetchBody, Fetched, FetchFailed, fetch_outcome

__all__ = ["DEFAULT_MAX_CONNECTIONS", "DEFAULT_MAX_ENTRY_BYTES", "DEFAULT_PREFIX", "RedisProfileCache"]

logger = logging.getLogger("mcp_negotiation")

DEFAULT_PREFIX: Final = "mcp-negotiation:ucp:"
DEFAULT_MAX_ENTRY_BYTES: Final = 512 * 1024
"""Twice the resolver's default body cap: room for a raised cap and the entry's header."""
DEFAULT_MAX_CONNECTIONS: Final = 16
"""Connections one replica uses at once; the calls' commands beyond them wait for the next batch."""
_MAX_MESSAGE: Final = 512
_BATCH_BOUND: Final = 4
"""A batch, and a socket, given up after this many `timeout`s of wall time (a backstop: the
calls' own budgets, on `StoreClock`, end sooner unless their event loop runs late)."""
_LONGEST_POLL: Final = 8
"""A waiter's polls grow apart up to this many `poll_interval`s."""
_CLAIM: Final = """
local value = redis.call('getrange', KEYS[1], 0, ARGV[1])
local ttl = redis.call('pttl', KEYS[1])
local failed = redis.call('get', KEYS[2])
if ARGV[4] ~= '1' and value ~= '' and ttl > 0 then
  return {value, ttl, failed, 0, 0}
end
local taken = redis.call('set', KEYS[3], ARGV[2], 'NX', 'PX', ARGV[3])
return {value, ttl, failed, taken and 1 or 0, redis.call('pttl', KEYS[3])}
"""
"""One look at the entry (its first bytes, its TTL) and the failures counted, and the lock
taken in the same step when there is no entry (or, with ARGV[4] = '1', over an entry that
is not ours): between a miss and the lock, another replica may have fetched, stored and
released, and the profile must not be fetched again. Then the lock's own TTL."""
_RELEASE: Final = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
)
"""Deletes the lock only while it is still ours: a fetch that outlived its lock must not
release the lock another replica took since."""


class _StoreFailed(Exception):
    """The store failed or did not answer (logged); the replica carries on without it."""


class _OnOwn(Exception):
    """This call cannot have the store's answer in time, though the store works: it fetches
    on its own and shares what it fetched. The message says why, for the log."""


class _Budget:
    """What is left of one call's `timeout` on the store, spent by each of its round trips."""

    __slots__ = ("left",)

    def __init__(self, seconds: float) -> None:
        self.left = seconds


@dataclass(frozen=True, slots=True)
class _Keys:
    entry: str
    lock: str
    failures: str


@dataclass(frozen=True, slots=True)
class _Look:
    """What one look at the store found."""

    stored: Fetched | FetchFailed | None
    failed_before: int
    foreign: bool
    """An entry is there that is not an outcome for this URL (so the lock is taken over it)."""
    lock_ms: int | None
    """None: this call took the lock. Else the milliseconds the holder's lock has left
    (-1: a lock with no expiry, not ours; 0: no lock was asked for)."""


class RedisProfileCache:
    """Profile fetch outcomes shared through Redis; give it to `HttpsProfileResolver(shared_cache=...)`.

    `store` is a `redis://` URL or a `redis.asyncio.Redis` (bound to the event loop that
    serves requests; its pool's size caps `max_connections`). `timeout` bounds all of one
    call's waiting on the store (moments its own event loop ran late not counted, see
    `redis_batches.StoreClock`); `max_connections` how many connections this replica uses
    at once (the calls' commands are sent in batches on them, see `redis_batches`);
    `lock_seconds` how long one replica's fetch holds the fleet's lock (at least the
    resolver's `total_timeout`); `retry_after` how long a failed store is left alone;
    `poll_interval` how soon a waiter first looks again for the holder's entry. `prefix`
    namespaces the keys, e.g. per deployment.
    """

    def __init__(
        self,
        store: str | aioredis.Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        timeout: float = 1.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        lock_seconds: float = 15.0,
        retry_after: float = 10.0,
        poll_interval: float = 0.05,
        max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if timeout <= 0 or lock_seconds <= 0 or poll_interval <= 0 or retry_after < 0:
            raise PolicyError(
                "timeout, lock_seconds and poll_interval must be positive; retry_after not negative"
            )
        if max_connections < 1:
            raise PolicyError("max_connections must be at least 1")
        if max_entry_bytes < 1024:
            raise PolicyError("max_entry_bytes must be at least 1024")
        self._owned = isinstance(store, str)
        if isinstance(store, str):
            # No retries of redis-py's own: the call's budget decides how long to try.
            store = aioredis.Redis.from_url(
                store,
                socket_connect_timeout=_BATCH_BOUND * timeout,
                socket_timeout=_BATCH_BOUND * timeout,
                max_connections=max_connections,
                retry=Retry(NoBackoff(), 0),
            )
        self._redis = store
        pool_size = getattr(store.connection_pool, "max_connections", None)
        self.max_connections = (
            min(max_connections, pool_size) if isinstance(pool_size, int) else max_connections
        )
        self.timeout = timeout
        self._store_clock = StoreClock()
        self._batches = Batches(
            store, self.max_connections, _BATCH_BOUND * timeout, poll_interval, self._store_clock
        )
        self._prefix = prefix
        self._lock_seconds = lock_seconds
        self._retry_after = retry_after
        self._poll_interval = poll_interval
        self._max_entry_bytes = max_entry_bytes
        self._clock = clock
        self._left_alone_until = float("-inf")
        self._reported = False
        self._later: set[asyncio.Task[None]] = set()
        """Writes and releases under way, each bounded by `timeout`, which no call waits for."""

    async def flush(self) -> None:
        """Wait for the writes and releases under way (each bounded by `timeout`): what this
        replica fetched is then in the store, for a test to look at or before shutting down."""
        while self._later:
            await asyncio.gather(*self._later, return_exceptions=True)
        await self._batches.drain()

    async def aclose(self) -> None:
        """`flush`, then close the connections this cache opened (a client passed in is the caller's)."""
        await self.flush()
        if self._owned:
            await self._redis.aclose()

    async def fetch(self, url: str, fetch: FetchBody, attempts: int) -> Fetched | FetchFailed:
        if self._clock() < self._left_alone_until:
            return await fetch_outcome(fetch, attempts)
        digest = hashlib.sha256(url.encode()).hexdigest()
        keys = _Keys(*(f"{self._prefix}{kind}:{digest}" for kind in ("profile", "lock", "failures")))
        token = secrets.token_hex(16)
        try:
            stored, failed_before, locked = await self._find(keys, url, token, _Budget(self.timeout))
        except _StoreFailed:
            return await fetch_outcome(fetch, attempts)
        except _OnOwn as reason:
            report(
                logging.WARNING,
                "%s, so it fetched the profile on its own and shares it; the shared"
                " profile cache stays in use",
                reason,
            )
            stored, failed_before, locked = None, 0, False
        if stored is not None:
            return stored
        try:
            outcome = await fetch_outcome(fetch, max(attempts, failed_before))
        except BaseException:  # busy (no lookup slot) or cancelled: the next waiter need not wait for expiry
            if locked:
                self._in_background(self._release(keys, token))
            raise
        self._in_background(self._write(keys, url, outcome, token if locked else None))
        return outcome

    async def _find(
        self, keys: _Keys, url: str, token: str, budget: _Budget
    ) -> tuple[Fetched | FetchFailed | None, int, bool]:
        """What the store holds for `url` (else None), how many times in a row the fleet failed
        to fetch it, and whether this call took the lock, to fetch for the fleet."""
        loop = asyncio.get_running_loop()
        give_up: float | None = None
        interval = self._poll_interval
        foreign = False
        while True:
            # The first look is charged to the budget; the later ones, made while waiting for
            # another replica's fetch anyway, are each bounded by what is left of it.
            look = await self._look(keys, url, token, budget, over_foreign=foreign, charged=give_up is None)
            if look.stored is not None:
                if look.lock_ms is None:  # taken over an entry that is ours after all
                    self._in_background(self._release(keys, token))
                return look.stored, look.failed_before, False
            if look.lock_ms is None:
                return None, look.failed_before, True
            foreign = look.foreign
            lock_left = look.lock_ms / 1000 if look.lock_ms >= 0 else self._lock_seconds
            now = loop.time()
            if give_up is None:  # the lock found, and one successor's, may run out
                give_up = now + lock_left + self._lock_seconds
            if now >= give_up:
                raise _OnOwn(
                    f"a call waited {self._lock_seconds:g} s past the fleet's lock on a profile and no"
                    " replica stored it"
                )
            # At the latest when the lock expires: a holder that died is replaced at once.
            await asyncio.sleep(min(interval, lock_left + 0.001, give_up - now))
            interval = min(interval * 2, self._poll_interval * _LONGEST_POLL)

    async def _look(
        self, keys: _Keys, url: str, token: str, budget: _Budget, *, over_foreign: bool, charged: bool
    ) -> _Look:
        """The stored outcome; how many times in a row the fleet failed to fetch `url`
        (counted apart from the outcome, which expires with the backoff it set, so that the
        next backoff still grows); and the lock, taken when there is no outcome to use."""
        claim = (
            "EVAL", _CLAIM, 3, keys.entry, keys.failures, keys.lock,
            self._max_entry_bytes,  # one byte over the cap tells an entry too large
            token, int(self._lock_seconds * 1000), int(over_foreign),
        )  # fmt: skip
        orphaned = partial(self._orphaned_claim, keys, token)
        (answer,) = await self._round_trip(budget, [claim], orphaned, charged=charged)
        value, pttl, failed, taken, lock_pttl = answer
        count = int(failed) if isinstance(failed, bytes) and failed.isdigit() else 0
        stored = self._parse(value, pttl, url)
        foreign = stored is None and bool(value) and pttl > 0
        return _Look(stored, min(count, 32), foreign, None if taken else int(lock_pttl))

    async def _round_trip(
        self,
        budget: _Budget,
        commands: Sequence[tuple[Any, ...]],
        orphaned: Callable[[list[Any]], None] | None = None,
        *,
        charged: bool = True,
    ) -> list[Any]:
        """One round trip within what is left of `budget` (and taken from it if `charged`), in
        the next batch (see `redis_batches`). One that fails, or that was sent and went
        unanswered for half the budget or more, is the store failing; a budget spent
        otherwise is `_OnOwn`."""
        clock = self._store_clock
        with clock.watching():
            started = clock.now()
            queued = self._batches.queue(commands, orphaned)
            while not queued.answer.done() and (left := budget.left - (clock.now() - started)) > 0:
                await asyncio.wait([queued.answer], timeout=left)  # then again if the loop ran late
            now = clock.now()
        if charged:
            budget.left -= now - started
        if not queued.answer.done():
            queued.answer.cancel()  # (a batch not sent yet leaves it out)
            if queued.sent is not None and now - queued.sent >= self.timeout / 2:
                raise self._failed(f"no answer within {now - queued.sent:.2f} s")
            if queued.sent is None:
                why = f"waited its {self.timeout:g} s for one of its {self.max_connections} connections"
            else:
                why = f"had its {self.timeout:g} s run out before the answer came"
            raise _OnOwn(f"a call to the shared profile cache {why}")
        try:
            answers = queued.answer.result()
        except (RedisError, OSError) as exc:
            raise self._failed(type(exc).__name__) from None
        refused = next((answer for answer in answers if isinstance(answer, Exception)), None)
        if refused is not None:  # e.g. a key of ours holding another type
            raise self._failed(type(refused).__name__)
        self._answered()
        return answers

    def _failed(self, what: str) -> _StoreFailed:
        """Leave the store alone for `retry_after`, and say so once per outage."""
        self._left_alone_until = self._clock() + self._retry_after
        if not self._reported:
            self._reported = True
            logger.warning(
                "the shared profile cache failed (%s); each replica fetches "
                "profiles on its own for %s s, then tries it again",
                what,
                self._retry_after,
            )
        return _StoreFailed()

    def _answered(self) -> None:
        if self._reported:
            self._reported = False
            logger.info("the shared profile cache answers again")

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._later.add(task)
        task.add_done_callback(self._later.discard)

    async def _write(self, keys: _Keys, url: str, outcome: Fetched | FetchFailed, token: str | None) -> None:
        """Store `outcome` and release the lock `token` names, in one round trip. Without the
        lock (a call that fetched on its own) an entry already there is left as it is."""
        commands: list[tuple[Any, ...]] = []
        if isinstance(outcome, Fetched):
            head: dict[str, Any] = {"url": url, "kind": "profile"}
            body, seconds = outcome.body, outcome.ttl
            commands.append(("DEL", keys.failures))
        else:
            head = {"url": url, "kind": "failed", "code": outcome.code, "message": outcome.message}
            head["attempts"] = outcome.attempts
            body, seconds = b"", outcome.backoff
            commands.append(
                ("SET", keys.failures, outcome.attempts, "PX", int((seconds + MAX_FAILURE_BACKOFF) * 1000))
            )
        value = json.dumps(head).encode() + b"\n" + body
        if len(value) <= self._max_entry_bytes:
            commands.append(
                (
                    "SET",
                    keys.entry,
                    value,
                    "PX",
                    max(int(seconds * 1000), 1),
                    *(["NX"] if token is None else []),
                )
            )
        if token is not None:
            commands.append(("EVAL", _RELEASE, 1, keys.lock, token))
        await self._quietly(commands)

    def _orphaned_claim(self, keys: _Keys, token: str, answers: list[Any]) -> None:
        """A look whose call gave up before its answer came: a lock it took is released."""
        answer = answers[0]
        if isinstance(answer, list) and len(answer) == 5 and answer[3]:
            self._in_background(self._release(keys, token))

    async def _release(self, keys: _Keys, token: str) -> None:
        await self._quietly([("EVAL", _RELEASE, 1, keys.lock, token)])

    async def _quietly(self, commands: Sequence[tuple[Any, ...]]) -> None:
        """A write no call waits for: failing, it is logged as any; a lock left behind expires."""
        with contextlib.suppress(_StoreFailed, _OnOwn):
            await self._round_trip(_Budget(self.timeout), commands)

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
