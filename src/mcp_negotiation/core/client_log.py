"""Log lines a client can cause: a bounded number, and never a traceback above DEBUG.

Anything a request can make happen (a profile URL that fails, a resolver's bug, a
telemetry pipeline failing on every request) is logged on the event loop, by whatever
handler the application installed. `MCPServer` installs Rich's with `rich_tracebacks`
when Rich is importable, and it takes a second or two to format one traceback: a client
naming twenty failing URLs would stall every other client for half a minute. So a line
caused by a client carries the exception's type and (shortened) text, its traceback is
logged at DEBUG only, and each kind of line (its message template) is written at most
`LINES_PER_WINDOW` times per `WINDOW` seconds, the number left out being told with the
next one written. A line said once per key (an unknown feature name) asks `first_time`,
which remembers at most `MAX_KEYS` keys, whoever chooses them.

The budget is the process's: `reset` starts it afresh, for a test that must see the lines
it causes whatever earlier tests logged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Final

__all__ = ["LINES_PER_WINDOW", "MAX_KEYS", "WINDOW", "first_time", "report", "reset"]

logger = logging.getLogger("mcp_negotiation")

WINDOW: Final = 60.0
"""Seconds over which the lines of one kind are counted."""
LINES_PER_WINDOW: Final = 20
"""Lines of one kind written per `WINDOW`; the rest are counted, not written."""
MAX_KEYS: Final = 256
"""Keys `first_time` remembers; past that every key counts as seen, and nothing is logged."""
_EXCEPTION_TEXT: Final = 200
"""Characters of an exception's text kept in a line: its gist, not what a peer sent."""


class _Window:
    __slots__ = ("left_out", "start", "written")

    def __init__(self, start: float) -> None:
        self.start = start
        self.written = self.left_out = 0


_clock = time.monotonic
_lock = threading.Lock()
_windows: dict[str, _Window] = {}
"""Per message template: a fixed set (the library's own call sites), so this stays small."""
_seen: set[str] = set()
"""The keys `first_time` was given, up to `MAX_KEYS`."""


def reset(clock: Callable[[], float] = time.monotonic) -> None:
    """Start the budget afresh: every kind of line has its whole window again, every key of
    `first_time` is new again, and windows are counted on `clock` (seconds) from now on.

    For tests: lines an earlier test caused count against a later one, and a test of the
    window itself steps time on a clock of its own.
    """
    global _clock
    with _lock:
        _windows.clear()
        _seen.clear()
        _clock = clock


def first_time(key: str) -> bool:
    """Whether `key` is new (then it is remembered): for a line logged once per key. Past
    `MAX_KEYS` keys every key counts as seen, so whoever chooses them cannot grow the set."""
    with _lock:
        if key in _seen or len(_seen) >= MAX_KEYS:
            return False
        _seen.add(key)
        return True


def _admit(template: str) -> tuple[bool, int]:
    """Whether a line of this kind may be written now, and how many were left out before it."""
    now = _clock()
    with _lock:
        window = _windows.setdefault(template, _Window(now))
        if now - window.start >= WINDOW:
            window.start, window.written = now, 0
        if window.written >= LINES_PER_WINDOW:
            window.left_out += 1
            return False, 0
        window.written += 1
        left_out, window.left_out = window.left_out, 0
        return True, left_out


def report(level: int, template: str, *args: object, exc: BaseException | None = None) -> None:
    """Log a line a client caused, within its kind's budget; `exc`'s traceback at DEBUG only."""
    if not logger.isEnabledFor(level):
        return
    admitted, left_out = _admit(template)
    if not admitted:
        return
    if exc is not None:
        text = str(exc)[:_EXCEPTION_TEXT]
        template, args = f"{template} [%s: %r]", (*args, type(exc).__name__, text)
    if left_out:
        template, args = f"{template} (%d more like this not logged)", (*args, left_out)
    logger.log(level, template, *args)
    if exc is not None and logger.isEnabledFor(logging.DEBUG):
        logger.debug("the traceback of the line above", exc_info=exc)
