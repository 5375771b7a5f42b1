"""UCP profiles, read leniently and held immutably.

Real platform profiles are often minimal (no `services`, no `spec`/`schema`), and the
official generated models reject them; negotiation needs only `ucp.version` and each
capability entry's `version`, `extends`, `config` and (for 2026-08-25's authority
binding) `schema`, so that is all this reads of capabilities, and everything else in
the document is ignored rather than validated. The profile's signing keys are kept too
(`Profile.keys`), for whoever verifies signatures; negotiation never reads them.

Lenient about shape, strict about size and types: a profile comes from whoever sent the
request, so every count, length and depth is capped, and anything that is not what the
specification says (a version that is not a real `YYYY-MM-DD` date, an `extends` that is
neither a string nor a non-empty list of strings) is `profile_malformed` rather than
guessed at.

Both capability shapes are read: the current map (name → array of entries, a lone
object tolerated) and the obsolete 2026-01-11 array of entries with a `name` field,
which samples still ship.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from types import MappingProxyType
from typing import Final, TypeAlias, TypeGuard

from ..core.client_log import report
from ..core.frozen_json import Budget, NotFreezable, freeze
from ..core.revisions import is_date_version
from .errors import PROFILE_MALFORMED, UcpError
from .header import MAX_URL_LENGTH

__all__ = [
    "MAX_CAPABILITIES",
    "MAX_CONFIG_DEPTH",
    "MAX_CONFIG_NODES",
    "MAX_ENTRIES_PER_CAPABILITY",
    "MAX_KEYS",
    "MAX_KEY_NODES",
    "MAX_NAME_LENGTH",
    "MAX_PARENTS",
    "MAX_PROFILE_BYTES",
    "MAX_SUPPORTED_VERSIONS",
    "RELEASE_RULES_FROM",
    "CapabilityEntry",
    "JsonValue",
    "Profile",
    "ProfileSource",
    "is_version",
]

MAX_CAPABILITIES: Final = 1000
"""Capabilities per profile (and entries in the 2026-01-11 array shape)."""
MAX_ENTRIES_PER_CAPABILITY: Final = 50
"""Versions one capability may list."""
MAX_NAME_LENGTH: Final = 256
"""Characters in a capability name."""
MAX_PARENTS: Final = 50
"""Parents one extension may name in `extends`."""
MAX_SUPPORTED_VERSIONS: Final = 100
"""Entries in `supported_versions` (each URL is capped like a profile URL)."""
MAX_CONFIG_DEPTH: Final = 32
"""Nesting of a capability's `config`."""
MAX_CONFIG_NODES: Final = 10_000
"""JSON values in all `config` objects of one profile together."""
MAX_PROFILE_BYTES: Final = 4 * 1024 * 1024
"""Bytes `Profile.from_bytes` parses; the HTTPS resolver's own cap is lower."""
MAX_KEYS: Final = 64
"""Signing keys (JWKs) one profile may publish; a real one has two or three."""
MAX_KEY_NODES: Final = 2_000
"""JSON values in all the signing keys of one profile together."""
_MAX_KEY_DEPTH: Final = 4
"""Nesting of one JWK: its members are strings, or arrays of strings (`x5c`, `key_ops`)."""
_MAX_KEY_STRING: Final = 8_192
"""Characters in one JWK string: room for an `x5c` certificate, not for a megabyte."""
_PRIVATE_KEY_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
"""JWK members that only private (or symmetric) keys carry, which a profile must not publish."""

RELEASE_RULES_FROM: Final = "2026-08-25"
"""The first UCP version with its rules for profiles of that version: signing keys in
`keys[]` (not `signing_keys[]`), `dev.ucp.*` entries at the release's own version, and
`schema` URLs bound to their namespace's authority (the last two are `negotiate`'s)."""

JsonValue: TypeAlias = "bool | int | float | str | tuple[JsonValue, ...] | Mapping[str, JsonValue] | None"
"""Frozen JSON: objects become read-only mappings and arrays become tuples."""
ProfileSource: TypeAlias = "Profile | Mapping[str, object] | str | PathLike[str]"
"""A profile configured in code: already parsed, a decoded JSON document, or a path to a JSON file."""

is_version = is_date_version
"""True for a UCP version: a `YYYY-MM-DD` string naming a real calendar date (UCP compares
versions as strings)."""


def _malformed(reason: str) -> UcpError:
    return UcpError(PROFILE_MALFORMED, reason)


def _version(value: object, where: str) -> str:
    if isinstance(value, str) and is_version(value):
        return value
    raise _malformed(f"{where} must be a YYYY-MM-DD date")


def _name(value: object, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_LENGTH:
        raise _malformed(f"{where} must be a non-empty string of at most {MAX_NAME_LENGTH} characters")
    return value


def _is_array(value: object) -> TypeGuard[Sequence[object]]:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray)


@dataclass(frozen=True, slots=True)
class CapabilityEntry:
    """One version of one capability, as a profile declares it.

    `extends` is always a tuple: a string `extends` is a one-parent list, so the
    pruning rule ("at least one parent survives") needs no special case. `schema` is
    the URL of the capability's JSON Schema, if the entry names one: from 2026-08-25 it
    must be served by the owner of the capability's name (`authority_binds`).
    """

    version: str
    extends: tuple[str, ...] = ()
    config: Mapping[str, JsonValue] | None = None
    schema: str | None = None

    def __post_init__(self) -> None:
        # Built directly, an entry gets the same shapes `from_json` gives it: a string
        # `extends` walked letter by letter would orphan every extension.
        if isinstance(self.extends, str):
            object.__setattr__(self, "extends", (self.extends,))
        elif not isinstance(self.extends, tuple):
            object.__setattr__(self, "extends", tuple(self.extends))
        if self.config is not None and not isinstance(self.config, MappingProxyType):
            try:
                frozen = freeze(self.config, Budget(MAX_CONFIG_NODES), max_depth=MAX_CONFIG_DEPTH)
            except NotFreezable as reason:
                raise _malformed(f"capability config {reason}") from None
            object.__setattr__(self, "config", frozen)


def _entry(obj: object, where: str, budget: Budget) -> CapabilityEntry:
    if not isinstance(obj, Mapping):
        raise _malformed(f"{where} must be an object")
    version = _version(obj.get("version"), f"{where} version")
    raw_extends = obj.get("extends")
    extends: tuple[str, ...]
    if raw_extends is None:
        extends = ()
    elif isinstance(raw_extends, str):
        extends = (_name(raw_extends, f"{where} extends"),)
    elif _is_array(raw_extends) and 0 < len(raw_extends) <= MAX_PARENTS:
        extends = tuple(dict.fromkeys(_name(parent, f"{where} extends") for parent in raw_extends))
    else:
        raise _malformed(f"{where} extends must be a name or a list of 1 to {MAX_PARENTS} names")
    schema = obj.get("schema")
    if schema is not None and (not isinstance(schema, str) or len(schema) > MAX_URL_LENGTH):
        raise _malformed(f"{where} schema must be a URL of at most {MAX_URL_LENGTH} characters")
    raw_config = obj.get("config")
    if raw_config is None:
        return CapabilityEntry(version, extends, schema=schema)
    if not isinstance(raw_config, Mapping):
        raise _malformed(f"{where} config must be an object")
    try:
        config = freeze(raw_config, budget, max_depth=MAX_CONFIG_DEPTH)
    except NotFreezable as reason:
        raise _malformed(f"capability config {reason}") from None
    return CapabilityEntry(version, extends, config, schema)


def _entries(name: str, raw: object, budget: Budget) -> tuple[CapabilityEntry, ...]:
    items = raw if _is_array(raw) else (raw,)
    if not 0 < len(items) <= MAX_ENTRIES_PER_CAPABILITY:
        raise _malformed(f"capability {name!r} must list 1 to {MAX_ENTRIES_PER_CAPABILITY} entries")
    return tuple(_entry(item, f"capability {name!r} entry", budget) for item in items)


def _capabilities(raw: object, budget: Budget) -> dict[str, tuple[CapabilityEntry, ...]]:
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        if len(raw) > MAX_CAPABILITIES:
            raise _malformed(f"a profile may declare at most {MAX_CAPABILITIES} capabilities")
        return {
            _name(name, "capability name"): _entries(name, entries, budget) for name, entries in raw.items()
        }
    if _is_array(raw):
        # 2026-01-11 shape: one object per (name, version), grouped here into the map.
        if len(raw) > MAX_CAPABILITIES:
            raise _malformed(f"a profile may declare at most {MAX_CAPABILITIES} capability entries")
        grouped: dict[str, list[CapabilityEntry]] = {}
        for item in raw:
            if not isinstance(item, Mapping):
                raise _malformed("capability entries must be objects")
            name = _name(item.get("name"), "capability name")
            grouped.setdefault(name, []).append(_entry(item, f"capability {name!r}", budget))
        if any(len(entries) > MAX_ENTRIES_PER_CAPABILITY for entries in grouped.values()):
            raise _malformed(f"a capability may list at most {MAX_ENTRIES_PER_CAPABILITY} entries")
        return {name: tuple(entries) for name, entries in grouped.items()}
    raise _malformed("ucp.capabilities must be an object or an array")


def _supported_versions(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or len(raw) > MAX_SUPPORTED_VERSIONS:
        raise _malformed(
            f"ucp.supported_versions must be an object of at most {MAX_SUPPORTED_VERSIONS} entries"
        )
    result: dict[str, str] = {}
    for version, url in raw.items():
        if not isinstance(url, str) or len(url) > MAX_URL_LENGTH:
            raise _malformed("ucp.supported_versions values must be URLs")
        result[_version(version, "ucp.supported_versions key")] = url
    return result


def _keys(raw: object, where: str) -> tuple[Mapping[str, JsonValue], ...]:
    """The public JWKs of a key set, each frozen; bounded in count and size.

    A key that is no JWK (not an object, no string `kid` and `kty`) or that carries
    private material makes the profile malformed: a profile whose signing keys fail
    validation is to be rejected. A key of a type, curve or algorithm nobody knows is
    kept: verifiers skip those when verifying, and such a key must not fail the profile.
    """
    if raw is None:
        return ()
    if not _is_array(raw) or len(raw) > MAX_KEYS:
        raise _malformed(f"{where} must be an array of at most {MAX_KEYS} keys")
    budget = Budget(MAX_KEY_NODES)
    kept = []
    for key in raw:
        if not isinstance(key, Mapping) or not all(isinstance(key.get(m), str) for m in ("kid", "kty")):
            raise _malformed(f"{where} must hold JWK objects, each with a string kid and kty")
        if _PRIVATE_KEY_MEMBERS & key.keys():
            raise _malformed(f"{where} must hold public keys only: a key carries private members")
        try:
            kept.append(freeze(key, budget, max_depth=_MAX_KEY_DEPTH, max_string=_MAX_KEY_STRING))
        except NotFreezable as reason:
            raise _malformed(f"{where} {reason}") from None
    return tuple(kept)


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Profile:
    """The parts of a UCP profile that negotiation reads.

    `supported_versions` is meaningful on a business profile only: the older protocol
    versions it still serves, each with the URL of the profile for that version.
    `keys` are the profile's public signing keys (JWKs): its `keys[]` from 2026-08-25,
    its `signing_keys[]` before. They are never advertised nor negotiated.
    The mappings are read-only, so a profile can be cached and shared between requests.
    """

    version: str
    capabilities: Mapping[str, tuple[CapabilityEntry, ...]] = field(default_factory=dict)
    supported_versions: Mapping[str, str] = field(default_factory=dict)
    keys: tuple[Mapping[str, JsonValue], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        # Direct construction may pass plain dicts; freeze them so no caller can mutate
        # a profile another request is negotiating against.
        entries_of = {name: tuple(entries) for name, entries in self.capabilities.items()}
        object.__setattr__(self, "capabilities", MappingProxyType(entries_of))
        object.__setattr__(self, "supported_versions", MappingProxyType(dict(self.supported_versions)))
        if not all(isinstance(key, MappingProxyType) for key in self.keys):
            object.__setattr__(self, "keys", _keys(list(self.keys), "keys"))
        for name, entries in self.capabilities.items():
            versions = [entry.version for entry in entries]
            if len(set(versions)) != len(versions):
                # Two entries of one version would make the active entry depend on order.
                raise _malformed(f"capability {name!r} lists a version twice")

    def older_profile_url(self, version: str) -> str | None:
        """Where this business's profile for `version` is, when that is an older version it
        lists in `supported_versions` (its own version, or an unlisted one: None)."""
        return self.supported_versions.get(version) if version != self.version else None

    def leaf_problem(self, version: str) -> str | None:
        """Why this profile cannot be the business's profile for the older `version` that
        its `supported_versions` entry points to, or None when it can.

        Such a profile describes exactly that one version: its `ucp.version` must be the
        key, and it must not list versions of its own (the specification's "leaf"), or a
        platform could be served capabilities combined from two versions' profiles. An
        empty `supported_versions` combines nothing and is let pass.
        """
        if self.version != version:
            return f"declares ucp.version {self.version}"
        if self.supported_versions:
            return "lists supported_versions of its own, which the profile of one version must not"
        return None

    @classmethod
    def from_json(cls, obj: object) -> Profile:
        """Read a decoded JSON profile document, raising `profile_malformed` on anything unusable."""
        if not isinstance(obj, Mapping):
            raise _malformed("a profile must be a JSON object")
        ucp = obj.get("ucp")
        if not isinstance(ucp, Mapping):
            raise _malformed("a profile must have a ucp object")
        version = _version(ucp.get("version"), "ucp.version")
        keys_field = "keys" if version >= RELEASE_RULES_FROM else "signing_keys"
        return cls(
            version=version,
            capabilities=_capabilities(ucp.get("capabilities"), Budget(MAX_CONFIG_NODES)),
            supported_versions=_supported_versions(ucp.get("supported_versions")),
            keys=_keys(obj.get(keys_field), keys_field),
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Profile:
        """Parse a profile document; anything but strict JSON within the size cap is malformed."""
        if len(data) > MAX_PROFILE_BYTES:
            raise _malformed(f"the profile is larger than {MAX_PROFILE_BYTES} bytes")
        try:
            obj = json.loads(data, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:
            # ValueError covers bad JSON, bad UTF-8 and over-long integers; RecursionError
            # deeply nested arrays, which the stdlib parser walks recursively.
            report(logging.DEBUG, "a profile is not JSON", exc=exc)
            raise _malformed("the profile is not JSON") from None
        return cls.from_json(obj)

    @classmethod
    def from_file(cls, path: str | PathLike[str]) -> Profile:
        """Read a profile from disk; blocking, so meant for start-up and pinned partners."""
        return cls.from_bytes(Path(path).read_bytes())

    @classmethod
    def load(cls, source: ProfileSource) -> Profile:
        """A profile configured in code, in whichever form it was given (see `ProfileSource`)."""
        if isinstance(source, Profile):
            return source
        if isinstance(source, Mapping):
            return cls.from_json(source)
        return cls.from_file(source)


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")
