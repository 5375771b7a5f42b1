"""The fixture server for the official MCP conformance suite, wrapped by `negotiate(...)`.

It implements the tools, resources, prompts and handlers the suite's server scenarios
call (`conformance list --server` names them), on the SDK's own `MCPServer`, and serves
streamable HTTP on 127.0.0.1. Every message goes through this library's middleware;
`test_missing_capability` is refused by `@requires("sampling")` (-32021), not by hand.

    python tests/support/servers/conformance_server.py PORT        # or 0: print the port chosen

With port 0 the bound port is printed on stdout as `PORT <n>` once the socket listens.
"""

from __future__ import annotations

import base64
import json
import socket
import sys
from typing import Annotated, Any

import mcp_types as types
import uvicorn
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

from mcp_negotiation import Policy, client_supports, negotiate, requires

IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
MODERN = "2026-07-28"
HINT = CacheHint(ttl_ms=60_000, scope="public")
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def _modern(ctx: Context) -> bool:
    return ctx.protocol_version == MODERN


def _elicit(message: str, properties: dict[str, Any], required: list[str]) -> types.ElicitRequest:
    return types.ElicitRequest.model_validate(
        {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": message,
                "requestedSchema": {"type": "object", "properties": properties, "required": required},
            },
        }
    )


def _sample(prompt: str, max_tokens: int = 100) -> types.CreateMessageRequest:
    return types.CreateMessageRequest.model_validate(
        {
            "method": "sampling/createMessage",
            "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                "maxTokens": max_tokens,
            },
        }
    )


def _roots() -> types.ListRootsRequest:
    return types.ListRootsRequest.model_validate({"method": "roots/list"})


def _ask(requests: dict[str, Any], state: dict[str, Any] | None = None) -> types.InputRequiredResult:
    return types.InputRequiredResult(
        input_requests=requests,
        request_state=json.dumps(state, separators=(",", ":")) if state is not None else None,
    )


def _response(ctx: Context, key: str) -> dict[str, Any] | None:
    answer = (ctx.input_responses or {}).get(key)
    if answer is None:
        return None
    dumped: dict[str, Any] = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _content(ctx: Context, key: str) -> dict[str, Any]:
    content = (_response(ctx, key) or {}).get("content")
    return content if isinstance(content, dict) else {}


def _state(ctx: Context) -> dict[str, Any]:
    try:
        state = json.loads(ctx.request_state) if ctx.request_state else {}
    except ValueError:
        return {}
    return state if isinstance(state, dict) else {}


class UserResponse(BaseModel):
    response: str = Field(description="User's response")


class Defaults(BaseModel):
    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active",
        description="User status",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    verified: bool = Field(default=True, description="Verification status")


class Enums(BaseModel):
    untitledSingle: str = Field(
        description="Simple enum without titles",
        json_schema_extra={"enum": ["option1", "option2", "option3"]},
    )
    titledSingle: str = Field(
        description="Enum with titled options",
        json_schema_extra={
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ]
        },
    )
    legacyEnum: str = Field(
        description="Legacy enum with enumNames",
        json_schema_extra={
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
    )
    untitledMulti: list[str] = Field(
        description="Multi-select without titles",
        min_length=1,
        max_length=3,
        json_schema_extra={"items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
    )
    titledMulti: list[str] = Field(
        description="Multi-select with titled options",
        min_length=1,
        max_length=3,
        json_schema_extra={
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            }
        },
    )


def _form(model: type[BaseModel]) -> tuple[dict[str, Any], list[str]]:
    schema = model.model_json_schema()
    return schema["properties"], schema.get("required", [])


def build(policy: Policy | None = None) -> MCPServer:
    """The conformance fixture, negotiated under `policy`."""
    server = MCPServer(
        "mcp-negotiation-conformance",
        version="1.0.0",
        cache_hints={
            method: HINT
            for method in (
                "tools/list",
                "prompts/list",
                "resources/list",
                "resources/templates/list",
                "resources/read",
            )
        },
    )
    server = negotiate(server, policy or Policy())
    _tools(server)
    _interactive_tools(server)
    _resources_and_prompts(server)
    _legacy_handlers(server)
    return server


def _tools(server: MCPServer) -> None:
    @server.tool(description="Tests simple text content response")
    def test_simple_text() -> str:
        return "This is a simple text response for testing."

    @server.tool(description="Tests image content response")
    def test_image_content() -> list[types.ImageContent]:
        return [types.ImageContent(type="image", data=IMAGE, mime_type="image/png")]

    @server.tool(description="Tests audio content response")
    def test_audio_content() -> list[types.AudioContent]:
        return [types.AudioContent(type="audio", data=AUDIO, mime_type="audio/wav")]

    @server.tool(description="Tests embedded resource content response")
    def test_embedded_resource() -> list[types.EmbeddedResource]:
        return [
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri="test://embedded-resource",
                    mime_type="text/plain",
                    text="This is an embedded resource content.",
                ),
            )
        ]

    @server.tool(description="Tests response with multiple content types (text, image, resource)")
    def test_multiple_content_types() -> list[
        types.TextContent | types.ImageContent | types.EmbeddedResource
    ]:
        return [
            _text("Multiple content types test:"),
            types.ImageContent(type="image", data=IMAGE, mime_type="image/png"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri="test://mixed-content-resource",
                    mime_type="application/json",
                    text='{"test": "data", "value": 123}',
                ),
            ),
        ]

    @server.tool(description="Tests tool that emits log messages during execution")
    async def test_tool_with_logging(ctx: Context) -> str:
        for step in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await ctx.info(step)
        return "Tool with logging executed successfully"

    @server.tool(description="Emits a log message (none without a requested log level)")
    async def test_logging_tool(ctx: Context) -> str:
        await ctx.info("test_logging_tool ran")
        return "logged"

    @server.tool(description="Tests tool that reports progress notifications")
    async def test_tool_with_progress(ctx: Context) -> str:
        for step in (0, 50, 100):
            await ctx.report_progress(progress=step, total=100, message=f"Completed step {step} of 100")
        meta = ctx.request_context.meta
        return str(meta.get("progressToken", 0) if isinstance(meta, dict) else 0)

    @server.tool(description="Tests error response handling")
    def test_error_handling() -> str:
        raise RuntimeError("This tool intentionally returns an error for testing")

    @server.tool(description="Needs sampling: refused with -32021 by mcp_negotiation when undeclared")
    @requires("sampling")
    async def test_missing_capability(ctx: Context) -> str:
        return "the client declared sampling"

    @server.tool(description="Tests SSE polling by closing the stream mid-call")
    async def test_reconnection(ctx: Context) -> str:
        await ctx.info("Before disconnect")
        await ctx.close_sse_stream()
        await ctx.info("After reconnect")
        return "Reconnection test completed"

    @server.tool(description="Tool with JSON Schema 2020-12 features")
    def json_schema_2020_12_tool(
        name: str | None = None,
        address: dict[str, Any] | None = None,
        contactMethod: str | None = None,
        phone: str | None = None,
        email: str | None = None,
    ) -> str:
        return json.dumps({"name": name, "address": address, "phone": phone, "email": email})

    # The advertised schema is the suite's own, verbatim (the SDK derives a simpler one).
    server._tool_manager.get_tool("json_schema_2020_12_tool").parameters = SCHEMA_2020_12  # type: ignore[union-attr]

    @server.tool(description="Tests custom MCP parameter headers (x-mcp-header)")
    def custom_header_tool(
        header_value: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Test-Value"})],
    ) -> str:
        return header_value

    @server.tool(description="Changes the tool list (notifies listeners)")
    async def test_trigger_tool_change(ctx: Context) -> str:
        await ctx.notify_tools_changed()
        return "tools changed"

    @server.tool(description="Changes the prompt list (notifies listeners)")
    async def test_trigger_prompt_change(ctx: Context) -> str:
        await ctx.notify_prompts_changed()
        return "prompts changed"


def _interactive_tools(server: MCPServer) -> None:
    @server.tool(description="Tests server-initiated sampling (LLM completion request)")
    async def test_sampling(prompt: str, ctx: Context) -> Any:
        if _modern(ctx):
            answer = _content(ctx, "sample")
            if answer:
                return f"LLM response: {answer.get('text', '')}"
            return _ask({"sample": _sample(prompt)})
        result = await ctx.session.create_message(
            messages=[types.SamplingMessage(role="user", content=_text(prompt))],
            max_tokens=100,
            related_request_id=ctx.request_id,
        )
        text = getattr(result.content, "text", "No response")
        return f"LLM response: {text}"

    async def elicited(ctx: Context, key: str, message: str, model: type[BaseModel], prefix: str) -> Any:
        if _modern(ctx):
            answer = _response(ctx, key)
            if answer is not None:
                content = json.dumps(answer.get("content") or {}, separators=(",", ":"))
                return f"{prefix}: action={answer.get('action')}, content={content}"
            return _ask({key: _elicit(message, *_form(model))})
        result = await ctx.elicit(message=message, schema=model)
        content = result.data.model_dump_json() if result.action == "accept" else "{}"
        return f"{prefix}: action={result.action}, content={content}"

    @server.tool(description="Tests server-initiated elicitation (user input request)")
    async def test_elicitation(message: str, ctx: Context) -> Any:
        return await elicited(ctx, "user_response", message, UserResponse, "User response")

    @server.tool(description="Tests elicitation with default values for all primitive types (SEP-1034)")
    async def test_elicitation_sep1034_defaults(ctx: Context) -> Any:
        return await elicited(
            ctx, "defaults", "Please provide user information", Defaults, "Elicitation result"
        )

    @server.tool(description="Tests elicitation with enum schema variations (SEP-1330)")
    async def test_elicitation_sep1330_enums(ctx: Context) -> Any:
        return await elicited(
            ctx,
            "enums",
            "Please select values using different enum schema types",
            Enums,
            "Elicitation completed",
        )

    @server.tool(description="Asks for input on the request's own stream (modern: an input_required result)")
    async def test_streaming_elicitation(ctx: Context) -> Any:
        return await elicited(ctx, "user_response", "Streaming elicitation", UserResponse, "User response")

    name_form = ({"name": {"type": "string"}}, ["name"])

    @server.tool(description="MRTR: asks for the caller's name via an in-band elicitation request")
    async def test_input_required_result_elicitation(ctx: Context) -> Any:
        content = _content(ctx, "user_name")
        if "name" in content:
            return f"Hello, {content['name']}!"
        return _ask({"user_name": _elicit("What is your name?", *name_form)})

    @server.tool(description="MRTR: asks the client to sample")
    async def test_input_required_result_sampling(ctx: Context) -> Any:
        answer = _response(ctx, "sample_request")
        if answer is not None:
            content = answer.get("content")
            text = content.get("text", "no response") if isinstance(content, dict) else "no response"
            return f"Sampling result: {text}"
        return _ask({"sample_request": _sample("What is the capital of France?")})

    @server.tool(description="MRTR: asks the client for its roots")
    async def test_input_required_result_list_roots(ctx: Context) -> Any:
        answer = _response(ctx, "roots_request")
        if answer is not None:
            return f"Found {len(answer.get('roots') or [])} root(s)"
        return _ask({"roots_request": _roots()})

    @server.tool(description="MRTR: round-trips request state")
    async def test_input_required_result_request_state(ctx: Context) -> Any:
        if _state(ctx).get("kind") == "request-state" and _response(ctx, "confirm") is not None:
            return "state-ok: requestState validated"
        return _ask(
            {"confirm": _elicit("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])},
            {"kind": "request-state"},
        )

    @server.tool(description="MRTR: several inputs at once")
    async def test_input_required_result_multiple_inputs(ctx: Context) -> Any:
        keys = ("user_name", "greeting", "client_roots")
        if all(_response(ctx, key) is not None for key in keys):
            return "Multiple inputs completed"
        return _ask(
            {
                "user_name": _elicit("What is your name?", *name_form),
                "greeting": _sample("Generate a greeting", 50),
                "client_roots": _roots(),
            },
            {"kind": "multiple-inputs"},
        )

    @server.tool(description="MRTR: two rounds")
    async def test_input_required_result_multi_round(ctx: Context) -> Any:
        round_ = _state(ctx).get("round")
        if round_ == 2 and _response(ctx, "step2") is not None:
            return "Multi-round complete"
        if round_ == 1 and _response(ctx, "step1") is not None:
            color = ({"color": {"type": "string"}}, ["color"])
            return _ask({"step2": _elicit("Step 2: What is your favorite color?", *color)}, {"round": 2})
        return _ask({"step1": _elicit("Step 1: What is your name?", *name_form)}, {"round": 1})

    @server.tool(description="MRTR: request state integrity")
    async def test_input_required_result_tampered_state(ctx: Context) -> Any:
        if _state(ctx).get("kind") == "tamper-test" and _response(ctx, "confirm") is not None:
            return "integrity-ok: state verified"
        return _ask(
            {"confirm": _elicit("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])},
            {"kind": "tamper-test"},
        )

    @server.tool(description="MRTR: asks only for what the client declared (client_supports)")
    async def test_input_required_result_capabilities(ctx: Context) -> Any:
        if ctx.input_responses:
            return f"capabilities-ok: received {','.join(sorted(ctx.input_responses))}"
        requests: dict[str, Any] = {}
        if client_supports(ctx, "elicitation"):
            requests["elicit_input"] = _elicit("Elicitation input", {"value": {"type": "string"}}, ["value"])
        if client_supports(ctx, "sampling"):
            requests["sample_input"] = _sample("Sample request", 50)
        if not requests:
            return "No supported capabilities declared"
        return _ask(requests, {"kind": "capabilities-test"})


def _resources_and_prompts(server: MCPServer) -> None:
    @server.resource(
        "test://static-text",
        name="static-text",
        mime_type="text/plain",
        description="A static text resource for testing",
    )
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource(
        "test://static-binary",
        name="static-binary",
        mime_type="image/png",
        description="A static binary resource (image) for testing",
    )
    def static_binary() -> bytes:
        return base64.b64decode(IMAGE)

    @server.resource(
        "test://template/{id}/data",
        name="template",
        mime_type="application/json",
        description="A resource template with parameter substitution",
    )
    def template(id: str) -> str:
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.resource(
        "test://watched-resource",
        name="watched-resource",
        mime_type="text/plain",
        description="A resource that can be subscribed to for updates",
    )
    def watched() -> str:
        return "Watched resource content"

    @server.prompt(description="A simple prompt without arguments")
    def test_simple_prompt() -> list[UserMessage]:
        return [UserMessage(role="user", content=_text("This is a simple prompt for testing."))]

    @server.prompt(description="A prompt with required arguments")
    def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
        return [
            UserMessage(role="user", content=_text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))
        ]

    @server.prompt(description="A prompt that includes an embedded resource")
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
        resource = types.TextResourceContents(
            uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
        )
        return [
            UserMessage(role="user", content=types.EmbeddedResource(type="resource", resource=resource)),
            UserMessage(role="user", content=_text("Please process the embedded resource above.")),
        ]

    @server.prompt(description="A prompt that includes image content")
    def test_prompt_with_image() -> list[UserMessage]:
        return [
            UserMessage(
                role="user", content=types.ImageContent(type="image", data=IMAGE, mime_type="image/png")
            ),
            UserMessage(role="user", content=_text("Please analyze the image above.")),
        ]

    @server.prompt(description="A prompt that needs input first (MRTR on prompts/get)")
    async def test_input_required_result_prompt(ctx: Context) -> Any:
        content = _content(ctx, "user_context")
        if "context" in content:
            return [UserMessage(role="user", content=_text(f"Prompt with context: {content['context']}"))]
        return _ask(
            {
                "user_context": _elicit(
                    "What context should the prompt use?", {"context": {"type": "string"}}, ["context"]
                )
            }
        )

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> types.Completion:
        return types.Completion(values=[], total=0, has_more=False)


def _legacy_handlers(server: MCPServer) -> None:
    """logging/setLevel and resource subscriptions: legacy-era methods, -32601 on 2026-07-28."""
    lowlevel = server._lowlevel_server
    subscribed: set[str] = set()

    def legacy_only(ctx: ServerRequestContext[Any, Any]) -> None:
        if ctx.protocol_version == MODERN:
            raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found")

    async def set_level(
        ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        legacy_only(ctx)
        return types.EmptyResult()

    async def subscribe(
        ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        legacy_only(ctx)
        subscribed.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        legacy_only(ctx)
        subscribed.discard(str(params.uri))
        return types.EmptyResult()

    lowlevel.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)


class MemoryEventStore(EventStore):
    """Resumable SSE streams (priming events, replay after `Last-Event-ID`), in memory."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, Any]] = []

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = str(len(self._events) + 1)
        self._events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream = next((s for s, e, _ in self._events if e == last_event_id), None)
        if stream is None:
            return None
        for stream_id, event_id, message in self._events:
            if stream_id == stream and int(event_id) > int(last_event_id) and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


def serve(port: int) -> None:
    # IPPROTO_TCP lets asyncio switch Nagle off (TCP_NODELAY) on each connection; without it
    # a keep-alive request waits for the client's delayed ACK, 40 ms, before its answer is sent.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    app = build().streamable_http_app(event_store=MemoryEventStore(), retry_interval=100)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).run(sockets=[sock])


if __name__ == "__main__":
    serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
