// bad_input.mjs — `hutch serve` over stdio fed raw bytes: each bad message
// is answered by a JSON-RPC error and the server keeps serving (a ping after
// each one still works); then upstream servers that crash mid-call, never
// answer, or send garbage (tests/mcp/servers/{crash,hang,garbage}.mjs) seen
// through execute_code.  TAP; run by make check.
import {
  assert, execute, fs, haveSdk, hutchEnv, loadSdk, makeFixture, path, pidAlive, py, js, requireEnv, spawn,
  startStdio, tap, waitFor, MCP, NODE, SERVERS_DIR, SHUTDOWN_BUDGET_MS,
} from "./lib.mjs";

const hutch = requireEnv({ needSdk: false, needServers: false });
const t = tap({ timeout: 900 });

// --- a raw stdio session -------------------------------------------------------------------

class Raw {
  constructor(args = []) {
    this.proc = spawn(hutch, ["serve", ...args], { env: hutchEnv(), stdio: ["pipe", "pipe", "pipe"] });
    this.buf = "";
    this.msgs = [];
    this.junk = [];
    this.err = "";
    this.waiters = [];
    this.exit = null;
    this.proc.stdout.setEncoding("utf8");
    this.proc.stdout.on("data", (d) => {
      this.buf += d;
      let i;
      while ((i = this.buf.indexOf("\n")) >= 0) {
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        if (!line.trim()) continue;
        try {
          this.msgs.push(JSON.parse(line));
        } catch {
          this.junk.push(line.slice(0, 200));
        }
      }
      this.wake();
    });
    this.proc.stderr.on("data", (d) => {
      this.err = (this.err + d).slice(-20000);
    });
    this.proc.stdin.on("error", () => {});
    this.proc.on("exit", (code, sig) => {
      this.exit = { code, sig };
      this.wake();
    });
  }
  wake() {
    for (const w of this.waiters.splice(0)) w();
  }
  async write(data) {
    if (!this.proc.stdin.write(data)) await new Promise((r) => this.proc.stdin.once("drain", r));
  }
  send(obj) {
    return this.write(JSON.stringify(obj) + "\n");
  }
  // The next message matching pred (consumed), or null after ms.
  async next(pred, ms = 5000) {
    const end = Date.now() + ms;
    for (;;) {
      const i = this.msgs.findIndex(pred);
      if (i >= 0) return this.msgs.splice(i, 1)[0];
      if (this.exit || Date.now() > end) return null;
      await new Promise((r) => {
        this.waiters.push(r);
        setTimeout(r, Math.max(1, end - Date.now()));
      });
    }
  }
  reply(id, ms) {
    return this.next((m) => m.id === id && (m.result !== undefined || m.error !== undefined), ms);
  }
  async request(id, method, params, ms) {
    await this.send({ jsonrpc: "2.0", id, method, ...(params ? { params } : {}) });
    return this.reply(id, ms);
  }
  async alive(id) {
    const r = await this.request(id, "ping", undefined, 5000);
    return r && r.result && Object.keys(r.result).length === 0;
  }
  async close() {
    this.proc.stdin.end();
    if (!(await waitFor(() => this.exit, SHUTDOWN_BUDGET_MS))) this.proc.kill("SIGKILL");
    return this.exit;
  }
}

const init = (version = "2025-11-25") => ({
  protocolVersion: version,
  capabilities: { experimental: { "hutch/structured-content": {} } },
  clientInfo: { name: "bad-input", version: "1.0.0" },
});
const errCode = (m) => (m && m.error ? m.error.code : m ? `no error: ${JSON.stringify(m).slice(0, 200)}` : "no answer");

// --- the protocol, raw -------------------------------------------------------------------------

const s = new Raw();
let id = 100;

{
  const r = await s.request(1, "tools/list");
  t.ok(r && r.error && !r.result, `a request before initialize is an error (${errCode(r)})`, JSON.stringify(r));
  const p = await s.request(2, "ping");
  t.ok(p && p.result, "ping is answered before initialize", JSON.stringify(p));
  const i = await s.request(3, "initialize", init("2025-06-18"));
  t.is(i?.result?.protocolVersion, "2025-06-18", "initialize with 2025-06-18 → 2025-06-18");
  t.is(i?.result?.serverInfo?.name, "hutch", "serverInfo.name");
  await s.send({ jsonrpc: "2.0", method: "notifications/initialized" });
  const again = await s.request(4, "initialize", init());
  t.ok(again && again.error, `a second initialize is refused (${errCode(again)})`);
}

async function bad(name, data, want, { check } = {}) {
  s.msgs.length = 0;
  await s.write(data);
  const r = await s.next((m) => m.error !== undefined || m.result !== undefined, 10000);
  const codeOk = Array.isArray(want) ? want.includes(r?.error?.code) : r?.error?.code === want;
  t.ok(r && codeOk && (!check || check(r)), `${name} → ${Array.isArray(want) ? want.join(" or ") : want}`, JSON.stringify(r)?.slice(0, 400) ?? "no answer");
  const pid = ++id;
  t.ok(await s.alive(pid), `… and the server keeps serving (ping)`, s.err.slice(-500));
}

await bad("malformed JSON", '{"jsonrpc": "2.0", "id": 10, "method": \n', -32700, { check: (r) => r.id === null });
await bad("a line that is not JSON at all", "hello there\n", -32700);
await bad(
  "a batch (JSON array)",
  JSON.stringify([{ jsonrpc: "2.0", id: 11, method: "ping" }, { jsonrpc: "2.0", id: 12, method: "ping" }]) + "\n",
  -32600,
  { check: (r) => r.id !== 11 && r.id !== 12 },
);
await bad("an empty batch", "[]\n", -32600);
await bad("an unknown method", JSON.stringify({ jsonrpc: "2.0", id: 13, method: "foo/bar" }) + "\n", -32601, {
  check: (r) => r.id === 13,
});
await bad("tools/call without a name", JSON.stringify({ jsonrpc: "2.0", id: 14, method: "tools/call", params: {} }) + "\n", -32602, {
  check: (r) => r.id === 14,
});
await bad(
  "tools/call with arguments that are not an object",
  JSON.stringify({ jsonrpc: "2.0", id: 15, method: "tools/call", params: { name: "execute_code", arguments: [1] } }) + "\n",
  -32602,
);
await bad(
  "tools/call of a tool hutch does not have",
  JSON.stringify({ jsonrpc: "2.0", id: 16, method: "tools/call", params: { name: "nope", arguments: {} } }) + "\n",
  -32602,
);
await bad("logging/setLevel with a bad level", JSON.stringify({ jsonrpc: "2.0", id: 17, method: "logging/setLevel", params: { level: "loud" } }) + "\n", -32602);
await bad("a request without jsonrpc 2.0", JSON.stringify({ id: 18, method: "ping" }) + "\n", -32600);
await bad("an id that is an object", JSON.stringify({ jsonrpc: "2.0", id: { a: 1 }, method: "ping" }) + "\n", -32600);
await bad("params that are an array", JSON.stringify({ jsonrpc: "2.0", id: 19, method: "ping", params: [1] }) + "\n", -32600);
await bad("a JSON string, not an object", '"ping"\n', -32600);
await bad(
  "invalid UTF-8",
  Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":20,"method":"ping","params":{"x":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}}\n')]),
  [-32700, -32600],
);
await bad("JSON nested 100000 deep", "[".repeat(100000) + "]".repeat(100000) + "\n", [-32700, -32600]);
{
  const big = Buffer.alloc(20 << 20, 0x61);
  const t0 = Date.now();
  await bad(
    "a 20 MB line",
    Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":21,"method":"ping","params":{"pad":"'), big, Buffer.from('"}}\n')]),
    [-32600, -32700],
    { check: (r) => r.id !== 21 || r.error },
  );
  t.diag(`20 MB line handled in ${Date.now() - t0} ms`);
}
{
  // 15 MB of "[0,0,...]" is under the message cap, but parsed it would hold
  // about 600 MB: refused before parsing, saying why.
  const zeros = Buffer.from("0,".repeat(7 << 20) + "0");
  await bad(
    "a message whose parse would hold 600 MB",
    Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":22,"method":"ping","params":{"pad":['), zeros, Buffer.from("]}}\n")]),
    -32600,
    { check: (r) => /would take about \d+ MiB of hutch's memory/.test(r.error?.message || "") },
  );
  // VmHWM: hutch's peak so far, the 20 MB line above included.
  const hwm = Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${s.proc.pid}/status`, "utf8"))?.[1]);
  t.ok(hwm < 300 * 1024, `… and hutch's peak stayed below 300 MB (${hwm} KiB)`);
}
{
  // execute_code argument errors: a tool error (isError) or -32602, never a crash.
  for (const [what, args] of [
    ["a bad language", { language: "cobol", code: "x" }],
    ["no code", { language: "python" }],
    ["an unknown argument", { language: "python", code: "1", extra: 1 }],
    ["a negative timeout_ms", { language: "python", code: "1", timeout_ms: -5 }],
    ["files with bad base64", { language: "python", code: "1", files: [{ path: "a", content: "!!!", encoding: "base64" }] }],
    ["files escaping /work", { language: "python", code: "1", files: [{ path: "../../etc/x", content: "x" }] }],
  ]) {
    const r = await s.request(++id, "tools/call", { name: "execute_code", arguments: args }, 10000);
    t.ok(r && (r.result?.isError === true || r.error?.code === -32602), `execute_code with ${what} is refused`, JSON.stringify(r));
  }
}
{
  s.msgs.length = 0;
  await s.send({ jsonrpc: "2.0", method: "notifications/unknown" });
  await s.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 999999 } });
  const pid = ++id;
  const r = await s.request(pid, "ping");
  t.ok(r && r.result && s.msgs.length === 0, "notifications get no answer; an unknown cancel is ignored", JSON.stringify(s.msgs));
}
{
  // A program printing a fake JSON-RPC message cannot reach the client's stream.
  const r = await s.request(++id, "tools/call", {
    name: "execute_code",
    arguments: { language: "python", code: 'print(\'{"jsonrpc":"2.0","id":424242,"result":{}}\')' },
  });
  await new Promise((res) => setTimeout(res, 100));
  t.ok(r?.result && !s.msgs.some((m) => m.id === 424242), "program output never becomes a protocol message");
}
t.is(s.junk.length, 0, "everything hutch wrote on stdout was JSON, one message a line");
{
  const t0 = Date.now();
  const ex = await s.close();
  t.ok(ex && ex.code === 0, `EOF on stdin ends hutch serve with status 0 (${JSON.stringify(ex)}, ${Date.now() - t0} ms)`, s.err.slice(-800));
}

// Protocol versions: the two hutch speaks, and the answer to one it does not.
for (const [asked, want] of [
  ["2025-11-25", "2025-11-25"],
  ["1999-01-01", "2025-11-25"],
]) {
  const r = new Raw();
  const i = await r.request(1, "initialize", init(asked));
  t.is(i?.result?.protocolVersion, want, `initialize with ${asked} → ${want}`);
  await r.close();
}

// 2026-07-28 over stdio: no initialize, the version and the client's
// capabilities in every request's _meta; the era is decided per request, so
// one connection serves both.  Wrong envelopes and versions are the
// revision's protocol errors, never a crash.
{
  const r = new Raw();
  const V = "2026-07-28";
  const meta = (over = {}) => ({
    "io.modelcontextprotocol/protocolVersion": V,
    "io.modelcontextprotocol/clientCapabilities": { experimental: { "hutch/structured-content": {} } },
    ...over,
  });
  let n = 500;
  const req26 = (method, params = {}, m = meta()) => r.request(++n, method, { ...params, _meta: m }, 10000);
  const d = await req26("server/discover");
  t.ok(d?.result?.supportedVersions?.includes(V) && d.result.resultType === "complete" &&
    d.result._meta?.["io.modelcontextprotocol/serverInfo"]?.name === "hutch",
  "2026 server/discover before any initialize: versions, resultType, serverInfo in _meta", JSON.stringify(d));
  const l = await req26("tools/list");
  t.ok(l?.result?.tools?.some((x) => x.name === "execute_code") && l.result.resultType === "complete" &&
    Number.isInteger(l.result.ttlMs) && l.result.ttlMs >= 0 && ["public", "private"].includes(l.result.cacheScope),
  "2026 tools/list: tools, resultType, ttlMs and cacheScope", JSON.stringify(l)?.slice(0, 300));
  const cases = [
    ["_meta without clientCapabilities", "tools/list", {}, { "io.modelcontextprotocol/protocolVersion": V }, -32602],
    ["_meta with a version that is not a string", "tools/list", {}, meta({ "io.modelcontextprotocol/protocolVersion": 20260728 }), -32602],
    ["_meta with clientCapabilities not an object", "tools/list", {}, meta({ "io.modelcontextprotocol/clientCapabilities": [] }), -32602],
    ["_meta with a malformed clientInfo", "tools/list", {}, meta({ "io.modelcontextprotocol/clientInfo": "me" }), -32602],
    ["a version hutch does not speak (2099-01-01)", "tools/list", {}, meta({ "io.modelcontextprotocol/protocolVersion": "2099-01-01" }), -32022],
    ["a 2025 version in _meta", "tools/list", {}, meta({ "io.modelcontextprotocol/protocolVersion": "2025-11-25" }), -32022],
    ["ping (removed in 2026-07-28)", "ping", {}, meta(), -32601],
    ["initialize with a 2026 envelope", "initialize", init(), meta(), -32601],
    ["logging/setLevel (removed)", "logging/setLevel", { level: "info" }, meta(), -32601],
    ["an unknown method", "foo/bar", {}, meta(), -32601],
    ["prompts/list (hutch has no prompts)", "prompts/list", {}, meta(), -32601],
    ["resources/read of an unknown uri", "resources/read", { uri: "hutch://nope" }, meta(), -32602],
    ["tools/call of a tool hutch does not have", "tools/call", { name: "nope", arguments: {} }, meta(), -32602],
  ];
  for (const [what, method, params, m, want] of cases) {
    const x = await req26(method, params, m);
    t.ok(x && x.error?.code === want && x.id === n, `2026 ${what} → ${want}`, JSON.stringify(x));
    if (want === -32022)
      t.ok(x?.error?.data?.supported?.includes(V) && x.error.data.requested === m["io.modelcontextprotocol/protocolVersion"],
        "… listing the versions hutch speaks and echoing the one asked", JSON.stringify(x?.error));
    if (method === "resources/read")
      t.is(x?.error?.data?.uri, "hutch://nope", "… naming the uri in its data (SEP-2164)");
  }
  const x = await req26("tools/call", { name: "execute_code", arguments: { language: "python", code: "6 * 7" } });
  t.ok(x?.result?.structuredContent?.result === 42 && x.result.resultType === "complete" && !("ttlMs" in x.result),
    "2026 execute_code runs without initialize; its result is complete and not cacheable", JSON.stringify(x)?.slice(0, 400));
  const before = await r.request(++n, "tools/list", undefined, 5000);
  t.ok(before?.error?.code === -32600, "a 2025 request on the same connection still needs initialize first", JSON.stringify(before));
  const i = await r.request(++n, "initialize", init());
  t.is(i?.result?.protocolVersion, "2025-11-25", "… which it then gets, 2025-11-25");
  const after = await req26("tools/list");
  t.ok(after?.result?.resultType === "complete", "and a 2026 request after it is still served as 2026", JSON.stringify(after)?.slice(0, 200));
  t.is(r.junk.length, 0, "everything hutch wrote was JSON");
  const ex = await r.close();
  t.ok(ex && ex.code === 0, "the connection ends cleanly", JSON.stringify(ex) + r.err.slice(-500));
}

// --- hostile upstreams ---------------------------------------------------------------------------

const have = ["crash", "hang", "garbage"].filter((n) => fs.existsSync(path.join(SERVERS_DIR, `${n}.mjs`)));
const haveEverything = fs.existsSync(path.join(MCP, "server-everything", "dist", "index.js"));
if (!haveSdk() || !haveEverything || have.length === 0) {
  t.skip("hostile upstream servers", have.length ? "npm packages not installed (npm ci in tests/mcp)" : "tests/mcp/servers/*.mjs not there");
  t.done();
}
const sdk = await loadSdk();
// hang.mjs once more, with its own per-call timeout (servers.json "timeout_ms").
const fx = makeFixture({
  hostile: true,
  extra: { hangfast: { command: NODE, args: [path.join(SERVERS_DIR, "hang.mjs")], timeout_ms: 1500 } },
});
const h = await startStdio({ sdk, hutch, servers: fx.servers, args: ["-v", "--timeout", "10000"] });
const ex = (args, o) => execute(h.client, args, o);
t.ok(h.pid > 0, `hutch starts with the hostile upstreams (${have.join(", ")}) in ${h.connectMs} ms`);

if (fx.present.crash) {
  await t.step("crash: a server that dies mid-call → ToolError; the next call to another server works", async () => {
    const x = await ex(
      py(`out = []
try:
    tools.crash.boom()
    out.append("no error")
except ToolError as e:
    out.append([e.code, str(e)])
out.append(tools.everything.echo(message="after the crash"))
out`, { trace: true }),
    );
    assert(x.s.exit_code === 0, JSON.stringify(x.s));
    assert(x.s.result[0][0] === "upstream", JSON.stringify(x.s.result));
    assert(x.s.result[1] === "Echo: after the crash", JSON.stringify(x.s.result));
    assert(x.s.trace[0].outcome === "upstream" && x.s.trace[1].outcome === "ok", JSON.stringify(x.s.trace));
  });
  await t.step("crash: the crashed server is restarted and answers again", async () => {
    const x = await ex(
      py(`import time
for i in range(50):
    try:
        r = tools.crash.alive()
        break
    except ToolError as e:
        r = e.code
        time.sleep(0.2)
r`),
    );
    assert(/^alive \d+$/.test(String(x.s.result)), JSON.stringify(x.s));
  });
}
if (fx.present.hang) {
  await t.step("hang: a call never answered raises a catchable timeout; the program goes on and exits 0", async () => {
    // The call gets 80% of the 10 s left at most: the program has the rest.
    const x = await ex(
      py(`try:
    tools.hang.wait()
    out = ["answered?"]
except ToolError as e:
    out = [e.code, str(e)]
out.append(tools.everything.echo(message="after the timeout"))
out`, { timeout_ms: 10000, trace: true }),
    );
    assert(x.s.exit_code === 0 && x.s.timed_out === false && !x.r.isError, JSON.stringify(x.s));
    assert(x.s.result?.[0] === "timeout" && /did not answer tools\/call wait/.test(x.s.result[1]), JSON.stringify(x.s.result));
    assert(x.s.result[2] === "Echo: after the timeout", JSON.stringify(x.s.result));
    assert(x.s.trace?.[0]?.outcome === "timeout" && x.s.trace[1]?.outcome === "ok", JSON.stringify(x.s.trace));
    t.diag(`hung call: ${x.s.result[1]}`);
  });
  await t.step('hang: a server\'s own "timeout_ms" (1500) bounds its calls; JavaScript gets error.code "timeout"', async () => {
    const x = await ex(
      js(`try {
  await tools.hangfast.wait({});
  return ["answered?"];
} catch (e) {
  return [e.code, e.message, await tools.everything.echo({message: "after"})];
}`, { timeout_ms: 10000 }),
    );
    assert(x.s.exit_code === 0 && x.s.timed_out === false, JSON.stringify(x.s));
    assert(x.s.result?.[0] === "timeout" && /within 1500 ms/.test(x.s.result[1]), JSON.stringify(x.s.result));
    assert(x.s.result[2] === "Echo: after", JSON.stringify(x.s.result));
  });
  await t.step("hang: a hung call does not block other executions or servers", async () => {
    // Behaviour, not speed: the slow program's call to hang is in flight
    // until the test cancels it, so the other execution must be answered
    // while the slow one still runs.  It calls recorder first: the count
    // growing says it is up and about to call hang.
    const count = async () => (await ex(py('tools.recorder.calls()["count"]'))).s.result;
    const c0 = await count();
    const ac = new AbortController();
    let slowDone = false;
    const slow = ex(py("tools.recorder.strict(n=1)\ntools.hang.wait()", { timeout_ms: 600000 }), { signal: ac.signal }).finally(() => {
      slowDone = true;
    });
    slow.catch(() => {});
    assert(await waitFor(async () => (await count()) > c0, 60000, 200), "the slow program never called recorder");
    await new Promise((r) => setTimeout(r, 300)); // its call to hang comes next
    const t0 = performance.now();
    const x = await ex(js('return await tools.everything.echo({message: "meanwhile"})'));
    const ms = performance.now() - t0;
    assert(x.s.result === "Echo: meanwhile" && !slowDone, `${ms.toFixed(0)} ms, slow ended ${slowDone}: ${JSON.stringify(x.s)}`);
    ac.abort("done with it");
    await slow.catch(() => {});
  });
}
if (fx.present.garbage) {
  // Each call ends with its error, well before a run timeout chosen for a
  // loaded machine (the call gets 80% of it).
  const garbageCall = async (tool, timeout_ms = 60000) => {
    const t0 = performance.now();
    const x = await ex(
      py(`out = []
try:
    out.append(["no error", tools.call("garbage.${tool}", {})])
except ToolError as e:
    out.append([e.code, str(e)[:200]])
out.append(tools.everything.echo(message="fine"))
out`, { timeout_ms }),
    );
    return { x, ms: performance.now() - t0 };
  };
  await t.step("garbage: its malformed tool entries are left out of the catalog, the good ones are in", async () => {
    const r = await h.client.callTool({ name: "search_tools", arguments: { query: "", limit: 100, detail: "names" } });
    const names = r.structuredContent.tools.map((x) => x.name).filter((n) => n.startsWith("garbage."));
    assert(JSON.stringify(names.sort()) === '["garbage.bad-result","garbage.junk","garbage.only-garbage","garbage.replies"]', JSON.stringify(names));
  });
  await t.step('garbage: "replies" works although the server sent junk and requests around its handshake', async () => {
    const x = await ex(py('tools.call("garbage.replies", {})'));
    assert(x.s.exit_code === 0 && x.s.tool_calls.count === 1 && x.s.tool_calls.ok === 1, JSON.stringify(x.s));
    t.diag(`what hutch answered to garbage's own requests: ${JSON.stringify(x.s.result)}`);
  });
  await t.step('garbage: "bad-result" (a result that is not an object) → ToolError upstream', async () => {
    const { x, ms } = await garbageCall("bad-result");
    assert(x.s.exit_code === 0, JSON.stringify(x.s));
    assert(x.s.result[0][0] === "upstream", JSON.stringify(x.s.result));
    assert(x.s.result[1] === "Echo: fine", JSON.stringify(x.s.result));
    t.diag(`garbage.bad-result: ${JSON.stringify(x.s.result[0])} in ${ms.toFixed(0)} ms`);
  });
  await t.step('garbage: "only-garbage" (never a valid answer) → a catchable ToolError before the run\'s end', async () => {
    // It ends at its budget (80% of the run's): the run's other 20% (6 s)
    // must be enough to call echo and finish, on a loaded machine too.
    const { x, ms } = await garbageCall("only-garbage", 30000);
    assert(x.s.exit_code === 0 && x.s.timed_out === false, JSON.stringify(x.s));
    assert(x.s.result?.[0]?.[0] === "upstream" && /no answer to tools\/call only-garbage/.test(x.s.result[0][1]), JSON.stringify(x.s.result));
    assert(x.s.result[1] === "Echo: fine", JSON.stringify(x.s.result));
    t.diag(`garbage.only-garbage: timed_out ${x.s.timed_out}, ${JSON.stringify(x.s.result)} in ${ms.toFixed(0)} ms`);
  });
  await t.step('garbage: "junk" (17 MiB without a newline) → ToolError upstream, then everything works', async () => {
    const { x, ms } = await garbageCall("junk");
    assert(x.s.exit_code === 0, JSON.stringify(x.s));
    assert(x.s.result[0][0] === "upstream", JSON.stringify(x.s.result));
    assert(x.s.result[1] === "Echo: fine", JSON.stringify(x.s.result));
    t.diag(`garbage.junk: ${JSON.stringify(x.s.result[0])} in ${ms.toFixed(0)} ms`);
  });
  await t.step("garbage: the killed server is restarted and answers again", async () => {
    const x = await ex(
      py(`import time
for i in range(50):
    try:
        r = ["ok", tools.call("garbage.replies", {})]
        break
    except ToolError as e:
        r = [e.code, str(e)]
        time.sleep(0.2)
r`),
    );
    assert(x.s.result?.[0] === "ok", JSON.stringify(x.s));
  });
}
await t.step("after all that, hutch still serves", async () => {
  await h.client.ping();
  const x = await ex(py('tools.everything.echo(message="ok")'));
  assert(x.s.result === "Echo: ok", JSON.stringify(x.s));
  assert(pidAlive(h.pid), "hutch alive");
});
const hpid = h.pid;
const how = await h.close();
t.ok(how && how.code === 0 && !how.sig && !pidAlive(hpid), "hutch exits cleanly afterwards", JSON.stringify(how));
if (t.failed) t.diag("--- hutch stderr (tail) ---\n" + h.logs().slice(-6000));
t.done();
