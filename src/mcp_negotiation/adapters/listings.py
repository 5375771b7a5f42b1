"""Listings as each client should read them: requirements declared, variants chosen, and
scoped on request.

Both SDK adapters hand a listing's answer here when the engine's outcome says it is one
(`Outcome.listing`); what an entry declares, which variant it is listed as and which
entries a client sees is decided in the core (`mcp_negotiation.core.listings`). A listing
is rare next to calls, so the lookups it costs (the server's registered functions) are
made per listing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..core.client_log import report
from ..core.listings import LISTINGS, catalogued
from ..core.outcome import Known
from ..core.variants import Served
from .mcp2 import seams
from .variants import served_from

__all__ = ["listed"]


async def listed(
    method: str,
    result: Any,
    owner: Any,
    known: Known | None,
) -> Any:
    """`result`, `owner`'s listing for `method` (its wire form, or an SDK model), as the client
    of `known` reads it (see `core.listings.catalogued`): the very object when nothing
    changed, else one of the same kind. Never raises: on a failure of ours the listing goes
    out as the server made it."""
    if not isinstance(result, Mapping) and not hasattr(result, "model_dump"):
        return result  # no listing (a middleware's None): nothing to declare
    try:
        wire = (
            result
            if isinstance(result, Mapping)
            else result.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
        server = seams.catalog_server(owner) if owner is not None else None
        functions = await seams.listed_functions(server, method) if server is not None else {}
        served = served_from(functions, variants=method == "tools/list")
        elsewhere = await _elsewhere(server, method, wire, served) if served else None
        hide = known is not None and known.negotiator.policy.hide_unusable
        answered = catalogued(method, wire, served.get, known, hide=hide, elsewhere=elsewhere)
        if answered is wire:
            return result
        return dict(answered) if isinstance(result, Mapping) else type(result).model_validate(answered)
    except Exception as error:
        report(logging.ERROR, "could not declare requirements in a listing", exc=error)
        return result


async def _elsewhere(server: Any, method: str, wire: Mapping[str, Any], served: Mapping[str, Served]) -> Any:
    """The entries of the variants of this page's tools that the server lists on other pages
    (a paging FastMCP server's), which may be the ones chosen here; None when there are none."""
    field, key_name = LISTINGS[method]
    entries = wire.get(field)
    page = (
        {entry.get(key_name) for entry in entries if isinstance(entry, Mapping)}
        if isinstance(entries, list)
        else set()
    )
    wanted = {
        variant.key
        for key in page
        if isinstance(key, str) and (found := served.get(key)) is not None
        for variant in found.variants
        if variant.key not in page
    }
    return await seams.tool_entries(server, wanted) if wanted and server is not None else None
