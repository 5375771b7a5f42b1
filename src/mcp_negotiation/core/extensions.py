"""Extensions (SEP-2133) negotiated by their settings, and advertised from one declaration.

A server declares the extensions it speaks once, `Policy(extensions={...})`: each under the
name its handlers ask about, with the identifiers it accepts for it (a family such as
`com.example/search` and `com.example/search-v2`, most preferred first) and the settings it
advertises. From that one declaration come both what the server advertises (the stage here:
`capabilities.extensions` to 2026-07-28 clients, `capabilities.experimental` to handshake
ones, whose wire schema has no `extensions`) and what each negotiation agreed (the record's
`extensions`: for each declared extension the client also declared, the identifier agreed
and the client's settings). So the two cannot disagree.

Whether a client's settings satisfy what a handler asks (`satisfies`), key by key: a list
asked for is satisfied by a list containing every item asked for (`mimeTypes`), an object
by an object satisfying it by the same rule, anything else by an equal value (`true` is not
`1`). Keys the handler does not name are not looked at.

Pure: no SDK import, no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from .errors import PolicyError, UsageError
from .frozen_json import Budget, NotFreezable, freeze, thaw

__all__ = [
    "AgreedExtension",
    "Extension",
    "Extensions",
    "ExtensionsStage",
    "agree",
    "identifier_problem",
    "json_equal",
    "satisfies",
    "settings_given",
]

# The SDK's grammar (`mcp/shared/extension.py`, SEP-2133): dot-separated labels, a `/`, a name.
_LABEL: Final = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_NAME: Final = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_IDENTIFIER: Final = re.compile(rf"{_LABEL}(?:\.{_LABEL})*/{_NAME}")
_MAX_IDENTIFIER: Final = 256
_SETTINGS_BUDGET: Final = 2_000
_CONTAINERS: Final = (Mapping, list, tuple)


def identifier_problem(identifier: object) -> str | None:
    """Why `identifier` is no extension identifier (SEP-2133's grammar), or None."""
    short = isinstance(identifier, str) and len(identifier) <= _MAX_IDENTIFIER
    if short and _IDENTIFIER.fullmatch(str(identifier)):
        return None
    shown = f"{identifier!r:.100}"
    hint = ""
    if isinstance(identifier, str) and identifier.count("/") > 1:
        prefix, _, rest = identifier.partition("/")
        meant = prefix + "/" + rest.replace("/", "-")
        hint = f"; did you mean {meant!r}? (a new version is a new name: `-v2`)"
    return f"{shown} is no extension identifier `vendor.prefix/name` (SEP-2133){hint}"


def settings_given(settings: object, what: str) -> Mapping[str, Any]:
    """`settings` (a JSON object) as a read-only copy; a clear error for anything else."""
    if not isinstance(settings, Mapping):
        raise UsageError(f"{what} must be a settings object (a mapping); got {type(settings).__name__}")
    try:
        frozen: Mapping[str, Any] = freeze(settings, Budget(_SETTINGS_BUDGET), max_depth=12)
        # Advertised or sent as JSON: a NaN or an infinity would fail the answer, not the policy.
        json.dumps(thaw(frozen), allow_nan=False)
    except NotFreezable as reason:
        raise PolicyError(f"{what} {reason}") from None
    except ValueError:
        raise PolicyError(f"{what} holds a number JSON cannot carry (NaN or an infinity)") from None
    return frozen


def json_equal(left: Any, right: Any) -> bool:
    """Equality of JSON values, whether read-only copies or plain ones: `true` is not `1`."""
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(json_equal(left[key], right[key]) for key in left)
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(json_equal(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    return not isinstance(left, _CONTAINERS) and not isinstance(right, _CONTAINERS) and left == right


def satisfies(declared: Any, wanted: Mapping[str, Any]) -> bool:
    """Whether a client's `declared` settings satisfy `wanted` (the rule: the module's docstring)."""
    if not isinstance(declared, Mapping):
        return not wanted
    for key, asked in wanted.items():
        if key not in declared:
            return False
        held = declared[key]
        if isinstance(asked, list | tuple):
            if not isinstance(held, list | tuple) or not all(
                any(json_equal(item, offered) for offered in held) for item in asked
            ):
                return False
        elif isinstance(asked, Mapping):
            if not isinstance(held, Mapping) or not satisfies(held, asked):
                return False
        elif not json_equal(held, asked):
            return False
    return True


class Extension:
    """One extension a server speaks: the identifiers it accepts for it, most preferred
    first, each with the settings the server advertises under it.

    `Extension({"com.example/search-v2": {"pages": True}, "com.example/search": {}})`, or
    `Extension(["com.example/search-v2", "com.example/search"])` (no settings). In
    `Policy(extensions=...)` a plain settings mapping stands for the one identifier it is
    declared under.
    """

    __slots__ = ("identifiers",)

    def __init__(self, identifiers: Mapping[str, Mapping[str, Any]] | Sequence[str]) -> None:
        if isinstance(identifiers, str):
            raise UsageError("Extension takes several identifiers: a list, or a mapping to their settings")
        pairs = (
            list(identifiers.items()) if isinstance(identifiers, Mapping) else [(i, {}) for i in identifiers]
        )
        if not pairs:
            raise PolicyError("an Extension accepts one identifier at least")
        accepted: dict[str, Mapping[str, Any]] = {}
        for identifier, settings in pairs:
            problem = identifier_problem(identifier)
            if problem is not None:
                raise PolicyError(problem)
            accepted[identifier] = settings_given(settings, f"the settings of {identifier!r}")
        self.identifiers: Mapping[str, Mapping[str, Any]] = MappingProxyType(accepted)
        """Each accepted identifier, most preferred first, with the settings advertised under it."""

    def __repr__(self) -> str:
        return f"Extension({thaw(self.identifiers)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuilt from plain settings (a policy pickles, for worker processes)."""
        return Extension, (thaw(self.identifiers),)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Extension)
            and json_equal(self.identifiers, other.identifiers)
            and (list(self.identifiers) == list(other.identifiers))
        )

    def __hash__(self) -> int:
        return hash(tuple(self.identifiers))


class AgreedExtension(NamedTuple):
    """What one negotiation agreed for a declared extension: the identifier (of those the
    server accepts, the most preferred the client declared) and the client's settings."""

    identifier: str
    settings: Mapping[str, Any]


class Extensions(Mapping[str, Extension]):
    """What `Policy(extensions=...)` holds once built: each declared extension by the name
    handlers ask about (one of its identifiers). Also what makes the stage advertising them."""

    __slots__ = ("_declared", "_families")

    def __init__(self, declared: Mapping[str, Extension | Mapping[str, Any]] | None = None) -> None:
        if declared is not None and not isinstance(declared, Mapping):
            kind = type(declared).__name__
            raise UsageError(f"extensions takes a mapping of identifier to settings; got {kind}")
        families: dict[str, Extension] = {}
        owner: dict[str, str] = {}
        for name, value in (declared or {}).items():
            problem = identifier_problem(name)
            if problem is not None:
                raise PolicyError(f"extensions: {problem}")
            family = value if isinstance(value, Extension) else Extension({name: value})
            if name not in family.identifiers:
                listed = ", ".join(family.identifiers)
                raise PolicyError(
                    f"extensions[{name!r}] accepts {listed}: the name an extension is declared under"
                    " is one of its identifiers (the one handlers ask about)"
                )
            for identifier in family.identifiers:
                if identifier in owner:
                    raise PolicyError(
                        f"extensions: {identifier!r} is accepted for both {owner[identifier]!r} and {name!r}"
                    )
                owner[identifier] = name
            families[name] = family
        self._declared = families
        self._families = tuple(families.items())
        try:  # sent in every handshake's (and discovery's) answer: bounded as one document
            freeze(self.advertised(), Budget(_SETTINGS_BUDGET), max_depth=14)
        except NotFreezable as reason:
            raise PolicyError(f"extensions: what they advertise {reason}") from None

    def __getitem__(self, name: str) -> Extension:
        return self._declared[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._declared)

    def __len__(self) -> int:
        return len(self._declared)

    def __repr__(self) -> str:
        return repr(dict(self._declared))

    def __reduce__(self) -> tuple[Any, ...]:
        return Extensions, (dict(self._declared),)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    def __hash__(self) -> int:
        return hash(tuple(self._declared))

    def advertised(self) -> dict[str, Mapping[str, Any]]:
        """Every accepted identifier with its settings: what the server advertises (plain
        JSON, which the adapter copies into each answer)."""
        return {i: thaw(s) for _, family in self._families for i, s in family.identifiers.items()}

    def agree(
        self, capabilities: Mapping[str, Any], revoked: frozenset[str]
    ) -> Mapping[str, AgreedExtension]:
        """See `agree`."""
        return agree(self._families, capabilities, revoked)

    def stage(self) -> ExtensionsStage:
        """The stage advertising these extensions (what the engine adds for them)."""
        return ExtensionsStage(self.advertised())


_NOTHING: Final[Mapping[str, AgreedExtension]] = MappingProxyType({})


def agree(
    families: tuple[tuple[str, Extension], ...], capabilities: Mapping[str, Any], revoked: frozenset[str]
) -> Mapping[str, AgreedExtension]:
    """For each declared extension the client declared too (`capabilities.extensions`, the
    rules applied), the identifier agreed and the client's settings for it, by the name the
    extension is declared under. A revoked identifier (`revoked`, a rule's) is not agreed."""
    offered = capabilities.get("extensions")
    if not families or not isinstance(offered, Mapping) or not offered:
        return _NOTHING
    agreed: dict[str, AgreedExtension] = {}
    for name, family in families:
        for identifier in family.identifiers:
            settings = offered.get(identifier)
            if settings is None or identifier in revoked or "extensions" in revoked:
                continue
            if settings is True:  # not the schema's object, but plainly meant as declared
                settings = MappingProxyType({})
            if isinstance(settings, Mapping):
                agreed[name] = AgreedExtension(identifier, settings)
                break
    return MappingProxyType(agreed) if agreed else _NOTHING


class ExtensionsStage:
    """Advertises the declared extensions: in `capabilities.extensions` to 2026-07-28 clients
    (`server/discover`), in `capabilities.experimental` to handshake ones (`initialize`: the
    2025 wire schema strips `extensions`). Nothing per request: the agreement is the record's."""

    __slots__ = ("_advertised",)

    def __init__(self, advertised: Mapping[str, Mapping[str, Any]]) -> None:
        self._advertised = {
            "legacy": {"experimental": advertised},
            "modern": {"extensions": advertised},
        }

    def advertisement(self, era: str) -> Mapping[str, Mapping[str, Any]] | None:
        return self._advertised.get(era)

    def session(self, params: Any) -> tuple[str, Any] | None:
        return None

    def on_request(self, known: Any, facts: Any, fetched: Any) -> None:
        """Nothing: what a request agreed is its record's, made (and memoised) with it. (Typed
        loosely: this module is the negotiation's, below the stages' interface.)"""
        return None
