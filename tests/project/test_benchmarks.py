"""The benchmark keeps running, prints every row it promises, and RESULTS.md is what it generates.

Wall-clock figures are never judged here, nor whether the library is within the instruction
guard (RESULTS.md reports that): what is tested is that the guard counts every path, that its
counting method is exact, and that `run.py --only instructions --check` exits by the ceilings.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import instructions  # noqa: E402
import run  # noqa: E402

needs_valgrind = pytest.mark.skipif(instructions.missing() is not None, reason=str(instructions.missing()))


def _run(*options: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), *options],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False,
    )  # fmt: skip


def _rows(text: str) -> list[list[str]]:
    """Each table row's cells (header and rule rows left out)."""
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith(("| path", "| Machine", "| runs"))
    ]


def _sections(text: str) -> dict[str, list[str]]:
    """What a report is made of, by heading, figures left out: each table's rule and each row's
    first cell (what the row is about; the probe's count of runs left out)."""
    sections: dict[str, list[str]] = {}
    heading = ""
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line
            sections[heading] = []
        elif line.startswith("|--"):
            sections[heading].append(line)
        elif line.startswith("| ") and not (first := line.split("|")[1].strip()).isdigit():
            sections[heading].append(first)
    return sections


@pytest.fixture(scope="module")
def quick() -> str:
    """What `run.py --quick` printed for the transports and the probe (it must succeed, and write nothing)."""
    before = run.RESULTS.read_bytes()
    done = _run("--quick", "--only", "transports", "--only", "probe")
    assert done.returncode == 0, done.stderr[-3000:]
    assert run.RESULTS.read_bytes() == before
    return done.stdout


@pytest.fixture(scope="module")
def checked() -> subprocess.CompletedProcess[str]:
    """`run.py --only instructions --check`, once."""
    if instructions.missing() is not None:
        pytest.skip(f"the instruction guard is not counted here: {instructions.missing()}")
    return _run("--only", "instructions", "--check")


def test_a_quick_run_prints_every_row(quick: str) -> None:
    rows = {tuple(row[:2]) for row in _rows(quick)}
    for transport in run.TRANSPORTS:
        for clients in run.CLIENTS:
            assert (transport.name, str(clients)) in rows, transport.name
    assert [row[0] for row in _rows(quick) if row[-1].endswith(" s")] == ["1"]  # the probe, run once


@needs_valgrind
def test_the_instruction_guard_counts_every_path_and_judges_it_by_its_ceiling(
    checked: subprocess.CompletedProcess[str],
) -> None:
    """Every guard path counted; each row's verdict is its figures' (added against ceiling);
    `--check` exits 1 exactly when a judged row is over its ceiling. Whether the library is
    within the guard is what the report says (RESULTS.md), not what this test asserts."""
    counted = {row[0]: row for row in _rows(checked.stdout)}
    guarded = [counted.get(guard.name) for guard in instructions.GUARDS]
    assert None not in guarded, checked.stdout + checked.stderr[-3000:]
    over = []
    for guard in instructions.GUARDS:
        row = counted[guard.name]
        added = int(row[3].replace(",", "").replace("+", ""))
        if guard.ceiling is None:
            assert row[-1] == "", row
            continue
        assert row[-1] == ("yes" if added <= guard.ceiling else "**no**"), row
        if added > guard.ceiling:
            over.append(guard.name)
    assert checked.returncode == (1 if over else 0), (over, checked.stderr[-3000:])


def test_results_md_is_the_generated_report(quick: str, request: pytest.FixtureRequest) -> None:
    """The committed RESULTS.md is what the code generates now: the same sections, tables and rows,
    nothing added by hand (no history of earlier runs)."""
    committed = _sections(run.RESULTS.read_text(encoding="utf-8"))
    generated = _sections(quick)
    if instructions.missing() is None:
        generated |= _sections(request.getfixturevalue("checked").stdout)
    assert next(iter(committed)) == "# Benchmark results"
    assert {heading: committed.get(heading) for heading in generated} == generated
    assert len(committed) == 1 + len(run.PARTS)


COUNTED = """
import ctypes, sys
sys.path.insert(0, sys.argv[1])
from instructions import DUMP_AT, START, ZERO, client_request
request = client_request()
request(START)
for index, times in enumerate((0, 1, 1, 2)):
    label = ctypes.create_string_buffer(f"{index} {times} 0".encode())
    request(ZERO)
    for _ in range(times):
        sum(range(1000))
    request(DUMP_AT, ctypes.addressof(label))
"""


@needs_valgrind
def test_the_counting_method_is_exact(tmp_path: Path) -> None:
    """The client requests `instructions.py` issues through ctypes reach callgrind: the same work
    counts the same, twice as much work counts about twice as much, and no work about nothing."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={tmp_path}/out.%p",
         sys.executable, "-c", COUNTED, str(ROOT / "benchmarks")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    counted = {index: total for index, _, total in map(instructions._dumped, tmp_path.glob("out.*.*"))}
    idle, once, again, twice = (counted[index] for index in range(4))
    assert 0 < idle < once  # a dump counts what ran since the zero, and only that
    assert abs(once - again) < 100  # (the interpreter specialises the loop as it goes)
    assert (twice - idle) == pytest.approx(2 * (once - idle), rel=0.01)


def test_the_client_request_is_a_no_op_outside_valgrind() -> None:
    request = instructions.client_request()
    label = ctypes.create_string_buffer(b"0 0 0")
    assert request(instructions.ZERO) == 0
    assert request(instructions.DUMP_AT, ctypes.addressof(label)) == 0


ADDR_NO_RANDOMIZE = 0x0040000
"""The personality flag (linux/personality.h) that `setarch -R` sets."""


def test_fixed_addresses_turn_randomisation_off_where_they_are_offered() -> None:
    """The prefix the guard runs callgrind under: one whose command really runs with address
    randomisation off (the kernel's `/proc/self/personality` of that process), or none, and
    then a command runs as this process does."""
    prefix = instructions.fixed_addresses()
    read = [sys.executable, "-c", "print(open('/proc/self/personality').read())"]
    personality = int(subprocess.run([*prefix, *read], capture_output=True, text=True, check=True).stdout, 16)
    expected = ADDR_NO_RANDOMIZE if prefix else int(Path("/proc/self/personality").read_text(), 16)
    assert personality & ADDR_NO_RANDOMIZE == expected & ADDR_NO_RANDOMIZE
