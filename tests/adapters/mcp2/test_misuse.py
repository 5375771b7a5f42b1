"""A server author's slips: each is caught where it is made, with an error that says what to write.

Accepted, each would fail later and far away: on every request, as a logged error, or
as a refusal that blames the client.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from mcp_negotiation import (
    Policy,
    client_supports,
    instrument,
    negotiate,
    negotiated,
    requires,
    requires_ucp,
    uninstrument,
)
from mcp_negotiation.adapters.mcp2.middleware import NegotiationMiddleware
from mcp_negotiation.adapters.mcp2.seams import middleware_list
from mcp_negotiation.core import client_log, revisions
from mcp_negotiation.core.engine import Engine
from mcp_negotiation.core.errors import Refusal
from mcp_negotiation.core.facts import PlainFacts
from mcp_negotiation.core.negotiation import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY, Negotiator
from mcp_negotiation.ucp import CapabilityEntry, Profile, negotiate_capabilities

pytestmark = pytest.mark.anyio


def test_negotiate_takes_a_policy_not_a_mapping() -> None:
    with pytest.raises(
        TypeError, match=r"negotiate\(server, policy\) takes a mcp_negotiation\.Policy, not dict"
    ):
        negotiate(MCPServer("s"), {"min_revision": "2025-06-18"})  # type: ignore[arg-type]


def _negotiated(server: object) -> bool:
    return any(isinstance(m, NegotiationMiddleware) for m in middleware_list(server) or [])


def test_instrument_with_a_server_where_the_policy_goes_instruments_nothing() -> None:
    existing = MCPServer("existing")
    with pytest.raises(TypeError, match=r"instrument\(policy, \*servers\) takes a mcp_negotiation\.Policy"):
        instrument(existing)  # type: ignore[arg-type]
    try:
        assert not _negotiated(MCPServer("built after"))  # nothing was instrumented
    finally:
        uninstrument()


def test_decorators_written_without_their_parentheses() -> None:
    def build() -> MCPServer:
        return MCPServer("s")

    with pytest.raises(TypeError, match=r"@negotiated\(\)"):
        negotiated(build)  # type: ignore[arg-type]

    async def tool() -> None: ...

    with pytest.raises(TypeError, match=r"@requires\('name', \.\.\.\)"):
        requires(tool)  # type: ignore[arg-type]


def test_requires_with_no_names_is_a_mistake_not_a_pass() -> None:
    with pytest.raises(ValueError, match=r"requires\(\) needs one or more capability names"):
        requires()


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_requires_ucp_without_a_ucp_policy_blames_the_server(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = negotiate(MCPServer("shop"), Policy())

    @server.tool()
    @requires_ucp("dev.ucp.shopping.checkout")
    async def create_checkout(ctx: Context) -> dict[str, Any]:
        return {}

    arguments = {"meta": {"ucp-agent": {"profile": "https://platform.example/profile.json"}}}
    with caplog.at_level(logging.ERROR, logger="mcp_negotiation"):
        async with Client(server, mode=mode) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("create_checkout", arguments)
    assert refused.value.error.code == -32603
    assert refused.value.error.message == "this server is not configured for UCP"
    assert any("has no ucp=UcpPolicy" in r.getMessage() for r in caplog.records)


# -- what a caller keeps cannot change a record, a refusal or a profile afterwards --------------


def test_a_callers_headers_cannot_rewrite_a_memoised_record() -> None:
    engine = Engine(Policy())
    headers = {"mcp-protocol-version": "2026-07-28"}
    meta = {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}}

    def served(sent: dict[str, str]) -> Any:
        facts = PlainFacts("tools/call", {"_meta": meta}, "2026-07-28", transport="http", headers=sent)
        return engine.decide(facts)

    known = served(headers).known
    headers["mcp-protocol-version"] = "CHANGED"
    assert known.record.headers == {"mcp-protocol-version": "2026-07-28"}
    assert served({"mcp-protocol-version": "2026-07-28"}).known is known


def test_an_amended_jsonrpc_error_leaves_the_refusal_alone() -> None:
    refusal = Refusal(-32021, "missing", {"requiredCapabilities": {"sampling": {}}, "supported": ["a"]})
    error = refusal.to_jsonrpc_error()
    error["data"]["requiredCapabilities"]["sampling"] = "MUTATED"
    error["data"]["supported"].append("b")
    assert refusal.data == {"requiredCapabilities": {"sampling": {}}, "supported": ["a"]}


def test_a_profile_built_directly_negotiates_like_one_read_from_json() -> None:
    checkout, fulfillment = "dev.ucp.shopping.checkout", "dev.ucp.shopping.fulfillment"
    config = {"regions": ["eu"]}
    entry = CapabilityEntry("2026-04-08", extends=checkout, config=config)  # type: ignore[arg-type]
    business = Profile("2026-04-08", {checkout: [CapabilityEntry("2026-04-08")], fulfillment: [entry]})  # type: ignore[dict-item]
    config["regions"].append("us")
    assert entry.extends == (checkout,)
    assert entry.config == {"regions": ("eu",)}
    assert isinstance(business.capabilities[fulfillment], tuple)
    agreement = negotiate_capabilities(business, business)
    assert agreement.capabilities == {checkout: "2026-04-08", fulfillment: "2026-04-08"}


# -- names and decorators: each slip caught where it is made, with the fix in the message -------


MYPY_SNIPPET = """\
from mcp_negotiation import Policy, client_supports, requires

ctx: object = None
name: str = "chosen at run time"
client_supports(ctx, "elicitaton")  # line 5: misspelt
client_supports(ctx, "elicitation")
client_supports(ctx, "experimental.foo")
client_supports(ctx, "io.modelcontextprotocol/ui")
client_supports(ctx, "structured_output")
client_supports(ctx, name)
requires("sampling", "tools")  # line 11: a server feature
Policy(required_capabilities=("sampling.tool",), withhold={"roots.list_changed"})  # line 12: two
"""


def test_mypy_with_the_plugin_reports_a_misspelt_name_and_accepts_the_open_ones(tmp_path: Path) -> None:
    (tmp_path / "snippet.py").write_text(MYPY_SNIPPET, encoding="utf-8")
    (tmp_path / "mypy.ini").write_text(
        "[mypy]\nstrict = True\nplugins = mcp_negotiation.tools.mypy_plugin\n", encoding="utf-8"
    )
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", "cache", "snippet.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = [line for line in run.stdout.splitlines() if ": error: " in line]
    assert [line.split(":")[1] for line in errors] == ["5", "11", "12", "12"], run.stdout + run.stderr
    assert all(line.endswith("[mcp-feature-name]") for line in errors)
    assert "unknown feature in client_supports(): 'elicitaton'; did you mean 'elicitation'?" in errors[0]
    assert "'tools' in requires() is a server feature, not a client capability" in errors[1]
    assert "did you mean 'sampling.tools'?" in errors[2]
    assert "did you mean 'roots.listChanged'?" in errors[3]


def test_the_literal_names_are_the_feature_table() -> None:
    assert get_args(revisions.ClientFeature) == revisions.feature_names("client")
    assert get_args(revisions.ServerFeature) == revisions.feature_names("server")


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("elicitaton", "elicitation"),
        ("Elicitation", "elicitation"),
        ("sampling.tool", "sampling.tools"),
        ("roots.list_changed", "roots.listChanged"),
    ],
)
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_misspelt_name_answers_false_and_is_logged_once_with_the_name_meant(
    typo: str, meant: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = negotiate(MCPServer("typo"), Policy())

    @server.tool()
    async def ask(ctx: Context) -> dict[str, bool]:
        return {"typo": client_supports(ctx, typo), "meant": client_supports(ctx, meant)}

    async def sample(ctx: Any, params: Any) -> Any:
        raise AssertionError("never called")

    with caplog.at_level(logging.DEBUG, logger="mcp_negotiation"):
        async with Client(server, mode=mode, sampling_callback=sample, elicitation_callback=sample) as client:
            for _ in range(2):
                answer = await client.call_tool("ask", {})
                assert answer.structured_content is not None
                assert answer.structured_content["typo"] is False
    logged = [r.getMessage() for r in caplog.records if repr(typo) in r.getMessage()]
    assert len(logged) == 1, logged  # once per name, however often it is asked
    assert f"did you mean {meant!r}?" in logged[0]
    assert caplog.records[0].levelno == logging.WARNING


def test_names_logged_are_bounded_whoever_chooses_them(caplog: pytest.LogCaptureFixture) -> None:
    record = Negotiator(Policy()).request(
        {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}}, transport="memory"
    )
    with caplog.at_level(logging.WARNING, logger="mcp_negotiation"):
        for i in range(1_000):
            assert record.supports(f"bogus-{i}" * 50) is False
    assert len(caplog.records) == client_log.MAX_KEYS
    assert all(len(r.getMessage()) < 2_000 for r in caplog.records)


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: requires("elicitaton"), r"requires\(\): 'elicitaton'; did you mean 'elicitation'\?"),
        (lambda: Policy(required_capabilities=["Sampling"]), r"did you mean 'sampling'\?"),
        (lambda: Policy(withhold={"sampling.tool"}), r"withhold: 'sampling.tool'; did you mean"),
        (lambda: Policy(withhold={"tools"}), r"'tools' in withhold is a server capability"),
    ],
)
def test_configuration_errors_name_the_nearest_and_the_valid_names(build: Any, says: str) -> None:
    with pytest.raises(ValueError, match=says) as raised:
        build()
    if "did you mean" in says:
        assert "known: roots, roots.listChanged, sampling" in str(raised.value)
        assert "`vendor/name`, or `experimental.NAME`" in str(raised.value)


def test_client_supports_with_its_arguments_swapped_raises() -> None:
    ctx = object()  # what a handler holds; raised before it is looked at, inside a request or not
    with pytest.raises(TypeError, match=r"write client_supports\(ctx, 'sampling'\): the context first"):
        client_supports("sampling", ctx)  # type: ignore[arg-type]
    assert client_supports(ctx, "sampling") is False  # the right order, outside a request


def test_requires_above_the_tool_decorator_raises_at_once() -> None:
    server = negotiate(MCPServer("order"), Policy())
    with pytest.raises(
        TypeError, match=r"@requires\(\.\.\.\) is above the decorator that registered summarize "
    ):

        @requires("sampling")
        @server.tool()
        async def summarize(text: str) -> str:
            return text

    @server.tool()
    @requires("sampling")  # the right order still works
    async def condense(text: str) -> str:
        return text


def test_negotiate_after_requires_above_the_tool_decorator_raises() -> None:
    server = MCPServer("order-later")

    @requires("sampling")
    @server.tool()
    async def summarize(text: str) -> str:
        return text

    with pytest.raises(TypeError, match=r"above the decorator that registered summarize \(@server\.tool\(\)"):
        negotiate(server, Policy())


def test_requires_on_what_is_not_a_function_raises() -> None:
    with pytest.raises(TypeError, match=r"requires\(\) decorates a function, not str: write @requires"):
        requires("sampling")("summarize")  # type: ignore[type-var]


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (lambda: MCPServer, r"not the class MCPServer: write negotiate\(MCPServer\('name'\), policy\)"),
        (lambda: None, r"not None: does the function that builds the server return it\?"),
        (lambda: "shop", r"not the string 'shop': write negotiate\(MCPServer\('shop'\), policy\)"),
        (
            lambda: MCPServer("x").streamable_http_app(),
            r"not an ASGI app \(Starlette\): .* wrap an app you mount with"
            r" record_refusals_asgi\(app, policy\)",
        ),
        (lambda: object(), r"not object$"),
    ],
    ids=["class", "None", "str", "asgi-app", "object"],
)
def test_negotiate_given_no_server_raises_naming_what_it_takes(given: Any, says: str) -> None:
    with pytest.raises(TypeError, match=r"negotiate\(\) takes an MCPServer, a lowlevel mcp\.server"):
        negotiate(given(), Policy())
    with pytest.raises(TypeError, match=says):
        negotiate(given())
    with pytest.raises(TypeError, match=says):
        instrument(Policy(), given())
    assert not _negotiated(MCPServer("built after"))  # nothing was instrumented


def test_requires_above_the_prompt_decorator_raises_and_below_it_serves() -> None:
    server = negotiate(MCPServer("prompts"), Policy())
    with pytest.raises(TypeError, match=r"above the decorator that registered greet"):

        @requires("sampling")
        @server.prompt()
        def greet() -> str:
            return "hi"

    @server.prompt()
    @requires("sampling")
    def welcome() -> str:
        return "hi"
