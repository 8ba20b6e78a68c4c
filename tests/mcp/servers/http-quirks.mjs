// http-quirks.mjs — a streamable HTTP upstream for hutch's tests (node:http,
// no dependencies) that uses the corners of the transport server-everything
// does not: plain JSON responses, SSE with CRLF line ends, comments and
// data split over lines, a notification and a server request before the
// response, a stream left open after the response, session expiry (404),
// a body over the size cap, and response streams closed before the
// response, to be resumed with GET and Last-Event-ID (or not).  Listens on 127.0.0.1, a free port, and
// prints "port N" on stdout.
import http from "node:http";
import { randomUUID } from "node:crypto";

let sessions = new Set();
let inits = 0;
let connections = 0;
let lastHeaders = {};
const waiting = new Map(); // server request id -> resolve

const tool = (name) => ({ name, inputSchema: { type: "object" } });
const tools = ["echo", "expire", "linger", "ping-me", "big", "headers", "resume", "closer", "noid"].map(tool);
// event id -> the call whose stream closed after it: {id, kind, closedAt}
const resumable = new Map();

// A POST's stream that gives an event id and a retry delay, then closes.
function closeEarly(res, m, kind, retry) {
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  const eid = `${kind}-${m.id}`;
  res.write(`id: ${eid}\nretry: ${retry}\ndata: \n\n`);
  resumable.set(eid, { id: m.id, kind, closedAt: Date.now() });
  res.end();
}

// The GET that resumes it: "resume" answers there with what the GET
// carried; "closer" closes again, after a new id.
function resume(req, res) {
  const sid = req.headers["mcp-session-id"];
  const leid = req.headers["last-event-id"];
  const p = resumable.get(leid);
  if (!sessions.has(sid) || !p) return json(res, 405);
  resumable.delete(leid);
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  if (p.kind === "resume") {
    const seen = { lastEventId: leid, session: true, accept: req.headers.accept, delay: Date.now() - p.closedAt };
    res.write(`id: ${leid}-2\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: p.id, result: text(JSON.stringify(seen)) })}\n\n`);
  } else {
    const nid = `${leid}+`;
    resumable.set(nid, { ...p, closedAt: Date.now() });
    res.write(`id: ${nid}\nretry: 10\ndata: \n\n`);
  }
  res.end();
}
const text = (t) => ({ content: [{ type: "text", text: t }] });

function json(res, status, body, headers = {}) {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(body === undefined ? "" : JSON.stringify(body));
}

function sse(res) {
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  return (m, crlf = false) => {
    const nl = crlf ? "\r\n" : "\n";
    // one data: line per line of pretty-printed JSON, as SSE allows
    const data = JSON.stringify(m, null, 1)
      .split("\n")
      .map((l) => `data: ${l}${nl}`)
      .join("");
    res.write(`: a comment${nl}event: message${nl}${data}${nl}`);
  };
}

const server = http.createServer((req, res) => {
  if (req.method === "DELETE") {
    sessions.delete(req.headers["mcp-session-id"]);
    return json(res, 200);
  }
  if (req.method === "GET" && req.headers["last-event-id"]) return resume(req, res);
  if (req.method !== "POST") return json(res, 405);
  let body = "";
  req.on("data", (d) => (body += d));
  req.on("end", async () => {
    let m;
    try {
      m = JSON.parse(body);
    } catch {
      return json(res, 400, { jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } });
    }
    const sid = req.headers["mcp-session-id"];
    if (m.method === "initialize") {
      inits++;
      const id = randomUUID();
      sessions.add(id);
      return json(
        res,
        200,
        {
          jsonrpc: "2.0",
          id: m.id,
          result: {
            protocolVersion: "2025-06-18",
            capabilities: { tools: { listChanged: true } },
            serverInfo: { name: "http-quirks", version: "1.0.0" },
          },
        },
        { "Mcp-Session-Id": id },
      );
    }
    if (!sid) return json(res, 400, { jsonrpc: "2.0", id: m.id ?? null, error: { code: -32000, message: "no session" } });
    if (!sessions.has(sid)) return json(res, 404, { jsonrpc: "2.0", id: m.id ?? null, error: { code: -32001, message: "Session not found" } });
    lastHeaders = req.headers;
    if (m.id !== undefined && !m.method) {
      // the client's answer to one of our requests
      waiting.get(m.id)?.(m);
      return json(res, 202);
    }
    if (m.id === undefined) return json(res, 202); // a notification
    if (m.method === "tools/list") {
      const send = sse(res);
      send({ jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: "listing" } }, true);
      send({ jsonrpc: "2.0", id: m.id, result: { tools } }, true);
      return res.end();
    }
    if (m.method !== "tools/call") return json(res, 200, { jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "Method not found" } });
    const name = m.params?.name;
    const args = m.params?.arguments ?? {};
    if (name === "echo") return json(res, 200, { jsonrpc: "2.0", id: m.id, result: text(`Echo: ${args.message}`) });
    if (name === "expire") {
      sessions = new Set();
      return json(res, 200, { jsonrpc: "2.0", id: m.id, result: text("expired") });
    }
    if (name === "headers") {
      const h = lastHeaders;
      return json(res, 200, {
        jsonrpc: "2.0",
        id: m.id,
        result: text(JSON.stringify({ test: h["x-hutch-test"], proto: h["mcp-protocol-version"], ua: h["user-agent"], inits, connections })),
      });
    }
    if (name === "linger") {
      const send = sse(res);
      send({ jsonrpc: "2.0", id: m.id, result: text("lingering") });
      return; // never res.end(): the stream stays open
    }
    if (name === "ping-me") {
      const send = sse(res);
      const rid = `ping-${m.id}`;
      const answer = new Promise((resolve) => waiting.set(rid, resolve));
      send({ jsonrpc: "2.0", id: rid, method: "ping" });
      const a = await Promise.race([answer, new Promise((r) => setTimeout(() => r(null), 3000))]);
      send({ jsonrpc: "2.0", id: m.id, result: text(`pong: ${JSON.stringify(a)}`) });
      return res.end();
    }
    if (name === "resume") return closeEarly(res, m, "resume", 300);
    if (name === "closer") return closeEarly(res, m, "closer", 10);
    if (name === "noid") {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      return res.end("data: \n\n");
    }
    if (name === "big") {
      const send = sse(res);
      send({ jsonrpc: "2.0", id: m.id, result: text("x".repeat(17 << 20)) });
      return res.end();
    }
    return json(res, 200, { jsonrpc: "2.0", id: m.id, result: { ...text(`unknown tool ${name}`), isError: true } });
  });
});
server.on("connection", () => connections++);
server.listen({ port: 0, host: "127.0.0.1" }, () => process.stdout.write(`port ${server.address().port}\n`));
