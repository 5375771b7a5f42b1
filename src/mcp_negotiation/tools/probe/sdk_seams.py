"""The one place the probe goes beneath the SDK's public surface: `ClientSession._stamp`.

In the 2026-07-28 era a client's `clientInfo` and capabilities travel in every request's
`_meta`, and the SDK's session writes them there itself: `ClientSession._stamp` (the
function `mcp.client.session._make_modern_stamp` builds at `adopt()`) runs on each outgoing
request and overwrites both keys with the session's own. So the SDK's `Client` can speak
only as the one client it was built as, and the probe's reference listing (a client that
declares every capability, named as the probe) would need a connection of its own: for
stdio, a server process of its own.

`let_requests_name_their_client` wraps that stamp so that a request which carries either
key in its own `_meta` keeps it, as the SDK already lets one request keep its own log
level. Requests that carry neither (everything the SDK's `Client` sends) go out exactly as
before. Where an SDK has no `_stamp` to wrap, it answers False and changes nothing: the
probe then reads the reference listing over a connection of its own, as it did before
(`tests/tools/test_probe_reference.py` fails loudly when that happens).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from mcp.client.session import ClientSession
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY

NAMED_PER_REQUEST: Final = (CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY)
"""The `_meta` keys that say who the client is and what it declares."""

Stamp = Callable[[dict[str, Any], Any], None]


def let_requests_name_their_client(session: ClientSession) -> bool:
    """Have the `clientInfo` and capabilities a request carries in its own `_meta` survive
    the session's stamp; False (nothing changed) where this SDK has no stamp to wrap.

    Call it once the session has adopted its modern revision (`adopt()` replaces the stamp).
    """
    stamp: Stamp | None = getattr(session, "_stamp", None)
    if not callable(stamp):
        return False

    def stamp_keeping_the_request_own(data: dict[str, Any], opts: Any) -> None:
        own = (data.get("params") or {}).get("_meta") or {}
        kept = {key: own[key] for key in NAMED_PER_REQUEST if key in own}
        stamp(data, opts)
        if kept:
            data.setdefault("params", {}).setdefault("_meta", {}).update(kept)

    session._stamp = stamp_keeping_the_request_own
    return True
