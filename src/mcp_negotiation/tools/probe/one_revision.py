"""One revision over one connection of its own: what the server answered, as a `Row`.

Each legacy revision goes through its own `initialize` (the SDK's client always offers
its newest, so the handshake is sent as raw params through the SDK's `ClientSession`);
the modern revision through the SDK's `Client` pinned to it, with a raw
`server/discover`. Then the server's listings, following their cursors. The modern row
then lists the server once more over the same connection, as the reference listing: the
same requests, each carrying in its own `_meta` every capability and the probe's
`clientInfo` (see `sdk_seams`), since in that era nothing of a client's identity outlives
one request. Whatever happens becomes the row: a result, a refusal (a JSON-RPC error,
whatever HTTP status carried it), a timeout, or a failure (a crash, an HTTP answer that
is not MCP's).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Final, cast

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client import advertise
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from ...core import revisions
from ...core.listings import REQUIRED_CAPABILITIES_META_KEY, requirement_names
from ...ucp import UCP_EXTENSION_ID
from .catalogs import EVERY_CAPABILITY
from .rows import Entry, Kind, Listed, Row
from .sdk_seams import let_requests_name_their_client
from .target import Target
from .watch import Watch

CONNECTION_CLOSED: Final = -32000
"""The SDK client's code for a transport that closed under it (the server exited); a
server may send it too, as the TypeScript SDK does for "Server not initialized"."""

_MAX_PAGES: Final = 100
"""A server whose cursors never end is listed this many pages deep."""

PROBE_CLIENT: Final = {"name": "mcp-negotiation-probe", "version": "1"}
"""The `clientInfo` the probe sends unless told to send another's (`--client-info`), and always
for its reference listing: a client no per-client rule is written for."""

_AS_THE_REFERENCE: Final = cast(
    types.RequestParamsMeta,
    {types.CLIENT_INFO_META_KEY: PROBE_CLIENT, types.CLIENT_CAPABILITIES_META_KEY: EVERY_CAPABILITY},
)
"""The `_meta` of the modern row's reference listing: the probe, declaring every capability."""


class _RawRequest(types.Request[dict[str, Any], str]):
    method: str
    params: dict[str, Any]


async def _never_called(*args: Any) -> Any:
    raise MCPError(-32603, "the probe declares capabilities but does not serve them")


def client_options(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The SDK client's way to declare `capabilities` on a modern request.

    The SDK derives its capability map from the callbacks it is given; keys it cannot
    express (experimental, unknown ones) are not sent on the modern row.
    """
    options: dict[str, Any] = {}
    sampling = capabilities.get("sampling")
    if isinstance(sampling, Mapping):
        options["sampling_callback"] = _never_called
        options["sampling_capabilities"] = types.SamplingCapability.model_validate(sampling)
    if isinstance(capabilities.get("roots"), Mapping):
        options["list_roots_callback"] = _never_called
    if isinstance(capabilities.get("elicitation"), Mapping):
        options["elicitation_callback"] = _never_called
    extensions = capabilities.get("extensions")
    if isinstance(extensions, Mapping):
        options["extensions"] = [advertise(name, dict(settings)) for name, settings in extensions.items()]
    return options


async def probe_revision(
    target: Target,
    revision: str,
    capabilities: dict[str, Any],
    seconds: float,
    client_info: Mapping[str, str] = PROBE_CLIENT,
) -> Row:
    """The row for `revision`, as a client `client_info` names sees it: never raises but for
    cancellation."""
    era = revisions.era(revision)
    watch = Watch(credentials=bool(target.headers))
    with tempfile.TemporaryFile("w+") as errlog:
        try:
            with anyio.fail_after(seconds):
                if era == "legacy":
                    return await _legacy(target, revision, capabilities, client_info, errlog, watch)
                return await _modern(target, revision, capabilities, client_info, errlog, watch)
        except TimeoutError:
            row = Row(revision, era, "timeout", error=f"no answer in {seconds:g} s")
        except Exception as failure:
            errlog.seek(0)
            row = _failed_or_refused(target, revision, failure, watch, errlog.read())
    row.wrote_non_jsonrpc = watch.unparsed
    return row


async def _legacy(
    target: Target,
    revision: str,
    capabilities: dict[str, Any],
    client_info: Mapping[str, str],
    errlog: Any,
    watch: Watch,
) -> Row:
    params = {"protocolVersion": revision, "capabilities": capabilities, "clientInfo": dict(client_info)}
    async with (
        target.transport(errlog, watch) as streams,
        ClientSession(streams[0], streams[1], message_handler=watch) as session,
    ):
        request = _RawRequest(method="initialize", params=params)
        result = await session.send_request(request, types.InitializeResult)
        await session.send_notification(types.InitializedNotification())
        declared = _dumped(result.capabilities)
        listed = await _listings(session, declared)
    answered = result.protocol_version
    return Row(
        revision,
        "legacy",
        "agreed" if answered == revision else "counter-offer",
        answered=answered,
        server_capabilities=sorted(declared),
        server_info=_dumped(result.server_info) or None,
        ucp_advertised=_ucp_advertised(declared.get("experimental")),
        declared=declared,
        listed=listed,
    )


async def _modern(
    target: Target,
    revision: str,
    capabilities: dict[str, Any],
    client_info: Mapping[str, str],
    errlog: Any,
    watch: Watch,
) -> Row:
    options = client_options(capabilities)
    async with Client(
        target.transport(errlog, watch),
        mode=revision,
        message_handler=watch,
        client_info=types.Implementation.model_validate(dict(client_info)),
        **options,
    ) as client:
        discover = _RawRequest(method="server/discover", params={})
        found = await client.session.send_request(discover, types.DiscoverResult)
        declared = _dumped(found.capabilities)
        listed = await _listings(client.session, declared)
        reference = await _reference(client.session, declared)
        info = getattr(client, "server_info", None)  # optional (the `_meta` stamp)
    return Row(
        revision,
        "modern",
        "agreed",
        answered=revision,
        server_capabilities=sorted(declared),
        server_info=_dumped(info) or None,
        ucp_advertised=_ucp_advertised(declared.get("extensions")),
        declared=declared,
        listed=listed,
        reference=reference,
        supported_versions=list(found.supported_versions),
    )


async def _reference(session: ClientSession, declared: Mapping[str, Any]) -> Listed | None:
    """What the server lists, over this modern connection, to the probe declaring every
    capability; None where this SDK lets no request say so (the caller then connects again)."""
    if not let_requests_name_their_client(session):
        return None
    return await _listings(session, declared, _AS_THE_REFERENCE)


def _dumped(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json") if model is not None else {}


def _ucp_advertised(holder: object) -> dict[str, Any] | None:
    """The business profile a server advertises (see `mcp_negotiation.ucp.advertisement`)."""
    advertised = holder.get(UCP_EXTENSION_ID) if isinstance(holder, dict) else None
    return advertised if isinstance(advertised, dict) else None


Lister = Callable[..., Awaitable[Any]]
"""A session's `list_*` method: `params=` a page's cursor."""

_LISTINGS: Final[tuple[tuple[Kind, str, str, str, str], ...]] = (
    # kind, the capability that says it is served, the session's method, the result's list, the name key
    ("tool", "tools", "list_tools", "tools", "name"),
    ("prompt", "prompts", "list_prompts", "prompts", "name"),
    ("resource", "resources", "list_resources", "resources", "name"),
    ("resource template", "resources", "list_resource_templates", "resourceTemplates", "uriTemplate"),
)


async def _listings(
    session: ClientSession, declared: Mapping[str, Any], meta: types.RequestParamsMeta | None = None
) -> Listed:
    """Every entry the server lists to this client, of each kind it declares a capability for;
    each request carries `meta` in its `_meta`, when given."""
    listed: Listed = {}
    for kind, capability, method, field, key in _LISTINGS:
        if capability in declared:
            entries = await _listed(getattr(session, method), field, key, kind, meta)
            if entries is not None:
                listed[kind] = entries
    return listed


async def _listed(
    list_page: Lister, field: str, key: str, kind: Kind, meta: types.RequestParamsMeta | None
) -> tuple[Entry, ...] | None:
    """One listing, following its cursors; None when the server refuses it or answers one
    the SDK cannot read (the row stands without it)."""
    entries: list[Entry] = []
    cursor: str | None = None
    seen: set[str] = set()
    try:
        for _ in range(_MAX_PAGES):
            asked = (
                types.PaginatedRequestParams(cursor=cursor or None, _meta=meta) if cursor or meta else None
            )
            page = await list_page(params=asked)
            wire = page.model_dump(by_alias=True, exclude_none=True, mode="json")
            entries += [_entry(kind, key, item) for item in wire.get(field, ()) if isinstance(item, dict)]
            cursor = page.next_cursor
            if cursor is None or cursor in seen:
                break
            seen.add(cursor)
    except (MCPError, ValueError):  # a ValueError: pydantic's, for a listing out of shape
        return None
    return tuple(entries)


def _entry(kind: Kind, key: str, wire: Mapping[str, Any]) -> Entry:
    """What a listed entry says of what it needs: its requirements, and the features its
    own fields use (`outputSchema`, `annotations`, `icons`)."""
    meta = wire.get("_meta")
    required = requirement_names(meta.get(REQUIRED_CAPABILITIES_META_KEY)) if isinstance(meta, dict) else None
    shows = [
        feature
        for field, feature in (
            ("outputSchema", "structured_output"),
            ("annotations", "tool_annotations"),
            ("icons", "icons"),
        )
        if wire.get(field)
    ]
    schema = wire.get("inputSchema")
    digest = _digest(schema) if isinstance(schema, dict) else ""
    return Entry(kind, str(wire.get(key, "")), tuple(required or ()), tuple(shows), digest)


def _digest(schema: Mapping[str, Any]) -> str:
    """A short digest of a tool's input schema: two listings of one name that differ in it
    serve two implementations (a variant, see docs/tool-variants.md)."""
    try:
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return ""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _leaves(failure: BaseException) -> Iterator[BaseException]:
    """The exceptions inside `failure`, however deep the task groups nested them."""
    inner = getattr(failure, "exceptions", None)
    if not inner:
        yield failure
        return
    for exception in inner:
        yield from _leaves(exception)


def _failed_or_refused(
    target: Target, revision: str, failure: BaseException, watch: Watch, stderr: str
) -> Row:
    """A refusal when the server sent a JSON-RPC error (in whatever HTTP status); a failed
    row, saying why, when the connection closed or the answer was not MCP's."""
    era = revisions.era(revision)
    leaves = list(_leaves(failure))
    sent = _sent_by_the_server(leaves, watch)
    reason = watch.not_mcp(sent) if sent is not None and target.is_http else None
    if sent is not None and reason is None:
        data = sent.error.data
        answer = watch.http if target.is_http else None
        return Row(
            revision,
            era,
            "refused",
            error_code=sent.code,
            error=sent.message,
            error_data=data if isinstance(data, dict) else None,
            http_status=answer.status if answer is not None and answer.status >= 400 else None,
        )
    if reason is not None:
        error, detail = reason, f"{target.named} did not answer as an MCP server: {reason}"
    else:
        error, detail = _why_it_failed(target, leaves, stderr)
    return Row(revision, era, "failed", error=error, detail=detail)


def _sent_by_the_server(leaves: list[BaseException], watch: Watch) -> MCPError | None:
    """The JSON-RPC error among `leaves`, unless it is the SDK's own word for a connection
    that closed under it (which a server may also send, in an HTTP error status)."""
    found = next((leaf for leaf in leaves if isinstance(leaf, MCPError)), None)
    if found is None:
        return None
    closed = found.code == CONNECTION_CLOSED and found.message == "Connection closed"
    return found if watch.refused_in_http_error or not closed else None


def _why_it_failed(target: Target, leaves: list[BaseException], stderr: str) -> tuple[str, str]:
    """The row's one-line error, and the whole explanation (for when no revision answered)."""
    text = " ".join(str(e) or type(e).__name__ for e in leaves)
    if target.is_http:
        if any(isinstance(e, httpx2.ConnectError | httpx2.ConnectTimeout) for e in leaves):
            reason = f"URL unreachable: nothing answered at {target.named} ({text})"
            return reason, reason
        return text, f"{target.named} did not answer as an MCP server ({text})"
    if any(isinstance(e, MCPError) for e in leaves):  # the connection closed: the server exited
        tail = stderr.strip().splitlines()[-10:]
        detail = f"{target.named} crashed; the end of its stderr:\n" + ("\n".join(tail) or "(nothing)")
        return f"crashed: {tail[-1] if tail else '(nothing on stderr)'}", detail
    return text, f"{target.named} did not speak MCP ({text})"
