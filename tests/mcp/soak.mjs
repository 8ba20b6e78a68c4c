// soak.mjs — mixed load on two `hutch serve --http` while things die
// around them (the issue "Many tenants, one hutch", "Load and faults,
// measured"): run by tests/mcp/soak.sh and tests/docker/soak.sh (CI, about
// 75 s) and by `make soak` (tests/bench/soak.sh: 20 minutes shared by the
// executors that can run).
//
//   hutch A  long-lived, never killed: what it holds is measured (fds,
//            threads, RSS, its sandboxes) after a warm-up at the start and
//            after the same warm-up at the end;
//   hutch B  killed with SIGKILL now and then, and started again at once
//            (each start sweeps what the killed one left).
// Load: workers for three principals (the policy's tokens) send a mix of
// search_tools, executions calling each upstream (server-everything,
// server-memory, the recorder), JavaScript, a 4 s sleep, a 1 MiB result,
// an exception, a timeout, files out, and 2025 sessions opened, used and
// deleted, to both hutches, one request per connection (so that no idle
// keep-alive connection holds a thread of hutch's when it is counted).
// Faults, one every SOAK_FAULT_EVERY seconds (10), in shuffled rounds so
// that each kind comes as often:
//   upstream  SIGKILL of one of the stdio upstream servers of A or B
//   sandbox   SIGKILL of a sandbox of A or B: a local sandbox's runner, a
//             container (docker kill), a runsc process of the sandbox
//   engine    (docker, with SOAK_ENGINE2=N) SIGKILL of the second
//             engine's daemon (tests/lib/dockerd2.sh instance N, with its
//             containerd and containers: a crash), started again 5 s later;
//             both hutches place sandboxes on the main daemon and that one
//   hutch     SIGKILL of B, and B started again
// Errors during the faults are expected and counted, never asserted on.
// Afterwards (each a TAP line):
//   - A serves an execution calling each upstream again (they restarted);
//   - nothing of any B is left: state directory, cgroup (/sys/fs/cgroup/
//     **/hutch-PID.START…), container or volume (on every engine), runsc
//     process, mount, or any process that was B's when it was killed (its
//     upstreams);
//   - A holds, after the same warm-up with its pools full again, as many
//     fds, threads and sandboxes (cgroups, containers, runsc processes,
//     mounts) as after the warm-up at the start, and its RSS is within 10%
//     of the start's (SOAK_RSS_SLACK: the fraction; not measured under
//     AddressSanitizer, whose quarantine holds freed memory);
//   - A stops cleanly and leaves nothing.
// No timing is asserted: every wait is a generous budget.  TAP; with
// SOAK_REPORT=1 a summary of what happened is printed as diagnostics.
import crypto from "node:crypto";
import http from "node:http";
import {
  descendants, fs, makeFixture, os, path, pidAlive, procTable, requireEnv, sleep, spawn, spawnHttp, tap,
  waitFor,
} from "./lib.mjs";

const hutch = requireEnv();
const E = process.env.HUTCH_EXECUTOR || "local";
const SECONDS = Math.max(20, Number(process.env.SOAK_SECONDS || 75));
const FAULT_EVERY = Math.max(2, Number(process.env.SOAK_FAULT_EVERY || 10));
const WORKERS = Math.max(1, Number(process.env.SOAK_WORKERS || 3)); // per hutch
const ENGINE2 = E === "docker" ? process.env.SOAK_ENGINE2 || "" : "";
const RSS_SLACK = Number(process.env.SOAK_RSS_SLACK || 0.1);
const SRC = process.env.HUTCH_SRCDIR;
const t = tap({ timeout: SECONDS + 1800 });

// --- fixture, policy ---------------------------------------------------------------
const fx = makeFixture();
{
  const cfg = JSON.parse(fs.readFileSync(fx.servers, "utf8"));
  delete cfg.mcpServers.fs;
  fs.writeFileSync(fx.servers, JSON.stringify(cfg));
}
const tok = {};
const WHO = ["alice", "bob", "mallory"];
for (const p of WHO) tok[p] = `${p}-${crypto.randomBytes(12).toString("hex")}`;
const policy = path.join(fx.dir, "soak.lua");
fs.writeFileSync(policy, `return {
  principals = {
    { name = "alice", token = "${tok.alice}" },
    { name = "bob", token = "${tok.bob}" },
    { name = "mallory", token = "${tok.mallory}" },
  },
  tools = { allow = { "everything.*", "memory.*", "recorder.*" } },
}
`);

// The docker executor places sandboxes on the main daemon and, with
// SOAK_ENGINE2, on the second engine too.
let ENDPOINTS = "";
if (ENGINE2) {
  const r = await sh(`. "${SRC}/tests/lib/dockerd2.sh" && dockerd2_env ${ENGINE2} && echo "$DOCKER_HOST,tls=$DOCKER_CERT_PATH"`);
  if (r.rc !== 0) throw new Error(`dockerd2_env ${ENGINE2}: ${r.err}`);
  ENDPOINTS = `main=${process.env.DOCKER_HOST || "unix:///var/run/docker.sock"} second=${r.out}`;
}
// A pool that grew under the load gives its sandboxes back each second
// (not each minute): the settled counts compare with the baseline's.
const ENV = { HUTCH_POOL_SHRINK_MS: "1000", ...(ENDPOINTS ? { HUTCH_DOCKER_ENDPOINTS: ENDPOINTS } : {}) };
const ARGS = ["--policy", policy, "--executor", E, "--timeout", "120000"];

// --- helpers -----------------------------------------------------------------------

// A shell command, without blocking the event loop: { rc, out, err }.
function sh(cmd, ms = 600000) {
  return new Promise((resolve) => {
    const p = spawn("bash", ["-c", cmd], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (err += d));
    const to = setTimeout(() => p.kill("SIGKILL"), ms);
    p.on("close", (rc) => {
      clearTimeout(to);
      resolve({ rc, out: out.trim(), err: err.trim() });
    });
  });
}

const startOf = (pid) => {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return s.slice(s.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return null;
  }
};

// One JSON-RPC request on a connection of its own (closed after it).
let ids = 1;
function rpc(url, who, method, params = {}, { era = "2026", sid = null, timeoutMs = 180000 } = {}) {
  const id = ids++;
  const headers = {
    "Content-Type": "application/json", Accept: "application/json, text/event-stream",
    Authorization: `Bearer ${tok[who]}`,
  };
  let body;
  if (era === "2026") {
    headers["MCP-Protocol-Version"] = "2026-07-28";
    headers["Mcp-Method"] = method;
    if (method === "tools/call") headers["Mcp-Name"] = params.name;
    body = { jsonrpc: "2.0", id, method, params: { ...params, _meta: {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": { experimental: { "hutch/structured-content": {} } },
      "io.modelcontextprotocol/clientInfo": { name: "soak", version: "1" } } } };
  } else {
    if (sid) headers["Mcp-Session-Id"] = sid;
    if (method !== "initialize") headers["MCP-Protocol-Version"] = "2025-11-25";
    body = method.startsWith("notifications/") ? { jsonrpc: "2.0", method, params } : { jsonrpc: "2.0", id, method, params };
  }
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const rq = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: era === "delete" ? "DELETE" : "POST",
      agent: false, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (text += d));
      res.on("end", () => {
        let msgs = [];
        try {
          if ((res.headers["content-type"] || "").includes("text/event-stream")) {
            for (const ev of text.split(/\r?\n\r?\n/)) {
              const data = ev.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
              if (data) msgs.push(JSON.parse(data));
            }
          } else if (text) msgs = [JSON.parse(text)];
        } catch {}
        resolve({ status: res.statusCode, sid: res.headers["mcp-session-id"], m: msgs.find((x) => x.id === id) });
      });
      res.on("error", reject);
    });
    rq.setTimeout(timeoutMs, () => rq.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    rq.on("error", reject);
    if (era !== "delete") rq.end(JSON.stringify(body));
    else rq.end();
  });
}

const execute = async (url, who, args) => {
  const r = await rpc(url, who, "tools/call", { name: "execute_code", arguments: args });
  return r.m?.result;
};
const py = (code, extra = {}) => ({ language: "python", code, ...extra });
const js = (code, extra = {}) => ({ language: "javascript", code, ...extra });

// --- the mix -----------------------------------------------------------------------
const exec = (args, check) => async (url, who) => {
  const r = await execute(url, who, args);
  const s = r?.structuredContent;
  if (s?.executor !== undefined && s.executor !== E) throw new Error(`ran on ${s.executor}, not ${E}`);
  if (!check(r, s)) throw new Error((r?.content || []).map((c) => c.text || "").join(" ").slice(0, 200) || "no result");
};
const okResult = (want) => (r, s) => s?.exit_code === 0 && JSON.stringify(s.result) === JSON.stringify(want);
const OPS = {
  search: async (url, who) => {
    const r = await rpc(url, who, "tools/call", { name: "search_tools", arguments: { query: "echo" } });
    if (r.m?.result?.isError !== false && !r.m?.result?.content) throw new Error(`search_tools: HTTP ${r.status}`);
  },
  echo: exec(py('tools.everything.echo(message="soak") is not None'), okResult(true)),
  memory: exec(py('isinstance(tools.memory.read_graph(), dict)'), okResult(true)),
  recorder: exec(py('tools.recorder.slow(ms=300)["slept"]'), okResult(300)),
  javascript: exec(js('const r = await tools.everything.echo({message: "js"});\nreturn r !== null;'), okResult(true)),
  long: exec(py("import time\ntime.sleep(4)\n4"), okResult(4)),
  big: exec(py('len("x" * (1 << 20)) and "x" * (1 << 20)'), (r, s) => s?.exit_code === 0 && s.result?.length === 1 << 20),
  exception: exec(py('raise ValueError("soak")'), (r, s) => s?.exit_code === 1 && /ValueError: soak/.test(s.stderr || "")),
  timeout: exec(py("import time\ntime.sleep(60)", { timeout_ms: 1500 }), (r, s) => s?.timed_out === true || /timed out|timeout/i.test(JSON.stringify(r?.content || ""))),
  files: exec(py('import os\nos.makedirs("/work/out", exist_ok=True)\nopen("/work/out/soak.txt", "w").write("soak " * 200)\n1'),
    (r, s) => s?.exit_code === 0 && (r.content || []).some((c) => /soak\.txt/.test(JSON.stringify(c)))),
  session2025: async (url, who) => {
    const init = await rpc(url, who, "initialize",
      { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "soak", version: "1" } }, { era: "2025" });
    if (init.status !== 200 || !init.sid) throw new Error(`initialize: HTTP ${init.status}`);
    await rpc(url, who, "notifications/initialized", {}, { era: "2025", sid: init.sid }).catch(() => {});
    const l = await rpc(url, who, "tools/list", {}, { era: "2025", sid: init.sid });
    if (!l.m?.result?.tools?.some((x) => x.name === "execute_code")) throw new Error(`tools/list: HTTP ${l.status}`);
    const d = await rpc(url, who, "", {}, { era: "delete", sid: init.sid });
    if (d.status !== 200 && d.status !== 204) throw new Error(`DELETE: HTTP ${d.status}`);
  },
};
const WEIGHTS = { search: 3, echo: 4, memory: 2, recorder: 2, javascript: 2, long: 2, big: 1, exception: 1, timeout: 1, files: 1, session2025: 2 };
const BAG = Object.entries(WEIGHTS).flatMap(([k, w]) => Array(w).fill(k));
const stats = {}; // op -> { ok, error, why: {} }
const note = (op, err) => {
  const s = (stats[op] ??= { ok: 0, error: 0, why: {} });
  if (!err) return s.ok++;
  s.error++;
  const w = String(err.message || err).replace(/[0-9a-f]{12,}|\d+/g, "N").slice(0, 120);
  if (Object.keys(s.why).length < 8 || s.why[w]) s.why[w] = (s.why[w] || 0) + 1;
};

// The warm-up, the same at the start and at the end: each op once, in order.
async function warmup(url) {
  for (const op of Object.keys(WEIGHTS)) {
    try {
      await OPS[op](url, "alice");
    } catch (e) {
      throw new Error(`warm-up ${op}: ${e.message}`);
    }
  }
}

// --- what a hutch holds ------------------------------------------------------------
const fdCount = (pid) => fs.readdirSync(`/proc/${pid}/fd`).length;
// What each of a process's descriptors is, for a failure's message: a
// socket as its TCP addresses or unix path where /proc/PID/net says.
function fdKinds(pid) {
  const sockets = new Map();
  for (const f of ["tcp", "tcp6", "unix"]) {
    let lines = [];
    try {
      lines = fs.readFileSync(`/proc/${pid}/net/${f}`, "utf8").split("\n").slice(1);
    } catch {}
    for (const l of lines) {
      const c = l.trim().split(/\s+/);
      if (f === "unix" && c.length >= 7) sockets.set(c[6], `unix ${c[7] || "(unnamed)"}`);
      else if (c.length >= 10) sockets.set(c[9], `${f} ${c[1]}>${c[2]} st ${c[3]}`);
    }
  }
  const out = [];
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    let t = "?";
    try {
      t = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {}
    const m = /^socket:\[(\d+)\]$/.exec(t);
    out.push(m && sockets.has(m[1]) ? sockets.get(m[1]) : t.replace(/\[\d+\]$/, ""));
  }
  return out.sort();
}
// What b holds that a does not (a multiset difference).
function extra(a, b) {
  const left = [...a];
  return b.filter((x) => {
    const i = left.indexOf(x);
    if (i < 0) return true;
    left.splice(i, 1);
    return false;
  });
}
const threadCount = (pid) => fs.readdirSync(`/proc/${pid}/task`).length;
const kb = (pid, k) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]);
const asan = (pid) => fs.readFileSync(`/proc/${pid}/maps`, "utf8").includes("libasan");

function httpGet(srv, p) {
  return new Promise((resolve, reject) => {
    const rq = http.get({ host: "127.0.0.1", port: srv.port, path: p, agent: false,
      headers: { Authorization: `Bearer ${tok.alice}` } }, (res) => {
      let s = "";
      res.on("data", (d) => (s += d));
      res.on("end", () => resolve(s));
    });
    rq.setTimeout(30000, () => rq.destroy(new Error("timeout")));
    rq.on("error", reject);
  });
}
// A metric of hutch's, summed over its labels.
async function metric(srv, name) {
  try {
    const r = await httpGet(srv, "/metrics");
    let sum = 0, seen = false;
    for (const m of r.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm"))) {
      sum += Number(m[1]);
      seen = true;
    }
    return seen ? sum : NaN;
  } catch {
    return NaN;
  }
}

// Everything of hutch PID started at START on this host and its engines,
// one "kind what" string each (as tests/lib/executor.sh's hutch_resources).
const STATE_BASES = ["/run/hutch", process.env.XDG_RUNTIME_DIR && `${process.env.XDG_RUNTIME_DIR}/hutch`, `/tmp/hutch-${process.getuid()}`].filter(Boolean);
async function resources(pid, start) {
  const p = `${pid}.${start}`;
  const out = [];
  for (const base of STATE_BASES) {
    let kinds = [];
    try {
      kinds = fs.readdirSync(base);
    } catch {}
    for (const k of kinds) {
      try {
        for (const d of fs.readdirSync(path.join(base, k))) if (d === p || d.startsWith(`${p}.`)) out.push(`state ${base}/${k}/${d}`);
      } catch {}
    }
  }
  const cg = await sh(`find /sys/fs/cgroup -maxdepth 9 -type d \\( -name 'hutch-${p}-*' -o -name 'hutch-${p}.*' \\) 2>/dev/null`);
  for (const l of cg.out.split("\n").filter(Boolean)) out.push(`cgroup ${l}`);
  for (const pr of procTable().values())
    if (pr.state !== "Z" && pr.cmd.includes(`/gvisor/${p}`)) out.push(`runsc ${pr.pid}`);
  for (const l of fs.readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const mp = l.split(" ")[4] || "";
    if (mp.includes(`/hutch/`) && (mp.includes(`/${p}/`) || mp.includes(`/${p}.`) || mp.endsWith(`/${p}`))) out.push(`mount ${mp}`);
  }
  if (E === "docker") {
    const engines = [["main", "docker"], ...(ENGINE2 ? [["second", `. "${SRC}/tests/lib/dockerd2.sh" && dockerd2_docker ${ENGINE2}`]] : [])];
    for (const [name, cli] of engines) {
      const c = await sh(`${cli} ps -a --filter label=hutch.owner --format '{{.ID}} {{.Label "hutch.owner"}}'`, 120000);
      for (const l of c.out.split("\n")) if (l.endsWith(`:${pid}:${start}`)) out.push(`container(${name}) ${l.split(" ")[0]}`);
      const v = await sh(`${cli} volume ls -q --filter label=hutch.owner | while read -r v; do ` +
        `echo "$v $(${cli} volume inspect -f '{{index .Labels "hutch.owner"}}' "$v" 2>/dev/null)"; done`, 120000);
      for (const l of v.out.split("\n")) if (l.endsWith(`:${pid}:${start}`)) out.push(`volume(${name}) ${l.split(" ")[0]}`);
    }
  }
  return out;
}
// What a hutch holds, counted by kind.  Containers and volumes are counted
// over both engines together: a pool that refilled on the main engine while
// the second was down keeps its sandboxes there (they do not move back), so
// only the totals must come back to the start's.
const kinds = (list) => {
  const c = {};
  for (const x of list) {
    const k = x.split(" ")[0].replace(/\((main|second)\)$/, "");
    if (k !== "state") c[k] = (c[k] || 0) + 1;
  }
  return Object.fromEntries(Object.entries(c).sort());
};

// --- the sandboxes a fault may kill ------------------------------------------------
async function sandboxesOf(pids) {
  if (E === "local") {
    const table = procTable();
    return pids.flatMap((pid) => descendants(pid, table)
      .filter((p) => p.state !== "Z" && p.cmd.includes("/run/hutch/runner")).map((p) => ({ kind: "runner", pid: p.pid })));
  }
  if (E === "gvisor") {
    const starts = pids.map((pid) => `/gvisor/${pid}.${startOf(pid)}`);
    return [...procTable().values()].filter((p) => p.state !== "Z" && /runsc/.test(p.cmd) && starts.some((s) => p.cmd.includes(s)))
      .map((p) => ({ kind: "runsc", pid: p.pid }));
  }
  const c = await sh(`docker ps --filter label=hutch.owner --format '{{.ID}} {{.Label "hutch.owner"}}'`, 120000);
  return c.out.split("\n").filter((l) => pids.some((pid) => l.endsWith(`:${pid}:${startOf(pid)}`)))
    .map((l) => ({ kind: "container", id: l.split(" ")[0] }));
}

// The processes below hutch PID: { pid, start, cmd }.
const kidsOf = (pid) => descendants(pid).filter((p) => p.state !== "Z").map((p) => ({ pid: p.pid, start: startOf(p.pid), cmd: p.cmd }));
// Which of them still run (a zombie has ended: its reaping is not hutch's).
// Each read from its own /proc/PID/stat: procTable() leaves out a process
// whose command line cannot be read, and a CI run once reported such a
// process (mid-exit when listed, its cmdline empty) as running, with no
// state at all.  A process that is exiting (no memory left) has ended.
const exiting = new Set(); // seen exiting, for the diagnostics
function stillRunning(kids) {
  const out = [];
  for (const k of kids) {
    let stat;
    try {
      stat = fs.readFileSync(`/proc/${k.pid}/stat`, "utf8");
    } catch {
      continue; // gone
    }
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (rest[19] !== k.start || rest[0] === "Z" || rest[0] === "X") continue;
    // Its memory already gone, it is exiting: no code of it runs again
    // (a sandbox's init exiting waits in the kernel for the rest of its pid
    // namespace, which is listed here on its own when it still runs).
    let status = "";
    try {
      status = fs.readFileSync(`/proc/${k.pid}/status`, "utf8");
    } catch {}
    if (!/^VmRSS:/m.test(status)) {
      exiting.add(`${k.pid} ${rest[0]}`);
      continue;
    }
    let wchan = "?";
    try {
      wchan = fs.readFileSync(`/proc/${k.pid}/wchan`, "utf8");
    } catch {}
    out.push(`${k.pid} ${rest[0]} ppid ${rest[1]} wchan ${wchan} ${stat.slice(0, stat.lastIndexOf(")") + 1)} ${k.cmd.slice(0, 100)}`);
  }
  return out;
}

// --- run ------------------------------------------------------------------------------
const A = await spawnHttp({ hutch, servers: fx.servers, args: ARGS, env: ENV });
const aStart = startOf(A.pid);
let B = await spawnHttp({ hutch, servers: fx.servers, args: ARGS, env: ENV });
const killedB = []; // { pid, start, kids: [{pid, start, cmd}] }
const faults = {};
// Every upstream ready, as /readyz says.
const upUntil = async (srv, budget = 180000) =>
  waitFor(async () => {
    try {
      const r = JSON.parse(await httpGet(srv, "/readyz"));
      return Array.isArray(r.upstreams) && r.upstreams.length === 3 && r.upstreams.every((x) => x.state === "ready");
    } catch {
      return false;
    }
  }, budget, 500);

// Settled: the pools full again and back to their size (as many
// sandboxes alive as `want`), the fds and threads back to at most `fds`
// and `threads`.
async function settle(srv, want, budget = 240000) {
  let last = {};
  const ok = await waitFor(async () => {
    last = { sandboxes: await metric(srv, "hutch_sandboxes_alive"), idle: await metric(srv, "hutch_pool_idle"),
      size: await metric(srv, "hutch_pool_size"), target: await metric(srv, "hutch_pool_target"),
      fds: fdCount(srv.pid), threads: threadCount(srv.pid) };
    return last.idle === last.size && last.target === last.size && (want === undefined || (last.sandboxes === want.sandboxes &&
      last.fds <= want.fds && last.threads <= want.threads));
  }, budget, 1000);
  return { ok, ...last };
}

let base = null;
await t.step(`hutch A and B serve on the ${E} executor; A warmed up`, async () => {
  if (!(await upUntil(A)) || !(await upUntil(B))) throw new Error(`upstreams not ready:\n${A.logs().slice(-1500)}`);
  await warmup(A.url);
  await warmup(B.url);
  const s = await settle(A);
  if (!s.ok) throw new Error(`A's pools never filled: ${JSON.stringify(s)}`);
  await sleep(2000);
  base = { fds: fdCount(A.pid), fdKinds: fdKinds(A.pid), threads: threadCount(A.pid), rss: kb(A.pid, "VmRSS"),
    anon: kb(A.pid, "RssAnon"), file: kb(A.pid, "RssFile"), sandboxes: s.sandboxes,
    held: kinds(await resources(A.pid, aStart)) };
  t.diag(`A (pid ${A.pid}) after the warm-up: ${base.fds} fds, ${base.threads} threads, RSS ${(base.rss / 1024).toFixed(1)} MiB, ` +
    `${base.sandboxes} sandboxes alive, holds ${JSON.stringify(base.held)}`);
});

// Load.
let stop = false;
const worker = (target) => async () => {
  while (!stop) {
    const op = BAG[Math.floor(Math.random() * BAG.length)];
    const who = WHO[Math.floor(Math.random() * WHO.length)];
    try {
      await OPS[op](target(), who);
      note(op);
    } catch (e) {
      note(op, e);
      await sleep(200);
    }
  }
};
const workers = [];
for (let i = 0; i < WORKERS; i++) workers.push(worker(() => A.url)(), worker(() => B.url)());

// Faults.
const KINDS = ["upstream", "sandbox", "hutch", ...(ENGINE2 ? ["engine"] : [])];
let bag = [];
const UPSTREAM = /server-everything|server-memory|recorder\.mjs/;
async function fault(kind) {
  const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];
  const rec = (faults[kind] ??= { done: 0, missed: 0 });
  if (kind === "upstream") {
    const table = procTable();
    const ups = [A.pid, B.pid].flatMap((pid) => descendants(pid, table)).filter((p) => p.state !== "Z" && UPSTREAM.test(p.cmd));
    const u = pick(ups);
    if (!u) return rec.missed++;
    process.kill(u.pid, "SIGKILL");
  } else if (kind === "sandbox") {
    const s = pick(await sandboxesOf([A.pid, B.pid]));
    if (!s) return rec.missed++;
    if (s.id) await sh(`docker kill ${s.id}`, 120000);
    else {
      try {
        process.kill(s.pid, "SIGKILL");
      } catch {
        return rec.missed++;
      }
    }
  } else if (kind === "engine") {
    const k = await sh(`. "${SRC}/tests/lib/dockerd2.sh" && dockerd2_pause ${ENGINE2} KILL`);
    if (k.rc !== 0) throw new Error(`dockerd2_pause ${ENGINE2} KILL: ${k.err}`);
    await sleep(5000);
    const s = await sh(`. "${SRC}/tests/lib/dockerd2.sh" && dockerd2_start ${ENGINE2}`);
    if (s.rc !== 0) throw new Error(`dockerd2_start ${ENGINE2}: ${s.err}`);
  } else {
    const start = startOf(B.pid);
    const kids = kidsOf(B.pid);
    B.proc.kill("SIGKILL");
    await waitFor(() => !pidAlive(B.pid), 30000, 20);
    killedB.push({ pid: B.pid, start, kids });
    B = await spawnHttp({ hutch, servers: fx.servers, args: ARGS, env: ENV });
  }
  rec.done++;
}

const t0 = Date.now();
let faultError = null;
while (Date.now() - t0 < SECONDS * 1000 && !faultError) {
  await sleep(FAULT_EVERY * 1000);
  if (!bag.length) bag = [...KINDS].sort(() => Math.random() - 0.5);
  try {
    await fault(bag.pop());
  } catch (e) {
    faultError = e;
  }
}
stop = true;
await Promise.all(workers);
t.ok(!faultError, "every fault was made", faultError && faultError.stack);
t.ok(KINDS.every((k) => faults[k]?.done > 0), `each kind of fault happened at least once: ${JSON.stringify(faults)}`);
for (const k of ["echo", "memory", "recorder"])
  t.ok(stats[k]?.ok > 0, `executions calling ${k} succeeded during the soak (${stats[k]?.ok ?? 0} of ${(stats[k]?.ok ?? 0) + (stats[k]?.error ?? 0)})`);

// After.
if (ENGINE2) {
  const s = await sh(`. "${SRC}/tests/lib/dockerd2.sh" && dockerd2_start ${ENGINE2}`);
  t.ok(s.rc === 0, "the second engine answers again", s.err);
}
await t.step("A serves executions calling each upstream again (they were restarted)", async () => {
  const want = '[tools.everything.echo(message="x") is not None, isinstance(tools.memory.read_graph(), dict), tools.recorder.slow(ms=1)["slept"]]';
  let last;
  const ok = await waitFor(async () => {
    last = await execute(A.url, "bob", py(want)).catch((e) => ({ error: e.message }));
    return JSON.stringify(last?.structuredContent?.result) === "[true,true,1]";
  }, 240000, 2000);
  if (!ok) throw new Error(JSON.stringify(last).slice(0, 600));
}, 300);
await t.step("B, killed and started again once more with every engine up, serves; then stops cleanly", async () => {
  await fault("hutch");
  if (!(await upUntil(B))) throw new Error(`B's upstreams: ${B.logs().slice(-1500)}`);
  const r = await execute(B.url, "bob", py("6 * 7"));
  if (r?.structuredContent?.result !== 42) throw new Error(JSON.stringify(r).slice(0, 400));
  const start = startOf(B.pid);
  const kids = kidsOf(B.pid);
  const ex = await B.stop();
  if (!ex || ex.code !== 0) throw new Error(`B exited ${JSON.stringify(ex)}:\n${B.logs().slice(-1500)}`);
  killedB.push({ pid: B.pid, start, kids, clean: true });
}, 600);

await t.step(`nothing is left of the ${killedB.length - 1} killed B's (nor of the last, stopped)`, async () => {
  let left = [];
  // A hutch sweeps what the killed ones left when it starts: by now, all
  // of it (a docker container being removed may take a moment).
  await waitFor(async () => {
    left = [];
    for (const b of killedB) for (const x of await resources(b.pid, b.start)) left.push(`B ${b.pid}: ${x}`);
    return left.length === 0;
  }, 120000, 2000);
  if (left.length) throw new Error(left.slice(0, 20).join("\n"));
}, 300);
{
  let alive = [];
  await waitFor(() => (alive = killedB.flatMap((b) => stillRunning(b.kids))).length === 0, 60000, 500);
  if (exiting.size) t.diag(`seen exiting (memory gone) after their B was killed: ${[...exiting].join(", ")}`);
  t.is(alive, [], "no process of a killed B outlives it (its upstreams, its sandboxes)");
}

let end = null;
if (!base) t.skip("A holds what it held at the start", "no figures from the start");
else await t.step("A, after the same warm-up, holds what it held at the start (fds, threads, sandboxes)", async () => {
  await warmup(A.url);
  // Settled: pools full, fds and threads back, the same sandboxes held (a
  // destroyed sandbox's cgroup or container may take a moment to go).
  let s, held;
  const ok = await waitFor(async () => {
    s = await settle(A, base, 0);
    held = kinds(await resources(A.pid, aStart));
    return s.ok && JSON.stringify(held) === JSON.stringify(base.held);
  }, 240000, 1000);
  end = { fds: fdCount(A.pid), threads: threadCount(A.pid), rss: kb(A.pid, "VmRSS"), anon: kb(A.pid, "RssAnon"),
    file: kb(A.pid, "RssFile"), sandboxes: s.sandboxes, held };
  t.diag(`A's RSS: anonymous ${(end.anon / 1024).toFixed(1)} MiB (${(base.anon / 1024).toFixed(1)} at the start), ` +
    `file-backed ${(end.file / 1024).toFixed(1)} MiB (${(base.file / 1024).toFixed(1)})`);
  t.diag(`A at the end: ${end.fds} fds (${base.fds} at the start), ${end.threads} threads (${base.threads}), ` +
    `RSS ${(end.rss / 1024).toFixed(1)} MiB (${(base.rss / 1024).toFixed(1)}), ${end.sandboxes} sandboxes (${base.sandboxes}), ` +
    `holds ${JSON.stringify(end.held)} (${JSON.stringify(base.held)})`);
  if (!ok) {
    const now = fdKinds(A.pid);
    throw new Error(`not back to the start's figures within the budget: ${JSON.stringify(s)}, holds ${JSON.stringify(held)}; ` +
      `descriptors more than at the start: ${JSON.stringify(extra(base.fdKinds, now))}, fewer: ${JSON.stringify(extra(now, base.fdKinds))}`);
  }
}, 600);
if (end) {
  if (asan(A.pid)) t.skip("A's RSS is back within 10% of the start's", "AddressSanitizer's quarantine holds freed memory");
  // On docker, with the second engine's daemon killed, A's anonymous
  // memory grew by 2.5-3 MiB in 75 s and 3.9 MiB in 10 minutes with the
  // in-use bytes unchanged (mallinfo2): 15 malloc arenas each kept its free
  // and part-used pages.  hutch now makes at most 2 per CPU (caps.h
  // HUTCH_MALLOC_ARENAS_PER_CPU): +0.8 MiB in 5 minutes.  (An earlier note
  // here said MALLOC_ARENA_MAX=2 changed nothing: hutchEnv() never passed
  // it on.)  make soak (SOAK_FULL=1) asserts it; the short soak in make
  // check prints the figures above.
  else if (E === "docker" && ENGINE2 && !process.env.SOAK_FULL)
    t.skip("A's RSS is back within 10% of the start's", "docker with daemon kills: known growth, asserted by make soak (issue 21)");
  else
    t.ok(end.rss <= base.rss * (1 + RSS_SLACK),
      `A's RSS is back within ${(RSS_SLACK * 100).toFixed(0)}% of the start's (${(end.rss / 1024).toFixed(1)} MiB, start ${(base.rss / 1024).toFixed(1)} MiB)`);
}
const aRes = await A.stop();
t.ok(aRes && aRes.code === 0, "A stops cleanly", JSON.stringify(aRes) + A.logs().slice(-1500));
{
  let left = [];
  await waitFor(async () => (left = await resources(A.pid, aStart)).length === 0, 120000, 2000);
  t.is(left, [], "nothing of A is left once it has stopped");
}

const total = Object.values(stats).reduce((n, s) => n + s.ok + s.error, 0);
t.diag(`soak on ${E}: ${SECONDS} s, ${total} requests, faults ${JSON.stringify(faults)}, ${killedB.length - 1} hutch kills`);
for (const [op, s] of Object.entries(stats).sort())
  t.diag(`  ${op.padEnd(12)} ok ${String(s.ok).padStart(5)}  error ${String(s.error).padStart(4)}${s.error ? "  " + JSON.stringify(s.why) : ""}`);
t.done();
