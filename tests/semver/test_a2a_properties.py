"""Properties of A2A's header parsers and negotiation, over what any client could send.

Whatever the headers and query string, reading them never raises, stays within the
bounds, and refuses only with -32602; negotiating never raises either, refuses only with
-32602, -32009 or -32008, and what it activates, ignores and echoes is consistent with
the card. And the two sides agree: what `choose_a2a_interface` sends, `negotiate_a2a`
serves as chosen.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_negotiation.semver import (
    A2ACard,
    choose_a2a_interface,
    negotiate_a2a,
    parse_a2a_version,
    read_a2a_request,
    read_agent_card,
)
from mcp_negotiation.semver.a2a import MAX_EXTENSIONS, MAX_URI_LENGTH

pytestmark = pytest.mark.fuzz

fuzz = settings(max_examples=300, deadline=None)

_NAMES = st.sampled_from(
    [
        "A2A-Version",
        "a2a-version",
        "A2A-VERSION",
        "A2A-Extensions",
        "a2a-extensions",
        "X-A2A-Extensions",
        "Host",
    ]
)
_URIS = st.sampled_from(
    [
        "https://example.com/extensions/geolocation/v1",
        "https://example.com/extensions/geolocation/v2",
        "https://standards.org/extensions/citations/v1",
        "urn:example:ext",
    ]
)
_VERSIONS = st.sampled_from(["0.2", "0.3", "1.0", "1.1", "2.0"])
_WIRE_VALUES = st.one_of(
    st.text(max_size=80),
    st.binary(max_size=80),
    st.lists(st.one_of(_URIS, _VERSIONS, st.just(""), st.text(max_size=5)), max_size=6).map(
        lambda items: " , ".join(items)
    ),
)
_HEADERS = st.one_of(
    st.lists(st.tuples(_NAMES, _WIRE_VALUES), max_size=6),
    st.dictionaries(_NAMES, st.text(max_size=80), max_size=4),
)
_QUERIES = st.one_of(
    st.none(),
    st.text(max_size=60),
    _VERSIONS.map(lambda v: f"?A2A-Version={v}"),
    st.dictionaries(
        st.sampled_from(["A2A-Version", "a2a-version", "other"]), st.text(max_size=8), max_size=2
    ),
)


@st.composite
def cards(draw: st.DrawFn) -> A2ACard:
    interfaces = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["https://a/1", "https://a/2"]),
                st.sampled_from(["JSONRPC", "GRPC"]),
                _VERSIONS,
            ),
            min_size=1,
            max_size=4,
        )
    )
    extensions = draw(st.dictionaries(_URIS, st.booleans(), max_size=3))
    return read_agent_card(
        {
            "supportedInterfaces": [
                {"url": url, "protocolBinding": binding, "protocolVersion": version}
                for url, binding, version in interfaces
            ],
            "capabilities": {"extensions": [{"uri": u, "required": r} for u, r in extensions.items()]},
        }
    )


@fuzz
@given(_HEADERS, _QUERIES)
def test_reading_never_raises_and_stays_within_the_bounds(headers: Any, query: Any) -> None:
    request = read_a2a_request(headers, query)
    assert len(request.extensions) <= MAX_EXTENSIONS
    assert len(set(request.extensions)) == len(request.extensions)
    for uri in request.extensions:
        assert 0 < len(uri) <= MAX_URI_LENGTH
        assert uri.isascii()
        assert uri.isprintable()
        assert "," not in uri
        assert " " not in uri
    if request.refusal is not None:
        assert request.refusal.code == -32602
        assert request.refusal.to_jsonrpc_error()["data"][0]["@type"].endswith("google.rpc.BadRequest")
    if request.version is not None:
        assert request.version == parse_a2a_version(request.version)
    if request.version_source == "default":
        assert request.version == "0.3"


@fuzz
@given(cards(), _HEADERS, _QUERIES)
def test_negotiating_never_raises_and_is_consistent_with_the_card(
    card: A2ACard, headers: Any, query: Any
) -> None:
    answer = negotiate_a2a(card, headers, query)
    listed = {extension.uri for extension in card.extensions}
    if answer.refusal is not None:
        assert answer.refusal.code in {-32602, -32009, -32008}
        assert answer.version is None
        assert answer.activated == ()
        assert answer.response_headers == ()
        return
    assert answer.interface is not None
    assert answer.version == answer.request.version
    assert set(answer.activated) <= listed
    assert not set(answer.ignored) & listed
    assert set(answer.activated) | set(answer.ignored) == set(answer.request.extensions)
    assert set(card.required_extensions) <= set(answer.activated)
    # The echo, sent back as a request, activates the same extensions.
    again = read_a2a_request(answer.response_headers)
    assert again.extensions == answer.activated


@fuzz
@given(
    st.integers(0, 10**9 - 1),
    st.integers(0, 10**9 - 1),
    st.one_of(st.none(), st.integers(0, 10**9 - 1)),
    st.sampled_from(["", " ", "\t", "  "]),
)
def test_every_major_minor_with_or_without_a_patch_reads_as_major_minor(
    major: int, minor: int, patch: int | None, space: str
) -> None:
    text = f"{space}{major}.{minor}{'' if patch is None else f'.{patch}'}{space}"
    assert parse_a2a_version(text) == f"{major}.{minor}"


@fuzz
@given(st.text(max_size=40))
def test_a_parsed_version_parses_to_itself(text: str) -> None:
    parsed = parse_a2a_version(text)
    if parsed is not None:
        major, minor = parsed.split(".")
        assert major.isascii()
        assert major.isdigit()
        assert minor.isascii()
        assert minor.isdigit()
        assert parse_a2a_version(parsed) == parsed


@fuzz
@given(st.lists(_URIS, max_size=8), st.lists(st.sampled_from(["", " ", "\t", ",", " ,"]), max_size=8))
def test_whitespace_and_empty_elements_change_nothing(uris: list[str], noise: list[str]) -> None:
    padded = ",".join(f"{noise[n % len(noise)] if noise else ''}{uri} " for n, uri in enumerate(uris))
    assert read_a2a_request({"A2A-Extensions": padded}).extensions == tuple(dict.fromkeys(uris))


@fuzz
@given(_VERSIONS, st.booleans())
def test_the_header_and_the_query_parameter_say_the_same(version: str, lower: bool) -> None:
    name = "a2a-version" if lower else "A2A-Version"
    by_header = read_a2a_request({name: version})
    by_query = read_a2a_request(None, f"{name}={version}")
    assert by_header.version == by_query.version == version
    assert (by_header.version_source, by_query.version_source) == ("header", "query")


@fuzz
@given(
    cards(),
    st.lists(_VERSIONS, min_size=1, max_size=3),
    st.lists(_URIS, max_size=4),
    st.one_of(st.none(), st.sets(st.sampled_from(["JSONRPC", "GRPC"]), min_size=1)),
)
def test_what_the_client_chooses_the_agent_serves(
    card: A2ACard, versions: list[str], extensions: list[str], bindings: set[str] | None
) -> None:
    choice = choose_a2a_interface(card, versions, bindings=bindings, extensions=extensions)
    usable = A2ACard(
        tuple(i for i in card.interfaces if bindings is None or i.binding in bindings),
        card.extensions,
        card.declared,
    )
    served = [version for version in versions if usable.interface_for(version) is not None]
    if not served:
        assert choice.refusal is not None
        assert choice.refusal.code == -32009
        return
    if choice.refusal is not None:
        assert choice.refusal.code == -32008
        assert set(card.required_extensions) - set(extensions)
        return
    assert choice.interface is not None
    assert choice.version == served[0]  # the client's most preferred version the card serves
    answer = negotiate_a2a(card, choice.headers, interface_url=choice.interface.url)
    assert answer.ok
    assert answer.version == choice.version
    assert answer.activated == choice.extensions
