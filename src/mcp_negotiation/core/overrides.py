"""Per-client overrides: what a server knows about a client that the client does not say.

Clients declare what they do not do (Claude Code in the desktop app declared `elicitation`
and skipped rendering it, OctopusDeploy/mcp-server#103) and cannot declare what they do
(no capability says "renders resource links" or "reads the server's instructions"). A
`ClientOverride` is a rule keyed by the `clientInfo` name (exact, or a glob such as
`local-agent-mode-*`) and a version range (`versions.VersionRange`), which *revokes*
declared capabilities or sub-capabilities and *grants* ones the client did not declare,
including names outside the protocol, under the `client.` namespace
(`client.renders_resource_links`), which only rules can assert.

The rules are applied once per negotiation, as its record is made (`Negotiator`), so they
are memoised with it and cost a repeated request nothing. Every answer a rule decided is on
the record with the rule's id (`Negotiation.overrides`); every other answer is the client's
declaration. The first rule that names a capability decides it; a grant never replaces what
the client declared (declared wins), a revocation does.

Pure: no SDK import, no I/O. See `docs/client-overrides.md`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import translate
from types import MappingProxyType
from typing import Any, Final, NamedTuple, cast

from .errors import PolicyError, UsageError
from .extensions import settings_given
from .frozen_json import thaw
from .versions import VersionRange

__all__ = ["ASSERTED_NAMESPACE", "MAX_PATTERN_LENGTH", "Applied", "ClientOverride", "apply_overrides"]

ASSERTED_NAMESPACE: Final = "client."
"""The namespace of what only a rule can assert: `client.renders_resource_links`, say. No
client declares these; `client_supports` answers them from the rules alone."""
MAX_PATTERN_LENGTH: Final = 256
_ASSERTED_NAME: Final = re.compile(r"client\.[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,126}[A-Za-z0-9])?")
_FLAGS: Final = frozenset({"listChanged", "subscribe"})


def _names(value: object, what: str) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value)  # type: ignore[arg-type]
    for name in names:
        if not isinstance(name, str):
            raise UsageError(f"{what} takes capability names (strings); got {type(name).__name__}")
    return names


def _frozen_grants(grant: object) -> Mapping[str, Any]:
    """`grant` (names, or names with what each is granted as) as a read-only mapping."""
    if isinstance(grant, Mapping):
        items = list(grant.items())
    else:
        items = [(name, None) for name in _names(grant, "grant")]
    frozen: dict[str, Any] = {}
    for name, value in items:
        if not isinstance(name, str):
            raise UsageError(f"grant takes capability names (strings); got {type(name).__name__}")
        if value is not None and value is not True and not isinstance(value, Mapping):
            raise UsageError(f"grant[{name!r}] must be a settings object (a mapping), True or None")
        if isinstance(value, Mapping):
            if "/" not in name and not name.startswith("experimental.") and value:
                raise PolicyError(
                    f"grant[{name!r}]: only extensions and experimental capabilities take settings;"
                    f" grant sub-capabilities by name ({name}.SUB)"
                )
            value = settings_given(value, f"grant[{name!r}]")
        frozen[name] = value
    return MappingProxyType(frozen)


@dataclass(frozen=True, slots=True)
class ClientOverride:
    """One rule: for clients named `client` (exact, or a glob: `*`, `?`, `[...]`) whose
    `clientInfo.version` is in `versions` (None: any version, also none), revoke the
    capabilities `revoke` names and grant those `grant` names.

    `grant` takes names (`["elicitation.url", "client.renders_resource_links"]`) or a
    mapping from a name to what it is granted as: an extension's settings
    (`{"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}`). `id`
    names the rule on records, spans and metrics (default: the client pattern and range);
    `source` says why the rule exists (an issue, a changelog), for the reader.

    A client that sends no `clientInfo` (optional in 2026-07-28) matches no rule. The names
    are checked when the rule reaches a `Policy` (unknown ones are refused there, with the
    nearest known name); the pattern and the range are checked here.
    """

    client: str
    versions: str | None = None
    revoke: Collection[str] = ()
    grant: Collection[str] | Mapping[str, Any] = field(default=(), hash=False)
    id: str | None = None
    source: str | None = None
    _pattern: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _range: VersionRange | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.client, str) or not self.client:
            raise UsageError(f"ClientOverride needs a client name or glob pattern; got {self.client!r:.100}")
        if len(self.client) > MAX_PATTERN_LENGTH:
            raise PolicyError(f"a client pattern is at most {MAX_PATTERN_LENGTH} characters")
        glob = any(char in self.client for char in "*?[")
        object.__setattr__(self, "_pattern", re.compile(translate(self.client)) if glob else None)
        versions = None if self.versions is None else VersionRange.parse(self.versions)
        object.__setattr__(self, "_range", versions)
        revoke = _names(self.revoke, "revoke")
        grant = _frozen_grants(self.grant)
        both = sorted(set(revoke).intersection(grant))
        if both:
            raise PolicyError(f"rule {self.rule_id!r} both revokes and grants {', '.join(both)}")
        if not revoke and not grant:
            raise PolicyError(f"rule {self.rule_id!r} neither revokes nor grants anything")
        object.__setattr__(self, "revoke", revoke)
        object.__setattr__(self, "grant", grant)
        if self.id is not None and (not isinstance(self.id, str) or not self.id or len(self.id) > 128):
            raise PolicyError(
                f"a rule id is a non-empty string, at most 128 characters; got {self.id!r:.100}"
            )

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuilt from what was written (a policy pickles, for worker processes)."""
        grant = {name: thaw(value) for name, value in cast("Mapping[str, Any]", self.grant).items()}
        return ClientOverride, (self.client, self.versions, self.revoke, grant, self.id, self.source)

    @property
    def rule_id(self) -> str:
        """What records, spans and metrics call the rule: `id`, else its pattern and range."""
        if self.id is not None:
            return self.id
        return self.client if self.versions is None else f"{self.client} {self.versions}"

    def names(self) -> tuple[str, ...]:
        """Every capability name the rule revokes or grants."""
        return (*self.revoke, *self.grant)

    def matches(self, name: str, version: str | None) -> bool:
        """Whether a client calling itself `name` at `version` is one this rule is about."""
        pattern = self._pattern
        if (pattern.fullmatch(name) is None) if pattern is not None else name != self.client:
            return False
        versions = self._range
        return versions is None or version in versions

    @staticmethod
    def known() -> tuple[ClientOverride, ...]:
        """The library's curated rules, each citing what it is based on (opt-in:
        `Policy(client_overrides=[*mine, *ClientOverride.known()])`, yours first, so that
        yours decide what both name). Small on purpose: a rule is here only when a public
        report ties a behaviour to a `clientInfo` name (see `docs/client-overrides.md`)."""
        return KNOWN


KNOWN: Final = (
    ClientOverride(
        "local-agent-mode-*",
        revoke=("elicitation",),
        id="claude-desktop-code-tab:elicitation",
        source=(
            "anthropics/claude-code#96043: Claude Desktop's Code tab presents itself to local servers"
            " as local-agent-mode-<serverName>, declaring no elicitation (Desktop 2.2553.1);"
            " OctopusDeploy/mcp-server#103: Claude Code in the desktop app advertised elicitation and"
            " skipped rendering it. Revoked, in case a version declares it again."
        ),
    ),
)


class Applied(NamedTuple):
    """What the rules made of one client's declaration."""

    overrides: Mapping[str, str]
    """Each name a rule decided, with the rule's id."""
    revoked: frozenset[str]
    """The names among `overrides` that were revoked (the others were granted)."""
    capabilities: Mapping[str, Any] | None
    """The declaration with the grants added (revocations are answered from `revoked`), or
    None when no grant changed it."""


def _declared_at(capabilities: Mapping[str, Any], name: str) -> bool:
    """Whether the client's own declaration has `name` (so a grant of it changes nothing)."""
    if "/" in name:
        node = capabilities.get("extensions")
        return isinstance(node, Mapping) and name in node
    if name.startswith("experimental."):
        node = capabilities.get("experimental")
        return isinstance(node, Mapping) and name[13:] in node
    held: Any = capabilities
    for part in name.split("."):
        if not isinstance(held, Mapping) or part not in held:
            return False
        held = held[part]
    return True


def _granted(capabilities: Mapping[str, Any], grants: Iterable[tuple[str, Any]]) -> Mapping[str, Any]:
    """`capabilities` with `grants` added, as read-only as the declaration it extends."""
    top: dict[str, Any] = dict(capabilities)
    for name, value in grants:
        if "/" in name:
            path, leaf = ["extensions"], name
        elif name.startswith("experimental."):
            path, leaf = ["experimental"], name[13:]
        else:
            *path, leaf = name.split(".")
        node = top
        for part in path:
            child = node.get(part)
            child = dict(child) if isinstance(child, Mapping) else {}
            if node is top and part == "elicitation" and "form" not in child and "url" not in child:
                child["form"] = MappingProxyType({})  # a bare `{}` meant form: adding url must keep it
            node[part] = child
            node = child
        node[leaf] = value if value is not None else (True if leaf in _FLAGS else MappingProxyType({}))
    frozen: Mapping[str, Any] = _frozen(top)
    return frozen


def _frozen(node: Any) -> Any:
    if type(node) is dict:
        return MappingProxyType({key: _frozen(value) for key, value in node.items()})
    return node


def apply_overrides(
    rules: tuple[ClientOverride, ...], client_info: Mapping[str, Any] | None, capabilities: Mapping[str, Any]
) -> Applied | None:
    """What `rules` make of a client's declaration; None when none applies (the common case)."""
    if not client_info:
        return None
    name = client_info.get("name")
    if not isinstance(name, str):
        return None
    version = client_info.get("version")
    version = version if isinstance(version, str) else None
    overrides: dict[str, str] = {}
    decided: set[str] = set()
    revoked: set[str] = set()
    grants: list[tuple[str, Any]] = []
    for rule in rules:
        if not rule.matches(name, version):
            continue
        for capability in rule.revoke:
            if capability not in decided:
                decided.add(capability)
                overrides[capability] = rule.rule_id
                revoked.add(capability)
        for capability, value in cast("Mapping[str, Any]", rule.grant).items():
            if capability in decided:
                continue
            decided.add(capability)
            if capability.startswith(ASSERTED_NAMESPACE):
                overrides[capability] = rule.rule_id
            elif not _declared_at(capabilities, capability):  # declared wins
                overrides[capability] = rule.rule_id
                grants.append((capability, value))
    if not overrides:
        return None
    return Applied(
        MappingProxyType(overrides), frozenset(revoked), _granted(capabilities, grants) if grants else None
    )


def asserted_name_problem(name: str) -> str | None:
    """Why `name`, in the `client.` namespace, is no assertable name, or None."""
    if _ASSERTED_NAME.fullmatch(name):
        return None
    return (
        f"{name[:100]!r} is no name of the {ASSERTED_NAMESPACE!r} namespace: write client.NAME, NAME"
        " of letters, digits, '_', '-' and '.' (client.renders_resource_links)"
    )
