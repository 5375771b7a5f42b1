"""Listings as each client should read them: requirements declared, and scoped on request.

Both SDK adapters hand a listing's answer here when the engine's outcome says it is one
(`Outcome.listing`); what an entry declares and which entries a client sees is decided in
the core (`mcp_negotiation.core.listings`). A listing is rare next to calls, so the lookups
it costs (the server's registered functions) are made per listing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..core.client_log import report
from ..core.listings import REQUIRES_ATTRIBUTE, catalogued
from ..core.outcome import Known
from .mcp2 import seams

__all__ = ["listed", "requirements"]

_MAX_UNWRAP = 8


def requirements(fn: object) -> tuple[str, ...] | None:
    """What `@requires` checks for `fn`, through the wrappers the SDK put around it
    (pydantic's `validate_call` on a prompt, FastMCP's own)."""
    for _ in range(_MAX_UNWRAP):
        if fn is None:
            return None
        names = getattr(fn, REQUIRES_ATTRIBUTE, None)
        if isinstance(names, tuple):
            return names
        fn = getattr(fn, "__wrapped__", None)
    return None


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
        scope = known if known is not None and known.negotiator.policy.hide_unusable else None
        answered = catalogued(method, wire, lambda key: requirements(functions.get(key)), scope)
        if answered is wire:
            return result
        return dict(answered) if isinstance(result, Mapping) else type(result).model_validate(answered)
    except Exception as error:
        report(logging.ERROR, "could not declare requirements in a listing", exc=error)
        return result
