"""Extensions' version requirements: the `requires` of an extension's own JSON Schema.

An extension schema may say which protocol versions and which versions of other
capabilities it works with:

    "requires": {"protocol": {"min": "2026-01-23", "max": "2026-09-01"},
                 "capabilities": {"dev.ucp.shopping.checkout": {"min": "2026-06-01"}}}

These ranges do not *select* versions (exact intersection does); they are checked once
versions are selected, and an extension they refuse is excluded, after which orphaned
extensions are pruned again (`negotiate`). They live in the schema document the
profile entry's `schema` URL names, not in the profile, and a business serves its own
schemas rather than fetching them per request, so here they are configuration: given
by extension name, or read from the schema documents themselves.

Configuration is the business's own, read at start-up: a malformed requirement raises
`ValueError` there, rather than dropping an extension on every request for a typo.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from types import MappingProxyType
from typing import Final, TypeAlias

from ..core.errors import PolicyError, UsageError
from .profile import MAX_CAPABILITIES, MAX_NAME_LENGTH, MAX_PARENTS, MAX_PROFILE_BYTES, is_version

__all__ = ["Requirements", "Requires", "SchemaSource", "VersionRange"]

SchemaSource: TypeAlias = "Mapping[str, object] | str | PathLike[str]"
"""An extension schema: its decoded JSON document, or a path to the JSON file."""

_ANY_VERSION: Final = ""
"""The key of a requirement that holds for every version of its extension."""


def _date(value: object, where: str) -> str:
    if isinstance(value, str) and is_version(value):
        return value
    raise PolicyError(f"{where} must be a YYYY-MM-DD date, not {value!r:.60}")


def _name(value: object, where: str) -> str:
    if isinstance(value, str) and 0 < len(value) <= MAX_NAME_LENGTH:
        return value
    raise PolicyError(f"{where} must be a capability name of 1 to {MAX_NAME_LENGTH} characters")


@dataclass(frozen=True, slots=True)
class VersionRange:
    """Versions from `min` to `max`, both inclusive; no `max`, no upper bound.

    The one place UCP orders versions: `YYYY-MM-DD` strings, for which string order is
    date order.
    """

    min: str
    max: str | None = None

    def __post_init__(self) -> None:
        _date(self.min, "min")
        if self.max is not None and _date(self.max, "max") < self.min:
            raise PolicyError(f"the range {self.min}..{self.max} is empty")

    def admits(self, version: str) -> bool:
        return self.min <= version and (self.max is None or version <= self.max)

    @classmethod
    def from_json(cls, obj: object, where: str) -> VersionRange:
        if not isinstance(obj, Mapping) or "min" not in obj:
            raise PolicyError(f"{where} must be an object with a min version")
        try:
            return cls(_date(obj["min"], f"{where}.min"), obj.get("max"))
        except ValueError as reason:
            raise PolicyError(f"{where}: {reason}") from None


@dataclass(frozen=True, slots=True)
class Requires:
    """One extension's `requires`: a range for the negotiated protocol version and one per
    capability it depends on. Either may be absent; an empty `Requires` admits everything."""

    protocol: VersionRange | None = None
    capabilities: Mapping[str, VersionRange] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.capabilities) > MAX_PARENTS:
            raise PolicyError(f"requires.capabilities may name at most {MAX_PARENTS} capabilities")
        for name in self.capabilities:
            _name(name, "a requires.capabilities key")
        object.__setattr__(self, "capabilities", MappingProxyType(dict(self.capabilities)))

    def admits(self, protocol: str, chosen: Mapping[str, str]) -> bool:
        """Whether the negotiated `protocol` version and the versions `chosen` for the active
        capabilities satisfy these ranges. A capability that is not active constrains
        nothing: a multi-parent extension alive through one parent is not refused for
        the other's absence (which orphan pruning already judges)."""
        if self.protocol is not None and not self.protocol.admits(protocol):
            return False
        return all(
            (version := chosen.get(name)) is None or wanted.admits(version)
            for name, wanted in self.capabilities.items()
        )

    @classmethod
    def from_json(cls, obj: object, where: str = "requires") -> Requires:
        """Read a `requires` object as an extension schema writes it; `ValueError` if malformed."""
        if not isinstance(obj, Mapping):
            raise PolicyError(f"{where} must be an object")
        protocol = obj.get("protocol")
        capabilities = obj.get("capabilities", {})
        if not isinstance(capabilities, Mapping):
            raise PolicyError(f"{where}.capabilities must be an object")
        return cls(
            None if protocol is None else VersionRange.from_json(protocol, f"{where}.protocol"),
            {
                _name(name, f"a {where}.capabilities key"): VersionRange.from_json(
                    wanted, f"{where}.capabilities[{name!r:.60}]"
                )
                for name, wanted in capabilities.items()
            },
        )


def _schema_document(source: SchemaSource) -> Mapping[str, object]:
    if isinstance(source, Mapping):
        return source
    path = Path(source)
    if path.stat().st_size > MAX_PROFILE_BYTES:
        raise PolicyError(f"the extension schema {source} is larger than {MAX_PROFILE_BYTES} bytes")
    try:
        document = json.loads(path.read_bytes())
    except ValueError as bad:  # bad JSON or bad UTF-8: the configuration's, said as the library's error
        raise PolicyError(f"the extension schema {source} is not JSON: {bad}") from None
    if not isinstance(document, Mapping):
        raise PolicyError(f"the extension schema {source} is not a JSON object")
    return document


class Requirements:
    """The `requires` of a business's extensions, by extension name and schema version.

    `Requirements({"com.acme.shopping.loyalty": {"protocol": {"min": "2026-01-23"}}})`
    gives an extension's `requires` object by name: it holds for every version of it.
    `Requirements(schemas=["schemas/loyalty.json"])` reads them from the extension
    schemas the business serves (their `name`, `version` and `requires`, as the
    specification places them): one with a `version` holds for the profile entry of that
    version only, one without for every version. Both may be given; a name and version
    given twice raises `ValueError`, as does anything malformed. A schema's
    `requires.capabilities` must name only keys of its `$defs`, as the specification
    requires, when it has `$defs`.
    """

    __slots__ = ("_of",)

    def __init__(
        self,
        by_name: Mapping[str, Requires | Mapping[str, object]] | None = None,
        *,
        schemas: Iterable[SchemaSource] = (),
    ) -> None:
        if by_name is not None and not isinstance(by_name, Mapping):
            raise UsageError(f"requirements by name must be a mapping; got {type(by_name).__name__}")
        of: dict[tuple[str, str], Requires] = {}

        def add(name: str, version: str, requires: Requires) -> None:
            if (name, version) in of:
                raise PolicyError(f"requirements for {name} {version or '(every version)'} are given twice")
            if len(of) >= MAX_CAPABILITIES:
                raise PolicyError(f"at most {MAX_CAPABILITIES} extensions' requirements may be given")
            of[name, version] = requires

        for name, requires in (by_name or {}).items():
            where = f"requires of {_name(name, 'an extension name')}"
            if not isinstance(requires, Requires):
                requires = Requires.from_json(requires, where)
            add(name, _ANY_VERSION, requires)
        for source in [schemas] if isinstance(schemas, str | PathLike) else schemas:
            document = _schema_document(source)
            name = _name(document.get("name"), "an extension schema's name")
            raw_version = document.get("version")
            version = _ANY_VERSION if raw_version is None else _date(raw_version, f"{name}'s schema version")
            if document.get("requires") is None:
                continue  # "If requires is absent, the extension is assumed to be compatible"
            requires = Requires.from_json(document["requires"], f"{name}'s requires")
            defs = document.get("$defs")
            if isinstance(defs, Mapping) and not requires.capabilities.keys() <= defs.keys():
                stray = ", ".join(sorted(requires.capabilities.keys() - defs.keys()))
                raise PolicyError(f"{name}'s requires.capabilities names {stray}, which its $defs does not")
            add(name, version, requires)
        self._of: Mapping[tuple[str, str], Requires] = MappingProxyType(of)

    def of(self, name: str, version: str) -> Requires | None:
        """The requirements in force for the entry of `name` at `version`, if any."""
        return self._of.get((name, version)) or self._of.get((name, _ANY_VERSION))

    def admits(self, name: str, version: str, protocol: str, chosen: Mapping[str, str]) -> bool:
        """Whether `name` at `version` may stay active beside `chosen`, at `protocol`."""
        requires = self.of(name, version)
        return requires is None or requires.admits(protocol, chosen)

    def __bool__(self) -> bool:
        return bool(self._of)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Requirements) and self._of == other._of

    __hash__ = None  # type: ignore[assignment]  # (equal by contents, which are not hashable)

    def __repr__(self) -> str:
        shown = {f"{name}@{version}" if version else name: r for (name, version), r in self._of.items()}
        return f"Requirements({shown!r})"
