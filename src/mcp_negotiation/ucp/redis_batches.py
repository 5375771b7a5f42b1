"""Round trips to Redis in batches, on a bounded number of connections (for `shared_cache`).

A burst of calls must cost the store a few round trips, not one per call: on a busy
event loop each round trip holds its connection for as long as the loop takes to read
the answer, so with one pipeline per call a burst of 150 calls on a handful of
connections queued for seconds, and a queue is what made redis-py raise
`MaxConnectionsError` past its pool. So every call's commands wait in one list, and
whenever one of at most `connections` pipelines is free, it sends *all* the commands
waiting then, in one round trip. A call gives up on its answer when its own deadline
comes (its commands may still run, and `orphaned` is told what they did); a batch is
bounded in time of its own (`bound`), so a store that never answers holds no connection
for longer than that.

This module imports `redis`; only `shared_cache` imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import MaxConnectionsError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["Batches", "Queued", "StoreClock"]

Command = tuple[Any, ...]


class StoreClock:
    """The event loop's time, less the moments it ran late: how long a round trip made this
    replica wait on the store, not on its own busy loop.

    On a replica busy with other work (a burst of TLS handshakes, say), an answer the store
    sent at once may wait a second to be read; counted against the store, that second
    would make a healthy Redis look frozen, and send every waiting call to fetch on its
    own. While anyone watches, a timer every `TICK` seconds notes how late it runs; an idle
    replica pays nothing. The clock stops while the loop is late and never runs backwards.
    """

    TICK = 0.02
    SLACK = 0.005
    """Lateness below this is the timer's own jitter, not a busy loop."""

    __slots__ = ("_due", "_handle", "_late", "_watchers")

    def __init__(self) -> None:
        self._late = 0.0
        self._due = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._watchers = 0

    def now(self) -> float:
        wall = asyncio.get_running_loop().time()
        running_late = max(0.0, wall - self._due - self.SLACK) if self._handle is not None else 0.0
        return wall - self._late - running_late

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Measure the loop's lateness while this block runs."""
        self._watchers += 1
        if self._handle is None:
            self._schedule()
        try:
            yield
        finally:
            self._watchers -= 1
            if not self._watchers and self._handle is not None:
                self._late += max(0.0, asyncio.get_running_loop().time() - self._due - self.SLACK)
                self._handle.cancel()
                self._handle = None

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        self._due = loop.time() + self.TICK
        self._handle = loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        self._late += max(0.0, asyncio.get_running_loop().time() - self._due - self.SLACK)
        self._schedule()


class Queued:
    """One call's commands, waiting for a batch; `sent` is when a batch took them (`StoreClock`)."""

    __slots__ = ("answer", "commands", "orphaned", "sent")

    def __init__(
        self,
        commands: Sequence[Command],
        answer: asyncio.Future[list[Any]],
        orphaned: Callable[[list[Any]], None] | None,
    ) -> None:
        self.commands = commands
        self.answer = answer
        self.orphaned = orphaned
        self.sent: float | None = None


class Batches:
    """Sends queued commands in batches, at most `connections` batches at once."""

    def __init__(
        self, client: aioredis.Redis, connections: int, bound: float, retry_interval: float, clock: StoreClock
    ) -> None:
        self._client = client
        self._clock = clock
        self._connections = connections
        self._bound = bound
        self._retry_interval = retry_interval
        self._waiting: list[Queued] = []
        self._running = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def queue(
        self, commands: Sequence[Command], orphaned: Callable[[list[Any]], None] | None = None
    ) -> Queued:
        """Queue `commands`: their answers (a list, one per command, a `RedisError` for a
        command the store refused) come in `Queued.answer`, or its exception when the batch
        failed. `orphaned` is given the answers if no one awaits them any more."""
        loop = asyncio.get_running_loop()
        queued = Queued(commands, loop.create_future(), orphaned)
        self._waiting.append(queued)
        if self._running < self._connections:
            self._running += 1
            task = loop.create_task(self._send_all())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return queued

    async def _send_all(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = [q for q in self._waiting if not q.answer.done()], []
                if batch:
                    await self._send(batch)
        finally:
            self._running -= 1

    async def _send(self, batch: list[Queued]) -> None:
        now = self._clock.now()
        for queued in batch:
            queued.sent = now
        try:
            async with asyncio.timeout(self._bound), self._client.pipeline(transaction=False) as pipe:
                for queued in batch:
                    for command in queued.commands:
                        pipe.execute_command(*command)
                answers = await pipe.execute(raise_on_error=False)
        except MaxConnectionsError:  # a client passed in, whose pool others use too: try again
            for queued in batch:
                queued.sent = None
            self._waiting[:0] = batch
            await asyncio.sleep(self._retry_interval)
            return
        except (RedisError, OSError, TimeoutError) as exc:
            if isinstance(exc, TimeoutError):  # this batch's bound, told apart from a caller's own
                exc = RedisTimeoutError(f"no answer within {self._bound:g} s")
            for queued in batch:
                if not queued.answer.done():
                    queued.answer.set_exception(exc)
                    queued.answer.exception()  # retrieved: a caller that gave up is not told again
            return
        start = 0
        for queued in batch:
            mine, start = answers[start : start + len(queued.commands)], start + len(queued.commands)
            if not queued.answer.done():
                queued.answer.set_result(mine)
            elif queued.orphaned is not None:
                queued.orphaned(mine)

    async def drain(self) -> None:
        """Wait for the batches under way (each within `bound`)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
