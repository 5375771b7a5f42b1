"""Scoped UCP calls kept on their negotiation: a repeat reuses the whole scoped result, never a stale one.

A repeated UCP call is served the record its negotiation's `Known` keeps scoped per profile
URL while the resolver, still asked on every call, answers with the very profile the kept
agreement was made with. These tests pin where that could go wrong:
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
from mcp_negotiation.adapters.kernel import decided
from mcp_negotiation.adapters.mcp2.middleware import NegotiationMiddleware
from mcp_negotiation.adapters.mcp2.seams import middleware_list
from mcp_negotiation.core.bounded import MAX_ENTRY_BYTES
from mcp_negotiation.core.engine import Engine
from mcp_negotiation.core.facts import PlainFacts
from mcp_negotiation.core.outcome import DERIVED_LIMIT, Known
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


def _engine(resolver: Any) -> Engine:
    return Engine(Policy(ucp=UcpPolicy(business_profile=BUSINESS_PROFILE, resolver=resolver)))


def _meta(tag: str = "x", padding: int = 0) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "experimental": {tag: {f"pad{i}": "p" * 4_000 for i in range(padding // 4_000)}}
        },
        "io.modelcontextprotocol/clientInfo": {"name": "memo", "version": "1"},
    }


async def _scoped(eng: Engine, url: str, meta: dict[str, Any] | None = None) -> Known:
    """The negotiation a modern UCP call naming `url` is served with (its fetches met)."""
    params = {"name": "negotiated", "arguments": _args(url), "_meta": meta or _meta()}
    known = (await decided(eng, PlainFacts("tools/call", params, "2026-07-28"))).known
    assert known is not None
    return known


async def test_a_business_profile_fetched_for_an_older_version_is_never_memoised() -> None:
    """Its freshness is the resolver's: a repeat asks for it again, and sees it change."""
    resolver = _Counting(
        {
            A: Profile.from_json(_document(CHECKOUT, GIFT_WRAP, version=OLD)),
            OLD_URL: _old_business(CHECKOUT, GIFT_WRAP),
        }
    )
    eng = _engine(resolver)
    assert eng.policy.ucp.business.older_profile_url(OLD) == OLD_URL
    first = await _scoped(eng, A)
    assert GIFT_WRAP in first.record.ucp.capabilities
    resolver.profiles[OLD_URL] = _old_business(CHECKOUT)
    again = await _scoped(eng, A)
    assert GIFT_WRAP not in again.record.ucp.capabilities
    assert first.source is again.source  # the same client's negotiation, memoised
    assert again.source is not None
    assert again.source.derived == {}  # but no scope of it kept


async def test_a_repeat_is_the_memoised_outcome_while_the_profile_stands() -> None:
    resolver = _Counting({A: _platform(CHECKOUT, DISCOUNT)})
    eng = _engine(resolver)
    first = await _scoped(eng, A)
    assert await _scoped(eng, A) is first
    resolver.profiles[A] = _platform(CHECKOUT)
    changed = await _scoped(eng, A)
    assert changed is not first
    assert set(changed.record.ucp.capabilities) == {CHECKOUT}
    # Another record (another client's envelope) naming the same platform has its own.
    other = await _scoped(eng, A, _meta("y"))
    assert other.record.client_capabilities == {"experimental": {"y": {}}}
    assert other.source is not first.source
    assert resolver.calls == 4


async def test_the_scopes_kept_stay_bounded_in_entries_and_bytes() -> None:
    urls = [f"https://p{i}.example/profile.json" for i in range(DERIVED_LIMIT + 20)]
    profile = _platform(CHECKOUT)
    eng = _engine(_Counting(dict.fromkeys(urls, profile)))
    scoped = [await _scoped(eng, url) for url in urls]
    base = scoped[0].source
    assert base is not None
    assert {id(known.source) for known in scoped} == {id(base)}
    assert len(base.derived) == DERIVED_LIMIT  # the rest scoped every time
    # A record over the largest entry is scoped every time, and kept nowhere.
    before = dict(eng.memo)
    big = await _scoped(eng, urls[0], _meta("big", padding=MAX_ENTRY_BYTES + 4_000))
    assert "big" in big.record.client_capabilities["experimental"]
    assert dict(eng.memo) == before


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
    """50 calls naming `A#0` ... `A#49`: the resolver is asked (with or without I/O) for `A`
    only, and `A` alone keys the scoped call a negotiation keeps (validation drops the
    fragment before anything keys)."""
    asked: list[str] = []

    class Recording(_Peeking):
        async def resolve(self, url: str) -> Profile:
            asked.append(url)
            return await super().resolve(url)

        def fresh(self, url: str) -> Profile | None:
            asked.append(url)
            return super().fresh(url)

    server = build(Recording({A: _platform(CHECKOUT, DISCOUNT)}))
    async with Client(server, mode=mode) as client:
        for n in range(50):
            assert DISCOUNT in await _agreed(client, f"{A}#{n}")
    assert set(asked) == {A}  # the URL an agreement is kept under is the one resolved
    eng = next(m for m in middleware_list(server) or [] if isinstance(m, NegotiationMiddleware)).engine
    scoped = {key[1] for known in eng.memo.values() for key in known.derived if key[0] == "ucp.scoped"}
    assert scoped <= {A}
