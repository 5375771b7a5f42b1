"""JSON-RPC over a stdio subprocess, written and read line by line by the test itself.

No SDK client in between, so the very same bytes reach a server on either SDK major (this
module imports neither): what one sends is what the server gets, params the SDK's client
would refuse to send included. Every wait is bounded (`TIMEOUT`); nothing sleeps.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

__all__ = ["NO_PARAMS", "TIMEOUT", "StdioPeer", "stdio_peer"]

TIMEOUT: Final = 60.0
"""Seconds any one answer, or the server's exit once its input is closed, may take."""
MAX_LINE: Final = 1 << 22
NO_PARAMS: Final[Any] = object()
"""A message sent without a `params` member."""


class StdioPeer:
    """One server subprocess: send it requests and notifications, read its answers."""

    def __init__(self, process: Process) -> None:
        self._process = process
        assert process.stdout is not None
        self._lines = BufferedByteReceiveStream(process.stdout)
        self._next_id = 0
        self.notifications: list[dict[str, Any]] = []
        """What the server sent that answers nothing (its log messages, say), in order."""

    async def _send(self, message: dict[str, Any]) -> None:
        assert self._process.stdin is not None
        await self._process.stdin.send(json.dumps(message).encode() + b"\n")

    async def notify(self, method: str, params: Any = NO_PARAMS) -> None:
        await self._send(_message(method, params))

    async def request(self, method: str, params: Any = NO_PARAMS) -> dict[str, Any]:
        """The answer to one request: its `result` or `error` member, as `{"result": ...}` or
        `{"error": ...}`. A request the server sends meanwhile fails the test (none is scripted)."""
        self._next_id += 1
        sent = self._next_id
        await self._send({**_message(method, params), "id": sent})
        with anyio.fail_after(TIMEOUT):
            while True:
                line = await self._lines.receive_until(b"\n", MAX_LINE)
                message = json.loads(line)
                if "method" in message and "id" not in message:
                    self.notifications.append(message)
                    continue
                assert message.get("id") == sent, f"answered {message!r} while waiting for id {sent}"
                return {key: value for key, value in message.items() if key in ("result", "error")}

    async def close(self) -> int:
        """Close the server's input and wait for it to exit: its exit status."""
        assert self._process.stdin is not None
        await self._process.stdin.aclose()
        with anyio.fail_after(TIMEOUT):
            return await self._process.wait()


def _message(method: str, params: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not NO_PARAMS:
        message["params"] = params
    return message


@asynccontextmanager
async def stdio_peer(command: Sequence[str], stderr: Path, cwd: Path) -> AsyncIterator[StdioPeer]:
    """The server `command` runs, its standard error kept in the file `stderr`; killed if the
    test leaves without having closed it (`StdioPeer.close`)."""
    with stderr.open("wb") as errors:
        process = await anyio.open_process(
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, cwd=cwd
        )
        async with process:
            try:
                yield StdioPeer(process)
            finally:
                if process.returncode is None:
                    process.kill()
