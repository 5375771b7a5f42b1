"""`mcp-negotiation a2a`: what an A2A agent with this card answers a request with these headers.

A dry run of `semver.a2a.negotiate_a2a`, no network: the card is a file, the request is
its `--header`s and `--query`. The exit status says the outcome, so a script (or CI
checking a card before it is deployed) can ask "would this client be served?".
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..semver.a2a import (
    A2ACard,
    A2AInterface,
    A2ANegotiation,
    a2a_http_error,
    negotiate_a2a,
    read_agent_card,
)

__all__ = ["EPILOG", "CardFile", "card_file", "header", "run"]

EPILOG: Final = """\
examples:
  mcp-negotiation a2a --card card.json --header 'A2A-Version: 1.0'
  mcp-negotiation a2a --card card.json --header 'A2A-Version: 1.0' \\
      --header 'A2A-Extensions: https://example.com/extensions/geolocation/v1'
  mcp-negotiation a2a --card card.json --query 'A2A-Version=1.0' --json
  mcp-negotiation a2a --card card.json --interface https://agent.example.com/a2a/v1

exit status:
  0    the agent serves the request (the version, and the extensions it activates)
  1    the agent refuses it (-32009, -32008, or -32602 for a malformed header)
  2    bad options: an unreadable card, a card that is not JSON or lists no version

See docs/protocols.md ("A2A's own headers").
"""


@dataclass(frozen=True, slots=True)
class CardFile:
    """A card read before negotiating: a file that cannot be used is a bad option."""

    path: str
    card: A2ACard


def card_file(path: str) -> CardFile:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as failure:
        reason = failure.strerror if isinstance(failure, OSError) and failure.strerror else failure
        raise argparse.ArgumentTypeError(f"cannot read {path}: {reason}") from None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as failure:
        raise argparse.ArgumentTypeError(
            f"{path} is not JSON (line {failure.lineno}, column {failure.colno}: {failure.msg})"
        ) from None
    try:
        return CardFile(path, read_agent_card(parsed))
    except ValueError as failure:
        raise argparse.ArgumentTypeError(f"{path} is no agent card to negotiate with: {failure}") from None


def header(value: str) -> tuple[str, str]:
    """`Name: value`, as in an HTTP request."""
    name, colon, rest = value.partition(":")
    if not colon or not name or name != name.strip() or " " in name:
        raise argparse.ArgumentTypeError(f"a header is 'Name: value' ('A2A-Version: 1.0'); got {value!r}")
    return name, rest.strip(" \t")


def _interface(interface: A2AInterface | None) -> dict[str, str] | None:
    if interface is None:
        return None
    return {"url": interface.url, "protocolBinding": interface.binding, "protocolVersion": interface.version}


def _summary(answer: A2ANegotiation) -> dict[str, Any]:
    request = answer.request
    summary: dict[str, Any] = {
        "agreed": answer.ok,
        "request": {
            "version": request.version,
            "versionSent": request.version_sent,
            "versionSource": request.version_source,
            "extensions": list(request.extensions),
        },
        "version": answer.version,
        "interface": _interface(answer.interface),
        "activated": list(answer.activated),
        "ignored": list(answer.ignored),
        "responseHeaders": dict(answer.response_headers),
        "error": None,
        "http": None,
    }
    if answer.refusal is not None:
        status, body = a2a_http_error(answer.refusal)
        summary["error"] = answer.refusal.to_jsonrpc_error()
        summary["http"] = {"status": status, "body": body}
    return summary


def _lines(card: CardFile, answer: A2ANegotiation) -> list[str]:
    request = answer.request
    lines = [f"card: {card.path}"]
    lines += [f"  A2A {i.version} over {i.binding} at {i.url}" for i in card.card.interfaces]
    lines += [f"  extension {e.uri}" + (" (required)" if e.required else "") for e in card.card.extensions]
    sent = (
        f"{request.version_sent} (from the {request.version_source})"
        if request.version_sent
        else "none (so 0.3)"
    )
    lines.append(f"request: A2A-Version {sent}")
    lines.append(f"  extensions: {', '.join(request.extensions) or 'none'}")
    if answer.refusal is not None:
        status, body = a2a_http_error(answer.refusal)
        lines.append(f"refused: {answer.refusal.code} {answer.refusal.message}")
        lines.append(f"  JSON-RPC error: {json.dumps(answer.refusal.to_jsonrpc_error())}")
        lines.append(f"  HTTP+JSON: {status} {json.dumps(body)}")
        return lines
    assert answer.interface is not None  # served: an interface serves it
    lines.append(f"agreed: A2A {answer.version} over {answer.interface.binding} at {answer.interface.url}")
    lines.append(f"  activated: {', '.join(answer.activated) or 'none'}")
    lines.append(f"  ignored: {', '.join(answer.ignored) or 'none'}")
    lines += [f"  response header: {name}: {value}" for name, value in answer.response_headers]
    return lines


def run(
    card: CardFile,
    headers: list[tuple[str, str]],
    query: str | None,
    *,
    interface_url: str | None,
    as_json: bool,
) -> int:
    answer = negotiate_a2a(card.card, headers, query, interface_url=interface_url)
    if as_json:
        print(json.dumps({"card": card.path, **_summary(answer)}, indent=2))
    else:
        print("\n".join(_lines(card, answer)))
    return 0 if answer.ok else 1
