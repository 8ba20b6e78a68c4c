// lib.mjs — shared helpers for the MCP end-to-end tests of `hutch serve`.
//
//   TAP:       const t = tap({ timeout: 120 })    (a global time limit, seconds)
//              t.ok(cond, name, diag?)  t.is(got, want, name)  t.like(got, re|str, name)
//              t.skip(name, reason)     t.diag(text)
//              await t.step(name, async () => …)   one TAP line: ok unless it throws
//              t.done()                 prints "1..N", exits 1 when anything failed
//              skipAll(reason)          "1..0 # SKIP reason", exit 0
//   hutch:     await startStdio({ servers, args, env })    → { client, pid, logs(), close() }
//              await startHttp({ servers, token, args })   → the same, plus { url, port }
//   fixtures:  makeFixture()  a temp dir with a small tree and servers.json
//              (server-everything, server-filesystem over the tree, server-memory)
//   processes: procTable(), descendants(pid), runnersUnder(pid)
//
// Nothing here imports the SDK statically, so a checkout without
// node_modules skips cleanly instead of failing on an import.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const NM = path.join(HERE, "node_modules");
export const MCP = path.join(NM, "@modelcontextprotocol");
export const SERVERS_DIR = path.join(HERE, "servers");
export const NODE = process.execPath;

// How long a hutch may take to shut down on its own (close its upstreams,
// destroy its warm sandboxes) before a test gives up on it: generous, since
// the machine may be busy; reaching it is a failure, not a fallback.
export const SHUTDOWN_BUDGET_MS = 60000;

const children = new Set(); // pids to kill if we exit early
let cleanups = [];

function killChildren() {
  for (const pid of children) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
  children.clear();
}
process.on("exit", () => {
  killChildren();
  for (const f of cleanups) {
    try {
      f();
    } catch {}
  }
});
export function onExit(f) {
  cleanups.push(f);
}

// --- TAP ------------------------------------------------------------------------

export function skipAll(reason) {
  process.stdout.write(`1..0 # SKIP ${reason}\n`);
  process.exit(0);
}

export function bailOut(reason) {
  process.stdout.write(`Bail out! ${reason}\n`);
  process.exit(1);
}

const show = (v) => {
  if (typeof v === "string") return JSON.stringify(v.length > 600 ? v.slice(0, 600) + "…" : v);
  let s;
  try {
    s = JSON.stringify(v);
  } catch {
    s = String(v);
  }
  return s && s.length > 600 ? s.slice(0, 600) + "…" : s;
};

export function tap({ timeout = 120 } = {}) {
  let n = 0;
  let failed = 0;
  const diag = (text) => {
    for (const line of String(text).split("\n")) process.stdout.write(`# ${line}\n`);
  };
  const result = (pass, name, why) => {
    n++;
    name = String(name).replace(/#/g, "\\#").replace(/\n/g, " ");
    process.stdout.write(`${pass ? "ok" : "not ok"} ${n} - ${name}\n`);
    if (!pass) {
      failed++;
      if (why) diag(why);
    }
    return pass;
  };
  const timer = setTimeout(() => {
    diag(`the whole file took more than ${timeout} s`);
    process.stdout.write(`Bail out! global timeout (${timeout} s)\n`);
    process.exit(1);
  }, timeout * 1000);
  const t = {
    diag,
    ok: (cond, name, why) => result(!!cond, name, why),
    is: (got, want, name) =>
      result(
        Object.is(got, want) || (typeof got === "object" && show(got) === show(want)),
        name,
        `  got:  ${show(got)}\n  want: ${show(want)}`,
      ),
    like: (got, re, name) => {
      const s = typeof got === "string" ? got : show(got);
      const pass = re instanceof RegExp ? re.test(s ?? "") : (s ?? "").includes(re);
      return result(pass, name, `  got:  ${show(s)}\n  want: ${re instanceof RegExp ? re : show(re)}`);
    },
    skip: (name, reason) => {
      n++;
      process.stdout.write(`ok ${n} - ${name} # SKIP ${reason}\n`);
    },
    // One TAP line for a block: ok when it completes, not ok with the error.
    // The budget is for a machine that is very busy (an ASan build beside a
    // loaded CI run took more than 60 s for two executions of one step):
    // reaching it is a failure, never an expectation.
    step: async (name, fn, seconds = 240) => {
      let to;
      try {
        await Promise.race([
          fn(),
          new Promise((_, rej) => {
            to = setTimeout(() => rej(new Error(`step timed out after ${seconds} s`)), seconds * 1000);
          }),
        ]);
        return result(true, name);
      } catch (e) {
        return result(false, name, `  ${e && e.stack ? e.stack : e}`);
      } finally {
        clearTimeout(to);
      }
    },
    get failed() {
      return failed;
    },
    done: () => {
      clearTimeout(timer);
      process.stdout.write(`1..${n}\n`);
      process.exit(failed ? 1 : 0);
    },
  };
  return t;
}

export function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

// --- environment ------------------------------------------------------------------

// Checks what every test needs; skips or bails out.  Returns the path of hutch.
export function haveSdk() {
  return fs.existsSync(path.join(MCP, "sdk", "package.json"));
}

export function requireEnv({ needSdk = true, needServers = true } = {}) {
  if (!process.env.HUTCH_BUILDDIR) bailOut("HUTCH_BUILDDIR is not set: run the tests through make check");
  const hutch = path.join(process.env.HUTCH_BUILDDIR, "hutch");
  if (needSdk && !haveSdk()) skipAll(`npm packages not installed (cd ${HERE} && npm ci)`);
  if (
    needServers &&
    !["server-everything", "server-filesystem", "server-memory"].every((p) =>
      fs.existsSync(path.join(MCP, p, "dist", "index.js")),
    )
  )
    skipAll("reference MCP servers not installed (npm ci in tests/mcp)");
  if (!fs.existsSync(hutch)) bailOut(`${hutch} does not exist: build first`);
  return hutch;
}

// The official TypeScript SDK client, as `which` (default $HUTCH_SDK, else
// "1") names it:
//   "1"         @modelcontextprotocol/sdk 1.32.2: the 2025 revisions (initialize);
//   "2-pin"     @modelcontextprotocol/client 2.4.0 pinned to 2026-07-28
//               (stateless: server/discover, _meta on every request);
//   "2-auto"    the same, versionNegotiation "auto": probes server/discover,
//               falls back to initialize;
//   "2-legacy"  the same, versionNegotiation "legacy" (its default): initialize.
// `era` says which protocol era the client ends up in with hutch.
export async function loadSdk(which = process.env.HUTCH_SDK || "1") {
  if (which === "1") {
    const imp = (p) => import(pathToFileURL(path.join(MCP, "sdk", "dist", "esm", p)).href);
    const [client, stdio, http, types] = await Promise.all([
      imp("client/index.js"),
      imp("client/stdio.js"),
      imp("client/streamableHttp.js"),
      imp("types.js"),
    ]);
    return {
      which,
      era: "legacy",
      Client: client.Client,
      StdioClientTransport: stdio.StdioClientTransport,
      StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
      McpError: types.McpError,
      ErrorCode: types.ErrorCode,
      LATEST_PROTOCOL_VERSION: types.LATEST_PROTOCOL_VERSION,
      ElicitRequestSchema: types.ElicitRequestSchema,
      clientOptions: {},
    };
  }
  const modes = { "2-pin": { pin: MODERN_PROTOCOL }, "2-auto": "auto", "2-legacy": "legacy" };
  if (!(which in modes)) throw new Error(`unknown SDK ${JSON.stringify(which)} (1, 2-pin, 2-auto, 2-legacy)`);
  const imp = (p) => import(pathToFileURL(path.join(MCP, "client", "dist", p)).href);
  const [client, stdio] = await Promise.all([imp("index.mjs"), imp("stdio.mjs")]);
  return {
    which,
    era: which === "2-legacy" ? "legacy" : "modern",
    Client: client.Client,
    StdioClientTransport: stdio.StdioClientTransport,
    StreamableHTTPClientTransport: client.StreamableHTTPClientTransport,
    McpError: client.ProtocolError,
    ErrorCode: client.ProtocolErrorCode,
    LATEST_PROTOCOL_VERSION: client.LATEST_PROTOCOL_VERSION,
    clientOptions: { versionNegotiation: { mode: modes[which] } },
  };
}
export const MODERN_PROTOCOL = "2026-07-28";

// Every hutch the tests start has this in its environment: nothing it
// starts (an upstream, a sandbox) may ever see it (doc/executors.md, "Environments").
export const HOST_SECRET = "host-secret-" + Math.random().toString(36).slice(2);

export function hutchEnv(extra = {}) {
  const env = {
    PATH: process.env.PATH || "/usr/local/bin:/usr/bin:/bin",
    HOME: process.env.HOME || "/tmp",
    LANG: "C.UTF-8",
    HUTCH_TEST_SECRET: HOST_SECRET,
  };
  // Which Docker engine(s) the docker executor talks to: the suites of
  // tests/remote and tests/docker/engines.sh point it elsewhere than the
  // main daemon, and a hutch that fell back to the default socket would
  // pass them on the wrong daemon.
  for (const k of ["HUTCH_PLUGIN_DIR", "HUTCH_RUNNER_DIR", "HUTCH_EXECUTOR", "TMPDIR",
    "DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "HUTCH_DOCKER_ENDPOINTS"])
    if (process.env[k]) env[k] = process.env[k];
  return { ...env, ...extra };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(pred, ms = 5000, every = 50) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() > end) return v;
    await sleep(every);
  }
}

// --- fixtures ---------------------------------------------------------------------

export function makeFixture({ hostile = false, extra = {} } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hutch-mcp-"));
  onExit(() => fs.rmSync(dir, { recursive: true, force: true }));
  const tree = path.join(dir, "tree");
  fs.mkdirSync(path.join(tree, "sub", "deeper"), { recursive: true });
  fs.writeFileSync(path.join(tree, "a.txt"), "alpha\n");
  fs.writeFileSync(path.join(tree, "b.txt"), "bravo\ncharlie\n");
  fs.writeFileSync(path.join(tree, "sub", "c.md"), "# c\n\ndelta ünïcødé\n");
  fs.writeFileSync(path.join(tree, "sub", "deeper", "d.json"), '{"n": 4}\n');
  const mcpServers = {
    everything: {
      command: NODE,
      args: [path.join(MCP, "server-everything", "dist", "index.js"), "stdio"],
      env: { HUTCH_ENTRY_VAR: "from-the-entry" },
    },
    fs: { command: NODE, args: [path.join(MCP, "server-filesystem", "dist", "index.js"), tree] },
    memory: {
      command: NODE,
      args: [path.join(MCP, "server-memory", "dist", "index.js")],
      env: { MEMORY_FILE_PATH: path.join(dir, "memory.jsonl") },
    },
    recorder: { command: NODE, args: [path.join(HERE, "recorder.mjs")] },
    ...extra,
  };
  const present = {};
  if (hostile) {
    for (const name of ["crash", "hang", "garbage"]) {
      const f = path.join(SERVERS_DIR, `${name}.mjs`);
      if (fs.existsSync(f)) {
        mcpServers[name] = { command: NODE, args: [f] };
        present[name] = true;
      }
    }
  }
  const servers = path.join(dir, "servers.json");
  fs.writeFileSync(servers, JSON.stringify({ mcpServers }, null, 2));
  return { dir, tree, servers, present };
}

// --- starting hutch ---------------------------------------------------------------

// Records what the client receives (initialize result, notifications): the
// SDK's Protocol.connect keeps a transport.onmessage set before it and calls
// it for every message.
function tapTransport(transport) {
  const seen = { initialize: null, notifications: [] };
  transport.onmessage = (m) => {
    if (m && m.result && m.result.serverInfo && !seen.initialize) seen.initialize = m.result;
    if (m && m.method && m.id === undefined && seen.notifications.length < 10000) seen.notifications.push(m);
  };
  return seen;
}

function ringLog(max = 256 << 10) {
  let buf = "";
  return {
    add(chunk) {
      buf += chunk.toString();
      if (buf.length > max) buf = buf.slice(buf.length - max);
    },
    text: () => buf,
  };
}

// hutch serve answers before its upstreams are up (their tools join the
// catalog as each comes up): a test that needs the whole catalog waits
// until no server is still starting, as search_tools reports it, within a
// generous budget.  waitServers: false for a test about that very state.
export async function untilServersUp(client, budgetMs = 120000) {
  let last = null;
  const up = await waitFor(async () => {
    const r = await client.callTool({ name: "search_tools", arguments: { query: "", limit: 1 } });
    if (r.structuredContent) {
      last = r.structuredContent.servers ?? [];
      return !last.some((x) => x.state === "starting");
    }
    // A client without structuredContent reads the text's list.
    last = (r.content?.[0]?.text ?? "").split("\n").filter((l) => /^  \S+: starting/.test(l));
    return last.length === 0;
  }, budgetMs, 200);
  if (!up) throw new Error(`upstream servers still starting after ${budgetMs} ms: ${JSON.stringify(last)}`);
}

// The client capability that asks hutch for structuredContent and the
// tools' outputSchema (doc/code-mode.md, "What the model reads").  The tests read the
// typed result, so their clients declare it unless told not to
// (structured: false); a client for a model declares nothing and gets the
// content blocks alone (tests/clients, the "no structuredContent" steps).
export const STRUCTURED_CAP = "hutch/structured-content";
export function withStructured(capabilities = {}, structured = true) {
  if (!structured) return capabilities;
  return { ...capabilities, experimental: { ...(capabilities.experimental || {}), [STRUCTURED_CAP]: {} } };
}

// capabilities: the client's (e.g. { elicitation: {} }); onClient(client):
// called before it connects (to set request handlers).
export async function startStdio({ sdk, hutch, servers, args = [], env = {}, name = "hutch-tests", waitServers = true, capabilities = {}, structured = true, onClient }) {
  capabilities = withStructured(capabilities, structured);
  const { Client, StdioClientTransport } = sdk;
  const argv = ["serve", ...(servers ? ["--servers", servers] : []), ...args];
  const transport = new StdioClientTransport({ command: hutch, args: argv, env: hutchEnv(env), stderr: "pipe" });
  const log = ringLog();
  transport.stderr?.on("data", (d) => log.add(d));
  const seen = tapTransport(transport);
  const client = new Client({ name, version: "1.0.0" }, { capabilities, ...sdk.clientOptions });
  onClient?.(client);
  const t0 = Date.now();
  try {
    await client.connect(transport, { timeout: 30000 });
  } catch (e) {
    throw new Error(`connect failed: ${e.message}\n--- hutch stderr ---\n${log.text()}`);
  }
  if (servers && waitServers) await untilServersUp(client);
  const pid = transport.pid;
  if (pid) children.add(pid);
  // The SDK keeps the child process private; its exit is what close() waits for.
  const proc = transport._process;
  let exited = null;
  proc?.once("exit", (code, sig) => {
    exited = { code, sig };
  });
  return {
    kind: "stdio",
    client,
    transport,
    pid,
    seen,
    connectMs: Date.now() - t0,
    logs: log.text,
    // How hutch ended: { code, sig } once it has; null while it runs.
    exited: () => exited,
    // Close stdin and let hutch shut down on its own, as a client that
    // waits would: the SDK's close() sends SIGTERM after 2 s and SIGKILL
    // after 4, and a hutch killed mid-shutdown (destroying warm sandboxes
    // on a busy machine) leaves its state for the next start to clean,
    // which other tests' leftover checks would see.  The budget is
    // generous; a hutch that does not exit within it is a failure the
    // caller sees in exited().
    async close(budgetMs = SHUTDOWN_BUDGET_MS) {
      try {
        proc?.stdin?.end();
      } catch {}
      if (proc) await waitFor(() => exited, budgetMs, 50);
      await client.close().catch(() => {});
      if (pid) children.delete(pid);
      return exited;
    },
  };
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const c = net.connect({ port, host: "127.0.0.1" });
    c.once("connect", () => {
      c.destroy();
      resolve(true);
    });
    c.once("error", () => resolve(false));
  });
}

// Spawns `hutch serve --http 127.0.0.1:PORT` and waits until it listens.
export async function spawnHttp({ hutch, servers, token, args = [], env = {} }) {
  let lastErr;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const argv = ["serve", "--http", `127.0.0.1:${port}`, ...(servers ? ["--servers", servers] : []), ...args];
    const proc = spawn(hutch, argv, {
      env: hutchEnv({ ...(token ? { HUTCH_TOKEN: token } : {}), ...env }),
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.add(proc.pid);
    const log = ringLog();
    proc.stdout.on("data", (d) => log.add(d));
    proc.stderr.on("data", (d) => log.add(d));
    let exited = null;
    proc.on("exit", (code, sig) => {
      exited = { code, sig };
      children.delete(proc.pid);
    });
    const up = await waitFor(async () => exited || (await canConnect(port)), 30000, 50);
    if (up === true) {
      return {
        proc,
        pid: proc.pid,
        port,
        url: `http://127.0.0.1:${port}/mcp`,
        logs: log.text,
        async stop() {
          if (exited) return exited;
          proc.kill("SIGTERM");
          const r = await waitFor(() => exited, SHUTDOWN_BUDGET_MS);
          if (!r) proc.kill("SIGKILL");
          return (await waitFor(() => exited, 5000)) && r;
        },
      };
    }
    lastErr = `hutch serve --http exited (${JSON.stringify(exited)}) or did not listen:\n${log.text()}`;
    proc.kill("SIGKILL");
    if (!/in use/i.test(log.text())) break;
  }
  throw new Error(lastErr);
}

export async function connectHttp({ sdk, url, token, name = "hutch-tests", capabilities = {}, structured = true, onClient }) {
  capabilities = withStructured(capabilities, structured);
  const { Client, StreamableHTTPClientTransport } = sdk;
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: token ? { headers: { Authorization: `Bearer ${token}` } } : undefined,
  });
  const seen = tapTransport(transport);
  const client = new Client({ name, version: "1.0.0" }, { capabilities, ...sdk.clientOptions });
  onClient?.(client);
  await client.connect(transport, { timeout: 30000 });
  return { client, transport, seen };
}

export async function startHttp({ sdk, hutch, servers, token = "t0ken-" + process.pid, args = [], env = {}, waitServers = true, structured = true }) {
  const srv = await spawnHttp({ hutch, servers, token, args, env });
  const t0 = Date.now();
  let c;
  try {
    c = await connectHttp({ sdk, url: srv.url, token, structured });
    if (servers && waitServers) await untilServersUp(c.client);
  } catch (e) {
    await srv.stop();
    throw new Error(`connect failed: ${e.message}\n--- hutch output ---\n${srv.logs()}`);
  }
  return {
    kind: "http",
    ...c,
    pid: srv.pid,
    url: srv.url,
    port: srv.port,
    token,
    server: srv,
    connectMs: Date.now() - t0,
    logs: srv.logs,
    async close() {
      await c.client.close().catch(() => {});
      await srv.stop();
    },
  };
}

// --- results ------------------------------------------------------------------------

// client.callTool with request options, whichever SDK made the client: 1.x
// takes (params, resultSchema, options), 2.x (params, options).
export function callTool(client, params, options) {
  return typeof client.getProtocolEra === "function"
    ? client.callTool(params, options)
    : client.callTool(params, undefined, options);
}

// A 2026-07-28 request as raw HTTP (no SDK in between: exactly the
// revision's envelope and headers), for tests that send each request where
// they choose (replicas) or give up on each after a fixed time (tasks).
// Returns the JSON-RPC response with the request's id, from a JSON or an SSE
// body.  capabilities: the client's (default { elicitation: {} }).
let modernId = 1;
export async function postModern(url, token, method, params = {}, { capabilities = { elicitation: {} }, structured = true, timeoutMs = 300000 } = {}) {
  const id = modernId++;
  capabilities = withStructured(capabilities, structured);
  const body = {
    jsonrpc: "2.0", id, method,
    params: {
      ...params,
      _meta: {
        "io.modelcontextprotocol/protocolVersion": MODERN_PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": { name: "hutch-tests", version: "1.0.0" },
      },
    },
  };
  const headers = {
    "Content-Type": "application/json", Accept: "application/json, text/event-stream",
    "MCP-Protocol-Version": MODERN_PROTOCOL, "Mcp-Method": method, Authorization: `Bearer ${token}`,
  };
  if (method === "tools/call") headers["Mcp-Name"] = params.name;
  if (method === "resources/read") headers["Mcp-Name"] = params.uri;
  if (method.startsWith("tasks/") && typeof params.taskId === "string") headers["Mcp-Name"] = params.taskId;
  const r = await fetch(url, { method: "POST", headers, body: JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs) });
  const text = await r.text();
  let msgs = [];
  if ((r.headers.get("content-type") || "").includes("text/event-stream")) {
    for (const ev of text.split(/\r?\n\r?\n/)) {
      const data = ev.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (data) msgs.push(JSON.parse(data));
    }
  } else if (text) {
    msgs = [JSON.parse(text)];
  }
  const m = msgs.find((x) => x.id === id);
  if (!m) throw new Error(`${method}: HTTP ${r.status}, no response: ${text.slice(0, 500)}`);
  return m;
}

// Runs execute_code and returns { r: the CallToolResult, s: structuredContent, text, ms }.
// The executor every execution of this test must run on: options.executor,
// else $HUTCH_EXECUTOR, else local.  A result that names another one throws,
// so a suite can never pass on the wrong executor.
// How long a test's client waits for one execute_code answer unless it says
// otherwise: a budget for a machine that is very busy (a gVisor sandbox's
// start took tens of seconds beside a loaded CI run), not an expectation.
// A client that gives up cancels the execution, and whatever it held (a
// workspace) stays held until the sandbox is gone: the next step would
// then fail for the wrong reason.
export const EXECUTE_BUDGET_MS = 300000;

export async function execute(client, args, options = {}) {
  const { executor, ...rest } = options;
  const want = executor || process.env.HUTCH_EXECUTOR || "local";
  const t0 = performance.now();
  const r = await callTool(client, { name: "execute_code", arguments: args }, { timeout: EXECUTE_BUDGET_MS, ...rest });
  const ms = performance.now() - t0;
  const textBlock = (r.content || []).find((c) => c.type === "text");
  const s = r.structuredContent || {};
  if (s.exit_code !== undefined && s.executor !== want) {
    throw new Error(`the execution ran on executor ${JSON.stringify(s.executor)}, not ${want}`);
  }
  return { r, s, text: textBlock ? textBlock.text : "", ms };
}

export const py = (code, extra = {}) => ({ language: "python", code, ...extra });
export const js = (code, extra = {}) => ({ language: "javascript", code, ...extra });

export function describe(x) {
  const s = x.s || {};
  return `exit ${s.exit_code} stdout=${show(s.stdout)} stderr=${show(s.stderr)} result=${show(s.result)} isError=${x.r && x.r.isError}${s.message ? ` message=${show(s.message)}` : ""}`;
}

// --- processes -----------------------------------------------------------------------

export function procTable() {
  const t = new Map();
  for (const d of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, "utf8");
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const cmd = fs.readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0").join(" ").trim();
      // utime + stime, in clock ticks (fields 14 and 15 of stat)
      const cpu = Number(rest[11]) + Number(rest[12]);
      t.set(Number(d), { pid: Number(d), state: rest[0], ppid: Number(rest[1]), cpu, cmd });
    } catch {}
  }
  return t;
}

export function descendants(root, table = procTable()) {
  const kids = new Map();
  for (const p of table.values()) {
    if (!kids.has(p.ppid)) kids.set(p.ppid, []);
    kids.get(p.ppid).push(p);
  }
  const out = [];
  const stack = [root];
  while (stack.length) {
    for (const k of kids.get(stack.pop()) || []) {
      out.push(k);
      stack.push(k.pid);
    }
  }
  return out;
}

// The sandboxes' language runners below a hutch process (zombies excluded).
export function runnersUnder(pid) {
  return descendants(pid).filter((p) => p.state !== "Z" && p.cmd.includes("/run/hutch/runner"));
}

// Runners that have burnt at least `ticks` clock ticks of CPU and are not
// asleep (a program spinning in a loop, not an idle pre-started runner: a
// warm pool's runners did their start-up work and sleep).
export function busyRunnersUnder(pid, ticks = 10) {
  return runnersUnder(pid).filter((p) => p.cpu >= ticks && p.state !== "S");
}

export function pidAlive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

export function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export { spawn, spawnSync, fs, path, os };
