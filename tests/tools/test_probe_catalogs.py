"""`mcp-negotiation probe` shows, per client revision, the tools that client sees and those it
loses (issue 25), in the human output and in `--json`, run as users run it: a subprocess."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from support.harness import EXAMPLES, serve_http
from support.harness import run_probe as _probe
from tool_catalogs import build

EARLY = ("2024-11-05", "2025-03-26")
"""Revisions without elicitation: `ask_user` (form elicitation) is lost there whatever is declared."""


def _catalogs(*args: str) -> dict[str, tuple[list[str], list[str]]]:
    done = _probe("--json", *args)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)["revisions"]
    assert all("listed" not in row for row in rows)
    return {row["revision"]: (row["tools"], row["tools_lost"]) for row in rows}


@pytest.mark.parametrize("hide", [False, True])
def test_json_names_what_each_revision_sees_and_loses(hide: bool) -> None:
    server = [sys.executable, str(EXAMPLES / "tool_catalogs.py"), *(["--hide"] if hide else [])]
    catalogs = _catalogs("--capabilities", json.dumps({"elicitation": {}}), "--", *server)
    for revision, (tools, lost) in catalogs.items():
        if revision in EARLY:
            assert (tools, lost) == (["echo"], ["summarize", "ask_user"]), revision
        else:
            # Hidden or not, `summarize` is lost: the client declared no sampling. A scoping
            # server lists it to no row; the probe finds it by listing as a client that can use it.
            assert (tools, lost) == (["ask_user", "echo"], ["summarize"]), revision


def test_a_client_that_declares_everything_loses_nothing_it_can_have() -> None:
    with serve_http(build(hide=True).streamable_http_app()) as url:
        catalogs = _catalogs("--capabilities", "full", url)
    assert catalogs["2026-07-28"] == (["summarize", "ask_user", "echo"], [])
    assert catalogs["2024-11-05"] == (["summarize", "echo"], ["ask_user"])


def test_human_output_has_a_tools_section_within_100_columns() -> None:
    done = _probe(
        "--capabilities", "none", "--", sys.executable, str(EXAMPLES / "tool_catalogs.py"), "--hide"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(map(len, lines)) <= 100
    start = lines.index(next(line for line in lines if line.startswith("tools (")))
    assert lines[start + 1 : start + 6] == [
        f"  {revision}  echo; lost: summarize, ask_user"
        for revision in ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
    ]
    legend = done.stdout.split("\nlegend\n", 1)[1]
    assert "  tools " in legend
