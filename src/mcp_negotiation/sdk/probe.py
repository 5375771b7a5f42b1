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
import shutil
import signal
import sys
import tempfile
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

from .. import revisions
from ..errors import NegotiationError
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
    ucp_advertised: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def served(self) -> bool:
        return self.outcome in ("agreed", "counter-offer")


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
    except Exception as failure:
        refused = _refusal(failure, target, watch)
        if refused is None:
            raise
        return Row(revision, "legacy", "refused", error_code=refused.error.code, error=refused.error.message)
    answered = result.protocol_version
    return Row(
        revision,
        "legacy",
        "agreed" if answered == revision else "counter-offer",
        answered=answered,
        server_capabilities=_capability_names(result.capabilities),
        ucp_advertised=_ucp_advertised(result.capabilities, "experimental"),
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
            await client.list_tools()
            return Row(
                revision,
                "modern",
                "agreed",
                answered=revision,
                server_capabilities=_capability_names(found.capabilities),
                ucp_advertised=_ucp_advertised(found.capabilities, "extensions"),
            )
    except Exception as failure:
        refused = _refusal(failure, target, watch)
        if refused is None:
            raise
        return Row(revision, "modern", "refused", error_code=refused.error.code, error=refused.error.message)


def _lost(rows: list[Row]) -> None:
    """Fill each served row with the features it lacks that the best served revision has."""
    # A revision this library does not know (a draft a server counter-offers) has no row in
    # the feature table: it is shown as answered, with nothing computed against it.
    served = [row.answered for row in rows if row.served and row.answered in revisions.KNOWN]
    best = max(served, key=revisions.KNOWN.index) if served else None
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
        raise ProbeError(f"server command not found: {target[0]}")
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
    _lost(rows)
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


def render(rows: list[Row]) -> str:
    header = ("revision", "era", "outcome", "recorded", "server capabilities", "lost vs best")
    lines = [header] + [
        (
            r.revision,
            r.era,
            r.outcome + (f" ({r.error_code})" if r.error_code is not None else ""),
            r.answered or "-",
            ",".join(r.server_capabilities) or "-",
            ",".join(r.lost) or "-",
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


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


def _render_ucp(outcome: dict[str, Any]) -> str:
    if "error" in outcome:
        return f"UCP: {outcome['error']}" + (f" ({outcome['message']})" if "message" in outcome else "")
    if "business_profile" in outcome:
        return (
            f"UCP {outcome['version']}: an older version this business lists; it is negotiated against"
            f" the business's profile for it ({outcome['business_profile']}), which this probe does not read"
        )
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
    chosen = target or [sys.executable, "-m", "mcp_negotiation.demo"]
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
        fields = [{k: v for k, v in asdict(r).items() if k != "ucp_advertised"} for r in rows]
        print(json.dumps({"revisions": fields, "ucp": ucp}, indent=2))
    else:
        print(render(rows))
        if ucp is not None:
            print("\n" + _render_ucp(ucp))
    served = all(r.served for r in rows) and (ucp is None or "error" not in ucp)
    return 0 if served else 1
