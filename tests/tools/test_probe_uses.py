""" "lost" is what this server would lose: the features its tools, resources and prompts need
(their requiredCapabilities, what their own fields use) and what it declares, not the whole
feature table. Probed as users run it, against the reference time server (mcp-server-time,
which never elicits) and examples/tool_catalogs.py (whose entries require sampling and
elicitation), listed openly or hidden from clients that cannot use them."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from mcp_negotiation.core import revisions
from mcp_negotiation.tools.probe.uses import met
from support.harness import EXAMPLES, run_probe

TIME_SERVER = [sys.executable, "-m", "mcp_server_time"]
CATALOGS = [sys.executable, str(EXAMPLES / "tool_catalogs.py")]


def _probed(*args: str) -> dict[str, Any]:
    done = run_probe("--json", *args)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def _lost(out: dict[str, Any]) -> dict[str, list[str]]:
    return {row["revision"]: row["lost"] for row in out["revisions"]}


def test_a_time_server_loses_only_what_its_tools_use() -> None:
    out = _probed("--capabilities", "full", "--", *TIME_SERVER)
    assert [(use["feature"], use["kind"]) for use in out["uses"]] == [
        ("tool_annotations", "used"),
        ("structured_output", "used"),
    ]
    assert out["uses"][0]["by"] == ["tool get_current_time", "tool convert_time"]
    assert _lost(out) == {
        "2024-11-05": ["structured_output", "tool_annotations"],
        "2025-03-26": ["structured_output"],
        "2025-06-18": [],
        "2025-11-25": [],
        "2026-07-28": [],
    }
    text = run_probe("--", *TIME_SERVER).stdout
    assert "elicitation" not in text.split("\nlegend\n")[0]  # a server that never elicits loses none of it


@pytest.mark.parametrize("hide", [False, True], ids=["listed", "hidden"])
def test_requirements_are_what_the_entries_declare_even_when_hidden(hide: bool) -> None:
    out = _probed("--capabilities", "none", "--", *CATALOGS, *(["--hide"] if hide else []))
    required = {use["feature"]: use["by"] for use in out["uses"] if use["kind"] == "required"}
    assert required == {
        "sampling": ["tool summarize", "prompt brief"],
        "elicitation": ["resource template notes://{topic}"],
        "elicitation.form": ["tool ask_user"],
    }
    assert [use["feature"] for use in out["uses"] if use["kind"] == "declared"] == ["resources.subscribe"]
    assert _lost(out)["2024-11-05"] == ["elicitation", "elicitation.form", "structured_output"]
    assert _lost(out)["2026-07-28"] == []  # resources.subscribe is met there by subscriptions.listen


def test_the_human_output_says_what_it_uses_and_the_legend_which_kind_is_which() -> None:
    done = run_probe("--capabilities", "none", "--", *CATALOGS)
    assert done.returncode == 0, done.stderr
    head = " ".join(done.stdout.split("\n\n")[0].split())
    assert "uses sampling (required: tool summarize; prompt brief);" in head
    assert "structured_output (used: tools summarize, ask_user, echo)" in head
    assert "resources.subscribe (declared: capabilities.resources.subscribe)" in head
    lines = done.stdout.splitlines()
    lost = lines.index("lost (best served: 2026-07-28)")
    assert lines[lost + 1] == "  2024-11-05  elicitation, elicitation.form, structured_output"
    legend = " ".join(done.stdout.split("\nlegend\n", 1)[1].split())
    for kind in (
        "required, by an entry's _meta requiredCapabilities",
        "used, by an entry's own fields",
        "declared, by its capabilities",
    ):
        assert kind in legend
    assert max(map(len, lines)) <= 100


@pytest.mark.parametrize("revision", revisions.KNOWN)
def test_resource_subscriptions_are_met_at_every_revision(revision: str) -> None:
    assert met("resources.subscribe", revision)
    assert met("structured_output", revision) == revisions.feature("structured_output", revision)
