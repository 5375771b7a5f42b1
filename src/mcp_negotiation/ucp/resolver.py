"""Turning a platform's profile URL into a `Profile`, safely.

The URL comes from the request, so fetching it is server-side request forgery waiting
to happen: a platform could point the business at `https://169.254.169.254/…` or at a
name that resolves to the business's own private network. `HttpsProfileResolver`
therefore resolves the name itself, refuses every special-use address before any
connection is made, and then connects to the address it checked (sending the original
name as `Host` and TLS SNI, so certificates still verify), which closes the DNS
rebinding gap between checking and connecting.

Failures map to the specification's codes, which say who is at fault:

- `invalid_profile_url`: the URL cannot be used at all: not HTTPS (see
  `validate_profile_url`), an IP address spelt in decimal, octal or hex, a host that is
  or resolves to a special-use address, or a name that does not resolve ("malformed,
  missing, or unresolvable" in the specification's words).
- `profile_unreachable`: the host was resolved but the fetch failed: connection or TLS
  failure, timeout, any non-2xx status (3xx included: redirects are never followed).
- `profile_malformed`: a body was received but is not a profile, including a body over
  the size cap (reading stops at the cap) and a body sent compressed although only
  `identity` was asked for.

A failed fetch is told to the platform in a fixed phrase per kind of failure; the
exception itself goes to the operator's log (see `_fetch_failure`), in one line per
fetch without its traceback, within the budget of `client_log`: a failure is remembered
for its backoff, so a URL costs at most one line per backoff window.

Profiles are cached (bounded LRU, fresh for `Cache-Control: max-age` less the `Age` the
response already has, as RFC 9111 computes it, but at least 60 s whatever the headers
say and at most 24 h), failures are remembered for a growing backoff so a dead platform
costs one fetch per backoff rather than one per request, and concurrent resolves of one
URL share one fetch. Stale-while-revalidate is not implemented: an expired profile is fetched
again before it is used.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ipaddress
import logging
import re
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias
from urllib.parse import SplitResult, urlsplit, urlunsplit

from ..core.errors import PolicyError

if TYPE_CHECKING:
    import httpx2
else:
    try:
        import httpx2
    except ImportError:  # mcp 1.x installs httpx, whose API httpx2 keeps
        import httpx as httpx2

from ..core.client_log import report
from .errors import (
    PROFILE_MALFORMED,
    PROFILE_UNREACHABLE,
    UcpError,
    UcpErrorCode,
    invalid_profile_url,
)
from .header import validate_profile_url
from .profile import Profile, ProfileSource

__all__ = [
    "ALL_PORTS",
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_CACHE_SIZE",
    "DEFAULT_MAX_BODY_BYTES",
    "LOOKUPS",
    "LOOKUP_LIMIT",
    "MAX_FAILURE_BACKOFF",
    "MAX_TTL",
    "MIN_BODY_CAP",
    "MIN_FAILURE_BACKOFF",
    "MIN_TTL",
    "FetchFailed",
    "Fetched",
    "HttpsProfileResolver",
    "Lookups",
    "ProfileResolver",
    "SharedProfileCache",
    "StaticResolver",
    "fetch_outcome",
    "is_special_address",
]

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_MAX_BODY_BYTES: Final = 256 * 1024
MIN_BODY_CAP: Final = 128 * 1024
"""The specification's floor for the body cap: a smaller one would refuse real profiles."""
DEFAULT_CACHE_SIZE: Final = 1024
DEFAULT_CACHE_BYTES: Final = 16 * 1024 * 1024
"""Bytes of profile documents a resolver's cache holds at most (64 profiles at the body cap)."""
MIN_TTL: Final = 60.0
MAX_TTL: Final = 24 * 3600.0
MIN_FAILURE_BACKOFF: Final = 1.0
"""Seconds a first failure is remembered; each further consecutive failure doubles it."""
MAX_FAILURE_BACKOFF: Final = 300.0
HTTPS_PORT: Final = 443
ALL_PORTS: Final = range(1, 65536)
"""`allow_ports=ALL_PORTS`: a profile may be fetched from any port (tests, private deployments)."""

_MAX_AGE: Final = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?([0-9]+)\"?\s*(?:,|$)", re.IGNORECASE)
_LARGEST_DELTA: Final = 2**31
"""What RFC 9111 (section 1.2.2) says a delta-seconds value too large to parse counts as."""
_NUMERIC_LABEL: Final = re.compile(r"0x[0-9a-f]*|[0-9]+", re.IGNORECASE)
_NOT_GLOBALLY_REACHABLE: Final = tuple(
    ipaddress.ip_network(network)
    for network in (
        # IPv4: this network, private, shared (CGNAT), loopback, link-local, IETF protocol
        # assignments (192.0.0.192 is a cloud metadata address), documentation, the retired
        # 6to4 relay anycast, benchmarking, reserved, limited broadcast.
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
        "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
        "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "255.255.255.255/32",
        # IPv6: unspecified, loopback, the prefixes that tunnel to IPv4 (IPv4-mapped, NAT64,
        # local-use NAT64, 6to4; Teredo is in 2001::/23), discard-only, dummy, IETF
        # protocol assignments, documentation, SRv6 SIDs, unique local, link-local, site-local.
        "::/128", "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16",
        "100::/64", "100:0:0:1::/64", "2001::/23", "2001:db8::/32", "3fff::/20", "5f00::/16",
        "fc00::/7", "fe80::/10", "fec0::/10",
    )
)  # fmt: skip
"""Where a profile fetch may not go: the IANA special-purpose registries' blocks that are
not globally reachable, and every prefix that tunnels to IPv4, whatever address it
embeds. Named here rather than left to `ipaddress`, because Python releases disagree
(3.11.7 and 3.12.1 count `2002::/16` and `64:ff9b:1::/48` as global, 3.13.0 counts
`2001:20::/28` as global) and what a fetch may reach must not change with the
interpreter. Where the registry excepts a few addresses from a block (anycast relays,
identifier ranges), the whole block is refused: no platform serves its profile there."""


class ProfileResolver(Protocol):
    """Anything that turns a profile URL into a profile, raising `UcpError` when it cannot.

    A resolver may also offer `fresh(url) -> Profile | None`: for a URL it validated before,
    the very profile `resolve(url)` would answer now without any I/O, or None when
    `resolve` would have to fetch (or fail). A repeated call then skips the `await`; without
    it, `resolve` is asked on every call.
    """

    async def resolve(self, url: str) -> Profile: ...


class StaticResolver:
    """Profiles known in advance: pinned partners, pre-approved platforms, tests.

    Everything is loaded and validated when the resolver is built, so a bad pinned
    profile fails at start-up rather than on the first request that names it.
    """

    def __init__(self, profiles: Mapping[str, ProfileSource]) -> None:
        self._profiles = {validate_profile_url(url): Profile.load(source) for url, source in profiles.items()}

    async def resolve(self, url: str) -> Profile:
        profile = self._profiles.get(validate_profile_url(url))
        if profile is None:
            raise UcpError(PROFILE_UNREACHABLE, "the profile URL is not one of the pinned profiles")
        return profile

    def fresh(self, url: str) -> Profile | None:
        """The pinned profile for `url` (see `ProfileResolver`): pinned profiles never go stale."""
        return self._profiles.get(url)


def is_special_address(address: IPAddress) -> bool:
    """True for every address a profile fetch must not reach unless explicitly allowed."""
    return (
        any(address in network for network in _NOT_GLOBALLY_REACHABLE)
        # What the running Python's tables add (a range registered after this list), and the
        # two kinds the list leaves to them. Private, loopback, link-local and unspecified
        # addresses are all in the list, and every `is_private` address is not global.
        or not address.is_global
        or address.is_multicast
        or address.is_reserved
    )


def _literal_address(host: str) -> IPAddress | None:
    """The address a URL host spells, refusing every spelling but the canonical ones.

    Resolvers and browsers read `2130706433`, `0177.0.0.1`, `0x7f.1` and `127.1` as
    127.0.0.1; a check that only knows dotted quads would let them through.
    """
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    last_label = host.rstrip(".").rpartition(".")[2]
    if ":" in host or _NUMERIC_LABEL.fullmatch(last_label) or _inet_aton_accepts(host):
        raise invalid_profile_url("the profile URL host is an IP address in a non-canonical form")
    return None


def _inet_aton_accepts(host: str) -> bool:
    try:
        socket.inet_aton(host)
    except OSError:
        return False
    return True


def _delta_seconds(digits: str) -> int:
    # Bounded before `int()`: a header of thousands of digits would otherwise cost quadratic
    # time, or raise past the interpreter's digit limit, and means "forever" all the same.
    significant = digits.lstrip("0")
    return int(significant or "0") if len(significant) <= 10 else _LARGEST_DELTA


def _ttl(cache_control: str | None, age: str | None) -> float:
    """Seconds a profile stays fresh: RFC 9111's freshness lifetime less the current age.

    A profile a CDN has held for most of its `max-age` is nearly stale, and keeping it for
    a whole `max-age` more would serve a platform's old profile for twice as long as it
    allows. Whatever the headers say, the result stays within [MIN_TTL, MAX_TTL].
    """
    found = _MAX_AGE.search(cache_control or "")
    max_age = _delta_seconds(found.group(1)) if found else 0
    # RFC 9111 section 5.1: use the first member of a list, and ignore an invalid value.
    first = (age or "").partition(",")[0].strip()
    current_age = _delta_seconds(first) if first.isascii() and first.isdigit() else 0
    return min(max(float(max_age - current_age), MIN_TTL), MAX_TTL)


_FETCH_FAILURES: Final[tuple[tuple[type[httpx2.HTTPError], str], ...]] = (
    (httpx2.ConnectTimeout, "connecting to the profile host timed out"),
    (httpx2.TimeoutException, "the profile host did not answer in time"),
    (httpx2.ConnectError, "cannot connect to the profile host"),
    (httpx2.NetworkError, "the connection to the profile host broke off"),
    (httpx2.ProtocolError, "the profile host broke the HTTP protocol"),
)
"""What the platform is told of a failed fetch, by kind, most specific first."""


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the exceptions it was raised from: the HTTP stack wraps the `ssl` error twice."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        yield cause
        cause = cause.__cause__ or cause.__context__


def _fetch_failure(parts: SplitResult, addresses: list[IPAddress], exc: httpx2.HTTPError) -> str:
    """The phrase a failed fetch is reported to the platform with; the exception is logged,
    once for the fetch, whichever of the host's `addresses` it failed at.

    The exception's own text describes this server rather than the profile host: the
    HTTP stack's class names, OpenSSL's messages with the interpreter's C source
    locations, bytes the host sent. Whoever names a URL would learn them, so the platform
    is told what kind of failure it was, and the operator gets the exception itself.
    """
    tls = [cause for cause in _causes(exc) if isinstance(cause, ssl.SSLError)]
    if isinstance(exc, httpx2.ConnectError) and tls:
        unverified = any(isinstance(cause, ssl.SSLCertVerificationError) for cause in tls)
        phrase = (
            "the profile host's TLS certificate could not be verified"
            if unverified
            else "the TLS handshake with the profile host failed"
        )
    else:
        phrase = next(
            (text for kind, text in _FETCH_FAILURES if isinstance(exc, kind)), "fetching the profile failed"
        )
    report(
        logging.WARNING,
        "fetching the profile %s from %s failed (%s)",
        urlunsplit(parts),
        " or ".join(map(str, addresses)),
        phrase,
        exc=exc,
    )
    return phrase


LOOKUP_LIMIT: Final = 64
"""Host names looked up at once, by every resolver in the process together (`LOOKUPS`)."""


class _Busy(UcpError):
    """No lookup slot is free: this server's state, not the platform's, so never remembered
    against its URL (see `_fetch_and_remember`)."""


class Lookups:
    """Host-name lookups, each in a thread of its own, at most `limit` running at once.

    A lookup cannot be cancelled: a name whose DNS never answers holds its thread until
    the system resolver gives up, however soon the fetch timed out. In the event loop's
    default executor (a handful of threads, shared with the application) a few such names
    would stall every other lookup, and the application's own work. So each lookup gets a
    daemon thread (which never delays the interpreter's exit), concurrent lookups of one
    name share it, and at most `limit` run at once: past that, a new name is refused at
    once (`profile_unreachable`) rather than queued behind the names that hang.

    Every resolver shares `LOOKUPS` unless given its own (`HttpsProfileResolver(lookups=...)`,
    e.g. a test's with a limit of one).
    """

    __slots__ = ("_lock", "_running", "limit")

    def __init__(self, limit: int = LOOKUP_LIMIT) -> None:
        if limit < 1:
            raise PolicyError("limit must be positive")
        self.limit = limit
        self._running: dict[tuple[str, int], concurrent.futures.Future[list[Any]]] = {}
        self._lock = threading.Lock()

    @property
    def running(self) -> int:
        """The lookups running now, each holding one of the `limit` slots until it is answered."""
        return len(self._running)

    def look_up(self, host: str, port: int) -> concurrent.futures.Future[list[Any]]:
        """The system resolver's answer for `host` (`socket.getaddrinfo`), to come: the one
        already running for it, if any. Its slot is free before the answer is told, so a
        caller that saw the lookup end is never refused as busy because of it."""
        key = (host, port)
        with self._lock:
            future = self._running.get(key)
            if future is not None:
                return future
            if len(self._running) >= self.limit:
                raise _Busy(PROFILE_UNREACHABLE, "the server is looking up too many profile hosts; try again")
            future = concurrent.futures.Future()
            future.set_running_or_notify_cancel()  # a waiter that gives up cannot cancel it for the others
            self._running[key] = future

        def run() -> None:
            try:
                answer = partial(future.set_result, socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
            except BaseException as exc:  # handed to the waiting fetch, whatever it is
                answer = partial(future.set_exception, exc)
            with self._lock:
                del self._running[key]
            answer()

        threading.Thread(target=run, name="mcp-negotiation-lookup", daemon=True).start()
        return future


LOOKUPS: Final = Lookups()
"""The lookups every resolver shares unless given its own."""


@dataclass(frozen=True, slots=True)
class Fetched:
    """A fetched profile: the validated document, its bytes (what a fleet shares) and how
    many seconds it stays fresh."""

    profile: Profile
    body: bytes
    ttl: float


@dataclass(frozen=True, slots=True)
class FetchFailed:
    """A failed fetch: what the platform is told, and for how many seconds it is remembered
    (`attempts` consecutive failures so far, which grow the backoff)."""

    code: UcpErrorCode
    message: str
    backoff: float
    attempts: int


FetchBody: TypeAlias = Callable[[], Awaitable[tuple[bytes, float]]]
"""Fetches one profile URL: the body (at most the cap) and its freshness in seconds."""


async def fetch_outcome(fetch: FetchBody, attempts: int) -> Fetched | FetchFailed:
    """Fetch and validate once, after `attempts` consecutive failures: the outcome to remember."""
    try:
        body, ttl = await fetch()
        return Fetched(Profile.from_bytes(body), body, ttl)
    except _Busy:
        raise
    except UcpError as exc:
        attempts = min(attempts + 1, 32)
        backoff = min(MIN_FAILURE_BACKOFF * 2 ** (attempts - 1), MAX_FAILURE_BACKOFF)
        return FetchFailed(exc.code, exc.message, backoff, attempts)


class SharedProfileCache(Protocol):
    """Fetch outcomes shared by the replicas of a fleet (see `mcp_negotiation.ucp.shared_cache`).

    Asked only when the resolver's own cache has nothing fresh for `url` (already
    validated): answers the outcome another replica stored, or calls `fetch_outcome(fetch,
    attempts)` once for the fleet and stores it. It never raises `UcpError` of its own.
    """

    async def fetch(self, url: str, fetch: FetchBody, attempts: int) -> Fetched | FetchFailed: ...


@dataclass(frozen=True, slots=True)
class _Fresh:
    profile: Profile
    expires: float
    size: int


@dataclass(frozen=True, slots=True)
class _Failed:
    code: UcpErrorCode
    message: str
    until: float
    attempts: int


def _weight(url: str, entry: _Fresh | _Failed) -> int:
    return len(url) + (entry.size if isinstance(entry, _Fresh) else 0)


class HttpsProfileResolver:
    """The default resolver: fetches profiles over HTTPS with the protections UCP asks for.

    `allow_addresses` lists addresses or networks (`"127.0.0.1"`, `"10.0.0.0/8"`) that
    may be fetched although they are special-use: for tests and for deliberately
    private deployments. Profiles are fetched from port 443 only, whatever the URL says:
    a platform naming `:22` or `:6379` would otherwise have the business probe or talk to
    those services. `allow_ports` lists the other ports that may be fetched from
    (`ALL_PORTS` for any). `ssl_context` replaces the default trust store, e.g. to trust
    a test CA. The cache keeps at most `cache_size` profiles and `cache_bytes` bytes of
    their documents, least recently used first out. `clock` (monotonic seconds) drives
    the cache and backoff, so tests can move time instead of waiting for it. `shared_cache`
    (e.g. a `shared_cache.RedisProfileCache`) lets the replicas of a fleet fetch each
    profile once per TTL between them; this resolver's own cache still answers first, so a
    profile it holds fresh costs no round trip to the store. `lookups` runs the host-name
    lookups (default `LOOKUPS`, shared by every resolver: at most `LOOKUP_LIMIT` at once).
    `http_client` (default `httpx2.AsyncClient`, as it is when the resolver is built) is
    called as that class is, once per address tried, with the checked address already in
    the URL: the tests give one that counts or refuses.
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None = None,
        allow_addresses: Iterable[str | IPAddress | IPNetwork] = (),
        allow_ports: Iterable[int] = (),
        connect_timeout: float = 5.0,
        read_timeout: float = 5.0,
        total_timeout: float = 10.0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        cache_size: int = DEFAULT_CACHE_SIZE,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        clock: Callable[[], float] = time.monotonic,
        shared_cache: SharedProfileCache | None = None,
        lookups: Lookups = LOOKUPS,
        http_client: Callable[..., httpx2.AsyncClient] | None = None,
    ) -> None:
        if max_body_bytes < MIN_BODY_CAP:
            raise PolicyError(f"max_body_bytes must be at least {MIN_BODY_CAP}")
        if cache_size < 1:
            raise PolicyError("cache_size must be positive")
        if cache_bytes < max_body_bytes:
            raise PolicyError(f"cache_bytes must be at least max_body_bytes ({max_body_bytes})")
        self._ssl_context = ssl_context if ssl_context is not None else httpx2.create_ssl_context()
        try:
            self._allowed = tuple(ipaddress.ip_network(item, strict=False) for item in allow_addresses)
        except ValueError as bad:  # ipaddress's own, about a value the server author configured
            raise PolicyError(f"allow_addresses: {bad}") from None
        self._ports: Container[int] = (
            allow_ports if isinstance(allow_ports, range) else frozenset(allow_ports)
        )
        self._timeout = httpx2.Timeout(
            connect=connect_timeout, read=read_timeout, write=read_timeout, pool=None
        )
        self._total_timeout = total_timeout
        self._max_body_bytes = max_body_bytes
        self._cache_size = cache_size
        self._cache_bytes = cache_bytes
        self._cache_held = 0
        """Bytes the cache holds, as `_weight` counts them."""
        self._clock = clock
        self._shared = shared_cache
        self._lookups = lookups
        self._http_client = http_client if http_client is not None else httpx2.AsyncClient
        self._cache: OrderedDict[str, _Fresh | _Failed] = OrderedDict()
        self._inflight: dict[str, asyncio.Task[Profile]] = {}

    async def resolve(self, url: str) -> Profile:
        url = validate_profile_url(url)
        cached = self._cached(url)
        if cached is not None:
            return cached
        loop = asyncio.get_running_loop()
        task = self._inflight.get(url)
        if task is None or task.get_loop() is not loop:  # a fetch on a closed loop never settles
            task = loop.create_task(self._fetch_and_remember(url))
            self._inflight[url] = task
            task.add_done_callback(partial(self._settled, url))
        # Shielded: one caller giving up must not cancel the fetch the others await.
        return await asyncio.shield(task)

    def fresh(self, url: str) -> Profile | None:
        """The profile cached for `url` while its TTL lasts (see `ProfileResolver`), counted as
        a use of the cache entry exactly as `resolve` counts one."""
        entry = self._cache.get(url)
        if isinstance(entry, _Fresh) and self._clock() < entry.expires:
            self._cache.move_to_end(url)
            return entry.profile
        return None

    def _cached(self, url: str) -> Profile | None:
        profile = self.fresh(url)
        if profile is not None:
            return profile
        entry = self._cache.get(url)
        if isinstance(entry, _Failed) and self._clock() < entry.until:
            self._cache.move_to_end(url)
            raise UcpError(entry.code, entry.message)
        return None

    def _remember(self, url: str, entry: _Fresh | _Failed) -> None:
        """Cache `entry`, evicting the least recently used past `cache_size` or `cache_bytes`
        (a profile weighs its document's bytes, every entry its URL's)."""
        self._forget(url)
        self._cache[url] = entry
        self._cache_held += _weight(url, entry)
        while len(self._cache) > self._cache_size or self._cache_held > self._cache_bytes:
            self._forget(next(iter(self._cache)))

    def _forget(self, url: str) -> None:
        entry = self._cache.pop(url, None)
        if entry is not None:
            self._cache_held -= _weight(url, entry)

    def _settled(self, url: str, task: asyncio.Task[Profile]) -> None:
        if self._inflight.get(url) is task:
            del self._inflight[url]
        if not task.cancelled():
            task.exception()  # retrieved here, so a fetch every caller abandoned is not logged

    async def _fetch_and_remember(self, url: str) -> Profile:
        previous = self._cache.get(url)
        attempts = previous.attempts if isinstance(previous, _Failed) else 0
        fetch = partial(self._fetch, url)
        if self._shared is None:
            outcome = await fetch_outcome(fetch, attempts)
        else:
            outcome = await self._shared.fetch(url, fetch, attempts)
        if isinstance(outcome, FetchFailed):
            self._remember(
                url, _Failed(outcome.code, outcome.message, self._clock() + outcome.backoff, outcome.attempts)
            )
            raise UcpError(outcome.code, outcome.message)
        self._remember(url, _Fresh(outcome.profile, self._clock() + outcome.ttl, len(outcome.body)))
        return outcome.profile

    async def _fetch(self, url: str) -> tuple[bytes, float]:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or HTTPS_PORT
        if port != HTTPS_PORT and port not in self._ports:
            raise invalid_profile_url(
                "the profile URL names a port profiles are not fetched from (only 443 is allowed)"
            )
        try:
            async with asyncio.timeout(self._total_timeout):
                addresses = await self._addresses(host, port)
                return await self._get_any(parts, host, port, addresses)
        except TimeoutError:
            raise UcpError(
                PROFILE_UNREACHABLE, f"fetching the profile took longer than {self._total_timeout} s"
            ) from None

    def _permitted(self, address: IPAddress) -> bool:
        return any(address in network for network in self._allowed) or not is_special_address(address)

    async def _addresses(self, host: str, port: int) -> list[IPAddress]:
        """The addresses to try, every one checked: one bad answer refuses the name."""
        literal = _literal_address(host)
        if literal is not None:
            if not self._permitted(literal):
                raise invalid_profile_url("the profile URL names a special-use address")
            return [literal]
        try:
            infos = await asyncio.wrap_future(self._lookups.look_up(host, port))
        except (OSError, UnicodeError):
            raise invalid_profile_url("the profile URL host does not resolve") from None
        addresses = list(
            dict.fromkeys(
                ipaddress.ip_address(info[4][0])
                for info in infos
                if info[0] in (socket.AF_INET, socket.AF_INET6)
            )
        )
        if not addresses:
            raise invalid_profile_url("the profile URL host does not resolve")
        if not all(self._permitted(address) for address in addresses):
            raise invalid_profile_url("the profile URL host resolves to a special-use address")
        return addresses

    async def _get_any(
        self, parts: SplitResult, host: str, port: int, addresses: list[IPAddress]
    ) -> tuple[bytes, float]:
        try:
            for address in addresses[:-1]:
                with contextlib.suppress(httpx2.ConnectError, httpx2.ConnectTimeout):
                    return await self._get(parts, host, port, address)
                # (else the host's next address, as a browser would)
            return await self._get(parts, host, port, addresses[-1])
        except httpx2.HTTPError as exc:
            raise UcpError(PROFILE_UNREACHABLE, _fetch_failure(parts, addresses, exc)) from None

    async def _get(self, parts: SplitResult, host: str, port: int, address: IPAddress) -> tuple[bytes, float]:
        literal = f"[{address}]" if address.version == 6 else str(address)
        target = urlunsplit(("https", f"{literal}:{port}", parts.path or "/", parts.query, ""))
        headers = {
            "Host": parts.netloc,
            "Accept": "application/json",
            "Accept-Encoding": "identity",
            "User-Agent": "mcp-negotiation",
        }
        async with (
            self._http_client(
                verify=self._ssl_context, timeout=self._timeout, follow_redirects=False, trust_env=False
            ) as client,
            client.stream("GET", target, headers=headers, extensions={"sni_hostname": host}) as response,
        ):
            if not 200 <= response.status_code < 300:
                raise UcpError(
                    PROFILE_UNREACHABLE, f"the profile server answered HTTP {response.status_code}"
                )
            if response.headers.get("content-encoding", "identity").lower() != "identity":
                raise UcpError(
                    PROFILE_MALFORMED, "the profile was sent compressed although identity was asked"
                )
            body = await self._read_capped(response)
            ttl = _ttl(response.headers.get("cache-control"), response.headers.get("age"))
        return body, ttl

    async def _read_capped(self, response: httpx2.Response) -> bytes:
        too_large = UcpError(PROFILE_MALFORMED, f"the profile is larger than {self._max_body_bytes} bytes")
        declared = response.headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > self._max_body_bytes:
            raise too_large
        body = bytearray()
        async for chunk in response.aiter_raw():
            body += chunk
            if len(body) > self._max_body_bytes:
                raise too_large
        return bytes(body)
