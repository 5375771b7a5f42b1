"""The probe's reference listing (the tools a client declaring everything sees) is read over
the modern row's own connection: a second round of list requests naming, in their own
`_meta`, the probe and every capability. Five server processes for five revisions, one
`server/discover` over HTTP, and still every tool a scoping server hides from the client
probed as; only a legacy best revision, or an SDK with no way to name a request's client
(`tools/probe/sdk_seams.py`), costs one connection more."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession

from mcp_negotiation.tools.probe.catalogs import EVERY_CAPABILITY
from mcp_negotiation.tools.probe.one_revision import PROBE_CLIENT
from mcp_negotiation.tools.probe.sdk_seams import let_requests_name_their_client
from support.harness import EXAMPLES, ROOT, run_probe, serve_http
from tool_catalogs import build

COUNTED = [sys.executable, str(ROOT / "tests" / "support" / "servers" / "counted.py")]
HIDING = [str(EXAMPLES / "tool_catalogs.py"), "--hide"]
"""Lists `summarize` (sampling) and `ask_user` (form elicitation) only to clients that can use them."""
OVERRIDDEN = [str(ROOT / "tests" / "support" / "servers" / "variants_overridden.py")]
"""Serves `acme-desk` `research` in its `lookup` variant, whatever it declares."""
FULL = {"roots": {}, "sampling": {}, "elicitation": {"form": {}}}
MODERN = "2026-07-28"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def _counted_probe(starts: Path, *args: str, server: list[str], status: int = 0) -> dict[str, dict[str, Any]]:
    """The `--json` rows of a probe of `server`, each of whose processes adds a line to `starts`."""
    done = run_probe("--json", *args, "--", *COUNTED, str(starts), *server)
    assert done.returncode == status, done.stderr
    return {row["revision"]: row for row in json.loads(done.stdout)["revisions"]}


def _started(starts: Path) -> int:
    return len(starts.read_text().splitlines())


def test_tools_hidden_from_every_row_are_found_over_the_modern_rows_own_connection(tmp_path: Path) -> None:
    """No row's client can use `summarize` or `ask_user`, so no row is listed them: only a
    listing that declares every capability (not the row's none) finds them, and it took no
    sixth server process."""
    starts = tmp_path / "starts"
    rows = _counted_probe(starts, "--capabilities", "none", server=HIDING)
    assert _started(starts) == 5
    for revision, row in rows.items():
        assert (row["tools"], row["tools_lost"]) == (["echo"], ["summarize", "ask_user"]), revision


def test_the_client_named_by_client_info_is_not_the_reference_listings(tmp_path: Path) -> None:
    """`acme-desk`'s rule serves it `research` in a variant; the reference listing, read over
    that same modern connection, is the probe's, so the modern row still shows the variant."""
    starts = tmp_path / "starts"
    rows = _counted_probe(
        starts, "--capabilities", json.dumps(FULL), "--client-info", "acme-desk/1.0", server=OVERRIDDEN
    )
    assert _started(starts) == 5
    assert rows[MODERN]["tools_varied"] == ["research"]
    assert all(row["tools_varied"] == ["research"] for row in rows.values()), rows


def test_a_legacy_best_revision_is_listed_again_over_one_connection_more(tmp_path: Path) -> None:
    """A handshake declares a session's capabilities once: the reference listing at a legacy
    revision is read after the rows, over a connection (a server process) of its own."""
    starts = tmp_path / "starts"
    rows = _counted_probe(
        starts, server=["-m", "mcp_negotiation.tools.demo", "--max-revision", "2025-11-25"], status=1
    )
    assert rows[MODERN]["outcome"] == "refused"
    assert _started(starts) == 6


def test_where_no_request_can_name_its_client_the_probe_connects_once_more(tmp_path: Path) -> None:
    """An SDK without the seam: the reference listing comes over a sixth connection, and it
    still finds what every row's client was hidden."""
    starts = tmp_path / "starts"
    without_the_seam = (
        "import sys; import mcp_negotiation.tools.probe.one_revision as one;"
        " one.let_requests_name_their_client = lambda session: False;"
        " from mcp_negotiation.tools.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    command = ["probe", "--json", "--capabilities", "none", "--", *COUNTED, str(starts), *HIDING]
    done = subprocess.run(
        [sys.executable, "-c", without_the_seam, *command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["revisions"]
    assert _started(starts) == 6
    assert all(row["tools_lost"] == ["summarize", "ask_user"] for row in rows), rows


def test_without_a_stamp_to_wrap_the_seam_changes_nothing() -> None:
    send, receive = anyio.create_memory_object_stream[Any](1)
    with send, receive:
        session = ClientSession(receive, send)
        del session._stamp
        assert not let_requests_name_their_client(session)
        assert not hasattr(session, "_stamp")


def _recording(app: App, requests: list[dict[str, Any]]) -> App:
    """`app`, keeping each JSON-RPC request it is posted, as sent."""

    async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        body = bytearray()

        async def tapped() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
                if not message.get("more_body"):
                    with contextlib.suppress(ValueError):
                        sent = json.loads(body)
                        if isinstance(sent, dict) and "method" in sent:
                            requests.append(sent)
            return message

        await app(scope, tapped, send)

    return recorded


def test_over_http_the_modern_row_lists_twice_with_one_discover() -> None:
    """The modern `tools/list` requests, as the server received them: the row's, as the client
    named with the capabilities declared, then the reference listing's, as the probe declaring
    everything. One `server/discover`: no second modern connection."""
    requests: list[dict[str, Any]] = []
    with serve_http(_recording(build(hide=True).streamable_http_app(), requests)) as url:
        done = run_probe("--json", "--capabilities", "none", "--client-info", "acme-desk/1.0", url)
    assert done.returncode == 0, done.stderr
    rows = {row["revision"]: row for row in json.loads(done.stdout)["revisions"]}
    assert rows[MODERN]["tools_lost"] == ["summarize", "ask_user"]
    assert sum(request["method"] == "server/discover" for request in requests) == 1
    listed_as = [
        (meta[types.CLIENT_INFO_META_KEY], meta[types.CLIENT_CAPABILITIES_META_KEY])
        for request in requests
        if request["method"] == "tools/list"
        and (meta := _meta(request)).get(types.PROTOCOL_VERSION_META_KEY) == MODERN
    ]
    assert listed_as == [({"name": "acme-desk", "version": "1.0"}, {}), (PROBE_CLIENT, EVERY_CAPABILITY)]


def _meta(request: dict[str, Any]) -> dict[str, Any]:
    meta = (request.get("params") or {}).get("_meta")
    return meta if isinstance(meta, dict) else {}
