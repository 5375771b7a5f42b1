"""`mcp-negotiation probe`: which revisions a server serves, and what its clients lose.

The probe is a client. It connects once per known revision, all at once, with a chosen
capability map, and reports what the server answered, never what it hopes:

- `one_revision`: one revision over one connection of its own, as a `Row`;
- `matrix`: every revision at once, and the listing a client declaring everything sees;
- `uses`, `catalogs`, `story`: what the report computes from the rows (what this server
  uses and each revision loses, the tools each client sees, whether its versions agree);
- `render`, `command`: the human output, `--json` and the exit status;
- `target`, `watch`, `rows`, `ucp_outcome`: what is probed, what the probe notices beneath
  the SDK's client, the rows themselves, and `--ucp-profile`.
"""

from __future__ import annotations

from .command import run
from .matrix import Findings, probe
from .rows import ProbeError, Row
from .ucp_outcome import render_ucp, ucp_outcome

__all__ = ["Findings", "ProbeError", "Row", "probe", "render_ucp", "run", "ucp_outcome"]
