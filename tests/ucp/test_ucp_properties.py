"""Properties of negotiation and of the parsers, over generated profiles and input."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_negotiation.ucp import (
    VERSION_UNSUPPORTED,
    Profile,
    UcpAgreement,
    UcpError,
    negotiate_capabilities,
    parse_ucp_agent,
)

NAMES = [f"com.example.c{i}" for i in range(6)]
VERSIONS = ["2026-01-11", "2026-01-23", "2026-04-08", "2026-08-25"]

Capabilities = dict[str, list[dict[str, Any]]]

quick = settings(deadline=None)


@st.composite
def capabilities(draw: st.DrawFn, *, acyclic: bool = False) -> Capabilities:
    """Capabilities over a small shared pool, so the two sides overlap often.

    With `acyclic`, a capability only extends names earlier in the pool.
    """
    result: Capabilities = {}
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=len(NAMES))):
        pool = NAMES[: NAMES.index(name)] if acyclic else NAMES
        entries = []
        for version in draw(st.lists(st.sampled_from(VERSIONS), min_size=1, max_size=4, unique=True)):
            entry: dict[str, Any] = {"version": version}
            parents = draw(st.lists(st.sampled_from(pool), unique=True, max_size=3)) if pool else []
            if len(parents) == 1 and draw(st.booleans()):
                entry["extends"] = parents[0]
            elif parents:
                entry["extends"] = parents
            entries.append(entry)
        result[name] = entries
    return result


def document(version: str, caps: Capabilities, supported: list[str] | None = None) -> dict[str, Any]:
    ucp: dict[str, Any] = {"version": version, "capabilities": caps}
    if supported:
        ucp["supported_versions"] = {v: f"https://biz.example/{v}" for v in supported}
    return {"ucp": ucp}


@st.composite
def reshaped(draw: st.DrawFn, caps: Capabilities) -> Capabilities | list[dict[str, Any]]:
    """The same capabilities in another order, and possibly in the 2026-01-11 array shape."""
    names = draw(st.permutations(list(caps)))
    if draw(st.booleans()):
        return {name: draw(st.permutations(caps[name])) for name in names}
    return draw(st.permutations([{"name": name, **entry} for name in names for entry in caps[name]]))


@st.composite
def pairs(draw: st.DrawFn, *, acyclic: bool = False) -> tuple[Profile, Profile, Capabilities, Capabilities]:
    ours = draw(capabilities(acyclic=acyclic))
    theirs = draw(capabilities())
    business = Profile.from_json(document("2026-04-08", ours))
    platform = Profile.from_json(document("2026-04-08", theirs))
    return business, platform, ours, theirs


def spec_algorithm(business: Profile, platform: Profile) -> dict[str, str]:
    """The specification's intersection algorithm, written as literally as possible."""
    intersection: dict[str, str] = {}
    for name, entries in business.capabilities.items():
        if name in platform.capabilities:
            common = {e.version for e in entries} & {e.version for e in platform.capabilities[name]}
            if common:
                intersection[name] = max(common)
    extends = {
        name: next(e.extends for e in business.capabilities[name] if e.version == v)
        for name, v in intersection.items()
    }
    removed = True
    while removed:
        orphans = [n for n in intersection if extends[n] and not any(p in intersection for p in extends[n])]
        for name in orphans:
            del intersection[name]
        removed = bool(orphans)
    return intersection


def failure(call: Callable[[], object]) -> str | None:
    """The code of the `UcpError` `call` raises, None when it returns; anything else propagates."""
    try:
        call()
    except UcpError as error:
        return error.code
    return None


def assert_same(a: UcpAgreement, b: UcpAgreement) -> None:
    assert a == b
    assert list(a.capabilities) == list(b.capabilities)
    assert list(a.dropped) == list(b.dropped)


@quick
@given(st.data())
def test_negotiation_is_deterministic_and_order_independent(data: st.DataObject) -> None:
    business, platform, ours, theirs = data.draw(pairs())
    first = negotiate_capabilities(business, platform)
    assert_same(first, negotiate_capabilities(business, platform))
    shuffled_business = Profile.from_json(document("2026-04-08", data.draw(reshaped(ours))))  # type: ignore[arg-type]
    shuffled_platform = Profile.from_json(document("2026-04-08", data.draw(reshaped(theirs))))  # type: ignore[arg-type]
    assert_same(first, negotiate_capabilities(shuffled_business, shuffled_platform))


@quick
@given(pairs())
def test_agreement_invariants(case: tuple[Profile, Profile, Capabilities, Capabilities]) -> None:
    business, platform, _, _ = case
    agreement = negotiate_capabilities(business, platform)
    chosen = agreement.capabilities
    # Every chosen version is offered by both sides, and the entry is the business's.
    for name, version in chosen.items():
        assert version in {e.version for e in business.capabilities[name]}
        assert version in {e.version for e in platform.capabilities[name]}
        assert agreement.entries[name].version == version
        assert agreement.entries[name] in business.capabilities[name]
    # No surviving extension lacks a surviving parent.
    for entry in agreement.entries.values():
        assert not entry.extends or any(parent in chosen for parent in entry.extends)
    # Active and dropped partition the business's capabilities.
    assert set(chosen) | set(agreement.dropped) == set(business.capabilities)
    assert not set(chosen) & set(agreement.dropped)
    assert set(agreement.entries) == set(chosen)


@quick
@given(pairs(acyclic=True))
def test_matches_the_specification_algorithm_on_acyclic_profiles(
    case: tuple[Profile, Profile, Capabilities, Capabilities],
) -> None:
    business, platform, _, _ = case
    assert negotiate_capabilities(business, platform).capabilities == spec_algorithm(business, platform)


@quick
@given(pairs(), st.sampled_from(NAMES))
def test_for_operation_selects_a_connected_subset(
    case: tuple[Profile, Profile, Capabilities, Capabilities], root: str
) -> None:
    business, platform, _, _ = case
    agreement = negotiate_capabilities(business, platform)
    try:
        scoped = agreement.for_operation(root)
    except UcpError:
        assert root not in agreement.capabilities
        return
    assert root in scoped.capabilities
    assert scoped.capabilities.items() <= agreement.capabilities.items()
    for name, entry in scoped.entries.items():
        assert name == root or any(parent in scoped.capabilities for parent in entry.extends)


@quick
@given(
    st.sampled_from(VERSIONS),
    st.sampled_from(VERSIONS),
    st.lists(st.sampled_from(VERSIONS), unique=True),
)
def test_protocol_gate(business_version: str, platform_version: str, supported: list[str]) -> None:
    business = Profile.from_json(document(business_version, {}, supported))
    platform = Profile.from_json(document(platform_version, {}))
    if platform_version == business_version or platform_version in supported:
        assert negotiate_capabilities(business, platform).version == platform_version
    else:
        assert failure(lambda: negotiate_capabilities(business, platform)) == VERSION_UNSUPPORTED


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=30,
)
dates_or_junk = st.sampled_from(VERSIONS) | json_values
entries = st.dictionaries(
    st.sampled_from(["version", "extends", "config", "name", "spec"]),
    dates_or_junk | st.sampled_from(NAMES) | st.lists(st.sampled_from(NAMES)),
    max_size=5,
)
near_profiles = st.fixed_dictionaries(
    {},
    optional={
        "ucp": st.fixed_dictionaries(
            {},
            optional={
                "version": dates_or_junk,
                "capabilities": st.dictionaries(
                    st.sampled_from(NAMES) | st.text(max_size=5), entries | st.lists(entries)
                )
                | st.lists(entries)
                | json_values,
                "supported_versions": st.dictionaries(st.sampled_from(VERSIONS) | st.text(), json_values)
                | json_values,
            },
        )
        | json_values
    },
)


@quick
@given(near_profiles | json_values | st.builds(document, dates_or_junk, capabilities()))
def test_profile_from_json_raises_only_ucp_errors(obj: object) -> None:
    assert failure(lambda: Profile.from_json(obj)) in (None, "profile_malformed")


@quick
@given(st.binary() | near_profiles.map(lambda obj: json.dumps(obj).encode()))
def test_profile_from_bytes_raises_only_ucp_errors(data: bytes) -> None:
    assert failure(lambda: Profile.from_bytes(data)) in (None, "profile_malformed")


HEADER_PIECES = [
    "profile=",
    '"https://agent.example/p.json"',
    '"http://agent.example/p.json"',
    "https://agent.example/p.json",
    ';version="2026-04-08"',
    "version=",
    '"2026-04-08"',
    ", ",
    ",",
    ";",
    "=",
    " ",
    '"',
    "?1",
    "(",
    ")",
    ":aGk=:",
    '%"x"',
    "\\",
    "x",
    "é",
]
header_noise = st.lists(st.sampled_from(HEADER_PIECES), max_size=6).map("".join)
header_text = (
    st.text()
    | header_noise
    | st.builds(
        lambda before, after: f'{before}profile="https://agent.example/p"{after}',
        st.sampled_from(["", " ", 'version="2026-04-08", ']) | header_noise,
        st.sampled_from(["", ';version="2026-04-08"', ', version="2026-04-08"', ", other=?1"]) | header_noise,
    )
)


@quick
@given(header_text | st.binary())
def test_parse_ucp_agent_raises_only_ucp_errors(value: str | bytes) -> None:
    urls: list[str] = []
    assert failure(lambda: urls.append(parse_ucp_agent(value))) in (None, "invalid_profile_url")
    assert all(url.lower().startswith("https://") for url in urls)
