"""The bounded caches behind every per-request lookup: size limits and identity semantics."""

from __future__ import annotations

import gc
import sys
import threading
from pathlib import Path

import anyio
import pytest

from mcp_negotiation import Policy
from mcp_negotiation.bounded import BoundedCache, IdentityCache
from mcp_negotiation.negotiation import Negotiator
from mcp_negotiation.ucp import StaticResolver, UcpError, UcpPolicy
from mcp_negotiation.ucp.binding import UcpNegotiator

ROOT = Path(__file__).resolve().parents[1]
V = "2026-04-08"
PLATFORM = "https://platform.example/profile.json"
OTHER = "https://other.example/profile.json"
PLATFORM_PROFILE = {"ucp": {"version": V, "capabilities": {"dev.ucp.shopping.checkout": [{"version": V}]}}}


def test_bounded_cache_forgets_the_oldest_entry_first() -> None:
    cache: BoundedCache[str, int] = BoundedCache(3)
    for i, key in enumerate("abcd"):
        cache.put(key, i)
    assert dict(cache) == {"b": 1, "c": 2, "d": 3}
    cache.put("c", 20)  # replacing a present key evicts nothing
    assert dict(cache) == {"b": 1, "c": 20, "d": 3}


@pytest.mark.parametrize("limit", [0, -1])
def test_bounded_cache_needs_room_for_one(limit: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        BoundedCache(limit)


def test_bounded_cache_stays_bounded_and_never_raises_under_threads() -> None:
    """Evicting iterates the dict; another thread changing it meanwhile must not escape."""
    cache: BoundedCache[int, int] = BoundedCache(8)
    failures: list[BaseException] = []

    def fill(offset: int) -> None:
        try:
            for i in range(20_000):
                cache.put(offset + i, i)
        except BaseException as failure:  # a thread's exception would otherwise only be printed
            failures.append(failure)

    threads = [threading.Thread(target=fill, args=(n * 100_000,)) for n in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races, not luck
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []
    assert len(cache) <= 8 + len(threads)  # each racing thread may add one before it sees the others


class Thing:
    """Equal to every other Thing: a hit must come from identity, not equality."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Thing)

    __hash__ = object.__hash__


def test_identity_cache_hits_only_the_same_objects() -> None:
    cache: IdentityCache[str] = IdentityCache(8)
    a, b = Thing(), Thing()
    cache.put("a", a)
    cache.put("a with b", a, b)
    assert cache.get(a) == "a"
    assert cache.get(b) is None  # equal, but not the same object
    assert cache.get(a, b) == "a with b"
    assert cache.get(b, a) is None


def test_identity_cache_keeps_its_objects_alive_so_ids_are_not_reused() -> None:
    cache: IdentityCache[int] = IdentityCache(2)
    cache.put(1, Thing())
    gc.collect()
    fresh = [Thing() for _ in range(1_000)]  # would reuse a freed id, were it freed
    assert all(cache.get(thing) is None for thing in fresh)
    for value, thing in enumerate(fresh[:5]):
        cache.put(value, thing)
    assert len(cache) == 2
    assert cache.get(fresh[4]) == 4
    assert cache.get(fresh[0]) is None


def _ucp() -> UcpNegotiator:
    return UcpNegotiator(
        UcpPolicy(
            business_profile=ROOT / "examples" / "ucp" / "business_profile.json",
            resolver=StaticResolver({PLATFORM: PLATFORM_PROFILE, OTHER: PLATFORM_PROFILE}),
        )
    )


def test_ucp_scope_answers_the_same_record_for_the_same_record_and_agreement() -> None:
    ucp = _ucp()
    negotiator = Negotiator(Policy())
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    record = negotiator.request(envelope)

    async def scopes() -> list[object]:
        return [
            await ucp.scope(record, PLATFORM),
            await ucp.scope(record, PLATFORM),
            await ucp.scope(record, OTHER),
        ]

    first, again, other = anyio.run(scopes)
    assert first is again  # telemetry recognises the repeat by identity
    assert first.ucp is not None
    assert first.ucp.capabilities == {"dev.ucp.shopping.checkout": V}
    assert other is not first  # another platform is another agreement
    assert record.ucp is None  # the unscoped record is untouched


def test_ucp_scope_raises_the_resolvers_error() -> None:
    ucp = _ucp()
    record = Negotiator(Policy()).request(
        {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    )
    with pytest.raises(UcpError):
        anyio.run(ucp.scope, record, "https://unknown.example/profile.json")
