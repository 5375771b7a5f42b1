"""What a listing (`tools/list`, `prompts/list`, `resources/templates/list`) says about requirements.

A tool that needs client capabilities is listed with them under its `_meta`
(`io.modelcontextprotocol/requiredCapabilities`, the draft SEP "Required Capabilities for
Tools"), as the very ClientCapabilities-shaped object its -32021 refusal carries. With
`Policy(hide_unusable=True)` each client's listing also leaves out what its negotiation
cannot serve, and a tool with variants (`core.variants`) is listed as the one chosen for
each client. All of it is decided here, once, over the wire form of a listing (plain dicts),
whichever SDK major produced it; the adapters only say what serves an entry. A listing that
depended on the client says so: the fingerprint of its decisions in its `_meta`
(`CAPABILITY_SCOPE_META_KEY`), and `cacheScope: "private"`.

Pure: no SDK import. Pages are scoped one by one and keep the server's own cursors, so a
client that follows `nextCursor` sees exactly the usable entries, each once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, cast

from .errors import PolicyError, UsageError
from .negotiation import capability_names, required_capabilities_object, supports
from .outcome import Known
from .variants import CAPABILITY_SCOPE_META_KEY, Implementation, Served, choose, scope_fingerprint

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
    served_by: Callable[[str], Served | None],
    known: Known | None,
    *,
    hide: bool = False,
    elsewhere: Mapping[str, Mapping[str, Any]] | None = None,
) -> Mapping[str, Any]:
    """`result` (a listing's wire form) as the client of `known` reads it: each entry's
    requirements declared, each tool with variants listed as the one chosen for this client
    (`variants.choose`), no variant under its own name, and, with `hide`, without the entries
    this client cannot be served.

    `served_by(key)` says what serves an entry (`@requires`, `@variant_of`); an entry that
    already declares requirements in its `_meta` (a lowlevel server's, see
    `required_capabilities_meta`) keeps them. A chosen variant's entry is the one on this
    page, else the one in `elsewhere` (a paging server's other pages), listed under the
    base's name (and title). A listing that depended on the client (scoped) carries the
    fingerprint of the capabilities it was scoped by under `_meta[CAPABILITY_SCOPE_META_KEY]`
    (`variants.scope_fingerprint`), and goes out `cacheScope: "private"` where the server
    said `"public"`. An entry nothing applies to is
    left as it is, the same object; `result` itself is returned when nothing changed.
    """
    field, key_name = LISTINGS[method]
    entries = result.get(field)
    if not isinstance(entries, list):
        return result
    record = known.record if known is not None else None
    on_page = {
        entry[key_name]: entry
        for entry in entries
        if isinstance(entry, Mapping) and isinstance(entry.get(key_name), str)
    }
    listed: list[Any] = []
    scope: set[str] = set()
    """The capability names this listing's choices read (requirements hidden by, conditions
    of variants): what it was scoped by."""
    changed = False
    for entry in entries:
        key = entry.get(key_name) if isinstance(entry, Mapping) else None
        if not isinstance(key, str):
            listed.append(entry)
            continue
        served = served_by(key)
        names: tuple[str, ...] | None = None
        if served is not None:
            if served.tool.variant is not None:
                changed = True  # listed, if at all, under its base's name
                continue
            chosen = choose(served, record) if served.variants else served.tool
            if chosen is not served.tool:
                found = on_page.get(chosen.key) or (elsewhere or {}).get(chosen.key)
                if found is None:  # the adapter could not find its entry: the base stays, as it is
                    chosen = served.tool
                else:
                    entry = _renamed(found, entry, key_name)
                    changed = True
            for variant in served.variants:
                scope.update(served.tool.requires, *_conditions(variant))
            names = chosen.requires
        meta = entry.get("_meta")
        if names:
            required = required_capabilities_object(names)
            if not isinstance(meta, Mapping) or meta.get(REQUIRED_CAPABILITIES_META_KEY) != required:
                kept = meta if isinstance(meta, Mapping) else {}
                entry = {**entry, "_meta": {**kept, REQUIRED_CAPABILITIES_META_KEY: required}}
                changed = True
        elif isinstance(meta, Mapping) and REQUIRED_CAPABILITIES_META_KEY in meta:
            names = requirement_names(meta[REQUIRED_CAPABILITIES_META_KEY])
        if names and hide and known is not None:
            scope.update(names)
            if known.negotiator.missing_required(known.record, names) is not None:
                changed = True
                continue
        listed.append(entry)
    if not scope or record is None:
        return {**result, field: listed} if changed else result
    # What this client was listed is this client's: no shared cache may hand it to another,
    # and a cache of its own tells it from what another scope was listed by the fingerprint.
    meta = result.get("_meta")
    kept = meta if isinstance(meta, Mapping) else {}
    fingerprint = scope_fingerprint({name: supports(record, name) for name in scope})
    answered = {**result, field: listed, "_meta": {**kept, CAPABILITY_SCOPE_META_KEY: fingerprint}}
    if result.get("cacheScope") == "public":
        answered["cacheScope"] = "private"
    return answered


def _conditions(implementation: Implementation) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names a variant's condition reads (`when`, `unless`)."""
    variant = implementation.variant
    return (variant.when, variant.unless) if variant is not None else ((), ())


def _renamed(found: Mapping[str, Any], base: Mapping[str, Any], key_name: str) -> dict[str, Any]:
    """The chosen variant's entry under the base's name, and the base's title where it has one:
    the tool keeps its name and display title for every client; what it takes, returns, says
    and carries is the variant's."""
    entry = {**found, key_name: base[key_name]}
    if "title" in base:
        entry["title"] = base["title"]
    return entry
