"""What this server uses, and what of it a client at each revision goes without.

Not the whole feature table: only what the server's listings and capabilities show.
Three kinds, which the legend names:

- required: a tool, prompt or resource template lists it in its `_meta`
  requiredCapabilities (`@requires`, `required_capabilities_meta`);
- used: what an entry's own fields use (`outputSchema`: structured_output, `annotations`:
  tool_annotations, `icons`: icons);
- declared: what its capabilities declare (logging, completions, resources.subscribe,
  extensions).

Extension identifiers and `experimental.X` negotiate themselves, with no revision gate
(as `client_supports` answers them): no revision loses them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from ...core import revisions
from ...core.errors import UNSUPPORTED_PROTOCOL_VERSION
from ...core.listings import requirement_names
from .rows import Entry, Row

UseKind = Literal["required", "used", "declared"]

_DECLARED: Final[tuple[tuple[tuple[str, ...], str], ...]] = (
    # the capability's path in the server's capabilities, the feature it uses
    (("logging",), "logging"),
    (("completions",), "completions"),
    (("resources", "subscribe"), "resources.subscribe"),
    (("extensions",), "extensions"),
)

MET_BY: Final[Mapping[str, tuple[str, ...]]] = {
    "resources.subscribe": ("resources.subscribe", "subscriptions.listen")
}
"""Uses a later revision meets in its own way: a client subscribes to resources with
`subscriptions/listen` in 2026-07-28, where `resources/subscribe` is gone."""


@dataclass(frozen=True)
class Use:
    feature: str
    """A name of the feature table (docs/concepts.md)."""
    kind: UseKind
    by: tuple[str, ...]
    """What shows it: `tool summarize`, `capabilities.logging`."""

    def as_dict(self) -> dict[str, Any]:
        return {"feature": self.feature, "kind": self.kind, "by": list(self.by)}


def uses_of(rows: Iterable[Row], reference: Iterable[Entry] = ()) -> list[Use]:
    """Everything the served rows' listings and capabilities show the server uses (and the
    entries listed to a client declaring everything: what a scoping server hides from the
    rows), by kind, then feature, in the feature table's order."""
    found: dict[tuple[UseKind, str], dict[str, None]] = {}

    def add(kind: UseKind, feature: str, by: str) -> None:
        if feature in revisions.FEATURES:
            found.setdefault((kind, feature), {})[by] = None

    served = [row for row in rows if row.served]
    entries = [entry for row in served for listed in (row.listed or {}).values() for entry in listed]
    for entry in (*entries, *reference):
        for name in entry.required:
            add("required", name, entry.label)
        for feature in entry.shows:
            add("used", feature, entry.label)
    for row in served:
        declared = row.declared or {}
        for path, feature in _DECLARED:
            if _declares(declared, path):
                add("declared", feature, "capabilities." + ".".join(path))
    order = {name: i for i, name in enumerate(revisions.FEATURES)}
    kinds = ("required", "used", "declared")
    return [
        Use(feature, kind, tuple(by))
        for (kind, feature), by in sorted(
            found.items(), key=lambda item: (kinds.index(item[0][0]), order[item[0][1]])
        )
    ]


def _declares(capabilities: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    """Whether the capability at `path` is declared: present and not false (an empty
    `extensions` object declares none)."""
    node: Any = capabilities
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    if node is None or node is False:
        return False
    return bool(node) if path == ("extensions",) else True


def met(feature: str, revision: str | None) -> bool:
    """Whether a client at `revision` gets `feature`, in that revision's own way."""
    return any(revisions.feature(name, revision) for name in MET_BY.get(feature, (feature,)))


def fill_lost(rows: list[Row], uses: Iterable[Use]) -> None:
    """Each served row's `lost`: the features this server uses that its revision does not
    meet and another served revision does."""
    features = dict.fromkeys(use.feature for use in uses)
    served = [row.answered for row in rows if row.served and row.answered in revisions.KNOWN]
    for row in rows:
        if row.served and row.answered in revisions.KNOWN:
            row.lost = sorted(
                name
                for name in features
                if not met(name, row.answered) and any(met(name, other) for other in served)
            )


def best_served(rows: Iterable[Row]) -> str | None:
    """The newest known revision some row was served at."""
    # A revision this library does not know (a draft a server counter-offers) has no row in
    # the feature table: it is shown as answered, with nothing computed against it.
    served = [row.answered for row in rows if row.served and row.answered in revisions.KNOWN]
    return max(served, key=revisions.KNOWN.index) if served else None


def narrowing(rows: Iterable[Row]) -> dict[str, Any] | None:
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
