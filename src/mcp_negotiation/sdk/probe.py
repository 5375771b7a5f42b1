"""`mcp-negotiation probe`: which revisions a server serves, and what each client loses.

The probe is a client. It connects once per known revision with a chosen capability
map: each legacy revision through its own `initialize` (the SDK's client always offers
its newest, so the handshake is sent as raw params through the SDK's `ClientSession`),
and the modern revision through the SDK's `Client` pinned to it. It reports what the
server answered, never what it hopes.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Final, TextIO

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .. import revisions

PRESETS: Final[Mapping[str, dict[str, Any]]] = {
    "none": {},
    "basic": {"roots": {"listChanged": True}, "sampling": {}},
    "full": {
        "roots": {"listChanged": True},
        "sampling": {"tools": {}, "context": {}},
        "elicitation": {"form": {}, "url": {}},
    },
}


class ProbeError(Exception):
    """A failure a person can act on: the server could not be started or reached."""


class _RawRequest(types.Request[dict[str, Any], str]):
    method: str
    params: dict[str, Any]


@dataclass
class Row:
    revision: str
    era: str
    outcome: str
    answered: str | None = None
    error_code: int | None = None
    error: str | None = None
    server_capabilities: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)

    @property
    def served(self) -> bool:
        return self.outcome in ("agreed", "counter-offer")


def _capability_names(capabilities: Any) -> list[str]:
    dumped = capabilities.model_dump(by_alias=True, exclude_none=True) if capabilities is not None else {}
    return sorted(dumped)


CONNECTION_CLOSED: Final = -32000
"""The SDK client's code for a transport that closed under it (the server exited)."""


def _transport(target: str | list[str], errlog: TextIO) -> Any:
    if isinstance(target, str):
        return streamable_http_client(target)
    return stdio_client(StdioServerParameters(command=target[0], args=target[1:]), errlog=errlog)


def _mcp_error(failure: BaseException) -> MCPError | None:
    """The MCPError inside `failure`, which task groups may have wrapped in groups."""
    if isinstance(failure, MCPError):
        return failure
    for inner in getattr(failure, "exceptions", ()):
        found = _mcp_error(inner)
        if found is not None:
            return found
    return None


def _refusal(failure: BaseException) -> MCPError | None:
    """A refusal by a running server; a closed connection is a crash, not a refusal."""
    found = _mcp_error(failure)
    return found if found is not None and found.error.code != CONNECTION_CLOSED else None


async def _probe_legacy(
    target: str | list[str], revision: str, capabilities: dict[str, Any], errlog: TextIO
) -> Row:
    params = {
        "protocolVersion": revision,
        "capabilities": capabilities,
        "clientInfo": {"name": "mcp-negotiation-probe", "version": "1"},
    }
    try:
        async with _transport(target, errlog) as streams, ClientSession(streams[0], streams[1]) as session:
            request = _RawRequest(method="initialize", params=params)
            result = await session.send_request(request, types.InitializeResult)
    except Exception as failure:
        refused = _refusal(failure)
        if refused is None:
            raise
        return Row(revision, "legacy", "refused", error_code=refused.error.code, error=refused.error.message)
    answered = result.protocol_version
    return Row(
        revision,
        "legacy",
        "agreed" if answered == revision else "counter-offer",
        answered=answered,
        server_capabilities=_capability_names(result.capabilities),
    )


async def _probe_modern(target: str | list[str], revision: str, errlog: TextIO) -> Row:
    try:
        async with Client(_transport(target, errlog), mode=revision) as client:
            caps = _capability_names(client.server_capabilities)
            await client.list_tools()
            return Row(revision, "modern", "agreed", answered=revision, server_capabilities=caps)
    except Exception as failure:
        refused = _refusal(failure)
        if refused is None:
            raise
        return Row(revision, "modern", "refused", error_code=refused.error.code, error=refused.error.message)


def _lost(rows: list[Row]) -> None:
    """Fill each served row with the features it lacks that the best served revision has."""
    served = [row.answered for row in rows if row.served and row.answered]
    best = max(served, key=revisions.KNOWN.index) if served else None
    for row in rows:
        if best and row.served and row.answered:
            row.lost = sorted(
                name
                for name, spec in revisions.FEATURES.items()
                if spec.at(best) and not spec.at(row.answered)
            )


async def probe(
    target: str | list[str], capabilities: dict[str, Any], seconds: float, progress: Any
) -> list[Row]:
    """Probe every known revision, oldest first."""
    if isinstance(target, list) and shutil.which(target[0]) is None:
        raise ProbeError(f"server command not found: {target[0]}")
    rows: list[Row] = []
    with tempfile.TemporaryFile("w+") as errlog:
        for revision in revisions.KNOWN:
            progress(f"probing {revision} …")
            try:
                with anyio.fail_after(seconds):
                    if revisions.era(revision) == "legacy":
                        rows.append(await _probe_legacy(target, revision, capabilities, errlog))
                    else:
                        rows.append(await _probe_modern(target, revision, errlog))
            except TimeoutError:
                rows.append(
                    Row(revision, revisions.era(revision), "timeout", error=f"no answer in {seconds:g} s")
                )
            except Exception as failed:
                errlog.seek(0)
                raise ProbeError(_explain(target, failed, errlog.read())) from failed
    _lost(rows)
    return rows


def _explain(target: str | list[str], failure: BaseException, stderr: str) -> str:
    text = " ".join(str(e) for e in getattr(failure, "exceptions", [failure])) or type(failure).__name__
    if isinstance(target, str):
        if "connect" in text.lower() or "refused" in text.lower():
            return f"URL unreachable: nothing answered at {target} ({text})"
        return f"{target} did not answer as an MCP server ({text})"
    tail = "\n".join(stderr.strip().splitlines()[-10:])
    if _mcp_error(failure) is not None:
        return f"the server `{' '.join(target)}` crashed; the end of its stderr:\n{tail or '(nothing)'}"
    return f"the server `{' '.join(target)}` did not speak MCP ({text})"


def render(rows: list[Row]) -> str:
    header = ("revision", "era", "outcome", "recorded", "server capabilities", "lost vs best")
    lines = [header] + [
        (
            r.revision,
            r.era,
            r.outcome + (f" ({r.error_code})" if r.error_code is not None else ""),
            r.answered or "-",
            ",".join(r.server_capabilities) or "-",
            ",".join(r.lost) or "-",
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def run(
    target: str | list[str] | None, capabilities: dict[str, Any], *, timeout: float, as_json: bool
) -> int:
    """Probe, print, and return the exit status: 0 when every revision was served."""
    chosen = target or [sys.executable, "-m", "mcp_negotiation.demo"]

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    try:
        rows = anyio.run(probe, chosen, capabilities, timeout, progress)
    except ProbeError as failure:
        print(f"mcp-negotiation: {failure}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
    else:
        print(render(rows))
    return 0 if all(r.served for r in rows) else 1
