"""The `mcp-negotiation probe` command, run as users run it: a subprocess."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_negotiation.core import revisions
from mcp_negotiation.tools.demo import build
from support.harness import ROOT, serve_http
from support.harness import run_probe as _probe


def _rows(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(done.stdout)["revisions"]
    return rows


def test_bundled_example_is_served_at_every_revision() -> None:
    done = _probe("--json")
    assert done.returncode == 0, done.stderr
    rows = _rows(done)
    assert [r["revision"] for r in rows] == list(revisions.KNOWN)
    assert all(r["outcome"] == "agreed" and r["answered"] == r["revision"] for r in rows)
    assert done.stderr.startswith(f"probing {', '.join(revisions.KNOWN)} at once")
    assert all(f"  {revision}  agreed after " in done.stderr for revision in revisions.KNOWN)
    # What this server uses and loses: its tools' outputSchema, nothing of elicitation it never asks for.
    assert [r["lost"] for r in rows] == [["structured_output"], ["structured_output"], [], [], []]


def test_matrix_output_names_every_revision() -> None:
    done = _probe()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    table = lines.index(next(line for line in lines if line.startswith("revision ")))
    assert lines[table].split()[:4] == ["revision", "era", "outcome", "recorded"]
    rows = lines[table + 1 : table + 1 + len(revisions.KNOWN)]
    assert [line.split()[0] for line in rows] == list(revisions.KNOWN)


def test_human_output_says_what_was_probed_fits_100_columns_and_has_a_legend() -> None:
    done = _probe("--", sys.executable, "-m", "mcp_negotiation.tools.demo", "--max-revision", "2025-11-25")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    probed = lines[: lines.index(next(line for line in lines if line.startswith("server ")))]
    said = " ".join(" ".join(probed).split())  # a long command wraps
    demo = f"{sys.executable} -m mcp_negotiation.tools.demo --max-revision 2025-11-25"
    assert said == f"probed the server `{demo}` (stdio)"
    lines = lines[len(probed) - 1 :]
    assert lines[1] == "server   minimal (no version, as it told 2025-11-25)"
    assert lines[2] == "as       mcp-negotiation-probe 1 (the clientInfo sent: per-client rules apply)"
    assert lines[3].startswith("offered  roots, roots.listChanged, sampling (the client capabilities")
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    text = done.stdout
    assert "lost (best served: 2025-11-25)" in text
    assert "  2025-11-25  nothing" in text
    assert "  2026-07-28  not served: Unsupported protocol version: 2026-07-28" in text
    legend = text.split("\nlegend\n", 1)[1]
    for term in ("outcome", "recorded", "server capabilities", "uses", "lost", "tools", "versions"):
        assert f"  {term} " in legend
    assert "counter-offer: a legacy server answered another one" in " ".join(legend.split())


def test_json_carries_the_full_detail() -> None:
    done = _probe("--json", "--capabilities", "full")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["target"] == [sys.executable, "-m", "mcp_negotiation.tools.demo"]
    assert out["capabilities"]["elicitation"] == {"form": {}, "url": {}}
    assert out["best"] == "2026-07-28"
    legacy = out["revisions"][0]
    assert legacy["server_info"]["name"] == "minimal"
    assert set(legacy) >= {"revision", "era", "outcome", "answered", "error", "lost", "ucp_advertised"}


def test_a_bare_host_and_port_is_told_to_add_the_scheme() -> None:
    done = _probe("127.0.0.1:8765/mcp")
    assert done.returncode == 2
    assert "server command not found: 127.0.0.1:8765/mcp (to probe a URL, give its scheme:" in done.stderr
    assert "http://127.0.0.1:8765/mcp)" in done.stderr
    assert "give its scheme" not in _probe("--", "no-such-mcp-server-command").stderr


def test_help_shows_examples_and_exit_statuses() -> None:
    done = _probe("--help")
    assert done.returncode == 0
    assert "examples:\n  mcp-negotiation probe " in done.stdout
    assert "mcp-negotiation probe http://127.0.0.1:8000/mcp" in done.stdout
    assert "exit status (for CI):\n  0 " in done.stdout
    assert "--header NAME:VALUE" in done.stdout
    assert "128+N" in done.stdout


def test_server_refusing_old_revisions_shows_counter_offers() -> None:
    done = _probe(
        "--json", "--", sys.executable, "-m", "mcp_negotiation.tools.demo", "--min-revision", "2025-06-18"
    )
    assert done.returncode == 0, done.stderr
    by_revision = {r["revision"]: r for r in _rows(done)}
    assert by_revision["2024-11-05"]["outcome"] == "counter-offer"
    assert by_revision["2024-11-05"]["answered"] == "2025-11-25"
    assert by_revision["2025-06-18"]["outcome"] == "agreed"


def test_server_refusing_the_modern_revision_exits_nonzero() -> None:
    done = _probe(
        "--json", "--", sys.executable, "-m", "mcp_negotiation.tools.demo", "--max-revision", "2025-11-25"
    )
    assert done.returncode == 1
    modern = _rows(done)[-1]
    assert (modern["revision"], modern["outcome"], modern["error_code"]) == ("2026-07-28", "refused", -32022)


def test_probe_over_http() -> None:
    with serve_http(build().streamable_http_app()) as url:
        done = _probe("--json", url)
    assert done.returncode == 0, done.stderr
    assert all(r["outcome"] == "agreed" for r in _rows(done))


def test_missing_command_is_explained() -> None:
    done = _probe("--", "no-such-mcp-server-command")
    assert done.returncode == 2
    assert "server command not found: no-such-mcp-server-command" in done.stderr


def test_crashing_server_is_explained() -> None:
    done = _probe("--timeout", "30", "--", sys.executable, "-c", "import sys; sys.exit('boom at start')")
    assert done.returncode == 2
    assert "crashed" in done.stderr
    assert "boom at start" in done.stderr


def test_unreachable_url_is_explained() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    done = _probe(f"http://127.0.0.1:{port}/mcp")
    assert done.returncode == 2
    assert "unreachable" in done.stderr or "did not answer" in done.stderr


def test_capabilities_option_rejects_garbage() -> None:
    done = _probe("--capabilities", "{not json")
    assert done.returncode == 2
    assert "not a preset" in done.stderr


def test_modern_row_reports_the_discovered_server_capabilities() -> None:
    done = _probe("--json", "--capabilities", "full")
    assert done.returncode == 0, done.stderr
    modern = _rows(done)[-1]
    assert modern["revision"] == "2026-07-28"
    assert "tools" in modern["server_capabilities"]


def test_ucp_profile_is_negotiated_against_what_the_shop_advertises() -> None:
    shop = [sys.executable, str(ROOT / "examples/ucp_shop.py")]
    platform = str(ROOT / "examples/ucp/platform_profile.json")
    done = _probe("--json", "--ucp-profile", platform, "--", *shop)
    assert done.returncode == 0, done.stderr
    ucp = json.loads(done.stdout)["ucp"]
    assert ucp == {
        "version": "2026-04-08",
        "capabilities": {
            "dev.ucp.shopping.checkout": "2026-04-08",
            "dev.ucp.shopping.fulfillment": "2026-04-08",
        },
        "dropped": {
            "dev.ucp.shopping.cart": "not_offered",
            "dev.ucp.shopping.discount": "not_offered",
            "dev.ucp.shopping.gift_wrap": "no_common_version",
        },
    }
    text = _probe("--ucp-profile", platform, "--", *shop)
    assert "dropped  dev.ucp.shopping.gift_wrap (no_common_version)" in text.stdout
    assert max(map(len, text.stdout.splitlines())) <= 100


def test_ucp_profile_against_a_server_without_ucp_exits_1() -> None:
    done = _probe("--json", "--ucp-profile", str(ROOT / "examples/ucp/platform_profile.json"))
    assert done.returncode == 1
    assert json.loads(done.stdout)["ucp"] == {"error": "the server advertises no UCP profile"}


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (None, "cannot read {}: No such file or directory"),
        ('{"ucp": 5}', "{}: profile_malformed (a profile must have a ucp object)"),
    ],
    ids=["missing", "malformed"],
)
def test_an_unusable_ucp_profile_is_a_bad_option(tmp_path: Path, content: str | None, error: str) -> None:
    platform = tmp_path / "platform.json"
    if content is not None:
        platform.write_text(content)
    done = _probe("--ucp-profile", str(platform))
    assert done.returncode == 2
    assert f"argument --ucp-profile: {error.format(platform)}" in done.stderr
    assert "probing" not in done.stderr  # refused before any server was started
    assert done.stdout == ""


@pytest.mark.parametrize("value", ["0", "-1", "nan", "soon"])
def test_a_timeout_that_allows_no_answer_is_a_bad_option(value: str) -> None:
    done = _probe("--timeout", value)
    assert done.returncode == 2
    assert "argument --timeout:" in done.stderr
    assert "probing" not in done.stderr


def test_a_server_whose_output_is_not_json_rpc_did_not_speak_mcp() -> None:
    """The SDK's client skips such lines; five revisions left unanswered are said once, not as
    five timeouts."""
    chatter = "print('hello, not JSON-RPC', flush=True); import sys; sys.stdin.read()"
    done = _probe("--timeout", "5", "--", sys.executable, "-c", chatter)
    assert done.returncode == 2
    said = "did not speak MCP: it wrote output that is not JSON-RPC and answered nothing in 5 s"
    assert said in done.stderr
    assert done.stderr.count("did not speak MCP") == 1
    assert "Traceback" not in done.stderr  # the SDK's per-line traceback is not the user's concern
