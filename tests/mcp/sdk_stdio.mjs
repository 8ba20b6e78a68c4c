// sdk_stdio.mjs — `hutch serve` over stdio, driven by the official
// TypeScript SDK client (StdioClientTransport), with real upstream servers
// (server-everything, server-filesystem, server-memory, recorder.mjs).
// TAP; run by make check as `node tests/mcp/sdk_stdio.mjs`.
import {
  descendants, execute, loadSdk, makeFixture, pidAlive, py, requireEnv, startStdio, tap, waitFor,
} from "./lib.mjs";
import { runSuite } from "./sdk_suite.mjs";

const hutch = requireEnv();
const sdk = await loadSdk();
const t = tap({ timeout: 240 });
const fx = makeFixture();

let h;
try {
  // HUTCH_TOKEN has no use over stdio: it is here to show it never leaks.
  h = await startStdio({ sdk, hutch, servers: fx.servers, env: { HUTCH_TOKEN: "stdio-token-" + process.pid } });
} catch (e) {
  t.ok(false, "hutch serve --servers starts over stdio", e.message);
  t.done();
}
t.ok(h.pid > 0, `hutch serve --servers starts over stdio (${h.connectMs} ms to initialize)`);

await runSuite(t, h, fx, sdk);

// Upstream children are hutch's: they end when it ends.
const upstreams = descendants(h.pid).filter((p) => /server-(everything|filesystem|memory)|recorder\.mjs/.test(p.cmd));
t.ok(upstreams.length >= 4, `the upstream servers run below hutch (${upstreams.length})`,
  JSON.stringify(descendants(h.pid).map((p) => p.cmd)));
const t0 = Date.now();
const how = await h.close();
t.ok(how && how.code === 0 && !how.sig, `hutch exits on its own, status 0, when its stdin closes (${Date.now() - t0} ms)`,
  JSON.stringify(how));
const left = await waitFor(() => upstreams.every((p) => !pidAlive(p.pid)), 30000);
t.ok(left, "the upstream servers exit with hutch",
  JSON.stringify(upstreams.filter((p) => pidAlive(p.pid)).map((p) => p.cmd)));

// --no-envelope, and a hutch with no upstream servers at all.
await t.step("--no-envelope: plain text; no --servers: execute_code still works", async () => {
  const h2 = await startStdio({ sdk, hutch, args: ["--no-envelope"] });
  try {
    const x = await execute(h2.client, py('print("plain")\n7'));
    if (x.s.exit_code !== 0 || x.s.result !== 7) throw new Error(JSON.stringify(x.s));
    if (/untrusted-data/.test(x.text)) throw new Error(`envelope present: ${x.text}`);
    if (!x.text.includes("plain")) throw new Error(x.text);
    const r = await h2.client.callTool({ name: "search_tools", arguments: { query: "echo" } });
    if (r.isError || r.structuredContent?.tools?.length !== 0) throw new Error(JSON.stringify(r));
    const y = await execute(h2.client, py('try:\n    tools.everything.echo(message="x")\nexcept ToolError as e:\n    out = e.code\nout'));
    if (y.s.result !== "unknown_tool") throw new Error(JSON.stringify(y.s));
  } finally {
    await h2.close();
  }
});

if (t.failed) t.diag("--- hutch stderr (tail) ---\n" + h.logs().slice(-4000));
t.done();
