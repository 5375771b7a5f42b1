"""A fleet: three uvicorn replicas (separate processes) behind HAProxy, sharing Redis.

Each replica runs the example shop (examples/ucp_shop.py's policy) with its resolver's
profile cache shared through Redis (tests/support/servers/fleet_replica.py). HAProxy keeps a
legacy session on the replica that answered its `initialize` (a stick table on the
`Mcp-Session-Id` response header) and balances modern requests round robin
(tests/support/haproxy.cfg.template, shown in docs/deployment.md). Platform profiles come from a
local HTTPS host that counts its hits.

200 clients of both eras, each with its own capabilities and platform, make a few
thousand calls; one replica is stopped mid-run. What must hold:

- no cross-talk: every answer is the negotiation of the client that asked;
- no errors but the intended refusals (a malformed platform profile, a platform without
  checkout), and, for the legacy sessions of the stopped replica, the SDK's own
  "Session terminated", after which they initialize again; modern clients carry on;
- each good profile fetched once across the fleet, the failing one once per backoff.
"""

from __future__ import annotations

import json
import math
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import trustme
from mcp import Client
from mcp.shared.exceptions import MCPError

from support.harness import ROOT, legacy_session, open_streams, structured
from support.profile_server import ProfileServer, Route, Tls
from support.services import HAPROXY_TEMPLATE, Redis, haproxy, redis_server

pytestmark = pytest.mark.anyio

V = "2026-04-08"
CHECKOUT = "dev.ucp.shopping.checkout"
REPLICAS = 3
CLIENTS = 200
CALLS = 10
"""Calls per client: 200 x 10 = 2000 tool calls, plus the initializes."""
STOP_AFTER = CLIENTS * CALLS // 3
"""Replica 3 is stopped once this many calls were answered."""
LEGACY = ("2025-03-26", "2025-06-18", "2025-11-25")
DECLARED = {"sampling", "elicitation"}
"""Capabilities a client declares or not (a modern one through the SDK client's callbacks)."""


def _profile(**capabilities: list[dict[str, Any]]) -> Route:
    caps = {f"dev.ucp.shopping.{name}": entries for name, entries in capabilities.items()}
    body = json.dumps({"ucp": {"version": V, "capabilities": caps}}).encode()
    return Route(body=body, headers={"Cache-Control": "max-age=600"})


PLATFORMS = {
    "/a.json": _profile(checkout=[{"version": V}], fulfillment=[{"version": V, "extends": CHECKOUT}]),
    "/b.json": _profile(checkout=[{"version": V}], discount=[{"version": V, "extends": [CHECKOUT]}]),
    "/c.json": _profile(checkout=[{"version": V}], cart=[{"version": V}]),
}
AGREED = {
    "/a.json": {CHECKOUT, "dev.ucp.shopping.fulfillment"},
    "/b.json": {CHECKOUT, "dev.ucp.shopping.discount"},
    "/c.json": {CHECKOUT, "dev.ucp.shopping.cart"},
    None: None,
}
NO_CHECKOUT = "/no-checkout.json"  # create_checkout answers capabilities_incompatible
BROKEN = "/broken.json"  # every call naming it is refused with profile_malformed


@dataclass
class Plan:
    index: int
    era: str
    revision: str
    capabilities: dict[str, Any]
    platform: str | None

    @property
    def name(self) -> str:
        return f"client-{self.index}"


@dataclass
class Tally:
    calls: int = 0
    refusals: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    replicas: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    reinitialized: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    """Legacy client -> the replica each of its lost sessions was on ("": lost before it answered)."""
    legacy_sessions: list[set[str]] = field(default_factory=list)
    stopped: anyio.Event = field(default_factory=anyio.Event)
    stop_requested: anyio.Event = field(default_factory=anyio.Event)


def _plans() -> list[Plan]:
    rng = random.Random(26)
    plans = []
    for index in range(CLIENTS):
        era = "legacy" if index % 2 else "modern"
        capabilities: dict[str, Any] = {"experimental": {f"client-{index}": {}}}
        if rng.random() < 0.5:
            capabilities["sampling"] = {}
        if rng.random() < 0.5:
            capabilities["elicitation"] = {}
        platform = rng.choice([*PLATFORMS, None])
        revision = rng.choice(LEGACY) if era == "legacy" else "2026-07-28"
        plans.append(Plan(index, era, revision, capabilities, platform))
    return plans


# -- the fleet ------------------------------------------------------------------------------


@contextmanager
def replica(
    name: str, store: Redis, ca_file: Path, log: Path
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A replica process on a socket bound here: HAProxy may connect before uvicorn runs."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = sock.getsockname()[1]
    argv = [
        sys.executable, str(ROOT / "tests/support/servers/fleet_replica.py"), "--fd", str(sock.fileno()),
        "--name", name, "--redis", store.url, "--trust-ca", str(ca_file),
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(argv, pass_fds=[sock.fileno()], cwd=ROOT, stdout=out, stderr=out)
    sock.close()  # the replica's copy is the only one: once it stops, connections are refused
    try:
        yield port, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


@pytest.fixture
async def platform_host(tls: Tls) -> AsyncIterator[ProfileServer]:
    async with ProfileServer(tls.server) as server:
        server.routes = dict(PLATFORMS)
        server.routes[NO_CHECKOUT] = _profile(fulfillment=[{"version": V, "extends": CHECKOUT}])
        server.routes[BROKEN] = Route(body=b"{not json", headers={"Cache-Control": "max-age=600"})
        yield server


# -- the clients ----------------------------------------------------------------------------


def _args(host: ProfileServer, path: str | None) -> dict[str, Any]:
    return {"meta": {"ucp-agent": {"profile": host.url(path)}}} if path else {}


def _check(plan: Plan, seen: dict[str, Any], tally: Tally) -> None:
    """One answer against what this client negotiated; anything else is cross-talk."""
    tally.calls += 1
    if tally.calls >= STOP_AFTER:
        tally.stop_requested.set()
    ucp = seen["ucp"]
    got = (
        seen["protocol_version"],
        seen["client_info"]["name"] if plan.era == "modern" else seen["client_capabilities"],
        set(seen["client_capabilities"]) & DECLARED,
        set(ucp["capabilities"]) if ucp else None,
    )
    wanted = (
        plan.revision,
        plan.name if plan.era == "modern" else plan.capabilities,
        set(plan.capabilities) & DECLARED,
        AGREED[plan.platform],
    )
    if got != wanted:
        tally.errors.append(f"{plan.name}: cross-talk: expected {wanted}, saw {got}")
    tally.replicas[plan.era][seen["replica"]] += 1


async def _refusal(plan: Plan, call: Any, host: ProfileServer, step: int, tally: Tally) -> None:
    """Every fourth call is an intended refusal: a malformed profile or one without checkout."""
    if step % 8 == 3:
        try:
            await call("whoami", _args(host, BROKEN))
            tally.errors.append(f"{plan.name}: a malformed profile was served")
        except MCPError as refused:
            if (refused.error.code, (refused.error.data or {}).get("code")) != (-32001, "profile_malformed"):
                raise
            tally.refusals["profile_malformed"] += 1
    else:
        result = await call("create_checkout", {"items": ["tea"], **_args(host, NO_CHECKOUT)})
        body = result.structured_content or {}
        if body.get("messages", [{}])[0].get("code") != "capabilities_incompatible":
            tally.errors.append(f"{plan.name}: expected capabilities_incompatible, got {body}")
        tally.refusals["capabilities_incompatible"] += 1


async def _modern(plan: Plan, url: str, host: ProfileServer, tally: Tally) -> None:
    info = types.Implementation(name=plan.name, version="1")
    callbacks: dict[str, Any] = {}
    if "sampling" in plan.capabilities:
        callbacks["sampling_callback"] = _never
    if "elicitation" in plan.capabilities:
        callbacks["elicitation_callback"] = _never
    async with Client(url, mode="2026-07-28", client_info=info, **callbacks) as client:
        for step in range(CALLS):
            if step % 4 == 3:
                await _refusal(plan, client.call_tool, host, step, tally)
            else:
                _check(plan, structured(await client.call_tool("whoami", _args(host, plan.platform))), tally)


async def _legacy(plan: Plan, url: str, host: ProfileServer, tally: Tally) -> None:
    step = 0
    while step < CALLS:
        served_by: set[str] = set()
        try:
            async with (
                open_streams("http", url) as streams,
                legacy_session(streams, plan.revision, plan.capabilities) as (session, _),
            ):
                while step < CALLS:
                    if step % 4 == 3:
                        await _refusal(plan, session.call_tool, host, step, tally)
                    else:
                        seen = structured(await session.call_tool("whoami", _args(host, plan.platform)))
                        _check(plan, seen, tally)
                        served_by.add(seen["replica"])
                    step += 1
        except Exception as exc:
            # What the SDK costs when a replica stops: its sessions, and the calls in flight
            # in them, are gone. The client initializes again and repeats the call.
            if not tally.stop_requested.is_set() or not all(map(_lost_session, _leaves(exc))):
                raise
            tally.reinitialized[plan.index].append(",".join(sorted(served_by)))
        finally:
            tally.legacy_sessions.append(served_by)


LOST_SESSION = {
    "Session not found",  # the replica HAProxy sent the session's next request to
    "Session terminated",
    "SSE stream ended without a response",  # the call in flight when its replica stopped
    "Server disconnected without sending a response.",
}


def _lost_session(exc: BaseException) -> bool:
    return (exc.error.message if isinstance(exc, MCPError) else str(exc)) in LOST_SESSION


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


async def _never(*args: Any) -> Any:
    raise AssertionError("the shop never asks the client")


def _describe(exc: BaseException) -> str:
    """Each leaf's type and text, and an MCP error's data (a UCP refusal's code and phrase)."""
    return "; ".join(
        f"{type(leaf).__name__}: {leaf}" + (f" {leaf.error.data}" if isinstance(leaf, MCPError) else "")
        for leaf in _leaves(exc)
    )


def _log_tails(directory: Path) -> dict[str, str]:
    return {path.name: path.read_text(errors="replace")[-2000:] for path in directory.glob("replica*.log")}


def _warnings(directory: Path) -> list[str]:
    """The replicas' warnings, e.g. a fetch that failed or the shared cache failing."""
    return [
        f"{path.stem}: {line}"
        for path in sorted(directory.glob("replica*.log"))
        for line in path.read_text(errors="replace").splitlines()
        if " WARNING " in line
    ]


# -- the test -------------------------------------------------------------------------------


async def test_a_fleet_behind_haproxy_serves_each_client_its_own_negotiation(
    tls: Tls, ca: trustme.CA, platform_host: ProfileServer, tmp_path: Path
) -> None:
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    plans = _plans()
    tally = Tally()
    with ExitStack() as stack:
        store = stack.enter_context(redis_server())
        replicas = [
            stack.enter_context(replica(f"replica{i}", store, ca_file, tmp_path / f"replica{i}.log"))
            for i in range(1, REPLICAS + 1)
        ]
        balancer = stack.enter_context(haproxy([port for port, _ in replicas], tmp_path))
        victim = replicas[-1][1]

        async def stop_a_replica() -> None:
            await tally.stop_requested.wait()
            victim.send_signal(signal.SIGTERM)
            await anyio.to_thread.run_sync(victim.wait)
            tally.stopped.set()

        async def client(plan: Plan) -> None:
            try:
                if plan.era == "modern":
                    await _modern(plan, balancer.url, platform_host, tally)
                else:
                    await _legacy(plan, balancer.url, platform_host, tally)
            except Exception as exc:  # any error is a failure, reported with the others
                tally.errors.append(f"{plan.name} ({plan.era}): {_describe(exc)}")

        started = time.monotonic()
        with anyio.fail_after(300):
            async with anyio.create_task_group() as tg:
                tg.start_soon(stop_a_replica)
                async with anyio.create_task_group() as clients:
                    for plan in plans:
                        clients.start_soon(client, plan)
                tally.stop_requested.set()  # in case the clients finished first
        elapsed = time.monotonic() - started

    logs, warnings = _log_tails(tmp_path), _warnings(tmp_path)[:20]
    hits = Counter(request.path for request in platform_host.requests)
    refusals = sum(tally.refusals.values())
    print(
        f"\nfleet: {elapsed:.1f} s, {tally.calls} calls answered, {refusals} refusals "
        f"{dict(tally.refusals)}, {len(tally.reinitialized)} legacy sessions re-initialized, "
        f"replicas {dict(tally.replicas['modern'])} (modern) {dict(tally.replicas['legacy'])} (legacy), "
        f"profile hits {dict(hits)}, errors {len(tally.errors)}"
    )
    assert tally.errors == [], (tally.errors[:20], warnings, logs)
    assert tally.stopped.is_set()
    # Every call was answered: a re-initialized session picks up where it left off.
    assert tally.calls + refusals == CLIENTS * CALLS
    assert set(tally.refusals) == {"profile_malformed", "capabilities_incompatible"}
    # Sticky: a legacy session is served by one replica only, and only sessions of the
    # stopped replica were lost.
    assert all(len(served_by) <= 1 for served_by in tally.legacy_sessions)
    lost_on = Counter(replica for lost in tally.reinitialized.values() for replica in lost)
    assert set(lost_on) <= {"replica3", ""}, lost_on
    assert lost_on["replica3"] > 0, "no legacy session was on the stopped replica"
    # Balanced: modern requests reached every replica.
    assert set(tally.replicas["modern"]) == {f"replica{i}" for i in range(1, REPLICAS + 1)}
    # Shared: each good profile fetched once by the whole fleet; the malformed one once per
    # backoff (1 s, then 2, 4, ... s), whichever replica asked.
    assert all(hits[path] == 1 for path in [*PLATFORMS, NO_CHECKOUT] if hits[path]), (hits, warnings)
    assert {path for path in PLATFORMS if hits[path]} == {plan.platform for plan in plans if plan.platform}
    assert 1 <= hits[BROKEN] <= math.floor(math.log2(elapsed + 1)) + 1, (hits[BROKEN], elapsed)


def test_the_deployment_guide_shows_the_haproxy_configuration_this_test_runs() -> None:
    guide = (ROOT / "docs/deployment.md").read_text()
    assert f"```text\n{HAPROXY_TEMPLATE.read_text()}```\n" in guide
