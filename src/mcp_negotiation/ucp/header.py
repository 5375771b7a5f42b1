"""The `UCP-Agent` header and the profile URL it carries.

The header is an RFC 8941 Dictionary, `profile="https://…"`, and nothing else: it names
the platform's profile and carries no versions (those come from the profile itself).
Parsing it as a Dictionary rather than with a regular expression matters because
`profile=https://…` is a valid Dictionary whose value is a *Token*, not a string, and
a hand-written parser tends to accept it.

Every source of a profile URL (this header, `arguments.meta["ucp-agent"].profile`, the
legacy `_meta`, a session default) goes through `validate_profile_url`, so they all
refuse the same things and name one resource by one string (its fragment dropped).
"""

from __future__ import annotations

import logging
from typing import Final
from urllib.parse import urlsplit

import http_sf

from ..core.client_log import report
from .errors import invalid_profile_url

__all__ = ["MAX_HEADER_LENGTH", "MAX_URL_LENGTH", "parse_ucp_agent", "validate_profile_url"]

MAX_URL_LENGTH: Final = 2048
"""Longest profile URL accepted: real ones are under 100 characters, and the URL is a
cache key and a log attribute, so an unbounded one is a memory and log-injection risk."""

MAX_HEADER_LENGTH: Final = 4096
"""Longest `UCP-Agent` value accepted, checked before parsing so the parser's work is
bounded too."""


def _refuse_duplicate_profile(key: str, context: str) -> None:
    # RFC 8941 lets the last duplicate win; two profiles in one header is ambiguity
    # that only an attacker or a bug produces, so it is refused rather than resolved.
    if key == "profile" and context == "dictionary":
        raise invalid_profile_url("the UCP-Agent header has a duplicate profile member")  # (via the parser)


def validate_profile_url(url: object) -> str:
    """Return `url` without its fragment if it is an acceptable profile URL, else raise
    `invalid_profile_url`.

    Accepts `object` because URLs from JSON arguments can be anything. Only printable
    ASCII is allowed (internationalised hosts must arrive in A-label form), and
    backslashes and credentials are refused because URL parsers disagree about them
    (`https://a.example\\@b.example/` names a different host in a browser). The whole
    URL is checked, fragment included, but what is returned has none: a fragment is never
    sent to the server (RFC 9110, section 4.2.4), so `…/p.json#a` and `…/p.json#b` are one
    resource, and the URL returned is what keys it everywhere (the resolver's cache and
    fetches in flight, the fleet's shared cache, agreements), so that varying the fragment
    neither fetches a profile again nor takes another entry.
    """
    if not isinstance(url, str):
        raise invalid_profile_url("the profile URL must be a string")
    if not url:
        raise invalid_profile_url("the profile URL is empty")
    if len(url) > MAX_URL_LENGTH:
        raise invalid_profile_url(f"the profile URL is longer than {MAX_URL_LENGTH} characters")
    return _checked(str(url))


def _checked(url: str) -> str:
    """The rest of `validate_profile_url`: what a URL's characters and parts must be."""
    # Printable ASCII without the space: the C string methods, not a Python loop per character.
    if not (url.isascii() and url.isprintable()) or " " in url or "\\" in url:
        raise invalid_profile_url("the profile URL must be printable ASCII without spaces or backslashes")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a port that is no number or out of range, a bad IPv6 literal
        report(logging.DEBUG, "a profile URL does not parse", exc=exc)
        raise invalid_profile_url("the profile URL does not parse") from None
    if parts.scheme.lower() != "https":
        raise invalid_profile_url("the profile URL must use https")
    if parts.username is not None or parts.password is not None:
        raise invalid_profile_url("the profile URL must not carry credentials")
    if not parts.hostname:
        raise invalid_profile_url("the profile URL has no host")
    if port == 0:
        raise invalid_profile_url("the profile URL has port 0")
    return url.partition("#")[0]


def parse_ucp_agent(value: str | bytes) -> str:
    """Return the profile URL of a `UCP-Agent` header value.

    A `version` parameter or member, seen in the wild but not in the specification, is
    tolerated and ignored: the platform's versions come from its profile, never from a
    claim next to it. Other unknown members are ignored as RFC 8941 asks.
    """
    if len(value) > MAX_HEADER_LENGTH:
        raise invalid_profile_url(f"the UCP-Agent header is longer than {MAX_HEADER_LENGTH} characters")
    try:
        raw = value if isinstance(value, bytes) else value.encode("ascii")
        parsed = http_sf.parse(raw, tltype="dictionary", on_duplicate_key=_refuse_duplicate_profile)
    except (UnicodeError, http_sf.StructuredFieldError) as exc:
        report(logging.DEBUG, "a UCP-Agent header does not parse", exc=exc)
        raise invalid_profile_url("the UCP-Agent header is not an RFC 8941 dictionary") from None
    if not isinstance(parsed, dict) or not parsed:
        raise invalid_profile_url("the UCP-Agent header is empty")
    if "profile" not in parsed:
        raise invalid_profile_url("the UCP-Agent header has no profile member")
    member = parsed["profile"]
    bare = member[0] if isinstance(member, tuple) else member
    # `type(...) is str`: Tokens, Display Strings, booleans and byte sequences are all
    # distinct types in http_sf, and only a quoted sf-string is a profile URL.
    if type(bare) is not str:
        raise invalid_profile_url("the UCP-Agent profile must be a quoted string")
    return validate_profile_url(bare)
