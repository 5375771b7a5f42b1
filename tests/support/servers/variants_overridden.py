"""examples/tool_variants.py's server with one per-client rule: `acme-desk` declares
`elicitation` and never renders it, so it is served `research` as `lookup` whatever it
declares. Over stdio, for the probe's tests (`--client-info acme-desk/1.0`)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))

from mcp_negotiation import ClientOverride, Policy
from tool_variants import build

RULE = ClientOverride("acme-desk", revoke=["elicitation"], id="acme-desk-never-asks")

if __name__ == "__main__":
    build(policy=Policy(client_overrides=[RULE])).run("stdio")
