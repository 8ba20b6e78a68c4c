// garbage.mjs — a deliberately broken upstream for hutch's tests (stdio,
// NDJSON, no dependencies).  Around a normal handshake it sends lines that
// are not JSON, a response to an id nobody asked for, and requests of its
// own (ping, and one hutch does not serve).  Its tools misbehave:
//   junk          garbage lines, then 17 MiB without a newline, then exits
//   bad-result    answers with a result that is not an object
//   only-garbage  answers with garbage lines only
//   replies       answers normally with what hutch replied to its requests
import { createInterface } from "node:readline";

const out = (s) => process.stdout.write(s);
const send = (m) => out(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
const tools = ["junk", "bad-result", "only-garbage", "replies"].map((name) => ({
  name,
  inputSchema: { type: "object" },
}));
tools.push({ description: "no name" }, "not an object", { name: 42 });
const replies = {};

const garbage = () => {
  out("this is not JSON\n");
  out("{\"jsonrpc\": \"2.0\", \"id\": \n");
  out("\x1b[31mred\x1b[0m \x00\x01\x02 binary\n");
  out("[1, 2, 3]\n");
  out("\"a string\"\n");
};

createInterface({ input: process.stdin }).on("line", (line) => {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (m.id !== undefined && !m.method) {
    replies[m.id] = m;
    return;
  }
  if (m.method === "initialize") {
    garbage();
    send({ id: 999999, result: {} });
    send({ id: "s1", method: "ping" });
    send({ id: "s2", method: "sampling/createMessage", params: {} });
    send({
      id: m.id,
      result: {
        protocolVersion: m.params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: {} },
        serverInfo: { name: "garbage", version: "1.0.0" },
      },
    });
  } else if (m.method === "tools/list") {
    send({ id: m.id, result: { tools } });
  } else if (m.method === "tools/call") {
    const name = m.params?.name;
    if (name === "junk") {
      garbage();
      // exit once written: hutch should have given up at 16 MiB
      process.stdout.write("x".repeat(17 << 20), () => process.exit(0));
    } else if (name === "bad-result") {
      send({ id: m.id, result: "not an object" });
    } else if (name === "only-garbage") {
      garbage();
    } else {
      send({ id: m.id, result: { content: [{ type: "text", text: JSON.stringify(replies) }] } });
    }
  } else if (m.method === "ping") {
    send({ id: m.id, result: {} });
  } else if (m.method && m.id !== undefined) {
    send({ id: m.id, error: { code: -32601, message: `Method not found: ${m.method}` } });
  }
});
