"""Per revision, the tools its client sees and can call, and those it loses (docs/tool-catalogs.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ...core import revisions
from ...core.negotiation import Negotiation, required_capabilities_object, supports
from .rows import Entry, Row

EVERY_CAPABILITY: Final = required_capabilities_object(revisions.feature_names("client"))
"""A client that declares every capability of the feature table: whom a server hides nothing from."""


def fill_tool_catalogs(
    rows: list[Row], capabilities: Mapping[str, Any], reference: tuple[Entry, ...]
) -> None:
    """Fill each row listed tools with the tools its client sees and can call, those it
    loses (hidden from it: listed to another row, or to a client declaring everything at the
    best served revision, `reference`; or listed with requirements this client, at this
    revision, does not meet), and those it is served in a variant (another input schema
    than `reference` lists under the name)."""
    everything = dict.fromkeys(
        entry.name
        for listed in (reference, *((row.listed or {}).get("tool", ()) for row in rows))
        for entry in listed
        if entry.kind == "tool"
    )
    schemas = {entry.name: entry.schema for entry in reference if entry.kind == "tool" and entry.schema}
    for row in rows:
        tools = (row.listed or {}).get("tool")
        if tools is None or row.answered is None:
            continue
        client = Negotiation(
            era=revisions.era(row.answered),
            protocol_version=row.answered,
            requested_version=row.revision,
            transport="unknown",
            client_capabilities=capabilities,
        )
        row.tools = [entry.name for entry in tools if all(supports(client, name) for name in entry.required)]
        row.tools_lost = [name for name in everything if name not in row.tools]
        row.tools_varied = [
            entry.name
            for entry in tools
            if entry.name in row.tools and schemas.get(entry.name, entry.schema) != entry.schema
        ]
