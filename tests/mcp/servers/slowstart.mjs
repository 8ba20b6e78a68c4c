// slowstart.mjs — a deliberately slow upstream for hutch's tests (stdio,
// NDJSON, no dependencies): it answers initialize only after
// SLOWSTART_MS milliseconds (default 2000), or, with SLOWSTART_FILE, once
// that file exists (a test decides when it comes up).  Other requests get
// -32601, as a 2025-era server answers 2026's server/discover.
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";

const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
const delay = Number(process.env.SLOWSTART_MS ?? 2000);

createInterface({ input: process.stdin }).on("line", (line) => {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (m.method === "initialize") {
    const gate = process.env.SLOWSTART_FILE;
    const later = (f) => {
      if (!gate) return setTimeout(f, delay);
      const poll = setInterval(() => {
        if (existsSync(gate)) {
          clearInterval(poll);
          f();
        }
      }, 50);
    };
    later(
      () =>
        send({
          id: m.id,
          result: {
            protocolVersion: m.params?.protocolVersion ?? "2025-06-18",
            capabilities: { tools: {} },
            serverInfo: { name: "slowstart", version: "1.0.0" },
          },
        }),
    );
  } else if (m.method === "tools/list") {
    send({ id: m.id, result: { tools: [{ name: "slow", inputSchema: { type: "object" } }] } });
  } else if (m.method === "tools/call") {
    send({ id: m.id, result: { content: [{ type: "text", text: "finally" }] } });
  } else if (m.method && m.id !== undefined && !process.env.SLOWSTART_IGNORE_UNKNOWN) {
    // SLOWSTART_IGNORE_UNKNOWN: a server that never answers what it does not
    // know (2026's server/discover probe), which hutch must outwait.
    send({ id: m.id, error: { code: -32601, message: `Method not found: ${m.method}` } });
  }
});
