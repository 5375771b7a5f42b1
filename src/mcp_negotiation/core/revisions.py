"""MCP protocol revisions: the enumerated set, their eras, and what each one offers.

Revisions are compared by their position in `KNOWN`, never as strings: a client may
send anything (`"zzz"` sorts after every date), and a future identifier need not be a
date. An unknown revision therefore satisfies no minimum, while an unknown *minimum* is
the server author's mistake and raises.

Features are answered per revision because they are not monotonic: elicitation arrives
in 2025-06-18, tasks exist as a client capability only in 2025-11-25, and the
2026-07-28 revision removes `logging/setLevel`, `resources/subscribe` and root-list
notifications while deprecating roots, sampling and logging (SEP-2577).

This module is pure: it imports nothing from `mcp`, so it can be used by proxies,
clients and tests with plain values.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Final, Literal

from .errors import NegotiationError, PolicyError

__all__ = [
    "DEFAULT_REMOVAL_DATE",
    "DEPRECATED_FEATURES",
    "DEPRECATION_DATE",
    "FEATURES",
    "KNOWN",
    "LEGACY",
    "MODERN",
    "UNANNOUNCED",
    "ClientFeature",
    "DeprecationClockError",
    "Era",
    "FeatureName",
    "FeatureRow",
    "ServerFeature",
    "calendar_day",
    "deprecation_window_open",
    "era",
    "feature",
    "feature_names",
    "is_at_least",
    "is_date_version",
    "is_deprecated",
    "known_revisions",
    "latest",
    "require_day",
]

Era = Literal["legacy", "modern", "unknown"]

LEGACY: Final[tuple[str, ...]] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""Revisions reached through the `initialize` handshake, oldest first."""

MODERN: Final[tuple[str, ...]] = ("2026-07-28",)
"""Revisions whose every request carries its own envelope in `params._meta`."""

KNOWN: Final[tuple[str, ...]] = (*LEGACY, *MODERN)
"""Every revision this library knows, oldest first (the order is the comparison)."""

UNANNOUNCED: Final = "2025-03-26"
"""What a request is served at when nothing says its revision: the specification's default
for an HTTP request without `MCP-Protocol-Version` (and a legacy one, so that a message
before any handshake is negotiated as a handshake era's)."""

_INDEX: Final[Mapping[str, int]] = {revision: i for i, revision in enumerate(KNOWN)}
_LEGACY_SET: Final[frozenset[str]] = frozenset(LEGACY)
_MODERN_SET: Final[frozenset[str]] = frozenset(MODERN)


def era(revision: object) -> Era:
    """The era of a revision; anything unrecognised (including non-strings) is `"unknown"`."""
    if not isinstance(revision, str):
        return "unknown"
    if revision in _LEGACY_SET:
        return "legacy"
    if revision in _MODERN_SET:
        return "modern"
    return "unknown"


def is_at_least(revision: object, minimum: str) -> bool:
    """Whether `revision` is a known revision no older than `minimum`.

    Raises `ValueError` when `minimum` is not a known revision: that is a bug in the
    caller's configuration, and silently answering False would hide it.
    """
    floor = _INDEX.get(minimum) if isinstance(minimum, str) else None
    if floor is None:
        raise PolicyError(f"minimum must be one of {', '.join(KNOWN)}; got {minimum!r}")
    position = _INDEX.get(revision) if isinstance(revision, str) else None
    return position is not None and position >= floor


def all() -> tuple[str, ...]:  # the name barrel_mcp and the seeds use: called as `revisions.all()`
    """Every known revision, newest first.

    Left out of `__all__`, so that `from mcp_negotiation.core.revisions import *` does not
    replace the builtin `all` in the importing module.
    """
    return tuple(reversed(KNOWN))


def latest(era_name: Literal["legacy", "modern"]) -> str:
    """The newest revision of an era."""
    if era_name == "legacy":
        return LEGACY[-1]
    if era_name == "modern":
        return MODERN[-1]
    raise PolicyError(f"era must be 'legacy' or 'modern'; got {era_name!r}")


@dataclass(frozen=True, slots=True)
class FeatureRow:
    """One row of the feature table: where a feature exists and why we believe so."""

    name: str
    side: Literal["client", "server"]
    first: str
    last: str | None
    source: str

    def at(self, revision: object) -> bool:
        """Whether the feature exists at `revision` (unknown revisions have nothing)."""
        position = _INDEX.get(revision) if isinstance(revision, str) else None
        if position is None:
            return False
        if position < _INDEX[self.first]:
            return False
        return self.last is None or position <= _INDEX[self.last]


_S11 = "mcp_types._v2025_11_25"
_S26 = "mcp_types._v2026_07_28"
_METHODS = "mcp_types.methods"

_ROWS: Final[tuple[FeatureRow, ...]] = (
    # Client capabilities: what a server may ask of the client.
    FeatureRow(
        "roots",
        "client",
        "2024-11-05",
        None,
        f"ClientCapabilities.roots in {_S11} and {_S26}; roots/list is an InputRequest in 2026-07-28",
    ),
    FeatureRow(
        "roots.listChanged",
        "client",
        "2024-11-05",
        "2025-11-25",
        f"{_METHODS}.CLIENT_NOTIFICATIONS has notifications/roots/list_changed up to 2025-11-25 only",
    ),
    FeatureRow(
        "sampling",
        "client",
        "2024-11-05",
        None,
        f"ClientCapabilities.sampling in {_S11} and {_S26}; CreateMessageRequest is an InputRequest",
    ),
    FeatureRow(
        "sampling.context",
        "client",
        "2025-11-25",
        None,
        f"Sampling.context in {_S11} (added by the 2025-11-25 changelog, SEP-1577) and {_S26}",
    ),
    FeatureRow(
        "sampling.tools",
        "client",
        "2025-11-25",
        None,
        f"Sampling.tools in {_S11} (tool use in sampling, 2025-11-25 changelog) and {_S26}",
    ),
    FeatureRow(
        "elicitation",
        "client",
        "2025-06-18",
        None,
        f"{_METHODS}.SERVER_REQUESTS adds elicitation/create at 2025-06-18; "
        "ElicitRequest is an InputRequest in 2026-07-28",
    ),
    FeatureRow(
        "elicitation.form",
        "client",
        "2025-06-18",
        None,
        f"2025-06-18 changelog: elicitation is form-only; Elicitation.form in {_S11} and {_S26} "
        "(an empty object means form)",
    ),
    FeatureRow(
        "elicitation.url",
        "client",
        "2025-11-25",
        None,
        f"Elicitation.url in {_S11} (URL mode, SEP-1036) and {_S26}",
    ),
    FeatureRow(
        "tasks",
        "client",
        "2025-11-25",
        "2025-11-25",
        f"ClientCapabilities.tasks in {_S11}; absent from {_S26} (tasks became an extension)",
    ),
    FeatureRow(
        "extensions", "client", "2026-07-28", None, f"ClientCapabilities.extensions exists in {_S26} only"
    ),
    FeatureRow(
        "experimental", "client", "2024-11-05", None, f"ClientCapabilities.experimental in {_S11} and {_S26}"
    ),
    # Server features: what a client loses when the revision is older (or newer).
    FeatureRow(
        "logging",
        "server",
        "2024-11-05",
        None,
        f"ServerCapabilities.logging in {_S11} and {_S26}; deprecated by SEP-2577",
    ),
    FeatureRow(
        "logging.setLevel",
        "server",
        "2024-11-05",
        "2025-11-25",
        f"{_METHODS}.CLIENT_REQUESTS has logging/setLevel up to 2025-11-25 only",
    ),
    FeatureRow(
        "resources.subscribe",
        "server",
        "2024-11-05",
        "2025-11-25",
        f"{_METHODS}.CLIENT_REQUESTS has resources/subscribe up to 2025-11-25 only",
    ),
    FeatureRow(
        "subscriptions.listen",
        "server",
        "2026-07-28",
        None,
        f"{_METHODS}.CLIENT_REQUESTS adds subscriptions/listen at 2026-07-28",
    ),
    FeatureRow(
        "server.discover",
        "server",
        "2026-07-28",
        None,
        f"{_METHODS}.CLIENT_REQUESTS adds server/discover at 2026-07-28",
    ),
    FeatureRow(
        "input_requests",
        "server",
        "2026-07-28",
        None,
        f"InputRequiredResult exists in {_S26} only (server-to-client requests ride results)",
    ),
    FeatureRow(
        "sessions",
        "server",
        "2024-11-05",
        "2025-11-25",
        "the initialize handshake and Mcp-Session-Id exist in the legacy era only",
    ),
    FeatureRow(
        "completions",
        "server",
        "2025-03-26",
        None,
        "ServerCapabilities.completions added by the 2025-03-26 changelog",
    ),
    FeatureRow(
        "tool_annotations", "server", "2025-03-26", None, "ToolAnnotations added by the 2025-03-26 changelog"
    ),
    FeatureRow(
        "audio_content", "server", "2025-03-26", None, "AudioContent added by the 2025-03-26 changelog"
    ),
    FeatureRow(
        "progress.message",
        "server",
        "2025-03-26",
        None,
        "ProgressNotification.message added by the 2025-03-26 changelog",
    ),
    FeatureRow(
        "batching",
        "server",
        "2025-03-26",
        "2025-03-26",
        "JSON-RPC batching added in 2025-03-26, removed by the 2025-06-18 changelog",
    ),
    FeatureRow(
        "structured_output",
        "server",
        "2025-06-18",
        None,
        "Tool.outputSchema / CallToolResult.structuredContent added by the 2025-06-18 changelog",
    ),
    FeatureRow(
        "resource_links",
        "server",
        "2025-06-18",
        None,
        "ResourceLink content added by the 2025-06-18 changelog",
    ),
    FeatureRow(
        "icons",
        "server",
        "2025-11-25",
        None,
        "Icon metadata on tools, resources, prompts and implementations, 2025-11-25 changelog",
    ),
)

FEATURES: Final[Mapping[str, FeatureRow]] = {row.name: row for row in _ROWS}
"""The feature table, by name."""

ClientFeature = Literal[
    "roots",
    "roots.listChanged",
    "sampling",
    "sampling.context",
    "sampling.tools",
    "elicitation",
    "elicitation.form",
    "elicitation.url",
    "tasks",
    "extensions",
    "experimental",
]
"""The client-side names of the feature table, for type checkers (`tests/core/test_revisions.py`
checks that they are the table's): what `requires` and `required_capabilities` take."""

ServerFeature = Literal[
    "logging",
    "logging.setLevel",
    "resources.subscribe",
    "subscriptions.listen",
    "server.discover",
    "input_requests",
    "sessions",
    "completions",
    "tool_annotations",
    "audio_content",
    "progress.message",
    "batching",
    "structured_output",
    "resource_links",
    "icons",
]
"""The server-side names of the feature table, for type checkers."""

FeatureName = ClientFeature | ServerFeature
"""Every name of the feature table. Signatures take `FeatureName | str`, because extension
identifiers (`vendor/name`) and `experimental.NAME` are open sets no `Literal` can spell:
editors complete the known names, and the mypy plugin (`mcp_negotiation.tools.mypy_plugin`)
reports a misspelt one, by the same rule as the run-time check."""


def feature(name: str, revision: object) -> bool:
    """Whether `revision` has the feature `name`; unknown names and revisions answer False."""
    row = FEATURES.get(name) if isinstance(name, str) else None
    return row is not None and row.at(revision)


def feature_names(side: Literal["client", "server"]) -> tuple[str, ...]:
    """The table's feature names for one side, in table order."""
    if side not in ("client", "server"):
        raise PolicyError(f"side must be 'client' or 'server'; got {side!r}")
    return tuple(row.name for row in _ROWS if row.side == side)


# --- The deprecation window (SEP-2577; seed 000's shim) -------------------------------

DEPRECATION_DATE: Final[date] = date(2026, 7, 28)
"""When roots, sampling and logging were deprecated: the 2026-07-28 revision."""

DEFAULT_REMOVAL_DATE: Final[date] = date(2027, 7, 28)
"""Twelve months later, the default end of the compatibility window."""

DEPRECATED_FEATURES: Final[frozenset[str]] = frozenset({"roots", "sampling", "logging"})
"""Top-level features that disappear, with all their sub-features, once the window closes."""


class DeprecationClockError(NegotiationError, ValueError, TypeError):
    """A `today`, removal date or `months_since_deprecation` of the wrong type.

    Both a `ValueError` and a `TypeError`, so that one check serves two promises:
    `protocols.get_supported_versions` raises `ValueError` for every bad argument, as
    the rest of that module does, and `Policy` has always raised `TypeError` for these.
    """


def require_day(field: str, value: object) -> date:
    """`value` if it is a calendar day, else a `DeprecationClockError` naming `field`.

    A `datetime` is refused although it is a `date` subclass: it does not compare with a
    `date`, so the window would fail later with a bare TypeError. The check goes through
    the `datetime` module because tests replace this module's `date` with a fake clock.
    """
    if not isinstance(value, datetime.date) or isinstance(value, datetime.datetime):
        raise DeprecationClockError(f"{field} must be a datetime.date (a day, not a datetime); got {value!r}")
    return value


def _months_between(start: date, end: date) -> int:
    months = (end.year - start.year) * 12 + (end.month - start.month)
    return months - 1 if end.day < start.day else months


def calendar_day() -> date:
    """The day the window is read on when no one pins one: the only place the library reads
    the calendar (`negotiation.SYSTEM_CLOCK` asks here too)."""
    return date.today()


def deprecation_window_open(
    *,
    today: date | None = None,
    months_since_deprecation: int | None = None,
    removal: date = DEFAULT_REMOVAL_DATE,
) -> bool:
    """Whether the deprecated features are still served.

    The single definition of the window, shared by `Policy` and by
    `protocols.get_supported_versions`, and so the single check of its arguments: both
    refuse the same mistakes with the same messages. Pass `months_since_deprecation` (or
    `today`) to ask about a moment other than now; tests should never wait on the wall
    clock. Both may be given only when they name the same moment (`today` is that many
    whole months after `DEPRECATION_DATE`): otherwise one of them would be silently
    ignored.

    Raises `DeprecationClockError` for a non-day `today` or `removal` and a month count
    that is not an `int` (`True` and floats included), and `ValueError` for a negative
    month count or a `today` that disagrees with it.
    """
    require_day("removal", removal)
    if today is not None:
        require_day("today", today)
    months = months_since_deprecation
    if months is not None:
        if isinstance(months, bool) or not isinstance(months, int):
            raise DeprecationClockError(
                f"months_since_deprecation must be a whole number of months; got {months!r}"
            )
        if months < 0:
            raise PolicyError("months_since_deprecation cannot be negative")
        if today is None:
            return months < _months_between(DEPRECATION_DATE, removal)
        elapsed = _months_between(DEPRECATION_DATE, today)
        if elapsed != months:
            raise PolicyError(
                f"today={today} is {elapsed} whole months after the deprecation on {DEPRECATION_DATE}, "
                f"not months_since_deprecation={months}; pass one of them"
            )
    # A day is exact; a count of months is not, for a removal date off the 28th.
    return (today or calendar_day()) < removal


_DATE_SHAPE: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def is_date_version(value: object) -> bool:
    """True for a `YYYY-MM-DD` string naming a real calendar date: how MCP revisions, and
    UCP versions, are spelt, known or not yet known.

    Such versions are compared as strings, which is only sound when every one has this
    exact form; `2026-02-30` or `2026-4-8` would sort wrongly and is refused.
    """
    if not isinstance(value, str) or not _DATE_SHAPE.fullmatch(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def is_deprecated(name: str) -> bool:
    """Whether `name` (or the top-level feature it belongs to) is deprecated; False for a
    non-string, like every other question this module answers about names."""
    return isinstance(name, str) and name.split(".", 1)[0] in DEPRECATED_FEATURES


def known_revisions(values: Iterable[object]) -> tuple[str, ...]:
    """The known revisions among `values`, oldest first, without duplicates."""
    wanted = {v for v in values if isinstance(v, str) and v in _INDEX}
    return tuple(r for r in KNOWN if r in wanted)
