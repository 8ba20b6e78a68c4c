// modern.mjs — an upstream built on the official SDK v2 server
// (@modelcontextprotocol/server 2.4.0) that speaks only MCP 2026-07-28: a
// 2025-era initialize is refused.  `node modern.mjs` serves stdio;
// `node modern.mjs http` serves streamable HTTP on 127.0.0.1, printing
// "listening PORT" on stdout.  Tools:
//   whoami  what the server saw of the request: its protocol version and
//           client info (from _meta), and over HTTP the Mcp-Method and
//           Mcp-Name headers;
//   add     a + b;
// MODERN_SLOW_START_MS=N (stdio): reads nothing for N ms first.
//   ask     answers input_required (a question for the user: "Proceed?",
//           one boolean ok), then, called again with the answer, says it.
import http from "node:http";
import { McpServer, createMcpHandler, fromJsonSchema, inputRequired } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";

const text = (v) => ({ content: [{ type: "text", text: typeof v === "string" ? v : JSON.stringify(v) }] });

function factory() {
  const s = new McpServer({ name: "modern", version: "2.4.0-test" });
  s.registerTool("whoami", { description: "What the server saw of this request.", inputSchema: fromJsonSchema({ type: "object", properties: {} }) },
    async (_args, ctx) => {
      const env = ctx.mcpReq.envelope ?? {};
      const h = ctx.http?.req?.headers;
      return text({
        envelope: env,
        mcpMethod: h?.get("mcp-method") ?? null,
        mcpName: h?.get("mcp-name") ?? null,
        sessionId: h?.get("mcp-session-id") ?? null,
      });
    });
  s.registerTool("add", { description: "Add two numbers.", inputSchema: fromJsonSchema({ type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] }) },
    async ({ a, b }) => text(String(a + b)));
  s.registerTool("ask", { description: "Asks the user first.", inputSchema: fromJsonSchema({ type: "object", properties: {} }) },
    async (_args, ctx) => {
      const answer = ctx.mcpReq.inputResponses?.ok;
      if (answer) return text(`answered: ${JSON.stringify(answer)}`);
      return inputRequired({ inputRequests: { ok: { method: "elicitation/create", params: { mode: "form", message: "Proceed?", requestedSchema: { type: "object", properties: { ok: { type: "boolean" } } } } } } });
    });
  return s;
}

if (process.argv[2] === "http") {
  const handler = createMcpHandler(factory, { legacy: "reject" });
  const srv = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
    const body = req.method === "POST" || req.method === "DELETE" ? Buffer.concat(chunks) : undefined;
    const r = await handler.fetch(new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers, body }));
    res.writeHead(r.status, Object.fromEntries(r.headers));
    if (r.body) for await (const c of r.body) res.write(c);
    res.end();
  });
  srv.listen(0, "127.0.0.1", () => process.stdout.write(`listening ${srv.address().port}\n`));
} else {
  // MODERN_SLOW_START_MS: read nothing for that long first, as a server
  // slow to start on a busy machine (its first requests wait in the pipe).
  const slow = Number(process.env.MODERN_SLOW_START_MS || 0);
  if (slow > 0) await new Promise((r) => setTimeout(r, slow));
  serveStdio(factory, { legacy: "reject" });
}
