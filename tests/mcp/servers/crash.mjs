// crash.mjs — a deliberately broken upstream for hutch's tests (stdio,
// NDJSON, no dependencies).  It initializes and lists its tools like any
// server, then exits with status 1, without answering, when its tool
// "boom" is called.  "alive" answers normally, to show a restart worked.
import { createInterface } from "node:readline";

const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
const tools = [
  { name: "boom", description: "Exits with status 1 instead of answering", inputSchema: { type: "object" } },
  { name: "alive", description: "Answers with this process's pid", inputSchema: { type: "object" } },
];

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
        capabilities: { tools: {} },
        serverInfo: { name: "crash", version: "1.0.0" },
      },
    });
  } else if (m.method === "tools/list") {
    send({ id: m.id, result: { tools } });
  } else if (m.method === "tools/call" && m.params?.name === "boom") {
    process.stderr.write("boom: exiting with status 1\n");
    process.exit(1);
  } else if (m.method === "tools/call") {
    send({ id: m.id, result: { content: [{ type: "text", text: `alive ${process.pid}` }] } });
  } else if (m.method === "ping") {
    send({ id: m.id, result: {} });
  } else if (m.method && m.id !== undefined) {
    send({ id: m.id, error: { code: -32601, message: `Method not found: ${m.method}` } });
  }
});
