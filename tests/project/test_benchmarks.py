"""The benchmark command still runs and writes every table (figures are not judged here).

Speed is measured by `python benchmarks/run.py`, never asserted by a test; this only keeps
the command from rotting: a smoke run (`--quick`) must produce every row it promises.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import run  # noqa: E402


def _python(*arguments: str, timeout: int = 600) -> str:
    """What `python *arguments` printed, run from the repository (it must succeed)."""
    done = subprocess.run(
        [sys.executable, *arguments], capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _bench(out: Path, *options: str) -> str:
    """What `run.py *options` wrote to `out` (it must succeed)."""
    _python(str(ROOT / "benchmarks" / "run.py"), *options, "--output", str(out))
    return out.read_text(encoding="utf-8")


def test_a_quick_run_writes_every_table(tmp_path: Path) -> None:
    text = _bench(tmp_path / "RESULTS.md", "--quick")
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    for path in run.PATHS:
        for otel in path.otel:
            wanted = f"| {path.name} | {'yes' if otel else 'no'} |"
            assert any(row.startswith(wanted) for row in rows), wanted
    for section in ("## Overhead", "## Micro-benchmarks of the pure core", "## Memory", "## Method"):
        assert section in text
    assert "modern `Negotiator.request`, cached" in text
    assert "| mcp |" in text  # the machine and versions table


def test_the_instruction_count_runs_and_fills_its_table(tmp_path: Path) -> None:
    """`run.py --instructions` (callgrind) counts every path, both servers, and judges each target."""
    missing = run.callgrind_missing()
    if missing is not None:
        pytest.skip(f"the instruction count needs valgrind and a C compiler: {missing}")
    text = _bench(tmp_path / "instructions.md", "--instructions", "--quick")
    assert "## Instructions per call" in text
    assert "## Overhead" not in text  # only the count was asked for
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| ") and "≤" in line]
    assert len(rows) == len(run.COSTS)
    for cost, row in zip(run.COSTS, rows, strict=True):
        assert row[0] == f"| {cost.path.name}"
        assert row[1] == ("yes" if cost.otel else "no")
        empty, library = (int(cell.replace(",", "")) for cell in row[2:4])
        # A tools/call in memory is a million instructions or so; the library adds something to it.
        assert 200_000 < empty < 20_000_000, row
        assert library > empty, row


def test_the_http_servers_are_counted_alone(tmp_path: Path) -> None:
    """`run.py --http-instructions` counts each HTTP server in a process of its own under
    callgrind, marked by the server itself, the client outside the count."""
    missing = run.callgrind_missing()
    if missing is not None:
        pytest.skip(f"the instruction count needs valgrind and a C compiler: {missing}")
    text = _bench(tmp_path / "http.md", "--http-instructions", "--quick", "--path", "HTTP · legacy")
    assert "## Instructions per call over HTTP" in text
    assert "## Instructions per call: what the library adds" not in text  # only HTTP was asked for
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| HTTP")]
    assert [row[:2] for row in rows] == [["| HTTP · legacy stateful", sdk] for sdk in ("no", "yes")]
    empties = []
    for row in rows:
        empty, again, library, added = (int(row[i].replace(",", "")) for i in (2, 3, 4, 5))
        # The server's part of a round trip over HTTP is millions of instructions. Two servers,
        # empty or not, differ by a few per cent at most (a smoke run's few calls are noisy: the
        # sign of what the library adds is the full run's to tell).
        assert 1_000_000 < empty < 50_000_000, rows
        assert abs(again) < empty // 20, rows
        assert abs(library - empty) < empty // 20, rows
        assert abs(added - (library - empty)) <= 1, rows  # each figure rounded on its own
        empties.append(empty)
    assert empties[1] > empties[0] * 1.02, rows  # the second row's servers record spans (~3.7 % more)


ATTRIBUTED_CALL = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
import run
from mcp import Client

class Marks:  # callgrind's client requests, which only valgrind answers
    def dump_stats_at(self, label):
        pass

async def main(key):
    cost = next(cost for cost in run.COSTS if cost.key == key)
    server = run._server(cost, "library")
    attribution = run.Attribution(Marks())
    attribution.install()
    attribution.active = True
    async with Client(server, mode=cost.path.mode) as client:
        await run._calls(client, cost.path, 2)  # the first decided in full, the second a repeat
    print(sorted(attribution.calls))

asyncio.run(main(sys.argv[2]))
"""


@pytest.mark.parametrize("key", ["ucp-legacy", "ucp-modern"])
def test_the_profile_wrappers_leave_a_call_as_it_was(key: str) -> None:
    """`--profile`'s wrappers (`Attribution`) must not change what the library does: a
    `call_next` taken to be a function's last argument once replaced `_decided`'s `base`,
    so a UCP call decided in full under the wrappers was refused."""
    seen = _python("-c", ATTRIBUTED_CALL, str(ROOT / "benchmarks"), key, timeout=300)
    for name in ("ucp.negotiate.negotiate_capabilities", "UcpAgreement.to_ucp_block", run.Attribution.SDK):
        assert name in seen, seen


@pytest.mark.parametrize("key", ["legacy", "ucp-legacy"])
def test_the_steps_of_a_repeat_are_counted_one_at_a_time(key: str) -> None:
    """`run.py --steps KEY` replays, under callgrind, each library function a repeat calls,
    with the arguments a real repeat gave it: every step is found and costs something. On
    UCP legacy, the same repeat written out in one function (which raises on a replay that
    is not a memoised repeat) costs less than the library's middleware, and something."""
    missing = run.callgrind_missing()
    if missing is not None:
        pytest.skip(f"the step count needs valgrind and a C compiler: {missing}")
    printed = _python(str(ROOT / "benchmarks" / "run.py"), "--steps", key)
    rows = {
        step: int(figure.replace(",", ""))
        for figure, step in (
            line.strip("| ").split(" | ", 1)
            for line in printed.splitlines()
            if line.startswith("| ") and line[2].isdigit()
        )
    }
    for step in (*run.STEPS[key], "a ContextVar set/reset"):
        # A Python call costs hundreds of instructions; no step of a repeat costs a whole request.
        assert 100 < rows[step] < 200_000, (step, rows)
    if key == "ucp-legacy":
        assert rows[run.EMPTY_WHOLE] < rows[run.WRITTEN_OUT] < rows[run.WHOLE], rows
