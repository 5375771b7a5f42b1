"""The `UCP-Agent` header: an RFC 8941 Dictionary whose `profile` is a quoted HTTPS URL."""

from __future__ import annotations

import pytest

from mcp_negotiation.ucp import (
    INVALID_PROFILE_URL,
    MAX_HEADER_LENGTH,
    MAX_URL_LENGTH,
    UcpError,
    parse_ucp_agent,
    validate_profile_url,
)

URL = "https://agent.example/profiles/shopping-agent.json"


@pytest.mark.parametrize(
    "header",
    [
        f'profile="{URL}"',
        f'  profile="{URL}"  ',
        f'profile="{URL}";version="2026-04-08"',
        f'profile="{URL}", version="2026-04-08"',
        f'version="2026-04-08", profile="{URL}"',
        f'profile="{URL}", other=?1, more=42',
        f'profile="{URL}"'.encode(),
    ],
)
def test_accepts_the_profile_and_tolerates_versions(header: str | bytes) -> None:
    assert parse_ucp_agent(header) == URL


@pytest.mark.parametrize(
    ("header", "why"),
    [
        ("", "empty"),
        ("   ", "empty"),
        (f"profile={URL}", "an unquoted URL is a Token"),
        ("profile=agent", "a Token"),
        ("profile", "a bare key is boolean true"),
        ("profile=?1", "boolean"),
        ("profile=?0", "boolean"),
        ("profile=:aGVsbG8=:", "byte sequence"),
        ('profile=%"https://a.example/p"', "display string"),
        ("profile=42", "integer"),
        (f'profile=("{URL}")', "inner list"),
        (f'version="2026-04-08"; profile="{URL}"', "profile as a parameter, not a member"),
        ('version="2026-04-08"', "missing profile"),
        ('Profile="https://a.example/p"', "keys are lowercase"),
        ('profile="http://agent.example/p.json"', "not HTTPS"),
        ('profile="ftp://agent.example/p.json"', "not HTTPS"),
        ('profile="agent.example/p.json"', "no scheme"),
        ('profile="https://"', "no host"),
        ('profile="https://user:pw@agent.example/p.json"', "credentials"),
        ('profile="https://agent.example:99999/p.json"', "bad port"),
        (f'profile="{URL}", profile="{URL}"', "duplicate profile"),
        (f'profile="{URL}",', "trailing comma"),
        (f'profile="{URL}" junk', "trailing garbage"),
        ('profile="https://agent.example/é"', "non-ASCII"),
        ('profile="https://agent.example/ a"', "space in URL"),
        (f'profile="https://{"a" * MAX_URL_LENGTH}.example/"', "URL too long"),
        (f'profile="{URL}", pad="{"x" * MAX_HEADER_LENGTH}"', "header too long"),
    ],
)
def test_refuses(header: str, why: str) -> None:
    with pytest.raises(UcpError) as raised:
        parse_ucp_agent(header)
    assert raised.value.code == INVALID_PROFILE_URL, why


def test_caps_are_inclusive() -> None:
    url = "https://a.example/" + "p" * (MAX_URL_LENGTH - len("https://a.example/"))
    assert validate_profile_url(url) == url
    header = f'profile="{url}"'
    padded = header + ', pad="' + "x" * (MAX_HEADER_LENGTH - len(header) - len(', pad=""')) + '"'
    assert len(padded) == MAX_HEADER_LENGTH
    assert parse_ucp_agent(padded) == url


@pytest.mark.parametrize(
    "value",
    [
        None,
        42,
        b"https://a.example/p",
        {"profile": URL},
        "",
        "https://a.example\\@b.example/",
        "HTTP://a.example/",
    ],
)
def test_validate_profile_url_refuses_non_urls(value: object) -> None:
    with pytest.raises(UcpError) as raised:
        validate_profile_url(value)
    assert raised.value.code == INVALID_PROFILE_URL


def test_validate_profile_url_accepts_any_case_scheme_and_a_port() -> None:
    assert validate_profile_url("HTTPS://Agent.Example:8443/p.json") == "HTTPS://Agent.Example:8443/p.json"


def test_validate_profile_url_drops_the_fragment_having_checked_it() -> None:
    """A fragment is never sent: `p.json#a` and `p.json#b` are one resource, one string."""
    for url in ("https://a.example/p.json#a", "https://a.example/p.json#", "https://a.example/p.json#a#b"):
        assert validate_profile_url(url) == "https://a.example/p.json"
    assert validate_profile_url("https://a.example#@b.example/") == "https://a.example"
    for url in ("https://a.example/p.json#a b", "https://a.example/p.json#\\", "https://a.example/#\u00e9"):
        with pytest.raises(UcpError):
            validate_profile_url(url)
