"""Every revision at once: one connection each (one server process each, over stdio), in
one task group; then the listing a client declaring everything sees (the reference listing).

The modern row reads that listing over its own connection, after its own listings (see
`one_revision`), so when the modern revision is served no connection is added. Only when
it is not (the best served revision is a legacy one: a handshake declares a session's
capabilities once), or when the SDK lets no request name its own client, is the
reference listing read over one more connection, after the rows. Concurrency is bounded
by what is probed: one task per known revision, and nothing else. Every connection is
the SDK's, closed by it on the way out, also when a signal stops the probe (it cancels
the group; the SDK's stdio client then stops each server it started, shielded from the
cancellation).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from ...core import revisions
from .catalogs import EVERY_CAPABILITY, fill_tool_catalogs
from .one_revision import PROBE_CLIENT, probe_revision
from .rows import Entry, ProbeError, Row
from .story import Contradiction, contradictions
from .target import Target
from .uses import Use, best_served, fill_lost, narrowing, uses_of

Progress = Callable[[str], None]


class Stopped(KeyboardInterrupt):
    """A signal stopped the probe (after its servers were stopped)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass
class Findings:
    """Everything one probe found: the rows, and what the report computes from them."""

    target: Target
    capabilities: dict[str, Any]
    rows: list[Row]
    client_info: Mapping[str, str] = field(default_factory=lambda: dict(PROBE_CLIENT))
    """Whom the probe said it was (`--client-info`): the rows are what that client is served."""
    uses: list[Use] = field(default_factory=list)
    contradictions: list[Contradiction] = field(default_factory=list)

    @property
    def best(self) -> str | None:
        return best_served(self.rows)

    @property
    def narrowed(self) -> dict[str, Any] | None:
        return narrowing(self.rows)


async def probe(
    target: Target,
    capabilities: dict[str, Any],
    seconds: float,
    progress: Progress,
    client_info: Mapping[str, str] = PROBE_CLIENT,
) -> Findings:
    """Probe every known revision at once, as the client `client_info` names (the reference
    listing as the probe itself, whom no per-client rule names); raise `ProbeError` when the
    server never answered as a JSON-RPC peer, and `Stopped` when a signal came first."""
    target.check()
    found: dict[str, Row] = {}
    progress(f"probing {', '.join(revisions.KNOWN)} at once …")
    started = time.monotonic()

    async def one(revision: str) -> None:
        found[revision] = row = await probe_revision(target, revision, capabilities, seconds, client_info)
        said = row.outcome + (f" ({row.error_code})" if row.error_code is not None else "")
        progress(f"  {revision}  {said} after {time.monotonic() - started:.1f} s")

    async with _stopped_by_signals() as group:
        for revision in revisions.KNOWN:
            group.start_soon(one, revision)
    rows = [found[revision] for revision in revisions.KNOWN]
    _refuse_when_nothing_answered(target, rows, seconds)
    findings = Findings(target, capabilities, rows, dict(client_info))
    listing = await _reference_listing(findings, seconds)
    fill_tool_catalogs(rows, capabilities, listing)
    findings.uses = uses_of(rows, listing)
    fill_lost(rows, findings.uses)
    findings.contradictions = contradictions(rows)
    return findings


def _refuse_when_nothing_answered(target: Target, rows: list[Row], seconds: float) -> None:
    """A server that answered no revision as a JSON-RPC peer cannot be probed: say why, once."""
    if any(row.answered_as_peer for row in rows):
        return
    failed = next((row for row in rows if row.outcome == "failed"), None)
    if failed is not None:
        raise ProbeError(failed.detail or failed.error or "failed")
    if any(row.wrote_non_jsonrpc for row in rows):
        raise ProbeError(
            f"{target.named} did not speak MCP: it wrote output that is not JSON-RPC "
            f"and answered nothing in {seconds:g} s"
        )


async def _reference_listing(findings: Findings, seconds: float) -> tuple[Entry, ...]:
    """The entries listed to a client declaring every capability at the best served revision:
    what a server that scopes its listing (`Policy(hide_unusable=True)`) hides from no one.
    The modern row brings it; otherwise it is read over a connection of its own, after the rows."""
    best = next(
        (row for row in reversed(findings.rows) if row.served and row.answered in revisions.KNOWN), None
    )
    if best is None or not best.listed:
        return ()
    listed = best.reference
    if listed is None:
        row = await probe_revision(findings.target, best.revision, dict(EVERY_CAPABILITY), seconds)
        if not row.served:  # the rows stand without it: only what is hidden from all goes unseen
            return ()
        listed = row.listed or {}
    return tuple(entry for entries in listed.values() for entry in entries)


@asynccontextmanager
async def _stopped_by_signals() -> AsyncIterator[anyio.abc.TaskGroup]:
    """A task group that Ctrl-C, SIGTERM (`timeout`, a CI runner) and SIGHUP cancel, raising
    `Stopped` once the servers it started are stopped.

    The SDK starts stdio servers in a session of their own, so a signal to the probe's
    process group never reaches them: only the probe's own exit path closes them.
    """
    wanted = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    if threading.current_thread() is not threading.main_thread():  # only there can handlers be set
        wanted = []
    received: list[int] = []

    async def listen(scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(*wanted) as signals:
            task_status.started()
            async for signum in signals:
                received.append(signum)
                scope.cancel()
                return

    async with anyio.create_task_group() as outer:
        if wanted:
            await outer.start(listen, outer.cancel_scope)
        async with anyio.create_task_group() as group:
            yield group
        outer.cancel_scope.cancel()
    if received:
        raise Stopped(received[0])
