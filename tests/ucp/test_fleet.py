"""A fleet: three replicas of the example shop (separate processes) behind HAProxy, sharing
Redis, started from docs/deployment.md's own blocks (`support.guide`: the guide's Redis,
replica and HAProxy commands and HAProxy configuration, with the test's ports, files and
test-platform options put in). HAProxy keeps a legacy session on the replica that answered
its `initialize` and balances modern requests round robin. Platform profiles come from a
local HTTPS host that counts its hits.

200 clients of both eras, each with its own capabilities and platform, make a few
thousand calls; one replica is stopped mid-run. What must hold:

- no cross-talk: every answer is the negotiation of the client that asked;
- no errors but the intended refusals (a malformed platform profile, a platform without
  checkout), and, for the legacy sessions of the stopped replica, the SDK's own
  "Session terminated", after which they initialize again; modern clients carry on;
  a lost session's next request is the 404 the guide shows; `X-Served-By` names a replica;
- each good profile fetched once across the fleet, the failing one once per backoff.

And a replica killed while it holds the fleet's lock on a fetch, with eight calls waiting
on the two others: the fleet fetches once more, not once per waiting replica, and the
waiters are served soon after the dead lock expires.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import signal
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
import redis
import trustme
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_negotiation.ucp.shared_cache import DEFAULT_PREFIX
from support import guide
from support.harness import legacy_session, open_streams, structured
from support.profile_server import ProfileServer, Route, Tls
from support.services import Redis, haproxy, notified, redis_server

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


FRESH = {"Cache-Control": "max-age=600"}


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
    session_ids: dict[str, str] = field(default_factory=dict)
    """A legacy session id each replica served (the last seen)."""
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


LOADED_HOST = ["--store-timeout", "5", "--lock-seconds", "90", "--fetch-timeout", "60"]
"""The guide's longer settings for a host whose replicas stall for seconds: on the test's
two loaded cores a replica's event loop lags by seconds, and the platforms' host runs in
the test's own process, which its 200 clients (and, in a whole-suite run, all the process
carries) stall for seconds at a time. A fetch timed out is remembered by the whole fleet
for its backoff, and every call naming that platform refused meanwhile."""


@contextmanager
def replica(
    name: str, store: Redis, ca_file: Path, platform_port: int, log: Path, *options: str
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A replica started by the guide's command (its port chosen by the kernel, told in the
    readiness notice), with the guide's options for a test platform and then `options`."""
    argv = [
        *guide.command(
            "replica", {"127.0.0.1:6379": f"127.0.0.1:{store.port}"}, {"PORT": "0", "REPLICA": name}
        ),
        *guide.arguments("test-platform", {"test-ca.pem": str(ca_file), "8443": str(platform_port)}),
        *options,
    ]
    with notified(argv, log) as (process, state):
        serving = re.search(r"^STATUS=serving http://127\.0\.0\.1:(\d+)/mcp$", state, re.MULTILINE)
        assert serving is not None, state
        yield int(serving[1]), process


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
    if plan.era == "legacy":
        tally.session_ids[seen["replica"]] = seen["session_id"]


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


def _raw(body: dict[str, Any], **headers: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The SDK's headers for one JSON-RPC `body` posted as is, with `headers`."""
    return {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        **headers,
    }, body


def _message(response: httpx2.Response) -> Any:
    """The JSON-RPC message of a response, as JSON or as the `data` of its one SSE event."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return response.json()


async def _what_clients_see(balancer_url: str, lost_session: str, host: ProfileServer) -> None:
    """The guide's promises checked raw: `X-Served-By` names the replica that answered (as
    `whoami` does); a lost legacy session's next request is 404 with a JSON-RPC error whose
    `id` is null."""
    async with httpx2.AsyncClient(timeout=60) as http:
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        }
        params = {"name": "whoami", "arguments": _args(host, "/a.json"), "_meta": meta}
        headers, body = _raw(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params},
            **{"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "whoami"},
        )
        for _ in range(REPLICAS):  # round robin: each live replica in turn
            answered = await http.post(balancer_url, json=body, headers=headers)
            assert answered.status_code == 200, answered.text
            result = _message(answered)["result"]
            assert answered.headers["x-served-by"] == result["structuredContent"]["replica"]
        headers, body = _raw(
            {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}},
            **{"mcp-session-id": lost_session, "mcp-protocol-version": "2025-06-18"},
        )
        lost = await http.post(balancer_url, json=body, headers=headers)
    assert lost.status_code == 404
    assert lost.headers["x-served-by"] != "replica3"
    assert lost.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Session not found"},
    }


# -- the tests ------------------------------------------------------------------------------


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
            stack.enter_context(
                replica(name, store, ca_file, platform_host.port, tmp_path / f"{name}.log", *LOADED_HOST)
            )
            for name in (f"replica{i}" for i in range(1, REPLICAS + 1))
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
        if tally.stopped.is_set() and "replica3" in tally.session_ids:
            await _what_clients_see(balancer.url, tally.session_ids["replica3"], platform_host)

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
    assert "replica3" in tally.session_ids, "no legacy session was on the stopped replica"
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


async def _until(condition: Callable[[], bool], seconds: float = 60.0) -> None:
    """Wait for `condition` (state of other processes, observed) to hold, failing after `seconds`."""
    with anyio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110 (the state is other processes': polled)
            await anyio.sleep(0.01)


KILLED_LOCK = 10.0
"""`--lock-seconds` of the fleet whose holder is killed (its `--fetch-timeout` is 8 s)."""
WAIT_MARGIN = 1.5
"""Documented: a waiter is served within one look (0.4 s apart at most) and one fetch of the
dead lock's expiry; asserted with this margin for a loaded machine."""


async def test_a_replica_killed_holding_the_lock_costs_the_fleet_one_more_fetch(
    ca: trustme.CA, platform_host: ProfileServer, tmp_path: Path
) -> None:
    """replica1 takes the fleet's lock on a profile and is killed (SIGKILL) mid-fetch while
    four calls wait on replica2 and four on replica3. Once its lock expires, the first
    waiter to look takes it and fetches; the others are served what it stores: two fetches
    in all (it was one per waiting replica, each waiter keeping a deadline of its own that
    ran out while the successor fetched), and no waiter long past the expiry."""
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    gate = platform_host.gate()
    platform_host.routes["/slow.json"] = Route(body=PLATFORMS["/a.json"].body, headers=FRESH, gate=gate)
    options = ("--lock-seconds", str(KILLED_LOCK), "--fetch-timeout", "8")
    with ExitStack() as stack:
        store = stack.enter_context(redis_server())
        inspect = redis.Redis(port=store.port)
        stack.callback(inspect.close)
        ports = {}
        for name in ("replica1", "replica2", "replica3"):
            log = tmp_path / f"{name}.log"
            ports[name], process = stack.enter_context(
                replica(name, store, ca_file, platform_host.port, log, *options)
            )
            if name == "replica1":
                holder = process
        url = platform_host.url("/slow.json")
        lock = f"{DEFAULT_PREFIX}lock:{hashlib.sha256(url.encode()).hexdigest()}"
        done: list[float] = []
        results: list[dict[str, Any]] = []

        async def call(name: str, tally: bool = True) -> None:
            async with Client(f"http://127.0.0.1:{ports[name]}/mcp", mode="2026-07-28") as client:
                seen = structured(await client.call_tool("whoami", {"meta": {"ucp-agent": {"profile": url}}}))
            if tally:
                done.append(time.monotonic())
                results.append(seen)

        async def holding() -> None:
            with pytest.raises(Exception):  # noqa: B017,PT011 (its replica is killed under it)
                await call("replica1", tally=False)

        async with anyio.create_task_group() as tg:
            tg.start_soon(holding)
            await _until(lambda: len(platform_host.requests) == 1)  # it holds the lock, fetching
            assert inspect.exists(lock)
            for name in ("replica2", "replica3"):
                for _ in range(4):
                    tg.start_soon(call, name)

            def both_wait() -> bool:
                looking = {c.get("name") for c in inspect.client_list() if c.get("cmd") == "eval"}
                return {"replica2", "replica3"} <= looking

            await _until(both_wait)  # each waiting replica has looked at the lock
            holder.kill()
            await anyio.to_thread.run_sync(holder.wait)
            expires = time.monotonic() + inspect.pttl(lock) / 1000
            gate.set()
    after = sorted(round(finished - expires, 2) for finished in done)
    fetches = len(platform_host.requests)
    print(f"\nkilled holder: {fetches} fetches, waiters done {after} s after its lock expired")
    assert [request.path for request in platform_host.requests] == ["/slow.json"] * 2
    assert len(results) == 8
    assert {r["replica"] for r in results} == {"replica2", "replica3"}
    assert all(set(r["ucp"]["capabilities"]) == AGREED["/a.json"] for r in results)
    assert all(-0.1 <= offset <= 0.4 + WAIT_MARGIN for offset in after), after
