"""Log lines a client can cause: a bounded number, and never a traceback above DEBUG.

Anything a request can make happen (a profile URL that fails, a resolver's bug, a
telemetry pipeline failing on every request) is logged on the event loop, by whatever
handler the application installed. `MCPServer` installs Rich's with `rich_tracebacks`
when Rich is importable, and it takes a second or two to format one traceback: a client
naming twenty failing URLs would stall every other client for half a minute. So a line
caused by a client carries the exception's type and (shortened) text, its traceback is
logged at DEBUG only, and each kind of line (its message template) is written at most
`LINES_PER_WINDOW` times per `WINDOW` seconds, the number left out being told with the
next one written.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Final

__all__ = ["LINES_PER_WINDOW", "WINDOW", "report"]

logger = logging.getLogger("mcp_negotiation")

WINDOW: Final = 60.0
"""Seconds over which the lines of one kind are counted."""
LINES_PER_WINDOW: Final = 20
"""Lines of one kind written per `WINDOW`; the rest are counted, not written."""
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
        logger.debug("mcp_negotiation: the traceback of the line above", exc_info=exc)
