"""`mcp-negotiation a2a`: an agent card and a request's headers in, the agent's answer out.

Run in-process through `main` (the parser and the output are the subject), and once as a
subprocess, as users run it. The outputs docs/protocols.md shows are checked here.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_negotiation.tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
CARD = "examples/a2a/agent-card.json"
CITATIONS = "https://standards.org/extensions/citations/v1"
GEOLOCATION_V2 = "https://example.com/extensions/geolocation/v2"


def a2a(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        status = main(["a2a", *args])
    except SystemExit as stop:  # argparse's way out
        status = int(stop.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def as_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    status, out, _ = a2a(capsys, *args, "--json")
    parsed: dict[str, Any] = json.loads(out)
    return status, parsed


@pytest.fixture(autouse=True)
def _from_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the card's path as docs/protocols.md gives it


def test_a_served_request_exits_0_and_says_what_was_activated_and_ignored(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = a2a(
        capsys,
        "--card",
        CARD,
        "--header",
        "A2A-Version: 1.0",
        "--header",
        f"A2A-Extensions: {CITATIONS}, {GEOLOCATION_V2}",
    )
    assert (status, err) == (0, "")
    assert "agreed: A2A 1.0 over JSONRPC at https://georoute-agent.example.com/a2a/v1" in out
    assert f"  activated: {CITATIONS}\n" in out
    assert f"  ignored: {GEOLOCATION_V2}\n" in out
    assert f"  response header: A2A-Extensions: {CITATIONS}\n" in out


def test_json_carries_the_negotiation(capsys: pytest.CaptureFixture[str]) -> None:
    status, result = as_json(
        capsys, "--card", CARD, "--query", "A2A-Version=1.0", "--header", f"a2a-extensions: {CITATIONS}"
    )
    assert status == 0
    assert result["agreed"] is True
    assert result["request"] == {
        "version": "1.0",
        "versionSent": "1.0",
        "versionSource": "query",
        "extensions": [CITATIONS],
    }
    assert result["interface"] == {
        "url": "https://georoute-agent.example.com/a2a/v1",
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }
    assert result["responseHeaders"] == {"A2A-Extensions": CITATIONS}
    assert result["error"] is None
    assert result["http"] is None


@pytest.mark.parametrize(
    ("headers", "code", "reason"),
    [
        (["A2A-Version: 0.3"], -32009, "VERSION_NOT_SUPPORTED"),
        (["A2A-Version: 1.0"], -32008, "EXTENSION_SUPPORT_REQUIRED"),
    ],
)
def test_a_refused_request_exits_1_with_the_error_in_both_shapes(
    capsys: pytest.CaptureFixture[str], headers: list[str], code: int, reason: str
) -> None:
    args = [arg for header in headers for arg in ("--header", header)]
    status, result = as_json(capsys, "--card", CARD, *args)
    assert status == 1
    assert result["agreed"] is False
    assert result["error"]["code"] == code
    assert result["error"]["data"][0]["reason"] == reason
    assert result["http"]["status"] == 400
    assert result["http"]["body"]["error"]["status"] == "FAILED_PRECONDITION"
    assert result["http"]["body"]["error"]["details"] == result["error"]["data"]


def test_a_malformed_header_value_is_refused_with_32602_not_a_bad_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, result = as_json(capsys, "--card", CARD, "--header", "A2A-Extensions: https://a.example/x y")
    assert status == 1
    assert result["error"]["code"] == -32602


def test_the_interface_option_limits_the_versions(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    card = tmp_path / "card.json"
    card.write_text(
        json.dumps(
            {
                "supportedInterfaces": [
                    {"url": "https://a/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                    {"url": "https://a/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                ]
            }
        )
    )
    assert as_json(capsys, "--card", str(card), "--header", "A2A-Version: 0.3")[0] == 0
    status, result = as_json(
        capsys, "--card", str(card), "--header", "A2A-Version: 0.3", "--interface", "https://a/v1"
    )
    assert status == 1
    assert result["error"]["data"][0]["metadata"]["supportedVersions"] == "1.0"


# --- Bad options: exit 2, said on stderr ---------------------------------------------------------

RESEARCH_CARD_AS_PRINTED = """{
  "supportedInterfaces": [
    {
      "url": "https://research-agent.example.com/a2a/v1",
      "protocolBinding": "HTTP+JSON",
      "protocolVersion": "0.3",
    }
  ]
}"""
"""A2A 1.0 §4.6.1's card as the spec prints it, trailing comma included (/work/notes/a2a.md §6.3:
"not valid JSON ... Use it as a parser-robustness vector")."""


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot read"),
        (RESEARCH_CARD_AS_PRINTED, "is not JSON (line 7, column 5"),
        ("[]", "is no agent card to negotiate with: an agent card is a JSON object"),
        ('{"name": "x"}', "the card lists no version"),
        (b"\xff\xfe", "cannot read"),
    ],
)
def test_an_unusable_card_is_a_bad_option(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str | bytes | None, says: str
) -> None:
    card = tmp_path / "card.json"
    if isinstance(content, bytes):
        card.write_bytes(content)
    elif content is not None:
        card.write_text(content)
    status, out, err = a2a(capsys, "--card", str(card))
    assert status == 2
    assert out == ""
    assert says in err


@pytest.mark.parametrize("bad", ["A2A-Version 1.0", ": 1.0", " A2A-Version: 1.0", "A2A Version: 1.0"])
def test_a_header_that_is_not_name_colon_value_is_a_bad_option(
    capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    status, _, err = a2a(capsys, "--card", CARD, "--header", bad)
    assert status == 2
    assert "a header is 'Name: value'" in err


def test_the_card_is_required_and_help_shows_examples_and_exit_statuses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert a2a(capsys)[0] == 2
    status, out, _ = a2a(capsys, "--help")
    assert status == 0
    assert "exit status:" in out
    assert "mcp-negotiation a2a --card card.json --header 'A2A-Version: 1.0'" in out


# --- As users run it, and as the docs show it ------------------------------------------------------


def _documented_runs() -> list[tuple[list[str], str]]:
    """Each command of docs/protocols.md's section on the command (the last of its ```sh block),
    with the ```text block that follows it."""
    page = (ROOT / "docs" / "protocols.md").read_text(encoding="utf-8")
    section = page[page.index("### `mcp-negotiation a2a`") :]
    found = []
    for commands, output in re.findall(r"```sh\n(.*?)```\n\n(?:[^`]*\n\n)?```text\n(.*?)```", section, re.S):
        command = commands.replace("\\\n", " ").splitlines()[-1]
        assert command.startswith("mcp-negotiation a2a --card examples/"), command
        found.append((shlex.split(command)[1:], output))
    return found


def test_the_docs_show_what_the_command_prints() -> None:
    runs = _documented_runs()
    assert len(runs) == 2
    for args, shown in runs:
        done = subprocess.run(
            [sys.executable, "-m", "mcp_negotiation.tools.cli", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert done.returncode in (0, 1), done.stderr
        assert done.stdout == shown
