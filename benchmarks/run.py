"""Benchmarks: what mcp-negotiation costs a server, beside the same server without it, in one run.

`python3 dev.py nox -s bench [-- --quick | --only PART | --check]` (README.md). The transports:
throughput and the server's CPU per call, wrapped against unwrapped beside an A/A pair (reported,
never failed: the wall clock is the machine's); the instruction guard (`instructions.py`,
deterministic: `--check` judges it); the probe's wall time. RESULTS.md has each with its method.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

import instructions
from mcp_negotiation.core import revisions
from servers import CALLS, MODERN, UCP_HEADER

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
PARTS = ("instructions", "transports", "probe")
FLOOR = 0.99
"""The transports' guard: the wrapped server's throughput at least this share of the unwrapped one's."""
PROBE_GOAL = 8.0 / 3
"""Issue #35: the bundled example's five-revision probe in about a third of 8 s."""


@dataclass(frozen=True)
class Transport:
    name: str
    serve: str  # servers.py's first argument: stdio, http (stateful) or stateless
    kind: str  # echo, or ucp: the example shop
    mode: str  # the SDK client's: legacy, or the modern revision


TRANSPORTS = (
    Transport("stdio · legacy", "stdio", "echo", "legacy"),
    Transport("HTTP stateful · legacy", "http", "echo", "legacy"),
    Transport("HTTP stateless · legacy", "stateless", "echo", "legacy"),
    Transport(f"HTTP · {MODERN}", "http", "echo", MODERN),
    Transport(f"UCP · HTTP · {MODERN}, UCP-Agent header", "http", "ucp", MODERN),
)
SIDES = {"unwrapped": "empty", "A/A twin": "empty", "wrapped": "library"}
"""A row's three servers and the variant each runs: the unwrapped one twice (A/A), the library's."""
CLIENTS = (1, 32)


@dataclass
class Row:
    transport: Transport
    clients: int
    calls: int  # per server and round, all clients together
    walls: dict[str, list[float]] = field(default_factory=lambda: {side: [] for side in SIDES})
    cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys(SIDES, 0.0))

    def ratios(self, side: str) -> list[float]:
        """Per round: `side`'s throughput over the unwrapped server's."""
        return [base / wall for base, wall in zip(self.walls["unwrapped"], self.walls[side], strict=True)]

    def cpu_us(self, side: str) -> float:
        """The server's CPU time per call, µs, over every round."""
        return 1e6 * self.cpu[side] / (self.calls * len(self.walls[side]))


def process_cpu(pid: int) -> float:
    """CPU seconds the threads of process `pid` have run, from the scheduler's nanosecond
    counts (`/proc/PID/task/*/schedstat`): `/proc/PID/stat` counts in clock ticks, 10 ms, as
    coarse as a whole burst of calls."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def spawn(stack: AsyncExitStack, transport: Transport, variant: str) -> subprocess.Popen[str]:
    """An HTTP server in a process of its own, ended with the stack; it prints its port first."""
    command = [sys.executable, str(HERE / "servers.py"), transport.serve, transport.kind, variant]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    stack.callback(child.wait, 30)
    stack.callback(child.terminate)
    return child


async def start(stack: AsyncExitStack, transport: Transport) -> dict[str, tuple[int, str | Client]]:
    """A row's servers, by side: (pid, URL), or over stdio (pid, the one client it has)."""
    if transport.serve == "stdio":
        servers: dict[str, tuple[int, str | Client]] = {}
        for side, variant in SIDES.items():
            command = [str(HERE / "servers.py"), "stdio", transport.kind, variant]
            client = Client(StdioServerParameters(command=sys.executable, args=command), mode=transport.mode)
            await stack.enter_async_context(client)
            pid = (await client.call_tool("pid", {})).structured_content or {}
            servers[side] = (int(pid["result"]), client)
        return servers
    children = {side: spawn(stack, transport, variant) for side, variant in SIDES.items()}
    lines = {side: await asyncio.to_thread(child.stdout.readline) for side, child in children.items()}  # type: ignore[union-attr]
    if not all(line.startswith("port ") for line in lines.values()):
        raise RuntimeError(f"{transport.name}: a server did not start")
    return {side: (children[side].pid, f"http://127.0.0.1:{lines[side].split()[1]}/mcp") for side in SIDES}


async def connect(stack: AsyncExitStack, transport: Transport, server: str | Client, n: int) -> list[Client]:
    """`n` clients of `server` (over stdio, its one client, shared by `n` callers)."""
    if isinstance(server, Client):
        return [server] * n
    clients = []
    for _ in range(n):
        target: object = server
        if transport.kind == "ucp":  # a platform sends its UCP-Agent header beside the arguments
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=UCP_HEADER, timeout=60))
            target = streamable_http_client(server, http_client=http)
        clients.append(await stack.enter_async_context(Client(target, mode=transport.mode)))  # type: ignore[arg-type]
    return clients


async def burst(transport: Transport, clients: list[Client], calls: int) -> None:
    """`calls` round trips from each client, all clients at once."""
    tool, arguments = CALLS[transport.kind]

    async def one(client: Client) -> None:
        for _ in range(calls):
            if (await client.call_tool(tool, arguments)).is_error:
                raise RuntimeError(f"{transport.name}: the tool failed")

    await asyncio.gather(*(one(client) for client in clients))


async def measure_transport(transport: Transport, rounds: int, seconds: float) -> list[Row]:
    """Each client count against the same three servers: rounds of one burst to each server, in
    a random order per round, so that what else the machine does slows the three alike."""
    rows = []
    async with AsyncExitStack() as stack:
        servers = await start(stack, transport)
        for n in CLIENTS:
            async with AsyncExitStack() as sessions:
                clients = {side: await connect(sessions, transport, servers[side][1], n) for side in SIDES}
                warm = max(3, 20 // n)
                for side in SIDES:  # imports, caches, each client's first calls; the last one timed
                    began = time.perf_counter()
                    await burst(transport, clients[side], warm)
                each = (time.perf_counter() - began) / warm  # one call from every client
                row = Row(transport, n, n * max(5, int(seconds / each)))
                order = random.Random(f"{transport.name} {n}")
                for _ in range(rounds):
                    for side in order.sample(list(SIDES), len(SIDES)):
                        pid = servers[side][0]
                        cpu, began = process_cpu(pid), time.perf_counter()
                        await burst(transport, clients[side], row.calls // n)
                        row.walls[side].append(time.perf_counter() - began)
                        row.cpu[side] += process_cpu(pid) - cpu
                rows.append(row)
    return rows


def measure_probe(runs: int) -> list[float]:
    """Wall seconds of `mcp-negotiation probe` (the bundled example at every revision), whole."""
    program = str(Path(sys.executable).with_name("mcp-negotiation"))
    walls = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run([program, "probe"], capture_output=True, check=True, timeout=120)
        walls.append(time.perf_counter() - began)
    return walls


def machine() -> list[str]:
    info = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "?")
    valgrind = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, check=False)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE)
    versions = " · ".join(metadata.version(name) for name in ("mcp", "opentelemetry-sdk", "uvicorn"))
    return [
        "| Machine | |",
        "|---|---|",
        f"| CPU | {cpu}, {os.cpu_count()} cores |",
        f"| Load average at start (1, 5, 15 min) | {' '.join(f'{x:.2f}' for x in os.getloadavg())} |",
        f"| OS | {platform.system()} {platform.release()} |",
        f"| Python | {platform.python_implementation()} {platform.python_version()} |",
        f"| mcp · opentelemetry-sdk · uvicorn | {versions} |",
        f"| valgrind | {valgrind.stdout.strip() or 'not installed'} |",
        f"| mcp-negotiation | {metadata.version('mcp-negotiation')} at {commit.stdout.strip() or '?'} |",
        f"| Date (UTC) | {datetime.now(UTC):%Y-%m-%d %H:%M} |",
        f"| Day the library reads (`revisions.calendar_day`) | {revisions.calendar_day()} |",
    ]


def span(values: Sequence[float], form: str = "{:.3f}") -> str:
    """A median with its lowest and highest."""
    low, mid, high = (form.format(x) for x in (min(values), statistics.median(values), max(values)))
    return f"{mid} ({low}–{high})"


def render_instructions(
    found: dict[instructions.Guard, dict[str, float]], args: argparse.Namespace, fixed: bool
) -> list[str]:
    rows = []
    for guard, per_call in found.items():
        added = per_call["library"] - per_call["empty"]
        ceiling = "reported" if guard.ceiling is None else f"≤ {guard.ceiling:,}"
        within = "" if guard.ceiling is None else "yes" if added <= guard.ceiling else "**no**"
        rows.append(
            f"| {guard.name} | {per_call['empty']:,.0f} | {per_call['library']:,.0f} | {added:+,.0f}"
            f" | {ceiling} | {within} |"
        )
    addresses = "at fixed addresses" if fixed else "at random addresses (no `setarch -R`)"
    return [
        "## The instruction guard: what the library adds to an in-memory `tools/call`",
        "",
        "Counted by callgrind, so the machine's load does not change it; `--check` fails when a path"
        " passes its ceiling. The SDK's in-memory client and the server in one process, the library's"
        " against the same with an empty SDK middleware (the client's part cancels in *added*); each"
        f" path and server forked apart, {args.warmup} calls uninstrumented, then the median over"
        f" {args.runs} runs of {args.calls} calls, less a run of none; then the median over the heap"
        f" layouts of PYTHONHASHSEED 0 to {args.layouts - 1} (`instructions.py` says why), each run"
        f" {addresses}. At fixed addresses two runs of the same command read within 620 per call of"
        " each other; the same src with the environment 1,000 or 3,000 bytes larger (which moves the"
        " stack) read legacy +25,682 and +28,346 against +26,774, and run from another directory"
        " +17,910, so a figure a few thousand either side of its ceiling is no verdict on a change."
        " *OTel SDK*: a `TracerProvider`; *with metrics*: a `MeterProvider` too, whose cost is the"
        " metrics SDK's own recording of every request (the conventions' operation histogram),"
        " opted into by configuring it: reported, not judged.",
        "",
        "| path | empty SDK middleware, per call | library, per call | added | ceiling | within |",
        "|---|--:|--:|--:|--:|:-:|",
        *rows,
    ]


def render_transports(rows: list[Row], args: argparse.Namespace) -> list[str]:
    lines = [
        "## Transports: throughput and server CPU, wrapped against unwrapped",
        "",
        "`tools/call` round trips from the SDK's `Client` in this process to three servers, each in a"
        " process of its own (stdio: started by the SDK's client; HTTP: uvicorn on 127.0.0.1): the"
        " unwrapped server (an SDK middleware that only calls the next) twice, A/A, and the library's."
        f" {args.rounds} rounds, each one burst of about {args.seconds} s to each server in a random"
        " order. *Wrapped* and *A/A*: the median (lowest–highest) over the rounds of that server's"
        " throughput over the unwrapped one's. Over stdio, 32 clients are 32 callers sharing the"
        " server's one connection. Server CPU per call is read from outside (the scheduler's count of"
        " the server's threads, `/proc/PID/task/*/schedstat`, over all"
        " rounds). Reported, not failed: the wall clock is the machine's; read each ratio beside its A/A.",
        "",
        f"| path | clients | wrapped / unwrapped | A/A | ≥ {FLOOR} | server CPU µs/call: unwrapped"
        " | A/A twin | wrapped | added |",
        "|---|--:|--:|--:|:-:|--:|--:|--:|--:|",
    ]
    for row in rows:
        cpu = {side: row.cpu_us(side) for side in SIDES}
        floor = "yes" if statistics.median(row.ratios("wrapped")) >= FLOOR else "no"
        lines.append(
            f"| {row.transport.name} | {row.clients} | {span(row.ratios('wrapped'))}"
            f" | {span(row.ratios('A/A twin'))} | {floor} | {cpu['unwrapped']:,.0f} | {cpu['A/A twin']:,.0f}"
            f" | {cpu['wrapped']:,.0f} | {cpu['wrapped'] - cpu['unwrapped']:+,.0f} |"
        )
    return lines


def render_probe(walls: list[float]) -> list[str]:
    return [
        "## Probe: `mcp-negotiation probe`, the bundled example at every revision",
        "",
        "The whole command, from start to exit, run one after another (wall seconds).",
        "",
        "| runs | median (lowest–highest) | goal (issue #35) |",
        "|--:|--:|--:|",
        f"| {len(walls)} | {span(walls, '{:.2f} s')} | ≈ {PROBE_GOAL:.1f} s |",
    ]


def arguments() -> argparse.Namespace:
    form = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=form)
    parser.add_argument("--quick", action="store_true", help="a smoke run, small counts; writes nothing")
    parser.add_argument("--only", action="append", choices=PARTS, help="run this part (repeatable); prints")
    parser.add_argument("--check", action="store_true", help="exit 1 if a count passes its ceiling")
    quick = "--quick" in sys.argv
    parser.add_argument("--rounds", type=int, default=2 if quick else 15, help="transports: rounds")
    parser.add_argument("--seconds", type=float, default=0.02 if quick else 0.3, help="transports: a burst")
    parser.add_argument("--runs", type=int, default=2 if quick else 5, help="instructions: runs per child")
    parser.add_argument("--calls", type=int, default=2 if quick else 10, help="instructions: calls per run")
    parser.add_argument("--warmup", type=int, default=20 if quick else 100, help="instructions: calls first")
    parser.add_argument("--layouts", type=int, default=1 if quick else 3, help="instructions: hash seeds")
    parser.add_argument("--probes", type=int, default=1 if quick else 5, help="probe: runs")
    return parser.parse_args()


def main() -> int:
    args = arguments()
    parts = args.only or PARTS
    began = time.perf_counter()
    out = machine()
    failed = False
    if "instructions" in parts:
        reason = instructions.missing()
        if reason is None:
            prefix = instructions.fixed_addresses()
            found = instructions.measure(args.runs, args.calls, args.warmup, args.layouts, prefix)
            out += ["", *render_instructions(found, args, bool(prefix))]
            failed = any(
                guard.ceiling is not None and c["library"] - c["empty"] > guard.ceiling
                for guard, c in found.items()
            )
        else:
            out += ["", f"The instruction guard was not counted: {reason}."]
            failed = True
    if "transports" in parts:
        measured = (asyncio.run(measure_transport(t, args.rounds, args.seconds)) for t in TRANSPORTS)
        rows = [row for transport in measured for row in transport]
        out += ["", *render_transports(rows, args)]
    if "probe" in parts:
        out += ["", *render_probe(measure_probe(args.probes))]
    minutes = (time.perf_counter() - began) / 60
    text = "\n".join([
        "# Benchmark results",
        "",
        f"Generated by `python3 dev.py nox -s bench` (`benchmarks/run.py`) in {minutes:.1f} minutes;"
        " each full run writes it anew. Not edited by hand.",
        "",
        *out,
        "",
    ])  # fmt: skip
    print(text)
    if not args.quick and args.only is None:
        RESULTS.write_text(text, encoding="utf-8")
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
