"""The bounded caches behind every per-request lookup: size limits, and what stays in memory."""

from __future__ import annotations

import gc
import sys
import threading
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_negotiation import Policy
from mcp_negotiation.core import frozen_json
from mcp_negotiation.core.bounded import MAX_CACHE_BYTES, MAX_ENTRY_BYTES, BoundedCache
from mcp_negotiation.core.engine import Engine
from mcp_negotiation.core.facts import PlainFacts
from mcp_negotiation.core.frozen_json import footprint
from mcp_negotiation.core.negotiation import (
    CLIENT_CAPABILITIES_KEY,
    MAX_STRING_LENGTH,
    PROTOCOL_VERSION_KEY,
)
from mcp_negotiation.otel import spans as telemetry
from mcp_negotiation.ucp import StaticResolver, UcpError, UcpPolicy
from support.harness import direct_connection, legacy_session, open_streams, serve_http
from ucp_shop import CHECKOUT
from ucp_shop import build as build_shop

ROOT = Path(__file__).resolve().parents[2]
V = "2026-04-08"
PLATFORM = "https://platform.example/profile.json"
OTHER = "https://other.example/profile.json"
HTTP_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
}
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


def _ucp_engine() -> Engine:
    return Engine(
        Policy(
            ucp=UcpPolicy(
                business_profile=ROOT / "examples" / "ucp" / "business_profile.json",
                resolver=StaticResolver({PLATFORM: PLATFORM_PROFILE, OTHER: PLATFORM_PROFILE}),
            )
        )
    )


def _ucp_call(url: str, i: int = 0, entries: int = 1) -> PlainFacts:
    params = {"name": "checkout", "arguments": {"meta": {"ucp-agent": {"profile": url}}}}
    return PlainFacts("tools/call", {**params, "_meta": _envelope(i, entries)}, "2026-07-28")


def test_a_ucp_call_repeated_is_served_the_same_scoped_negotiation() -> None:
    engine = _ucp_engine()
    first, again, other = (engine.decide(_ucp_call(url)).known for url in (PLATFORM, PLATFORM, OTHER))
    assert first is not None
    assert other is not None
    assert first is again  # telemetry recognises the repeat by identity
    assert first.record.ucp is not None
    assert first.record.ucp.capabilities == {"dev.ucp.shopping.checkout": V}
    assert other is not first  # another platform is another agreement
    assert first.source is not None
    assert first.source.record.ucp is None  # the unscoped negotiation is untouched


def test_a_profile_the_resolver_cannot_answer_is_refused_as_ucp_says() -> None:
    engine = _ucp_engine()
    asked = engine.decide(_ucp_call("https://unknown.example/profile.json"))
    assert asked.need is not None

    async def fetch() -> object:
        try:
            return await asked.need.resolver.resolve(asked.need.url)  # type: ignore[union-attr]
        except UcpError as failure:
            return failure

    fetched = {asked.need.url: anyio.run(fetch)}
    refused = engine.decide(_ucp_call("https://unknown.example/profile.json"), fetched)
    assert refused.refusal is not None
    assert refused.refusal.code == -32001


# -- bounded in bytes: entries too big to keep, and caches full of entries that fit --------------------


def test_bounded_cache_evicts_the_oldest_to_stay_within_its_bytes() -> None:
    cache: BoundedCache[str, int] = BoundedCache(100, max_bytes=1_000)
    for i, key in enumerate("abcdef"):
        assert cache.put(key, i, 300)
    assert dict(cache) == {"d": 3, "e": 4, "f": 5}
    assert cache.bytes == 900
    assert cache.put("e", 40, 100)  # a key put again is weighed again
    assert (dict(cache), cache.bytes) == ({"d": 3, "f": 5, "e": 40}, 700)


def test_an_entry_over_the_entry_limit_is_kept_nowhere() -> None:
    cache: BoundedCache[str, int] = BoundedCache(100)
    assert cache.put("small", 1, MAX_ENTRY_BYTES)
    assert not cache.put("big", 2, MAX_ENTRY_BYTES + 1)
    assert not cache.put("small", 3, MAX_ENTRY_BYTES + 1)  # nor does it leave the old value behind
    assert (dict(cache), cache.bytes) == ({}, 0)


def test_footprint_weighs_strings_exactly_and_stops_past_its_cap() -> None:
    text = "x" * 10_000
    assert footprint(text) == sys.getsizeof(text)
    frozen = frozen_json.freeze({"a": [text, 1, None]}, frozen_json.Budget(10), max_depth=4)
    assert sys.getsizeof(text) < footprint(frozen) < sys.getsizeof(text) + 1_000
    assert footprint((text,) * 1_000, cap=50_000) < 50_000 + sys.getsizeof(text) + 1_000


ENTRIES = 700
"""Objects of one string each in a capability map: the node limit allows up to 2,000."""


def _envelope(i: int, entries: int = ENTRIES) -> dict[str, object]:
    """A modern envelope of `entries` strings of the longest length allowed, each distinct."""
    text = "x" * (MAX_STRING_LENGTH - 16)
    caps = {"experimental": {f"k{j}": {"v": f"{i}:{j}:{text}"} for j in range(entries)}}
    return {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: caps}


def _call(i: int, entries: int = ENTRIES) -> dict[str, Any]:
    profile = {"ucp-agent": {"profile": PLATFORM}}
    return {"name": "negotiated", "arguments": {"meta": profile}, "_meta": _envelope(i, entries)}


async def _retained(send: Callable[[int], Awaitable[None]], count: int) -> list[int]:
    """Bytes still allocated after gc, once after `count` distinct calls and once after 3 × `count`."""

    async def one_by_one(ids: range) -> None:
        for i in ids:
            await send(i)

    return await _retained_by_batch(one_by_one, count)


async def _retained_by_batch(batch: Callable[[range], Awaitable[None]], count: int) -> list[int]:
    """Bytes still allocated after gc, once after a batch of `count` distinct calls and once after
    another of 2 × `count`.

    tracemalloc is started by the caller, and a batch of three calls first warms up every lazy
    import, memo and pool, so what is left after them is what the calls themselves left behind."""
    await batch(range(-3, 0))
    retained = []
    for ids in (range(count), range(count, 3 * count)):
        await batch(ids)
        gc.collect()
        retained.append(tracemalloc.get_traced_memory()[0])
    return retained


def _served_by_batch(
    server: MCPServer, send: Callable[[str, int], Awaitable[None]]
) -> Callable[[range], Awaitable[None]]:
    """Each batch sent to a uvicorn server of its own (of the one `server`), stopped before the
    batch returns.

    The SDK ends a session's task only after its DELETE has been answered, so a batch measured
    while its server runs may still hold its last session's envelope. Once the server has
    stopped every session task has ended: what stays is what `server` and the library kept."""

    async def batch(ids: range) -> None:
        with serve_http(server.streamable_http_app()) as url:
            for i in ids:
                await send(url, i)

    return batch


@pytest.fixture
def traced_memory() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


@pytest.mark.anyio
@pytest.mark.usefixtures("traced_memory")
async def test_multi_megabyte_envelopes_are_kept_nowhere_in_memory() -> None:
    """Each call is negotiated (and its UCP agreement made) from a ~2.8 MB envelope; none
    stays in a cache, a memo, the telemetry link map or the agreement map."""
    server = build_shop(StaticResolver({PLATFORM: PLATFORM_PROFILE}))
    async with direct_connection(server) as raw:

        async def send(i: int) -> None:
            served = await raw("tools/call", _call(i))
            assert served["structuredContent"]["ucp"]["capabilities"] == {CHECKOUT: V}

        after_n, after_3n = await _retained(send, 5)
    assert after_3n - after_n < ENVELOPE_BYTES  # 10 more envelopes: not even one more kept


ENVELOPE_BYTES = ENTRIES * MAX_STRING_LENGTH
"""About what one `_envelope` weighs as text (2.8 MB)."""


@pytest.mark.anyio
@pytest.mark.usefixtures("traced_memory")
async def test_multi_megabyte_envelopes_and_sessions_are_kept_nowhere_over_http() -> None:
    """Modern calls with ~2.8 MB envelopes over streamable HTTP, and legacy sessions whose
    `initialize` carried such a map, each closed (DELETE): nothing of them stays."""
    server = build_shop(StaticResolver({PLATFORM: PLATFORM_PROFILE}))

    async def call(url: str, i: int) -> None:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": _call(i)}
        headers = {**HTTP_HEADERS, "mcp-method": "tools/call", "mcp-name": "negotiated"}
        async with httpx2.AsyncClient(timeout=60) as http:
            served = await http.post(url, json=body, headers=headers)
        assert served.status_code == 200, served.text[:500]
        assert "structuredContent" in served.text[-2_000:]

    async def session(url: str, i: int) -> None:
        caps = _envelope(i)[CLIENT_CAPABILITIES_KEY]
        async with (
            open_streams("http", url) as streams,
            legacy_session(streams, "2025-11-25", caps) as (s, _),
        ):
            served = await s.call_tool("negotiated", {"meta": {"ucp-agent": {"profile": PLATFORM}}})
            assert served.structured_content is not None

    modern = await _retained_by_batch(_served_by_batch(server, call), 2)
    legacy = await _retained_by_batch(_served_by_batch(server, session), 2)
    assert modern[1] - modern[0] < ENVELOPE_BYTES
    assert legacy[1] - legacy[0] < ENVELOPE_BYTES


@pytest.mark.anyio
@pytest.mark.usefixtures("traced_memory")
async def test_caches_stay_within_their_bytes_whatever_the_number_of_envelopes_that_fit() -> None:
    """Envelopes small enough to be memoised (~24 kB), many more than the byte bounds hold: the
    engine's memo (each negotiation with its trace and its UCP scope) stops growing."""
    engine = _ucp_engine()

    async def negotiate(i: int) -> None:
        facts = _ucp_call(PLATFORM, i, entries=6)
        outcome = engine.decide(facts)
        assert outcome.known is not None
        telemetry.record_outcome(facts, outcome, engine.policy, 0.0)

    after_n, after_3n = await _retained(negotiate, 400)
    assert engine.memo.bytes <= MAX_CACHE_BYTES
    assert after_3n - after_n < 1_000_000  # 800 more envelopes of 24 kB, past the bounds: nothing more kept
