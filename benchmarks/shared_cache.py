"""What the fleet-shared profile cache costs on the hot path: Redis commands per cached call.

    .nox/bench/bin/python benchmarks/shared_cache.py [--quick]   # 3 replicas x 10,000 (200) resolves

A real redis-server on a loopback port and a local HTTPS profile host, as in the tests; three
`HttpsProfileResolver`s with a `RedisProfileCache` each stand for three replicas. Counted by
Redis's `INFO commandstats`: the cold path (3 x 100 concurrent resolves of a profile no one
holds: host hits, store commands) and the hot path (resolves while each holds a fresh copy:
store commands, the claim being 0, and time per resolve beside a resolver without the shared
cache). Prints a Markdown section (not part of RESULTS.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import redis
import trustme

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from mcp_negotiation.ucp import ALL_PORTS, HttpsProfileResolver  # noqa: E402
from mcp_negotiation.ucp.shared_cache import RedisProfileCache  # noqa: E402
from support.profile_server import ProfileServer, Route, make_tls  # noqa: E402
from support.services import redis_server  # noqa: E402

REPLICAS = 3


def commands(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(int(entry["calls"]) for name, entry in stats.items() if name != "cmdstat_info")


async def measure(calls: int) -> list[str]:
    tls = make_tls(trustme.CA())
    with redis_server() as store:
        inspect = redis.Redis(port=store.port)
        async with ProfileServer(tls.server) as host:
            host.routes["/p.json"] = Route(headers={"Cache-Control": "max-age=600"})
            url = host.url("/p.json")
            caches = [RedisProfileCache(store.url) for _ in range(REPLICAS)]
            fleet = [
                HttpsProfileResolver(
                    ssl_context=tls.client,
                    allow_addresses=["127.0.0.1"],
                    allow_ports=ALL_PORTS,
                    shared_cache=c,
                )
                for c in caches
            ]
            alone = HttpsProfileResolver(
                ssl_context=tls.client, allow_addresses=["127.0.0.1"], allow_ports=ALL_PORTS
            )

            before = commands(inspect)
            await asyncio.gather(*(replica.resolve(url) for replica in fleet for _ in range(100)))
            for cache in caches:
                await cache.flush()  # the holder's write, sent after its answer
            cold = commands(inspect) - before
            cold_hits = len(host.requests)
            await alone.resolve(url)

            before = commands(inspect)
            shared_ns: list[int] = []
            alone_ns: list[int] = []
            for _ in range(calls):
                for replica in fleet:
                    started = time.perf_counter_ns()
                    await replica.resolve(url)
                    shared_ns.append(time.perf_counter_ns() - started)
                    started = time.perf_counter_ns()
                    await alone.resolve(url)
                    alone_ns.append(time.perf_counter_ns() - started)
            hot = commands(inspect) - before
            for cache in caches:
                await cache.aclose()
        inspect.close()
    return [
        "## Shared profile cache: Redis round trips on the hot path",
        "",
        f"`benchmarks/shared_cache.py` ({'--quick, ' if calls < 1000 else ''}{REPLICAS} resolvers, "
        f"each with its own `RedisProfileCache`, one redis-server on loopback; "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}).",
        "",
        "| Path | resolves | profile host hits | Redis commands | µs per resolve (median) |",
        "|---|--:|--:|--:|--:|",
        f"| cold: {REPLICAS} replicas x 100 concurrent, nothing cached | {REPLICAS * 100} | {cold_hits} "
        f"| {cold} | n/a |",
        f"| hot: local copy fresh, with the shared cache | {len(shared_ns)} | 0 | {hot} "
        f"| {statistics.median(shared_ns) / 1000:.2f} |",
        f"| hot: the same resolver without a shared cache | {len(alone_ns)} | 0 | n/a "
        f"| {statistics.median(alone_ns) / 1000:.2f} |",
        "",
        f"The claim, a cached call adds no round trip to the store: **{'met' if hot == 0 else 'NOT met'}** "
        f"({hot} commands over {len(shared_ns)} hot resolves).",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="200 hot resolves per replica")
    parser.add_argument("--calls", type=int, default=10_000, help="hot resolves per replica")
    args = parser.parse_args()
    print("\n".join(asyncio.run(measure(200 if args.quick else args.calls))))


if __name__ == "__main__":
    main()
