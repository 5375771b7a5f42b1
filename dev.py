#!/usr/bin/env python3
"""The project's two commands, runnable with nothing but Python 3.11+.

    python3 dev.py probe [ARGS...]   run `mcp-negotiation` (no target: the bundled example server)
    python3 dev.py test  [PYTEST ARGS...]   ruff, mypy --strict and the whole test suite

Each creates (or refreshes) the virtual environment it needs in `.venv/`, so a fresh
clone needs no step before them. The environment is rebuilt when `pyproject.toml`
changes, keyed by its hash.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".pyproject-hash"


def _say(message: str) -> None:
    print(f"[dev] {message}", file=sys.stderr, flush=True)


def _run(*argv: str | Path, check: bool = True) -> int:
    return subprocess.run([str(a) for a in argv], cwd=ROOT, check=check).returncode


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
    _run(BIN / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", "-e", ".[test]")
    STAMP.write_text(wanted)


def probe(args: list[str]) -> int:
    ensure_env()
    return _run(BIN / "mcp-negotiation", "probe", *args, check=False)


def test(args: list[str]) -> int:
    ensure_env()
    steps: list[tuple[str, list[str | Path]]] = [
        ("ruff", [BIN / "ruff", "check", "."]),
        ("mypy", [BIN / "mypy", "--strict", "src"]),
        ("pytest", [BIN / "python", "-m", "pytest", *args]),
    ]
    failed = []
    for name, argv in steps:
        _say(f"running {name}")
        if _run(*argv, check=False) != 0:
            failed.append(name)
    if failed:
        _say("FAILED: " + ", ".join(failed))
        return 1
    _say("all green")
    return 0


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in {"probe", "test"}:
        print(__doc__, file=sys.stderr)
        return 2
    command, rest = sys.argv[1], sys.argv[2:]
    return probe(rest) if command == "probe" else test(rest)


if __name__ == "__main__":
    sys.exit(main())
