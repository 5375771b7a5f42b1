"""A CI gate on `mcp-negotiation probe --json`: the revisions your clients speak must be served
and lose nothing this server uses, and the server must tell one story about its versions.

    python examples/probe_gate.py --need 2025-06-18 --need 2026-07-28 -- python server.py
    python examples/probe_gate.py --need 2025-11-25 --header "Authorization: Bearer $TOKEN" URL

Everything after the gate's own options goes to the probe. Exit status: 0 when the gate
passes; 1 when it fails, with one line per reason; 2 when the probe could not probe
(its own exit status 2: the server is not there, not MCP, or wants other credentials).
"""

import argparse
import json
import subprocess
import sys
from typing import Any

SERVED = ("agreed", "counter-offer")


def reasons_to_fail(report: dict[str, Any], needed: list[str]) -> list[str]:
    """What keeps the gate shut, read from the probe's documented `--json` fields."""
    rows = {row["revision"]: row for row in report["revisions"]}
    reasons = []
    for revision in needed:
        row = rows.get(revision)
        if row is None:
            reasons.append(f"{revision}: not a revision the probe knows")
        elif row["outcome"] not in SERVED:
            reasons.append(f"{revision}: {row['outcome']} ({row['error']})")
        elif row["lost"]:
            reasons.append(f"{revision}: a client loses {', '.join(row['lost'])}")
    for found in report["versions"]["contradictions"]:
        reasons.append(f"versions at {found['revision']}: {found['text']}")
    return reasons


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--need", action="append", default=[], metavar="REVISION")
    args, probe_args = parser.parse_known_args(argv)
    # The probe of the Python running this gate: the same program as `mcp-negotiation probe`.
    probe = [sys.executable, "-m", "mcp_negotiation.tools.cli", "probe", "--json", *probe_args]
    done = subprocess.run(probe, capture_output=True, text=True)
    report = json.loads(done.stdout)
    if done.returncode == 2 or "error" in report:
        print(f"gate: could not probe: {report.get('error')}", file=sys.stderr)
        return 2
    reasons = reasons_to_fail(report, args.need)
    for reason in reasons:
        print(f"gate: {reason}", file=sys.stderr)
    if not reasons:
        print(f"gate: passed ({', '.join(args.need) or 'no revision needed'}; exit {report['exit']})")
    return 1 if reasons else 0


if __name__ == "__main__":
    sys.exit(main())
