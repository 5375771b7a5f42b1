"""What a listing (`tools/list`, `prompts/list`, `resources/templates/list`) says about requirements.

A tool that needs client capabilities is listed with them under its `_meta`
(`io.modelcontextprotocol/requiredCapabilities`, the draft SEP "Required Capabilities for
Tools"), as the very ClientCapabilities-shaped object its -32021 refusal carries. With
`Policy(hide_unusable=True)` each client's listing also leaves out what its negotiation
cannot serve. Both are decided here, once, over the wire form of a listing (plain dicts),
whichever SDK major produced it; the adapters only say which function serves an entry.

Pure: no SDK import. Pages are scoped one by one and keep the server's own cursors, so a
client that follows `nextCursor` sees exactly the usable entries, each once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, cast

from .errors import PolicyError, UsageError
from .negotiation import capability_names, required_capabilities_object
from .outcome import Known

__all__ = [
    "LISTINGS",
    "REQUIRED_CAPABILITIES_META_KEY",
    "REQUIRES_ATTRIBUTE",
    "catalogued",
    "required_capabilities_meta",
    "requirement_names",
]

REQUIRED_CAPABILITIES_META_KEY: Final = "io.modelcontextprotocol/requiredCapabilities"
REQUIRES_ATTRIBUTE: Final = "__mcp_negotiation_requires__"
"""Where `@requires` leaves the names it checks, on the function it returns."""

LISTINGS: Final[Mapping[str, tuple[str, str]]] = {
    "tools/list": ("tools", "name"),
    "prompts/list": ("prompts", "name"),
    "resources/templates/list": ("resourceTemplates", "uriTemplate"),
}
"""The listings whose entries `@requires` can gate: (the result's list, an entry's key)."""

def required_capabilities_meta(*required: str | Callable[..., Any]) -> dict[str, Any]:
    """The `_meta` that declares a listed entry's requirements, for servers that list their
    own (a lowlevel `Server`'s `Tool(..., _meta=required_capabilities_meta(...))`).

    Give it the capability names, or the `@requires`-decorated function that serves the
    entry, so that the listing and the -32021 come from one declaration. Entries of
    `MCPServer` and FastMCP servers need none of this: their `@requires` is listed as is.
    """
    if not required:
        raise PolicyError("required_capabilities_meta() needs one or more capability names")
    names = getattr(required[0], REQUIRES_ATTRIBUTE, None) if len(required) == 1 else None
    if names is None:
        if not all(isinstance(name, str) for name in required):
            raise UsageError("required_capabilities_meta() takes capability names, or a @requires() function")
        names = capability_names(cast("tuple[str, ...]", required), "required_capabilities_meta()")
    return {REQUIRED_CAPABILITIES_META_KEY: required_capabilities_object(names)}


def requirement_names(required: object) -> tuple[str, ...] | None:
    """The capability names a `requiredCapabilities` object stands for (the inverse of
    `required_capabilities_object`), or None for what is no such object.

    Each leaf (`{}` or `true`) is one dotted name; `extensions` holds extension identifiers
    and `experimental` experimental keys, whose own dots are part of their names.
    """
    if not isinstance(required, Mapping):
        return None
    names: list[str] = []

    def walk(node: Mapping[str, Any], path: str) -> bool:
        for key, value in node.items():
            if not isinstance(key, str):
                return False
            if path in ("extensions", "experimental"):
                name = key if path == "extensions" else f"experimental.{key}"
                if not (value is True or (isinstance(value, Mapping) and not value)):
                    return False
                names.append(name)
                continue
            dotted = f"{path}.{key}" if path else key
            if value is True or (isinstance(value, Mapping) and not value):
                names.append(dotted)
            elif isinstance(value, Mapping):
                if not walk(value, dotted):
                    return False
            else:
                return False
        return True

    return tuple(names) if walk(required, "") else None


def catalogued(
    method: str,
    result: Mapping[str, Any],
    requirements_of: Callable[[str], tuple[str, ...] | None],
    scope: Known | None,
) -> Mapping[str, Any]:
    """`result` (a listing's wire form) with each entry's requirements declared, and, with
    `scope` (a negotiation), without the entries its record cannot be served.

    `requirements_of(key)` names what the function behind an entry requires (`@requires`);
    an entry that already declares requirements in its `_meta` (a lowlevel server's, see
    `required_capabilities_meta`) keeps them. An entry with none is left as it is, the same
    object; `result` itself is returned when nothing changed.
    """
    field, key_name = LISTINGS[method]
    entries = result.get(field)
    if not isinstance(entries, list):
        return result
    listed: list[Any] = []
    changed = scoped = False
    for entry in entries:
        if not isinstance(entry, Mapping):
            listed.append(entry)
            continue
        key = entry.get(key_name)
        names = requirements_of(key) if isinstance(key, str) else None
        meta = entry.get("_meta")
        if names:
            required = required_capabilities_object(names)
            if not isinstance(meta, Mapping) or meta.get(REQUIRED_CAPABILITIES_META_KEY) != required:
                kept = meta if isinstance(meta, Mapping) else {}
                entry = {**entry, "_meta": {**kept, REQUIRED_CAPABILITIES_META_KEY: required}}
                changed = True
        elif isinstance(meta, Mapping) and REQUIRED_CAPABILITIES_META_KEY in meta:
            names = requirement_names(meta[REQUIRED_CAPABILITIES_META_KEY])
        if names and scope is not None:
            scoped = True
            if scope.negotiator.missing_required(scope.record, names) is not None:
                changed = True
                continue
        listed.append(entry)
    if scoped and result.get("cacheScope") == "public":
        # What this client was listed is this client's: no shared cache may hand it to another.
        return {**result, field: listed, "cacheScope": "private"}
    return {**result, field: listed} if changed else result
