"""Whether the server tells one story about its versions.

Three kinds of source name revisions: what `server/discover` advertises
(`supportedVersions`), what each -32022 names (`data.supported`), and what a legacy
`initialize` counter-offers (a server counter-offers a revision it accepts). Each is
checked against what the probe saw at each revision: agreed there, or not.

A list speaks only of the eras it names (the SDK's discover lists the modern revisions
only; a -32022 refusing 2026-07-28 lists the legacy ones), and of the era of the
revision it was asked about: `server/discover` always speaks of the modern era, a
-32022 at a legacy revision of the legacy era. A counter-offer says only that its
revision is served. A revision agreed that a list speaking of its era leaves out, a
revision listed that was refused or counter-offered, and two lists that disagree about a
revision the probe could not read (a timeout) are each one contradiction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ...core import revisions
from ...core.errors import UNSUPPORTED_PROTOCOL_VERSION
from .rows import Row

DISCOVER = "server/discover"


@dataclass(frozen=True)
class Source:
    name: str
    """`server/discover`, `the -32022 at 2025-06-18`, `initialize at 2024-11-05`."""
    names: frozenset[str]
    eras: frozenset[str]
    """The eras of which it names every revision it serves (empty: it only vouches for `names`)."""


@dataclass(frozen=True)
class Contradiction:
    revision: str
    listed_by: tuple[str, ...]
    not_listed_by: tuple[str, ...]
    observed: str
    """What the server did when offered `revision`: `agreed`, `counter-offered 2025-11-25`,
    `refused (-32022)`, `did not answer` (a timeout), `gave no answer the probe could read`."""

    @property
    def text(self) -> str:
        said = []
        if self.listed_by:
            said.append(f"{names(self.listed_by)} list{'s' if len(self.listed_by) == 1 else ''} it")
        if self.not_listed_by:
            said.append(f"{names(self.not_listed_by)} {'does' if len(self.not_listed_by) == 1 else 'do'} not")
        outcome = f"offered it, the server {self.observed}"
        return f"{', '.join(said)}; {outcome}" if said else outcome

    def as_dict(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "listed_by": list(self.listed_by),
            "not_listed_by": list(self.not_listed_by),
            "observed": self.observed,
            "text": self.text,
        }


def names(items: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _eras(names: Iterable[str]) -> frozenset[str]:
    return frozenset(revisions.era(name) for name in names) - {"unknown"}


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def sources(rows: Iterable[Row]) -> list[Source]:
    found: list[Source] = []
    for row in rows:
        if row.supported_versions is not None:
            names = frozenset(row.supported_versions)
            found.append(Source(DISCOVER, names, _eras(names) | {"modern"}))
        data = row.error_data or {}
        if row.error_code == UNSUPPORTED_PROTOCOL_VERSION and "supported" in data:
            names = frozenset(_strings(data.get("supported")))
            found.append(Source(f"the -32022 at {row.revision}", names, _eras(names) | {row.era}))
        if row.outcome == "counter-offer" and row.answered is not None:
            found.append(Source(f"initialize at {row.revision}", frozenset({row.answered}), frozenset()))
    return found


def _observed(row: Row | None) -> tuple[str, bool | None]:
    """What the probe saw at a revision, and whether that says it is served as offered."""
    if row is None or row.outcome == "failed":
        return "gave no answer the probe could read", None
    if row.outcome == "agreed":
        return "agreed", True
    if row.outcome == "counter-offer":
        return f"counter-offered {row.answered}", False
    if row.outcome == "refused":
        return f"refused ({row.error_code})", False
    return "did not answer", None


def contradictions(rows: Sequence[Row]) -> list[Contradiction]:
    """Each place where the server's versions disagree, oldest revision first."""
    told = sources(rows)
    by_revision = {row.revision: row for row in rows}
    found: list[Contradiction] = []
    for revision in revisions.KNOWN:
        listed = tuple(source.name for source in told if revision in source.names)
        omitted = tuple(
            source.name
            for source in told
            if revisions.era(revision) in source.eras and revision not in source.names
        )
        observed, served = _observed(by_revision.get(revision))
        if (
            (served is True and omitted)
            or (served is False and listed)
            or (served is None and listed and omitted)
        ):
            found.append(Contradiction(revision, listed, omitted, observed))
    for row in rows:
        requested = (row.error_data or {}).get("requested")
        if (
            row.error_code == UNSUPPORTED_PROTOCOL_VERSION
            and isinstance(requested, str)
            and requested != row.revision
        ):
            observed = f"refused ({row.error_code}), naming {requested!r} as the revision requested"
            found.append(Contradiction(row.revision, (), (), observed))
    return sorted(found, key=lambda found: revisions.KNOWN.index(found.revision))


def versions(rows: Sequence[Row]) -> dict[str, Any]:
    """The `versions` object of `--json`: what each source said, and where they disagree."""
    discover = next((row.supported_versions for row in rows if row.supported_versions is not None), None)
    refusals = {
        row.revision: _strings((row.error_data or {}).get("supported"))
        for row in rows
        if row.error_code == UNSUPPORTED_PROTOCOL_VERSION and "supported" in (row.error_data or {})
    }
    initialize = {row.revision: row.answered for row in rows if row.era == "legacy" and row.served}
    return {
        "discover": discover,
        "refusals": refusals,
        "initialize": initialize,
        "contradictions": [found.as_dict() for found in contradictions(rows)],
    }
