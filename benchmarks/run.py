"""Benchmarks: what `mcp-negotiation` costs a server, measured against the same server without it.

    python3 dev.py nox -s bench            # everything; writes benchmarks/RESULTS.md
    python3 dev.py nox -s bench -- --quick # a smoke run (few rounds); writes nothing unless --output

    python3 dev.py nox -s bench -- --instructions        # only the instruction count; prints
    python3 dev.py nox -s bench -- --http-instructions   # only the HTTP servers' count; prints
    python3 dev.py nox -s bench -- --profile ucp-modern  # where one path's added instructions go
    python3 dev.py nox -s bench -- --steps ucp-modern    # each step of that path's repeat, alone

Four parts, in one run (HTTP servers and callgrind in processes of their own, everything
else in this one):

0. Instructions per call: what the library adds to a repeated in-memory `tools/call`,
   counted by callgrind against the same server with an empty SDK middleware in the
   library's place. Deterministic, so the issue's targets can be judged on a loaded
   machine; `count_child` and the Method section say how. The HTTP paths are counted
   too, each server in its own process under callgrind, the client outside the count
   (`count_http`).

1. Overhead: `tools/call` round trips through the SDK's own `mcp.Client`, against a
   server with a trivial tool, once plain and once wrapped by `negotiate()`. Paths:
   in-memory legacy and modern, streamable HTTP on uvicorn (legacy stateful and modern),
   and the UCP shop with a cached platform profile; first with no OpenTelemetry SDK,
   then with one configured (TracerProvider with a no-op exporter, MeterProvider with
   an in-memory reader). Both servers are open at once and their calls are made in
   pairs, one call to each, in a random (seeded) order per pair, so a noisy neighbour
   slows both alike; the ratio reported is the median of the per-round ratios. (Strict
   alternation AB BA AB ... is biased: gen-0 garbage collections then fall more often on
   one member of the pair, and an A/A run reads 1.03 instead of 1.00.)

   In-memory calls are timed without the cyclic collector's pauses, and what each
   server costs the collector is measured on its own (collections per 1,000 calls);
   the Method section that `render` writes says why.
2. Micro-benchmarks of the pure core (timeit: best and median of repeats).
3. Memory (tracemalloc): per idle legacy session, and retained memory while 10,000
   legacy sessions are opened and closed through the in-memory transport.

Nothing here asserts: the numbers are written down, with the targets, as measured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import inspect
import json
import linecache
import logging
import os
import platform
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import timeit
import tracemalloc
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from types import MappingProxyType
from typing import Any

import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from opentelemetry.trace import NonRecordingSpan

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from mcp_negotiation import Policy, negotiate  # noqa: E402
from mcp_negotiation.adapters.context import client_supports, current, requires_ucp  # noqa: E402
from mcp_negotiation.adapters.mcp2 import seams  # noqa: E402
from mcp_negotiation.core.negotiation import Negotiation, Negotiator, supports  # noqa: E402
from mcp_negotiation.core.revisions import LEGACY as LEGACY_REVISIONS  # noqa: E402
from mcp_negotiation.otel import seam as otel_seam  # noqa: E402
from mcp_negotiation.otel import spans as telemetry  # noqa: E402
from mcp_negotiation.ucp import Profile, StaticResolver, negotiate_capabilities, parse_ucp_agent  # noqa: E402
from ucp_shop import build as build_shop  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")
MODERN = "2026-07-28"
V = "2026-04-08"
TARGET_RATIO = 0.98
TARGET_CACHED_US = 5.0
HTTP_ROUND_FACTOR = 4

# --------------------------------------------------------------------------------------
# Servers: the same tool with and without the library
# --------------------------------------------------------------------------------------


def plain_server(wrapped: bool, policy: Policy | None = None) -> MCPServer:
    server = MCPServer("bench")

    @server.tool()
    async def echo(x: int) -> int:
        """Return x."""
        return x

    return negotiate(server, policy or Policy()) if wrapped else server


def same_server(wrapped: bool) -> MCPServer:
    """Control, not the library: the plain server against itself (A/A), the method's own bias."""
    return plain_server(False)


def every_request_server(wrapped: bool) -> MCPServer:
    """The library with `Policy(trace_every_request=True)`: a full span under every request."""
    return plain_server(wrapped, Policy(trace_every_request=True))


def with_empty_middleware(server: MCPServer) -> MCPServer:
    """`server` with an SDK middleware that only calls the next one, where `negotiate()` puts
    the library's (right after the SDK's OpenTelemetry middleware): the floor any
    middleware-based library starts from."""

    async def passthrough(ctx: Any, call_next: Any) -> Any:
        return await call_next(ctx)

    seams.place(server.middleware, passthrough)
    return server


def empty_middleware_server(wrapped: bool) -> MCPServer:
    """Reference, not the library: the plain server, and the same with an empty SDK
    middleware. It shows what any middleware costs on each path."""
    return with_empty_middleware(plain_server(False)) if wrapped else plain_server(False)


SERVERS: dict[str, Callable[[bool], MCPServer]] = {}
"""Server factories by name, for `--serve` (filled below, once every factory exists)."""

PLATFORMS = {
    "https://platform-a.example/profile.json": {
        "ucp": {
            "version": V,
            "capabilities": {
                "dev.ucp.shopping.checkout": [{"version": V}],
                "dev.ucp.shopping.fulfillment": [{"version": V, "extends": "dev.ucp.shopping.checkout"}],
                "dev.ucp.shopping.discount": [
                    {"version": V, "extends": ["dev.ucp.shopping.checkout", "dev.ucp.shopping.cart"]}
                ],
            },
        }
    }
}
PLATFORM_URL = next(iter(PLATFORMS))
UCP_ARGS = {"items": ["tea"], "meta": {"ucp-agent": {"profile": PLATFORM_URL}}}


def ucp_server(wrapped: bool, stamp: bool = True) -> MCPServer:
    """The example shop (StaticResolver: the profile is always served from memory), or the
    same tool with no library: it answers the same shape, so both responses weigh the same.
    `stamp`: results carry the `ucp` block (`UcpPolicy.stamp_results`), on both sides."""
    if wrapped:
        return build_shop(StaticResolver(PLATFORMS), stamp_results=stamp)
    server = MCPServer("ucp-shop")
    names = ("dev.ucp.shopping.checkout", "dev.ucp.shopping.discount", "dev.ucp.shopping.fulfillment")
    agreed = MappingProxyType(dict.fromkeys(names, V))
    block = {"version": V, "capabilities": {name: [{"version": V}] for name in agreed}}

    @server.tool()
    async def create_checkout(items: list[str], ctx: Context) -> dict[str, Any]:
        """Open a checkout: the shop's own work (sorting what was agreed) as the example does it."""
        answer = {"items": items, "status": "incomplete", "extensions": sorted(agreed)}
        return {**answer, "ucp": block} if stamp else answer

    return server


def ucp_server_unstamped(wrapped: bool) -> MCPServer:
    """`ucp_server` without `stamp_results`: what a UCP repeat costs besides the stamped block."""
    return ucp_server(wrapped, stamp=False)


SERVERS.update({f.__name__: f for f in (plain_server, same_server, ucp_server, ucp_server_unstamped)})


@dataclass(frozen=True)
class Counting:
    """How `serve_http` runs a server under callgrind: where its dumps land (a path prefix),
    and the built `callgrind_marks.c` it marks its runs with (`_build_marks`)."""

    dumps: Path
    marks: Path


@dataclass(frozen=True)
class Served:
    """An HTTP server `serve_http` started: its URL, its pid, and (when counted) its marks."""

    url: str
    pid: int
    mark: Callable[[str], None]
    """Under callgrind, `count` (zero the count) or `dump LABEL`: see `serve_main`."""


@contextmanager
def serve_http(
    factory: Callable[[bool], MCPServer],
    wrapped: bool,
    otel: bool,
    *,
    empty: bool = False,
    counted: Counting | None = None,
) -> Iterator[Served]:
    """uvicorn on 127.0.0.1 in a process of its own (this script with `--serve`).

    In a thread of this process the server would share the client's GIL, and the ratio
    would measure thread hand-offs (each socket write may wait a switch interval) more
    than the library. `empty`: the unwrapped server with an empty SDK middleware.
    `counted`: the process runs under callgrind (`count_http`).
    """
    command = [sys.executable, str(Path(__file__).resolve()), "--serve", factory.__name__]
    command += ["--wrapped"] * wrapped + ["--otel"] * otel + ["--empty-middleware"] * empty
    env = None
    log: Any = None  # valgrind's own report, kept out of this script's output
    if counted is not None:
        out = f"--callgrind-out-file={counted.dumps}.%p"
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", out, *command, "--counted"]
        env = {**os.environ, "PYTHONHASHSEED": "0", MARKS_LIBRARY: str(counted.marks)}
        log = counted.dumps.with_name(f"valgrind.{counted.dumps.name}.log").open("w")
    child = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env
    )
    assert child.stdin is not None
    assert child.stdout is not None
    stdin, stdout = child.stdin, child.stdout

    def mark(command: str) -> None:
        stdin.write(command + "\n")
        stdin.flush()
        if stdout.readline().strip() != "ok":
            raise RuntimeError(f"the counted {factory.__name__} server did not mark {command!r}")

    try:
        line = stdout.readline()
        if not line.startswith("port "):
            raise RuntimeError(f"the {factory.__name__} server did not start (exit {child.poll()})")
        yield Served(f"http://127.0.0.1:{int(line.split()[1])}/mcp", child.pid, mark)
    finally:
        stdin.close()  # the server's cue to shut down
        code = child.wait(timeout=60)
        if log is not None:
            log.close()
    if code != 0:
        reason = " (its OpenTelemetry SDK recorded nothing)" if code == 3 else ""
        raise RuntimeError(f"the {factory.__name__} server exited with {code}{reason}")


SETTLE_SECONDS = 0.3
"""How long a counted server lets the last response's trailing work finish before it marks
(the SDK ends a request's task after writing its answer; under callgrind that takes ~50 times
longer). Runs of no call wait the same, so the wait itself cancels out of a run's count."""


def serve_main(name: str, wrapped: bool, otel: bool, empty: bool = False, counted: bool = False) -> None:
    """The `--serve` side of `serve_http`: print the port, serve until stdin closes.

    `counted` (under callgrind): each line of input is a mark, answered `ok` once made:
    `count` zeroes the count (the first also freezes what the warm-up left, and stops the
    cyclic collector, as `count_child` does), `dump LABEL` dumps it. uvicorn's 0.1 s tick
    is off then: its work would land in the counts by the wall clock, not by the calls.
    """
    logging.disable(logging.INFO)
    discard = configure_otel() if otel else None
    mcp_server = with_empty_middleware(SERVERS[name](False)) if empty else SERVERS[name](wrapped)
    app = mcp_server.streamable_http_app()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
    started = threading.Event()
    marks: Any = None
    if counted:
        import ctypes

        marks = ctypes.CDLL(os.environ[MARKS_LIBRARY])

        async def main_loop() -> None:  # uvicorn's, without its tick
            serving.append((asyncio.get_running_loop(), asyncio.Event()))
            started.set()
            await server.on_tick(0)
            await serving[0][1].wait()

        server.main_loop = main_loop  # type: ignore[method-assign]

    def until_end_of_input() -> None:
        if counted:
            started.wait()
            for line in sys.stdin:
                asyncio.run_coroutine_threadsafe(_mark(marks, line.strip()), serving[0][0]).result()
                print("ok", flush=True)
        else:
            sys.stdin.read()
        server.should_exit = True
        if serving:
            serving[0][0].call_soon_threadsafe(serving[0][1].set)

    threading.Thread(target=until_end_of_input, daemon=True).start()
    print(f"port {sock.getsockname()[1]}", flush=True)
    server.run(sockets=[sock])
    if discard is not None and discard.exported == 0:
        sys.exit(3)


async def _mark(marks: Any, command: str) -> None:
    """A counted server's mark (`serve_main`), made on its event loop once the loop is idle."""
    await asyncio.sleep(SETTLE_SECONDS)
    if command == "count":
        if gc.isenabled():
            gc.collect()
            gc.freeze()
            gc.disable()
        marks.start_instrumentation()
        marks.zero_stats()
    else:
        marks.dump_stats_at(command.removeprefix("dump ").encode())


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used, from /proc; NaN where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------------------
# Overhead
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchPath:
    name: str
    transport: str  # "memory" or "http"
    mode: str  # "legacy" or the modern revision
    factory: Callable[[bool], MCPServer]
    tool: str
    arguments: dict[str, Any]
    reference: bool = False
    otel: tuple[bool, ...] = (False, True)
    """With which OpenTelemetry settings the row is measured (no SDK, an SDK)."""
    headers: tuple[tuple[str, str], ...] = ()
    """What an HTTP client sends with every request besides the SDK's own headers."""


PATHS = (
    BenchPath("in-memory · legacy", "memory", "legacy", plain_server, "echo", {"x": 1}),
    BenchPath("in-memory · modern", "memory", MODERN, plain_server, "echo", {"x": 1}),
    BenchPath("HTTP · legacy stateful", "http", "legacy", plain_server, "echo", {"x": 1}),
    BenchPath("HTTP · modern", "http", MODERN, plain_server, "echo", {"x": 1}),
    BenchPath("UCP cached · in-memory · legacy", "memory", "legacy", ucp_server, "create_checkout", UCP_ARGS),
    BenchPath("UCP cached · in-memory · modern", "memory", MODERN, ucp_server, "create_checkout", UCP_ARGS),
    BenchPath("UCP cached · HTTP · modern", "http", MODERN, ucp_server, "create_checkout", UCP_ARGS),
    BenchPath(
        "UCP cached · HTTP · modern, UCP-Agent header",
        "http",
        MODERN,
        ucp_server,
        "create_checkout",
        UCP_ARGS,
        headers=(("UCP-Agent", f'profile="{PLATFORM_URL}"'),),
    ),
    *(
        BenchPath(
            f"reference: {what} · in-memory · {era}",
            "memory",
            mode,
            factory,
            "echo",
            {"x": 1},
            reference=True,
            otel=(False,),
        )
        for what, factory in (
            ("the same unwrapped server twice (A/A)", same_server),
            ("an empty SDK middleware", empty_middleware_server),
        )
        for era, mode in (("legacy", "legacy"), ("modern", MODERN))
    ),
    BenchPath(
        "reference: the same unwrapped server twice (A/A) · HTTP · modern",
        "http",
        MODERN,
        same_server,
        "echo",
        {"x": 1},
        reference=True,
        otel=(False,),
    ),
    BenchPath(
        "option: `trace_every_request=True` · in-memory · modern",
        "memory",
        MODERN,
        every_request_server,
        "echo",
        {"x": 1},
        reference=True,
        otel=(True,),
    ),
)


@dataclass
class Overhead:
    path: str
    otel: bool
    reference: bool
    calls: int  # to each server, per round
    rounds: int
    plain: list[float] = field(default_factory=list)  # calls/s, wall clock
    wrapped: list[float] = field(default_factory=list)
    plain_cpu: list[float] = field(default_factory=list)  # calls per CPU second of the server's process
    wrapped_cpu: list[float] = field(default_factory=list)
    collections: tuple[float, float] | None = None
    """In-memory rows: collector runs per 1,000 calls of each server alone (unwrapped, wrapped)."""

    def add_round(self, plain: Sequence[float], wrapped: Sequence[float]) -> None:
        """One round: the (wall, CPU) seconds each side spent on its `calls` calls."""
        self.plain.append(self.calls / plain[0])
        self.wrapped.append(self.calls / wrapped[0])
        self.plain_cpu.append(self.calls / max(plain[1], 1e-9))
        self.wrapped_cpu.append(self.calls / max(wrapped[1], 1e-9))

    def ratios(self) -> list[float]:
        return [w / p for w, p in zip(self.wrapped, self.plain, strict=True)]

    def cpu_ratios(self) -> list[float]:
        return [w / p for w, p in zip(self.wrapped_cpu, self.plain_cpu, strict=True)]

    def added_us(self) -> list[float]:
        """Per round: what one call cost the wrapped server beyond the unwrapped one (µs).

        A ratio depends on how trivial the tool is; this is what the library adds to any tool.
        """
        return [1e6 / w - 1e6 / p for w, p in zip(self.wrapped, self.plain, strict=True)]


class Collector:
    """The cyclic garbage collector's pauses in this process, seen through `gc.callbacks`."""

    def __init__(self) -> None:
        self.paused = 0.0
        self.runs = 0
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._began = now
        else:
            self.paused += now - self._began
            self.runs += 1

    @contextmanager
    def watching(self) -> Iterator[Collector]:
        gc.callbacks.append(self)
        try:
            yield self
        finally:
            gc.callbacks.remove(self)


async def _calls(
    client: Client, path: BenchPath, count: int, collector: Collector | None = None
) -> tuple[float, float]:
    """`count` round trips: (wall seconds, CPU seconds of this process), less the
    collector's pauses when a `collector` is watching."""
    paused = collector.paused if collector is not None else 0.0
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(count):
        result = await client.call_tool(path.tool, path.arguments)
        if result.is_error:
            raise RuntimeError(f"{path.name}: the tool failed: {result.content}")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    paused = collector.paused - paused if collector is not None else 0.0
    return wall - paused, cpu - paused


@asynccontextmanager
async def _client(path: BenchPath, wrapped: bool, otel: bool) -> AsyncIterator[tuple[Client, int | None]]:
    """A client of the path's server, and the server's pid when it runs in a process of its own."""
    if path.transport == "memory":
        async with Client(path.factory(wrapped), mode=path.mode) as client:
            yield client, None
        return
    with serve_http(path.factory, wrapped, otel) as served:
        async with _http_client(served.url, path) as client:
            yield client, served.pid


@asynccontextmanager
async def _http_client(url: str, path: BenchPath) -> AsyncIterator[Client]:
    """The SDK's client of the HTTP server at `url`, sending the path's `headers` on every
    request (as a UCP platform sends its `UCP-Agent` header beside the arguments naming it)."""
    if not path.headers:
        async with Client(url, mode=path.mode) as client:
            yield client
        return
    timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's own client's
    async with (
        httpx2.AsyncClient(headers=dict(path.headers), timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http), mode=path.mode) as client,
    ):
        yield client


async def measure_overhead(
    path: BenchPath, otel: bool, rounds: int, round_seconds: float, alone: int = 1_000
) -> Overhead:
    """`rounds` rounds of `calls` pairs; each pair is one call to each server, in random
    order, so whatever else the machine does in a given millisecond slows both alike.

    Calls are timed without this process's garbage-collector pauses; in-memory rows then
    count the collector runs each server's own garbage causes over `alone` calls (the
    Method section says why), HTTP rows take the CPU time from the server processes."""
    async with (
        _client(path, False, otel) as (plain, plain_pid),
        _client(path, True, otel) as (wrapped, wrapped_pid),
    ):
        for _ in range(30):  # warm-up: imports, caches, the client's tools/list
            await _calls(plain, path, 1)
            await _calls(wrapped, path, 1)
        sample = [(await _calls(plain, path, 1))[0] for _ in range(30)]
        calls = max(30, int(round_seconds / 2 / statistics.median(sample)))
        result = Overhead(path.name, otel, path.reference, calls, rounds)
        order = random.Random(f"{path.name} {otel}")
        with Collector().watching() as collector:
            for _ in range(rounds):
                time_plain = [0.0, 0.0]
                time_wrapped = [0.0, 0.0]
                servers_cpu = [process_cpu(pid) for pid in (plain_pid, wrapped_pid) if pid is not None]
                for _ in range(calls):
                    pair = ((plain, time_plain), (wrapped, time_wrapped))
                    for client, spent in pair if order.random() < 0.5 else pair[::-1]:
                        wall, cpu = await _calls(client, path, 1, collector)
                        spent[0] += wall
                        spent[1] += cpu
                if plain_pid is not None and wrapped_pid is not None:
                    time_plain[1] = process_cpu(plain_pid) - servers_cpu[0]
                    time_wrapped[1] = process_cpu(wrapped_pid) - servers_cpu[1]
                result.add_round(time_plain, time_wrapped)
            if path.transport == "memory":
                runs = []
                for client in (plain, wrapped):
                    gc.collect()
                    before = collector.runs
                    await _calls(client, path, alone)
                    runs.append(1_000 * (collector.runs - before) / alone)
                result.collections = (runs[0], runs[1])
    return result


def configure_otel() -> Any:
    """A real SDK: every span is recorded and handed to an exporter that drops it."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class Discard(SpanExporter):
        exported = 0

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            Discard.exported += len(spans)
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Discard()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    return Discard


# --------------------------------------------------------------------------------------
# Instructions per call (callgrind)
# --------------------------------------------------------------------------------------

MARKS_SOURCE = Path(__file__).with_name("callgrind_marks.c")
MARKS_LIBRARY = "MCP_NEGOTIATION_BENCH_MARKS"
"""The environment variable naming the built `callgrind_marks.c`, for the measured child."""


@dataclass(frozen=True)
class CountedPath:
    """A path whose repeated `tools/call` is counted in instructions, with or without an
    OpenTelemetry SDK (over HTTP: `HTTP_COSTS`)."""

    key: str  # what `--profile` takes (in memory)
    path: BenchPath
    otel: bool


@dataclass(frozen=True)
class Cost(CountedPath):
    """A path counted in memory, with what the library may add to it: the issue's targets
    (a repeat is one lookup and a publish)."""

    target: int


def _path(name: str) -> BenchPath:
    return next(path for path in PATHS if path.name == name)


COSTS = (
    Cost("legacy", _path("in-memory · legacy"), False, 6_000),
    Cost("modern", _path("in-memory · modern"), False, 8_000),
    Cost("modern-otel", _path("in-memory · modern"), True, 20_000),
    Cost("ucp-legacy", _path("UCP cached · in-memory · legacy"), False, 25_000),
    Cost("ucp-modern", _path("UCP cached · in-memory · modern"), False, 25_000),
    Cost("ucp-modern-otel", _path("UCP cached · in-memory · modern"), True, 35_000),
    Cost(
        "ucp-legacy-unstamped",
        BenchPath(
            "UCP cached · in-memory · legacy, results not stamped",
            "memory",
            "legacy",
            ucp_server_unstamped,
            "create_checkout",
            UCP_ARGS,
            otel=(False,),
        ),
        False,
        25_000,
    ),
)
VARIANTS = ("empty", "library")
"""The server with an empty SDK middleware in place of the library, and with the library."""
EMPTY_RUNS = 3
"""Runs of no call: what a run costs besides its calls (the loop, the client requests)."""
ATTRIBUTED = 10
"""Calls `--profile` attributes to library functions (each dumps callgrind's counts dozens of times)."""


@dataclass
class Counted:
    """Instructions per call by variant, each the median over `runs` runs of `calls` calls,
    less a run of no call (`per_call`)."""

    calls: int
    runs: int
    per_call: dict[str, float]

    @property
    def added(self) -> float:
        return self.per_call["library"] - self.per_call["empty"]


@dataclass
class Instructions(Counted):
    cost: Cost = field(kw_only=True)


def _server(cost: Cost, variant: str) -> MCPServer:
    factory = cost.path.factory
    return factory(True) if variant == "library" else with_empty_middleware(factory(False))


async def count_child(
    keys: Sequence[str], calls: int, runs: int, warmup: int, collector: bool, attribute: bool = False
) -> dict[str, int]:
    """Inside callgrind (`--callgrind-child`): for each cost and variant, after the same
    warm-up, `EMPTY_RUNS` runs of no call and `runs` runs of `calls` round trips, each
    dumped under its own label.

    Only these runs are instrumented: the interpreter's start-up and the warm-up are not
    (they would take most of the time). With `attribute`, the library's runs are followed
    by `ATTRIBUTED` calls seen by `LineAttribution`, then as many seen by `Attribution`:
    the hits and calls they counted are returned."""
    import ctypes

    marks = ctypes.CDLL(os.environ[MARKS_LIBRARY])
    costs = [cost for cost in COSTS if cost.key in keys]
    seen: dict[str, int] = {}
    if any(cost.otel for cost in costs):
        configure_otel()
    for cost in costs:
        for variant in VARIANTS:
            async with Client(_server(cost, variant), mode=cost.path.mode) as client:
                await _calls(client, cost.path, warmup)
                gc.collect()
                gc.freeze()  # what the warm-up left is no longer the collector's concern
                if not collector:
                    gc.disable()
                marks.start_instrumentation()
                for index, count in enumerate((0,) * EMPTY_RUNS + (calls,) * runs):
                    marks.zero_stats()
                    await _calls(client, cost.path, count)
                    marks.dump_stats_at(f"{cost.key} {variant} {count} {index}".encode())
                if attribute and variant == "library":
                    marks.stop_instrumentation()
                    lines = LineAttribution(marks)
                    sys.settrace(lines.call)
                    await _calls(client, cost.path, warmup)  # tracing's own warm-up, not dumped
                    lines.active = True
                    marks.start_instrumentation()
                    marks.zero_stats()
                    await _calls(client, cost.path, ATTRIBUTED)
                    lines.cut(Attribution.OUTSIDE)
                    sys.settrace(None)
                    seen = {f"line {label}": hits for label, hits in lines.hits.items()}
                    marks.stop_instrumentation()
                    attribution = Attribution(marks)
                    attribution.install()
                    await _calls(client, cost.path, warmup)  # the wrappers' own warm-up, not dumped
                    attribution.calls.clear()
                    attribution.active = True
                    marks.start_instrumentation()
                    marks.zero_stats()
                    await _calls(client, cost.path, ATTRIBUTED)
                    attribution.cut()
                    seen |= attribution.calls
                marks.stop_instrumentation()
                gc.enable()
                gc.unfreeze()
    return seen


def _dumps(folder: Path) -> list[tuple[str, Path, int]]:
    """Each dump in `folder`: the label it was dumped under and the instructions it counted
    (both in its header)."""
    found = []
    trigger = "desc: Trigger: Client Request: "
    for dump in folder.glob("callgrind.*"):
        label = None
        with dump.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.startswith(trigger):
                    label = line[len(trigger) :].strip()
                elif line.startswith("summary:"):
                    if label is not None:
                        found.append((label, dump, int(line.split()[1])))
                    break
    return found


def _build_marks(folder: Path) -> Path:
    library = folder / "callgrind_marks.so"
    subprocess.run(
        ["cc", "-O2", "-shared", "-fPIC", "-o", str(library), str(MARKS_SOURCE)],
        check=True,
        capture_output=True,
        text=True,
    )
    return library


def callgrind_missing() -> str | None:
    """Why the instruction count cannot run here, or None."""
    for tool in ("valgrind", "cc"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (valgrind's Debian package brings its headers)"
    return None


def run_counted(
    keys: Sequence[str],
    calls: int,
    runs: int,
    warmup: int,
    collector: bool,
    folder: Path,
    attribute: bool = False,
) -> None:
    """Run the costs `keys` under callgrind, one process per cost, side by side; their dumps
    land in `folder`. A process of its own (an OpenTelemetry SDK, once configured, stays for
    the process anyway): measured after other paths in the same process, a path's count
    moved by several thousand instructions with the heap those paths left."""
    env = {**os.environ, "PYTHONHASHSEED": "0", MARKS_LIBRARY: str(_build_marks(folder))}
    children: list[tuple[subprocess.Popen[bytes], Any]] = []
    for group in ([cost.key] for cost in COSTS if cost.key in keys):
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={folder / f'callgrind.{len(children)}.%p'}",
            sys.executable,
            str(Path(__file__).resolve()),
            "--callgrind-child",
            ",".join(group),
            "--calls",
            str(calls),
            "--runs",
            str(runs),
            "--warmup",
            str(warmup),
            *(["--collector"] if collector else []),
            *(["--attribute", str(folder / "calls.json")] if attribute else []),
        ]
        log = (folder / f"valgrind.{len(children)}.log").open("w")
        children.append((subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    for child, log in children:
        code = child.wait()
        log.close()
        if code != 0:
            tail = Path(log.name).read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the callgrind run failed (exit {code}):\n{tail}")


def per_call(dumps: list[tuple[str, Path, int]], key: str, variant: str) -> float:
    """The median, over the runs, of a run's count less a run of no call, per call.

    A median, not a mean: what goes by the wall clock (the negotiator's date re-read every
    60 s, which expires the memo of repeats) lands in one run or another, far more often
    under callgrind, where calls take ~50 times longer, than in a real server; the median
    run is a repeat, what the targets are about."""
    prefix = f"{key} {variant} "
    counts = [(int(label.split()[-2]), total) for label, _, total in dumps if label.startswith(prefix)]
    idle = statistics.median(total for calls, total in counts if calls == 0)
    return statistics.median((total - idle) / calls for calls, total in counts if calls)


def measure_instructions(
    keys: Sequence[str], calls: int, runs: int, warmup: int, collector: bool
) -> list[Instructions]:
    with tempfile.TemporaryDirectory(prefix="callgrind-") as tmp:
        folder = Path(tmp)
        run_counted(keys, calls, runs, warmup, collector, folder)
        dumps = _dumps(folder)
        return [
            Instructions(
                calls, runs, {variant: per_call(dumps, cost.key, variant) for variant in VARIANTS}, cost=cost
            )
            for cost in COSTS
            if cost.key in keys
        ]


PARTS = ("instructions", "http-instructions", "overhead", "micro", "memory")
"""What a run measures, in this order (`--only`)."""


HTTP_COSTS = tuple(
    CountedPath(f"{key}-otel" if otel else key, _path(name), otel)
    for otel in (False, True)
    for key, name in (
        ("http-legacy", "HTTP · legacy stateful"),
        ("http-modern", "HTTP · modern"),
        ("http-ucp-modern", "UCP cached · HTTP · modern"),
        ("http-ucp-agent", "UCP cached · HTTP · modern, UCP-Agent header"),
    )
)
"""The HTTP paths of the overhead table whose servers `count_http` counts, without and with
an SDK (no target: the issue's are for calls in memory)."""
HTTP_VARIANTS = ("empty", "again", "library")
"""Over HTTP: a server with an empty SDK middleware, a second such server (the two differ
only by the method's noise: the A/A figure), and the library's."""


@dataclass
class HttpInstructions(Counted):
    cost: CountedPath = field(kw_only=True)

    @property
    def noise(self) -> float:
        """What a second empty server reads over the first: the method's own error (A/A)."""
        return self.per_call["again"] - self.per_call["empty"]


async def count_http(cost: CountedPath, calls: int, runs: int, warmup: int) -> HttpInstructions:
    """Instructions per call of an HTTP server, counted in its process alone (`serve_http`
    under callgrind), each variant in a process of its own, driven at once from here.

    The client stays out of the count: in one counted process with the server, how the two
    interleave would move the count by more than the library costs. Each run is marked by
    the server itself on its event loop once the loop is idle (`serve_main`): after the same
    warm-up, `EMPTY_RUNS` runs of no call, then `runs` runs of `calls`, as in memory. With
    `cost.otel`, every server records its spans with a real SDK (`configure_otel`)."""
    key, path = cost.key, cost.path
    with tempfile.TemporaryDirectory(prefix="callgrind-http-") as tmp:
        folder = Path(tmp)
        marks = _build_marks(folder)
        with contextlib.ExitStack() as stack:
            servers = [
                stack.enter_context(
                    serve_http(
                        path.factory,
                        variant == "library",
                        cost.otel,
                        empty=variant != "library",
                        counted=Counting(folder / f"callgrind.{variant}", marks),
                    )
                )
                for variant in HTTP_VARIANTS
            ]
            await asyncio.gather(
                *(
                    _count_served(served, path, f"{key} {variant}", calls, runs, warmup)
                    for served, variant in zip(servers, HTTP_VARIANTS, strict=True)
                )
            )
        dumps = _dumps(folder)  # once every server stopped, so that every dump is written
        per_variant = {variant: per_call(dumps, key, variant) for variant in HTTP_VARIANTS}
    return HttpInstructions(calls, runs, per_variant, cost=cost)


async def _count_served(
    served: Served, path: BenchPath, label: str, calls: int, runs: int, warmup: int
) -> None:
    async with _http_client(served.url, path) as client:
        await _calls(client, path, warmup)
        for index, count in enumerate((0,) * EMPTY_RUNS + (calls,) * runs):
            await asyncio.to_thread(served.mark, "count")
            await _calls(client, path, count)
            await asyncio.to_thread(served.mark, f"dump {label} {count} {index}")


LIBRARY = "mcp_negotiation"


def library_members() -> Iterator[tuple[Any, str, Any]]:
    """(owner, attribute, value): every attribute of the library's modules, and every member
    of the classes they define in place of the class: what `Attribution` and `Replay` replace."""
    modules = {name: module for name, module in sys.modules.items() if name.startswith(LIBRARY)}
    for module in list(modules.values()):
        for attribute, value in list(vars(module).items()):
            if inspect.isclass(value) and value.__module__ in modules:
                for member, found in list(vars(value).items()):
                    yield value, member, found
            else:
                yield module, attribute, value


class Attribution:
    """Which of the library's functions the instructions run under, for `--profile`.

    Python functions are invisible to callgrind: they all run inside the interpreter's one
    C loop. So each function and method of `mcp_negotiation` is wrapped: entering or
    leaving one dumps the count so far, labelled with the library function that was
    innermost while it ran (its *self* count: whatever it called outside the library
    included). The SDK's `call_next` is a frame of its own, so the rest of the request is
    not charged to the middleware. The wrappers cost instructions too; `profile` reports
    how many per wrapped call.
    """

    OUTSIDE = "(outside the library)"
    SDK = "(the SDK, from call_next)"

    def __init__(self, marks: Any) -> None:
        self.marks = marks
        self.stack = [self.OUTSIDE]
        self.calls: dict[str, int] = {}
        self.active = False  # dumps only once counting (the first calls re-specialise the interpreter)

    def cut(self) -> None:
        if self.active:
            self.marks.dump_stats_at(f"fn {self.stack[-1]}".encode())

    def enter(self, name: str) -> None:
        self.cut()
        self.stack.append(name)
        self.calls[name] = self.calls.get(name, 0) + 1

    def leave(self) -> None:
        self.cut()
        self.stack.pop()

    def downstream(self, call_next: Callable[..., Any]) -> Callable[..., Any]:
        if getattr(call_next, "attributed", False):  # handed on by one library function to another
            return call_next

        async def seen(*args: Any, **kwargs: Any) -> Any:
            self.enter(self.SDK)
            try:
                return await call_next(*args, **kwargs)
            finally:
                self.leave()

        seen.attributed = True  # type: ignore[attr-defined]
        return seen

    def wrap(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):
            parameters = list(inspect.signature(fn).parameters)
            # Where `call_next` comes, by position: not always last (`_decided(ctx, call_next, key, base)`).
            at = parameters.index("call_next") if "call_next" in parameters else None

            async def coroutine(*args: Any, **kwargs: Any) -> Any:
                self.enter(name)
                try:
                    if at is not None and len(args) > at:
                        args = (*args[:at], self.downstream(args[at]), *args[at + 1 :])
                    elif at is not None and "call_next" in kwargs:
                        kwargs = {**kwargs, "call_next": self.downstream(kwargs["call_next"])}
                    return await fn(*args, **kwargs)
                finally:
                    self.leave()

            return functools.update_wrapper(coroutine, fn)

        def function(*args: Any, **kwargs: Any) -> Any:
            self.enter(name)
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave()

        return functools.update_wrapper(function, fn)

    def install(self) -> None:
        """Wrap every function and method defined in the library, wherever a module holds it."""
        wrapped: dict[int, Callable[..., Any]] = {}

        def wrapper(fn: Any) -> Any:
            if id(fn) not in wrapped:  # a class or function several modules import is wrapped once
                wrapped[id(fn)] = self.wrap(
                    fn, f"{fn.__module__.removeprefix(LIBRARY + '.')}.{fn.__qualname__}"
                )
            return wrapped[id(fn)]

        def ours(value: Any) -> bool:
            made = value in wrapped.values()
            return inspect.isfunction(value) and value.__module__.startswith(LIBRARY) and not made

        for owner, attribute, value in library_members():
            if ours(value):
                setattr(owner, attribute, wrapper(value))
            elif isinstance(value, staticmethod | classmethod) and ours(value.__func__):
                setattr(owner, attribute, type(value)(wrapper(value.__func__)))
            elif isinstance(value, property) and ours(value.fget):
                setattr(owner, attribute, property(wrapper(value.fget), value.fset, value.fdel))


class LineAttribution:
    """Which lines of the library the instructions run on, for `--profile --lines`.

    `sys.settrace` cuts callgrind's count at every line the library executes, at every call
    into it and at every return out of it, labelled with the line that was running (or
    `Attribution.OUTSIDE`). A line that calls code outside the library (`await call_next`
    above all) is charged with what that code ran. Tracing costs instructions at every cut,
    and at every call of any Python function (the global trace function runs): the report
    takes an estimate of the first out.
    """

    def __init__(self, marks: Any) -> None:
        self.marks = marks
        self.root = str(Path(inspect.getfile(Negotiator)).parent)
        self.label = Attribution.OUTSIDE
        self.hits: dict[str, int] = {}
        self.active = False

    def cut(self, label: str) -> None:
        if self.active:
            self.marks.dump_stats_at(f"line {self.label}".encode())
            self.hits[label] = self.hits.get(label, 0) + 1
        self.label = label

    def where(self, frame: Any) -> str:
        return f"{frame.f_code.co_filename.removeprefix(self.root + os.sep)}:{frame.f_lineno}"

    def local(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            self.cut(self.where(frame))
        elif event == "return":
            back = frame.f_back
            if back is None or not back.f_code.co_filename.startswith(self.root):
                self.cut(Attribution.OUTSIDE)
        return self.local

    def call(self, frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename.startswith(self.root):
            self.cut(self.where(frame))
            return self.local
        return None


def _by_function(dump: Path) -> dict[str, int]:
    """A dump's self count per C function (callgrind_annotate), recursion levels merged."""
    text = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--inclusive=no", str(dump)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts: dict[str, int] = {}
    for line in text.splitlines():
        found = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*):(\S+?)('\d+)? \[(.*)\]$", line)
        if found:
            name = f"{found[3]} ({Path(found[5]).name})"
            counts[name] = counts.get(name, 0) + int(found[1].replace(",", ""))
    return counts


def profile(key: str, calls: int, runs: int, warmup: int, collector: bool, top: int = 25) -> str:
    """Where one path's added instructions go: by library function (`Attribution`), by line
    of the library (`LineAttribution`), and by C function (the per-call difference of
    callgrind_annotate's counts, library − empty)."""
    cost = next(cost for cost in COSTS if cost.key == key)
    with tempfile.TemporaryDirectory(prefix="callgrind-") as tmp:
        folder = Path(tmp)
        run_counted([key], calls, runs, warmup, collector, folder, attribute=True)
        dumps = _dumps(folder)
        counts = {variant: per_call(dumps, key, variant) for variant in VARIANTS}
        by_c: dict[str, float] = {}
        for variant, sign in (("library", 1), ("empty", -1)):  # all runs, less the runs of no call
            for label, dump, _ in dumps:
                if label.startswith(f"{key} {variant} "):
                    count = int(label.split()[-2])
                    weight = sign / (runs * calls) if count else -sign / EMPTY_RUNS / calls
                    for name, instructions in _by_function(dump).items():
                        by_c[name] = by_c.get(name, 0.0) + weight * instructions
        selves: dict[str, int] = {}
        segments: dict[str, int] = {}
        selves_lines: dict[str, int] = {}
        for label, _, total in dumps:
            if label.startswith("fn "):
                selves[label[3:]] = selves.get(label[3:], 0) + total
                segments[label[3:]] = segments.get(label[3:], 0) + 1
            elif label.startswith("line "):
                selves_lines[label] = selves_lines.get(label, 0) + total
        library_calls = json.loads((folder / "calls.json").read_text())
    wrapped_calls = (
        sum(n for name, n in library_calls.items() if not name.startswith(("(", "line "))) / ATTRIBUTED
    )
    # What the wrappers cost, spread evenly over the cuts (each segment ends at one).
    per_cut = (sum(selves.values()) - counts["library"] * ATTRIBUTED) / sum(segments.values())
    corrected = {name: (total - segments[name] * per_cut) / ATTRIBUTED for name, total in selves.items()}
    cuts = sum(segments.values()) / ATTRIBUTED
    out = [
        f"# Where the added instructions go: {cost.path.name}, OTel SDK {'yes' if cost.otel else 'no'}",
        "",
        f"Per call (median of {runs} runs of {calls}): empty SDK middleware {counts['empty']:,.0f}, with the"
        f" library {counts['library']:,.0f}, added {counts['library'] - counts['empty']:+,.0f}.",
        "",
        "## By library function (self: what ran while it was the innermost library function,",
        "## the SDK, OpenTelemetry and the standard library it called included)",
        "",
        f"The {wrapped_calls:g} library calls per request were wrapped to be seen, which cut the",
        f"count {cuts:g} times per request, at ~{per_cut:,.0f} instructions a cut;",
        "*less wrappers* takes that out of each function's count, evenly per cut (an estimate:",
        f"*as counted* is exact, wrappers included). Over {ATTRIBUTED} requests.",
        "",
        "| less wrappers, per request | as counted | calls per request | function |",
        "|--:|--:|--:|---|",
    ]
    for name, less in sorted(corrected.items(), key=lambda item: -item[1])[:top]:
        raw, made = selves[name] / ATTRIBUTED, library_calls.get(name, 0) / ATTRIBUTED
        out.append(f"| {less:,.0f} | {raw:,.0f} | {made:g} | {name} |")
    line_counts = {label[5:]: n for label, n in selves_lines.items() if label[5:] != Attribution.OUTSIDE}
    line_hits = {name[5:]: n for name, n in library_calls.items() if name.startswith("line ")}
    # The cheapest line is little more than the tracing that cut it: take that out of each hit.
    tracing = min(count / line_hits[line] for line, count in line_counts.items() if line in line_hits)
    out += [
        "",
        "## By line of the library (`sys.settrace`; a line calling outside the library is charged",
        "## with what it ran there, `await call_next(...)` with the rest of the request)",
        "",
        f"*less tracing* takes ~{tracing:,.0f} instructions per hit out (what the cheapest line cost",
        "per hit); the global trace function also runs at every other Python call, which lands",
        f"mostly on {Attribution.OUTSIDE} and on lines that call out. Over {ATTRIBUTED} requests.",
        "",
        "| less tracing, per request | as counted | hits per request | line | source |",
        "|--:|--:|--:|---|---|",
    ]
    ranked = sorted(line_counts.items(), key=lambda item: -(item[1] - line_hits.get(item[0], 0) * tracing))
    for line, count in ranked[:top]:
        hits = line_hits.get(line, 0)
        source = ""
        if ":" in line:
            file, number = line.rsplit(":", 1)
            source = linecache.getline(
                str(Path(inspect.getfile(Negotiator)).parent / file), int(number)
            ).strip()
        less = (count - hits * tracing) / ATTRIBUTED
        out.append(
            f"| {less:,.0f} | {count / ATTRIBUTED:,.0f} | {hits / ATTRIBUTED:g} | {line} | `{source[:70]}` |"
        )
    out += [
        "",
        "## By C function (library − empty middleware, per call: means over the runs, not medians)",
        "",
        "| added per call | C function (object) |",
        "|--:|---|",
    ]
    for name, added in sorted(by_c.items(), key=lambda item: -abs(item[1]))[:top]:
        out.append(f"| {added:+,.0f} | {name} |")
    return "\n".join(out)


UCP_STEPS = (
    "core.engine.Engine.memoised_scope",
    "ucp.binding.named_in_arguments",
    "otel.spans.repeated",
    "adapters.mcp2.middleware.NegotiationMiddleware.repeat_entry",
    "ucp.negotiate.UcpAgreement.to_ucp_block",
    "adapters.context._entry_of",
)
STEPS = {
    "legacy": ("adapters.mcp2.seams.held", "core.engine.Engine.held_entry"),
    "modern": ("core.engine.RepeatMemo.find", "otel.spans.repeated"),
    "ucp-legacy": ("adapters.mcp2.seams.held", "core.engine.Engine.held_entry", *UCP_STEPS),
    "ucp-modern": ("core.engine.RepeatMemo.find", *UCP_STEPS),
}
"""`--steps`: the library functions a repeat on each path calls, replayed one at a time. No
OTel keys: a captured span has ended by the replay, and `add_link` on it returns at once."""
STEP_REPEATS = 2_000
MIDDLEWARE_CALL = "adapters.mcp2.middleware.NegotiationMiddleware.__call__"
WHOLE = "the library's middleware, whole, on this repeat (its call_next returning at once)"
EMPTY_WHOLE = "an empty SDK middleware (only calls the next), the same way"
STEPS_ALONE = "the same repeat's library calls and publish alone, as a middleware (no branches), the same way"
WRITTEN_OUT = "the same repeat written out in one function (no library call between its steps), the same way"
TOOL_DECORATED = "a tool returning a dict at once, under @requires_ucp (the entry published as on a repeat)"
TOOL_BARE = "the same tool undecorated"


class Replay:
    """For `--steps`: the first call each named library function gets in one real request, its
    arguments and `contextvars` context kept, so that callgrind can count it again alone: exact
    where `Attribution`'s cuts (thousands of instructions each) leave an estimate."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = {*names, MIDDLEWARE_CALL}
        self.seen: dict[str, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], Any]] = {}
        self.replaced: list[tuple[Any, str, Any]] = []

    def spy(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        import contextvars

        if inspect.iscoroutinefunction(fn):

            async def coroutine(*args: Any, **kwargs: Any) -> Any:
                self.seen.setdefault(name, (fn, args, kwargs, contextvars.copy_context()))
                return await fn(*args, **kwargs)

            return coroutine

        def function(*args: Any, **kwargs: Any) -> Any:
            self.seen.setdefault(name, (fn, args, kwargs, contextvars.copy_context()))
            return fn(*args, **kwargs)

        return function

    def install(self) -> None:
        """Spy on the named functions and methods, wherever a library module holds them."""

        for owner, attribute, value in library_members():
            if not inspect.isfunction(value):
                continue
            name = f"{value.__module__.removeprefix(LIBRARY + '.')}.{value.__qualname__}"
            if name in self.names:
                self.replaced.append((owner, attribute, value))
                setattr(owner, attribute, self.spy(value, name))

    def uninstall(self) -> None:
        for owner, attribute, value in reversed(self.replaced):
            setattr(owner, attribute, value)


async def steps_child(key: str) -> None:
    """Inside callgrind (`--steps-child`): one real repeat on `key`'s path with `Replay`
    spying, then each step `STEP_REPEATS` times in its own context, and as many empty
    turns of the loop, each dumped under its own label."""
    import ctypes

    marks = ctypes.CDLL(os.environ[MARKS_LIBRARY])
    cost = next(cost for cost in COSTS if cost.key == key)
    replay = Replay(STEPS[key])
    async with Client(_server(cost, "library"), mode=cost.path.mode) as client:
        await _calls(client, cost.path, 50)
        replay.install()
        try:
            await _calls(client, cost.path, 1)  # a repeat
        finally:
            replay.uninstall()
    _, (middleware, ctx, _), _, request = replay.seen[MIDDLEWARE_CALL]

    def publish(entry: Any = (None, None)) -> None:  # what the middleware does around call_next
        setattr(ctx, seams.BOUND_ATTRIBUTE, entry)
        current.reset(current.set(entry))

    def nothing(first: object, second: object) -> None:
        pass

    partial_call = functools.partial(nothing, 1, 2)

    async def returned(ctx: Any) -> None:  # the rest of the chain, at once
        return None

    async def empty(ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        return await call_next(ctx)

    engine = middleware.engine

    async def steps_alone(ctx: Any, call_next: Callable[[Any], Any], written_out: bool = False) -> Any:
        """The library functions this repeat calls, in order, and the publish: the middleware
        without the branches that tell one path from another (see `STEPS_ALONE`).

        `written_out` (UCP legacy): the same steps with no library call between them, each
        what the library's does: the SDK's connection state read in place (`seams.held`'s
        private names), the record's check, the profile URL, the memo lookup, the resolver's
        word, the link's check, the count and the tool's learned entry. No layering of these
        steps costs less (`WRITTEN_OUT`); a replay that is not a memoised repeat is raised."""
        if written_out:
            state = getattr(getattr(getattr(ctx, "session", None), "_connection", None), "state", None)
            held = state.get(seams.STATE_KEY) if type(state) is dict else None
            withdrawals = engine.negotiator.withdrawals
            if not (
                type(held) is Negotiation
                and held.withheld is withdrawals.current
                and withdrawals.monotonic() < withdrawals.until
                and ctx.method == "tools/call"
            ):
                raise RuntimeError("the replayed call is not a repeat of a session's UCP call")
            params = ctx.params
            url = params["arguments"]["meta"]["ucp-agent"]["profile"]
            known = engine.ucp_memo.get((id(held), url, None))  # (in memory: no UCP-Agent header)
            fresh = engine.ucp.resolver_fresh
            if known is None or known.platform is None or fresh(url) is not known.platform():
                raise RuntimeError("the replayed call's agreement is not memoised")
            if telemetry.SPAN_SOURCE is not None:
                parent = telemetry.SPAN_SOURCE[0].get().get(telemetry.SPAN_SOURCE[1])
                if parent is not None and type(parent) is not NonRecordingSpan and parent.is_recording():
                    otel_seam.link_appender(type(parent))(parent, known.traced.link)
            entry = known.by_tool.get(params["name"]) or known.published
        else:
            if ctx.protocol_version in LEGACY_REVISIONS:
                entry = engine.held_entry(seams.held(ctx), ctx.method)
            else:
                _, repeat = engine.memo.find(ctx.method, ctx.params, ctx.protocol_version, False)
                entry = repeat.published
                if repeat.traced is not None:
                    telemetry.repeated(repeat.traced)
            if key.startswith("ucp"):
                record = entry if key == "ucp-legacy" else entry[0]
                entry = middleware.repeat_entry(ctx, engine.memoised_scope(record, ctx.params), None)
        setattr(ctx, seams.BOUND_ATTRIBUTE, entry)
        token = current.set(entry)
        try:
            return await call_next(ctx)
        finally:
            current.reset(token)

    def driven(chain: Callable[[Any, Any], Any]) -> Callable[[], None]:
        return _driven(lambda: chain(ctx, returned))

    bodies: list[tuple[str, Callable[[], object], Any]] = [
        (name, functools.partial(fn, *args, **kwargs), context)
        for name, (fn, args, kwargs, context) in replay.seen.items()
        if name != MIDDLEWARE_CALL
    ]
    bodies += [
        ("publish: the attribute on the SDK's context and a ContextVar set/reset", publish, request),
        ("a ContextVar set/reset", lambda: current.reset(current.set(None)), request),
        (WHOLE, driven(middleware), request),
        (EMPTY_WHOLE, driven(empty), request),
        (STEPS_ALONE, driven(steps_alone), request),
        ("(a no-op called through a partial with two arguments: the call's own cost)", partial_call, request),
    ]
    if key == "ucp-legacy":
        bodies.append((WRITTEN_OUT, _driven(lambda: steps_alone(ctx, returned, written_out=True)), request))
    if key.startswith("ucp"):
        bodies += _tool_side(seams.entry_bound_to(ctx), request)

    def repeat(label: str, body: Callable[[], object]) -> None:
        for _ in range(200):  # the interpreter specialises the first calls
            body()
        marks.start_instrumentation()
        for count in (STEP_REPEATS, 0):
            marks.zero_stats()
            for _ in range(count):
                body()
            marks.dump_stats_at(f"{label} {count}".encode())
        marks.stop_instrumentation()

    gc.collect()
    gc.freeze()
    gc.disable()
    for label, body, context in bodies:
        context.run(repeat, label, body)


def _driven(start: Callable[[], Any]) -> Callable[[], None]:
    """`start`'s coroutine run whole by one `send`: a repeat awaits nothing but what returns
    at once, so anything else it awaits is a mistake of the replay's, raised."""

    def drive() -> None:
        coroutine = start()
        try:
            coroutine.send(None)
        except StopIteration:
            return
        coroutine.close()
        raise RuntimeError("a replayed repeat awaited something that does not return at once")

    return drive


def _tool_side(entry: Any, request: Any) -> list[tuple[str, Callable[[], object], Any]]:
    """For a UCP repeat's `--steps`: what `@requires_ucp` adds to a tool that returns a dict at
    once (the published entry's check, the stamped block), against the same tool undecorated,
    in the request's context with `entry`, what the middleware published on the repeat."""
    from ucp_shop import CHECKOUT

    published = request.copy()
    published.run(current.set, entry)

    async def tool() -> dict[str, Any]:
        return {"status": "incomplete"}

    return [
        (TOOL_DECORATED, _driven(requires_ucp(CHECKOUT)(tool)), published),
        (TOOL_BARE, _driven(tool), published),
    ]


def steps(key: str) -> str:
    """`--steps`: the instructions each step of a repeat on `key`'s path costs, alone."""
    with tempfile.TemporaryDirectory(prefix="callgrind-") as tmp:
        folder = Path(tmp)
        env = {**os.environ, "PYTHONHASHSEED": "0", MARKS_LIBRARY: str(_build_marks(folder))}
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
        command += [f"--callgrind-out-file={folder / 'callgrind.%p'}", sys.executable]
        command += [str(Path(__file__).resolve()), "--steps-child", key]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"the callgrind run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        counts: dict[str, dict[int, int]] = {}
        for label, _, total in _dumps(folder):
            step, repeats = label.rsplit(" ", 1)
            counts.setdefault(step, {})[int(repeats)] = total
    out = [
        f"# One step at a time: a repeat on {key}, each step called {STEP_REPEATS:,} times with the",
        "# arguments and context a real repeat gave it (less as many empty turns of the loop;",
        "# each figure includes the call itself, see the last row)",
        "",
        "| instructions per call | step |",
        "|--:|---|",
    ]
    per_call = {step: (count[STEP_REPEATS] - count[0]) / STEP_REPEATS for step, count in counts.items()}
    for step, figure in sorted(per_call.items(), key=lambda item: -item[1]):
        out.append(f"| {figure:,.0f} | {step} |")
    out.append(
        f"| **{per_call[WHOLE] - per_call[EMPTY_WHOLE]:,.0f}** | **the middleware's own cost on this repeat"
        " (the library's whole less the empty one: no SDK, no tool)** |"
    )
    out.append(
        f"| **{per_call[STEPS_ALONE] - per_call[EMPTY_WHOLE]:,.0f}** | **of which its steps alone"
        " (the calls and the publish, less the empty one)** |"
    )
    if WRITTEN_OUT in per_call:
        out.append(
            f"| **{per_call[WRITTEN_OUT] - per_call[EMPTY_WHOLE]:,.0f}** | **the same steps written out"
            " (no call between them, less the empty one): what no layering of them goes under** |"
        )
    if TOOL_DECORATED in per_call:
        out.append(
            f"| **{per_call[TOOL_DECORATED] - per_call[TOOL_BARE]:,.0f}** | **what @requires_ucp adds to the"
            " tool (its check of the published entry, the stamped block)** |"
        )
    return "\n".join(out)


# --------------------------------------------------------------------------------------
# Micro-benchmarks
# --------------------------------------------------------------------------------------


@dataclass
class Micro:
    name: str
    best_us: float
    median_us: float
    target: str = ""


def _time(fn: Callable[[], object], repeat: int, min_seconds: float) -> tuple[float, float]:
    timer = timeit.Timer(fn)
    number = 1
    while timer.timeit(number) < min_seconds:
        number *= 2
    runs = [t / number * 1e6 for t in timer.repeat(repeat=repeat, number=number)]
    return min(runs), statistics.median(runs)


CAPABILITIES = {
    "sampling": {},
    "elicitation": {"form": {}, "url": {}},
    "roots": {"listChanged": True},
    "experimental": {"x": {}},
}
CLIENT_INFO = {"name": "bench", "version": "1.0"}


def envelope(version: str = "1.0") -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": version},
    }


def ucp_profiles(count: int) -> tuple[Profile, Profile]:
    """A business and a platform profile of `count` capabilities: roots with two versions,
    extensions of them, some not offered, some at no common version, some orphaned."""
    business: dict[str, Any] = {}
    theirs: dict[str, Any] = {}
    for i in range(count):
        name = f"dev.example.cap{i}"
        if i % 4 == 0:
            business[name] = [{"version": "2026-01-23"}, {"version": V}]
        else:
            business[name] = [{"version": V, "extends": f"dev.example.cap{i - i % 4}"}]
        if i % 7 == 3:
            continue  # not offered by the platform
        entry = dict(business[name][-1])
        if i % 11 == 5:
            entry["version"] = "2025-06-01"  # offered, but at no common version
        theirs[name] = [entry]
    return (
        Profile.from_json({"ucp": {"version": V, "capabilities": business}}),
        Profile.from_json({"ucp": {"version": V, "capabilities": theirs}}),
    )


def micro_benchmarks(repeat: int, min_seconds: float) -> list[Micro]:
    results: list[Micro] = []

    def add(name: str, fn: Callable[[], object], target: str = "") -> None:
        best, median = _time(fn, repeat, min_seconds)
        results.append(Micro(name, best, median, target))

    negotiator = Negotiator(Policy())
    params = {"protocolVersion": "2025-11-25", "capabilities": CAPABILITIES, "clientInfo": CLIENT_INFO}
    add("legacy `Negotiator.initialize`", lambda: negotiator.initialize(params, transport="memory"))

    distinct = [envelope(str(i)) for i in range(4096)]  # 4x the cache: every request misses
    cursor = iter(range(1 << 62))

    def uncached() -> object:
        return negotiator.request(distinct[next(cursor) & 4095], transport="memory")

    add("modern `Negotiator.request`, uncached", uncached)
    same = envelope()
    add(
        "modern `Negotiator.request`, cached",
        lambda: negotiator.request(same, transport="memory"),
        f"< {TARGET_CACHED_US:g} µs",
    )
    record = negotiator.request(same, transport="memory")
    add("`supports(record, 'elicitation.form')`", lambda: supports(record, "elicitation.form"))
    add("`supports(record, 'roots.listChanged')`", lambda: supports(record, "roots.listChanged"))
    add("`supports(record, 'no.such.feature')`", lambda: supports(record, "no.such.feature"))
    entry = (record, negotiator)
    request = ServerRequestContext(  # what the middleware publishes the entry on, per request
        session=None, lifespan_context=None, protocol_version="2026-07-28", method="tools/call"
    )
    seams.bind(request, entry)
    ctx = Context(request_context=request)  # what an MCPServer tool receives
    token = current.set(entry)
    try:
        add(
            "`client_supports(ctx, 'sampling')` (an MCPServer `Context`: ContextVar, ctx, supports)",
            lambda: client_supports(ctx, "sampling"),
        )
    finally:
        current.reset(token)
    header = 'profile="https://platform.example/.well-known/ucp"'
    add("`parse_ucp_agent`", lambda: parse_ucp_agent(header))
    for count in (5, 50, 500):
        business, platform_profile = ucp_profiles(count)
        add(
            f"UCP `negotiate_capabilities`, {count} capabilities",
            lambda b=business, p=platform_profile: negotiate_capabilities(b, p),  # type: ignore[misc]
        )
    business, _ = ucp_profiles(500)
    document = json.dumps(
        {
            "ucp": {
                "version": V,
                "capabilities": {
                    name: [{"version": e.version, **({"extends": list(e.extends)} if e.extends else {})}]
                    for name, entries in business.capabilities.items()
                    for e in entries[-1:]
                },
            }
        }
    ).encode()
    add(
        f"`Profile.from_bytes`, 500 capabilities ({len(document) // 1024} KiB)",
        lambda: Profile.from_bytes(document),
    )
    return results


# --------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------


@dataclass
class Memory:
    idle_sessions: int
    idle_plain: float  # bytes per idle legacy session
    idle_wrapped: float
    record: float  # bytes per legacy record (what the library keeps for a session)
    churn_points: list[tuple[int, int, int]]  # (sessions so far, Python heap blocks, gc objects)
    window_first: tuple[int, int, int]  # (first, last session of the window, bytes retained after gc)
    window_last: tuple[int, int, int]


async def _idle_bytes(wrapped: bool, count: int) -> float:
    server = plain_server(wrapped)
    async with Client(server, mode="legacy") as warm:  # first-use allocations are not per session
        await warm.call_tool("echo", {"x": 1})
    gc.collect()
    tracemalloc.start(1)
    try:
        before = tracemalloc.get_traced_memory()[0]
        async with AsyncExitStack() as stack:
            for _ in range(count):
                client = await stack.enter_async_context(Client(server, mode="legacy"))
                await client.call_tool("echo", {"x": 1})
            gc.collect()
            during = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return (during - before) / count


def _record_bytes(count: int = 1_000) -> float:
    """Bytes one legacy negotiation record holds (its capability map and client info included)."""
    negotiator = Negotiator(Policy())
    params = {"protocolVersion": "2025-11-25", "capabilities": CAPABILITIES, "clientInfo": CLIENT_INFO}
    gc.collect()
    tracemalloc.start(1)
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [
            negotiator.initialize(json.loads(json.dumps(params)), transport="memory") for _ in range(count)
        ]
        gc.collect()
        size = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    return size


async def _one_session(server: MCPServer) -> None:
    async with Client(server, mode="legacy") as client:
        await client.call_tool("echo", {"x": 1})


async def _traced_window(server: MCPServer, first: int, count: int) -> tuple[int, int, int]:
    """Bytes still allocated, after gc, by `count` sessions opened and closed while traced."""
    gc.collect()
    tracemalloc.start(1)
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(count):
            await _one_session(server)
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return first, first + count - 1, retained


async def measure_memory(idle: int, churn: int, window: int) -> Memory:
    idle_plain = await _idle_bytes(False, idle)
    idle_wrapped = await _idle_bytes(True, idle)
    record = _record_bytes()
    server = plain_server(True)
    points: list[tuple[int, int, int]] = []
    done = 0

    def checkpoint() -> None:
        gc.collect()
        points.append((done, sys.getallocatedblocks(), len(gc.get_objects())))

    for _ in range(100):  # warm-up, not counted
        await _one_session(server)
    first = await _traced_window(server, 1, window)
    done = window
    checkpoint()
    while done < churn - window:
        await _one_session(server)
        done += 1
        if done in (churn // 10, churn // 2):
            checkpoint()
    last = await _traced_window(server, done + 1, window)
    done += window
    checkpoint()
    return Memory(idle, idle_plain, idle_wrapped, record, points, first, last)


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def load_average() -> str:
    """The machine may be shared: the load before and after the run says how much."""
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "unknown"


def machine() -> dict[str, str]:
    cpu = platform.processor() or "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "CPU": cpu,
        "Cores": str(os.cpu_count()),
        "Load average at start (1, 5, 15 min)": load_average(),
        "OS": f"{platform.system()} {platform.release()}",
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "mcp": _version("mcp"),
        "opentelemetry-api / -sdk": f"{_version('opentelemetry-api')} / {_version('opentelemetry-sdk')}",
        "uvicorn": _version("uvicorn"),
        "mcp-negotiation": _version("mcp-negotiation"),
        "Date (UTC)": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
    }


def _verdict(ratio: float) -> str:
    return "yes" if ratio >= TARGET_RATIO else "**no**"


def _counted_section(intro: list[str], counts: Sequence[Any] | str, whose: str) -> list[str]:
    """A counted section's start: its `intro`, then why nothing was counted (`counts` a
    reason), or how each figure was taken and `whose` instructions it holds."""
    if isinstance(counts, str):
        return [*intro, "", f"Not measured: {counts}.", ""]
    runs = f"{counts[0].runs} runs of {counts[0].calls} calls" if counts else "no run"
    return [*intro, "", f"Per call: the median over {runs} (each less a run of no call), {whose}", ""]


def render_instructions(instructions: list[Instructions] | str) -> list[str]:
    """The section judging the cost targets; `instructions` says why, when not measured."""
    intro = [
        "## Instructions per call: what the library adds to a `tools/call`",
        "",
        "Counted by callgrind (`valgrind --tool=callgrind`), so the figures do not depend on the",
        "machine's load: the same `tools/call` repeated in memory, against the server with an SDK",
        "middleware that only calls the next one where the library's would be, and with the",
        "library (see Method). Targets (issue #22): a repeat is one lookup and a publish.",
    ]
    whose = "client and server together (the client's share, the same on both sides, cancels in *added*)."
    out = _counted_section(intro, instructions, whose)
    if isinstance(instructions, str):
        return out
    out += [
        "| Path | OTel SDK | empty SDK middleware | with the library | added | target | met? |",
        "|---|---|--:|--:|--:|--:|:-:|",
    ]
    for i in instructions:
        met = "yes" if i.added <= i.cost.target else "**no**"
        out.append(
            f"| {i.cost.path.name} | {'yes' if i.cost.otel else 'no'} | {i.per_call['empty']:,.0f} "
            f"| {i.per_call['library']:,.0f} | {i.added:+,.0f} | ≤ {i.cost.target:,} | {met} |"
        )
    out += [
        "",
        "Re-measure with `python benchmarks/run.py --instructions` (a few minutes); where the",
        "added instructions go, per function: `python benchmarks/run.py --profile KEY` with KEY one of",
        f"{', '.join(f'`{cost.key}`' for cost in COSTS)}.",
        "",
    ]
    return out


def render_http_instructions(counts: list[HttpInstructions] | str) -> list[str]:
    """The section counting the HTTP rows in instructions; `counts` says why, when not measured."""
    intro = [
        "## Instructions per call over HTTP: the server's process alone",
        "",
        "The HTTP paths of the overhead table, counted by callgrind in the server's process",
        "(uvicorn and the SDK's streamable HTTP app) with the client outside the count: the same",
        "`tools/call` repeated against a server with an empty SDK middleware, a second such server",
        "(*A/A*: what the method reads between two identical servers, its error), and the library's.",
        "Issue #22's targets are for calls in memory; here *share* is what the library adds, of the",
        "empty server's call (see Method).",
    ]
    out = _counted_section(intro, counts, "the server's alone.")
    if isinstance(counts, str):
        return out
    out += [
        "| Path | OTel SDK | empty SDK middleware | A/A | with the library | added | share |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for c in counts:
        out.append(
            f"| {c.cost.path.name} | {'yes' if c.cost.otel else 'no'} | {c.per_call['empty']:,.0f} "
            f"| {c.noise:+,.0f} | {c.per_call['library']:,.0f} | {c.added:+,.0f} "
            f"| {c.added / c.per_call['empty']:.2%} |"
        )
    out += [
        "",
        "Re-measure with `python benchmarks/run.py --http-instructions` (~7 minutes; with",
        "`--no-otel`, only the rows without an SDK).",
        "",
    ]
    return out


def render(
    info: dict[str, str],
    overhead: list[Overhead],
    micro: list[Micro],
    memory: Memory | None,
    command: str,
    elapsed: float,
    instructions: list[Instructions] | str | None = None,
    http_instructions: list[HttpInstructions] | str | None = None,
) -> str:
    out = [
        "# Benchmark results",
        "",
        f"Written by `{command}` in {elapsed / 60:.1f} minutes. Nothing is tuned to pass: a target",
        "that is missed says **no**. The method is in [`run.py`](run.py)'s docstring and at the end.",
        "",
        "| Machine | |",
        "|---|---|",
        *(f"| {key} | {value} |" for key, value in info.items()),
        "",
    ]
    if overhead:
        rounds = overhead[0].rounds
        out += [
            "## Overhead: `tools/call` round trips, the same server with and without the library",
            "",
            f"Target: wrapped ≥ {TARGET_RATIO} × unwrapped throughput on every path. Each of {rounds} rounds",
            "makes *calls* pairs of round trips, one to each server in a random order; calls/s are",
            f"medians over the rounds, *ratio* is the median of the {rounds} per-round",
            "ratios (wrapped / unwrapped, wall clock), *range* their minimum and maximum, *added* the median",
            "of what a call took longer wrapped (µs: what the library adds to any tool; on HTTP rows,",
            "where a call takes milliseconds, it is within their noise, negative included), and *CPU ratio*",
            "the same median computed from CPU time (less sensitive to other load): this process's for",
            "in-memory rows, the two server processes' for HTTP rows. In-memory rows are timed without",
            "the garbage collector's pauses; *collections* says how often each server alone made it run",
            "(per 1,000 calls, unwrapped / wrapped; see Method).",
            "",
            "| Path | OTel SDK | calls | unwrapped calls/s | wrapped calls/s | ratio | range | added µs"
            " | CPU ratio | collections | ≥ 0.98? |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|:-:|",
        ]
        for o in overhead:
            ratio = statistics.median(o.ratios())
            out.append(
                f"| {o.path} | {'yes' if o.otel else 'no'} | {o.calls} | {statistics.median(o.plain):,.0f} "
                f"| {statistics.median(o.wrapped):,.0f} | {ratio:.3f} | {min(o.ratios()):.2f}–"
                f"{max(o.ratios()):.2f} | {statistics.median(o.added_us()):.1f} "
                f"| {statistics.median(o.cpu_ratios()):.3f} | "
                f"{'{:.0f} / {:.0f}'.format(*o.collections) if o.collections else 'own process'} | "
                f"{'n/a' if o.reference else _verdict(ratio)} |"
            )
        out.append("")
    if instructions is not None:
        out += render_instructions(instructions)
    if http_instructions is not None:
        out += render_http_instructions(http_instructions)
    if micro:
        out += [
            "## Micro-benchmarks of the pure core",
            "",
            "timeit, per call: the best and the median of the repeats. Targets are judged on the best,",
            "as timeit advises: slower repeats measure whatever else the machine was doing.",
            "",
            "| Operation | best µs | median µs | target | met? |",
            "|---|--:|--:|---|:-:|",
        ]
        for m in micro:
            met = ("yes" if m.best_us < TARGET_CACHED_US else "**no**") if m.target else ""
            out.append(f"| {m.name} | {m.best_us:.2f} | {m.median_us:.2f} | {m.target} | {met} |")
        out.append("")
    if memory is not None:
        first, last = memory.window_first, memory.window_last
        growth_blocks = memory.churn_points[-1][1] - memory.churn_points[0][1]
        growth_objects = memory.churn_points[-1][2] - memory.churn_points[0][2]
        out += [
            "## Memory",
            "",
            f"Per idle legacy session (tracemalloc, {memory.idle_sessions} in-memory sessions held open,",
            "each after `initialize` and one `tools/call`, after gc; client and server side together):",
            "",
            "| Server | bytes per idle session |",
            "|---|--:|",
            f"| unwrapped | {memory.idle_plain:,.0f} |",
            f"| wrapped | {memory.idle_wrapped:,.0f} |",
            f"| difference | {memory.idle_wrapped - memory.idle_plain:,.0f} |",
            "",
            "The difference is within the noise of a 60 KB session. What the library itself keeps per",
            "legacy session is its negotiation record, stored in the connection's state: "
            f"**{memory.record:,.0f} bytes** (tracemalloc over 1,000 records, for a client declaring",
            "sampling, elicitation, roots and one experimental capability).",
            "",
            f"{memory.churn_points[-1][0]:,} legacy sessions opened, used once (`tools/call`) and closed,",
            "one after another, against one wrapped server. Retained memory after gc, traced by",
            "tracemalloc over two windows (tracing every session would take three times as long):",
            "",
            "| Sessions traced | bytes still allocated after they closed |",
            "|---|--:|",
            f"| {first[0]:,}–{first[1]:,} | {first[2]:,} |",
            f"| {last[0]:,}–{last[1]:,} | {last[2]:,} |",
            "",
            "And the whole Python heap at checkpoints (all sessions, after gc):",
            "",
            "| after sessions | allocated blocks | gc-tracked objects |",
            "|--:|--:|--:|",
            *(f"| {done:,} | {blocks:,} | {objects:,} |" for done, blocks, objects in memory.churn_points),
            "",
            f"Growth from {memory.churn_points[0][0]:,} to {memory.churn_points[-1][0]:,} sessions: "
            f"{growth_blocks:+,} blocks, {growth_objects:+,} objects "
            f"({growth_blocks / max(1, memory.churn_points[-1][0] - memory.churn_points[0][0]):+.3f} blocks"
            " per session).",
            "",
        ]
    out += [
        "## Method",
        "",
        "- Servers: `MCPServer` with one tool `echo(x: int) -> int`; *wrapped* is the same built with",
        "  `negotiate(server, Policy())`. UCP rows use `examples/ucp_shop.py`'s `build()` with a",
        "  `StaticResolver` (the platform profile is always served from memory) and calls carrying",
        '  `arguments.meta["ucp-agent"].profile`; its unwrapped twin is the same tool without the',
        "  library, answering the same document and doing the same work of its own (sorting the",
        "  agreed capabilities' names), so that *added* is only the library's. The *UCP-Agent header*",
        "  row's client also sends the header naming the same profile, as UCP's MCP transport does.",
        '- Client: the SDK\'s `mcp.Client`; in-memory legacy is `Client(server, mode="legacy")`',
        '  (JSON-RPC over memory streams), in-memory modern `Client(server, mode="2026-07-28")` (the',
        "  SDK's direct dispatcher), both servers and clients in this process; HTTP is uvicorn on",
        "  127.0.0.1 in a process of its own per server (`run.py --serve`, so a server does not share",
        "  the client's GIL), called from this process, stateful for legacy. HTTP rounds last",
        f"  {HTTP_ROUND_FACTOR} times longer than in-memory ones (a round trip there is ~15 times",
        "  slower), so each round still holds a few hundred calls.",
        "- With the OpenTelemetry SDK: `TracerProvider` with a `SimpleSpanProcessor` and an exporter",
        "  that discards, `MeterProvider` with an `InMemoryMetricReader` (in the server processes too,",
        "  which fail the run if theirs recorded nothing). The SDK's own spans are",
        "  recorded for both variants; the wrapped one adds what the next point describes.",
        "- The *reference* rows are controls, not the library: *A/A* puts the plain server against",
        "  itself (what the method reads when nothing differs; over HTTP, two processes serving the",
        "  same plain server: the resolution of the HTTP rows); *an empty SDK middleware* adds a",
        "  middleware that only calls the next, the floor any middleware-based library starts from.",
        "  The *option* row is the library with `Policy(trace_every_request=True)`: a full span,",
        "  event and histogram point under every request instead of a link for repeats.",
        "- What the wrapped server does per request: a modern request encodes its shape (method,",
        "  revision, envelope, transport; over HTTP also the negotiation headers a record keeps,",
        "  read in one pass over the request's header lines) with `marshal` and finds what was",
        "  published for it before in the middleware's memo; a legacy request reads the",
        "  connection's record, on every transport. The record is published in a",
        "  ContextVar. The first request with an envelope (and the first legacy call with a UCP",
        "  agreement) emits a `capability_negotiated` span, an event and its metrics; each repeat,",
        "  when an SDK records the request's span, gets a link from it to that first span, and with",
        "  a MeterProvider every request is timed (`mcp.server.operation.duration`; without one, a",
        "  read of the API's global provider). A repeated UCP call",
        "  also finds its profile URL in its arguments, looks up its scoped record per (record, URL,",
        "  and over HTTP the raw `UCP-Agent` header, checked once to name the same URL)",
        "  and asks the resolver whether that profile is still the one it serves (`fresh`, no I/O),",
        "  and publishes it narrowed to the tool's operation (learned from its `@requires_ucp` on",
        "  the first call); `@requires_ucp` then stamps a copy of the `ucp` block.",
        "- Reading the in-memory rows: an in-memory round trip takes a few hundred microseconds, so",
        "  0.98 leaves the library under ten of them per request, in CPython. Over HTTP a round trip",
        "  takes milliseconds and the same work is lost in it.",
        "- The collector: in-memory calls are timed without the cyclic garbage collector's pauses,",
        "  and the *collections* column gives, for each server alone, how often its garbage made the",
        "  collector run (per 1,000 calls, unwrapped / wrapped). Equal figures mean the library costs",
        "  the collector nothing. Timing the pauses in a shared process would charge them to whichever",
        "  call crosses the allocation threshold: on the modern path the SDK leaves ~14 cyclic objects",
        "  per request, gen-0 then runs every ~35 requests for ~250 µs, and the side that allocates a",
        "  little more at its peak crosses it almost every time (over 20,000 pairs, 133 collections in",
        "  the plain server's calls, 995 in an empty middleware's), so the *empty SDK middleware* row",
        "  read 0.970 (0.997 with gc disabled). A process per server avoids that too, but two",
        "  processes of one program differ by several percent (an A/A pair read 0.97 to 1.04 from",
        "  run to run), more than the 2 % being measured.",
        "- Instructions per call: valgrind's callgrind counts the instructions the CPU executes, so",
        "  other load on the machine does not change them. `run.py --instructions` starts this script",
        "  under `valgrind --tool=callgrind --instr-atstart=no` with `PYTHONHASHSEED=0`, one process",
        "  per path, with or without the OpenTelemetry SDK (configured as above). For its path it opens",
        "  the in-memory client of each server (the library's, and the same server with an SDK",
        "  middleware that only calls the next, placed where the library's goes), makes the same",
        "  warm-up calls uninstrumented, collects, freezes and disables the garbage collector, then",
        "  counts runs of calls and runs of none, each apart (callgrind's client requests, from",
        "  `callgrind_marks.c`, built with the C compiler). Per call is the median over the runs of",
        "  (a run's count − a run of none) / its calls, so start-up, warm-up and the loop's set-up",
        "  do not count. Client and server share the process, so the counts include the client;",
        "  its share is the same for both servers and cancels in *added*. What goes by the wall",
        "  clock still moves a run's count now and then (for one, the negotiator re-reads the date",
        "  every 60 seconds and the memo of repeats expires with it: under callgrind, where a call",
        "  takes ~50 times longer, that lands in the counted runs far more often than in a real",
        "  server). The median leaves such runs out, and two runs of the command agree within about",
        "  1,000 instructions per call; where a process lays its heap out still moves a path's",
        "  count by a few thousand (see the section above), so a target is judged by its steps.",
        "- Instructions per call over HTTP: `run.py --http-instructions` starts three uvicorn",
        "  servers of the path under callgrind, each in a process of its own (an empty SDK",
        "  middleware's, a second such, and the library's), and drives them at once from this",
        "  process, outside the count. Each server marks its own runs, on its event loop once that",
        "  is idle (0.3 s after the client's mark: the SDK ends a request's task after writing its",
        "  answer); uvicorn's 0.1 s tick is off there, so that nothing the wall clock paces lands in",
        "  a run. Otherwise as in memory: the same warm-up, the collector frozen and stopped, the",
        "  median over the runs. How the event loop meets each request still moves a run by about",
        "  1 % of a call; the A/A column shows what is left of that in the medians.",
        "- INFO logging is disabled (for both servers alike); warnings and errors still print.",
        "- The machine may be shared: the load average is printed above, and the *range* column shows",
        "  how much one round can differ from another.",
        "",
    ]
    return "\n".join(out)


async def main_async(args: argparse.Namespace) -> str:
    started = time.perf_counter()
    info = machine()
    overhead: list[Overhead] = []
    micro: list[Micro] = []
    memory: Memory | None = None
    parts = set(args.only or PARTS)
    instructions: list[Instructions] | str | None = None
    http_instructions: list[HttpInstructions] | str | None = None
    if "instructions" in parts:  # first: its callgrind processes would slow the timed parts
        instructions = callgrind_missing()
        if instructions is None:
            print(
                f"instructions (callgrind, {args.runs} runs of {args.calls} calls per server) ...",
                flush=True,
            )
            instructions = measure_instructions(
                [c.key for c in COSTS], args.calls, args.runs, args.warmup, args.collector
            )
            for i in instructions:
                print(
                    f"  {i.cost.key:16s} empty {i.per_call['empty']:,.0f}  added {i.added:+,.0f}", flush=True
                )
        else:
            print(f"instructions: not measured, {instructions}", flush=True)
    if "http-instructions" in parts:
        http_instructions = callgrind_missing()
        if http_instructions is None:
            http_instructions = []
            for cost in HTTP_COSTS:
                if args.path and not any(part in cost.path.name for part in args.path):
                    continue
                if cost.otel and args.no_otel:
                    continue
                sdk = "with" if cost.otel else "no"
                runs = f"{args.http_runs} runs of {args.http_calls}"
                print(f"instructions over HTTP, {cost.path.name}, {sdk} OTel SDK ({runs}) ...")
                count = await count_http(cost, args.http_calls, args.http_runs, args.warmup)
                http_instructions.append(count)
                empty = count.per_call["empty"]
                added = count.added
                print(f"  {cost.key:21s} empty {empty:,.0f}  A/A {count.noise:+,.0f}  added {added:+,.0f}")
        else:
            print(f"instructions over HTTP: not measured, {http_instructions}", flush=True)
    if "micro" in parts:
        print("micro-benchmarks ...", flush=True)
        micro = micro_benchmarks(repeat=args.repeat, min_seconds=args.min_seconds)
        for m in micro:
            print(f"  {m.name}: best {m.best_us:.2f} µs, median {m.median_us:.2f} µs", flush=True)
    if "memory" in parts:
        print("memory ...", flush=True)
        memory = await measure_memory(args.idle_sessions, args.sessions, args.window)
        print(f"  idle: {memory.idle_plain:,.0f} / {memory.idle_wrapped:,.0f} bytes", flush=True)
        print(f"  windows: {memory.window_first}, {memory.window_last}", flush=True)
    if "overhead" in parts:
        discard: Any = None
        for otel in (False,) if args.no_otel else (False, True):
            for path in PATHS:
                if args.path and not any(part in path.name for part in args.path):
                    continue
                if otel not in path.otel:
                    continue
                if otel and discard is None:  # the HTTP server processes configure their own
                    discard = configure_otel()
                # An HTTP round trip is ~15x an in-memory one: longer rounds keep the count per round up.
                seconds = args.round_seconds * (HTTP_ROUND_FACTOR if path.transport == "http" else 1)
                o = await measure_overhead(path, otel, args.rounds, seconds, args.alone)
                overhead.append(o)
                print(
                    f"{path.name:34s} otel={otel!s:5s} ratio {statistics.median(o.ratios()):.3f} "
                    f"(cpu {statistics.median(o.cpu_ratios()):.3f}) "
                    f"plain {statistics.median(o.plain):,.0f}/s "
                    f"wrapped {statistics.median(o.wrapped):,.0f}/s",
                    flush=True,
                )
        if discard is not None and discard.exported == 0:
            raise RuntimeError("the OpenTelemetry SDK recorded nothing: the OTel rows would be meaningless")
    info["Load average at end"] = load_average()
    command = "python benchmarks/run.py" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else "")
    elapsed = time.perf_counter() - started
    return render(info, overhead, micro, memory, command, elapsed, instructions, http_instructions)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: few rounds, small counts")
    parser.add_argument("--only", action="append", choices=PARTS)
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="only the instruction count (callgrind): --only instructions",
    )
    parser.add_argument(
        "--http-instructions",
        action="store_true",
        help="only the instruction count of the HTTP servers (callgrind): --only http-instructions",
    )
    parser.add_argument(
        "--profile", choices=[cost.key for cost in COSTS], help="where one path's added instructions go"
    )
    parser.add_argument("--steps", choices=sorted(STEPS), help="each step of one path's repeat, alone")
    parser.add_argument("--output", type=Path, help=f"where to write the table (default {RESULTS.name})")
    parser.add_argument("--path", action="append", help="only overhead paths whose name contains this")
    parser.add_argument(
        "--no-otel", action="store_true", help="skip the rows with the OTel SDK (overhead, HTTP count)"
    )
    parser.add_argument("--rounds", type=int, default=11, help="rounds of alternating calls per path")
    parser.add_argument("--round-seconds", type=float, default=0.6, help="approximate length of one round")
    parser.add_argument("--alone", type=int, default=1_000, help="calls per server to count gc runs")
    parser.add_argument("--repeat", type=int, default=15, help="timeit repeats")
    parser.add_argument("--min-seconds", type=float, default=0.05, help="timeit: minimum time per repeat")
    parser.add_argument("--sessions", type=int, default=10_000, help="legacy sessions opened and closed")
    parser.add_argument("--window", type=int, default=1_000, help="sessions per traced window")
    parser.add_argument("--idle-sessions", type=int, default=200, help="idle sessions held open at once")
    parser.add_argument("--calls", type=int, default=10, help="instruction count: calls per run")
    parser.add_argument("--runs", type=int, default=40, help="instruction count: runs per server")
    parser.add_argument("--warmup", type=int, default=300, help="instruction count: calls before counting")
    parser.add_argument("--http-calls", type=int, default=20, help="instruction count, HTTP: calls per run")
    parser.add_argument("--http-runs", type=int, default=20, help="instruction count, HTTP: runs per server")
    parser.add_argument(
        "--collector", action="store_true", help="instruction count: keep the cyclic gc running"
    )
    parser.add_argument("--callgrind-child", help=argparse.SUPPRESS)
    parser.add_argument("--attribute", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--steps-child", help=argparse.SUPPRESS)
    parser.add_argument("--serve", choices=sorted(SERVERS), help=argparse.SUPPRESS)
    parser.add_argument("--wrapped", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--empty-middleware", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--counted", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--otel", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve_main(args.serve, args.wrapped, args.otel, args.empty_middleware, args.counted)
        return
    if args.quick:
        args.rounds, args.round_seconds, args.repeat, args.min_seconds = 3, 0.05, 3, 0.02
        args.alone = 100
        args.sessions, args.window, args.idle_sessions = 300, 100, 20
        args.calls, args.runs, args.warmup = 5, 3, 30
        args.http_calls, args.http_runs = 3, 3
    if args.instructions:
        args.only = [*(args.only or ()), "instructions"]
    if args.http_instructions:
        args.only = [*(args.only or ()), "http-instructions"]
    # INFO logging (the SDK's per-request lines, the HTTP client's) is off for both servers
    # alike: printing it would dilute the ratio, not measure the library.
    logging.disable(logging.INFO)
    if args.callgrind_child:
        keys = args.callgrind_child.split(",")
        seen = asyncio.run(
            count_child(keys, args.calls, args.runs, args.warmup, args.collector, args.attribute is not None)
        )
        if args.attribute is not None:
            args.attribute.write_text(json.dumps(seen))
        return
    if args.steps_child:
        asyncio.run(steps_child(args.steps_child))
        return
    if args.steps:
        print(steps(args.steps))
        return
    if args.profile:
        print(profile(args.profile, args.calls, args.runs, args.warmup, args.collector))
        return
    text = asyncio.run(main_async(args))
    # A partial run (--only, --instructions) would leave RESULTS.md without the other parts.
    output = args.output or (None if args.quick or args.only else RESULTS)
    if output is not None:
        Path(output).write_text(text)
        print(f"wrote {output}")
    else:
        print(text)


if __name__ == "__main__":
    main()
