"""Whether a server tells one story about its versions: what `server/discover` advertises, what
a -32022's `data.supported` names, and what `initialize` answers, against each other.

End to end against real servers: tests/support/servers/two_stories.py (a lowlevel mcp 2.x
server whose discover and -32022 disagree) and the bundled example under policies that
refuse or counter-offer (one story). The rules themselves, on plain rows.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from mcp_negotiation.tools.probe.rows import Row
from mcp_negotiation.tools.probe.story import contradictions
from support.harness import ROOT, run_probe

TWO_STORIES = str(ROOT / "tests/support/servers/two_stories.py")
DEMO = [sys.executable, "-m", "mcp_negotiation.tools.demo"]


def _versions(*command: str) -> tuple[int, dict[str, Any]]:
    done = run_probe("--json", "--", *command)
    versions: dict[str, Any] = json.loads(done.stdout)["versions"]
    return done.returncode, versions


def test_a_server_whose_discover_and_32022_disagree_is_reported_with_its_table() -> None:
    status, versions = _versions(sys.executable, TWO_STORIES)
    assert status == 1
    assert versions["discover"] == ["2025-06-18", "2026-07-28"]
    assert versions["refusals"] == {"2024-11-05": ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]}
    assert versions["initialize"] == {r: r for r in ("2025-03-26", "2025-06-18", "2025-11-25")}
    assert [
        (c["revision"], c["listed_by"], c["not_listed_by"], c["observed"]) for c in versions["contradictions"]
    ] == [
        ("2025-03-26", ["the -32022 at 2024-11-05"], ["server/discover"], "agreed"),
        ("2025-11-25", ["the -32022 at 2024-11-05"], ["server/discover"], "agreed"),
    ]
    text = run_probe("--", sys.executable, TWO_STORIES).stdout
    assert "versions (where server/discover, -32022 data.supported and initialize disagree)" in text
    said = "  2025-03-26  the -32022 at 2024-11-05 lists it, server/discover does not; offered it, the server"
    assert said in text
    assert "2026-07-28  modern  agreed" in text  # the table is all there


def test_a_32022_naming_another_revision_as_requested_is_a_contradiction() -> None:
    status, versions = _versions(sys.executable, TWO_STORIES, "--requested", "2099-01-01")
    assert status == 1
    first = versions["contradictions"][0]
    assert first["revision"] == "2024-11-05"
    assert (
        first["text"]
        == "offered it, the server refused (-32022), naming '2099-01-01' as the revision requested"
    )


@pytest.mark.parametrize(
    ("policy", "said"),
    [
        ([], "server/discover agrees"),
        (["--max-revision", "2025-11-25"], "the -32022 at 2026-07-28 agrees"),
        (
            ["--min-revision", "2025-06-18"],
            "initialize at 2024-11-05, initialize at 2025-03-26 and server/discover agree",
        ),
    ],
    ids=["every-revision", "legacy-only", "counter-offers"],
)
def test_a_negotiated_server_tells_one_story(policy: list[str], said: str) -> None:
    status, versions = _versions(*DEMO, *policy)
    assert versions["contradictions"] == []
    assert status == (1 if policy[:1] == ["--max-revision"] else 0)  # a refusal is still a refusal
    text = run_probe("--", *DEMO, *policy).stdout
    assert (
        " ".join(text.split("\nversions", 1)[1].split("\n\n")[0].split())
        == f"(one story: {said} with every outcome)"
    )


def _row(revision: str, outcome: Any, **fields: Any) -> Row:
    era = "modern" if revision == "2026-07-28" else "legacy"
    return Row(revision, era, outcome, **fields)


def _refused(revision: str, supported: list[str], requested: str | None = None) -> Row:
    data = {"supported": supported, "requested": requested or revision}
    return _row(revision, "refused", error_code=-32022, error_data=data)


def test_a_list_speaks_only_of_the_eras_it_names() -> None:
    """The SDK's discover lists the modern revisions only: legacy ones agreed contradict nothing."""
    rows = [_row(r, "agreed", answered=r) for r in ("2024-11-05", "2025-11-25")]
    rows.append(_row("2026-07-28", "agreed", answered="2026-07-28", supported_versions=["2026-07-28"]))
    assert contradictions(rows) == []


def test_a_revision_listed_but_refused_is_a_contradiction() -> None:
    rows = [
        _refused("2026-07-28", ["2025-11-25", "2026-07-28"]),
        _row("2025-11-25", "agreed", answered="2025-11-25"),
    ]
    [found] = contradictions(rows)
    assert (found.revision, found.listed_by, found.observed) == (
        "2026-07-28",
        ("the -32022 at 2026-07-28",),
        "refused (-32022)",
    )


def test_a_counter_offer_vouches_only_for_what_it_answered() -> None:
    rows = [
        _row("2024-11-05", "counter-offer", answered="2025-06-18"),
        _row("2025-06-18", "counter-offer", answered="2025-11-25"),
        _row("2025-11-25", "agreed", answered="2025-11-25"),
    ]
    [found] = contradictions(rows)
    assert found.revision == "2025-06-18"
    assert (
        found.text == "initialize at 2024-11-05 lists it; offered it, the server counter-offered 2025-11-25"
    )


def test_lists_that_disagree_about_a_revision_that_timed_out_are_a_contradiction() -> None:
    rows = [
        _row("2025-06-18", "timeout"),
        _row("2026-07-28", "agreed", answered="2026-07-28", supported_versions=["2025-06-18", "2026-07-28"]),
        _refused("2024-11-05", ["2025-11-25", "2026-07-28"]),
    ]
    found = {c.revision: c for c in contradictions(rows)}
    assert found["2025-06-18"].text == (
        "server/discover lists it, the -32022 at 2024-11-05 does not; offered it, the server did not answer"
    )
