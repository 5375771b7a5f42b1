"""What docs/compatibility.md states, and how the tests check it against what they observe.

The page has two generated tables between HTML comment markers: the SDK matrix
(rendered from tests/support/matrix.toml) and the conformance counts per run (checked
against the official suite's own counts by tests/adapters/mcp2/test_conformance.py). A table that
disagrees with reality fails a test, whose message carries the table to paste.
"""

from __future__ import annotations

import os
import re
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs/compatibility.md"
MATRIX = ROOT / "tests/support/matrix.toml"
ENV_VAR = "MCP_NEGOTIATION_MATRIX_ENV"

CONFORMANCE_RUNS: list[tuple[str, list[str]]] = [
    ("--requirements 2026-07-28", ["--requirements", "2026-07-28"]),
    ("--requirements 2025-11-25", ["--requirements", "2025-11-25"]),
    ("--spec-version 2025-11-25", ["--spec-version", "2025-11-25", "--suite", "all"]),
    ("--spec-version 2025-06-18", ["--spec-version", "2025-06-18", "--suite", "all"]),
    ("--spec-version 2025-03-26", ["--spec-version", "2025-03-26", "--suite", "all"]),
]
"""(label, CLI flags) of every conformance run: the two frozen requirement sets, and every
scenario (`--suite all`: active, pending and draft) of each legacy revision."""


def load_matrix() -> dict[str, Any]:
    with MATRIX.open("rb") as f:
        return tomllib.load(f)


def current_env() -> dict[str, Any] | None:
    """The matrix entry this test run is in (noxfile.py sets the variable), or None outside the matrix."""
    name = os.environ.get(ENV_VAR)
    if not name:
        return None
    for entry in load_matrix()["env"]:
        if entry["name"] == name:
            return dict(entry)
    raise LookupError(f"{ENV_VAR}={name!r} names no entry of {MATRIX}")


def installed(distribution: str) -> str:
    return metadata.version(distribution)


def sdk_description() -> str:
    env = os.environ.get(ENV_VAR) or "outside the matrix"
    return f"mcp {installed('mcp')}, fastmcp {installed('fastmcp')} ({env})"


def _block(name: str, text: str | None = None) -> str:
    text = DOC.read_text() if text is None else text
    match = re.search(rf"<!-- {name}:begin -->\n(.*?)<!-- {name}:end -->", text, flags=re.DOTALL)
    if match is None:
        raise AssertionError(f"{DOC} has no `<!-- {name}:begin -->` … `<!-- {name}:end -->` block")
    return match.group(1)


def _rows(block: str) -> list[list[str]]:
    rows = []
    for line in block.splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|[\s|:-]+\|", line):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows[1:]  # without the header


def render_matrix() -> str:
    """The page's SDK table, from tests/support/matrix.toml."""
    matrix = load_matrix()
    lines = ["| nox session | mcp | mcp-types | fastmcp | tests |", "|---|---|---|---|---|"]
    for entry in matrix["env"]:
        modern = "fastmcp" in entry
        types = entry["mcp"] if modern else "–"
        files = "the end-to-end files" if modern else "the mcp 1.x suite"
        fastmcp = entry.get("fastmcp", "–")
        lines.append(f"| `matrix({entry['name']})` | {entry['mcp']} | {types} | {fastmcp} | {files} |")
    return "\n".join(lines) + "\n"


def claimed_entries() -> list[dict[str, Any]]:
    """The matrix entries of the SDK major the package metadata claims (2.x)."""
    return [dict(e) for e in load_matrix()["env"] if "fastmcp" in e]


def stated_matrix() -> str:
    return _block("matrix")


def observed_row(scored: tuple[int, int, int], unscored: tuple[int, int, int]) -> tuple[str, ...]:
    """The cells of one conformance row: scenarios, checks passed, checks failed, the unscored."""
    un, uok, ubad = unscored
    rest = f"{un} scenarios: {uok} passed, {ubad} failed" if un else "none"
    return (str(scored[0]), str(scored[1]), str(scored[2]), rest)


def stated_conformance() -> dict[str, tuple[str, ...]]:
    """{run label: cells} from the page's conformance table."""
    stated = {}
    for row in _rows(_block("conformance")):
        stated[row[0].strip("`")] = tuple(row[1:])
    return stated
