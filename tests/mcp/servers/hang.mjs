// hang.mjs — a deliberately broken upstream for hutch's tests (stdio,
// NDJSON, no dependencies).  It initializes and lists its tools, but never
// answers a call of "wait".  "grow" answers, then adds a tool "grown" and
// sends notifications/tools/list_changed.  "deaf" answers, then never reads
// its stdin again; "shut" closes its stdin, then answers.
import { closeSync } from "node:fs";
import { createInterface } from "node:readline";

const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
const tools = [
  { name: "wait", description: "Never answers", inputSchema: { type: "object" } },
  { name: "grow", description: "Adds the tool \"grown\"", inputSchema: { type: "object" } },
  { name: "deaf", description: "Stops reading stdin", inputSchema: { type: "object" } },
  { name: "shut", description: "Closes stdin", inputSchema: { type: "object" } },
];
let cancelled = 0;

const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
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
  } else if (m.method === "tools/call" && m.params?.name === "deaf") {
    setInterval(() => {}, 1000); // stay alive without stdin
    rl.pause();
    process.stdin.pause();
    send({ id: m.id, result: { content: [{ type: "text", text: "deaf" }] } });
  } else if (m.method === "tools/call" && m.params?.name === "shut") {
    setInterval(() => {}, 1000);
    rl.close();
    process.stdin.destroy();
    closeSync(0); // node keeps fd 0 open past destroy()
    send({ id: m.id, result: { content: [{ type: "text", text: "shut" }] } });
  } else if (m.method === "ping") {
    send({ id: m.id, result: {} });
  } else if (m.method && m.id !== undefined) {
    send({ id: m.id, error: { code: -32601, message: `Method not found: ${m.method}` } });
  }
});
