"""Profiles: lenient about shape, strict about types and sizes, immutable once read."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from mcp_negotiation.ucp import PROFILE_MALFORMED, CapabilityEntry, Profile, UcpError, is_version
from mcp_negotiation.ucp.profile import (
    MAX_CAPABILITIES,
    MAX_CONFIG_DEPTH,
    MAX_CONFIG_NODES,
    MAX_ENTRIES_PER_CAPABILITY,
    MAX_KEY_NODES,
    MAX_KEYS,
    MAX_NAME_LENGTH,
    MAX_PARENTS,
    MAX_PROFILE_BYTES,
)

CHECKOUT = "dev.ucp.shopping.checkout"
FULFILLMENT = "dev.ucp.shopping.fulfillment"
DISCOUNT = "dev.ucp.shopping.discount"
CART = "dev.ucp.shopping.cart"

# The digest's current-shape example, verbatim apart from the elided URLs.
CURRENT_SHAPE: dict[str, Any] = {
    "ucp": {
        "version": "2026-04-08",
        "supported_versions": {"2026-01-23": "https://biz.example/.well-known/ucp/2026-01-23"},
        "capabilities": {
            CHECKOUT: [{"version": "2026-04-08", "spec": "https://s", "schema": "https://s"}],
            FULFILLMENT: [{"version": "2026-04-08", "extends": CHECKOUT}],
            DISCOUNT: [{"version": "2026-04-08", "extends": [CHECKOUT, CART]}],
        },
        "services": {},
        "payment_handlers": {},
    },
    "keys": [],
}


def ucp(**fields: object) -> dict[str, Any]:
    return {"ucp": {"version": "2026-04-08", **fields}}


NEW = "2026-08-25"


def at(version: str, **top_level: object) -> dict[str, Any]:
    """A profile of `version` with members beside its `ucp` object (where signing keys go)."""
    return {"ucp": {"version": version}, **top_level}


KEY = {
    "kid": "platform_2025",
    "kty": "EC",
    "crv": "P-256",
    "x": "MKBC",
    "y": "4Etl",
    "use": "sig",
    "alg": "ES256",
}
OTHER_KEY = {"kid": "k2", "kty": "OKP", "crv": "Ed25519", "x": "JrQL"}


class TestKeys:
    def test_from_2026_08_25_they_are_keys(self) -> None:
        profile = Profile.from_json(at(NEW, keys=[KEY], signing_keys=[OTHER_KEY]))
        assert profile.keys == (KEY,)
        assert isinstance(profile.keys[0], MappingProxyType)

    def test_before_they_are_signing_keys(self) -> None:
        # 2026-04-08 Profile Structure: signing_keys[] is "the canonical UCP profile field";
        # keys[] a mirror for JWK Set readers.
        assert Profile.from_json(at("2026-04-08", keys=[KEY], signing_keys=[OTHER_KEY])).keys == (OTHER_KEY,)

    def test_keys_of_unknown_kinds_are_kept(self) -> None:
        # "verifiers skip keys they do not recognize": for the verifier to skip, not the reader.
        odd = {"kid": "pq", "kty": "AKP", "alg": "ML-DSA-65", "pub": "AAAA", "x5c": ["MIIB"]}
        assert Profile.from_json(at(NEW, keys=[odd])).keys == ({**odd, "x5c": ("MIIB",)},)

    def test_none_is_none(self) -> None:
        assert Profile.from_json(at(NEW)).keys == ()
        assert Profile.from_json(at(NEW, keys=[])).keys == ()

    def test_direct_construction_checks_and_freezes_them(self) -> None:
        source = [dict(KEY)]
        profile = Profile(NEW, keys=source)  # type: ignore[arg-type]
        source[0]["kid"] = "changed"
        assert profile.keys[0]["kid"] == "platform_2025"
        with pytest.raises(UcpError):
            Profile(NEW, keys=({"kid": "a", "kty": "EC", "d": "x"},))


def test_a_schema_url_is_kept_as_given() -> None:
    # Whether it binds is negotiation's question, at the version negotiated.
    entry = {"version": NEW, "schema": "https://evil.example/x.json"}
    profile = Profile.from_json({"ucp": {"version": NEW, "capabilities": {CHECKOUT: [entry]}}})
    assert profile.capabilities[CHECKOUT][0].schema == "https://evil.example/x.json"


class TestLeaves:
    """A profile `supported_versions` points to: 2026-08-25 Protocol Version, "whose ucp.version
    equals its map key" and "Version-specific profiles are leaf documents ... MUST NOT contain a
    supported_versions field"."""

    def test_a_leaf(self) -> None:
        assert Profile.from_json(ucp()).leaf_problem("2026-04-08") is None
        assert Profile.from_json(ucp(supported_versions={})).leaf_problem("2026-04-08") is None

    def test_another_version(self) -> None:
        assert Profile.from_json(ucp()).leaf_problem("2026-01-23") == "declares ucp.version 2026-04-08"

    def test_one_listing_versions_of_its_own(self) -> None:
        profile = Profile.from_json(ucp(supported_versions={"2026-01-23": "https://b.example/old"}))
        assert "lists supported_versions of its own" in str(profile.leaf_problem("2026-04-08"))


def test_current_shape() -> None:
    profile = Profile.from_json(CURRENT_SHAPE)
    assert profile.version == "2026-04-08"
    assert profile.supported_versions == {"2026-01-23": "https://biz.example/.well-known/ucp/2026-01-23"}
    assert profile.capabilities == {
        CHECKOUT: (CapabilityEntry("2026-04-08", schema="https://s"),),
        FULFILLMENT: (CapabilityEntry("2026-04-08", (CHECKOUT,)),),
        DISCOUNT: (CapabilityEntry("2026-04-08", (CHECKOUT, CART)),),
    }


def test_obsolete_array_shape_is_grouped_by_name() -> None:
    profile = Profile.from_json(
        ucp(
            capabilities=[
                {"name": CHECKOUT, "version": "2026-01-11"},
                {"name": FULFILLMENT, "version": "2026-01-11", "extends": CHECKOUT},
                {"name": CHECKOUT, "version": "2025-12-01"},
            ]
        )
    )
    assert profile.capabilities == {
        CHECKOUT: (CapabilityEntry("2026-01-11"), CapabilityEntry("2025-12-01")),
        FULFILLMENT: (CapabilityEntry("2026-01-11", (CHECKOUT,)),),
    }


def test_minimal_platform_profile_and_a_lone_entry_object() -> None:
    profile = Profile.from_json(
        {"ucp": {"version": "2026-04-08", "capabilities": {CHECKOUT: {"version": "2026-04-08"}}}}
    )
    assert profile.capabilities == {CHECKOUT: (CapabilityEntry("2026-04-08"),)}
    assert Profile.from_json({"ucp": {"version": "2026-04-08"}}).capabilities == {}


def test_config_is_deeply_read_only() -> None:
    entry = {"version": "2026-04-08", "config": {"a": [1, {"b": None}], "c": "d"}}
    profile = Profile.from_json(ucp(capabilities={CHECKOUT: [entry]}))
    config = profile.capabilities[CHECKOUT][0].config
    assert config == {"a": (1, {"b": None}), "c": "d"}
    assert isinstance(config, MappingProxyType)
    with pytest.raises(TypeError):
        config["c"] = "e"  # type: ignore[index]
    with pytest.raises(TypeError):
        profile.capabilities[CHECKOUT] = ()  # type: ignore[index]


def test_direct_construction_is_frozen_too() -> None:
    source = {CHECKOUT: (CapabilityEntry("2026-04-08"),)}
    profile = Profile("2026-04-08", source)
    source.clear()
    assert CHECKOUT in profile.capabilities


def test_from_bytes_and_from_file(tmp_path: Path) -> None:
    data = json.dumps(CURRENT_SHAPE).encode()
    assert Profile.from_bytes(data) == Profile.from_json(CURRENT_SHAPE)
    path = tmp_path / "profile.json"
    path.write_bytes(data)
    assert Profile.from_file(path) == Profile.from_json(CURRENT_SHAPE)


@pytest.mark.parametrize("version", ["2026-04-08", "2024-02-29", "0001-01-01"])
def test_is_version_accepts_real_dates(version: str) -> None:
    assert is_version(version)


@pytest.mark.parametrize(
    "version",
    [
        "2026-02-30",
        "2025-02-29",
        "2026-4-8",
        "20260408",
        "2026-04-08T00:00:00",
        "v2026-04-08",
        "٢٠٢٦-٠٤-٠٨",
        20260408,
    ],
)
def test_is_version_refuses_non_dates(version: object) -> None:
    assert not is_version(version)


DEEP: dict[str, Any] = {}
_cursor = DEEP
for _ in range(MAX_CONFIG_DEPTH + 1):
    _cursor["k"] = {}
    _cursor = _cursor["k"]


@pytest.mark.parametrize(
    ("document", "why"),
    [
        ([], "not an object"),
        ({}, "no ucp"),
        ({"ucp": []}, "ucp not an object"),
        ({"ucp": {}}, "no version"),
        ({"ucp": {"version": "2026-02-30"}}, "not a real date"),
        ({"ucp": {"version": 20260408}}, "not a string"),
        (ucp(capabilities="checkout"), "capabilities not a map or array"),
        (ucp(capabilities={CHECKOUT: []}), "no entries"),
        (ucp(capabilities={CHECKOUT: ["2026-04-08"]}), "entry not an object"),
        (ucp(capabilities={CHECKOUT: [{}]}), "entry without version"),
        (ucp(capabilities={CHECKOUT: [{"version": "latest"}]}), "entry version not a date"),
        (ucp(capabilities={"": [{"version": "2026-04-08"}]}), "empty name"),
        (ucp(capabilities={"x" * (MAX_NAME_LENGTH + 1): [{"version": "2026-04-08"}]}), "long name"),
        (ucp(capabilities={CHECKOUT: [{"version": "2026-04-08", "extends": []}]}), "empty extends"),
        (ucp(capabilities={CHECKOUT: [{"version": "2026-04-08", "extends": 1}]}), "extends not names"),
        (
            ucp(capabilities={CHECKOUT: [{"version": "2026-04-08", "extends": [CART, 1]}]}),
            "a parent not a name",
        ),
        (
            ucp(
                capabilities={
                    CHECKOUT: [
                        {"version": "2026-04-08", "extends": [f"p{i}" for i in range(MAX_PARENTS + 1)]}
                    ]
                }
            ),
            "too many parents",
        ),
        (ucp(capabilities={CHECKOUT: [{"version": "2026-04-08", "config": []}]}), "config not an object"),
        (ucp(capabilities={CHECKOUT: [{"version": "2026-04-08", "config": DEEP}]}), "config too deep"),
        (
            ucp(
                capabilities={
                    CHECKOUT: [{"version": "2026-04-08", "config": {"a": list(range(MAX_CONFIG_NODES))}}]
                }
            ),
            "config too large",
        ),
        (
            ucp(capabilities={CHECKOUT: [{"version": "2026-04-08", "config": {"a": {1, 2}}}]}),
            "config not JSON",
        ),
        (
            ucp(capabilities={CHECKOUT: [{"version": "2026-04-08"}, {"version": "2026-04-08"}]}),
            "version twice",
        ),
        (ucp(capabilities=[{"version": "2026-04-08"}]), "array entry without a name"),
        (ucp(capabilities=["x"]), "array entry not an object"),
        (
            ucp(capabilities={f"c{i}": {"version": "2026-04-08"} for i in range(MAX_CAPABILITIES + 1)}),
            "too many",
        ),
        (
            ucp(
                capabilities={
                    CHECKOUT: [{"version": f"20{y:02}-01-01"} for y in range(MAX_ENTRIES_PER_CAPABILITY + 1)]
                }
            ),
            "too many entries",
        ),
        (
            ucp(
                capabilities=[
                    {"name": CHECKOUT, "version": f"20{y:02}-01-01"}
                    for y in range(MAX_ENTRIES_PER_CAPABILITY + 1)
                ]
            ),
            "too many entries in the array shape",
        ),
        (ucp(capabilities={CHECKOUT: [{"version": "2026-04-08", "schema": 1}]}), "schema not a string"),
        (
            ucp(capabilities={CHECKOUT: [{"version": "2026-04-08", "schema": "https://s/" + "x" * 2048}]}),
            "schema too long",
        ),
        (at(NEW, keys={"kid": "a", "kty": "EC"}), "keys not an array"),
        (at(NEW, keys=[{"kid": "a", "kty": "EC"}] * (MAX_KEYS + 1)), "too many keys"),
        (at(NEW, keys=["a"]), "a key not an object"),
        (at(NEW, keys=[{"kty": "EC"}]), "a key without kid"),
        (at(NEW, keys=[{"kid": "a", "kty": 1}]), "a kty not a string"),
        (at(NEW, keys=[{"kid": "a", "kty": "EC", "d": "private"}]), "a private key"),
        (at(NEW, keys=[{"kid": "a", "kty": "oct", "k": "secret"}]), "a symmetric key"),
        (at(NEW, keys=[{"kid": "a", "kty": "RSA", "x5c": ["c"] * MAX_KEY_NODES}]), "keys too large"),
        (at(NEW, keys=[{"kid": "a", "kty": "EC", "x": {"a": {"b": {"c": {"d": 1}}}}}]), "a key too deep"),
        (at("2026-04-08", signing_keys=[{"kid": "a", "kty": "EC", "d": "private"}]), "older keys too"),
        (ucp(supported_versions=["2026-01-23"]), "supported_versions not an object"),
        (ucp(supported_versions={"latest": "https://b.example/"}), "supported_versions key not a date"),
        (ucp(supported_versions={"2026-01-23": 1}), "supported_versions value not a URL"),
    ],
)
def test_refuses(document: object, why: str) -> None:
    with pytest.raises(UcpError) as raised:
        Profile.from_json(document)
    assert raised.value.code == PROFILE_MALFORMED, why


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{not json",
        b"\xff\xfe",
        b'{"ucp": {"version": NaN}}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"ucp": {"version": 1' + b"0" * 5000 + b"}}",
        b" " * (MAX_PROFILE_BYTES + 1),
    ],
)
def test_from_bytes_refuses_non_json(data: bytes) -> None:
    with pytest.raises(UcpError) as raised:
        Profile.from_bytes(data)
    assert raised.value.code == PROFILE_MALFORMED
