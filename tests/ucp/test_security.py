"""Server-side request forgery: profile URLs that point inside the business's network.

A platform names its profile by URL in every call, so the URL is attacker-controlled.
Through a real server (the example shop with the default `HttpsProfileResolver`: no
allow list), every special-use destination is refused with `invalid_profile_url` before
any connection is made:

- loopback in every spelling, against a real listening socket on 127.0.0.1 (and ::1)
  that counts the connections it accepts, and a control resolver that is allowed to
  connect, which proves the counter counts;
- private, shared, link-local and cloud metadata addresses, IPv6 forms, and names that
  resolve to any of them, with the HTTP client replaced by one that records its
  construction (nothing beyond loopback is ever dialled, even if a check were missing);
- DNS rebinding: the name is resolved once and the checked address is the one dialled;
- a property test over every IPv4 address in a special range, in every spelling that
  resolvers and browsers accept (decimal, octal, hex, short forms), and IPv6 tunnels;
- what a failed fetch tells the platform: a fixed phrase per kind of failure, never the
  HTTP and TLS stack's exception text, which goes to the operator's log instead.
"""

from __future__ import annotations

import ast
import asyncio
import ipaddress
import json
import logging
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
import trustme
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_negotiation.core import client_log
from mcp_negotiation.ucp import (
    ALL_PORTS,
    INVALID_PROFILE_URL,
    UCP_JSONRPC_ERROR,
    HttpsProfileResolver,
    UcpError,
)
from support.harness import ROOT, serve_http
from support.profile_server import DOCUMENT, ProfileServer, Route, Tls
from ucp_shop import build as build_shop

pytestmark = pytest.mark.security

HANG = 60.0
MODERN = "2026-07-28"


# -- a listener that counts, and an HTTP client that must never be built ---------------------------------


class Listener:
    """Plain TCP sockets on 127.0.0.1 and ::1 (when available), one port, counting accepts."""

    def __init__(self) -> None:
        self.accepted = 0
        self.port = 0
        self.ipv6 = False
        self._servers: list[asyncio.Server] = []
        self._counted = asyncio.Condition()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with self._counted:
            self.accepted += 1
            self._counted.notify_all()
        writer.close()

    async def until(self, count: int) -> None:
        """Return once `count` connections have been accepted."""
        async with self._counted:
            await self._counted.wait_for(lambda: self.accepted >= count)

    async def __aenter__(self) -> Listener:
        server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self._servers.append(server)
        self.port = server.sockets[0].getsockname()[1]
        try:
            self._servers.append(await asyncio.start_server(self._accept, "::1", self.port))
            self.ipv6 = True
        except OSError:
            pass  # no IPv6 loopback here: the [::1] forms are still refused, just not counted
        return self

    async def __aexit__(self, *exc: object) -> None:
        for server in self._servers:
            server.close()
            await server.wait_closed()


class Refusing:
    """The HTTP client a resolver opens (`http_client=`): each one built is recorded, and
    fails the fetch at once."""

    def __init__(self) -> None:
        self.built: list[object] = []

    def __call__(self, *args: object, **kwargs: object) -> httpx2.AsyncClient:
        self.built.append(kwargs)
        raise httpx2.ConnectError("the test forbids connections")


@pytest.fixture
def refusing() -> Refusing:
    return Refusing()


NAMES: dict[str, list[str]] = {
    "intranet.example": ["10.1.2.3"],
    "metadata.example": ["169.254.169.254"],
    "cgnat.example": ["100.64.0.1"],
    "v6-link-local.example": ["fe80::1"],
    "v6-ula.example": ["fd00:ec2::254"],
    "v4-mapped.example": ["::ffff:10.0.0.1"],
    "nat64.example": ["64:ff9b::a9fe:a9fe"],
    "mixed.example": ["93.184.216.34", "192.168.0.10"],
    "loopback.example": ["127.0.0.1"],
}
"""Names a hostile DNS answers with special-use addresses (one bad answer refuses the name)."""


@pytest.fixture
def hostile_dns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Resolves the names in NAMES; any other lookup is a test failure (nothing leaves the host)."""
    looked_up: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        looked_up.append(name)
        if name in NAMES:
            return [
                (
                    socket.AF_INET6 if ":" in address else socket.AF_INET,
                    socket.SOCK_STREAM,
                    6,
                    "",
                    (address, port, 0, 0) if ":" in address else (address, port),
                )
                for address in NAMES[name]
            ]
        if name in {"localhost", "localhost.", "LOCALHOST"}:
            return real(host, port, *args, **kwargs)  # the machine's own answer
        raise AssertionError(f"unexpected DNS lookup of {name!r}")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return looked_up


async def _refused(client: Client, url: str) -> str:
    with pytest.raises(MCPError) as refused:
        await client.call_tool("negotiated", {"meta": {"ucp-agent": {"profile": url}}})
    assert refused.value.error.code == UCP_JSONRPC_ERROR
    data: dict[str, Any] = refused.value.error.data
    assert data["code"] == INVALID_PROFILE_URL, (url, data)
    content: str = data["content"]
    return content


LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "127.0.0.2",
    "127.1",
    "127.0.1",
    "2130706433",
    "0x7f000001",
    "0x7F.0.0.1",
    "0177.0.0.1",
    "0177.0.0.01",
    "017700000001",
    "127.0.0.1.",
    "0.0.0.0",
    "0",
    "localhost",
    "LOCALHOST",
    "localhost.",
    "loopback.example",
    "[::1]",
    "[0:0:0:0:0:0:0:1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[::127.0.0.1]",
    "[::]",
    "[64:ff9b::7f00:1]",
    "[2002:7f00:1::1]",
]


@pytest.mark.anyio
@pytest.mark.usefixtures("hostile_dns")
async def test_loopback_in_every_spelling_is_refused_without_a_connection(
    tls_client: ssl.SSLContext, refusing: Refusing
) -> None:
    shop = build_shop(HttpsProfileResolver(http_client=refusing))
    with anyio.fail_after(HANG):
        async with Listener() as listener, Client(shop, mode=MODERN) as client:
            for host in LOOPBACK_SPELLINGS:
                await _refused(client, f"https://{host}:{listener.port}/profile.json")
            assert refusing.built == []
            # Control: a resolver allowed to reach loopback does connect, and the listener counts it.
            allowed = HttpsProfileResolver(
                ssl_context=tls_client,
                allow_addresses=["127.0.0.1"],
                allow_ports=ALL_PORTS,
                http_client=refusing,
            )
            with pytest.raises(UcpError):
                await allowed.resolve(f"https://127.0.0.1:{listener.port}/profile.json")
    assert len(refusing.built) == 1  # only the control resolver built a client


@pytest.mark.anyio
@pytest.mark.usefixtures("hostile_dns")
async def test_loopback_refusals_never_reach_a_real_listener(tls_client: ssl.SSLContext) -> None:
    # The same, with the real HTTP client left in place: the listener's count is the proof.
    with anyio.fail_after(HANG):
        async with Listener() as listener, Client(build_shop(), mode=MODERN) as client:
            for host in LOOPBACK_SPELLINGS:
                await _refused(client, f"https://{host}:{listener.port}/profile.json")
            assert listener.accepted == 0
            allowed = HttpsProfileResolver(
                ssl_context=tls_client, allow_addresses=["127.0.0.1", "::1"], allow_ports=ALL_PORTS
            )
            with pytest.raises(UcpError):  # not TLS: unreachable, but it did connect
                await allowed.resolve(f"https://127.0.0.1:{listener.port}/profile.json")
            if listener.ipv6:
                with pytest.raises(UcpError):
                    await allowed.resolve(f"https://[::1]:{listener.port}/profile.json")
            await listener.until(1 + listener.ipv6)
    assert listener.accepted == 1 + listener.ipv6


@pytest.mark.anyio
@pytest.mark.parametrize(
    "url",
    [
        "https://10.0.0.1/p.json",
        "https://172.16.5.4/p.json",
        "https://192.168.1.1/p.json",
        "https://100.64.0.1/p.json",
        "https://169.254.169.254/latest/meta-data/",
        "https://100.100.100.200/latest/meta-data/",
        "https://192.0.0.192/p.json",
        "https://198.18.0.1/p.json",
        "https://224.0.0.1/p.json",
        "https://255.255.255.255/p.json",
        "https://[fe80::1]/p.json",
        "https://[fe80::1%25eth0]/p.json",
        "https://[fd00:ec2::254]/latest/meta-data/",
        "https://[fc00::1]/p.json",
        "https://[ff02::1]/p.json",
        "https://[::ffff:10.0.0.1]/p.json",
        "https://[::ffff:a9fe:a9fe]/p.json",
        "https://[64:ff9b::a9fe:a9fe]/p.json",
        "https://[2002:a9fe:a9fe::]/p.json",
        "https://[2001:0:4136:e378:8000:63bf:56fe:5efe]/p.json",
        "https://[2001:db8::1]/p.json",
        "https://2852039166/latest/meta-data/",
        "https://0xa9fea9fe/latest/meta-data/",
        "https://0251.0376.0251.0376/latest/meta-data/",
        "https://169.254.43518/latest/meta-data/",
        "https://10.1/p.json",
        "https://intranet.example/p.json",
        "https://metadata.example/latest/meta-data/",
        "https://cgnat.example/p.json",
        "https://v6-link-local.example/p.json",
        "https://v6-ula.example/p.json",
        "https://v4-mapped.example/p.json",
        "https://nat64.example/p.json",
        "https://mixed.example/p.json",
    ],
)
@pytest.mark.usefixtures("hostile_dns")
async def test_special_use_destinations_are_refused_before_any_connection(
    refusing: Refusing, url: str
) -> None:
    with anyio.fail_after(HANG):
        async with Client(build_shop(HttpsProfileResolver(http_client=refusing)), mode=MODERN) as client:
            content = await _refused(client, url)
    assert refusing.built == []
    assert "special-use" in content or "non-canonical" in content or "does not parse" in content


@pytest.mark.anyio
@pytest.mark.usefixtures("hostile_dns")
async def test_every_source_of_the_url_is_checked(refusing: Refusing) -> None:
    """arguments.meta, the UCP-Agent header (HTTP), and the stdio session default."""
    target = "https://metadata.example/latest/meta-data/"
    shop = build_shop(HttpsProfileResolver(http_client=refusing), legacy_meta=True)
    with anyio.fail_after(HANG), serve_http(shop.streamable_http_app()) as url:
        async with (
            httpx2.AsyncClient(headers={"UCP-Agent": f'profile="{target}"'}, timeout=HANG) as http,
            Client(streamable_http_client(url, http_client=http), mode=MODERN) as client,
        ):
            with pytest.raises(MCPError) as refused:
                await client.call_tool("negotiated", {})
            assert refused.value.error.data["code"] == INVALID_PROFILE_URL
        async with Client(url, mode=MODERN) as client:
            for meta in ({"ucp": {"profile": target}}, {"dev.mcp-negotiation/ucp-profile": target}):
                with pytest.raises(MCPError) as refused:
                    await client.call_tool("negotiated", {}, meta=meta)
                assert refused.value.error.data["code"] == INVALID_PROFILE_URL
    assert refusing.built == []


# -- what a client or a platform is told: fixed phrases, never an exception's text ------------------------

BAD_HEADERS: dict[str, tuple[bytes, str]] = {
    "not ascii": (b'profile="https://caf\xe9.test/"', "the UCP-Agent header is not an RFC 8941 dictionary"),
    "port not a number": (b'profile="https://h:-1/"', "the profile URL does not parse"),
    "port too large": (b'profile="https://h:65536/"', "the profile URL does not parse"),
    "not a dictionary": (b"profile=(", "the UCP-Agent header is not an RFC 8941 dictionary"),
}
BAD_BODIES: dict[str, bytes] = {
    "nested deeper than the parser's stack": b"[" * 100_000,
    "not UTF-8": b'\xff\xfe{"ucp": {}}',
    "not JSON": b"{not json",
    "a NaN": b'{"ucp": {"version": NaN}}',
    "an integer past the digit limit": b'{"ucp": {"version": ' + b"1" * 5_000 + b"}}",
}
EXCEPTION_TEXT = (
    "Error",
    "codec",
    "ascii",
    "cast",
    "integer",
    "Traceback",
    "line 1",
    "column",
    "0xe9",
    "recursion",
)
"""Pieces of the exceptions behind `BAD_HEADERS` and `BAD_BODIES`, none of which the client may see."""


@pytest.mark.anyio
async def test_hostile_headers_and_profile_bodies_get_fixed_phrases_and_the_log_the_exception(
    tls: Tls, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="mcp_negotiation")
    resolver = HttpsProfileResolver(
        ssl_context=tls.client, allow_addresses=["127.0.0.1"], allow_ports=ALL_PORTS
    )
    told: dict[str, dict[str, Any]] = {}
    with anyio.fail_after(HANG), serve_http(build_shop(resolver).streamable_http_app()) as url:
        for name, (header, _) in BAD_HEADERS.items():
            async with (
                httpx2.AsyncClient(headers={"UCP-Agent": header}, timeout=HANG) as http,
                Client(streamable_http_client(url, http_client=http), mode=MODERN) as client,
            ):
                with pytest.raises(MCPError) as refused:
                    await client.call_tool("negotiated", {})
                told[name] = refused.value.error.data
        async with ProfileServer(tls.server) as host, Client(url, mode=MODERN) as client:
            for name, body in BAD_BODIES.items():
                host.routes[f"/{len(told)}.json"] = Route(body=body)
                profile = host.url(f"/{len(told)}.json")
                with pytest.raises(MCPError) as refused:
                    await client.call_tool("negotiated", {"meta": {"ucp-agent": {"profile": profile}}})
                told[name] = refused.value.error.data
    assert {name: (data["code"], data["content"]) for name, data in told.items()} == {
        **{name: (INVALID_PROFILE_URL, phrase) for name, (_, phrase) in BAD_HEADERS.items()},
        **{name: ("profile_malformed", "the profile is not JSON") for name in BAD_BODIES},
    }
    assert [leak for leak in EXCEPTION_TEXT if leak.lower() in json.dumps([*told.values()]).lower()] == []
    logged = [r for r in caplog.records if r.exc_info is not None]
    assert len(logged) == len(told)  # each exception itself goes to the operator's log, at DEBUG
    assert {r.levelno for r in logged} == {logging.DEBUG}


# -- DNS rebinding --------------------------------------------------------------------------------------


@pytest.fixture
def tls_client(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


@asynccontextmanager
async def _named_profile_host(ca: trustme.CA, name: str) -> AsyncIterator[ProfileServer]:
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(name).configure_cert(server_context)
    async with ProfileServer(server_context) as host:
        host.routes["/p.json"] = Route(body=json.dumps(DOCUMENT).encode())
        yield host


@pytest.mark.anyio
async def test_dns_rebinding_the_checked_address_is_the_one_dialled(
    ca: trustme.CA, tls_client: ssl.SSLContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # First answer: an address the operator allowed. Every later answer: one it did not
    # (127.0.0.2, where nothing listens). A resolver that looked the name up again to
    # connect would dial 127.0.0.2 and fail; the real one dials what it checked.
    answers: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        assert host == "rebind.example"
        address = "127.0.0.1" if not answers else "127.0.0.2"
        answers.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    with anyio.fail_after(HANG):
        async with _named_profile_host(ca, "rebind.example") as host:
            resolver = HttpsProfileResolver(
                ssl_context=tls_client, allow_addresses=["127.0.0.1/32"], allow_ports=ALL_PORTS
            )
            profile = await resolver.resolve(host.url("/p.json", host="rebind.example"))
            assert profile.version == DOCUMENT["ucp"]["version"]
            assert answers == ["127.0.0.1"]  # one lookup, and the answer checked is the one used
            assert host.requests[0].headers["host"] == f"rebind.example:{host.port}"
            assert host.server_names == ["rebind.example"]  # TLS still verified the name
            # The next fetch (after the cache) sees the rebound answer, and refuses it.
            fresh = HttpsProfileResolver(
                ssl_context=tls_client, allow_addresses=["127.0.0.1/32"], allow_ports=ALL_PORTS
            )
            with pytest.raises(UcpError) as refused:
                await fresh.resolve(host.url("/p.json", host="rebind.example"))
            assert refused.value.code == INVALID_PROFILE_URL
            assert len(host.requests) == 1


# -- what a failed fetch tells the platform, and what it tells the operator ------------------------------

FETCH_FAILURES: dict[str, tuple[str, str]] = {
    "untrusted certificate": (
        "the profile host's TLS certificate could not be verified",
        "CERTIFICATE_VERIFY_FAILED",
    ),
    "no TLS": ("the TLS handshake with the profile host failed", "[SSL:"),
    "refused": ("cannot connect to the profile host", "ConnectError"),
    "bad status line": ("the profile host broke the HTTP protocol", "illegal status line"),
    "cut mid-body": ("the profile host broke the HTTP protocol", "received 6 bytes, expected 1000"),
    "silent": ("the profile host did not answer in time", "ReadTimeout"),
}
"""Per kind of failure: what the platform is told, and a piece of the exception the log shows."""

LEAKS = ("SSL", "_ssl.c", "Error(", "Timeout(", "2000", "bytes", "httpx", "httpcore")
"""Text of the exceptions behind `FETCH_FAILURES`, none of which the platform may see."""


async def _answer_in_plain_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    await writer.drain()
    writer.close()


@asynccontextmanager
async def _failing_fetch(kind: str, tls: Tls) -> AsyncIterator[tuple[str, HttpsProfileResolver]]:
    """A profile URL on 127.0.0.1 whose fetch fails as `kind` says, and the resolver to try it."""
    resolver = HttpsProfileResolver(
        ssl_context=tls.client, allow_addresses=["127.0.0.1"], allow_ports=ALL_PORTS, read_timeout=0.2
    )
    if kind == "refused":
        with socket.socket() as bound:  # bound, never listening: every connection is refused
            bound.bind(("127.0.0.1", 0))
            yield f"https://127.0.0.1:{bound.getsockname()[1]}/p.json", resolver
    elif kind == "no TLS":
        server = await asyncio.start_server(_answer_in_plain_http, "127.0.0.1", 0)
        async with server:
            yield f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/p.json", resolver
    else:
        routes = {
            "bad status line": Route(status=2000),
            "cut mid-body": Route(body=b'{"ucp"', declare_length=False, headers={"Content-Length": "1000"}),
        }
        async with ProfileServer(tls.server) as host:
            host.routes["/p.json"] = routes.get(kind, Route(gate=host.gate()))
            if kind == "untrusted certificate":  # the default trust store, which lacks the test CA
                resolver = HttpsProfileResolver(allow_addresses=["127.0.0.1"], allow_ports=ALL_PORTS)
            yield host.url("/p.json"), resolver


@pytest.mark.anyio
@pytest.mark.parametrize("kind", FETCH_FAILURES)
async def test_a_failed_fetch_tells_the_platform_its_kind_and_the_log_the_exception(
    kind: str, tls: Tls, caplog: pytest.LogCaptureFixture
) -> None:
    told, logged = FETCH_FAILURES[kind]
    caplog.set_level(logging.WARNING, logger="mcp_negotiation")
    with anyio.fail_after(HANG):
        async with _failing_fetch(kind, tls) as (url, resolver), Client(build_shop(resolver)) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("negotiated", {"meta": {"ucp-agent": {"profile": url}}})
    data = refused.value.error.data
    assert (data["code"], data["content"]) == ("profile_unreachable", told)
    assert [leak for leak in LEAKS if leak in json.dumps(data)] == []
    warnings = [r for r in caplog.records if r.name == "mcp_negotiation" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert url in warnings[0].getMessage()
    assert told in warnings[0].getMessage()
    assert logged in warnings[0].getMessage()  # the exception's type and text, not its traceback
    assert warnings[0].exc_info is None


def test_the_log_lines_clients_cause_are_bounded_per_window_and_carry_no_traceback(
    tls: Tls, caplog: pytest.LogCaptureFixture
) -> None:
    """Distinct failing URLs, each remembered for its own backoff, as many as a client likes:
    `LINES_PER_WINDOW` lines a window, none with a traceback (a handler formats it on the
    event loop), and the next window says how many were left out."""
    now = [0.0]
    client_log.reset(clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger="mcp_negotiation")
    resolver = HttpsProfileResolver(
        ssl_context=tls.client, allow_addresses=["127.0.0.1"], allow_ports=ALL_PORTS
    )

    async def fail(count: int) -> None:
        for i in range(count):
            with pytest.raises(UcpError):
                await resolver.resolve(f"https://127.0.0.1:{port}/p.json?i={i}-{now[0]}")

    with socket.socket() as closed:  # bound, never listening: every connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        asyncio.run(fail(client_log.LINES_PER_WINDOW + 7))
        now[0] += client_log.WINDOW
        asyncio.run(fail(1))
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == client_log.LINES_PER_WINDOW + 1
    assert [r for r in lines if r.exc_info] == []
    assert lines[-1].getMessage().endswith("(7 more like this not logged)")
    tracebacks = [r for r in caplog.records if r.levelno == logging.DEBUG and r.exc_info]
    assert len(tracebacks) == len(lines)  # for an operator who asks for DEBUG


def test_no_log_call_of_the_library_above_debug_carries_a_traceback() -> None:
    """The audit, kept: a traceback is logged at DEBUG only (`client_log` does so), but where
    the application, not a client, is the cause: the installers run when a server is built."""
    offending = []
    for path in (ROOT / "src" / "mcp_negotiation").rglob("*.py"):
        if path.name in {"install.py", "installing.py"}:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "logger"
            ):
                continue
            if node.func.attr == "exception" or (
                node.func.attr in {"log", "info", "warning", "error", "critical"}
                and any(keyword.arg == "exc_info" for keyword in node.keywords)
            ):
                offending.append(f"{path.name}:{node.lineno}")
    assert offending == []


# -- property: every special IPv4 address in every spelling; IPv6 tunnels --------------------------------

SPECIAL_V4 = [
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
]


@st.composite
def special_ipv4(draw: st.DrawFn) -> int:
    network = draw(st.sampled_from(SPECIAL_V4))
    return int(network.network_address) + draw(st.integers(0, network.num_addresses - 1))


def _part(value: int, style: str) -> str:
    return {"dec": str(value), "oct": f"0{value:o}", "hex": f"0x{value:x}", "HEX": f"0X{value:X}"}[style]


@st.composite
def spellings(draw: st.DrawFn, address: int) -> str:
    """Spellings that inet_aton, browsers or curl read as `address`."""
    octets = address.to_bytes(4, "big")
    shape = draw(st.sampled_from(["dotted", "one", "two", "three", "dotted-dot"]))
    styles = st.sampled_from(["dec", "oct", "hex", "HEX"])
    if shape == "one":
        return _part(address, draw(styles))
    if shape == "two":
        return f"{_part(octets[0], draw(styles))}.{_part(address & 0xFFFFFF, draw(styles))}"
    if shape == "three":
        last = int.from_bytes(octets[2:], "big")
        return (
            f"{_part(octets[0], draw(styles))}.{_part(octets[1], draw(styles))}.{_part(last, draw(styles))}"
        )
    dotted = ".".join(_part(octet, draw(styles)) for octet in octets)
    return dotted + "." if shape == "dotted-dot" else dotted


@st.composite
def special_hosts(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["v4", "v4", "mapped", "nat64", "6to4", "loopback6", "link-local6", "ula6"]))
    if kind == "v4":
        return draw(spellings(draw(special_ipv4())))
    v4 = ipaddress.IPv4Address(draw(special_ipv4()))
    v6: ipaddress.IPv6Address
    if kind == "mapped":
        v6 = ipaddress.IPv6Address(f"::ffff:{v4}")
    elif kind == "nat64":
        v6 = ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | int(v4))
    elif kind == "6to4":
        v6 = ipaddress.IPv6Address((0x2002 << 112) | (int(v4) << 80) | draw(st.integers(0, 2**80 - 1)))
    elif kind == "loopback6":
        v6 = ipaddress.IPv6Address(1)
    else:
        prefix = ipaddress.IPv6Network("fe80::/10" if kind == "link-local6" else "fc00::/7")
        v6 = prefix[draw(st.integers(0, 2**64 - 1))]
    text = draw(st.sampled_from([v6.compressed, v6.exploded, v6.compressed.upper()]))
    return f"[{text}]"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    host=special_hosts(), port=st.sampled_from(["", ":443", ":8443"]), path=st.sampled_from(["/", "/p.json"])
)
def test_property_special_addresses_in_any_spelling_are_refused_offline(
    monkeypatch: pytest.MonkeyPatch, host: str, port: str, path: str
) -> None:
    # Literal addresses are never looked up and no client is built: refused from the text alone.
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("a refused URL reached DNS or the network")

    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "getaddrinfo", forbidden)
    with pytest.raises(UcpError) as refused:
        asyncio.run(HttpsProfileResolver(http_client=forbidden).resolve(f"https://{host}{port}{path}"))
    assert refused.value.code == INVALID_PROFILE_URL
