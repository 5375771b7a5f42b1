"""A stdio server driven by the SDK's client, with all it wrote kept: standard output to its exit.

A span exporter that writes to standard output corrupts a stdio server's JSON-RPC, and
the spans flushed as the process exits come after the client has stopped reading. So the
server runs under `tee_stdout.py`, which copies its standard output to a file down to the
last byte, and the SDK's client (which otherwise kills a server that has not exited 2 s
after its input closed) waits for it to exit.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import mcp.client.stdio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

TEE = Path(__file__).with_name("tee_stdout.py")
_T = TypeVar("_T")


@dataclass(frozen=True)
class Captured:
    stdout: str
    """Every byte the server wrote on standard output, to its exit."""
    stderr: str

    def messages(self) -> list[Any]:
        """Standard output as JSON, one value a line: what a stdio client may be sent."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]

    def spans(self) -> list[dict[str, Any]]:
        """The lines of standard error that are JSON objects: spans, one a line."""
        return [json.loads(line) for line in self.stderr.splitlines() if line.startswith("{")]

    def negotiated(self) -> list[dict[str, Any]]:
        """The `capability_negotiated` spans among `spans()`."""
        return [span for span in self.spans() if span["name"] == "capability_negotiated"]

    def eras(self) -> set[str]:
        """The eras of the negotiations the spans record."""
        return {span["attributes"]["mcp.negotiation.era"] for span in self.negotiated()}


def environment(**extra: str) -> dict[str, str]:
    """This environment without any OpenTelemetry setting (the distro's defaults), plus `extra`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update(extra)
    return env


async def captured_session(
    command: list[str],
    directory: Path,
    use: Callable[[Client], Awaitable[_T]],
    *,
    mode: str = "auto",
    env: dict[str, str] | None = None,
) -> tuple[_T, Captured]:
    """Serve `command` over stdio to the SDK's `Client` in `mode`, run `use` on it, and return
    what `use` answered and what the server wrote (files kept in `directory`)."""
    copy, errors = directory / "stdout", directory / "stderr"
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(TEE), str(copy), *command],
        cwd=str(directory),
        env=env if env is not None else environment(),
    )
    grace = mcp.client.stdio.PROCESS_TERMINATION_TIMEOUT
    mcp.client.stdio.PROCESS_TERMINATION_TIMEOUT = 60.0
    try:
        with errors.open("w", encoding="utf-8") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
                answer = await use(client)
    finally:
        mcp.client.stdio.PROCESS_TERMINATION_TIMEOUT = grace
    return answer, _read(copy, errors)


def _read(copy: Path, errors: Path) -> Captured:
    captured = Captured(copy.read_text(encoding="utf-8"), errors.read_text(encoding="utf-8"))
    written = Path(f"{copy}.exit")
    status = written.read_text(encoding="ascii") if written.exists() else "unknown: it was killed"
    assert status == "0", f"the copy of standard output is not whole (exit {status}):\n{captured.stderr}"
    return captured
