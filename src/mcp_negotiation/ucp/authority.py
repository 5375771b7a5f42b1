"""Namespace authority binding (UCP 2026-08-25): a `schema` URL must come from the name's owner.

An entity named `com.example.pay` may only describe itself with a schema served from
`example.com` or a subdomain whose reversed labels are a prefix of the name
(`pay.example.com`). The specification's derivation: parse the URL (WHATWG), require
`https` and no userinfo, take the host (no port), lowercase it, strip a trailing dot,
refuse IP literals and single-label hosts, reverse its labels into `authority_prefix`,
and accept when the name equals it or continues it with a `.` (label-aligned, so
`com.example` does not own `com.examplecorp.*`). No Public Suffix List is consulted.

Python has no WHATWG parser, and `urllib` reads some URLs differently from one
(`https://ucp.dev\\@evil.example/` names `ucp.dev` to a browser). So wherever the two
could disagree the URL is refused, never guessed at: anything `validate_profile_url`
refuses (non-ASCII, spaces, backslashes, credentials, no host), percent-escapes and
anything but letters, digits, `-` and `_` in the host. A refused URL binds nothing: the
check answers only whether the binding holds, and an entity whose binding does not hold
is treated as absent (the caller's rule, see `negotiate`).
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

from .errors import UcpError
from .header import validate_profile_url

__all__ = ["authority_binds", "authority_prefix"]

_LABEL: Final = re.compile(r"[a-z0-9_-]+")
_NUMBER: Final = re.compile(r"[0-9]+|0x[0-9a-f]*")
"""A last label the WHATWG host parser reads as IPv4 (`93.184.216.34`, `127.1`, `0x7f.1`)."""


def authority_prefix(schema_url: object) -> str | None:
    """The reversed host of `schema_url` (`ucp.dev` → `dev.ucp`), or None when the URL
    cannot carry an authority: not https, userinfo, an IP literal, one label, or a host
    this module does not read the way a WHATWG parser would."""
    try:
        url = validate_profile_url(schema_url)  # https, printable ASCII, no credentials, a host
    except UcpError:
        return None
    host = urlsplit(url).hostname or ""
    if host.endswith("."):
        host = host[:-1]
    labels = host.split(".")
    if len(labels) < 2 or not all(_LABEL.fullmatch(label) for label in labels):
        return None  # one label, an empty label, IPv6 (`:`), a percent-escape, a stray character
    if _NUMBER.fullmatch(labels[-1]):
        return None
    if any(label.startswith("xn--") and not _is_punycode(label[4:]) for label in labels):
        return None  # an A-label a WHATWG parser fails on
    return ".".join(reversed(labels))


def _is_punycode(encoded: str) -> bool:
    if not encoded:
        return False
    try:
        encoded.encode("ascii").decode("punycode")
    except UnicodeError:
        return False
    return True


def authority_binds(name: str, schema_url: object) -> bool:
    """Whether an entity called `name` may be described by the schema at `schema_url`:
    its reversed host equals `name` (exact) or is `name`'s leading labels (prefixed)."""
    prefix = authority_prefix(schema_url)
    return prefix is not None and (name == prefix or name.startswith(prefix + "."))
