"""The parity suite's conversations: each a server's command line, the requests a client sends
it in order with the answer each must get, and the `capability_negotiated` spans the server
must record: the same on mcp 2.x and mcp 1.x. `parity_runner` speaks them;
tests/adapters/mcp{1,2}/test_parity.py run them, one per SDK major.

`LEGACY` and `SERVED` stand for revisions of the SDK under test (see `parity_runner`); a
modern step's `unserved` is its answer from an SDK serving no modern revision, and a
modern conversation's `unserved_spans` what such an SDK records.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from mcp_negotiation.core.variants import CAPABILITY_SCOPE_META_KEY, scope_fingerprint
from support.servers.parity_server import APP_MIME, APPS, CHECKOUT, FEATURES, PLATFORM, RULE

LEGACY: Final = "<the newest legacy revision the SDK serves>"
SERVED: Final = "<the revisions the SDK serves, newest first>"
MODERN: Final = "2026-07-28"
CLIENT: Final = {"name": "parity-client", "version": "1"}
ACME: Final = {"name": "acme-desk", "version": "1.4.0"}
CAPS_APPS: Final = {"sampling": {}, "roots": {"listChanged": True},
                    "extensions": {APPS: {"mimeTypes": [APP_MIME, "text/plain"]}}}
"""A client `parity_server.RULE` names (with `--clients`)."""
UNSERVED: Final = {"error": {"code": -32022, "data": {"requested": MODERN, "supported": SERVED}}}


class Step(NamedTuple):
    says: str
    method: str
    params: Any
    expect: Any
    unserved: Any = UNSERVED


class Notify(NamedTuple):
    method: str


class Conversation(NamedTuple):
    name: str
    era: str
    steps: tuple[Step | Notify, ...]
    spans: tuple[Mapping[str, Any], ...]
    unserved_spans: tuple[Mapping[str, Any], ...] = ()
    args: tuple[str, ...] = ()
    diverges: Mapping[str, str] = {}
    """Per side (`mcp1`, `mcp2`), how it answers otherwise today: its test is a strict xfail."""


def initialize(revision: object, capabilities: object, client: object = CLIENT) -> dict[str, Any]:
    return {"protocolVersion": revision, "capabilities": capabilities, "clientInfo": client}


def envelope(capabilities: object, revision: str = MODERN) -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": revision, "io.modelcontextprotocol/clientInfo": CLIENT,
            "io.modelcontextprotocol/clientCapabilities": capabilities}


def call(name: str, arguments: Mapping[str, Any], meta: Any = None) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, **({} if meta is None else {"_meta": meta})}


def served(structured: Any) -> dict[str, Any]:
    return {"result": {"structuredContent": structured, "isError": False}}


def record(era: str, version: str, requested: str, outcome: str, caps: Any, *supported: str) -> Any:
    """The `negotiation` tool's answer: the caller's record, and `client_supports` of it."""
    return served({"era": era, "protocol_version": version, "requested_version": requested,
                   "transport": "stdio", "outcome": outcome, "capabilities_known": True,
                   "client_capabilities": caps, "client_info": CLIENT, "degraded": [], "withheld": [],
                   "headers": {}, "session_id": None, "ucp": None, "overrides": {}, "revoked": [],
                   "effective_capabilities": None, "extensions": {},
                   "supports": {name: name in supported for name in FEATURES}})


def overridden(answer: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The `negotiation` tool's `answer` with `fields` of its record as a rule made them."""
    answer["result"]["structuredContent"].update(fields)
    return answer


def refused(code: int, message: str, data: Any = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **({} if data is None else {"data": data})}}


def missing(capability: str) -> dict[str, Any]:
    data = {"requiredCapabilities": {capability: {}}}
    return refused(-32021, f"Missing required client capability: {capability}", data)


def listed(kind: str, *names: str, requiring: Mapping[str, str] = {},
           scope: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """A listing: its entries' names, with the capability an entry says it requires, and, for
    one scoped to its client, the fingerprint of `scope` (each name read: the client has it)."""
    meta = {name: {"_meta": {"io.modelcontextprotocol/requiredCapabilities": {needs: {}}}}
            for name, needs in requiring.items()}
    result: dict[str, Any] = {kind: [{"name": name, **meta.get(name, {})} for name in names]}
    if scope is not None:
        result["_meta"] = {CAPABILITY_SCOPE_META_KEY: scope_fingerprint(scope)}
    return {"result": result}


def span(method: str, outcome: str, requested: str | None, version: str | None = None,
         caps: list[str] | None = None, error: str | None = None, **more: Any) -> dict[str, Any]:
    """A negotiation span's attributes, with its request's (`caps`: an accepted one's)."""
    era = "modern" if requested == MODERN else "legacy"
    found = {"mcp.method.name": method, "mcp.negotiation.era": era, "mcp.negotiation.outcome": outcome,
             "mcp.negotiation.requested_version": requested, "mcp.protocol.version": version,
             "error.type": error, "network.transport": "pipe", **more}
    if caps is not None:
        found.update({"mcp.negotiation.capabilities_known": True, "mcp.negotiation.client_capabilities": caps,
                      "mcp.negotiation.degraded": [], "mcp.negotiation.withheld": []})
    return {key: value for key, value in found.items() if value is not None}


V, FULFILLMENT, CART = "2026-04-08", "dev.ucp.shopping.fulfillment", "dev.ucp.shopping.cart"
DISCOUNT, WRAP = "dev.ucp.shopping.discount", "dev.ucp.shopping.gift_wrap"
CAPS = {"sampling": {}, "roots": {"listChanged": True}}
DECLARED = ["roots", "roots.listChanged", "sampling"]
UCP = {"ucp-agent": {"profile": PLATFORM}}
CHECKED_OUT = served({"items": ["a"], "agreed": {
    "version": V, "capabilities": {CHECKOUT: V, FULFILLMENT: V},
    "dropped": {CART: "not_offered", DISCOUNT: "not_offered", WRAP: "no_common_version"},
}, "ucp": {"version": V, "capabilities": {CHECKOUT: [{"version": V}], FULFILLMENT: [{"version": V}]}}})
UCP_SPAN = {"ucp.version": V, "ucp.capabilities": [f"{CHECKOUT}@{V}", f"{FULFILLMENT}@{V}"],
            "ucp.dropped": [f"{CART}:not_offered", f"{DISCOUNT}:not_offered", f"{WRAP}:no_common_version"]}
ADVERTISED = {"version": V, "supported_versions": {"2026-01-23": "https://shop.example/.well-known/ucp/2026-01-23"},
              "capabilities": {
    CART: [{"version": V}], CHECKOUT: [{"version": "2026-01-23"}, {"version": V}],
    DISCOUNT: [{"extends": [CHECKOUT, CART], "version": V}],
    FULFILLMENT: [{"extends": [CHECKOUT], "version": V}],
    WRAP: [{"extends": [FULFILLMENT], "version": V}]}}
HANDSHAKE = {"result": {"protocolVersion": LEGACY, "capabilities": {
    "experimental": {"dev.ucp/profile": ADVERTISED}, "prompts": {"listChanged": False},
    "tools": {"listChanged": False}, "resources": {"listChanged": False, "subscribe": False}}}}
BARE = envelope({})
BAD_PARAMS = refused(-32602, "Invalid request parameters", "")
"""The SDK's own answer to a request it cannot validate."""
NOT_AN_OBJECT = refused(
    -32602, "Invalid params: io.modelcontextprotocol/clientCapabilities must be an object"
)
UNSERVED_METHODS = ("tools/call", "tools/call", "tools/list", "tools/call", "tools/call")

CONVERSATIONS: Final = (
    Conversation("legacy", "legacy", (
        Step("handshake, UCP advertised", "initialize", initialize(LEGACY, CAPS), HANDSHAKE),
        Notify("notifications/initialized"),
        Step("the record", "tools/call", call("negotiation", {}),
             record("legacy", LEGACY, LEGACY, "accepted", CAPS, *DECLARED)),
        Step("tools for a sampling client", "tools/list", {},
             listed("tools", "negotiation", "summarize", "create_checkout",
                    requiring={"summarize": "sampling"}, scope={"sampling": True})),
        Step("@requires met", "tools/call", call("summarize", {"text": "hi"}), served({"result": "hi"})),
        Step("templates scoped", "resources/templates/list", {},
             listed("resourceTemplates", scope={"elicitation": False})),
        Step("@requires unmet", "resources/read", {"uri": "notes://x"}, missing("elicitation")),
        Step("UCP without a profile", "tools/call", call("create_checkout", {"items": ["a"]}), refused(
            -32001, "UCP discovery failed", {"code": "invalid_profile_url",
            "content": f"{CHECKOUT} needs the platform's UCP profile; none was given"})),
        Step("UCP agreed", "tools/call", call("create_checkout", {"items": ["a"], "meta": UCP}), CHECKED_OUT),
        Step("malformed _meta", "tools/call", call("negotiation", {}, "bad"), BAD_PARAMS),
    ), (span("initialize", "accepted", LEGACY, LEGACY, DECLARED),
        span("tools/call", "accepted", LEGACY, LEGACY, DECLARED, **UCP_SPAN))),
    Conversation("counter-offer", "legacy", (
        Step("counter-offered", "initialize", initialize("2025-03-26", {}), HANDSHAKE),
        Step("the record", "tools/call", call("negotiation", {}),
             record("legacy", LEGACY, "2025-03-26", "counter_offered", {})),
        Step("tools scoped", "tools/list", {},
             listed("tools", "negotiation", "create_checkout", scope={"sampling": False})),
        Step("prompts scoped", "prompts/list", {}, listed("prompts", scope={"sampling": False})),
        Step("@requires unmet, before validation", "tools/call", call("summarize", {}), missing("sampling")),
    ), (span("initialize", "counter_offered", "2025-03-26", LEGACY, []),),
        args=("--min-revision", "2025-06-18")),
    Conversation("unknown-revision", "legacy", (
        Step("not a revision", "initialize", initialize(5, {}),
             refused(-32602, "Invalid params: protocolVersion must be a non-empty string")),
        Step("counter-offered", "initialize", initialize("zzz", {}), HANDSHAKE),
        Step("the record", "tools/call", call("negotiation", {}),
             record("legacy", LEGACY, "zzz", "counter_offered", {})),
    ), (span("initialize", "refused", None, error="-32602"),
        span("initialize", "counter_offered", "zzz", LEGACY, []))),
    Conversation("malformed-handshake", "legacy", (
        Step("capabilities not an object", "initialize", initialize(LEGACY, "nope"),
             refused(-32602, "Invalid params: capabilities must be an object")),
        Step("a handshake after it", "initialize", initialize(LEGACY, CAPS), HANDSHAKE),
    ), (span("initialize", "refused", LEGACY, error="-32602"),
        span("initialize", "accepted", LEGACY, LEGACY, DECLARED)), diverges={"mcp1": (
        "mcp 1.x validates the whole request before the shell sees it: -32602 'Invalid request "
        "parameters' (data '') from the SDK, and no span")}),
    Conversation("before-handshake", "legacy", (
        Step("a request before initialize", "tools/list", {}, BAD_PARAMS),
        Step("a handshake after it", "initialize", initialize(LEGACY, CAPS), HANDSHAKE),
    ), (span("initialize", "accepted", LEGACY, LEGACY, DECLARED),)),
    Conversation("required", "legacy", (
        Step("handshake refused", "initialize", initialize(LEGACY, {}), missing("elicitation")),
        Step("and what follows", "tools/list", {}, missing("elicitation")),
    ), (span("initialize", "refused", LEGACY, error="-32021"),
        span("tools/list", "refused", None, error="-32021")),
        args=("--require", "elicitation")),
    Conversation("modern", "modern", (
        Step("the record", "tools/call", call("negotiation", {}, envelope({"sampling": {}})),
             record("modern", MODERN, MODERN, "accepted", {"sampling": {}}, "sampling")),
        Step("its repeat", "tools/call", call("negotiation", {}, envelope({"sampling": {}})),
             record("modern", MODERN, MODERN, "accepted", {"sampling": {}}, "sampling")),
        Step("tools scoped", "tools/list", {"_meta": BARE},
             listed("tools", "negotiation", "create_checkout", scope={"sampling": False})),
        Step("@requires unmet, before validation", "tools/call", call("summarize", {}, BARE),
             missing("sampling")),
        Step("UCP agreed", "tools/call", call("create_checkout", {"items": ["a"], "meta": UCP}, BARE),
             CHECKED_OUT),
        Step("malformed capabilities", "tools/call", call("negotiation", {}, envelope("nope")), NOT_AN_OBJECT,
             NOT_AN_OBJECT),
    ), (span("tools/call", "accepted", MODERN, MODERN, ["sampling"]),
        span("tools/list", "accepted", MODERN, MODERN, []),  # (the repeat and the refusal inside: none)
        span("tools/call", "accepted", MODERN, MODERN, [], **UCP_SPAN),
        span("tools/call", "refused", MODERN, error="-32602")),
        (*(span(method, "refused", MODERN, error="-32022") for method in UNSERVED_METHODS),
         span("tools/call", "refused", MODERN, error="-32602"))),
    Conversation("clients", "legacy", (
        Step("handshake as a client a rule names", "initialize", initialize(LEGACY, CAPS_APPS, ACME),
             {"result": {**HANDSHAKE["result"], "capabilities": {**HANDSHAKE["result"]["capabilities"],
              "experimental": {**HANDSHAKE["result"]["capabilities"]["experimental"], APPS: {}}}}}),
        Notify("notifications/initialized"),
        Step("the record: sampling revoked by the rule", "tools/call", call("negotiation", {}), overridden(
            record("legacy", LEGACY, LEGACY, "accepted", CAPS_APPS, "roots", "roots.listChanged"),
            client_info=ACME, overrides={"sampling": RULE.id}, revoked=["sampling"],
            extensions={APPS: {"identifier": APPS, "settings": CAPS_APPS["extensions"][APPS]}})),
        Step("summarize listed as its variant, dashboard for an Apps client", "tools/list", {},
             listed("tools", "negotiation", "summarize", "dashboard", "create_checkout",
                    scope={"sampling": False})),
        Step("and served by it", "tools/call", call("summarize", {"text": "one two", "words": 1}),
             served({"result": "one"})),
        Step("an extension with the settings asked", "tools/call", call("dashboard", {}),
             served({"result": f"ui://dashboard ({APPS})"})),
    ), (span("initialize", "accepted", LEGACY, LEGACY, ["extensions", f"extensions/{APPS}", *DECLARED],
             **{"mcp.negotiation.overrides": [f"sampling revoked by {RULE.id}"],
                "mcp.negotiation.extensions": [f'{APPS} {{"mimeTypes":["{APP_MIME}","text/plain"]}}']}),),
        args=("--clients",)),
    Conversation("modern-unknown-revision", "modern", (
        Step("unknown revision", "tools/call", call("negotiation", {}, envelope({}, "zzz")),
             refused(-32022, "Unsupported protocol version", {"requested": "zzz", "supported": [MODERN]}),
             {"error": {"code": -32022, "data": {"requested": "zzz", "supported": SERVED}}}),
        Step("served after it", "tools/call", call("negotiation", {}, BARE),
             record("modern", MODERN, MODERN, "accepted", {})),
    ), (span("tools/call", "accepted", MODERN, MODERN, []),),
        # where the SDK serves no modern revision, the library refuses "zzz" (2.x's SDK does, untraced)
        (span("tools/call", "refused", "zzz", error="-32022", **{"mcp.negotiation.era": "unknown"}),
         span("tools/call", "refused", MODERN, error="-32022"))),
)
