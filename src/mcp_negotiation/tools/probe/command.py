"""`mcp-negotiation probe`'s body: probe, print (human or `--json`), and the exit status.

Exit status (docs/probe.md, `--help`): 0 when every revision was served, the versions tell
one story and UCP agreed if asked; 1 when the server answered as a JSON-RPC peer but not
all of that holds; 2 when it could not be probed; 128 + N when signal N stopped it.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import anyio

from ...ucp import Profile
from .matrix import Findings, Stopped, probe
from .one_revision import PROBE_CLIENT, client_options
from .render import render
from .rows import ProbeError
from .story import versions
from .target import DEMO, Target
from .ucp_outcome import render_ucp, ucp_outcome


def report(findings: Findings, ucp: dict[str, Any] | None, status: int) -> dict[str, Any]:
    """The `--json` object (docs/probe.md documents each field)."""
    return {
        "target": findings.target.as_json,
        "headers": [name for name, _ in findings.target.headers],
        "capabilities": findings.capabilities,
        "client_info": dict(findings.client_info),
        "best": findings.best,
        "narrowed": findings.narrowed,
        "uses": [use.as_dict() for use in findings.uses],
        "versions": versions(findings.rows),
        "revisions": [row.as_dict() for row in findings.rows],
        "ucp": ucp,
        "exit": status,
    }


def exit_status(findings: Findings, ucp: dict[str, Any] | None) -> int:
    """0 when everything asked for holds; else 1 (the server answered, so there is a table)."""
    served = all(row.served for row in findings.rows)
    return 0 if served and not findings.contradictions and (ucp is None or "error" not in ucp) else 1


def run(
    target: str | list[str] | None,
    capabilities: dict[str, Any],
    *,
    timeout: float,
    as_json: bool,
    ucp_profile: Profile | None = None,
    headers: tuple[tuple[str, str], ...] = (),
    client_info: dict[str, str] | None = None,
) -> int:
    """Probe, print, and return the exit status."""
    chosen = Target(target or [sys.executable, *DEMO], headers)
    # The SDK's clients log a traceback for every line of a server's output that is not
    # JSON-RPC and for every HTTP answer that is not MCP's; the probe says it in one line.
    for name in ("mcp.client.stdio", "mcp.client.streamable_http"):
        logging.getLogger(name).setLevel(logging.CRITICAL)

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def failed(message: str, status: int) -> int:
        print(f"mcp-negotiation: {message}", file=sys.stderr)
        if as_json:  # still one object on stdout, for scripts that parse it
            print(json.dumps({"error": message, "exit": status}, indent=2))
        return status

    try:
        client_options(capabilities)
    except Exception as bad:
        return failed(f"bad --capabilities for the modern row: {bad}", 2)
    try:
        findings = anyio.run(probe, chosen, capabilities, timeout, progress, client_info or PROBE_CLIENT)
    except ProbeError as failure:
        return failed(str(failure), 2)
    except Stopped as stop:
        return failed(f"stopped by signal {stop.signum}", 128 + stop.signum)
    ucp = ucp_outcome(findings.rows, ucp_profile) if ucp_profile else None
    status = exit_status(findings, ucp)
    if as_json:
        print(json.dumps(report(findings, ucp, status), indent=2))
    else:
        print(render(findings))
        if ucp is not None:
            print("\n" + render_ucp(ucp))
    return status
