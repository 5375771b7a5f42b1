"""The human output: what was probed, the matrix, what this server's clients lose, whether its
versions tell one story, and a legend. Every line fits `WIDTH` columns."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ...core import revisions
from .matrix import Findings
from .rows import Row
from .story import names as _names
from .story import sources
from .uses import MET_BY, Use

WIDTH: Final = 100
"""The human output fits this many columns, whatever the server answered."""
_CELL: Final = 24
"""Longer table cells (a revision string a server made up) are cut to this."""
_SHOWN_BY: Final = 3
"""A use names this many of the entries of each kind that show it, then how many more."""
_KINDS: Final = ("resource template", "resource", "prompt", "tool")
"""The kinds of `Entry.label`, the longer first (a label starts with its kind)."""

_SUCCESSORS: Final = "; ".join(
    f"{name} is met by {', '.join(met[1:])} where the revision has that instead"
    for name, met in MET_BY.items()
)

LEGEND: Final = (
    (
        "outcome",
        "agreed: the server answered the revision offered; counter-offer: a legacy server"
        " answered another one; refused (CODE): it answered a JSON-RPC error, in whatever HTTP"
        " status; timeout: no answer within --timeout; failed: the connection failed (the server"
        " crashed, or an HTTP answer was not MCP's)",
    ),
    (
        "recorded",
        "the revision the server answered: the one the client and server then speak, and"
        " the one a negotiated server records",
    ),
    ("server capabilities", "the top-level keys of the capabilities the server declared at that revision"),
    (
        "uses",
        "the features of the feature table (docs/concepts.md) this server uses: required, by an"
        " entry's _meta requiredCapabilities; used, by an entry's own fields (outputSchema:"
        " structured_output, annotations: tool_annotations, icons: icons); declared, by its"
        " capabilities (logging, completions, resources.subscribe, extensions)",
    ),
    (
        "lost",
        "of what this server uses, what a client at this revision goes without while another"
        f" served revision has it ({_SUCCESSORS})",
    ),
    (
        "tools",
        "the tools listed to a client at that revision that it can call; lost: tools hidden from"
        " it, or listed as requiring capabilities it lacks there (docs/tool-catalogs.md);"
        " variant: tools listed to it under their name with another input schema than to a"
        " client declaring everything (docs/tool-variants.md)",
    ),
    (
        "versions",
        "what server/discover advertises (supportedVersions), what each -32022 names"
        " (data.supported) and what initialize counter-offers, checked against each other and"
        " against what the server answered to each revision offered",
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


def wrapped(label: str, text: str, indent: int) -> list[str]:
    """`text` after `label`, wrapped at commas and spaces to fit `WIDTH`, continued under it."""
    return textwrap.wrap(
        text,
        width=WIDTH,
        initial_indent=label.ljust(indent),
        subsequent_indent=" " * indent,
        break_on_hyphens=False,
    ) or [label]


def _identity(rows: Sequence[Row]) -> str:
    """The server's name and version, as its newest served revision gave them."""
    for row in reversed(rows):
        info = row.server_info or {}
        name, version = info.get("name"), info.get("version")
        if row.served and isinstance(name, str):
            shown = f"version {_cut(version, 30)}" if isinstance(version, str) and version else "no version"
            return f"{_cut(name, 60)} ({shown}, as it told {_cut(row.revision)})"
    return "(it gave no name: a 2026-07-28 server need not)"


def _use(use: Use) -> str:
    """`structured_output (used by tools a, b)`: what shows it, a few by name, then how many more."""
    groups: dict[str, list[str]] = {}
    for label in use.by:
        kind = next((kind for kind in _KINDS if label.startswith(kind + " ")), "")
        groups.setdefault(kind, []).append(_cut(label.removeprefix(kind).strip(), 40))
    shown = []
    for kind, names in groups.items():
        more = f" and {len(names) - _SHOWN_BY} more" if len(names) > _SHOWN_BY else ""
        plural = kind + ("s" if len(names) > 1 else "")
        shown.append(f"{plural} {', '.join(names[:_SHOWN_BY])}{more}".strip())
    return f"{use.feature} ({use.kind}: {'; '.join(shown)})"


def render(findings: Findings) -> str:
    target, rows = findings.target, findings.rows
    offered = ", ".join(offered_names(findings.capabilities)) or "none"
    transport = " (streamable HTTP)" if target.is_http else " (stdio)"
    uses = "; ".join(_use(use) for use in findings.uses) or "none of the features the revisions differ in"
    lines = [
        *wrapped("probed", target.named + transport, 9),
        *wrapped("server", _identity(rows), 9),
        *wrapped("as", f"{_client(findings.client_info)} (the clientInfo sent: per-client rules apply)", 9),
        *wrapped("offered", f"{offered} (the client capabilities the probe declared)", 9),
        *_narrowing(findings.narrowed),
        *wrapped("uses", uses, 9),
        "",
        *_matrix(rows),
        "",
        f"lost ({'best served: ' + findings.best if findings.best else 'no known revision was served'})",
    ]
    for row in rows:
        if row.served:
            detail = ", ".join(row.lost) or (
                "nothing" if row.answered in revisions.KNOWN else "(a revision this library does not know)"
            )
        else:
            status = f" (HTTP {row.http_status})" if row.http_status is not None else ""
            detail = f"not served: {_cut(row.error or row.outcome, 300)}{status}"
        lines += wrapped(f"  {_cut(row.revision)}", detail, 14)
    lines += _tools(rows)
    lines += _versions(findings)
    lines += ["", "legend"]
    for label, text in LEGEND:
        lines += wrapped(f"  {label}", text, 24)
    return "\n".join(lines)


def _narrowing(narrowed: dict[str, Any] | None) -> list[str]:
    if narrowed is None:
        return []
    reasons = "; ".join(
        f"{revision} cannot have {', '.join(names)}" for revision, names in narrowed["left_out"].items()
    )
    text = f"the server's required capabilities narrow it to {', '.join(narrowed['supported'])} ({reasons})"
    return wrapped("narrowed", text, 9)


def _matrix(rows: Sequence[Row]) -> list[str]:
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
    capabilities = ["server capabilities"] + [", ".join(r.server_capabilities) or "-" for r in rows]
    lines: list[str] = []
    for cells, last in zip(table, capabilities, strict=True):
        left = "  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)) + "  "
        lines += [line.rstrip() for line in wrapped(left, last, indent)]
    return lines


def _client(info: Mapping[str, str]) -> str:
    return " ".join(str(info.get(key, "")) for key in ("name", "version")).strip()


def _tools(rows: Sequence[Row]) -> list[str]:
    """Per served revision, the tools its client sees and can call, those it loses, and those
    it is served in a variant."""
    listed = [row for row in rows if row.tools is not None]
    if not listed:
        return []
    lines = ["", "tools (what a client at each revision sees and can call; lost: hidden or refused)"]
    for row in listed:
        seen = ", ".join(row.tools or ()) or "none"
        lost = f"; lost: {', '.join(row.tools_lost)}" if row.tools_lost else ""
        varied = f"; variant: {', '.join(row.tools_varied)}" if row.tools_varied else ""
        lines += wrapped(f"  {_cut(row.revision)}", seen + lost + varied, 14)
    return lines


def _versions(findings: Findings) -> list[str]:
    told = dict.fromkeys(source.name for source in sources(findings.rows))
    if not told:
        return [
            "",
            "versions (nothing to check: no server/discover, no -32022 data.supported, no counter-offer)",
        ]
    if not findings.contradictions:
        verb = "agrees" if len(told) == 1 else "agree"
        return ["", *wrapped("versions", f"(one story: {_names(list(told))} {verb} with every outcome)", 9)]
    lines = ["", "versions (where server/discover, -32022 data.supported and initialize disagree)"]
    for found in findings.contradictions:
        lines += wrapped(f"  {found.revision}", found.text, 14)
    return lines
