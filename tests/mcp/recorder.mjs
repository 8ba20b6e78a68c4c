// recorder.mjs — an upstream MCP server for hutch's tests, built on the
// official SDK's low-level Server (stdio), which does no argument
// validation of its own.  It counts every tools/call that reaches it, so a
// test can prove that hutch refused a call *before* sending it upstream.
//   strict {n: integer ≥ 1, tag?: "a"|"b"}, additionalProperties false → {n, tag}
//   calls  {}          → {count, last}: tools/call requests received so far
//                        (last's args only by their size past 64 KiB: a
//                        call of a million values must not come back)
//   slow   {ms}        → answers after ms milliseconds (concurrency)
//   fail   {message}   → a result with isError and the message
//   throw  {message}   → a JSON-RPC error with the message
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";

const obj = (properties, required = [], extra = {}) => ({ type: "object", properties, required, ...extra });
const tools = [
  {
    name: "strict",
    description: "Echoes n and tag; its schema is strict (integer n ≥ 1, no other keys)",
    inputSchema: obj(
      { n: { type: "integer", minimum: 1 }, tag: { type: "string", enum: ["a", "b"] } },
      ["n"],
      { additionalProperties: false },
    ),
  },
  { name: "calls", description: "How many tools/call requests reached this server", inputSchema: obj({}) },
  { name: "slow", description: "Answers after ms milliseconds", inputSchema: obj({ ms: { type: "integer" } }, ["ms"]) },
  { name: "fail", description: "Fails with isError", inputSchema: obj({ message: { type: "string" } }, ["message"]) },
  { name: "throw", description: "Fails with a JSON-RPC error", inputSchema: obj({ message: { type: "string" } }, ["message"]) },
];

let count = 0;
let last = null;
const server = new Server({ name: "recorder", version: "1.0.0" }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
server.setRequestHandler(CallToolRequestSchema, async (req) => {
  const { name, arguments: args = {} } = req.params;
  if (name !== "calls") {
    const size = JSON.stringify(args).length;
    count++;
    last = { name, args: size > 65536 ? { bytes: size } : args };
  }
  const json = (v) => ({ content: [{ type: "text", text: JSON.stringify(v) }], structuredContent: v });
  switch (name) {
    case "strict":
      return json({ n: args.n, tag: args.tag ?? null });
    case "calls":
      return json({ count, last });
    case "slow": {
      // start and end (ms since the epoch) say when this call was in
      // progress here: a test checks calls overlapped, not how fast.
      const start = Date.now();
      await new Promise((r) => setTimeout(r, Number(args.ms) || 0));
      return json({ slept: Number(args.ms) || 0, start, end: Date.now() });
    }
    case "fail":
      return { content: [{ type: "text", text: String(args.message) }], isError: true };
    case "throw":
      throw new McpError(-32000, String(args.message));
    default:
      throw new McpError(-32602, `Unknown tool: ${name}`);
  }
});
await server.connect(new StdioServerTransport());
