"""The one decision every inbound message gets, whichever SDK adapter received it.

An adapter (the mcp 2.x middleware, the mcp 1.x wrapt shell) gathers the facts of one
message into an `Inbound` and applies the `Decision` returned here: publish a record for
the handler, answer a refusal, or pass the message through untouched; and tell telemetry
what to record. Every rule about *what* to decide lives here, once, so a fix reaches both
SDK majors; the adapters only know where the facts come from and how their SDK
publishes and refuses.

Pure (sans-I/O): nothing here imports the SDK, OpenTelemetry or an HTTP client. The one
await, finding a UCP agreement, goes through the resolver the policy injected.

Cost model: a modern client repeats the same envelope on every request, so a request
shaped like one served before is answered from the `RepeatMemo`, one lookup; everything
else happens once per distinct envelope, session, or (profile, operation) within the
profile's freshness.
"""

from __future__ import annotations

import logging
import marshal
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from ..ucp.binding import (
    UCP_EXTENSION_ID,
    UcpNegotiator,
    advertisement,
    named_in_arguments,
    platform_profile_url,
    session_profile_url,
)
from ..ucp.errors import UcpError
from ..ucp.profile import Profile
from . import revisions
from .bounded import MAX_ENTRY_BYTES, BoundedCache
from .client_log import report
from .errors import NegotiationRefused, Refusal
from .frozen_json import MARSHAL_VERSION, is_object
from .negotiation import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    NO_HEADERS,
    PROTOCOL_VERSION_KEY,
    Negotiation,
    Negotiator,
    Policy,
    Transport,
    retained_size,
)

__all__ = ["EXEMPT", "Decision", "Engine", "Held", "Inbound", "Repeat", "RepeatMemo", "UcpRepeat"]


EXEMPT: Final = frozenset({"server/discover", "ping"})
"""Methods a client may call without the policy's required capabilities, to learn them."""

MEMO_SIZE: Final = 1_024
LEARNED_TOOLS: Final = 16
"""How many tool names one memoised UCP outcome learns a narrowed entry for (`UcpRepeat.learn`)."""
MAX_TOOL_NAME: Final = 128
"""The longest tool name learned: the specification asks tool names to be 1 to 128 characters."""
LEARNED_BYTES: Final = LEARNED_TOOLS * (MAX_TOOL_NAME + 200)
"""What a memoised UCP outcome may come to hold in learned names (each a string, its slot
and a tuple shared with the narrowing cache), weighed when it is kept."""


@dataclass(slots=True)
class Inbound:
    """The facts of one inbound message, as an adapter gathers them.

    `revision` is the revision the SDK serves the message at (its connection's, or the
    modern request's own). `held` is what the connection holds from its handshake: the
    record, the `Refusal` of a refused handshake, or None. `direct` marks the SDK's
    in-process dispatcher, which adopts whatever revision an envelope names; `on_behalf`
    a request the SDK makes itself while serving the client's own (`served_for_another`).
    """

    method: str
    params: Any
    revision: str
    transport: Transport
    headers: Mapping[str, str]
    notification: bool = False
    held: object = None
    session_id: str | None = None
    ucp_default: Any = None
    direct: bool = False
    on_behalf: bool = False


Action = Literal["pass", "serve", "refuse", "empty"]


@dataclass(slots=True)
class Decision:
    """What the adapter does with one message.

    - `pass`: hand it to the SDK untouched (nothing to negotiate, or a bug of ours);
    - `serve`: publish `record` for the handler, then hand it on;
    - `refuse`: answer `refusal` instead of serving;
    - `empty`: answer an empty result (the SDK's own listing for a call that is refused).

    `trace`: the record (or refusal) is traced for this message. `hold`: what the
    connection holds from now on (None: unchanged). `handshake`: after the SDK answered,
    call `Engine.handshaken`. `ucp`: the platform agreement is still to be found
    (`Engine.with_ucp`). `judged`: the message reached negotiation, so an HTTP error after
    this is no refusal made before dispatch. `repeat`: what a repeat of this message may
    publish (see `RepeatMemo`); `repeat_is_whole` is False for a UCP call, whose repeats
    reuse only the negotiation and find their agreement each time.
    """

    action: Action
    record: Negotiation | None = None
    refusal: Refusal | None = None
    trace: bool = False
    hold: Negotiation | Refusal | None = None
    handshake: bool = False
    ucp: bool = False
    judged: bool = False
    repeat: Negotiation | None = None
    repeat_is_whole: bool = True


@dataclass(slots=True)
class Held:
    """What a connection keeps after an accepted handshake."""

    record: Negotiation
    ucp_default: Any


Pipe = bool | tuple[tuple[bytes, bytes], ...]
"""Where a modern request came from, as far as its outcome depends on it: off HTTP, whether
over stdio; over HTTP, the negotiation headers a record keeps, as the request's raw
name-value pairs (`origin.http_headers`)."""
Shape = tuple[Any, Any, Any, Pipe, bytes]
"""A modern request's shape: method, the SDK's revision, the envelope's, its pipe, and the
envelope's maps encoded exactly (`true` is not `1`)."""


class Repeat:
    """A memoised outcome: what to publish, and the handle telemetry counts a repeat with.

    `traced` is None for a UCP `tools/call`: only its negotiation is memoised, because its
    agreement depends on the resolver's current profile and is found on every call. It is
    trusted while the date it was made under stands (`until`).
    """

    __slots__ = ("published", "traced", "until")

    def __init__(self, published: tuple[Negotiation, Negotiator], traced: Any, until: float) -> None:
        self.published = published
        self.traced = traced
        self.until = until


class RepeatMemo:
    """Outcomes of modern requests, by their shape (method, revisions, envelope, pipe).

    Clients repeat the same envelope on every request; a shape served before is answered
    from here with nothing negotiated, looked up or traced again. Over HTTP the pipe holds
    the negotiation headers the record keeps, so a request whose headers differ is another
    shape. Exact: `marshal` tells `true` from `1`.
    """

    __slots__ = ("_entries", "_monotonic")

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._entries: BoundedCache[Shape, Repeat] = BoundedCache(MEMO_SIZE)
        self._monotonic = monotonic
        """The clock a `Repeat.until` is counted on: the negotiator's (`Withdrawals.monotonic`)."""

    def find(
        self, method: str, params: Any, revision: Any, pipe: Pipe | None
    ) -> tuple[Shape | None, Repeat | None]:
        """The shape of a request carrying a modern envelope (None for any other message),
        and the outcome memoised for it while that stands.

        `pipe` (see `Pipe`): off HTTP, True when the request came over stdio (not the SDK's
        in-process dispatcher, which a stdio server's tool may run with this very envelope);
        None for a request the adapter decides in full every time. Only the envelope's two
        maps are encoded (the costliest step of a repeat); the strings are part of the key
        as they are.
        """
        if pipe is None:
            return None, None
        meta = params.get("_meta") if type(params) is dict else None
        if type(meta) is not dict or type(version := meta.get(PROTOCOL_VERSION_KEY)) is not str:
            return None, None  # (a revision that is no string is refused as malformed, never memoised)
        try:
            maps = marshal.dumps(
                (meta.get(CLIENT_CAPABILITIES_KEY), meta.get(CLIENT_INFO_KEY)), MARSHAL_VERSION
            )
        except ValueError:  # not plain JSON values: negotiated every time
            return None, None
        shape = (method, revision, version, pipe, maps)
        repeat = self._entries.get(shape)
        return shape, (repeat if repeat is not None and self._monotonic() < repeat.until else None)

    def __len__(self) -> int:
        return len(self._entries)

    def remember(self, shape: Shape, published: tuple[Negotiation, Negotiator], traced: Any) -> None:
        """Memoise `published` under `shape`; an envelope over `MAX_ENTRY_BYTES` is kept nowhere."""
        headers = shape[3] if type(shape[3]) is tuple else ()
        strings = [part for part in shape[:3] if isinstance(part, str)]
        size = len(shape[4]) + sum(map(len, strings)) + sum(len(name) + len(value) for name, value in headers)
        if size <= MAX_ENTRY_BYTES:
            repeat = Repeat(published, traced, published[1].withdrawals.until)
            self._entries.put(shape, repeat, size + retained_size(published[0]))


class UcpRepeat:
    """A UCP call's scoped outcome: what to publish, and the handle telemetry counts it with.

    Memoised per (negotiation record, profile URL) while the resolver answers the URL with
    the very profile it was agreed with (`platform`, held weakly: the resolver decides how
    long a profile lives), so that a repeated call costs one lookup and one `resolve`. The
    record is kept alive because it is keyed by identity. `traced` is set by the adapter.

    `by_tool` is what the adapter learned to publish instead of `published` for a tool name:
    the entry the tool's own decorator narrowed it to (`@requires_ucp`), so that a repeat is
    published narrowed once rather than published and then narrowed again per call. It goes
    with the agreement: a profile agreed afresh starts with nothing learned.
    """

    __slots__ = ("by_tool", "platform", "published", "record", "traced")

    def __init__(
        self, record: Negotiation, platform: Profile | None, published: tuple[Negotiation, Negotiator]
    ) -> None:
        self.record = record
        self.platform = weakref.ref(platform) if platform is not None else None
        self.published = published
        self.traced: Any = None
        self.by_tool: dict[str, tuple[Negotiation, Negotiator]] = {}

    def learn(self, tool: str, published: tuple[Negotiation, Negotiator]) -> None:
        """Publish `published` for repeats calling `tool` from now on. The names learned are
        those of tools that ran (the server's own), and at most `LEARNED_TOOLS` of them
        (`LEARNED_BYTES` weighed for them when the memo kept this)."""
        if len(self.by_tool) < LEARNED_TOOLS and len(tool) <= MAX_TOOL_NAME:
            self.by_tool[tool] = published


_ADVERTISED_IN: Final = {"initialize": "experimental", "server/discover": "extensions"}

PASS: Final = Decision("pass")
EMPTY: Final = Decision("empty")


class Engine:
    """Applies one `Policy` to every inbound message of one server."""

    def __init__(self, policy: Policy, negotiator: Negotiator | None = None) -> None:
        self.policy = policy
        self.negotiator = negotiator or Negotiator(policy)
        self.ucp = UcpNegotiator(policy.ucp) if policy.ucp is not None else None
        self.memo = RepeatMemo(self.negotiator.withdrawals.monotonic)
        self.ucp_memo: BoundedCache[tuple[int, str, bytes | None], UcpRepeat] = BoundedCache(MEMO_SIZE)
        """Scoped UCP outcomes by (id of the record, the profile URL the call's arguments name,
        the raw `UCP-Agent` header sent with it over HTTP, which named the same URL)."""

    # --- the decision -----------------------------------------------------------------

    def held_entry(self, held: object, method: str) -> tuple[Negotiation, Negotiator] | Negotiation | None:
        """What to publish for a legacy session's message when its record, as held, decides it:
        made under today's reading of the date and this policy, and not a handshake. For a UCP
        call, the record alone: the call's agreement is still to be found (`memoised_scope`,
        `scoped_repeat`). One identity test and a clock read; None sends the message to `decide`."""
        negotiator = self.negotiator
        withdrawals = negotiator.withdrawals
        if (
            type(held) is Negotiation
            and held.withheld is withdrawals.current  # (`Withdrawals.stands_for`, inline: per request)
            and withdrawals.monotonic() < withdrawals.until
            and method != "initialize"  # a handshake again is negotiated as one
        ):
            return held if self.ucp is not None and method == "tools/call" else (held, negotiator)
        return None

    def decide(self, message: Inbound, base: Negotiation | None = None) -> Decision:
        """The decision for `message`. `base`: a memoised record of a UCP call's negotiation.

        Never raises: a refusal is a decision, and a bug of ours is logged and the message
        passes through, because negotiation must never take down the user's server.
        """
        era = revisions.era(message.revision)
        modern = era == "modern"
        judged = not message.notification and not (
            modern and (message.method == "initialize" or message.on_behalf)
        )
        try:
            decision = self._decide(message, era, base)
        except NegotiationRefused as refused:
            decision = self._refused(message, modern, refused.refusal)
        except Exception as error:
            report(
                logging.ERROR,
                "negotiation failed unexpectedly; passing the request through",
                exc=error,
            )
            decision = Decision("pass")
        decision.judged = judged
        return decision

    def _decide(self, message: Inbound, era: str, base: Negotiation | None) -> Decision:
        method = message.method
        if message.notification:
            # Never refused; a legacy notification still sees its session's record.
            record, hold = self._held(message, check=False)
            return Decision("serve", record, hold=hold) if record is not None else PASS
        if method == "initialize":
            # Modern: a removed method, needing no envelope: the SDK's own -32601, as an
            # unwrapped server answers it, not a verdict on what it never had to carry.
            return PASS if era == "modern" else self._handshake(message)
        if era == "modern" and message.on_behalf:
            # Negotiated, so that a server listing its tools per client lists this client's,
            # but neither traced nor refused: the client's own request is, next.
            return Decision("serve", self._request(message, era))
        record, hold = self._held(message, check=method not in EXEMPT) if era == "legacy" else (None, None)
        if record is None:
            record = base or self._request(message, era)
        repeat = record if record.era == "modern" and base is None and method != "server/discover" else None
        if self.ucp is not None and method == "tools/call":
            return Decision("serve", record, hold=hold, ucp=True, repeat=repeat)
        return Decision("serve", record, trace=_traced_per_request(record), hold=hold, repeat=repeat)

    def _refused(self, message: Inbound, modern: bool, refusal: Refusal) -> Decision:
        if modern and message.on_behalf:
            # An empty result, from which the SDK checks nothing and logs no error.
            return EMPTY
        hold = None
        if message.method == "initialize" and not isinstance(message.held, Negotiation):
            # A client that goes on regardless (`notifications/initialized`, then its
            # requests) is refused the same way on each, rather than served as one with
            # no handshake at all. A refused *re*-initialize leaves the accepted one in force.
            hold = refusal
        return Decision("refuse", refusal=refusal, trace=True, hold=hold)

    def _held(self, message: Inbound, *, check: bool) -> tuple[Negotiation | None, Negotiation | None]:
        """The connection's record (refreshed, when the date or policy changed since), and it
        again when it changed and the connection should hold the new one. With `check`, a
        refused handshake, or a session the policy applied since no longer serves, is refused."""
        held = message.held
        if type(held) is not Negotiation:
            if check and type(held) is Refusal:
                raise NegotiationRefused(held)
            return None, None
        negotiator = self.negotiator
        record = held
        if not negotiator.withdrawals.stands_for(record):
            # The day or the policy changed since the record was made (or last refreshed).
            record = negotiator.refreshed(record, check)
        if record.session_id is None and message.session_id:
            # Stateful HTTP on mcp 1.x: the SDK routed the request by this id, so it is the
            # server's; `initialize` carried none (the id comes with its answer).
            record = replace(record, session_id=message.session_id)
        return record, (record if record is not held else None)

    def _request(self, message: Inbound, era: str) -> Negotiation:
        meta = message.params.get("_meta") if is_object(message.params) else None
        # Not a handshake revision: the request must carry its own envelope. The SDK's
        # in-process dispatcher adopts whatever revision an envelope names, "zzz" or a
        # handshake one, so there an envelope is negotiated as one (a handshake revision
        # in it is -32022, as the SDK itself answers on every other path).
        if era != "legacy" or (message.direct and is_object(meta) and PROTOCOL_VERSION_KEY in meta):
            return self.negotiator.request(
                meta,
                transport=message.transport,
                headers=message.headers,
                check_required=message.method not in EXEMPT,
            )
        # A legacy request with no handshake on this connection: stateless HTTP, where
        # every POST gets a fresh connection. What the client declared is unknown.
        return self.negotiator.without_session(
            message.revision,
            transport=message.transport,
            headers=message.headers,
            any_revision=message.method == "ping",
        )

    def _handshake(self, message: Inbound) -> Decision:
        """A legacy `initialize`: the record, whose revision the SDK must answer."""
        record = self.negotiator.initialize(
            message.params,
            transport=message.transport,
            headers=message.headers,
            session_id=message.session_id,
        )
        return Decision("serve", record, handshake=True)

    def memoised_scope(
        self, record: Negotiation, params: Any, agent: bytes | None = None
    ) -> UcpRepeat | None:
        """A repeated UCP call's memoised outcome (see `scoped_repeat`), when the resolver tells
        without I/O that it would answer the call's profile URL with the very profile the
        outcome was agreed with; else None, for `scoped_repeat`. `agent`: the raw `UCP-Agent`
        header the call came with over HTTP (None without one)."""
        url = named_in_arguments(params)
        fresh = self.ucp.resolver_fresh if self.ucp is not None else None
        if url is None or fresh is None:
            return None
        known = self.ucp_memo.get((id(record), url, agent))
        if known is None or known.platform is None:
            return None
        try:
            platform = fresh(url)  # (a URL the memo holds was validated before)
        except Exception:  # pluggable code: `scoped_repeat`'s `resolve` then answers, and reports
            return None
        return known if platform is not None and known.platform() is platform else None

    async def scoped_repeat(
        self, record: Negotiation, params: Any, session_default: Any = None, agent: bytes | None = None
    ) -> UcpRepeat | None:
        """What a repeated UCP call publishes: the negotiation it repeats (a session's, or a
        memoised modern one) with the agreement for the platform the call names, or None when
        that cannot be had, for `decide` to refuse the call in full. `agent`: the raw
        `UCP-Agent` header the call came with over HTTP (None without one).

        A call naming its profile in its arguments (the source that wins, and the one UCP's
        binding always sends) is answered from `ucp_memo` when the resolver, asked as on
        every call, still answers with the profile the memoised agreement was made with: a
        profile that expired, was fetched again or changed is agreed with afresh. A header
        sent with it is read once per memoised outcome (its raw value is in the key): it
        must name the same URL, or the call is decided, and refused, in full.
        """
        ucp = self.ucp
        if ucp is None:
            return None
        url = named_in_arguments(params)
        headers = NO_HEADERS if agent is None else {"ucp-agent": agent.decode("latin-1")}
        try:
            if url is None:
                scoped = await ucp.for_call(record, params, headers, session_default=session_default)
                return UcpRepeat(record, None, (scoped, self.negotiator))
            key = (id(record), url, agent)
            known = self.ucp_memo.get(key)
            if known is None:  # the URL valid, and no header naming another profile
                platform_profile_url(params, headers)
            platform = await ucp.resolved(url)
            if known is not None and known.platform is not None and known.platform() is platform:
                return known
            scoped = await ucp.scope(record, url, platform)
        except UcpError:
            return None
        repeat = UcpRepeat(record, platform, (scoped, self.negotiator))
        named = len(url) + (len(agent) if agent is not None else 0)
        if ucp.held_business(platform) and named <= MAX_ENTRY_BYTES:
            self.ucp_memo.put(key, repeat, named + retained_size(record) + LEARNED_BYTES)
        return repeat

    async def with_ucp(self, decision: Decision, message: Inbound) -> Decision:
        """`decision` completed with the agreement for the platform a `tools/call` names."""
        if self.ucp is None or decision.record is None:
            return decision
        try:
            record = await self.ucp.for_call(
                decision.record, message.params, message.headers, session_default=message.ucp_default
            )
        except UcpError as failure:
            return Decision(
                "refuse",
                refusal=failure.to_refusal(),
                trace=True,
                judged=decision.judged,
                repeat=decision.repeat,
                repeat_is_whole=False,
            )
        return Decision(
            "serve",
            record,
            trace=_traced_per_request(record),
            hold=decision.hold,
            judged=decision.judged,
            repeat=decision.repeat,
            repeat_is_whole=False,
        )

    def remember(self, key: Shape, decision: Decision, traced: Any) -> None:
        """Memoise a modern request's outcome under its shape, once it was traced (or, for a
        UCP call, its negotiation alone)."""
        if decision.repeat is None:
            return
        if not decision.repeat_is_whole:
            traced = None
        elif traced is None:
            return
        self.memo.remember(key, (decision.repeat, self.negotiator), traced)

    # --- after the SDK answered -------------------------------------------------------

    def handshaken(self, record: Negotiation, params: Any, answered: object) -> Held:
        """What the connection keeps after the SDK answered an accepted `initialize`."""
        if answered != record.protocol_version:
            report(
                logging.WARNING,
                "the SDK answered initialize with %r, the policy chose %r",
                answered,
                record.protocol_version,
            )
        if record.degraded:
            report(
                logging.INFO,
                "a client at %s loses %s%s",
                record.protocol_version,
                ", ".join(sorted(record.degraded)),
                # Logs are exported too: the client's name only where the policy opted in.
                f" ({record.client_name!r})" if self.policy.record_client_identity else "",
            )
        return Held(record, session_profile_url(params) if self.ucp is not None else None)

    def advertise(self, method: str, result: object) -> None:
        """Tell clients the business's UCP capabilities in a handshake's or discovery's answer
        (`experimental` to legacy clients, whose wire schema strips `extensions`)."""
        if self.ucp is None or not isinstance(result, dict):
            return
        where = _ADVERTISED_IN.get(method)
        capabilities = result.get("capabilities")
        if where is not None and isinstance(capabilities, dict):
            capabilities.setdefault(where, {})[UCP_EXTENSION_ID] = advertisement(self.ucp.policy.business)


def _traced_per_request(record: Negotiation) -> bool:
    """What each request carries (modern), a UCP agreement per call, and legacy requests
    without a session, each a connection of its own (stateless), are traced per request;
    a session's record once, at its handshake."""
    return record.era == "modern" or record.ucp is not None or not record.capabilities_known
