// hang.mjs — a deliberately broken upstream for hutch's tests (stdio,
// NDJSON, no dependencies).  It initializes and lists its tools, but never
// answers a call of "wait".  "grow" answers, then adds a tool "grown" and
// sends notifications/tools/list_changed.
import { createInterface } from "node:readline";

const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
const tools = [
  { name: "wait", description: "Never answers", inputSchema: { type: "object" } },
  { name: "grow", description: "Adds the tool \"grown\"", inputSchema: { type: "object" } },
];
let cancelled = 0;

createInterface({ input: process.stdin }).on("line", (line) => {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (m.method === "initialize") {
    send({
      id: m.id,
      result: {
        protocolVersion: m.params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: { listChanged: true } },
        serverInfo: { name: "hang", version: "1.0.0" },
      },
    });
  } else if (m.method === "tools/list") {
    send({ id: m.id, result: { tools } });
  } else if (m.method === "notifications/cancelled") {
    cancelled++;
  } else if (m.method === "tools/call" && m.params?.name === "wait") {
    // never answer
  } else if (m.method === "tools/call" && m.params?.name === "grow") {
    if (!tools.some((t) => t.name === "grown"))
      tools.push({ name: "grown", description: "Added by grow", inputSchema: { type: "object" } });
    send({ id: m.id, result: { content: [{ type: "text", text: `cancelled ${cancelled}` }] } });
    send({ method: "notifications/tools/list_changed" });
  } else if (m.method === "ping") {
    send({ id: m.id, result: {} });
  } else if (m.method && m.id !== undefined) {
    send({ id: m.id, error: { code: -32601, message: `Method not found: ${m.method}` } });
  }
});
