"""The fleet-shared profile cache against a real redis-server on 127.0.0.1.

A "fleet" here is several `HttpsProfileResolver`s, each with its own `RedisProfileCache`
(its own connections), as separate replicas would have, sharing one Redis and one
local HTTPS profile host that counts what it is asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from mcp_negotiation.ucp import (
    ALL_PORTS,
    PROFILE_MALFORMED,
    PROFILE_UNREACHABLE,
    HttpsProfileResolver,
    Profile,
    UcpError,
)
from mcp_negotiation.ucp.shared_cache import DEFAULT_PREFIX, RedisProfileCache
from support.profile_server import BODY, DOCUMENT, ProfileServer, Route, Tls
from support.services import Redis, free_port, redis_server, silent_listener

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.anyio

PROFILE = Profile.from_json(DOCUMENT)
FRESH = {"Cache-Control": "max-age=600"}


def store_key(kind: str, url: str) -> str:
    """Where `RedisProfileCache` keeps `kind` ("profile", "lock", "failures") for `url`."""
    return f"{DEFAULT_PREFIX}{kind}:{hashlib.sha256(url.encode()).hexdigest()}"


KEY = re.compile(rf"^{re.escape(DEFAULT_PREFIX)}(profile|lock|failures):[0-9a-f]{{64}}$")


@pytest.fixture(scope="module")
def store() -> Iterator[Redis]:
    with redis_server() as server:
        yield server


@pytest.fixture
def inspect(store: Redis) -> Iterator[redis.Redis]:
    """A plain client for the test's own look at the store, emptied before each test."""
    client = redis.Redis(port=store.port)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
async def host(tls: Tls) -> AsyncIterator[ProfileServer]:
    async with ProfileServer(tls.server) as server:
        yield server


class Fleet:
    def __init__(self, tls: Tls, store_url: str, size: int, **options: Any) -> None:
        self.caches = [RedisProfileCache(store_url, **options) for _ in range(size)]
        self.replicas = [
            HttpsProfileResolver(
                ssl_context=tls.client,
                allow_addresses=["127.0.0.1"],
                allow_ports=ALL_PORTS,
                shared_cache=cache,
            )
            for cache in self.caches
        ]

    async def aclose(self) -> None:
        for cache in self.caches:
            await cache.aclose()


@pytest.fixture
async def fleet(tls: Tls, store: Redis, inspect: redis.Redis) -> AsyncIterator[Fleet]:
    fleet = Fleet(tls, store.url, 3)
    yield fleet
    await fleet.aclose()


def calls(client: redis.Redis) -> dict[str, int]:
    """Commands the store has run so far, by name (INFO's own calls left out)."""
    stats = client.info("commandstats")
    return {name: int(entry["calls"]) for name, entry in stats.items() if name != "cmdstat_info"}


async def test_a_fleet_fetches_each_profile_once(
    fleet: Fleet, host: ProfileServer, inspect: redis.Redis
) -> None:
    host.routes["/p.json"] = Route(headers=FRESH)
    url = host.url("/p.json")
    answers = await asyncio.gather(*(replica.resolve(url) for replica in fleet.replicas for _ in range(30)))
    assert answers == [PROFILE] * 90
    assert len(host.requests) == 1
    key = store_key("profile", url)
    assert inspect.keys("*") == [key.encode()]  # the lock is released, no failure counted
    assert inspect.get(key) == json.dumps({"url": url, "kind": "profile"}).encode() + b"\n" + BODY
    assert 0 < inspect.pttl(key) <= 600_000


async def test_a_fresh_local_copy_costs_no_round_trip_to_the_store(
    fleet: Fleet, host: ProfileServer, inspect: redis.Redis
) -> None:
    host.routes["/p.json"] = Route(headers=FRESH)
    url = host.url("/p.json")
    for replica in fleet.replicas:
        await replica.resolve(url)
    before = calls(inspect)
    for replica in fleet.replicas:
        for _ in range(100):
            assert await replica.resolve(url) == PROFILE
    assert calls(inspect) == before
    assert len(host.requests) == 1


async def test_a_replica_whose_copy_expired_takes_the_fleets_copy(
    tls: Tls, store: Redis, host: ProfileServer, inspect: redis.Redis
) -> None:
    now = [1000.0]
    cache = RedisProfileCache(store.url)
    late = HttpsProfileResolver(
        ssl_context=tls.client,
        allow_addresses=["127.0.0.1"],
        allow_ports=ALL_PORTS,
        shared_cache=cache,
        clock=lambda: now[0],
    )
    host.routes["/p.json"] = Route(headers=FRESH)
    url = host.url("/p.json")
    await late.resolve(url)
    now[0] += 601  # this replica's copy is stale; the store's (on Redis's clock) is not
    inspect.pexpire(store_key("profile", url), 30_000)
    assert await late.resolve(url) == PROFILE
    assert len(host.requests) == 1
    before = calls(inspect)
    now[0] += 29  # the copy taken lasts what the store's had left (30 s), not a fresh TTL
    assert await late.resolve(url) == PROFILE
    assert calls(inspect) == before
    now[0] += 2
    assert await late.resolve(url) == PROFILE
    assert calls(inspect) != before
    assert len(host.requests) == 1
    await cache.aclose()


@contextlib.asynccontextmanager
async def lock_requests_held(store: Redis) -> AsyncIterator[tuple[str, asyncio.Event, asyncio.Event]]:
    """A TCP proxy to `store` (its URL is yielded) that holds back a request asking for a
    lock (`SET ... NX`) until `release` is set, `holding` being set meanwhile: a replica
    that has read a miss and not yet taken the lock, for as long as the test wants."""
    holding, release = asyncio.Event(), asyncio.Event()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hold: bool) -> None:
        try:
            while chunk := await reader.read(65536):
                if hold and b"$2\r\nNX\r\n" in chunk and not release.is_set():
                    holding.set()
                    await release.wait()
                writer.write(chunk)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", store.port)
        await asyncio.gather(pipe(reader, upstream_writer, True), pipe(upstream_reader, writer, False))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"redis://127.0.0.1:{server.sockets[0].getsockname()[1]}/0", holding, release
    finally:
        release.set()
        server.close()


async def test_a_replica_that_missed_while_another_fetched_takes_that_fetch(
    tls: Tls, store: Redis, host: ProfileServer, inspect: redis.Redis
) -> None:
    """The late replica read a miss; before it asks for the lock, another replica fetches,
    stores and releases. The lock is free again, and taking it must not mean fetching."""
    host.routes["/p.json"] = Route(headers=FRESH)
    url = host.url("/p.json")
    async with lock_requests_held(store) as (through_proxy, holding, release):
        late, early = Fleet(tls, through_proxy, 1), Fleet(tls, store.url, 1)
        async with asyncio.timeout(30):  # a hang is the failure here, reported as one
            waiting = asyncio.create_task(late.replicas[0].resolve(url))
            await holding.wait()
            assert await early.replicas[0].resolve(url) == PROFILE
            assert not inspect.exists(store_key("lock", url))
            release.set()
            assert await waiting == PROFILE
        await late.aclose()
        await early.aclose()
    assert len(host.requests) == 1
    assert not inspect.exists(store_key("lock", url))


async def test_a_failure_is_remembered_once_for_the_fleet(
    fleet: Fleet, host: ProfileServer, inspect: redis.Redis
) -> None:
    host.routes["/p.json"] = Route(status=500)
    url = host.url("/p.json")
    outcomes = await asyncio.gather(
        *(replica.resolve(url) for replica in fleet.replicas for _ in range(10)), return_exceptions=True
    )
    assert {(type(o), getattr(o, "code", None)) for o in outcomes} == {(UcpError, PROFILE_UNREACHABLE)}
    assert {str(o) for o in outcomes} == {"profile_unreachable: the profile server answered HTTP 500"}
    assert len(host.requests) == 1
    assert inspect.get(store_key("failures", url)) == b"1"
    assert 0 < inspect.pttl(store_key("profile", url)) <= 1000


async def test_the_backoff_grows_across_replicas(
    fleet: Fleet, host: ProfileServer, inspect: redis.Redis
) -> None:
    """The replica that fetches after a failure's backoff is not the one that failed: the
    fleet's count of failures in a row, not its own, sets the next backoff."""
    host.routes["/p.json"] = Route(status=503)
    url = host.url("/p.json")
    with pytest.raises(UcpError):
        await fleet.replicas[0].resolve(url)
    inspect.delete(store_key("profile", url))  # the backoff is over
    with pytest.raises(UcpError):
        await fleet.replicas[1].resolve(url)
    assert len(host.requests) == 2
    assert inspect.get(store_key("failures", url)) == b"2"
    assert 1000 < inspect.pttl(store_key("profile", url)) <= 2000
    host.routes["/p.json"] = Route(headers=FRESH)
    inspect.delete(store_key("profile", url))
    assert await fleet.replicas[2].resolve(url) == PROFILE
    assert inspect.exists(store_key("failures", url)) == 0


async def test_a_replica_that_dies_holding_the_lock_delays_the_others_only_until_it_expires(
    tls: Tls, store: Redis, host: ProfileServer, inspect: redis.Redis
) -> None:
    host.routes["/p.json"] = Route(headers=FRESH)
    url = host.url("/p.json")
    inspect.set(store_key("lock", url), "gone", px=300)
    fleet = Fleet(tls, store.url, 1, lock_seconds=5.0)
    assert await fleet.replicas[0].resolve(url) == PROFILE
    assert len(host.requests) == 1
    await fleet.aclose()


def _shared_cache_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING and "shared profile cache" in r.message]


@pytest.mark.parametrize("kind", ["down", "silent"])
async def test_a_store_down_or_silent_costs_one_log_line_and_no_error(
    tls: Tls, host: ProfileServer, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    for path in ("/a.json", "/b.json", "/c.json"):
        host.routes[path] = Route(headers=FRESH)
    with silent_listener() as silent:
        port = free_port() if kind == "down" else silent
        fleet = Fleet(tls, f"redis://127.0.0.1:{port}/0", 2, timeout=0.2)
        with caplog.at_level(logging.INFO, logger="mcp_negotiation"):
            for replica in fleet.replicas:
                for path in ("/a.json", "/b.json", "/c.json"):
                    assert await replica.resolve(host.url(path)) == PROFILE
        await fleet.aclose()
    warnings = _shared_cache_warnings(caplog)
    assert len(warnings) == 2  # once per replica, not once per fetch
    assert all(r.exc_info is None and r.levelno == logging.WARNING for r in warnings)
    assert len(host.requests) == 6  # each replica fetched on its own


async def test_the_store_is_tried_again_after_retry_after(
    tls: Tls, store: Redis, host: ProfileServer, inspect: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    now = [1000.0]
    cache = RedisProfileCache(store.url, clock=lambda: now[0], retry_after=10.0)
    resolver = HttpsProfileResolver(
        ssl_context=tls.client, allow_addresses=["127.0.0.1"], allow_ports=ALL_PORTS, shared_cache=cache
    )
    host.routes["/a.json"] = Route(headers=FRESH)
    host.routes["/b.json"] = Route(headers=FRESH)
    inspect.config_set("requirepass", "now-refused")  # the store refuses this replica for a while
    with caplog.at_level(logging.INFO, logger="mcp_negotiation"):
        await resolver.resolve(host.url("/a.json"))
        inspect.execute_command("AUTH", "now-refused")
        inspect.config_set("requirepass", "")
        now[0] += 11
        await resolver.resolve(host.url("/b.json"))
    assert len(_shared_cache_warnings(caplog)) == 1
    assert any(r.message.endswith("answers again") for r in caplog.records)
    assert inspect.exists(store_key("profile", host.url("/b.json")))
    await cache.aclose()


@pytest.mark.parametrize(
    "path",
    [
        "/p.json?x=%0D%0AFLUSHALL%0D%0A",
        "/*",
        "/p.json?key=mcp-negotiation:ucp:profile:victim",
        "/%7Bslot%7D/p.json",
    ],
)
async def test_nothing_a_client_sends_reaches_a_key(
    fleet: Fleet, host: ProfileServer, inspect: redis.Redis, path: str
) -> None:
    inspect.set("victim", "intact")
    inspect.set(f"{DEFAULT_PREFIX}profile:victim", "intact")
    host.routes[path] = Route(headers=FRESH)
    for replica in fleet.replicas:
        assert await replica.resolve(host.url(path)) == PROFILE
    assert len(host.requests) == 1
    keys = {k.decode() for k in inspect.keys("*")} - {"victim", f"{DEFAULT_PREFIX}profile:victim"}
    assert len(keys) == 1
    assert all(KEY.match(k) for k in keys)
    assert inspect.get("victim") == inspect.get(f"{DEFAULT_PREFIX}profile:victim") == b"intact"


@pytest.mark.parametrize(
    "planted",
    [
        json.dumps({"url": "https://elsewhere.example/p.json", "kind": "profile"}).encode() + b"\n" + BODY,
        json.dumps({"url": "URL", "kind": "profile"}).encode() + b"\n" + b'{"not": "a profile"}',
        json.dumps({"url": "URL", "kind": "failed", "code": "rm -rf", "message": "x", "attempts": 1}).encode()
        + b"\n",
        json.dumps({"url": "URL", "kind": "profile"}).encode() + b"\n" + b" " * 600_000 + BODY,
        b"\xff\xfe garbage",
    ],
    ids=["another-url", "not-a-profile", "unknown-code", "over-the-byte-bound", "garbage"],
)
async def test_an_entry_that_is_not_ours_is_a_miss(
    fleet: Fleet, host: ProfileServer, inspect: redis.Redis, planted: bytes
) -> None:
    host.routes["/p.json"] = Route(headers=FRESH)
    url = host.url("/p.json")
    key = store_key("profile", url)
    inspect.set(key, planted.replace(b'"URL"', json.dumps(url).encode()), px=60_000)
    assert await fleet.replicas[0].resolve(url) == PROFILE
    assert len(host.requests) == 1
    assert inspect.get(key) == json.dumps({"url": url, "kind": "profile"}).encode() + b"\n" + BODY


async def test_entries_over_the_byte_bound_are_not_stored(
    tls: Tls, store: Redis, host: ProfileServer, inspect: redis.Redis
) -> None:
    body = json.dumps({**DOCUMENT, "padding": "x" * 100_000}).encode()
    host.routes["/p.json"] = Route(body=body, headers=FRESH)
    fleet = Fleet(tls, store.url, 2, max_entry_bytes=64 * 1024)
    for replica in fleet.replicas:
        assert await replica.resolve(host.url("/p.json")) == PROFILE
    assert inspect.keys(f"{DEFAULT_PREFIX}profile:*") == []
    assert len(host.requests) == 2  # each replica on its own: the fleet could not share it
    await fleet.aclose()


async def test_the_fetch_rules_hold_with_the_shared_cache(
    fleet: Fleet, host: ProfileServer, inspect: redis.Redis
) -> None:
    host.routes["/big.json"] = Route(body=b" " * (300 * 1024), headers=FRESH)
    host.routes["/moved.json"] = Route(status=302, headers={"Location": "/p.json"})
    with pytest.raises(UcpError) as big:
        await fleet.replicas[0].resolve(host.url("/big.json"))
    assert big.value.code == PROFILE_MALFORMED
    with pytest.raises(UcpError) as moved:
        await fleet.replicas[1].resolve(host.url("/moved.json"))
    assert moved.value.code == PROFILE_UNREACHABLE
    with pytest.raises(UcpError):
        await fleet.replicas[2].resolve("http://127.0.0.1/p.json")
    assert [r.path for r in host.requests] == ["/big.json", "/moved.json"]


def test_the_benchmark_runs_and_counts_no_round_trip_on_the_hot_path(store: Redis) -> None:
    """Keeps benchmarks/shared_cache.py from rotting; its figures are not judged here."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/shared_cache.py"), "--quick"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| hot: local copy fresh, with the shared cache | 600 | 0 | 0 |" in done.stdout


def test_the_package_does_not_import_redis() -> None:
    code = (
        "import sys, mcp_negotiation, mcp_negotiation.ucp\n"
        "from mcp_negotiation.ucp import HttpsProfileResolver\n"
        "HttpsProfileResolver()\n"
        "print(sorted(m for m in sys.modules if m == 'redis' or m.endswith('shared_cache')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="positive"):
        RedisProfileCache("redis://127.0.0.1:1/0", timeout=0)
    with pytest.raises(ValueError, match="1024"):
        RedisProfileCache("redis://127.0.0.1:1/0", max_entry_bytes=10)
