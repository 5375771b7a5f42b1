"""Tool variants: one listed tool name, served to each client by the implementation its
negotiation selects, and the rule every `tools/call` meets before the SDK reads its arguments.

A variant is a tool the server registered under a name of its own and marked (`@variant_of`)
as another way to serve a *base* tool: for the clients its condition picks, the base's name
is listed with the variant's entry (its input schema, description, output schema, `_meta`)
and a call of that name is dispatched to it. A variant's own name is never listed, and a
call of it is answered as an unknown tool: what a client may call is what it was listed.

The same choice (`choose`) decides the listing and the call, from the same record
`client_supports` answers from, so a client is always served the variant it was shown. The
call rule (`call_decision`, the engine's `ToolStage`) also refuses, with -32021, a call of
a tool whose requirements (`@requires`) the client does not meet, before the SDK validates
the arguments: the answer to a tool withheld from a client names no parameter of it.

Pure: no SDK import. The adapters say what serves a name (`Served`), the core decides.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

from .errors import INVALID_PARAMS, PolicyError, Refusal
from .facts import Facts
from .frozen_json import is_object
from .negotiation import Negotiation, capability_names, supports
from .outcome import Known
from .stages import Dispatch, Fetched

__all__ = [
    "CAPABILITY_SCOPE_META_KEY",
    "GATES",
    "VARIANT_ATTRIBUTE",
    "Implementation",
    "Served",
    "ToolLookup",
    "ToolStage",
    "VariantOf",
    "call_decision",
    "choose",
    "scope_fingerprint",
    "unknown_tool",
    "variants_by_base",
]

VARIANT_ATTRIBUTE: Final = "__mcp_negotiation_variant__"
"""Where `@variant_of` leaves its `VariantOf`, on the function it marks."""
CAPABILITY_SCOPE_META_KEY: Final = "dev.mcp-negotiation/capabilityScope"
"""The key, in a scoped listing's result `_meta`, of the fingerprint of the scope it was made for."""
_FINGERPRINT_DIGITS: Final = 16
_MAX_NAME_SHOWN: Final = 128
"""Characters of a tool name an unknown-tool answer repeats (a registered name: the server's)."""


class _Gates:
    """Whether any function in this process was marked by `@requires` or `@variant_of`: until
    one is, no `tools/call` can need the call rule, and the engine does not look."""

    __slots__ = ("any",)

    def __init__(self) -> None:
        self.any = False


GATES: Final = _Gates()


@dataclass(frozen=True, slots=True)
class VariantOf:
    """What `@variant_of(base, when=..., unless=...)` marks a tool with.

    Served in place of `base` to a client that supports every name in `when` and not every
    name in `unless`; with neither, to a client that cannot be served `base` itself (lacks a
    capability its `@requires` names): a fallback.
    """

    base: str
    when: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.base, str) or not self.base:
            raise PolicyError("variant_of() needs the name of the tool it is a variant of")
        object.__setattr__(self, "when", capability_names(self.when, "variant_of(when=...)"))
        object.__setattr__(self, "unless", capability_names(self.unless, "variant_of(unless=...)"))

    def serves(self, record: Negotiation, base_requires: tuple[str, ...]) -> bool:
        """Whether this variant is the one for the client of `record` (the base requiring
        `base_requires`), its condition read as `client_supports` reads names."""
        if not self.when and not self.unless:
            return not all(supports(record, name) for name in base_requires)
        if not all(supports(record, name) for name in self.when):
            return False
        return not (self.unless and all(supports(record, name) for name in self.unless))


class Implementation(NamedTuple):
    """One registered tool: the name the server registered it under, what its `@requires`
    names, and, for a variant, what it is a variant of."""

    key: str
    requires: tuple[str, ...] = ()
    variant: VariantOf | None = None


class Served(NamedTuple):
    """What serves one name: its own implementation and, for a base, its variants in the
    order the server lists them (the first whose condition holds is chosen)."""

    tool: Implementation
    variants: tuple[Implementation, ...] = ()


ToolLookup = Callable[[str], "Served | None"]
"""What an adapter gives the engine: what serves the tool a `tools/call` names, None for a
name it knows nothing of (the SDK answers it)."""


def choose(served: Served, record: Negotiation | None) -> Implementation:
    """The implementation that serves `served`'s name to the client of `record`: the first
    variant whose condition it meets, else the base (with no record, the base)."""
    base = served.tool
    if record is not None:
        for variant in served.variants:
            if variant.variant is not None and variant.variant.serves(record, base.requires):
                return variant
    return base


def unknown_tool(name: str) -> Refusal:
    """The answer to a call of a name no client is listed (a variant's own): the
    specification's unknown tool, -32602."""
    return Refusal(INVALID_PARAMS, f"Unknown tool: {name[:_MAX_NAME_SHOWN]}")


def call_decision(known: Known, name: str, lookup: ToolLookup) -> Refusal | str | None:
    """What a `tools/call` of `name` is, for the client of `known`: refused (-32021 when the
    implementation chosen for it requires what the client lacks, -32602 for a variant's own
    name), dispatched to another registered name (a variant), or None: served as it came."""
    served = lookup(name)
    if served is None:
        return None
    tool = served.tool
    if tool.variant is not None:
        return unknown_tool(name)
    chosen = choose(served, known.record)
    if chosen.requires:
        refusal = known.negotiator.missing_required(known.record, chosen.requires)
        if refusal is not None:
            return refusal
    return chosen.key if chosen is not tool else None


class ToolStage:
    """The engine's stage for a server's tools, the last: a `tools/call` refused (a tool
    withheld from this client, a variant's own name) or dispatched to a variant, as
    `call_decision` says, before the SDK reads its arguments. It advertises nothing and keeps
    nothing; until something in the process is gated (`GATES`), it looks at nothing either."""

    __slots__ = ("_tools",)

    def __init__(self, tools: ToolLookup) -> None:
        self._tools = tools

    def advertisement(self, era: str) -> None:
        return None

    def session(self, params: object) -> None:
        return None

    def on_request(self, known: Known, facts: Facts, fetched: Fetched) -> Dispatch | None:
        if not GATES.any or facts.method != "tools/call":
            return None
        params = facts.params
        name = params.get("name") if is_object(params) else None
        if type(name) is not str:
            return None  # the SDK answers a call without a name
        decided = call_decision(known, name, self._tools)
        if decided is None:
            return None
        return Dispatch(decided) if isinstance(decided, str) else Dispatch(refusal=decided)


def scope_fingerprint(view: Mapping[str, bool]) -> str:
    """A short, stable fingerprint of the capability scope a listing was made for: `view`
    maps each capability name the listing's choices read to whether this client has it (as
    `client_supports` answers). Equal views, equal fingerprints, in whatever order the names
    were read; two views that differ in any name differ (short of a 64-bit collision). 16 hex
    digits of a SHA-256: it tells scopes apart, it guards nothing."""
    text = json.dumps(view, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:_FINGERPRINT_DIGITS]


def variants_by_base(implementations: Sequence[Implementation]) -> dict[str, tuple[Implementation, ...]]:
    """The variants among `implementations`, by the base each names, in their order."""
    found: dict[str, list[Implementation]] = {}
    for implementation in implementations:
        if implementation.variant is not None:
            found.setdefault(implementation.variant.base, []).append(implementation)
    return {base: tuple(variants) for base, variants in found.items()}
