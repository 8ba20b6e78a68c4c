// sdk_stdio.mjs — `hutch serve` over stdio, driven by the official
// TypeScript SDK client (StdioClientTransport), with real upstream servers
// (server-everything, server-filesystem, server-memory, recorder.mjs).
// TAP; run by make check as `node tests/mcp/sdk_stdio.mjs`.  $HUTCH_SDK
// picks the client (lib.mjs loadSdk): sdk2_stdio.sh runs it all again with
// the SDK v2 client pinned to 2026-07-28.
import {
  descendants, execute, loadSdk, makeFixture, pidAlive, py, requireEnv, startStdio, tap, waitFor,
} from "./lib.mjs";
import { runSuite } from "./sdk_suite.mjs";

const hutch = requireEnv();
const sdk = await loadSdk();
const t = tap({ timeout: 900 });
const fx = makeFixture();

let h;
try {
  // HUTCH_TOKEN has no use over stdio: it is here to show it never leaks.
  h = await startStdio({ sdk, hutch, servers: fx.servers, args: ["--timeout", "120000"], env: { HUTCH_TOKEN: "stdio-token-" + process.pid } });
} catch (e) {
  t.ok(false, "hutch serve --servers starts over stdio", e.message);
  t.done();
}
t.ok(h.pid > 0, `hutch serve --servers starts over stdio (${h.connectMs} ms to connect, SDK ${sdk.which}, ${sdk.era} era)`);

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

// The data flavour: a matplotlib chart reaches the client as a PNG image,
// on every executor (local: the host's Python packages; docker and gvisor:
// the python-data image the policy selects).  The same hutch keeps links
// for one second only: a link read after that is an error.
await t.step("the data flavour: a matplotlib chart comes back as an image/png; an expired link is an error", async () => {
  const fs = await import("node:fs");
  const os = await import("node:os");
  const path = await import("node:path");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hutch-data-"));
  const policy = path.join(dir, "policy.lua");
  fs.writeFileSync(policy, 'return { executor_options = { docker = { flavour = "data" }, gvisor = { flavour = "data" } } }\n');
  const h3 = await startStdio({ sdk, hutch, args: ["--policy", policy], env: { HUTCH_RESOURCE_TTL_MS: "1000" } });
  try {
    const ec = (await h3.client.listTools()).tools.find((x) => x.name === "execute_code");
    if (!/\. Python packages: numpy [0-9.]+, pandas [0-9.]+, matplotlib [0-9.]+\.$/.test(ec.description))
      throw new Error(`the data flavour's description: ${ec.description}`);
    const x = await execute(h3.client, py(`import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt, numpy as np, pandas as pd, os
os.makedirs("/work/out", exist_ok=True)
df = pd.DataFrame({"x": np.arange(10), "y": np.arange(10) ** 2})
ax = df.plot(x="x", y="y", title="squares")
ax.figure.savefig("/work/out/chart.png", dpi=80)
[int(df.y.sum()), os.path.getsize("/work/out/chart.png")]`, { timeout_ms: 120000 }), { timeout: 180000 });
    if (x.s.exit_code !== 0 || !Array.isArray(x.s.result) || x.s.result[0] !== 285)
      throw new Error(`the chart program failed: ${JSON.stringify(x.s).slice(0, 3000)}`);
    const imgs = (x.r.content || []).filter((c) => c.type === "image");
    if (imgs.length !== 1 || imgs[0].mimeType !== "image/png") throw new Error(JSON.stringify(x.r.content.map((c) => c.type + " " + c.mimeType)));
    const png = Buffer.from(imgs[0].data, "base64");
    if (!png.subarray(0, 8).equals(Buffer.from("89504e470d0a1a0a", "hex")) || png.length !== x.s.result[1] || png.length < 5000)
      throw new Error(`not the chart: ${png.length} bytes, ${png.subarray(0, 8).toString("hex")}`);
    // 6.4 x 4.8 inches at 80 dpi: the IHDR says 512 x 384.
    if (png.readUInt32BE(16) !== 512 || png.readUInt32BE(20) !== 384)
      throw new Error(`IHDR ${png.readUInt32BE(16)} x ${png.readUInt32BE(20)}`);
    if (!/chart\.png \(\d+ bytes, image\/png\): shown as an image/.test(x.text)) throw new Error(x.text);

    const y = await execute(h3.client, py('import os\nos.makedirs("/work/out", exist_ok=True)\nopen("/work/out/b.bin", "wb").write(bytes(range(256)) * 4)\n1'));
    const link = (y.r.content || []).find((c) => c.type === "resource_link");
    if (!link) throw new Error(JSON.stringify(y.r.content));
    await new Promise((r) => setTimeout(r, 1500));
    let read;
    try {
      read = await h3.client.readResource({ uri: link.uri });
    } catch (e) {
      // 2026-07-28 (SEP-2164) says -32602; the 2025 sessions keep -32002.
      const want = sdk.era === "legacy" ? -32002 : -32602;
      if (e.code !== want || !/unknown or expired/.test(e.message)) throw new Error(`error ${e.code} ${e.message}`);
    }
    if (read) throw new Error(`an expired link was read: ${JSON.stringify(read).slice(0, 200)}`);
  } finally {
    await h3.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 300);

if (t.failed) t.diag("--- hutch stderr (tail) ---\n" + h.logs().slice(-4000));
t.done();
