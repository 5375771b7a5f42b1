"""docs/probe.md against the probe itself: its sample output is the output, line for line; its
`--json` tables name exactly the fields the probe writes; its exit statuses are the ones the
probe returns and `--help` lists; and examples/probe_gate.py, the CI gate it shows, gates."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.harness import EXAMPLES, ROOT, run_probe

PAGE = (ROOT / "docs/probe.md").read_text(encoding="utf-8")
GATE = EXAMPLES / "probe_gate.py"
DEMO = ["-m", "mcp_negotiation.tools.demo"]


def _blocks(language: str, text: str = PAGE) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def _probe_as_documented(*args: str) -> subprocess.CompletedProcess[str]:
    """The probe as the page runs it: `python` on PATH is the Python running the tests."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [sys.executable, "-m", "mcp_negotiation.tools.cli", "probe", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


def test_the_sample_output_is_the_probes_output() -> None:
    done = _probe_as_documented("--", "python", *DEMO)
    assert done.returncode == 0, done.stderr
    assert _blocks("text")[0] == done.stdout


def test_getting_started_shows_the_start_of_the_same_output() -> None:
    page = (ROOT / "docs/getting-started.md").read_text(encoding="utf-8")
    shown = next(block for block in _blocks("text", page) if block.startswith("probed "))
    done = run_probe()
    assert done.returncode == 0, done.stderr
    after_probed = shown.splitlines()[1:]  # the first names the clone's own path
    actual = done.stdout.splitlines()
    start = actual.index(after_probed[0])
    assert actual[start : start + len(after_probed)] == after_probed


def _documented(heading: str) -> list[str]:
    """The field names of the table under `### heading`."""
    section = PAGE.split(f"\n### {heading}\n", 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.M)


def _json(*args: str) -> dict[str, Any]:
    done = run_probe("--json", *args)
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["exit"] == done.returncode
    return out


def test_every_field_of_json_is_documented_and_every_documented_field_is_written() -> None:
    out = _json("--", sys.executable, str(ROOT / "tests/support/servers/two_stories.py"))
    assert list(out) == _documented("The object")
    assert all(list(row) == _documented("A row") for row in out["revisions"])
    versions = out["versions"]
    assert list(versions) == _documented("`versions`")
    assert versions["contradictions"]
    assert all(list(found) == _documented("A contradiction") for found in versions["contradictions"])
    demo = _json()
    assert demo["uses"]
    assert all(list(use) == _documented("A use") for use in demo["uses"])


def test_the_json_sample_has_the_documented_fields() -> None:
    [sample] = _blocks("json")
    out = json.loads(sample)
    assert list(out) == _documented("The object")
    assert all(list(row) == _documented("A row") for row in out["revisions"])


def test_the_exit_statuses_are_the_documented_ones() -> None:
    section = PAGE.split("\n## Exit status\n", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\| ([0-9+ N]+) \|", section, flags=re.M) == ["0", "1", "2", "128 + N"]
    help_text = run_probe("--help").stdout.split("exit status (for CI):\n", 1)[1]
    assert re.findall(r"^  ([0-9+N]+) ", help_text, flags=re.M) == ["0", "1", "2", "128+N"]
    assert _json()["exit"] == 0
    assert _json("--", sys.executable, *DEMO, "--max-revision", "2025-11-25")["exit"] == 1
    missing = run_probe("--json", "--", "no-such-mcp-server-command")
    assert (missing.returncode, json.loads(missing.stdout)["exit"]) == (2, 2)


def _run(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


@pytest.mark.parametrize(
    ("needed", "status", "says"),
    [
        (["2025-06-18", "2026-07-28"], 0, "gate: passed (2025-06-18, 2026-07-28; exit 0)"),
        (["2024-11-05"], 1, "gate: 2024-11-05: a client loses structured_output"),
    ],
    ids=["served", "loses"],
)
def test_the_probe_gate_passes_what_is_served_and_fails_what_is_lost(
    needed: list[str], status: int, says: str
) -> None:
    done = _run(
        GATE, *(arg for revision in needed for arg in ("--need", revision)), "--", sys.executable, *DEMO
    )
    assert done.returncode == status, done.stderr
    assert says in done.stdout + done.stderr


def test_the_probe_gate_says_when_it_could_not_probe() -> None:
    done = _run(GATE, "--need", "2025-11-25", "--", "no-such-mcp-server-command")
    assert done.returncode == 2
    assert "gate: could not probe: server command not found" in done.stderr
