// tenants.mjs — three principals behind one `hutch serve --http`, one of
// them hostile (`make bench-tenants`; the issue "Many tenants, one hutch",
// "Load and faults, measured"):
//   alice and bob  ordinary work, one request at a time each: a
//                  search_tools, then an execute_code whose program calls an
//                  upstream tool (server-everything's echo) and returns a
//                  moderate result (about 8 KB);
//   mallory        hostile, from a process of its own (its client's work
//                  must not stall the measuring one's event loop): opens
//                  40 2025 sessions (past its share of 32) and keeps
//                  renewing them, keeps 100 connections from 10 loopback
//                  addresses trickling a request head that never ends
//                  (reconnecting as hutch closes them), and keeps 24
//                  executions in flight against its cap (4 running and 16
//                  waiting by default: the rest are refused at once and
//                  sent again), each running 3 s, every other one
//                  returning a 4 MiB result.
// Per executor (local; docker when it is usable; gvisor when it is usable,
// as root: `hutch plugins` says), one hutch, three phases in one run:
//   quiet          mallory idle;
//   hostile        mallory's programs spin the CPU for their 3 s;
//   hostile, idle CPU   the same, but its programs sleep their 3 s: what
//                  hutch itself lets one principal take from others, apart
//                  from what its programs take of the machine's CPUs;
//   CPU hogs only  no mallory, but as many busy loops on the host, outside
//                  hutch, as mallory may run programs at once (the policy's
//                  default share: a quarter of HUTCH_MAX_EXECUTIONS): the
//                  machine's part of the hostile phase's figures.
// Prints the ordinary principals' p50/p99 per request kind, how many of
// their executions started cold (no warm sandbox left in the pool), and
// their error count per phase, side by side, the ratio p99(phase)/p99(quiet), and the
// goal (no error for alice and bob, p99 within 2x of quiet) as PASS or
// MISS (a MISS does not fail the target; an error in the quiet phase, or a
// hutch that dies, does).
// Knobs (environment): ROUNDS (rounds per principal and phase, 40),
// EXECUTORS (local,docker,gvisor), FLOOD (mallory's executions in flight,
// 24), SLOW (slow connections, 100), HOSTILE_SECONDS (each program's 3),
// HOSTILE_PARTS (what mallory does, sessions,slow,flood,big: some of them
// alone, to see which costs the others what), PHASES (after the quiet one:
// spin,sleep,hogs, some of them), HUTCH_SANDBOXES_CPU_WEIGHT (12, for
// docker and gvisor; empty for their default), HUTCH_CGROUP_PARENT (one
// of the bench's own per executor by default, removed at the end),
// HUTCH_POOL_REFILL_MAX (passed to hutch: how many sandboxes its pools
// start at once; unset, the CPUs).
import crypto from "node:crypto";
import http from "node:http";
import net from "node:net";
import {
  NODE, fs, makeFixture, os, path, percentile, postModern, sleep, spawn, spawnHttp, spawnSync,
  waitFor,
} from "../mcp/lib.mjs";

const V25 = "2025-11-25";
const text = (r) => (r?.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

// --- mallory, in a process of its own -----------------------------------------------
// argv: --hostile URL TOKEN MODE (spin|sleep)
if (process.argv[2] === "--hostile") {
  const [url, token, mode] = process.argv.slice(3);
  const port = Number(new URL(url).port);
  const FLOOD = Number(process.env.FLOOD || 24);
  const SLOW = Number(process.env.SLOW || 100);
  const S = Number(process.env.HOSTILE_SECONDS || 3);
  const PARTS = (process.env.HOSTILE_PARTS || "sessions,slow,flood,big").split(",");
  let stopping = false;
  const counts = { sessions: 0, slow_closed: 0, ran: 0, refused: 0, big: 0, failed: 0 };
  const sockets = new Set();
  const whys = [];
  process.on("SIGTERM", () => {
    stopping = true;
    for (const s of sockets) s.destroy();
    process.stdout.write(JSON.stringify({ ...counts, ...(whys.length ? { failures: whys } : {}) }) + "\n");
    process.exit(0);
  });
  // Sessions: 40 initializes, then one more every 2 s (its own oldest idle
  // session makes room at its share).
  const initialize = () =>
    fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", Authorization: `Bearer ${token}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize",
        params: { protocolVersion: V25, capabilities: {}, clientInfo: { name: "mallory", version: "1" } } }),
      signal: AbortSignal.timeout(30000),
    }).then((r) => {
      r.body?.cancel?.();
      if (r.status === 200) counts.sessions++;
      else if (whys.length < 3) whys.push(`initialize: HTTP ${r.status}`);
    }).catch((e) => { if (whys.length < 3) whys.push(`initialize: ${e.message}`); });
  if (PARTS.includes("sessions")) (async () => {
    for (let i = 0; i < 40 && !stopping; i++) await initialize();
    while (!stopping) {
      await sleep(2000);
      await initialize();
    }
  })();
  // Slow request heads from 127.0.0.2 … 127.0.0.11, reopened 300 ms after
  // hutch closes one.
  const slow = (local) => {
    if (stopping) return;
    const c = net.connect({ host: "127.0.0.1", port, localAddress: local });
    sockets.add(c);
    let timer = null, n = 0;
    c.on("connect", () => {
      c.write("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n");
      timer = setInterval(() => c.write(`X-Slow-${n++}: x\r\n`), 1000);
    });
    c.on("error", () => {});
    c.on("data", () => {});
    c.on("close", () => {
      clearInterval(timer);
      sockets.delete(c);
      counts.slow_closed++;
      if (!stopping) setTimeout(() => slow(local), 300);
    });
  };
  if (PARTS.includes("slow")) for (let i = 0; i < SLOW; i++) slow(`127.0.0.${2 + (i % 10)}`);
  // The flood, from 127.0.0.12: a client of its own (whose bursts of
  // connections count against its own address), a connection per request.
  const post = (url, token, params) => new Promise((resolve, reject) => {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { ...params, _meta: {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": { experimental: { "hutch/structured-content": {} } } } } });
    const rq = http.request({ host: "127.0.0.1", port, path: "/mcp", method: "POST", agent: false, localAddress: "127.0.0.12",
      headers: { "Content-Type": "application/json", Accept: "application/json", "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call", "Mcp-Name": params.name, Authorization: `Bearer ${token}` } }, (res) => {
      const chunks = [];
      res.on("data", (d) => chunks.push(d));
      res.on("end", () => {
        try {
          resolve(JSON.parse(Buffer.concat(chunks).toString()));
        } catch (e) {
          reject(new Error(`HTTP ${res.statusCode}: not JSON`));
        }
      });
      res.on("error", reject);
    });
    rq.setTimeout(600000, () => rq.destroy(new Error("no answer in 10 minutes")));
    rq.on("error", reject);
    rq.end(body);
  });
  const work = mode === "spin"
    ? `import time\nt = time.time() + ${S}\nn = 0\nwhile time.time() < t:\n    n += 1\n`
    : `import time\ntime.sleep(${S})\nn = 0\n`;
  let k = 0;
  const one = async () => {
    while (!stopping) {
      const big = k++ % 2 === 0 && PARTS.includes("big");
      const code = work + (big ? `"x" * (4 << 20)` : "n");
      try {
        const r = (await post(url, token, { name: "execute_code", arguments: { language: "python", code, timeout_ms: 60000 } })).result;
        if (/hutch is busy/.test(text(r))) {
          counts.refused++;
          await sleep(100);
        } else if (r?.structuredContent?.exit_code === 0) {
          counts.ran++;
          if (big) counts.big++;
        } else {
          counts.failed++;
          if (whys.length < 3) whys.push(text(r).slice(0, 200) || JSON.stringify(m).slice(0, 200));
          await sleep(100);
        }
      } catch (e) {
        counts.failed++;
        if (whys.length < 3) whys.push(String(e.message).slice(0, 200));
        await sleep(100);
      }
    }
  };
  if (PARTS.includes("flood")) for (let i = 0; i < FLOOD; i++) one();
  // Ready once the sessions are open and the flood has met the cap.
  await waitFor(() => (counts.sessions >= 32 || !PARTS.includes("sessions")) &&
    (counts.refused > 0 || counts.ran > 0 || !PARTS.includes("flood")), 120000, 100);
  process.stdout.write("ready\n");
  await new Promise(() => {});
}

// --- the bench ------------------------------------------------------------------------
const hutch = process.env.HUTCH;
if (!hutch) throw new Error("run through make bench-tenants (HUTCH is not set)");
const ROUNDS = Math.max(5, Number(process.env.ROUNDS || 40));
const WANT = (process.env.EXECUTORS || "local,docker,gvisor").split(",").map((s) => s.trim()).filter(Boolean);
const SELF = new URL(import.meta.url).pathname;
// The phases after the quiet one: spin (hostile), sleep (hostile, idle
// CPU), hogs (CPU hogs only).
const PHASES = (process.env.PHASES || "spin,sleep,hogs").split(",").map((s) => s.trim());
// A host that serves many principals and runs nothing else CPU-bound, as
// doc/operating.md advises: docker's and gVisor's sandboxes weigh 12
// together, below hutch's own threads.  HUTCH_SANDBOXES_CPU_WEIGHT=
// (empty) for the default (the daemon's parent for docker; gVisor's
// parent's weight left as it is).
// The weight stays on the parent after hutch ends, so the bench's hutch
// gets a parent of its own (unless the environment names one), removed at
// the end: the host's /hutch-gvisor keeps its weight.
const SANDBOXES_CPU_WEIGHT = process.env.HUTCH_SANDBOXES_CPU_WEIGHT ?? "12";
const WEIGHED = new Set(["docker", "gvisor"]);
const parentOf = (E) => process.env.HUTCH_CGROUP_PARENT || `/hutch-${E}-bench-${process.pid}`;
function removeParent(E) {
  if (process.env.HUTCH_CGROUP_PARENT) return;
  const CGROUP_PARENT = parentOf(E);
  const roots = ["/sys/fs/cgroup", ...fs.readdirSync("/sys/fs/cgroup").map((d) => `/sys/fs/cgroup/${d}`)];
  for (const r of roots) {
    try {
      fs.rmdirSync(r + CGROUP_PARENT);
    } catch {} // not there, or not a cgroup hierarchy
  }
}

const plugins = spawnSync(hutch, ["plugins"], { encoding: "utf8", env: process.env }).stdout || "";
const skipped = {};
const executors = [];
for (const e of ["local", "docker", "gvisor"]) {
  const line = plugins.split("\n").find((l) => l.trim().split(/\s+/)[0] === e);
  if (!WANT.includes(e)) skipped[e] = "not in $EXECUTORS";
  else if (!line || !/\susable\s/.test(line)) skipped[e] = `not usable here: ${(line || "no plugin").trim().slice(0, 120)}`;
  else executors.push(e);
}

const fx = makeFixture();
{
  // One upstream: server-everything (ordinary work calls its echo).
  const cfg = JSON.parse(fs.readFileSync(fx.servers, "utf8"));
  fs.writeFileSync(fx.servers, JSON.stringify({ mcpServers: { everything: cfg.mcpServers.everything } }));
}
const tok = {};
for (const p of ["alice", "bob", "mallory"]) tok[p] = `${p}-${crypto.randomBytes(12).toString("hex")}`;
const policy = path.join(fx.dir, "tenants.lua");
fs.writeFileSync(policy, `return {
  principals = {
    { name = "alice", token = "${tok.alice}" },
    { name = "bob", token = "${tok.bob}" },
    { name = "mallory", token = "${tok.mallory}" },
  },
  tools = { allow = { "everything.*" } },
}
`);

const ORDINARY = `r = tools.everything.echo(message="hello " * 40)
[{"i": i, "name": "item-%04d" % i, "echo": r if i == 0 else None, "sq": i * i} for i in range(150)]`;

// One round of a principal: search_tools, then execute_code.  Each
// request's time, or its error.
async function round(url, who, E, out) {
  const t0 = performance.now();
  try {
    const m = await postModern(url, tok[who], "tools/call", { name: "search_tools", arguments: { query: "echo" } },
      { capabilities: {}, timeoutMs: 120000 });
    if (m.error || m.result?.isError || !/echo/.test(JSON.stringify(m.result))) throw new Error(JSON.stringify(m).slice(0, 300));
    out.search.push(performance.now() - t0);
  } catch (e) {
    out.errors.push(`${who} search_tools: ${e.message}`.slice(0, 400));
  }
  const t1 = performance.now();
  try {
    const m = await postModern(url, tok[who], "tools/call",
      { name: "execute_code", arguments: { language: "python", code: ORDINARY } }, { capabilities: {}, timeoutMs: 120000 });
    const s = m.result?.structuredContent;
    if (m.error || m.result?.isError || s?.exit_code !== 0 || s.executor !== E || !Array.isArray(s.result) || s.result.length !== 150)
      throw new Error(JSON.stringify(m).slice(0, 400));
    out.execute.push(performance.now() - t1);
    if (!s.warm) out.cold++;
  } catch (e) {
    out.errors.push(`${who} execute_code: ${e.message}`.slice(0, 400));
  }
}

async function phase(url, E, rounds) {
  const out = { search: [], execute: [], errors: [], cold: 0 };
  await Promise.all(["alice", "bob"].map(async (who) => {
    for (let i = 0; i < rounds; i++) await round(url, who, E, out);
  }));
  out.search.sort((a, b) => a - b);
  out.execute.sort((a, b) => a - b);
  return out;
}

// A metric of hutch's, summed over its labels.
async function metric(srv, name) {
  try {
    const r = await fetch(`http://127.0.0.1:${srv.port}/metrics`, { headers: { Authorization: `Bearer ${tok.alice}` } });
    let sum = NaN;
    for (const m of (await r.text()).matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm")))
      sum = (Number.isNaN(sum) ? 0 : sum) + Number(m[1]);
    return sum;
  } catch {
    return NaN;
  }
}

function startHostile(url, mode) {
  const p = spawn(NODE, [SELF, "--hostile", url, tok.mallory, mode], { stdio: ["ignore", "pipe", "inherit"], env: process.env });
  let out = "";
  p.stdout.on("data", (d) => (out += d));
  return {
    ready: () => waitFor(() => out.includes("ready\n"), 120000, 100),
    async stop() {
      p.kill("SIGTERM");
      if (!(await waitFor(() => p.exitCode !== null || p.signalCode !== null, 10000, 50))) p.kill("SIGKILL");
      const line = out.split("\n").find((l) => l.startsWith("{"));
      return line ? JSON.parse(line) : {};
    },
  };
}

// Busy loops on the host, as many as mallory's programs at once.
function startHogs(n) {
  const ps = [];
  for (let i = 0; i < n; i++)
    ps.push(spawn("/usr/bin/python3", ["-c", "while True: pass"], { stdio: "ignore" }));
  return {
    ready: async () => true,
    async stop() {
      for (const p of ps) p.kill("SIGKILL");
      await waitFor(() => ps.every((p) => p.exitCode !== null || p.signalCode !== null), 10000, 50);
      return { busy_loops: n };
    },
  };
}
// mallory's share of executions at once: a quarter of the total, which is
// 8 per CPU, at most one per 512 MB, at least 2 ("Executions at once").
const HOGS = (() => {
  const total = Number(process.env.HUTCH_MAX_EXECUTIONS) ||
    Math.max(2, Math.min(8 * os.availableParallelism(), Math.floor(os.totalmem() / (512 << 20))));
  return Math.max(1, Math.floor(total / 4));
})();

const f = (v) => (Number.isFinite(v) ? v.toFixed(0) : "-").padStart(6);
const results = [];
let broken = false;
console.log(`bench-tenants: alice and bob (ordinary) beside mallory (hostile), one hutch serve --http per executor; ` +
  `${ROUNDS} rounds of search_tools + execute_code per ordinary principal and phase; ${os.cpus().length} CPUs; ` +
  `HUTCH_SANDBOXES_CPU_WEIGHT=${SANDBOXES_CPU_WEIGHT || "(unset)"} (docker, gvisor); ` +
  `HUTCH_POOL_REFILL_MAX=${process.env.HUTCH_POOL_REFILL_MAX || "(unset: the CPUs)"}`);
for (const [e, why] of Object.entries(skipped)) console.log(`  ${e} skipped: ${why}`);

for (const E of executors) {
  const refill = process.env.HUTCH_POOL_REFILL_MAX ? { HUTCH_POOL_REFILL_MAX: process.env.HUTCH_POOL_REFILL_MAX } : {};
  const srv = await spawnHttp({ hutch, servers: fx.servers, args: ["--policy", policy, "--executor", E],
    env: !WEIGHED.has(E) ? refill : { ...refill, HUTCH_CGROUP_PARENT: parentOf(E),
      ...(SANDBOXES_CPU_WEIGHT ? { HUTCH_SANDBOXES_CPU_WEIGHT: SANDBOXES_CPU_WEIGHT } : {}) } });
  try {
    // Upstreams up, pools warm, a few rounds each that are not counted.
    const up = await waitFor(async () => {
      const m = await postModern(srv.url, tok.alice, "tools/call", { name: "search_tools", arguments: { query: "", limit: 1 } }, { capabilities: {} });
      return !(m.result?.structuredContent?.servers || []).some((x) => x.state === "starting");
    }, 120000, 200);
    if (!up) throw new Error("server-everything never came up");
    // Between phases: mallory's executions end (its queue given up with
    // its connections), the pools are full again.
    const settle = async () => {
      await waitFor(async () => {
        const size = await metric(srv, "hutch_pool_target"); // grown with demand, or not
        return (await metric(srv, "hutch_pool_idle")) === size && (await metric(srv, "hutch_sandboxes_alive")) === size;
      }, 180000, 250);
      await sleep(1000);
    };
    await phase(srv.url, E, 5);
    await settle();
    const phases = [];
    phases.push(["quiet", await phase(srv.url, E, ROUNDS), null]);
    for (const [name, mode] of [["hostile", "spin"], ["hostile, idle CPU", "sleep"], ["CPU hogs only", "hogs"]]) {
      if (!PHASES.includes(mode)) continue;
      const h = mode === "hogs" ? startHogs(HOGS) : startHostile(srv.url, mode);
      if (!(await h.ready())) {
        // Not left running beside the next executor's hutch (or after
        // the bench): its counts say what it did get done.
        const counts = await h.stop().catch(() => null);
        throw new Error(`mallory (${mode}) never got going: ${JSON.stringify(counts)}`);
      }
      const out = await phase(srv.url, E, ROUNDS);
      const counts = await h.stop();
      phases.push([name, out, counts]);
      await settle();
    }
    if (srv.proc.exitCode !== null || srv.proc.signalCode !== null) throw new Error(`hutch exited: ${srv.logs().slice(-2000)}`);
    results.push([E, phases]);
  } catch (e) {
    broken = true;
    console.log(`  ${E}: ${e.message}`);
  } finally {
    await srv.stop();
    if (WEIGHED.has(E)) removeParent(E);
  }
}

console.log("\nordinary principals (alice + bob), ms; ratio = p99(phase) / p99(quiet)");
console.log("executor  phase               search_tools p50   p99 | execute_code p50   p99  cold | errors | p99 ratio search  execute");
const goals = [];
for (const [E, phases] of results) {
  const q = phases[0][1];
  for (const [name, o] of phases) {
    const rs = percentile(o.search, 99) / percentile(q.search, 99);
    const re = percentile(o.execute, 99) / percentile(q.execute, 99);
    console.log(`${E.padEnd(9)} ${name.padEnd(19)} ${f(percentile(o.search, 50))}${f(percentile(o.search, 99))}       ` +
      `| ${f(percentile(o.execute, 50))}${f(percentile(o.execute, 99))} ${String(o.cold).padStart(5)} | ${String(o.errors.length).padStart(6)} | ` +
      `${rs.toFixed(2).padStart(16)}x ${re.toFixed(2).padStart(7)}x`);
    if (name !== "quiet" && name !== "CPU hogs only") goals.push([E, name, o.errors.length === 0 && rs <= 2 && re <= 2, o.errors.length, Math.max(rs, re)]);
  }
  for (const [name, o, counts] of phases) {
    if (counts) console.log(`          ${counts.busy_loops ? "host" : "mallory"} (${name}): ${JSON.stringify(counts)}`);
    for (const err of o.errors.slice(0, 5)) console.log(`          ${name} error: ${err}`);
    if (name === "quiet" && o.errors.length) broken = true;
  }
}
console.log("\ngoal: no error for alice and bob, p99 within 2x of quiet");
for (const [E, name, pass, errs, worst] of goals)
  console.log(`  ${E.padEnd(7)} ${name.padEnd(19)} ${pass ? "PASS" : "MISS"}  (${errs} errors, worst p99 ratio ${worst.toFixed(2)}x)`);
process.exit(broken ? 1 : 0);
