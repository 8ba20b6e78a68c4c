// sdk2_modes.mjs — the official SDK v2 client (@modelcontextprotocol/client
// 2.4.0) against `hutch serve` in each of its version negotiation modes —
// pinned to 2026-07-28, "auto" (server/discover, falling back to
// initialize) and "legacy" (initialize) — over stdio and over HTTP: it
// connects in the era the mode asks for, lists the tools, searches them, and
// runs a program that calls an upstream tool (recorder.mjs) on the local
// executor.  Over HTTP, a 2025 client (SDK 1.32.2) and a 2026 one work the
// same hutch at the same time.  The whole SDK suite in the 2026 era is
// sdk2_stdio.sh's and sdk2_http.sh's.  TAP; run by make check.
import {
  assert, connectHttp, execute, fs, loadSdk, MODERN_PROTOCOL, NODE, path, py, requireEnv, spawnHttp, startStdio, tap,
  HERE,
} from "./lib.mjs";

const hutch = requireEnv();
const t = tap({ timeout: 900 });
const dir = fs.mkdtempSync(path.join(process.env.TMPDIR || "/tmp", "hutch-sdk2-"));
const servers = path.join(dir, "servers.json");
fs.writeFileSync(servers, JSON.stringify({ mcpServers: { recorder: { command: NODE, args: [path.join(HERE, "recorder.mjs")] } } }));

const want = { "2-pin": ["modern", MODERN_PROTOCOL], "2-auto": ["modern", MODERN_PROTOCOL], "2-legacy": ["legacy", "2025-11-25"] };

// What every mode must do, once connected.
async function exercise(client, label) {
  const [era, version] = want[label.split(" ")[0]];
  await t.step(`${label}: connected in the ${era} era (${version})`, async () => {
    assert(client.getProtocolEra() === era, `era ${client.getProtocolEra()}`);
    assert(client.getNegotiatedProtocolVersion() === version, `version ${client.getNegotiatedProtocolVersion()}`);
    assert(client.getServerVersion()?.name === "hutch", JSON.stringify(client.getServerVersion()));
  });
  await t.step(`${label}: tools/list names search_tools and execute_code`, async () => {
    const r = await client.listTools();
    const names = r.tools.map((x) => x.name).sort().join();
    assert(names === "execute_code,search_tools", names);
    if (era === "modern") assert(Number.isInteger(r.ttlMs) && typeof r.cacheScope === "string", JSON.stringify(r).slice(0, 200));
  });
  await t.step(`${label}: search_tools finds recorder.strict`, async () => {
    const r = await client.callTool({ name: "search_tools", arguments: { query: "strict schema echo", limit: 3 } });
    const tools = r.structuredContent?.tools || [];
    assert(!r.isError && tools.some((x) => /recorder.*strict/.test(x.name || JSON.stringify(x))), JSON.stringify(r).slice(0, 600));
  });
  await t.step(`${label}: execute_code runs a program that calls tools.recorder.strict`, async () => {
    const x = await execute(client, py('r = tools.recorder.strict(n=3, tag="b")\n[r["n"], r["tag"]]'));
    assert(x.s.exit_code === 0 && JSON.stringify(x.s.result) === '[3,"b"]', JSON.stringify(x.s).slice(0, 800));
    assert(x.s.tool_calls?.count === 1 && x.s.tool_calls?.ok === 1, JSON.stringify(x.s.tool_calls));
    assert(x.s.executor === "local", x.s.executor);
  });
}

// --- stdio: one hutch per client -----------------------------------------------------------
for (const mode of ["2-pin", "2-auto", "2-legacy"]) {
  const sdk = await loadSdk(mode);
  let h;
  try {
    h = await startStdio({ sdk, hutch, servers });
  } catch (e) {
    t.ok(false, `${mode} over stdio: connects`, e.message);
    continue;
  }
  t.ok(true, `${mode} over stdio: connects (${h.connectMs} ms)`);
  await exercise(h.client, `${mode} over stdio`);
  const how = await h.close();
  t.ok(how && how.code === 0, `${mode} over stdio: hutch exits with status 0 when stdin closes`, JSON.stringify(how) + h.logs().slice(-1500));
}

// --- HTTP: one hutch, every mode, and an SDK 1.x client beside them -------------------------
const token = "sdk2-token-" + Math.random().toString(36).slice(2);
const srv = await spawnHttp({ hutch, servers, token });
try {
  for (const mode of ["2-pin", "2-auto", "2-legacy"]) {
    const sdk = await loadSdk(mode);
    let c;
    try {
      c = await connectHttp({ sdk, url: srv.url, token });
    } catch (e) {
      t.ok(false, `${mode} over HTTP: connects`, e.message);
      continue;
    }
    t.ok(true, `${mode} over HTTP: connects`);
    await exercise(c.client, `${mode} over HTTP`);
    if (sdk.era === "legacy") t.ok(!!c.transport.sessionId, `${mode} over HTTP: an Mcp-Session-Id was issued`);
    else t.is(c.transport.sessionId, undefined, `${mode} over HTTP: no Mcp-Session-Id`);
    await c.client.close();
  }
  await t.step("over HTTP, a 2025 session (SDK 1.32.2) and 2026 requests (SDK v2) at the same time", async () => {
    const old = await connectHttp({ sdk: await loadSdk("1"), url: srv.url, token });
    const neu = await connectHttp({ sdk: await loadSdk("2-pin"), url: srv.url, token });
    try {
      assert(old.transport.sessionId && !neu.transport.sessionId, "session ids");
      const [a, b] = await Promise.all([
        execute(old.client, py('import time\ntime.sleep(1)\ntools.recorder.strict(n=1)["n"]')),
        execute(neu.client, py('import time\ntime.sleep(1)\ntools.recorder.strict(n=2)["n"]')),
      ]);
      assert(a.s.result === 1 && b.s.result === 2, JSON.stringify([a.s, b.s]).slice(0, 800));
    } finally {
      await old.client.close();
      await neu.client.close();
    }
  });
} finally {
  const st = await srv.stop();
  t.ok(st && (st.code === 0 || st.sig === "SIGTERM"), `SIGTERM stops hutch serve --http (${JSON.stringify(st)})`);
  if (t.failed) t.diag("--- hutch output (tail) ---\n" + srv.logs().slice(-4000));
  fs.rmSync(dir, { recursive: true, force: true });
}
t.done();
