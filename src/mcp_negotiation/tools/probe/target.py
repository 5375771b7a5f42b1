"""What is probed: a URL (streamable HTTP, with the operator's headers) or a command (stdio),
how it is named where output may be shared, and the SDK's transport to it."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TextIO

import httpx2
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from .rows import ProbeError, shown

if TYPE_CHECKING:
    from .watch import Watch

DEMO: Final = ("-m", "mcp_negotiation.tools.demo")
"""The bundled example server's arguments to Python: what is probed when nothing is named."""

_HOST_PORT: Final = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[\w.-]+):[0-9]{1,5}(?:/\S*)?")
"""`host:port[/path]`: a URL without its scheme, which would otherwise be run as a command."""


@dataclass(frozen=True)
class Target:
    where: str | list[str]
    """The URL, or the command and its arguments."""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """HTTP headers sent with every request (`--header`); never printed: they hold secrets."""

    @property
    def is_http(self) -> bool:
        return isinstance(self.where, str)

    @property
    def named(self) -> str:
        where = self.where
        return shown(where) if isinstance(where, str) else f"the server `{' '.join(where)}`"

    @property
    def as_json(self) -> str | list[str]:
        return shown(self.where) if isinstance(self.where, str) else self.where

    def check(self) -> None:
        """Refuse a command that is not there before any connection is tried."""
        if isinstance(self.where, list) and shutil.which(self.where[0]) is None:
            hint = ""
            if len(self.where) == 1 and _HOST_PORT.fullmatch(self.where[0]):
                hint = f" (to probe a URL, give its scheme: http://{self.where[0]})"
            raise ProbeError(f"server command not found: {self.where[0]}{hint}")

    @contextlib.asynccontextmanager
    async def transport(self, errlog: TextIO, watch: Watch) -> AsyncIterator[Any]:
        """The SDK's transport to the target; a stdio server gets the operator's environment,
        as it would run from their shell (the SDK passes on only a handful of variables)."""
        if isinstance(self.where, str):
            timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's own defaults
            async with (
                httpx2.AsyncClient(
                    timeout=timeout, headers=list(self.headers), event_hooks={"response": [watch.response]}
                ) as http,
                streamable_http_client(self.where, http_client=http) as streams,
            ):
                yield streams
            return
        command, *args = self.where
        parameters = StdioServerParameters(command=command, args=args, env=dict(os.environ))
        async with stdio_client(parameters, errlog=errlog) as streams:
            yield streams
