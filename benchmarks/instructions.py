"""The instruction guard: what the library adds to an in-memory `tools/call`, counted by callgrind.

A process under `valgrind --tool=callgrind --instr-atstart=no` imports everything
uninstrumented, then forks a child per path and variant (`library`, or `empty`: the SDK
middleware that only calls the next one), each from the same state. A child makes its server
and the SDK's in-memory `Client`, makes `warmup` calls, freezes and stops the garbage collector,
then counts IDLE runs of no call and `runs` runs of `calls` calls, each between a zero and a
dump of callgrind's counters. Per call: the median over the runs of (a run - the median run of
none) / calls, so start-up, warm-up and the loop's own turns do not count, nor a run the clock
disturbs (the library re-reads the date every minute). The client's part cancels in *added*.

Layouts: CPython's type-attribute cache is indexed by version tags and the addresses of names,
so which lookups collide in it (and miss) depends on where things lie: in one layout a count
moves by a few thousand per call when unrelated code changes. So the process runs once per
layout, with PYTHONHASHSEED 0, 1, ... (each seed lays dicts, and so the heap, out its own way,
repeatably), and a variant's figure is the median over the layouts. With address randomisation
off (`setarch -R`, where the kernel allows it), a run lays itself out as the last did, so two
runs of the same code read alike.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import mmap
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mcp import Client

from servers import CALLS, MODERN, build


@dataclass(frozen=True)
class Guard:
    """A path counted, and the most the library may add to it per call (issue #36); None for
    a path reported and not judged: with a `MeterProvider` too, every request is also recorded
    in the conventions' operation histogram, which is the metrics SDK's cost, opted into."""

    name: str
    kind: str
    mode: str
    otel: str
    """"" (no SDK), "traces" (a `TracerProvider`), "metrics" (and a `MeterProvider`)."""
    ceiling: int | None


GUARDS = (
    Guard("legacy", "echo", "legacy", "", 20_000),
    Guard("modern", "echo", MODERN, "", 25_000),
    Guard("modern, OTel SDK", "echo", MODERN, "traces", 45_000),
    Guard("cached UCP · legacy", "ucp", "legacy", "", 45_000),
    Guard("cached UCP · modern", "ucp", MODERN, "", 45_000),
    Guard("cached UCP · modern, OTel SDK", "ucp", MODERN, "traces", 65_000),
    Guard("modern, OTel SDK with metrics", "echo", MODERN, "metrics", None),
    Guard("legacy, OTel SDK with metrics", "echo", "legacy", "metrics", None),
)
VARIANTS = ("empty", "library")
JOBS = [(guard, variant) for guard in GUARDS for variant in VARIANTS]
"""What a process counts, a child each."""
IDLE = 3
"""Runs of no call per child: what a run costs besides its calls."""

_BASE = (ord("C") << 24) | (ord("T") << 16)
ZERO, DUMP_AT, START = _BASE + 1, _BASE + 3, _BASE + 4
"""Callgrind's client requests (valgrind/callgrind.h), numbered from the tool's base."""
_REQUEST = bytes.fromhex(
    "4889f8"  # mov rax, rdi: the address of the request's six words, where valgrind reads it
    "31d2"  # xor edx, edx: the answer outside valgrind (0)
    "48c1c70348c1c70d48c1c73d48c1c733"  # rol rdi by 3, 13, 61, 51 (128 in all: rdi unchanged)
    "4887db"  # xchg rbx, rbx: after that preamble, valgrind's "client request"; a no-op otherwise
    "4889d0c3"  # mov rax, rdx; ret
)
"""valgrind.h's VALGRIND_DO_CLIENT_REQUEST for amd64 as a C function of the words' address, called
through ctypes: Python cannot issue a client request, and a C helper would need a compiler."""


def configure_otel(metrics_too: bool) -> None:
    """A real OpenTelemetry SDK: every span recorded and handed to an exporter that drops it,
    and with `metrics_too`, a `MeterProvider` whose reader keeps every point in memory."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class Discard(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Discard()))
    trace.set_tracer_provider(provider)
    if metrics_too:
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


def missing() -> str | None:
    """Why the guard cannot be counted here, or None."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed"
    if platform.machine() not in ("x86_64", "AMD64"):
        return f"the client request is written for x86-64, not {platform.machine()}"
    return None


def client_request() -> Callable[..., int]:
    """`request(code, argument)`: one callgrind client request."""
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(_REQUEST)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    function = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t))(address)

    def request(code: int, argument: int = 0) -> int:
        return int(function((ctypes.c_size_t * 6)(code, argument, 0, 0, 0, 0)))

    request.page = page  # type: ignore[attr-defined]  # kept alive with the function
    return request


async def child(job: int, runs: int, calls: int, warmup: int) -> None:
    """The counted runs of one path and variant (`JOBS[job]`), each dumped as `JOB CALLS INDEX`."""
    guard, variant = JOBS[job]
    random.seed(0)  # OpenTelemetry's span and trace ids: the same in every run
    request = client_request()
    if guard.otel:
        configure_otel(guard.otel == "metrics")
    tool, arguments = CALLS[guard.kind]
    async with Client(build(guard.kind, variant), mode=guard.mode) as client:

        async def call(count: int) -> None:
            for _ in range(count):
                if (await client.call_tool(tool, arguments)).is_error:
                    raise RuntimeError(f"{guard.name}: the {variant} server's tool failed")

        await call(warmup)
        gc.collect()
        gc.freeze()
        gc.disable()
        request(START)
        for index, count in enumerate((0,) * IDLE + (calls,) * runs):
            label = ctypes.create_string_buffer(f"{job} {count} {index}".encode())
            request(ZERO)
            await call(count)
            request(DUMP_AT, ctypes.addressof(label))


def fork(job: int, runs: int, calls: int, warmup: int) -> int:
    """A child counting `JOBS[job]`, from this process's state: its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            asyncio.run(child(job, runs, calls, warmup))
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    return pid


def fork_children(runs: int, calls: int, warmup: int, at_once: int) -> None:
    """Under callgrind: a child per job, `at_once` at a time."""
    failed = False
    for first in range(0, len(JOBS), at_once):
        children = [fork(job, runs, calls, warmup) for job in range(first, min(first + at_once, len(JOBS)))]
        failed |= any(os.waitpid(pid, 0)[1] != 0 for pid in children)
    sys.exit(1 if failed else 0)


def fixed_addresses() -> list[str]:
    """The prefix that runs a command with address randomisation off (`setarch -R`), or none
    where the machine has no `setarch` or forbids it."""
    setarch = shutil.which("setarch")
    if setarch is None:
        return []
    prefix = [setarch, platform.machine(), "-R"]
    tried = subprocess.run([*prefix, sys.executable, "-c", ""], capture_output=True, check=False)
    return prefix if tried.returncode == 0 else []


def measure(
    runs: int, calls: int, warmup: int, layouts: int, prefix: Sequence[str]
) -> dict[Guard, dict[str, float]]:
    """Every guard path's instructions per call, by variant (see the module's docstring), each
    process started under `prefix` (`fixed_addresses`)."""
    at_once = max(1, (os.cpu_count() or 1) // layouts)
    with tempfile.TemporaryDirectory(prefix="callgrind-") as folder:
        processes = []
        for seed in range(layouts):
            command = [*prefix, "valgrind", "--tool=callgrind", "--instr-atstart=no"]
            command += [f"--callgrind-out-file={folder}/{seed}.%p", sys.executable, __file__]
            command += [str(runs), str(calls), str(warmup), str(at_once)]
            env = {**os.environ, "PYTHONHASHSEED": str(seed)}
            with Path(folder, f"{seed}.log").open("wb") as log:  # valgrind's and Python's
                processes.append(subprocess.Popen(command, env=env, stdout=log, stderr=log))
        for seed, process in enumerate(processes):
            if process.wait() != 0:
                text = Path(folder, f"{seed}.log").read_text(errors="replace")
                raise RuntimeError(f"the callgrind run failed:\n{text[-3000:]}")
        found: dict[Guard, dict[str, list[float]]] = {}
        for seed in range(layouts):
            dumps = [_dumped(dump) for dump in Path(folder).glob(f"{seed}.*.*")]
            for job, (guard, variant) in enumerate(JOBS):
                counted = [(count, total) for at, count, total in dumps if at == job]
                idle = statistics.median(total for count, total in counted if count == 0)
                per_call = statistics.median((total - idle) / count for count, total in counted if count)
                found.setdefault(guard, {}).setdefault(variant, []).append(per_call)
    return {guard: {v: statistics.median(fs) for v, fs in by.items()} for guard, by in found.items()}


def _dumped(dump: Path) -> tuple[int, int, int]:
    """(job, calls, instructions) of one dump: its label, and its summary."""
    text = dump.read_text(errors="replace")
    label = re.search(r"^desc: Trigger: Client Request: (\d+) (\d+)", text, re.MULTILINE)
    total = re.search(r"^summary: (\d+)", text, re.MULTILINE)
    if label is None or total is None:
        raise RuntimeError(f"{dump.name} is not a labelled dump")
    return int(label[1]), int(label[2]), int(total[1])


if __name__ == "__main__":
    fork_children(*map(int, sys.argv[1:]))
