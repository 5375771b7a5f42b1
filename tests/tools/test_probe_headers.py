"""`--header NAME:VALUE` reads a server behind credentials: examples/bearer_server.py, a real
uvicorn server whose Starlette middleware wants `Authorization: Bearer x`. Values are never
printed, in either output; `--json` names the headers sent."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest

from bearer_server import build
from mcp_negotiation.core import revisions
from support.harness import run_probe, serve_http

TOKEN = "x-very-secret-token"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve_http(build(TOKEN)) as served:
        yield served


def test_the_right_bearer_token_reads_every_revision() -> None:
    with serve_http(build(TOKEN)) as url:
        done = run_probe("--json", "--header", f"Authorization: Bearer {TOKEN}", url)
        text = run_probe("--header", f"Authorization: Bearer {TOKEN}", url)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [row["outcome"] for row in out["revisions"]] == ["agreed"] * len(revisions.KNOWN)
    assert out["headers"] == ["Authorization"]
    assert all(row["tools"] == ["can_elicit"] for row in out["revisions"])
    assert text.returncode == 0, text.stderr
    for shown in (done.stdout, done.stderr, text.stdout, text.stderr):
        assert TOKEN not in shown


def test_without_credentials_the_probe_says_to_give_them(url: str) -> None:
    done = run_probe(url)
    assert done.returncode == 2
    assert "HTTP 401: the server wants credentials (give them with --header NAME:VALUE)" in done.stderr


def test_a_wrong_token_is_said_to_be_refused_without_showing_it(url: str) -> None:
    done = run_probe("--json", "--header", "Authorization: Bearer wrong-guess", url)
    assert done.returncode == 2
    assert "HTTP 401: the server refused the credentials given with --header" in done.stderr
    assert json.loads(done.stdout)["exit"] == 2
    assert "wrong-guess" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("Authorization Bearer x", "give NAME:VALUE"),
        ("Bad Name: x", "give NAME:VALUE"),
        ("Mcp-Session-Id: abc", "Mcp-Session-Id is set by the probe itself"),
        ("Content-Type: text/plain", "Content-Type is set by the probe itself"),
    ],
)
def test_a_header_that_cannot_be_sent_is_a_bad_option(value: str, says: str) -> None:
    done = run_probe("--header", value, "http://127.0.0.1:9/mcp")
    assert done.returncode == 2
    assert f"argument --header: {says}" in done.stderr
    assert "probing" not in done.stderr


def test_headers_are_for_urls_not_commands() -> None:
    done = run_probe(
        "--header", "Authorization: Bearer x", "--", sys.executable, "-m", "mcp_negotiation.tools.demo"
    )
    assert done.returncode == 2
    assert "--header is for a URL" in done.stderr
    assert "probing" not in done.stderr
