"""`mcp-negotiation probe`: which revisions a server serves, and what each client loses.

The probe is a client. It connects once per known revision with a chosen capability
map: each legacy revision through its own `initialize` (the SDK's client always offers
its newest, so the handshake is sent as raw params through the SDK's `ClientSession`),
and the modern revision through the SDK's `Client` pinned to it. It reports what the
server answered, never what it hopes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import textwrap
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Final, TextIO
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client import advertise
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ..core import revisions
from ..core.errors import UNSUPPORTED_PROTOCOL_VERSION, NegotiationError
from ..core.listings import REQUIRED_CAPABILITIES_META_KEY, requirement_names
from ..core.negotiation import Negotiation, required_capabilities_object, supports
from ..ucp import UCP_EXTENSION_ID, Profile, UcpError, negotiate_capabilities


class ProbeError(NegotiationError):
    """A failure a person can act on: the server could not be started or reached."""


class _Watch:
    """What the probe notices beneath the SDK client, which turns both into JSON-RPC errors.

    As a `message_handler`: output of the server's that was not JSON-RPC (the client skips
    such lines and waits on, so a server that writes nothing else would only time out).
    As an httpx response hook: the last HTTP answer to a POST, whose status and content
    type tell a refusal by an MCP server from a URL that is not one (the SDK reports a
    401, an HTML page or a redirect as JSON-RPC errors it makes up).
    """

    def __init__(self) -> None:
        self.unparsed = False
        self.http: tuple[int, str, str | None] | None = None
        self.jsonrpc_error = False
        """Whether the last error status carried a JSON-RPC error (an MCP server's refusal)."""

    async def __call__(self, message: Any) -> None:
        self.unparsed = self.unparsed or isinstance(message, Exception)
        await anyio.lowlevel.checkpoint()

    async def response(self, response: httpx2.Response) -> None:
        if response.request.method != "POST":
            return
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        self.http = (response.status_code, content_type, response.headers.get("location"))
        self.jsonrpc_error = False
        if response.status_code >= 400 and content_type == "application/json":
            # Read here (httpx keeps the body for the SDK): a web framework's JSON 404 is not
            # an MCP server's refusal, which the SDK would report the same way.
            try:
                body = json.loads(await response.aread())
            except ValueError:
                return
            self.jsonrpc_error = isinstance(body, dict) and body.get("jsonrpc") == "2.0" and "error" in body

    def not_mcp(self, refused: MCPError) -> str | None:
        """Why the HTTP answer behind `refused` did not come from an MCP server, if it did not."""
        if self.http is None:
            return None
        status, content_type, location = self.http
        if status in (401, 403):
            return f"HTTP {status}: the server wants credentials, which the probe does not send"
        if 300 <= status < 400:
            where = _shown(location) if location else "(no location)"
            return f"HTTP {status}: redirected to {where}, which the SDK's client does not follow"
        if status >= 400 and not self.jsonrpc_error:
            return f"HTTP {status} with {content_type or 'no content type'}, not a JSON-RPC error"
        if status < 300 and content_type not in ("application/json", "text/event-stream"):
            return f"HTTP {status} with {content_type or 'no content type'}, not JSON-RPC"
        if status < 300 and refused.error.code == PARSE_ERROR:
            return f"HTTP {status}: the body is not JSON-RPC"
        return None


class _RawRequest(types.Request[dict[str, Any], str]):
    method: str
    params: dict[str, Any]


Listed = list[tuple[str, tuple[str, ...]]]
"""A server's tools as one client was listed them: each name, with what it declares it requires."""


@dataclass
class Row:
    revision: str
    era: str
    outcome: str
    answered: str | None = None
    error_code: int | None = None
    error: str | None = None
    server_capabilities: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    server_info: dict[str, Any] | None = None
    """The name and version (and more) the server gave at this revision, as it gave them."""
    ucp_advertised: dict[str, Any] | None = field(default=None, repr=False)
    error_data: dict[str, Any] | None = None
    """The refusal's `data`, as the server sent it."""
    tools: list[str] | None = None
    """The tools a client at this revision sees and can call (None: none were listed to it)."""
    tools_lost: list[str] = field(default_factory=list)
    """The tools it goes without: hidden from it, or listed with requirements it cannot meet."""
    listed: Listed | None = field(default=None, repr=False)
    """The tools as the server listed them to this client (not output: `tools` says it)."""

    def as_dict(self) -> dict[str, Any]:
        """The row as `--json` carries it."""
        row = asdict(self)
        del row["listed"]
        return row

    @property
    def served(self) -> bool:
        return self.outcome in ("agreed", "counter-offer")


def _server_info(info: Any) -> dict[str, Any] | None:
    return info.model_dump(by_alias=True, exclude_none=True, mode="json") if info is not None else None


def _capability_names(capabilities: Any) -> list[str]:
    dumped = capabilities.model_dump(by_alias=True, exclude_none=True) if capabilities is not None else {}
    return sorted(dumped)


def _ucp_advertised(capabilities: Any, where: str) -> dict[str, Any] | None:
    """The business profile a server advertises (see `mcp_negotiation.ucp.advertisement`)."""
    holder = getattr(capabilities, where, None) or {}
    advertised = holder.get(UCP_EXTENSION_ID) if isinstance(holder, dict) else None
    return advertised if isinstance(advertised, dict) else None


async def _never_called(*args: Any) -> Any:
    raise MCPError(-32603, "the probe declares capabilities but does not serve them")


def _client_options(capabilities: Mapping[str, Any]) -> dict[str, Any]:
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


_HOST_PORT: Final = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[\w.-]+):[0-9]{1,5}(?:/\S*)?")
"""`host:port[/path]`: a URL without its scheme, which would otherwise be run as a command."""

CONNECTION_CLOSED: Final = -32000
"""The SDK client's code for a transport that closed under it (the server exited)."""
PARSE_ERROR: Final = -32700


@contextlib.asynccontextmanager
async def _transport(target: str | list[str], errlog: TextIO, watch: _Watch) -> AsyncIterator[Any]:
    """The SDK's transport to `target`; a stdio server gets the operator's environment, as
    it would run from their shell (the SDK passes on only a handful of variables)."""
    if isinstance(target, str):
        timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's own defaults
        async with (
            httpx2.AsyncClient(timeout=timeout, event_hooks={"response": [watch.response]}) as http,
            streamable_http_client(target, http_client=http) as streams,
        ):
            yield streams
        return
    parameters = StdioServerParameters(command=target[0], args=target[1:], env=dict(os.environ))
    async with stdio_client(parameters, errlog=errlog) as streams:
        yield streams


def _mcp_error(failure: BaseException) -> MCPError | None:
    """The MCPError inside `failure`, which task groups may have wrapped in groups."""
    return next((leaf for leaf in _leaves(failure) if isinstance(leaf, MCPError)), None)


def _refusal(failure: BaseException, target: str | list[str], watch: _Watch) -> MCPError | None:
    """A refusal by a running MCP server; a closed connection is a crash, not a refusal,
    and an HTTP answer that is not MCP's is no refusal either (`ProbeError`)."""
    found = _mcp_error(failure)
    if found is None or found.error.code == CONNECTION_CLOSED:
        return None
    reason = watch.not_mcp(found)
    if reason is not None:
        raise ProbeError(f"{_named(target)} did not answer as an MCP server: {reason}")
    return found


async def _probe_legacy(
    target: str | list[str], revision: str, capabilities: dict[str, Any], errlog: TextIO, watch: _Watch
) -> Row:
    params = {
        "protocolVersion": revision,
        "capabilities": capabilities,
        "clientInfo": {"name": "mcp-negotiation-probe", "version": "1"},
    }
    try:
        async with (
            _transport(target, errlog, watch) as streams,
            ClientSession(streams[0], streams[1], message_handler=watch) as session,
        ):
            request = _RawRequest(method="initialize", params=params)
            result = await session.send_request(request, types.InitializeResult)
            await session.send_notification(types.InitializedNotification())
            listed = await _listed_tools(lambda page: session.list_tools(params=page), result.capabilities)
    except Exception as failure:
        refused = _refusal(failure, target, watch)
        if refused is None:
            raise
        return _refused(revision, "legacy", refused)
    answered = result.protocol_version
    return Row(
        revision,
        "legacy",
        "agreed" if answered == revision else "counter-offer",
        answered=answered,
        server_capabilities=_capability_names(result.capabilities),
        server_info=_server_info(result.server_info),
        ucp_advertised=_ucp_advertised(result.capabilities, "experimental"),
        listed=listed,
    )


async def _probe_modern(
    target: str | list[str], revision: str, capabilities: dict[str, Any], errlog: TextIO, watch: _Watch
) -> Row:
    options = _client_options(capabilities)
    try:
        async with Client(
            _transport(target, errlog, watch), mode=revision, message_handler=watch, **options
        ) as client:
            discover = _RawRequest(method="server/discover", params={})
            found = await client.session.send_request(discover, types.DiscoverResult)
            listed = await _listed_tools(
                lambda page: client.list_tools(cursor=page.cursor if page else None), found.capabilities
            )
            return Row(
                revision,
                "modern",
                "agreed",
                answered=revision,
                server_capabilities=_capability_names(found.capabilities),
                server_info=_server_info(getattr(client, "server_info", None)),  # optional (`_meta` stamp)
                ucp_advertised=_ucp_advertised(found.capabilities, "extensions"),
                listed=listed,
            )
    except Exception as failure:
        refused = _refusal(failure, target, watch)
        if refused is None:
            raise
        return _refused(revision, "modern", refused)


def _refused(revision: str, era: str, refused: MCPError) -> Row:
    data = refused.error.data
    return Row(
        revision,
        era,
        "refused",
        error_code=refused.error.code,
        error=refused.error.message,
        error_data=data if isinstance(data, dict) else None,
    )


def narrowing(rows: list[Row]) -> dict[str, Any] | None:
    """The revisions the server's required capabilities left out, as its -32022s said: each
    with the requirements it cannot have (by the names `Policy(required_capabilities=...)`
    takes), and the revisions the refusals list instead; None when no refusal said so.

    A legacy revision left out is counter-offered, which says nothing of why: only refused
    revisions can be named here.
    """
    left_out: dict[str, list[str]] = {}
    supported: set[str] = set()
    for row in rows:
        data = row.error_data or {}
        required = data.get("requiredCapabilities")
        if row.error_code == UNSUPPORTED_PROTOCOL_VERSION and isinstance(required, dict):
            left_out[row.revision] = list(requirement_names(required) or ())
            listed = data.get("supported")
            supported.update(listed if isinstance(listed, list) else ())
    if not left_out:
        return None
    return {"left_out": left_out, "supported": list(revisions.known_revisions(supported))}


def _render_narrowing(narrowed: dict[str, Any] | None) -> list[str]:
    if narrowed is None:
        return []
    reasons = "; ".join(
        f"{revision} cannot have {', '.join(names)}" for revision, names in narrowed["left_out"].items()
    )
    text = f"the server's required capabilities narrow it to {', '.join(narrowed['supported'])} ({reasons})"
    return _wrapped("narrowed", text, 9)


_MAX_PAGES: Final = 100
"""A server whose cursors never end is listed this many pages deep."""


async def _listed_tools(list_page: Any, server_capabilities: Any) -> Listed | None:
    """Every tool the server lists to this client, following its cursors; None for a server
    that declares no tools or refuses to list them."""
    if server_capabilities is None or server_capabilities.tools is None:
        return None
    listed: Listed = []
    cursor: str | None = None
    seen: set[str] = set()
    try:
        for _ in range(_MAX_PAGES):
            page = await list_page(types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            for tool in page.tools:
                required = (tool.meta or {}).get(REQUIRED_CAPABILITIES_META_KEY)
                listed.append((tool.name, requirement_names(required) or ()))
            cursor = page.next_cursor
            if cursor is None or cursor in seen:
                break
            seen.add(cursor)
    except MCPError:
        return None
    return listed


_EVERY_CAPABILITY: Final = required_capabilities_object(revisions.feature_names("client"))
"""A client that declares every capability of the feature table: whom a server hides nothing from."""


async def _reference_catalog(
    target: str | list[str], rows: list[Row], seconds: float, errlog: TextIO, watch: _Watch
) -> Listed | None:
    """The tools listed to a client declaring every capability at the best served revision:
    what a server that scopes its listing (`Policy(hide_unusable=True)`) hides from no one."""
    best = next((row for row in reversed(rows) if row.served and row.answered in revisions.KNOWN), None)
    if best is None or best.listed is None:
        return None
    probe_at = _probe_legacy if best.era == "legacy" else _probe_modern
    try:
        with anyio.fail_after(seconds):
            row = await probe_at(target, best.revision, dict(_EVERY_CAPABILITY), errlog, watch)
    except Exception:  # the rows stand without it: only tools hidden from every row go unseen
        return None
    return row.listed


def _tool_catalogs(rows: list[Row], capabilities: Mapping[str, Any], reference: Listed | None) -> None:
    """Fill each listed row with the tools its client sees and can call, and those it loses:
    hidden from it (listed to another row, or to a client declaring everything), or listed
    with requirements this client, at this revision, does not meet."""
    everything = dict.fromkeys(
        name for listed in (reference, *(row.listed for row in rows)) for name, _ in listed or ()
    )
    for row in rows:
        listed = row.listed
        if listed is None or row.answered is None:
            continue
        client = Negotiation(
            era=revisions.era(row.answered),
            protocol_version=row.answered,
            requested_version=row.revision,
            transport="unknown",
            client_capabilities=capabilities,
        )
        row.tools = [name for name, required in listed if all(supports(client, r) for r in required)]
        row.tools_lost = [name for name in everything if name not in row.tools]


def best_served(rows: list[Row]) -> str | None:
    """The newest known revision some row was served at: what "lost vs best" compares with."""
    # A revision this library does not know (a draft a server counter-offers) has no row in
    # the feature table: it is shown as answered, with nothing computed against it.
    served = [row.answered for row in rows if row.served and row.answered in revisions.KNOWN]
    return max(served, key=revisions.KNOWN.index) if served else None


def _lost(rows: list[Row]) -> None:
    """Fill each served row with the features it lacks that the best served revision has."""
    best = best_served(rows)
    for row in rows:
        if best and row.served and row.answered in revisions.KNOWN:
            row.lost = sorted(
                name
                for name, spec in revisions.FEATURES.items()
                if spec.at(best) and not spec.at(row.answered)
            )


async def probe(
    target: str | list[str], capabilities: dict[str, Any], seconds: float, progress: Any
) -> list[Row]:
    """Probe every known revision, oldest first."""
    if isinstance(target, list) and shutil.which(target[0]) is None:
        hint = ""
        if len(target) == 1 and _HOST_PORT.fullmatch(target[0]):
            hint = f" (to probe a URL, give its scheme: http://{target[0]})"
        raise ProbeError(f"server command not found: {target[0]}{hint}")
    rows: list[Row] = []
    watch = _Watch()
    with tempfile.TemporaryFile("w+") as errlog:
        for revision in revisions.KNOWN:
            progress(f"probing {revision} …")
            try:
                with anyio.fail_after(seconds):
                    if revisions.era(revision) == "legacy":
                        rows.append(await _probe_legacy(target, revision, capabilities, errlog, watch))
                    else:
                        rows.append(await _probe_modern(target, revision, capabilities, errlog, watch))
            except TimeoutError:
                if watch.unparsed and all(row.outcome == "timeout" for row in rows):
                    raise ProbeError(
                        f"{_named(target)} did not speak MCP: it wrote output that is not JSON-RPC "
                        f"and answered nothing in {seconds:g} s"
                    ) from None
                rows.append(
                    Row(revision, revisions.era(revision), "timeout", error=f"no answer in {seconds:g} s")
                )
            except ProbeError:
                raise
            except Exception as failed:
                errlog.seek(0)
                raise ProbeError(_explain(target, failed, errlog.read())) from failed
        reference = await _reference_catalog(target, rows, seconds, errlog, watch)
    _lost(rows)
    _tool_catalogs(rows, capabilities, reference)
    return rows


def _shown(url: str) -> str:
    """`url` without credentials, query or fragment: what the probe prints may be shared."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if parts.port is not None:
            netloc += f":{parts.port}"
    except ValueError:
        return "(an unparsable URL)"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _named(target: str | list[str]) -> str:
    return _shown(target) if isinstance(target, str) else f"the server `{' '.join(target)}`"


def _leaves(failure: BaseException) -> Iterator[BaseException]:
    """The exceptions inside `failure`, however deep the task groups nested them."""
    inner = getattr(failure, "exceptions", None)
    if not inner:
        yield failure
        return
    for exception in inner:
        yield from _leaves(exception)


def _explain(target: str | list[str], failure: BaseException, stderr: str) -> str:
    leaves = list(_leaves(failure))
    text = " ".join(str(e) or type(e).__name__ for e in leaves)
    if isinstance(target, str):
        if any(isinstance(e, httpx2.ConnectError | httpx2.ConnectTimeout) for e in leaves):
            return f"URL unreachable: nothing answered at {_named(target)} ({text})"
        return f"{_named(target)} did not answer as an MCP server ({text})"
    tail = "\n".join(stderr.strip().splitlines()[-10:])
    if _mcp_error(failure) is not None:
        return f"{_named(target)} crashed; the end of its stderr:\n{tail or '(nothing)'}"
    return f"{_named(target)} did not speak MCP ({text})"


WIDTH: Final = 100
"""The human output fits this many columns, whatever the server answered."""
_CELL: Final = 24
"""Longer table cells (a revision string a server made up) are cut to this."""

LEGEND: Final = (
    (
        "outcome",
        "agreed: the server answered the revision offered; counter-offer: a legacy server"
        " answered another one; refused (CODE): it answered a JSON-RPC error; timeout: no answer"
        " within --timeout",
    ),
    (
        "recorded",
        "the revision the server answered: the one the client and server then speak, and"
        " the one a negotiated server records",
    ),
    ("server capabilities", "the top-level keys of the capabilities the server declared at that revision"),
    (
        "lost vs best",
        "features of the feature table (docs/concepts.md) that the best served revision"
        " has and this one lacks: what a client at this revision goes without",
    ),
    (
        "tools",
        "the tools listed to a client at that revision that it can call; lost: tools hidden from"
        " it, or listed as requiring capabilities it lacks there (docs/tool-catalogs.md)",
    ),
)


def offered_names(capabilities: Mapping[str, Any]) -> list[str]:
    """The declared client capabilities, by the names `client_supports` takes."""
    names: list[str] = []
    for key, value in capabilities.items():
        if key in ("extensions", "experimental") and isinstance(value, Mapping):
            names += [name if key == "extensions" else f"{key}.{name}" for name in value]
            continue
        names.append(key)
        if isinstance(value, Mapping):
            names += [f"{key}.{name}" for name in value]
    return names


def _cut(text: str, width: int = _CELL) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _wrapped(label: str, text: str, indent: int) -> list[str]:
    """`text` after `label`, wrapped at commas and spaces to fit `WIDTH`, continued under it."""
    return textwrap.wrap(
        text,
        width=WIDTH,
        initial_indent=label.ljust(indent),
        subsequent_indent=" " * indent,
        break_on_hyphens=False,
    ) or [label]


def _identity(rows: list[Row]) -> str:
    """The server's name and version, as its newest served revision gave them."""
    for row in reversed(rows):
        info = row.server_info or {}
        name, version = info.get("name"), info.get("version")
        if row.served and isinstance(name, str):
            shown = f"version {_cut(version, 30)}" if isinstance(version, str) and version else "no version"
            return f"{_cut(name, 60)} ({shown}, as it told {_cut(row.revision)})"
    return "(it gave no name: a 2026-07-28 server need not)"


def render(rows: list[Row], target: str | list[str], capabilities: Mapping[str, Any]) -> str:
    """The human output: what was probed, the matrix, what each revision loses, a legend."""
    offered = ", ".join(offered_names(capabilities)) or "none"
    lines = [
        *_wrapped(
            "probed", _named(target) + (" (streamable HTTP)" if isinstance(target, str) else " (stdio)"), 9
        ),
        *_wrapped("server", _identity(rows), 9),
        *_wrapped("offered", f"{offered} (the client capabilities the probe declared)", 9),
        *_render_narrowing(narrowing(rows)),
        "",
    ]
    header = ("revision", "era", "outcome", "recorded")
    table = [header] + [
        (
            _cut(r.revision),
            r.era,
            r.outcome + (f" ({r.error_code})" if r.error_code is not None else ""),
            _cut(r.answered or "-"),
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    indent = sum(widths) + 2 * len(widths)
    capabilities_column = ["server capabilities"] + [", ".join(r.server_capabilities) or "-" for r in rows]
    for cells, last in zip(table, capabilities_column, strict=True):
        left = "  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)) + "  "
        lines += [line.rstrip() for line in _wrapped(left, last, indent)]
    best = best_served(rows)
    lines += ["", f"lost vs best ({'best served: ' + best if best else 'no known revision was served'})"]
    for r in rows:
        if r.served:
            detail = ", ".join(r.lost) or (
                "nothing" if r.answered in revisions.KNOWN else "(a revision this library does not know)"
            )
        else:
            detail = f"not served: {_cut(r.error or r.outcome, 300)}"
        lines += _wrapped(f"  {_cut(r.revision)}", detail, 14)
    lines += _render_tools(rows)
    lines += ["", "legend"]
    for label, text in LEGEND:
        lines += _wrapped(f"  {label}", text, 24)
    return "\n".join(lines)


def _render_tools(rows: list[Row]) -> list[str]:
    """Per served revision, the tools its client sees and can call, and those it loses."""
    listed = [row for row in rows if row.tools is not None]
    if not listed:
        return []
    lines = ["", "tools (what a client at each revision sees and can call; lost: hidden or refused)"]
    for row in listed:
        seen = ", ".join(row.tools or ()) or "none"
        lost = f"; lost: {', '.join(row.tools_lost)}" if row.tools_lost else ""
        lines += _wrapped(f"  {_cut(row.revision)}", seen + lost, 14)
    return lines


def ucp_outcome(rows: list[Row], platform: Profile) -> dict[str, Any]:
    """What a platform with the profile `platform` would agree with this server.

    Computed from the business profile the server advertises at its best served
    revision, with the same negotiation the server runs for each call. A platform at an
    older version the business lists is negotiated against the business's profile for
    that version, which the server does not advertise: the outcome names it instead.
    """
    advertised = next((r.ucp_advertised for r in reversed(rows) if r.served and r.ucp_advertised), None)
    if advertised is None:
        return {"error": "the server advertises no UCP profile"}
    try:
        business = Profile.from_json({"ucp": advertised})
        older = business.older_profile_url(platform.version)
        if older is not None:
            return {"version": platform.version, "business_profile": older}
        agreement = negotiate_capabilities(business, platform)
    except UcpError as failure:
        return {"error": failure.code, "message": failure.message}
    return agreement.as_dict()


def render_ucp(outcome: dict[str, Any]) -> str:
    """The human line(s) for a `ucp_outcome`: the agreement, the older version's profile, or why none."""
    if "error" in outcome:
        return f"UCP: {outcome['error']}" + (f" ({outcome['message']})" if "message" in outcome else "")
    if "business_profile" in outcome:
        text = (
            f"UCP {outcome['version']}: an older version this business lists; it is negotiated against"
            f" the business's profile for it ({outcome['business_profile']}), which this probe does not read"
        )
        return "\n".join(_wrapped("", text, 0))
    lines = [f"UCP {outcome['version']}:"]
    lines += [f"  agreed   {name} {version}" for name, version in sorted(outcome["capabilities"].items())]
    lines += [f"  dropped  {name} ({reason})" for name, reason in sorted(outcome["dropped"].items())]
    return "\n".join(lines)


class _Stopped(KeyboardInterrupt):
    """A signal to stop: raised where the probe is, so its servers are closed on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """Ctrl-C, SIGTERM (`timeout`, a CI runner) and SIGHUP unwind the probe like an error.

    The SDK starts stdio servers in a session of their own, so a signal to the probe's
    process group never reaches them: only the probe's own exit path closes them.
    """

    def stop(signum: int, frame: Any) -> None:
        raise _Stopped(signum)

    wanted = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    if threading.current_thread() is not threading.main_thread():  # only there can handlers be set
        wanted = []
    previous = {signum: signal.signal(signum, stop) for signum in wanted}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run(
    target: str | list[str] | None,
    capabilities: dict[str, Any],
    *,
    timeout: float,
    as_json: bool,
    ucp_profile: Profile | None = None,
) -> int:
    """Probe, print, and return the exit status: 0 when everything asked for was served."""
    chosen = target or [sys.executable, "-m", "mcp_negotiation.tools.demo"]
    # The SDK's clients log a traceback for every line of a server's output that is not
    # JSON-RPC and for every HTTP answer that is not MCP's; the probe says it in one line.
    for name in ("mcp.client.stdio", "mcp.client.streamable_http"):
        logging.getLogger(name).setLevel(logging.CRITICAL)

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def failed(message: str, status: int) -> int:
        print(f"mcp-negotiation: {message}", file=sys.stderr)
        if as_json:  # still one object on stdout, for scripts that parse it
            print(json.dumps({"error": message, "exit": status}, indent=2))
        return status

    try:
        _client_options(capabilities)
    except Exception as bad:
        return failed(f"bad --capabilities for the modern row: {bad}", 2)
    try:
        with _stopped_by_signals():
            rows = anyio.run(probe, chosen, capabilities, timeout, progress)
    except ProbeError as failure:
        return failed(str(failure), 2)
    except _Stopped as stop:
        return failed(f"stopped by signal {stop.signum}", 128 + stop.signum)
    ucp = ucp_outcome(rows, ucp_profile) if ucp_profile else None
    if as_json:
        print(
            json.dumps(
                {
                    "target": _shown(chosen) if isinstance(chosen, str) else chosen,
                    "capabilities": capabilities,
                    "best": best_served(rows),
                    "narrowed": narrowing(rows),
                    "revisions": [r.as_dict() for r in rows],
                    "ucp": ucp,
                },
                indent=2,
            )
        )
    else:
        print(render(rows, chosen, capabilities))
        if ucp is not None:
            print("\n" + render_ucp(ucp))
    served = all(r.served for r in rows) and (ucp is None or "error" not in ucp)
    return 0 if served else 1
