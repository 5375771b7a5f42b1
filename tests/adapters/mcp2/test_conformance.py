"""The official MCP conformance suite against a server wrapped by `negotiate(...)`.

`@modelcontextprotocol/conformance` (pinned in tests/support/peers/package.json) drives the
fixture server `tests/support/servers/conformance_server.py` over streamable HTTP on 127.0.0.1:
the frozen 2026-07-28 and 2025-11-25 requirement sets, and every scenario of the
2025-11-25, 2025-06-18 and 2025-03-26 revisions (`--suite all`). Every scenario must
pass, scored or not, except the few in tests/support/peers/expected-failures.yml (each with its
reason); the suite itself fails the run when a baseline entry starts passing. The counts
per run are printed in pytest's terminal summary and must equal those stated in
docs/compatibility.md.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from support import compat
from support.node import PEERS, conformance_cli, ensure_packages, node, package_version
from support.services import stop_process

pytestmark = [pytest.mark.matrix, pytest.mark.peers]

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests/support/servers/conformance_server.py"
BASELINE = PEERS / "expected-failures.yml"


def _expected_failures() -> frozenset[str]:
    names = re.findall(r"^\s+-\s+([\w-]+)", BASELINE.read_text(), flags=re.MULTILINE)
    return frozenset(names)


EXPECTED_FAILURES = _expected_failures()


@dataclass
class Scenario:
    name: str
    passed: int
    failed: int
    scored: bool = True
    reason: str = ""


@dataclass
class Run:
    label: str
    flags: list[str]
    scenarios: list[Scenario] = field(default_factory=list)

    @property
    def scored(self) -> list[Scenario]:
        return [s for s in self.scenarios if s.scored]

    def counts(self, scored: bool) -> tuple[int, int, int]:
        """(scenarios, checks passed, checks failed) among the scored or the unscored scenarios."""
        chosen = [s for s in self.scenarios if s.scored is scored]
        return len(chosen), sum(s.passed for s in chosen), sum(s.failed for s in chosen)


class ConformanceReport:
    """A pytest plugin, registered at run time, printing the counts in the terminal summary."""

    name = "mcp-negotiation-conformance-report"

    def __init__(self) -> None:
        self.runs: list[Run] = []
        self.header = ""

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.runs:
            return
        write = terminalreporter.write_line
        terminalreporter.section("MCP conformance suite (wrapped fixture server)")
        write(self.header)
        for run in self.runs:
            n, ok, bad = run.counts(scored=True)
            un, uok, ubad = run.counts(scored=False)
            write(
                f"{run.label:<24} scored: {n} scenarios, {ok} passed, {bad} failed",
                green=bad == 0,
                red=bad > 0,
            )
            if un:
                failing = [s.name for s in run.scenarios if not s.scored and s.failed]
                expected = sum(1 for name in failing if name in EXPECTED_FAILURES)
                write(
                    f"{'':<24} not scored: {un} scenarios, {uok} passed, {ubad} failed"
                    f" ({expected} expected failures: tests/support/peers/expected-failures.yml)"
                )


@pytest.fixture(scope="module")
def report(request: pytest.FixtureRequest) -> ConformanceReport:
    manager = request.config.pluginmanager
    existing = manager.get_plugin(ConformanceReport.name)
    if isinstance(existing, ConformanceReport):
        return existing
    plugin = ConformanceReport()
    manager.register(plugin, ConformanceReport.name)
    return plugin


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The wrapped fixture server on an ephemeral loopback port, in a subprocess."""
    ensure_packages()
    log = tmp_path_factory.mktemp("conformance-server") / "stderr.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(FIXTURE), "0"], cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # printed once the socket listens
        match = re.fullmatch(r"PORT (\d+)\n", line)
        if match is None:
            process.kill()
            process.wait(timeout=30)
            pytest.fail(f"the conformance fixture did not start: {line!r}\n{log.read_text()[-3000:]}")
        yield f"http://127.0.0.1:{match.group(1)}/mcp"
    finally:
        stop_process(process, timeout=30)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LINE = re.compile(r"^[✓✗] (?P<name>[\w./-]+): (?P<passed>\d+) passed, (?P<failed>\d+) failed$")
_REASON = re.compile(r"^  (?P<reason>[\w-]+) \(\d+\):$")
_ENTRY = re.compile(r"^    - (?P<name>[\w./-]+) \[server\]$")


def unscored(flags: list[str]) -> dict[str, str]:
    """{scenario: reason} a requirement set runs without scoring (`list --requirements`)."""
    if "--requirements" not in flags:
        return {}
    revision = flags[flags.index("--requirements") + 1]
    listing = subprocess.run(
        [str(node()), str(conformance_cli()), "list", "--server", "--requirements", revision],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    text = _ANSI.sub("", listing)
    assert "never scored" in text, text
    reasons: dict[str, str] = {}
    reason = ""
    for line in text.split("never scored", 1)[1].splitlines():
        if heading := _REASON.match(line):
            reason = heading["reason"]
        elif entry := _ENTRY.match(line):
            reasons[entry["name"]] = reason
    return reasons


def parse_summary(output: str, not_scored: dict[str, str]) -> list[Scenario]:
    """The scenarios of one run, from the suite's `=== SUMMARY ===` section."""
    text = _ANSI.sub("", output)
    if "=== SUMMARY ===" not in text:
        raise AssertionError(f"the suite printed no summary:\n{text[-4000:]}")
    summary = text.split("=== SUMMARY ===", 1)[1]
    return [
        Scenario(
            m["name"],
            int(m["passed"]),
            int(m["failed"]),
            m["name"] not in not_scored,
            not_scored.get(m["name"], ""),
        )
        for m in map(_LINE.match, summary.splitlines())
        if m
    ]


BAD = ("FAILURE", "WARNING")
"""Check statuses that fail a scenario here (the suite's baseline check counts warnings too)."""


def _failures(out_dir: Path, name: str) -> list[str]:
    """The failing or warning checks of one scenario, from the suite's checks.json."""
    messages = []
    for checks in out_dir.glob(f"server-{name}-*/checks.json"):
        for check in json.loads(checks.read_text()):
            if check.get("status") in BAD:
                messages.append(f"  {check.get('id')} {check.get('status')}: {check.get('errorMessage')}")
    return messages


@pytest.mark.parametrize(
    ("label", "flags"), compat.CONFORMANCE_RUNS, ids=[r[0] for r in compat.CONFORMANCE_RUNS]
)
def test_official_conformance_suite(
    label: str, flags: list[str], server_url: str, report: ConformanceReport, tmp_path: Path
) -> None:
    report.header = (
        f"@modelcontextprotocol/conformance {package_version('@modelcontextprotocol/conformance')}, "
        f"{compat.sdk_description()}"
    )
    completed = subprocess.run(
        [
            str(node()),
            str(conformance_cli()),
            "server",
            "--url",
            server_url,
            *flags,
            "--expected-failures",
            str(BASELINE),
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    run = Run(label, flags, parse_summary(completed.stdout, unscored(flags)))
    report.runs.append(run)

    failing = {s.name for s in run.scenarios if s.failed or _failures(tmp_path, s.name)}
    unexpected = sorted(failing - EXPECTED_FAILURES)
    details = "\n".join(f"{name}:\n" + "\n".join(_failures(tmp_path, name)) for name in unexpected)
    assert not unexpected, f"{label}: scenarios failing through the wrapped server:\n{details}"
    assert completed.returncode == 0, (
        f"{label}: the suite failed (stale baseline?):\n{completed.stdout[-3000:]}"
    )
    assert all(not s.scored for s in run.scenarios if s.name in EXPECTED_FAILURES), (
        "a baselined scenario is scored"
    )
    assert run.scored, f"{label}: no scored scenario ran"

    stated = compat.stated_conformance().get(label)
    observed = compat.observed_row(run.counts(scored=True), run.counts(scored=False))
    assert stated == observed, (
        f"docs/compatibility.md states {stated!r} for {label!r}, the suite counted {observed!r}: "
        "update the conformance table there"
    )


def test_the_compatibility_page_lists_the_matrix() -> None:
    expected = compat.render_matrix()
    assert compat.stated_matrix() == expected, (
        "docs/compatibility.md's SDK table differs from tests/support/matrix.toml;"
        f" it should read:\n{expected}"
    )


def test_this_environment_is_one_the_page_claims() -> None:
    """In a matrix environment, its exact pins; outside the matrix, an mcp inside the claimed range."""
    import tomllib

    from packaging.requirements import Requirement

    entry = compat.current_env()
    if entry is not None:
        assert compat.installed("mcp") == entry["mcp"]
        assert compat.installed("mcp-types") == entry["mcp"]
        assert compat.installed("fastmcp") == entry["fastmcp"]
        return
    with (ROOT / "pyproject.toml").open("rb") as f:
        dependencies = tomllib.load(f)["project"]["dependencies"]
    claimed = next(Requirement(d) for d in dependencies if Requirement(d).name == "mcp")
    assert compat.installed("mcp") in claimed.specifier
    minors = {e["mcp"].rsplit(".", 1)[0] for e in compat.claimed_entries()}
    assert compat.installed("mcp").rsplit(".", 1)[0] in minors, "this runs a minor the matrix lacks"


def test_the_claimed_range_is_what_the_matrix_proves() -> None:
    """pyproject's `mcp` range starts at the oldest pin (1.x) and stops before the next 2.x minor.

    2.x: every minor is in the matrix. 1.x (the wrapt adapter): its oldest and newest
    claimed releases are, as docs/mcp-1x.md states.
    """
    import tomllib

    from packaging.requirements import Requirement
    from packaging.version import Version

    with (ROOT / "pyproject.toml").open("rb") as f:
        dependencies = tomllib.load(f)["project"]["dependencies"]
    claimed = next(Requirement(d) for d in dependencies if Requirement(d).name == "mcp").specifier
    everything = sorted(Version(e["mcp"]) for e in compat.load_matrix()["env"])
    assert all(str(v) in claimed for v in everything)
    floor = everything[0]
    assert f"{floor.major}.{floor.minor}.0" in claimed, "the floor of the range is not what the matrix proves"
    below = f"{floor.major}.{floor.minor - 1}.99"
    assert below not in claimed, "the range reaches below the oldest proven release"
    assert "1.30.0" in claimed
    pinned = sorted(Version(e["mcp"]) for e in compat.claimed_entries())
    oldest, newest = pinned[0], pinned[-1]
    assert f"{newest.major}.{newest.minor + 1}.0" not in claimed, "the range reaches a minor the matrix lacks"
    minors = {(v.major, v.minor) for v in pinned}
    assert minors == {(newest.major, m) for m in range(oldest.minor, newest.minor + 1)}, "a minor is missing"
