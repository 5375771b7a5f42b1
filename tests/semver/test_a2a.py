"""A2A 1.0's `A2A-Version` and `A2A-Extensions`, negotiated against agent cards.

The vectors come from the research notes /work/notes/a2a.md, which quote the A2A 1.0
specification (SPEC-1.0: a2aproject/A2A docs/specification.md, "Latest Released Version
1.0.0"), its extensions guide (EXT-GUIDE) and a2a-python (the SDK); each test names the
section it copies. Where the notes mark a rule as inference, the test says so and names
the reading docs/protocols.md documents.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_negotiation.semver import (
    EXTENSION_SUPPORT_REQUIRED,
    VERSION_NOT_SUPPORTED,
    A2ACard,
    A2AExtension,
    A2AInterface,
    ProtocolVersion,
    a2a_error_info,
    a2a_http_error,
    a2a_refusal,
    a2a_release,
    a2a_wire_version,
    choose_a2a_interface,
    get_supported_versions,
    negotiate_a2a,
    parse_a2a_version,
    read_a2a_request,
    read_agent_card,
)
from mcp_negotiation.semver.a2a import (
    MAX_EXTENSIONS,
    MAX_EXTENSIONS_LENGTH,
    MAX_URI_LENGTH,
    MAX_VERSION_LENGTH,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "a2a_negotiation.py"

GEOLOCATION = "https://example.com/extensions/geolocation/v1"
CITATIONS = "https://standards.org/extensions/citations/v1"
BOTH = f"{GEOLOCATION},{CITATIONS}"
"""SPEC-1.0 §3.2.6, §9.2, §11.2, §14.2.2: the `A2A-Extensions` example value, verbatim."""

SAMPLE_INTERFACES = [
    {
        "url": "https://georoute-agent.example.com/a2a/v1",
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    },
    {
        "url": "https://georoute-agent.example.com/a2a/grpc",
        "protocolBinding": "GRPC",
        "protocolVersion": "1.0",
    },
    {
        "url": "https://georoute-agent.example.com/a2a/json",
        "protocolBinding": "HTTP+JSON",
        "protocolVersion": "1.0",
    },
]
"""SPEC-1.0 §8.5's sample card, its `supportedInterfaces` verbatim (notes §6.3)."""

SAMPLE_CAPABILITIES = {
    "streaming": True,
    "pushNotifications": True,
    "stateTransitionHistory": False,
    "extendedAgentCard": True,
}
"""SPEC-1.0 §8.5's `capabilities`, verbatim (with the leftover `stateTransitionHistory`)."""

SAMPLE_CARD = {"supportedInterfaces": SAMPLE_INTERFACES, "capabilities": SAMPLE_CAPABILITIES}

RESEARCH_CARD_TEXT = """{
  "name": "Research Assistant Agent",
  "description": "AI agent for academic research and fact-checking",
  "supportedInterfaces": [
    {
      "url": "https://research-agent.example.com/a2a/v1",
      "protocolBinding": "HTTP+JSON",
      "protocolVersion": "0.3",
    }
  ],
  "capabilities": {
    "streaming": false,
    "pushNotifications": false,
    "extensions": [
      {
        "uri": "https://standards.org/extensions/citations/v1",
        "description": "Provides citation formatting and source verification",
        "required": false
      },
      {
        "uri": "https://example.com/extensions/geolocation/v1",
        "description": "Location-based search capabilities",
        "required": false
      }
    ]
  },
  "defaultInputModes": ["text/plain"],
  "defaultOutputModes": ["text/plain"]
}"""
"""SPEC-1.0 §4.6.1's card (notes §6.3), with its trailing comma, which makes it no JSON;
the skills are left out."""

RESEARCH_CARD: dict[str, Any] = json.loads(RESEARCH_CARD_TEXT.replace('"0.3",\n', '"0.3"\n'))
"""The same card with the trailing comma removed."""


def with_extensions(*extensions: tuple[str, bool], interfaces: list[dict[str, str]] | None = None) -> A2ACard:
    return read_agent_card(
        {
            "supportedInterfaces": interfaces or SAMPLE_INTERFACES,
            "capabilities": {
                "extensions": [{"uri": uri, "required": required} for uri, required in extensions]
            },
        }
    )


def interface(
    version: str, url: str = "https://agent.example/a2a", binding: str = "JSONRPC"
) -> dict[str, str]:
    return {"url": url, "protocolBinding": binding, "protocolVersion": version}


def info(refusal: Any) -> dict[str, Any]:
    """The ErrorInfo of a refusal's JSON-RPC error, as the client receives it."""
    data = refusal.to_jsonrpc_error()["data"]
    assert isinstance(data, list)
    assert len(data) == 1
    found: dict[str, Any] = data[0]
    return found


# --- SPEC-1.0's own examples ---------------------------------------------------------------------


def test_the_version_header_of_section_3_6_1_is_served_on_the_preferred_interface() -> None:
    """SPEC-1.0 §3.6.1 "A2A-Version: 1.0" against §8.5's card: the first interface is preferred (§8.3.1)."""
    answer = negotiate_a2a(SAMPLE_CARD, {"Host": "agent.example.com", "A2A-Version": "1.0"})
    assert answer.ok
    assert answer.version == "1.0"
    assert answer.interface == A2AInterface("https://georoute-agent.example.com/a2a/v1", "JSONRPC", "1.0")
    assert answer.request.version_source == "header"
    assert answer.response_headers == ()


def test_the_query_parameter_of_section_3_6_1() -> None:
    """SPEC-1.0 §3.6.1: "GET /tasks/task-123?A2A-Version=1.0" ("Clients MAY provide the A2A-Version as a
    request parameter instead of a header")."""
    answer = negotiate_a2a(SAMPLE_CARD, {"Accept": "application/json"}, "A2A-Version=1.0")
    assert answer.version == "1.0"
    assert answer.request.version_source == "query"
    assert negotiate_a2a(SAMPLE_CARD, (), "?A2A-Version=1.0").version == "1.0"


@pytest.mark.parametrize(
    "headers",
    [
        {"A2A-Version": "0.3", "A2A-Extensions": BOTH},  # §9.2 (JSON-RPC) and §11.2 (REST), verbatim
        [("a2a-version", "0.3"), ("a2a-extensions", BOTH)],  # §10.2, the gRPC metadata pairs
    ],
)
def test_the_binding_examples_at_0_3_are_refused_by_a_1_0_only_agent(headers: Any) -> None:
    """SPEC-1.0 §9.2/§10.2/§11.2 send `A2A-Version: 0.3` (with the 1.0 method SendMessage); by §3.6.2 a
    1.0-only agent answers VersionNotSupportedError (notes §6.2: the version decides, not the method)."""
    answer = negotiate_a2a(SAMPLE_CARD, headers)
    assert answer.refusal is not None
    assert answer.refusal.code == VERSION_NOT_SUPPORTED == -32009
    assert info(answer.refusal)["metadata"] == {"requestedVersion": "0.3", "supportedVersions": "1.0"}
    assert answer.activated == ()


def test_the_grpc_example_is_served_by_an_agent_that_speaks_0_3() -> None:
    """SPEC-1.0 §10.2's metadata pairs (keys "normalized to lowercase per gRPC conventions") against the
    §4.6.1 card, whose one interface is 0.3 and lists both extensions: both are activated and echoed."""
    answer = negotiate_a2a(
        RESEARCH_CARD, [("authorization", "Bearer token"), ("a2a-version", "0.3"), ("a2a-extensions", BOTH)]
    )
    assert answer.ok
    assert answer.version == "0.3"
    assert answer.activated == (GEOLOCATION, CITATIONS)
    assert answer.response_headers == (("A2A-Extensions", BOTH),)


def test_the_extension_opt_in_of_section_4_6_1() -> None:
    """SPEC-1.0 §4.6.1's request (`A2A-Extensions` with both URIs, no `A2A-Version`) to its own card: no
    version means 0.3 (§3.6.2 "Agents MUST interpret empty value as 0.3 version"), which the card serves."""
    answer = negotiate_a2a(RESEARCH_CARD, {"Content-Type": "application/a2a+json", "A2A-Extensions": BOTH})
    assert answer.request.version_source == "default"
    assert answer.version == "0.3"
    assert answer.activated == (GEOLOCATION, CITATIONS)


def test_the_card_of_section_4_6_1_as_printed_is_not_json() -> None:
    """Notes §6.3: "This is not valid JSON (trailing comma after "protocolVersion": "0.3")"; what the
    command does with it is in tests/tools/test_a2a_command.py."""
    with pytest.raises(json.JSONDecodeError):
        json.loads(RESEARCH_CARD_TEXT)
    card = read_agent_card(RESEARCH_CARD)
    assert card.versions == ("0.3",)
    assert card.extensions == (A2AExtension(CITATIONS), A2AExtension(GEOLOCATION))


def test_the_extension_guides_request_and_response_headers() -> None:
    """EXT-GUIDE-new "Extension Activation": the request `A2A-Extensions: https://example.com/ext/konami-code/v1`
    and the response `A2A-Extensions: https://example.com/ext/konami-code/v1`, to a card with the guide's
    konami extension (EXT-GUIDE-old, with `params`)."""
    konami = "https://example.com/ext/konami-code/v1"
    card = {
        "supportedInterfaces": [interface("1.0", "https://example.com/agents/eightball")],
        "capabilities": {
            "extensions": [
                {
                    "uri": konami,
                    "description": "Provide cheat codes to unlock new fortunes",
                    "required": False,
                    "params": {"hints": ["When your sims need extra cash fast"]},
                }
            ]
        },
    }
    answer = negotiate_a2a(
        card, {"Content-Type": "application/json", "A2A-Version": "1.0", "A2A-Extensions": konami}
    )
    assert answer.response_headers == (("A2A-Extensions", konami),)


def test_the_version_negotiation_error_of_section_6_4() -> None:
    """SPEC-1.0 §6.4: `A2A-Version: 0.5` to an agent whose supported versions are ["0.3"] gets 400. The
    example's body is RFC 9457 problem+json, which contradicts the normative §11.6 (notes §6.1: "known
    inconsistent"), so only its status and its versions are kept; the body is §11.6's google.rpc.Status."""
    card = {"supportedInterfaces": [interface("0.3")]}
    answer = negotiate_a2a(card, {"Content-Type": "application/a2a+json", "A2A-Version": "0.5"})
    assert answer.refusal is not None
    status, body = a2a_http_error(answer.refusal)
    assert status == 400
    assert body["error"]["code"] == 400
    assert body["error"]["status"] == "FAILED_PRECONDITION"
    assert body["error"]["details"] == [info(answer.refusal)]
    assert "0.5" in body["error"]["message"]
    assert info(answer.refusal)["metadata"] == {"requestedVersion": "0.5", "supportedVersions": "0.3"}


def test_refusals_have_the_shape_of_section_9_5() -> None:
    """SPEC-1.0 §9.5: `data` is an array of objects with `@type`, A2A errors with a google.rpc.ErrorInfo
    whose reason is "the A2A error type in UPPER_SNAKE_CASE without the Error suffix" and domain
    "a2a-protocol.org" (§10.6); the reasons are a2a-python's too (utils/errors.py, notes §5.3)."""
    version = negotiate_a2a(SAMPLE_CARD, {"A2A-Version": "2.0"}).refusal
    required = negotiate_a2a(with_extensions((CITATIONS, True)), {"A2A-Version": "1.0"}).refusal
    assert version is not None
    assert required is not None
    for refusal, code, reason in (
        (version, -32009, "VERSION_NOT_SUPPORTED"),
        (required, -32008, "EXTENSION_SUPPORT_REQUIRED"),
    ):
        error = refusal.to_jsonrpc_error()
        assert error["code"] == code
        assert set(info(refusal)) == {"@type", "reason", "domain", "metadata"}
        assert info(refusal)["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
        assert info(refusal)["reason"] == reason
        assert info(refusal)["domain"] == "a2a-protocol.org"
        assert all(isinstance(value, str) for value in info(refusal)["metadata"].values())
        assert a2a_http_error(refusal)[1]["error"]["status"] == "FAILED_PRECONDITION"  # §5.4


def test_invalid_params_have_the_shape_of_the_validation_example_of_section_9_5() -> None:
    """SPEC-1.0 §9.5's -32602: `data: [{"@type": "type.googleapis.com/google.rpc.BadRequest",
    "fieldViolations": [{"field", "description"}]}]`."""
    refusal = read_a2a_request({"A2A-Extensions": "x" * (MAX_URI_LENGTH + 1)}).refusal
    assert refusal is not None
    error = refusal.to_jsonrpc_error()
    assert error["code"] == -32602
    assert error["message"].startswith("Invalid params: A2A-Extensions")
    (violation,) = error["data"][0]["fieldViolations"]
    assert error["data"][0]["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert violation["field"] == "A2A-Extensions"
    assert str(MAX_URI_LENGTH) in violation["description"]
    assert a2a_http_error(refusal)[1]["error"]["status"] == "INVALID_ARGUMENT"


# --- The rules, case by case (notes §6.5; [inference] rows say which reading is taken) ----------------


@pytest.mark.parametrize(
    ("sent", "version"),
    [
        ("1.0", "1.0"),
        ("1.0.1", "1.0"),  # §3.6: patch "MUST not be considered"
        (" 1.0 ", "1.0"),  # HTTP trims optional whitespace around a field value
        ("01.00", "1.0"),
        ("0.3.0", "0.3"),
        ("v1.0", None),  # not Major.Minor: stricter than a2a-python's packaging parse (notes §5.1)
        ("1", None),
        ("1.0rc1", None),
        ("latest", None),
        ("1.0.0.0", None),
        ("١.٠", None),  # Arabic-Indic digits are digits to `str.isdigit`, not to A2A
        ("", None),
    ],
)
def test_parse_a2a_version(sent: str, version: str | None) -> None:
    assert parse_a2a_version(sent) == version


@pytest.mark.parametrize("headers", [{}, {"A2A-Version": ""}, {"A2A-Version": "  "}, [("A2A-Version", ",")]])
def test_an_empty_or_absent_version_is_0_3(headers: Any) -> None:
    """SPEC-1.0 §3.6.1/§3.6.2: "0.3 will be assumed for empty header"."""
    request = read_a2a_request(headers)
    assert request.version == "0.3"
    assert request.version_source == "default"
    assert request.version_sent == ""
    answer = negotiate_a2a(SAMPLE_CARD, headers)
    assert answer.refusal is not None
    assert "assumed for a request without A2A-Version" in answer.refusal.message
    assert info(answer.refusal)["metadata"]["requestedVersion"] == "0.3"


def test_a_patch_is_served_and_a_newer_minor_is_refused_on_a_1_0_interface() -> None:
    """Notes §6.5: `1.0.1` → 1.0; `1.1` on a "1.0" interface → -32009 ("matching Major.Minor")."""
    assert negotiate_a2a(SAMPLE_CARD, {"A2A-Version": "1.0.1"}).version == "1.0"
    refused = negotiate_a2a(SAMPLE_CARD, {"A2A-Version": "1.1"})
    assert refused.refusal is not None
    assert refused.refusal.code == VERSION_NOT_SUPPORTED


def test_a_newer_minor_of_1_x_on_the_card_serves_the_older_ones_but_0_x_minors_only_themselves() -> None:
    """[inference, notes §4.2 and §6.5] The proto says "Use the latest supported minor version per major
    version": a card listing 1.1 serves 1.0 too. 0.x minors renamed methods (docs/protocols.md), so a
    card listing 0.3 does not serve 0.2."""
    card = read_agent_card(
        {"supportedInterfaces": [interface("1.1"), interface("0.3", "https://agent.example/v03")]}
    )
    assert negotiate_a2a(card, {"A2A-Version": "1.0"}).version == "1.0"
    assert negotiate_a2a(card, {"A2A-Version": "1.1"}).version == "1.1"
    assert not negotiate_a2a(card, {"A2A-Version": "1.2"}).ok
    assert not negotiate_a2a(card, {"A2A-Version": "0.2"}).ok
    assert negotiate_a2a(card, {"A2A-Version": "0.3"}).version == "0.3"


def test_an_exact_interface_is_preferred_to_one_whose_newer_minor_serves_the_version() -> None:
    card = read_agent_card(
        {"supportedInterfaces": [interface("1.1", "https://a/v11"), interface("1.0", "https://a/v10")]}
    )
    served = negotiate_a2a(card, {"A2A-Version": "1.0"}).interface
    assert served is not None
    assert served.url == "https://a/v10"


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        (["v1.0"], "v1.0"),
        (["1"], "1"),
    ],
)
def test_what_is_no_version_is_an_unsupported_version(sent: list[str], expected: str) -> None:
    """[inference] `v1.0`, `1`: "not Major.Minor; the spec gives no rule" (notes §6.5). It is refused as a
    version this agent does not serve, which tells the client the versions it does."""
    answer = negotiate_a2a(SAMPLE_CARD, [("A2A-Version", value) for value in sent])
    assert answer.refusal is not None
    assert answer.refusal.code == VERSION_NOT_SUPPORTED
    assert info(answer.refusal)["metadata"] == {"requestedVersion": expected, "supportedVersions": "1.0"}


def test_the_interface_the_request_arrived_at_limits_the_versions() -> None:
    """SPEC-1.0 §3.6.2: "If the version is not supported by the interface, agents MUST return a
    VersionNotSupportedError"; "Agents CAN expose multiple interfaces ... with different versions"."""
    card = read_agent_card(
        {"supportedInterfaces": [interface("1.0", "https://a/v1"), interface("0.3", "https://a/v03")]}
    )
    assert negotiate_a2a(card, {"A2A-Version": "0.3"}).ok
    at_v1 = negotiate_a2a(card, {"A2A-Version": "0.3"}, interface_url="https://a/v1")
    assert at_v1.refusal is not None
    assert info(at_v1.refusal)["metadata"]["supportedVersions"] == "1.0"
    nowhere = negotiate_a2a(card, {"A2A-Version": "1.0"}, interface_url="https://elsewhere/")
    assert nowhere.refusal is not None
    assert "no interface here" in nowhere.refusal.message
    assert info(nowhere.refusal)["metadata"]["supportedVersions"] == ""


@pytest.mark.parametrize(
    ("header", "extensions"),
    [
        ("a, b", ("a", "b")),  # notes §6.5; HTTP list syntax allows whitespace around commas
        ("a,,b,", ("a", "b")),
        ("\tb ,a,b", ("b", "a")),  # request order, once each
        ("", ()),
    ],
)
def test_the_extensions_list(header: str, extensions: tuple[str, ...]) -> None:
    assert read_a2a_request({"A2A-Extensions": header}).extensions == extensions


def test_repeated_fields_are_one_list_and_the_legacy_name_is_read_too() -> None:
    """SPEC-1.0 §9.2: values "SHOULD be comma-separated in a single header field" (so several fields are
    allowed, and mean one list); EXT-GUIDE-old and 0.3-era a2a-python used `X-A2A-Extensions`."""
    request = read_a2a_request([("A2A-Extensions", GEOLOCATION), (b"a2a-extensions", CITATIONS.encode())])
    assert request.extensions == (GEOLOCATION, CITATIONS)
    assert request.extensions_header == "A2A-Extensions"
    legacy = negotiate_a2a(RESEARCH_CARD, {"X-A2A-Extensions": CITATIONS})
    assert legacy.request.extensions_header == "X-A2A-Extensions"
    assert legacy.response_headers == (("X-A2A-Extensions", CITATIONS),)


def test_a_required_extension_the_request_does_not_declare_is_refused_with_32008() -> None:
    """SPEC-1.0 §3.3.4: "the agent MUST return ExtensionSupportRequiredError"; notes §6.5."""
    card = with_extensions((CITATIONS, True), (GEOLOCATION, False))
    answer = negotiate_a2a(card, {"A2A-Version": "1.0", "A2A-Extensions": GEOLOCATION})
    assert answer.refusal is not None
    assert answer.refusal.code == EXTENSION_SUPPORT_REQUIRED == -32008
    assert info(answer.refusal)["metadata"] == {"requiredExtensions": CITATIONS}
    assert answer.version is None
    assert answer.activated == ()
    assert answer.response_headers == ()


def test_another_version_of_a_required_extension_is_no_fallback() -> None:
    """SPEC-1.0 §4.6.3: "unless the extension is marked as required ... the agent MUST return an error ...
    It MUST NOT fall back to a previous version of the extension automatically"."""
    card = with_extensions(("https://example.com/ext/v1", True))
    answer = negotiate_a2a(card, {"A2A-Version": "1.0", "A2A-Extensions": "https://example.com/ext/v2"})
    assert answer.refusal is not None
    assert answer.refusal.code == EXTENSION_SUPPORT_REQUIRED
    assert answer.ignored == ("https://example.com/ext/v2",)
    assert "does not fall back to another version" in answer.refusal.message


def test_another_version_of_an_optional_extension_is_ignored_and_nothing_replaces_it() -> None:
    """SPEC-1.0 §4.6.3: "the agent SHOULD ignore the extension for that interaction and proceed
    without it"."""
    card = with_extensions(("https://example.com/ext/v1", False))
    answer = negotiate_a2a(card, {"A2A-Version": "1.0", "A2A-Extensions": "https://example.com/ext/v2"})
    assert answer.ok
    assert answer.activated == ()
    assert answer.ignored == ("https://example.com/ext/v2",)
    assert answer.response_headers == ()


def test_extension_uris_are_compared_exactly() -> None:
    """[unverified in the spec, notes §3.2] Nothing says URIs are compared case-insensitively; a2a-python
    compares them as set members. So do we."""
    card = with_extensions((GEOLOCATION, False))
    assert negotiate_a2a(card, {"A2A-Version": "1.0", "A2A-Extensions": GEOLOCATION.upper()}).activated == ()


def test_the_version_is_checked_before_the_extensions() -> None:
    card = with_extensions((CITATIONS, True))
    answer = negotiate_a2a(card, {"A2A-Version": "0.3"})
    assert answer.refusal is not None
    assert answer.refusal.code == VERSION_NOT_SUPPORTED


# --- Bounds and contradictions: -32602, never an exception ----------------------------------------


@pytest.mark.parametrize(
    ("headers", "query", "says"),
    [
        (
            {"A2A-Version": "1" * (MAX_VERSION_LENGTH + 1)},
            None,
            f"A2A-Version is longer than {MAX_VERSION_LENGTH}",
        ),
        ({"A2A-Version": "1.0, 0.3"}, None, "A2A-Version names more than one version: 1.0, 0.3"),
        ([("A2A-Version", "1.0"), ("a2a-version", "1.1")], None, "names more than one version"),
        ({"A2A-Version": "1.0"}, "A2A-Version=0.3", "A2A-Version says 1.0 but the query parameter 0.3"),
        ({}, "A2A-Version=1.0&a2a-version=0.3", "the A2A-Version query parameter names more than one"),
        ({"A2A-Extensions": "a," * MAX_EXTENSIONS_LENGTH}, None, f"longer than {MAX_EXTENSIONS_LENGTH}"),
        (
            {"A2A-Extensions": ",".join(f"u{n}" for n in range(MAX_EXTENSIONS + 1))},
            None,
            "more than 32 extensions",
        ),
        ({"A2A-Extensions": "https://a.example/x y"}, None, "a character no URI has"),
        ({"A2A-Extensions": "https://a.example/\x00"}, None, "a character no URI has"),
        ({"A2A-Extensions": "https://a.example/é"}, None, "a character no URI has"),
    ],
)
def test_input_past_a_bound_or_contradicting_itself_is_invalid_params(
    headers: Any, query: str | None, says: str
) -> None:
    answer = negotiate_a2a(SAMPLE_CARD, headers, query)
    assert answer.refusal is not None
    assert answer.refusal.code == -32602
    assert says in answer.refusal.message
    assert answer.version is None


def test_repeats_of_one_version_are_that_version() -> None:
    """`1.0` twice, or `1.0` and `1.0.1` (one version, patch ignored), in the header and the query."""
    answer = negotiate_a2a(SAMPLE_CARD, [("A2A-Version", "1.0"), ("A2A-Version", "1.0.1")], "A2A-Version=1.0")
    assert answer.version == "1.0"
    assert answer.request.version_sent == "1.0"
    assert answer.request.version_source == "header"


def test_an_empty_header_leaves_the_query_parameter_to_say_the_version() -> None:
    """a2a-python reads "the header first, then the query parameters" and treats an empty header as none
    (notes §5.1)."""
    assert read_a2a_request({"A2A-Version": ""}, {"A2A-Version": "1.0"}).version_source == "query"
    assert read_a2a_request({}, {"a2a-version": ["1.0"]}).version == "1.0"
    assert read_a2a_request({}, [("A2A-Version", "1.0")]).version == "1.0"
    assert read_a2a_request({}, b"?x=1&A2A%2DVersion=1.0").version == "1.0"


def test_a_megabyte_of_header_is_refused_without_being_split() -> None:
    request = read_a2a_request(
        {"A2A-Extensions": "https://a.example/x," * 60_000, "A2A-Version": "1." * 500_000}
    )
    assert request.refusal is not None
    assert request.refusal.code == -32602
    assert request.extensions == ()


def test_a_uri_of_the_longest_length_is_accepted() -> None:
    uri = "https://a.example/" + "x" * (MAX_URI_LENGTH - len("https://a.example/"))
    assert read_a2a_request({"A2A-Extensions": uri}).extensions == (uri,)


def test_what_a_client_sent_is_repeated_escaped_when_it_is_not_printable() -> None:
    """A refusal's message and metadata may reach a log or a terminal: a version sent with an escape
    sequence or a newline is repeated as `ascii()` writes it."""
    answer = negotiate_a2a(SAMPLE_CARD, {"A2A-Version": "1.0\x1b[2J\n"})
    assert answer.request.version_sent == "1.0\x1b[2J\n"  # as sent (only spaces and tabs are trimmed)
    assert answer.refusal is not None
    assert "\x1b" not in answer.refusal.message
    assert "\n" not in answer.refusal.message
    assert "'1.0\\x1b[2J\\n'" in answer.refusal.message
    assert info(answer.refusal)["metadata"]["requestedVersion"] == "'1.0\\x1b[2J\\n'"
    twice = read_a2a_request([("A2A-Version", "1.0"), ("A2A-Version", "\x07")]).refusal
    assert twice is not None
    assert "\x07" not in twice.message


def test_a_header_name_or_value_of_another_type_is_the_callers_mistake() -> None:
    with pytest.raises(TypeError, match="header value must be str or bytes"):
        read_a2a_request([("A2A-Version", 1.0)])  # type: ignore[list-item]


# --- Cards -----------------------------------------------------------------------------------------


def test_a_0_3_card_is_read_from_its_top_level_fields() -> None:
    """Notes §4.2: a 0.3 card has a top-level `protocolVersion`, `url`, `preferredTransport` and
    `additionalInterfaces[]` (`url`, `transport`); its `0.3.0` is read as 0.3."""
    card = read_agent_card(
        {
            "protocolVersion": "0.3.0",
            "url": "https://a/jsonrpc",
            "preferredTransport": "JSONRPC",
            "additionalInterfaces": [{"url": "https://a/grpc", "transport": "GRPC"}],
            "supportsAuthenticatedExtendedCard": True,
        }
    )
    assert card.interfaces == (
        A2AInterface("https://a/jsonrpc", "JSONRPC", "0.3"),
        A2AInterface("https://a/grpc", "GRPC", "0.3"),
    )
    assert {"extendedAgentCard", "multipleInterfaces"} <= card.declared
    assert read_agent_card({"protocolVersion": "0.3", "url": "https://a"}).interfaces[0].binding == "JSONRPC"


def test_supported_interfaces_win_over_the_0_3_fields() -> None:
    card = read_agent_card(
        {"supportedInterfaces": [interface("1.0")], "protocolVersion": "0.3.0", "url": "https://old"}
    )
    assert card.versions == ("1.0",)


@pytest.mark.parametrize(
    ("card", "message"),
    [
        ({}, "the card lists no version"),
        ({"supportedInterfaces": []}, "supportedInterfaces is empty"),
        (
            {"supportedInterfaces": [interface("latest")]},
            r"supportedInterfaces\[0\].protocolVersion must be Major.Minor",
        ),
        (
            {"supportedInterfaces": [{"url": "https://a", "protocolVersion": "1.0"}]},
            "protocolBinding must be",
        ),
        ({"supportedInterfaces": "https://a"}, "supportedInterfaces must be an array of objects"),
        ({"supportedInterfaces": [interface("1.0")] * 257}, "more than 256 entries"),
        ({"supportedInterfaces": [interface("1.0")], "capabilities": []}, "capabilities must be an object"),
        (
            {
                "supportedInterfaces": [interface("1.0")],
                "capabilities": {"extensions": [{"uri": "u"}, {"uri": "u"}]},
            },
            "lists u more than once",
        ),
        (
            {
                "supportedInterfaces": [interface("1.0")],
                "capabilities": {"extensions": [{"uri": "u", "required": "yes"}]},
            },
            "required must be true or false",
        ),
        (
            {
                "supportedInterfaces": [interface("1.0")],
                "capabilities": {"extensions": [{"uri": "u" * 2049}]},
            },
            "longer than 2048",
        ),
        ([], "an agent card is a JSON object"),
    ],
)
def test_a_malformed_card_is_a_value_error_naming_the_field(card: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read_agent_card(card)


def test_what_the_card_declares() -> None:
    card = read_agent_card({**SAMPLE_CARD, "skills": [{"id": "route"}]})
    assert card.declared == {
        "streaming",
        "pushNotifications",
        "pushNotifications.multipleConfigs",
        "extendedAgentCard",
        "skills",
        "multipleInterfaces",
    }
    assert card.versions == ("1.0",)
    assert card.required_extensions == ()


def test_features_at_a_version_are_the_releases_less_what_the_card_does_not_declare() -> None:
    card = read_agent_card({"supportedInterfaces": [interface("1.0")], "capabilities": {"streaming": True}})
    assert card.features_at("1.0") == {"streaming", "tasks", "tasks.cancel", "tasks.list", "inputRequired"}
    with pytest.raises(ValueError, match=r"serves no A2A version '0\.3'"):
        card.features_at("0.3")
    future = read_agent_card({"supportedInterfaces": [interface("2.0")]})
    with pytest.raises(ValueError, match=r"A2A 2\.0 is no release this library knows"):
        future.features_at("2.0")


# --- Release numbers and wire versions (the Major.Minor reconciliation) ------------------------------


def test_release_numbers_keep_their_patches_and_the_wire_says_major_minor() -> None:
    """`get_supported_versions("a2a")` keeps the changelog's `1.0.0` and `1.0.1`
    (tests/semver/test_protocols.py); on the wire both are 1.0, and a wire version names the
    newest patch of it."""
    releases = get_supported_versions("a2a")
    assert [a2a_wire_version(v) for v in releases][-3:] == ["0.3", "1.0", "1.0"]
    assert a2a_release("1.0") == releases[-1]
    assert a2a_release("1.0.0") == releases[-1]
    assert a2a_release("0.2") == ProtocolVersion("a2a", 0, 2, 6, releases[7].capabilities)
    assert a2a_release("1.1") == releases[-1]  # a minor this library does not know yet: 1.0's features
    assert a2a_release("0.4") is None
    assert a2a_release("2.0") is None
    assert a2a_release("junk") is None
    with pytest.raises(ValueError, match="not an A2A one"):
        a2a_wire_version(ProtocolVersion("mcp", 1, 0, 0))


def test_a2a_refusal_checks_what_it_is_given() -> None:
    with pytest.raises(ValueError, match="is not -32009 or -32008"):
        a2a_refusal(-32022, "no")
    with pytest.raises(ValueError, match="maps strings to strings"):
        a2a_refusal(VERSION_NOT_SUPPORTED, "no", {"requestedVersion": 1})  # type: ignore[dict-item]
    bare = a2a_refusal(VERSION_NOT_SUPPORTED, "no")
    assert "metadata" not in info(bare)
    assert a2a_error_info(bare) is not None


def test_a_peers_refusal_without_error_info_reads_as_none() -> None:
    from mcp_negotiation import Refusal

    assert a2a_error_info(Refusal(VERSION_NOT_SUPPORTED, "Version not supported")) is None
    assert a2a_error_info(Refusal(VERSION_NOT_SUPPORTED, "x", ({"@type": "other"},))) is None
    with pytest.raises(ValueError, match="not a refusal of A2A's negotiation"):
        a2a_http_error(Refusal(-32022, "x"))


# --- Client side -------------------------------------------------------------------------------------


def test_a_client_takes_its_preferred_version_on_the_cards_preferred_interface() -> None:
    """SPEC-1.0 §8.3.2: "Prefer earlier entries in the ordered list"; §3.6.3: clients "should be configured
    to request specific versions and avoid automatic fallback to older versions"."""
    card = read_agent_card(
        {
            "supportedInterfaces": [
                interface("0.3", "https://a/v03"),
                interface("1.0", "https://a/v1", "GRPC"),
                interface("1.0", "https://a/json", "HTTP+JSON"),
            ]
        }
    )
    choice = choose_a2a_interface(card, ["1.0", "0.3"])
    assert choice.interface == A2AInterface("https://a/v1", "GRPC", "1.0")
    assert choice.headers == (("A2A-Version", "1.0"),)
    assert choose_a2a_interface(card, ["1.0"], bindings=["HTTP+JSON"]).interface == A2AInterface(
        "https://a/json", "HTTP+JSON", "1.0"
    )
    assert choose_a2a_interface(card, ["1.0", "0.3"], bindings=["JSONRPC"]).version == "0.3"


def test_a_client_that_lists_only_1_0_never_falls_back() -> None:
    choice = choose_a2a_interface(RESEARCH_CARD, ["1.0"])
    assert choice.refusal is not None
    assert choice.refusal.code == VERSION_NOT_SUPPORTED
    assert info(choice.refusal)["metadata"] == {"requestedVersion": "1.0", "supportedVersions": "0.3"}
    assert choice.headers == ()
    none = choose_a2a_interface(RESEARCH_CARD, ["0.3"], bindings=["GRPC"])
    assert none.refusal is not None
    assert "no interface of those bindings" in none.refusal.message


def test_a_client_sends_the_extensions_the_card_lists_and_learns_of_a_required_one_it_lacks() -> None:
    card = with_extensions((CITATIONS, True), (GEOLOCATION, False))
    choice = choose_a2a_interface(card, ["1.0"], extensions=[GEOLOCATION, "https://other/v1", CITATIONS])
    assert choice.extensions == (GEOLOCATION, CITATIONS)
    assert choice.headers == (("A2A-Version", "1.0"), ("A2A-Extensions", BOTH))
    lacking = choose_a2a_interface(card, ["1.0"], extensions=[GEOLOCATION])
    assert lacking.refusal is not None
    assert lacking.refusal.code == EXTENSION_SUPPORT_REQUIRED


@pytest.mark.parametrize(
    ("versions", "message"),
    [("1.0", "not the single string"), ([], "versions is empty"), (["v1"], "versions must be Major.Minor")],
)
def test_a_clients_own_versions_are_checked(versions: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        choose_a2a_interface(SAMPLE_CARD, versions)


# --- The example --------------------------------------------------------------------------------------

EXPECTED = """\
both extensions: A2A 1.0 on JSONRPC, answering A2A-Extensions: https://example.com/extensions/geolocation/v1,https://standards.org/extensions/citations/v1
a patch, and v2 of geolocation: A2A 1.0 on JSONRPC, answering A2A-Extensions: https://standards.org/extensions/citations/v1
  ignored, with no fallback to another version: https://example.com/extensions/geolocation/v2
the version as a query parameter: A2A 1.0 on JSONRPC, answering A2A-Extensions: https://standards.org/extensions/citations/v1
no A2A-Version, so 0.3: refused -32009
  Version not supported: A2A 0.3, assumed for a request without A2A-Version (this agent speaks 1.0)
citations not declared: refused -32008
  Extension support required: https://standards.org/extensions/citations/v1
the bridge sends to https://georoute-agent.example.com/a2a/v1:
  A2A-Version: 1.0
  A2A-Extensions: https://standards.org/extensions/citations/v1
served: elicitation, progress.message, tasks, tools
"""
"""The example's first lines: the agent's answers, the bridge's choice, the agreement; the relayed
refusal that follows is checked as JSON."""


def test_the_a2a_example_prints_each_negotiation_and_the_relayed_refusal() -> None:
    run = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=True)
    assert run.stdout.startswith(EXPECTED)
    rest = run.stdout[len(EXPECTED) :]
    withheld, answers = rest.split("\n", 1)
    assert withheld.startswith("withheld: ")
    assert f"{CITATIONS} (downstream)" in withheld
    agent_text, client_text = answers.removeprefix("the agent answers: ").split("\nthe client is told: ")
    agent, client = json.loads(agent_text), json.loads(client_text)
    assert agent["code"] == -32009
    assert agent["data"][0]["metadata"] == {"requestedVersion": "1.0", "supportedVersions": "0.3"}
    assert client["code"] == -32022
    assert client["data"]["supported"] == []
    assert client["data"]["requested"] == "2025-11-25"
    assert client["data"]["refusedBy"] == "upstream"
    assert client["data"]["refusing"]["code"] == -32009
    assert client["data"]["refusing"]["peer"] == "route-planner"


def test_the_docs_show_the_example_what_it_prints_and_a_refusal_as_made() -> None:
    page = (ROOT / "docs" / "protocols.md").read_text(encoding="utf-8")
    section = page[page.index("### An agent, a client and a bridge") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    shown = re.search(r"It prints:\n\n```text\n(.*?)```", section, re.S)
    assert code is not None
    assert shown is not None
    assert code.group(1) == EXAMPLE.read_text(encoding="utf-8")
    run = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=True)
    assert shown.group(1) == run.stdout
    refusals = page[page.index("### Refusals") :]
    documented = re.search(r"```json\n(.*?)```", refusals, re.S)
    assert documented is not None
    card = {"supportedInterfaces": [interface("1.0"), interface("0.3", "https://agent.example/v03")]}
    refusal = negotiate_a2a(card, {"A2A-Version": "0.5"}).refusal
    assert refusal is not None
    assert json.loads(documented.group(1)) == refusal.to_jsonrpc_error()
