"""Profile resolution: pinned profiles, and HTTPS fetching against a real local TLS server.

The server is a few lines of asyncio on 127.0.0.1 with a certificate from a CA made for
the test (trustme), so TLS, SNI, status handling, streaming and timeouts are all real.
Nothing leaves the loopback interface: every refusal test checks that no HTTP client
was even built, and literal addresses are never looked up.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import threading
from pathlib import Path
from typing import Any

import httpx2
import pytest

from mcp_negotiation.ucp import (
    ALL_PORTS,
    INVALID_PROFILE_URL,
    PROFILE_MALFORMED,
    PROFILE_UNREACHABLE,
    HttpsProfileResolver,
    Profile,
    StaticResolver,
    UcpError,
    is_special_address,
)
from mcp_negotiation.ucp.resolver import MIN_BODY_CAP, Lookups
from support.profile_server import BODY, DOCUMENT, ProfileServer, Route, Tls

pytestmark = pytest.mark.anyio

PROFILE = Profile.from_json(DOCUMENT)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make_resolver(tls: Tls, clock: Clock, **options: Any) -> HttpsProfileResolver:
    options.setdefault("allow_addresses", {"127.0.0.1", "::1"})
    options.setdefault("allow_ports", ALL_PORTS)
    return HttpsProfileResolver(ssl_context=tls.client, clock=clock, **options)


async def failure(resolver: HttpsProfileResolver | StaticResolver, url: str) -> str:
    with pytest.raises(UcpError) as raised:
        await resolver.resolve(url)
    return raised.value.code


# -- pinned profiles ------------------------------------------------------------------------


async def test_static_resolver_serves_profiles_documents_and_files(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(BODY)
    resolver = StaticResolver(
        {"https://a.example/p": PROFILE, "https://b.example/p": DOCUMENT, "https://c.example/p": path}
    )
    for host in "abc":
        assert await resolver.resolve(f"https://{host}.example/p") == PROFILE
    assert await failure(resolver, "https://d.example/p") == PROFILE_UNREACHABLE
    assert await failure(resolver, "http://a.example/p") == INVALID_PROFILE_URL


def test_static_resolver_refuses_bad_entries_at_construction(tmp_path: Path) -> None:
    with pytest.raises(UcpError) as raised:
        StaticResolver({"http://a.example/p": PROFILE})
    assert raised.value.code == INVALID_PROFILE_URL
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UcpError) as raised:
        StaticResolver({"https://a.example/p": tmp_path / "bad.json"})
    assert raised.value.code == PROFILE_MALFORMED


# -- fetching -------------------------------------------------------------------------------


async def test_fetches_a_profile(tls: Tls, clock: Clock) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route()
        assert await make_resolver(tls, clock).resolve(server.url("/p.json")) == PROFILE
        [request] = server.requests
        assert request.headers["host"] == f"127.0.0.1:{server.port}"
        assert request.headers["accept-encoding"] == "identity"


async def test_connects_to_the_checked_address_and_keeps_the_name_for_tls(tls: Tls, clock: Clock) -> None:
    # `localhost` may resolve to ::1 first, where nothing listens: the next address is tried.
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route()
        assert await make_resolver(tls, clock).resolve(server.url("/p.json", host="localhost")) == PROFILE
        assert server.requests[0].headers["host"] == f"localhost:{server.port}"
        assert server.server_names == ["localhost"]


async def test_refuses_an_untrusted_certificate(tls: Tls, clock: Clock) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route()
        resolver = HttpsProfileResolver(
            allow_addresses={"127.0.0.1"}, allow_ports=ALL_PORTS, clock=clock
        )  # default trust store
        assert await failure(resolver, server.url("/p.json")) == PROFILE_UNREACHABLE
        assert server.requests == []


@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_does_not_follow_redirects(tls: Tls, clock: Clock, status: int) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/old.json"] = Route(status, b"", {"Location": "/p.json"})
        server.routes["/p.json"] = Route()
        assert await failure(make_resolver(tls, clock), server.url("/old.json")) == PROFILE_UNREACHABLE
        assert [r.path for r in server.requests] == ["/old.json"]


@pytest.mark.parametrize("status", [304, 404, 500])
async def test_non_2xx_is_unreachable(tls: Tls, clock: Clock, status: int) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route(status)
        assert await failure(make_resolver(tls, clock), server.url("/p.json")) == PROFILE_UNREACHABLE


@pytest.mark.parametrize("declare_length", [True, False])
async def test_oversize_body_is_malformed(tls: Tls, clock: Clock, declare_length: bool) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/big.json"] = Route(body=b" " * (300 * 1024) + BODY, declare_length=declare_length)
        assert await failure(make_resolver(tls, clock), server.url("/big.json")) == PROFILE_MALFORMED


async def test_body_cap_is_configurable_but_not_below_128_kib(tls: Tls, clock: Clock) -> None:
    with pytest.raises(ValueError, match="at least"):
        make_resolver(tls, clock, max_body_bytes=128 * 1024 - 1)
    async with ProfileServer(tls.server) as server:
        server.routes["/big.json"] = Route(body=b" " * (300 * 1024) + BODY, declare_length=False)
        assert (
            await make_resolver(tls, clock, max_body_bytes=512 * 1024).resolve(server.url("/big.json"))
            == PROFILE
        )


@pytest.mark.parametrize("body", [b"{not json", b"[]", b'{"ucp": {"version": "latest"}}'])
async def test_malformed_profile(tls: Tls, clock: Clock, body: bytes) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route(body=body)
        assert await failure(make_resolver(tls, clock), server.url("/p.json")) == PROFILE_MALFORMED


async def test_compressed_body_that_was_not_asked_for_is_malformed(tls: Tls, clock: Clock) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route(headers={"Content-Encoding": "gzip"})
        assert await failure(make_resolver(tls, clock), server.url("/p.json")) == PROFILE_MALFORMED


async def test_server_that_never_answers_times_out(tls: Tls, clock: Clock) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/slow.json"] = Route(gate=server.gate())
        resolver = make_resolver(tls, clock, read_timeout=0.2)
        assert await failure(resolver, server.url("/slow.json")) == PROFILE_UNREACHABLE
        assert len(server.requests) == 1


async def test_total_timeout_bounds_the_whole_fetch(tls: Tls, clock: Clock) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/slow.json"] = Route(gate=server.gate())
        resolver = make_resolver(tls, clock, read_timeout=60, total_timeout=0.2)
        with pytest.raises(UcpError, match="longer than") as raised:
            await resolver.resolve(server.url("/slow.json"))
        assert raised.value.code == PROFILE_UNREACHABLE


# -- caching --------------------------------------------------------------------------------


async def test_cache_hit_within_the_ttl_floor(tls: Tls, clock: Clock) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route(headers={"Cache-Control": "no-store"})
        resolver = make_resolver(tls, clock)
        url = server.url("/p.json")
        await resolver.resolve(url)
        clock.now += 59
        assert await resolver.resolve(url) == PROFILE
        assert len(server.requests) == 1
        clock.now += 2
        await resolver.resolve(url)
        assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("headers", "fresh_for"),
    [
        ({"Cache-Control": "public, max-age=600"}, 600),
        ({"Cache-Control": 'max-age="120"'}, 120),
        ({"Cache-Control": "max-age=10"}, 60),
        ({"Cache-Control": "max-age=999999999"}, 24 * 3600),
        # RFC 9111: what a CDN held already counts (freshness is max-age less Age), and a
        # max-age too long to parse is the largest value, so the 24 h bound, not the floor.
        ({"Cache-Control": "max-age=3600", "Age": "3500"}, 100),
        ({"Cache-Control": "max-age=3600", "Age": "3590"}, 60),
        ({"Cache-Control": "max-age=600", "Age": "7200"}, 60),
        ({"Cache-Control": "max-age=600", "Age": "100, 500"}, 500),
        ({"Cache-Control": "max-age=600", "Age": "soon"}, 600),
        ({"Cache-Control": "max-age=600", "Age": "-100"}, 600),
        ({"Cache-Control": "max-age=0000000000120"}, 120),
        ({"Cache-Control": "max-age=99999999999"}, 24 * 3600),
        ({"Cache-Control": "max-age=99999999999", "Age": "3600"}, 24 * 3600),
        ({"Cache-Control": f"max-age={'9' * 5000}"}, 24 * 3600),
    ],
    ids=[
        "public",
        "quoted",
        "below the floor",
        "above the bound",
        "age leaves 100 s",
        "age leaves less than the floor",
        "older than max-age",
        "age list: first member",
        "age not a number",
        "age negative",
        "max-age with leading zeros",
        "max-age of 11 digits",
        "max-age of 11 digits, with age",
        "max-age of 5000 digits",
    ],
)
async def test_cache_control_max_age_is_honoured_within_bounds(
    tls: Tls, clock: Clock, headers: dict[str, str], fresh_for: int
) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route(headers=headers)
        resolver = make_resolver(tls, clock)
        url = server.url("/p.json")
        start = clock.now
        await resolver.resolve(url)
        clock.now = start + fresh_for - 1
        await resolver.resolve(url)
        assert len(server.requests) == 1
        clock.now = start + fresh_for + 1
        await resolver.resolve(url)
        assert len(server.requests) == 2


@pytest.mark.parametrize("bound", ["entries", "bytes"])
async def test_cache_is_a_bounded_lru(tls: Tls, clock: Clock, bound: str) -> None:
    """Room for two profiles, by `cache_size`, or by `cache_bytes` of documents near the body cap."""
    body = BODY
    options: dict[str, Any] = {"cache_size": 2}
    if bound == "bytes":
        padded = json.loads(BODY)
        padded["padding"] = "x" * (MIN_BODY_CAP - len(BODY) - 100)
        body = json.dumps(padded).encode()
        options = {"max_body_bytes": MIN_BODY_CAP, "cache_bytes": 2 * MIN_BODY_CAP + 100}
    async with ProfileServer(tls.server) as server:
        for name in "abc":
            server.routes[f"/{name}.json"] = Route(body=body)
        resolver = make_resolver(tls, clock, **options)
        for name in "abab":
            await resolver.resolve(server.url(f"/{name}.json"))
        assert len(server.requests) == 2
        await resolver.resolve(server.url("/c.json"))  # evicts a, the least recently used
        await resolver.resolve(server.url("/b.json"))
        assert len(server.requests) == 3
        await resolver.resolve(server.url("/a.json"))
        assert len(server.requests) == 4


def test_the_cache_holds_at_least_one_profile_at_the_body_cap() -> None:
    with pytest.raises(ValueError, match="cache_bytes must be at least max_body_bytes"):
        HttpsProfileResolver(cache_bytes=MIN_BODY_CAP)


async def test_failures_back_off_and_the_backoff_grows(tls: Tls, clock: Clock) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route(500)
        resolver = make_resolver(tls, clock)
        url = server.url("/p.json")
        assert await failure(resolver, url) == PROFILE_UNREACHABLE
        assert await failure(resolver, url) == PROFILE_UNREACHABLE  # remembered, not fetched
        assert len(server.requests) == 1
        clock.now += 1.5  # first backoff: 1 s
        assert await failure(resolver, url) == PROFILE_UNREACHABLE
        assert len(server.requests) == 2
        clock.now += 1.5  # second backoff: 2 s, not over yet
        assert await failure(resolver, url) == PROFILE_UNREACHABLE
        assert len(server.requests) == 2
        server.routes["/p.json"] = Route()
        clock.now += 1
        assert await resolver.resolve(url) == PROFILE
        assert len(server.requests) == 3


async def test_single_flight_under_100_concurrent_resolves(tls: Tls, clock: Clock) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route()
        resolver = make_resolver(tls, clock)
        results = await asyncio.gather(*(resolver.resolve(server.url("/p.json")) for _ in range(100)))
        assert results == [PROFILE] * 100
        assert len(server.requests) == 1


async def test_single_flight_shares_failures_too(tls: Tls, clock: Clock) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route(body=b"nope")
        resolver = make_resolver(tls, clock)
        results = await asyncio.gather(
            *(resolver.resolve(server.url("/p.json")) for _ in range(20)), return_exceptions=True
        )
        assert all(isinstance(r, UcpError) and r.code == PROFILE_MALFORMED for r in results)
        assert len(server.requests) == 1


async def test_one_caller_giving_up_does_not_cancel_the_shared_fetch(tls: Tls, clock: Clock) -> None:
    async with ProfileServer(tls.server) as server:
        gate = server.gate()
        server.routes["/p.json"] = Route(gate=gate)
        resolver = make_resolver(tls, clock)
        impatient = asyncio.ensure_future(resolver.resolve(server.url("/p.json")))
        patient = asyncio.ensure_future(resolver.resolve(server.url("/p.json")))
        await server.arrived.wait()
        impatient.cancel()
        gate.set()
        assert await patient == PROFILE
        assert impatient.cancelled()
        assert len(server.requests) == 1


# -- address refusal ------------------------------------------------------------------------


@pytest.fixture
def no_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the resolver so much as builds an HTTP client."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("an HTTP client was built for a refused address")

    monkeypatch.setattr(httpx2, "AsyncClient", refuse)


@pytest.fixture
def no_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a literal address was looked up")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.mark.usefixtures("no_connection", "no_dns")
@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/p.json",
        "https://127.0.0.1:8443/p.json",
        "https://10.0.0.1/p.json",
        "https://192.168.1.1/p.json",
        "https://100.64.0.1/p.json",
        "https://169.254.169.254/latest/meta-data/",
        "https://0.0.0.0/p.json",
        "https://224.0.0.1/p.json",
        "https://240.0.0.1/p.json",
        "https://[::1]/p.json",
        "https://[::]/p.json",
        "https://[fe80::1]/p.json",
        "https://[fc00::1]/p.json",
        "https://[::ffff:127.0.0.1]/p.json",
        "https://[::ffff:7f00:1]/p.json",
        "https://[64:ff9b::a9fe:a9fe]/p.json",
        "https://[2002:7f00:1::]/p.json",
        "https://2130706433/p.json",
        "https://0177.0.0.1/p.json",
        "https://0x7f.0.0.1/p.json",
        "https://0x7f000001/p.json",
        "https://127.1/p.json",
        "https://127.0.0.1./p.json",
        "https://example.0x7f/p.json",
    ],
)
async def test_refuses_special_addresses_before_connecting(clock: Clock, url: str) -> None:
    resolver = HttpsProfileResolver(clock=clock)
    assert await failure(resolver, url) == INVALID_PROFILE_URL


@pytest.mark.usefixtures("no_connection")
async def test_refuses_a_name_resolving_to_loopback(clock: Clock) -> None:
    assert await failure(HttpsProfileResolver(clock=clock), "https://localhost/p.json") == INVALID_PROFILE_URL


@pytest.mark.usefixtures("no_connection")
async def test_refuses_a_name_when_any_of_its_addresses_is_special(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    def getaddrinfo(host: str, port: int, **kwargs: object) -> list[Any]:
        assert host == "mixed.example"
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    assert (
        await failure(HttpsProfileResolver(clock=clock), "https://mixed.example/p.json")
        == INVALID_PROFILE_URL
    )


@pytest.mark.usefixtures("no_connection")
async def test_a_name_that_does_not_resolve_is_invalid(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    def getaddrinfo(*args: object, **kwargs: object) -> list[Any]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    assert (
        await failure(HttpsProfileResolver(clock=clock), "https://nowhere.example/p.json")
        == INVALID_PROFILE_URL
    )


async def test_the_allow_list_is_exact(tls: Tls, clock: Clock) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route()
        resolver = make_resolver(tls, clock, allow_addresses=["127.0.0.1/32"])
        assert await resolver.resolve(server.url("/p.json")) == PROFILE
        assert await failure(resolver, "https://10.0.0.1/p.json") == INVALID_PROFILE_URL
        assert await failure(resolver, "https://[::1]/p.json") == INVALID_PROFILE_URL
        assert await failure(resolver, "https://2130706433/p.json") == INVALID_PROFILE_URL
        assert len(server.requests) == 1


@pytest.mark.usefixtures("no_connection", "no_dns")
@pytest.mark.parametrize("port", [":22", ":6379", ":8443", ":80"])
async def test_only_port_443_is_fetched_from_by_default(clock: Clock, port: str) -> None:
    """A public host on another port would have the business talk to whatever listens there."""
    with pytest.raises(UcpError) as refused:
        await HttpsProfileResolver(clock=clock).resolve(f"https://93.184.216.34{port}/p.json")
    assert refused.value.code == INVALID_PROFILE_URL
    assert (
        refused.value.message
        == "the profile URL names a port profiles are not fetched from (only 443 is allowed)"
    )


async def test_allow_ports_opens_exactly_the_ports_it_lists(tls: Tls, clock: Clock) -> None:
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route()
        only = make_resolver(tls, clock, allow_ports=[server.port])
        assert await only.resolve(server.url("/p.json")) == PROFILE
        assert await failure(only, f"https://127.0.0.1:{server.port + 1}/p.json") == INVALID_PROFILE_URL
        assert (
            await failure(make_resolver(tls, clock, allow_ports=()), server.url("/p.json"))
            == INVALID_PROFILE_URL
        )
        assert (
            await make_resolver(tls, clock, allow_ports=ALL_PORTS).resolve(server.url("/p.json")) == PROFILE
        )
        assert len(server.requests) == 2


PUBLIC_ADDRESSES = ("93.184.216.34", "2606:4700::1111")
DISPUTED_ADDRESSES = (
    "2002:5db8:d822::1",  # 6to4, even of a public address: global to Python 3.11.7 and 3.12.1
    "64:ff9b:1::5db8:d822",  # local-use NAT64: global to 3.11.7 and 3.12.1
    "2001:20::1",  # ORCHIDv2: global to 3.13.0
    "2001:4:112::1",  # AS112-v6: global to 3.13.0
    "192.0.0.9",  # PCP anycast: global to all three
    "5f00::1",  # SRv6 SIDs (2024): global to all three
    "100:0:0:1::1",  # the dummy prefix (2025): global to all three
)
"""Addresses whose verdict depends on which Python release's `ipaddress` tables decide."""


@pytest.mark.parametrize(
    ("address", "special"),
    [
        *((address, False) for address in PUBLIC_ADDRESSES),
        *((address, True) for address in DISPUTED_ADDRESSES),
        ("192.0.2.1", True),  # documentation
        ("198.18.0.1", True),  # benchmarking
        ("2001:db8::1", True),
        ("64:ff9b::7f00:1", True),  # NAT64 of 127.0.0.1
        ("64:ff9b::5db8:d822", True),  # NAT64, whatever it embeds
        ("::ffff:5db8:d822", True),  # IPv4-mapped, whatever it embeds
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", True),  # Teredo, client 127.0.0.1
    ],
)
def test_is_special_address(address: str, special: bool) -> None:
    assert is_special_address(ipaddress.ip_address(address)) is special


def test_the_verdict_does_not_depend_on_the_pythons_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    # Make this interpreter's tables call everything global and nothing private, as an
    # older release does for some of these: the project's own list must still refuse them.
    for cls in (ipaddress.IPv4Address, ipaddress.IPv6Address):
        monkeypatch.setattr(cls, "is_global", property(lambda self: True))
        monkeypatch.setattr(cls, "is_private", property(lambda self: False))
    assert ipaddress.ip_address("10.0.0.1").is_global  # the patch took
    for address in (*DISPUTED_ADDRESSES, "10.0.0.1", "fd00::1", "2002:7f00:1::1", "100.64.0.1"):
        assert is_special_address(ipaddress.ip_address(address)), address
    for address in PUBLIC_ADDRESSES:
        assert not is_special_address(ipaddress.ip_address(address)), address


async def test_names_whose_dns_hangs_hold_up_no_other_lookup(
    tls: Tls, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lookup cannot be cancelled: ten names whose DNS never answers (more than the event
    loop's default executor has threads here) must not stall a healthy platform's lookup,
    nor the application's own use of that executor."""
    real = socket.getaddrinfo
    released = threading.Event()
    stuck: list[str] = []
    all_stuck = asyncio.Event()
    loop = asyncio.get_running_loop()

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if str(host).endswith(".hang.test"):
            stuck.append(host)
            if len(stuck) == 10:
                loop.call_soon_threadsafe(all_stuck.set)
            released.wait()
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    resolver = make_resolver(tls, clock)
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route()
        hanging = [
            asyncio.create_task(failure(resolver, f"https://p{number}.hang.test/p.json"))
            for number in range(10)
        ]
        try:
            async with asyncio.timeout(30):  # a hang is the failure here, reported as one
                await all_stuck.wait()
                profile = await resolver.resolve(server.url("/p.json", host="localhost"))
                assert await loop.run_in_executor(None, sum, [1, 2]) == 3  # the application's executor
        finally:
            released.set()
        assert profile.version == DOCUMENT["ucp"]["version"]
        assert await asyncio.gather(*hanging) == [INVALID_PROFILE_URL] * 10
    assert sorted(stuck) == sorted(f"p{number}.hang.test" for number in range(10))


async def test_past_the_lookup_limit_a_name_is_refused_at_once_and_not_held_against_it(
    tls: Tls, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = socket.getaddrinfo
    released = threading.Event()
    entered = asyncio.Event()
    loop = asyncio.get_running_loop()

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "only.hang.test":
            loop.call_soon_threadsafe(entered.set)
            released.wait()
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    lookups = Lookups(limit=1)
    resolver = make_resolver(tls, clock, lookups=lookups)
    async with ProfileServer(tls.server) as server:
        server.routes["/p.json"] = Route()
        healthy = server.url("/p.json", host="localhost")
        hanging = asyncio.create_task(failure(resolver, "https://only.hang.test/p.json"))
        slot_free_when_told: list[bool] = []

        def told(_: object) -> None:  # runs as the lookup's answer is told, in its thread
            slot_free_when_told.append(lookups.running < lookups.limit)

        try:
            async with asyncio.timeout(30):
                await entered.wait()
                lookups.look_up("only.hang.test", 443).add_done_callback(told)  # the one running
                with pytest.raises(UcpError) as busy:
                    await resolver.resolve(healthy)
        finally:
            released.set()
        assert busy.value.code == PROFILE_UNREACHABLE
        assert "too many profile hosts" in busy.value.message
        assert await hanging == INVALID_PROFILE_URL
        # Whoever hears that the lookup ended finds its slot free (not only after a while).
        assert slot_free_when_told == [True]
        # The clock has not moved: a failure remembered against the URL would still stand.
        assert (await resolver.resolve(healthy)).version == DOCUMENT["ucp"]["version"]
