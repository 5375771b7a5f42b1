"""A2A 1.0's own negotiation: the `A2A-Version` and `A2A-Extensions` service parameters.

An A2A agent lists what it speaks in its Agent Card: one `protocolVersion` per entry of
`supportedInterfaces` (`Major.Minor`, patch never considered) and the extensions in
`capabilities.extensions[]`, each possibly `required`. A request names the version it
uses in `A2A-Version` (a header, gRPC metadata, or the `A2A-Version` query parameter;
empty or absent means 0.3) and the extensions it activates in `A2A-Extensions`
(comma-separated URIs). The agent serves exactly that Major.Minor or answers
`VersionNotSupportedError` (-32009); it activates the requested extensions it lists,
ignores the others, answers `ExtensionSupportRequiredError` (-32008) when a required one
is not declared, never falls back to another version of an extension (the URI is the
version), and echoes what it activated in its own `A2A-Extensions`.

`negotiate_a2a` is that, server side: the a2a-sdk checks one expected version per
method; this checks a request against every version the card lists. `choose_a2a_interface`
is the client side, where A2A's "negotiation among several" really happens: picking an
interface and version from the card before sending. Both are pure: they take header
values, a query string or mapping and the card as a mapping, and return frozen values.

Readings this module chose where the specification is silent or inconsistent (each is
documented in docs/protocols.md): a card entry for 1.n also serves 1.m for m < n (the
proto's "use the latest supported minor version per major version"; 0.x minors break,
so a 0.x version is served only where listed); whitespace around list elements is
dropped, as HTTP lists allow; a header and a query parameter that disagree are refused
as ambiguous; extension URIs are compared exactly; the 0.3-era `X-A2A-Extensions` is
read too; and -32009/-32008 carry a `google.rpc.ErrorInfo` in `data` whose `metadata`
(string values only, as ErrorInfo has them) names the versions or extensions at issue.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal
from urllib.parse import unquote_plus

from mcp_negotiation.core.errors import INVALID_PARAMS, PolicyError, Refusal, UsageError
from mcp_negotiation.semver.protocols import ProtocolName, ProtocolVersion, get_supported_versions

__all__ = [
    "DEFAULT_VERSION",
    "ERROR_INFO_TYPE",
    "EXTENSIONS_HEADER",
    "EXTENSION_SUPPORT_REQUIRED",
    "LEGACY_EXTENSIONS_HEADER",
    "MAX_CARD_ENTRIES",
    "MAX_EXTENSIONS",
    "MAX_EXTENSIONS_LENGTH",
    "MAX_URI_LENGTH",
    "MAX_VERSION_LENGTH",
    "VERSION_HEADER",
    "VERSION_NOT_SUPPORTED",
    "A2ACard",
    "A2AChoice",
    "A2AExtension",
    "A2AInterface",
    "A2ANegotiation",
    "A2ARequest",
    "Headers",
    "Query",
    "VersionSource",
    "a2a_error_info",
    "a2a_http_error",
    "a2a_refusal",
    "a2a_release",
    "a2a_wire_version",
    "choose_a2a_interface",
    "negotiate_a2a",
    "parse_a2a_version",
    "read_a2a_request",
    "read_agent_card",
]

VERSION_HEADER: Final = "A2A-Version"
EXTENSIONS_HEADER: Final = "A2A-Extensions"
LEGACY_EXTENSIONS_HEADER: Final = "X-A2A-Extensions"
"""The 0.3-era name of `A2A-Extensions` (a2a-python before 1.0, the old extensions guide)."""
DEFAULT_VERSION: Final = "0.3"
"""What an empty or absent `A2A-Version` means (A2A 1.0 §3.6.2: "Agents MUST interpret
empty value as 0.3 version")."""

VERSION_NOT_SUPPORTED: Final = -32009
EXTENSION_SUPPORT_REQUIRED: Final = -32008
ERROR_INFO_TYPE: Final = "type.googleapis.com/google.rpc.ErrorInfo"
_BAD_REQUEST_TYPE: Final = "type.googleapis.com/google.rpc.BadRequest"
_DOMAIN: Final = "a2a-protocol.org"

MAX_VERSION_LENGTH: Final = 64
"""Longest `A2A-Version` accepted, all its fields together (`1.0` is three characters)."""
MAX_EXTENSIONS_LENGTH: Final = 8192
"""Longest `A2A-Extensions` accepted, all its fields (and `X-A2A-Extensions`) together;
checked before splitting, so the work a request can cause is bounded too."""
MAX_EXTENSIONS: Final = 32
"""Most distinct extension URIs one request may name (cards list a handful)."""
MAX_URI_LENGTH: Final = 2048
"""Longest extension URI accepted, in a request or on a card."""
MAX_CARD_ENTRIES: Final = 256
"""Most interfaces, and most extensions, read from one card: a bridge reads cards it did
not write."""

_RELEASE: Final = re.compile(r"([0-9]{1,9})\.([0-9]{1,9})(?:\.[0-9]{1,9})?")
_OWS: Final = " \t"

_REASONS: Final[Mapping[int, str]] = {
    VERSION_NOT_SUPPORTED: "VERSION_NOT_SUPPORTED",
    EXTENSION_SUPPORT_REQUIRED: "EXTENSION_SUPPORT_REQUIRED",
}
"""ErrorInfo `reason`: "the A2A error type in UPPER_SNAKE_CASE without the Error suffix"."""
_STATUS: Final[Mapping[int, tuple[int, str]]] = {
    VERSION_NOT_SUPPORTED: (400, "FAILED_PRECONDITION"),
    EXTENSION_SUPPORT_REQUIRED: (400, "FAILED_PRECONDITION"),
    INVALID_PARAMS: (400, "INVALID_ARGUMENT"),
}
"""A2A 1.0 §5.4: HTTP status and gRPC status of each refusal this module makes."""

Headers = Mapping[str, str] | Iterable[tuple[str | bytes, str | bytes]]
"""Request headers or gRPC metadata: a mapping (case-insensitive names) or name/value pairs,
as bytes too (an ASGI scope's `headers`)."""
Query = str | bytes | Mapping[str, str | Sequence[str]] | Iterable[tuple[str, str]]
"""A query string (with or without its `?`; an ASGI `query_string`) or its parameters."""
VersionSource = Literal["header", "query", "default"]


# --- Versions ------------------------------------------------------------------------------


def parse_a2a_version(value: str) -> str | None:
    """`Major.Minor` of a version as A2A spells it (``"1.0"``), or None when it is none.

    The patch is dropped ("MUST not be considered when clients and servers negotiate"),
    leading zeros and surrounding whitespace too; `v1.0`, `1`, `1.0rc1` and `latest` are
    not versions.
    """
    matched = _RELEASE.fullmatch(value.strip(_OWS)) if len(value) <= MAX_VERSION_LENGTH else None
    if matched is None:
        return None
    return f"{int(matched[1])}.{int(matched[2])}"


def _major_minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


def _serves(listed: str, requested: str) -> bool:
    """Whether an interface listing `listed` serves `requested` (both `Major.Minor`).

    1.x minors add to each other, so an agent listing 1.2 serves 1.0 and 1.1 as well; 0.x
    minors renamed methods, so a 0.x version is served only where it is listed.
    """
    (major, minor), (wanted_major, wanted_minor) = _major_minor(listed), _major_minor(requested)
    return major == wanted_major and (minor == wanted_minor or (major >= 1 and wanted_minor < minor))


def a2a_wire_version(version: ProtocolVersion) -> str:
    """How an A2A `ProtocolVersion` is said on the wire and on cards: `Major.Minor`, no patch."""
    if version.protocol is not ProtocolName.A2A:
        raise PolicyError(f"{version.version_string} is a {version.protocol} version, not an A2A one")
    return f"{version.major}.{version.minor}"


def a2a_release(version: str) -> ProtocolVersion | None:
    """This project's A2A release (`get_supported_versions("a2a")`) that a wire version names.

    Its newest patch, since patches do not affect compatibility (1.0 → 1.0.1); for 1.x and
    later a minor this library does not know yet (1.1) gets the newest one below it, whose
    capabilities it certainly has. None for anything else, a malformed version included.
    """
    wanted = parse_a2a_version(version)
    if wanted is None:
        return None
    serving = [v for v in get_supported_versions(ProtocolName.A2A) if _serves(wanted, a2a_wire_version(v))]
    return serving[-1] if serving else None


# --- Refusals in A2A's shapes -----------------------------------------------------------------


def excerpt(text: str, limit: int) -> str:
    """At most `limit` characters of `text` to repeat in a refusal, escaped as `ascii()` escapes
    when they are not all printable ASCII: what a peer sent may reach a log, a terminal."""
    cut = text[:limit]
    return cut if cut.isascii() and cut.isprintable() else ascii(cut)


def a2a_refusal(code: int, message: str, metadata: Mapping[str, str] | None = None) -> Refusal:
    """A -32009 or -32008 refusal as A2A 1.0 §9.5 shapes errors: `data` is an array holding
    one `google.rpc.ErrorInfo` (`reason`, `domain` "a2a-protocol.org", string `metadata`)."""
    reason = _REASONS.get(code)
    if reason is None:
        raise PolicyError(f"{code} is not -32009 or -32008")
    info: dict[str, Any] = {"@type": ERROR_INFO_TYPE, "reason": reason, "domain": _DOMAIN}
    if metadata:
        for key, value in metadata.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise PolicyError(f"ErrorInfo metadata maps strings to strings, got {key!r}: {value!r}")
        info["metadata"] = MappingProxyType(dict(metadata))
    return Refusal(code, message, (MappingProxyType(info),))


def _invalid(field: str, description: str) -> Refusal:
    """-32602 as A2A 1.0 §9.5's validation example has it: a `google.rpc.BadRequest`."""
    violation = MappingProxyType({"field": field, "description": description})
    data = MappingProxyType({"@type": _BAD_REQUEST_TYPE, "fieldViolations": (violation,)})
    return Refusal(INVALID_PARAMS, f"Invalid params: {field} {description}", (data,))


def a2a_error_info(refusal: Refusal) -> Mapping[str, Any] | None:
    """The first `google.rpc.ErrorInfo` of an A2A refusal's `data`, or None (a peer may send none)."""
    if isinstance(refusal.data, Sequence) and not isinstance(refusal.data, str):
        for item in refusal.data:
            if isinstance(item, Mapping) and item.get("@type") == ERROR_INFO_TYPE:
                return item
    return None


def a2a_http_error(refusal: Refusal) -> tuple[int, dict[str, Any]]:
    """The HTTP+JSON binding's answer for a refusal made here: its status and its body.

    A2A 1.0 §11.6: a `google.rpc.Status` object, `{"error": {"code", "status", "message",
    "details"}}`, where `status` is also the gRPC status code a gRPC server answers with
    (§5.4). (The spec's §6.4 example shows an RFC 9457 problem document instead; the
    normative §11.6 wins.)
    """
    known = _STATUS.get(refusal.code)
    if known is None:
        raise PolicyError(f"{refusal.code} is not a refusal of A2A's negotiation")
    status, name = known
    body = refusal.to_jsonrpc_error()
    details = body.get("data")
    listed = details if isinstance(details, list) else []
    error = {"code": status, "status": name, "message": refusal.message, "details": listed}
    return status, {"error": error}


# --- The card ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class A2AInterface:
    """One `supportedInterfaces` entry: where, over which binding, at which `Major.Minor`."""

    url: str
    binding: str
    version: str
    tenant: str = ""


@dataclass(frozen=True, slots=True)
class A2AExtension:
    """One `capabilities.extensions` entry: its URI (which carries its version) and whether
    a request must declare it."""

    uri: str
    required: bool = False


_CARD_FEATURES: Final[frozenset[str]] = frozenset(
    {
        "streaming",
        "pushNotifications",
        "pushNotifications.multipleConfigs",
        "stateTransitionHistory",
        "extendedAgentCard",
        "skills",
        "signedAgentCard",
        "multipleInterfaces",
        "extensions",
        "multiTenancy",
    }
)
"""The names of `get_supported_versions("a2a")` that a card must declare to have; the rest
(tasks, cancelling, listing, input-required) come with the version itself."""


@dataclass(frozen=True, slots=True)
class A2ACard:
    """What negotiation reads of an Agent Card, read once by `read_agent_card`.

    `interfaces` keep the card's preference order ("the first entry is preferred");
    `declared` are the card-declared features among `get_supported_versions("a2a")`'s names.
    """

    interfaces: tuple[A2AInterface, ...]
    extensions: tuple[A2AExtension, ...]
    declared: frozenset[str]

    @property
    def versions(self) -> tuple[str, ...]:
        """Every version listed, once each, in the card's order."""
        return tuple(dict.fromkeys(interface.version for interface in self.interfaces))

    @property
    def required_extensions(self) -> tuple[str, ...]:
        return tuple(extension.uri for extension in self.extensions if extension.required)

    def interface_for(self, version: str, url: str | None = None) -> A2AInterface | None:
        """The interface serving `version` (`Major.Minor`), at `url` when given: the first
        listing exactly that version, else the first whose newer minor serves it."""
        candidates = [i for i in self.interfaces if url is None or i.url == url]
        exact = [i for i in candidates if i.version == version]
        return next(iter(exact or [i for i in candidates if _serves(i.version, version)]), None)

    def features_at(self, version: str) -> frozenset[str]:
        """This project's A2A feature names (`get_supported_versions("a2a")`) an agent with
        this card has at `version`: the release's, less those the card does not declare.

        `ValueError` when the card serves no such version or the library knows no release
        for it: a leg is only ever built for a version that was agreed.
        """
        wanted = parse_a2a_version(version)
        if wanted is None or self.interface_for(wanted) is None:
            listed = ", ".join(self.versions)
            raise PolicyError(f"the card serves no A2A version {version!r}; it lists {listed}")
        release = a2a_release(wanted)
        if release is None:
            raise PolicyError(f"A2A {wanted} is no release this library knows")
        return release.capabilities - (_CARD_FEATURES - self.declared)


def _text(where: str, value: object, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise PolicyError(f"{where} must be a non-empty string, got {value!r}")
    return value


def _entries(where: str, value: object) -> list[Mapping[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list | tuple) or not all(isinstance(item, Mapping) for item in value):
        raise PolicyError(f"{where} must be an array of objects")
    if len(value) > MAX_CARD_ENTRIES:
        raise PolicyError(f"{where} has more than {MAX_CARD_ENTRIES} entries")
    return list(value)


def _card_version(where: str, value: object) -> str:
    version = parse_a2a_version(_text(where, value))
    if version is None:
        raise PolicyError(f"{where} must be Major.Minor, such as 1.0; got {value!r}")
    return version


def _interfaces(card: Mapping[str, Any]) -> tuple[A2AInterface, ...]:
    """`supportedInterfaces` (1.0); for a 0.3 card, its top-level `url`, `preferredTransport`
    and `additionalInterfaces`, all at its top-level `protocolVersion`."""
    if "supportedInterfaces" in card:
        return tuple(
            A2AInterface(
                _text(f"supportedInterfaces[{n}].url", entry.get("url")),
                _text(f"supportedInterfaces[{n}].protocolBinding", entry.get("protocolBinding")),
                _card_version(f"supportedInterfaces[{n}].protocolVersion", entry.get("protocolVersion")),
                _text(f"supportedInterfaces[{n}].tenant", entry.get("tenant"), required=False),
            )
            for n, entry in enumerate(_entries("supportedInterfaces", card["supportedInterfaces"]))
        )
    if "protocolVersion" not in card:
        raise PolicyError("the card lists no version: it has neither supportedInterfaces nor protocolVersion")
    version = _card_version("protocolVersion", card["protocolVersion"])
    preferred = _text("preferredTransport", card.get("preferredTransport", "JSONRPC"))
    others = _entries("additionalInterfaces", card.get("additionalInterfaces"))
    return (
        A2AInterface(_text("url", card.get("url")), preferred, version),
        *(
            A2AInterface(
                _text(f"additionalInterfaces[{n}].url", entry.get("url")),
                _text(f"additionalInterfaces[{n}].transport", entry.get("transport")),
                version,
            )
            for n, entry in enumerate(others)
        ),
    )


def _extensions(capabilities: Mapping[str, Any]) -> tuple[A2AExtension, ...]:
    extensions: dict[str, A2AExtension] = {}
    for n, entry in enumerate(_entries("capabilities.extensions", capabilities.get("extensions"))):
        uri = _text(f"capabilities.extensions[{n}].uri", entry.get("uri"))
        required = entry.get("required", False)
        if not isinstance(required, bool):
            raise PolicyError(
                f"capabilities.extensions[{n}].required must be true or false, got {required!r}"
            )
        if len(uri) > MAX_URI_LENGTH:
            raise PolicyError(f"capabilities.extensions[{n}].uri is longer than {MAX_URI_LENGTH} characters")
        if uri in extensions:
            raise PolicyError(f"capabilities.extensions lists {uri} more than once")
        extensions[uri] = A2AExtension(uri, required)
    return tuple(extensions.values())


def read_agent_card(card: Mapping[str, Any]) -> A2ACard:
    """Read what negotiation needs from an Agent Card (parsed JSON), once.

    A 1.0 card lists `supportedInterfaces[]` (`url`, `protocolBinding`, `protocolVersion`,
    `tenant`); a 0.3 card, read when `supportedInterfaces` is absent, has one top-level
    `protocolVersion` for its `url` and `additionalInterfaces`. Versions written with a
    patch (`0.3.0`) are read as `Major.Minor`. Raises `ValueError`, naming the field, for a
    card that lists no version or holds a malformed entry: the card is the caller's.
    """
    if not isinstance(card, Mapping):
        raise PolicyError(f"an agent card is a JSON object, got {type(card).__name__}")
    interfaces = _interfaces(card)
    if not interfaces:
        raise PolicyError("the card's supportedInterfaces is empty: it serves no version")
    capabilities = card.get("capabilities")
    if capabilities is None:
        capabilities = {}
    if not isinstance(capabilities, Mapping):
        raise PolicyError("capabilities must be an object")
    extensions = _extensions(capabilities)
    flags = {
        "streaming": capabilities.get("streaming") is True,
        "pushNotifications": capabilities.get("pushNotifications") is True,
        "pushNotifications.multipleConfigs": capabilities.get("pushNotifications") is True,
        "stateTransitionHistory": capabilities.get("stateTransitionHistory") is True,
        "extendedAgentCard": capabilities.get("extendedAgentCard") is True
        or card.get("supportsAuthenticatedExtendedCard") is True,
        "skills": bool(card.get("skills")),
        "signedAgentCard": bool(card.get("signatures")),
        "multipleInterfaces": len({(i.url, i.binding) for i in interfaces}) > 1,
        "extensions": bool(extensions),
        "multiTenancy": any(i.tenant for i in interfaces),
    }
    return A2ACard(interfaces, extensions, frozenset(name for name, on in flags.items() if on))


# --- What a request says -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class A2ARequest:
    """What a request's `A2A-Version` and `A2A-Extensions` say, read within the bounds.

    `version` is the `Major.Minor` asked for (``"0.3"`` when nothing was sent), None when
    what was sent is no version or could not be read; `version_sent` is the value as sent
    (at most `MAX_VERSION_LENGTH` characters; "" when nothing was; refusals repeat it
    escaped when it is not printable ASCII). `extensions` are the URIs asked for, in
    their order, once each; `extensions_header` the name they came under (None: none).
    `refusal` is a -32602 for input past a bound or contradicting itself, and then the
    other fields are what could be read before it.
    """

    version: str | None
    version_sent: str
    version_source: VersionSource
    extensions: tuple[str, ...]
    extensions_header: str | None
    refusal: Refusal | None = None


def _decoded(value: object, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("latin-1")  # what HTTP servers (and ASGI) decode header bytes as
    raise UsageError(f"a {what} must be str or bytes, got {type(value).__name__}")


def _pairs(source: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> Iterable[tuple[Any, Any]]:
    if isinstance(source, Mapping):
        return source.items()
    return source


def _header_fields(headers: Headers | None) -> dict[str, list[str]]:
    """The values of the three names this module reads, by lower-case name, in order."""
    wanted = {VERSION_HEADER.lower(), EXTENSIONS_HEADER.lower(), LEGACY_EXTENSIONS_HEADER.lower()}
    fields: dict[str, list[str]] = {name: [] for name in wanted}
    for name, value in _pairs(headers or ()):
        key = _decoded(name, "header name").lower()
        if key in wanted:
            values = value if isinstance(value, list | tuple) else (value,)
            fields[key] += (_decoded(item, "header value") for item in values)
    return fields


def _query_values(query: Query | None) -> list[str]:
    """The `A2A-Version` parameters of a query (service parameter names are case-insensitive)."""
    name = VERSION_HEADER.lower()
    if query is None:
        return []
    if isinstance(query, str | bytes):
        found = []
        for piece in _decoded(query, "query string").removeprefix("?").split("&"):
            key, _, value = piece.partition("=")
            # Only a short key can decode to the name: a long one is not unquoted at all.
            if len(key) <= 3 * len(name) and unquote_plus(key).lower() == name:
                found.append(unquote_plus(value))
        return found
    found = []
    for key, value in _pairs(query):
        if _decoded(key, "query parameter name").lower() == name:
            values = (value,) if isinstance(value, str | bytes) else value
            found += (_decoded(item, "query parameter value") for item in values)
    return found


def _elements(fields: Sequence[str]) -> list[str]:
    """The elements of a comma-separated list spread over fields, without empty ones."""
    return [item for field in fields for element in field.split(",") if (item := element.strip(_OWS))]


def _identity(value: str) -> str:
    """What two sent versions share when they name one version: `1.0` is `1.0.1` is ` 1.0`."""
    return parse_a2a_version(value) or value


def _one_version(where: str, fields: Sequence[str]) -> tuple[str, Refusal | None]:
    """The one version `fields` name, as first sent ("": nothing sent), or why they name none.

    Repeats of one version (`1.0` and `1.0.1` are one) are that version; two are ambiguous.
    """
    if sum(len(field) + 1 for field in fields) > MAX_VERSION_LENGTH:
        return "", _invalid(where, f"is longer than {MAX_VERSION_LENGTH} characters")
    sent: dict[str, str] = {}
    for value in _elements(fields):
        sent.setdefault(_identity(value), value)
    if len(sent) > 1:
        named = excerpt(", ".join(sent.values()), MAX_VERSION_LENGTH)
        return "", _invalid(where, f"names more than one version: {named}")
    return next(iter(sent.values()), ""), None


def _read_version(
    fields: dict[str, list[str]], query: Query | None
) -> tuple[str, VersionSource, Refusal | None]:
    """The version sent as sent ("" for none), where it came from, and a -32602 if unreadable."""
    header, refusal = _one_version(VERSION_HEADER, fields[VERSION_HEADER.lower()])
    if refusal is not None:
        return "", "header", refusal
    parameter, refusal = _one_version(f"the {VERSION_HEADER} query parameter", _query_values(query))
    if refusal is not None:
        return "", "query", refusal
    if header and parameter and _identity(header) != _identity(parameter):
        said, asked = excerpt(header, MAX_VERSION_LENGTH), excerpt(parameter, MAX_VERSION_LENGTH)
        contradiction = f"says {said} but the query parameter {asked}"
        return header, "header", _invalid(VERSION_HEADER, contradiction)
    if header:
        return header, "header", None
    if parameter:
        return parameter, "query", None
    return "", "default", None


def _printable_uri(uri: str) -> bool:
    return uri.isascii() and uri.isprintable() and " " not in uri


def _read_extensions(fields: dict[str, list[str]]) -> tuple[tuple[str, ...], str | None, Refusal | None]:
    current, legacy = fields[EXTENSIONS_HEADER.lower()], fields[LEGACY_EXTENSIONS_HEADER.lower()]
    name = EXTENSIONS_HEADER if current or not legacy else LEGACY_EXTENSIONS_HEADER
    if sum(len(field) + 1 for field in (*current, *legacy)) > MAX_EXTENSIONS_LENGTH:
        return (), name, _invalid(name, f"is longer than {MAX_EXTENSIONS_LENGTH} characters")
    uris = tuple(dict.fromkeys(_elements([*current, *legacy])))
    if len(uris) > MAX_EXTENSIONS:
        return (), name, _invalid(name, f"names more than {MAX_EXTENSIONS} extensions")
    if any(len(uri) > MAX_URI_LENGTH for uri in uris):
        return (), name, _invalid(name, f"holds a URI longer than {MAX_URI_LENGTH} characters")
    if not all(_printable_uri(uri) for uri in uris):
        return (), name, _invalid(name, "holds a character no URI has (a space, a control or non-ASCII)")
    return uris, name if uris else None, None


def read_a2a_request(headers: Headers | None = None, query: Query | None = None) -> A2ARequest:
    """Read `A2A-Version` (header, or query parameter) and `A2A-Extensions` of one request.

    Never raises for what a client sent: input past a bound (`MAX_VERSION_LENGTH`,
    `MAX_EXTENSIONS_LENGTH`, `MAX_EXTENSIONS`, `MAX_URI_LENGTH`), a URI with a space,
    control or non-ASCII character, two different versions in the headers, or a header
    and query parameter that disagree all give `refusal` a -32602. Repeated fields are one
    comma-separated list, as in HTTP; names are case-insensitive (gRPC sends them lower-case).
    """
    fields = _header_fields(headers)
    sent, source, refusal = _read_version(fields, query)
    extensions, header, ext_refusal = _read_extensions(fields)
    version = None if refusal else parse_a2a_version(sent) if sent else DEFAULT_VERSION
    return A2ARequest(version, sent, source, extensions, header, refusal or ext_refusal)


# --- Server side --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class A2ANegotiation:
    """What an agent answers one request: the version it serves it at and the extensions it
    activates, or the refusal it answers with instead (then `version` is None and nothing
    is activated).

    `ignored` are the extensions asked for that the card does not list: the request goes
    on without them (A2A 1.0 §4.6.3), and no other version of one is put in its place.
    """

    request: A2ARequest
    version: str | None
    interface: A2AInterface | None
    activated: tuple[str, ...]
    ignored: tuple[str, ...]
    refusal: Refusal | None

    @property
    def ok(self) -> bool:
        return self.refusal is None

    @property
    def response_headers(self) -> tuple[tuple[str, str], ...]:
        """The echo of the activated extensions (empty when none), under the name the request
        used: "the response SHOULD include the A2A-Extensions header" (extensions guide)."""
        if not self.activated:
            return ()
        return ((self.request.extensions_header or EXTENSIONS_HEADER, ",".join(self.activated)),)


def _card(card: A2ACard | Mapping[str, Any]) -> A2ACard:
    return card if isinstance(card, A2ACard) else read_agent_card(card)


def _unsupported_version(request: A2ARequest, supported: Sequence[str]) -> Refusal:
    sent = excerpt(request.version_sent, MAX_VERSION_LENGTH)
    asked = sent or f"{DEFAULT_VERSION}, assumed for a request without {VERSION_HEADER}"
    speaks = f"this agent speaks {', '.join(supported)}" if supported else "no interface here"
    return a2a_refusal(
        VERSION_NOT_SUPPORTED,
        f"Version not supported: A2A {asked} ({speaks})",
        {
            "requestedVersion": sent or DEFAULT_VERSION,
            "supportedVersions": ",".join(supported),
        },
    )


def _required_missing(missing: Sequence[str], ignored: Sequence[str]) -> Refusal:
    message = f"Extension support required: {', '.join(missing)}"
    if ignored:
        message += (
            f" (the request declared {len(ignored)} other extension(s) this agent does not support;"
            " it does not fall back to another version of an extension)"
        )
    return a2a_refusal(EXTENSION_SUPPORT_REQUIRED, message, {"requiredExtensions": ",".join(missing)})


def negotiate_a2a(
    card: A2ACard | Mapping[str, Any],
    headers: Headers | None = None,
    query: Query | None = None,
    *,
    interface_url: str | None = None,
) -> A2ANegotiation:
    """Serve one request as its `A2A-Version` and `A2A-Extensions` ask, or refuse it.

    `card` is the agent's own (read it once with `read_agent_card` on a hot path);
    `interface_url`, the URL the request arrived at, limits the versions to that
    interface's ("If the version is not supported by the interface, agents MUST return
    a VersionNotSupportedError"). In order: malformed or unbounded input is refused with
    -32602; a version no (such) interface serves with -32009, whose ErrorInfo metadata
    has `requestedVersion` and `supportedVersions`; a `required` extension the request
    does not declare with -32008, metadata `requiredExtensions`. Otherwise the listed
    extensions asked for are activated and the others ignored. Never raises for what a
    client sent; `ValueError` for a malformed card.
    """
    offer = _card(card)
    request = read_a2a_request(headers, query)
    if request.refusal is not None:
        return A2ANegotiation(request, None, None, (), (), request.refusal)
    interface = offer.interface_for(request.version, interface_url) if request.version else None
    if interface is None:
        here = [i.version for i in offer.interfaces if interface_url is None or i.url == interface_url]
        refusal = _unsupported_version(request, tuple(dict.fromkeys(here)))
        return A2ANegotiation(request, None, None, (), (), refusal)
    listed = {extension.uri for extension in offer.extensions}
    activated = tuple(uri for uri in request.extensions if uri in listed)
    ignored = tuple(uri for uri in request.extensions if uri not in listed)
    missing = [uri for uri in offer.required_extensions if uri not in activated]
    if missing:
        return A2ANegotiation(request, None, None, (), ignored, _required_missing(missing, ignored))
    return A2ANegotiation(request, request.version, interface, activated, ignored, None)


# --- Client side --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class A2AChoice:
    """What a client sends an agent: the interface and version it picked from the card, the
    extensions it activates, and the headers that say so; or, when the card leaves it no
    choice, the refusal the agent would answer (then `interface` and `version` are None)."""

    interface: A2AInterface | None
    version: str | None
    extensions: tuple[str, ...]
    refusal: Refusal | None

    @property
    def ok(self) -> bool:
        return self.refusal is None

    @property
    def headers(self) -> tuple[tuple[str, str], ...]:
        """`A2A-Version`, and `A2A-Extensions` when any is activated."""
        if self.version is None:
            return ()
        sent = ((VERSION_HEADER, self.version),)
        return (*sent, (EXTENSIONS_HEADER, ",".join(self.extensions))) if self.extensions else sent


def _versions(versions: Iterable[str]) -> tuple[str, ...]:
    if isinstance(versions, str | bytes):
        raise PolicyError(f"versions must be a collection of versions, not the single string {versions!r}")
    chosen = []
    for version in versions:
        parsed = parse_a2a_version(version) if isinstance(version, str) else None
        if parsed is None:
            raise PolicyError(f"versions must be Major.Minor, such as 1.0; got {version!r}")
        chosen.append(parsed)
    if not chosen:
        raise PolicyError("versions is empty: a client speaks at least one")
    return tuple(dict.fromkeys(chosen))


def choose_a2a_interface(
    card: A2ACard | Mapping[str, Any],
    versions: Iterable[str],
    *,
    bindings: Iterable[str] | None = None,
    extensions: Iterable[str] = (),
) -> A2AChoice:
    """Pick what to send an agent, from its card, before sending anything.

    `versions` are the client's, most preferred first: the first one an interface (of one
    of `bindings`, when given) serves wins, and among those interfaces the card's earliest.
    So a client that lists only ``["1.0"]`` never falls back to 0.3 ("avoid automatic
    fallback to older versions, to prevent silently losing functionality"). `extensions`
    are the URIs the client supports; the card's own among them are activated. When no
    interface serves a listed version the choice carries the -32009 the agent would answer,
    and when the card requires an extension the client lacks, the -32008.
    """
    offer = _card(card)
    wanted = _versions(versions)
    allowed = None if bindings is None else frozenset(bindings)
    interfaces = [i for i in offer.interfaces if allowed is None or i.binding in allowed]
    narrowed = A2ACard(tuple(interfaces), offer.extensions, offer.declared)
    found = next(
        ((version, interface) for version in wanted if (interface := narrowed.interface_for(version))),
        None,
    )
    if found is None:
        listed = tuple(dict.fromkeys(i.version for i in interfaces))
        supported = f"the card lists {', '.join(listed)}" if listed else "no interface of those bindings"
        refusal = a2a_refusal(
            VERSION_NOT_SUPPORTED,
            f"Version not supported: A2A {', '.join(wanted)} ({supported})",
            {"requestedVersion": wanted[0], "supportedVersions": ",".join(listed)},
        )
        return A2AChoice(None, None, (), refusal)
    version, interface = found
    own = tuple(dict.fromkeys(extensions))
    listed_uris = {extension.uri for extension in offer.extensions}
    activated = tuple(uri for uri in own if uri in listed_uris)
    missing = [uri for uri in offer.required_extensions if uri not in activated]
    if missing:
        return A2AChoice(None, None, (), _required_missing(missing, ()))
    return A2AChoice(interface, version, activated, None)
