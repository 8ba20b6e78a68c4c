// sdk_http.mjs — `hutch serve --http 127.0.0.1:PORT` (streamable HTTP,
// bearer token), driven by the official TypeScript SDK client
// (StreamableHTTPClientTransport), with the same upstreams and checks as
// sdk_stdio.mjs, plus a few HTTP-only ones (the transport's own corner
// cases are tests/mcp/http.sh's).  TAP; run by make check.  $HUTCH_SDK picks
// the client (lib.mjs loadSdk): sdk2_http.sh runs it all again with the SDK
// v2 client pinned to 2026-07-28.
import { connectHttp, execute, loadSdk, makeFixture, py, requireEnv, startHttp, tap } from "./lib.mjs";
import { runSuite } from "./sdk_suite.mjs";

const hutch = requireEnv();
const sdk = await loadSdk();
const t = tap({ timeout: 900 });
const fx = makeFixture();
const token = "test-token-" + Math.random().toString(36).slice(2);

let h;
try {
  h = await startHttp({ sdk, hutch, servers: fx.servers, token, args: ["--timeout", "120000"] });
} catch (e) {
  t.ok(false, "hutch serve --http starts", e.message);
  t.done();
}
t.ok(h.pid > 0, `hutch serve --http ${h.url} starts (${h.connectMs} ms to connect, SDK ${sdk.which}, ${sdk.era} era)`);
if (sdk.era === "legacy")
  t.ok(typeof h.transport.sessionId === "string" && h.transport.sessionId.length >= 16, "an Mcp-Session-Id was issued");

await runSuite(t, h, fx, sdk);

await t.step("without the token the SDK client cannot connect (401)", async () => {
  let err;
  try {
    const c = await connectHttp({ sdk, url: h.url });
    await c.client.close();
  } catch (e) {
    err = e;
  }
  if (!err || !/401|unauthori[sz]ed/i.test(String(err.message) + String(err.code))) throw new Error(`connected or wrong error: ${err}`);
  const r = await fetch(h.url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
  });
  if (r.status !== 401 || !/^Bearer/i.test(r.headers.get("www-authenticate") || ""))
    throw new Error(`status ${r.status}, WWW-Authenticate ${r.headers.get("www-authenticate")}`);
});
await t.step("a wrong token is refused too", async () => {
  const r = await fetch(h.url, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}x`, "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
  });
  if (r.status !== 401) throw new Error(`status ${r.status}`);
});
await t.step(sdk.era === "legacy" ? "two clients at once get separate sessions that both work" : "two clients at once both work, without sessions", async () => {
  const a = await connectHttp({ sdk, url: h.url, token });
  const b = await connectHttp({ sdk, url: h.url, token });
  try {
    if (sdk.era === "legacy" && (!a.transport.sessionId || a.transport.sessionId === b.transport.sessionId)) throw new Error("session ids");
    if (sdk.era !== "legacy" && (a.transport.sessionId || b.transport.sessionId)) throw new Error("a session id in the 2026 era");
    const [x, y] = await Promise.all([execute(a.client, py('"a"')), execute(b.client, py('"b"'))]);
    if (x.s.result !== "a" || y.s.result !== "b") throw new Error(JSON.stringify([x.s, y.s]));
  } finally {
    await a.client.close();
    await b.client.close();
  }
});

await h.client.close();
const st = await h.server.stop();
t.ok(st && (st.code === 0 || st.sig === "SIGTERM"), `SIGTERM stops hutch serve --http (${JSON.stringify(st)})`);
if (t.failed) t.diag("--- hutch output (tail) ---\n" + h.logs().slice(-4000));
t.done();
