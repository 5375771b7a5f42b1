"""Properties of negotiation and of the parsers, over generated profiles and input."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_negotiation.ucp import (
    ORPHANED_EXTENSION,
    REQUIREMENT_UNMET,
    VERSION_UNSUPPORTED,
    Profile,
    Requirements,
    Requires,
    UcpAgreement,
    UcpError,
    VersionRange,
    authority_binds,
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
def pairs(
    draw: st.DrawFn, *, acyclic: bool = False, overlapping: bool = False
) -> tuple[Profile, Profile, Capabilities, Capabilities]:
    """A business and a platform; `overlapping` makes the platform often declare what the
    business does, so that long chains of extensions survive the intersection."""
    ours = draw(capabilities(acyclic=acyclic))
    theirs = ours if overlapping and draw(st.booleans()) else draw(capabilities())
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
    if platform_version == business_version:
        assert negotiate_capabilities(business, platform).version == platform_version
    elif platform_version in supported:
        # Served, but by the profile that version's entry points to, never by this one.
        with pytest.raises(ValueError, match="negotiate against that profile"):
            negotiate_capabilities(business, platform)
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


ranges = st.builds(
    lambda bounds, open_ended: VersionRange(bounds[0], None if open_ended else bounds[-1]),
    st.lists(st.sampled_from(VERSIONS), min_size=1, max_size=2, unique=True).map(sorted),
    st.booleans(),
)
requirements = st.dictionaries(
    st.sampled_from(NAMES),
    st.builds(
        Requires,
        st.none() | ranges,
        st.dictionaries(st.sampled_from(NAMES), ranges, max_size=3),
    ),
    max_size=len(NAMES),
).map(Requirements)


@st.composite
def forests(draw: st.DrawFn) -> tuple[Profile, Profile, Capabilities, Capabilities]:
    """A business whose capabilities mostly extend earlier ones (chains, multi-parent
    extensions) and a platform declaring most of them: the shape in which requirements
    refuse extensions that others extend, so that pruning has to run again."""
    ours: Capabilities = {}
    for name in NAMES:
        entry: dict[str, Any] = {"version": draw(st.sampled_from(VERSIONS))}
        if ours and draw(st.integers(0, 3)):
            entry["extends"] = draw(
                st.lists(st.sampled_from(sorted(ours)), min_size=1, max_size=2, unique=True)
            )
        ours[name] = [entry]
    missing = draw(st.sets(st.sampled_from(NAMES), max_size=2))
    theirs = {name: entries for name, entries in ours.items() if name not in missing}
    business = Profile.from_json(document("2026-04-08", ours))
    return business, Profile.from_json(document("2026-04-08", theirs)), ours, theirs


def admitted(requires: Requirements, active: Mapping[str, str], protocol: str) -> set[str]:
    return {name for name, version in active.items() if requires.admits(name, version, protocol, active)}


def pruned(active: dict[str, str], business: Profile) -> dict[str, str]:
    """The specification's steps 3-4 over `active`, literally: remove orphans until none is left."""
    extends = {
        name: next(e.extends for e in business.capabilities[name] if e.version == v)
        for name, v in active.items()
    }
    while orphans := [n for n in active if extends[n] and not any(p in active for p in extends[n])]:
        for name in orphans:
            del active[name]
    return active


@quick
@given(pairs(overlapping=True) | forests(), requirements)
def test_requires_leaves_a_fixed_point_of_checking_and_pruning(
    case: tuple[Profile, Profile, Capabilities, Capabilities], requires: Requirements
) -> None:
    business, platform, _, _ = case
    without = negotiate_capabilities(business, platform)
    agreement = negotiate_capabilities(business, platform, requires=requires)
    active = agreement.capabilities
    # Checking again against the result refuses nothing, and pruning again removes nothing.
    assert admitted(requires, active, agreement.version) == set(active)
    for entry in agreement.entries.values():
        assert not entry.extends or any(parent in active for parent in entry.extends)
    # Requirements only ever remove: what is active was active without them, at the same version.
    assert active.items() <= without.capabilities.items()
    # Refused are exactly those the selection (intersection and pruning done) does not satisfy.
    refused = {name for name, reason in agreement.dropped.items() if reason == REQUIREMENT_UNMET}
    assert refused == set(without.capabilities) - admitted(requires, without.capabilities, without.version)
    # What else was lost was orphaned by it; the rest of `dropped` is as without requirements.
    for name, reason in agreement.dropped.items():
        if name in without.dropped:
            assert reason == without.dropped[name]
        elif name not in refused:
            assert reason == ORPHANED_EXTENSION
    assert set(active) | set(agreement.dropped) == set(business.capabilities)
    assert not set(active) & set(agreement.dropped)


@quick
@given(pairs(acyclic=True, overlapping=True) | forests(), requirements)
def test_requires_matches_checking_and_pruning_in_rounds_until_nothing_changes(
    case: tuple[Profile, Profile, Capabilities, Capabilities], requires: Requirements
) -> None:
    """The resolution flow run literally: check every active extension, exclude the refused,
    re-prune, and start again, until a round changes nothing."""
    business, platform, _, _ = case
    active = spec_algorithm(business, platform)
    while refused := set(active) - admitted(requires, active, platform.version):
        active = pruned({n: v for n, v in active.items() if n not in refused}, business)
    agreement = negotiate_capabilities(business, platform, requires=requires)
    assert agreement.capabilities == active


@quick
@given(pairs())
def test_requirements_that_admit_everything_change_nothing(
    case: tuple[Profile, Profile, Capabilities, Capabilities],
) -> None:
    business, platform, _, _ = case
    everything = Requirements({name: {"protocol": {"min": VERSIONS[0]}} for name in NAMES})
    assert_same(
        negotiate_capabilities(business, platform, requires=everything),
        negotiate_capabilities(business, platform),
    )


labels = st.lists(
    st.sampled_from(["com", "example", "pay", "ucp", "dev", "shop", "x-1"]), min_size=1, max_size=4
)


@quick
@given(labels, labels, st.sampled_from(["https", "http", "ftp"]), st.sampled_from(["", "user@", "u:p@"]))
def test_authority_binds_by_label_aligned_reversed_host(
    name_labels: list[str], host_labels: list[str], scheme: str, userinfo: str
) -> None:
    name, host = ".".join(name_labels), ".".join(host_labels)
    reversed_host = ".".join(reversed(host_labels))
    expected = (
        scheme == "https"
        and not userinfo
        and len(host_labels) >= 2
        and (name == reversed_host or name.startswith(reversed_host + "."))
    )
    assert authority_binds(name, f"{scheme}://{userinfo}{host}/schema.json") is expected
