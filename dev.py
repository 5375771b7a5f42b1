#!/usr/bin/env python3
"""The project's two commands, runnable on a fresh clone with nothing but Python 3.11+.

    python3 dev.py probe [ARGS...]      `mcp-negotiation probe` (no target: the bundled example server)
    python3 dev.py nox [NOX ARGS...]    nox (noxfile.py); with no arguments, every check CI runs

Both first bring `.venv/` up to date: the package with its run-time dependencies only, and
nox with uv, the installer its sessions use, every version from the lock `locks/dev.txt`.
Each nox session builds its own environment in `.nox/`, from a lock of its own
(`python3 dev.py nox -s lock` writes them all anew).
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
BIN = ROOT / ".venv" / ("Scripts" if os.name == "nt" else "bin")
REQUIREMENTS = ("-e", ".", "nox")
"""What `.venv` gets besides uv: the package without extras, and nox."""
LOCK = ROOT / "locks" / "dev.txt"
"""The versions `.venv` installs, uv's among them."""
COMMANDS = {"probe": ["mcp-negotiation", "probe"], "nox": ["nox"]}
"""`python3 dev.py COMMAND` -> what it runs from `.venv` (the README's commands are checked against it)."""


def ensure_venv() -> None:
    """Create `.venv` with uv in it once; let uv bring the rest up to date on every run."""
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py runs before any environment exists
        sys.exit("mcp-negotiation needs Python 3.11 or newer")
    if not (BIN / "uv").exists():
        venv.EnvBuilder(with_pip=True).create(BIN.parent)
        subprocess.run([BIN / "python", "-m", "pip", "install", "-q", _locked("uv")], check=True)
    # Compiled at install: where PYTHONDONTWRITEBYTECODE is set (as on CI), nothing would
    # cache the bytecode, and every server the probe starts would compile `mcp` again.
    uv = [BIN / "uv", "pip", "install", "-q", "--compile-bytecode", "--python", BIN / "python"]
    subprocess.run([*uv, "-c", LOCK, *REQUIREMENTS], cwd=ROOT, check=True)


def _locked(name: str) -> str:
    """`name==version` as the lock pins it."""
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"{name}=="):
            return line.split(" ;", 1)[0].strip()
    sys.exit(f"{LOCK} pins no {name}: run `python3 dev.py nox -s lock`")


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        return 2
    ensure_venv()
    program, *args = COMMANDS[sys.argv[1]]
    return subprocess.run([BIN / program, *args, *sys.argv[2:]], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
