"""The parity suite's runner: each conversation of `parity_steps` spoken, as raw JSON-RPC over
stdio, to the suite's server (`servers/parity_server.py`) on one SDK major, and what
the client saw compared with what the steps expect, the same expectations for both majors.

What is normalised, and why (nothing else is: a difference anywhere else fails one side):
- `serverInfo` (each SDK names itself), in an `initialize` answer or a modern result's `_meta`;
- a tool result's `content`, its text the very `structuredContent` compared (each SDK
  pretty-prints it), and the fields only mcp 2.x's modern results have (`resultType`,
  `cacheScope`, `ttlMs`);
- a listing's entries are compared by name (or URI template) and `_meta`: what negotiation
  decides is which are listed, with what requirement; their schemas and descriptions are each
  SDK's rendering of the same functions;
- the revisions: `LEGACY` in a step stands for the newest legacy revision the SDK serves
  (mcp 1.22 stops at 2025-06-18), `SERVED` for all it serves, newest first; and an SDK that
  serves no modern revision (mcp 1.x) is expected to answer each modern step as the step's
  `unserved` says (by default the -32022 refusal of its revision) and to record the
  conversation's `unserved_spans`;
- an expected error naming no `message` is compared by its code and data only (the -32022
  an SDK makes itself words it otherwise than the library does);
- spans: the request's own attributes (`mcp.method.name`, `mcp.protocol.version`,
  `error.type`) are on the SDK's SERVER span on mcp 2.x, which the `capability_negotiated`
  span is a child of, and on the negotiation span itself on mcp 1.x, which has no SDK span
  (otel/spans.py, "one span story"): each negotiation span is compared with them merged in,
  but for a refused one's `mcp.protocol.version`: mcp 2.x's span names the revision the SDK
  read off the request (or off a handshake it never answered), where none was agreed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from support.jsonrpc_stdio import stdio_peer
from support.parity_steps import CONVERSATIONS, LEGACY, MODERN, SERVED, Conversation, Notify

__all__ = ["Side", "cases", "converse"]

SERVERS = Path(__file__).resolve().parent / "servers"
REQUEST_KEYS = ("mcp.method.name", "mcp.protocol.version", "error.type")
MODERN_ONLY = ("resultType", "cacheScope", "ttlMs")
LISTED = ("name", "uriTemplate", "_meta")


class Side(NamedTuple):
    """One SDK major: its name (`mcp1`, `mcp2`), and the revisions the installed SDK serves,
    oldest first."""

    name: str
    served: tuple[str, ...]


def cases(side: Side) -> list[Any]:
    """Every conversation, as pytest's parameters: a strict xfail where `side` diverges today."""
    return [
        pytest.param(c, id=c.name, marks=[pytest.mark.xfail(reason=c.diverges[side.name], strict=True)])
        if side.name in c.diverges
        else pytest.param(c, id=c.name)
        for c in CONVERSATIONS
    ]


async def converse(side: Side, conversation: Conversation, tmp: Path) -> tuple[list[Any], list[Any]]:
    """Speak `conversation` to `side`'s server: what it answered, then the spans it recorded,
    beside what the steps expect, for the test to assert equal (as pytest shows a difference)."""
    modern = MODERN in side.served or conversation.era != "modern"
    values = {LEGACY: [r for r in side.served if r != MODERN][-1], SERVED: list(reversed(side.served))}
    spans_at, stderr = tmp / "spans.json", tmp / "stderr.txt"
    command = [sys.executable, str(SERVERS / "parity_server.py"), "--spans", str(spans_at)]
    seen: list[Any] = []
    expected: list[Any] = []
    async with stdio_peer([*command, *conversation.args], stderr, SERVERS) as peer:
        for step in conversation.steps:
            if isinstance(step, Notify):
                await peer.notify(step.method)
                continue
            answer = _seen(await peer.request(step.method, _put(step.params, values)))
            wanted = _put(step.expect if modern else step.unserved, values)
            if "message" not in wanted.get("error", {"message": ""}):
                answer.get("error", {}).pop("message", None)
            seen.append((step.says, answer))
            expected.append((step.says, wanted))
        assert await peer.close() == 0, stderr.read_text()
    seen.append(_negotiated(json.loads(spans_at.read_text())))
    expected.append(_put(list(conversation.spans if modern else conversation.unserved_spans), values))
    return seen, expected


def _put(value: Any, values: dict[str, Any]) -> Any:
    """`value` with each placeholder (`LEGACY`, `SERVED`) replaced by what it stands for."""
    if isinstance(value, str):
        return values.get(value, value)
    if isinstance(value, list | tuple):
        return [_put(item, values) for item in value]
    if isinstance(value, dict):
        return {key: _put(item, values) for key, item in value.items()}
    return value


def _seen(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without what each SDK renders its own way (see the module's docstring)."""
    result = answer.get("result")
    if isinstance(result, dict):
        result.pop("serverInfo", None)
        meta = result.get("_meta")
        if isinstance(meta, dict):
            meta.pop("io.modelcontextprotocol/serverInfo", None)
            if not meta:
                del result["_meta"]
        for key in MODERN_ONLY:
            result.pop(key, None)
        if "structuredContent" in result:
            del result["content"]
        for listed in ("tools", "prompts", "resourceTemplates"):
            if listed in result:
                result[listed] = [{k: v for k, v in e.items() if k in LISTED} for e in result[listed]]
    return answer


def _negotiated(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `capability_negotiated` spans' attributes, with their request's (see the docstring)."""
    by_id = {span["span_id"]: span for span in spans}
    found = []
    for span in spans:
        if span["name"] != "capability_negotiated":
            continue
        attributes = dict(span["attributes"])
        parent = by_id.get(span["parent_id"])
        if parent is not None and parent["kind"] == "SERVER":
            keys = REQUEST_KEYS[::2] if attributes["mcp.negotiation.outcome"] == "refused" else REQUEST_KEYS
            attributes.update({k: v for k, v in parent["attributes"].items() if k in keys})
        found.append(attributes)
    return found
