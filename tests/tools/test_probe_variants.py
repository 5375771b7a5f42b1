"""`mcp-negotiation probe` shows the tools each revision's client is served in a variant (issue
37), and, with `--client-info`, what a server's per-client rules do for that client: run as
users run it, a subprocess probing a stdio server."""

from __future__ import annotations

import json
import sys
from typing import Any

from support.harness import EXAMPLES, ROOT
from support.harness import run_probe as _probe

VARIANTS = [sys.executable, str(EXAMPLES / "tool_variants.py")]
OVERRIDDEN = [sys.executable, str(ROOT / "tests" / "support" / "servers" / "variants_overridden.py")]
FULL = {"roots": {}, "sampling": {}, "elicitation": {"form": {}}}
WITHOUT_ELICITATION = ("2024-11-05", "2025-03-26")
"""Revisions that have no elicitation: `research` is served as `lookup` there to every client."""


def _rows(*args: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    done = _probe("--json", *args)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    return report, {row["revision"]: row for row in report["revisions"]}


def test_a_client_that_cannot_be_asked_is_shown_the_variant_it_is_served() -> None:
    _, rows = _rows("--capabilities", json.dumps({"sampling": {}}), "--", *VARIANTS)
    for revision, row in rows.items():
        assert row["tools_varied"] == ["research"], revision
        assert "research" in row["tools"]
        assert "lookup" not in row["tools"]


def test_a_client_declaring_everything_is_served_no_variant_where_its_revision_has_it() -> None:
    _, rows = _rows("--capabilities", json.dumps(FULL), "--", *VARIANTS)
    for revision, row in rows.items():
        assert row["tools_varied"] == (["research"] if revision in WITHOUT_ELICITATION else []), revision


def test_the_human_table_names_the_variants() -> None:
    done = _probe("--capabilities", json.dumps({"sampling": {}}), "--", *VARIANTS)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # (the legend is wrapped)
    assert "variant: research" in text
    assert "variant: tools listed to it under their name with another input schema" in text


def test_a_rule_for_the_client_named_shows_as_what_it_is_served() -> None:
    """The same declaration, as the probe and as the client a rule names: only the latter is
    served `lookup` (its rule revokes elicitation), and the table says whom it probed as."""
    report, rows = _rows("--capabilities", json.dumps(FULL), "--", *OVERRIDDEN)
    assert report["client_info"] == {"name": "mcp-negotiation-probe", "version": "1"}
    assert rows["2025-11-25"]["tools_varied"] == []
    assert rows["2026-07-28"]["tools_varied"] == []
    as_acme = ("--client-info", "acme-desk/1.0")
    report, rows = _rows("--capabilities", json.dumps(FULL), *as_acme, "--", *OVERRIDDEN)
    assert report["client_info"] == {"name": "acme-desk", "version": "1.0"}
    assert all(row["tools_varied"] == ["research"] for row in rows.values()), rows
    done = _probe("--capabilities", json.dumps(FULL), *as_acme, "--", *OVERRIDDEN)
    assert "acme-desk 1.0 (the clientInfo sent: per-client rules apply)" in " ".join(done.stdout.split())


def test_a_malformed_client_info_is_a_usage_error() -> None:
    for bad in ("acme-desk", "/1.0", "acme/", "a\tb/1"):
        done = _probe("--client-info", bad)
        assert done.returncode == 2, bad
        assert "--client-info" in done.stderr, done.stderr
