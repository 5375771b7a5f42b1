"""The memo of scoped UCP calls: a repeat reuses the whole scoped result, never a stale one.

A repeated UCP call off HTTP is answered from the engine's memo per (negotiation record,
profile URL) while the resolver, still asked on every call, answers with the very
profile the memoised agreement was made with. These tests pin where that could go wrong:
a profile that expires (fetched again from a real local HTTPS server, its TTL moved past
by the resolver's clock), a profile that changes, two clients naming different
platforms, a business profile the resolver fetched for an older version, and growth.
Real SDK clients in memory, both eras.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client

from mcp_negotiation import Policy
from mcp_negotiation.adapters.mcp2.middleware import NegotiationMiddleware
from mcp_negotiation.adapters.mcp2.seams import middleware_list
from mcp_negotiation.core import engine
from mcp_negotiation.core.bounded import MAX_ENTRY_BYTES
from mcp_negotiation.core.negotiation import NO_HEADERS
from mcp_negotiation.ucp import ALL_PORTS, HttpsProfileResolver, Profile, StaticResolver, UcpError, UcpPolicy
from support.harness import structured
from support.profile_server import ProfileServer, Route, Tls
from ucp_shop import BUSINESS_PROFILE, CHECKOUT, build

pytestmark = pytest.mark.anyio

V = "2026-04-08"
DISCOUNT = "dev.ucp.shopping.discount"
MODES = ("legacy", "2026-07-28")
A, B = "https://a.example/profile.json", "https://b.example/profile.json"


def _document(*capabilities: str, version: str = V) -> dict[str, Any]:
    return {
        "ucp": {"version": version, "capabilities": {name: [{"version": version}] for name in capabilities}}
    }


def _platform(*capabilities: str) -> Profile:
    return Profile.from_json(_document(*capabilities))


def _args(url: str) -> dict[str, Any]:
    return {"meta": {"ucp-agent": {"profile": url}}}


class _Counting:
    """A resolver whose profile per URL changes when told (a re-fetch), counting its calls."""

    def __init__(self, profiles: dict[str, Profile]) -> None:
        self.profiles = profiles
        self.calls = 0

    async def resolve(self, url: str) -> Profile:
        self.calls += 1
        return self.profiles[url]


class _Peeking(_Counting):
    """As `_Counting`, also telling its current profile without an `await` (`fresh`)."""

    def fresh(self, url: str) -> Profile | None:
        return self.profiles.get(url)


class _BrokenPeek(_Counting):
    def fresh(self, url: str) -> Profile | None:
        raise RuntimeError("a resolver's bug")


async def _agreed(client: Client, url: str) -> set[str]:
    result = structured(await client.call_tool("negotiated", _args(url)))
    return set(result["ucp"]["capabilities"])


@pytest.fixture
async def platform(tls: Tls) -> AsyncIterator[ProfileServer]:
    async with ProfileServer(tls.server) as server:
        yield server


@pytest.mark.parametrize("mode", MODES)
async def test_an_expired_profile_is_fetched_again_and_its_change_served(
    mode: str, tls: Tls, platform: ProfileServer
) -> None:
    """Within its TTL the profile as first fetched is served (as the resolver's cache
    answers it); past it, the profile is fetched once again and the change reaches the call."""
    fresh = {"Cache-Control": "max-age=60"}
    platform.routes = {
        "/p.json": Route(body=json.dumps(_document(CHECKOUT, DISCOUNT)).encode(), headers=fresh)
    }
    now = [1_000.0]  # the resolver's monotonic clock, moved by the test
    resolver = HttpsProfileResolver(
        ssl_context=tls.client, allow_addresses=["127.0.0.1"], allow_ports=ALL_PORTS, clock=lambda: now[0]
    )
    url = platform.url("/p.json")
    async with Client(build(resolver), mode=mode) as client:
        for _ in range(3):
            assert DISCOUNT in await _agreed(client, url)
        platform.routes["/p.json"] = Route(body=json.dumps(_document(CHECKOUT)).encode(), headers=fresh)
        now[0] += 30  # still fresh: the cached profile, as the resolver answers it
        assert DISCOUNT in await _agreed(client, url)
        assert len(platform.requests) == 1
        now[0] += 31  # past its max-age
        for _ in range(3):
            assert await _agreed(client, url) == {CHECKOUT}
        assert len(platform.requests) == 2


@pytest.mark.parametrize("resolver_type", [_Counting, _Peeking, _BrokenPeek])
@pytest.mark.parametrize("mode", MODES)
async def test_a_changed_profile_is_agreed_with_afresh(mode: str, resolver_type: type[_Counting]) -> None:
    resolver = resolver_type({A: _platform(CHECKOUT, DISCOUNT)})
    async with Client(build(resolver), mode=mode) as client:
        for _ in range(3):
            assert DISCOUNT in await _agreed(client, A)
        asked = resolver.calls
        resolver.profiles[A] = _platform(CHECKOUT)  # re-published without discounts
        assert await _agreed(client, A) == {CHECKOUT}
        assert await _agreed(client, A) == {CHECKOUT}
        resolver.profiles[A] = _platform(CHECKOUT, DISCOUNT)
        assert DISCOUNT in await _agreed(client, A)
    if resolver_type is not _Peeking:  # asked once per call, as without the memo
        assert resolver.calls == asked + 3


@pytest.mark.parametrize("mode", MODES)
async def test_two_clients_naming_different_profiles_each_get_their_own(mode: str) -> None:
    """The same envelope (one negotiation record for both), two platforms, interleaved."""
    resolver = _Peeking({A: _platform(CHECKOUT, DISCOUNT), B: _platform(CHECKOUT)})
    server = build(resolver)
    async with Client(server, mode=mode) as first, Client(server, mode=mode) as second:
        for _ in range(3):
            assert DISCOUNT in await _agreed(first, A)
            assert await _agreed(second, B) == {CHECKOUT}
        resolver.profiles[B] = _platform(CHECKOUT, DISCOUNT)
        assert DISCOUNT in await _agreed(second, B)
        resolver.profiles[A] = _platform(CHECKOUT)
        assert await _agreed(first, A) == {CHECKOUT}


OLD = "2026-01-23"
OLD_URL = "https://shop.example/.well-known/ucp/2026-01-23"
GIFT_WRAP = "dev.ucp.shopping.gift_wrap"


def _old_business(*capabilities: str) -> Profile:
    return Profile.from_json(_document(*capabilities, version=OLD))


def _engine(resolver: Any) -> engine.Engine:
    return engine.Engine(Policy(ucp=UcpPolicy(business_profile=BUSINESS_PROFILE, resolver=resolver)))


def _record(eng: engine.Engine, tag: str = "x", padding: int = 0) -> Any:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "experimental": {tag: {f"pad{i}": "p" * 4_000 for i in range(padding // 4_000)}}
        },
        "io.modelcontextprotocol/clientInfo": {"name": "memo", "version": "1"},
    }
    return eng.negotiator.request(meta, transport="memory", headers=NO_HEADERS, check_required=True)


async def test_a_business_profile_fetched_for_an_older_version_is_never_memoised() -> None:
    """Its freshness is the resolver's: a repeat asks for it again, and sees it change."""
    resolver = _Counting(
        {
            A: Profile.from_json(_document(CHECKOUT, GIFT_WRAP, version=OLD)),
            OLD_URL: _old_business(CHECKOUT, GIFT_WRAP),
        }
    )
    eng = _engine(resolver)
    assert eng.ucp is not None
    assert eng.ucp.policy.business.older_profile_url(OLD) == OLD_URL
    record = _record(eng)
    first = await eng.scoped_repeat(record, {"arguments": _args(A)})
    assert first is not None
    assert GIFT_WRAP in first.published[0].ucp.capabilities
    resolver.profiles[OLD_URL] = _old_business(CHECKOUT)
    again = await eng.scoped_repeat(record, {"arguments": _args(A)})
    assert again is not None
    assert GIFT_WRAP not in again.published[0].ucp.capabilities
    assert len(eng.ucp_memo) == 0


async def test_a_repeat_is_the_memoised_outcome_while_the_profile_stands() -> None:
    resolver = _Counting({A: _platform(CHECKOUT, DISCOUNT)})
    eng = _engine(resolver)
    record = _record(eng)
    first = await eng.scoped_repeat(record, {"arguments": _args(A)})
    assert first is not None
    assert await eng.scoped_repeat(record, {"arguments": _args(A)}) is first
    resolver.profiles[A] = _platform(CHECKOUT)
    changed = await eng.scoped_repeat(record, {"arguments": _args(A)})
    assert changed is not None
    assert changed is not first
    assert set(changed.published[0].ucp.capabilities) == {CHECKOUT}
    # Another record (another client's envelope) naming the same platform has its own entry.
    other = await eng.scoped_repeat(_record(eng, "y"), {"arguments": _args(A)})
    assert other is not None
    assert other.published[0].client_capabilities == {"experimental": {"y": {}}}
    assert resolver.calls == 4


async def test_the_memo_stays_bounded_in_entries_and_bytes() -> None:
    urls = [f"https://p{i}.example/profile.json" for i in range(engine.MEMO_SIZE + 200)]
    profile = _platform(CHECKOUT)
    eng = _engine(_Counting(dict.fromkeys(urls, profile)))
    record = _record(eng)
    for url in urls:
        assert await eng.scoped_repeat(record, {"arguments": _args(url)}) is not None
    memo = eng.ucp_memo
    assert len(memo) == engine.MEMO_SIZE
    assert memo.bytes <= memo.max_bytes
    # A record over the largest entry is scoped every time, and kept nowhere.
    big = _record(eng, "big", padding=MAX_ENTRY_BYTES + 4_000)
    before = dict(memo)
    scoped = await eng.scoped_repeat(big, {"arguments": _args(urls[0])})
    assert scoped is not None
    assert scoped.published[0].client_capabilities == big.client_capabilities
    assert dict(memo) == before


async def test_the_resolvers_tell_a_profile_without_io_only_while_resolve_would_answer_it(
    tls: Tls, platform: ProfileServer
) -> None:
    profile = _platform(CHECKOUT)
    static = StaticResolver({A: profile})
    assert static.fresh(A) is profile
    assert static.fresh(B) is None
    fresh = {"Cache-Control": "max-age=60"}
    platform.routes = {"/p.json": Route(body=json.dumps(_document(CHECKOUT)).encode(), headers=fresh)}
    now = [1_000.0]
    https = HttpsProfileResolver(
        ssl_context=tls.client, allow_addresses=["127.0.0.1"], allow_ports=ALL_PORTS, clock=lambda: now[0]
    )
    url, missing = platform.url("/p.json"), platform.url("/missing.json")
    assert https.fresh(url) is None  # not fetched yet
    fetched = await https.resolve(url)
    assert https.fresh(url) is fetched
    now[0] += 61
    assert https.fresh(url) is None  # expired: `resolve` fetches again
    assert await https.resolve(url) is not fetched
    with pytest.raises(UcpError):
        await https.resolve(missing)
    assert https.fresh(missing) is None  # a failure held in its backoff is `resolve`'s to raise


@pytest.mark.parametrize("mode", MODES)
async def test_urls_that_differ_only_in_their_fragment_are_one_profile_and_one_agreement(mode: str) -> None:
    """50 calls naming `A#0` ... `A#49`: the resolver is asked for `A` only, and `A` alone keys
    the agreement (kept under the URL it resolves); the engine's memo holds none of the raw
    strings (those calls take the full path, whose validation drops the fragment)."""
    asked: list[str] = []

    class Recording(_Peeking):
        async def resolve(self, url: str) -> Profile:
            asked.append(url)
            return await super().resolve(url)

    server = build(Recording({A: _platform(CHECKOUT, DISCOUNT)}))
    async with Client(server, mode=mode) as client:
        for n in range(50):
            assert DISCOUNT in await _agreed(client, f"{A}#{n}")
    assert set(asked) == {A}  # the URL an agreement is kept under is the one resolved
    eng = next(m for m in middleware_list(server) or [] if isinstance(m, NegotiationMiddleware)).engine
    assert [key[1] for key in eng.ucp_memo] == []
