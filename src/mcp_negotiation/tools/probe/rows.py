"""What the probe found at one revision: a `Row`, and the entries the server listed to it.

Pure data: nothing here talks to a server, so the report's parts (`uses`, `story`,
`catalogs`, `render`) can be read and tested against plain values.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

from ...core.errors import NegotiationError

Outcome = Literal["agreed", "counter-offer", "refused", "timeout", "failed"]

Kind = Literal["tool", "prompt", "resource", "resource template"]


class ProbeError(NegotiationError):
    """A failure a person can act on: the server could not be started or reached, or it
    never answered as a JSON-RPC peer."""


@dataclass(frozen=True)
class Entry:
    """One entry of a listing, as the server listed it to one client."""

    kind: Kind
    name: str
    required: tuple[str, ...] = ()
    """The names of its `_meta` requiredCapabilities (as `client_supports` takes them)."""
    shows: tuple[str, ...] = ()
    """Features of the feature table its listing shows it uses (`outputSchema`: structured_output)."""
    schema: str = ""
    """A digest of a tool's input schema ("" for none): what tells a variant apart."""

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"


Listed = dict[Kind, tuple[Entry, ...]]
"""What a server listed to one client, by kind; a kind it declares no capability for, or
refused to list, is absent."""


ROW_FIELDS: Final = (
    "revision",
    "era",
    "outcome",
    "answered",
    "error_code",
    "error",
    "error_data",
    "http_status",
    "server_capabilities",
    "lost",
    "server_info",
    "ucp_advertised",
    "tools",
    "tools_lost",
    "tools_varied",
)
"""The fields of a row that `--json` carries, in its order (docs/probe.md documents each)."""


@dataclass
class Row:
    revision: str
    era: str
    outcome: Outcome
    answered: str | None = None
    error_code: int | None = None
    error: str | None = None
    error_data: dict[str, Any] | None = None
    """The refusal's `data`, as the server sent it."""
    http_status: int | None = None
    """The HTTP status a refusal came in (a JSON-RPC error may come in a 400 or a 401)."""
    server_capabilities: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    """What this server uses (`uses` in the report) that a client at this revision goes without."""
    server_info: dict[str, Any] | None = None
    """The name and version (and more) the server gave at this revision, as it gave them."""
    ucp_advertised: dict[str, Any] | None = field(default=None, repr=False)
    tools: list[str] | None = None
    """The tools a client at this revision sees and can call (None: none were listed to it)."""
    tools_lost: list[str] = field(default_factory=list)
    """The tools it goes without: hidden from it, or listed with requirements it cannot meet."""
    tools_varied: list[str] = field(default_factory=list)
    """The tools it is served in a variant: listed by the same name with another input schema
    than to a client declaring everything (the reference listing)."""
    # Not output: what the report is computed from.
    declared: dict[str, Any] | None = field(default=None, repr=False)
    """The server's capabilities at this revision, as it sent them."""
    listed: Listed | None = field(default=None, repr=False)
    """The entries the server listed to this client (`tools` says what came of them)."""
    reference: Listed | None = field(default=None, repr=False)
    """What the server listed, over this row's connection, to the probe declaring every
    capability (modern rows only; None where it was not read so)."""
    supported_versions: list[str] | None = field(default=None, repr=False)
    """What `server/discover` advertised (modern rows only)."""
    detail: str | None = field(default=None, repr=False)
    """A failed row's whole explanation (a crashed server's stderr): what the probe says
    when no revision answered at all."""
    wrote_non_jsonrpc: bool = field(default=False, repr=False)
    """The server wrote output that is not JSON-RPC (the SDK's client skips it)."""

    def as_dict(self) -> dict[str, Any]:
        """The row as `--json` carries it."""
        row = asdict(self)
        return {name: row[name] for name in ROW_FIELDS}

    @property
    def served(self) -> bool:
        return self.outcome in ("agreed", "counter-offer")

    @property
    def answered_as_peer(self) -> bool:
        """Whether the server answered this row as a JSON-RPC peer: a result or an error."""
        return self.served or self.outcome == "refused"


def shown(url: str) -> str:
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
